//! [`McpSession`]: one connected server, reused for several requests, and the handshake that
//! opens it.

use std::collections::{BTreeMap, HashSet};
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::Duration;

use llooma_net::NetClient;
use llooma_vault::Secret;
use rmcp::ClientHandler;
use rmcp::model::{
    CallToolRequest, CallToolRequestParams, CancelledNotificationParam, ClientCapabilities,
    ClientConfig, ClientRequest, CustomNotification, ElicitRequestParams, ElicitResult,
    ElicitationCapability, FormElicitationCapability, GetPromptRequest, GetPromptRequestParams,
    Implementation, InputRequest, InputRequests, InputResponses, JsonObject, ListPromptsRequest,
    ListResourceTemplatesRequest, ListResourcesRequest, ListToolsRequest, PaginatedRequestParams,
    ProgressNotificationParam, ProtocolVersion, ReadResourceRequest, ReadResourceRequestParams,
    RequestId, SamplingCapability, ServerResult, SubscriptionFilter, TASKS_EXTENSION_ID,
    UrlElicitationCapability,
};
// Sampling is deprecated upstream (SEP-2577) yet servers in use still ask for it: kept until
// the protocol drops it.
#[expect(deprecated, reason = "sampling stays offered while servers still ask for it")]
use rmcp::model::{CreateMessageRequestParams, CreateMessageResult};
use rmcp::service::MaybeSendFuture;
use rmcp::service::{
    ClientLifecycleMode, ClientServiceExt, NotificationContext, Peer, PeerRequestOptions,
    RequestContext, RoleClient, RunningService,
};
use rmcp::transport::StreamableHttpClientTransport;
use rmcp::transport::common::client_side_sse::SseRetryPolicy;
use rmcp::transport::streamable_http_client::StreamableHttpClientTransportConfig;
use serde_json::Value;
use sha2::{Digest, Sha256};
use tokio::sync::watch;
use url::Url;

use crate::ask::{self, Asker, CallSlot};
use crate::canonical::truncate;
use crate::config::{McpConfig, TRUNCATION_MARKER};
use crate::error::{self, Context, McpError};
use crate::http::{McpHttp, StreamCuts};

/// A session's running service, its tool-change signal, and its record of cut answers.
type Handshaken = (RunningService<RoleClient, Handler>, Arc<watch::Sender<u64>>, Arc<StreamCuts>);

/// Most `input_required` rounds one call may go through before it is given up (a server that
/// keeps asking is not answered forever).
const MAX_INPUT_ROUNDS: usize = 10;
/// The JSON-RPC error a server refuses a call with until the person has opened the pages its
/// data names (URL-mode elicitation, "URL elicitation required").
const PAGES_FIRST: i32 = -32042;

/// Why an `input_required` result's requests were not all answered.
enum Unfulfilled {
    /// The server asked for what cannot be given (a fault of the server).
    Broken(String),
    /// The person refused one, and the protocol has no way to say so.
    Refused(String),
}

/// A server's refusal with what became of the call added to its message.
fn added_to(error: McpError, why: &str) -> McpError {
    match error {
        McpError::Server { url, operation, code, message } => {
            McpError::Server { url, operation, code, message: format!("{message}; {why}") }
        }
        other => other,
    }
}
use crate::model::{
    Budget, ContentItem, Note, PromptMessage, PromptResult, ResourceContents, ServerDescription,
    Snapshot, ToolList, ToolResult, prompt_from_json, resource_from_json, template_from_json,
    tool_from_json,
};
use crate::template;

mod task;

impl McpSession {
    /// Connects to the server at `url` (`shown` is it without credentials, for messages):
    /// `server/discover` (protocol 2026-07-28), falling back to `initialize` at 2025-11-25.
    /// The address was decided on by the caller; the client checks it again on every
    /// connection.
    pub(crate) async fn open(
        net: &NetClient,
        config: &Arc<McpConfig>,
        url: &str,
        shown: String,
        token: Option<&Secret>,
    ) -> Result<McpSession, McpError> {
        let auto = ClientLifecycleMode::Auto {
            preferred_versions: vec![ProtocolVersion::V_2026_07_28],
            legacy_version: Some(ProtocolVersion::V_2025_11_25),
        };
        let (service, tool_changes, cut) = match handshake(net, config, url, &shown, token, auto)
            .await
        {
            // Some older servers answer any unknown method, `server/discover` included, with
            // an empty result instead of an error; rmcp then cannot tell them legacy and
            // fails. One more try with the plain `initialize` handshake settles it.
            Err(McpError::Protocol { .. }) => {
                tracing::debug!(url = %shown, "server/discover failed; trying initialize");
                handshake(net, config, url, &shown, token, ClientLifecycleMode::Initialize).await?
            }
            other => other?,
        };
        let server = describe(service.peer(), config);
        let modern =
            service.peer().peer_info().is_some_and(|i| !i.protocol_version.has_initialize());
        Ok(McpSession {
            modern,
            service,
            url: shown,
            token_sent: token.is_some(),
            config: Arc::clone(config),
            server,
            changes_rx: tool_changes.subscribe(),
            tool_changes,
            listening: AtomicBool::new(false),
            cancels: Arc::new(tokio::sync::RwLock::new(())),
            cut,
        })
    }
}

