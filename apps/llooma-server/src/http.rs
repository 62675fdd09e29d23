//! Serving HTTP connections: the accept loop, timeouts, the connection cap and the open-files
//! limit, around hyper's HTTP/1 server.
//!
//! Every connection holds a file descriptor, and under systemd's usual soft limit of 1024 open
//! files a crowd of connections that send nothing used to make `accept` fail ("Too many open
//! files"), so health checks and sign-in went unanswered until the crowd left. Hence:
//!
//! - At start the soft limit on open files is raised to the hard one (both are logged).
//! - Header-read timeout (`header_read_timeout_secs`, 10 s): a request head is a few hundred
//!   bytes to a few KiB, which even a slow mobile link sends within a second or two. A connection
//!   that has not sent a complete head 10 s after it opened (after its first byte, for a
//!   kept-alive connection) is stalled or hostile, and is closed.
//! - Keep-alive timeout (`keep_alive_timeout_secs`, 75 s): reusing a connection saves a handshake.
//!   75 s is longer than the idle timeouts of the proxies usually put in front (nginx's upstream
//!   pool and AWS load balancers: 60 s), so a proxy drops an idle connection before we do and
//!   never sends a request down one we are closing.
//! - hyper's own `http1().header_read_timeout` is switched off: in hyper 1.12 its timer starts
//!   whenever the connection waits for a request head, including the wait of a kept-alive
//!   connection for its next request, so it would be the keep-alive timeout as well. `Activity`
//!   below tells the two apart.
//! - Neither timeout runs while a request is in flight, that is until its response is fully
//!   written: an event stream open for hours (`/api/v1/approvals/events`) is a response being
//!   written, not an idle connection. Shutdown ends event streams (`stop_tx`).
//! - But a request in flight cannot be held open by its client either:
//!   - its body must arrive within `request_body_timeout_secs` (20 s) plus one second per
//!     `request_body_min_rate` bytes (500) received, as Apache's `mod_reqtimeout` does with
//!     `body=20,MinRate=500` ([`PacedBody`]): a photo over a slow phone line keeps well ahead,
//!     a client trickling a byte every two seconds is answered 408 and closed after 20 s;
//!   - a response the client does not read is closed once nothing could be written for
//!     `response_write_timeout_secs` (30 s). An event stream whose reader reads is never
//!     stuck that long (the socket's buffer takes what a quiet stream sends), so only a reader
//!     that stopped reading is cut.
//!
//!   Without these, 1,100 clients that each sent a request head and then a byte every two
//!   seconds counted as busy, were never evicted, and shut everyone out under a limit of
//!   1,024 open files.
//! - Connection cap (`max_connections`; automatic: the soft limit less a reserve of a tenth of it,
//!   at least 64, for the database pool, outbound clients (model providers, MCP servers, pages,
//!   chat servers), the listening socket and files; 922 under a limit of 1024). At the cap the
//!   connection idle the longest is closed to make room (it costs its client a reconnect); when
//!   every connection is busy the new one is accepted and closed at once, so the kernel's backlog
//!   does not fill with connections nobody will serve. A warning says so at most every 10 s.
//!
//! HTTP/1.1 only, as before: axum is built without `http2`, so h2c was never accepted.

use std::collections::BTreeMap;
use std::convert::Infallible;
use std::future::{Future, poll_fn};
use std::net::SocketAddr;
use std::pin::Pin;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::{Arc, Mutex, PoisonError, Weak};
use std::task::{Context as TaskContext, Poll};
use std::time::{Duration, Instant};

use axum::Router;
use axum::body::{Body, Bytes};
use axum::extract::ConnectInfo;
use futures::task::AtomicWaker;
use http_body::{Frame, SizeHint};
use hyper::body::Incoming;
use hyper_util::rt::TokioIo;
use llooma_task::SameTask;
use tokio::io::{AsyncRead, AsyncWrite, ReadBuf};
use tokio::net::{TcpListener, TcpStream};
use tokio::sync::{OwnedSemaphorePermit, Semaphore, watch};
use tower::ServiceExt;

/// How connections are bounded; see above.
#[derive(Clone, Copy, Debug)]
pub(crate) struct ConnectionLimits {
    pub(crate) header_read: Duration,
    pub(crate) keep_alive: Duration,
    /// How fast a request body must arrive.
    pub(crate) body: BodyPace,
    /// How long a response may be stuck, its client reading nothing.
    pub(crate) write: Duration,
    pub(crate) cap: usize,
}

