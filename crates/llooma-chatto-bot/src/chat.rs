//! The server-neutral side: what the bot logic needs from a chat server, and the ports the
//! rest of Llooma implements (the activation ledger, the model).
//!
//! Nothing in this module names Chatto. A second chat server implements [`ChatServer`] in its
//! own crate; the day that happens this module moves to a shared crate unchanged.

use std::future::Future;

use chrono::{DateTime, Utc};

/// Channel (has threads) or direct message (has none).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum RoomKind {
    /// A room with threads.
    Channel,
    /// A direct message: no threads, so no thread placement and nothing to follow.
    Direct,
}

/// A room, as a notification names it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Room {
    /// Server's room id.
    pub id: String,
    /// Channel or DM.
    pub kind: RoomKind,
    /// Display name (may be empty).
    pub name: String,
}

/// The four kinds of activity that wake a bot. Nothing else does.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Trigger {
    /// Someone wrote in a DM with the bot.
    DirectMessage,
    /// Someone mentioned the bot.
    Mention,
    /// Someone replied to one of the bot's messages.
    Reply,
    /// Someone wrote in a thread the bot follows.
    FollowedThread,
}

/// One entry of the server's notification feed, translated.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Notice {
    /// The server's id for it (to mark it handled).
    pub notification_id: String,
    /// `None` for activity a bot ignores (reactions, @here, room activity, ...).
    pub trigger: Option<Trigger>,
    /// The room of the message it points at.
    pub room: Room,
    /// The message it points at.
    pub event_id: String,
    /// The thread of that message; `None` for the main timeline.
    pub thread_root: Option<String>,
    /// When it happened.
    pub at: DateTime<Utc>,
    /// Not yet handled.
    pub unread: bool,
}

/// A person or bot who wrote something.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Speaker {
    /// Server's user id.
    pub id: String,
    /// Login, without `@`.
    pub login: String,
    /// Display name (may be empty).
    pub display_name: String,
    /// Bots never trigger an answer.
    pub is_bot: bool,
}

/// A message, translated.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ChatMessage {
    /// Server's event id.
    pub id: String,
    /// Its thread; `None` for the main timeline.
    pub thread_root: Option<String>,
    /// When it was written.
    pub created_at: DateTime<Utc>,
    /// Who wrote it.
    pub author: Speaker,
    /// The text ("" for attachment-only messages).
    pub text: String,
    /// A copy of a thread reply shown in the room: never shown to the model (it would appear
    /// twice).
    pub is_echo: bool,
    /// Deleted messages are never shown to the model.
    pub deleted: bool,
}

/// A message to post.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct OutgoingPost {
    /// Room to post in.
    pub room_id: String,
    /// The text, under the server's body limit.
    pub body: String,
    /// Post into the thread rooted on this message (starts it when it has no replies yet).
    pub thread_root: Option<String>,
    /// Attribution only: which message this answers.
    pub in_reply_to: Option<String>,
}

/// What the caller should do after an error from the chat server.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum ErrorAction {
    /// Stop the integration and show the error: a person must act (key, permission, address).
    Pause,
    /// The server asked to slow down (slow mode): try again in a little while.
    RetryLater,
    /// The network or the server is down: back off exponentially and try again.
    BackOff,
    /// This one item cannot be handled (deleted message): move on to the next.
    Skip,
}

/// Errors of a [`ChatServer`] say what to do about them.
pub trait ServerError: std::error::Error + Send + Sync + 'static {
    /// What the caller should do.
    fn action(&self) -> ErrorAction;

    /// The permission the bot most likely lacks, when the server refused for that reason.
    fn missing_permission(&self) -> Option<&'static str> {
        None
    }
}

/// What the bot logic needs from a chat server. Methods return `Send` futures so a runtime can
/// spawn them.
pub trait ChatServer: Send + Sync {
    /// The server's error type.
    type Error: ServerError;

    /// Who the bot is on this server.
    fn me(&self) -> &Speaker;

    /// Notifications no older than `max_age` before `now` (older ones may be included),
    /// in any order.
    fn recent_notices(
        &self,
        now: DateTime<Utc>,
        max_age: chrono::Duration,
    ) -> impl Future<Output = Result<Vec<Notice>, Self::Error>> + Send;

