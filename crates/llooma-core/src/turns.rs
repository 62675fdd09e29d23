//! Turns as the application runs them: the ones running in this process (one per conversation,
//! each with its Stop), their event logs, and following a log live.
//!
//! A turn runs in the server, not in a tab: it keeps going through a reload, and every tab
//! watching the conversation follows the same log ([`App::follow`]: what it missed after a
//! position, then live). The log is in the database, so a tab connected to another replica sees
//! it too (within a second); in this process a written event is handed to the watching tabs
//! directly (one database write, no read per watcher).

use std::collections::{HashMap, VecDeque};
use std::pin::Pin;
use std::sync::{Arc, Mutex, MutexGuard, PoisonError};
use std::time::Duration;

use futures::Stream;
use llooma_store::{Engine, Store};
use llooma_types::{EncodedEvent, EndState, TurnEvent};
use tokio::sync::{broadcast, watch};

use crate::history_cache::HistoryCache;
use crate::{App, AppError, SinkError, TurnSink};

/// How often a watching tab re-reads the log without news from this process, when other
/// processes may write to it (Postgres: news from another replica arrives this way).
const RECHECK_SHARED: Duration = Duration::from_secs(1);
/// The same when this process is the only writer (SQLite): only a safety net.
const RECHECK_SOLE: Duration = Duration::from_secs(15);
/// How often a running turn looks whether a Stop was asked for through another replica.
const STOP_CHECK: Duration = Duration::from_secs(1);
/// Events read from the log at once.
const LOG_PAGE: u64 = 200;
/// Events a watching tab may fall behind by before it re-reads the log instead.
const NEWS_BUFFER: usize = 256;
/// Channels kept before those nobody listens to any more are cleared.
const NEWS_CHANNELS_KEPT: usize = 256;

/// One event of a conversation's log, as a watching tab receives it: its number (the SSE id)
/// and the event as it was encoded when it was written.
#[derive(Debug)]
pub struct LoggedEvent {
    pub seq: i64,
    pub kind: String,
    pub data_json: String,
}

/// The turns running in this process, and the events they write.
#[derive(Clone, Debug)]
pub struct Turns {
    /// This process's id (the approval broker's replica id): the owner of the turns it starts.
    pub(crate) replica_id: String,
    running: Arc<Mutex<HashMap<String, watch::Sender<bool>>>>,
    news: News,
    /// The messages of conversations that had a turn here lately.
    pub(crate) histories: HistoryCache,
}

/// News of each conversation's log, on a channel of its own: an event wakes only the tabs
/// watching that conversation, not every tab of the process.
#[derive(Clone, Debug, Default)]
struct News(Arc<Mutex<HashMap<String, broadcast::Sender<Arc<LoggedEvent>>>>>);

impl News {
    fn channels(&self) -> MutexGuard<'_, HashMap<String, broadcast::Sender<Arc<LoggedEvent>>>> {
        self.0.lock().unwrap_or_else(PoisonError::into_inner)
    }

    fn subscribe(&self, conversation_id: &str) -> broadcast::Receiver<Arc<LoggedEvent>> {
        let mut channels = self.channels();
        if channels.len() >= NEWS_CHANNELS_KEPT {
            channels.retain(|_, sender| sender.receiver_count() > 0);
        }
        match channels.get(conversation_id) {
            Some(sender) => sender.subscribe(),
            None => {
                let (sender, receiver) = broadcast::channel(NEWS_BUFFER);
                channels.insert(conversation_id.to_owned(), sender);
                receiver
            }
        }
    }

    /// Hands `logged` to the conversation's watching tabs in this process, if any.
    fn send(&self, conversation_id: &str, logged: LoggedEvent) {
        let mut channels = self.channels();
        if let Some(sender) = channels.get(conversation_id)
            && sender.send(Arc::new(logged)).is_err()
        {
            channels.remove(conversation_id); // nobody watches it any more
        }
    }
}

impl Turns {
    pub fn new(replica_id: impl Into<String>) -> Self {
        Turns {
            replica_id: replica_id.into(),
            running: Arc::default(),
            news: News::default(),
            histories: HistoryCache::default(),
        }
    }