/// One handshake attempt with `lifecycle`.
async fn handshake(
    net: &NetClient,
    config: &McpConfig,
    url: &str,
    shown: &str,
    token: Option<&Secret>,
    lifecycle: ClientLifecycleMode,
) -> Result<Handshaken, McpError> {
    let limits = &config.limits;
    let mut transport_config = StreamableHttpClientTransportConfig::with_uri(url.to_owned())
        .max_json_response_size(limits.max_response_bytes)
        .max_sse_event_size(limits.max_response_bytes);
    transport_config.retry_config = Arc::new(CappedRetry { max_retries: config.sse_max_retries });
    if let Some(token) = token {
        // rmcp adds the `Bearer ` prefix. The copy it keeps is a plain String (not
        // zeroized); it lives as long as the session, which `call_tool_for` may keep idle
        // for `McpConfig::session_idle_timeout` (or until `forget`).
        transport_config = transport_config.auth_header(token.expose().to_owned());
    }
    let cut = Arc::new(StreamCuts::default());
    let http = McpHttp { net: net.clone(), cuts: Arc::clone(&cut) };
    let transport = StreamableHttpClientTransport::with_client(http, transport_config);
    let (changes_tx, _) = watch::channel(0_u64);
    let handler = Handler {
        info: client_info(),
        tool_changes: Arc::new(changes_tx),
        call: CallSlot::default(),
    };
    let tool_changes = Arc::clone(&handler.tool_changes);
    let cx = Context {
        url: shown,
        operation: "the handshake",
        token_sent: token.is_some(),
        timeout: config.handshake_timeout,
        cuts: &cut,
    };
    match tokio::time::timeout(
        config.handshake_timeout,
        handler.serve_with_lifecycle(transport, lifecycle),
    )
    .await
    {
        Err(_) => Err(McpError::Timeout {
            url: shown.to_owned(),
            operation: "the handshake".to_owned(),
            after: config.handshake_timeout,
        }),
        Ok(Err(err)) => Err(error::from_init(&err, &cx)),
        Ok(Ok(service)) => Ok((service, tool_changes, cut)),
    }
}

/// The URL without userinfo, query or fragment, for messages.
pub(crate) fn redact(url: &str) -> String {
    match Url::parse(url) {
        Ok(mut parsed) => {
            parsed.set_query(None);
            parsed.set_fragment(None);
            let _ = parsed.set_username("");
            let _ = parsed.set_password(None);
            parsed.to_string()
        }
        Err(_) => url.split(['?', '#']).next().unwrap_or_default().chars().take(200).collect(),
    }
}

fn client_info() -> ClientConfig {
    // The version offered by a plain `initialize` (the fallback path); `server/discover`
    // offers the preferred versions of ClientLifecycleMode::Auto instead.
    // Questions (forms and pages to open) are offered on every session: a call made with nobody to ask (a bot)
    // declines them, which the protocol provides for.
    let mut capabilities = ClientCapabilities::default();
    capabilities.elicitation = Some(
        ElicitationCapability::new()
            .with_form(FormElicitationCapability::new())
            .with_url(UrlElicitationCapability::new()),
    );
    // Requests for a completion are offered too (text only, no tools): each is put to the
    // person, who sees the request and the answer; a call with nobody to ask refuses them.
    capabilities.sampling = Some(SamplingCapability::default());
    // A server may run a call as a long-running task (2026-07-28's tasks extension): it is
    // followed until it ends, its questions put to the person like any other.
    // A tool may come with an interactive view (MCP Apps): its document is read with the
    // snapshot and shown, sandboxed, where the call was made.
    let mut ui = JsonObject::new();
    ui.insert("mimeTypes".to_owned(), Value::from(vec![crate::VIEW_MIME_TYPE]));
    capabilities.extensions = Some(BTreeMap::from([
        (TASKS_EXTENSION_ID.to_owned(), JsonObject::new()),
        (crate::UI_EXTENSION_ID.to_owned(), ui),
    ]));
    ClientConfig::new(capabilities, Implementation::new("llooma", env!("CARGO_PKG_VERSION")))
        .with_protocol_version(ProtocolVersion::V_2025_11_25)
}

fn describe(peer: &Peer<RoleClient>, config: &McpConfig) -> ServerDescription {
    let info = peer.peer_info();
    let info = info.as_deref();
    let implementation = info.and_then(|i| i.server_info.as_ref());
    let instructions = info.and_then(|i| i.instructions.clone()).map(|text| {
        // Instructions may be longer than a description; still bounded.
        truncate(&text, config.limits.max_description_bytes * 4, TRUNCATION_MARKER).0
    });
    ServerDescription {
        protocol_version: info.map(|i| i.protocol_version.to_string()).unwrap_or_default(),
        server_name: implementation.map(|s| s.name.clone()),
        server_version: implementation.map(|s| s.version.clone()),
        server_title: implementation.and_then(|s| s.title.clone()),
        instructions,
        icon: implementation
            .and_then(|s| s.icons.as_ref())
            .and_then(|icons| serde_json::to_value(icons).ok())
            .and_then(|icons| crate::icon::chosen_icon(Some(&icons))),
        tools_list_changed: info
            .and_then(|i| i.capabilities.tools.as_ref())
            .and_then(|t| t.list_changed)
            .unwrap_or(false),
    }
}

/// Retries a broken event stream a few times, a little later each time, then gives up (rmcp's
/// default retries forever, which would keep a dead request waiting until its timeout).
#[derive(Debug)]
struct CappedRetry {
    max_retries: usize,
}

