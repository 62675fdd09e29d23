//! Personas, their memory with its budget, per-model prompts and tool wording, on both engines.

use llooma_store::{
    ConversationPatch, InstanceSettingsChange, NewProvider, PersonaPatch, StoreError,
};

use crate::support::{TestDb, account};

#[tokio::test]
async fn personas_belong_to_their_account_and_keep_a_bounded_memory() {
    let db = TestDb::new().await;
    let store = db.store().await;
    let alice = account(&store, "alice").await;
    let bob = account(&store, "bob").await;
    let tutor = store.create_persona(&alice, "Tutor", "You teach.", true).await.unwrap();
    assert!(matches!(
        store.create_persona(&alice, "Tutor", "again", false).await,
        Err(StoreError::NameTaken)
    ));
    // Bob may use the same name, and cannot see or change Alice's.
    store.create_persona(&bob, "Tutor", "", false).await.unwrap();
    assert_eq!(store.persona(&bob, &tutor.id).await.unwrap(), None);
    assert!(matches!(
        store.update_persona(&bob, &tutor.id, PersonaPatch::default()).await,
        Err(StoreError::NotFound)
    ));

    let first = store.add_memory_note(&tutor.id, "likes tea", 2).await.unwrap().unwrap();
    store.add_memory_note(&tutor.id, "lives in Bern", 2).await.unwrap().unwrap();
    assert_eq!(store.add_memory_note(&tutor.id, "a third", 2).await.unwrap(), None, "full");
    let notes = store.memory_notes(&tutor.id).await.unwrap();
    let contents: Vec<&str> = notes.iter().map(|n| n.content.as_str()).collect();
    assert_eq!(contents, ["likes tea", "lives in Bern"]);
    assert!(!store.forget_memory_note("another-persona", &first.id).await.unwrap());
    assert!(store.forget_memory_note(&tutor.id, &first.id).await.unwrap());
    assert!(store.add_memory_note(&tutor.id, "a third", 2).await.unwrap().is_some());

    // A conversation with the persona goes back to none when the persona is deleted, and the
    // memory goes with the persona.
    let conversation = store.create_conversation(&alice, "c", None, None).await.unwrap();
    let patch =
        ConversationPatch { persona_id: Some(Some(tutor.id.clone())), ..Default::default() };
    store.update_conversation(&alice, &conversation.id, patch).await.unwrap();
    let stored = store.conversation(&alice, &conversation.id).await.unwrap().unwrap();
    assert_eq!(stored.persona_id.as_deref(), Some(tutor.id.as_str()));
    store.delete_persona(&alice, &tutor.id).await.unwrap();
    let stored = store.conversation(&alice, &conversation.id).await.unwrap().unwrap();
    assert_eq!(stored.persona_id, None);
    assert!(store.memory_notes(&tutor.id).await.unwrap().is_empty());
    assert!(matches!(
        store.add_memory_note(&tutor.id, "after the end", 5).await,
        Err(StoreError::NotFound)
    ));
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn notes_come_back_in_the_order_written_and_racing_writers_keep_the_budget() {
    let db = TestDb::new().await;
    let store = db.store().await;
    let alice = account(&store, "alice").await;
    let persona = store.create_persona(&alice, "Scribe", "", true).await.unwrap();

    // Written back to back, most of them within the same millisecond.
    let written: Vec<String> = (0..30).map(|n| format!("note {n}")).collect();
    for content in &written {
        store.add_memory_note(&persona.id, content, 100).await.unwrap().unwrap();
    }
    let read: Vec<String> =
        store.memory_notes(&persona.id).await.unwrap().into_iter().map(|n| n.content).collect();
    assert_eq!(read, written);

    // Forty turns write at once to a persona with room for five more notes.
    let racers = (0..40).map(|n| {
        let store = store.clone();
        let persona_id = persona.id.clone();
        tokio::spawn(async move {
            store.add_memory_note(&persona_id, &format!("race {n}"), 35).await.unwrap()
        })
    });
    let mut saved = 0;
    for racer in racers {
        if racer.await.unwrap().is_some() {
            saved += 1;
        }
    }
    assert_eq!(saved, 5, "exactly the room left is used");
    assert_eq!(store.memory_notes(&persona.id).await.unwrap().len(), 35);
}

#[tokio::test]
async fn prompts_per_model_per_instance_and_tool_wording_are_kept() {
    let db = TestDb::new().await;
    let store = db.store().await;
    let alice = account(&store, "alice").await;
    let provider = store
        .create_provider(NewProvider {
            id: "p1".into(),
            name: "local".into(),
            base_url: "http://127.0.0.1:1/v1".into(),
            api_key_ciphertext: None,
            local_network: true,
        })
        .await
        .unwrap();
    store.set_model_prompt(&provider.id, "small", Some("Be terse.")).await.unwrap();
    store.set_model_prompt(&provider.id, "small", Some("Be very terse.")).await.unwrap();
    store.set_model_prompt(&provider.id, "big", Some("Think.")).await.unwrap();
    assert_eq!(
        store.model_prompt(&provider.id, "small").await.unwrap().as_deref(),
        Some("Be very terse.")
    );
    store.set_model_prompt(&provider.id, "big", None).await.unwrap();
    assert_eq!(
        store.model_prompts(&provider.id).await.unwrap(),
        [("small".to_owned(), "Be very terse.".to_owned())]
    );

    let change = InstanceSettingsChange {
        web_search_url: Some(Some("http://127.0.0.1:8888/search".into())),
        system_prompt: Some(Some("House rules.".into())),
        ..Default::default()
    };
    let settings = store.change_instance_settings(change).await.unwrap();
    assert_eq!(settings.web_search_url.as_deref(), Some("http://127.0.0.1:8888/search"));
    assert_eq!(settings.system_prompt.as_deref(), Some("House rules."));
    let off = InstanceSettingsChange { web_search_url: Some(None), ..Default::default() };
    let settings = store.change_instance_settings(off).await.unwrap();
    assert_eq!(settings.web_search_url, None);
    assert_eq!(settings.system_prompt.as_deref(), Some("House rules."), "untouched");

    store.set_tool_wording(&alice, "read_page", Some("Open a link.")).await.unwrap();
    store.set_tool_wording(&alice, "read_page", Some("Open one link.")).await.unwrap();
    assert_eq!(
        store.tool_wordings(&alice).await.unwrap(),
        [("read_page".to_owned(), "Open one link.".to_owned())]
    );
    store.set_tool_wording(&alice, "read_page", None).await.unwrap();
    assert!(store.tool_wordings(&alice).await.unwrap().is_empty());
}
