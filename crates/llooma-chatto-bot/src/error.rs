//! Errors of the Chatto client, each with what a person (or the runtime) should do next.

use llooma_net::{NetError, Refusal};

use crate::chat::{ErrorAction, ServerError};

/// The RPCs the bot makes. Used to name what failed and which permission it needs.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Rpc {
    /// `ViewerService/GetViewer`
    GetViewer,
    /// `NotificationService/ListNotificationOccurrences`
    ListNotificationOccurrences,
    /// `NotificationService/MarkNotificationRead`
    MarkNotificationRead,
    /// `MessageService/GetMessage`
    GetMessage,
    /// `MessageService/BatchGetMessages`
    BatchGetMessages,
    /// `RoomService/GetRoomEventsAround`
    GetRoomEventsAround,
    /// `RoomService/GetRoomEvents`
    GetRoomEvents,
    /// `ThreadService/GetThreadEvents`
    GetThreadEvents,
    /// `MessageService/CreateMessage` in the main timeline.
    CreateMessage,
    /// `MessageService/CreateMessage` with `threadRootEventId`.
    CreateThreadReply,
    /// `ThreadService/FollowThread`
    FollowThread,
    /// `RoomService/UpdateTypingIndicator`
    UpdateTypingIndicator,
    /// `UserService/GetUser`
    GetUser,
}

impl Rpc {
    /// The `{package}.{Service}/{Method}` part of the URL.
    pub fn path(self) -> &'static str {
        match self {
            Rpc::GetViewer => "chatto.api.v1.ViewerService/GetViewer",
            Rpc::ListNotificationOccurrences => {
                "chatto.api.v1.NotificationService/ListNotificationOccurrences"
            }
            Rpc::MarkNotificationRead => "chatto.api.v1.NotificationService/MarkNotificationRead",
            Rpc::GetMessage => "chatto.api.v1.MessageService/GetMessage",
            Rpc::BatchGetMessages => "chatto.api.v1.MessageService/BatchGetMessages",
            Rpc::GetRoomEventsAround => "chatto.api.v1.RoomService/GetRoomEventsAround",
            Rpc::GetRoomEvents => "chatto.api.v1.RoomService/GetRoomEvents",
            Rpc::GetThreadEvents => "chatto.api.v1.ThreadService/GetThreadEvents",
            Rpc::CreateMessage | Rpc::CreateThreadReply => {
                "chatto.api.v1.MessageService/CreateMessage"
            }
            Rpc::FollowThread => "chatto.api.v1.ThreadService/FollowThread",
            Rpc::UpdateTypingIndicator => "chatto.api.v1.RoomService/UpdateTypingIndicator",
            Rpc::GetUser => "chatto.api.v1.UserService/GetUser",
        }
    }

    /// What the bot was trying to do, in words.
    pub fn doing(self) -> &'static str {
        match self {
            Rpc::GetViewer => "check who it is",
            Rpc::ListNotificationOccurrences => "list its notifications",
            Rpc::MarkNotificationRead => "mark a notification read",
            Rpc::GetMessage | Rpc::BatchGetMessages => "read a message",
            Rpc::GetRoomEventsAround | Rpc::GetRoomEvents => "read the room's history",
            Rpc::GetThreadEvents => "read a thread",
            Rpc::CreateMessage => "post in the room",
            Rpc::CreateThreadReply => "post in a thread",
            Rpc::FollowThread => "follow a thread",
            Rpc::UpdateTypingIndicator => "show that it is typing",
            Rpc::GetUser => "look up a user",
        }
    }

    /// The Chatto permission a `permission_denied` on this RPC most likely means is missing.
    pub fn likely_missing_permission(self) -> Option<&'static str> {
        match self {
            Rpc::GetRoomEventsAround | Rpc::GetRoomEvents => Some("message.read"),
            // The narrow permission covers threads the bot was called into; anything else needs
            // the wide one, so name the wide one: granting it always fixes the problem.
            Rpc::GetMessage | Rpc::BatchGetMessages | Rpc::GetThreadEvents => Some("message.read"),
            Rpc::CreateMessage | Rpc::UpdateTypingIndicator => Some("message.post"),
            Rpc::CreateThreadReply => Some("message.post-in-thread"),
            Rpc::FollowThread => Some("message.read-interactions"),
            Rpc::GetViewer
            | Rpc::ListNotificationOccurrences
            | Rpc::MarkNotificationRead
            | Rpc::GetUser => None,
        }
    }
}

