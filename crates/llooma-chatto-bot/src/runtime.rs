//! The polling runtime: which integrations this replica polls, how often, and what it does when
//! the chat server fails. Storage, the lease and the model are ports ([`RuntimePort`]) that the
//! server implements; everything Chatto-specific stays in this crate.
//!
//! One supervisor per process lists the integrations that should run, claims the lease of each
//! one nobody holds (a single conditional update in the database, so exactly one replica polls
//! an integration) and starts a poller for it. A poller renews its lease while it works and
//! stops the moment it loses it; a replica that stops renewing (crashed, cut off) loses its
//! leases when they expire and another replica takes over.
//!
//! Failures: the server unreachable → back off exponentially (to five minutes) and say so;
//! `resource_exhausted` → slow down (retry the interrupted posts later); a revoked key, a missing
//! permission or a blocked address → pause with the reason, until the person changes something.

use std::collections::HashMap;
use std::future::Future;
use std::sync::Arc;
use std::time::Duration;

use llooma_net::NetClient;
use llooma_vault::Secret;
use tokio::sync::watch;
use tokio::task::JoinHandle;

use crate::chat::{ActivationLedger, ErrorAction, OutgoingPost, Responder, ServerError};
use crate::tick::{BotSettings, Follow, Outcome, Stopped, post_all, run_tick};
use crate::{ChattoClient, ChattoServer};

/// Longest pause between two polls of a server that keeps failing.
const MAX_BACKOFF: Duration = Duration::from_secs(300);

/// One integration as the runtime needs it.
#[derive(Clone)]
pub struct IntegrationSpec {
    /// Its id in storage.
    pub id: String,
    /// The chat server's base address.
    pub address: String,
    /// The bot's API key.
    pub key: Secret,
    /// Context, placement and the id the ledger uses.
    pub settings: BotSettings,
    /// Changes whenever anything above changes: a poller of another version is restarted.
    pub version: i64,
}

impl std::fmt::Debug for IntegrationSpec {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("IntegrationSpec")
            .field("id", &self.id)
            .field("address", &self.address)
            .field("version", &self.version)
            .finish_non_exhaustive()
    }
}

/// How an integration is doing, as its card shows it.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum RunState {
    /// Polling normally.
    Running,
    /// The chat server is unreachable or failing: retrying with growing pauses.
    BackingOff,
    /// The chat server asked to slow down: retrying later.
    SlowedDown,
    /// A person must act (key, permission, address); nothing runs until the integration changes.
    Paused,
}

impl RunState {
    /// The word stored and sent over the API.
    pub fn as_str(self) -> &'static str {
        match self {
            RunState::Running => "running",
            RunState::BackingOff => "backing_off",
            RunState::SlowedDown => "slowed_down",
            RunState::Paused => "paused",
        }
    }
}

/// What a poller reports (written only when it changes).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct RunReport {
    /// The state.
    pub state: RunState,
    /// The latest problem, in words a person can act on.
    pub error: Option<String>,
    /// The permission the bot most likely lacks.
    pub missing_permission: Option<String>,
}

/// What the runtime needs from the rest of the server.
pub trait RuntimePort: Send + Sync + 'static {
    /// Storage errors.
    type Error: std::error::Error + Send + Sync + 'static;
    /// The activation ledger.
    type Ledger: ActivationLedger + 'static;
    /// The model behind one integration.
    type Responder: Responder + 'static;

    /// Every integration that should be polled now (switched on, not paused, a model chosen).
    fn runnable(&self) -> impl Future<Output = Result<Vec<IntegrationSpec>, Self::Error>> + Send;

    /// Claims or renews the lease of `id` for `holder`, for `ttl`. `true` when `holder` holds it.
    fn claim_lease(
        &self,
        id: &str,
        holder: &str,
        ttl: Duration,
    ) -> impl Future<Output = Result<bool, Self::Error>> + Send;

    /// Gives the lease back.
    fn release_lease(
        &self,
        id: &str,
        holder: &str,
    ) -> impl Future<Output = Result<(), Self::Error>> + Send;

    /// Records how the integration is doing (for its card).
    fn report(
        &self,
        spec: &IntegrationSpec,
        report: &RunReport,
    ) -> impl Future<Output = Result<(), Self::Error>> + Send;

    /// The ledger.
    fn ledger(&self) -> &Self::Ledger;

    /// The model of an integration (cheap: the model is reached only when asked).
    fn responder(&self, spec: &IntegrationSpec) -> Self::Responder;
}

