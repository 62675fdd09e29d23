//! The broker: puts calls to the person, settles the first answer, wakes the waiting turn.

use std::collections::HashMap;
use std::sync::{Arc, Mutex, MutexGuard, PoisonError, Weak};
use std::time::Duration;

use llooma_consent::{AllowedBecause, canonical_arguments};
use serde_json::Value;
use tokio::sync::{broadcast, mpsc, watch};
use tokio::task::JoinHandle;

use crate::port::{AnswerUpdate, ApprovalPort, Orphans};
use crate::{
    ANSWERED_BY_BOT, ANSWERED_BY_CONSENT, AnswerChoice, AnswerResult, BrokerError, BrokerEvent,
    CallState, Clock, NewCall, Notice, Outcome, PendingCall, Reply,
};

/// One answer on its way to storage.
struct Answer<'a> {
    state: CallState,
    remember: bool,
    reply_json: Option<&'a str>,
    /// Whether it answers a server's question (else a call to allow).
    question: bool,
}

/// Why a call runs without a question.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Unasked {
    /// A bot whose owner ticked MCP in its tools.
    Bot,
    /// Remembered consent (a grant, a rule, or the allow-all mode).
    Remembered(AllowedBecause),
}

/// Tunables. [`BrokerConfig::new`] gives the product's values.
#[derive(Debug, Clone)]
pub struct BrokerConfig {
    /// This process's id, unique per start (a fresh UUID is right).
    pub replica_id: String,
    /// How long a question stands: two minutes.
    pub answer_window: Duration,
    /// How often a waiting turn re-reads its row in case a notice was lost: one second.
    pub recheck_every: Duration,
    /// How often this process writes its heartbeat and sweeps for orphans: ten seconds.
    pub heartbeat_every: Duration,
    /// A replica whose heartbeat is older than this is dead: thirty seconds.
    pub stale_after: Duration,
    /// True when this is the only process that can own calls (SQLite): at start-up every pending
    /// call not owned by this process is interrupted at once, without waiting for staleness.
    pub sole_replica: bool,
    /// Ids this process had in earlier lives (if it keeps them): their calls are interrupted at
    /// start-up even if their heartbeat still looks fresh.
    pub previous_lives: Vec<String>,
    /// Events kept per account for a slow watcher before it starts missing some.
    pub event_capacity: usize,
}

impl BrokerConfig {
    pub fn new(replica_id: impl Into<String>) -> Self {
        BrokerConfig {
            replica_id: replica_id.into(),
            answer_window: Duration::from_secs(120),
            recheck_every: Duration::from_secs(1),
            heartbeat_every: Duration::from_secs(10),
            stale_after: Duration::from_secs(30),
            sole_replica: false,
            previous_lives: Vec::new(),
            event_capacity: 64,
        }
    }
}

/// Reason stored on calls whose process stopped or crashed.
pub const REASON_PROCESS_GONE: &str =
    "the server process running this turn stopped before an answer came";
/// Reason stored on calls of a process that shut down cleanly.
pub const REASON_SHUTDOWN: &str = "the server was shut down before an answer came";
/// Reason stored when the turn that asked stopped waiting (cancelled, or its task ended).
pub const REASON_TURN_STOPPED: &str = "the turn that asked for it stopped";

fn ms(duration: Duration) -> i64 {
    i64::try_from(duration.as_millis()).unwrap_or(i64::MAX)
}

fn lock<T>(mutex: &Mutex<T>) -> MutexGuard<'_, T> {
    // The maps hold channels only; a panic elsewhere cannot leave them half-updated.
    mutex.lock().unwrap_or_else(PoisonError::into_inner)
}

/// The approval broker of one process. Cheap to clone.
#[derive(Debug)]
pub struct Broker<S: ApprovalPort> {
    inner: Arc<Inner<S>>,
}

impl<S: ApprovalPort> Clone for Broker<S> {
    fn clone(&self) -> Self {
        Broker { inner: Arc::clone(&self.inner) }
    }
}

#[derive(Debug)]
struct Inner<S> {
    port: S,
    clock: Arc<dyn Clock>,
    config: BrokerConfig,
    /// One wake-up channel per call some local task is waiting on. The counter only changes;
    /// waiters re-read the row when it does.
    waiters: Mutex<HashMap<String, watch::Sender<u64>>>,
    /// One broadcast channel per account some tab is watching.
    watchers: Mutex<HashMap<String, broadcast::Sender<BrokerEvent>>>,
    tasks: Mutex<Vec<JoinHandle<()>>>,
}

