//! [`McpHttp`]: rmcp's Streamable HTTP client, written over [`NetClient::send`], whose
//! connections are kept between requests and acknowledge every read at once
//! ([`llooma_net::NetClientBuilder::ack_every_read`]).
//!
//! Why not rmcp's own client: it is written over a second HTTP library (reqwest), whose sockets
//! cannot be reached, and a kept connection to a server that answers in SSE without
//! `TCP_NODELAY` waits for a delayed ACK on every call; so MCP would keep no connections, and
//! every call would pay a new TCP connection. This way MCP uses the one outbound client.
//!
//! Each answer is read as rmcp's client reads it, so its worker sees the same errors:
//! - 401 or 403 with a challenge (`WWW-Authenticate`): the token was refused;
//! - 202 or 204: accepted; 404 to a request that named a session: the session expired;
//! - 429 and 5xx: a status error, unless a 5xx carries a JSON-RPC error (read within the JSON
//!   bound), which is the answer;
//! - any other failure: its JSON-RPC error if the body is one, else `HTTP <status>: <the
//!   body's start>` (a `server/discover` refused this way is how an older server says so);
//! - success: SSE, each event bounded, or JSON, the body bounded, by media type; a
//!   notification's or reply's answer is not read for anything.
//!
//! And one correction. A server that does not know a session may refuse its request with a
//! JSON-RPC error that names no request: server-everything (the TypeScript SDK) answers HTTP
//! 400 `{"jsonrpc":"2.0","error":{"code":-32000,"message":"Bad Request: No valid session ID
//! provided"}}` once it restarted. rmcp passes such an error on as a message, finds no request
//! it belongs to and drops it, so the request waits for its whole timeout (a minute for a
//! `tools/call`). Here it fails the request at once, marked so the caller knows the server did
//! not run it (it could not even tell which request it was). So does an error naming another
//! request: the answer to a POST is that request's.

use std::borrow::Cow;
use std::collections::HashMap;
use std::sync::Arc;
use std::sync::atomic::{AtomicUsize, Ordering};

use futures::StreamExt;
use http::StatusCode;
use http::header::{
    ACCEPT, CONTENT_LENGTH, CONTENT_TYPE, HeaderMap, HeaderName, HeaderValue, RETRY_AFTER,
    WWW_AUTHENTICATE,
};
use llooma_net::{Method, NetClient, NetError, NetRequest, NetResponse};
use rmcp::model::{
    ClientJsonRpcMessage, ClientRequest, ErrorData, RequestId, ServerJsonRpcMessage,
};
use rmcp::transport::common::client_side_sse::BoxedSseResponse;
use rmcp::transport::common::http_header::{
    EVENT_STREAM_MIME_TYPE, HEADER_LAST_EVENT_ID, HEADER_SESSION_ID, JSON_MIME_TYPE,
};
use rmcp::transport::streamable_http_client::{
    AuthRequiredError, HttpStatusError, InsufficientScopeError, StreamableHttpClient,
    StreamableHttpError, StreamableHttpPostResponse, StreamableHttpResponseLimits,
};
use sse_stream::SseStream;

/// Begins the error a request fails with when the server's answer to it is an error that names
/// no request (or another one).
pub(crate) const UNADDRESSED: &str = "the server refused the request without naming it: ";

/// What a POST and the standalone stream accept.
const ACCEPTED_TYPES: &str = "text/event-stream, application/json";

/// The bound on one SSE event when rmcp names none (its own default).
const DEFAULT_MAX_EVENT: usize = 16 * 1024 * 1024;

/// What an error body is shown as when it could not be read.
const UNREADABLE_BODY: &str = "(the body could not be read)";

/// See the module's documentation. One per session.
#[derive(Clone)]
pub(crate) struct McpHttp {
    pub(crate) net: NetClient,
    pub(crate) cuts: Arc<StreamCuts>,
}

/// The bound of the last event stream cut for its size, until the failure it caused is
/// reported: rmcp fails the request only with "the stream closed before its answer".
#[derive(Debug, Default)]
pub(crate) struct StreamCuts(AtomicUsize);

