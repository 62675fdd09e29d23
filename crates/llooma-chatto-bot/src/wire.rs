//! Chatto's wire types (Connect JSON, proto3 JSON mapping), as far as a bot needs them.
//!
//! Every struct takes `#[serde(default)]` and ignores unknown fields: proto3 JSON omits fields at
//! their default value, and the 0.x API adds fields freely, so being strict would break the bot
//! on the first server upgrade. 64-bit integers arrive as strings and are read leniently.

use std::collections::HashMap;

use chrono::{DateTime, Utc};
use serde::{Deserialize, Deserializer, Serialize};

/// A user as Chatto describes one.
#[derive(Debug, Clone, Default, PartialEq, Eq, Deserialize, Serialize)]
#[serde(rename_all = "camelCase", default)]
pub struct User {
    /// The user id.
    pub id: String,
    /// The login, without `@`.
    pub login: String,
    /// The name people see.
    pub display_name: String,
    /// Whether the account was deleted.
    pub deleted: bool,
    /// Older servers: whether this is a bot account.
    pub is_bot: bool,
    /// Newer servers: present for bot accounts (replaces `isBot`).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub bot: Option<BotInfo>,
}

impl User {
    /// Whether this is a bot: `isBot` is true, or the newer `bot` object is present.
    pub fn is_a_bot(&self) -> bool {
        self.is_bot || self.bot.is_some()
    }
}

/// The `bot` object of newer servers. Only its presence matters to us.
#[derive(Debug, Clone, Default, PartialEq, Eq, Deserialize, Serialize)]
#[serde(rename_all = "camelCase", default)]
pub struct BotInfo {
    /// Who owns the bot.
    pub owner_user_id: String,
}

/// `ViewerService/GetViewer` answer.
#[derive(Debug, Clone, Default, Deserialize)]
#[serde(rename_all = "camelCase", default)]
pub struct GetViewerResponse {
    /// The caller.
    pub user: ViewerUser,
}

/// The viewer's user record.
#[derive(Debug, Clone, Default, Deserialize)]
#[serde(rename_all = "camelCase", default)]
pub struct ViewerUser {
    /// The profile: id, login, display name, bot flags.
    pub profile: User,
}

/// The kind of a room.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Deserialize, Serialize)]
pub enum RoomKind {
    /// Not set by the server.
    #[default]
    #[serde(rename = "ROOM_KIND_UNSPECIFIED")]
    Unspecified,
    /// A channel: has threads.
    #[serde(rename = "ROOM_KIND_CHANNEL")]
    Channel,
    /// A direct message: no threads.
    #[serde(rename = "ROOM_KIND_DM")]
    Dm,
    /// A kind this version does not know.
    #[serde(other)]
    Unknown,
}

/// A room as a notification names it.
#[derive(Debug, Clone, Default, PartialEq, Eq, Deserialize)]
#[serde(rename_all = "camelCase", default)]
pub struct RoomRef {
    /// Room id.
    pub id: String,
    /// Channel or DM.
    pub kind: RoomKind,
    /// Room name.
    pub name: String,
}

/// The pointer a notification carries: no text, fetch it.
#[derive(Debug, Clone, Default, PartialEq, Eq, Deserialize)]
#[serde(rename_all = "camelCase", default)]
pub struct MessageRef {
    /// Where.
    pub room: RoomRef,
    /// The message's event id.
    pub event_id: String,
    /// The thread it is in; empty for the main timeline.
    pub thread_root_event_id: String,
}

/// A signal member: `{"message": MessageRef}`.
#[derive(Debug, Clone, Default, PartialEq, Eq, Deserialize)]
#[serde(rename_all = "camelCase", default)]
pub struct MessageSignal {
    /// The message it points at.
    pub message: MessageRef,
}

/// A notification's signal: exactly one member is set (a proto `oneof`).
#[derive(Debug, Clone, Default, PartialEq, Eq, Deserialize)]
#[serde(rename_all = "camelCase", default)]
pub struct Signal {
    /// Someone wrote in a DM with the bot.
    pub direct_message_received: Option<MessageSignal>,
    /// Someone @-mentioned the bot.
    pub direct_mention_received: Option<MessageSignal>,
    /// Someone replied to one of the bot's messages.
    pub reply_received: Option<MessageSignal>,
    /// A new message in a thread the bot follows.
    pub followed_thread_activity: Option<MessageSignal>,
    /// Ignored kinds, kept so their pointer can still be read.
    pub role_mention_received: Option<MessageSignal>,
    /// Ignored.
    pub here_mention_received: Option<MessageSignal>,
    /// Ignored.
    pub all_mention_received: Option<MessageSignal>,
    /// Ignored.
    pub followed_room_activity: Option<MessageSignal>,
    /// Ignored.
    pub reaction_received: Option<MessageSignal>,
}

/// Which member of [`Signal`] is set.
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
    /// Any other member, or one this version does not know.
    Other,
}

