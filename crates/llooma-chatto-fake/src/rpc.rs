//! The Connect-JSON endpoints: `POST /api/connect/{package.Service}/{Method}`.

use axum::Router;
use axum::body::to_bytes;
use axum::extract::{Path, Request, State as AxumState};
use axum::http::{HeaderMap, StatusCode, header};
use axum::response::{IntoResponse, Response};
use axum::routing::post;
use chrono::{DateTime, SecondsFormat, Utc};
use serde_json::{Map, Value, json};

use crate::{
    CreateMessageCall, FollowCall, MAX_BODY_BYTES, MAX_REQUEST_BYTES, MarkReadCall, MessageRec,
    Shared, SignalKind, State, UserRec, lock,
};

pub(crate) fn router(state: Shared) -> Router {
    Router::new().route("/api/connect/{service}/{method}", post(handle)).with_state(state)
}

/// A Connect error: HTTP status from the code, body `{"code", "message"}`.
struct Fail(&'static str, String);

impl IntoResponse for Fail {
    fn into_response(self) -> Response {
        let status = match self.0 {
            "invalid_argument" | "failed_precondition" => StatusCode::BAD_REQUEST,
            "unauthenticated" => StatusCode::UNAUTHORIZED,
            "permission_denied" => StatusCode::FORBIDDEN,
            "not_found" | "unimplemented" => StatusCode::NOT_FOUND,
            "resource_exhausted" => StatusCode::TOO_MANY_REQUESTS,
            _ => StatusCode::INTERNAL_SERVER_ERROR,
        };
        (status, axum::Json(json!({"code": self.0, "message": self.1}))).into_response()
    }
}

fn invalid(message: impl Into<String>) -> Fail {
    Fail("invalid_argument", message.into())
}

fn not_found(what: &str) -> Fail {
    Fail("not_found", format!("{what} not found"))
}

type Answer = Result<Value, Fail>;

async fn handle(
    AxumState(state): AxumState<Shared>,
    Path((service, method)): Path<(String, String)>,
    request: Request,
) -> Response {
    if crate::lock(&state).unavailable {
        // What a proxy in front of a stopped server answers: no Connect body.
        return (StatusCode::SERVICE_UNAVAILABLE, "service unavailable").into_response();
    }
    let headers = request.headers().clone();
    let is_json = headers
        .get(header::CONTENT_TYPE)
        .and_then(|v| v.to_str().ok())
        .is_some_and(|v| v.starts_with("application/json"));
    if !is_json {
        return (StatusCode::UNSUPPORTED_MEDIA_TYPE, "").into_response();
    }
    let Ok(bytes) = to_bytes(request.into_body(), MAX_REQUEST_BYTES).await else {
        return Fail("resource_exhausted", "request larger than 1 MiB".into()).into_response();
    };
    let body: Value = match serde_json::from_slice(&bytes) {
        Ok(Value::Object(map)) => Value::Object(map),
        _ => return invalid("body is not a JSON object").into_response(),
    };
    let result = dispatch(&state, &headers, &service, &method, &body);
    match result {
        Ok(value) => (StatusCode::OK, axum::Json(value)).into_response(),
        Err(fail) => fail.into_response(),
    }
}

fn dispatch(
    state: &Shared,
    headers: &HeaderMap,
    service: &str,
    method: &str,
    body: &Value,
) -> Answer {
    if service == "chatto.discovery.v1.ServerDiscoveryService" && method == "GetServer" {
        return Ok(json!({"version": "0.5.0-fake"}));
    }
    let mut state = lock(state);
    let caller = authenticate(&state, headers)?;
    let call = Call { caller, body };
    match (service, method) {
        ("chatto.api.v1.ViewerService", "GetViewer") => get_viewer(&state, &call),
        ("chatto.api.v1.NotificationService", "ListNotificationOccurrences") => {
            state.list_calls.push((call.caller.id.clone(), Utc::now()));
            list_notifications(&state, &call)
        }
        ("chatto.api.v1.NotificationService", "MarkNotificationRead") => {
            mark_read(&mut state, &call)
        }
        ("chatto.api.v1.MessageService", "GetMessage") => get_message(&state, &call),
        ("chatto.api.v1.MessageService", "BatchGetMessages") => batch_get(&state, &call),
        ("chatto.api.v1.MessageService", "CreateMessage") => create_message(&mut state, &call),
        ("chatto.api.v1.RoomService", "GetRoomEventsAround") => room_around(&state, &call),
        ("chatto.api.v1.RoomService", "GetRoomEvents") => room_events(&state, &call),
        ("chatto.api.v1.RoomService", "UpdateTypingIndicator") => {
            member_room(&state, &call, &call.str("roomId"))?;
            Ok(json!({}))
        }
        ("chatto.api.v1.ThreadService", "GetThreadEvents") => thread_events(&state, &call),
        ("chatto.api.v1.ThreadService", "FollowThread") => follow_thread(&mut state, &call),
        ("chatto.api.v1.UserService", "GetUser") => get_user(&state, &call),
        _ => Err(Fail("unimplemented", format!("{service}/{method} is not implemented"))),
    }
}

struct Call<'a> {
    caller: UserRec,
    body: &'a Value,
}

