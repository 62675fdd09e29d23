//! [`ChattoClient`]: Connect-JSON calls over the one outbound client, [`NetClient`].

use std::fmt;

use http::HeaderValue;
use llooma_net::{Decision, NetClient, NetError, Purpose, Refusal};
use llooma_vault::Secret;
use serde::Serialize;
use serde::de::DeserializeOwned;
use serde_json::json;
use zeroize::Zeroizing;

use crate::error::{ChattoError, Rpc};
use crate::wire::{
    AroundPage, ConnectError, CreateMessageRequest, EventPage, GetUserResponse, GetViewerResponse,
    Message, MessageEnvelope, MessageList, OccurrenceList, PageEnvelope, User,
};

/// The most notifications one list call may ask for (server limit).
pub const MAX_NOTIFICATION_PAGE: u32 = 100;
/// The most events one timeline call may ask for (server limit).
pub const MAX_EVENTS_PAGE: u32 = 500;
/// Server messages are kept this short in our errors: enough to diagnose, never a whole body.
const SERVER_MESSAGE_CHARS: usize = 200;

/// A Chatto API client for one bot account. Cheap to clone; the key never appears in `Debug`.
#[derive(Clone)]
pub struct ChattoClient {
    net: NetClient,
    base: String,
    key: Secret,
}

impl fmt::Debug for ChattoClient {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("ChattoClient")
            .field("base", &self.base)
            .field("key", &"[REDACTED]")
            .finish_non_exhaustive()
    }
}

impl ChattoClient {
    /// A client for the server at `base_url` (e.g. `https://chat.example.org`), over `net`, which
    /// the caller builds for [`Purpose::Bot`].
    ///
    /// The address is checked against `net`'s policy here, so a typo or a blocked address is
    /// reported before any key is sent anywhere.
    pub fn new(net: NetClient, base_url: &str, key: Secret) -> Result<Self, ChattoError> {
        if net.purpose() != Purpose::Bot {
            return Err(ChattoError::BadAddress {
                problem: format!(
                    "the outbound client was built for {}, not for chat servers (a bug in the \
                     caller)",
                    net.purpose().what()
                ),
            });
        }
        let parsed = url::Url::parse(base_url.trim())
            .map_err(|err| ChattoError::BadAddress { problem: err.to_string() })?;
        if parsed.query().is_some() || parsed.fragment().is_some() {
            return Err(ChattoError::BadAddress {
                problem: "it has a query or fragment; give just the server's address".to_owned(),
            });
        }
        if let Decision::Refused { reason } = net.policy().decide(Purpose::Bot, &parsed) {
            return Err(refused(&parsed, reason));
        }
        let base = parsed.as_str().trim_end_matches('/').to_owned();
        Ok(Self { net, base, key })
    }

    /// The server's base address.
    pub fn base_url(&self) -> &str {
        &self.base
    }

    /// `GetViewer`: who the key belongs to.
    pub async fn get_viewer(&self) -> Result<User, ChattoError> {
        let answer: GetViewerResponse = self.call(Rpc::GetViewer, &json!({})).await?;
        Ok(answer.user.profile)
    }

    /// Checks address and key before an integration is saved: the key must be accepted and
    /// belong to a bot account.
    pub async fn check_connection(&self) -> Result<User, ChattoError> {
        let me = self.get_viewer().await?;
        if me.id.is_empty() {
            return Err(ChattoError::Malformed {
                rpc: Rpc::GetViewer,
                problem: "the answer names no user".to_owned(),
            });
        }
        if !me.is_a_bot() {
            return Err(ChattoError::NotABot { login: me.login });
        }
        Ok(me)
    }

    /// `ListNotificationOccurrences`: one page, newest first.
    pub async fn list_notification_occurrences(
        &self,
        limit: u32,
        offset: u32,
    ) -> Result<OccurrenceList, ChattoError> {
        let body = json!({"page": {"limit": limit.min(MAX_NOTIFICATION_PAGE), "offset": offset}});
        self.call(Rpc::ListNotificationOccurrences, &body).await
    }

    /// `MarkNotificationRead`. Idempotent.
    pub async fn mark_notification_read(&self, notification_id: &str) -> Result<(), ChattoError> {
        let _: serde_json::Value = self
            .call(Rpc::MarkNotificationRead, &json!({"notificationId": notification_id}))
            .await?;
        Ok(())
    }

