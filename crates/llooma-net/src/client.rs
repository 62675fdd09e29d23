//! [`NetClient`]: the policy-enforcing client, its builder, and capped responses.

use std::fmt;
use std::pin::Pin;
use std::sync::{Arc, Mutex};
use std::time::Duration;

use bytes::{Bytes, BytesMut};
use http::header::{self, HeaderMap, HeaderName, HeaderValue};
use http::{Method, StatusCode};
use llooma_policy::{Decision, OutboundPolicy, Purpose, Refusal};
use tokio::time::Instant;
use url::Url;

use tokio_rustls::TlsConnector;

use crate::connection::{Connector, Exchange, Failure, Pool};
use crate::error::{NetError, RedirectProblem, RedirectRefused, redact};
use crate::redirect::{check_hop, same_origin};
use crate::request::NetRequest;
use crate::resolver::{PolicyResolver, Resolver, SystemResolver};
use crate::tls;

/// The most redirects any client follows. Builders can lower it, not raise it.
pub const MAX_REDIRECTS: usize = 5;

const DEFAULT_CONNECT_TIMEOUT: Duration = Duration::from_secs(10);
const DEFAULT_TOTAL_TIMEOUT: Duration = Duration::from_secs(60);
const DEFAULT_MAX_RESPONSE_BYTES: u64 = 16 * 1024 * 1024;
/// How long a kept connection may sit unused before it is closed: longer than most servers keep
/// an idle connection, so the server usually closes first, and short enough that an instance
/// talking to many servers now and then does not hold a socket for each of them.
pub const DEFAULT_IDLE_TIMEOUT: Duration = Duration::from_secs(90);

/// Headers that carry credentials and never follow a redirect to another origin.
const ALWAYS_SENSITIVE: [HeaderName; 3] =
    [header::AUTHORIZATION, header::COOKIE, header::PROXY_AUTHORIZATION];

/// Settings for a [`NetClient`]. Start from [`NetClient::builder`].
#[derive(Debug, Clone)]
pub struct NetClientBuilder {
    policy: Arc<OutboundPolicy>,
    purpose: Purpose,
    resolver: Arc<dyn Resolver>,
    connect_timeout: Duration,
    total_timeout: Option<Duration>,
    read_timeout: Option<Duration>,
    max_response_bytes: u64,
    max_redirects: usize,
    idle_pooling: bool,
    idle_timeout: Duration,
    ack_every_read: bool,
    auth_headers: Vec<HeaderName>,
    user_agent: String,
}

impl NetClientBuilder {
    /// Resolves host names with `resolver` instead of the system's (tests script it).
    pub fn resolver(mut self, resolver: Arc<dyn Resolver>) -> Self {
        self.resolver = resolver;
        self
    }

    /// How long establishing a connection (TCP and TLS) may take. Default 10 s.
    pub fn connect_timeout(mut self, timeout: Duration) -> Self {
        self.connect_timeout = timeout;
        self
    }

    /// How long a whole request may take, from sending it to the last byte of the body,
    /// redirects included. Default 60 s. `None` for long-lived streams (an MCP client's SSE
    /// stream); such callers should bound their own operations instead.
    pub fn total_timeout(mut self, timeout: Option<Duration>) -> Self {
        self.total_timeout = timeout;
        self
    }

    /// How long a read may wait for the next bytes. Default none.
    pub fn read_timeout(mut self, timeout: Option<Duration>) -> Self {
        self.read_timeout = timeout;
        self
    }

    /// The largest response body [`NetResponse`] will read. Default 16 MiB.
    pub fn max_response_bytes(mut self, limit: u64) -> Self {
        self.max_response_bytes = limit;
        self
    }

    /// How many redirects to follow, at most [`MAX_REDIRECTS`] (larger values are lowered).
    pub fn max_redirects(mut self, max: usize) -> Self {
        self.max_redirects = max.min(MAX_REDIRECTS);
        self
    }

    /// Whether idle connections are kept for reuse. Default true.
    pub fn idle_pooling(mut self, enabled: bool) -> Self {
        self.idle_pooling = enabled;
        self
    }

    /// How long a connection kept for reuse may sit unused before it is closed. Default
    /// [`DEFAULT_IDLE_TIMEOUT`]. A connection the server closes is let go as soon as that is
    /// seen, whatever this says.
    pub fn idle_timeout(mut self, timeout: Duration) -> Self {
        self.idle_timeout = timeout;
        self
    }

