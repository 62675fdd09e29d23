//! Files attached to messages, on both engines: whose they are, quotas, sending, and what goes
//! with a conversation, a replaced message and an account.

use llooma_store::{AddFileError, FileKind, NewFile, StoreError};
use llooma_types::TurnStarted;

use crate::support::{TestDb, account};

fn image(account_id: &str, conversation_id: &str, size: usize) -> NewFile {
    NewFile {
        id: uuid::Uuid::new_v4().to_string(),
        account_id: account_id.to_owned(),
        conversation_id: conversation_id.to_owned(),
        name: "photo.jpg".to_owned(),
        kind: FileKind::Image,
        content_type: "image/jpeg".to_owned(),
        bytes: vec![7; size],
        thumbnail: Some(vec![1; 10]),
        text: None,
        width: Some(640),
        height: Some(480),
        text_cut: false,
    }
}

fn document(account_id: &str, conversation_id: &str, text: &str) -> NewFile {
    NewFile {
        name: "notes.md".to_owned(),
        kind: FileKind::Document,
        content_type: "text/plain; charset=utf-8".to_owned(),
        text: Some(text.to_owned()),
        thumbnail: None,
        width: None,
        height: None,
        bytes: text.as_bytes().to_vec(),
        ..image(account_id, conversation_id, 0)
    }
}

#[tokio::test]
async fn a_file_is_its_owner_s_only_and_its_bytes_come_back_whole() {
    let db = TestDb::new().await;
    let store = db.store().await;
    let alice = account(&store, "alice").await;
    let bob = account(&store, "bob").await;
    let c = store.create_conversation(&alice, "photos", None, None).await.unwrap();
    let stored = store.add_file(image(&alice, &c.id, 1000), 1 << 20).await.unwrap();
    assert_eq!(
        (stored.kind, stored.size_bytes, stored.turn_id.clone()),
        (FileKind::Image, 1000, None)
    );

    let (file, bytes) = store.file_with_bytes(&alice, &stored.id, false).await.unwrap().unwrap();
    assert_eq!((file.name.as_str(), bytes.len()), ("photo.jpg", 1000));
    let (_, thumbnail) = store.file_with_bytes(&alice, &stored.id, true).await.unwrap().unwrap();
    assert_eq!(thumbnail, vec![1; 10]);
    // Another account sees nothing of it.
    assert!(store.file(&bob, &stored.id).await.unwrap().is_none());
    assert!(store.file_with_bytes(&bob, &stored.id, false).await.unwrap().is_none());
    assert!(!store.delete_unsent_file(&bob, &stored.id).await.unwrap());
    assert_eq!(store.file_usage(&alice).await.unwrap(), (1, 1000));
    assert_eq!(store.file_usage(&bob).await.unwrap(), (0, 0));
}

#[tokio::test]
async fn the_quota_holds_for_uploads_at_the_same_moment() {
    let db = TestDb::new().await;
    let store = db.store().await;
    let alice = account(&store, "alice").await;
    let c = store.create_conversation(&alice, "photos", None, None).await.unwrap();
    // Ten uploads of 300 bytes at once against 1,000: three fit, the others are refused.
    let uploads = (0..10).map(|_| {
        let store = store.clone();
        let new = image(&alice, &c.id, 300);
        async move { store.add_file(new, 1000).await }
    });
    let results = futures::future::join_all(uploads).await;
    let stored = results.iter().filter(|r| r.is_ok()).count();
    assert_eq!(stored, 3, "{results:?}");
    assert!(results.iter().all(|r| match r {
        Ok(_) => true,
        Err(AddFileError::Quota { quota, .. }) => *quota == 1000,
        Err(other) => panic!("{other}"),
    }));
    assert_eq!(store.file_usage(&alice).await.unwrap(), (3, 900));
}