    /// Marks a notification handled so the next poll skips it. Idempotent.
    fn mark_handled(
        &self,
        notification_id: &str,
    ) -> impl Future<Output = Result<(), Self::Error>> + Send;

    /// One message, with its author.
    fn message(
        &self,
        room: &Room,
        event_id: &str,
    ) -> impl Future<Output = Result<ChatMessage, Self::Error>> + Send;

    /// Up to `count` messages written before `event_id`, oldest first: from the thread
    /// `thread_root` (its root included) or, when `None`, from the room's main timeline.
    /// May return a few more, but never `event_id` itself nor anything after it: the server's
    /// order decides which messages are earlier, not their times (two messages can carry the
    /// same time, and a reply can be written while the bot is reading).
    fn messages_before(
        &self,
        room: &Room,
        thread_root: Option<&str>,
        event_id: &str,
        count: usize,
    ) -> impl Future<Output = Result<Vec<ChatMessage>, Self::Error>> + Send;

    /// The thread `thread_root` up to `event_id` (one of its replies): the root, then every
    /// reply before `event_id`, oldest first. Never `event_id` itself nor a reply after it, in
    /// the server's order (see [`ChatServer::messages_before`]).
    fn whole_thread(
        &self,
        room: &Room,
        thread_root: &str,
        event_id: &str,
    ) -> impl Future<Output = Result<Vec<ChatMessage>, Self::Error>> + Send;

    /// Posts a message; returns its event id.
    fn post(&self, post: &OutgoingPost)
    -> impl Future<Output = Result<String, Self::Error>> + Send;

    /// Makes the bot follow a thread, so the next message there wakes it without a mention.
    fn follow_thread(
        &self,
        room: &Room,
        thread_root: &str,
    ) -> impl Future<Output = Result<(), Self::Error>> + Send;

    /// Shows "typing" where the answer will land. Best effort.
    fn typing(
        &self,
        room: &Room,
        thread_root: Option<&str>,
    ) -> impl Future<Output = Result<(), Self::Error>> + Send;
}

/// Identifies one activation: answered at most once, ever.
#[derive(Debug, Clone, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub struct ActivationKey {
    /// The integration's id in Llooma's storage.
    pub integration: String,
    /// The room on the chat server.
    pub room: String,
    /// The message that called the bot.
    pub event_id: String,
}

/// Storage of activations (implemented by `llooma-store`). One row per answered activation;
/// the same rows feed the hourly window.
pub trait ActivationLedger: Send + Sync {
    /// The storage error.
    type Error: std::error::Error + Send + Sync + 'static;

    /// Inserts `key` with time `at` if it is not there yet (a unique insert). `true` when this
    /// call inserted it, `false` when it was already recorded (then it must not be answered).
    fn try_record_activation(
        &self,
        key: &ActivationKey,
        at: DateTime<Utc>,
    ) -> impl Future<Output = Result<bool, Self::Error>> + Send;

    /// The times of this integration's activations recorded in the hour before `now`.
    fn replies_in_last_hour(
        &self,
        integration: &str,
        now: DateTime<Utc>,
    ) -> impl Future<Output = Result<Vec<DateTime<Utc>>, Self::Error>> + Send;
}

/// Who speaks in the context shown to the model.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Role {
    /// Anyone but the bot, named inside the text.
    User,
    /// The bot's own past messages.
    Assistant,
}

/// One entry of what the model is shown.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ModelMessage {
    /// Who.
    pub role: Role,
    /// What, with the speaker's name in front for [`Role::User`].
    pub text: String,
}

/// The model, as the bot sees it (implemented by the turn engine: system prompt, tools and
/// model are the integration's).
pub trait Responder: Send + Sync {
    /// The error type.
    type Error: std::error::Error + Send + Sync + 'static;

    /// Writes the answer to the conversation shown.
    fn respond(
        &self,
        context: &[ModelMessage],
    ) -> impl Future<Output = Result<String, Self::Error>> + Send;
}