    /// Whether [`NetClient::send`] acknowledges what it reads at once (`TCP_QUICKACK` after
    /// every read, on Linux). Default false.
    ///
    /// Turn it on for servers that answer in several small writes without `TCP_NODELAY`
    /// (MCP servers answering in SSE): on a kept connection the server's second write waits
    /// for the ACK of its first (Nagle's algorithm), and the kernel delays that ACK by up to
    /// 40 ms once the connection looks interactive, so each call waited that long. A new
    /// connection does not suffer (the kernel ACKs its first segments at once).
    pub fn ack_every_read(mut self, enabled: bool) -> Self {
        self.ack_every_read = enabled;
        self
    }

    /// A header that carries a credential besides `Authorization` (e.g. `x-api-key`). It is
    /// dropped when [`NetClient::send`] follows a redirect to another origin.
    pub fn auth_header(mut self, name: HeaderName) -> Self {
        if !self.auth_headers.contains(&name) {
            self.auth_headers.push(name);
        }
        self
    }

    /// The `User-Agent` sent. Default `llooma/<version>`.
    pub fn user_agent(mut self, user_agent: impl Into<String>) -> Self {
        self.user_agent = user_agent.into();
        self
    }

    /// Builds the client. Cheap after the first in the process: the TLS configuration (the
    /// system's root certificates) is read once and shared by every client.
    pub fn build(self) -> Result<NetClient, NetError> {
        let user_agent = HeaderValue::from_str(&self.user_agent).map_err(|_| {
            NetError::Tls(format!("the User-Agent {:?} is not a header value", self.user_agent))
        })?;
        let connector = Connector {
            resolver: PolicyResolver {
                resolver: Arc::clone(&self.resolver),
                policy: Arc::clone(&self.policy),
                purpose: self.purpose,
            },
            policy: Arc::clone(&self.policy),
            purpose: self.purpose,
            tls: TlsConnector::from(Arc::new(tls::client_config()?)),
            connect_timeout: self.connect_timeout,
            user_agent,
            kept: self.idle_pooling.then(|| Mutex::new(Pool::default())),
            idle_timeout: self.idle_timeout,
            ack_every_read: self.ack_every_read,
        };
        Ok(NetClient { inner: Arc::new(Inner { connector: Arc::new(connector), settings: self }) })
    }
}

/// The outbound HTTP client for one [`Purpose`]. Cheap to clone.
#[derive(Clone)]
pub struct NetClient {
    inner: Arc<Inner>,
}

struct Inner {
    /// What [`NetClient::send`] sends on; it follows redirects itself.
    connector: Arc<Connector>,
    settings: NetClientBuilder,
}

impl fmt::Debug for NetClient {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("NetClient")
            .field("purpose", &self.inner.settings.purpose)
            .field("max_response_bytes", &self.inner.settings.max_response_bytes)
            .finish_non_exhaustive()
    }
}

impl NetClient {
    /// Settings for a client of `purpose` under `policy`, with the defaults described on each
    /// builder method.
    pub fn builder(policy: Arc<OutboundPolicy>, purpose: Purpose) -> NetClientBuilder {
        NetClientBuilder {
            policy,
            purpose,
            resolver: Arc::new(SystemResolver),
            connect_timeout: DEFAULT_CONNECT_TIMEOUT,
            total_timeout: Some(DEFAULT_TOTAL_TIMEOUT),
            read_timeout: None,
            max_response_bytes: DEFAULT_MAX_RESPONSE_BYTES,
            max_redirects: MAX_REDIRECTS,
            idle_pooling: true,
            idle_timeout: DEFAULT_IDLE_TIMEOUT,
            ack_every_read: false,
            auth_headers: Vec::new(),
            user_agent: format!("llooma/{}", env!("CARGO_PKG_VERSION")),
        }
    }

    /// The purpose this client serves.
    pub fn purpose(&self) -> Purpose {
        self.inner.settings.purpose
    }

    /// The policy this client enforces.
    pub fn policy(&self) -> &OutboundPolicy {
        &self.inner.settings.policy
    }

    /// Starts a request; send it with [`NetClient::send`].
    ///
    /// The URL is decided on here, before anything else sees it, and again when it is sent
    /// (with every redirect hop).
    pub fn request(&self, method: Method, url: &str) -> Result<NetRequest, NetError> {
        let parsed = Url::parse(url).map_err(|err| NetError::Refused {
            url: "(unparseable URL)".to_owned(),
            reason: Refusal::Unparseable { problem: err.to_string() },
        })?;
        self.request_url(method, parsed)
    }