/// Tunables.
#[derive(Debug, Clone)]
pub struct RuntimeConfig {
    /// How often each integration is polled: five seconds by default.
    pub poll_every: Duration,
    /// How long a lease lasts without renewal (six polls): after that another replica takes over.
    pub lease_ttl: Duration,
    /// How long to wait after the chat server asked to slow down.
    pub slow_down: Duration,
    /// This process's id (the lease holder).
    pub replica_id: String,
}

impl RuntimeConfig {
    /// The product's values around a poll interval.
    pub fn new(poll_every: Duration, replica_id: impl Into<String>) -> Self {
        let poll_every = poll_every.max(Duration::from_millis(100));
        RuntimeConfig {
            poll_every,
            lease_ttl: poll_every.saturating_mul(6),
            slow_down: poll_every.saturating_mul(6),
            replica_id: replica_id.into(),
        }
    }
}

struct Poller {
    version: i64,
    task: JoinHandle<()>,
}

/// Runs until `stop` turns true: polls every integration this replica holds the lease of. On
/// stop, pollers end and their leases are given back, so another replica takes over at once.
pub async fn run<P: RuntimePort>(
    port: Arc<P>,
    net: NetClient,
    config: RuntimeConfig,
    mut stop: watch::Receiver<bool>,
) {
    let mut pollers: HashMap<String, Poller> = HashMap::new();
    let holder = config.replica_id.clone();
    loop {
        if *stop.borrow() {
            break;
        }
        match port.runnable().await {
            Ok(specs) => {
                let mut gone = Vec::new();
                pollers.retain(|id, poller| {
                    let current = specs.iter().any(|s| &s.id == id && s.version == poller.version);
                    let keep = current && !poller.task.is_finished();
                    if !keep {
                        poller.task.abort();
                        gone.push(id.clone());
                    }
                    keep
                });
                for id in gone {
                    if let Err(err) = port.release_lease(&id, &holder).await {
                        tracing::debug!(error = %err, "could not give a bot's lease back");
                    }
                }
                for spec in specs {
                    if pollers.contains_key(&spec.id) {
                        continue;
                    }
                    match port.claim_lease(&spec.id, &holder, config.lease_ttl).await {
                        Ok(true) => {
                            tracing::info!(integration = %spec.id, "polling a bot integration");
                            let version = spec.version;
                            let id = spec.id.clone();
                            let task = tokio::spawn(poll_integration(
                                port.clone(),
                                net.clone(),
                                config.clone(),
                                spec,
                                stop.clone(),
                            ));
                            pollers.insert(id, Poller { version, task });
                        }
                        Ok(false) => {}
                        Err(err) => tracing::warn!(error = %err, "could not claim a bot's lease"),
                    }
                }
            }
            Err(err) => tracing::warn!(error = %err, "could not list bot integrations"),
        }
        tokio::select! {
            () = tokio::time::sleep(config.poll_every) => {}
            () = stopped(&mut stop) => break,
        }
    }
    for (id, poller) in pollers {
        poller.task.abort();
        let _ = poller.task.await;
        if let Err(err) = port.release_lease(&id, &holder).await {
            tracing::debug!(error = %err, "could not give a bot's lease back");
        }
    }
}

/// What one round of a poller decided.
enum Next {
    /// Wait this long, then poll again.
    Wait(Duration),
    /// Paused: the poller ends.
    End,
}

