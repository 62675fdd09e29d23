//! The sessions `McpClient::call_tool_for` keeps between calls: reused per server, address and
//! token; replaced (and the call sent once more) only when the server did not run the call;
//! dropped by `forget`, by a failed or abandoned call, and when idle too long.

use std::process::{Child, Command, Stdio};
use std::sync::Arc;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::time::{Duration, Instant};

use llooma_mcp_client::{McpConfig, McpError};
use llooma_vault::Secret;
use serde_json::{Value, json};

use crate::support::{
    Reply, client_for, free_port, hostile, hostile_with_sessions, peer_path, quick_config,
    start_gateway,
};

fn ok(text: &str) -> Value {
    json!({"content": [{"type": "text", "text": text}]})
}

#[tokio::test]
async fn calls_to_a_server_share_one_handshake() {
    let server = hostile(|method, _| match method {
        "tools/call" => Reply::Result(ok("done")),
        _ => Reply::Default,
    })
    .await;
    let client = client_for(server.port(), quick_config());
    for _ in 0..3 {
        let result = client.call_tool_for("srv", &server.url(), None, "t", json!({})).await;
        assert_eq!(result.unwrap().text_for_model(), "done");
    }
    assert_eq!(server.count("tools/call"), 3);
    assert_eq!(server.count("server/discover"), 1);
    assert_eq!(server.handshakes(), 1);
    // Clones share the sessions; a call without a server name uses sessions of its own.
    client.clone().call_tool_for("srv", &server.url(), None, "t", json!({})).await.unwrap();
    assert_eq!(server.handshakes(), 1);
    client.call_tool(&server.url(), None, "t", json!({})).await.unwrap();
    client.call_tool(&server.url(), None, "t", json!({})).await.unwrap();
    assert_eq!(server.handshakes(), 2);
}

#[tokio::test]
async fn calls_on_a_kept_session_reuse_its_connection() {
    let server = hostile(|method, _| match method {
        "tools/call" => Reply::Result(ok("done")),
        _ => Reply::Default,
    })
    .await;
    let client = client_for(server.port(), quick_config());
    client.call_tool_for("srv", &server.url(), None, "t", json!({})).await.unwrap();
    let after_first = server.connections();
    for _ in 0..5 {
        client.call_tool_for("srv", &server.url(), None, "t", json!({})).await.unwrap();
    }
    assert_eq!(server.count("tools/call"), 6);
    // The handshake's requests and the stream's GET may each have opened one; the calls after
    // the first opened none.
    assert_eq!(server.connections(), after_first);
    assert!(after_first <= 3, "{after_first}");
}

#[tokio::test]
async fn two_server_names_never_share_a_session() {
    let server = hostile(|method, _| match method {
        "tools/call" => Reply::Result(ok("done")),
        _ => Reply::Default,
    })
    .await;
    let client = client_for(server.port(), quick_config());
    // The same address added by two accounts: two server records, two names.
    client.call_tool_for("alice-server", &server.url(), None, "t", json!({})).await.unwrap();
    client.call_tool_for("bob-server", &server.url(), None, "t", json!({})).await.unwrap();
    assert_eq!(server.handshakes(), 2);
    client.call_tool_for("alice-server", &server.url(), None, "t", json!({})).await.unwrap();
    client.call_tool_for("bob-server", &server.url(), None, "t", json!({})).await.unwrap();
    assert_eq!(server.handshakes(), 2);
}

#[tokio::test]
async fn a_server_that_forgot_the_session_runs_the_call_once_on_a_new_one() {
    let server = hostile_with_sessions(|method, _| match method {
        "tools/call" => Reply::Result(ok("done")),
        _ => Reply::Default,
    })
    .await;
    let client = client_for(server.port(), quick_config());
    client.call_tool_for("srv", &server.url(), None, "t", json!({})).await.unwrap();
    // The server restarts: the kept session's id means nothing to it now.
    server.forget_sessions();
    let result = client.call_tool_for("srv", &server.url(), None, "t", json!({})).await;
    assert_eq!(result.unwrap().text_for_model(), "done");
    // Refused once (404, not run), run once on the new session.
    assert_eq!(server.seen.lock().unwrap().refused, ["tools/call"]);
    assert_eq!(server.count("tools/call"), 2);
    assert_eq!(server.handshakes(), 2);
    // The new session is kept in turn.
    client.call_tool_for("srv", &server.url(), None, "t", json!({})).await.unwrap();
    assert_eq!(server.count("tools/call"), 3);
    assert_eq!(server.handshakes(), 2);
}

