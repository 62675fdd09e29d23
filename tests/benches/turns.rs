#![allow(
    clippy::unwrap_used,
    clippy::expect_used,
    reason = "a benchmark that cannot run should stop loudly"
)]

//! `cargo xtask bench turns`: what a turn costs the server, measured from outside the release
//! binary on SQLite, with a model that answers at once (the fake model) so only Llooma's own work
//! is counted.
//!
//! - per-turn overhead: a turn that calls one MCP tool (allowed by a rule, so no card) against the
//!   Python SDK gateway and then answers; server CPU time per turn and turns per second;
//! - SSE fan-out: one turn streaming 200 deltas to 1,000 tabs watching the conversation; time
//!   until every tab has seen the end, server CPU time and resident memory.
//!
//! Needs `LLOOMA_BIN` (the release binary) and the MCP peers' variables; xtask sets both.

#[path = "../e2e/support.rs"]
#[allow(dead_code, reason = "the tests' helpers, of which a benchmark uses a few")]
mod support;

use std::time::{Duration, Instant};

use llooma_fake_model::{FakeModel, Reply};
use serde_json::{Value, json};
use support::{Events, PASSWORD, Server, Tab, TestDb};

const WARMUP_TURNS: usize = 20;
const TURNS: usize = 200;
const WATCHERS: usize = 1000;
const DELTAS: usize = 200;

fn main() {
    tokio::runtime::Builder::new_multi_thread().enable_all().build().unwrap().block_on(async {
        per_turn_overhead().await;
        fan_out().await;
    });
}

/// (user + system) CPU seconds the process has used, from /proc/<pid>/stat.
fn cpu_seconds(pid: u32) -> f64 {
    let stat = std::fs::read_to_string(format!("/proc/{pid}/stat")).unwrap();
    // Fields after the command name (which may hold spaces) start after the last ')'.
    let rest = &stat[stat.rfind(')').unwrap() + 2..];
    let fields: Vec<&str> = rest.split_whitespace().collect();
    let ticks: f64 = fields[11].parse::<f64>().unwrap() + fields[12].parse::<f64>().unwrap();
    ticks / 100.0 // USER_HZ is 100 on Linux
}

fn resident_mib(pid: u32) -> f64 {
    let status = std::fs::read_to_string(format!("/proc/{pid}/status")).unwrap();
    let kib: f64 = status
        .lines()
        .find_map(|l| l.strip_prefix("VmRSS:"))
        .and_then(|v| v.trim().trim_end_matches("kB").trim().parse().ok())
        .unwrap();
    kib / 1024.0
}

/// An administrator with the fake model as provider and a conversation using it.
async fn conversation(server: &Server, model: &FakeModel) -> (Tab, String) {
    let mut tab = server.tab();
    tab.register("root", PASSWORD).await;
    let provider = tab
        .post("/api/v1/admin/providers", json!({"name": "fake", "baseUrl": model.base_url()}))
        .await;
    let conversation = tab
        .post(
            "/api/v1/conversations",
            json!({"title": "Bench", "providerId": provider.json["id"], "model": "fake-model"}),
        )
        .await;
    assert_eq!(conversation.status, 201, "{conversation:?}");
    (tab, conversation.json["id"].as_str().unwrap().to_owned())
}

async fn until_end(events: &mut Events) -> Value {
    loop {
        let (name, data) = events.next().await;
        if name == "end" {
            return data;
        }
    }
}

/// Warnings only, but the line with the address the harness waits for (logging every request
/// would be measured too).
const QUIET_LOG: &str = "warn,llooma::serve=info";

