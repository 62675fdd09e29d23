//! A fake Chatto server on loopback, for tests: it speaks the Connect-JSON wire format of
//! `shared/chatto-api.md` over real HTTP (axum, port 0), scripted from Rust.
//!
//! It builds its JSON by hand rather than sharing types with `llooma-chatto-bot`: a fake that
//! reused the client's serde types would agree with any naming mistake the client makes.
//!
//! What it models: users (people and bots, bots flagged the old way with `isBot` or the new way
//! with a `bot` object), API keys (revocable), rooms (channels and DMs) with members, messages in
//! the main timeline and in threads (with room echoes), notifications whose `createdAt` the test
//! chooses, per-bot permissions, slow mode, an outage (at once, or after a number of posts), the
//! 1 MiB request cap and the 10,000-byte body cap.
//! It records every `CreateMessage`, `FollowThread` and `MarkNotificationRead` call.
//!
//! What it does not: notifications are scripted, never derived from posts (tests decide exactly
//! what the bot sees); no reactions, attachments, edits or realtime channel.

mod rpc;

use std::collections::{BTreeSet, HashMap};
use std::net::SocketAddr;
use std::sync::{Arc, Mutex, MutexGuard, PoisonError};

use chrono::{DateTime, Utc};
use tokio::net::TcpListener;
use tokio::task::JoinHandle;

/// Most bytes a request body may have (Chatto's cap).
pub const MAX_REQUEST_BYTES: usize = 1024 * 1024;
/// Most bytes a message `body` may have (Chatto's cap).
pub const MAX_BODY_BYTES: usize = 10_000;

/// The permissions a bot can be granted.
pub const ALL_BOT_PERMISSIONS: [&str; 4] =
    ["message.post", "message.post-in-thread", "message.read", "message.read-interactions"];

/// How a bot account is marked on the wire.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum BotStyle {
    /// Older servers: `"isBot": true`.
    IsBotFlag,
    /// Newer servers: a `"bot": {"ownerUserId": ...}` object and no `isBot`.
    BotObject,
}

/// The member of a notification's `signal`.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum SignalKind {
    /// `directMessageReceived`
    DirectMessageReceived,
    /// `directMentionReceived`
    DirectMentionReceived,
    /// `replyReceived`
    ReplyReceived,
    /// `followedThreadActivity`
    FollowedThreadActivity,
    /// `roleMentionReceived` (with `roleNames`)
    RoleMentionReceived,
    /// `hereMentionReceived`
    HereMentionReceived,
    /// `allMentionReceived`
    AllMentionReceived,
    /// `followedRoomActivity`
    FollowedRoomActivity,
    /// `reactionReceived` (with `emoji`)
    ReactionReceived,
}

impl SignalKind {
    /// Every kind.
    pub const ALL: [SignalKind; 9] = [
        SignalKind::DirectMessageReceived,
        SignalKind::DirectMentionReceived,
        SignalKind::ReplyReceived,
        SignalKind::FollowedThreadActivity,
        SignalKind::RoleMentionReceived,
        SignalKind::HereMentionReceived,
        SignalKind::AllMentionReceived,
        SignalKind::FollowedRoomActivity,
        SignalKind::ReactionReceived,
    ];

    /// The JSON member name.
    pub fn member(self) -> &'static str {
        match self {
            SignalKind::DirectMessageReceived => "directMessageReceived",
            SignalKind::DirectMentionReceived => "directMentionReceived",
            SignalKind::ReplyReceived => "replyReceived",
            SignalKind::FollowedThreadActivity => "followedThreadActivity",
            SignalKind::RoleMentionReceived => "roleMentionReceived",
            SignalKind::HereMentionReceived => "hereMentionReceived",
            SignalKind::AllMentionReceived => "allMentionReceived",
            SignalKind::FollowedRoomActivity => "followedRoomActivity",
            SignalKind::ReactionReceived => "reactionReceived",
        }
    }
}

/// A bot account and its API key.
#[derive(Debug, Clone)]
pub struct FakeBot {
    /// User id.
    pub id: String,
    /// API key, `cht_BK_<id>.<secret>`.
    pub key: String,
}

