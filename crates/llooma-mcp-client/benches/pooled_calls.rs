//! What one `McpClient::call_tool` (the call a turn makes: server address, token, tool name)
//! costs, 500 sequential calls per server, against a bare rmcp client that stays connected
//! (the floor). Prints p50/p90/p99 of the wall time of each and the CPU this process spent
//! per call (every thread's `schedstat`; for the in-process server that includes the
//! server's own work).
//!
//! Servers: an in-process rmcp Streamable HTTP server (stateful sessions), with TCP_NODELAY
//! and without (Nagle's algorithm on, as some servers leave it),
//! and, when their paths are set (`export $(cat /tmp/peers.env | xargs)`, see
//! tests/peers/install.sh), the Python SDK gateway and npm's server-everything.
//!
//! `cargo bench -p llooma-mcp-client --bench pooled_calls`

#![allow(clippy::unwrap_used, clippy::expect_used, clippy::print_stdout, reason = "benchmark")]

use std::sync::Arc;
use std::time::{Duration, Instant};

use axum::serve::ListenerExt;
use llooma_mcp_client::{McpClient, McpConfig, OutboundPolicy};
use rmcp::model::{
    CallToolRequestParams, CallToolResponse, CallToolResult, ClientCapabilities, ClientConfig,
    ContentBlock, Implementation, ProtocolVersion, ServerCapabilities, ServerConfig,
};
use rmcp::service::{
    ClientLifecycleMode, ClientServiceExt, RequestContext, RoleClient, RunningService,
};
use rmcp::transport::StreamableHttpClientTransport;
use rmcp::transport::streamable_http_server::session::local::LocalSessionManager;
use rmcp::transport::streamable_http_server::{StreamableHttpServerConfig, StreamableHttpService};
use rmcp::{ErrorData, RoleServer, ServerHandler};
use serde_json::{Value, json};

const CALLS: usize = 500;
const BLOCK: usize = 50;

#[derive(Clone)]
struct Adder;

impl ServerHandler for Adder {
    fn get_info(&self) -> ServerConfig {
        ServerConfig::new(ServerCapabilities::builder().enable_tools().build())
    }

    async fn call_tool(
        &self,
        request: CallToolRequestParams,
        _context: RequestContext<RoleServer>,
    ) -> Result<CallToolResponse, ErrorData> {
        let args = request.arguments.unwrap_or_default();
        let sum = args.get("a").and_then(Value::as_i64).unwrap_or(0)
            + args.get("b").and_then(Value::as_i64).unwrap_or(0);
        Ok(CallToolResult::success(vec![ContentBlock::text(sum.to_string())]).into())
    }
}

async fn start_rmcp_server(nodelay: bool) -> u16 {
    let service: StreamableHttpService<Adder, LocalSessionManager> = StreamableHttpService::new(
        || Ok(Adder),
        Default::default(),
        StreamableHttpServerConfig::default(),
    );
    let router = axum::Router::new().nest_service("/mcp", service);
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let port = listener.local_addr().unwrap().port();
    let listener = listener.tap_io(move |tcp| {
        let _ = tcp.set_nodelay(nodelay);
    });
    tokio::spawn(async move {
        let _ = axum::serve(listener, router).await;
    });
    port
}

async fn bare(url: &str) -> RunningService<RoleClient, ClientConfig> {
    let transport = StreamableHttpClientTransport::from_uri(url.to_owned());
    let info = ClientConfig::new(ClientCapabilities::default(), Implementation::new("bare", "0"));
    info.serve_with_lifecycle(
        transport,
        ClientLifecycleMode::Auto {
            preferred_versions: vec![ProtocolVersion::V_2026_07_28],
            legacy_version: Some(ProtocolVersion::V_2025_11_25),
        },
    )
    .await
    .unwrap()
}

/// CPU time of every thread of this process, from `/proc/self/task/*/schedstat` (ns).
fn process_cpu() -> Duration {
    let mut total = 0_u64;
    if let Ok(tasks) = std::fs::read_dir("/proc/self/task") {
        for task in tasks.flatten() {
            let Ok(text) = std::fs::read_to_string(task.path().join("schedstat")) else {
                continue;
            };
            total += text.split_whitespace().next().and_then(|n| n.parse().ok()).unwrap_or(0);
        }
    }
    Duration::from_nanos(total)
}

