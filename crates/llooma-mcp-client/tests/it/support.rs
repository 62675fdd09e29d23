//! Shared helpers: peers started as child processes, a scriptable hostile MCP server, clients
//! whose policy allows exactly one loopback origin.

use std::net::SocketAddr;
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
    /// An HTTP status with a body.
    Status(u16, &'static str),
    /// A 200 with this content type and body.
    Raw(&'static str, Vec<u8>),
    /// Never answers.
    Hang,
    /// The legacy handshake for `server/discover` and `initialize`, "method not found" for
    /// anything else.
    Default,
}

pub type Script = dyn Fn(&str, &Value) -> Reply + Send + Sync;

/// What the hostile server saw.
#[derive(Default)]
pub struct Seen {
    pub methods: Vec<String>,
    pub messages: Vec<Value>,
    pub authorization: Vec<Option<String>>,
}

#[derive(Clone)]
struct HostileState {
    script: Arc<Script>,
    seen: Arc<Mutex<Seen>>,
}

pub struct Hostile {
    pub addr: SocketAddr,
    pub seen: Arc<Mutex<Seen>>,
}

impl Hostile {
    pub fn url(&self) -> String {
        format!("http://{}/mcp", self.addr)
    }
    pub fn port(&self) -> u16 {
        self.addr.port()
    }
    pub fn count(&self, method: &str) -> usize {
        self.seen.lock().unwrap().methods.iter().filter(|m| *m == method).count()
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
    let seen = Arc::new(Mutex::new(Seen::default()));
    let state = HostileState { script: Arc::new(script), seen: Arc::clone(&seen) };
    let app = Router::new()
        .route("/mcp", post(hostile_post).get(|| async { StatusCode::METHOD_NOT_ALLOWED }))
        .with_state(state);
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let addr = listener.local_addr().unwrap();
    let listener = listener.tap_io(|tcp| {
        let _ = tcp.set_nodelay(true);
    });
    tokio::spawn(async move {
        let _ = axum::serve(listener, app).await;
    });
    Hostile { addr, seen }
}

async fn hostile_post(
    State(state): State<HostileState>,
    headers: HeaderMap,
    body: Bytes,
) -> Response {
    let message: Value = serde_json::from_slice(&body).unwrap_or(Value::Null);
    let method = message.get("method").and_then(Value::as_str).unwrap_or("").to_owned();
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
    match reply {
        Reply::Result(result) => {
            json_response(json!({"jsonrpc": "2.0", "id": id, "result": result}))
        }
        Reply::Error(code, message) => json_response(
            json!({"jsonrpc": "2.0", "id": id, "error": {"code": code, "message": message}}),
        ),
        Reply::Status(status, body) => {
            (StatusCode::from_u16(status).unwrap(), [(header::CONTENT_TYPE, "text/plain")], body)
                .into_response()
        }
        Reply::Raw(content_type, body) => {
            (StatusCode::OK, [(header::CONTENT_TYPE, content_type)], body).into_response()
        }
        Reply::Default => unreachable!(),
        Reply::Hang => {
            std::future::pending::<()>().await;
            StatusCode::OK.into_response()
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