/// One `CreateMessage` call as received.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct CreateMessageCall {
    /// Who called (user id).
    pub caller: String,
    /// `roomId`
    pub room_id: String,
    /// `body`
    pub body: String,
    /// `threadRootEventId`, when set.
    pub thread_root_event_id: Option<String>,
    /// `inReplyTo`, when set.
    pub in_reply_to: Option<String>,
    /// `None` when accepted, else the Connect error code it was answered with.
    pub refused: Option<String>,
    /// When it arrived.
    pub at: DateTime<Utc>,
}

/// One `FollowThread` call.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct FollowCall {
    /// Who called.
    pub caller: String,
    /// `roomId`
    pub room_id: String,
    /// `threadRootEventId`
    pub thread_root_event_id: String,
}

/// One `MarkNotificationRead` call.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct MarkReadCall {
    /// Who called.
    pub caller: String,
    /// `notificationId`
    pub notification_id: String,
}

#[derive(Debug, Clone)]
pub(crate) struct UserRec {
    pub id: String,
    pub login: String,
    pub display_name: String,
    pub bot: Option<BotStyle>,
}

#[derive(Debug, Clone)]
pub(crate) struct RoomRec {
    pub id: String,
    pub name: String,
    pub dm: bool,
    pub members: BTreeSet<String>,
    pub slow_mode: bool,
    pub created_at: DateTime<Utc>,
}

#[derive(Debug, Clone)]
pub(crate) struct MessageRec {
    pub seq: u64,
    pub id: String,
    pub room_id: String,
    pub actor_id: String,
    pub body: String,
    pub created_at: DateTime<Utc>,
    pub thread_root: Option<String>,
    pub echo_of: Option<(String, String)>,
    pub in_reply_to: Option<String>,
}

#[derive(Debug, Clone)]
pub(crate) struct NotificationRec {
    pub id: String,
    pub user_id: String,
    pub actor_id: String,
    pub kind: SignalKind,
    pub room_id: String,
    pub event_id: String,
    pub created_at: DateTime<Utc>,
    pub unread: bool,
}

#[derive(Debug, Default)]
pub(crate) struct State {
    pub users: Vec<UserRec>,
    /// key -> (user id, revoked)
    pub keys: HashMap<String, (String, bool)>,
    pub permissions: HashMap<String, BTreeSet<String>>,
    pub rooms: Vec<RoomRec>,
    pub messages: Vec<MessageRec>,
    pub notifications: Vec<NotificationRec>,
    /// (user, room, thread root)
    pub follows: BTreeSet<(String, String, String)>,
    pub create_calls: Vec<CreateMessageCall>,
    pub follow_calls: Vec<FollowCall>,
    pub mark_read_calls: Vec<MarkReadCall>,
    pub next: u64,
    /// (caller, when) of every `ListNotificationOccurrences` call.
    pub list_calls: Vec<(String, DateTime<Utc>)>,
    /// Every call answers 503 (the server is down behind its proxy).
    pub unavailable: bool,
    /// The server goes down (see `unavailable`) once this many more posts are accepted.
    pub down_after_posts: Option<usize>,
}

impl State {
    pub fn next_id(&mut self, prefix: &str) -> String {
        self.next += 1;
        format!("{prefix}{:04}", self.next)
    }

    pub fn user(&self, id: &str) -> Option<&UserRec> {
        self.users.iter().find(|u| u.id == id)
    }

    pub fn room(&self, id: &str) -> Option<&RoomRec> {
        self.rooms.iter().find(|r| r.id == id)
    }

    pub fn message(&self, room_id: &str, id: &str) -> Option<&MessageRec> {
        self.messages.iter().find(|m| m.id == id && m.room_id == room_id)
    }

    pub fn add_message(&mut self, mut message: MessageRec) -> String {
        self.next += 1;
        message.seq = self.next;
        let id = message.id.clone();
        self.messages.push(message);
        id
    }
}

pub(crate) type Shared = Arc<Mutex<State>>;

pub(crate) fn lock(state: &Shared) -> MutexGuard<'_, State> {
    // A panicking test thread must not turn every later call into a second panic.
    state.lock().unwrap_or_else(PoisonError::into_inner)
}

/// The running fake. Dropping it stops the server.
#[derive(Debug)]
pub struct FakeChatto {
    addr: SocketAddr,
    state: Shared,
    task: JoinHandle<()>,
}