impl Call<'_> {
    /// A string field by its lowerCamelCase or snake_case name (requests may use either).
    fn str(&self, camel: &str) -> String {
        self.field(camel).and_then(Value::as_str).unwrap_or_default().to_owned()
    }

    fn field(&self, camel: &str) -> Option<&Value> {
        self.body.get(camel).or_else(|| self.body.get(snake(camel)))
    }

    fn opt(&self, camel: &str) -> Option<String> {
        Some(self.str(camel)).filter(|s| !s.is_empty())
    }

    fn limit(&self, default: u64, max: u64) -> usize {
        let limit = self.field("limit").and_then(Value::as_u64).unwrap_or(default);
        usize::try_from(limit.clamp(1, max)).unwrap_or(1)
    }

    fn is_bot(&self) -> bool {
        self.caller.bot.is_some()
    }
}

fn snake(camel: &str) -> String {
    let mut out = String::new();
    for c in camel.chars() {
        if c.is_ascii_uppercase() {
            out.push('_');
            out.push(c.to_ascii_lowercase());
        } else {
            out.push(c);
        }
    }
    out
}

fn authenticate(state: &State, headers: &HeaderMap) -> Result<UserRec, Fail> {
    let unauthenticated = || Fail("unauthenticated", "missing or invalid API key".into());
    let key = headers
        .get(header::AUTHORIZATION)
        .and_then(|v| v.to_str().ok())
        .and_then(|v| v.strip_prefix("Bearer "))
        .ok_or_else(unauthenticated)?;
    match state.keys.get(key) {
        Some((user, false)) => state.user(user).cloned().ok_or_else(unauthenticated),
        Some((_, true)) => Err(Fail("unauthenticated", "API key revoked".into())),
        None => Err(unauthenticated()),
    }
}

/// Bots need each permission; people have them all.
fn require(state: &State, call: &Call<'_>, any_of: &[&str]) -> Result<(), Fail> {
    if !call.is_bot() {
        return Ok(());
    }
    let granted = state.permissions.get(&call.caller.id);
    if any_of.iter().any(|p| granted.is_some_and(|g| g.contains(*p))) {
        return Ok(());
    }
    Err(Fail("permission_denied", format!("missing permission {}", any_of.join(" or "))))
}

fn member_room<'s>(
    state: &'s State,
    call: &Call<'_>,
    room_id: &str,
) -> Result<&'s crate::RoomRec, Fail> {
    let room = state.room(room_id).ok_or_else(|| not_found("room"))?;
    if !room.members.contains(&call.caller.id) {
        return Err(Fail("permission_denied", "not a member of this room".into()));
    }
    Ok(room)
}

fn ts(at: DateTime<Utc>) -> String {
    at.to_rfc3339_opts(SecondsFormat::Millis, true)
}

