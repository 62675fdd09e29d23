//! Conversations and their turns, for the signed-in account.
//!
//! Sending a message starts a turn that runs in the server, not in the tab: it keeps going
//! through a reload, and every tab watching the conversation streams the same event log from
//! `GET /api/v1/conversations/{id}/events` (server-sent events whose ids are the log's numbers,
//! so a reconnect with `Last-Event-ID` replays what it missed and continues live). The log is in
//! the database, so a tab connected to another replica sees it too (within a second).

use std::collections::HashMap;
use std::convert::Infallible;
use std::sync::{Arc, Mutex};
use std::time::Duration;

use axum::Json;
use axum::extract::{Path, State};
use axum::http::{HeaderMap, StatusCode};
use axum::response::sse::{Event, KeepAlive, Sse};
use futures::{Stream, StreamExt};
use llooma_core::{
    Attachment, AttachmentKind, BuiltinTools, McpTurn, MemoryBudget, PageReader, PersonaMemory,
    SinkError, Speaker, TurnEnd, TurnRequest, TurnSink, WebSearch, run_turn,
};
use llooma_net::{NetClient, Purpose};
use llooma_providers::{ProviderClient, ProviderConfig};
use llooma_store::{Conversation, ConversationPatch, Store};
use llooma_types::{
    ConversationDetail, ConversationView, EncodedEvent, EndState, MessageView, StepState,
    TurnEvent, TurnStarted,
};
use llooma_vault::SecretContext;
use serde::{Deserialize, Serialize};
use tokio::sync::{broadcast, watch};

use crate::AppState;
use crate::error::ApiError;
use crate::extract::{ApiJson, ApiQuery};
use crate::session::SignedIn;
use crate::tools::StoreMemory;

/// How often a watching tab re-reads the log without news from this process, when other
/// processes may write to it (Postgres: news from another replica arrives this way).
const RECHECK_SHARED: Duration = Duration::from_secs(1);
/// The same when this process is the only writer (SQLite): only a safety net.
const RECHECK_SOLE: Duration = Duration::from_secs(15);
/// How often a running turn looks whether a Stop was asked for through another replica.
const STOP_CHECK: Duration = Duration::from_secs(1);
const MAX_MESSAGE_BYTES: usize = 32 * 1024;

/// One event just written to a conversation's log, as this process's watchers receive it.
#[derive(Debug)]
pub struct Logged {
    seq: i64,
    kind: String,
    data_json: String,
}

/// The turns running in this process, and the events they write, handed to every watching tab
/// of this process directly (one database write, no read per watcher).
#[derive(Clone, Debug)]
pub struct Turns {
    /// This process's id (the approval broker's replica id): the owner of the turns it starts.
    replica_id: String,
    running: Arc<Mutex<HashMap<String, watch::Sender<bool>>>>,
    news: News,
}

/// News of each conversation's log, on a channel of its own: an event wakes only the tabs
/// watching that conversation, not every tab of the process.
#[derive(Clone, Debug, Default)]
struct News(Arc<Mutex<HashMap<String, broadcast::Sender<Arc<Logged>>>>>);

/// Events a watching tab may fall behind by before it re-reads the log instead.
const NEWS_BUFFER: usize = 256;
/// Channels kept before those nobody listens to any more are cleared.
const NEWS_CHANNELS_KEPT: usize = 256;

impl News {
    fn channels(
        &self,
    ) -> std::sync::MutexGuard<'_, HashMap<String, broadcast::Sender<Arc<Logged>>>> {
        self.0.lock().unwrap_or_else(std::sync::PoisonError::into_inner)
    }

    fn subscribe(&self, conversation_id: &str) -> broadcast::Receiver<Arc<Logged>> {
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
    fn send(&self, conversation_id: &str, logged: Logged) {
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
        Turns { replica_id: replica_id.into(), running: Arc::default(), news: News::default() }
    }

    fn running(&self) -> std::sync::MutexGuard<'_, HashMap<String, watch::Sender<bool>>> {
        self.running.lock().unwrap_or_else(std::sync::PoisonError::into_inner)
    }
}