#[tokio::test]
async fn sending_attaches_files_once_and_removal_follows_the_conversation() {
    let db = TestDb::new().await;
    let store = db.store().await;
    let alice = account(&store, "alice").await;
    let c = store.create_conversation(&alice, "talk", None, None).await.unwrap();
    let photo = store.add_file(image(&alice, &c.id, 100), 1 << 20).await.unwrap();
    let notes = store.add_file(document(&alice, &c.id, "# Notes"), 1 << 20).await.unwrap();
    let ids = vec![notes.id.clone(), photo.id.clone()];

    // What a turn sends: in the order chosen, an image's bytes, a document's text.
    let to_send = store.files_to_send(&alice, &c.id, &ids).await.unwrap();
    assert_eq!(to_send[0].text, "# Notes");
    assert!(to_send[0].bytes.is_empty());
    assert_eq!(to_send[1].bytes.len(), 100);
    let elsewhere = store.create_conversation(&alice, "other", None, None).await.unwrap();
    assert!(matches!(
        store.files_to_send(&alice, &elsewhere.id, &ids).await,
        Err(StoreError::NotFound)
    ));

    let opened =
        store.open_turn(&c.id, "replica-1", "look", TurnStarted::new(String::new())).await.unwrap();
    store.attach_files(&alice, &c.id, &opened.turn_id, &ids).await.unwrap();
    // Sent: not deletable as unsent, not attachable again.
    assert!(!store.delete_unsent_file(&alice, &photo.id).await.unwrap());
    assert!(store.attach_files(&alice, &c.id, &opened.turn_id, &ids).await.is_err());
    let sent = store.sent_files(&c.id).await.unwrap();
    assert_eq!(sent.len(), 2);
    assert!(sent.iter().all(|s| s.file.turn_id.as_deref() == Some(opened.turn_id.as_str())));

    // An unsent one can be removed; one left unsent for a day is purged.
    let unsent = store.add_file(image(&alice, &c.id, 10), 1 << 20).await.unwrap();
    assert!(store.delete_unsent_file(&alice, &unsent.id).await.unwrap());
    let forgotten = store.add_file(image(&alice, &c.id, 10), 1 << 20).await.unwrap();
    let later = llooma_store::now_ms() + llooma_store::UNSENT_FILES_KEPT_MS + 1000;
    assert_eq!(
        store.purge_unsent_files(later - llooma_store::UNSENT_FILES_KEPT_MS).await.unwrap(),
        1
    );
    assert!(store.file(&alice, &forgotten.id).await.unwrap().is_none());

    // Deleting the conversation deletes its files, bytes and all.
    store.delete_conversation(&alice, &c.id).await.unwrap();
    assert!(store.file(&alice, &photo.id).await.unwrap().is_none());
    assert_eq!(store.file_usage(&alice).await.unwrap(), (0, 0));
}

#[tokio::test]
async fn a_replaced_message_keeps_its_files_and_the_turns_after_it_lose_theirs() {
    let db = TestDb::new().await;
    let store = db.store().await;
    let alice = account(&store, "alice").await;
    let c = store.create_conversation(&alice, "talk", None, None).await.unwrap();
    let mut turns = Vec::new();
    let mut files = Vec::new();
    for i in 0..3 {
        let file = store.add_file(image(&alice, &c.id, 10 + i), 1 << 20).await.unwrap();
        let opened = store
            .open_turn(&c.id, "replica-1", &format!("m{i}"), TurnStarted::new(String::new()))
            .await
            .unwrap();
        store
            .attach_files(&alice, &c.id, &opened.turn_id, std::slice::from_ref(&file.id))
            .await
            .unwrap();
        store
            .close_turn(&c.id, &opened.turn_id, &[], "ok", llooma_types::EndState::Done, None)
            .await
            .unwrap();
        turns.push(opened.turn_id);
        files.push(file.id);
    }
    // The second message is edited: it and the third go; the second's file stays for the edit.
    store.remove_messages_from_turn(&c.id, &turns[1]).await.unwrap();
    assert!(store.file(&alice, &files[0]).await.unwrap().is_some());
    assert!(store.file(&alice, &files[1]).await.unwrap().is_some());
    assert!(store.file(&alice, &files[2]).await.unwrap().is_none(), "the third turn's file stays");
    let replacing = store.start_turn(&c.id, "replica-1").await.unwrap();
    store.move_turn_files(&c.id, &turns[1], &replacing).await.unwrap();
    let moved = store.file(&alice, &files[1]).await.unwrap().unwrap();
    assert_eq!(moved.turn_id.as_deref(), Some(replacing.as_str()));
}
