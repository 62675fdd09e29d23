//! Overhead of one `tools/call` through llooma-mcp-client against a bare rmcp client, both
//! against the same local rmcp Streamable HTTP server (TCP_NODELAY on), both with the same
//! discover-then-initialize handshake. rmcp's own client keeps no idle connections
//! (`pool_max_idle_per_host(0)`); ours keeps them (`llooma-net`'s connections, which ACK at once).
//!
//! Besides criterion's estimate it prints p50/p99 of 2,000 sequential calls each and the
//! ratio of the medians (goal: within 10%).

#![allow(clippy::unwrap_used, clippy::expect_used, reason = "benchmark")]

use std::sync::Arc;
use std::time::{Duration, Instant};

use criterion::{Criterion, criterion_group, criterion_main};
use llooma_mcp_client::{McpClient, McpConfig, McpSession, OutboundPolicy};
use rmcp::model::{
    CallToolRequestParams, ClientCapabilities, ClientConfig, Implementation, ProtocolVersion,
};
use rmcp::service::{ClientLifecycleMode, ClientServiceExt, RoleClient, RunningService};
use rmcp::transport::StreamableHttpClientTransport;
use serde_json::json;

#[path = "common/adder.rs"]
mod adder;
use adder::start_server;

async fn ours(addr: std::net::SocketAddr) -> McpSession {
    let origin = format!("http://{addr}");
    let policy = OutboundPolicy::from_allow_lists(Some(&origin), None, None).unwrap();
    let client = McpClient::new(Arc::new(policy), McpConfig::default()).unwrap();
    client.connect(&format!("http://{addr}/mcp"), None).await.unwrap()
}

async fn bare(addr: std::net::SocketAddr) -> RunningService<RoleClient, ClientConfig> {
    let transport = StreamableHttpClientTransport::from_uri(format!("http://{addr}/mcp"));
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

fn percentiles(mut samples: Vec<Duration>) -> (Duration, Duration) {
    samples.sort();
    let at = |q: f64| samples[((samples.len() as f64 - 1.0) * q).round() as usize];
    (at(0.50), at(0.99))
}

fn bench(c: &mut Criterion) {
    let rt = tokio::runtime::Builder::new_multi_thread().enable_all().build().unwrap();
    let addr = rt.block_on(start_server());
    let session = rt.block_on(ours(addr));
    let client = rt.block_on(bare(addr));

    // Sanity: both get the answer.
    let answer = rt.block_on(session.call_tool("add", json!({"a": 2, "b": 40}))).unwrap();
    assert_eq!(answer.text_for_model(), "42");
    rt.block_on(client.call_tool(bare_params())).unwrap();

    // Percentiles, interleaved in blocks so drift on a shared machine hits both alike.
    let (mut ours_samples, mut bare_samples) = (Vec::new(), Vec::new());
    rt.block_on(async {
        for _ in 0..20 {
            for _ in 0..100 {
                let t = Instant::now();
                session.call_tool("add", json!({"a": 2, "b": 40})).await.unwrap();
                ours_samples.push(t.elapsed());
            }
            for _ in 0..100 {
                let t = Instant::now();
                client.call_tool(bare_params()).await.unwrap();
                bare_samples.push(t.elapsed());
            }
        }
    });
    let (ours50, ours99) = percentiles(ours_samples);
    let (bare50, bare99) = percentiles(bare_samples);
    eprintln!(
        "tools/call, 2000 sequential calls each: llooma p50 {ours50:?} p99 {ours99:?}; bare rmcp \
         p50 {bare50:?} p99 {bare99:?}; p50 ratio {:.3}, p99 ratio {:.3}",
        ours50.as_secs_f64() / bare50.as_secs_f64(),
        ours99.as_secs_f64() / bare99.as_secs_f64()
    );

    let mut group = c.benchmark_group("tools_call");
    group.measurement_time(Duration::from_secs(5));
    group.bench_function("llooma_mcp_client", |b| {
        b.iter_custom(|iters| {
            rt.block_on(async {
                let start = Instant::now();
                for _ in 0..iters {
                    session.call_tool("add", json!({"a": 2, "b": 40})).await.unwrap();
                }
                start.elapsed()
            })
        });
    });
    group.bench_function("bare_rmcp", |b| {
        b.iter_custom(|iters| {
            rt.block_on(async {
                let start = Instant::now();
                for _ in 0..iters {
                    client.call_tool(bare_params()).await.unwrap();
                }
                start.elapsed()
            })
        });
    });
    group.finish();
}

criterion_group!(benches, bench);
criterion_main!(benches);
