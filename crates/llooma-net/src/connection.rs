//! How [`NetClient::send`](crate::NetClient::send) reaches a server: HTTP/1 connections of its
//! own, each driven by the task that reads its response, and kept per client for reuse.
//!
//! Why the reader drives its connection: a pool that drives every connection in a task of its
//! own hands each piece of a body to the reader across a channel, and for a model's streamed
//! answer most chunks then woke the runtime's other worker. Here the reader polls the
//! connection itself, in the same poll as the body ([`Exchange::chunk`]): the socket is read
//! and the chunk handed over in one task.
//!
//! A kept connection is closed once it has sat unused for the client's idle timeout, or as
//! soon as the server is seen to have closed it: a task watches the kept connections while
//! there are any ([`watch_kept`]), so an instance that talked to a server once does not hold
//! its socket forever.
//!
//! The policy:
//! - the URL, IP-literal hosts included, is decided on before anything
//!   ([`NetClient::execute`](crate::NetClient::execute), on every hop);
//! - a host name is resolved once and every address checked
//!   ([`PolicyResolver::checked_addresses`]); only those addresses are connected to, so no
//!   second lookup can rebind the name;
//! - once connected, the peer's address is checked again ([`OutboundPolicy::allows_peer`]);
//! - no proxy; TLS with the process's one configuration ([`crate::tls`]);
//! - a kept connection is reused only for the same scheme, host and port.
//!
//! A name with several addresses is connected to as a browser does (Happy Eyeballs, RFC 8305):
//! IPv6 and IPv4 interleaved, IPv6 first, the next address tried [`NEXT_ATTEMPT_AFTER`] after
//! the previous one began (or at once when it failed), the first connection made wins and the
//! others are dropped. A dead first address so costs a quarter of a second, not the whole
//! connect timeout.

use std::future::{Future, poll_fn};
use std::io;
use std::net::{IpAddr, SocketAddr};
use std::pin::Pin;
use std::sync::{Arc, Mutex, PoisonError, Weak};
use std::task::{Context, Poll, Waker};
use std::time::Duration;

use bytes::Bytes;
use futures::StreamExt;
use futures::stream::FuturesUnordered;
use http::header::{self, HeaderValue};
use http_body::Body as _;
use http_body_util::Full;
use hyper::body::Incoming;
use hyper::client::conn::http1::{self, Connection, SendRequest};
use hyper_util::rt::TokioIo;
use llooma_policy::{OutboundPolicy, Purpose, Refusal};
use llooma_task::SameTask;
use rustls::pki_types::ServerName;
use tokio::io::{AsyncRead, AsyncWrite, ReadBuf};
use tokio::net::TcpStream;
use tokio::time::Instant;
use tokio_rustls::TlsConnector;
use tokio_rustls::client::TlsStream;
use url::{Position, Url};

use crate::request::NetRequest;
use crate::resolver::{PolicyResolver, Unresolved};

type BoxError = Box<dyn std::error::Error + Send + Sync>;

/// Most unused connections a client keeps (a busy instance streams from one provider on many at
/// once).
const MOST_KEPT: usize = 256;
/// How often the kept connections are looked at for a close by their server. Between two looks
/// a closed one costs a descriptor, and a request that would take it finds it closed itself.
const CLOSE_SEEN_WITHIN: Duration = Duration::from_secs(5);
/// RFC 8305's recommended delay between two connection attempts.
pub(crate) const NEXT_ATTEMPT_AFTER: Duration = Duration::from_millis(250);

/// Why a request got no response.
#[derive(Debug)]
pub(crate) enum Failure {
    /// The policy refused an address the name resolved to, or the connected peer.
    Refused(Refusal),
    /// Connecting (TCP and TLS) took longer than the client allows.
    ConnectTimeout,
    /// No connection could be made: resolving, TCP or TLS failed.
    Connect(BoxError),
    /// The connection failed during the exchange, or the request could not be written.
    Exchange(BoxError),
}

/// What opens connections for one client, and keeps them between requests.
pub(crate) struct Connector {
    pub(crate) resolver: PolicyResolver,
    pub(crate) policy: Arc<OutboundPolicy>,
    pub(crate) purpose: Purpose,
    pub(crate) tls: TlsConnector,
    pub(crate) connect_timeout: Duration,
    pub(crate) user_agent: HeaderValue,
    /// Unused connections; `None` when the client keeps none.
    pub(crate) kept: Option<Mutex<Pool>>,
    /// How long a kept connection may sit unused.
    pub(crate) idle_timeout: Duration,
    /// `TCP_QUICKACK` after every read ([`crate::NetClientBuilder::ack_every_read`]).
    pub(crate) ack_every_read: bool,
}