struct PollerState<P: RuntimePort> {
    port: Arc<P>,
    net: NetClient,
    config: RuntimeConfig,
    spec: IntegrationSpec,
    server: Option<ChattoServer>,
    responder: P::Responder,
    /// Answers whose posting was interrupted (slow mode, network): their remaining parts are
    /// sent before anything else, in order, then their thread followed. Kept in memory only:
    /// the activation is recorded, so after a restart they are lost rather than sent twice.
    unsent: Vec<Unsent>,
    failures: u32,
    reported: Option<RunReport>,
}

/// What is left of an interrupted answer.
struct Unsent {
    /// Parts not yet posted, in order.
    posts: Vec<OutgoingPost>,
    /// The thread to follow once the last of them is posted.
    follow: Option<Follow>,
}

async fn poll_integration<P: RuntimePort>(
    port: Arc<P>,
    net: NetClient,
    config: RuntimeConfig,
    spec: IntegrationSpec,
    mut stop: watch::Receiver<bool>,
) {
    let responder = port.responder(&spec);
    let mut state = PollerState {
        port,
        net,
        config,
        spec,
        server: None,
        responder,
        unsent: Vec::new(),
        failures: 0,
        reported: None,
    };
    let port = state.port.clone();
    let id = state.spec.id.clone();
    let config = state.config.clone();
    loop {
        if *stop.borrow() {
            return;
        }
        // The round runs while the lease is renewed; losing the lease drops the round at once.
        // The renewal is a future of its own, polled beside the round, never awaited in a branch
        // of the select: the round may hold the database's only connection (SQLite) mid-query,
        // and a renewal waiting for it while the round is not polled would wait until the pool
        // gives up.
        let next = {
            let round = state.round();
            let renewal = keep_lease(&port, &id, &config);
            tokio::select! {
                next = round => Some(next),
                () = renewal => None,
                () = stopped(&mut stop) => return,
            }
        };
        let Some(next) = next else {
            tracing::info!(integration = %id, "another replica polls this bot now");
            return;
        };
        let wait = match next {
            Next::End => return,
            Next::Wait(wait) => wait,
        };
        tokio::select! {
            () = tokio::time::sleep(wait) => {}
            () = stopped(&mut stop) => return,
        }
        if !state_claim(&port, &id, &config).await {
            tracing::info!(integration = %id, "another replica polls this bot now");
            return;
        }
    }
}

/// Returns once `stop` is true (the guard `wait_for` hands out is not `Send`, so it is dropped
/// here).
async fn stopped(stop: &mut watch::Receiver<bool>) {
    let _ = stop.wait_for(|s| *s).await;
}

/// Renews the lease every third of its life; returns when another replica holds it.
async fn keep_lease<P: RuntimePort>(port: &Arc<P>, id: &str, config: &RuntimeConfig) {
    let mut renew = tokio::time::interval(config.lease_ttl / 3);
    renew.tick().await;
    loop {
        renew.tick().await;
        if !state_claim(port, id, config).await {
            return;
        }
    }
}

async fn state_claim<P: RuntimePort>(port: &Arc<P>, id: &str, config: &RuntimeConfig) -> bool {
    match port.claim_lease(id, &config.replica_id, config.lease_ttl).await {
        Ok(held) => held,
        Err(err) => {
            // The database is away: keep going on the lease we have; it expires on its own if
            // this lasts, and then whoever can reach the database takes over.
            tracing::warn!(error = %err, "could not renew a bot's lease");
            true
        }
    }
}