fn view(c: &Conversation) -> ConversationView {
    ConversationView {
        id: c.id.clone(),
        title: c.title.clone(),
        provider_id: c.provider_id.clone(),
        model: c.model.clone(),
        mcp_enabled: c.mcp_enabled,
        persona_id: c.persona_id.clone(),
        created_at: llooma_store::ms_to_rfc3339(c.created_at_ms),
        updated_at: llooma_store::ms_to_rfc3339(c.updated_at_ms),
    }
}

#[derive(Deserialize)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct NewConversation {
    title: Option<String>,
    provider_id: Option<String>,
    model: Option<String>,
    persona_id: Option<String>,
}

#[derive(Deserialize)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct PatchConversation {
    title: Option<String>,
    provider_id: Option<String>,
    model: Option<String>,
    mcp_enabled: Option<bool>,
    /// A persona's id, or an empty string for none.
    persona_id: Option<String>,
}

#[derive(Deserialize)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct NewMessage {
    content: String,
    /// Resources the person chose (`@`): they join the message as labelled blocks.
    #[serde(default)]
    resources: Vec<ChosenResource>,
    /// Prompts the person chose (`/`), with their arguments.
    #[serde(default)]
    prompts: Vec<ChosenPrompt>,
}

#[derive(Deserialize)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct ChosenResource {
    server_id: String,
    /// A resource the server lists, by its address.
    #[serde(default)]
    uri: Option<String>,
    /// Or one of the server's resource templates, with its blanks filled in `arguments`: we build
    /// the address (each value checked), not the browser.
    #[serde(default)]
    uri_template: Option<String>,
    #[serde(default)]
    arguments: std::collections::BTreeMap<String, String>,
}

impl ChosenResource {
    /// The address to read: the one given, or the template filled in.
    fn address(&self) -> Result<String, ApiError> {
        match (&self.uri, &self.uri_template) {
            (Some(uri), None) if self.arguments.is_empty() => Ok(uri.clone()),
            (None, Some(template)) => {
                llooma_mcp_client::template::expand(template, &self.arguments).map_err(|err| {
                    ApiError::bad_request(
                        "invalid_template_value",
                        format!(
                            "The resource template {template} cannot be filled in: {err}. \
                             Change the value and send again."
                        ),
                    )
                })
            }
            _ => Err(ApiError::bad_request(
                "invalid_resource",
                "A chosen resource has either a uri, or a uriTemplate with its arguments.",
            )),
        }
    }
}

#[derive(Deserialize)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct ChosenPrompt {
    server_id: String,
    name: String,
    #[serde(default)]
    arguments: std::collections::BTreeMap<String, String>,
}

/// Most resources and prompts one message brings.
const MAX_ATTACHMENTS: usize = 5;

/// A chosen resource or prompt with the server to ask for it.
struct Chosen {
    label: String,
    address: String,
    token: Option<llooma_vault::Secret>,
    what: ChosenWhat,
}

enum ChosenWhat {
    Resource(String),
    Prompt(String, std::collections::BTreeMap<String, String>),
}

/// Reads what the person chose. A failure is a step; the turn goes on without it.
async fn read_chosen(state: &AppState, chosen: Vec<Chosen>, sink: &LogSink) -> Vec<Attachment> {
    let mut attachments = Vec::new();
    for c in chosen {
        let read = async {
            let session = state.mcp.connect(&c.address, c.token.as_ref()).await?;
            let text = match &c.what {
                ChosenWhat::Resource(uri) => session.read_resource(uri).await.map(|r| {
                    r.contents.iter().map(|i| i.describe()).collect::<Vec<_>>().join("\n")
                }),
                ChosenWhat::Prompt(name, arguments) => {
                    session.get_prompt(name, arguments).await.map(|p| {
                        p.messages
                            .iter()
                            .map(|m| format!("[{}] {}", m.role, m.content.describe()))
                            .collect::<Vec<_>>()
                            .join("\n")
                    })
                }
            };
            session.close().await;
            text
        }
        .await;
        let kind = match &c.what {
            ChosenWhat::Resource(uri) => AttachmentKind::Resource { uri: uri.clone() },
            ChosenWhat::Prompt(name, _) => AttachmentKind::Prompt { name: name.clone() },
        };
        match read {
            Ok(text) => attachments.push(Attachment { server_label: c.label, kind, text }),
            Err(err) => {
                let step = llooma_core::attachment_step(
                    &c.label,
                    &kind,
                    StepState::Failed,
                    Some(err.to_string()),
                );
                let _ = sink.event(TurnEvent::step(step)).await;
            }
        }
    }
    attachments
}

