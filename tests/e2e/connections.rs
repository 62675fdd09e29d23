//! Idle connections cannot take the server down: under systemd's usual soft limit of 1024 open
//! files, a crowd of connections that send nothing leaves `/healthz` and sign-in answering;
//! a connection that sends no request is closed after the header-read timeout, a kept-alive one
//! after the keep-alive timeout, and an event stream stays open however long it runs.

use std::net::SocketAddr;
use std::process::Command;
use std::time::{Duration, Instant};

use sea_orm::{ConnectionTrait, Statement};
use serde_json::json;
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::TcpStream;

use crate::support::{Events, PASSWORD, Server, Tab, TestDb};

/// What the attacker of the defect report held open.
const IDLE_CONNECTIONS: usize = 1100;

/// The server's `ip:port`.
fn address(server: &Server) -> SocketAddr {
    server.base.trim_start_matches("http://").parse().unwrap()
}

/// (soft, hard) limit on open files of this process, from /proc.
fn open_files_limits(pid: &str) -> (u64, u64) {
    let text = std::fs::read_to_string(format!("/proc/{pid}/limits")).unwrap();
    let line = text.lines().find(|l| l.starts_with("Max open files")).unwrap();
    let numbers: Vec<u64> =
        line.split_whitespace().filter_map(|word| word.parse().ok()).take(2).collect();
    (numbers[0], numbers[1])
}

/// This test holds more than 1,024 sockets itself: under the same systemd default as the server
/// it raises its own soft limit first (through `prlimit`, as the test may not use `unsafe`).
fn make_room_for_sockets_here() {
    let (soft, hard) = open_files_limits("self");
    let needed = IDLE_CONNECTIONS as u64 + 200;
    if soft >= needed {
        return;
    }
    assert!(hard >= needed, "this test needs {needed} open files; the hard limit is {hard}");
    let status = Command::new("prlimit")
        .arg(format!("--pid={}", std::process::id()))
        .arg(format!("--nofile={hard}:{hard}"))
        .status()
        .unwrap();
    assert!(status.success());
}

/// Opens connections that send nothing, and keeps them.
async fn idle_crowd(address: SocketAddr) -> Vec<TcpStream> {
    let mut crowd = Vec::with_capacity(IDLE_CONNECTIONS);
    for n in 0..IDLE_CONNECTIONS {
        let stream = tokio::time::timeout(Duration::from_secs(5), TcpStream::connect(address))
            .await
            .unwrap_or_else(|_| {
                panic!("connection {n} was not taken in: the server stopped accepting")
            })
            .unwrap();
        crowd.push(stream);
    }
    // Let the server take in the last ones before the checks.
    tokio::time::sleep(Duration::from_millis(500)).await;
    crowd
}

/// `/healthz` on a fresh connection, within a second.
async fn health_answers(base: &str) {
    let http = reqwest::Client::builder().no_proxy().build().unwrap();
    let reply =
        tokio::time::timeout(Duration::from_secs(1), http.get(format!("{base}/healthz")).send())
            .await
            .expect("/healthz did not answer within a second")
            .unwrap();
    assert_eq!(reply.status(), 200);
    assert_eq!(reply.text().await.unwrap(), "ok");
}

/// Signs in on a fresh connection; returns how long it took.
async fn sign_in(base: &str, limit: Duration) -> Duration {
    let started = Instant::now();
    let mut tab = Tab::new(base);
    let reply = tokio::time::timeout(limit, tab.login("root", PASSWORD))
        .await
        .unwrap_or_else(|_| panic!("sign-in did not answer within {limit:?}"));
    assert_eq!(reply.status, 200, "{reply:?}");
    started.elapsed()
}

/// The crowd arrives, then health checks and sign-in still answer.
async fn survives_an_idle_crowd(server: &Server) {
    let mut root = Tab::new(&server.base);
    assert_eq!(root.register("root", PASSWORD).await.status, 201);
    // Sign-in hashes the password (argon2, tens of milliseconds optimised, more in a debug build
    // on a busy machine); the bound is "at most a second more than without the crowd".
    let usual = sign_in(&server.base, Duration::from_secs(30)).await;

    let crowd = idle_crowd(address(server)).await;
    health_answers(&server.base).await;
    sign_in(&server.base, usual + Duration::from_secs(1)).await;
    health_answers(&server.base).await;
    drop(crowd);
}

#[tokio::test]
async fn an_idle_crowd_under_a_soft_limit_of_1024_leaves_health_and_sign_in_answering() {
    make_room_for_sockets_here();
    let (_, hard) = open_files_limits("self");
    let db = TestDb::new();
    let server = Server::start_with_open_files(&db, &format!("1024:{hard}"), &[]);
    survives_an_idle_crowd(&server).await;
    let log = server.log_text();
    assert!(log.contains("raised the soft limit on open files"), "{log}");
}