async fn per_turn_overhead() {
    let peer = llooma_test_support::peers::gateway(None)
        .expect("the MCP peers are not installed: run through `cargo xtask bench turns`");
    let model = FakeModel::builder().log_requests(false).start().await.unwrap();
    let db = TestDb::new();
    let server = Server::start(
        &db,
        &[
            ("PROVIDER_ALLOWED_ORIGINS", &model.origin()),
            ("MCP_ALLOWED_ORIGINS", &peer.origin()),
            ("LLOOMA_LOG", QUIET_LOG),
        ],
    );
    let (mut tab, id) = conversation(&server, &model).await;
    let added =
        tab.post("/api/v1/mcp/servers", json!({"label": "hub", "address": peer.url()})).await;
    let tool = added.json["tools"]
        .as_array()
        .unwrap()
        .iter()
        .find(|t| t["name"] == "home-assistant-turn_on")
        .unwrap()["modelName"]
        .as_str()
        .unwrap()
        .to_owned();
    tab.send("PATCH", &format!("/api/v1/conversations/{id}"), Some(json!({"mcpEnabled": true})))
        .await;
    tab.send("PATCH", "/api/v1/consent", Some(json!({"mode": "rules"}))).await;
    let rule = tab
        .post(
            "/api/v1/consent/rules",
            json!({"serverId": added.json["server"]["id"], "tool": "home-assistant-turn_on", "arguments": {"entity_id": "any"}}),
        )
        .await;
    assert_eq!(rule.status, 201, "{rule:?}");

    let mut events = Events::open(&tab, &format!("/api/v1/conversations/{id}/events"), None).await;
    let one_turn = async |tab: &mut Tab, events: &mut Events| {
        model.push(Reply::tool_call(&tool, json!({"entity_id": "light.bench"})));
        model.push(Reply::text("The light is on."));
        let sent = tab
            .post(&format!("/api/v1/conversations/{id}/messages"), json!({"content": "light"}))
            .await;
        assert_eq!(sent.status, 202, "{sent:?}");
        let end = until_end(events).await;
        assert_eq!(end["state"], "done", "{end}");
    };
    for _ in 0..WARMUP_TURNS {
        one_turn(&mut tab, &mut events).await;
    }
    let cpu_before = cpu_seconds(server.pid());
    let started = Instant::now();
    for _ in 0..TURNS {
        one_turn(&mut tab, &mut events).await;
    }
    let wall = started.elapsed();
    let cpu = cpu_seconds(server.pid()) - cpu_before;
    eprintln!(
        "per-turn overhead ({TURNS} turns, each: model → one MCP call allowed by a rule → model; \
         zero-latency fake model, SQLite): server CPU {:.2} ms per turn; {:.1} turns/s one after \
         another ({:.1} ms each, MCP server and HTTP included)",
        cpu * 1000.0 / TURNS as f64,
        TURNS as f64 / wall.as_secs_f64(),
        wall.as_secs_f64() * 1000.0 / TURNS as f64,
    );
}

async fn fan_out() {
    let model = FakeModel::builder().log_requests(false).start().await.unwrap();
    let db = TestDb::new();
    let server = Server::start(
        &db,
        &[("PROVIDER_ALLOWED_ORIGINS", &model.origin()), ("LLOOMA_LOG", QUIET_LOG)],
    );
    let (mut tab, id) = conversation(&server, &model).await;
    let path = format!("/api/v1/conversations/{id}/events");
    let mut watchers = Vec::with_capacity(WATCHERS);
    for _ in 0..WATCHERS {
        // Each watcher is its own connection, like a tab.
        let mut own = Tab::new(&tab.base);
        own.cookie = tab.cookie.clone();
        watchers.push(Events::open(&own, &path, None).await);
    }
    let idle_rss = resident_mib(server.pid());
    for round in 1..=3 {
        model.push(Reply::text("word ".repeat(DELTAS)).chunks(DELTAS));
        let cpu_before = cpu_seconds(server.pid());
        let started = Instant::now();
        tab.post(&format!("/api/v1/conversations/{id}/messages"), json!({"content": "go"})).await;
        let tasks: Vec<_> = watchers
            .drain(..)
            .map(|mut events| {
                tokio::spawn(async move {
                    let mut deltas = 0;
                    loop {
                        let (name, _) = events.next_within(Duration::from_secs(60)).await;
                        match name.as_str() {
                            "text" => deltas += 1,
                            "end" => return (events, deltas),
                            _ => {}
                        }
                    }
                })
            })
            .collect();
        for task in tasks {
            let (events, deltas) = task.await.unwrap();
            assert_eq!(deltas, DELTAS, "a watcher missed deltas");
            watchers.push(events);
        }
        let wall = started.elapsed();
        let cpu = cpu_seconds(server.pid()) - cpu_before;
        eprintln!(
            "SSE fan-out, run {round}: one turn of {DELTAS} deltas to {WATCHERS} watching tabs: \
             all saw the end after {:.0} ms; server CPU {:.0} ms; resident {:.1} MiB (idle with \
             the tabs connected {idle_rss:.1} MiB)",
            wall.as_secs_f64() * 1000.0,
            cpu * 1000.0,
            resident_mib(server.pid()),
        );
    }
}