fn clean_title(title: Option<&str>) -> Result<String, ApiError> {
    let title = title.map(str::trim).filter(|t| !t.is_empty()).unwrap_or("New conversation");
    if title.chars().count() > 200 {
        return Err(ApiError::bad_request("invalid_title", "A title has at most 200 characters."));
    }
    Ok(title.to_owned())
}

async fn check_provider(state: &AppState, provider_id: Option<&str>) -> Result<(), ApiError> {
    if let Some(id) = provider_id
        && state.store.provider(id).await?.is_none()
    {
        return Err(ApiError::bad_request("unknown_provider", "There is no such model provider."));
    }
    Ok(())
}

/// The persona must be one of the account's own.
async fn check_persona(
    state: &AppState,
    account_id: &str,
    persona_id: Option<&str>,
) -> Result<(), ApiError> {
    if let Some(id) = persona_id
        && state.store.persona(account_id, id).await?.is_none()
    {
        return Err(ApiError::bad_request(
            "unknown_persona",
            "There is no such persona; create it under Settings → Personas first.",
        ));
    }
    Ok(())
}

async fn owned(state: &AppState, signed_in: &SignedIn, id: &str) -> Result<Conversation, ApiError> {
    state.store.conversation(&signed_in.account.id, id).await?.ok_or(ApiError::NotFound)
}

/// `POST /api/v1/conversations`.
pub async fn create(
    State(state): State<AppState>,
    signed_in: SignedIn,
    ApiJson(body): ApiJson<NewConversation>,
) -> Result<(StatusCode, Json<ConversationView>), ApiError> {
    let title = clean_title(body.title.as_deref())?;
    check_provider(&state, body.provider_id.as_deref()).await?;
    let account_id = &signed_in.account.id;
    check_persona(&state, account_id, body.persona_id.as_deref()).await?;
    let mut conversation =
        state.store.create_conversation(account_id, &title, body.provider_id, body.model).await?;
    if let Some(persona_id) = body.persona_id {
        let patch = ConversationPatch { persona_id: Some(Some(persona_id)), ..Default::default() };
        state.store.update_conversation(account_id, &conversation.id, patch).await?;
        conversation = owned(&state, &signed_in, &conversation.id).await?;
    }
    Ok((StatusCode::CREATED, Json(view(&conversation))))
}

/// Conversations one page lists when the client does not say, and at most.
const PAGE_DEFAULT: u64 = 50;
const PAGE_MAX: u64 = 200;

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
pub struct ListQuery {
    limit: Option<u64>,
    /// Where the previous page ended (its `Link: rel="next"`).
    before: Option<String>,
}

/// A page boundary: the last conversation's activity time and id, as `<ms>.<id>`.
fn cursor(c: &Conversation) -> String {
    format!("{}.{}", c.updated_at_ms, c.id)
}

fn parse_cursor(text: &str) -> Option<(i64, &str)> {
    let (ms, id) = text.split_once('.')?;
    let ms = ms.parse().ok()?;
    (!id.is_empty()).then_some((ms, id))
}

/// `GET /api/v1/conversations?limit=&before=`: a page of the account's conversations, most
/// recently active first. When more follow, `Link: <…?limit=N&before=CURSOR>; rel="next"`.
pub async fn list(
    State(state): State<AppState>,
    signed_in: SignedIn,
    ApiQuery(query): ApiQuery<ListQuery>,
) -> Result<(HeaderMap, Json<Vec<ConversationView>>), ApiError> {
    let limit = query.limit.unwrap_or(PAGE_DEFAULT);
    if !(1..=PAGE_MAX).contains(&limit) {
        return Err(ApiError::bad_request(
            "invalid_limit",
            format!("A page lists 1 to {PAGE_MAX} conversations."),
        ));
    }
    let before = match query.before.as_deref() {
        Some(text) => Some(parse_cursor(text).ok_or_else(|| {
            ApiError::bad_request(
                "invalid_cursor",
                "This page position is not one the server gave; start again from the first page.",
            )
        })?),
        None => None,
    };
    // One more than asked says whether another page follows.
    let mut page = state.store.list_conversations(&signed_in.account.id, before, limit + 1).await?;
    let mut headers = HeaderMap::new();
    if page.len() as u64 > limit {
        page.truncate(usize::try_from(limit).unwrap_or(usize::MAX));
        if let Some(last) = page.last() {
            let link = format!(
                "</api/v1/conversations?limit={limit}&before={}>; rel=\"next\"",
                cursor(last)
            );
            if let Ok(value) = axum::http::HeaderValue::from_str(&link) {
                headers.insert(axum::http::header::LINK, value);
            }
        }
    }
    Ok((headers, Json(page.iter().map(view).collect())))
}