#[tokio::test]
async fn a_server_that_refuses_every_session_is_not_asked_again_and_again() {
    let calls = Arc::new(AtomicUsize::new(0));
    let counter = Arc::clone(&calls);
    let server = hostile_with_sessions(move |method, _| match method {
        // After the first call, every session's tools/call gets "session not found".
        "tools/call" if counter.fetch_add(1, Ordering::SeqCst) > 0 => {
            Reply::Status(404, "Session not found")
        }
        "tools/call" => Reply::Result(ok("done")),
        _ => Reply::Default,
    })
    .await;
    let client = client_for(server.port(), quick_config());
    client.call_tool_for("srv", &server.url(), None, "t", json!({})).await.unwrap();
    let started = Instant::now();
    let result = client.call_tool_for("srv", &server.url(), None, "t", json!({})).await;
    assert!(matches!(result, Err(McpError::Disconnected { .. })), "{result:?}");
    assert!(started.elapsed() < Duration::from_secs(5));
    // The kept session and rmcp's own new one, then a session of ours and rmcp's new one:
    // four refusals at most, and nothing ran.
    let refused = server.count("tools/call") - 1;
    assert!((2..=4).contains(&refused), "{refused}");
}

#[tokio::test]
async fn a_call_that_may_have_run_is_never_sent_again() {
    let calls = Arc::new(AtomicUsize::new(0));
    let counter = Arc::clone(&calls);
    let server = hostile(move |method, _| match method {
        // The second call fails on the server's side after it arrived: it may have run.
        "tools/call" if counter.fetch_add(1, Ordering::SeqCst) == 1 => Reply::Status(500, "boom"),
        "tools/call" => Reply::Result(ok("done")),
        _ => Reply::Default,
    })
    .await;
    let client = client_for(server.port(), quick_config());
    client.call_tool_for("srv", &server.url(), None, "t", json!({})).await.unwrap();
    let err = client.call_tool_for("srv", &server.url(), None, "t", json!({})).await.unwrap_err();
    assert!(matches!(err, McpError::HttpStatus { status: 500, .. }), "{err:?}");
    assert_eq!(server.count("tools/call"), 2);
    // Its session is not kept: the next call connects anew.
    client.call_tool_for("srv", &server.url(), None, "t", json!({})).await.unwrap();
    assert_eq!(server.count("tools/call"), 3);
    assert_eq!(server.handshakes(), 2);
}

#[tokio::test]
async fn a_timed_out_call_is_not_sent_again_and_its_session_is_not_kept() {
    let calls = Arc::new(AtomicUsize::new(0));
    let counter = Arc::clone(&calls);
    let server = hostile(move |method, _| match method {
        "tools/call" if counter.fetch_add(1, Ordering::SeqCst) == 1 => Reply::Hang,
        "tools/call" => Reply::Result(ok("done")),
        _ => Reply::Default,
    })
    .await;
    let client = client_for(server.port(), quick_config());
    client.call_tool_for("srv", &server.url(), None, "t", json!({})).await.unwrap();
    let err = client.call_tool_for("srv", &server.url(), None, "t", json!({})).await.unwrap_err();
    assert!(matches!(err, McpError::Timeout { .. }), "{err:?}");
    assert_eq!(server.count("tools/call"), 2);
    client.call_tool_for("srv", &server.url(), None, "t", json!({})).await.unwrap();
    assert_eq!(server.handshakes(), 2);
}

#[tokio::test]
async fn a_kept_session_refused_with_400_is_replaced_and_the_call_runs() {
    let calls = Arc::new(AtomicUsize::new(0));
    let counter = Arc::clone(&calls);
    let server = hostile(move |method, _| match method {
        // As server-everything answers a session it does not know: 400, not run.
        "tools/call" if counter.fetch_add(1, Ordering::SeqCst) == 1 => {
            Reply::Status(400, "Bad Request: No valid session ID provided")
        }
        "tools/call" => Reply::Result(ok("done")),
        _ => Reply::Default,
    })
    .await;
    let client = client_for(server.port(), quick_config());
    client.call_tool_for("srv", &server.url(), None, "t", json!({})).await.unwrap();
    let result = client.call_tool_for("srv", &server.url(), None, "t", json!({})).await;
    assert_eq!(result.unwrap().text_for_model(), "done");
    assert_eq!(server.count("tools/call"), 3);
    assert_eq!(server.handshakes(), 2);
    // A session just connected is not retried: its 400 is the server's answer.
    let fresh = hostile(|method, _| match method {
        "tools/call" => Reply::Status(400, "no"),
        _ => Reply::Default,
    })
    .await;
    let client = client_for(fresh.port(), quick_config());
    let err = client.call_tool_for("srv", &fresh.url(), None, "t", json!({})).await.unwrap_err();
    assert!(matches!(err, McpError::HttpStatus { status: 400, .. }), "{err:?}");
    assert_eq!(fresh.count("tools/call"), 1);
}