/// Where a connection goes: a kept one is reused only for the same.
#[derive(Debug, Clone, PartialEq, Eq)]
struct Destination {
    https: bool,
    host: String,
    port: u16,
}

impl Destination {
    fn of(url: &Url) -> Result<Self, Failure> {
        let https = match url.scheme() {
            "https" => true,
            "http" => false,
            other => return Err(Failure::Connect(format!("scheme {other} is not HTTP").into())),
        };
        let (Some(host), Some(port)) = (url.host_str(), url.port_or_known_default()) else {
            return Err(Failure::Connect("the URL has no host".into()));
        };
        Ok(Destination { https, host: host.to_owned(), port })
    }
}

/// An open connection: the handle that sends on it, and the state machine that drives it.
struct Open {
    to: Destination,
    sender: SendRequest<Full<Bytes>>,
    connection: Connection<TokioIo<Socket>, Full<Bytes>>,
    /// A second handle on its TCP socket, to look at it without hyper ([`Open::still_usable`]).
    tcp: socket2::Socket,
    /// The waker it and its request or body are polled with ([`SameTask`]).
    same_task: SameTask,
}

/// A connection not in use, and since when.
struct Kept {
    open: Open,
    since: Instant,
}

/// A client's unused connections.
#[derive(Default)]
pub(crate) struct Pool {
    idle: Vec<Kept>,
    /// Whether [`watch_kept`] runs for them (from the first kept one to the last let go).
    watched: bool,
}

impl Open {
    /// Whether it can carry another request: it is polled once, without waiting, so that a
    /// close (or anything else) the server sent while it sat unused is read now.
    ///
    /// hyper reads only what the runtime's reactor has reported, and the reactor may not have
    /// run since the server closed (a busy or blocked worker): the request would then go out on
    /// a closed connection and fail after it was written, when it can no longer be sent again
    /// safely. So the socket itself is asked too: an unused HTTP/1 connection has nothing to
    /// read, and anything there (the close, most often) means it is done.
    fn still_usable(&mut self) -> bool {
        let mut cx = Context::from_waker(Waker::noop());
        if Pin::new(&mut self.connection).poll(&mut cx).is_ready() {
            return false;
        }
        if self.sender.is_closed() || !self.sender.is_ready() {
            return false;
        }
        let mut byte = [std::mem::MaybeUninit::uninit()];
        matches!(self.tcp.peek(&mut byte), Err(err) if err.kind() == io::ErrorKind::WouldBlock)
    }
}