/// `GET /api/v1/conversations/{id}`: the conversation with its messages.
pub async fn get(
    State(state): State<AppState>,
    signed_in: SignedIn,
    Path(id): Path<String>,
) -> Result<Json<ConversationDetail>, ApiError> {
    let conversation = owned(&state, &signed_in, &id).await?;
    let messages = state
        .store
        .messages(&id)
        .await?
        .into_iter()
        .map(|m| MessageView {
            id: m.id,
            role: m.role,
            content: m.content,
            turn_id: m.turn_id,
            created_at: llooma_store::ms_to_rfc3339(m.created_at_ms),
        })
        .collect();
    let running_turn = state.store.running_turn(&id).await?;
    let events_after = state.store.resume_point(&id, running_turn.as_deref()).await?;
    Ok(Json(ConversationDetail {
        conversation: view(&conversation),
        messages,
        running_turn,
        events_after,
    }))
}

/// `PATCH /api/v1/conversations/{id}`: title, model, and the MCP tools switch.
pub async fn patch(
    State(state): State<AppState>,
    signed_in: SignedIn,
    Path(id): Path<String>,
    ApiJson(body): ApiJson<PatchConversation>,
) -> Result<Json<ConversationView>, ApiError> {
    owned(&state, &signed_in, &id).await?;
    check_provider(&state, body.provider_id.as_deref()).await?;
    let title = match body.title.as_deref() {
        Some(t) => Some(clean_title(Some(t))?),
        None => None,
    };
    let persona_id = body.persona_id.map(|p| Some(p).filter(|p| !p.is_empty()));
    check_persona(&state, &signed_in.account.id, persona_id.clone().flatten().as_deref()).await?;
    let patch = ConversationPatch {
        title,
        provider_id: body.provider_id.map(Some),
        model: body.model.map(Some),
        mcp_enabled: body.mcp_enabled,
        persona_id,
    };
    state.store.update_conversation(&signed_in.account.id, &id, patch).await?;
    Ok(Json(view(&owned(&state, &signed_in, &id).await?)))
}

/// `DELETE /api/v1/conversations/{id}`.
pub async fn delete(
    State(state): State<AppState>,
    signed_in: SignedIn,
    Path(id): Path<String>,
) -> Result<StatusCode, ApiError> {
    // Ownership first: another account's id must change nothing, not even a running reply.
    owned(&state, &signed_in, &id).await?;
    if let Some(stop) = state.turns.running().get(&id) {
        let _ = stop.send(true);
    }
    state.store.delete_conversation(&signed_in.account.id, &id).await?;
    Ok(StatusCode::NO_CONTENT)
}

/// Records a turn's events in the conversation's log and hands each to this process's watchers.
struct LogSink {
    store: Store,
    news: News,
    conversation_id: String,
    turn_id: String,
}

impl LogSink {
    fn tell_watchers(&self, seq: i64, event: EncodedEvent) {
        self.news.send(
            &self.conversation_id,
            Logged { seq, kind: event.kind.to_owned(), data_json: event.data_json },
        );
    }

    /// Ends the turn in storage and logs `end` in the same write, so no tab sees `end` while
    /// the conversation still counts the turn as running.
    async fn end(&self, state: EndState, error: Option<&str>) -> Result<(), SinkError> {
        let (seq, end) = self
            .store
            .end_turn(&self.conversation_id, &self.turn_id, state, error)
            .await
            .map_err(|e| SinkError(e.to_string()))?;
        self.tell_watchers(seq, end);
        Ok(())
    }
}

