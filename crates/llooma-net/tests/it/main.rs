//! The outbound client against real HTTP servers on loopback.
//!
//! Every server here listens on 127.0.0.1 and is reachable only through an allow-list. Public
//! addresses appear only as answers of a scripted resolver or in policy decisions; whenever a
//! test could, through a bug, connect somewhere, the address it would reach is loopback.

// Helpers outside `#[test]` functions are not covered by clippy's allow-unwrap-in-tests; a
// failed setup step should panic there too.
#![expect(clippy::unwrap_used, reason = "test helpers panic on failed setup")]

mod support;

use std::sync::Arc;
use std::time::Duration;

use llooma_net::header::{AUTHORIZATION, HeaderName};
use llooma_net::{
    NetClient, NetError, OutboundPolicy, Purpose, RedirectProblem, Refusal, check_address,
};
use support::{ProxyCounter, ScriptedResolver, Server, TEST_CA, TlsServer, read_request_head};

fn policy(mcp: Option<&str>, fetch: Option<&str>) -> Arc<OutboundPolicy> {
    Arc::new(OutboundPolicy::from_allow_lists(mcp, fetch, None).unwrap())
}

async fn fetch(net: &NetClient, url: &str) -> Result<llooma_net::NetResponse, NetError> {
    net.send(net.get(url)?).await
}

fn client(policy: Arc<OutboundPolicy>, purpose: Purpose) -> NetClient {
    NetClient::builder(policy, purpose).build().unwrap()
}

#[tokio::test]
async fn allow_listed_loopback_server_is_reachable() {
    let server = Server::start().await;
    let net = client(policy(None, Some(&server.origin())), Purpose::Fetch);
    let body = fetch(&net, &server.url("/")).await.unwrap().text().await.unwrap();
    assert_eq!(body, "hello");
}

#[tokio::test]
async fn ip_literal_private_host_is_refused_without_connecting() {
    let server = Server::start().await;
    // The allow-list is for MCP; this client is for page reading, which has none.
    let net = client(policy(Some(&server.origin()), None), Purpose::Fetch);
    for url in [
        server.url("/"),
        format!("http://0x7f000001:{}/", server.addr.port()),
        format!("http://2130706433:{}/", server.addr.port()),
        format!("http://127.1:{}/", server.addr.port()),
    ] {
        match fetch(&net, &url).await {
            Err(NetError::Refused { reason: Refusal::BlockedAddress { range, .. }, .. }) => {
                assert_eq!(range.cidr, "127.0.0.0/8")
            }
            other => panic!("{url}: expected a refusal, got {other:?}"),
        }
    }
    assert_eq!(server.connections(), 0);
}

#[tokio::test]
async fn an_mcp_post_to_a_private_literal_is_refused_in_every_spelling() {
    let server = Server::start().await;
    let net = client(policy(None, None), Purpose::Mcp);
    // As the MCP transport sends it: a POST with a bearer token.
    for url in [
        server.url("/mcp"),
        format!("http://0x7f.1:{}/mcp", server.addr.port()),
        format!("http://[::ffff:127.0.0.1]:{}/mcp", server.addr.port()),
    ] {
        let request = net.post(&url).map(|r| r.bearer_auth("secret").body("{}"));
        let refused = match request {
            Ok(request) => net.send(request).await.map(|_| ()),
            Err(err) => Err(err),
        };
        assert!(
            matches!(
                refused,
                Err(NetError::Refused { reason: Refusal::BlockedAddress { .. }, .. })
            ),
            "{url}: {refused:?}"
        );
    }
    // `localhost` is refused by name, before any lookup.
    let err = fetch(&net, &format!("http://localhost:{}/", server.addr.port())).await.unwrap_err();
    assert!(matches!(err, NetError::Refused { reason: Refusal::LoopbackName { .. }, .. }));
    assert_eq!(server.connections(), 0);
}

#[tokio::test]
async fn origins_off_the_allow_list_are_refused() {
    let listed = Server::start().await;
    let other = Server::start().await;
    let net = client(policy(Some(&listed.origin()), None), Purpose::Mcp);
    assert_eq!(fetch(&net, &listed.url("/")).await.unwrap().status(), 200);
    let err = fetch(&net, &other.url("/")).await.unwrap_err();
    assert!(matches!(err, NetError::Refused { reason: Refusal::NotOnAllowList { .. }, .. }));
    assert_eq!(other.connections(), 0);
}