impl Signal {
    /// The member that is set, with its pointer when it has one.
    pub fn kind(&self) -> (SignalKind, Option<&MessageRef>) {
        let waking = [
            (SignalKind::DirectMessageReceived, &self.direct_message_received),
            (SignalKind::DirectMentionReceived, &self.direct_mention_received),
            (SignalKind::ReplyReceived, &self.reply_received),
            (SignalKind::FollowedThreadActivity, &self.followed_thread_activity),
        ];
        for (kind, member) in waking {
            if let Some(signal) = member {
                return (kind, Some(&signal.message));
            }
        }
        let other = [
            &self.role_mention_received,
            &self.here_mention_received,
            &self.all_mention_received,
            &self.followed_room_activity,
            &self.reaction_received,
        ];
        (SignalKind::Other, other.into_iter().flatten().next().map(|s| &s.message))
    }
}

/// One notification occurrence.
#[derive(Debug, Clone, Default, PartialEq, Eq, Deserialize)]
#[serde(rename_all = "camelCase", default)]
pub struct Occurrence {
    /// The notification id (for `MarkNotificationRead`).
    pub id: String,
    /// When it happened. Absent means "unknown", read as the epoch: old, hence dropped.
    pub created_at: DateTime<Utc>,
    /// Who caused it.
    pub actor: User,
    /// What happened.
    pub signal: Signal,
    /// Still unread.
    pub unread: bool,
}

/// A page of a list that is paged by offset.
#[derive(Debug, Clone, Default, PartialEq, Eq, Deserialize)]
#[serde(rename_all = "camelCase", default)]
pub struct OffsetPage {
    /// How many there are in all.
    #[serde(deserialize_with = "lenient_i64")]
    pub total_count: i64,
    /// Whether a further page exists.
    pub has_more: bool,
}

/// `NotificationService/ListNotificationOccurrences` answer (newest first).
#[derive(Debug, Clone, Default, PartialEq, Eq, Deserialize)]
#[serde(rename_all = "camelCase", default)]
pub struct OccurrenceList {
    /// The occurrences of this page.
    pub occurrences: Vec<Occurrence>,
    /// Paging.
    pub page: OffsetPage,
    /// Unread occurrences in all.
    #[serde(deserialize_with = "lenient_i64")]
    pub unread_count: i64,
}

/// A thread summary on a root message.
#[derive(Debug, Clone, Default, PartialEq, Eq, Deserialize)]
#[serde(rename_all = "camelCase", default)]
pub struct ThreadSummary {
    /// The root.
    pub thread_root_event_id: String,
    /// How many replies.
    #[serde(deserialize_with = "lenient_i64")]
    pub reply_count: i64,
}

/// A message.
#[derive(Debug, Clone, Default, PartialEq, Eq, Deserialize)]
#[serde(rename_all = "camelCase", default)]
pub struct Message {
    /// Its event id.
    pub id: String,
    /// Its room.
    pub room_id: String,
    /// When it was written.
    pub created_at: DateTime<Utc>,
    /// Author's user id.
    pub actor_id: String,
    /// The text; absent for attachment-only messages.
    pub body: Option<String>,
    /// Attachments, unread by the bot beyond their presence.
    pub attachments: Vec<serde_json::Value>,
    /// The thread it belongs to; empty for the main timeline.
    pub thread_root_event_id: String,
    /// Set on the room copy of a thread reply: skip those.
    pub echo_of_event_id: String,
    /// Set when it is a thread root.
    pub thread: Option<ThreadSummary>,
    /// Set when it was deleted.
    pub deleted_at: Option<DateTime<Utc>>,
}

/// `{"message": Message}`.
#[derive(Debug, Clone, Default, Deserialize)]
#[serde(rename_all = "camelCase", default)]
pub struct MessageEnvelope {
    /// The message.
    pub message: Message,
}

/// `BatchGetMessages` answer.
#[derive(Debug, Clone, Default, Deserialize)]
#[serde(rename_all = "camelCase", default)]
pub struct MessageList {
    /// The messages found (missing ones are left out).
    pub messages: Vec<Message>,
}

/// A timeline event. Only `messagePosted` matters; other members are ignored.
#[derive(Debug, Clone, Default, PartialEq, Eq, Deserialize)]
#[serde(rename_all = "camelCase", default)]
pub struct Event {
    /// Event id.
    pub id: String,
    /// When.
    pub created_at: DateTime<Utc>,
    /// Who.
    pub actor_id: String,
    /// Set when the event is a message.
    pub message_posted: Option<MessagePosted>,
}

/// `{"message": Message}` inside an event.
#[derive(Debug, Clone, Default, PartialEq, Eq, Deserialize)]
#[serde(rename_all = "camelCase", default)]
pub struct MessagePosted {
    /// The message.
    pub message: Message,
}

/// Users referenced by a page.
#[derive(Debug, Clone, Default, PartialEq, Eq, Deserialize)]
#[serde(rename_all = "camelCase", default)]
pub struct Includes {
    /// By user id.
    pub users: HashMap<String, User>,
}