impl TurnSink for LogSink {
    async fn event(&self, event: TurnEvent) -> Result<(), SinkError> {
        // Encoded once: the same text is stored and handed to every watching tab.
        let encoded = event.encode();
        let seq = self
            .store
            .append_event(&self.conversation_id, &self.turn_id, &encoded)
            .await
            .map_err(|e| SinkError(e.to_string()))?;
        self.tell_watchers(seq, encoded);
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

pub(crate) async fn provider_client(
    state: &AppState,
    provider_id: &str,
) -> Result<ProviderClient, String> {
    let Some(provider) = state.store.provider(provider_id).await.map_err(|e| e.to_string())? else {
        state.providers.forget(provider_id);
        return Err(
            "the conversation's model provider was removed; choose another model".to_owned()
        );
    };
    // Built once per provider and reused while the fields it is built from stay the same
    // (crate::providers); the row is read every time, so a change on any replica is seen.
    if let Some(client) = state.providers.cached(&provider) {
        return Ok(client);
    }
    let mut config = ProviderConfig::new(provider.base_url.clone());
    if let Some(stored) = provider.api_key_ciphertext.as_deref() {
        let key = state
            .vault
            .decrypt(SecretContext::new("providers", "api_key_ciphertext", &provider.id), stored)
            .map_err(|e| format!("the provider's key cannot be read: {e}"))?;
        config = config.with_api_key(key);
    }
    let net = config
        .configure_net_client(NetClient::builder(state.outbound.clone(), Purpose::Provider))
        .build()
        .map_err(|e| e.to_string())?;
    let client = ProviderClient::new(net, config).map_err(|e| e.to_string())?;
    state.providers.keep(&provider, client.clone());
    Ok(client)
}

/// What a turn with MCP tools needs: the offered tools and the account's remembered consent.
async fn mcp_turn<'a>(
    state: &'a AppState,
    account_id: &str,
    conversation_id: &str,
    turn_id: &str,
    provider: &ProviderClient,
    builtin_tools: usize,
) -> Result<McpTurn<'a, Store>, String> {
    let cap = provider.max_tools_per_request();
    let resources =
        crate::mcp::offered_resources(state, account_id).await.map_err(|e| e.to_string())?;
    // The two resource tools count against the provider's cap like the app's own.
    let own = builtin_tools + if resources.is_empty() { 0 } else { 2 };
    let (tools, instructions) =
        crate::mcp::offered_tools(state, account_id, cap, own).await.map_err(|e| e.to_string())?;
    let mode = state.store.permission_mode(account_id).await.map_err(|e| e.to_string())?;
    let settings = state.store.tool_settings(account_id).await.map_err(|e| e.to_string())?;
    let grants = state.store.consent_grants(account_id).await.map_err(|e| e.to_string())?;
    let rules = state.store.consent_rules(account_id).await.map_err(|e| e.to_string())?;
    Ok(McpTurn {
        tools,
        resources,
        in_use: Some(state),
        instructions,
        client: &state.mcp,
        broker: &state.broker,
        mode,
        grants: grants.into_iter().map(|g| g.grant).collect(),
        rules: rules.into_iter().map(|r| r.rule).collect(),
        account_id: account_id.to_owned(),
        conversation_id: conversation_id.to_owned(),
        turn_id: turn_id.to_owned(),
        announce: settings.announce_mode,
        context: llooma_approval_broker::Context::Conversation,
    })
}