    /// [`NetClient::request`] to a URL parsed already, for a caller that sends to the same
    /// address again and again (a provider's chat endpoint). Decided on the same way.
    pub fn request_url(&self, method: Method, url: Url) -> Result<NetRequest, NetError> {
        let settings = &self.inner.settings;
        if let Decision::Refused { reason } = settings.policy.decide(settings.purpose, &url) {
            return Err(NetError::Refused { url: redact(&url), reason });
        }
        Ok(NetRequest::new(method, url))
    }

    /// Starts a GET request; send it with [`NetClient::send`].
    pub fn get(&self, url: &str) -> Result<NetRequest, NetError> {
        self.request(Method::GET, url)
    }

    /// Starts a POST request; send it with [`NetClient::send`].
    pub fn post(&self, url: &str) -> Result<NetRequest, NetError> {
        self.request(Method::POST, url)
    }

    /// Sends a request started with [`NetClient::request`], following redirects hop by hop.
    pub async fn send(&self, request: NetRequest) -> Result<NetResponse, NetError> {
        let settings = &self.inner.settings;
        if let Some(invalid) = &request.invalid {
            return Err(NetError::Request {
                url: redact(&request.url),
                source: invalid.clone().into(),
            });
        }
        let started = Instant::now();
        // One deadline for the whole exchange, redirects and body included.
        let deadline = [settings.total_timeout, request.timeout]
            .into_iter()
            .flatten()
            .min()
            .map(|timeout| started + timeout);
        let mut request = request;
        let mut hop = 0;
        loop {
            let url = request.url.clone();
            // Decided on for every hop, before any connection: IP-literal hosts are refused
            // here; names are checked address by address when connecting.
            if let Decision::Refused { reason } = settings.policy.decide(settings.purpose, &url) {
                return Err(NetError::Refused { url: redact(&url), reason });
            }
            // What a redirect would send again: the body is shared, not copied.
            let replay = request.clone();
            let sending = self.inner.connector.send(request);
            let answered = match deadline {
                Some(deadline) => match tokio::time::timeout_at(deadline, sending).await {
                    Ok(answered) => answered,
                    Err(_) => return Err(NetError::Timeout { url: redact(&url) }),
                },
                None => sending.await,
            };
            let exchange = answered.map_err(|failure| from_failure(failure, &url))?;

            let status = exchange.head.status;
            let location = exchange
                .head
                .headers
                .get(header::LOCATION)
                .and_then(|value| value.to_str().ok())
                .map(str::to_owned);
            let (true, Some(location)) = (is_followed_redirect(status), location) else {
                return Ok(NetResponse::new(exchange, url, settings, deadline));
            };
            let next = url.join(&location).map_err(|_| RedirectRefused {
                from: redact(&url),
                to: location.clone(),
                problem: RedirectProblem::BadLocation,
            })?;
            hop += 1;
            check_hop(
                &settings.policy,
                settings.purpose,
                &url,
                &next,
                hop,
                settings.max_redirects,
            )?;
            // Its body unread, the connection closes with it.
            drop(exchange);

            let mut next_request = replay;
            if changes_to_get(status, &next_request.method) {
                if next_request.method != Method::HEAD {
                    next_request.method = Method::GET;
                }
                next_request.body = Bytes::new();
                for name in [
                    header::CONTENT_TYPE,
                    header::CONTENT_LENGTH,
                    header::CONTENT_ENCODING,
                    header::TRANSFER_ENCODING,
                ] {
                    next_request.headers.remove(name);
                }
            }
            next_request.url = next.clone();
            if !same_origin(&url, &next) {
                strip_credentials(&mut next_request.headers, &settings.auth_headers);
            }
            request = next_request;
        }
    }
}

/// The error for a request that got no response.
fn from_failure(failure: Failure, url: &Url) -> NetError {
    let url = redact(url);
    match failure {
        Failure::Refused(reason) => NetError::Refused { url, reason },
        Failure::ConnectTimeout => NetError::Timeout { url },
        Failure::Connect(source) => NetError::Connect { url, source },
        Failure::Exchange(source) => NetError::Request { url, source },
    }
}

/// The redirect statuses that carry a `Location` to follow.
fn is_followed_redirect(status: StatusCode) -> bool {
    matches!(
        status,
        StatusCode::MOVED_PERMANENTLY
            | StatusCode::FOUND
            | StatusCode::SEE_OTHER
            | StatusCode::TEMPORARY_REDIRECT
            | StatusCode::PERMANENT_REDIRECT
    )
}