impl SseRetryPolicy for CappedRetry {
    fn retry(&self, current_times: usize) -> Option<Duration> {
        if current_times >= self.max_retries {
            return None;
        }
        // 0.5 s, 1 s, 2 s, ... at most 5 s. rmcp waits the longer of this and the server's
        // own `retry:` hint.
        let factor = 1_u32 << current_times.min(4);
        Some(Duration::from_millis(500).saturating_mul(factor).min(Duration::from_secs(5)))
    }
}

/// Receives the server's notifications and requests.
#[derive(Debug, Clone)]
struct Handler {
    info: ClientConfig,
    tool_changes: Arc<watch::Sender<u64>>,
    call: CallSlot,
}

impl ClientHandler for Handler {
    fn create_elicitation(
        &self,
        request: ElicitRequestParams,
        _context: RequestContext<RoleClient>,
    ) -> impl Future<Output = Result<ElicitResult, rmcp::ErrorData>> + MaybeSendFuture + '_ {
        self.call.elicit(request)
    }

    #[expect(deprecated, reason = "sampling stays offered while servers still ask for it")]
    async fn create_message(
        &self,
        params: CreateMessageRequestParams,
        _context: RequestContext<RoleClient>,
    ) -> Result<CreateMessageResult, rmcp::ErrorData> {
        let params = serde_json::to_value(&params).unwrap_or(Value::Null);
        let result = self.call.complete(&params).await?;
        serde_json::from_value(result)
            .map_err(|err| rmcp::ErrorData::internal_error(err.to_string(), None))
    }

    fn on_custom_notification(
        &self,
        notification: CustomNotification,
        _context: NotificationContext<RoleClient>,
    ) -> impl Future<Output = ()> + MaybeSendFuture + '_ {
        if notification.method == "notifications/elicitation/complete"
            && let Some(id) = ask::completed_id(notification.params.as_ref())
        {
            self.call.link_done(id);
        }
        std::future::ready(())
    }

    fn on_progress(
        &self,
        params: ProgressNotificationParam,
        _context: NotificationContext<RoleClient>,
    ) -> impl Future<Output = ()> + MaybeSendFuture + '_ {
        self.call.stirred();
        if let Some(asker) = self.call.asker() {
            let message = params
                .message
                .map(|m| truncate(&m, ask::MAX_PROGRESS_MESSAGE_BYTES, TRUNCATION_MARKER).0);
            let news = ask::Progress { progress: params.progress, total: params.total, message };
            // Never waits: a caller busy with a question misses a report, not the call.
            let _ = asker.try_send(ask::CallNews::Progress(news));
        }
        std::future::ready(())
    }

    fn on_tool_list_changed(
        &self,
        _context: NotificationContext<RoleClient>,
    ) -> impl Future<Output = ()> + MaybeSendFuture + '_ {
        self.tool_changes.send_modify(|n| *n = n.wrapping_add(1));
        std::future::ready(())
    }

    fn get_info(&self) -> ClientConfig {
        self.info.clone()
    }
}

/// A connected server. Reuse it for the requests of one turn; drop it (or [`close`] it) when
/// done. Every request carries its own deadline; dropping a request's future before it
/// finishes tells the server with `notifications/cancelled`.
///
/// [`close`]: McpSession::close
#[derive(Debug)]
pub struct McpSession {
    service: RunningService<RoleClient, Handler>,
    url: String,
    token_sent: bool,
    config: Arc<McpConfig>,
    server: ServerDescription,
    tool_changes: Arc<watch::Sender<u64>>,
    changes_rx: watch::Receiver<u64>,
    listening: AtomicBool,
    /// Whether the protocol revision has no `initialize` (2026-07-28 and later).
    modern: bool,
    /// Held (read) by each `notifications/cancelled` still to be sent; `close` waits for them.
    cancels: Arc<tokio::sync::RwLock<()>>,
    /// Where an answer cut for its size is recorded (rmcp reports only that a stream closed).
    cut: Arc<StreamCuts>,
}

/// How a failed request left its session.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Fault {
    /// The server answered it (a JSON-RPC error), or it was never sent for a reason of its
    /// own: the session is sound.
    Answered,
    /// The session is unusable or in doubt (connection lost, timed out, not MCP), and the
    /// server may have run the request.
    Broken,
    /// The session is unusable and the server did not run the request: it never left (the
    /// session had ended), or the server refused the session's POST (HTTP 404, an unknown
    /// `Mcp-Session-Id`, or 400; a request the server runs is answered with 200).
    NotRun,
}

/// Which list a paged request reads.
#[derive(Debug, Clone, Copy)]
enum ListKind {
    Tools,
    Resources,
    Templates,
    Prompts,
}