/// `POST /api/v1/conversations/{id}/messages`: stores the message and starts a turn; the reply
/// arrives on the event stream.
pub async fn send(
    State(state): State<AppState>,
    signed_in: SignedIn,
    Path(id): Path<String>,
    ApiJson(body): ApiJson<NewMessage>,
) -> Result<(StatusCode, Json<TurnStarted>), ApiError> {
    let conversation = owned(&state, &signed_in, &id).await?;
    let content = body.content.trim();
    if content.is_empty() || content.len() > MAX_MESSAGE_BYTES {
        return Err(ApiError::bad_request(
            "invalid_message",
            format!("A message has 1 to {MAX_MESSAGE_BYTES} bytes."),
        ));
    }
    let (Some(provider_id), Some(model)) =
        (conversation.provider_id.clone(), conversation.model.clone())
    else {
        return Err(ApiError::bad_request(
            "no_model",
            "Choose a model for this conversation first (an administrator adds model providers).",
        ));
    };
    if body.resources.len() + body.prompts.len() > MAX_ATTACHMENTS {
        return Err(ApiError::bad_request(
            "too_many_attachments",
            format!("A message brings at most {MAX_ATTACHMENTS} resources and prompts."),
        ));
    }
    let mut chosen = Vec::new();
    for r in body.resources {
        let uri = r.address()?;
        let (label, address, token) =
            crate::mcp::active_server(&state, &signed_in.account.id, &r.server_id).await?;
        chosen.push(Chosen { label, address, token, what: ChosenWhat::Resource(uri) });
    }
    for p in body.prompts {
        let (label, address, token) =
            crate::mcp::active_server(&state, &signed_in.account.id, &p.server_id).await?;
        chosen.push(Chosen {
            label,
            address,
            token,
            what: ChosenWhat::Prompt(p.name, p.arguments),
        });
    }
    let turn_id = state.store.start_turn(&id, &state.turns.replica_id).await?;
    state.store.add_message(&id, "user", content, Some(&turn_id)).await?;
    let (stop_tx, stop_rx) = watch::channel(false);
    tokio::spawn(watch_for_remote_stop(state.store.clone(), turn_id.clone(), stop_tx.clone()));
    let own_stop = stop_tx.clone();
    state.turns.running().insert(id.clone(), stop_tx);
    let sink = LogSink {
        store: state.store.clone(),
        news: state.turns.news.clone(),
        conversation_id: id.clone(),
        turn_id: turn_id.clone(),
    };
    let history = state
        .store
        .messages(&id)
        .await?
        .into_iter()
        .map(|m| (if m.role == "assistant" { Speaker::Model } else { Speaker::Person }, m.content))
        .collect();
    let settings = state.store.tool_settings(&signed_in.account.id).await?;
    // Catalogues are sent only where MCP is switched on: no tools offered, no call possible.
    let mcp_on = conversation.mcp_enabled || settings.mcp_everywhere;
    let account_id = signed_in.account.id.clone();
    let instance = state.store.instance_settings().await?;
    let persona = match &conversation.persona_id {
        Some(persona_id) => state.store.persona(&account_id, persona_id).await?,
        None => None,
    };
    let model_prompt = state.store.model_prompt(&provider_id, &model).await?;
    let descriptions = state.store.tool_wordings(&account_id).await?.into_iter().collect();
    let system_prompt = llooma_core::system_prompt(
        instance.system_prompt.as_deref(),
        model_prompt.as_deref(),
        persona.as_ref().map(|p| p.prompt.as_str()),
    );
    let web_search_url = instance.web_search_url.clone();
    let memory_persona = persona.filter(|p| p.memory_enabled).map(|p| p.id);
    let mut request = TurnRequest {
        model,
        system_prompt: Some(system_prompt),
        history,
        // 8 once the MCP tools are known to be offered (below), else 4.
        rounds: llooma_core::ROUNDS,
        now_rfc3339: chrono::Utc::now().to_rfc3339_opts(chrono::SecondsFormat::Secs, true),
        attachments: Vec::new(),
    };
    let task_state = state.clone();
    let task_turn = turn_id.clone();
    tokio::spawn(async move {
        let _ = sink.event(TurnEvent::Start(TurnStarted { turn_id: task_turn.clone() })).await;
        request.attachments = read_chosen(&task_state, chosen, &sink).await;
        let search = web_search_url.and_then(|address| {
            task_state
                .searches
                .get(&address)
                .inspect_err(|e| tracing::warn!(error = %e, "web search is unavailable"))
                .ok()
        });
        let memory_port = StoreMemory { store: task_state.store.clone() };
        let builtins = BuiltinTools {
            current_date: true,
            web_search: search.as_ref().map(|s| s as &dyn WebSearch),
            read_page: Some(&task_state.pages as &dyn PageReader),
            memory: memory_persona.as_deref().map(|persona_id| PersonaMemory {
                port: &memory_port,
                persona_id,
                budget: MemoryBudget::default(),
            }),
            choices: true,
            descriptions,
        };
        let end = match provider_client(&task_state, &provider_id).await {
            Ok(provider) if mcp_on => {
                match mcp_turn(
                    &task_state,
                    &account_id,
                    &sink.conversation_id,
                    &task_turn,
                    &provider,
                    builtins.names().len(),
                )
                .await
                {
                    Ok(mcp) => {
                        request.rounds = llooma_core::rounds_for(Some(&mcp));
                        run_turn(&provider, &request, &builtins, Some(&mcp), &sink, stop_rx).await
                    }
                    Err(error) => TurnEnd::Failed {
                        text: String::new(),
                        error: llooma_core::TurnError::Setup(error),
                    },
                }
            }
            Ok(provider) => {
                let no_mcp = None::<&McpTurn<'_, Store>>;
                run_turn(&provider, &request, &builtins, no_mcp, &sink, stop_rx).await
            }
            Err(error) => {
                TurnEnd::Failed { text: String::new(), error: llooma_core::TurnError::Setup(error) }
            }
        };
        let text = end.text();
        let error = match &end {
            TurnEnd::Failed { error, .. } => Some(error.to_string()),
            _ => None,
        };
        if !text.is_empty() {
            let _ = task_state
                .store
                .add_message(&sink.conversation_id, "assistant", text, Some(&task_turn))
                .await;
        }
        if let Some(error) = &error {
            tracing::warn!(turn = %task_turn, %error, "turn failed");
            let _ = sink.event(TurnEvent::error(error.clone())).await;
        }
        {
            // This turn's Stop goes before the turn ends: once it has, the next turn of the
            // conversation may register its own.
            let mut running = task_state.turns.running();
            if running.get(&sink.conversation_id).is_some_and(|s| s.same_channel(&own_stop)) {
                running.remove(&sink.conversation_id);
            }
        }
        if let Err(err) = sink.end(end.state(), error.as_deref()).await {
            tracing::warn!(turn = %task_turn, error = %err, "ending a turn failed");
        }
    });
    Ok((StatusCode::ACCEPTED, Json(TurnStarted { turn_id })))
}

