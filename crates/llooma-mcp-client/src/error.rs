//! [`McpError`]: everything that can go wrong talking to an MCP server, each case with a message
//! that tells a person what to do, and the classification of rmcp's errors into those cases.

use std::error::Error as StdError;
use std::time::Duration;

use llooma_net::{NetError, RedirectProblem, Refusal};
use rmcp::service::{ClientInitializeError, ServiceError};
use rmcp::transport::streamable_http_client::{SseError, StreamableHttpError};

use crate::canonical::excerpt;
use crate::http::{StreamCut, StreamCuts};

/// What went wrong with an MCP server. Messages never contain the token, the query string of
/// the URL, or the server's raw response body beyond a short, single-line excerpt.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum McpError {
    /// The address is not a URL we can use.
    #[error(
        "`{url}` is not a usable MCP server address ({problem}); write it as http(s)://host[:port]/path, usually ending in /mcp"
    )]
    InvalidUrl {
        /// What was given (without query or fragment).
        url: String,
        /// What is wrong with it.
        problem: String,
    },
    /// The outbound network policy does not allow the address. Nothing was sent.
    #[error("the MCP server {url} was not contacted: {reason}")]
    Refused {
        /// The URL (without query or fragment).
        url: String,
        /// Why, with what an administrator can do about it.
        reason: Refusal,
    },
    /// No connection could be made (refused, reset, name not found, TLS failure).
    #[error(
        "could not reach the MCP server at {url} ({detail}); check the address and that the server is running"
    )]
    Unreachable {
        /// The URL (without query or fragment).
        url: String,
        /// What the network layer reported.
        detail: String,
    },
    /// The server answered 401 or 403.
    #[error("{}", token_refused_message(url, *status, *token_sent))]
    TokenRefused {
        /// The URL (without query or fragment).
        url: String,
        /// 401 or 403.
        status: u16,
        /// Whether a token was sent at all.
        token_sent: bool,
    },
    /// The server did not answer in time.
    #[error("the MCP server at {url} did not answer {operation} within {}; it is slow, stuck or overloaded — try again later or raise the timeout", human(*after))]
    Timeout {
        /// The URL (without query or fragment).
        url: String,
        /// What we were waiting for (`the handshake`, `tools/call`, ...).
        operation: String,
        /// How long we waited.
        after: Duration,
    },
    /// The server answered with an HTTP error status other than 401/403.
    #[error("the MCP server at {url} answered HTTP {status}{}; check that the address is the server's MCP endpoint", hint_for_status(*status))]
    HttpStatus {
        /// The URL (without query or fragment).
        url: String,
        /// The status code.
        status: u16,
    },
    /// The server answered something that is not MCP (not JSON, wrong content type, a reply
    /// that does not fit the request).
    #[error(
        "the server at {url} did not answer with MCP ({detail}); check that the address points at an MCP Streamable HTTP endpoint (often ending in /mcp)"
    )]
    Protocol {
        /// The URL (without query or fragment).
        url: String,
        /// A short description of what was wrong.
        detail: String,
    },
    /// A response was larger than the client accepts.
    #[error(
        "the MCP server at {url} sent a response larger than {limit} bytes; reading stopped there"
    )]
    TooLarge {
        /// The URL (without query or fragment).
        url: String,
        /// The cap, in bytes.
        limit: u64,
    },
    /// The server answered the request with a JSON-RPC error (unknown tool, bad arguments, ...).
    #[error("the MCP server at {url} refused {operation}: {message} (error {code})")]
    Server {
        /// The URL (without query or fragment).
        url: String,
        /// The request that was refused.
        operation: String,
        /// The JSON-RPC error code.
        code: i32,
        /// The server's message, shortened to one line.
        message: String,
    },
    /// The connection to the server ended while a request was outstanding.
    #[error(
        "the connection to the MCP server at {url} was lost ({detail}); reconnect and try again"
    )]
    Disconnected {
        /// The URL (without query or fragment).
        url: String,
        /// What happened.
        detail: String,
    },
    /// A value for a resource template is not acceptable.
    #[error("cannot fill the resource template `{template}`: {problem}")]
    Template {
        /// The template as the server gave it.
        template: String,
        /// What is wrong.
        problem: String,
    },
    /// The arguments given for a call are not a JSON object.
    #[error("the arguments for {what} must be a JSON object, not {found}")]
    BadArguments {
        /// The tool or prompt.
        what: String,
        /// The JSON type that was given.
        found: &'static str,
    },
    /// The server answered "input required" with a request the person refused, and the
    /// protocol has no way to tell it so: the call was not sent again.
    #[error("{operation} on the MCP server at {url} was not sent again: {reason}")]
    Withheld {
        /// The URL (without query or fragment).
        url: String,
        /// The request that was not sent again.
        operation: String,
        /// Why, in words for the person.
        reason: String,
    },
    /// The server ran the call as a long-running task (protocol 2026-07-28's tasks extension),
    /// and the task ended without a result.
    #[error("{operation} on the MCP server at {url} ran as a task that {how}")]
    TaskEnded {
        /// The URL (without query or fragment).
        url: String,
        /// The call the task ran.
        operation: String,
        /// How it ended, in words for the person, with what to do where something can be done.
        how: String,
    },
    /// The outbound HTTP client could not be built.
    #[error("could not set up the MCP client: {0}")]
    Setup(#[source] NetError),
    /// As many servers as the instance reads at once are being read: nothing was contacted.
    #[error(
        "{limit} MCP servers are being tested on this instance right now; nothing was contacted — try again in a moment"
    )]
    Busy {
        /// [`crate::McpConfig::max_concurrent_snapshots`].
        limit: usize,
    },
}