/// A request body's pace: it must be complete within `grace` plus one second per `min_rate`
/// bytes received.
#[derive(Clone, Copy, Debug)]
pub(crate) struct BodyPace {
    pub(crate) grace: Duration,
    pub(crate) min_rate: u64,
}

/// Open files kept back from connections: a tenth of the limit, and at least this many.
const RESERVED_FILES_MIN: u64 = 64;
/// An unlimited (or unknown) limit counts as Linux's default ceiling on open files.
const OPEN_FILES_UNLIMITED: u64 = 1 << 20;
/// How often the same connection warning may be logged.
const WARN_EVERY: Duration = Duration::from_secs(10);
/// How long the accept loop waits for the connection it closed to make room to end.
const EVICTION_WAIT: Duration = Duration::from_secs(1);

/// Raises the soft limit on open files to the hard one and logs both; returns the soft limit in
/// force afterwards (`None`: unlimited).
#[cfg(unix)]
pub(crate) fn raise_open_files_limit() -> Option<u64> {
    use rustix::process::{Resource, Rlimit, getrlimit, setrlimit};
    let shown =
        |limit: Option<u64>| limit.map_or_else(|| "unlimited".to_owned(), |n| n.to_string());
    let before = getrlimit(Resource::Nofile);
    if before.current == before.maximum {
        tracing::info!(
            soft = %shown(before.current),
            hard = %shown(before.maximum),
            "the soft limit on open files is already the hard limit"
        );
        return before.current;
    }
    match setrlimit(Resource::Nofile, Rlimit { current: before.maximum, ..before }) {
        Ok(()) => tracing::info!(
            soft_before = %shown(before.current),
            soft = %shown(before.maximum),
            hard = %shown(before.maximum),
            "raised the soft limit on open files to the hard limit"
        ),
        Err(err) => tracing::warn!(
            soft = %shown(before.current),
            hard = %shown(before.maximum),
            error = %err,
            "could not raise the soft limit on open files to the hard limit"
        ),
    }
    getrlimit(Resource::Nofile).current
}

#[cfg(not(unix))]
pub(crate) fn raise_open_files_limit() -> Option<u64> {
    None
}

/// The connection cap under a soft limit on open files: the limit less a reserve, or the
/// configured cap when that is lower (0: automatic).
pub(crate) fn connection_cap(open_files: Option<u64>, configured: u64) -> usize {
    let limit = open_files.unwrap_or(OPEN_FILES_UNLIMITED);
    let automatic = limit.saturating_sub((limit / 10).max(RESERVED_FILES_MIN)).max(1);
    let cap = if configured == 0 {
        automatic
    } else if configured > automatic {
        tracing::warn!(
            max_connections = configured,
            open_files = limit,
            "max_connections leaves too few open files for the rest of the server; using {automatic}"
        );
        automatic
    } else {
        configured
    };
    usize::try_from(cap).unwrap_or(usize::MAX)
}

/// Accepts connections until `shutdown` resolves, then lets every connection finish (idle ones
/// are closed, requests in flight end as usual).
pub(crate) async fn serve_http(
    listener: TcpListener,
    app: Router,
    limits: ConnectionLimits,
    shutdown: impl Future<Output = ()>,
) {
    let permits = Arc::new(Semaphore::new(limits.cap));
    let idle = Arc::new(IdleList::default());
    let (draining_tx, draining_rx) = watch::channel(false);
    let mut cap_warning = Throttle::new(WARN_EVERY);
    let mut accept_warning = Throttle::new(WARN_EVERY);
    let mut shutdown = std::pin::pin!(shutdown);
    loop {
        let (stream, remote) = tokio::select! {
            accepted = listener.accept() => match accepted {
                Ok(pair) => pair,
                Err(err) => {
                    accept_failed(err, &mut accept_warning).await;
                    continue;
                }
            },
            () = &mut shutdown => break,
        };
        // Small writes (server-sent events) must not wait for the peer's delayed ACK.
        let _ = stream.set_nodelay(true);
        let permit = match permits.clone().try_acquire_owned() {
            Ok(permit) => permit,
            Err(_) => match make_room(&permits, &idle).await {
                Some(permit) => {
                    if let Some(since) = cap_warning.ready() {
                        tracing::warn!(
                            max_connections = limits.cap,
                            times_since_last_warning = since,
                            "connection cap reached: closing the longest-idle connections to \
                             take new ones"
                        );
                    }
                    permit
                }
                None => {
                    if let Some(since) = cap_warning.ready() {
                        tracing::warn!(
                            max_connections = limits.cap,
                            times_since_last_warning = since,
                            "connection cap reached and every connection is busy: closing new \
                             connections at once"
                        );
                    }
                    drop(stream);
                    continue;
                }
            },
        };
        let activity = Activity::new(idle.clone());
        tokio::spawn(serve_connection(
            stream,
            remote,
            app.clone(),
            limits,
            activity,
            draining_rx.clone(),
            permit,
        ));
    }
    drop(listener);
    let _ = draining_tx.send(true);
    // Every connection holds a permit until it ends.
    let all = u32::try_from(limits.cap).unwrap_or(u32::MAX);
    let _ = permits.acquire_many(all).await;
}