    fn running(&self) -> MutexGuard<'_, HashMap<String, watch::Sender<bool>>> {
        self.running.lock().unwrap_or_else(PoisonError::into_inner)
    }

    /// Registers a turn of `conversation_id` running here; its Stop is the returned receiver,
    /// and the guard unregisters it (only it: a later turn's registration is left alone).
    pub(crate) fn register(
        &self,
        store: &Store,
        conversation_id: &str,
        turn_id: &str,
    ) -> (RunningTurn, watch::Receiver<bool>) {
        let (stop_tx, stop_rx) = watch::channel(false);
        // On SQLite this process is the instance's only one: a Stop can only come through it.
        if store.engine() == Engine::Postgres {
            tokio::spawn(watch_for_remote_stop(store.clone(), turn_id.to_owned(), stop_tx.clone()));
        }
        self.running().insert(conversation_id.to_owned(), stop_tx.clone());
        let running = RunningTurn {
            turns: self.clone(),
            conversation_id: conversation_id.to_owned(),
            stop: stop_tx,
        };
        (running, stop_rx)
    }

    /// Stops the conversation's turn if it runs in this process; whether it did.
    pub(crate) fn stop_here(&self, conversation_id: &str) -> bool {
        self.running().get(conversation_id).map(|stop| stop.send(true)).is_some()
    }

    /// The sink of a turn: its events go to the conversation's log and to this process's
    /// watching tabs.
    pub(crate) fn log_sink(&self, store: &Store, conversation_id: &str, turn_id: &str) -> LogSink {
        LogSink {
            store: store.clone(),
            news: self.news.clone(),
            conversation_id: conversation_id.to_owned(),
            turn_id: turn_id.to_owned(),
            held: Mutex::new(Vec::new()),
        }
    }
}

/// A turn registered as running in this process.
pub(crate) struct RunningTurn {
    turns: Turns,
    conversation_id: String,
    stop: watch::Sender<bool>,
}

impl RunningTurn {
    /// Unregisters the turn's Stop. Done before the turn ends: once it has, the next turn of
    /// the conversation may register its own.
    pub(crate) fn unregister(self) {
        let mut running = self.turns.running();
        if running.get(&self.conversation_id).is_some_and(|s| s.same_channel(&self.stop)) {
            running.remove(&self.conversation_id);
        }
    }
}

/// Records a turn's events in the conversation's log and hands each to this process's watchers.
pub(crate) struct LogSink {
    store: Store,
    news: News,
    conversation_id: String,
    turn_id: String,
    /// Events not written yet, in order, which go with the turn's next write, before what
    /// follows them: a `request` (what a request to the model weighed: nothing waits on it),
    /// and the turn's last text, written with `end` when the turn closes an instant later.
    held: Mutex<Vec<EncodedEvent>>,
}

impl LogSink {
    fn take_held(&self) -> Vec<EncodedEvent> {
        std::mem::take(&mut *self.held.lock().unwrap_or_else(PoisonError::into_inner))
    }

    fn hold(&self, event: EncodedEvent) {
        self.held.lock().unwrap_or_else(PoisonError::into_inner).push(event);
    }

    /// Writes `events` in order (two to a request) and hands them to the watching tabs.
    async fn write(&self, events: Vec<EncodedEvent>) -> Result<(), SinkError> {
        if events.is_empty() {
            return Ok(());
        }
        let seqs = self
            .store
            .append_events(&self.conversation_id, &self.turn_id, &events)
            .await
            .map_err(|e| SinkError(e.to_string()))?;
        for (seq, event) in seqs.into_iter().zip(events) {
            self.tell_watchers(seq, event);
        }
        Ok(())
    }

    /// Hands an event already in the log to this process's watching tabs.
    pub(crate) fn tell_watchers(&self, seq: i64, event: EncodedEvent) {
        self.news.send(
            &self.conversation_id,
            LoggedEvent { seq, kind: event.kind.to_owned(), data_json: event.data_json },
        );
    }