impl StreamCuts {
    fn record(&self, max: usize) {
        self.0.store(max, Ordering::Relaxed);
    }

    /// The bound of a cut not reported yet, now reported.
    pub(crate) fn take(&self) -> Option<usize> {
        Some(self.0.swap(0, Ordering::Relaxed)).filter(|max| *max > 0)
    }
}

type Result<T> = std::result::Result<T, StreamableHttpError<NetError>>;

/// Why a server's event stream was cut, as the SSE parser reports it (`SseError::Body`).
#[derive(Debug, thiserror::Error)]
pub(crate) enum StreamCut {
    /// The connection failed or timed out.
    #[error(transparent)]
    Net(NetError),
    /// One event grew past the bound before it ended.
    #[error("an event in the server's stream is larger than {max} bytes")]
    EventTooLarge { max: usize },
}

impl StreamableHttpClient for McpHttp {
    type Error = NetError;

    async fn post_message(
        &self,
        uri: Arc<str>,
        message: ClientJsonRpcMessage,
        session_id: Option<Arc<str>>,
        auth_header: Option<String>,
        custom_headers: HashMap<HeaderName, HeaderValue>,
    ) -> Result<StreamableHttpPostResponse> {
        let limits = StreamableHttpResponseLimits::default();
        self.post_message_with_response_limits(
            uri,
            message,
            session_id,
            auth_header,
            custom_headers,
            limits,
        )
        .await
    }

    async fn post_message_with_max_sse_event_size(
        &self,
        uri: Arc<str>,
        message: ClientJsonRpcMessage,
        session_id: Option<Arc<str>>,
        auth_header: Option<String>,
        custom_headers: HashMap<HeaderName, HeaderValue>,
        max_sse_event_size: usize,
    ) -> Result<StreamableHttpPostResponse> {
        let mut limits = StreamableHttpResponseLimits::default();
        limits.max_sse_event_size = max_sse_event_size;
        self.post_message_with_response_limits(
            uri,
            message,
            session_id,
            auth_header,
            custom_headers,
            limits,
        )
        .await
    }

    async fn post_message_with_response_limits(
        &self,
        uri: Arc<str>,
        message: ClientJsonRpcMessage,
        session_id: Option<Arc<str>>,
        auth_header: Option<String>,
        custom_headers: HashMap<HeaderName, HeaderValue>,
        limits: StreamableHttpResponseLimits,
    ) -> Result<StreamableHttpPostResponse> {
        let request = request_id(&message);
        let response =
            self.post(&uri, message, session_id.as_deref(), auth_header, custom_headers, limits);
        addressed(request, response.await)
    }

    async fn delete_session(
        &self,
        uri: Arc<str>,
        session_id: Arc<str>,
        auth_header: Option<String>,
        custom_headers: HashMap<HeaderName, HeaderValue>,
    ) -> Result<()> {
        let request =
            self.request(Method::DELETE, &uri, Some(&session_id), auth_header, custom_headers)?;
        let response = self.net.send(request).await.map_err(StreamableHttpError::Client)?;
        let status = response.status();
        // 405: the server keeps no sessions to delete.
        if status.is_success() || status == StatusCode::METHOD_NOT_ALLOWED {
            return Ok(());
        }
        Err(status_error(status, response.headers()).into())
    }

    async fn get_stream(
        &self,
        uri: Arc<str>,
        session_id: Option<Arc<str>>,
        last_event_id: Option<String>,
        auth_header: Option<String>,
        custom_headers: HashMap<HeaderName, HeaderValue>,
    ) -> Result<BoxedSseResponse> {
        self.get_stream_with_max_sse_event_size(
            uri,
            session_id,
            last_event_id,
            auth_header,
            custom_headers,
            DEFAULT_MAX_EVENT,
        )
        .await
    }

