//! Shared helpers: peers started as child processes, a scriptable hostile MCP server, clients
//! whose policy allows exactly one loopback origin.

use std::net::SocketAddr;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use axum::Router;
use axum::body::Bytes;
use axum::extract::State;
use axum::http::{HeaderMap, StatusCode, header};
use axum::response::{IntoResponse, Response};
use axum::routing::post;
use axum::serve::ListenerExt;
use llooma_mcp_client::{McpClient, McpConfig, OutboundPolicy};
use serde_json::{Value, json};

/// A client whose policy allows only `http://127.0.0.1:<port>` (loopback is private, so
/// without the allow-list it would be refused).
pub fn client_for(port: u16, config: McpConfig) -> McpClient {
    let origin = format!("http://127.0.0.1:{port}");
    let policy = OutboundPolicy::from_allow_lists(Some(&origin), None, None).unwrap();
    McpClient::new(Arc::new(policy), config).unwrap()
}

/// Short timeouts so the failure cases finish quickly.
pub fn quick_config() -> McpConfig {
    McpConfig {
        handshake_timeout: Duration::from_secs(5),
        request_timeout: Duration::from_millis(800),
        call_timeout: Duration::from_millis(800),
        max_call_timeout: Duration::from_secs(5),
        ..McpConfig::default()
    }
}

pub use llooma_test_support::peers::{
    everything as start_everything, free_port, gateway as start_gateway, peer_path,
};

// ---- a scriptable hostile server ----