fn user_json(user: &UserRec) -> Value {
    let mut map = Map::new();
    map.insert("id".into(), json!(user.id));
    map.insert("login".into(), json!(user.login));
    map.insert("displayName".into(), json!(user.display_name));
    // Proto3: false is the default and is left out.
    match user.bot {
        Some(crate::BotStyle::IsBotFlag) => {
            map.insert("isBot".into(), json!(true));
        }
        Some(crate::BotStyle::BotObject) => {
            map.insert("bot".into(), json!({"ownerUserId": "u-owner"}));
        }
        None => {}
    }
    Value::Object(map)
}

fn message_json(state: &State, message: &MessageRec) -> Value {
    let mut map = Map::new();
    map.insert("id".into(), json!(message.id));
    map.insert("roomId".into(), json!(message.room_id));
    map.insert("createdAt".into(), json!(ts(message.created_at)));
    map.insert("actorId".into(), json!(message.actor_id));
    map.insert("body".into(), json!(message.body));
    if let Some(root) = &message.thread_root {
        map.insert("threadRootEventId".into(), json!(root));
    }
    if let Some((of, root)) = &message.echo_of {
        map.insert("echoOfEventId".into(), json!(of));
        map.insert("echoFromThreadRootEventId".into(), json!(root));
    }
    if let Some(reply_to) = &message.in_reply_to {
        map.insert("inReplyTo".into(), json!({"eventId": reply_to}));
    }
    let replies = thread_replies(state, &message.room_id, &message.id).len();
    if message.thread_root.is_none() && message.echo_of.is_none() && replies > 0 {
        map.insert(
            "thread".into(),
            json!({"threadRootEventId": message.id, "replyCount": replies.to_string()}),
        );
    }
    Value::Object(map)
}

fn sorted(mut messages: Vec<&MessageRec>) -> Vec<&MessageRec> {
    messages.sort_by_key(|m| (m.created_at, m.seq));
    messages
}

fn thread_replies<'s>(state: &'s State, room_id: &str, root: &str) -> Vec<&'s MessageRec> {
    sorted(
        state
            .messages
            .iter()
            .filter(|m| m.room_id == room_id && m.thread_root.as_deref() == Some(root))
            .collect(),
    )
}

/// The room's main timeline (thread replies excluded, their echoes included).
fn timeline<'s>(state: &'s State, room_id: &str) -> Vec<&'s MessageRec> {
    sorted(
        state.messages.iter().filter(|m| m.room_id == room_id && m.thread_root.is_none()).collect(),
    )
}

/// A room page: a `roomCreated` event first when the page starts at the beginning, so the
/// client sees (and must skip) events that are not messages.
fn page_json(
    state: &State,
    room: &crate::RoomRec,
    messages: &[&MessageRec],
    with_created: bool,
    has_older: bool,
    has_newer: bool,
) -> Value {
    let mut events = Vec::new();
    let mut users = Map::new();
    if with_created {
        events.push(json!({
            "id": format!("{}-created", room.id),
            "createdAt": ts(room.created_at),
            "roomCreated": {},
        }));
    }
    for message in messages {
        events.push(json!({
            "id": message.id,
            "createdAt": ts(message.created_at),
            "actorId": message.actor_id,
            "messagePosted": {"message": message_json(state, message)},
        }));
        if let Some(user) = state.user(&message.actor_id) {
            users.insert(user.id.clone(), user_json(user));
        }
    }
    let mut page = Map::new();
    page.insert("events".into(), Value::Array(events));
    if let Some(first) = messages.first() {
        page.insert("startCursor".into(), json!(first.id));
    }
    if let Some(last) = messages.last() {
        page.insert("endCursor".into(), json!(last.id));
    }
    if has_older {
        page.insert("hasOlder".into(), json!(true));
    }
    if has_newer {
        page.insert("hasNewer".into(), json!(true));
    }
    page.insert("includes".into(), json!({"users": users}));
    Value::Object(page)
}

fn get_viewer(_state: &State, call: &Call<'_>) -> Answer {
    Ok(json!({"user": {"profile": user_json(&call.caller)}, "preferences": {}}))
}