impl<S> Drop for Inner<S> {
    fn drop(&mut self) {
        for task in lock(&self.tasks).drain(..) {
            task.abort();
        }
    }
}

impl<S: ApprovalPort> Broker<S> {
    /// Starts the broker: writes the first heartbeat, interrupts the calls of dead processes,
    /// subscribes to the store's notices and starts the heartbeat and listener tasks. Must run
    /// inside a tokio runtime.
    pub async fn start(
        port: S,
        clock: Arc<dyn Clock>,
        config: BrokerConfig,
    ) -> Result<Self, BrokerError> {
        let inner = Arc::new(Inner {
            port,
            clock,
            config,
            waiters: Mutex::new(HashMap::new()),
            watchers: Mutex::new(HashMap::new()),
            tasks: Mutex::new(Vec::new()),
        });
        let now = inner.clock.now_ms();
        inner.port.heartbeat(&inner.config.replica_id, now).await?;
        // Subscribe before sweeping, so nothing another replica does from here on is missed.
        let notices = inner.port.notices().await?;
        inner.sweep(true).await?;

        let mut tasks = Vec::new();
        tasks.push(tokio::spawn(maintenance(Arc::downgrade(&inner))));
        match notices {
            Some(rx) => tasks.push(tokio::spawn(listen(Arc::downgrade(&inner), rx))),
            None => tracing::debug!(
                "no cross-process notifications on this engine; waiters rely on in-process \
                 wake-ups and the periodic re-check"
            ),
        }
        lock(&inner.tasks).extend(tasks);
        Ok(Broker { inner })
    }

    pub fn replica_id(&self) -> &str {
        &self.inner.config.replica_id
    }

    pub fn clock(&self) -> &Arc<dyn Clock> {
        &self.inner.clock
    }

    /// The storage behind the broker.
    pub fn port(&self) -> &S {
        &self.inner.port
    }

    /// Puts a call to the person: stores it as `pending` with its canonical arguments, a
    /// two-minute deadline and this process as owner, and shows the card to every watching tab
    /// of the account (on every replica).
    pub async fn request(&self, new: NewCall) -> Result<PendingCall, BrokerError> {
        let call = self.inner.build(new, CallState::Pending, None, None);
        self.inner.port.insert_call(&call).await?;
        self.inner.publish(&call.account_id, BrokerEvent::Appeared { card: Box::new(call.card()) });
        Ok(call)
    }

    /// Puts a server's question to the person, asked during the call `new` describes (which
    /// was allowed already): a card like a call's, with the same deadline, first-answer and
    /// replica rules, answered with [`Broker::reply`]. `question_json` is the form to show.
    pub async fn ask(
        &self,
        new: NewCall,
        question_json: String,
    ) -> Result<PendingCall, BrokerError> {
        let mut call = self.inner.build(new, CallState::Pending, None, None);
        call.question_json = Some(question_json);
        self.inner.port.insert_call(&call).await?;
        self.inner.publish(&call.account_id, BrokerEvent::Appeared { card: Box::new(call.card()) });
        Ok(call)
    }

    /// Drops a question's answer from storage once the waiting turn has it.
    pub async fn forget_reply(&self, call_id: &str) -> Result<(), BrokerError> {
        Ok(self.inner.port.forget_reply(call_id).await?)
    }

    /// Records a call that runs without a question (a ticked bot, remembered consent), already
    /// `allowed`, so every call leaves a row.
    pub async fn record_unasked(
        &self,
        new: NewCall,
        why: Unasked,
    ) -> Result<PendingCall, BrokerError> {
        let (by, reason) = match why {
            Unasked::Bot => (ANSWERED_BY_BOT, None),
            Unasked::Remembered(because) => (ANSWERED_BY_CONSENT, Some(because.to_string())),
        };
        let call = self.inner.build(new, CallState::Allowed, Some(by.to_owned()), reason);
        self.inner.port.insert_call(&call).await?;
        Ok(call)
    }