impl Connector {
    fn kept(&self) -> Option<std::sync::MutexGuard<'_, Pool>> {
        self.kept.as_ref().map(|kept| kept.lock().unwrap_or_else(PoisonError::into_inner))
    }

    /// A kept connection to `to` that is still open, if any.
    fn reuse(&self, to: &Destination) -> Option<Open> {
        let mut kept = self.kept()?;
        let now = Instant::now();
        kept.idle.retain(|k| now.duration_since(k.since) < self.idle_timeout);
        while let Some(index) = kept.idle.iter().rposition(|k| k.open.to == *to) {
            let mut open = kept.idle.swap_remove(index).open;
            if open.still_usable() {
                return Some(open);
            }
        }
        None
    }

    /// Keeps a connection whose exchange ended cleanly, for the next request to its origin.
    fn keep(self: &Arc<Self>, open: Open) {
        let Some(mut kept) = self.kept() else {
            return;
        };
        if !kept.watched {
            // Without a runtime to watch it, a kept connection could outlive its welcome.
            let Ok(runtime) = tokio::runtime::Handle::try_current() else {
                return;
            };
            runtime.spawn(watch_kept(Arc::downgrade(self)));
            kept.watched = true;
        }
        if kept.idle.len() >= MOST_KEPT {
            kept.idle.remove(0); // the longest unused
        }
        kept.idle.push(Kept { open, since: Instant::now() });
    }

    /// Lets go of the kept connections that sat unused too long or that their server closed;
    /// when one is due sooner than the next look for closes, the time it is due.
    fn let_go_of_stale(&self, now: Instant) -> Option<Instant> {
        let mut kept = self.kept()?;
        kept.idle.retain_mut(|k| {
            now.duration_since(k.since) < self.idle_timeout && k.open.still_usable()
        });
        let Some(oldest) = kept.idle.iter().map(|k| k.since).min() else {
            kept.watched = false;
            return None;
        };
        Some((oldest + self.idle_timeout).min(now + CLOSE_SEEN_WITHIN))
    }

    /// Sends `request` and waits for the response's head. The body is read from the returned
    /// [`Exchange`], which drives the connection meanwhile.
    pub(crate) async fn send(
        self: &Arc<Self>,
        request: NetRequest,
    ) -> Result<Box<Exchange>, Failure> {
        let to = Destination::of(&request.url)?;
        let mut head = self.head(request)?;
        if let Some(open) = self.reuse(&to) {
            match open.send(head).await {
                Attempt::Answered(exchange) => return Ok(self.exchange(exchange)),
                Attempt::Failed(failure) => return Err(failure),
                // The server closed it as the request went out: a new connection takes it.
                Attempt::Unwritten(again) => head = again,
            }
        }
        let open = self.connect(to).await?;
        match open.send(head).await {
            Attempt::Answered(exchange) => Ok(self.exchange(exchange)),
            Attempt::Failed(failure) => Err(failure),
            Attempt::Unwritten(_) => Err(Failure::Exchange(
                "the server closed the new connection before the request was sent".into(),
            )),
        }
    }

    fn exchange(self: &Arc<Self>, mut exchange: Box<Exchange>) -> Box<Exchange> {
        exchange.connector = Some(Arc::clone(self));
        exchange
    }

    /// The request as written on the connection: origin-form target, `Host`, and the usual
    /// `User-Agent` and `Accept` unless the caller set them. Body and headers are moved, not
    /// copied (a provider request carries the whole conversation).
    fn head(&self, request: NetRequest) -> Result<http::Request<Full<Bytes>>, Failure> {
        let NetRequest { method, url, mut headers, body, .. } = request;
        let target = &url[Position::BeforePath..Position::AfterQuery];
        let host = match url.port() {
            Some(port) => format!("{}:{port}", url.host_str().unwrap_or_default()),
            None => url.host_str().unwrap_or_default().to_owned(),
        };
        let mut head = http::Request::builder()
            .method(method)
            .uri(target)
            .body(Full::new(body))
            .map_err(|err| Failure::Exchange(err.into()))?;
        let host = HeaderValue::from_str(&host).map_err(|err| Failure::Exchange(err.into()))?;
        headers.insert(header::HOST, host);
        if !headers.contains_key(header::USER_AGENT) {
            headers.insert(header::USER_AGENT, self.user_agent.clone());
        }
        if !headers.contains_key(header::ACCEPT) {
            headers.insert(header::ACCEPT, HeaderValue::from_static("*/*"));
        }
        *head.headers_mut() = headers;
        Ok(head)
    }

    /// A new connection to `to`, to an address the policy allows.
    async fn connect(&self, to: Destination) -> Result<Open, Failure> {
        let connecting = async {
            let socket = self.tcp(&to).await?;
            // Shares the socket (and its non-blocking mode); closed with the connection.
            let tcp = socket2::SockRef::from(&socket)
                .try_clone()
                .map_err(|err| Failure::Connect(err.into()))?;
            let socket = if to.https {
                let name = ServerName::try_from(to.host.trim_matches(['[', ']']).to_owned())
                    .map_err(|err| Failure::Connect(err.into()))?;
                let tls = self
                    .tls
                    .connect(name, socket)
                    .await
                    .map_err(|err| Failure::Connect(err.into()))?;
                Stream::Tls(Box::new(tls))
            } else {
                Stream::Plain(socket)
            };
            let socket = Socket { stream: socket, ack_every_read: self.ack_every_read };
            let (sender, connection) = http1::handshake(TokioIo::new(socket))
                .await
                .map_err(|err| Failure::Connect(err.into()))?;
            Ok(Open { to, sender, connection, tcp, same_task: SameTask::new() })
        };
        tokio::time::timeout(self.connect_timeout, connecting)
            .await
            .unwrap_or(Err(Failure::ConnectTimeout))
    }

    /// A TCP connection to the host: the first of its addresses to answer, raced as described
    /// in the module's documentation. Every address was checked, and the peer is checked again
    /// once connected.
    async fn tcp(&self, to: &Destination) -> Result<TcpStream, Failure> {
        let ips = match literal_ip(&to.host) {
            // An IP literal was decided on with the URL (`NetClient::send`).
            Some(ip) => vec![ip],
            None => self.resolver.checked_addresses(&to.host).await.map_err(|err| match err {
                Unresolved::Refused(reason) => Failure::Refused(reason),
                other => Failure::Connect(other.into()),
            })?,
        };
        let stream = first_to_answer(&interleaved(ips), to.port)
            .await
            .map_err(|err| Failure::Connect(err.into()))?;
        self.check_peer(&stream)?;
        // Small writes (a request, its end) go out at once.
        stream.set_nodelay(true).map_err(|err| Failure::Connect(err.into()))?;
        Ok(stream)
    }

    /// Defence in depth: the connected peer must still be an address the policy allows.
    fn check_peer(&self, stream: &TcpStream) -> Result<(), Failure> {
        if self.policy.allow_list(self.purpose).is_some() {
            return Ok(());
        }
        let peer = stream.peer_addr().map_err(|err| Failure::Connect(err.into()))?;
        self.policy.allows_peer(self.purpose, peer.ip()).map_err(Failure::Refused)
    }
}