fn list_notifications(state: &State, call: &Call<'_>) -> Answer {
    let page = call.field("page");
    let limit =
        page.and_then(|p| p.get("limit")).and_then(Value::as_u64).unwrap_or(50).clamp(1, 100);
    let offset = page.and_then(|p| p.get("offset")).and_then(Value::as_u64).unwrap_or(0);
    let mut mine: Vec<_> =
        state.notifications.iter().filter(|n| n.user_id == call.caller.id).collect();
    // Newest first.
    mine.sort_by(|a, b| b.created_at.cmp(&a.created_at).then_with(|| b.id.cmp(&a.id)));
    let total = mine.len();
    let unread = mine.iter().filter(|n| n.unread).count();
    let start = usize::try_from(offset).unwrap_or(usize::MAX).min(total);
    let end = start.saturating_add(usize::try_from(limit).unwrap_or(100)).min(total);
    let occurrences: Vec<Value> = mine[start..end]
        .iter()
        .map(|n| {
            let room = state.room(&n.room_id);
            let mut pointer = Map::new();
            pointer.insert(
                "room".into(),
                json!({
                    "id": n.room_id,
                    "kind": if room.is_some_and(|r| r.dm) { "ROOM_KIND_DM" } else { "ROOM_KIND_CHANNEL" },
                    "name": room.map(|r| r.name.clone()).unwrap_or_default(),
                }),
            );
            pointer.insert("eventId".into(), json!(n.event_id));
            if let Some(root) = state.message(&n.room_id, &n.event_id).and_then(|m| m.thread_root.clone()) {
                pointer.insert("threadRootEventId".into(), json!(root));
            }
            let mut member = Map::new();
            member.insert("message".into(), Value::Object(pointer));
            match n.kind {
                SignalKind::RoleMentionReceived => {
                    member.insert("roleNames".into(), json!(["team"]));
                }
                SignalKind::ReactionReceived => {
                    member.insert("emoji".into(), json!("👍"));
                }
                _ => {}
            }
            let mut signal = Map::new();
            signal.insert(n.kind.member().into(), Value::Object(member));
            let mut occurrence = Map::new();
            occurrence.insert("id".into(), json!(n.id));
            occurrence.insert("createdAt".into(), json!(ts(n.created_at)));
            if let Some(actor) = state.user(&n.actor_id) {
                occurrence.insert("actor".into(), user_json(actor));
            }
            occurrence.insert("signal".into(), Value::Object(signal));
            if n.unread {
                occurrence.insert("unread".into(), json!(true));
            }
            occurrence.insert("expiresAt".into(), json!(ts(n.created_at + chrono::Duration::days(90))));
            occurrence.insert("attentionLevel".into(), json!("ATTENTION_LEVEL_NORMAL"));
            Value::Object(occurrence)
        })
        .collect();
    let mut page = Map::new();
    page.insert("totalCount".into(), json!(total.to_string()));
    if end < total {
        page.insert("hasMore".into(), json!(true));
    }
    Ok(json!({"occurrences": occurrences, "page": page, "unreadCount": unread}))
}

fn mark_read(state: &mut State, call: &Call<'_>) -> Answer {
    let id = call.str("notificationId");
    state
        .mark_read_calls
        .push(MarkReadCall { caller: call.caller.id.clone(), notification_id: id.clone() });
    let notification = state
        .notifications
        .iter_mut()
        .find(|n| n.id == id && n.user_id == call.caller.id)
        .ok_or_else(|| not_found("notification"))?;
    notification.unread = false;
    Ok(json!({}))
}

fn get_message(state: &State, call: &Call<'_>) -> Answer {
    let room_id = call.str("roomId");
    member_room(state, call, &room_id)?;
    require(state, call, &["message.read", "message.read-interactions"])?;
    let message =
        state.message(&room_id, &call.str("eventId")).ok_or_else(|| not_found("message"))?;
    Ok(json!({"message": message_json(state, message)}))
}