#[tokio::test]
async fn a_kept_session_refused_with_an_error_naming_no_request_is_replaced_at_once() {
    let calls = Arc::new(AtomicUsize::new(0));
    let counter = Arc::clone(&calls);
    let server = hostile(move |method, _| match method {
        // Word for word what server-everything answers once restarted. rmcp alone drops this
        // error (it belongs to no request) and the call waits for its whole timeout.
        "tools/call" if counter.fetch_add(1, Ordering::SeqCst) == 1 => Reply::JsonStatus(
            400,
            json!({"jsonrpc": "2.0", "error": {
                "code": -32000, "message": "Bad Request: No valid session ID provided"
            }}),
        ),
        "tools/call" => Reply::Result(ok("done")),
        _ => Reply::Default,
    })
    .await;
    let config = McpConfig { call_timeout: Duration::from_secs(30), ..quick_config() };
    let client = client_for(server.port(), config);
    client.call_tool_for("srv", &server.url(), None, "t", json!({})).await.unwrap();
    let started = Instant::now();
    let result = client.call_tool_for("srv", &server.url(), None, "t", json!({})).await;
    assert_eq!(result.unwrap().text_for_model(), "done");
    assert!(started.elapsed() < Duration::from_secs(5), "{:?}", started.elapsed());
    assert_eq!(server.count("tools/call"), 3);
    assert_eq!(server.handshakes(), 2);
}

#[tokio::test]
async fn a_server_error_answer_keeps_the_session() {
    let server = hostile(|method, _| match method {
        "tools/call" => Reply::Error(-32602, "Unknown tool"),
        _ => Reply::Default,
    })
    .await;
    let client = client_for(server.port(), quick_config());
    for _ in 0..2 {
        let err = client.call_tool_for("srv", &server.url(), None, "x", json!({})).await;
        assert!(matches!(err, Err(McpError::Server { code: -32602, .. })), "{err:?}");
    }
    assert_eq!(server.handshakes(), 1);
    // Arguments that are not an object are refused before any session is taken.
    let err = client.call_tool_for("srv", &server.url(), None, "x", json!([1])).await;
    assert!(matches!(err, Err(McpError::BadArguments { .. })), "{err:?}");
    assert_eq!(server.count("tools/call"), 2);
}

#[tokio::test]
async fn a_changed_token_never_reuses_a_session() {
    let server = hostile(|method, _| match method {
        "tools/call" => Reply::Result(ok("done")),
        _ => Reply::Default,
    })
    .await;
    let client = client_for(server.port(), quick_config());
    let (old, new) = (Secret::new("old-token"), Secret::new("new-token"));
    client.call_tool_for("srv", &server.url(), Some(&old), "t", json!({})).await.unwrap();
    let before = server.seen.lock().unwrap().authorization.len();
    client.call_tool_for("srv", &server.url(), Some(&new), "t", json!({})).await.unwrap();
    assert_eq!(server.handshakes(), 2);
    {
        let seen = server.seen.lock().unwrap();
        for auth in &seen.authorization[before..] {
            assert_eq!(auth.as_deref(), Some("Bearer new-token"), "{:?}", seen.methods);
        }
    }
    // No token is another key again.
    client.call_tool_for("srv", &server.url(), None, "t", json!({})).await.unwrap();
    assert_eq!(server.handshakes(), 3);
    assert_eq!(server.seen.lock().unwrap().authorization.last().unwrap(), &None);
}

