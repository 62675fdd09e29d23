//! Deleting an account: everything of its goes, nothing of anyone else's, and the instance
//! always keeps an administrator.

use std::sync::Arc;

use llooma_approval_broker::SystemClock;
use llooma_store::{Deleted, FileKind, NewFile, UsageLimits, UsageRow};
use serde_json::json;

use crate::support::{TestDb, account, broker, new_call, new_server};

async fn register(store: &llooma_store::Store, username: &str) -> String {
    store.update_instance_settings(Some(true), None).await.unwrap();
    match store
        .register_account(llooma_store::NewAccount {
            username: username.into(),
            display_name: username.into(),
            password_hash: "$argon2id$v=19$m=19456,t=2,p=1$c2FsdA$aGFzaA".into(),
        })
        .await
        .unwrap()
    {
        llooma_store::RegisterOutcome::Created(account) => account.id,
        other => panic!("{other:?}"),
    }
}

/// Gives the account one of nearly everything an account can have.
async fn fill(store: &llooma_store::Store, account_id: &str) -> String {
    let persona = store.create_persona(account_id, "Tutor", "You teach.", true).await.unwrap();
    store.add_memory_note(&persona.id, "likes tea", 5).await.unwrap();
    let c = store.create_conversation(account_id, "c", None, None).await.unwrap();
    store
        .update_conversation(
            account_id,
            &c.id,
            llooma_store::ConversationPatch {
                persona_id: Some(Some(persona.id.clone())),
                ..Default::default()
            },
        )
        .await
        .unwrap();
    let turn = store.start_turn(&c.id, "r").await.unwrap();
    store.add_message(&c.id, "user", "hello", Some(&turn)).await.unwrap();
    let file = NewFile {
        id: uuid::Uuid::new_v4().to_string(),
        account_id: account_id.to_owned(),
        conversation_id: c.id.clone(),
        name: "notes.md".into(),
        kind: FileKind::Document,
        content_type: "text/plain; charset=utf-8".into(),
        bytes: b"notes".to_vec(),
        thumbnail: None,
        text: Some("notes".into()),
        width: None,
        height: None,
        text_cut: false,
    };
    store.add_file(file, i64::MAX).await.unwrap();
    let server = new_server(account_id, "hub", "https://hub.example/mcp");
    store.create_mcp_server(server, |_| "hub".into()).await.unwrap();
    let broker = broker(store, Arc::new(SystemClock), "r").await;
    broker.request(new_call(account_id, json!({}))).await.unwrap();
    store
        .add_usage(&UsageRow {
            account_id: account_id.into(),
            day: "2026-12-01".into(),
            provider_id: "p".into(),
            model: "m".into(),
            requests: 1,
            ..Default::default()
        })
        .await
        .unwrap();
    let limits = UsageLimits { tokens_per_day: Some(5), ..Default::default() };
    store.set_account_limits(account_id, Some(limits)).await.unwrap();
    c.id
}

#[tokio::test]
async fn a_deleted_account_takes_everything_of_its_own_and_nothing_else() {
    let db = TestDb::new().await;
    let store = db.store().await;
    let root = account(&store, "root").await;
    let alice = register(&store, "alice").await;
    let alices = fill(&store, &alice).await;
    let roots = fill(&store, &root).await;

    assert_eq!(store.delete_account(&alice).await.unwrap(), Deleted::Yes);
    assert!(store.account(&alice).await.unwrap().is_none());
    assert!(store.conversation(&alice, &alices).await.unwrap().is_none());
    assert!(store.messages(&alices).await.unwrap().is_empty());
    assert_eq!(store.usage(Some(&alice), "2026-01-01", "2026-12-31").await.unwrap(), []);
    assert!(store.list_mcp_servers(&alice).await.unwrap().is_empty());
    assert_eq!(store.account_limits(&alice).await.unwrap(), None);
    assert_eq!(store.delete_account(&alice).await.unwrap(), Deleted::NotFound);
    // Root's are all there.
    assert_eq!(store.messages(&roots).await.unwrap().len(), 1);
    assert_eq!(store.list_mcp_servers(&root).await.unwrap().len(), 1);
    assert_eq!(store.usage(Some(&root), "2026-01-01", "2026-12-31").await.unwrap().len(), 1);

    // The last administrator stays.
    assert_eq!(store.delete_account(&root).await.unwrap(), Deleted::LastAdministrator);
    assert!(store.account(&root).await.unwrap().is_some());
    let second = account(&store, "second").await;
    assert_eq!(store.delete_account(&root).await.unwrap(), Deleted::Yes);
    assert_eq!(store.delete_account(&second).await.unwrap(), Deleted::LastAdministrator);
}
