//! Broker behaviour over an in-memory port (the store's own tests cover both databases).

use std::collections::HashMap;
use std::sync::{Arc, Mutex};
use std::time::Duration;

use serde_json::json;
use tokio::sync::mpsc;

use super::*;
use crate::port::{AnswerUpdate, Orphans};

/// A port in memory. Several brokers may share one, like replicas sharing a database; each gets
/// its own notice stream.
#[derive(Debug, Default, Clone)]
struct FakePort {
    state: Arc<Mutex<FakeState>>,
    /// Whether to offer a notification source (false: like SQLite).
    notify: bool,
}

#[derive(Debug, Default)]
struct FakeState {
    calls: HashMap<String, PendingCall>,
    replicas: HashMap<String, i64>,
    listeners: Vec<mpsc::Sender<Notice>>,
    grants: Vec<String>,
}

impl FakeState {
    fn publish(&mut self, notice: Notice) {
        self.listeners.retain(|tx| tx.try_send(notice.clone()).is_ok());
    }

    fn settle(
        &mut self,
        id: &str,
        state: CallState,
        at: i64,
        reason: &str,
        origin: &str,
    ) -> Option<Notice> {
        let call = self.calls.get_mut(id)?;
        if call.state != CallState::Pending {
            return None;
        }
        call.state = state;
        call.answered_at_ms = Some(at);
        call.reason = Some(reason.to_owned());
        let notice = Notice {
            call_id: id.to_owned(),
            account_id: call.account_id.clone(),
            state,
            origin: origin.to_owned(),
        };
        self.publish(notice.clone());
        Some(notice)
    }
}

impl FakePort {
    fn with_notices() -> Self {
        FakePort { notify: true, ..FakePort::default() }
    }

    fn lock(&self) -> std::sync::MutexGuard<'_, FakeState> {
        self.state.lock().unwrap()
    }
}

impl ApprovalPort for FakePort {
    async fn insert_call(&self, call: &PendingCall) -> Result<(), PortError> {
        let mut state = self.lock();
        state.calls.insert(call.id.clone(), call.clone());
        if call.state == CallState::Pending {
            state.publish(Notice {
                call_id: call.id.clone(),
                account_id: call.account_id.clone(),
                state: CallState::Pending,
                origin: call.owner_replica.clone(),
            });
        }
        Ok(())
    }

    async fn call_by_id(&self, call_id: &str) -> Result<Option<PendingCall>, PortError> {
        Ok(self.lock().calls.get(call_id).cloned())
    }

    async fn pending_for_account(&self, account_id: &str) -> Result<Vec<PendingCall>, PortError> {
        let mut calls: Vec<_> = self
            .lock()
            .calls
            .values()
            .filter(|c| c.account_id == account_id && c.state == CallState::Pending)
            .cloned()
            .collect();
        calls.sort_by_key(|c| c.created_at_ms);
        Ok(calls)
    }

    async fn answer_call(&self, update: AnswerUpdate<'_>) -> Result<bool, PortError> {
        // Let other tasks interleave, as a database round trip would.
        tokio::task::yield_now().await;
        let mut state = self.lock();
        let Some(call) = state.calls.get_mut(update.call_id) else { return Ok(false) };
        if call.account_id != update.account_id
            || call.state != CallState::Pending
            || call.deadline_ms <= update.at_ms
            || call.question_json.is_some() != update.question
        {
            return Ok(false);
        }
        call.state = update.state;
        call.answered_by = Some(update.by_session.to_owned());
        call.answered_at_ms = Some(update.at_ms);
        call.remember = update.remember;
        call.reply_json = update.reply_json.map(str::to_owned);
        let notice = Notice {
            call_id: call.id.clone(),
            account_id: call.account_id.clone(),
            state: update.state,
            origin: update.origin.to_owned(),
        };
        if update.remember {
            state.grants.push(update.call_id.to_owned());
        }
        state.publish(notice);
        Ok(true)
    }

    async fn expire_call(
        &self,
        call_id: &str,
        at_ms: i64,
        origin: &str,
    ) -> Result<bool, PortError> {
        let mut state = self.lock();
        let due = state.calls.get(call_id).is_some_and(|c| c.deadline_ms <= at_ms);
        Ok(due && state.settle(call_id, CallState::Expired, at_ms, "expired", origin).is_some())
    }