impl Drop for FakeChatto {
    fn drop(&mut self) {
        self.task.abort();
    }
}

impl FakeChatto {
    /// Starts the fake on 127.0.0.1, port 0.
    pub async fn start() -> std::io::Result<Self> {
        let listener = TcpListener::bind("127.0.0.1:0").await?;
        let addr = listener.local_addr()?;
        let state: Shared = Arc::default();
        let app = rpc::router(Arc::clone(&state));
        let task = tokio::spawn(async move {
            // The server ends only when the test drops the fake (the task is aborted).
            let _ = axum::serve(listener, app).await;
        });
        Ok(Self { addr, state, task })
    }

    /// `http://127.0.0.1:<port>`: the base URL and the origin to allow for purpose `bot`.
    pub fn origin(&self) -> String {
        format!("http://{}", self.addr)
    }

    /// Adds a person; returns the user id.
    pub fn add_person(&self, login: &str, display_name: &str) -> String {
        let mut state = lock(&self.state);
        let id = state.next_id("u");
        state.users.push(UserRec {
            id: id.clone(),
            login: login.to_owned(),
            display_name: display_name.to_owned(),
            bot: None,
        });
        id
    }

    /// Adds a bot account with `permissions` and an API key.
    pub fn add_bot(
        &self,
        login: &str,
        display_name: &str,
        style: BotStyle,
        permissions: &[&str],
    ) -> FakeBot {
        let mut state = lock(&self.state);
        let id = state.next_id("b");
        state.users.push(UserRec {
            id: id.clone(),
            login: login.to_owned(),
            display_name: display_name.to_owned(),
            bot: Some(style),
        });
        state.permissions.insert(id.clone(), permissions.iter().map(|p| (*p).to_owned()).collect());
        let secret = state.next_id("s");
        let key = format!("cht_BK_{id}.{secret}");
        state.keys.insert(key.clone(), (id.clone(), false));
        FakeBot { id, key }
    }

    /// Issues an API key for any user (a person's key, to test "not a bot").
    pub fn issue_key(&self, user_id: &str) -> String {
        let mut state = lock(&self.state);
        let secret = state.next_id("s");
        let key = format!("cht_PK_{user_id}.{secret}");
        state.keys.insert(key.clone(), (user_id.to_owned(), false));
        key
    }

    /// Replaces a bot's permissions.
    pub fn set_permissions(&self, bot_id: &str, permissions: &[&str]) {
        lock(&self.state)
            .permissions
            .insert(bot_id.to_owned(), permissions.iter().map(|p| (*p).to_owned()).collect());
    }

    /// Revokes a key: every call with it answers `unauthenticated`.
    pub fn revoke_key(&self, key: &str) {
        if let Some(entry) = lock(&self.state).keys.get_mut(key) {
            entry.1 = true;
        }
    }

    /// Adds a channel with these members; returns the room id.
    pub fn add_channel(&self, name: &str, members: &[&str]) -> String {
        self.add_room(name, false, members)
    }

    /// Adds a DM between two users; returns the room id.
    pub fn add_dm(&self, a: &str, b: &str) -> String {
        self.add_room("", true, &[a, b])
    }

    fn add_room(&self, name: &str, dm: bool, members: &[&str]) -> String {
        let mut state = lock(&self.state);
        let id = state.next_id("r");
        state.rooms.push(RoomRec {
            id: id.clone(),
            name: name.to_owned(),
            dm,
            members: members.iter().map(|m| (*m).to_owned()).collect(),
            slow_mode: false,
            created_at: DateTime::<Utc>::UNIX_EPOCH,
        });
        id
    }

    /// Turns slow mode on or off: bots posting there get `resource_exhausted`.
    pub fn set_slow_mode(&self, room_id: &str, on: bool) {
        if let Some(room) = lock(&self.state).rooms.iter_mut().find(|r| r.id == room_id) {
            room.slow_mode = on;
        }
    }

    /// Posts in a room's main timeline at time `at`; returns the event id.
    pub fn post(&self, room_id: &str, author: &str, body: &str, at: DateTime<Utc>) -> String {
        let mut state = lock(&self.state);
        let id = state.next_id("e");
        state.add_message(MessageRec {
            seq: 0,
            id,
            room_id: room_id.to_owned(),
            actor_id: author.to_owned(),
            body: body.to_owned(),
            created_at: at,
            thread_root: None,
            echo_of: None,
            in_reply_to: None,
        })
    }

