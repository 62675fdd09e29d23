//! [`McpClient`] (connects, and calls tools on the sessions of its pool) and [`McpSession`]
//! (one connected server, reused for several requests).

use std::collections::{BTreeMap, HashSet};
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::Duration;

use llooma_net::{Decision, NetClient, OutboundPolicy, Purpose};
use llooma_vault::Secret;
use rmcp::ClientHandler;
use rmcp::model::{
    CallToolRequest, CallToolRequestParams, CancelledNotificationParam, ClientCapabilities,
    ClientConfig, ClientRequest, GetPromptRequest, GetPromptRequestParams, Implementation,
    JsonObject, ListPromptsRequest, ListResourceTemplatesRequest, ListResourcesRequest,
    ListToolsRequest, PaginatedRequestParams, ProtocolVersion, ReadResourceRequest,
    ReadResourceRequestParams, RequestId, ServerResult, SubscriptionFilter,
};
use rmcp::service::MaybeSendFuture;
use rmcp::service::{
    ClientLifecycleMode, ClientServiceExt, NotificationContext, Peer, PeerRequestOptions,
    RoleClient, RunningService,
};
use rmcp::transport::StreamableHttpClientTransport;
use rmcp::transport::common::client_side_sse::SseRetryPolicy;
use rmcp::transport::streamable_http_client::StreamableHttpClientTransportConfig;
use serde_json::Value;
use sha2::{Digest, Sha256};
use tokio::sync::watch;
use url::Url;

use crate::canonical::truncate;
use crate::config::{McpConfig, TRUNCATION_MARKER};
use crate::error::{self, Context, McpError};
use crate::http::{McpHttp, StreamCuts};

/// A session's running service, its tool-change signal, and its record of cut answers.
type Handshaken = (RunningService<RoleClient, Handler>, Arc<watch::Sender<u64>>, Arc<StreamCuts>);
use crate::model::{
    Budget, ContentItem, Note, ProbeReport, ProbeTool, PromptMessage, PromptResult,
    ResourceContents, ServerDescription, Snapshot, ToolList, ToolResult, prompt_from_json,
    resource_from_json, template_from_json, tool_from_json,
};
use crate::pool::{Key, Lease, Pool};
use crate::template;

/// The MCP client of one instance: the outbound policy, the HTTP client that enforces it, and
/// the time and size bounds. Cheap to clone; build one and share it.
#[derive(Debug, Clone)]
pub struct McpClient {
    policy: Arc<OutboundPolicy>,
    net: NetClient,
    config: Arc<McpConfig>,
    /// Shared by every clone: the instance-wide bound on snapshots read at once.
    snapshots: Arc<tokio::sync::Semaphore>,
    /// Shared by every clone: the sessions `call_tool` keeps between calls.
    pool: Arc<Pool>,
}

impl McpClient {
    /// A client that reaches MCP servers as `policy` allows for [`Purpose::Mcp`].
    pub fn new(policy: Arc<OutboundPolicy>, config: McpConfig) -> Result<Self, McpError> {
        let net = NetClient::builder(Arc::clone(&policy), Purpose::Mcp)
            // Connections are kept between calls; a server that answers in several small
            // writes without TCP_NODELAY would otherwise wait for our delayed ACK (~44 ms).
            .ack_every_read(true)
            // Bounded per JSON answer and per SSE event instead (Limits::max_response_bytes):
            // a session's stream has no total size.
            .max_response_bytes(u64::MAX)
            // The standalone SSE stream lives as long as the session; every operation carries
            // its own deadline instead (see McpConfig).
            .total_timeout(None)
            .connect_timeout(config.connect_timeout)
            .build()
            .map_err(McpError::Setup)?;
        let snapshots = Arc::new(tokio::sync::Semaphore::new(config.max_concurrent_snapshots));
        let pool = Arc::new(Pool::new(&config));
        Ok(Self { policy, net, config: Arc::new(config), snapshots, pool })
    }

    /// The bounds in force.
    pub fn config(&self) -> &McpConfig {
        &self.config
    }