#[tokio::test]
async fn name_resolving_public_then_private_cannot_rebind() {
    let server = Server::start().await;
    let url = format!("http://rebind.test:{}/", server.addr.port());
    // First answer public, every later one loopback: the classic rebinding script.
    let resolver = ScriptedResolver::new(&[&["93.184.216.34"], &["127.0.0.1"]]);
    let policy = policy(None, None);

    let check = check_address(&policy, Purpose::Fetch, &url, resolver.as_ref()).await;
    assert!(check.allowed(), "{check}");

    let net = NetClient::builder(Arc::clone(&policy), Purpose::Fetch)
        .resolver(resolver.clone())
        .build()
        .unwrap();
    match fetch(&net, &url).await {
        Err(NetError::Refused { reason: Refusal::BlockedAddress { ip, host, .. }, .. }) => {
            assert_eq!(ip.to_string(), "127.0.0.1");
            assert_eq!(host.as_deref(), Some("rebind.test"));
        }
        other => panic!("expected a refusal, got {other:?}"),
    }
    assert!(matches!(fetch(&net, &url).await, Err(NetError::Refused { .. })));
    // The check's lookup, then one per connection attempt: nothing connects on an old answer.
    assert_eq!(resolver.lookups(), 3);
    assert_eq!(server.connections(), 0);
}

#[tokio::test]
async fn name_with_one_private_address_among_public_ones_is_refused_whole() {
    let server = Server::start().await;
    // Loopback first: were the name let through, the connector would try it first and the
    // server would count it (and nothing public would be contacted).
    let resolver = ScriptedResolver::new(&[&["127.0.0.1", "93.184.216.34"]]);
    let net =
        NetClient::builder(policy(None, None), Purpose::Fetch).resolver(resolver).build().unwrap();
    let url = format!("http://mixed.test:{}/", server.addr.port());
    assert!(matches!(fetch(&net, &url).await, Err(NetError::Refused { .. })));
    assert_eq!(server.connections(), 0);
}

#[tokio::test]
async fn allow_listed_name_connects_to_the_address_it_resolved_to() {
    let server = Server::start().await;
    let origin = format!("http://gateway.test:{}", server.addr.port());
    let resolver = ScriptedResolver::new(&[&["127.0.0.1"]]);
    let net = NetClient::builder(policy(Some(&origin), None), Purpose::Mcp)
        .resolver(resolver.clone())
        .idle_pooling(false)
        .build()
        .unwrap();
    for _ in 0..2 {
        let response = fetch(&net, &format!("{origin}/mcp")).await.unwrap();
        assert_eq!(response.text().await.unwrap(), "hello");
    }
    // No idle pooling: one lookup and one connection per request.
    assert_eq!(resolver.lookups(), 2);
    assert_eq!(server.connections(), 2);
}

#[tokio::test]
async fn requests_in_a_row_share_one_connection_and_each_is_answered_whole() {
    let server = Server::start().await;
    let net = client(policy(None, Some(&server.origin())), Purpose::Fetch);
    for _ in 0..3 {
        assert_eq!(fetch(&net, &server.url("/")).await.unwrap().text().await.unwrap(), "hello");
    }
    let big = fetch(&net, &server.url("/big")).await.unwrap().bytes().await.unwrap();
    assert_eq!(big.len(), 1024 * 1024);
    assert_eq!(fetch(&net, &server.url("/")).await.unwrap().text().await.unwrap(), "hello");
    assert_eq!(server.connections(), 1, "the connection is kept between requests");
    // A response dropped before its end takes its connection with it: the next gets a new one.
    let mut endless = fetch(&net, &server.url("/endless")).await.unwrap();
    assert!(endless.chunk().await.unwrap().is_some());
    drop(endless);
    assert_eq!(fetch(&net, &server.url("/")).await.unwrap().text().await.unwrap(), "hello");
    assert_eq!(server.connections(), 2);
    let seen = server.requests();
    let first = &seen[0].headers;
    assert_eq!(first.get("host").unwrap().to_str().unwrap(), server.addr.to_string());
    assert!(first.get("user-agent").unwrap().to_str().unwrap().starts_with("llooma/"));
    assert_eq!(first.get("accept").unwrap(), "*/*");
}