fn batch_get(state: &State, call: &Call<'_>) -> Answer {
    let room_id = call.str("roomId");
    member_room(state, call, &room_id)?;
    require(state, call, &["message.read", "message.read-interactions"])?;
    let ids: Vec<&str> = call
        .field("eventIds")
        .and_then(Value::as_array)
        .map(|a| a.iter().filter_map(Value::as_str).collect())
        .unwrap_or_default();
    if ids.len() > 100 {
        return Err(invalid("at most 100 event ids"));
    }
    let messages: Vec<Value> = ids
        .iter()
        .filter_map(|id| state.message(&room_id, id))
        .map(|m| message_json(state, m))
        .collect();
    Ok(json!({"messages": messages}))
}

fn room_around(state: &State, call: &Call<'_>) -> Answer {
    let room_id = call.str("roomId");
    let room = member_room(state, call, &room_id)?;
    // Room history is exactly what the narrow permission does not cover.
    require(state, call, &["message.read"])?;
    let all = timeline(state, &room_id);
    let event_id = call.str("eventId");
    let target = all.iter().position(|m| m.id == event_id).ok_or_else(|| not_found("event"))?;
    let limit = call.limit(50, 500);
    let before = (limit.saturating_sub(1)) / 2;
    let start = target.saturating_sub(before);
    let end = start.saturating_add(limit).min(all.len());
    let page = page_json(state, room, &all[start..end], start == 0, start > 0, end < all.len());
    let index = target - start + usize::from(start == 0);
    let mut answer = Map::new();
    answer.insert("page".into(), page);
    // Proto3: a zero index is the default and is left out.
    if index > 0 {
        answer.insert("targetIndex".into(), json!(index));
    }
    Ok(Value::Object(answer))
}

fn room_events(state: &State, call: &Call<'_>) -> Answer {
    let room_id = call.str("roomId");
    let room = member_room(state, call, &room_id)?;
    require(state, call, &["message.read"])?;
    let all = timeline(state, &room_id);
    let limit = call.limit(50, 500);
    let (start, end) = if let Some(before) = call.opt("before") {
        let end = all.iter().position(|m| m.id == before).ok_or_else(|| invalid("bad cursor"))?;
        (end.saturating_sub(limit), end)
    } else if let Some(after) = call.opt("after") {
        let start =
            all.iter().position(|m| m.id == after).ok_or_else(|| invalid("bad cursor"))? + 1;
        (start, start.saturating_add(limit).min(all.len()))
    } else {
        (all.len().saturating_sub(limit), all.len())
    };
    Ok(
        json!({"page": page_json(state, room, &all[start..end], start == 0, start > 0, end < all.len())}),
    )
}

fn thread_events(state: &State, call: &Call<'_>) -> Answer {
    let room_id = call.str("roomId");
    let room = member_room(state, call, &room_id)?;
    require(state, call, &["message.read", "message.read-interactions"])?;
    let root_id = call.str("threadRootEventId");
    let root = state.message(&room_id, &root_id).ok_or_else(|| not_found("thread"))?;
    let replies = thread_replies(state, &room_id, &root_id);
    let limit = call.limit(50, 500);
    // The first page holds the root and the latest replies; older pages only replies.
    let (messages, has_older, has_newer) = if let Some(before) = call.opt("before") {
        let end =
            replies.iter().position(|m| m.id == before).ok_or_else(|| invalid("bad cursor"))?;
        let start = end.saturating_sub(limit);
        (replies[start..end].to_vec(), start > 0, true)
    } else {
        let start = replies.len().saturating_sub(limit.saturating_sub(1));
        let mut page = vec![root];
        page.extend_from_slice(&replies[start..]);
        (page, start > 0, false)
    };
    let mut page = page_json(state, room, &messages, false, has_older, has_newer);
    // The cursor for older replies is the oldest reply shown, not the root.
    if let (Some(first_reply), Value::Object(map)) =
        (messages.iter().find(|m| m.thread_root.is_some()), &mut page)
    {
        map.insert("startCursor".into(), json!(first_reply.id));
    }
    Ok(json!({"page": page}))
}