    /// `GetMessage`.
    pub async fn get_message(&self, room_id: &str, event_id: &str) -> Result<Message, ChattoError> {
        let answer: MessageEnvelope =
            self.call(Rpc::GetMessage, &json!({"roomId": room_id, "eventId": event_id})).await?;
        Ok(answer.message)
    }

    /// `BatchGetMessages` (at most 100 ids; more are cut).
    pub async fn batch_get_messages(
        &self,
        room_id: &str,
        event_ids: &[String],
    ) -> Result<Vec<Message>, ChattoError> {
        let ids = &event_ids[..event_ids.len().min(100)];
        let answer: MessageList =
            self.call(Rpc::BatchGetMessages, &json!({"roomId": room_id, "eventIds": ids})).await?;
        Ok(answer.messages)
    }

    /// `GetRoomEventsAround`: a page of the room centred on `event_id`.
    pub async fn get_room_events_around(
        &self,
        room_id: &str,
        event_id: &str,
        limit: u32,
    ) -> Result<AroundPage, ChattoError> {
        let body =
            json!({"roomId": room_id, "eventId": event_id, "limit": limit.min(MAX_EVENTS_PAGE)});
        self.call(Rpc::GetRoomEventsAround, &body).await
    }

    /// `GetRoomEvents` before a cursor (a page's `startCursor`).
    pub async fn get_room_events_before(
        &self,
        room_id: &str,
        before: &str,
        limit: u32,
    ) -> Result<EventPage, ChattoError> {
        let body =
            json!({"roomId": room_id, "before": before, "limit": limit.min(MAX_EVENTS_PAGE)});
        let answer: PageEnvelope = self.call(Rpc::GetRoomEvents, &body).await?;
        Ok(answer.page)
    }

    /// `GetThreadEvents`: the latest page (root and latest replies), or the page before
    /// `before`.
    pub async fn get_thread_events(
        &self,
        room_id: &str,
        thread_root_event_id: &str,
        limit: u32,
        before: Option<&str>,
    ) -> Result<EventPage, ChattoError> {
        let mut body = json!({
            "roomId": room_id,
            "threadRootEventId": thread_root_event_id,
            "limit": limit.min(MAX_EVENTS_PAGE),
        });
        if let Some(before) = before {
            body["before"] = json!(before);
        }
        let answer: PageEnvelope = self.call(Rpc::GetThreadEvents, &body).await?;
        Ok(answer.page)
    }

    /// `CreateMessage`. No idempotency key exists: record the activation before calling this.
    pub async fn create_message(
        &self,
        request: &CreateMessageRequest,
    ) -> Result<Message, ChattoError> {
        let rpc = if request.thread_root_event_id.is_some() {
            Rpc::CreateThreadReply
        } else {
            Rpc::CreateMessage
        };
        let answer: MessageEnvelope = self.call(rpc, request).await?;
        Ok(answer.message)
    }

    /// `FollowThread`.
    pub async fn follow_thread(
        &self,
        room_id: &str,
        thread_root_event_id: &str,
    ) -> Result<(), ChattoError> {
        let body = json!({"roomId": room_id, "threadRootEventId": thread_root_event_id});
        let _: serde_json::Value = self.call(Rpc::FollowThread, &body).await?;
        Ok(())
    }

    /// `UpdateTypingIndicator`.
    pub async fn update_typing_indicator(
        &self,
        room_id: &str,
        thread_root_event_id: Option<&str>,
    ) -> Result<(), ChattoError> {
        let mut body = json!({"roomId": room_id});
        if let Some(root) = thread_root_event_id {
            body["threadRootEventId"] = json!(root);
        }
        let _: serde_json::Value = self.call(Rpc::UpdateTypingIndicator, &body).await?;
        Ok(())
    }

    /// `GetUser`.
    pub async fn get_user(&self, user_id: &str) -> Result<User, ChattoError> {
        let answer: GetUserResponse = self.call(Rpc::GetUser, &json!({"userId": user_id})).await?;
        Ok(answer.user.user)
    }

    /// One unary Connect call with the JSON codec.
    async fn call<Req, Resp>(&self, rpc: Rpc, request: &Req) -> Result<Resp, ChattoError>
    where
        Req: Serialize + ?Sized,
        Resp: DeserializeOwned,
    {
        let url = format!("{}/api/connect/{}", self.base, rpc.path());
        let body = serde_json::to_vec(request)
            .map_err(|err| ChattoError::Malformed { rpc, problem: err.to_string() })?;
        let builder = self.net.post(&url).map_err(|err| net_error(rpc, err))?;
        let builder = builder
            .header(http::header::CONTENT_TYPE, "application/json")
            .header(http::header::AUTHORIZATION, self.bearer(rpc)?)
            .body(body);
        let response = self.net.send(builder).await.map_err(|err| net_error(rpc, err))?;
        let status = response.status().as_u16();
        let bytes = response.bytes().await.map_err(|err| net_error(rpc, err))?;
        if status == 200 {
            return serde_json::from_slice(&bytes).map_err(|err| ChattoError::Malformed {
                rpc,
                problem: format!("invalid JSON: {err}"),
            });
        }
        Err(connect_error(rpc, status, &bytes))
    }

