//! One poll of one integration, from notices to posted answers. The loop around it (interval,
//! back-off, lease, pause) belongs to the runtime; this is the part that must be the same for
//! every runtime.

use std::collections::BTreeMap;
use std::sync::{Mutex, PoisonError};

use chrono::{DateTime, Utc};

use crate::chat::{
    ActivationKey, ActivationLedger, ChatMessage, ChatServer, ErrorAction, ModelMessage,
    OutgoingPost, Responder, Room, ServerError,
};
use crate::logic::{
    Activation, ContextFetch, ContextMode, Dropped, MAX_ACTIVATION_AGE, PlacementMode,
    build_context, check_guards, context_fetch, fresh_enough, plan_placement, plan_posts,
    select_activations,
};
use crate::split::{MAX_PART_BYTES, split_answer};

/// What one integration is set to do.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct BotSettings {
    /// The integration's id in storage (part of every activation key).
    pub integration_id: String,
    /// What the model is shown.
    pub context: ContextMode,
    /// Where answers land.
    pub placement: PlacementMode,
}

/// What happened to one activation.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Outcome {
    /// Answered: the ids of the posted parts.
    Answered {
        /// Event ids of the posts, in order.
        posted: Vec<String>,
        /// What the model was shown (for the runtime's debug view; not stored).
        context: Vec<ModelMessage>,
    },
    /// Not answered by a guard rail.
    Dropped(Dropped),
    /// Already in the ledger: answered (or being answered) before.
    AlreadyAnswered,
    /// The message is gone (deleted, or moved).
    Gone,
    /// The model failed; the activation stays recorded, so it is not retried.
    ModelFailed {
        /// The model's error, as text.
        error: String,
    },
    /// Posting stopped part-way (slow mode, network). The rest, and then the follow, can be
    /// sent with [`post_all`] later; the activation is recorded, so nothing else will send them.
    PostInterrupted {
        /// Event ids already posted.
        posted: Vec<String>,
        /// Parts not yet posted, in order.
        remaining: Vec<OutgoingPost>,
        /// The thread to follow once the last part is posted.
        follow: Option<Follow>,
    },
}

/// A thread the bot follows once an answer's last part is posted, so the next question there
/// needs no mention (see [`crate::Placement::follow_thread`]).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Follow {
    /// The room of the thread.
    pub room: Room,
    /// The thread's root.
    pub thread_root: String,
}

/// One activation's outcome.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Handled {
    /// Its room.
    pub room_id: String,
    /// The message that called the bot.
    pub event_id: String,
    /// What happened.
    pub outcome: Outcome,
}

/// Why a tick stopped before handling everything.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Stopped {
    /// What the runtime should do.
    pub action: ErrorAction,
    /// What happened, in words a person can act on (shown on the integration's card on
    /// [`ErrorAction::Pause`]).
    pub reason: String,
    /// The chat-server permission that is most likely missing, when that is the problem.
    pub missing_permission: Option<String>,
}

/// The result of one tick.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct TickReport {
    /// Activations dealt with, in the order handled (oldest first).
    pub handled: Vec<Handled>,
    /// Notices that wake nothing (marked handled).
    pub ignored: usize,
    /// Set when the tick stopped early; unhandled notices stay unread for the next tick.
    pub stopped: Option<Stopped>,
}

enum Step {
    Done(Outcome),
    Stop(Stopped, Option<Outcome>),
}

fn stop<E: ServerError>(err: &E) -> Stopped {
    Stopped {
        action: err.action(),
        reason: err.to_string(),
        missing_permission: err.missing_permission().map(str::to_owned),
    }
}