    /// Waits for the call's answer: woken at once by an answer on this process, by the store's
    /// notice for an answer on another, or by the periodic re-check if a notice was lost. At the
    /// deadline the call is expired by a conditional update; if that loses, the answer that won
    /// is returned.
    ///
    /// Dropping the future before it ends interrupts the call (the turn stopped waiting), so the
    /// card does not linger.
    pub async fn wait(&self, call_id: &str) -> Result<Outcome, BrokerError> {
        let mut slot = self.inner.register(call_id);
        let mut guard = self.abandon_guard(call_id);
        let result = self.inner.wait_for(call_id, &mut slot).await;
        guard.disarm();
        result
    }

    /// A guard that interrupts `call_id` when dropped before it is disarmed. Take it right
    /// after [`Broker::request`] when the caller can be cancelled before [`Broker::wait`] ends.
    pub fn abandon_guard(&self, call_id: &str) -> AbandonGuard<S> {
        AbandonGuard { broker: Some(self.clone()), call_id: call_id.to_owned() }
    }

    /// A person's answer to a call. Exactly one answer to a call wins; the others learn which
    /// did. A server's question is answered with [`Broker::reply`] instead.
    pub async fn answer(
        &self,
        account_id: &str,
        call_id: &str,
        session_id: &str,
        choice: AnswerChoice,
    ) -> Result<AnswerResult, BrokerError> {
        let state = match choice {
            AnswerChoice::Refuse => CallState::Refused,
            AnswerChoice::Allow | AnswerChoice::AlwaysAllow => CallState::Allowed,
        };
        let answer = Answer {
            state,
            remember: choice == AnswerChoice::AlwaysAllow,
            reply_json: None,
            question: false,
        };
        self.settle_answer(account_id, call_id, session_id, answer).await
    }

    /// A person's answer to a server's question: the same race as [`Broker::answer`].
    pub async fn reply(
        &self,
        account_id: &str,
        call_id: &str,
        session_id: &str,
        reply: &Reply,
    ) -> Result<AnswerResult, BrokerError> {
        let json = serde_json::to_string(reply).unwrap_or_default();
        let answer = Answer {
            state: reply.state(),
            remember: false,
            reply_json: Some(&json),
            question: true,
        };
        self.settle_answer(account_id, call_id, session_id, answer).await
    }

    async fn settle_answer(
        &self,
        account_id: &str,
        call_id: &str,
        session_id: &str,
        answer: Answer<'_>,
    ) -> Result<AnswerResult, BrokerError> {
        let inner = &self.inner;
        let now = inner.clock.now_ms();
        let state = answer.state;
        let won = inner
            .port
            .answer_call(AnswerUpdate {
                call_id,
                account_id,
                state,
                by_session: session_id,
                at_ms: now,
                remember: answer.remember,
                origin: &inner.config.replica_id,
                reply_json: answer.reply_json,
                question: answer.question,
            })
            .await?;
        if won {
            inner.wake(call_id);
            inner.publish(account_id, BrokerEvent::Answered { id: call_id.to_owned(), state });
        }
        let Some(mut call) =
            inner.port.call_by_id(call_id).await?.filter(|c| c.account_id == account_id)
        else {
            return Ok(AnswerResult::NotFound);
        };
        if won {
            return Ok(AnswerResult::Won { call: Box::new(call) });
        }
        // It did not win: perhaps it was the wrong kind of answer (a card's kind never changes,
        // so this read races with nothing).
        match (call.question_json.is_some(), answer.question) {
            (true, false) => {
                return Err(BrokerError::WrongAnswer(
                    "this card is a server's question: answer it with accept (and the form's \
                     values), decline or cancel",
                ));
            }
            (false, true) => {
                return Err(BrokerError::WrongAnswer(
                    "this card is a call to allow: answer it with allow, refuse or always_allow",
                ));
            }
            _ => {}
        }
        if call.state == CallState::Pending && now >= call.deadline_ms {
            // Too late, and the waiter has not settled it yet: settle it now, so the person is
            // told "expired" rather than a state that is about to change.
            if inner.port.expire_call(call_id, now, &inner.config.replica_id).await? {
                inner.wake(call_id);
                inner.publish(account_id, BrokerEvent::Expired { id: call_id.to_owned() });
            }
            if let Some(settled) = inner.port.call_by_id(call_id).await? {
                call = settled;
            }
        }
        Ok(AnswerResult::AlreadyAnswered {
            state: call.state,
            answered_at_ms: call.answered_at_ms,
            by_session: call.answered_by,
        })
    }