/// Watches a client's kept connections while it has any: lets each go when it has sat unused
/// for the idle timeout or its server closed it, and ends with the last one (or the client).
async fn watch_kept(connector: Weak<Connector>) {
    loop {
        // The client is not held while waiting: dropping it ends the watch.
        let next_look = match connector.upgrade() {
            Some(connector) => connector.let_go_of_stale(Instant::now()),
            None => None,
        };
        let Some(next_look) = next_look else {
            return;
        };
        tokio::time::sleep_until(next_look).await;
    }
}

/// The addresses in the order they are tried: IPv6 and IPv4 alternating, IPv6 first, each
/// family in the order the resolver gave (RFC 8305, section 4).
fn interleaved(ips: Vec<IpAddr>) -> Vec<IpAddr> {
    let (v6, v4): (Vec<IpAddr>, Vec<IpAddr>) = ips.into_iter().partition(IpAddr::is_ipv6);
    let mut ordered = Vec::with_capacity(v6.len() + v4.len());
    let (mut v6, mut v4) = (v6.into_iter(), v4.into_iter());
    loop {
        match (v6.next(), v4.next()) {
            (None, None) => return ordered,
            (a, b) => ordered.extend(a.into_iter().chain(b)),
        }
    }
}

/// The first of `ips` to accept a connection on `port`, the next attempt starting
/// [`NEXT_ATTEMPT_AFTER`] after the last one began, or at once when an attempt fails. The caller bounds the whole race with its connect timeout.
async fn first_to_answer(ips: &[IpAddr], port: u16) -> io::Result<TcpStream> {
    let mut waiting = ips.iter().map(|ip| SocketAddr::new(*ip, port));
    let Some(first) = waiting.next() else {
        return Err(io::Error::other("no address to connect to"));
    };
    if waiting.len() == 0 {
        return TcpStream::connect(first).await;
    }
    let mut attempts = FuturesUnordered::new();
    attempts.push(TcpStream::connect(first));
    let mut next_after = std::pin::pin!(tokio::time::sleep(NEXT_ATTEMPT_AFTER));
    let mut last_error = None;
    loop {
        tokio::select! {
            biased;
            Some(attempt) = attempts.next() => match attempt {
                Ok(stream) => return Ok(stream),
                Err(err) => {
                    last_error = Some(err);
                    // A failed attempt hands over at once.
                    match waiting.next() {
                        Some(next) => {
                            attempts.push(TcpStream::connect(next));
                            next_after.as_mut().reset(Instant::now() + NEXT_ATTEMPT_AFTER);
                        }
                        None if attempts.is_empty() => break,
                        None => {}
                    }
                }
            },
            () = next_after.as_mut(), if waiting.len() > 0 => {
                if let Some(next) = waiting.next() {
                    attempts.push(TcpStream::connect(next));
                }
                next_after.as_mut().reset(Instant::now() + NEXT_ATTEMPT_AFTER);
            }
            else => break,
        }
    }
    Err(last_error.unwrap_or_else(|| io::Error::other("no address to connect to")))
}

/// `127.0.0.1` or `[::1]` as an address; `None` for a name.
fn literal_ip(host: &str) -> Option<IpAddr> {
    host.trim_start_matches('[').trim_end_matches(']').parse().ok()
}

/// How sending on a connection went.
enum Attempt {
    Answered(Box<Exchange>),
    /// The request was not written (the connection had closed); here it is back.
    Unwritten(http::Request<Full<Bytes>>),
    Failed(Failure),
}