    /// Ends the turn in storage and logs `end` in the same write, so no tab sees `end` while
    /// the conversation still counts the turn as running.
    pub(crate) async fn end(&self, state: EndState, error: Option<&str>) -> Result<(), SinkError> {
        self.write(self.take_held()).await?;
        let (seq, end) = self
            .store
            .end_turn(&self.conversation_id, &self.turn_id, state, error)
            .await
            .map_err(|e| SinkError(e.to_string()))?;
        self.tell_watchers(seq, end);
        Ok(())
    }

    /// Ends the turn as [`LogSink::end`] does, storing `reply` (unless empty), the held events
    /// and what the turn's model requests `used` in the same write.
    pub(crate) async fn close(
        &self,
        reply: &str,
        ended: llooma_types::TurnEnded,
        error: Option<&str>,
        used: Option<&llooma_store::UsageRow>,
    ) -> Result<(), SinkError> {
        let held = self.take_held();
        let (conversation_id, turn_id) = (&self.conversation_id, &self.turn_id);
        let closed = self
            .store
            .close_turn_counted(conversation_id, turn_id, &held, reply, ended, error, used)
            .await
            .map_err(|e| SinkError(e.to_string()))?;
        for (seq, event) in closed.before_seqs.into_iter().zip(held) {
            self.tell_watchers(seq, event);
        }
        self.tell_watchers(closed.end_seq, closed.end);
        Ok(())
    }
}

impl TurnSink for LogSink {
    async fn event(&self, event: TurnEvent) -> Result<(), SinkError> {
        let holds = matches!(event, TurnEvent::Request(_));
        // Encoded once: the same text is stored and handed to every watching tab.
        let encoded = event.encode();
        let mut events = self.take_held();
        if holds {
            self.write(events).await?;
            self.hold(encoded);
            return Ok(());
        }
        events.push(encoded);
        self.write(events).await
    }

    /// Held, to be written with `end` ([`LogSink::close`]) an instant later, after a `request`
    /// still held.
    async fn last_event(&self, event: TurnEvent) -> Result<(), SinkError> {
        self.hold(event.encode());
        Ok(())
    }
}

/// Turns `stop` true when a Stop for this turn was recorded through another replica.
async fn watch_for_remote_stop(store: Store, turn_id: String, stop: watch::Sender<bool>) {
    loop {
        tokio::select! {
            () = tokio::time::sleep(STOP_CHECK) => {}
            () = stop.closed() => return,
        }
        if store.stop_requested(&turn_id).await.unwrap_or(false) {
            let _ = stop.send(true);
            return;
        }
    }
}

/// One watching tab: where it is in the log, and what it still has to send.
struct Watcher {
    conversation_id: String,
    after: i64,
    queue: VecDeque<Arc<LoggedEvent>>,
    /// The log must be read: at the start, after a gap, a lag, or a re-check.
    read_log: bool,
    news: broadcast::Receiver<Arc<LoggedEvent>>,
    stopping: watch::Receiver<bool>,
    store: Store,
    recheck: Duration,
    /// When the log is read again: `recheck` after the last news. One timer for the watcher's
    /// life, moved on only when it fires (to `recheck` after the news that came meanwhile): a
    /// timer made per wait was registered and dropped for every event, each time under the
    /// runtime's one timer lock, which the two workers then contended for.
    recheck_at: Pin<Box<tokio::time::Sleep>>,
    /// When news last came.
    last_news: tokio::time::Instant,
}