fn create_message(state: &mut State, call: &Call<'_>) -> Answer {
    let mut record = CreateMessageCall {
        caller: call.caller.id.clone(),
        room_id: call.str("roomId"),
        body: call.str("body"),
        thread_root_event_id: call.opt("threadRootEventId"),
        in_reply_to: call.opt("inReplyTo"),
        refused: None,
        at: Utc::now(),
    };
    let result = create_message_checked(state, call, &record);
    match &result {
        Err(fail) => record.refused = Some(fail.0.to_owned()),
        Ok(_) => {
            if let Some(left) = state.down_after_posts {
                let left = left.saturating_sub(1);
                state.down_after_posts = (left > 0).then_some(left);
                // This post is accepted; every call after it finds the server down.
                state.unavailable |= left == 0;
            }
        }
    }
    state.create_calls.push(record);
    result
}

fn create_message_checked(
    state: &mut State,
    call: &Call<'_>,
    request: &CreateMessageCall,
) -> Answer {
    let room = member_room(state, call, &request.room_id)?.clone();
    if request.body.trim().is_empty() {
        return Err(invalid("body is empty"));
    }
    if request.body.len() > MAX_BODY_BYTES {
        return Err(invalid(format!("body is longer than {MAX_BODY_BYTES} bytes")));
    }
    let create_thread = call.field("createThread").and_then(Value::as_bool).unwrap_or(false);
    if create_thread && request.thread_root_event_id.is_some() {
        return Err(invalid("createThread cannot be combined with threadRootEventId"));
    }
    if let Some(root) = &request.thread_root_event_id {
        if room.dm {
            return Err(invalid("direct messages have no threads"));
        }
        let root = state.message(&room.id, root).ok_or_else(|| not_found("thread root"))?;
        if root.thread_root.is_some() || root.echo_of.is_some() {
            return Err(invalid("a thread root must be a message of the main timeline"));
        }
        require(state, call, &["message.post-in-thread"])?;
    } else {
        require(state, call, &["message.post"])?;
    }
    if create_thread {
        require(state, call, &["message.post-in-thread"])?;
    }
    if let Some(reply_to) = &request.in_reply_to
        && state.message(&room.id, reply_to).is_none()
    {
        return Err(not_found("inReplyTo message"));
    }
    if room.slow_mode && call.is_bot() {
        return Err(Fail("resource_exhausted", "slow mode: wait before posting again".into()));
    }
    let id = state.next_id("e");
    state.add_message(MessageRec {
        seq: 0,
        id: id.clone(),
        room_id: room.id.clone(),
        actor_id: call.caller.id.clone(),
        body: request.body.clone(),
        created_at: Utc::now(),
        thread_root: request.thread_root_event_id.clone(),
        echo_of: None,
        in_reply_to: request.in_reply_to.clone(),
    });
    // Posting a reply in a thread makes its author follow it.
    if let Some(root) = &request.thread_root_event_id {
        state.follows.insert((call.caller.id.clone(), room.id.clone(), root.clone()));
    }
    let message = state.message(&room.id, &id).ok_or_else(|| not_found("message"))?;
    Ok(json!({"message": message_json(state, message)}))
}

fn follow_thread(state: &mut State, call: &Call<'_>) -> Answer {
    let room_id = call.str("roomId");
    let root = call.str("threadRootEventId");
    state.follow_calls.push(FollowCall {
        caller: call.caller.id.clone(),
        room_id: room_id.clone(),
        thread_root_event_id: root.clone(),
    });
    let room = member_room(state, call, &room_id)?;
    if room.dm {
        return Err(invalid("direct messages have no threads"));
    }
    let message = state.message(&room_id, &root).ok_or_else(|| not_found("thread root"))?;
    if message.thread_root.is_some() {
        return Err(invalid("not a main-timeline message"));
    }
    state.follows.insert((call.caller.id.clone(), room_id, root));
    Ok(json!({}))
}

fn get_user(state: &State, call: &Call<'_>) -> Answer {
    let user = state.user(&call.str("userId")).ok_or_else(|| not_found("user"))?;
    Ok(json!({"user": {"user": user_json(user), "roles": []}}))
}