    async fn get_stream_with_max_sse_event_size(
        &self,
        uri: Arc<str>,
        session_id: Option<Arc<str>>,
        last_event_id: Option<String>,
        auth_header: Option<String>,
        custom_headers: HashMap<HeaderName, HeaderValue>,
        max_sse_event_size: usize,
    ) -> Result<BoxedSseResponse> {
        let mut request = self
            .request(Method::GET, &uri, session_id.as_deref(), auth_header, custom_headers)?
            .header(ACCEPT, ACCEPTED_TYPES);
        if let Some(last_event_id) = last_event_id {
            request = request.header(HEADER_LAST_EVENT_ID, last_event_id);
        }
        let response = self.net.send(request).await.map_err(StreamableHttpError::Client)?;
        let status = response.status();
        if status == StatusCode::METHOD_NOT_ALLOWED {
            return Err(StreamableHttpError::ServerDoesNotSupportSse);
        }
        challenged(status, response.headers())?;
        if !status.is_success() {
            return Err(status_error(status, response.headers()).into());
        }
        match content_type(response.headers()) {
            Some(ct)
                if media_type_is(&ct, EVENT_STREAM_MIME_TYPE)
                    || media_type_is(&ct, JSON_MIME_TYPE) => {}
            other => return Err(StreamableHttpError::UnexpectedContentType(other)),
        }
        // Not a request's answer: a cut here is no call's failure.
        Ok(sse_events(response, max_sse_event_size, None))
    }
}

impl McpHttp {
    /// A request with the session, the token and rmcp's own headers.
    fn request(
        &self,
        method: Method,
        uri: &str,
        session_id: Option<&str>,
        auth_header: Option<String>,
        custom_headers: HashMap<HeaderName, HeaderValue>,
    ) -> Result<NetRequest> {
        let mut request = self.net.request(method, uri).map_err(StreamableHttpError::Client)?;
        for (name, value) in custom_headers {
            // Set by this client; rmcp's worker adds `MCP-Protocol-Version` itself, which passes.
            if [ACCEPT.as_str(), HEADER_SESSION_ID, HEADER_LAST_EVENT_ID]
                .iter()
                .any(|reserved| name.as_str().eq_ignore_ascii_case(reserved))
            {
                return Err(StreamableHttpError::ReservedHeaderConflict(name.to_string()));
            }
            request = request.header(name, value);
        }
        if let Some(session_id) = session_id {
            request = request.header(HEADER_SESSION_ID, session_id);
        }
        if let Some(token) = auth_header {
            request = request.bearer_auth(&token);
        }
        Ok(request)
    }

