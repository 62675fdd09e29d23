//! [`McpClient`]: the MCP client of an instance. It decides on an address before connecting,
//! bounds the snapshots read at once, and calls tools on the sessions of its pool.

use std::sync::Arc;

use base64::Engine;

use llooma_net::{Decision, NetClient, OutboundPolicy, Purpose};
use llooma_vault::Secret;
use rmcp::model::JsonObject;
use serde_json::Value;
use url::Url;

use crate::ask::Asker;
use crate::config::McpConfig;
use crate::error::{self, Context, McpError};
use crate::http::StreamCuts;
use crate::icon;
use crate::model::{ProbeReport, ProbeTool, ServerDescription, Snapshot, ToolList, ToolResult};
use crate::pool::{Key, Lease, Pool};
use crate::session::{Fault, McpSession, object_arguments, redact};

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
            // writes without TCP_NODELAY would otherwise wait for our delayed ACK on each call.
            .ack_every_read(true)
            // Bounded per JSON answer and per SSE event instead (Limits::max_response_bytes):
            // a session's stream has no total size.
            .max_response_bytes(u64::MAX)
            // The standalone SSE stream lives as long as the session; every operation carries
            // its own deadline instead (see McpConfig).
            .total_timeout(None)
            .connect_timeout(config.connect_timeout)
            .idle_timeout(config.connection_idle_timeout)
            .build()
            .map_err(McpError::Setup)?;
        let snapshots = Arc::new(tokio::sync::Semaphore::new(config.max_concurrent_snapshots));
        let pool = Arc::new(Pool::new(&config));
        Ok(Self { policy, net, config: Arc::new(config), snapshots, pool })
    }

    /// The bytes of the icon at `src` (what `icon::chosen_icon` kept): decoded from a `data:`
    /// address, or fetched under the MCP outbound policy (never with the server's token), at
    /// most [`icon::MAX_ICON_BYTES`] and ten seconds. The bytes are the server's: the caller decides
    /// what they are.
    pub async fn fetch_icon(&self, src: &str) -> Result<Vec<u8>, McpError> {
        let shown = redact(src.get(..200).unwrap_or(src));
        if src.get(..5).is_some_and(|s| s.eq_ignore_ascii_case("data:")) {
            let (_, data) = src.split_once(',').ok_or_else(|| McpError::InvalidUrl {
                url: "a data: icon".to_owned(),
                problem: "it has no data".to_owned(),
            })?;
            let bytes =
                base64::engine::general_purpose::STANDARD.decode(data.trim()).map_err(|err| {
                    McpError::InvalidUrl {
                        url: "a data: icon".to_owned(),
                        problem: format!("its data is not base64 ({err})"),
                    }
                })?;
            if bytes.len() > icon::MAX_ICON_BYTES {
                return Err(McpError::TooLarge {
                    url: "a data: icon".to_owned(),
                    limit: icon::MAX_ICON_BYTES as u64,
                });
            }
            return Ok(bytes);
        }
        let parsed = Url::parse(src)
            .map_err(|err| McpError::InvalidUrl { url: shown.clone(), problem: err.to_string() })?;
        if let Decision::Refused { reason } = self.policy.decide(Purpose::Mcp, &parsed) {
            return Err(McpError::Refused { url: shown, reason });
        }
        let cuts = StreamCuts::default();
        let cx = Context {
            url: &shown,
            operation: "the icon",
            token_sent: false,
            timeout: icon::ICON_TIMEOUT,
            cuts: &cuts,
        };
        let fetch = async {
            let request = self.net.request_url(http::Method::GET, parsed).map_err(|err| {
                McpError::Unreachable { url: shown.clone(), detail: err.to_string() }
            })?;
            let mut response =
                self.net.send(request).await.map_err(|err| error::from_net(&err, &cx))?;
            let status = response.status().as_u16();
            if status != 200 {
                return Err(McpError::HttpStatus { url: shown.clone(), status });
            }
            let mut bytes = Vec::new();
            while let Some(chunk) =
                response.chunk().await.map_err(|err| error::from_net(&err, &cx))?
            {
                if bytes.len() + chunk.len() > icon::MAX_ICON_BYTES {
                    return Err(McpError::TooLarge {
                        url: shown.clone(),
                        limit: icon::MAX_ICON_BYTES as u64,
                    });
                }
                bytes.extend_from_slice(&chunk);
            }
            Ok(bytes)
        };
        tokio::time::timeout(icon::ICON_TIMEOUT, fetch).await.map_err(|_| McpError::Timeout {
            url: shown.clone(),
            operation: "the icon".to_owned(),
            after: icon::ICON_TIMEOUT,
        })?
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
        McpSession::open(&self.net, &self.config, url, shown, token).await
    }

    /// Connects, reads who the server is and its tool names, and disconnects.
    pub async fn probe(&self, url: &str, token: Option<&Secret>) -> Result<ProbeReport, McpError> {
        let session = self.connect(url, token).await?;
        let tools = session.list_tools().await;
        let server = session.server().clone();
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
        self.call_tool_asking(server, url, token, name, arguments, None).await
    }

    /// [`McpClient::call_tool_for`], with the questions the server asks during the call
    /// (`elicitation/create`, or `input_required` on 2026-07-28) sent to `asker`; with none,
    /// they are declined.
    pub async fn call_tool_asking(
        &self,
        server: &str,
        url: &str,
        token: Option<&Secret>,
        name: &str,
        arguments: Value,
        asker: Option<Asker>,
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
            match call_on(&lease, name, sent, asker.clone()).await {
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
    asker: Option<Asker>,
) -> Result<ToolResult, (McpError, Fault)> {
    match lease.session() {
        Some(session) => session.call(name, arguments, asker).await,
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
