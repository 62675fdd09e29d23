//! `tools/call` through llooma-mcp-client against a bare rmcp client, both on the same local rmcp
//! Streamable HTTP server (in this process, TCP_NODELAY on): the p50 ratio the MCP client issue
//! asks for ("within 10%"). No criterion: one machine-readable line on stdout, which
//! `cargo xtask bench turns` runs (also against a baseline revision) and merges into its table.
//!
//! Measured, interleaved in blocks so that drift on a shared machine hits all alike:
//! - `client_ours`: `McpClient::call_tool`, the call a turn makes (it connects, calls and closes,
//!   or, with a session pool, reuses a kept session);
//! - `session_ours`: `McpSession::call_tool` on an open session;
//! - `session_bare`: rmcp's own client, `call_tool` on an open session (the floor);
//! - `oneshot_bare`: rmcp's own client connecting (discover-then-initialize), calling and
//!   closing, over one reqwest client built as rmcp's default one is (no idle pooling) and built
//!   once, as ours is (building one reads the system's certificates, which would dwarf the
//!   call).
//!
//! Output (microseconds): `call_ratio client_ours_p50_us=.. client_ours_p90_us=..
//! oneshot_bare_p50_us=.. ... session_ours_p50_us=.. session_bare_p50_us=.. ...`.

#![allow(
    clippy::unwrap_used,
    clippy::expect_used,
    clippy::print_stdout,
    reason = "a benchmark: a failed step stops it loudly, and its result is a line on stdout"
)]

use std::sync::Arc;
use std::time::{Duration, Instant};

use llooma_mcp_client::{McpClient, McpConfig, OutboundPolicy};
use rmcp::model::{
    CallToolRequestParams, ClientCapabilities, ClientConfig, Implementation, ProtocolVersion,
};
use rmcp::service::{ClientLifecycleMode, ClientServiceExt, RoleClient, RunningService};
use rmcp::transport::StreamableHttpClientTransport;
use rmcp::transport::streamable_http_client::StreamableHttpClientTransportConfig;
use serde_json::json;

#[path = "common/adder.rs"]
mod adder;
use adder::start_server;

/// Calls per block and blocks: one-shot calls cost a handshake each, so fewer of them (and of
/// `McpClient::call_tool`, which may do the same).
const SESSION_CALLS: usize = 100;
const ONESHOT_CALLS: usize = 40;
const BLOCKS: usize = 12;
const WARMUP: usize = 100;

async fn bare(http: &reqwest::Client, url: &str) -> RunningService<RoleClient, ClientConfig> {
    let transport = StreamableHttpClientTransport::with_client(
        http.clone(),
        StreamableHttpClientTransportConfig::with_uri(url.to_owned()),
    );
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

fn bare_params() -> CallToolRequestParams {
    CallToolRequestParams::new("add")
        .with_arguments(json!({"a": 2, "b": 40}).as_object().cloned().unwrap_or_default())
}

/// (p50, p90) in microseconds.
fn percentiles(mut samples: Vec<Duration>) -> (f64, f64) {
    samples.sort();
    let at = |q: f64| samples[((samples.len() as f64 - 1.0) * q).round() as usize];
    (at(0.50).as_secs_f64() * 1e6, at(0.90).as_secs_f64() * 1e6)
}

fn main() {
    let rt = tokio::runtime::Builder::new_multi_thread().enable_all().build().unwrap();
    rt.block_on(async {
        let addr = start_server().await;
        let url = format!("http://{addr}/mcp");
        let origin = format!("http://{addr}");
        let policy = OutboundPolicy::from_allow_lists(Some(&origin), None, None).unwrap();
        let client = McpClient::new(Arc::new(policy), McpConfig::default()).unwrap();
        let session = client.connect(&url, None).await.unwrap();
        // What rmcp's `from_uri` builds, once.
        let http = reqwest::Client::builder().pool_max_idle_per_host(0).build().unwrap();
        let bare_session = bare(&http, &url).await;

        let ours_client = async || {
            let answer = client.call_tool(&url, None, "add", json!({"a": 2, "b": 40})).await;
            assert_eq!(answer.unwrap().text_for_model(), "42");
        };
        let bare_oneshot = async || {
            let service = bare(&http, &url).await;
            service.call_tool(bare_params()).await.unwrap();
            service.cancel().await.unwrap();
        };
        let ours_session = async || {
            session.call_tool("add", json!({"a": 2, "b": 40})).await.unwrap();
        };
        let bare_call = async || {
            bare_session.call_tool(bare_params()).await.unwrap();
        };

        for _ in 0..WARMUP {
            ours_client().await;
            bare_oneshot().await;
            ours_session().await;
            bare_call().await;
        }
        let mut samples: [Vec<Duration>; 4] = Default::default();
        for _ in 0..BLOCKS {
            for _ in 0..ONESHOT_CALLS {
                let t = Instant::now();
                ours_client().await;
                samples[0].push(t.elapsed());
            }
            for _ in 0..ONESHOT_CALLS {
                let t = Instant::now();
                bare_oneshot().await;
                samples[1].push(t.elapsed());
            }
            for _ in 0..SESSION_CALLS {
                let t = Instant::now();
                ours_session().await;
                samples[2].push(t.elapsed());
            }
            for _ in 0..SESSION_CALLS {
                let t = Instant::now();
                bare_call().await;
                samples[3].push(t.elapsed());
            }
        }
        let names = ["client_ours", "oneshot_bare", "session_ours", "session_bare"];
        let mut line = String::from("call_ratio");
        for (name, taken) in names.iter().zip(samples) {
            let (p50, p90) = percentiles(taken);
            line.push_str(&format!(" {name}_p50_us={p50:.1} {name}_p90_us={p90:.1}"));
        }
        eprintln!(
            "tools/call against a local rmcp server ({} calls through McpClient and one-shot, {} on \
             sessions, each)",
            BLOCKS * ONESHOT_CALLS,
            BLOCKS * SESSION_CALLS
        );
        println!("{line}");
    });
}