    async fn post(
        &self,
        uri: &str,
        message: ClientJsonRpcMessage,
        session_id: Option<&str>,
        auth_header: Option<String>,
        custom_headers: HashMap<HeaderName, HeaderValue>,
        limits: StreamableHttpResponseLimits,
    ) -> Result<StreamableHttpPostResponse> {
        let body = serde_json::to_vec(&message)?;
        let request = self
            .request(Method::POST, uri, session_id, auth_header, custom_headers)?
            .header(ACCEPT, ACCEPTED_TYPES)
            .header(CONTENT_TYPE, JSON_MIME_TYPE)
            .body(body);
        let mut response = self.net.send(request).await.map_err(StreamableHttpError::Client)?;
        let status = response.status();
        challenged(status, response.headers())?;
        if status == StatusCode::ACCEPTED || status == StatusCode::NO_CONTENT {
            return Ok(StreamableHttpPostResponse::Accepted);
        }
        let with_session = session_id.is_some();
        if status == StatusCode::NOT_FOUND && with_session {
            return Err(StreamableHttpError::SessionExpired);
        }
        let headers = response.headers();
        let content_type = content_type(headers);
        let length = headers
            .get(CONTENT_LENGTH)
            .and_then(|value| value.to_str().ok())
            .and_then(|value| value.trim().parse::<u64>().ok());
        let new_session =
            headers.get(HEADER_SESSION_ID).and_then(|v| v.to_str().ok()).map(str::to_owned);
        // A notification, a reply or an error awaits no answer: what comes back only says the
        // server took it.
        let awaits_nothing = !matches!(message, ClientJsonRpcMessage::Request(_));
        if !status.is_success() {
            let is_json =
                content_type.as_deref().is_some_and(|ct| media_type_is(ct, JSON_MIME_TYPE));
            let failure = Failure { message: &message, with_session, status, is_json, length };
            return failure.read(response, new_session, limits).await;
        }
        // Some servers answer a notification with an empty 200 instead of 202.
        if length == Some(0) && awaits_nothing {
            return Ok(StreamableHttpPostResponse::Accepted);
        }
        match content_type {
            Some(ct) if media_type_is(&ct, EVENT_STREAM_MIME_TYPE) => {
                Ok(StreamableHttpPostResponse::Sse(
                    sse_events(response, limits.max_sse_event_size, Some(Arc::clone(&self.cuts))),
                    new_session,
                ))
            }
            Some(ct) if media_type_is(&ct, JSON_MIME_TYPE) => {
                let body =
                    read_bounded(&mut response, length, limits.max_json_response_size).await?;
                match serde_json::from_slice::<ServerJsonRpcMessage>(&body) {
                    Ok(answer) => Ok(StreamableHttpPostResponse::Json(answer, new_session)),
                    Err(_) if awaits_nothing => Ok(StreamableHttpPostResponse::Accepted),
                    Err(err) => {
                        Err(StreamableHttpError::UnexpectedServerResponse(Cow::Owned(format!(
                            "the answer is not a JSON-RPC message ({err}): {}",
                            crate::canonical::excerpt(&String::from_utf8_lossy(&body), 200)
                        ))))
                    }
                }
            }
            // Neither JSON nor SSE: fine for what awaits no answer (servers that answer
            // `notifications/initialized` with a bare 200), an error for a request.
            _ if awaits_nothing => Ok(StreamableHttpPostResponse::Accepted),
            other => Err(StreamableHttpError::UnexpectedContentType(other)),
        }
    }
}

/// A POST the server did not take (a status other than 2xx).
struct Failure<'a> {
    message: &'a ClientJsonRpcMessage,
    with_session: bool,
    status: StatusCode,
    is_json: bool,
    length: Option<u64>,
}

impl Failure<'_> {
    async fn read(
        self,
        mut response: NetResponse,
        new_session: Option<String>,
        limits: StreamableHttpResponseLimits,
    ) -> Result<StreamableHttpPostResponse> {
        let status = self.status;
        let overloaded = status == StatusCode::TOO_MANY_REQUESTS || status.is_server_error();
        // A rate limit, or a server error without a JSON-RPC error to read: the status says it.
        if overloaded && (!self.is_json || status == StatusCode::TOO_MANY_REQUESTS) {
            return Err(status_error(status, response.headers()).into());
        }
        let retry = overloaded.then(|| status_error(status, response.headers()));
        // A 401 or 403 without a challenge keeps its status: its body is only shown.
        let refused_token = status == StatusCode::UNAUTHORIZED || status == StatusCode::FORBIDDEN;
        let shown = if self.is_json && !refused_token {
            match read_bounded(&mut response, self.length, limits.max_json_response_size).await {
                Ok(body) => {
                    if let Ok(error @ ServerJsonRpcMessage::Error(_)) =
                        serde_json::from_slice::<ServerJsonRpcMessage>(&body)
                    {
                        return Ok(self
                            .discover_refused(&body)
                            .unwrap_or(StreamableHttpPostResponse::Json(error, new_session)));
                    }
                    let start = &body[..body.len().min(limits.max_error_response_size)];
                    String::from_utf8_lossy(start).into_owned()
                }
                Err(too_large @ StreamableHttpError::ResponseBodyTooLarge { .. }) => {
                    return Err(retry.map(StreamableHttpError::from).unwrap_or(too_large));
                }
                Err(StreamableHttpError::Client(_)) => UNREADABLE_BODY.to_owned(),
                Err(other) => return Err(other),
            }
        } else {
            match read_start(&mut response, limits.max_error_response_size).await {
                Ok(start) => String::from_utf8_lossy(&start).into_owned(),
                Err(_) => UNREADABLE_BODY.to_owned(),
            }
        };
        if let Some(answer) = self.discover_refused(shown.as_bytes()) {
            return Ok(answer);
        }
        if let Some(retry) = retry {
            return Err(retry.into());
        }
        Err(StreamableHttpError::UnexpectedServerResponse(Cow::Owned(format!(
            "HTTP {status}: {shown}"
        ))))
    }

    /// An older server refusing `server/discover` with a 4xx (no session yet): the refusal as
    /// the request's JSON-RPC error, so the handshake falls back to `initialize`. The id is the
    /// request's: such refusals come from middleware that cannot echo it.
    fn discover_refused(&self, body: &[u8]) -> Option<StreamableHttpPostResponse> {
        let status = self.status;
        if self.with_session
            || !status.is_client_error()
            || status == StatusCode::UNAUTHORIZED
            || status == StatusCode::FORBIDDEN
        {
            return None;
        }
        let ClientJsonRpcMessage::Request(request) = self.message else {
            return None;
        };
        if !matches!(request.request, ClientRequest::DiscoverRequest(_)) {
            return None;
        }
        let error = match serde_json::from_slice::<ServerJsonRpcMessage>(body) {
            Ok(ServerJsonRpcMessage::Error(error)) => error.error,
            _ => ErrorData::invalid_request(
                format!(
                    "server/discover refused with HTTP {status}: {}",
                    String::from_utf8_lossy(body)
                ),
                None,
            ),
        };
        Some(StreamableHttpPostResponse::Json(
            ServerJsonRpcMessage::error(error, Some(request.id.clone())),
            None,
        ))
    }
}