impl Watcher {
    /// The next event to send; `None` when the server is stopping.
    async fn next(&mut self) -> Option<Arc<LoggedEvent>> {
        loop {
            if let Some(event) = self.queue.pop_front() {
                return Some(event);
            }
            if self.read_log {
                // Boxed: a stream waiting for news (what thousands of open tabs do) holds this
                // future's state, and a database read's is many times the rest of it.
                let reading = self.store.events_after(&self.conversation_id, self.after, LOG_PAGE);
                match Box::pin(reading).await {
                    Ok(events) => {
                        // A full page may have more behind it: read again.
                        self.read_log = events.len() as u64 == LOG_PAGE;
                        for e in events {
                            self.after = e.seq;
                            let logged =
                                LoggedEvent { seq: e.seq, kind: e.kind, data_json: e.data_json };
                            self.queue.push_back(Arc::new(logged));
                        }
                    }
                    Err(err) => {
                        self.read_log = false;
                        tracing::warn!(error = %err, "reading a conversation's events failed");
                    }
                }
                continue;
            }
            tokio::select! {
                received = self.news.recv() => match received {
                    Ok(logged) => {
                        self.last_news = tokio::time::Instant::now();
                        if logged.seq == self.after + 1 {
                            self.after = logged.seq;
                            self.queue.push_back(logged);
                        } else if logged.seq > self.after + 1 {
                            self.read_log = true; // something came from elsewhere in between
                        }
                    }
                    Err(broadcast::error::RecvError::Lagged(_)) => self.read_log = true,
                    Err(broadcast::error::RecvError::Closed) => return None,
                },
                () = &mut self.recheck_at => {
                    let now = tokio::time::Instant::now();
                    let quiet_until = self.last_news + self.recheck;
                    if quiet_until > now {
                        self.recheck_at.as_mut().reset(quiet_until);
                    } else {
                        self.read_log = true;
                        self.recheck_at.as_mut().reset(now + self.recheck);
                    }
                }
                _ = self.stopping.wait_for(|s| *s) => return None,
            }
        }
    }
}

impl App {
    /// The account's conversation's log after `after`, then live, until the server stops.
    pub async fn follow(
        &self,
        account_id: &str,
        conversation_id: &str,
        after: i64,
    ) -> Result<impl Stream<Item = Arc<LoggedEvent>> + Send + use<>, AppError> {
        self.conversation(account_id, conversation_id).await?;
        let recheck = match self.store.engine() {
            Engine::Sqlite => RECHECK_SOLE,
            Engine::Postgres => RECHECK_SHARED,
        };
        // Subscribed before the first read, so nothing written in between is missed.
        let news = self.turns.news.subscribe(conversation_id);
        let watcher = Watcher {
            conversation_id: conversation_id.to_owned(),
            after: after.max(0),
            queue: VecDeque::new(),
            read_log: true,
            news,
            stopping: self.stopping.clone(),
            store: self.store.clone(),
            recheck,
            recheck_at: Box::pin(tokio::time::sleep(recheck)),
            last_news: tokio::time::Instant::now(),
        };
        Ok(futures::stream::unfold(watcher, |mut watcher| async move {
            let event = watcher.next().await?;
            Some((event, watcher))
        }))
    }

    /// Stops the running turn of the account's conversation: here at once, or through the
    /// database when another replica runs it (within a second).
    pub async fn stop_turn(&self, account_id: &str, conversation_id: &str) -> Result<(), AppError> {
        self.conversation(account_id, conversation_id).await?;
        if self.turns.stop_here(conversation_id) || self.store.request_stop(conversation_id).await?
        {
            return Ok(());
        }
        Err(AppError::conflict("no_running_turn", "No turn is running in this conversation."))
    }

    /// At the start of the only process of an instance (SQLite): the turns it was running died
    /// with its previous life; each is ended failed, with the reason in its log. How many.
    pub async fn fail_turns_of_previous_run(&self) -> Result<u64, AppError> {
        Ok(self
            .store
            .fail_running_turns("the server stopped while this reply was being written")
            .await?)
    }

    /// Runs until the server stops: ends the turns of replicas that stopped heartbeating
    /// (crashed, killed), so their conversations are not blocked behind a turn nobody runs. A
    /// replica heartbeats every 10 s and counts as gone after 30 s, as for the approval broker.
    pub async fn end_orphaned_turns(self) {
        let mut tick = tokio::time::interval(Duration::from_secs(10));
        let mut stopping = self.stopping.clone();
        loop {
            tokio::select! {
                _ = tick.tick() => {}
                _ = stopping.wait_for(|s| *s) => return,
            }
            let alive_since = llooma_store::now_ms() - 30_000;
            match self
                .store
                .fail_orphaned_turns(
                    alive_since,
                    "the server running this reply stopped before it ended",
                )
                .await
            {
                Ok(0) => {}
                Ok(ended) => tracing::warn!(ended, "ended the turns of a server that stopped"),
                Err(err) => {
                    tracing::warn!(error = %err, "looking for turns of stopped servers failed");
                }
            }
        }
    }
}