    /// The account's calls still waiting for an answer (for a reloaded page).
    pub async fn pending_for_account(
        &self,
        account_id: &str,
    ) -> Result<Vec<PendingCall>, BrokerError> {
        let now = self.inner.clock.now_ms();
        let mut calls = self.inner.port.pending_for_account(account_id).await?;
        calls.retain(|call| call.deadline_ms > now);
        Ok(calls)
    }

    /// Events of one account: cards appearing and being settled, from every replica.
    pub fn subscribe(&self, account_id: &str) -> broadcast::Receiver<BrokerEvent> {
        lock(&self.inner.watchers)
            .entry(account_id.to_owned())
            .or_insert_with(|| broadcast::channel(self.inner.config.event_capacity.max(1)).0)
            .subscribe()
    }

    /// Interrupts a pending call (the turn was cancelled). `false` if it was already settled.
    pub async fn interrupt(&self, call_id: &str, reason: &str) -> Result<bool, BrokerError> {
        self.inner.interrupt(call_id, reason).await
    }

    /// Checks that the arguments about to be sent are the ones the person was shown.
    pub fn verify_arguments(call: &PendingCall, sending: &Value) -> Result<(), BrokerError> {
        let (_, hash) = canonical_arguments(sending);
        if hash == call.arguments_sha256 {
            Ok(())
        } else {
            Err(BrokerError::ArgumentsChanged {
                shown: call.arguments_sha256.clone(),
                sending: hash,
            })
        }
    }

    /// One round of the periodic work (heartbeat, orphan and overdue sweep), now, instead of
    /// waiting for the timer. The timer task runs it every `heartbeat_every`.
    pub async fn tick(&self) -> Result<(), BrokerError> {
        self.inner.tick().await
    }

    /// Clean stop: interrupts this process's pending calls, forgets its heartbeat, stops the
    /// background tasks.
    pub async fn shutdown(&self) -> Result<(), BrokerError> {
        let inner = &self.inner;
        for task in lock(&inner.tasks).drain(..) {
            task.abort();
        }
        let me = [inner.config.replica_id.clone()];
        let notices = inner
            .port
            .interrupt_orphans(
                Orphans::OwnedBy { owners: &me },
                inner.clock.now_ms(),
                REASON_SHUTDOWN,
                &inner.config.replica_id,
            )
            .await?;
        inner.deliver_local(&notices);
        inner.port.retire_replica(&inner.config.replica_id).await?;
        Ok(())
    }

    /// How many local tasks are waiting and how many accounts are watched (for metrics).
    pub fn local_counts(&self) -> (usize, usize) {
        (lock(&self.inner.waiters).len(), lock(&self.inner.watchers).len())
    }
}

impl<S: ApprovalPort> Inner<S> {
    fn build(
        &self,
        new: NewCall,
        state: CallState,
        answered_by: Option<String>,
        reason: Option<String>,
    ) -> PendingCall {
        let now = self.clock.now_ms();
        let (arguments_json, arguments_sha256) = canonical_arguments(&new.arguments);
        let answered_at_ms = answered_by.as_ref().map(|_| now);
        PendingCall {
            // Increasing in this process: the cards of calls made in the same millisecond (one
            // round's calls) keep the order the model made them in.
            id: uuid::Uuid::now_v7().to_string(),
            account_id: new.account_id,
            conversation_id: new.conversation_id,
            turn_id: new.turn_id,
            server_id: new.server_id,
            server_label: new.server_label,
            server_address: new.server_address,
            tool_name: new.tool_name,
            model_tool_name: new.model_tool_name,
            tool_description: new.tool_description,
            tool_hints_json: new.tool_hints_json,
            question_json: None,
            reply_json: None,
            tool_definition_hash: new.tool_definition_hash,
            arguments_json,
            arguments_sha256,
            created_at_ms: now,
            deadline_ms: now.saturating_add(ms(self.config.answer_window)),
            state,
            answered_by,
            answered_at_ms,
            remember: false,
            reason,
            owner_replica: self.config.replica_id.clone(),
        }
    }

