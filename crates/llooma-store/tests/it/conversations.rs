//! Conversations: paged lists, and the start and end of a turn, on both engines.

use llooma_types::{EndState, TurnEvent, TurnStarted};

use llooma_store::Engine;

use crate::support::{self, TestDb, account};

#[tokio::test]
async fn conversations_come_in_pages_newest_first_without_repeats_or_gaps() {
    let db = TestDb::new().await;
    let store = db.store().await;
    let alice = account(&store, "alice").await;
    let bob = account(&store, "bob").await;
    let mut made = Vec::new();
    for i in 0..7 {
        made.push(store.create_conversation(&alice, &format!("c{i}"), None, None).await.unwrap());
    }
    store.create_conversation(&bob, "bob's", None, None).await.unwrap();
    // Activity (a millisecond later at least) moves a conversation to the front.
    tokio::time::sleep(std::time::Duration::from_millis(5)).await;
    store.add_message(&made[2].id, "user", "hello", None).await.unwrap();

    let mut seen = Vec::new();
    let mut before: Option<(i64, String)> = None;
    loop {
        let cursor = before.as_ref().map(|(ms, id)| (*ms, id.as_str()));
        let page = store.list_conversations(&alice, cursor, 3).await.unwrap();
        assert!(page.len() <= 3);
        let Some(last) = page.last() else { break };
        before = Some((last.updated_at_ms, last.id.clone()));
        seen.extend(page.iter().map(|c| c.title.clone()));
    }
    assert_eq!(seen.len(), 7, "{seen:?}");
    assert_eq!(seen[0], "c2", "the active one first: {seen:?}");
    let mut unique = seen.clone();
    unique.sort();
    unique.dedup();
    assert_eq!(unique.len(), 7, "no conversation twice: {seen:?}");
    assert!(!seen.contains(&"bob's".to_owned()));
}

/// A fast model answers within the millisecond of the question, and a script makes many
/// conversations in one: what was written later still comes later (the history the model is
/// sent, the messages a reload shows), and the list still shows the newest first.
#[tokio::test]
async fn what_is_written_within_one_millisecond_keeps_the_order_it_was_written_in() {
    let db = TestDb::new().await;
    let store = db.store().await;
    let alice = account(&store, "alice").await;
    let made: Vec<String> = {
        let mut made = Vec::new();
        for i in 0..60 {
            let c = store.create_conversation(&alice, &format!("c{i:02}"), None, None).await;
            made.push(c.unwrap().title);
        }
        made
    };
    let listed = store.list_conversations(&alice, None, 100).await.unwrap();
    let listed: Vec<String> = listed.into_iter().map(|c| c.title).collect();
    assert_eq!(listed, made.iter().rev().cloned().collect::<Vec<_>>());

    let c = store.create_conversation(&alice, "talk", None, None).await.unwrap();
    let started = TurnStarted::new(String::new());
    let mut written = Vec::new();
    for i in 0..40 {
        let asked = format!("question {i}");
        let answer = format!("answer {i}");
        let opened = store.open_turn(&c.id, "replica-1", &asked, started.clone()).await.unwrap();
        store.close_turn(&c.id, &opened.turn_id, &[], &answer, EndState::Done, None).await.unwrap();
        store.add_message(&c.id, "user", &format!("note {i}"), None).await.unwrap();
        written.extend([asked, answer, format!("note {i}")]);
    }
    let stored: Vec<String> =
        store.messages(&c.id).await.unwrap().into_iter().map(|m| m.content).collect();
    assert_eq!(stored, written);
    let context = store.turn_context(&alice, &c.id, None).await.unwrap().unwrap();
    let history: Vec<&str> =
        context.history.as_deref().unwrap().iter().map(|m| m.content.as_str()).collect();
    assert_eq!(history, written);
}