/// A page of a timeline (room or thread), oldest first.
#[derive(Debug, Clone, Default, PartialEq, Eq, Deserialize)]
#[serde(rename_all = "camelCase", default)]
pub struct EventPage {
    /// The events, oldest first.
    pub events: Vec<Event>,
    /// Cursor for `before`.
    pub start_cursor: String,
    /// Cursor for `after`.
    pub end_cursor: String,
    /// More before this page.
    pub has_older: bool,
    /// More after this page.
    pub has_newer: bool,
    /// The authors.
    pub includes: Includes,
}

/// `{"page": EventPage}`.
#[derive(Debug, Clone, Default, Deserialize)]
#[serde(rename_all = "camelCase", default)]
pub struct PageEnvelope {
    /// The page.
    pub page: EventPage,
}

/// `RoomService/GetRoomEventsAround` answer.
#[derive(Debug, Clone, Default, Deserialize)]
#[serde(rename_all = "camelCase", default)]
pub struct AroundPage {
    /// The page.
    pub page: EventPage,
    /// Index of the target event in `page.events`.
    #[serde(deserialize_with = "lenient_i64")]
    pub target_index: i64,
}

/// `UserService/GetUser` answer.
#[derive(Debug, Clone, Default, Deserialize)]
#[serde(rename_all = "camelCase", default)]
pub struct GetUserResponse {
    /// The user with roles.
    pub user: UserWithRoles,
}

/// A user with roles.
#[derive(Debug, Clone, Default, Deserialize)]
#[serde(rename_all = "camelCase", default)]
pub struct UserWithRoles {
    /// The user.
    pub user: User,
}

/// `MessageService/CreateMessage` request.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct CreateMessageRequest {
    /// Room to post in.
    pub room_id: String,
    /// The text, at most [`crate::BODY_LIMIT_BYTES`].
    pub body: String,
    /// Post as a reply in the thread rooted on this message.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub thread_root_event_id: Option<String>,
    /// Attribution only: which message this answers.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub in_reply_to: Option<String>,
}

/// An error body: `{"code", "message"}`.
#[derive(Debug, Clone, Default, Deserialize)]
#[serde(default)]
pub(crate) struct ConnectError {
    pub code: String,
    pub message: String,
}

/// Reads a proto3 64-bit integer: a string, a number, or null.
fn lenient_i64<'de, D: Deserializer<'de>>(deserializer: D) -> Result<i64, D::Error> {
    #[derive(Deserialize)]
    #[serde(untagged)]
    enum Raw {
        Number(i64),
        Text(String),
        Null(()),
    }
    match Raw::deserialize(deserializer)? {
        Raw::Number(n) => Ok(n),
        Raw::Text(s) if s.is_empty() => Ok(0),
        Raw::Text(s) => s.parse().map_err(serde::de::Error::custom),
        Raw::Null(()) => Ok(0),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn occurrence_with_absent_defaults_and_unknown_fields_parses() {
        let json = r#"{"occurrences":[{"id":"n1","createdAt":"2025-01-01T10:00:00Z",
            "signal":{"directMentionReceived":{"message":{"room":{"id":"r1","kind":"ROOM_KIND_CHANNEL"},
            "eventId":"e1"}}},"attentionLevel":"ATTENTION_LEVEL_HIGH","somethingNew":{"x":1}}],
            "page":{"totalCount":"1"},"unreadCount":1}"#;
        let list: OccurrenceList = serde_json::from_str(json).unwrap();
        assert_eq!(list.page.total_count, 1);
        assert!(!list.page.has_more);
        let occurrence = &list.occurrences[0];
        assert!(!occurrence.unread, "absent bool is false");
        let (kind, pointer) = occurrence.signal.kind();
        assert_eq!(kind, SignalKind::DirectMentionReceived);
        let pointer = pointer.unwrap();
        assert_eq!(pointer.room.kind, RoomKind::Channel);
        assert_eq!(pointer.thread_root_event_id, "");
    }

    #[test]
    fn unknown_signal_and_room_kind_are_tolerated() {
        let json = r#"{"id":"n","signal":{"pollClosed":{}},"actor":{"bot":{}}}"#;
        let occurrence: Occurrence = serde_json::from_str(json).unwrap();
        assert_eq!(occurrence.signal.kind().0, SignalKind::Other);
        assert!(occurrence.actor.is_a_bot(), "a bot object marks a bot");
        let room: RoomRef = serde_json::from_str(r#"{"kind":"ROOM_KIND_VOICE"}"#).unwrap();
        assert_eq!(room.kind, RoomKind::Unknown);
    }

    #[test]
    fn create_message_omits_unset_fields() {
        let req = CreateMessageRequest {
            room_id: "r".into(),
            body: "hi".into(),
            thread_root_event_id: Some("e".into()),
            in_reply_to: None,
        };
        assert_eq!(
            serde_json::to_string(&req).unwrap(),
            r#"{"roomId":"r","body":"hi","threadRootEventId":"e"}"#
        );
    }
}