/// A 401 or 403 that carries a challenge: the token was refused (or lacks a scope).
fn challenged(status: StatusCode, headers: &HeaderMap) -> Result<()> {
    if status != StatusCode::UNAUTHORIZED && status != StatusCode::FORBIDDEN {
        return Ok(());
    }
    let Some(challenge) = headers.get(WWW_AUTHENTICATE) else {
        return Ok(());
    };
    let challenge = challenge.to_str().map_err(|_| {
        StreamableHttpError::UnexpectedServerResponse(Cow::Borrowed(
            "the WWW-Authenticate header is not text",
        ))
    })?;
    if status == StatusCode::UNAUTHORIZED {
        return Err(StreamableHttpError::AuthRequired(AuthRequiredError::new(
            challenge.to_owned(),
        )));
    }
    Err(StreamableHttpError::InsufficientScope(InsufficientScopeError::new(
        challenge.to_owned(),
        scope_of(challenge),
    )))
}

/// The `scope` parameter of a challenge, quoted or not.
fn scope_of(challenge: &str) -> Option<String> {
    let at = challenge.find("scope=")?;
    let rest = &challenge[at + "scope=".len()..];
    let scope = match rest.strip_prefix('"') {
        Some(quoted) => quoted.split('"').next()?,
        None => rest.split([',', ' ']).next()?,
    };
    (!scope.is_empty()).then(|| scope.to_owned())
}

/// The status, with `Retry-After` as the server wrote it (kept only when short).
fn status_error(status: StatusCode, headers: &HeaderMap) -> HttpStatusError {
    let retry_after = headers.get(RETRY_AFTER).and_then(|v| v.to_str().ok()).map(str::to_owned);
    HttpStatusError::new(status.as_u16(), retry_after)
}

fn content_type(headers: &HeaderMap) -> Option<String> {
    headers.get(CONTENT_TYPE).map(|ct| String::from_utf8_lossy(ct.as_bytes()).into_owned())
}

/// Whether a `Content-Type` names `expected`, whatever its case and parameters.
fn media_type_is(content_type: &str, expected: &str) -> bool {
    content_type
        .split(';')
        .next()
        .is_some_and(|essence| essence.trim_matches([' ', '\t']).eq_ignore_ascii_case(expected))
}

