//! `/api/v1/conversations` and `/api/v1/models`: the signed-in account's conversations, sending
//! a message, stopping a reply, the event stream of a conversation's turns, and a tab's one
//! stream (`/api/v1/events`: the account's cards and the open conversation's turns together).
//!
//! The stream is server-sent events whose ids are the log's numbers, so a reconnect with
//! `Last-Event-ID` replays what it missed and continues live (the log and the turns themselves
//! are `llooma_core`'s).

use std::collections::BTreeMap;
use std::convert::Infallible;
use std::time::Duration;

use axum::Json;
use axum::extract::{Path, State};
use axum::http::{HeaderMap, HeaderValue, StatusCode, header};
use axum::response::sse::{Event, KeepAlive, Sse};
use futures::{Stream, StreamExt};
use llooma_core::conversations::{
    ChosenPrompt, ChosenResource, ConversationChange, NewConversation, NewMessage,
};
use llooma_core::export::ExportFormat;
use llooma_types::{ConversationDetail, ConversationView, ProviderModels, TurnStarted};
use serde::Deserialize;

use crate::AppState;
use crate::download::{Disposition, content_disposition};
use crate::error::ApiError;
use crate::extract::{ApiJson, ApiQuery};
use crate::session::SignedIn;

#[derive(Deserialize)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct NewConversationBody {
    title: Option<String>,
    provider_id: Option<String>,
    model: Option<String>,
    persona_id: Option<String>,
    /// Without `providerId` and `model`: start with the account's last used model, else the
    /// instance's default (otherwise the conversation has no model until one is chosen).
    #[serde(default)]
    last_used_model: bool,
}

#[derive(Deserialize)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct PatchConversationBody {
    title: Option<String>,
    provider_id: Option<String>,
    model: Option<String>,
    mcp_enabled: Option<bool>,
    /// A persona's id, or an empty string for none.
    persona_id: Option<String>,
}

#[derive(Deserialize)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct NewMessageBody {
    content: String,
    /// Resources the person chose (`@`): they join the message as labelled blocks.
    #[serde(default)]
    resources: Vec<ChosenResourceBody>,
    /// Prompts the person chose (`/`), with their arguments.
    #[serde(default)]
    prompts: Vec<ChosenPromptBody>,
    /// A turn of this conversation (`turnId`): this message replaces the person's message of
    /// that turn and everything after it (an edited message, or a reply asked for again).
    #[serde(default)]
    replaces: Option<String>,
    /// Files uploaded to this conversation (their ids) that go with the message.
    #[serde(default)]
    files: Vec<String>,
    /// Said aloud in voice mode: a spoken turn, whose MCP calls are refused outright.
    #[serde(default)]
    spoken: bool,
}

#[derive(Deserialize)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct ChosenResourceBody {
    server_id: String,
    /// A resource the server lists, by its address.
    #[serde(default)]
    uri: Option<String>,
    /// Or one of the server's resource templates, with its blanks filled in `arguments`.
    #[serde(default)]
    uri_template: Option<String>,
    #[serde(default)]
    arguments: BTreeMap<String, String>,
}

