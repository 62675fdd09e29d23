//! [`McpConfig`] and [`Limits`]: time and size bounds for talking to servers we do not control.

use std::time::Duration;

/// Time bounds of a client. The defaults suit a person waiting on a turn.
#[derive(Debug, Clone)]
pub struct McpConfig {
    /// Establishing a TCP (and TLS) connection. Default 10 s.
    pub connect_timeout: Duration,
    /// The whole handshake (`server/discover`, then `initialize` for older servers). Default
    /// 25 s: rmcp waits up to 10 s for a `server/discover` answer before it falls back to
    /// `initialize`, and a server that ignores the unknown method must still get its chance.
    pub handshake_timeout: Duration,
    /// One request other than `tools/call` (a page of a list, a read, a prompt). Default 30 s.
    pub request_timeout: Duration,
    /// One `tools/call` without news from the server. Default 60 s. Each progress
    /// notification the server sends for the call starts this period again, up to
    /// [`McpConfig::max_call_timeout`].
    pub call_timeout: Duration,
    /// The longest a `tools/call` may take however much progress it reports. Default 10 min.
    pub max_call_timeout: Duration,
    /// The longest a call the server runs as a long-running task (the tasks extension) may
    /// take, from the call to the task's end, however busy the server says it is. Default
    /// 10 min. Past it the task is cancelled (`tasks/cancel`) and the call fails, saying so.
    pub max_task_duration: Duration,
    /// How many times a broken event stream is reconnected before the request fails.
    /// Default 3 (rmcp's default retries forever).
    pub sse_max_retries: usize,
    /// Snapshots (tool, resource and prompt lists) read at once on this instance. Default 4.
    /// Each may hold up to [`Limits::max_response_bytes`] per page it reads, so this bounds
    /// what many people testing large servers at once can make the server hold; one more is
    /// refused ([`crate::McpError::Busy`]) rather than queued.
    pub max_concurrent_snapshots: usize,
    /// How long a session [`crate::McpClient::call_tool`] kept for a server may wait unused
    /// before it is closed. Default 5 min. Each call in that time reuses it instead of
    /// connecting anew (a handshake per call); a changed token, a switched-off, suspended or
    /// removed server ([`crate::McpClient::forget`]) drops it at once.
    pub session_idle_timeout: Duration,
    /// Sessions kept waiting across all servers. Default 64; when full, the one unused the
    /// longest is closed. Zero keeps none: every call connects.
    pub max_idle_sessions: usize,
    /// Sessions kept waiting per server (and token). Default 2: calls at the same moment each
    /// need their own.
    pub max_idle_sessions_per_server: usize,
    /// How long an HTTP connection kept between requests may sit unused before it is closed.
    /// Default 90 s ([`llooma_net::DEFAULT_IDLE_TIMEOUT`]).
    pub connection_idle_timeout: Duration,
    /// Size bounds.
    pub limits: Limits,
}

impl Default for McpConfig {
    fn default() -> Self {
        Self {
            connect_timeout: Duration::from_secs(10),
            handshake_timeout: Duration::from_secs(25),
            request_timeout: Duration::from_secs(30),
            call_timeout: Duration::from_secs(60),
            max_call_timeout: Duration::from_secs(600),
            max_task_duration: Duration::from_secs(600),
            sse_max_retries: 3,
            max_concurrent_snapshots: 4,
            session_idle_timeout: Duration::from_secs(300),
            max_idle_sessions: 64,
            max_idle_sessions_per_server: 2,
            connection_idle_timeout: llooma_net::DEFAULT_IDLE_TIMEOUT,
            limits: Limits::default(),
        }
    }
}

/// Size bounds on what a server can make us hold or hand to a model.
#[derive(Debug, Clone)]
pub struct Limits {
    /// Pages read per list (`tools/list`, `resources/list`, ...). Default 20. A server whose
    /// `nextCursor` never ends is cut here, with a note.
    pub max_pages: usize,
    /// Tools kept per server. Default 1,000; the rest are cut, with a note.
    pub max_tools: usize,
    /// Resources, templates and prompts kept per server, each. Default 1,000.
    pub max_items: usize,
    /// Bytes of a tool's (or prompt's, resource's) description kept. Default 4 KiB; longer
    /// ones are cut at a character boundary and end with [`TRUNCATION_MARKER`].
    pub max_description_bytes: usize,
    /// Bytes of a tool's input (or output) schema, as compact JSON. Default 64 KiB. A tool
    /// whose input schema is larger is left out, with a note: a cut schema would be wrong.
    pub max_schema_bytes: usize,
    /// Bytes of a call's result given to the model. Default 64 KiB; more is cut, and the
    /// result says so.
    pub max_result_bytes: usize,
    /// The largest single response (one JSON body or one event) read from a server.
    /// Default 16 MiB.
    pub max_response_bytes: usize,
}

impl Default for Limits {
    fn default() -> Self {
        Self {
            max_pages: 20,
            max_tools: 1_000,
            max_items: 1_000,
            max_description_bytes: 4 * 1024,
            max_schema_bytes: 64 * 1024,
            max_result_bytes: 64 * 1024,
            max_response_bytes: 16 * 1024 * 1024,
        }
    }
}

/// Ends every text that was cut.
pub const TRUNCATION_MARKER: &str = " …[truncated]";