    /// Posts a reply in the thread rooted on `root` at `at`; with `also_to_channel`, an echo
    /// (`echoOfEventId`) appears in the room too. Returns the reply's event id.
    pub fn post_in_thread(
        &self,
        room_id: &str,
        root: &str,
        author: &str,
        body: &str,
        at: DateTime<Utc>,
        also_to_channel: bool,
    ) -> String {
        let mut state = lock(&self.state);
        let id = state.next_id("e");
        let reply = MessageRec {
            seq: 0,
            id: id.clone(),
            room_id: room_id.to_owned(),
            actor_id: author.to_owned(),
            body: body.to_owned(),
            created_at: at,
            thread_root: Some(root.to_owned()),
            echo_of: None,
            in_reply_to: None,
        };
        state.add_message(reply);
        if also_to_channel {
            let echo_id = state.next_id("e");
            state.add_message(MessageRec {
                seq: 0,
                id: echo_id,
                room_id: room_id.to_owned(),
                actor_id: author.to_owned(),
                body: body.to_owned(),
                created_at: at,
                thread_root: None,
                echo_of: Some((id.clone(), root.to_owned())),
                in_reply_to: None,
            });
        }
        id
    }

    /// Gives `user_id` a notification of `kind` about message `event_id`, created at `at`,
    /// unread. Returns the notification id.
    pub fn notify(
        &self,
        user_id: &str,
        kind: SignalKind,
        room_id: &str,
        event_id: &str,
        at: DateTime<Utc>,
    ) -> String {
        let mut state = lock(&self.state);
        let id = state.next_id("n");
        let actor_id =
            state.message(room_id, event_id).map(|m| m.actor_id.clone()).unwrap_or_default();
        state.notifications.push(NotificationRec {
            id: id.clone(),
            user_id: user_id.to_owned(),
            actor_id,
            kind,
            room_id: room_id.to_owned(),
            event_id: event_id.to_owned(),
            created_at: at,
            unread: true,
        });
        id
    }

    /// Takes the server down (every call answers HTTP 503 with no Connect body) or back up.
    pub fn set_unavailable(&self, down: bool) {
        lock(&self.state).unavailable = down;
    }

    /// Takes the server down (as [`FakeChatto::set_unavailable`]) right after it accepts `posts`
    /// more `CreateMessage` calls: the network failing between two parts of an answer.
    pub fn go_down_after_posts(&self, posts: usize) {
        let mut state = lock(&self.state);
        if posts == 0 {
            state.unavailable = true;
        } else {
            state.down_after_posts = Some(posts);
        }
    }

    /// Every `CreateMessage` call so far, accepted or not.
    pub fn create_message_calls(&self) -> Vec<CreateMessageCall> {
        lock(&self.state).create_calls.clone()
    }

    /// When `user_id` listed its notifications, in order.
    pub fn list_times(&self, user_id: &str) -> Vec<DateTime<Utc>> {
        lock(&self.state)
            .list_calls
            .iter()
            .filter(|(u, _)| u == user_id)
            .map(|(_, at)| *at)
            .collect()
    }

    /// Every `FollowThread` call so far.
    pub fn follow_calls(&self) -> Vec<FollowCall> {
        lock(&self.state).follow_calls.clone()
    }

    /// Every `MarkNotificationRead` call so far.
    pub fn mark_read_calls(&self) -> Vec<MarkReadCall> {
        lock(&self.state).mark_read_calls.clone()
    }

    /// Whether `user_id` follows the thread rooted on `root` (explicitly, or by posting in it).
    pub fn is_following(&self, user_id: &str, room_id: &str, root: &str) -> bool {
        lock(&self.state).follows.contains(&(
            user_id.to_owned(),
            room_id.to_owned(),
            root.to_owned(),
        ))
    }

    /// Whether a notification is still unread.
    pub fn is_unread(&self, notification_id: &str) -> bool {
        lock(&self.state).notifications.iter().any(|n| n.id == notification_id && n.unread)
    }
}