impl Open {
    /// Writes the request and reads the response's head, driving the connection meanwhile.
    async fn send(self, request: http::Request<Full<Bytes>>) -> Attempt {
        let Open { to, mut sender, connection, tcp, same_task } = self;
        let mut connection = Some(connection);
        let mut response = std::pin::pin!(sender.try_send_request(request));
        let answered = poll_fn(|cx| {
            same_task.poll(cx, |cx| {
                if let Some(driven) = &mut connection
                    && Pin::new(driven).poll(cx).is_ready()
                {
                    // Closed or failed. Dropping it settles the request: answered with the
                    // error, or given back if it was never written.
                    connection = None;
                }
                response.as_mut().poll(cx)
            })
        })
        .await;
        match answered {
            Ok(response) => {
                let (head, body) = response.into_parts();
                let open =
                    connection.map(|connection| Open { to, sender, connection, tcp, same_task });
                Attempt::Answered(Box::new(Exchange { head, body, open, connector: None }))
            }
            // Given back only when nothing of it was written: safe to send again.
            Err(mut err) => match err.take_message() {
                Some(request) => Attempt::Unwritten(request),
                None => Attempt::Failed(Failure::Exchange(err.into_error().into())),
            },
        }
    }
}

/// A response whose body is still to be read, with the connection it arrives on.
pub(crate) struct Exchange {
    pub(crate) head: http::response::Parts,
    body: Incoming,
    /// The connection, while it runs; kept for reuse once the body has ended.
    open: Option<Open>,
    connector: Option<Arc<Connector>>,
}

impl Exchange {
    /// The next piece of the body, `None` at its end. The connection is driven in the same poll.
    pub(crate) async fn chunk(&mut self) -> Result<Option<Bytes>, BoxError> {
        poll_fn(|cx| self.poll_chunk(cx)).await
    }

    fn poll_chunk(&mut self, cx: &mut Context<'_>) -> Poll<Result<Option<Bytes>, BoxError>> {
        let polled = match &mut self.open {
            Some(Open { connection, same_task, .. }) => {
                let body = &mut self.body;
                let mut connection_over = false;
                let polled = same_task.poll(cx, |cx| {
                    // What is left of the body is already in hyper's hands once the connection
                    // is over; a failure shows there too.
                    if !connection_over && Pin::new(&mut *connection).poll(cx).is_ready() {
                        connection_over = true;
                    }
                    poll_data(body, cx)
                });
                if connection_over {
                    self.open = None;
                }
                polled
            }
            None => poll_data(&mut self.body, cx),
        };
        match polled {
            Poll::Ready(Some(Ok(data))) => Poll::Ready(Ok(Some(data))),
            Poll::Ready(Some(Err(err))) => {
                self.open = None;
                Poll::Ready(Err(err.into()))
            }
            Poll::Ready(None) => {
                if let (Some(open), Some(connector)) = (self.open.take(), &self.connector) {
                    connector.keep(open);
                }
                Poll::Ready(Ok(None))
            }
            Poll::Pending => Poll::Pending,
        }
    }
}

/// The body's next piece of data (trailers have nothing to read in them).
fn poll_data(body: &mut Incoming, cx: &mut Context<'_>) -> Poll<Option<hyper::Result<Bytes>>> {
    loop {
        match Pin::new(&mut *body).poll_frame(cx) {
            Poll::Ready(Some(Ok(frame))) => {
                if let Ok(data) = frame.into_data() {
                    return Poll::Ready(Some(Ok(data)));
                }
            }
            Poll::Ready(Some(Err(err))) => return Poll::Ready(Some(Err(err))),
            Poll::Ready(None) => return Poll::Ready(None),
            Poll::Pending => return Poll::Pending,
        }
    }
}

/// Bytes of an unread body's rest that a dropped exchange still reads, to keep its connection.
const REST_READ_ON_DROP: usize = 16 * 1024;

impl Drop for Exchange {
    /// A reader that stops at its format's own end (a model stream's `[DONE]`) leaves the last
    /// bytes of the body unread (a chunked body's terminator), though they have usually
    /// arrived with it. They are read now, without waiting: if that was the end, the
    /// connection is kept. Otherwise it closes, which is also how a reader that stops early
    /// (the person pressed Stop) tells the server to stop sending.
    fn drop(&mut self) {
        if self.open.is_none() || self.connector.is_none() {
            return;
        }
        let mut cx = Context::from_waker(Waker::noop());
        let mut read = 0;
        while read <= REST_READ_ON_DROP {
            match self.poll_chunk(&mut cx) {
                Poll::Ready(Ok(Some(rest))) => read += rest.len(),
                Poll::Ready(Ok(None) | Err(_)) | Poll::Pending => return,
            }
        }
    }
}