/// The whole body if it is at most `max` bytes; a `Content-Length` over it fails at once.
async fn read_bounded(
    response: &mut NetResponse,
    length: Option<u64>,
    max: usize,
) -> Result<Vec<u8>> {
    let too_large = StreamableHttpError::ResponseBodyTooLarge { max_size: max };
    if length.is_some_and(|length| length > max as u64) {
        return Err(too_large);
    }
    let mut body = Vec::new();
    while let Some(chunk) = response.chunk().await.map_err(StreamableHttpError::Client)? {
        if chunk.len() > max - body.len() {
            return Err(too_large);
        }
        body.extend_from_slice(&chunk);
    }
    Ok(body)
}

/// The first `max` bytes of a body that is only shown (the rest is not read).
async fn read_start(
    response: &mut NetResponse,
    max: usize,
) -> std::result::Result<Vec<u8>, NetError> {
    let mut start = Vec::new();
    while start.len() < max {
        let Some(chunk) = response.chunk().await? else {
            break;
        };
        let take = chunk.len().min(max - start.len());
        start.extend_from_slice(&chunk[..take]);
    }
    Ok(start)
}

/// The body as SSE events, each at most `max_event` bytes: the stream is cut when one grows
/// past it, before the parser holds it all, and the cut recorded in `cuts` (a request's answer).
fn sse_events(
    response: NetResponse,
    max_event: usize,
    cuts: Option<Arc<StreamCuts>>,
) -> BoxedSseResponse {
    let start = Some((response, EventBound::new(max_event), cuts));
    let chunks = futures::stream::unfold(start, |state| async move {
        let (mut response, mut bound, cuts) = state?;
        match response.chunk().await {
            Ok(Some(chunk)) => match bound.take(&chunk) {
                Ok(()) => Some((Ok(chunk), Some((response, bound, cuts)))),
                Err(cut) => {
                    if let Some(cuts) = cuts {
                        cuts.record(bound.max);
                    }
                    Some((Err(cut), None))
                }
            },
            Ok(None) => None,
            Err(err) => Some((Err(StreamCut::Net(err)), None)),
        }
    });
    SseStream::from_bytes_stream(chunks).boxed()
}

/// Counts the event being received as the SSE parser keeps it: its field lines, each with the
/// newline that joins them; comments (`:` lines) are dropped by the parser and not counted.
#[derive(Debug)]
struct EventBound {
    max: usize,
    /// The event's completed lines.
    event: usize,
    /// The line being received.
    line: usize,
    comment: bool,
    /// The last byte was a CR: a LF right after it ends no second line.
    after_cr: bool,
}

impl EventBound {
    fn new(max: usize) -> Self {
        EventBound { max, event: 0, line: 0, comment: false, after_cr: false }
    }

    fn take(&mut self, mut chunk: &[u8]) -> std::result::Result<(), StreamCut> {
        while !chunk.is_empty() {
            if std::mem::take(&mut self.after_cr) && chunk[0] == b'\n' {
                chunk = &chunk[1..];
                continue;
            }
            let (text, end) = match memchr::memchr2(b'\r', b'\n', chunk) {
                Some(at) => (&chunk[..at], Some(chunk[at])),
                None => (chunk, None),
            };
            if self.line == 0
                && let Some(first) = text.first()
            {
                self.comment = *first == b':';
            }
            self.line += text.len();
            if let Some(end) = end {
                if self.line == 0 {
                    self.event = 0; // a blank line ends the event
                } else if !self.comment {
                    self.event += self.line + 1;
                }
                self.line = 0;
                self.comment = false;
                self.after_cr = end == b'\r';
                chunk = &chunk[text.len() + 1..];
            } else {
                chunk = &[];
            }
            if self.event.saturating_add(self.line) > self.max {
                return Err(StreamCut::EventTooLarge { max: self.max });
            }
        }
        Ok(())
    }
}

/// The id of a request (not of a notification or a reply).
fn request_id(message: &ClientJsonRpcMessage) -> Option<RequestId> {
    match message {
        ClientJsonRpcMessage::Request(request) => Some(request.id.clone()),
        _ => None,
    }
}