/// Runs one poll at `now`: reads notices, answers what wakes the bot, marks them handled.
///
/// Order per activation: age guard, read the calling message, author guard, hourly window,
/// read the context, **record the activation**, generate, post (split), follow, mark handled.
/// Recording comes after reading so a missing read permission loses nothing (the notice stays
/// unread until the integration is paused and fixed), and before generating so a slow model or
/// a crash cannot produce the same reply twice.
pub async fn run_tick<S, L, R>(
    server: &S,
    ledger: &L,
    responder: &R,
    settings: &BotSettings,
    now: DateTime<Utc>,
) -> TickReport
where
    S: ChatServer,
    L: ActivationLedger,
    R: Responder,
{
    let mut report = TickReport::default();
    let notices = match server.recent_notices(now, MAX_ACTIVATION_AGE).await {
        Ok(notices) => notices,
        Err(err) => {
            report.stopped = Some(stop(&err));
            return report;
        }
    };
    let selection = select_activations(&notices);
    for id in &selection.ignored {
        mark_handled(server, id).await;
    }
    report.ignored = selection.ignored.len();
    for activation in selection.activations {
        let step = handle(server, ledger, responder, settings, &activation, now).await;
        let (outcome, stopped) = match step {
            Step::Done(outcome) => (Some(outcome), None),
            Step::Stop(stopped, outcome) => (outcome, Some(stopped)),
        };
        if let Some(outcome) = outcome {
            for id in &activation.notification_ids {
                mark_handled(server, id).await;
            }
            report.handled.push(Handled {
                room_id: activation.room.id.clone(),
                event_id: activation.event_id.clone(),
                outcome,
            });
        }
        if stopped.is_some() {
            report.stopped = stopped;
            break;
        }
    }
    report
}

async fn mark_handled<S: ChatServer>(server: &S, notification_id: &str) {
    // The ledger is what prevents double answers; a notice left unread only costs a lookup.
    if let Err(err) = server.mark_handled(notification_id).await {
        tracing::warn!(error = %err, "could not mark a chat notification read");
    }
}

async fn handle<S, L, R>(
    server: &S,
    ledger: &L,
    responder: &R,
    settings: &BotSettings,
    activation: &Activation,
    now: DateTime<Utc>,
) -> Step
where
    S: ChatServer,
    L: ActivationLedger,
    R: Responder,
{
    // Checked first: an old activation costs no request at all.
    if !fresh_enough(activation.at, now) {
        return Step::Done(Outcome::Dropped(Dropped::TooOld));
    }
    let calling = match server.message(&activation.room, &activation.event_id).await {
        Ok(message) => message,
        Err(err) if err.action() == ErrorAction::Skip => return Step::Done(Outcome::Gone),
        Err(err) => return Step::Stop(stop(&err), None),
    };
    let past = match ledger.replies_in_last_hour(&settings.integration_id, now).await {
        Ok(past) => past,
        Err(err) => return Step::Stop(storage_down(&err), None),
    };
    if let Err(dropped) = check_guards(activation.at, &calling.author, &past, now) {
        return Step::Done(Outcome::Dropped(dropped));
    }
    if calling.deleted {
        return Step::Done(Outcome::Gone);
    }
    let context = match read_context(server, settings, activation, &calling).await {
        Ok(context) => context,
        Err(err) if err.action() == ErrorAction::Skip => return Step::Done(Outcome::Gone),
        Err(err) => return Step::Stop(stop(&err), None),
    };
    let key = ActivationKey {
        integration: settings.integration_id.clone(),
        room: activation.room.id.clone(),
        event_id: activation.event_id.clone(),
    };
    match ledger.try_record_activation(&key, now).await {
        Ok(true) => {}
        Ok(false) => return Step::Done(Outcome::AlreadyAnswered),
        Err(err) => return Step::Stop(storage_down(&err), None),
    }
    let placement =
        plan_placement(settings.placement, &activation.room, &calling, activation.trigger);
    if let Err(err) = server.typing(&activation.room, placement.thread_root.as_deref()).await {
        tracing::debug!(error = %err, "typing indicator not shown");
    }
    let answer = match responder.respond(&context).await {
        Ok(answer) => answer,
        Err(err) => return Step::Done(Outcome::ModelFailed { error: err.to_string() }),
    };
    let posts = plan_posts(&activation.room, &placement, split_answer(&answer, MAX_PART_BYTES));
    let follow = placement
        .follow_thread
        .map(|thread_root| Follow { room: activation.room.clone(), thread_root });
    match post_all(server, &posts, follow.as_ref()).await {
        Ok(posted) => Step::Done(Outcome::Answered { posted, context }),
        Err(interrupted) => {
            let stopped = stop(&interrupted.error);
            let outcome = Outcome::PostInterrupted {
                posted: interrupted.posted,
                remaining: interrupted.remaining,
                follow: interrupted.follow,
            };
            Step::Stop(stopped, Some(outcome))
        }
    }
}