/// What a hand-written server saw: connections accepted, and connections the client closed.
#[derive(Clone, Default)]
struct RawCounts {
    accepted: Arc<std::sync::atomic::AtomicUsize>,
    closed_by_client: Arc<std::sync::atomic::AtomicUsize>,
}

impl RawCounts {
    fn accepted(&self) -> usize {
        self.accepted.load(std::sync::atomic::Ordering::SeqCst)
    }

    fn closed_by_client(&self) -> usize {
        self.closed_by_client.load(std::sync::atomic::Ordering::SeqCst)
    }
}

/// A server written by hand that gives every request `answer`, on kept-alive connections. With
/// `close_after`, it closes each connection that long after answering, without a word: what a
/// load balancer does to idle connections.
async fn raw_server(
    answer: &'static str,
    close_after: Option<Duration>,
) -> (std::net::SocketAddr, RawCounts) {
    use tokio::io::{AsyncReadExt, AsyncWriteExt};
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let addr = listener.local_addr().unwrap();
    let counts = RawCounts::default();
    let counted = counts.clone();
    tokio::spawn(async move {
        loop {
            let (mut socket, _) = listener.accept().await.unwrap();
            counted.accepted.fetch_add(1, std::sync::atomic::Ordering::SeqCst);
            let counted = counted.clone();
            tokio::spawn(async move {
                loop {
                    let mut request = Vec::new();
                    let mut buf = [0u8; 1024];
                    while !request.windows(4).any(|w| w == b"\r\n\r\n") {
                        match socket.read(&mut buf).await {
                            Ok(0) | Err(_) => {
                                counted
                                    .closed_by_client
                                    .fetch_add(1, std::sync::atomic::Ordering::SeqCst);
                                return;
                            }
                            Ok(n) => request.extend_from_slice(&buf[..n]),
                        }
                    }
                    // One write: the body's end arrives with its last bytes.
                    socket.write_all(answer.as_bytes()).await.unwrap();
                    if let Some(after) = close_after {
                        tokio::time::sleep(after).await;
                        return;
                    }
                }
            });
        }
    });
    (addr, counts)
}

/// This process's TCP sockets to `port` in the state CLOSE_WAIT: their server closed them and
/// this side has not let go yet.
fn close_waiting_to(port: u16) -> usize {
    let mut count = 0;
    for table in ["/proc/self/net/tcp", "/proc/self/net/tcp6"] {
        let Ok(text) = std::fs::read_to_string(table) else { continue };
        for line in text.lines().skip(1) {
            let fields: Vec<&str> = line.split_whitespace().collect();
            let remote_port = fields[2].rsplit(':').next().unwrap();
            if u16::from_str_radix(remote_port, 16).unwrap() == port && fields[3] == "08" {
                count += 1;
            }
        }
    }
    count
}