/// A request's answer, unless it is an error that names no request or another one: that fails
/// the request.
fn addressed(
    request: Option<RequestId>,
    response: Result<StreamableHttpPostResponse>,
) -> Result<StreamableHttpPostResponse> {
    match response? {
        StreamableHttpPostResponse::Json(ServerJsonRpcMessage::Error(error), _)
            if request.is_some() && error.id != request =>
        {
            Err(StreamableHttpError::UnexpectedServerResponse(Cow::Owned(format!(
                "{UNADDRESSED}{} (error {})",
                crate::canonical::excerpt(&error.error.message, 200),
                error.error.code.0
            ))))
        }
        other => Ok(other),
    }
}

#[cfg(test)]
mod tests {
    use rmcp::ErrorData;
    use rmcp::model::ErrorCode;

    use super::*;

    fn error_for(id: Option<RequestId>) -> Result<StreamableHttpPostResponse> {
        let error = ErrorData::new(ErrorCode(-32000), "Bad Request: No valid session ID", None);
        Ok(StreamableHttpPostResponse::Json(ServerJsonRpcMessage::error(error, id), None))
    }

    #[test]
    fn an_error_naming_no_request_or_another_fails_the_request() {
        let ours = Some(RequestId::Number(7));
        for id in [None, Some(RequestId::Number(8)), Some(RequestId::String("server-error".into()))]
        {
            let Err(StreamableHttpError::UnexpectedServerResponse(text)) =
                addressed(ours.clone(), error_for(id.clone()))
            else {
                panic!("{id:?} was passed on");
            };
            assert!(text.starts_with(UNADDRESSED) && text.contains("No valid session"), "{text}");
        }
        // The request's own error is its answer; a notification awaits none.
        assert!(addressed(ours.clone(), error_for(ours)).is_ok());
        assert!(addressed(None, error_for(None)).is_ok());
    }

    /// Feeds `stream` to a bound of `max` in pieces cut at every `step` bytes.
    fn fits(stream: &[u8], max: usize, step: usize) -> bool {
        let mut bound = EventBound::new(max);
        stream.chunks(step).all(|piece| bound.take(piece).is_ok())
    }

    #[test]
    fn an_event_is_bounded_by_what_the_parser_keeps_wherever_the_stream_is_cut() {
        // 10 + 1 and 5 + 1 bytes kept: 17.
        let event = b"data: 1234\r\ndata:\r\n\r\n";
        let event_lf = b"data: 1234\ndata:\n\n";
        for step in 1..=event.len() {
            assert!(fits(event, 17, step), "CRLF, cut every {step}");
            assert!(!fits(event, 16, step), "CRLF, cut every {step}");
            assert!(fits(event_lf, 17, step), "LF, cut every {step}");
            assert!(!fits(event_lf, 16, step), "LF, cut every {step}");
        }
        // Each event starts afresh; a comment is not kept (only held while it arrives).
        let many = [&event[..], b"data: 1234\n: note\ndata:\n\n", event, event].concat();
        for step in 1..=many.len() {
            assert!(fits(&many, 17, step), "cut every {step}");
        }
        // A line that never ends is cut as it grows, before it is all there.
        let mut bound = EventBound::new(1024);
        assert!(bound.take(&[b'x'; 1024]).is_ok());
        assert!(matches!(bound.take(b"x"), Err(StreamCut::EventTooLarge { max: 1024 })));
    }

    #[test]
    fn media_types_and_scopes_are_read_as_servers_write_them() {
        assert!(media_type_is("Application/JSON; charset=utf-8", JSON_MIME_TYPE));
        assert!(media_type_is(" text/event-stream", EVENT_STREAM_MIME_TYPE));
        assert!(!media_type_is("application/json-seq", JSON_MIME_TYPE));
        assert_eq!(
            scope_of(r#"Bearer scope="files:read files:write""#).unwrap(),
            "files:read files:write"
        );
        assert_eq!(scope_of("Bearer scope=read:data, realm=x").unwrap(), "read:data");
        assert_eq!(scope_of("Bearer realm=x"), None);
    }
}