async fn accept_failed(err: std::io::Error, warning: &mut Throttle) {
    use std::io::ErrorKind;
    // A connection reset before it was accepted concerns only itself.
    if matches!(
        err.kind(),
        ErrorKind::ConnectionAborted | ErrorKind::ConnectionReset | ErrorKind::ConnectionRefused
    ) {
        return;
    }
    // Out of file descriptors (other than connections) or memory: wait a moment rather than spin.
    if let Some(since) = warning.ready() {
        tracing::warn!(error = %err, times_since_last_warning = since, "accepting a connection failed");
    }
    tokio::time::sleep(Duration::from_millis(100)).await;
}

/// Closes the connection idle the longest and takes its place; `None` when none is idle.
async fn make_room(permits: &Arc<Semaphore>, idle: &IdleList) -> Option<OwnedSemaphorePermit> {
    if !idle.evict_oldest() {
        return None;
    }
    // The evicted connection's task ends and gives its permit back within moments.
    tokio::time::timeout(EVICTION_WAIT, permits.clone().acquire_owned()).await.ok()?.ok()
}

async fn serve_connection(
    stream: TcpStream,
    remote: SocketAddr,
    app: Router,
    limits: ConnectionLimits,
    activity: Arc<Activity>,
    mut draining: watch::Receiver<bool>,
    _permit: OwnedSemaphorePermit,
) {
    let io = TokioIo::new(Watched { stream, activity: activity.clone() });
    let service = {
        let activity = activity.clone();
        hyper::service::service_fn(move |request: hyper::Request<Incoming>| {
            let in_flight = activity.begin_request();
            let paced = PacedStart::new(activity.clone(), limits.body);
            let mut request = request.map(|body| paced.over(body));
            // What `into_make_service_with_connect_info` gave handlers: the client's address.
            request.extensions_mut().insert(ConnectInfo(remote));
            let app = app.clone();
            let activity = activity.clone();
            async move {
                let Ok(mut response) = app.oneshot(request).await;
                if activity.body_too_slow.swap(false, Ordering::Relaxed) {
                    // Whatever the handler made of a body cut short, the client is told why.
                    response = too_slow();
                }
                Ok::<_, Infallible>(
                    response.map(|body| InFlightBody { body, _in_flight: in_flight }),
                )
            }
        })
    };
    let connection = hyper::server::conn::http1::Builder::new()
        // Ours below, which tells a slow request head from a kept-alive connection's wait.
        .header_read_timeout(None)
        .serve_connection(io, service);
    let mut connection = std::pin::pin!(connection);
    let mut idle_too_long = IdleTooLong::new(activity.clone(), limits);
    // hyper polls a request's handler, and the handler reads the request's body, inside this
    // task: each hand-over between them would wake the task from inside its own poll, and a
    // task woken so wakes the runtime's other worker (see `SameTask`).
    let same_task = SameTask::new();
    let mut drained = false;
    loop {
        tokio::select! {
            // The connection first: the idle check after it reads the phase the connection
            // has just left (see `IdleTooLong`).
            biased;
            result = poll_fn(|cx| same_task.poll(cx, |cx| connection.as_mut().poll(cx))) => {
                if let Err(err) = result {
                    tracing::debug!(%remote, error = %err, "connection ended with an error");
                }
                break;
            }
            () = &mut idle_too_long => {
                tracing::debug!(%remote, "closing an idle connection");
                break;
            }
            _ = draining.wait_for(|draining| *draining), if !drained => {
                drained = true;
                // Without a request in flight (a head half sent, say) it closes now; else after
                // the response in flight.
                if !activity.is_busy() {
                    break;
                }
                connection.as_mut().graceful_shutdown();
            }
        }
    }
    activity.leave();
}