    fn register(&self, call_id: &str) -> WaitSlot<'_, S> {
        let rx = lock(&self.waiters)
            .entry(call_id.to_owned())
            .or_insert_with(|| watch::Sender::new(0))
            .subscribe();
        WaitSlot { inner: self, call_id: call_id.to_owned(), rx: Some(rx) }
    }

    fn wake(&self, call_id: &str) {
        if let Some(tx) = lock(&self.waiters).get(call_id) {
            tx.send_modify(|n| *n = n.wrapping_add(1));
        }
    }

    fn publish(&self, account_id: &str, event: BrokerEvent) {
        let mut watchers = lock(&self.watchers);
        if let Some(tx) = watchers.get(account_id)
            && tx.send(event).is_err()
        {
            // Nobody listens any more: forget the channel until a tab subscribes again.
            watchers.remove(account_id);
        }
    }

    fn is_watched(&self, account_id: &str) -> bool {
        lock(&self.watchers).get(account_id).is_some_and(|tx| tx.receiver_count() > 0)
    }

    /// Wakes local waiters and tells local watchers about changes this process made.
    fn deliver_local(&self, notices: &[Notice]) {
        for notice in notices {
            self.wake(&notice.call_id);
            if let Some(event) = settled_event(notice) {
                self.publish(&notice.account_id, event);
            }
        }
    }

    async fn wait_for(
        &self,
        call_id: &str,
        slot: &mut WaitSlot<'_, S>,
    ) -> Result<Outcome, BrokerError> {
        let recheck = ms(self.config.recheck_every).max(1);
        loop {
            // Storage futures are boxed: a waiter spends nearly all its life parked, and an
            // inlined database future would make every parked waiter as large as the biggest
            // query state (kilobytes) instead of a pointer.
            let call =
                Box::pin(self.port.call_by_id(call_id)).await?.ok_or(BrokerError::NotFound)?;
            if call.state.is_final() {
                return Ok(Outcome { call });
            }
            let now = self.clock.now_ms();
            let mut wake_at = now.saturating_add(recheck).min(call.deadline_ms);
            if now >= call.deadline_ms {
                if Box::pin(self.port.expire_call(call_id, now, &self.config.replica_id)).await? {
                    self.wake(call_id);
                    self.publish(&call.account_id, BrokerEvent::Expired { id: call_id.to_owned() });
                    continue;
                }
                // Lost to an answer that came first: the next read returns it. Should the row
                // still read as pending (it cannot, short of a broken store), do not spin.
                match Box::pin(self.port.call_by_id(call_id)).await? {
                    Some(call) if call.state.is_final() => return Ok(Outcome { call }),
                    _ => wake_at = now.saturating_add(recheck),
                }
            }
            slot.changed_or(self.clock.sleep_until(wake_at)).await;
        }
    }

    async fn interrupt(&self, call_id: &str, reason: &str) -> Result<bool, BrokerError> {
        let now = self.clock.now_ms();
        let changed =
            self.port.interrupt_call(call_id, now, reason, &self.config.replica_id).await?;
        if changed {
            self.wake(call_id);
            if let Some(call) = self.port.call_by_id(call_id).await? {
                self.publish(&call.account_id, BrokerEvent::Interrupted { id: call.id });
            }
        }
        Ok(changed)
    }

    async fn tick(&self) -> Result<(), BrokerError> {
        let now = self.clock.now_ms();
        self.port.heartbeat(&self.config.replica_id, now).await?;
        self.sweep(false).await
    }

    /// Interrupts the calls of dead processes and expires overdue calls nobody is waiting on.
    async fn sweep(&self, starting: bool) -> Result<(), BrokerError> {
        let now = self.clock.now_ms();
        let me = self.config.replica_id.as_str();
        let mut changed = Vec::new();
        let which = if starting && self.config.sole_replica {
            Orphans::AllExcept { me }
        } else {
            Orphans::NotAlive {
                me,
                alive_since_ms: now.saturating_sub(ms(self.config.stale_after)),
            }
        };
        changed.extend(self.port.interrupt_orphans(which, now, REASON_PROCESS_GONE, me).await?);
        if starting && !self.config.previous_lives.is_empty() {
            let owners = &self.config.previous_lives;
            changed.extend(
                self.port
                    .interrupt_orphans(Orphans::OwnedBy { owners }, now, REASON_PROCESS_GONE, me)
                    .await?,
            );
        }
        changed.extend(self.port.expire_overdue(now, me).await?);
        if !changed.is_empty() {
            tracing::info!(count = changed.len(), "settled approval calls left without an answer");
        }
        self.deliver_local(&changed);
        Ok(())
    }

    /// A notice from the store. Our own changes were delivered when made; others' are relayed.
    async fn relay(&self, notice: Notice) {
        if notice.origin == self.config.replica_id {
            return;
        }
        self.wake(&notice.call_id);
        let event = match settled_event(&notice) {
            Some(event) => event,
            None => {
                // A card appeared on another replica. Load it only if a tab here is watching.
                if !self.is_watched(&notice.account_id) {
                    return;
                }
                match self.port.call_by_id(&notice.call_id).await {
                    Ok(Some(call)) if call.state == CallState::Pending => {
                        BrokerEvent::Appeared { card: Box::new(call.card()) }
                    }
                    Ok(_) => return,
                    Err(err) => {
                        tracing::warn!(error = %err, "could not load a call another replica announced");
                        return;
                    }
                }
            }
        };
        self.publish(&notice.account_id, event);
    }
}

