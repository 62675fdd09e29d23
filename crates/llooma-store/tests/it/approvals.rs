//! The approval broker over the real store.

use std::sync::Arc;
use std::time::{Duration, Instant};

use llooma_approval_broker::{
    AnswerChoice, AnswerResult, Broker, BrokerConfig, BrokerError, BrokerEvent, CallState,
    ManualClock, REASON_PROCESS_GONE, SystemClock,
};
use llooma_store::Engine;
use serde_json::json;

use crate::support::{TestDb, account, broker, broker_with, engine, new_call, within};

const T0: i64 = 1_700_000_000_000;

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn of_a_hundred_concurrent_answers_exactly_one_wins() {
    let db = TestDb::new().await;
    let store = db.store().await;
    let alice = account(&store, "alice").await;
    let broker = broker(&store, Arc::new(SystemClock), "replica-a").await;
    for round in 0..3 {
        let call = broker.request(new_call(&alice, json!({"to": "a@example.org"}))).await.unwrap();
        let waiter = tokio::spawn({
            let broker = broker.clone();
            let id = call.id.clone();
            async move { broker.wait(&id).await }
        });
        let start = tokio::sync::Barrier::new(100);
        let start = Arc::new(start);
        let mut tasks = Vec::new();
        for i in 0..100 {
            let broker = broker.clone();
            let (alice, id, start) = (alice.clone(), call.id.clone(), Arc::clone(&start));
            tasks.push(tokio::spawn(async move {
                start.wait().await;
                let choice = if i % 2 == 0 { AnswerChoice::Allow } else { AnswerChoice::Refuse };
                broker.answer(&alice, &id, &format!("tab-{i}"), choice).await.unwrap()
            }));
        }
        let mut winners = Vec::new();
        let mut already = Vec::new();
        for task in tasks {
            match task.await.unwrap() {
                AnswerResult::Won { call } => winners.push(call),
                AnswerResult::AlreadyAnswered { state, answered_at_ms, by_session } => {
                    already.push((state, answered_at_ms, by_session))
                }
                AnswerResult::NotFound => panic!("the call is not found by its own account"),
            }
        }
        assert_eq!(winners.len(), 1, "round {round}");
        assert_eq!(already.len(), 99, "round {round}");
        let winner = &winners[0];
        // Every loser is told the same thing: the winner's state, time and tab.
        for (state, at, by) in &already {
            assert_eq!(*state, winner.state);
            assert_eq!(*at, winner.answered_at_ms);
            assert_eq!(by, &winner.answered_by);
        }
        let outcome = within(waiter).await.unwrap().unwrap();
        assert_eq!(outcome.call, **winner);
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_answer_on_another_replica_wakes_the_waiting_turn() {
    let db = TestDb::new().await;
    let store_a = db.store().await;
    let store_b = db.store().await; // a separate pool, like another process
    let alice = account(&store_a, "alice").await;
    let mut config_a = BrokerConfig::new("replica-a");
    if engine() == Engine::Postgres {
        // With the re-check an hour away, only LISTEN/NOTIFY can wake the waiter in time.
        config_a.recheck_every = Duration::from_secs(3600);
    }
    let a = broker_with(&store_a, Arc::new(SystemClock), config_a).await;
    let b = broker(&store_b, Arc::new(SystemClock), "replica-b").await;
    let mut watch_a = a.subscribe(&alice);
    let mut watch_b = b.subscribe(&alice);

    let mut timings = Vec::new();
    for _ in 0..5 {
        let call = a.request(new_call(&alice, json!({"to": "boss@example.org"}))).await.unwrap();
        assert!(matches!(within(watch_a.recv()).await.unwrap(), BrokerEvent::Appeared { .. }));
        if engine() == Engine::Postgres {
            // The card reaches tabs connected to the other replica.
            let event = within(watch_b.recv()).await.unwrap();
            assert!(
                matches!(&event, BrokerEvent::Appeared { card } if card.id == call.id),
                "{event:?}"
            );
        }
        let waiter = tokio::spawn({
            let a = a.clone();
            let id = call.id.clone();
            async move {
                let outcome = a.wait(&id).await;
                (outcome, Instant::now())
            }
        });
        tokio::time::sleep(Duration::from_millis(50)).await; // let the waiter park
        let answered_at = Instant::now();
        let result = b.answer(&alice, &call.id, "phone", AnswerChoice::Allow).await.unwrap();
        assert!(matches!(result, AnswerResult::Won { .. }));
        let (outcome, woke_at) = within(waiter).await.unwrap();
        assert!(outcome.unwrap().allowed());
        timings.push(woke_at.duration_since(answered_at));
        // Tabs on both replicas hear it.
        let answered = BrokerEvent::Answered { id: call.id.clone(), state: CallState::Allowed };
        if engine() == Engine::Postgres {
            assert_eq!(within(watch_a.recv()).await.unwrap(), answered);
        }
        assert_eq!(within(watch_b.recv()).await.unwrap(), answered);
    }
    // Reported, not asserted: performance is for the benchmark.
    println!("{:?}: answer on B -> waiter on A woke after {timings:?}", engine());
}

#[tokio::test]
async fn silence_expires_at_the_deadline() {
    let db = TestDb::new().await;
    let store = db.store().await;
    let alice = account(&store, "alice").await;
    let clock = ManualClock::new(T0);
    let broker = broker(&store, Arc::new(clock.clone()), "replica-a").await;
    let mut events = broker.subscribe(&alice);
    let call = broker.request(new_call(&alice, json!({"to": "x@example.org"}))).await.unwrap();
    assert_eq!(call.deadline_ms, T0 + 120_000);
    let _appeared = events.recv().await.unwrap();
    let waiter = tokio::spawn({
        let broker = broker.clone();
        let id = call.id.clone();
        async move { broker.wait(&id).await }
    });
    clock.advance(Duration::from_millis(119_999));
    tokio::time::sleep(Duration::from_millis(50)).await;
    assert!(!waiter.is_finished(), "the question stands for two minutes");
    assert_eq!(store.approval_call(&call.id).await.unwrap().unwrap().state, CallState::Pending);
    clock.advance(Duration::from_millis(1));
    let outcome = within(waiter).await.unwrap().unwrap();
    assert_eq!(outcome.state(), CallState::Expired);
    assert!(!outcome.allowed());
    let text = outcome.model_text().unwrap();
    assert!(text.contains("did not answer within two minutes"), "{text}");
    assert!(text.contains("Nothing was sent"), "{text}");
    assert_eq!(within(events.recv()).await.unwrap(), BrokerEvent::Expired { id: call.id.clone() });
    let stored = store.approval_call(&call.id).await.unwrap().unwrap();
    assert_eq!((stored.state, stored.answered_at_ms), (CallState::Expired, Some(T0 + 120_000)));
    let late = broker.answer(&alice, &call.id, "tab", AnswerChoice::Allow).await.unwrap();
    assert_eq!(
        late,
        AnswerResult::AlreadyAnswered {
            state: CallState::Expired,
            answered_at_ms: Some(T0 + 120_000),
            by_session: None
        }
    );
}

#[tokio::test]
async fn a_late_answer_is_told_who_answered_and_when() {
    let db = TestDb::new().await;
    let store = db.store().await;
    let alice = account(&store, "alice").await;
    let clock = ManualClock::new(T0);
    let broker = broker(&store, Arc::new(clock.clone()), "replica-a").await;
    let call = broker.request(new_call(&alice, json!({}))).await.unwrap();
    clock.advance(Duration::from_secs(5));
    let first = broker.answer(&alice, &call.id, "tab-1", AnswerChoice::Refuse).await.unwrap();
    assert!(matches!(first, AnswerResult::Won { ref call } if call.state == CallState::Refused));
    clock.advance(Duration::from_secs(1));
    let second = broker.answer(&alice, &call.id, "tab-2", AnswerChoice::Allow).await.unwrap();
    assert_eq!(
        second,
        AnswerResult::AlreadyAnswered {
            state: CallState::Refused,
            answered_at_ms: Some(T0 + 5_000),
            by_session: Some("tab-1".into())
        }
    );
}

#[tokio::test]
async fn another_accounts_call_is_not_found() {
    let db = TestDb::new().await;
    let store = db.store().await;
    let alice = account(&store, "alice").await;
    let mallory = account(&store, "mallory").await;
    let broker = broker(&store, Arc::new(SystemClock), "replica-a").await;
    let call = broker.request(new_call(&alice, json!({"to": "a@example.org"}))).await.unwrap();
    for (who, id) in
        [(&mallory, call.id.as_str()), (&alice, "00000000-0000-0000-0000-000000000000")]
    {
        for choice in [AnswerChoice::Allow, AnswerChoice::Refuse, AnswerChoice::AlwaysAllow] {
            assert_eq!(
                broker.answer(who, id, "tab", choice).await.unwrap(),
                AnswerResult::NotFound
            );
        }
    }
    assert_eq!(store.approval_call(&call.id).await.unwrap().unwrap().state, CallState::Pending);
    assert!(store.consent_grants(&mallory).await.unwrap().is_empty());
    assert!(broker.pending_for_account(&mallory).await.unwrap().is_empty());
    let pending = broker.pending_for_account(&alice).await.unwrap();
    assert_eq!(pending.iter().map(|c| c.id.as_str()).collect::<Vec<_>>(), [call.id.as_str()]);
}

#[tokio::test]
async fn a_reloaded_page_finds_the_question_with_exactly_what_was_shown() {
    let db = TestDb::new().await;
    let store = db.store().await;
    let alice = account(&store, "alice").await;
    let clock = ManualClock::new(T0);
    let broker = broker(&store, Arc::new(clock.clone()), "replica-a").await;
    let arguments = json!({"to": "a@example.org", "body": "Hello\n  world", "n": [1, 2.5, null]});
    let call = broker.request(new_call(&alice, arguments.clone())).await.unwrap();
    let pending = broker.pending_for_account(&alice).await.unwrap();
    assert_eq!(pending, vec![call.clone()]);
    let stored = &pending[0];
    assert_eq!(
        stored.arguments_json,
        r#"{"body":"Hello\n  world","n":[1,2.5,null],"to":"a@example.org"}"#
    );
    assert_eq!(stored.arguments().unwrap(), arguments);
    assert_eq!(stored.owner_replica, "replica-a");
    assert_eq!(stored.card().tool_description, "Sends a mail");
    // The arguments sent are the ones shown; anything else is refused.
    Broker::<llooma_store::Store>::verify_arguments(stored, &arguments).unwrap();
    for tampered in [
        json!({"to": "boss@example.org", "body": "Hello\n  world", "n": [1, 2.5, null]}),
        json!({"to": "a@example.org", "body": "Hello\n  world", "n": [1, 2.5]}),
        json!({"to": "a@example.org", "body": "Hello\n  world", "n": [1, 2.5, null], "bcc": "x"}),
        json!({"to": "a@example.org", "body": "Hello world", "n": [1, 2.5, null]}),
    ] {
        let err = Broker::<llooma_store::Store>::verify_arguments(stored, &tampered).unwrap_err();
        assert!(matches!(err, BrokerError::ArgumentsChanged { .. }), "{err}");
    }
    // Past the deadline it is no longer offered.
    clock.advance(Duration::from_secs(120));
    assert!(broker.pending_for_account(&alice).await.unwrap().is_empty());
}

/// One round's calls are asked within one millisecond: their cards come in the order the model
/// made the calls, on a reload as well.
#[tokio::test]
async fn the_cards_of_calls_made_at_the_same_moment_keep_their_order() {
    let db = TestDb::new().await;
    let store = db.store().await;
    let alice = account(&store, "alice").await;
    let broker = broker(&store, Arc::new(ManualClock::new(T0)), "replica-a").await;
    let mut asked = Vec::new();
    for n in 0..30 {
        asked.push(broker.request(new_call(&alice, json!({"n": n}))).await.unwrap().id);
    }
    let offered: Vec<String> =
        broker.pending_for_account(&alice).await.unwrap().into_iter().map(|c| c.id).collect();
    assert_eq!(offered, asked);
}

#[tokio::test]
async fn a_restarted_sole_process_interrupts_the_calls_of_its_past_life() {
    let db = TestDb::new().await;
    let store = db.store().await;
    let alice = account(&store, "alice").await;
    let clock = ManualClock::new(T0);
    let mut config = BrokerConfig::new("life-1");
    config.sole_replica = true;
    let old = broker_with(&store, Arc::new(clock.clone()), config).await;
    let first = old.request(new_call(&alice, json!({"n": 1}))).await.unwrap();
    let second = old.request(new_call(&alice, json!({"n": 2}))).await.unwrap();
    let answered = old.request(new_call(&alice, json!({"n": 3}))).await.unwrap();
    old.answer(&alice, &answered.id, "tab", AnswerChoice::Allow).await.unwrap();
    drop(old); // crash: no shutdown

    clock.advance(Duration::from_secs(2)); // back at once, heartbeat still fresh
    let store = db.store().await; // a new process, a new pool
    let mut config = BrokerConfig::new("life-2");
    config.sole_replica = true;
    let new = broker_with(&store, Arc::new(clock.clone()), config).await;
    for id in [&first.id, &second.id] {
        let call = store.approval_call(id).await.unwrap().unwrap();
        assert_eq!(call.state, CallState::Interrupted);
        assert_eq!(call.reason.as_deref(), Some(REASON_PROCESS_GONE));
        assert_eq!(call.answered_at_ms, Some(T0 + 2_000));
    }
    assert_eq!(store.approval_call(&answered.id).await.unwrap().unwrap().state, CallState::Allowed);
    assert!(new.pending_for_account(&alice).await.unwrap().is_empty());
    // A waiter arriving late (the turn engine re-attaching) gets the reason, not a hang.
    let outcome = within(new.wait(&first.id)).await.unwrap();
    assert!(outcome.model_text().unwrap().contains("stopped before an answer came"));
}

#[tokio::test]
async fn replicas_interrupt_the_calls_of_a_replica_whose_heartbeat_went_stale() {
    let db = TestDb::new().await;
    let store_a = db.store().await;
    let store_b = db.store().await;
    let alice = account(&store_a, "alice").await;
    let clock = ManualClock::new(T0);
    let a = broker(&store_a, Arc::new(clock.clone()), "replica-a").await;
    let b = broker(&store_b, Arc::new(clock.clone()), "replica-b").await;
    let mut watch_b = b.subscribe(&alice);
    let of_a = a.request(new_call(&alice, json!({"n": 1}))).await.unwrap();
    let of_b = b.request(new_call(&alice, json!({"n": 2}))).await.unwrap();
    loop {
        // Skip the cards (on Postgres both appear here).
        if let BrokerEvent::Appeared { card } = within(watch_b.recv()).await.unwrap()
            && card.id == of_b.id
        {
            break;
        }
    }

    // Both alive: a sweep on either touches nothing.
    clock.advance(Duration::from_secs(20));
    a.tick().await.unwrap();
    b.tick().await.unwrap();
    assert_eq!(store_a.approval_call(&of_a.id).await.unwrap().unwrap().state, CallState::Pending);
    assert_eq!(store_a.approval_call(&of_b.id).await.unwrap().unwrap().state, CallState::Pending);

    // A dies; 31 s after its last beat B's sweep interrupts A's call and only A's.
    drop(a);
    clock.advance(Duration::from_secs(31));
    b.tick().await.unwrap();
    let call = store_b.approval_call(&of_a.id).await.unwrap().unwrap();
    assert_eq!(
        (call.state, call.reason.as_deref()),
        (CallState::Interrupted, Some(REASON_PROCESS_GONE))
    );
    assert_eq!(store_b.approval_call(&of_b.id).await.unwrap().unwrap().state, CallState::Pending);
    loop {
        if within(watch_b.recv()).await.unwrap()
            == (BrokerEvent::Interrupted { id: of_a.id.clone() })
        {
            break;
        }
    }
}

#[tokio::test]
async fn shutdown_interrupts_its_own_calls_and_retires_its_heartbeat() {
    let db = TestDb::new().await;
    let store = db.store().await;
    let alice = account(&store, "alice").await;
    let broker = broker(&store, Arc::new(SystemClock), "replica-a").await;
    let call = broker.request(new_call(&alice, json!({}))).await.unwrap();
    broker.shutdown().await.unwrap();
    let stored = store.approval_call(&call.id).await.unwrap().unwrap();
    assert_eq!(stored.state, CallState::Interrupted);
}

#[tokio::test]
async fn a_ticked_bot_runs_unasked_but_every_call_leaves_a_row() {
    let db = TestDb::new().await;
    let store = db.store().await;
    let alice = account(&store, "alice").await;
    let broker = broker(&store, Arc::new(SystemClock), "replica-a").await;
    let call = broker
        .record_unasked(
            new_call(&alice, json!({"to": "room"})),
            llooma_approval_broker::Unasked::Bot,
        )
        .await
        .unwrap();
    let stored = store.approval_call(&call.id).await.unwrap().unwrap();
    assert_eq!(stored, call);
    assert_eq!((stored.state, stored.answered_by.as_deref()), (CallState::Allowed, Some("bot")));
    assert!(broker.pending_for_account(&alice).await.unwrap().is_empty());
}