#[derive(Deserialize)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct ChosenPromptBody {
    server_id: String,
    name: String,
    #[serde(default)]
    arguments: BTreeMap<String, String>,
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
pub struct ListQuery {
    limit: Option<u64>,
    /// Words to search for in titles and messages.
    q: Option<String>,
    /// Where the previous page ended (its `Link: rel="next"`).
    before: Option<String>,
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
pub struct EventsQuery {
    after: Option<i64>,
}

/// `POST /api/v1/conversations`.
pub async fn create(
    State(state): State<AppState>,
    signed_in: SignedIn,
    ApiJson(body): ApiJson<NewConversationBody>,
) -> Result<(StatusCode, Json<ConversationView>), ApiError> {
    let new = NewConversation {
        title: body.title,
        provider_id: body.provider_id,
        model: body.model,
        persona_id: body.persona_id,
        last_used_model: body.last_used_model,
    };
    let created = state.app.create_conversation(&signed_in.account.id, new).await?;
    Ok((StatusCode::CREATED, Json(created)))
}

/// `GET /api/v1/conversations?limit=&before=`: a page of the account's conversations, most
/// recently active first. When more follow, `Link: <…?limit=N&before=CURSOR>; rel="next"`.
pub async fn list(
    State(state): State<AppState>,
    signed_in: SignedIn,
    ApiQuery(query): ApiQuery<ListQuery>,
) -> Result<(HeaderMap, Json<Vec<ConversationView>>), ApiError> {
    if let Some(q) = &query.q {
        let found = state.app.search_conversations(&signed_in.account.id, q, query.limit).await?;
        return Ok((HeaderMap::new(), Json(found)));
    }
    let (page, next) = state
        .app
        .conversations_page(&signed_in.account.id, query.before.as_deref(), query.limit)
        .await?;
    let mut headers = HeaderMap::new();
    if let Some(next) = next {
        let limit = query.limit.unwrap_or(llooma_core::conversations::PAGE_DEFAULT);
        let link = format!("</api/v1/conversations?limit={limit}&before={next}>; rel=\"next\"");
        if let Ok(value) = HeaderValue::from_str(&link) {
            headers.insert(header::LINK, value);
        }
    }
    Ok((headers, Json(page)))
}

/// `GET /api/v1/conversations/{id}`: the conversation with its messages.
/// Other parameters are ignored, as they were before pages existed.
#[derive(Deserialize)]
pub struct PageQuery {
    /// How many of the newest messages (before `before`); absent: all of them.
    limit: Option<u64>,
    /// The oldest message of the page read last (`olderMessages`).
    before: Option<String>,
}

/// `GET /api/v1/conversations/{id}[?limit=N[&before=messageId]]`: the conversation, all of its
/// messages or a page of them.
pub async fn get(
    State(state): State<AppState>,
    signed_in: SignedIn,
    Path(id): Path<String>,
    ApiQuery(page): ApiQuery<PageQuery>,
) -> Result<Json<ConversationDetail>, ApiError> {
    let page = match (page.limit, page.before) {
        (None, None) => None,
        (Some(limit), before) => Some((limit, before)),
        (None, Some(_)) => {
            return Err(ApiError::bad_request(
                "invalid_limit",
                "Say how many messages a page has (limit) with before.",
            ));
        }
    };
    Ok(Json(state.app.conversation_page(&signed_in.account.id, &id, page).await?))
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
pub struct ExportQuery {
    /// `markdown` (or `md`) or `json`.
    format: String,
}

/// `GET /api/v1/conversations/{id}/export?format=markdown|json`: the conversation as a file to
/// download (see `llooma_core::export`).
pub async fn export(
    State(state): State<AppState>,
    signed_in: SignedIn,
    Path(id): Path<String>,
    ApiQuery(query): ApiQuery<ExportQuery>,
) -> Result<axum::response::Response, ApiError> {
    let format = ExportFormat::parse(&query.format)?;
    let exported = state.app.export_conversation(&signed_in.account.id, &id, format).await?;
    Ok(download(exported))
}

/// `GET /api/v1/me/export`: everything of the caller's account as one JSON file to download.
pub async fn export_account(
    State(state): State<AppState>,
    signed_in: SignedIn,
) -> Result<axum::response::Response, ApiError> {
    Ok(download(state.app.export_account(&signed_in.account.id).await?))
}

/// An export as a file to download, never shown in place.
fn download(exported: llooma_core::export::Exported) -> axum::response::Response {
    use axum::response::IntoResponse;
    let mut response = exported.body.into_response();
    let headers = response.headers_mut();
    headers.insert(header::CONTENT_TYPE, HeaderValue::from_static(exported.content_type));
    headers.insert("x-content-type-options", HeaderValue::from_static("nosniff"));
    headers.insert(
        header::CONTENT_DISPOSITION,
        content_disposition(Disposition::Attachment, &exported.file_name),
    );
    headers.insert(header::CACHE_CONTROL, HeaderValue::from_static("private, no-store"));
    response
}

/// `PATCH /api/v1/conversations/{id}`: title, model, persona, and the MCP tools switch.
pub async fn patch(
    State(state): State<AppState>,
    signed_in: SignedIn,
    Path(id): Path<String>,
    ApiJson(body): ApiJson<PatchConversationBody>,
) -> Result<Json<ConversationView>, ApiError> {
    let change = ConversationChange {
        title: body.title,
        provider_id: body.provider_id,
        model: body.model,
        mcp_enabled: body.mcp_enabled,
        persona_id: body.persona_id,
    };
    Ok(Json(state.app.change_conversation(&signed_in.account.id, &id, change).await?))
}

/// `DELETE /api/v1/conversations/{id}`.
pub async fn delete(
    State(state): State<AppState>,
    signed_in: SignedIn,
    Path(id): Path<String>,
) -> Result<StatusCode, ApiError> {
    state.app.delete_conversation(&signed_in.account.id, &id).await?;
    Ok(StatusCode::NO_CONTENT)
}

/// `POST /api/v1/conversations/{id}/messages`: stores the message and starts a turn; the reply
/// arrives on the event stream.
pub async fn send(
    State(state): State<AppState>,
    signed_in: SignedIn,
    Path(id): Path<String>,
    ApiJson(body): ApiJson<NewMessageBody>,
) -> Result<(StatusCode, Json<TurnStarted>), ApiError> {
    let message = NewMessage {
        content: body.content,
        resources: body
            .resources
            .into_iter()
            .map(|r| ChosenResource {
                server_id: r.server_id,
                uri: r.uri,
                uri_template: r.uri_template,
                arguments: r.arguments,
            })
            .collect(),
        prompts: body
            .prompts
            .into_iter()
            .map(|p| ChosenPrompt { server_id: p.server_id, name: p.name, arguments: p.arguments })
            .collect(),
        replaces: body.replaces,
        files: body.files,
        spoken: body.spoken,
    };
    let turn_id = state.app.send_message(&signed_in.account.id, &id, message).await?;
    let started = TurnStarted { spoken: body.spoken.then_some(true), ..TurnStarted::new(turn_id) };
    Ok((StatusCode::ACCEPTED, Json(started)))
}

/// `POST /api/v1/conversations/{id}/stop`: stops the running turn, here at once, or through
/// the database when another replica runs it (within a second).
pub async fn stop(
    State(state): State<AppState>,
    signed_in: SignedIn,
    Path(id): Path<String>,
) -> Result<StatusCode, ApiError> {
    state.app.stop_turn(&signed_in.account.id, &id).await?;
    Ok(StatusCode::ACCEPTED)
}

fn last_event_id(headers: &HeaderMap) -> Option<i64> {
    headers.get("last-event-id").and_then(|v| v.to_str().ok()).and_then(|v| v.trim().parse().ok())
}

/// `GET /api/v1/conversations/{id}/events`: the log after `Last-Event-ID`, then live.
pub async fn events(
    State(state): State<AppState>,
    signed_in: SignedIn,
    Path(id): Path<String>,
    ApiQuery(query): ApiQuery<EventsQuery>,
    headers: HeaderMap,
) -> Result<Sse<impl Stream<Item = Result<Event, Infallible>>>, ApiError> {
    // A reconnecting stream says where it was (`Last-Event-ID`); a page opening says where its
    // stored messages end (`?after=`, from the conversation's `eventsAfter`).
    let after = last_event_id(&headers).or(query.after).unwrap_or(0);
    let log = state.app.follow(&signed_in.account.id, &id, after).await?;
    let session_ended = signed_in.session_ended(&state);
    let stream = log
        .map(|e| Ok(Event::default().id(e.seq.to_string()).event(&e.kind).data(&e.data_json)))
        .take_until(session_ended);
    Ok(Sse::new(stream).keep_alive(KeepAlive::new().interval(Duration::from_secs(15))))
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
pub struct TabEventsQuery {
    conversation: Option<String>,
    after: Option<i64>,
}

/// `GET /api/v1/events?conversation=&after=`: a tab's one stream. A browser keeps at most six
/// connections to a host over HTTP/1.1, so a page that held a stream for the cards and another
/// for its conversation, times a few tabs, left none for sending a message. This one carries the
/// account's card news (as `/approvals/events`) and, when `conversation` is given, that
/// conversation's log (as `/conversations/{id}/events`, with its ids, so `Last-Event-ID` and
/// `after` resume it).
pub async fn tab_events(
    State(state): State<AppState>,
    signed_in: SignedIn,
    ApiQuery(query): ApiQuery<TabEventsQuery>,
    headers: HeaderMap,
) -> Result<Sse<impl Stream<Item = Result<Event, Infallible>>>, ApiError> {
    let log = match &query.conversation {
        Some(id) => {
            let after = last_event_id(&headers).or(query.after).unwrap_or(0);
            let log = state.app.follow(&signed_in.account.id, id, after).await?;
            log.map(|e| Event::default().id(e.seq.to_string()).event(&e.kind).data(&e.data_json))
                .left_stream()
        }
        None => futures::stream::pending().right_stream(),
    };
    let cards = state
        .app
        .card_news(&signed_in.account.id)
        .await
        .map(|news| Event::default().event(news.name).data(news.data_json));
    let session_ended = signed_in.session_ended(&state);
    let stream = futures::stream::select(cards, log).map(Ok).take_until(session_ended);
    Ok(Sse::new(stream).keep_alive(KeepAlive::new().interval(Duration::from_secs(15))))
}

/// `GET /api/v1/models`: for each provider, the models it lists and those an administrator
/// declared, to choose a conversation's model from.
pub async fn models(
    State(state): State<AppState>,
    _signed_in: SignedIn,
) -> Result<Json<Vec<ProviderModels>>, ApiError> {
    Ok(Json(state.app.models().await?))
}

/// `POST /api/v1/import`: the file's conversations (a Llooma JSON export or ChatGPT's
/// `conversations.json`, as the request body) brought into the caller's account; what came in
/// and what did not.
pub async fn import(
    State(state): State<AppState>,
    signed_in: SignedIn,
    body: axum::body::Body,
) -> Result<Json<llooma_types::ImportReport>, ApiError> {
    let limit = llooma_core::import::MAX_IMPORT_BYTES;
    let mut bytes = Vec::new();
    crate::files::read_into(
        body,
        limit,
        |limit_bytes| ApiError::ImportTooLarge { limit_bytes },
        &mut bytes,
    )
    .await?;
    Ok(Json(state.app.import_conversations(&signed_in.account.id, bytes).await?))
}