    /// Connects to the server at `url`: `server/discover` (protocol 2026-07-28), falling back
    /// to `initialize` at 2025-11-25 for older servers. `token`, when given, is sent as a
    /// bearer token on every request.
    pub async fn connect(&self, url: &str, token: Option<&Secret>) -> Result<McpSession, McpError> {
        let shown = redact(url);
        let parsed = Url::parse(url)
            .map_err(|err| McpError::InvalidUrl { url: shown.clone(), problem: err.to_string() })?;
        // Decided here first, so a refused address gets a clean error and no socket at all;
        // the connector and resolver of llooma-net check again on every connection.
        if let Decision::Refused { reason } = self.policy.decide(Purpose::Mcp, &parsed) {
            return Err(McpError::Refused { url: shown, reason });
        }

        let auto = ClientLifecycleMode::Auto {
            preferred_versions: vec![ProtocolVersion::V_2026_07_28],
            legacy_version: Some(ProtocolVersion::V_2025_11_25),
        };
        let (service, tool_changes, cut) = match self.handshake(url, &shown, token, auto).await {
            // Some older servers answer any unknown method, `server/discover` included, with
            // an empty result instead of an error; rmcp then cannot tell them legacy and
            // fails. One more try with the plain `initialize` handshake settles it.
            Err(McpError::Protocol { .. }) => {
                tracing::debug!(url = %shown, "server/discover failed; trying initialize");
                self.handshake(url, &shown, token, ClientLifecycleMode::Initialize).await?
            }
            other => other?,
        };
        let server = describe(service.peer(), &self.config);
        let modern =
            service.peer().peer_info().is_some_and(|i| !i.protocol_version.has_initialize());
        Ok(McpSession {
            modern,
            service,
            url: shown,
            token_sent: token.is_some(),
            config: Arc::clone(&self.config),
            server,
            changes_rx: tool_changes.subscribe(),
            tool_changes,
            listening: AtomicBool::new(false),
            cancels: Arc::new(tokio::sync::RwLock::new(())),
            cut,
        })
    }

    async fn handshake(
        &self,
        url: &str,
        shown: &str,
        token: Option<&Secret>,
        lifecycle: ClientLifecycleMode,
    ) -> Result<Handshaken, McpError> {
        let limits = &self.config.limits;
        let mut transport_config = StreamableHttpClientTransportConfig::with_uri(url.to_owned())
            .max_json_response_size(limits.max_response_bytes)
            .max_sse_event_size(limits.max_response_bytes);
        transport_config.retry_config =
            Arc::new(CappedRetry { max_retries: self.config.sse_max_retries });
        if let Some(token) = token {
            // rmcp adds the `Bearer ` prefix. The copy it keeps is a plain String (not
            // zeroized); it lives as long as the session, which `call_tool_for` may keep idle
            // for `McpConfig::session_idle_timeout` (or until `forget`).
            transport_config = transport_config.auth_header(token.expose().to_owned());
        }
        let cut = Arc::new(StreamCuts::default());
        let http = McpHttp { net: self.net.clone(), cuts: Arc::clone(&cut) };
        let transport = StreamableHttpClientTransport::with_client(http, transport_config);
        let (changes_tx, _) = watch::channel(0_u64);
        let handler = Handler { info: client_info(), tool_changes: Arc::new(changes_tx) };
        let tool_changes = Arc::clone(&handler.tool_changes);
        let cx = Context {
            url: shown,
            operation: "the handshake",
            token_sent: token.is_some(),
            timeout: self.config.handshake_timeout,
            cuts: &cut,
        };
        match tokio::time::timeout(
            self.config.handshake_timeout,
            handler.serve_with_lifecycle(transport, lifecycle),
        )
        .await
        {
            Err(_) => Err(McpError::Timeout {
                url: shown.to_owned(),
                operation: "the handshake".to_owned(),
                after: self.config.handshake_timeout,
            }),
            Ok(Err(err)) => Err(error::from_init(&err, &cx)),
            Ok(Ok(service)) => Ok((service, tool_changes, cut)),
        }
    }

    /// Connects, reads who the server is and its tool names, and disconnects.
    pub async fn probe(&self, url: &str, token: Option<&Secret>) -> Result<ProbeReport, McpError> {
        let session = self.connect(url, token).await?;
        let tools = session.list_tools().await;
        let server = session.server.clone();
        session.close().await;
        Ok(probe_report(&tools?, server))
    }

    /// Connects, takes a [`Snapshot`], and disconnects.
    ///
    /// At most [`McpConfig::max_concurrent_snapshots`] run at once across the instance; one
    /// more fails at once with [`McpError::Busy`].
    pub async fn snapshot(&self, url: &str, token: Option<&Secret>) -> Result<Snapshot, McpError> {
        let _permit = self
            .snapshots
            .try_acquire()
            .map_err(|_| McpError::Busy { limit: self.config.max_concurrent_snapshots })?;
        let session = self.connect(url, token).await?;
        let snapshot = session.snapshot().await;
        session.close().await;
        snapshot
    }