impl ListKind {
    fn label(self) -> &'static str {
        match self {
            ListKind::Tools => "tools",
            ListKind::Resources => "resources",
            ListKind::Templates => "resource templates",
            ListKind::Prompts => "prompts",
        }
    }
    fn method(self) -> &'static str {
        match self {
            ListKind::Tools => "tools/list",
            ListKind::Resources => "resources/list",
            ListKind::Templates => "resources/templates/list",
            ListKind::Prompts => "prompts/list",
        }
    }
    fn request(self, cursor: Option<String>) -> ClientRequest {
        let params = cursor.map(|c| PaginatedRequestParams::default().with_cursor(Some(c)));
        match self {
            ListKind::Tools => {
                ClientRequest::ListToolsRequest(ListToolsRequest { params, ..Default::default() })
            }
            ListKind::Resources => ClientRequest::ListResourcesRequest(ListResourcesRequest {
                params,
                ..Default::default()
            }),
            ListKind::Templates => {
                ClientRequest::ListResourceTemplatesRequest(ListResourceTemplatesRequest {
                    params,
                    ..Default::default()
                })
            }
            ListKind::Prompts => ClientRequest::ListPromptsRequest(ListPromptsRequest {
                params,
                ..Default::default()
            }),
        }
    }
    /// The page's items as JSON and its next cursor.
    /// A page's items, the cursor to the next page, and how long the server says the page
    /// stays fresh (`ttlMs`, 2026-07-28), if it says.
    fn page(self, result: ServerResult) -> Option<(Vec<Value>, Option<String>, Option<u64>)> {
        fn json<T: serde::Serialize>(items: Vec<T>) -> Vec<Value> {
            items.into_iter().filter_map(|i| serde_json::to_value(i).ok()).collect()
        }
        Some(match (self, result) {
            (ListKind::Tools, ServerResult::ListToolsResult(r)) => {
                (json(r.tools), r.next_cursor, r.ttl_ms)
            }
            (ListKind::Resources, ServerResult::ListResourcesResult(r)) => {
                (json(r.resources), r.next_cursor, r.ttl_ms)
            }
            (ListKind::Templates, ServerResult::ListResourceTemplatesResult(r)) => {
                (json(r.resource_templates), r.next_cursor, r.ttl_ms)
            }
            (ListKind::Prompts, ServerResult::ListPromptsResult(r)) => {
                (json(r.prompts), r.next_cursor, r.ttl_ms)
            }
            _ => return None,
        })
    }
}

/// Sends `notifications/cancelled` for a request whose future is dropped before its answer
/// arrived (a turn abandoned, a caller's own timeout). rmcp's `send_request_with_option` does
/// not do it on drop, only on its own timeout.
struct CancelOnDrop {
    peer: Peer<RoleClient>,
    id: Option<RequestId>,
    cancels: Arc<tokio::sync::RwLock<()>>,
}

impl Drop for CancelOnDrop {
    fn drop(&mut self) {
        let Some(id) = self.id.take() else {
            return;
        };
        let peer = self.peer.clone();
        // Taken now, before whoever dropped us can close the session: `close` waits for it.
        let pending = Arc::clone(&self.cancels).try_read_owned();
        if let Ok(runtime) = tokio::runtime::Handle::try_current() {
            runtime.spawn(async move {
                let _pending = pending;
                let params = CancelledNotificationParam::new(
                    Some(id),
                    Some("the request was abandoned by the client".to_owned()),
                );
                let _ = peer.notify_cancelled(params).await;
            });
        }
    }
}

impl McpSession {
    /// Who answered.
    pub fn server(&self) -> &ServerDescription {
        &self.server
    }

    /// The URL (without query or fragment) this session talks to.
    pub fn url(&self) -> &str {
        &self.url
    }

    /// A counter that goes up each time the server reports that its tool list changed
    /// (`notifications/tools/list_changed`). Wait on it with `changed()`; a store marks the
    /// server's snapshot stale.
    ///
    /// Servers on 2025-11-25 and earlier send these unasked. On 2026-07-28 a server sends them
    /// only on a `subscriptions/listen` stream: the first call opens one and returns once the
    /// server acknowledged it, so no change made after this returns is missed. A server that
    /// refuses the subscription just never reports changes (logged at debug level).
    pub async fn tool_list_changes(&self) -> watch::Receiver<u64> {
        if self.modern && !self.listening.swap(true, Ordering::SeqCst) {
            let peer = self.service.peer();
            let filter = SubscriptionFilter::builder().tools_list_changed().build();
            match tokio::time::timeout(self.config.request_timeout, peer.listen(filter)).await {
                Ok(Ok(mut subscription)) => {
                    let changes = Arc::clone(&self.tool_changes);
                    tokio::spawn(async move {
                        while let Ok(Some(_)) = subscription.next().await {
                            changes.send_modify(|n| *n = n.wrapping_add(1));
                        }
                    });
                }
                Ok(Err(err)) => {
                    tracing::debug!(url = %self.url, "no tools/list_changed subscription: {err}");
                }
                Err(_) => {
                    tracing::debug!(url = %self.url, "no answer to subscriptions/listen");
                }
            }
        }
        self.changes_rx.clone()
    }

    fn cx<'a>(&'a self, operation: &'a str, timeout: Duration) -> Context<'a> {
        Context { url: &self.url, operation, token_sent: self.token_sent, timeout, cuts: &self.cut }
    }

    /// Whether the session can still carry requests (its transport has not ended).
    pub(crate) fn is_alive(&self) -> bool {
        !self.service.is_closed() && !self.service.peer().is_transport_closed()
    }

    async fn request(
        &self,
        request: ClientRequest,
        operation: &str,
        options: PeerRequestOptions,
        timeout: Duration,
    ) -> Result<ServerResult, McpError> {
        self.request_classified(request, operation, options, timeout, |_| {})
            .await
            .map_err(|(e, _)| e)
    }