/// Where a connection is between requests.
#[derive(Clone, Copy, Debug)]
enum Phase {
    /// Waiting for the first byte of a request (`fresh`: its first request).
    Waiting { since: Instant, fresh: bool },
    /// A request head is arriving; it must be complete by `since` plus the header-read timeout.
    Reading { since: Instant },
    /// Requests whose responses are not fully written yet.
    Busy { requests: usize },
    /// Closed to make room under the cap.
    Evicted,
}

/// One connection's phase, watched by its task and, while idle, listed for eviction.
#[derive(Debug)]
struct Activity {
    state: Mutex<ActivityState>,
    /// Set while `Waiting`, so that reads check the phase only for a request's first bytes.
    waiting: AtomicBool,
    /// Wakes the connection's task when it is evicted: the only change of phase made from
    /// another task (see `IdleTooLong`).
    evicted: AtomicWaker,
    idle: Arc<IdleList>,
    /// A request's body arrived too slowly ([`PacedBody`]); its answer says so.
    body_too_slow: AtomicBool,
    /// When a write last found the socket full, in milliseconds after `opened` plus one; 0
    /// while writes go through.
    write_stuck_since: AtomicU64,
    opened: Instant,
}

#[derive(Debug)]
struct ActivityState {
    phase: Phase,
    /// The place in the idle list while idle (`Waiting` or `Reading`).
    ticket: Option<u64>,
}

impl Activity {
    fn new(idle: Arc<IdleList>) -> Arc<Activity> {
        let activity = Arc::new(Activity {
            state: Mutex::new(ActivityState {
                phase: Phase::Waiting { since: Instant::now(), fresh: true },
                ticket: None,
            }),
            waiting: AtomicBool::new(true),
            evicted: AtomicWaker::new(),
            idle,
            body_too_slow: AtomicBool::new(false),
            write_stuck_since: AtomicU64::new(0),
            opened: Instant::now(),
        });
        {
            // Under its own lock, so an eviction finds the ticket set.
            let mut state = activity.lock();
            state.ticket = Some(activity.idle.enlist(&activity));
        }
        activity
    }

    fn lock(&self) -> std::sync::MutexGuard<'_, ActivityState> {
        self.state.lock().unwrap_or_else(PoisonError::into_inner)
    }

    /// Bytes arrived: a request head has begun.
    fn bytes_arrived(&self) {
        if !self.waiting.load(Ordering::Relaxed) {
            return;
        }
        let mut state = self.lock();
        if let Phase::Waiting { since, fresh } = state.phase {
            // A new connection's head is due counting from when it opened.
            let since = if fresh { since } else { Instant::now() };
            state.phase = Phase::Reading { since };
            self.waiting.store(false, Ordering::Relaxed);
        }
    }

    /// A request head is complete and goes to the router; busy until the guard is dropped.
    fn begin_request(self: &Arc<Self>) -> InFlight {
        let mut state = self.lock();
        state.phase = match state.phase {
            Phase::Busy { requests } => Phase::Busy { requests: requests + 1 },
            // Evicted just now: the connection is being closed and the request with it.
            Phase::Evicted => Phase::Evicted,
            Phase::Waiting { .. } | Phase::Reading { .. } => Phase::Busy { requests: 1 },
        };
        if let Some(ticket) = state.ticket.take() {
            self.idle.delist(ticket);
        }
        self.waiting.store(false, Ordering::Relaxed);
        InFlight(self.clone())
    }

    fn end_request(self: &Arc<Self>) {
        let mut state = self.lock();
        match state.phase {
            Phase::Busy { requests } if requests > 1 => {
                state.phase = Phase::Busy { requests: requests - 1 };
            }
            Phase::Busy { .. } => {
                state.phase = Phase::Waiting { since: Instant::now(), fresh: false };
                state.ticket = Some(self.idle.enlist(self));
                self.waiting.store(true, Ordering::Relaxed);
            }
            Phase::Waiting { .. } | Phase::Reading { .. } | Phase::Evicted => {}
        }
    }

    /// Taken off the idle list to be closed; false if it became busy meanwhile.
    fn evict(&self, ticket: u64) -> bool {
        let mut state = self.lock();
        if state.ticket != Some(ticket) {
            return false;
        }
        state.ticket = None;
        state.phase = Phase::Evicted;
        self.waiting.store(false, Ordering::Relaxed);
        self.evicted.wake();
        true
    }

    /// A write found the socket full (`true`) or went through (`false`).
    fn write_stuck(&self, stuck: bool) {
        let since = self.write_stuck_since.load(Ordering::Relaxed);
        if stuck && since == 0 {
            let now = self.opened.elapsed().as_millis();
            let now = u64::try_from(now).unwrap_or(u64::MAX - 1).saturating_add(1);
            self.write_stuck_since.store(now, Ordering::Relaxed);
        } else if !stuck && since != 0 {
            self.write_stuck_since.store(0, Ordering::Relaxed);
        }
    }

    /// Since when writes have found the socket full, if they do.
    fn stuck_since(&self) -> Option<Instant> {
        match self.write_stuck_since.load(Ordering::Relaxed) {
            0 => None,
            ms => Some(self.opened + Duration::from_millis(ms - 1)),
        }
    }

    fn is_busy(&self) -> bool {
        matches!(self.lock().phase, Phase::Busy { .. })
    }

    /// The connection ended.
    fn leave(&self) {
        if let Some(ticket) = self.lock().ticket.take() {
            self.idle.delist(ticket);
        }
    }
}