#[tokio::test]
async fn ending_a_turn_and_logging_its_end_is_one_write() {
    let db = TestDb::new().await;
    let store = db.store().await;
    let alice = account(&store, "alice").await;
    let c = store.create_conversation(&alice, "c", None, None).await.unwrap();
    let turn = store.start_turn(&c.id, "replica-1").await.unwrap();
    store.append_event(&c.id, &turn, &TurnEvent::text("hi").encode()).await.unwrap();
    let (seq, end) = store.end_turn(&c.id, &turn, EndState::Done, None).await.unwrap();
    assert_eq!((end.kind, end.data_json.as_str()), ("end", r#"{"state":"done"}"#));
    assert_eq!(seq, 2);
    assert_eq!(store.running_turn(&c.id).await.unwrap(), None, "no longer running");
    // The next turn starts at once, and its events come after the end.
    let next = store.start_turn(&c.id, "replica-1").await.unwrap();
    let start = TurnEvent::Start(TurnStarted::new(next.clone())).encode();
    let start = store.append_event(&c.id, &next, &start).await.unwrap();
    assert!(start > seq);
    // However it ends, the `end` ends it, and the one after it may start.
    let (_, stopped) = store.end_turn(&c.id, &next, EndState::Stopped, None).await.unwrap();
    assert_eq!(stopped.data_json, r#"{"state":"stopped"}"#);
    assert_eq!(store.running_turn(&c.id).await.unwrap(), None);
    let failing = store.start_turn(&c.id, "replica-1").await.unwrap();
    assert_eq!(store.running_turn(&c.id).await.unwrap().as_deref(), Some(failing.as_str()));
    store.end_turn(&c.id, &failing, EndState::Failed, Some("the model hung up")).await.unwrap();
    assert_eq!(store.running_turn(&c.id).await.unwrap(), None);
    store.start_turn(&c.id, "replica-1").await.unwrap();
}

#[tokio::test]
async fn a_turn_opens_and_closes_in_one_request_each() {
    let db = TestDb::new().await;
    let store = db.store().await;
    let alice = account(&store, "alice").await;
    let c = store.create_conversation(&alice, "c", None, None).await.unwrap();
    let started = TurnStarted { model: Some("small".into()), ..TurnStarted::new(String::new()) };

    // Opening writes the turn, the person's message and `start`, numbered after what was there.
    let opened =
        store.open_turn(&c.id, "replica-1", "Hello \"you\"", started.clone()).await.unwrap();
    assert_eq!(store.running_turn(&c.id).await.unwrap().as_deref(), Some(opened.turn_id.as_str()));
    assert_eq!(opened.start_seq, 1);
    assert_eq!(opened.start.kind, "start");
    let logged = store.events_after(&c.id, 0, 10).await.unwrap();
    assert_eq!(logged.len(), 1);
    assert_eq!((logged[0].seq, logged[0].data_json.as_str()), (1, opened.start.data_json.as_str()));
    assert!(logged[0].data_json.contains(&opened.turn_id), "{}", logged[0].data_json);
    let messages = store.messages(&c.id).await.unwrap();
    assert_eq!(messages.len(), 1);
    assert_eq!(
        (messages[0].role.as_str(), messages[0].content.as_str()),
        ("user", "Hello \"you\"")
    );
    assert_eq!(messages[0].turn_id.as_deref(), Some(opened.turn_id.as_str()));

    // A second tab sending meanwhile is refused, and leaves nothing behind.
    let refused = store.open_turn(&c.id, "replica-1", "Me too", started.clone()).await;
    assert!(matches!(refused, Err(llooma_store::StoreError::TurnRunning)), "{refused:?}");
    assert_eq!(store.messages(&c.id).await.unwrap().len(), 1);
    assert_eq!(store.events_after(&c.id, 0, 10).await.unwrap().len(), 1);

    // Closing stores the reply and logs `end`, which ends the turn.
    let text = TurnEvent::text("Hi").encode();
    assert_eq!(store.append_event(&c.id, &opened.turn_id, &text).await.unwrap(), 2);
    let closed =
        store.close_turn(&c.id, &opened.turn_id, &[], "Hi", EndState::Done, None).await.unwrap();
    assert_eq!((closed.before_seqs, closed.end_seq), (vec![], 3));
    assert_eq!(closed.end.data_json, r#"{"state":"done"}"#);
    assert_eq!(store.running_turn(&c.id).await.unwrap(), None);
    let messages = store.messages(&c.id).await.unwrap();
    assert_eq!(messages.len(), 2);
    assert_eq!((messages[1].role.as_str(), messages[1].content.as_str()), ("assistant", "Hi"));
    assert_eq!(messages[1].turn_id.as_deref(), Some(opened.turn_id.as_str()));

    // A turn stopped before any text keeps no reply; a failed one ends too.
    let second = store.open_turn(&c.id, "replica-1", "Again", started.clone()).await.unwrap();
    assert_eq!(second.start_seq, 4);
    let closed =
        store.close_turn(&c.id, &second.turn_id, &[], "", EndState::Stopped, None).await.unwrap();
    assert_eq!(closed.end_seq, 5);
    assert_eq!(store.messages(&c.id).await.unwrap().len(), 3, "no empty reply stored");
    // The turn's last events, not logged yet, are logged just before `end`, in order, with it.
    let third = store.open_turn(&c.id, "replica-1", "Once more", started).await.unwrap();
    let held =
        [TurnEvent::step(llooma_types::Step::default()).encode(), TurnEvent::text("Half").encode()];
    let failed = store
        .close_turn(&c.id, &third.turn_id, &held, "Half", EndState::Failed, Some("cut off"))
        .await
        .unwrap();
    assert_eq!((failed.before_seqs, failed.end_seq), (vec![7, 8], 9));
    assert_eq!(failed.end.data_json, r#"{"state":"failed"}"#);
    let logged = store.events_after(&c.id, 6, 10).await.unwrap();
    assert_eq!(
        logged.iter().map(|e| (e.seq, e.kind.as_str())).collect::<Vec<_>>(),
        [(7, "step"), (8, "text"), (9, "end")]
    );
    assert_eq!(store.running_turn(&c.id).await.unwrap(), None);
    assert_eq!(store.messages(&c.id).await.unwrap().len(), 5);
}

#[tokio::test]
async fn two_events_logged_together_are_numbered_in_order_after_the_rest() {
    let db = TestDb::new().await;
    let store = db.store().await;
    let alice = account(&store, "alice").await;
    let c = store.create_conversation(&alice, "c", None, None).await.unwrap();
    let other = store.create_conversation(&alice, "other", None, None).await.unwrap();
    let started = TurnStarted::new(String::new());
    let opened = store.open_turn(&c.id, "replica-1", "Hi", started.clone()).await.unwrap();
    store.open_turn(&other.id, "replica-1", "Hi", started).await.unwrap();
    let first = TurnEvent::text("one").encode();
    let second = TurnEvent::text("two").encode();
    let pair = store.append_event_pair(&c.id, &opened.turn_id, &first, &second).await.unwrap();
    assert_eq!(pair, (2, 3));
    let again = store.append_event_pair(&c.id, &opened.turn_id, &second, &first).await.unwrap();
    assert_eq!(again, (4, 5));
    let logged = store.events_after(&c.id, 1, 10).await.unwrap();
    let texts: Vec<_> = logged.iter().map(|e| (e.seq, e.data_json.as_str())).collect();
    assert_eq!(
        texts,
        [
            (2, r#"{"delta":"one"}"#),
            (3, r#"{"delta":"two"}"#),
            (4, r#"{"delta":"two"}"#),
            (5, r#"{"delta":"one"}"#)
        ]
    );
    assert!(logged.iter().all(|e| e.turn_id == opened.turn_id && e.kind == "text"));
    // Another conversation's numbers are its own.
    assert_eq!(store.events_after(&other.id, 0, 10).await.unwrap().len(), 1);
}

#[tokio::test]
async fn the_sessions_still_standing_are_told_in_one_read() {
    let db = TestDb::new().await;
    let store = db.store().await;
    let alice = account(&store, "alice").await;
    let now = llooma_store::now_ms();
    // (token hash, last seen, absolute end)
    let sessions = [
        ("fresh", now, now + 60_000),
        ("idle", now - 20_000, now + 60_000),
        ("over", now, now - 1),
        ("signed-out", now, now + 60_000),
    ];
    for (hash, seen, ends) in sessions {
        store
            .create_session(llooma_store::NewSession {
                token_hash: hash.into(),
                account_id: alice.clone(),
                csrf_token: "c".into(),
                now_ms: seen,
                expires_at_ms: ends,
                client_addr: None,
                user_agent: None,
            })
            .await
            .unwrap();
    }
    store.delete_session("signed-out").await.unwrap();
    let asked: Vec<String> =
        ["fresh", "idle", "over", "signed-out", "never"].map(String::from).into();
    let standing = store.sessions_standing(&asked, now, 10_000).await.unwrap();
    assert_eq!(standing, ["fresh".to_owned()].into());
}

#[tokio::test]
async fn a_turn_s_context_is_read_in_one_query_with_every_default() {
    use llooma_store::{ConversationPatch, NewProvider, Preferences, ToolSettings};

    let db = TestDb::new().await;
    let store = db.store().await;
    let alice = account(&store, "alice").await;
    let bob = account(&store, "bob").await;

    // A bare conversation: the defaults, no persona, no provider.
    let bare = store.create_conversation(&alice, "bare", None, None).await.unwrap();
    let context = store.turn_context(&alice, &bare.id, None).await.unwrap().unwrap();
    assert_eq!(context.conversation, bare);
    assert_eq!(context.tool_settings, ToolSettings::default());
    assert_eq!(context.instance, store.instance_settings().await.unwrap());
    assert_eq!((context.persona, context.model_prompt, context.provider), (None, None, None));
    assert!(!context.titles_from_model);
    assert!(context.tool_wordings.is_empty());
    assert_eq!(context.history, Some(Vec::new()));
    // Another account's conversation is not found.
    assert!(store.turn_context(&bob, &bare.id, None).await.unwrap().is_none());

    // Everything set.
    store
        .create_provider(NewProvider {
            id: "p1".into(),
            name: "local".into(),
            base_url: "http://127.0.0.1:11434/v1".into(),
            api_key_ciphertext: Some("v1.k.sealed".into()),
            local_network: true,
        })
        .await
        .unwrap();
    store.set_provider_models("p1", &["small".to_owned()]).await.unwrap();
    store.set_model_prompt("p1", "small", Some("Be small.")).await.unwrap();
    let tools = ToolSettings { tool_budget: 42, mcp_everywhere: true, announce_mode: true };
    store.set_tool_settings(&alice, &tools).await.unwrap();
    store.set_preferences(&alice, Preferences { titles_from_model: true }).await.unwrap();
    store.set_tool_wording(&alice, "web_search", Some("Search it, \"quoted\".")).await.unwrap();
    store.set_tool_wording(&alice, "current_date", Some("The date.")).await.unwrap();
    let persona = store.create_persona(&alice, "Tutor", "Teach.", true).await.unwrap();
    let full = store
        .create_conversation(&alice, "full", Some("p1".into()), Some("small".into()))
        .await
        .unwrap();
    let patch =
        ConversationPatch { persona_id: Some(Some(persona.id.clone())), ..Default::default() };
    store.update_conversation(&alice, &full.id, patch).await.unwrap();

    let context = store.turn_context(&alice, &full.id, None).await.unwrap().unwrap();
    assert_eq!(context.conversation, store.conversation(&alice, &full.id).await.unwrap().unwrap());
    assert_eq!(context.tool_settings, tools);
    assert_eq!(context.persona, Some(persona));
    assert_eq!(context.model_prompt.as_deref(), Some("Be small."));
    assert!(context.titles_from_model);
    assert_eq!(context.provider, store.provider("p1").await.unwrap());
    assert!(context.provider.unwrap().local_network);
    assert_eq!(context.tool_wordings, store.tool_wordings(&alice).await.unwrap());
    assert_eq!(context.tool_wordings.len(), 2);

    // The messages so far, oldest first, as `messages` reads them: text that JSON must escape
    // comes back as written, and a message without a turn keeps none.
    let turn = store.start_turn(&full.id, "replica").await.unwrap();
    let asked = "Line one\nsays \"hi\" \\ then 🦊 and \u{7f}";
    store.add_message(&full.id, "user", asked, Some(&turn)).await.unwrap();
    store.add_message(&full.id, "assistant", "An answer.", Some(&turn)).await.unwrap();
    store.add_message(&full.id, "user", "Without a turn.", None).await.unwrap();
    let context = store.turn_context(&alice, &full.id, None).await.unwrap().unwrap();
    let stored = store.messages(&full.id).await.unwrap();
    let history = context.history.unwrap();
    let read: Vec<_> =
        history.iter().map(|m| (m.role, m.content.as_str(), m.turn_id.as_deref())).collect();
    let expected: Vec<_> = stored
        .iter()
        .map(|m| (m.role.as_str(), m.content.as_str(), m.turn_id.as_deref()))
        .collect();
    assert_eq!(read, expected);
    assert_eq!(read[0], ("user", asked, Some(turn.as_str())));
    assert_eq!(read[2], ("user", "Without a turn.", None));
    // Another conversation's messages are not in it.
    assert!(
        store
            .turn_context(&alice, &bare.id, None)
            .await
            .unwrap()
            .unwrap()
            .history
            .unwrap()
            .is_empty()
    );
}

/// A turn holds its conversation's messages from the turn before and has them read again only
/// when they changed: every change to them, whoever makes it (a turn, an edit, an operator's
/// SQL), moves the conversation's history version, and nothing else does.
#[tokio::test]
async fn a_conversation_s_messages_are_read_again_exactly_when_they_changed() {
    use llooma_store::ConversationPatch;
    use sea_orm::ConnectionTrait;

    let db = TestDb::new().await;
    let store = db.store().await;
    let alice = account(&store, "alice").await;
    let c = store.create_conversation(&alice, "c", None, None).await.unwrap();
    let other = store.create_conversation(&alice, "other", None, None).await.unwrap();
    let read =
        async |held: Option<i64>| store.turn_context(&alice, &c.id, held).await.unwrap().unwrap();
    let texts = |history: Option<Vec<llooma_store::HistoryMessage>>| -> Vec<String> {
        history.expect("the messages were read").into_iter().map(|m| m.content).collect()
    };

    let first = read(None).await;
    assert_eq!(first.history, Some(Vec::new()));
    let v0 = first.history_version;
    assert_eq!(read(Some(v0)).await.history, None, "held at this version: not read");

    // A turn: the person's message and the reply, one step each.
    let opened =
        store.open_turn(&c.id, "r", "hello", TurnStarted::new(String::new())).await.unwrap();
    store.close_turn(&c.id, &opened.turn_id, &[], "hi there", EndState::Done, None).await.unwrap();
    let after = read(Some(v0)).await;
    assert_eq!(after.history_version, v0 + 2);
    assert_eq!(texts(after.history), ["hello", "hi there"]);
    let v1 = after.history_version;
    // A reply that stayed empty stores nothing: one step.
    let empty =
        store.open_turn(&c.id, "r", "again", TurnStarted::new(String::new())).await.unwrap();
    store.close_turn(&c.id, &empty.turn_id, &[], "", EndState::Stopped, None).await.unwrap();
    let v2 = read(Some(v1)).await.history_version;
    assert_eq!(v2, v1 + 1);

    // Another conversation's messages, a new title: not a change of these messages.
    store.add_message(&other.id, "user", "elsewhere", None).await.unwrap();
    let patch = ConversationPatch { title: Some("renamed".into()), ..Default::default() };
    store.update_conversation(&alice, &c.id, patch).await.unwrap();
    assert_eq!(read(Some(v2)).await.history, None);

    // An edit removes the turn's messages from its own on.
    store.remove_messages_from_turn(&c.id, &empty.turn_id).await.unwrap();
    let edited = read(Some(v2)).await;
    assert!(edited.history_version > v2);
    assert_eq!(texts(edited.history), ["hello", "hi there"]);

    // An operator's SQL, on a connection of its own.
    let v3 = edited.history_version;
    let operator = sea_orm::Database::connect(db.url()).await.unwrap();
    operator
        .execute_unprepared(
            "UPDATE messages SET content = 'hi, corrected' WHERE role = 'assistant'",
        )
        .await
        .unwrap();
    let corrected = read(Some(v3)).await;
    assert!(corrected.history_version > v3);
    assert_eq!(texts(corrected.history), ["hello", "hi, corrected"]);
    let v4 = corrected.history_version;
    operator.execute_unprepared("DELETE FROM messages WHERE content = 'hello'").await.unwrap();
    let removed = read(Some(v4)).await;
    assert!(removed.history_version > v4);
    assert_eq!(texts(removed.history), ["hi, corrected"]);
    // A number held from before is never taken for the current one: the numbers only grow.
    for held in [v0, v1, v2, v3, v4] {
        assert!(read(Some(held)).await.history.is_some(), "held at {held}");
    }
    operator.close().await.unwrap();
}

/// On SQLite a turn's writes go through a connection of their own, beside the one the rest of
/// the store uses: writes from both at once must all land, none refused as "database is
/// locked", and the transactions that read before they write must not be cut short.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_turn_s_writes_and_every_other_write_at_once_all_land() {
    let db = TestDb::new().await;
    let store = db.store().await;
    let alice = account(&store, "alice").await;
    let other = store.create_conversation(&alice, "quiet", None, None).await.unwrap();
    let persona = store.create_persona(&alice, "Scribe", "", true).await.unwrap();
    // One turn per conversation runs at a time: four turns, four conversations.
    let mut turns = Vec::new();
    for n in 0..4 {
        let c = store.create_conversation(&alice, &format!("busy {n}"), None, None).await.unwrap();
        let started = TurnStarted::new(String::new());
        let turn = store.open_turn(&c.id, "replica-1", "go", started).await.unwrap();
        turns.push((c.id, turn.turn_id));
    }

    let mut tasks = Vec::new();
    for (writer, (c_id, turn_id)) in turns.iter().cloned().enumerate() {
        let events = store.clone();
        tasks.push(tokio::spawn(async move {
            for n in 0..25 {
                let text = TurnEvent::text(format!("{writer}.{n}")).encode();
                events.append_event(&c_id, &turn_id, &text).await.unwrap();
            }
        }));
        let (notes, persona_id) = (store.clone(), persona.id.clone());
        tasks.push(tokio::spawn(async move {
            for n in 0..10 {
                let note = format!("note {writer}.{n}");
                notes.add_memory_note(&persona_id, &note, 100).await.unwrap().unwrap();
            }
        }));
        let (messages, other_id) = (store.clone(), other.id.clone());
        tasks.push(tokio::spawn(async move {
            for n in 0..25 {
                messages
                    .add_message(&other_id, "user", &format!("{writer}.{n}"), None)
                    .await
                    .unwrap();
            }
        }));
    }
    for task in tasks {
        task.await.unwrap();
    }

    for (c_id, _) in &turns {
        let events = store.events_after(c_id, 0, 1000).await.unwrap();
        let seqs: Vec<i64> = events.iter().map(|e| e.seq).collect();
        assert_eq!(seqs, (1..=26).collect::<Vec<i64>>(), "every event, numbered without a gap");
    }
    assert_eq!(store.memory_notes(&persona.id).await.unwrap().len(), 40);
    assert_eq!(store.messages(&other.id).await.unwrap().len(), 100);
}

#[tokio::test]
async fn a_search_finds_a_message_the_moment_it_is_written_and_never_a_removed_one() {
    let db = TestDb::new().await;
    let store = db.store().await;
    let alice = account(&store, "alice").await;
    let c = store.create_conversation(&alice, "untitled", None, None).await.unwrap();
    let found = async |store: &llooma_store::Store, words: &str| -> usize {
        store.search_conversations(&alice, words, 10).await.unwrap().len()
    };

    let first = store.start_turn(&c.id, "r").await.unwrap();
    store.add_message(&c.id, "user", "alpha question", Some(&first)).await.unwrap();
    assert_eq!(found(&store, "alpha").await, 1, "found as soon as written");
    store.end_turn(&c.id, &first, EndState::Done, None).await.unwrap();

    // Written and removed before any search: never found, and the index stays whole.
    let second = store.start_turn(&c.id, "r").await.unwrap();
    store.add_message(&c.id, "user", "bravo question", Some(&second)).await.unwrap();
    store.remove_messages_from_turn(&c.id, &second).await.unwrap();
    store.add_message(&c.id, "user", "charlie question", Some(&second)).await.unwrap();
    assert_eq!(found(&store, "bravo").await, 0);
    assert_eq!(found(&store, "charlie").await, 1);
    // Indexed, then removed: found no more.
    store.remove_messages_from_turn(&c.id, &second).await.unwrap();
    assert_eq!(found(&store, "charlie").await, 0);
    assert_eq!(found(&store, "alpha").await, 1);

    // The batch between searches: on SQLite it indexes what was written since; Postgres
    // indexes as it writes. (SQLite hands the removed message's rowid, an indexed one, to the
    // next message, which is indexed at once, outside the batch.)
    store.add_message(&c.id, "assistant", "delta answer", Some(&first)).await.unwrap();
    assert_index_whole(&db);
    store.add_message(&c.id, "assistant", "echo answer", Some(&first)).await.unwrap();
    store.add_message(&c.id, "assistant", "golf answer", Some(&first)).await.unwrap();
    let batched = store.index_pending_messages().await.unwrap();
    assert_eq!(batched, if support::engine() == Engine::Sqlite { 2 } else { 0 });
    assert_eq!(store.index_pending_messages().await.unwrap(), 0, "nothing left");
    for word in ["delta", "echo", "golf"] {
        assert_eq!(found(&store, word).await, 1, "{word}");
    }
    assert_index_whole(&db);

    // A deleted conversation takes its messages out of the index, pending or not.
    store.add_message(&c.id, "assistant", "foxtrot answer", Some(&first)).await.unwrap();
    store.delete_conversation(&alice, &c.id).await.unwrap();
    assert_eq!(found(&store, "alpha").await + found(&store, "foxtrot").await, 0);

    assert_index_whole(&db);
}

/// SQLite checks its full-text index against the messages: every entry right, none missing
/// (Postgres's index is an expression index, right by construction).
fn assert_index_whole(db: &TestDb) {
    if support::engine() == Engine::Sqlite {
        let path = db.url().trim_start_matches("sqlite://").split('?').next().unwrap().to_owned();
        let conn = rusqlite::Connection::open(path).unwrap();
        conn.execute(
            "INSERT INTO messages_search(messages_search, rank) VALUES ('integrity-check', 1)",
            [],
        )
        .expect("the full-text index matches the messages");
    }
}

/// SQLite: the log is folded into the database file by the checkpoint thread within seconds of
/// a write, with nothing else happening, and well before it reaches SQLite's own threshold
/// (1,000 pages), at which the connection that wrote last would have done it on the request
/// path.
#[tokio::test]
async fn sqlite_s_log_is_checkpointed_in_the_background_soon_after_a_write() {
    if support::engine() != Engine::Sqlite {
        return;
    }
    let db = TestDb::new().await;
    let store = db.store().await;
    let account = account(&store, "ada").await;
    let conversation = store.create_conversation(&account, "Long", None, None).await.unwrap();
    let file = db.url().trim_start_matches("sqlite://").split('?').next().unwrap().to_owned();
    // Let the checkpoints of the set-up happen, then measure from there.
    tokio::time::sleep(std::time::Duration::from_secs(2)).await;
    let before = std::fs::metadata(&file).unwrap().len();
    // About 400 pages of 4 KiB: under the automatic threshold.
    let text = "a line of a long message; ".repeat(4000);
    for _ in 0..16 {
        store.add_message(&conversation.id, "user", &text, None).await.unwrap();
    }
    let until = tokio::time::Instant::now() + std::time::Duration::from_secs(10);
    let mut grown = std::fs::metadata(&file).unwrap().len();
    while grown < before + 1_000_000 && tokio::time::Instant::now() < until {
        tokio::time::sleep(std::time::Duration::from_millis(100)).await;
        grown = std::fs::metadata(&file).unwrap().len();
    }
    assert!(grown >= before + 1_000_000, "the database file is {grown} bytes, {before} before");
}

#[tokio::test]
async fn a_title_is_found_by_its_words_through_the_index_as_it_is_now() {
    let db = TestDb::new().await;
    let store = db.store().await;
    let alice = account(&store, "alice").await;
    let bob = account(&store, "bob").await;
    let titles = async |store: &llooma_store::Store, account: &str, words: &str| -> Vec<String> {
        let found = store.search_conversations(account, words, 10).await.unwrap();
        found.into_iter().map(|c| c.title).collect()
    };
    let tides = store.create_conversation(&alice, "Tides in Brest", None, None).await.unwrap();
    store.create_conversation(&alice, "Paris museums", None, None).await.unwrap();
    store.create_conversation(&bob, "Tides of Bob", None, None).await.unwrap();
    assert_eq!(titles(&store, &alice, "tide").await, ["Tides in Brest"], "a word's start");
    assert_eq!(titles(&store, &alice, "BREST tides").await, ["Tides in Brest"], "every word");
    assert_eq!(titles(&store, &alice, "brest museums").await, Vec::<String>::new());
    assert_eq!(titles(&store, &alice, "ides").await, Vec::<String>::new(), "starts only");
    assert_eq!(titles(&store, &alice, "%_*\"").await, Vec::<String>::new(), "no syntax");
    assert_eq!(titles(&store, &bob, "tides").await, ["Tides of Bob"], "one's own only");

    let renamed =
        llooma_store::ConversationPatch { title: Some("Low water".into()), ..Default::default() };
    store.update_conversation(&alice, &tides.id, renamed).await.unwrap();
    assert_eq!(titles(&store, &alice, "tides").await, Vec::<String>::new(), "the old title");
    assert_eq!(titles(&store, &alice, "water").await, ["Low water"]);
    store.delete_conversation(&alice, &tides.id).await.unwrap();
    assert_eq!(titles(&store, &alice, "water").await, Vec::<String>::new());
}

/// A summary of a conversation's oldest messages (m0028): the newest is the one read with the
/// turn's context; writing one moves the history version (a history held from before was not
/// cut at it); it counts what it covers; it goes when the message it ends at goes (an edit),
/// and is not written for a message that is gone.
#[tokio::test]
async fn a_summary_is_read_with_the_turn_moves_the_version_and_goes_with_its_last_message() {
    let db = TestDb::new().await;
    let store = db.store().await;
    let alice = account(&store, "alice").await;
    let c = store.create_conversation(&alice, "c", None, None).await.unwrap();
    let mut turns = Vec::new();
    for n in 0..3 {
        let opened = store
            .open_turn(&c.id, "r", &format!("ask {n}"), TurnStarted::new(String::new()))
            .await
            .unwrap();
        let reply = format!("answer {n}");
        store.close_turn(&c.id, &opened.turn_id, &[], &reply, EndState::Done, None).await.unwrap();
        turns.push(opened.turn_id);
    }
    let messages = store.messages(&c.id).await.unwrap();
    let before = store.turn_context(&alice, &c.id, None).await.unwrap().unwrap();
    assert_eq!(before.summary, None);
    assert_eq!(store.newest_summary(&c.id).await.unwrap(), None);
    let ids: Vec<String> = before.history.unwrap().into_iter().map(|m| m.id).collect();
    assert_eq!(ids, messages.iter().map(|m| m.id.clone()).collect::<Vec<_>>());

    store.add_summary(&c.id, &messages[1].id, "first exchange").await.unwrap();
    store.add_summary(&c.id, &messages[3].id, "two exchanges").await.unwrap();
    let after = store.turn_context(&alice, &c.id, Some(before.history_version)).await.unwrap();
    let after = after.unwrap();
    assert_eq!(after.history_version, before.history_version + 2);
    assert!(after.history.is_some(), "held from before the summary: read again");
    assert_eq!(after.summary, Some((messages[3].id.clone(), "two exchanges".to_owned())));
    let newest = store.newest_summary(&c.id).await.unwrap().unwrap();
    assert_eq!((newest.covered_messages, newest.content.as_str()), (4, "two exchanges"));

    // An edit of the second turn removes its messages and the summary ending in them; the one
    // before stays.
    store.remove_messages_from_turn(&c.id, &turns[1]).await.unwrap();
    let newest = store.newest_summary(&c.id).await.unwrap().unwrap();
    assert_eq!(
        (newest.through_message_id.as_str(), newest.covered_messages),
        (&*messages[1].id, 2)
    );
    // A message gone: nothing is written.
    let gone = store.add_summary(&c.id, &messages[3].id, "late").await;
    assert!(matches!(gone, Err(llooma_store::StoreError::NotFound)), "{gone:?}");
    // Nor for another conversation's message.
    let other = store.create_conversation(&alice, "other", None, None).await.unwrap();
    let wrong = store.add_summary(&other.id, &messages[0].id, "stolen").await;
    assert!(matches!(wrong, Err(llooma_store::StoreError::NotFound)), "{wrong:?}");
    store.delete_conversation(&alice, &c.id).await.unwrap();
    assert_eq!(store.newest_summary(&c.id).await.unwrap(), None);
}