    /// A request, and on failure what became of the session. A JSON-RPC error the server
    /// answered is shown to `refusal` first, whole (its data included).
    async fn request_classified(
        &self,
        request: ClientRequest,
        operation: &str,
        options: PeerRequestOptions,
        timeout: Duration,
        refusal: impl FnOnce(&rmcp::ErrorData),
    ) -> Result<ServerResult, (McpError, Fault)> {
        let peer = self.service.peer();
        let cx = self.cx(operation, timeout);
        let handle = peer.send_request_with_option(request, options).await.map_err(|err| {
            // Closed: the request never reached the transport.
            let fault = match err {
                rmcp::ServiceError::TransportClosed => Fault::NotRun,
                _ => Fault::Broken,
            };
            (error::from_service(&err, &cx), fault)
        })?;
        let mut guard = CancelOnDrop {
            peer: peer.clone(),
            id: Some(handle.id.clone()),
            cancels: Arc::clone(&self.cancels),
        };
        let result = handle.await_response().await;
        // Answered, failed or timed out (rmcp sends the cancellation itself on its timeout):
        // nothing left to cancel.
        guard.id = None;
        result.map_err(|err| {
            if let rmcp::ServiceError::McpError(data) = &err {
                refusal(data);
            }
            let error = error::from_service(&err, &cx);
            let fault = if error::session_unknown(&err) {
                Fault::NotRun
            } else {
                match &error {
                    McpError::Server { .. } => Fault::Answered,
                    McpError::HttpStatus { status: 400 | 404, .. } => Fault::NotRun,
                    _ => Fault::Broken,
                }
            };
            (error, fault)
        })
    }

    async fn simple_request(
        &self,
        request: ClientRequest,
        operation: &str,
    ) -> Result<ServerResult, McpError> {
        let timeout = self.config.request_timeout;
        self.request(request, operation, PeerRequestOptions::with_timeout(timeout), timeout).await
    }

    /// Reads a paged list up to the limits: raw items, notes, and the shortest freshness any
    /// page claimed (none when no page said).
    async fn list(&self, kind: ListKind) -> Result<(Vec<Value>, Vec<Note>, Option<u64>), McpError> {
        let limits = &self.config.limits;
        let max_items = match kind {
            ListKind::Tools => limits.max_tools,
            _ => limits.max_items,
        };
        let mut items = Vec::new();
        let mut notes = Vec::new();
        let mut cursor: Option<String> = None;
        let mut seen_cursors = HashSet::new();
        let mut pages = 0;
        let mut fresh_for: Option<u64> = None;
        loop {
            let result = self.simple_request(kind.request(cursor.clone()), kind.method()).await?;
            pages += 1;
            let (page, next, ttl) = kind.page(result).ok_or_else(|| McpError::Protocol {
                url: self.url.clone(),
                detail: format!("the reply to {} is not a list", kind.method()),
            })?;
            items.extend(page);
            fresh_for = match (fresh_for, ttl) {
                (Some(a), Some(b)) => Some(a.min(b)),
                (a, b) => a.or(b),
            };
            if items.len() > max_items {
                notes.push(Note::TooMany {
                    list: kind.label().to_owned(),
                    kept: max_items,
                    seen: items.len(),
                });
                items.truncate(max_items);
                break;
            }
            let Some(next) = next.filter(|c| !c.is_empty()) else {
                break;
            };
            if !seen_cursors.insert(next.clone()) {
                notes.push(Note::CursorRepeated { list: kind.label().to_owned() });
                break;
            }
            if pages >= limits.max_pages {
                notes.push(Note::PagesCapped { list: kind.label().to_owned(), pages });
                break;
            }
            cursor = Some(next);
        }
        Ok((items, notes, fresh_for))
    }

    /// The server's tools, limits applied.
    pub async fn list_tools(&self) -> Result<ToolList, McpError> {
        let (raw, mut notes, ttl_ms) = self.list(ListKind::Tools).await?;
        let mut names = HashSet::new();
        let mut tools = Vec::with_capacity(raw.len());
        for item in &raw {
            let Some(tool) = tool_from_json(item, &self.config.limits, &mut notes) else {
                continue;
            };
            if !names.insert(tool.name.clone()) {
                notes.push(Note::Duplicate { list: "tools".to_owned(), name: tool.name });
                continue;
            }
            tools.push(tool);
        }
        Ok(ToolList { tools, notes, ttl_ms })
    }

    /// Everything the server offers. Tools must be readable; a failure of any other list
    /// (many servers have no resources or prompts) becomes a [`Note`].
    pub async fn snapshot(&self) -> Result<Snapshot, McpError> {
        let ToolList { mut tools, mut notes, ttl_ms: tools_ttl_ms } = self.list_tools().await?;
        let limits = &self.config.limits;
        let mut resources = Vec::new();
        let mut resource_templates = Vec::new();
        let mut prompts = Vec::new();
        let capabilities = self.service.peer().peer_info().map(|i| i.capabilities.clone());
        let offers_resources = capabilities.as_ref().is_none_or(|c| c.resources.is_some());
        let offers_prompts = capabilities.as_ref().is_none_or(|c| c.prompts.is_some());
        let kinds = [
            (ListKind::Resources, offers_resources),
            (ListKind::Templates, offers_resources),
            (ListKind::Prompts, offers_prompts),
        ];
        for (kind, offered) in kinds {
            if !offered {
                continue;
            }
            let (raw, list_notes, _) = match self.list(kind).await {
                Ok(found) => found,
                Err(err) => {
                    notes.push(Note::ListFailed {
                        list: kind.label().to_owned(),
                        error: err.to_string(),
                    });
                    continue;
                }
            };
            notes.extend(list_notes);
            for item in &raw {
                match kind {
                    ListKind::Resources => {
                        resources.extend(resource_from_json(item, limits, &mut notes));
                    }
                    ListKind::Templates => {
                        resource_templates.extend(template_from_json(item, limits, &mut notes));
                    }
                    ListKind::Prompts => prompts.extend(prompt_from_json(item, limits, &mut notes)),
                    ListKind::Tools => {}
                }
            }
        }
        let view_documents = self.read_views(&mut tools, &mut notes).await;
        let mut hasher = Sha256::new();
        for tool in &tools {
            hasher.update(tool.hash.as_bytes());
            hasher.update(b"\n");
        }
        Ok(Snapshot {
            server: self.server.clone(),
            tools,
            resources,
            resource_templates,
            prompts,
            notes,
            tools_hash: hex::encode(hasher.finalize()),
            tools_ttl_ms,
            view_documents,
        })
    }