/// Resolves when its connection has been idle too long, or was evicted.
///
/// It reads the phase each time it is polled, which is right after the connection
/// (`serve_connection`'s `biased` select) on every wake-up of the connection's task. The
/// connection changes its own phase (a request's first bytes, its head, its response's end)
/// while it is polled, in that same task, so those changes need no wake-up of their own. They
/// used to send one (a `Notify`): a task woken while it runs is queued again, and a queued task
/// wakes the runtime's other worker, a thread woken on every request for nothing. Only an
/// eviction comes from another task, and it wakes the connection's (`Activity::evicted`).
struct IdleTooLong {
    activity: Arc<Activity>,
    limits: ConnectionLimits,
    /// One timer, moved only when the deadline changes.
    timer: Pin<Box<tokio::time::Sleep>>,
    timer_for: Option<Instant>,
}

impl IdleTooLong {
    fn new(activity: Arc<Activity>, limits: ConnectionLimits) -> Self {
        // Armed far away until the first poll sets it.
        let timer = Box::pin(tokio::time::sleep(limits.keep_alive.max(limits.header_read)));
        IdleTooLong { activity, limits, timer, timer_for: None }
    }
}

impl Future for IdleTooLong {
    type Output = ();

    fn poll(self: Pin<&mut Self>, cx: &mut TaskContext<'_>) -> Poll<()> {
        let this = self.get_mut();
        // Registered before the phase is read, so an eviction in between is not missed.
        this.activity.evicted.register(cx.waker());
        let deadline = match this.activity.lock().phase {
            Phase::Evicted => return Poll::Ready(()),
            // A response whose client stopped reading: nothing written for too long.
            Phase::Busy { .. } => match this.activity.stuck_since() {
                Some(since) => since + this.limits.write,
                None => return Poll::Pending,
            },
            Phase::Waiting { since, fresh: true } | Phase::Reading { since } => {
                since + this.limits.header_read
            }
            Phase::Waiting { since, fresh: false } => since + this.limits.keep_alive,
        };
        if this.timer_for != Some(deadline) {
            this.timer.as_mut().reset(deadline.into());
            this.timer_for = Some(deadline);
        }
        this.timer.as_mut().poll(cx)
    }
}

/// Keeps its connection busy while alive: from the request's head to its response's end.
#[derive(Debug)]
struct InFlight(Arc<Activity>);

impl Drop for InFlight {
    fn drop(&mut self) {
        self.0.end_request();
    }
}

/// Idle connections in the order they became idle, oldest first.
#[derive(Debug, Default)]
struct IdleList {
    inner: Mutex<IdleListInner>,
}

#[derive(Debug, Default)]
struct IdleListInner {
    next_ticket: u64,
    by_age: BTreeMap<u64, Weak<Activity>>,
}

impl IdleList {
    fn lock(&self) -> std::sync::MutexGuard<'_, IdleListInner> {
        self.inner.lock().unwrap_or_else(PoisonError::into_inner)
    }

    fn enlist(&self, activity: &Arc<Activity>) -> u64 {
        let mut inner = self.lock();
        let ticket = inner.next_ticket;
        inner.next_ticket += 1;
        inner.by_age.insert(ticket, Arc::downgrade(activity));
        ticket
    }

    fn delist(&self, ticket: u64) {
        self.lock().by_age.remove(&ticket);
    }

    /// Evicts the connection idle the longest; false when none is idle.
    fn evict_oldest(&self) -> bool {
        loop {
            // The list's lock is let go before an activity's is taken (they lock the other way).
            let Some((ticket, activity)) = self.lock().by_age.pop_first() else {
                return false;
            };
            if activity.upgrade().is_some_and(|activity| activity.evict(ticket)) {
                return true;
            }
        }
    }
}