    async fn expire_overdue(&self, at_ms: i64, origin: &str) -> Result<Vec<Notice>, PortError> {
        let mut state = self.lock();
        let due: Vec<String> = state
            .calls
            .values()
            .filter(|c| c.state == CallState::Pending && c.deadline_ms <= at_ms)
            .map(|c| c.id.clone())
            .collect();
        Ok(due
            .iter()
            .filter_map(|id| state.settle(id, CallState::Expired, at_ms, "expired", origin))
            .collect())
    }

    async fn interrupt_call(
        &self,
        call_id: &str,
        at_ms: i64,
        reason: &str,
        origin: &str,
    ) -> Result<bool, PortError> {
        Ok(self.lock().settle(call_id, CallState::Interrupted, at_ms, reason, origin).is_some())
    }

    async fn interrupt_orphans(
        &self,
        which: Orphans<'_>,
        at_ms: i64,
        reason: &str,
        origin: &str,
    ) -> Result<Vec<Notice>, PortError> {
        let mut state = self.lock();
        let replicas = state.replicas.clone();
        let orphan = |owner: &str| match which {
            Orphans::NotAlive { me, alive_since_ms } => {
                owner != me && replicas.get(owner).is_none_or(|beat| *beat < alive_since_ms)
            }
            Orphans::AllExcept { me } => owner != me,
            Orphans::OwnedBy { owners } => owners.iter().any(|o| o == owner),
        };
        let ids: Vec<String> = state
            .calls
            .values()
            .filter(|c| c.state == CallState::Pending && orphan(&c.owner_replica))
            .map(|c| c.id.clone())
            .collect();
        Ok(ids
            .iter()
            .filter_map(|id| state.settle(id, CallState::Interrupted, at_ms, reason, origin))
            .collect())
    }

    async fn heartbeat(&self, replica_id: &str, at_ms: i64) -> Result<(), PortError> {
        self.lock().replicas.insert(replica_id.to_owned(), at_ms);
        Ok(())
    }

    async fn forget_reply(&self, call_id: &str) -> Result<(), PortError> {
        if let Some(call) = self.lock().calls.get_mut(call_id) {
            call.reply_json = None;
        }
        Ok(())
    }

    async fn retire_replica(&self, replica_id: &str) -> Result<(), PortError> {
        self.lock().replicas.remove(replica_id);
        Ok(())
    }

    async fn notices(&self) -> Result<Option<mpsc::Receiver<Notice>>, PortError> {
        if !self.notify {
            return Ok(None);
        }
        let (tx, rx) = mpsc::channel(1024);
        self.lock().listeners.push(tx);
        Ok(Some(rx))
    }
}

const T0: i64 = 1_700_000_000_000;

fn new_call(account: &str) -> NewCall {
    NewCall {
        account_id: account.into(),
        conversation_id: "conv".into(),
        turn_id: "turn".into(),
        server_id: "srv".into(),
        server_label: "Home".into(),
        server_address: "https://hub.example/mcp".into(),
        tool_name: "lights_off".into(),
        model_tool_name: "mcp_home_lights_off".into(),
        tool_description: "Turns the lights off".into(),
        tool_definition_hash: "def".into(),
        tool_hints_json: None,
        arguments: json!({"room": "kitchen", "dim": 0}),
    }
}

async fn broker(port: FakePort, clock: &ManualClock, replica: &str) -> Broker<FakePort> {
    Broker::start(port, Arc::new(clock.clone()), BrokerConfig::new(replica)).await.unwrap()
}

async fn within<T>(future: impl std::future::Future<Output = T>) -> T {
    tokio::time::timeout(Duration::from_secs(10), future).await.expect("timed out")
}