fn storage_down<E: std::error::Error>(err: &E) -> Stopped {
    Stopped {
        action: ErrorAction::BackOff,
        reason: format!("the bot's activation ledger is unavailable: {err}"),
        missing_permission: None,
    }
}

async fn read_context<S: ChatServer>(
    server: &S,
    settings: &BotSettings,
    activation: &Activation,
    calling: &ChatMessage,
) -> Result<Vec<ModelMessage>, S::Error> {
    let me = server.me();
    let earlier = match context_fetch(settings.context, calling) {
        ContextFetch::Nothing => return Ok(build_context(calling, &[], me, Some(0))),
        ContextFetch::Before { thread_root, count } => {
            let earlier = server
                .messages_before(&activation.room, thread_root.as_deref(), &calling.id, count)
                .await?;
            return Ok(build_context(calling, &earlier, me, Some(count)));
        }
        ContextFetch::Thread { root } => {
            server.whole_thread(&activation.room, &root, &calling.id).await?
        }
    };
    Ok(build_context(calling, &earlier, me, None))
}

/// Posting stopped part-way.
#[derive(Debug)]
pub struct PostInterrupted<E> {
    /// Ids posted before the error.
    pub posted: Vec<String>,
    /// Parts not posted, the failed one first.
    pub remaining: Vec<OutgoingPost>,
    /// The thread still to follow once `remaining` is posted.
    pub follow: Option<Follow>,
    /// Why.
    pub error: E,
}

/// Posts an answer's parts (or what is left of them) in order, stopping at the first error (a
/// later part must never arrive before an earlier one), then, once the last part is out,
/// follows `follow`. Every path that posts an answer goes through here, so an answer finished
/// on a later poll follows its thread just as one posted at once.
pub async fn post_all<S: ChatServer>(
    server: &S,
    posts: &[OutgoingPost],
    follow: Option<&Follow>,
) -> Result<Vec<String>, PostInterrupted<S::Error>> {
    let mut posted = Vec::with_capacity(posts.len());
    for (i, post) in posts.iter().enumerate() {
        match server.post(post).await {
            Ok(id) => posted.push(id),
            Err(error) => {
                return Err(PostInterrupted {
                    posted,
                    remaining: posts[i..].to_vec(),
                    follow: follow.cloned(),
                    error,
                });
            }
        }
    }
    if let Some(follow) = follow
        && let Err(err) = server.follow_thread(&follow.room, &follow.thread_root).await
    {
        // The answer is out; not following only means the next question needs the @ again.
        tracing::warn!(error = %err, "could not follow the thread of a mention");
    }
    Ok(posted)
}

/// An in-memory [`ActivationLedger`]: the reference behaviour for the storage implementation,
/// and what tests use. Not for production: it forgets on restart.
#[derive(Debug, Default)]
pub struct MemoryLedger {
    rows: Mutex<BTreeMap<ActivationKey, DateTime<Utc>>>,
}

/// [`MemoryLedger`] never fails.
#[derive(Debug, thiserror::Error)]
#[error("unreachable")]
pub struct NeverFails;

impl MemoryLedger {
    /// The recorded keys, in key order.
    pub fn keys(&self) -> Vec<ActivationKey> {
        self.rows.lock().unwrap_or_else(PoisonError::into_inner).keys().cloned().collect()
    }
}

impl ActivationLedger for MemoryLedger {
    type Error = NeverFails;

    async fn try_record_activation(
        &self,
        key: &ActivationKey,
        at: DateTime<Utc>,
    ) -> Result<bool, NeverFails> {
        let mut rows = self.rows.lock().unwrap_or_else(PoisonError::into_inner);
        if rows.contains_key(key) {
            return Ok(false);
        }
        rows.insert(key.clone(), at);
        Ok(true)
    }

    async fn replies_in_last_hour(
        &self,
        integration: &str,
        now: DateTime<Utc>,
    ) -> Result<Vec<DateTime<Utc>>, NeverFails> {
        let since = now - chrono::Duration::hours(1);
        let rows = self.rows.lock().unwrap_or_else(PoisonError::into_inner);
        Ok(rows
            .iter()
            .filter(|(key, at)| key.integration == integration && **at > since && **at <= now)
            .map(|(_, at)| *at)
            .collect())
    }
}