    /// Reads the documents of the tools' views (MCP Apps), each address once and at most
    /// [`MAX_VIEWS`](crate::MAX_VIEWS) of them, and folds each document's hash into its tools'
    /// definition hashes. A view that cannot be read is noted; its tools stay, without it.
    async fn read_views(
        &self,
        tools: &mut [crate::ToolDef],
        notes: &mut Vec<Note>,
    ) -> Vec<crate::ViewDocument> {
        let mut documents: Vec<crate::ViewDocument> = Vec::new();
        let mut failed: Vec<String> = Vec::new();
        for tool in tools.iter_mut() {
            let Some(view) = tool.view.as_mut() else { continue };
            let uri = view.resource_uri.clone();
            let known = documents.iter().find(|d| d.uri == uri).map(|d| d.hash.clone());
            let hash = match known {
                Some(hash) => Some(hash),
                None if failed.contains(&uri) => None,
                None if documents.len() + failed.len() >= crate::MAX_VIEWS => {
                    notes.push(Note::ViewUnreadable {
                        uri: uri.clone(),
                        error: format!("more than {} views on one server", crate::MAX_VIEWS),
                    });
                    failed.push(uri);
                    None
                }
                None => match self.read_view(&uri).await {
                    Ok(document) => {
                        let hash = document.hash.clone();
                        documents.push(document);
                        Some(hash)
                    }
                    Err(error) => {
                        notes.push(Note::ViewUnreadable { uri: uri.clone(), error });
                        failed.push(uri);
                        None
                    }
                },
            };
            if let Some(hash) = hash {
                tool.hash = crate::view::fold_view_hash(&tool.hash, &hash);
                view.document_hash = Some(hash);
            }
        }
        documents
    }

    async fn read_view(&self, uri: &str) -> Result<crate::ViewDocument, String> {
        let request = ClientRequest::ReadResourceRequest(ReadResourceRequest::new(
            ReadResourceRequestParams::new(uri),
        ));
        let result =
            self.simple_request(request, "resources/read").await.map_err(|e| e.to_string())?;
        let raw = serde_json::to_value(&result).unwrap_or(Value::Null);
        crate::view::document_from_read(uri, &raw).map_err(|problem| problem.to_string())
    }

    /// Calls a tool by the server's own name with `arguments` (a JSON object, or null for
    /// none). Waits [`McpConfig::call_timeout`], started again by each progress notification
    /// and held while a question is put to the person, at most [`McpConfig::max_call_timeout`].
    /// The server's questions are declined (see [`McpSession::call_tool_asking`]).
    pub async fn call_tool(&self, name: &str, arguments: Value) -> Result<ToolResult, McpError> {
        self.call_tool_asking(name, arguments, None).await
    }

    /// [`McpSession::call_tool`], with the server's questions during the call put to `asker`.
    pub async fn call_tool_asking(
        &self,
        name: &str,
        arguments: Value,
        asker: Option<Asker>,
    ) -> Result<ToolResult, McpError> {
        let arguments = object_arguments(name, arguments)?;
        self.call(name, arguments, asker).await.map_err(|(e, _)| e)
    }