/// What the hostile server answers to one JSON-RPC request.
pub enum Reply {
    /// `{"jsonrpc":"2.0","id":<id>,"result":<value>}` as application/json.
    Result(Value),
    /// A JSON-RPC error.
    Error(i64, &'static str),
    /// A JSON-RPC error with data.
    ErrorWith(i64, &'static str, Value),
    /// An event stream: these notifications (`{"method", "params"}`), then the result.
    Notified(Vec<Value>, Value),
    /// An HTTP status with a body.
    Status(u16, &'static str),
    /// An HTTP status with a JSON body (sent as is: no id is added).
    JsonStatus(u16, Value),
    /// A 200 with this content type and body.
    Raw(&'static str, Vec<u8>),
    /// Never answers.
    Hang,
    /// Answers with this result after a while.
    Later(Duration, Value),
    /// The legacy handshake for `server/discover` and `initialize`, "method not found" for
    /// anything else.
    Default,
}

pub type Script = dyn Fn(&str, &Value) -> Reply + Send + Sync;

/// What the hostile server saw. A request refused for an unknown session (HTTP 404) is in
/// `refused`, not in `methods`: the server did not run it.
#[derive(Default)]
pub struct Seen {
    pub methods: Vec<String>,
    pub messages: Vec<Value>,
    pub authorization: Vec<Option<String>>,
    pub refused: Vec<String>,
}

/// The sessions a hostile server that keeps them has handed out (`Mcp-Session-Id`).
#[derive(Default)]
pub struct Sessions {
    next: u64,
    known: std::collections::HashSet<String>,
}

#[derive(Clone)]
struct HostileState {
    script: Arc<Script>,
    seen: Arc<Mutex<Seen>>,
    sessions: Option<Arc<Mutex<Sessions>>>,
}

pub struct Hostile {
    pub addr: SocketAddr,
    pub seen: Arc<Mutex<Seen>>,
    sessions: Option<Arc<Mutex<Sessions>>>,
    connections: Arc<AtomicUsize>,
}

impl Hostile {
    pub fn url(&self) -> String {
        format!("http://{}/mcp", self.addr)
    }
    pub fn port(&self) -> u16 {
        self.addr.port()
    }
    /// TCP connections accepted so far.
    pub fn connections(&self) -> usize {
        self.connections.load(Ordering::SeqCst)
    }
    pub fn count(&self, method: &str) -> usize {
        self.seen.lock().unwrap().methods.iter().filter(|m| *m == method).count()
    }
    /// Handshakes seen: each ends with `initialize` (after `server/discover` is refused; rmcp's
    /// own renewal of a session it was told is gone sends `initialize` alone).
    pub fn handshakes(&self) -> usize {
        self.count("initialize")
    }
    /// Forgets every session, as a restarted server does: their requests now get a 404.
    pub fn forget_sessions(&self) {
        if let Some(sessions) = &self.sessions {
            sessions.lock().unwrap().known.clear();
        }
    }
}

/// The legacy handshake every hostile script starts with: no `server/discover`, then
/// `initialize` at 2025-11-25.
pub fn handshake(method: &str) -> Option<Reply> {
    match method {
        "server/discover" => Some(Reply::Error(-32601, "Method not found")),
        "initialize" => Some(Reply::Result(json!({
            "protocolVersion": "2025-11-25",
            "capabilities": {"tools": {"listChanged": true}},
            "serverInfo": {"name": "hostile", "version": "0.0.1"}
        }))),
        _ => None,
    }
}

/// Starts a hostile server on 127.0.0.1, port 0, TCP_NODELAY on.
pub async fn hostile(script: impl Fn(&str, &Value) -> Reply + Send + Sync + 'static) -> Hostile {
    start_hostile(script, false).await
}

/// A hostile server that keeps sessions: `initialize` hands out an `Mcp-Session-Id`, and a
/// request naming one it does not know gets 404 (the transport's "session not found").
pub async fn hostile_with_sessions(
    script: impl Fn(&str, &Value) -> Reply + Send + Sync + 'static,
) -> Hostile {
    start_hostile(script, true).await
}

async fn start_hostile(
    script: impl Fn(&str, &Value) -> Reply + Send + Sync + 'static,
    keeps_sessions: bool,
) -> Hostile {
    let seen = Arc::new(Mutex::new(Seen::default()));
    let sessions = keeps_sessions.then(|| Arc::new(Mutex::new(Sessions::default())));
    let state = HostileState {
        script: Arc::new(script),
        seen: Arc::clone(&seen),
        sessions: sessions.clone(),
    };
    let app = Router::new()
        .route("/mcp", post(hostile_post).get(|| async { StatusCode::METHOD_NOT_ALLOWED }))
        .with_state(state);
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let addr = listener.local_addr().unwrap();
    let connections = Arc::new(AtomicUsize::new(0));
    let accepted = Arc::clone(&connections);
    let listener = listener.tap_io(move |tcp| {
        accepted.fetch_add(1, Ordering::SeqCst);
        let _ = tcp.set_nodelay(true);
    });
    tokio::spawn(async move {
        let _ = axum::serve(listener, app).await;
    });
    Hostile { addr, seen, sessions, connections }
}

async fn hostile_post(
    State(state): State<HostileState>,
    headers: HeaderMap,
    body: Bytes,
) -> Response {
    let message: Value = serde_json::from_slice(&body).unwrap_or(Value::Null);
    let method = message.get("method").and_then(Value::as_str).unwrap_or("").to_owned();
    let mut new_session = None;
    if let Some(sessions) = &state.sessions {
        let mut sessions = sessions.lock().unwrap();
        if method == "initialize" {
            sessions.next += 1;
            let id = format!("session-{}", sessions.next);
            sessions.known.insert(id.clone());
            new_session = Some(id);
        } else if method != "server/discover" {
            let named = headers.get("mcp-session-id").and_then(|v| v.to_str().ok());
            if !named.is_some_and(|id| sessions.known.contains(id)) {
                state.seen.lock().unwrap().refused.push(method);
                return (StatusCode::NOT_FOUND, "Session not found").into_response();
            }
        }
    }
    {
        let mut seen = state.seen.lock().unwrap();
        seen.methods.push(method.clone());
        seen.messages.push(message.clone());
        seen.authorization.push(
            headers.get(header::AUTHORIZATION).and_then(|v| v.to_str().ok()).map(str::to_owned),
        );
    }
    let Some(id) = message.get("id").cloned() else {
        // A notification or a response: accepted.
        return StatusCode::ACCEPTED.into_response();
    };
    let params = message.get("params").cloned().unwrap_or(Value::Null);
    let reply = match (state.script)(&method, &params) {
        Reply::Default => handshake(&method).unwrap_or(Reply::Error(-32601, "Method not found")),
        other => other,
    };
    let mut response = answer(id, reply).await;
    if let Some(session) = new_session {
        response.headers_mut().insert("mcp-session-id", session.parse().unwrap());
    }
    response
}

async fn answer(id: Value, reply: Reply) -> Response {
    match reply {
        Reply::Result(result) => {
            json_response(json!({"jsonrpc": "2.0", "id": id, "result": result}))
        }
        Reply::Error(code, message) => json_response(
            json!({"jsonrpc": "2.0", "id": id, "error": {"code": code, "message": message}}),
        ),
        Reply::ErrorWith(code, message, data) => json_response(json!({"jsonrpc": "2.0", "id": id,
            "error": {"code": code, "message": message, "data": data}})),
        Reply::Notified(notifications, result) => {
            let mut body = String::new();
            for notification in notifications {
                let mut message = json!({"jsonrpc": "2.0"});
                message.as_object_mut().unwrap().extend(notification.as_object().unwrap().clone());
                body.push_str(&format!("event: message\ndata: {message}\n\n"));
            }
            let answer = json!({"jsonrpc": "2.0", "id": id, "result": result});
            body.push_str(&format!("event: message\ndata: {answer}\n\n"));
            (StatusCode::OK, [(header::CONTENT_TYPE, "text/event-stream")], body).into_response()
        }
        Reply::Status(status, body) => {
            (StatusCode::from_u16(status).unwrap(), [(header::CONTENT_TYPE, "text/plain")], body)
                .into_response()
        }
        Reply::JsonStatus(status, body) => (
            StatusCode::from_u16(status).unwrap(),
            [(header::CONTENT_TYPE, "application/json")],
            body.to_string(),
        )
            .into_response(),
        Reply::Raw(content_type, body) => {
            (StatusCode::OK, [(header::CONTENT_TYPE, content_type)], body).into_response()
        }
        Reply::Default => unreachable!(),
        Reply::Hang => {
            std::future::pending::<()>().await;
            StatusCode::OK.into_response()
        }
        Reply::Later(after, result) => {
            tokio::time::sleep(after).await;
            json_response(json!({"jsonrpc": "2.0", "id": id, "result": result}))
        }
    }
}

fn json_response(value: Value) -> Response {
    (StatusCode::OK, [(header::CONTENT_TYPE, "application/json")], value.to_string())
        .into_response()
}

/// A tool definition with the given name and description.
pub fn tool(name: &str, description: &str) -> Value {
    json!({"name": name, "description": description, "inputSchema": {"type": "object"}})
}

/// The next question a call's news brings (progress reports are skipped); `None` once the call
/// is over.
pub async fn next_question(
    news: &mut tokio::sync::mpsc::Receiver<llooma_mcp_client::CallNews>,
) -> Option<llooma_mcp_client::ServerQuestion> {
    while let Some(item) = news.recv().await {
        if let llooma_mcp_client::CallNews::Question(question) = item {
            return Some(question);
        }
    }
    None
}

/// A form question's schema (null for any other kind of question).
pub fn schema_of(asked: &llooma_mcp_client::Asked) -> Value {
    match asked {
        llooma_mcp_client::Asked::Form { requested_schema } => requested_schema.clone(),
        _ => Value::Null,
    }
}