/// The socket under a connection, and whether every read is acknowledged at once.
struct Socket {
    stream: Stream,
    ack_every_read: bool,
}

/// TCP, or TLS over it.
enum Stream {
    Plain(TcpStream),
    Tls(Box<TlsStream<TcpStream>>),
}

impl Socket {
    fn tcp(&self) -> &TcpStream {
        match &self.stream {
            Stream::Plain(tcp) => tcp,
            Stream::Tls(tls) => tls.get_ref().0,
        }
    }

    /// Sends the ACK the kernel is holding back, and leaves delayed-ACK mode until the next
    /// exchange makes it look interactive again (hence after every read).
    #[cfg(target_os = "linux")]
    fn ack_now(&self) {
        // Failing only costs time (the server's next segment waits for the delayed ACK).
        let _ = socket2::SockRef::from(self.tcp()).set_tcp_quickack(true);
    }

    #[cfg(not(target_os = "linux"))]
    fn ack_now(&self) {
        let _ = self.tcp();
    }
}

impl AsyncRead for Socket {
    fn poll_read(
        self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        buf: &mut ReadBuf<'_>,
    ) -> Poll<io::Result<()>> {
        let this = self.get_mut();
        let before = buf.filled().len();
        let read = match &mut this.stream {
            Stream::Plain(tcp) => Pin::new(tcp).poll_read(cx, buf),
            Stream::Tls(tls) => Pin::new(tls.as_mut()).poll_read(cx, buf),
        };
        if this.ack_every_read && matches!(read, Poll::Ready(Ok(()))) && buf.filled().len() > before
        {
            this.ack_now();
        }
        read
    }
}

impl AsyncWrite for Socket {
    fn poll_write(
        self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        buf: &[u8],
    ) -> Poll<io::Result<usize>> {
        match &mut self.get_mut().stream {
            Stream::Plain(tcp) => Pin::new(tcp).poll_write(cx, buf),
            Stream::Tls(tls) => Pin::new(tls.as_mut()).poll_write(cx, buf),
        }
    }

    fn poll_write_vectored(
        self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        bufs: &[io::IoSlice<'_>],
    ) -> Poll<io::Result<usize>> {
        match &mut self.get_mut().stream {
            Stream::Plain(tcp) => Pin::new(tcp).poll_write_vectored(cx, bufs),
            Stream::Tls(tls) => Pin::new(tls.as_mut()).poll_write_vectored(cx, bufs),
        }
    }

    fn is_write_vectored(&self) -> bool {
        match &self.stream {
            Stream::Plain(tcp) => tcp.is_write_vectored(),
            Stream::Tls(tls) => tls.is_write_vectored(),
        }
    }

    fn poll_flush(self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<io::Result<()>> {
        match &mut self.get_mut().stream {
            Stream::Plain(tcp) => Pin::new(tcp).poll_flush(cx),
            Stream::Tls(tls) => Pin::new(tls.as_mut()).poll_flush(cx),
        }
    }

    fn poll_shutdown(self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<io::Result<()>> {
        match &mut self.get_mut().stream {
            Stream::Plain(tcp) => Pin::new(tcp).poll_shutdown(cx),
            Stream::Tls(tls) => Pin::new(tls.as_mut()).poll_shutdown(cx),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn ips(list: &[&str]) -> Vec<IpAddr> {
        list.iter().map(|ip| ip.parse().unwrap()).collect()
    }

    #[test]
    fn addresses_are_tried_ipv6_first_and_alternating() {
        // (as resolved, as tried)
        let table: &[(&[&str], &[&str])] = &[
            (&["10.0.0.1", "10.0.0.2", "fd00::1"], &["fd00::1", "10.0.0.1", "10.0.0.2"]),
            (
                &["fd00::1", "fd00::2", "fd00::3", "10.0.0.1"],
                &["fd00::1", "10.0.0.1", "fd00::2", "fd00::3"],
            ),
            (&["10.0.0.2", "10.0.0.1"], &["10.0.0.2", "10.0.0.1"]),
            (&["fd00::1"], &["fd00::1"]),
            (&[], &[]),
        ];
        for (resolved, tried) in table {
            assert_eq!(interleaved(ips(resolved)), ips(tried), "{resolved:?}");
        }
    }
}