    fn bearer(&self, rpc: Rpc) -> Result<HeaderValue, ChattoError> {
        let text = Zeroizing::new(format!("Bearer {}", self.key.expose()));
        let mut value = HeaderValue::from_str(&text).map_err(|_| ChattoError::Unauthenticated {
            rpc,
            // Never echo the key itself: say only what is wrong with it.
            server_message: "the key contains characters that cannot be sent in a header"
                .to_owned(),
        })?;
        // Keeps the value out of any Debug print of the request.
        value.set_sensitive(true);
        Ok(value)
    }
}

/// A policy refusal of a parsed address: either the URL is not one Llooma can use at all, or it
/// is a valid address the policy does not allow (which an administrator can change).
fn refused(address: &url::Url, reason: Refusal) -> ChattoError {
    match reason {
        Refusal::Unparseable { .. }
        | Refusal::UnsupportedScheme { .. }
        | Refusal::Userinfo
        | Refusal::MissingHost => ChattoError::BadAddress { problem: reason.to_string() },
        Refusal::LoopbackName { .. }
        | Refusal::BlockedAddress { .. }
        | Refusal::NotOnAllowList { .. } => {
            let address = address.as_str().trim_end_matches('/').to_owned();
            ChattoError::AddressNotAllowed { address, reason }
        }
    }
}

fn net_error(rpc: Rpc, err: NetError) -> ChattoError {
    match err {
        NetError::Refused { .. } => ChattoError::Blocked { rpc, source: err },
        other => ChattoError::Unavailable { rpc, detail: other.to_string() },
    }
}

/// Maps a non-200 answer. The Connect code decides; the HTTP status is the fallback for bodies
/// that are not Connect errors (a proxy's HTML page).
fn connect_error(rpc: Rpc, status: u16, body: &[u8]) -> ChattoError {
    let parsed: Option<ConnectError> = serde_json::from_slice(body).ok();
    let (code, message) = match parsed {
        Some(error) if !error.code.is_empty() => (error.code, error.message),
        _ => {
            let code = match status {
                401 => "unauthenticated",
                403 => "permission_denied",
                404 => "not_found",
                429 => "resource_exhausted",
                502..=504 => "unavailable",
                _ => "unknown",
            };
            (code.to_owned(), String::new())
        }
    };
    let server_message: String = message.chars().take(SERVER_MESSAGE_CHARS).collect();
    match code.as_str() {
        "permission_denied" => ChattoError::PermissionDenied {
            rpc,
            permission: rpc.likely_missing_permission(),
            server_message,
        },
        "unauthenticated" => ChattoError::Unauthenticated { rpc, server_message },
        "resource_exhausted" => ChattoError::SlowMode { rpc, server_message },
        "not_found" => ChattoError::NotFound { rpc, server_message },
        "unavailable" => ChattoError::Unavailable {
            rpc,
            detail: format!("the server answered HTTP {status} (unavailable)"),
        },
        _ => ChattoError::Other { rpc, status, code, server_message },
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn permission_denied_names_the_permission_per_rpc() {
        let body = br#"{"code":"permission_denied","message":"nope"}"#;
        let cases = [
            (Rpc::GetRoomEventsAround, "message.read"),
            (Rpc::CreateMessage, "message.post"),
            (Rpc::CreateThreadReply, "message.post-in-thread"),
        ];
        for (rpc, permission) in cases {
            let err = connect_error(rpc, 403, body);
            let text = err.to_string();
            assert!(text.contains(&format!("`{permission}`")), "{rpc:?}: {text}");
        }
    }

    #[test]
    fn status_is_the_fallback_for_non_connect_bodies() {
        assert!(matches!(
            connect_error(Rpc::GetViewer, 401, b"<html>"),
            ChattoError::Unauthenticated { .. }
        ));
        assert!(matches!(
            connect_error(Rpc::CreateMessage, 502, b"bad gateway"),
            ChattoError::Unavailable { .. }
        ));
    }
}