/// A response body that keeps its request in flight until it is fully written (or dropped).
struct InFlightBody {
    body: Body,
    _in_flight: InFlight,
}

impl http_body::Body for InFlightBody {
    type Data = Bytes;
    type Error = axum::Error;

    fn poll_frame(
        mut self: Pin<&mut Self>,
        cx: &mut TaskContext<'_>,
    ) -> Poll<Option<Result<Frame<Bytes>, axum::Error>>> {
        Pin::new(&mut self.body).poll_frame(cx)
    }

    fn is_end_stream(&self) -> bool {
        self.body.is_end_stream()
    }

    fn size_hint(&self) -> SizeHint {
        self.body.size_hint()
    }
}

/// A request body that must keep pace ([`BodyPace`]); when it falls behind, the read fails and
/// the connection's [`Activity`] is told, so the answer is a 408.
struct PacedBody {
    body: Incoming,
    activity: Arc<Activity>,
    pace: BodyPace,
    started: Instant,
    received: u64,
    /// Armed the first time the body has to be waited for (most arrive with their head).
    timer: Option<Pin<Box<tokio::time::Sleep>>>,
}

/// Made before the request is handed on; the body is put in when the request is.
struct PacedStart {
    activity: Arc<Activity>,
    pace: BodyPace,
    started: Instant,
}

impl PacedBody {
    /// When the body must have arrived, given what has.
    fn due(&self) -> Instant {
        let earned = Duration::from_secs(self.received / self.pace.min_rate.max(1));
        self.started + self.pace.grace + earned
    }
}

impl PacedStart {
    fn new(activity: Arc<Activity>, pace: BodyPace) -> PacedStart {
        PacedStart { activity, pace, started: Instant::now() }
    }

    fn over(self, body: Incoming) -> PacedBody {
        let PacedStart { activity, pace, started } = self;
        PacedBody { body, activity, pace, started, received: 0, timer: None }
    }
}

impl http_body::Body for PacedBody {
    type Data = Bytes;
    type Error = Box<dyn std::error::Error + Send + Sync>;

    fn poll_frame(
        self: Pin<&mut Self>,
        cx: &mut TaskContext<'_>,
    ) -> Poll<Option<Result<Frame<Bytes>, Self::Error>>> {
        let this = self.get_mut();
        match Pin::new(&mut this.body).poll_frame(cx) {
            Poll::Ready(Some(Ok(frame))) => {
                if let Some(data) = frame.data_ref() {
                    this.received = this.received.saturating_add(data.len() as u64);
                }
                Poll::Ready(Some(Ok(frame)))
            }
            Poll::Ready(Some(Err(err))) => Poll::Ready(Some(Err(err.into()))),
            Poll::Ready(None) => Poll::Ready(None),
            Poll::Pending => {
                let due = this.due();
                let timer = match &mut this.timer {
                    Some(timer) => {
                        if timer.deadline() != due.into() {
                            timer.as_mut().reset(due.into());
                        }
                        timer
                    }
                    None => this.timer.insert(Box::pin(tokio::time::sleep_until(due.into()))),
                };
                if timer.as_mut().poll(cx).is_pending() {
                    return Poll::Pending;
                }
                this.activity.body_too_slow.store(true, Ordering::Relaxed);
                Poll::Ready(Some(Err("the request body arrived too slowly".into())))
            }
        }
    }

    fn is_end_stream(&self) -> bool {
        self.body.is_end_stream()
    }

    fn size_hint(&self) -> SizeHint {
        self.body.size_hint()
    }
}

/// The answer to a request whose body arrived too slowly; the connection closes after it.
fn too_slow() -> axum::response::Response {
    use axum::response::IntoResponse;
    (
        axum::http::StatusCode::REQUEST_TIMEOUT,
        [(axum::http::header::CONNECTION, "close")],
        axum::Json(serde_json::json!({
            "error": "request_timeout",
            "message": "The request body arrived too slowly and was not read to its end. \
                        Check the connection and send it again.",
        })),
    )
        .into_response()
}

/// A connection's socket, telling its `Activity` when a request's first bytes arrive.
struct Watched {
    stream: TcpStream,
    activity: Arc<Activity>,
}