impl<P: RuntimePort> PollerState<P> {
    async fn round(&mut self) -> Next {
        if self.server.is_none() {
            let connected = match ChattoClient::new(
                self.net.clone(),
                &self.spec.address,
                self.spec.key.clone(),
            ) {
                Ok(client) => ChattoServer::connect(client).await,
                Err(err) => Err(err),
            };
            match connected {
                Ok(server) => self.server = Some(server),
                Err(err) => return self.failed(stopped_by(&err)).await,
            }
        }
        let Some(server) = self.server.as_ref() else { return Next::Wait(self.config.poll_every) };
        while let Some(unsent) = self.unsent.first_mut() {
            match post_all(server, &unsent.posts, unsent.follow.as_ref()).await {
                Ok(_) => {
                    self.unsent.remove(0);
                }
                Err(interrupted) => {
                    unsent.posts = interrupted.remaining;
                    return self.failed(stopped_by(&interrupted.error)).await;
                }
            }
        }
        let report = run_tick(
            server,
            self.port.ledger(),
            &self.responder,
            &self.spec.settings,
            chrono::Utc::now(),
        )
        .await;
        let mut model_error = None;
        let mut answered = false;
        for handled in report.handled {
            match handled.outcome {
                Outcome::PostInterrupted { remaining, follow, .. } => {
                    self.unsent.push(Unsent { posts: remaining, follow });
                }
                Outcome::ModelFailed { error } => {
                    tracing::warn!(integration = %self.spec.id, %error, "the bot's model failed");
                    model_error = Some(format!("The model failed to answer: {error}"));
                }
                Outcome::Answered { posted, .. } => {
                    answered = true;
                    tracing::info!(integration = %self.spec.id, parts = posted.len(), "bot answered");
                }
                Outcome::Dropped(why) => {
                    tracing::info!(integration = %self.spec.id, ?why, "bot activation dropped");
                }
                Outcome::AlreadyAnswered | Outcome::Gone => {}
            }
        }
        match report.stopped {
            Some(stopped) => self.failed(stopped).await,
            None => {
                self.failures = 0;
                // A model failure stays on the card until the next answer.
                let error = match model_error {
                    Some(error) => Some(error),
                    None if answered => None,
                    None => self
                        .reported
                        .as_ref()
                        .filter(|r| r.state == RunState::Running)
                        .and_then(|r| r.error.clone()),
                };
                self.report(RunState::Running, error, None).await;
                Next::Wait(self.config.poll_every)
            }
        }
    }

    async fn failed(&mut self, stopped: Stopped) -> Next {
        match stopped.action {
            ErrorAction::Pause => {
                tracing::warn!(integration = %self.spec.id, reason = %stopped.reason, "bot paused");
                self.report(RunState::Paused, Some(stopped.reason), stopped.missing_permission)
                    .await;
                Next::End
            }
            ErrorAction::RetryLater => {
                self.report(RunState::SlowedDown, Some(stopped.reason), None).await;
                Next::Wait(self.config.slow_down)
            }
            ErrorAction::BackOff | ErrorAction::Skip => {
                self.failures = self.failures.saturating_add(1);
                // A new connection next time: the server may have changed who the bot is.
                self.server = None;
                let factor = 2u32.saturating_pow(self.failures.min(16));
                let wait = self.config.poll_every.saturating_mul(factor).min(MAX_BACKOFF);
                tracing::warn!(integration = %self.spec.id, reason = %stopped.reason, ?wait, "bot backing off");
                self.report(RunState::BackingOff, Some(stopped.reason), None).await;
                Next::Wait(wait)
            }
        }
    }

    async fn report(
        &mut self,
        state: RunState,
        error: Option<String>,
        missing_permission: Option<String>,
    ) {
        let report = RunReport { state, error, missing_permission };
        if self.reported.as_ref() == Some(&report) {
            return;
        }
        match self.port.report(&self.spec, &report).await {
            Ok(()) => self.reported = Some(report),
            Err(err) => tracing::warn!(error = %err, "could not record a bot's state"),
        }
    }
}

fn stopped_by<E: ServerError>(err: &E) -> Stopped {
    Stopped {
        action: err.action(),
        reason: err.to_string(),
        missing_permission: err.missing_permission().map(str::to_owned),
    }
}