fn token_refused_message(url: &str, status: u16, token_sent: bool) -> String {
    if token_sent {
        format!(
            "the MCP server at {url} refused the token (HTTP {status}); check that the token is \
             current and has access to this server, then save it again"
        )
    } else {
        format!(
            "the MCP server at {url} wants a token (HTTP {status}); add the server's token in \
             its settings"
        )
    }
}

fn hint_for_status(status: u16) -> &'static str {
    match status {
        404 => " (not found)",
        405 => " (method not allowed: this is not a Streamable HTTP endpoint)",
        429 => " (too many requests)",
        500..=599 => " (the server failed)",
        _ => "",
    }
}

pub(crate) fn human(d: Duration) -> String {
    if d.as_millis() < 1000 {
        format!("{} ms", d.as_millis())
    } else if d.subsec_millis() == 0 {
        format!("{} s", d.as_secs())
    } else {
        format!("{:.1} s", d.as_secs_f64())
    }
}

/// What the classification needs to know besides the error.
#[derive(Debug, Clone)]
pub(crate) struct Context<'a> {
    pub(crate) url: &'a str,
    pub(crate) operation: &'a str,
    pub(crate) token_sent: bool,
    pub(crate) timeout: Duration,
    /// Where the session's transport records an answer cut for its size.
    pub(crate) cuts: &'a StreamCuts,
}

impl Context<'_> {
    /// An answer cut for its size, which is then why the operation failed, whatever rmcp says.
    fn cut(&self) -> Option<McpError> {
        let limit = self.cuts.take()?;
        Some(McpError::TooLarge { url: self.url.to_owned(), limit: limit as u64 })
    }

    fn timeout(&self) -> McpError {
        McpError::Timeout {
            url: self.url.to_owned(),
            operation: self.operation.to_owned(),
            after: self.timeout,
        }
    }
}

type HttpErr = StreamableHttpError<NetError>;
type WorkerErr = rmcp::transport::worker::WorkerQuitReason<HttpErr>;