impl AsyncRead for Watched {
    fn poll_read(
        mut self: Pin<&mut Self>,
        cx: &mut TaskContext<'_>,
        buf: &mut ReadBuf<'_>,
    ) -> Poll<std::io::Result<()>> {
        let before = buf.filled().len();
        let result = Pin::new(&mut self.stream).poll_read(cx, buf);
        if buf.filled().len() > before {
            self.activity.bytes_arrived();
        }
        result
    }
}

impl AsyncWrite for Watched {
    fn poll_write(
        mut self: Pin<&mut Self>,
        cx: &mut TaskContext<'_>,
        buf: &[u8],
    ) -> Poll<std::io::Result<usize>> {
        let written = Pin::new(&mut self.stream).poll_write(cx, buf);
        self.activity.write_stuck(written.is_pending());
        written
    }

    fn poll_write_vectored(
        mut self: Pin<&mut Self>,
        cx: &mut TaskContext<'_>,
        bufs: &[std::io::IoSlice<'_>],
    ) -> Poll<std::io::Result<usize>> {
        let written = Pin::new(&mut self.stream).poll_write_vectored(cx, bufs);
        self.activity.write_stuck(written.is_pending());
        written
    }

    fn is_write_vectored(&self) -> bool {
        self.stream.is_write_vectored()
    }

    fn poll_flush(mut self: Pin<&mut Self>, cx: &mut TaskContext<'_>) -> Poll<std::io::Result<()>> {
        Pin::new(&mut self.stream).poll_flush(cx)
    }

    fn poll_shutdown(
        mut self: Pin<&mut Self>,
        cx: &mut TaskContext<'_>,
    ) -> Poll<std::io::Result<()>> {
        Pin::new(&mut self.stream).poll_shutdown(cx)
    }
}

/// Lets a repeated warning through at most once per period; counts the ones held back.
#[derive(Debug)]
struct Throttle {
    every: Duration,
    last: Option<Instant>,
    held_back: u64,
}

impl Throttle {
    fn new(every: Duration) -> Throttle {
        Throttle { every, last: None, held_back: 0 }
    }