/// Everything that can go wrong talking to Chatto. Never contains the API key.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum ChattoError {
    /// `permission_denied`: the bot lacks a permission, or is not a member of the room.
    #[error(
        "Chatto refused to let the bot {} ({}){}. Check on the bot's page (Server Admin → \
         Bots) that it has this permission, and that the bot is a member of the room",
        .rpc.doing(),
        .rpc.path(),
        missing_words(*.permission)
    )]
    PermissionDenied {
        /// What failed.
        rpc: Rpc,
        /// The permission most likely missing.
        permission: Option<&'static str>,
        /// What the server said (shortened).
        server_message: String,
    },
    /// `unauthenticated`: the key was revoked or is wrong. Pause until it is replaced.
    #[error(
        "Chatto did not accept the bot's API key (while trying to {}): it was revoked or is \
         wrong. Create a new key on the bot's page in Chatto and paste it into the integration",
        .rpc.doing()
    )]
    Unauthenticated {
        /// What failed.
        rpc: Rpc,
        /// What the server said (shortened).
        server_message: String,
    },
    /// `resource_exhausted`: slow mode (or a rate limit). Retry later.
    #[error(
        "Chatto asked the bot to slow down (while trying to {}): the room is in slow mode or \
         the bot is rate-limited; it will retry later",
        .rpc.doing()
    )]
    SlowMode {
        /// What failed.
        rpc: Rpc,
        /// What the server said (shortened).
        server_message: String,
    },
    /// `not_found`: the message was retracted, or is in another room.
    #[error("Chatto found nothing (while trying to {}): it was deleted or moved", .rpc.doing())]
    NotFound {
        /// What failed.
        rpc: Rpc,
        /// What the server said (shortened).
        server_message: String,
    },
    /// The outbound policy does not allow the server's address.
    #[error(
        "the chat server's address is not allowed (while trying to {}): {source}",
        .rpc.doing()
    )]
    Blocked {
        /// What failed.
        rpc: Rpc,
        /// The refusal, with what an administrator can do.
        source: NetError,
    },
    /// The server could not be reached, or answered with a gateway or server error.
    #[error(
        "could not reach the chat server (while trying to {}): {detail}; retrying with back-off",
        .rpc.doing()
    )]
    Unavailable {
        /// What failed.
        rpc: Rpc,
        /// What happened on the network or which status came back.
        detail: String,
    },
    /// The answer was not the JSON this version expects.
    #[error(
        "the chat server's answer to {} was not understood ({problem}); the server's version \
         may not be supported: pin a supported Chatto version",
        .rpc.path()
    )]
    Malformed {
        /// What failed.
        rpc: Rpc,
        /// What did not parse.
        problem: String,
    },
    /// Any other Connect error code.
    #[error("Chatto answered {} with {code} (HTTP {status}): {server_message}", .rpc.path())]
    Other {
        /// What failed.
        rpc: Rpc,
        /// HTTP status.
        status: u16,
        /// Connect code.
        code: String,
        /// What the server said (shortened).
        server_message: String,
    },
    /// The key belongs to a person, not a bot account.
    #[error(
        "the API key belongs to @{login}, which is not a bot account; create a bot in Chatto \
         (Server Admin → Bots) and use its key"
    )]
    NotABot {
        /// The login the key belongs to.
        login: String,
    },
    /// The address typed is not a usable base URL.
    #[error("the chat server address is not a valid http(s) URL: {problem}")]
    BadAddress {
        /// Why.
        problem: String,
    },
    /// The address is a valid URL, but the outbound policy does not let Llooma reach it (a
    /// private or local address, or not on `BOT_ALLOWED_ORIGINS` while that list is set).
    #[error(
        "the chat server address {address} is valid but not allowed by the outbound network \
         policy: {reason}; `llooma check-address --purpose bot {address}` shows the same \
         decision"
    )]
    AddressNotAllowed {
        /// The address, as parsed (no query, fragment or credentials).
        address: String,
        /// The policy's refusal, with what an administrator can do about it.
        reason: Refusal,
    },
}

fn missing_words(permission: Option<&'static str>) -> String {
    match permission {
        Some(permission) => format!(": it probably lacks the `{permission}` permission"),
        None => String::new(),
    }
}

impl ChattoError {
    /// The RPC that failed, when one did.
    pub fn rpc(&self) -> Option<Rpc> {
        match self {
            ChattoError::PermissionDenied { rpc, .. }
            | ChattoError::Unauthenticated { rpc, .. }
            | ChattoError::SlowMode { rpc, .. }
            | ChattoError::NotFound { rpc, .. }
            | ChattoError::Blocked { rpc, .. }
            | ChattoError::Unavailable { rpc, .. }
            | ChattoError::Malformed { rpc, .. }
            | ChattoError::Other { rpc, .. } => Some(*rpc),
            ChattoError::NotABot { .. }
            | ChattoError::BadAddress { .. }
            | ChattoError::AddressNotAllowed { .. } => None,
        }
    }
}

impl ServerError for ChattoError {
    fn missing_permission(&self) -> Option<&'static str> {
        match self {
            ChattoError::PermissionDenied { permission, .. } => *permission,
            _ => None,
        }
    }

    fn action(&self) -> ErrorAction {
        match self {
            ChattoError::PermissionDenied { .. }
            | ChattoError::Unauthenticated { .. }
            | ChattoError::Blocked { .. }
            | ChattoError::NotABot { .. }
            | ChattoError::BadAddress { .. }
            | ChattoError::AddressNotAllowed { .. }
            // Lenient parsing already absorbs added fields; what still fails will fail on every
            // retry, so a person has to look (usually: an unsupported server version).
            | ChattoError::Malformed { .. } => ErrorAction::Pause,
            ChattoError::SlowMode { .. } => ErrorAction::RetryLater,
            ChattoError::NotFound { .. } => ErrorAction::Skip,
            ChattoError::Unavailable { .. } => ErrorAction::BackOff,
            ChattoError::Other { status, .. } if *status >= 500 => ErrorAction::BackOff,
            ChattoError::Other { .. } => ErrorAction::Skip,
        }
    }
}