    /// `tools/call`, and on failure what became of the session. On 2026-07-28 a server may
    /// answer `input_required`: its questions are put to `asker` and the call sent again with
    /// the answers, at most [`MAX_INPUT_ROUNDS`] times.
    pub(crate) async fn call(
        &self,
        name: &str,
        arguments: Option<JsonObject>,
        asker: Option<Asker>,
    ) -> Result<ToolResult, (McpError, Fault)> {
        let slot = &self.service.service().call;
        let _lent = slot.lend(asker);
        let mut params = CallToolRequestParams::new(name.to_owned());
        if let Some(arguments) = arguments {
            params = params.with_arguments(arguments);
        }
        let operation = format!("tools/call {}", crate::canonical::excerpt(name, 80));
        let protocol =
            |detail: String| (McpError::Protocol { url: self.url.clone(), detail }, Fault::Broken);
        // A task the server makes of the call is bounded from here, the call's start.
        let started = tokio::time::Instant::now();
        for round in 0..MAX_INPUT_ROUNDS {
            let request = ClientRequest::CallToolRequest(CallToolRequest::new(params.clone()));
            // The idle limit is kept here rather than by rmcp: it must stand still while the
            // person is answering one of the server's questions.
            let options = PeerRequestOptions::no_options()
                .with_max_total_timeout(self.config.max_call_timeout);
            let mut pages_first = None;
            let sent = self.request_classified(
                request,
                &operation,
                options,
                self.config.call_timeout,
                |refusal| {
                    if refusal.code.0 == PAGES_FIRST {
                        pages_first = Some(refusal.data.clone());
                    }
                },
            );
            let result = match self.idle_bounded(sent, &operation).await {
                Ok(result) => result,
                Err((error, fault)) => {
                    let Some(data) = pages_first else { return Err((error, fault)) };
                    // Refused until the person has opened the pages it names: they are put
                    // to the person, and once each is done the call is sent again as it was.
                    if let Err(why) = self.open_pages_first(data.as_ref()).await {
                        return Err((added_to(error, &why), fault));
                    }
                    continue;
                }
            };
            let required = match result {
                ServerResult::CallToolResult(result) => {
                    let raw = serde_json::to_value(&result).unwrap_or(Value::Null);
                    return Ok(self.tool_result(&raw));
                }
                ServerResult::InputRequiredResult(required) => required,
                // Run as a long-running task: followed until it ends.
                ServerResult::CreateTaskResult(created) => {
                    return self.follow_task(created.task, &operation, started).await;
                }
                _ => {
                    return Err(protocol(
                        "the reply to tools/call is not a tool result".to_owned(),
                    ));
                }
            };
            let requests = required.input_requests.unwrap_or_default();
            if requests.is_empty() && required.request_state.is_none() {
                return Err(protocol("the server asked for input but named none".to_owned()));
            }
            if requests.is_empty() {
                // Only its state back: the server is busy. Wait a little longer each time.
                let pause = Duration::from_millis(250).saturating_mul(1 << round.min(4));
                tokio::time::sleep(pause).await;
            }
            params.input_responses =
                self.fulfil(requests).await.map_err(|failed| match failed {
                    Unfulfilled::Broken(detail) => protocol(detail),
                    Unfulfilled::Refused(reason) => (
                        McpError::Withheld {
                            url: self.url.clone(),
                            operation: operation.clone(),
                            reason,
                        },
                        Fault::Answered,
                    ),
                })?;
            params.request_state = required.request_state;
        }
        Err(protocol(format!(
            "the server still asked for input after {MAX_INPUT_ROUNDS} rounds; the call was given up"
        )))
    }

    /// Puts each page a `-32042` refusal names to the person, one after another; `Ok` once all
    /// are done, else why the call ends, for the caller.
    async fn open_pages_first(&self, data: Option<&Value>) -> Result<(), String> {
        let slot = &self.service.service().call;
        let pages = ask::links_first(data).map_err(|why| {
            format!("the server refused the call until a page is opened, but {why}")
        })?;
        for (message, asked) in pages {
            let answer = slot.put(message, asked).await.map_err(|err| {
                format!("the page it asked to be opened first could not be shown: {}", err.message)
            })?;
            if !matches!(answer, ask::QuestionAnswer::Accept(_)) {
                return Err(
                    "the server would not run the call until a page it named was opened and \
                     done, and it was not"
                        .to_owned(),
                );
            }
        }
        Ok(())
    }

    /// The answers to an `input_required` result's requests, one at a time (a person answers
    /// one card after another).
    async fn fulfil(&self, requests: InputRequests) -> Result<Option<InputResponses>, Unfulfilled> {
        let slot = &self.service.service().call;
        let mut responses = InputResponses::new();
        for (key, request) in requests {
            let response = match request {
                InputRequest::Elicitation(request) => {
                    let answer = slot.elicit(request.params).await.map_err(|err| {
                        Unfulfilled::Broken(format!(
                            "its question could not be put to the person: {}",
                            err.message
                        ))
                    })?;
                    serde_json::to_value(answer)
                        .map_err(|err| Unfulfilled::Broken(err.to_string()))?
                }
                InputRequest::ListRoots(_) => serde_json::json!({"roots": []}),
                InputRequest::CreateMessage(request) => {
                    let params = serde_json::to_value(&request.params).unwrap_or(Value::Null);
                    // Only a result can answer it (2026-07-28 has no refusal for it): a
                    // request refused or not runnable ends the call here.
                    slot.complete(&params).await.map_err(|err| {
                        Unfulfilled::Refused(format!(
                            "its request for your model's answer was refused ({})",
                            err.message
                        ))
                    })?
                }
                _ => {
                    return Err(Unfulfilled::Broken(
                        "the server asked for a kind of input this client does not know".to_owned(),
                    ));
                }
            };
            responses.insert(key, response);
        }
        Ok((!responses.is_empty()).then_some(responses))
    }

    /// Waits for `request`, giving up after [`McpConfig::call_timeout`] without a word from
    /// the server (a progress notification, an answered question), never while a question
    /// waits for the person. Giving up drops the request, which tells the server.
    async fn idle_bounded<T>(
        &self,
        request: impl Future<Output = Result<T, (McpError, Fault)>>,
        operation: &str,
    ) -> Result<T, (McpError, Fault)> {
        let slot = &self.service.service().call;
        let idle = self.config.call_timeout;
        let mut activity = slot.activity.subscribe();
        let mut request = std::pin::pin!(request);
        let deadline = tokio::time::sleep(idle);
        let mut deadline = std::pin::pin!(deadline);
        loop {
            tokio::select! {
                result = &mut request => return result,
                Ok(()) = activity.changed() => {
                    deadline.as_mut().reset(tokio::time::Instant::now() + idle);
                }
                () = &mut deadline => {
                    if slot.asking.load(Ordering::SeqCst) > 0 {
                        deadline.as_mut().reset(tokio::time::Instant::now() + idle);
                        continue;
                    }
                    return Err((
                        McpError::Timeout {
                            url: self.url.clone(),
                            operation: operation.to_owned(),
                            after: idle,
                        },
                        Fault::Broken,
                    ));
                }
            }
        }
    }