    /// `Some(times held back since the last one)` when a warning may be logged now.
    fn ready(&mut self) -> Option<u64> {
        let now = Instant::now();
        if self.last.is_some_and(|last| now.duration_since(last) < self.every) {
            self.held_back += 1;
            return None;
        }
        self.last = Some(now);
        Some(std::mem::take(&mut self.held_back))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_connection_cap_leaves_open_files_for_the_rest_of_the_server() {
        // (soft limit on open files, configured cap, cap)
        let table: &[(Option<u64>, u64, usize)] = &[
            (Some(1024), 0, 922),
            (Some(524_288), 0, 471_860),
            (Some(4096), 0, 3687),
            (Some(256), 0, 192),
            (Some(64), 0, 1),
            (Some(1024), 500, 500),
            (Some(1024), 5000, 922),
            (None, 0, 943_719),
        ];
        for &(open_files, configured, cap) in table {
            assert_eq!(connection_cap(open_files, configured), cap, "{open_files:?} {configured}");
        }
    }

    #[test]
    fn warnings_are_held_back_and_counted() {
        let mut throttle = Throttle::new(Duration::from_secs(60));
        assert_eq!(throttle.ready(), Some(0));
        assert_eq!(throttle.ready(), None);
        assert_eq!(throttle.ready(), None);
        throttle.last = Some(Instant::now() - Duration::from_secs(61));
        assert_eq!(throttle.ready(), Some(2));
    }

    /// A server on loopback with `limits`: `/endless` streams without end, `POST /echo`
    /// answers the length of the body it read.
    async fn serving(limits: ConnectionLimits) -> SocketAddr {
        use axum::routing::{get, post};
        let app = Router::new()
            .route(
                "/endless",
                get(|| async {
                    let chunk = Bytes::from(vec![b'x'; 64 * 1024]);
                    let endless = futures::stream::repeat_with(move || {
                        Ok::<_, std::convert::Infallible>(chunk.clone())
                    });
                    Body::from_stream(endless)
                }),
            )
            .route("/echo", post(|body: Bytes| async move { body.len().to_string() }));
        let listener = TcpListener::bind("127.0.0.1:0").await.unwrap();
        let address = listener.local_addr().unwrap();
        tokio::spawn(serve_http(listener, app, limits, std::future::pending()));
        address
    }

    fn limits() -> ConnectionLimits {
        ConnectionLimits {
            header_read: Duration::from_secs(60),
            keep_alive: Duration::from_secs(60),
            body: BodyPace { grace: Duration::from_secs(1), min_rate: 500 },
            write: Duration::from_secs(1),
            cap: 64,
        }
    }

    /// Everything the server sends until it closes the connection, if it does within `limit`.
    async fn read_to_close(stream: &mut TcpStream, limit: Duration) -> Option<Vec<u8>> {
        use tokio::io::AsyncReadExt;
        let mut all = Vec::new();
        let mut buffer = vec![0u8; 64 * 1024];
        let deadline = tokio::time::Instant::now() + limit;
        loop {
            match tokio::time::timeout_at(deadline, stream.read(&mut buffer)).await {
                Err(_) => return None,
                Ok(Ok(0) | Err(_)) => return Some(all),
                Ok(Ok(n)) => all.extend_from_slice(&buffer[..n]),
            }
        }
    }

    #[tokio::test]
    async fn a_trickled_body_is_answered_408_and_its_connection_closed() {
        use tokio::io::AsyncWriteExt;
        let address = serving(limits()).await;
        let mut stream = TcpStream::connect(address).await.unwrap();
        stream
            .write_all(b"POST /echo HTTP/1.1\r\nhost: x\r\ncontent-length: 1000\r\n\r\n")
            .await
            .unwrap();
        let trickle = async {
            for _ in 0..20 {
                if stream.write_all(b"x").await.is_err() {
                    break;
                }
                tokio::time::sleep(Duration::from_millis(300)).await;
            }
        };
        let mut copy = TcpStream::connect(address).await.unwrap();
        // A body that keeps pace is read whole meanwhile, on another connection.
        copy.write_all(b"POST /echo HTTP/1.1\r\nhost: x\r\ncontent-length: 2000\r\n\r\n")
            .await
            .unwrap();
        let steady = async {
            for _ in 0..4 {
                copy.write_all(&[b'y'; 500]).await.unwrap();
                tokio::time::sleep(Duration::from_millis(400)).await;
            }
        };
        tokio::join!(trickle, steady);
        let answer = read_to_close(&mut stream, Duration::from_secs(5)).await.unwrap();
        let answer = String::from_utf8_lossy(&answer);
        assert!(answer.starts_with("HTTP/1.1 408"), "{answer}");
        assert!(answer.contains("too slowly"), "{answer}");
        let mut buffer = [0u8; 1024];
        let n = tokio::io::AsyncReadExt::read(&mut copy, &mut buffer).await.unwrap();
        let answer = String::from_utf8_lossy(&buffer[..n]);
        assert!(answer.starts_with("HTTP/1.1 200") && answer.ends_with("2000"), "{answer}");
    }

    #[tokio::test]
    async fn a_response_its_client_does_not_read_is_closed_and_a_reader_is_not() {
        use tokio::io::{AsyncReadExt, AsyncWriteExt};
        let address = serving(limits()).await;
        let request = b"GET /endless HTTP/1.1\r\nhost: x\r\n\r\n";
        let mut stalled = TcpStream::connect(address).await.unwrap();
        stalled.write_all(request).await.unwrap();
        let mut reader = TcpStream::connect(address).await.unwrap();
        reader.write_all(request).await.unwrap();
        // The reader reads for three seconds, past the write timeout; the other reads nothing.
        let mut buffer = vec![0u8; 64 * 1024];
        let until = tokio::time::Instant::now() + Duration::from_secs(3);
        while tokio::time::Instant::now() < until {
            let n = reader.read(&mut buffer).await.unwrap();
            assert!(n > 0, "the server closed a response that was being read");
        }
        // What the stalled one was sent until the server gave up: bounded, then the end.
        assert!(read_to_close(&mut stalled, Duration::from_secs(10)).await.is_some());
        let n = reader.read(&mut buffer).await.unwrap();
        assert!(n > 0);
    }

    #[test]
    fn the_longest_idle_connection_is_evicted_and_a_busy_one_never() {
        let idle = Arc::new(IdleList::default());
        let first = Activity::new(idle.clone());
        let second = Activity::new(idle.clone());
        let third = Activity::new(idle.clone());
        let busy = first.begin_request();
        assert!(idle.evict_oldest());
        assert!(matches!(second.lock().phase, Phase::Evicted));
        assert!(matches!(third.lock().phase, Phase::Waiting { .. }));
        assert!(matches!(first.lock().phase, Phase::Busy { requests: 1 }));
        // Done with its request, the first is idle again, now the newest.
        drop(busy);
        assert!(idle.evict_oldest());
        assert!(matches!(third.lock().phase, Phase::Evicted));
        first.leave();
        assert!(!idle.evict_oldest());
    }
}