#[tokio::test]
async fn forget_drops_a_servers_sessions_and_those_in_use() {
    let server = hostile(|method, params| match method {
        "tools/call" if params["name"] == "slow" => {
            Reply::Later(Duration::from_millis(400), ok("slow done"))
        }
        "tools/call" => Reply::Result(ok("done")),
        _ => Reply::Default,
    })
    .await;
    let client = client_for(server.port(), quick_config());
    let url = server.url();
    client.call_tool_for("srv-1", &url, None, "t", json!({})).await.unwrap();
    client.call_tool_for("srv-2", &url, None, "t", json!({})).await.unwrap();
    assert_eq!(server.handshakes(), 2);
    client.forget("srv-1");
    client.call_tool_for("srv-1", &url, None, "t", json!({})).await.unwrap();
    assert_eq!(server.handshakes(), 3);
    client.call_tool_for("srv-2", &url, None, "t", json!({})).await.unwrap();
    assert_eq!(server.handshakes(), 3);

    // Forgotten while a call runs: the call ends normally, its session is not kept.
    let running = {
        let (client, url) = (client.clone(), url.clone());
        tokio::spawn(
            async move { client.call_tool_for("srv-1", &url, None, "slow", json!({})).await },
        )
    };
    tokio::time::sleep(Duration::from_millis(150)).await;
    client.forget("srv-1");
    assert_eq!(running.await.unwrap().unwrap().text_for_model(), "slow done");
    client.call_tool_for("srv-1", &url, None, "t", json!({})).await.unwrap();
    assert_eq!(server.handshakes(), 4);

    // By address: every name's sessions for it.
    client.forget(&url);
    client.call_tool_for("srv-1", &url, None, "t", json!({})).await.unwrap();
    client.call_tool_for("srv-2", &url, None, "t", json!({})).await.unwrap();
    assert_eq!(server.handshakes(), 6);
}

#[tokio::test]
async fn an_abandoned_call_is_cancelled_and_does_not_poison_the_next() {
    let calls = Arc::new(AtomicUsize::new(0));
    let counter = Arc::clone(&calls);
    let server = hostile(move |method, _| match method {
        "tools/call" if counter.fetch_add(1, Ordering::SeqCst) == 1 => Reply::Hang,
        "tools/call" => Reply::Result(ok("done")),
        _ => Reply::Default,
    })
    .await;
    let config = McpConfig { call_timeout: Duration::from_secs(30), ..quick_config() };
    let client = client_for(server.port(), config);
    let url = server.url();
    client.call_tool_for("srv", &url, None, "t", json!({})).await.unwrap();
    // A turn stopped mid-call: the future is dropped.
    let abandoned = tokio::time::timeout(
        Duration::from_millis(300),
        client.call_tool_for("srv", &url, None, "t", json!({})),
    )
    .await;
    assert!(abandoned.is_err());
    // The server is told, on the abandoned call's own session, before that session closes.
    let deadline = Instant::now() + Duration::from_secs(5);
    let (hung, cancelled) = loop {
        let (hung, cancelled) = {
            let seen = server.seen.lock().unwrap();
            let ids = |method: &str, pick: fn(&Value) -> Value| -> Vec<Value> {
                seen.messages.iter().filter(|m| m["method"] == method).map(pick).collect()
            };
            (
                ids("tools/call", |m| m["id"].clone()),
                ids("notifications/cancelled", |m| m["params"]["requestId"].clone()),
            )
        };
        if !cancelled.is_empty() || Instant::now() > deadline {
            break (hung, cancelled);
        }
        tokio::time::sleep(Duration::from_millis(20)).await;
    };
    assert_eq!(cancelled, [hung[1].clone()], "calls {hung:?}, cancelled {cancelled:?}");
    // The next call is answered, on a new session.
    let result = client.call_tool_for("srv", &url, None, "t", json!({})).await;
    assert_eq!(result.unwrap().text_for_model(), "done");
    assert_eq!(server.handshakes(), 2);
}

#[tokio::test]
async fn idle_sessions_expire() {
    let server = hostile(|method, _| match method {
        "tools/call" => Reply::Result(ok("done")),
        _ => Reply::Default,
    })
    .await;
    let config = McpConfig { session_idle_timeout: Duration::from_millis(300), ..quick_config() };
    let client = client_for(server.port(), config);
    client.call_tool_for("srv", &server.url(), None, "t", json!({})).await.unwrap();
    client.call_tool_for("srv", &server.url(), None, "t", json!({})).await.unwrap();
    assert_eq!(server.handshakes(), 1);
    tokio::time::sleep(Duration::from_millis(600)).await;
    client.call_tool_for("srv", &server.url(), None, "t", json!({})).await.unwrap();
    assert_eq!(server.handshakes(), 2);
}