/// The watcher event for a settled state (`None` for `pending`).
fn settled_event(notice: &Notice) -> Option<BrokerEvent> {
    let id = notice.call_id.clone();
    match notice.state {
        CallState::Pending => None,
        CallState::Allowed | CallState::Refused => {
            Some(BrokerEvent::Answered { id, state: notice.state })
        }
        CallState::Expired => Some(BrokerEvent::Expired { id }),
        CallState::Interrupted => Some(BrokerEvent::Interrupted { id }),
    }
}

/// A local waiter's registration; removes the call's wake-up channel with its last waiter.
struct WaitSlot<'a, S> {
    inner: &'a Inner<S>,
    call_id: String,
    rx: Option<watch::Receiver<u64>>,
}

impl<S> WaitSlot<'_, S> {
    /// Returns when the call is woken or `timer` ends, whichever is first.
    async fn changed_or(&mut self, timer: crate::clock::Sleep<'_>) {
        match self.rx.as_mut() {
            Some(rx) => {
                tokio::select! {
                    // An error means the sender is gone, which cannot happen while this slot
                    // holds a receiver; the timer still bounds the wait either way.
                    _ = rx.changed() => {}
                    () = timer => {}
                }
            }
            None => timer.await,
        }
    }
}

impl<S> Drop for WaitSlot<'_, S> {
    fn drop(&mut self) {
        drop(self.rx.take());
        let mut waiters = lock(&self.inner.waiters);
        if waiters.get(&self.call_id).is_some_and(|tx| tx.receiver_count() == 0) {
            waiters.remove(&self.call_id);
        }
    }
}

/// Interrupts the call (the card is withdrawn everywhere) if dropped before [`disarm`]: a turn
/// cancelled between `request` and the end of `wait` must not leave a card standing.
///
/// [`disarm`]: AbandonGuard::disarm
#[derive(Debug)]
#[must_use = "dropping the guard at once withdraws the card"]
pub struct AbandonGuard<S: ApprovalPort> {
    broker: Option<Broker<S>>,
    call_id: String,
}

impl<S: ApprovalPort> AbandonGuard<S> {
    /// The call reached an end (or was handed on): dropping the guard no longer interrupts it.
    pub fn disarm(&mut self) {
        self.broker = None;
    }
}

impl<S: ApprovalPort> Drop for AbandonGuard<S> {
    fn drop(&mut self) {
        let Some(broker) = self.broker.take() else { return };
        let Ok(runtime) = tokio::runtime::Handle::try_current() else { return };
        let call_id = std::mem::take(&mut self.call_id);
        runtime.spawn(async move {
            if let Err(err) = broker.interrupt(&call_id, REASON_TURN_STOPPED).await {
                tracing::warn!(error = %err, "could not interrupt an abandoned approval call");
            }
        });
    }
}

async fn maintenance<S: ApprovalPort>(inner: Weak<Inner<S>>) {
    loop {
        let (clock, next) = match inner.upgrade() {
            Some(inner) => {
                let next = inner.clock.now_ms().saturating_add(ms(inner.config.heartbeat_every));
                (Arc::clone(&inner.clock), next)
            }
            None => return,
        };
        clock.sleep_until(next).await;
        let Some(inner) = inner.upgrade() else { return };
        if let Err(err) = inner.tick().await {
            tracing::warn!(error = %err, "approval broker heartbeat failed; retrying");
        }
    }
}

async fn listen<S: ApprovalPort>(inner: Weak<Inner<S>>, mut notices: mpsc::Receiver<Notice>) {
    while let Some(notice) = notices.recv().await {
        let Some(inner) = inner.upgrade() else { return };
        inner.relay(notice).await;
    }
    tracing::warn!(
        "the approval notification source ended; answers from other replicas now arrive through \
         the periodic re-check"
    );
}