/// 303 always becomes GET (HEAD stays HEAD); 301 and 302 turn POST into GET, as browsers do.
fn changes_to_get(status: StatusCode, method: &Method) -> bool {
    match status {
        StatusCode::SEE_OTHER => true,
        StatusCode::MOVED_PERMANENTLY | StatusCode::FOUND => *method == Method::POST,
        _ => false,
    }
}

fn strip_credentials(headers: &mut HeaderMap, configured: &[HeaderName]) {
    for name in ALWAYS_SENSITIVE.iter().chain(configured) {
        headers.remove(name);
    }
}

/// A response whose body can only be read up to the client's cap, and within the client's
/// total and read timeouts.
pub struct NetResponse {
    exchange: Box<Exchange>,
    url: Url,
    limit: u64,
    received: u64,
    deadline: Option<Instant>,
    read_timeout: Option<Duration>,
    /// The timer for those two, made once for the response and moved on.
    timer: Option<Pin<Box<tokio::time::Sleep>>>,
}

impl fmt::Debug for NetResponse {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("NetResponse")
            .field("status", &self.exchange.head.status)
            .field("url", &self.url.as_str())
            .field("received", &self.received)
            .finish_non_exhaustive()
    }
}

impl NetResponse {
    fn new(
        exchange: Box<Exchange>,
        url: Url,
        settings: &NetClientBuilder,
        deadline: Option<Instant>,
    ) -> Self {
        Self {
            exchange,
            url,
            limit: settings.max_response_bytes,
            received: 0,
            deadline,
            read_timeout: settings.read_timeout,
            timer: None,
        }
    }

    /// The status code.
    pub fn status(&self) -> StatusCode {
        self.exchange.head.status
    }

    /// The response headers.
    pub fn headers(&self) -> &HeaderMap {
        &self.exchange.head.headers
    }

    /// The URL that answered, after redirects.
    pub fn url(&self) -> &Url {
        &self.url
    }

    /// The next piece of the body, `None` at the end. Fails with [`NetError::BodyTooLarge`]
    /// once more than the cap has arrived, and keeps failing after that.
    pub async fn chunk(&mut self) -> Result<Option<Bytes>, NetError> {
        if self.received > self.limit {
            return Err(self.too_large());
        }
        let wait_until = match (self.deadline, self.read_timeout) {
            (deadline, Some(read)) => {
                Some(deadline.map_or(Instant::now() + read, |d| d.min(Instant::now() + read)))
            }
            (deadline, None) => deadline,
        };
        let chunk = match wait_until {
            None => self.exchange.chunk().await,
            Some(until) => {
                let timer = match &mut self.timer {
                    Some(timer) => {
                        if timer.deadline() != until {
                            timer.as_mut().reset(until);
                        }
                        timer
                    }
                    None => self.timer.insert(Box::pin(tokio::time::sleep_until(until))),
                };
                tokio::select! {
                    biased;
                    chunk = self.exchange.chunk() => chunk,
                    () = timer.as_mut() => return Err(NetError::Timeout { url: redact(&self.url) }),
                }
            }
        };
        let chunk = chunk.map_err(|source| NetError::Request { url: redact(&self.url), source })?;
        let Some(chunk) = chunk else {
            return Ok(None);
        };
        self.received = self.received.saturating_add(chunk.len() as u64);
        if self.received > self.limit {
            return Err(self.too_large());
        }
        Ok(Some(chunk))
    }

    /// The length the server announced (`Content-Length`), if any.
    fn content_length(&self) -> Option<u64> {
        self.headers()
            .get(header::CONTENT_LENGTH)
            .and_then(|value| value.to_str().ok())
            .and_then(|value| value.trim().parse().ok())
    }

    /// The whole body, if it fits under the cap. A `Content-Length` over the cap fails before
    /// anything is read.
    pub async fn bytes(mut self) -> Result<Bytes, NetError> {
        let announced = self.content_length();
        if announced.is_some_and(|len| len > self.limit) {
            return Err(self.too_large());
        }
        let capacity = announced.unwrap_or(0).min(self.limit).min(1024 * 1024);
        let mut body = BytesMut::with_capacity(usize::try_from(capacity).unwrap_or(0));
        while let Some(chunk) = self.chunk().await? {
            body.extend_from_slice(&chunk);
        }
        Ok(body.freeze())
    }

    /// The whole body as text (invalid UTF-8 replaced), if it fits under the cap.
    pub async fn text(self) -> Result<String, NetError> {
        let bytes = self.bytes().await?;
        Ok(String::from_utf8_lossy(&bytes).into_owned())
    }

    fn too_large(&self) -> NetError {
        NetError::BodyTooLarge { url: redact(&self.url), limit: self.limit }
    }
}