#[tokio::test]
async fn when_the_hard_limit_is_1024_the_connection_cap_makes_room_for_new_requests() {
    make_room_for_sockets_here();
    let db = TestDb::new();
    // The soft limit cannot be raised: the connection cap stays below it, and at the cap the
    // connection idle the longest makes room for the new one.
    let server = Server::start_with_open_files(&db, "1024:1024", &[]);
    survives_an_idle_crowd(&server).await;
    let log = server.log_text();
    let warnings = log.lines().filter(|l| l.contains("connection cap reached")).count();
    // One warning for the crowd, not one per connection.
    assert!((1..=3).contains(&warnings), "{warnings} warnings:\n{log}");
    assert!(!log.contains("Too many open files"), "{log}");
}

/// Clients that send a sign-in's head and then its body one byte every two seconds, each on a
/// task of its own, until the server closes their connection.
async fn trickling_crowd(server: &Server) -> Vec<tokio::task::JoinHandle<()>> {
    let address = address(server);
    let head = format!(
        "POST /api/v1/auth/login HTTP/1.1\r\nhost: {address}\r\norigin: {}\r\n\
         content-type: application/json\r\ncontent-length: 100000\r\n\r\n",
        server.base
    );
    let mut crowd = Vec::with_capacity(IDLE_CONNECTIONS);
    let sent = std::sync::Arc::new(std::sync::atomic::AtomicUsize::new(0));
    for _ in 0..IDLE_CONNECTIONS {
        let head = head.clone();
        let sent = sent.clone();
        crowd.push(tokio::spawn(async move {
            let Ok(mut stream) = TcpStream::connect(address).await else { return };
            if stream.write_all(head.as_bytes()).await.is_err() {
                return;
            }
            sent.fetch_add(1, std::sync::atomic::Ordering::SeqCst);
            loop {
                tokio::time::sleep(Duration::from_secs(2)).await;
                if stream.write_all(b" ").await.is_err() {
                    return;
                }
            }
        }));
    }
    // The crowd is in place (its heads sent, those over the cap turned away) before anyone
    // else asks anything.
    let until = tokio::time::Instant::now() + Duration::from_secs(10);
    while sent.load(std::sync::atomic::Ordering::SeqCst) < IDLE_CONNECTIONS
        && tokio::time::Instant::now() < until
    {
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
    tokio::time::sleep(Duration::from_millis(500)).await;
    crowd
}

/// Repeats `/healthz` on fresh connections until it answers, at most until `deadline`.
async fn health_answers_by(base: &str, deadline: tokio::time::Instant) -> bool {
    let http = reqwest::Client::builder().no_proxy().pool_max_idle_per_host(0).build().unwrap();
    while tokio::time::Instant::now() < deadline {
        let asked = http.get(format!("{base}/healthz")).send();
        if let Ok(Ok(reply)) = tokio::time::timeout(Duration::from_secs(1), asked).await
            && reply.status() == 200
        {
            return true;
        }
        tokio::time::sleep(Duration::from_millis(250)).await;
    }
    false
}

#[tokio::test]
async fn clients_trickling_their_bodies_under_a_hard_limit_of_1024_are_cut_off() {
    make_room_for_sockets_here();
    let db = TestDb::new();
    let server = Server::start_with_open_files(&db, "1024:1024", &[]);
    let mut root = Tab::new(&server.base);
    assert_eq!(root.register("root", PASSWORD).await.status, 201);

    let arrived = tokio::time::Instant::now();
    let crowd = trickling_crowd(&server).await;
    // Held: every connection the server may serve is busy with a body that hardly moves.
    assert!(
        !health_answers_by(&server.base, tokio::time::Instant::now() + Duration::from_secs(2))
            .await,
        "the crowd did not fill the server"
    );
    assert!(
        health_answers_by(&server.base, arrived + Duration::from_secs(30)).await,
        "/healthz did not answer within 30 s of the trickling crowd"
    );
    sign_in(&server.base, Duration::from_secs(10)).await;
    for client in crowd {
        client.abort();
    }
    let log = server.log_text();
    assert!(!log.contains("Too many open files"), "{log}");
}

/// Reads until the server closes the connection, at most `limit`; whether it did.
async fn closed_within(stream: &mut TcpStream, limit: Duration) -> bool {
    let mut buffer = [0u8; 4096];
    let deadline = tokio::time::Instant::now() + limit;
    loop {
        match tokio::time::timeout_at(deadline, stream.read(&mut buffer)).await {
            Err(_) => return false,
            Ok(Ok(0) | Err(_)) => return true,
            Ok(Ok(_)) => {}
        }
    }
}

/// Sends a keep-alive `GET /healthz` on `stream` and reads its answer.
async fn health_on(stream: &mut TcpStream) {
    let address = stream.peer_addr().unwrap();
    let request = format!("GET /healthz HTTP/1.1\r\nHost: {address}\r\n\r\n");
    stream.write_all(request.as_bytes()).await.unwrap();
    let mut answer = Vec::new();
    let mut buffer = [0u8; 1024];
    while !answer.ends_with(b"\r\n\r\nok") {
        let n = tokio::time::timeout(Duration::from_secs(5), stream.read(&mut buffer))
            .await
            .expect("no answer to /healthz")
            .unwrap();
        assert!(n > 0, "the connection was closed instead of answered");
        answer.extend_from_slice(&buffer[..n]);
    }
    assert!(answer.starts_with(b"HTTP/1.1 200"), "{}", String::from_utf8_lossy(&answer));
}

/// A call waiting for an answer, as a turn of the live replica would have stored it.
async fn pending_call(db: &TestDb, account_id: &str) -> String {
    let conn = crate::support::connect(db).await;
    let backend = conn.get_database_backend();
    let replica: String = conn
        .query_all_raw(Statement::from_string(
            backend,
            "SELECT id FROM replicas ORDER BY started_at_ms DESC",
        ))
        .await
        .unwrap()[0]
        .try_get_by_index(0)
        .unwrap();
    let id = uuid::Uuid::new_v4().to_string();
    let now = i64::try_from(
        std::time::SystemTime::now().duration_since(std::time::UNIX_EPOCH).unwrap().as_millis(),
    )
    .unwrap();
    conn.execute_raw(Statement::from_string(
        backend,
        format!(
            "INSERT INTO approval_calls (id, account_id, conversation_id, turn_id, server_id, server_label, \
             server_address, tool_name, model_tool_name, tool_description, tool_definition_hash, arguments_json, \
             arguments_sha256, created_at_ms, deadline_ms, state, remember, owner_replica) VALUES \
             ('{id}', '{account_id}', 'c1', 't1', 's1', 'bank', 'https://bank.example/mcp', 'pay', 'mcp_bank_pay', \
             'Pays someone.', 'h', '{{}}', 'x', {now}, {deadline}, 'pending', FALSE, '{replica}')",
            deadline = now + 120_000
        ),
    ))
    .await
    .unwrap();
    conn.close().await.unwrap();
    id
}

#[tokio::test]
async fn idle_connections_are_closed_and_event_streams_are_not() {
    let db = TestDb::new();
    let server = Server::start_with_open_files(
        &db,
        "1024:1024",
        &[("LLOOMA_HEADER_READ_TIMEOUT_SECS", "1"), ("LLOOMA_KEEP_ALIVE_TIMEOUT_SECS", "3")],
    );

    // A connection that sends nothing, and one that never finishes its request head.
    let mut silent = TcpStream::connect(address(&server)).await.unwrap();
    let mut slow = TcpStream::connect(address(&server)).await.unwrap();
    slow.write_all(format!("GET /healthz HTTP/1.1\r\nHost: {}", address(&server)).as_bytes())
        .await
        .unwrap();
    assert!(closed_within(&mut silent, Duration::from_secs(5)).await, "a silent one stays open");
    assert!(closed_within(&mut slow, Duration::from_secs(5)).await, "a half-sent head stays open");

    // A kept-alive connection may wait longer than the header-read timeout for its next
    // request, but not longer than the keep-alive timeout.
    let mut kept = TcpStream::connect(address(&server)).await.unwrap();
    health_on(&mut kept).await;
    tokio::time::sleep(Duration::from_millis(1500)).await;
    health_on(&mut kept).await;
    assert!(closed_within(&mut kept, Duration::from_secs(8)).await, "an idle one stays open");

    // A signed-in tab's event stream is a response being written, not an idle connection: it
    // outlives both timeouts and still carries news.
    let mut tab = Tab::new(&server.base);
    let me = tab.register("root", PASSWORD).await;
    let account_id = me.json["account"]["id"].as_str().unwrap().to_owned();
    let id = pending_call(&db, &account_id).await;
    let mut events = Events::open(&tab, "/api/v1/approvals/events", None).await;
    let (name, data) = events.next().await;
    assert_eq!((name.as_str(), data["cards"][0]["id"].as_str()), ("pending", Some(id.as_str())));
    tokio::time::sleep(Duration::from_secs(5)).await;
    let mut other_tab = Tab::new(&server.base);
    other_tab.login("root", PASSWORD).await;
    let answer =
        other_tab.post(&format!("/api/v1/approvals/{id}/answer"), json!({"choice": "allow"})).await;
    assert_eq!(answer.status, 200, "{answer:?}");
    let (name, data) = events.next().await;
    assert_eq!((name.as_str(), data["id"].as_str()), ("answered", Some(id.as_str())));
}