/// `POST /api/v1/conversations/{id}/stop`: stops the running turn, here at once, or through
/// the database when another replica runs it (within a second).
pub async fn stop(
    State(state): State<AppState>,
    signed_in: SignedIn,
    Path(id): Path<String>,
) -> Result<StatusCode, ApiError> {
    owned(&state, &signed_in, &id).await?;
    let here = state.turns.running().get(&id).map(|stop| stop.send(true));
    if here.is_some() || state.store.request_stop(&id).await? {
        return Ok(StatusCode::ACCEPTED);
    }
    Err(ApiError::Conflict {
        code: "no_running_turn",
        message: "No turn is running in this conversation.".into(),
    })
}

fn last_event_id(headers: &HeaderMap) -> Option<i64> {
    headers.get("last-event-id").and_then(|v| v.to_str().ok()).and_then(|v| v.trim().parse().ok())
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
pub struct EventsQuery {
    after: Option<i64>,
}

fn sse_event(seq: i64, kind: &str, data_json: &str) -> Event {
    Event::default().id(seq.to_string()).event(kind).data(data_json)
}

/// One watching tab: where it is in the log, and what it still has to send.
struct Watcher {
    id: String,
    after: i64,
    queue: std::collections::VecDeque<Event>,
    /// The log must be read: at the start, after a gap, a lag, or a re-check.
    read_log: bool,
    news: broadcast::Receiver<Arc<Logged>>,
    stopping: watch::Receiver<bool>,
    state: AppState,
    recheck: Duration,
}

impl Watcher {
    /// The next event to send; `None` when the server is stopping.
    async fn next(&mut self) -> Option<Event> {
        loop {
            if let Some(event) = self.queue.pop_front() {
                return Some(event);
            }
            if self.read_log {
                match self.state.store.events_after(&self.id, self.after, 200).await {
                    Ok(events) => {
                        // A full page may have more behind it: read again.
                        self.read_log = events.len() == 200;
                        for e in events {
                            self.after = e.seq;
                            self.queue.push_back(sse_event(e.seq, &e.kind, &e.data_json));
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
                        if logged.seq == self.after + 1 {
                            self.after = logged.seq;
                            self.queue.push_back(sse_event(logged.seq, &logged.kind, &logged.data_json));
                        } else if logged.seq > self.after + 1 {
                            self.read_log = true; // something came from elsewhere in between
                        }
                    }
                    Err(broadcast::error::RecvError::Lagged(_)) => self.read_log = true,
                    Err(broadcast::error::RecvError::Closed) => return None,
                },
                () = tokio::time::sleep(self.recheck) => self.read_log = true,
                _ = self.stopping.wait_for(|s| *s) => return None,
            }
        }
    }
}

/// `GET /api/v1/conversations/{id}/events`: the log after `Last-Event-ID`, then live.
pub async fn events(
    State(state): State<AppState>,
    signed_in: SignedIn,
    Path(id): Path<String>,
    ApiQuery(query): ApiQuery<EventsQuery>,
    headers: HeaderMap,
) -> Result<Sse<impl Stream<Item = Result<Event, Infallible>>>, ApiError> {
    owned(&state, &signed_in, &id).await?;
    let session_ended = signed_in.session_ended(&state);
    // A reconnecting stream says where it was (`Last-Event-ID`); a page opening says where its
    // stored messages end (`?after=`, from the conversation's `eventsAfter`).
    let after = last_event_id(&headers).or(query.after).unwrap_or(0).max(0);
    let recheck = match state.store.engine() {
        llooma_store::Engine::Sqlite => RECHECK_SOLE,
        llooma_store::Engine::Postgres => RECHECK_SHARED,
    };
    // Subscribed before the first read, so nothing written in between is missed.
    let news = state.turns.news.subscribe(&id);
    let watcher = Watcher {
        id,
        after,
        queue: std::collections::VecDeque::new(),
        read_log: true,
        news,
        stopping: state.stopping.clone(),
        state,
        recheck,
    };
    let stream = futures::stream::unfold(watcher, |mut watcher| async move {
        let event = watcher.next().await?;
        Some((Ok(event), watcher))
    })
    .take_until(session_ended);
    Ok(Sse::new(stream).keep_alive(KeepAlive::new().interval(Duration::from_secs(15))))
}

#[derive(Serialize)]
#[serde(rename_all = "camelCase")]
pub struct ModelChoice {
    id: String,
    /// `provider` (listed by the provider) or `declared` (by an administrator).
    source: &'static str,
}

#[derive(Serialize)]
#[serde(rename_all = "camelCase")]
pub struct ProviderModels {
    provider_id: String,
    provider_name: String,
    models: Vec<ModelChoice>,
    /// Why the provider's own list is missing (it did not answer, refused the key, ...).
    list_error: Option<String>,
}

/// `GET /api/v1/models`: for each provider, the models it lists (`GET {base}/models`) and
/// those an administrator declared, to choose a conversation's model from.
pub async fn models(
    State(state): State<AppState>,
    _signed_in: SignedIn,
) -> Result<Json<Vec<ProviderModels>>, ApiError> {
    let providers = state.store.list_providers().await?;
    let lists = futures::future::join_all(providers.iter().map(|p| {
        let state = &state;
        async move {
            let client = provider_client(state, &p.id).await?;
            client.list_models().await.map_err(|e| e.to_string())
        }
    }))
    .await;
    let mut answer = Vec::with_capacity(providers.len());
    for (provider, listed) in providers.into_iter().zip(lists) {
        let (listed, list_error) = match listed {
            Ok(models) => (models.into_iter().map(|m| m.id).collect(), None),
            Err(error) => {
                // The detail (which may quote the provider) is for the operator's log.
                tracing::warn!(provider = %provider.id, %error, "listing a provider's models failed");
                let message = "The provider did not list its models (it may be down, or refuse \
                               the key); an administrator can check it. Declared models are \
                               still offered.";
                (Vec::new(), Some(message.to_owned()))
            }
        };
        let mut models: Vec<ModelChoice> =
            listed.into_iter().map(|id| ModelChoice { id, source: "provider" }).collect();
        for id in provider.declared_models {
            if !models.iter().any(|m| m.id == id) {
                models.push(ModelChoice { id, source: "declared" });
            }
        }
        answer.push(ProviderModels {
            provider_id: provider.id,
            provider_name: provider.name,
            models,
            list_error,
        });
    }
    Ok(Json(answer))
}