    /// Calls one tool on the server at `url`, on a session kept for `server` (the caller's
    /// name for it: Llooma passes the server's id, which belongs to one account), this address
    /// and this token, or on a new one.
    ///
    /// The session is kept for the next call if this one ended cleanly (a result, or an error
    /// the server answered), for at most [`McpConfig::session_idle_timeout`] unused; sessions
    /// are never shared between two names, addresses or tokens. A kept session the server no
    /// longer knows (it restarted, or ended the session) is replaced and the call sent once
    /// more, but only when the server answered that it did not run it (HTTP 404 or 400 to the
    /// session's request); a call that may have run is never sent again. Dropping the future
    /// cancels the call (`notifications/cancelled`) and closes its session.
    pub async fn call_tool_for(
        &self,
        server: &str,
        url: &str,
        token: Option<&Secret>,
        name: &str,
        arguments: Value,
    ) -> Result<ToolResult, McpError> {
        // Checked before any session is taken: such a call is never sent.
        let mut arguments = object_arguments(name, arguments)?;
        let key = Key::new(server, url, token);
        let mut retried = false;
        loop {
            // The retry connects anew: the key's other kept sessions may be as stale.
            let taken = if retried {
                Err(self.pool.ticket(key.clone()))
            } else {
                self.pool.take(key.clone())
            };
            let lease = match taken {
                Ok(lease) => lease,
                Err(ticket) => ticket.lease(self.connect(url, token).await?),
            };
            // Kept only while they may have to be sent again.
            let sent = if lease.reused && !retried {
                arguments.clone()
            } else {
                std::mem::take(&mut arguments)
            };
            match call_on(&lease, name, sent).await {
                Ok(result) => {
                    lease.give_back();
                    return Ok(result);
                }
                Err((err, Fault::Answered)) => {
                    lease.give_back();
                    return Err(err);
                }
                // The server did not run it and the session had served before: it went stale.
                // Sent once more, on a session this call connects.
                Err((err, Fault::NotRun)) if lease.reused && !retried => {
                    tracing::debug!(
                        url = %redact(url),
                        "a kept MCP session was refused ({err}); calling again on a new one"
                    );
                    retried = true;
                }
                Err((err, _)) => return Err(err),
            }
        }
    }

    /// [`McpClient::call_tool_for`] with no name for the server: calls to the same address
    /// with the same token share sessions.
    pub async fn call_tool(
        &self,
        url: &str,
        token: Option<&Secret>,
        name: &str,
        arguments: Value,
    ) -> Result<ToolResult, McpError> {
        self.call_tool_for("", url, token, name, arguments).await
    }

    /// Closes the sessions kept for `server` (a name given to [`McpClient::call_tool_for`], or
    /// an address): call it when its address or token changes, or it is switched off,
    /// suspended, resumed or removed. A call running now finishes on its session, which is then
    /// closed instead of kept.
    pub fn forget(&self, server: &str) {
        self.pool.forget(server);
    }
}

/// One `tools/call` on a leased session.
async fn call_on(
    lease: &Lease,
    name: &str,
    arguments: Option<JsonObject>,
) -> Result<ToolResult, (McpError, Fault)> {
    match lease.session() {
        Some(session) => session.call(name, arguments).await,
        None => Err((
            McpError::Disconnected { url: String::new(), detail: "no session".to_owned() },
            Fault::Broken,
        )),
    }
}

fn probe_report(tools: &ToolList, server: ServerDescription) -> ProbeReport {
    ProbeReport {
        protocol_version: server.protocol_version,
        server_name: server.server_name,
        server_version: server.server_version,
        instructions: server.instructions,
        tools: tools
            .tools
            .iter()
            .map(|t| ProbeTool {
                name: t.name.clone(),
                title: t.title.clone(),
                description: t.description.clone(),
            })
            .collect(),
        notes: tools.notes.clone(),
    }
}