    fn tool_result(&self, raw: &Value) -> ToolResult {
        let limit = self.config.limits.max_result_bytes;
        let mut budget = Budget::new(limit);
        let mut content: Vec<ContentItem> = Vec::new();
        let mut for_person: Vec<ContentItem> = Vec::new();
        for item in raw.get("content").and_then(Value::as_array).into_iter().flatten() {
            let Some(kept) = budget.content(item) else { continue };
            if crate::model::for_person_only(item) {
                for_person.push(kept);
            } else {
                content.push(kept);
            }
        }
        let structured_content =
            raw.get("structuredContent").filter(|v| !v.is_null()).and_then(|v| {
                let len = v.to_string().len();
                if len > limit {
                    budget.cut = true;
                    budget.total = budget.total.saturating_add(len);
                    None
                } else {
                    Some(v.clone())
                }
            });
        if budget.cut {
            content.push(budget.note());
        }
        ToolResult {
            content,
            is_error: raw.get("isError").and_then(Value::as_bool).unwrap_or(false),
            structured_content,
            truncated: budget.cut,
            for_person,
        }
    }

    /// Reads a resource.
    pub async fn read_resource(&self, uri: &str) -> Result<ResourceContents, McpError> {
        let request = ClientRequest::ReadResourceRequest(ReadResourceRequest::new(
            ReadResourceRequestParams::new(uri),
        ));
        let result = self.simple_request(request, "resources/read").await?;
        let ServerResult::ReadResourceResult(result) = result else {
            return Err(McpError::Protocol {
                url: self.url.clone(),
                detail: "the reply to resources/read is not resource contents".to_owned(),
            });
        };
        let raw = serde_json::to_value(&result).unwrap_or(Value::Null);
        let mut budget = Budget::new(self.config.limits.max_result_bytes);
        let mut contents: Vec<ContentItem> = raw
            .get("contents")
            .and_then(Value::as_array)
            .map(|items| items.iter().filter_map(|item| budget.resource(item)).collect())
            .unwrap_or_default();
        if budget.cut {
            contents.push(budget.note());
        }
        Ok(ResourceContents { contents, truncated: budget.cut })
    }

    /// Fills in a resource template (RFC 6570, expanded and checked by us) and reads the
    /// resource it names.
    pub async fn read_template(
        &self,
        uri_template: &str,
        values: &BTreeMap<String, String>,
    ) -> Result<ResourceContents, McpError> {
        let uri = template::expand(uri_template, values).map_err(|err| McpError::Template {
            template: crate::canonical::excerpt(uri_template, 200),
            problem: err.to_string(),
        })?;
        self.read_resource(&uri).await
    }

    /// Gets a prompt filled in with `arguments`.
    pub async fn get_prompt(
        &self,
        name: &str,
        arguments: &BTreeMap<String, String>,
    ) -> Result<PromptResult, McpError> {
        let mut params = GetPromptRequestParams::new(name);
        if !arguments.is_empty() {
            let object: JsonObject =
                arguments.iter().map(|(k, v)| (k.clone(), Value::String(v.clone()))).collect();
            params = params.with_arguments(object);
        }
        let request = ClientRequest::GetPromptRequest(GetPromptRequest::new(params));
        let result = self.simple_request(request, "prompts/get").await?;
        let ServerResult::GetPromptResult(result) = result else {
            return Err(McpError::Protocol {
                url: self.url.clone(),
                detail: "the reply to prompts/get is not a prompt".to_owned(),
            });
        };
        let raw = serde_json::to_value(&result).unwrap_or(Value::Null);
        let mut budget = Budget::new(self.config.limits.max_result_bytes);
        let mut messages: Vec<PromptMessage> = raw
            .get("messages")
            .and_then(Value::as_array)
            .map(|items| {
                items
                    .iter()
                    .filter_map(|m| {
                        let content = budget.content(m.get("content")?)?;
                        let role =
                            m.get("role").and_then(Value::as_str).unwrap_or("user").to_owned();
                        Some(PromptMessage { role, content })
                    })
                    .collect()
            })
            .unwrap_or_default();
        if budget.cut {
            messages.push(PromptMessage { role: "user".to_owned(), content: budget.note() });
        }
        let mut notes = Vec::new();
        let description = crate::model::cut_description(
            name,
            raw.get("description").and_then(Value::as_str).map(str::to_owned),
            &self.config.limits,
            &mut notes,
        );
        Ok(PromptResult { description, messages, truncated: budget.cut || !notes.is_empty() })
    }

    /// Ends the session (the server is told with a `DELETE` where it keeps sessions), once the
    /// cancellations of abandoned requests are sent (waiting at most 5 s for them).
    pub async fn close(mut self) {
        let _ = tokio::time::timeout(Duration::from_secs(5), self.cancels.write()).await;
        let _ = self.service.close().await;
    }
}

pub(crate) fn object_arguments(
    name: &str,
    arguments: Value,
) -> Result<Option<JsonObject>, McpError> {
    match arguments {
        Value::Null => Ok(None),
        Value::Object(map) => Ok(Some(map)),
        other => Err(McpError::BadArguments {
            what: format!("tool {}", crate::canonical::excerpt(name, 80)),
            found: match other {
                Value::Bool(_) => "a boolean",
                Value::Number(_) => "a number",
                Value::String(_) => "a string",
                _ => "an array",
            },
        }),
    }
}