#[tokio::test]
async fn calls_at_once_each_get_a_session_and_two_are_kept() {
    let server = hostile(|method, _| match method {
        "tools/call" => Reply::Later(Duration::from_millis(200), ok("done")),
        _ => Reply::Default,
    })
    .await;
    let client = client_for(server.port(), quick_config());
    let url = server.url();
    let three_at_once = || {
        let tasks: Vec<_> = (0..3)
            .map(|_| {
                let (client, url) = (client.clone(), url.clone());
                tokio::spawn(async move {
                    client.call_tool_for("srv", &url, None, "t", json!({})).await
                })
            })
            .collect();
        async move {
            for task in tasks {
                task.await.unwrap().unwrap();
            }
        }
    };
    three_at_once().await;
    assert_eq!(server.handshakes(), 3);
    // Two were kept (the default per server): the next three need one more.
    three_at_once().await;
    assert_eq!(server.handshakes(), 4);

    // Keeping none: every call connects.
    let config = McpConfig { max_idle_sessions: 0, ..quick_config() };
    let client = client_for(server.port(), config);
    client.call_tool_for("srv", &url, None, "t", json!({})).await.unwrap();
    client.call_tool_for("srv", &url, None, "t", json!({})).await.unwrap();
    assert_eq!(server.handshakes(), 6);
}

// ---- real peers ----

fn start_everything_on(port: u16) -> Option<Child> {
    let dir = peer_path("LLOOMA_NPM_PEERS")?;
    let script = dir.join("node_modules/@modelcontextprotocol/server-everything/dist/index.js");
    let child = Command::new("node")
        .arg(script)
        .arg("streamableHttp")
        .env("PORT", port.to_string())
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .spawn()
        .unwrap();
    let deadline = Instant::now() + Duration::from_secs(30);
    while std::net::TcpStream::connect(("127.0.0.1", port)).is_err() {
        assert!(Instant::now() < deadline, "server-everything did not listen on {port}");
        std::thread::sleep(Duration::from_millis(50));
    }
    Some(child)
}

#[tokio::test]
async fn a_restarted_server_everything_is_called_on_a_new_session() {
    let port = free_port();
    let Some(mut first) = start_everything_on(port) else { return };
    let client = client_for(port, McpConfig::default());
    let url = format!("http://127.0.0.1:{port}/mcp");
    let echo = |text: &str| json!({"message": text});
    let result = client.call_tool_for("srv", &url, None, "echo", echo("one")).await.unwrap();
    assert!(result.text_for_model().contains("one"), "{result:?}");
    let result = client.call_tool_for("srv", &url, None, "echo", echo("two")).await.unwrap();
    assert!(result.text_for_model().contains("two"), "{result:?}");
    // Restarted on the same port: it knows none of the old sessions.
    first.kill().unwrap();
    first.wait().unwrap();
    let Some(mut second) = start_everything_on(port) else { return };
    let result = client.call_tool_for("srv", &url, None, "echo", echo("three")).await;
    second.kill().unwrap();
    second.wait().unwrap();
    assert!(result.unwrap().text_for_model().contains("three"));
}

#[tokio::test]
async fn a_gateway_with_a_token_never_answers_a_wrong_token_on_a_kept_session() {
    const TOKEN: &str = "gateway-token-7";
    let Some(peer) = start_gateway(Some(TOKEN)) else { return };
    let client = client_for(peer.port, McpConfig::default());
    let url = peer.url();
    let args = json!({"entity_id": "light.kitchen"});
    for _ in 0..2 {
        let result = client
            .call_tool_for(
                "srv",
                &url,
                Some(&Secret::new(TOKEN)),
                "home-assistant-turn_on",
                args.clone(),
            )
            .await
            .unwrap();
        assert_eq!(result.text_for_model(), "light.kitchen is on");
    }
    // The token was changed to a wrong one: a session kept for the right one is not used.
    let err = client
        .call_tool_for(
            "srv",
            &url,
            Some(&Secret::new("wrong")),
            "home-assistant-turn_on",
            args.clone(),
        )
        .await
        .unwrap_err();
    assert!(matches!(err, McpError::TokenRefused { status: 401, token_sent: true, .. }), "{err:?}");
    let err = client
        .call_tool_for("srv", &url, None, "home-assistant-turn_on", args.clone())
        .await
        .unwrap_err();
    assert!(matches!(err, McpError::TokenRefused { token_sent: false, .. }), "{err:?}");
    // Forgotten, the right token connects again and works.
    client.forget("srv");
    let result = client
        .call_tool_for("srv", &url, Some(&Secret::new(TOKEN)), "home-assistant-turn_on", args)
        .await
        .unwrap();
    assert_eq!(result.text_for_model(), "light.kitchen is on");
}