/// Waits up to `within` for `done`, checking every 20 ms; whether it happened.
async fn eventually(within: Duration, mut done: impl FnMut() -> bool) -> bool {
    let until = tokio::time::Instant::now() + within;
    while tokio::time::Instant::now() < until {
        if done() {
            return true;
        }
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
    done()
}

#[tokio::test]
async fn a_kept_connection_unused_past_the_idle_timeout_is_closed() {
    let (addr, counts) = raw_server(HELLO, None).await;
    let origin = format!("http://{addr}");
    let net = NetClient::builder(policy(None, Some(&origin)), Purpose::Fetch)
        .idle_timeout(Duration::from_millis(300))
        .build()
        .unwrap();
    for _ in 0..2 {
        let answer = fetch(&net, &format!("{origin}/")).await.unwrap().text().await.unwrap();
        assert_eq!(answer, "hello");
    }
    assert_eq!(counts.accepted(), 1, "kept and reused while fresh");
    // Nobody asks anything more: the client closes it on its own.
    assert!(
        eventually(Duration::from_secs(5), || counts.closed_by_client() == 1).await,
        "the idle connection is still open"
    );
    let answer = fetch(&net, &format!("{origin}/")).await.unwrap().text().await.unwrap();
    assert_eq!(answer, "hello");
    assert_eq!(counts.accepted(), 2);
}

#[tokio::test]
async fn a_kept_connection_its_server_closed_is_let_go_without_another_request() {
    let (addr, counts) = raw_server(HELLO, Some(Duration::from_millis(50))).await;
    let origin = format!("http://{addr}");
    let net = client(policy(None, Some(&origin)), Purpose::Fetch);
    let answer = fetch(&net, &format!("{origin}/")).await.unwrap().text().await.unwrap();
    assert_eq!(answer, "hello");
    assert!(eventually(Duration::from_secs(2), || close_waiting_to(addr.port()) == 1).await);
    // The default idle timeout is 90 s; the close is seen long before.
    assert!(
        eventually(Duration::from_secs(10), || close_waiting_to(addr.port()) == 0).await,
        "the socket the server closed is still held"
    );
    assert_eq!(counts.accepted(), 1);
}

#[tokio::test]
async fn a_name_whose_first_address_never_answers_is_reached_through_the_next() {
    // 127.0.0.2 takes one connection into a backlog of none and then never answers again.
    let dead = socket2::Socket::new(socket2::Domain::IPV4, socket2::Type::STREAM, None).unwrap();
    dead.bind(&"127.0.0.2:0".parse::<std::net::SocketAddr>().unwrap().into()).unwrap();
    dead.listen(0).unwrap();
    let port = dead.local_addr().unwrap().as_socket().unwrap().port();
    let _filler = std::net::TcpStream::connect(("127.0.0.2", port)).unwrap();
    let live = Server::start_on(format!("127.0.0.1:{port}").parse().unwrap()).await;

    let origin = format!("http://dual.test:{port}");
    let resolver = ScriptedResolver::new(&[&["127.0.0.2", "127.0.0.1"]]);
    let net = NetClient::builder(policy(None, Some(&origin)), Purpose::Fetch)
        .resolver(resolver)
        // Trying the addresses one after another, the dead one would take all of it.
        .connect_timeout(Duration::from_secs(3))
        .build()
        .unwrap();
    let answer = fetch(&net, &format!("{origin}/")).await.unwrap().text().await.unwrap();
    assert_eq!(answer, "hello");
    assert_eq!(live.connections(), 1);
    drop(dead);
}

#[tokio::test]
async fn when_every_address_is_dead_the_connect_timeout_says_so() {
    let dead = socket2::Socket::new(socket2::Domain::IPV4, socket2::Type::STREAM, None).unwrap();
    dead.bind(&"127.0.0.3:0".parse::<std::net::SocketAddr>().unwrap().into()).unwrap();
    dead.listen(0).unwrap();
    let port = dead.local_addr().unwrap().as_socket().unwrap().port();
    let _filler = std::net::TcpStream::connect(("127.0.0.3", port)).unwrap();
    let origin = format!("http://dead.test:{port}");
    let resolver = ScriptedResolver::new(&[&["127.0.0.3", "127.0.0.3"]]);
    let net = NetClient::builder(policy(None, Some(&origin)), Purpose::Fetch)
        .resolver(resolver)
        .connect_timeout(Duration::from_millis(800))
        .build()
        .unwrap();
    let err = fetch(&net, &format!("{origin}/")).await.unwrap_err();
    assert!(matches!(err, NetError::Timeout { .. }), "{err:?}");
}

const HELLO: &str = "HTTP/1.1 200 OK\r\ncontent-length: 5\r\n\r\nhello";

#[tokio::test]
async fn a_kept_connection_the_server_closed_meanwhile_is_not_reused() {
    let (addr, counts) = raw_server(HELLO, Some(Duration::from_millis(50))).await;
    let origin = format!("http://{addr}");
    let net = client(policy(None, Some(&origin)), Purpose::Fetch);
    for _ in 0..3 {
        let answer = fetch(&net, &format!("{origin}/")).await.unwrap().text().await.unwrap();
        assert_eq!(answer, "hello");
        tokio::time::sleep(Duration::from_millis(200)).await;
    }
    assert_eq!(counts.accepted(), 3);
}

/// The server closes a kept connection while the runtime is busy elsewhere (here: blocked), so
/// its reactor has not seen the close when the next request starts: the request must still go
/// out on a new connection, not fail on the closed one.
#[tokio::test]
async fn a_kept_connection_closed_while_the_runtime_was_busy_is_not_reused() {
    use std::io::Write;
    let listener = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
    let addr = listener.local_addr().unwrap();
    // On a thread of its own: it answers once per connection and closes at once.
    std::thread::spawn(move || {
        for socket in listener.incoming() {
            let mut socket = socket.unwrap();
            if read_request_head(&mut socket) {
                let _ = socket.write_all(HELLO.as_bytes());
            }
        }
    });
    let origin = format!("http://{addr}");
    let net = client(policy(None, Some(&origin)), Purpose::Fetch);
    for _ in 0..3 {
        let answer = fetch(&net, &format!("{origin}/")).await.unwrap().text().await.unwrap();
        assert_eq!(answer, "hello");
        // Blocks the test's runtime: its reactor cannot learn of the close meanwhile.
        std::thread::sleep(Duration::from_millis(100));
    }
}

/// A model's stream is read up to its own end marker, and the response dropped there, before
/// the chunked body's terminator is read: the connection is still kept when the terminator had
/// arrived with the rest.
#[tokio::test]
async fn a_response_dropped_after_its_last_bytes_arrived_keeps_its_connection() {
    let (addr, counts) = raw_server(
        "HTTP/1.1 200 OK\r\ntransfer-encoding: chunked\r\n\r\n\
         e\r\ndata: [DONE]\n\n\r\n0\r\n\r\n",
        None,
    )
    .await;
    let origin = format!("http://{addr}");
    let net = client(policy(None, Some(&origin)), Purpose::Fetch);
    for _ in 0..3 {
        let mut stream = fetch(&net, &format!("{origin}/")).await.unwrap();
        assert_eq!(stream.chunk().await.unwrap().unwrap(), "data: [DONE]\n\n");
        drop(stream);
    }
    assert_eq!(counts.accepted(), 1);
}

#[tokio::test]
async fn redirect_to_a_private_address_is_refused() {
    let entry = Server::start().await;
    let inside = Server::start().await;
    let net = client(policy(None, Some(&entry.origin())), Purpose::Fetch);
    let to_inside = entry.url(&format!("/redirect?status=302&to={}", inside.url("/admin")));

    match fetch(&net, &to_inside).await {
        Err(NetError::Redirect(refused)) => {
            assert!(
                matches!(refused.problem, RedirectProblem::Policy(Refusal::NotOnAllowList { .. })),
                "{refused}"
            );
        }
        other => panic!("expected a refused redirect, got {other:?}"),
    }
    assert_eq!(inside.connections(), 0);
}

#[tokio::test]
async fn endless_redirects_stop_after_five_hops() {
    let server = Server::start().await;
    let net = client(policy(None, Some(&server.origin())), Purpose::Fetch);
    // Without `to`, the server redirects to the very same URL, forever.
    let forever = server.url("/redirect?status=307");
    match fetch(&net, &forever).await {
        Err(NetError::Redirect(refused)) => {
            assert_eq!(refused.problem, RedirectProblem::TooMany { max: 5 })
        }
        other => panic!("expected too many redirects, got {other:?}"),
    }
    // The first request and five redirects.
    assert_eq!(server.requests().len(), 6);
}

fn urlencode(s: &str) -> String {
    url::form_urlencoded::byte_serialize(s.as_bytes()).collect()
}

#[tokio::test]
async fn cross_origin_redirect_does_not_carry_credentials() {
    let a = Server::start().await;
    let b = Server::start().await;
    let both = format!("{},{}", a.origin(), b.origin());
    let api_key = HeaderName::from_static("x-api-key");
    let net = NetClient::builder(policy(Some(&both), None), Purpose::Mcp)
        .auth_header(api_key.clone())
        .build()
        .unwrap();
    let send = |url: String| {
        net.send(
            net.post(&url)
                .unwrap()
                .header(AUTHORIZATION, "Bearer secret-token")
                .header(&api_key, "secret-key")
                .header("x-trace", "kept")
                .body("{}"),
        )
    };

    // Same origin: the credentials stay.
    let same = a.url(&format!("/redirect?status=307&to={}", urlencode("/echo")));
    assert_eq!(send(same).await.unwrap().status(), 200);
    let echo = a.requests().into_iter().find(|r| r.path == "/echo").unwrap();
    assert_eq!(echo.headers[AUTHORIZATION], "Bearer secret-token");
    assert_eq!(echo.headers["x-api-key"], "secret-key");

    // Another origin: they are dropped, other headers are not.
    let cross = a.url(&format!("/redirect?status=307&to={}", urlencode(&b.url("/echo"))));
    assert_eq!(send(cross.clone()).await.unwrap().status(), 200);
    let seen = b.requests();
    assert_eq!(seen.len(), 1);
    assert!(seen[0].headers.get(AUTHORIZATION).is_none());
    assert!(seen[0].headers.get("x-api-key").is_none());
    assert_eq!(seen[0].headers["x-trace"], "kept");

    // A 303 turns the POST into a GET without its body, and still drops them.
    let see_other = a.url(&format!("/redirect?status=303&to={}", urlencode(&b.url("/echo"))));
    assert_eq!(send(see_other).await.unwrap().status(), 200);
    let seen = b.requests();
    assert_eq!(seen.len(), 2);
    assert_eq!(seen[1].method, "GET");
    assert!(seen[1].headers.get(AUTHORIZATION).is_none());
    assert!(seen[1].headers.get("x-api-key").is_none());
    assert!(seen[1].headers.get("content-length").is_none_or(|len| len == "0"));
}

#[tokio::test]
async fn endless_body_stops_at_the_cap() {
    let server = Server::start().await;
    let net = NetClient::builder(policy(None, Some(&server.origin())), Purpose::Fetch)
        .max_response_bytes(64 * 1024)
        .build()
        .unwrap();

    let response = fetch(&net, &server.url("/endless")).await.unwrap();
    match response.bytes().await {
        Err(NetError::BodyTooLarge { limit, .. }) => assert_eq!(limit, 64 * 1024),
        other => panic!("expected the cap, got {:?}", other.map(|b| b.len())),
    }

    // Read chunk by chunk, as a streaming caller would.
    let mut response = fetch(&net, &server.url("/endless")).await.unwrap();
    let mut received = 0;
    let err = loop {
        match response.chunk().await {
            Ok(Some(chunk)) => received += chunk.len(),
            Ok(None) => panic!("an endless body ended"),
            Err(err) => break err,
        }
    };
    assert!(received <= 64 * 1024);
    assert!(matches!(err, NetError::BodyTooLarge { .. }));
    assert!(err.to_string().contains("larger than the limit of 65536 bytes"), "{err}");
    // And it stays stopped.
    assert!(matches!(response.chunk().await, Err(NetError::BodyTooLarge { .. })));
}

#[tokio::test]
async fn oversized_body_is_refused_from_its_content_length() {
    let server = Server::start().await;
    let net = NetClient::builder(policy(None, Some(&server.origin())), Purpose::Fetch)
        .max_response_bytes(1000)
        .build()
        .unwrap();
    let response = fetch(&net, &server.url("/big")).await.unwrap();
    assert!(matches!(response.bytes().await, Err(NetError::BodyTooLarge { limit: 1000, .. })));
    let small = fetch(&net, &server.url("/")).await.unwrap();
    assert_eq!(small.bytes().await.unwrap(), "hello");
}

#[tokio::test]
async fn slow_server_hits_the_total_timeout() {
    let server = Server::start().await;
    let net = NetClient::builder(policy(None, Some(&server.origin())), Purpose::Fetch)
        .total_timeout(Some(Duration::from_millis(300)))
        .build()
        .unwrap();
    assert!(matches!(fetch(&net, &server.url("/slow")).await, Err(NetError::Timeout { .. })));
    // A request's own timeout holds under the client's.
    let patient = client(policy(None, Some(&server.origin())), Purpose::Fetch);
    let request = patient.get(&server.url("/slow")).unwrap().timeout(Duration::from_millis(300));
    assert!(matches!(patient.send(request).await, Err(NetError::Timeout { .. })));
}

#[tokio::test]
async fn other_schemes_and_userinfo_are_refused() {
    let server = Server::start().await;
    let net = client(policy(None, Some(&server.origin())), Purpose::Fetch);
    let with_userinfo = format!("http://user:pw@{}/", server.addr);
    assert!(matches!(
        fetch(&net, &with_userinfo).await,
        Err(NetError::Refused { reason: Refusal::Userinfo, .. })
    ));
    assert_eq!(server.connections(), 0);
}

/// HTTP libraries read `HTTP_PROXY` and friends when a client is built, so the variables must
/// be in the environment of the process that builds it. Setting them in this process would need
/// `unsafe` (and would race other tests), so the test runs itself again as a child with the
/// variables set. In the child, a plain `reqwest::Client` is the control: it must go through
/// the proxy, proving the variables took effect; our clients must not.
#[tokio::test]
async fn environment_proxy_is_ignored() {
    if let Ok(target) = std::env::var("LLOOMA_NET_TEST_PROXY_CHILD") {
        return proxy_child(&target).await;
    }
    let proxy = ProxyCounter::start().await;
    let server = Server::start().await;
    let proxy_url = format!("http://{}", proxy.addr);
    let mut child = tokio::process::Command::new(std::env::current_exe().unwrap());
    child
        .args(["environment_proxy_is_ignored", "--exact", "--nocapture"])
        .env("LLOOMA_NET_TEST_PROXY_CHILD", server.origin())
        .env_remove("NO_PROXY")
        .env_remove("no_proxy");
    for var in ["HTTP_PROXY", "HTTPS_PROXY", "ALL_PROXY", "http_proxy", "https_proxy", "all_proxy"]
    {
        child.env(var, &proxy_url);
    }
    let output = child.output().await.unwrap();
    assert!(
        output.status.success(),
        "child failed:\n{}\n{}",
        String::from_utf8_lossy(&output.stdout),
        String::from_utf8_lossy(&output.stderr)
    );
    assert!(
        String::from_utf8_lossy(&output.stdout).contains("1 passed"),
        "the child did not run the test"
    );
    // Only the control request reached the proxy.
    assert_eq!(proxy.hits(), 1);
    // Ours reached the server directly.
    assert_eq!(server.requests().len(), 1);
}

async fn proxy_child(origin: &str) {
    let net = client(policy(Some(origin), Some(origin)), Purpose::Fetch);
    let url = format!("{origin}/");
    let via_net = fetch(&net, &url).await.unwrap();
    assert_eq!(via_net.text().await.unwrap(), "hello");
    let control = reqwest::Client::new().get(&url).send().await.unwrap();
    assert_eq!(control.status(), 502, "the control request should have gone to the proxy");
}

#[tokio::test]
async fn check_address_reports_each_resolved_address() {
    let policy = policy(None, None);
    let resolver = ScriptedResolver::new(&[&["93.184.216.34", "10.0.0.5"]]);
    let check =
        check_address(&policy, Purpose::Mcp, "https://mixed.example/mcp", resolver.as_ref()).await;
    assert!(!check.allowed());
    let text = check.to_string();
    let mut lines = text.lines();
    assert_eq!(
        lines.next().unwrap(),
        "refused: host mixed.example resolves to address 10.0.0.5, which is private (10.0.0.0/8); \
         an administrator can allow it by adding its origin (scheme://host:port) to MCP_ALLOWED_ORIGINS"
    );
    assert!(text.contains("  93.184.216.34  allowed (public)"), "{text}");
    assert!(text.contains("  10.0.0.5  refused (private, 10.0.0.0/8)"), "{text}");
    assert_eq!(check.addresses().len(), 2);

    let ok = check_address(&policy, Purpose::Fetch, "http://8.8.8.8/", resolver.as_ref()).await;
    assert!(ok.allowed());
    assert_eq!(ok.to_string().lines().next(), Some("allowed"));

    let listed =
        OutboundPolicy::from_allow_lists(Some("http://gateway.lan:8080"), None, None).unwrap();
    let lan = ScriptedResolver::new(&[&["192.168.1.20"]]);
    let check =
        check_address(&listed, Purpose::Mcp, "http://gateway.lan:8080/mcp", lan.as_ref()).await;
    assert!(check.allowed(), "{check}");
    assert!(check.to_string().contains("192.168.1.20  allowed (its origin is listed)"));
    let check =
        check_address(&listed, Purpose::Mcp, "http://gateway.lan:9090/mcp", lan.as_ref()).await;
    assert!(!check.allowed());
    assert!(
        check
            .to_string()
            .starts_with("refused: origin http://gateway.lan:9090 is not in MCP_ALLOWED_ORIGINS")
    );

    let bad = check_address(&listed, Purpose::Mcp, "not a url", lan.as_ref()).await;
    assert!(bad.to_string().starts_with("refused: not a valid URL"));
}

/// Runs the test `name` of this binary again in a child process with `envs` set, and asserts
/// the child ran it and it passed. For what depends on the process's environment or its
/// process-wide state (the TLS configuration is built once per process).
fn run_as_child(name: &str, envs: &[(&str, &str)]) {
    let mut child = std::process::Command::new(std::env::current_exe().unwrap());
    child.args([name, "--exact", "--nocapture"]).env_remove("SSL_CERT_DIR");
    for (key, value) in envs {
        child.env(key, value);
    }
    let output = child.output().unwrap();
    assert!(
        output.status.success(),
        "child failed:\n{}\n{}",
        String::from_utf8_lossy(&output.stdout),
        String::from_utf8_lossy(&output.stderr)
    );
    assert!(
        String::from_utf8_lossy(&output.stdout).contains("1 passed"),
        "the child did not run the test"
    );
}

/// https through the shared TLS configuration: the server's certificate is checked against the
/// system's store (a CA the system does not know is refused), and with the test CA as the
/// store (`SSL_CERT_FILE`, in a child) the client gets through, speaking HTTP/1.1 by ALPN.
#[tokio::test]
async fn https_is_verified_against_the_system_store_and_negotiates_http1() {
    if let Ok(origin) = std::env::var("LLOOMA_NET_TEST_TLS_CHILD") {
        let net = client(policy(None, Some(&origin)), Purpose::Fetch);
        let url = format!("{origin}/");
        assert_eq!(fetch(&net, &url).await.unwrap().text().await.unwrap(), "hello");
        return;
    }
    let server = TlsServer::start();
    let origin = server.origin();

    let net = client(policy(None, Some(&origin)), Purpose::Fetch);
    let err = fetch(&net, &format!("{origin}/")).await.unwrap_err();
    assert!(matches!(err, NetError::Connect { .. }), "{err:?}");
    assert!(format!("{err:?}").contains("UnknownIssuer"), "not a certificate error: {err:?}");
    assert!(server.alpn().is_empty());

    let child_origin = origin.clone();
    tokio::task::spawn_blocking(move || {
        run_as_child(
            "https_is_verified_against_the_system_store_and_negotiates_http1",
            &[("LLOOMA_NET_TEST_TLS_CHILD", &child_origin), ("SSL_CERT_FILE", TEST_CA)],
        )
    })
    .await
    .unwrap();
    assert_eq!(server.alpn(), vec![Some(b"http/1.1".to_vec())]);
}

/// Counts the log lines in which rustls-platform-verifier reports reading the system's store.
struct LoadCounter(std::sync::atomic::AtomicUsize);

impl log::Log for LoadCounter {
    fn enabled(&self, _: &log::Metadata<'_>) -> bool {
        true
    }

    fn log(&self, record: &log::Record<'_>) {
        if record.target().starts_with("rustls_platform_verifier")
            && record.args().to_string().contains("CA root certificates")
        {
            self.0.fetch_add(1, std::sync::atomic::Ordering::SeqCst);
        }
    }

    fn flush(&self) {}
}

static LOADS: LoadCounter = LoadCounter(std::sync::atomic::AtomicUsize::new(0));

/// Reading the system's certificates is most of what building a client used to cost; it
/// happens once per process, however many clients are built.
/// In a child, so that the count starts with the process.
#[test]
fn system_certificates_are_read_once_per_process() {
    if std::env::var_os("LLOOMA_NET_TEST_LOADS_CHILD").is_some() {
        log::set_logger(&LOADS).unwrap();
        log::set_max_level(log::LevelFilter::Debug);
        let policy = policy(None, None);
        for purpose in [Purpose::Provider, Purpose::Fetch, Purpose::Mcp, Purpose::Search] {
            for _ in 0..20 {
                client(Arc::clone(&policy), purpose);
            }
        }
        assert_eq!(LOADS.0.load(std::sync::atomic::Ordering::SeqCst), 1);
        return;
    }
    run_as_child(
        "system_certificates_are_read_once_per_process",
        &[("LLOOMA_NET_TEST_LOADS_CHILD", "1"), ("SSL_CERT_FILE", TEST_CA)],
    );
}