#[derive(Default)]
struct Samples {
    wall: Vec<Duration>,
    cpu: Duration,
}

impl Samples {
    fn report(&mut self, label: &str) -> Duration {
        self.wall.sort();
        let at = |q: f64| self.wall[((self.wall.len() as f64 - 1.0) * q).round() as usize];
        let per_call = self.cpu / self.wall.len() as u32;
        println!(
            "  {label:<34} p50 {:>9.3?}  p90 {:>9.3?}  p99 {:>9.3?}  cpu/call {:>9.3?}",
            at(0.5),
            at(0.9),
            at(0.99),
            per_call
        );
        at(0.5)
    }
}

struct Target {
    name: &'static str,
    url: String,
    tool: &'static str,
    arguments: Value,
}

async fn run(target: &Target, client: &McpClient) {
    let bare = bare(&target.url).await;
    let params = CallToolRequestParams::new(target.tool)
        .with_arguments(target.arguments.as_object().cloned().unwrap_or_default());
    // Warm up both, and check they get an answer.
    for _ in 0..20 {
        let ours = client.call_tool(&target.url, None, target.tool, target.arguments.clone()).await;
        assert!(!ours.unwrap().is_error);
        bare.call_tool(params.clone()).await.unwrap();
    }
    let (mut ours, mut floor) = (Samples::default(), Samples::default());
    // Alternating blocks, so drift on a shared machine hits both alike.
    for _ in 0..CALLS / BLOCK {
        let cpu = process_cpu();
        for _ in 0..BLOCK {
            let t = Instant::now();
            client
                .call_tool(&target.url, None, target.tool, target.arguments.clone())
                .await
                .unwrap();
            ours.wall.push(t.elapsed());
        }
        ours.cpu += process_cpu().saturating_sub(cpu);
        let cpu = process_cpu();
        for _ in 0..BLOCK {
            let t = Instant::now();
            bare.call_tool(params.clone()).await.unwrap();
            floor.wall.push(t.elapsed());
        }
        floor.cpu += process_cpu().saturating_sub(cpu);
    }
    println!("{} ({CALLS} sequential calls each)", target.name);
    let a = ours.report("McpClient::call_tool");
    let b = floor.report("bare rmcp client, connected");
    println!("  p50 ratio {:.2}", a.as_secs_f64() / b.as_secs_f64());
}

fn client_for(port: u16) -> McpClient {
    let origin = format!("http://127.0.0.1:{port}");
    let policy = OutboundPolicy::from_allow_lists(Some(&origin), None, None).unwrap();
    McpClient::new(Arc::new(policy), McpConfig::default()).unwrap()
}

fn main() {
    let rt = tokio::runtime::Builder::new_multi_thread().enable_all().build().unwrap();
    rt.block_on(async {
        // Without TCP_NODELAY it answers in several writes with Nagle's algorithm on: on a kept
        // connection each call would wait ~40 ms for a delayed ACK if ours were not sent at once.
        for (nodelay, name) in [
            (true, "in-process rmcp server"),
            (false, "in-process rmcp server without TCP_NODELAY"),
        ] {
            let port = start_rmcp_server(nodelay).await;
            let target = Target {
                name,
                url: format!("http://127.0.0.1:{port}/mcp"),
                tool: "add",
                arguments: json!({"a": 2, "b": 40}),
            };
            run(&target, &client_for(port)).await;
        }

        if std::env::var_os("LLOOMA_PYTHON").is_some()
            && let Some(peer) = llooma_test_support::peers::gateway(None)
        {
            let target = Target {
                name: "Python SDK gateway",
                url: peer.url(),
                tool: "home-assistant-turn_on",
                arguments: json!({"entity_id": "light.kitchen"}),
            };
            run(&target, &client_for(peer.port)).await;
        } else {
            println!("(LLOOMA_PYTHON not set: the Python gateway is skipped)");
        }

        if std::env::var_os("LLOOMA_NPM_PEERS").is_some()
            && let Some(peer) = llooma_test_support::peers::everything()
        {
            let target = Target {
                name: "server-everything (Node)",
                url: peer.url(),
                tool: "echo",
                arguments: json!({"message": "hello"}),
            };
            run(&target, &client_for(peer.port)).await;
        } else {
            println!("(LLOOMA_NPM_PEERS not set: server-everything is skipped)");
        }
    });
}