/// `llooma mcp probe URL [--token-env VAR]`: connects with the default bounds under `policy`
/// and reports who answered and which tools it offers.
pub async fn probe(
    policy: Arc<OutboundPolicy>,
    url: &str,
    token: Option<&Secret>,
) -> Result<ProbeReport, McpError> {
    McpClient::new(policy, McpConfig::default())?.probe(url, token).await
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
    ClientConfig::new(
        ClientCapabilities::default(),
        Implementation::new("llooma", env!("CARGO_PKG_VERSION")),
    )
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

/// Receives the server's notifications.
#[derive(Debug, Clone)]
struct Handler {
    info: ClientConfig,
    tool_changes: Arc<watch::Sender<u64>>,
}

impl ClientHandler for Handler {
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
    fn page(self, result: ServerResult) -> Option<(Vec<Value>, Option<String>)> {
        fn json<T: serde::Serialize>(items: Vec<T>) -> Vec<Value> {
            items.into_iter().filter_map(|i| serde_json::to_value(i).ok()).collect()
        }
        Some(match (self, result) {
            (ListKind::Tools, ServerResult::ListToolsResult(r)) => (json(r.tools), r.next_cursor),
            (ListKind::Resources, ServerResult::ListResourcesResult(r)) => {
                (json(r.resources), r.next_cursor)
            }
            (ListKind::Templates, ServerResult::ListResourceTemplatesResult(r)) => {
                (json(r.resource_templates), r.next_cursor)
            }
            (ListKind::Prompts, ServerResult::ListPromptsResult(r)) => {
                (json(r.prompts), r.next_cursor)
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
        self.request_classified(request, operation, options, timeout).await.map_err(|(e, _)| e)
    }

    async fn request_classified(
        &self,
        request: ClientRequest,
        operation: &str,
        options: PeerRequestOptions,
        timeout: Duration,
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

    /// Reads a paged list up to the limits: raw items and notes.
    async fn list(&self, kind: ListKind) -> Result<(Vec<Value>, Vec<Note>), McpError> {
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
        loop {
            let result = self.simple_request(kind.request(cursor.clone()), kind.method()).await?;
            pages += 1;
            let (page, next) = kind.page(result).ok_or_else(|| McpError::Protocol {
                url: self.url.clone(),
                detail: format!("the reply to {} is not a list", kind.method()),
            })?;
            items.extend(page);
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
        Ok((items, notes))
    }

    /// The server's tools, limits applied.
    pub async fn list_tools(&self) -> Result<ToolList, McpError> {
        let (raw, mut notes) = self.list(ListKind::Tools).await?;
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
        Ok(ToolList { tools, notes })
    }

    /// Everything the server offers. Tools must be readable; a failure of any other list
    /// (many servers have no resources or prompts) becomes a [`Note`].
    pub async fn snapshot(&self) -> Result<Snapshot, McpError> {
        let ToolList { tools, mut notes } = self.list_tools().await?;
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
            let (raw, list_notes) = match self.list(kind).await {
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
        })
    }

    /// Calls a tool by the server's own name with `arguments` (a JSON object, or null for
    /// none). Waits [`McpConfig::call_timeout`], started again by each progress notification,
    /// at most [`McpConfig::max_call_timeout`].
    pub async fn call_tool(&self, name: &str, arguments: Value) -> Result<ToolResult, McpError> {
        let arguments = object_arguments(name, arguments)?;
        self.call(name, arguments).await.map_err(|(e, _)| e)
    }

    /// `tools/call`, and on failure what became of the session.
    pub(crate) async fn call(
        &self,
        name: &str,
        arguments: Option<JsonObject>,
    ) -> Result<ToolResult, (McpError, Fault)> {
        let mut params = CallToolRequestParams::new(name.to_owned());
        if let Some(arguments) = arguments {
            params = params.with_arguments(arguments);
        }
        let request = ClientRequest::CallToolRequest(CallToolRequest::new(params));
        let options = PeerRequestOptions::with_timeout(self.config.call_timeout)
            .reset_timeout_on_progress()
            .with_max_total_timeout(self.config.max_call_timeout);
        let operation = format!("tools/call {}", crate::error::excerpt(name, 80));
        let result =
            self.request_classified(request, &operation, options, self.config.call_timeout).await?;
        let ServerResult::CallToolResult(result) = result else {
            return Err((
                McpError::Protocol {
                    url: self.url.clone(),
                    detail: "the reply to tools/call is not a tool result".to_owned(),
                },
                Fault::Broken,
            ));
        };
        let raw = serde_json::to_value(&result).unwrap_or(Value::Null);
        Ok(self.tool_result(&raw))
    }

    fn tool_result(&self, raw: &Value) -> ToolResult {
        let limit = self.config.limits.max_result_bytes;
        let mut budget = Budget::new(limit);
        let mut content: Vec<ContentItem> = raw
            .get("content")
            .and_then(Value::as_array)
            .map(|items| items.iter().filter_map(|item| budget.content(item)).collect())
            .unwrap_or_default();
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
            template: crate::error::excerpt(uri_template, 200),
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

fn object_arguments(name: &str, arguments: Value) -> Result<Option<JsonObject>, McpError> {
    match arguments {
        Value::Null => Ok(None),
        Value::Object(map) => Ok(Some(map)),
        other => Err(McpError::BadArguments {
            what: format!("tool {}", crate::error::excerpt(name, 80)),
            found: match other {
                Value::Bool(_) => "a boolean",
                Value::Number(_) => "a number",
                Value::String(_) => "a string",
                _ => "an array",
            },
        }),
    }
}