/// Maps a failed handshake.
pub(crate) fn from_init(err: &ClientInitializeError, cx: &Context<'_>) -> McpError {
    if let Some(cut) = cx.cut() {
        return cut;
    }
    match err {
        ClientInitializeError::LegacyFallbackFailed { discover, fallback } => {
            // The fallback saw the server last; its failure is the one to report, unless it
            // is only a consequence of the first (e.g. the connection was already gone).
            let second = from_init(fallback, cx);
            match second {
                McpError::Protocol { .. } | McpError::Disconnected { .. } => {
                    let first = from_init(discover, cx);
                    if matches!(first, McpError::Protocol { .. }) { second } else { first }
                }
                other => other,
            }
        }
        ClientInitializeError::TransportError { error, .. } => from_chain(error, cx),
        ClientInitializeError::JsonRpcError(data) => McpError::Server {
            url: cx.url.to_owned(),
            operation: cx.operation.to_owned(),
            code: data.code.0,
            message: excerpt(&data.message, 300),
        },
        ClientInitializeError::ConnectionClosed(detail) => McpError::Protocol {
            url: cx.url.to_owned(),
            detail: format!("the connection closed during the handshake: {}", excerpt(detail, 200)),
        },
        ClientInitializeError::Cancelled => McpError::Disconnected {
            url: cx.url.to_owned(),
            detail: "the handshake was cancelled".to_owned(),
        },
        ClientInitializeError::NoCompatibleProtocolVersion { server_supported, .. } => {
            McpError::Protocol {
                url: cx.url.to_owned(),
                detail: format!(
                    "no protocol version in common; the server offers {}",
                    server_supported.iter().map(|v| v.to_string()).collect::<Vec<_>>().join(", ")
                ),
            }
        }
        other => {
            McpError::Protocol { url: cx.url.to_owned(), detail: excerpt(&other.to_string(), 200) }
        }
    }
}

/// Maps a failed request after the handshake.
pub(crate) fn from_service(err: &ServiceError, cx: &Context<'_>) -> McpError {
    if let Some(cut) = cx.cut() {
        return cut;
    }
    match err {
        ServiceError::McpError(data) => McpError::Server {
            url: cx.url.to_owned(),
            operation: cx.operation.to_owned(),
            code: data.code.0,
            message: excerpt(&data.message, 300),
        },
        ServiceError::TransportSend(error) => from_chain(error, cx),
        ServiceError::Timeout { .. } => cx.timeout(),
        ServiceError::TransportClosed => McpError::Disconnected {
            url: cx.url.to_owned(),
            detail: "the transport closed".to_owned(),
        },
        ServiceError::UnexpectedResponse => McpError::Protocol {
            url: cx.url.to_owned(),
            detail: format!("the reply to {} is not of the expected kind", cx.operation),
        },
        other => {
            McpError::Protocol { url: cx.url.to_owned(), detail: excerpt(&other.to_string(), 200) }
        }
    }
}