#[tokio::test]
async fn an_answer_wakes_the_waiting_turn() {
    let clock = ManualClock::new(T0);
    let broker = broker(FakePort::default(), &clock, "r1").await;
    let mut events = broker.subscribe("alice");
    let call = broker.request(new_call("alice")).await.unwrap();
    assert_eq!(call.arguments_json, r#"{"dim":0,"room":"kitchen"}"#);
    assert_eq!(call.deadline_ms, T0 + 120_000);
    assert!(
        matches!(within(events.recv()).await.unwrap(), BrokerEvent::Appeared { card } if card.id == call.id)
    );

    let waiter = tokio::spawn({
        let broker = broker.clone();
        let id = call.id.clone();
        async move { broker.wait(&id).await }
    });
    let result = broker.answer("alice", &call.id, "tab-1", AnswerChoice::Allow).await.unwrap();
    assert!(matches!(result, AnswerResult::Won { .. }));
    // The manual clock never moves: only the in-process wake-up can end this wait.
    let outcome = within(waiter).await.unwrap().unwrap();
    assert!(outcome.allowed());
    assert_eq!(outcome.model_text(), None);
    assert_eq!(outcome.call.answered_by.as_deref(), Some("tab-1"));
    assert_eq!(
        within(events.recv()).await.unwrap(),
        BrokerEvent::Answered { id: call.id.clone(), state: CallState::Allowed }
    );
    assert!(broker.pending_for_account("alice").await.unwrap().is_empty());
    assert_eq!(broker.local_counts().0, 0, "the waiter's slot is removed");
}

#[tokio::test]
async fn one_of_a_hundred_answers_wins() {
    let clock = ManualClock::new(T0);
    let broker = broker(FakePort::default(), &clock, "r1").await;
    let call = broker.request(new_call("alice")).await.unwrap();
    let mut tasks = Vec::new();
    for i in 0..100 {
        let broker = broker.clone();
        let id = call.id.clone();
        let choice = if i % 2 == 0 { AnswerChoice::Allow } else { AnswerChoice::Refuse };
        tasks.push(tokio::spawn(async move {
            broker.answer("alice", &id, &format!("tab-{i}"), choice).await.unwrap()
        }));
    }
    let mut won = Vec::new();
    let mut late = 0;
    for task in tasks {
        match task.await.unwrap() {
            AnswerResult::Won { call } => won.push(call),
            AnswerResult::AlreadyAnswered { by_session, answered_at_ms, .. } => {
                assert!(by_session.is_some() && answered_at_ms.is_some());
                late += 1;
            }
            AnswerResult::NotFound => panic!("not found"),
        }
    }
    assert_eq!((won.len(), late), (1, 99));
}

#[tokio::test]
async fn silence_expires_at_the_deadline() {
    let clock = ManualClock::new(T0);
    let broker = broker(FakePort::default(), &clock, "r1").await;
    let mut events = broker.subscribe("alice");
    let call = broker.request(new_call("alice")).await.unwrap();
    let _ = events.recv().await;
    let waiter = tokio::spawn({
        let broker = broker.clone();
        let id = call.id.clone();
        async move { broker.wait(&id).await }
    });
    clock.advance(Duration::from_secs(119));
    tokio::task::yield_now().await;
    assert!(!waiter.is_finished());
    clock.advance(Duration::from_secs(1));
    let outcome = within(waiter).await.unwrap().unwrap();
    assert_eq!(outcome.state(), CallState::Expired);
    let text = outcome.model_text().unwrap();
    assert!(text.contains("did not answer within two minutes"), "{text}");
    assert_eq!(within(events.recv()).await.unwrap(), BrokerEvent::Expired { id: call.id.clone() });
    // A late answer is told what happened.
    let late = broker.answer("alice", &call.id, "tab", AnswerChoice::Allow).await.unwrap();
    assert!(matches!(late, AnswerResult::AlreadyAnswered { state: CallState::Expired, .. }));
}

#[tokio::test]
async fn an_answer_after_the_deadline_does_not_count_even_before_the_sweep() {
    let clock = ManualClock::new(T0);
    let port = FakePort::default();
    let broker = broker(port, &clock, "r1").await;
    let call = broker.request(new_call("alice")).await.unwrap();
    // Move time without letting the maintenance task run first.
    clock.set(T0 + 120_000);
    let late = broker.answer("alice", &call.id, "tab", AnswerChoice::Allow).await.unwrap();
    assert!(
        matches!(late, AnswerResult::AlreadyAnswered { state: CallState::Expired, .. }),
        "{late:?}"
    );
}

#[tokio::test]
async fn another_accounts_call_is_not_found() {
    let clock = ManualClock::new(T0);
    let broker = broker(FakePort::default(), &clock, "r1").await;
    let call = broker.request(new_call("alice")).await.unwrap();
    assert_eq!(
        broker.answer("mallory", &call.id, "t", AnswerChoice::Allow).await.unwrap(),
        AnswerResult::NotFound
    );
    assert_eq!(
        broker.answer("alice", "no-such-id", "t", AnswerChoice::Allow).await.unwrap(),
        AnswerResult::NotFound
    );
    assert_eq!(
        broker.port().call_by_id(&call.id).await.unwrap().unwrap().state,
        CallState::Pending
    );
}

#[tokio::test]
async fn an_answer_on_another_replica_wakes_the_waiter_through_notices() {
    let clock = ManualClock::new(T0);
    let port = FakePort::with_notices();
    let a = broker(port.clone(), &clock, "replica-a").await;
    let b = broker(port.clone(), &clock, "replica-b").await;
    let mut watch_a = a.subscribe("alice");
    let mut watch_b = b.subscribe("alice");
    let call = a.request(new_call("alice")).await.unwrap();
    assert!(matches!(within(watch_a.recv()).await.unwrap(), BrokerEvent::Appeared { .. }));
    assert!(
        matches!(within(watch_b.recv()).await.unwrap(), BrokerEvent::Appeared { card } if card.id == call.id)
    );
    let waiter = tokio::spawn({
        let a = a.clone();
        let id = call.id.clone();
        async move { a.wait(&id).await }
    });
    let result = b.answer("alice", &call.id, "phone", AnswerChoice::Refuse).await.unwrap();
    assert!(matches!(result, AnswerResult::Won { .. }));
    let outcome = within(waiter).await.unwrap().unwrap();
    assert_eq!(outcome.state(), CallState::Refused);
    assert!(outcome.model_text().unwrap().contains("refused"));
    let answered = BrokerEvent::Answered { id: call.id.clone(), state: CallState::Refused };
    assert_eq!(within(watch_a.recv()).await.unwrap(), answered);
    assert_eq!(within(watch_b.recv()).await.unwrap(), answered);
}

#[tokio::test]
async fn without_notices_the_recheck_finds_an_answer_made_elsewhere() {
    let clock = ManualClock::new(T0);
    let port = FakePort::default();
    let a = broker(port.clone(), &clock, "replica-a").await;
    let call = a.request(new_call("alice")).await.unwrap();
    let waiter = tokio::spawn({
        let a = a.clone();
        let id = call.id.clone();
        async move { a.wait(&id).await }
    });
    // Answer straight in storage, as another process would, with nothing to wake the waiter.
    let update = AnswerUpdate {
        call_id: &call.id,
        account_id: "alice",
        state: CallState::Allowed,
        by_session: "elsewhere",
        at_ms: T0,
        remember: false,
        origin: "other",
        reply_json: None,
        question: false,
    };
    assert!(port.answer_call(update).await.unwrap());
    tokio::task::yield_now().await;
    clock.advance(Duration::from_secs(1));
    assert!(within(waiter).await.unwrap().unwrap().allowed());
}

#[tokio::test]
async fn start_up_interrupts_the_calls_of_dead_processes() {
    let clock = ManualClock::new(T0);
    let port = FakePort::default();
    let old = broker(port.clone(), &clock, "old").await;
    let orphan = old.request(new_call("alice")).await.unwrap();
    drop(old); // a crash: no shutdown, the heartbeat stays behind

    // Another replica starting 5 s later: the old heartbeat is fresh, nothing is touched.
    clock.advance(Duration::from_secs(5));
    let fresh = broker(port.clone(), &clock, "other").await;
    assert_eq!(port.call_by_id(&orphan.id).await.unwrap().unwrap().state, CallState::Pending);
    // Once the heartbeat is stale, the periodic sweep interrupts it.
    clock.advance(Duration::from_secs(30));
    fresh.tick().await.unwrap();
    let call = port.call_by_id(&orphan.id).await.unwrap().unwrap();
    assert_eq!(call.state, CallState::Interrupted);
    assert_eq!(call.reason.as_deref(), Some(REASON_PROCESS_GONE));
}

#[tokio::test]
async fn a_sole_process_restarting_interrupts_its_past_at_once() {
    let clock = ManualClock::new(T0);
    let port = FakePort::default();
    let old = broker(port.clone(), &clock, "life-1").await;
    let orphan = old.request(new_call("alice")).await.unwrap();
    drop(old);
    let mut config = BrokerConfig::new("life-2");
    config.sole_replica = true;
    let _new = Broker::start(port.clone(), Arc::new(clock.clone()), config).await.unwrap();
    let call = port.call_by_id(&orphan.id).await.unwrap().unwrap();
    assert_eq!(call.state, CallState::Interrupted);
    let outcome = Outcome { call };
    assert!(outcome.model_text().unwrap().contains("stopped before an answer came"));
}

#[tokio::test]
async fn a_previous_life_is_interrupted_even_with_a_fresh_heartbeat() {
    let clock = ManualClock::new(T0);
    let port = FakePort::default();
    let old = broker(port.clone(), &clock, "life-1").await;
    let orphan = old.request(new_call("alice")).await.unwrap();
    drop(old);
    let mut config = BrokerConfig::new("life-2");
    config.previous_lives = vec!["life-1".into()];
    let _new = Broker::start(port.clone(), Arc::new(clock.clone()), config).await.unwrap();
    assert_eq!(port.call_by_id(&orphan.id).await.unwrap().unwrap().state, CallState::Interrupted);
}

#[tokio::test]
async fn shutdown_interrupts_its_own_calls() {
    let clock = ManualClock::new(T0);
    let port = FakePort::default();
    let broker = broker(port.clone(), &clock, "r1").await;
    let call = broker.request(new_call("alice")).await.unwrap();
    broker.shutdown().await.unwrap();
    let call = port.call_by_id(&call.id).await.unwrap().unwrap();
    assert_eq!(call.state, CallState::Interrupted);
    assert_eq!(call.reason.as_deref(), Some(REASON_SHUTDOWN));
}

#[tokio::test]
async fn a_dropped_wait_interrupts_its_call() {
    let clock = ManualClock::new(T0);
    let port = FakePort::default();
    let broker = broker(port.clone(), &clock, "r1").await;
    let mut events = broker.subscribe("alice");
    let call = broker.request(new_call("alice")).await.unwrap();
    let _ = events.recv().await;
    let waiter = tokio::spawn({
        let broker = broker.clone();
        let id = call.id.clone();
        async move { broker.wait(&id).await }
    });
    tokio::task::yield_now().await;
    waiter.abort();
    assert_eq!(
        within(events.recv()).await.unwrap(),
        BrokerEvent::Interrupted { id: call.id.clone() }
    );
    let stored = port.call_by_id(&call.id).await.unwrap().unwrap();
    assert_eq!(stored.reason.as_deref(), Some(REASON_TURN_STOPPED));
}

#[tokio::test]
async fn always_allow_asks_the_store_for_a_grant() {
    let clock = ManualClock::new(T0);
    let port = FakePort::default();
    let broker = broker(port.clone(), &clock, "r1").await;
    let call = broker.request(new_call("alice")).await.unwrap();
    let result = broker.answer("alice", &call.id, "tab", AnswerChoice::AlwaysAllow).await.unwrap();
    let AnswerResult::Won { call: answered } = result else { panic!("{result:?}") };
    assert!(answered.remember);
    assert_eq!(port.lock().grants, vec![call.id.clone()]);
}

#[tokio::test]
async fn bots_run_unasked_but_recorded() {
    let clock = ManualClock::new(T0);
    let port = FakePort::default();
    let broker = broker(port.clone(), &clock, "r1").await;
    let mut events = broker.subscribe("alice");
    let call = broker.record_unasked(new_call("alice"), Unasked::Bot).await.unwrap();
    assert_eq!(call.state, CallState::Allowed);
    assert_eq!(call.answered_by.as_deref(), Some(ANSWERED_BY_BOT));
    assert_eq!(port.call_by_id(&call.id).await.unwrap().unwrap(), call);
    assert!(events.try_recv().is_err(), "no card for a call nobody is asked about");
    let remembered = broker
        .record_unasked(
            new_call("alice"),
            Unasked::Remembered(llooma_consent::AllowedBecause::Rule { rule_id: "r9".into() }),
        )
        .await
        .unwrap();
    assert_eq!(remembered.answered_by.as_deref(), Some(ANSWERED_BY_CONSENT));
    assert!(remembered.reason.unwrap().contains("r9"));
}

#[tokio::test]
async fn the_arguments_sent_are_the_ones_shown() {
    let clock = ManualClock::new(T0);
    let broker = broker(FakePort::default(), &clock, "r1").await;
    let call = broker.request(new_call("alice")).await.unwrap();
    // Same value, other key order and spacing: fine.
    Broker::<FakePort>::verify_arguments(&call, &json!({"dim": 0, "room": "kitchen"})).unwrap();
    assert_eq!(call.arguments().unwrap(), json!({"room": "kitchen", "dim": 0}));
    for tampered in [
        json!({"room": "kitchen", "dim": 1}),
        json!({"room": "kitchen"}),
        json!({"room": "kitchen", "dim": 0, "all": true}),
    ] {
        assert!(matches!(
            Broker::<FakePort>::verify_arguments(&call, &tampered),
            Err(BrokerError::ArgumentsChanged { .. })
        ));
    }
}

#[test]
fn notices_round_trip_through_their_payload() {
    let notice = Notice {
        call_id: "c".into(),
        account_id: "a".into(),
        state: CallState::Expired,
        origin: "r".into(),
    };
    assert_eq!(Notice::from_payload(&notice.to_payload()), Some(notice));
    assert_eq!(Notice::from_payload("garbage"), None);
    for state in CallState::ALL {
        assert_eq!(CallState::parse(state.as_str()), Some(state));
    }
}

#[tokio::test]
async fn a_question_is_answered_once_with_the_form_and_the_answer_is_then_forgotten() {
    let clock = ManualClock::new(T0);
    let port = FakePort::default();
    let b = broker(port.clone(), &clock, "replica-a").await;
    let asked =
        b.ask(new_call("alice"), r#"{"message":"Name?","fields":[]}"#.into()).await.unwrap();
    assert_eq!(asked.card().question, Some(serde_json::json!({"message": "Name?", "fields": []})));
    let waiter = tokio::spawn({
        let b = b.clone();
        let id = asked.id.clone();
        async move { b.wait(&id).await }
    });
    // Allow/refuse is for calls: a question says so and stays open.
    let wrong = b.answer("alice", &asked.id, "tab-1", AnswerChoice::Allow).await;
    assert!(matches!(wrong, Err(BrokerError::WrongAnswer(_))));
    let content = serde_json::json!({"name": "Ada"}).as_object().unwrap().clone();
    let accept = Reply::Accept { content: content.clone() };
    let first = b.reply("alice", &asked.id, "tab-1", &accept).await.unwrap();
    let second = b.reply("alice", &asked.id, "tab-2", &Reply::Decline).await.unwrap();
    assert!(matches!(first, AnswerResult::Won { .. }));
    assert!(matches!(second, AnswerResult::AlreadyAnswered { state: CallState::Allowed, .. }));
    let outcome = within(waiter).await.unwrap().unwrap();
    assert_eq!(outcome.reply(), Reply::Accept { content });
    b.forget_reply(&asked.id).await.unwrap();
    assert_eq!(port.call_by_id(&asked.id).await.unwrap().unwrap().reply_json, None);
    // Another account's question is not found, and a call's card takes no form.
    let call = b.request(new_call("alice")).await.unwrap();
    let as_bob = b.reply("bob", &asked.id, "tab-3", &Reply::Cancel).await.unwrap();
    assert_eq!(as_bob, AnswerResult::NotFound);
    let wrong = b.reply("alice", &call.id, "tab-1", &Reply::Decline).await;
    assert!(matches!(wrong, Err(BrokerError::WrongAnswer(_))));
}

#[tokio::test]
async fn an_unanswered_question_lapses_and_counts_as_cancelled() {
    let clock = ManualClock::new(T0);
    let b = broker(FakePort::default(), &clock, "replica-a").await;
    let asked = b.ask(new_call("alice"), "{}".into()).await.unwrap();
    let waiter = tokio::spawn({
        let b = b.clone();
        let id = asked.id.clone();
        async move { b.wait(&id).await }
    });
    tokio::task::yield_now().await;
    clock.advance(Duration::from_secs(121));
    let outcome = within(waiter).await.unwrap().unwrap();
    assert_eq!(outcome.state(), CallState::Expired);
    assert_eq!(outcome.reply(), Reply::Cancel);
}