/// Whether the server answered a request's POST that it does not know the session (HTTP 404
/// with an `Mcp-Session-Id`, also when rmcp's own new session then failed), or with an error
/// that names no request (see [`crate::http`]): the server did not run the request.
pub(crate) fn session_unknown(err: &ServiceError) -> bool {
    let ServiceError::TransportSend(err) = err else {
        return false;
    };
    let mut current: Option<&(dyn StdError + 'static)> = Some(err);
    while let Some(e) = current {
        let http = e.downcast_ref::<HttpErr>().or_else(|| match e.downcast_ref::<WorkerErr>() {
            Some(WorkerErr::Fatal { error, .. }) => Some(error),
            _ => None,
        });
        match http {
            Some(
                StreamableHttpError::SessionExpired
                | StreamableHttpError::ReinitializationFailed(_),
            ) => return true,
            Some(StreamableHttpError::UnexpectedServerResponse(text))
                if text.starts_with(crate::http::UNADDRESSED) =>
            {
                return true;
            }
            _ => {}
        }
        current = e.source();
    }
    false
}

/// Walks an error's chain of sources and picks the most specific cause it recognises.
fn from_chain(err: &(dyn StdError + 'static), cx: &Context<'_>) -> McpError {
    let mut current = Some(err);
    while let Some(e) = current {
        if let Some(http) = e.downcast_ref::<HttpErr>()
            && let Some(found) = from_http(http, cx)
        {
            return found;
        }
        // WorkerQuitReason::Fatal keeps its cause in a field that is not a `source`.
        if let Some(WorkerErr::Fatal { error, .. }) = e.downcast_ref::<WorkerErr>()
            && let Some(found) = from_http(error, cx)
        {
            return found;
        }
        if let Some(net) = e.downcast_ref::<NetError>() {
            return from_net(net, cx);
        }
        if let Some(cut) = e.downcast_ref::<StreamCut>() {
            return from_cut(cut, cx);
        }
        current = e.source();
    }
    McpError::Protocol { url: cx.url.to_owned(), detail: excerpt(&err.to_string(), 200) }
}

fn from_http(err: &HttpErr, cx: &Context<'_>) -> Option<McpError> {
    let url = cx.url.to_owned();
    Some(match err {
        StreamableHttpError::Client(e) => from_net(e, cx),
        StreamableHttpError::AuthRequired(_) => {
            McpError::TokenRefused { url, status: 401, token_sent: cx.token_sent }
        }
        StreamableHttpError::InsufficientScope(_) => {
            McpError::TokenRefused { url, status: 403, token_sent: cx.token_sent }
        }
        StreamableHttpError::HttpStatus(status) => match status.status {
            s @ (401 | 403) => McpError::TokenRefused { url, status: s, token_sent: cx.token_sent },
            s => McpError::HttpStatus { url, status: s },
        },
        StreamableHttpError::UnexpectedServerResponse(text) => {
            // rmcp reports other HTTP errors as "HTTP <status>: <body>".
            match parse_http_status(text) {
                Some(401) => McpError::TokenRefused { url, status: 401, token_sent: cx.token_sent },
                Some(403) => McpError::TokenRefused { url, status: 403, token_sent: cx.token_sent },
                Some(status) => McpError::HttpStatus { url, status },
                None => McpError::Protocol { url, detail: excerpt(text, 200) },
            }
        }
        StreamableHttpError::UnexpectedContentType(ct) => McpError::Protocol {
            url,
            detail: format!(
                "it answered with content type {}, not JSON or an event stream",
                ct.as_deref().map(|c| excerpt(c, 80)).unwrap_or_else(|| "(none)".to_owned())
            ),
        },
        StreamableHttpError::Deserialize(e) => {
            McpError::Protocol { url, detail: format!("its reply is not valid JSON-RPC: {e}") }
        }
        StreamableHttpError::ResponseBodyTooLarge { max_size } => {
            McpError::TooLarge { url, limit: *max_size as u64 }
        }
        StreamableHttpError::SessionExpired => McpError::Disconnected {
            url,
            detail: "the server ended the session (HTTP 404)".to_owned(),
        },
        StreamableHttpError::Io(e) => {
            McpError::Unreachable { url, detail: excerpt(&e.to_string(), 200) }
        }
        StreamableHttpError::Sse(e) => {
            if let SseError::Body(body) = e
                && let Some(cut) = body.downcast_ref::<StreamCut>()
            {
                return Some(from_cut(cut, cx));
            }
            McpError::Protocol {
                url,
                detail: format!("broken event stream: {}", excerpt(&e.to_string(), 200)),
            }
        }
        _ => return None,
    })
}

fn parse_http_status(text: &str) -> Option<u16> {
    let rest = text.strip_prefix("HTTP ")?;
    rest.get(..3)?.parse().ok()
}

pub(crate) fn from_net(err: &NetError, cx: &Context<'_>) -> McpError {
    let url = cx.url.to_owned();
    match err {
        NetError::Refused { reason, .. } => McpError::Refused { url, reason: reason.clone() },
        NetError::Redirect(redirect) => match &redirect.problem {
            RedirectProblem::Policy(reason) => McpError::Refused { url, reason: reason.clone() },
            _ => McpError::Protocol { url, detail: excerpt(&redirect.to_string(), 200) },
        },
        NetError::Timeout { .. } => cx.timeout(),
        NetError::BodyTooLarge { limit, .. } => McpError::TooLarge { url, limit: *limit },
        NetError::Connect { source, .. } => {
            McpError::Unreachable { url, detail: innermost(source.as_ref()) }
        }
        // Connected, then the exchange failed: written but unanswered, or cut mid-answer.
        NetError::Request { source, .. } => {
            McpError::Disconnected { url, detail: innermost(source.as_ref()) }
        }
        other => McpError::Unreachable { url, detail: excerpt(&other.to_string(), 200) },
    }
}

fn from_cut(cut: &StreamCut, cx: &Context<'_>) -> McpError {
    match cut {
        StreamCut::Net(err) => from_net(err, cx),
        StreamCut::EventTooLarge { max } => {
            McpError::TooLarge { url: cx.url.to_owned(), limit: *max as u64 }
        }
    }
}

/// The deepest source's message: an HTTP library's own top-level text repeats the URL and
/// says little.
fn innermost(err: &(dyn StdError + 'static)) -> String {
    let mut last = err;
    while let Some(next) = last.source() {
        last = next;
    }
    excerpt(&last.to_string(), 200)
}
