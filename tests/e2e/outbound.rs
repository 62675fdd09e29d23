//! Outbound connections age out: a connection to a provider kept for reuse is closed once it
//! has sat unused for `LLOOMA_OUTBOUND_IDLE_SECS`, and a provider that closes its connections
//! after every answer does not make the server's open descriptors grow.

use std::time::Duration;

use llooma_fake_model::{FakeModel, Fallback};
use serde_json::json;

use crate::support::{Events, PASSWORD, Server, Tab, TestDb};

/// The inodes of `pid`'s open sockets.
fn socket_inodes(pid: u32) -> Vec<String> {
    let Ok(entries) = std::fs::read_dir(format!("/proc/{pid}/fd")) else { return Vec::new() };
    entries
        .filter_map(|entry| std::fs::read_link(entry.ok()?.path()).ok())
        .filter_map(|target| {
            let target = target.to_string_lossy().into_owned();
            Some(target.strip_prefix("socket:[")?.strip_suffix(']')?.to_owned())
        })
        .collect()
}

/// How many of `pid`'s sockets are TCP connections to `port` on loopback.
fn connections_to(pid: u32, port: u16) -> usize {
    let inodes = socket_inodes(pid);
    let table = std::fs::read_to_string("/proc/net/tcp").unwrap();
    table
        .lines()
        .skip(1)
        .filter(|line| {
            let fields: Vec<&str> = line.split_whitespace().collect();
            let remote_port = fields[2].rsplit(':').next().unwrap();
            u16::from_str_radix(remote_port, 16).unwrap() == port
                && inodes.iter().any(|inode| inode == fields[9])
        })
        .count()
}

/// How many descriptors `pid` has open.
fn open_descriptors(pid: u32) -> usize {
    std::fs::read_dir(format!("/proc/{pid}/fd")).unwrap().count()
}

/// An administrator with `model` as provider and a conversation on it, its events open.
async fn conversation(server: &Server, model: &FakeModel) -> (Tab, String, Events) {
    let mut tab = server.tab();
    tab.register("root", PASSWORD).await;
    let provider = tab
        .post("/api/v1/admin/providers", json!({"name": "fake", "baseUrl": model.base_url()}))
        .await;
    let provider_id = provider.json["id"].as_str().unwrap().to_owned();
    let created = tab
        .post(
            "/api/v1/conversations",
            json!({"title": "Kept", "providerId": provider_id, "model": "fake-model"}),
        )
        .await;
    let id = created.json["id"].as_str().unwrap().to_owned();
    let events = Events::open(&tab, &format!("/api/v1/conversations/{id}/events"), None).await;
    (tab, id, events)
}

/// Sends a message and reads its turn to the end.
async fn turn(tab: &mut Tab, id: &str, events: &mut Events) {
    let path = format!("/api/v1/conversations/{id}/messages");
    assert_eq!(tab.post(&path, json!({"content": "hi"})).await.status, 202);
    loop {
        let (name, data) = events.next().await;
        if name == "end" {
            assert!(data.get("error").is_none_or(|e| e.is_null()), "{data}");
            return;
        }
    }
}

#[tokio::test]
async fn a_provider_connection_unused_past_the_idle_setting_is_closed() {
    let model =
        FakeModel::builder().fallback(Fallback::Echo { chunk_delay_ms: 0 }).start().await.unwrap();
    let db = TestDb::new();
    let server = Server::start(
        &db,
        &[("PROVIDER_ALLOWED_ORIGINS", &model.origin()), ("LLOOMA_OUTBOUND_IDLE_SECS", "2")],
    );
    let (mut tab, id, mut events) = conversation(&server, &model).await;
    turn(&mut tab, &id, &mut events).await;
    let port = model.addr().port();
    assert_eq!(connections_to(server.pid(), port), 1, "the connection is kept for the next turn");
    let until = tokio::time::Instant::now() + Duration::from_secs(10);
    while connections_to(server.pid(), port) > 0 && tokio::time::Instant::now() < until {
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
    assert_eq!(connections_to(server.pid(), port), 0, "the idle connection is still open");
    // The next turn simply opens a new one.
    turn(&mut tab, &id, &mut events).await;
}

#[tokio::test]
async fn a_provider_that_closes_after_every_answer_leaves_the_descriptors_flat() {
    let model = FakeModel::builder()
        .fallback(Fallback::Echo { chunk_delay_ms: 0 })
        .close_after_answer(true)
        .start()
        .await
        .unwrap();
    let db = TestDb::new();
    let server = Server::start(&db, &[("PROVIDER_ALLOWED_ORIGINS", &model.origin())]);
    let (mut tab, id, mut events) = conversation(&server, &model).await;
    for _ in 0..20 {
        turn(&mut tab, &id, &mut events).await;
    }
    let before = open_descriptors(server.pid());
    for _ in 0..1_000 {
        turn(&mut tab, &id, &mut events).await;
    }
    let after = open_descriptors(server.pid());
    assert!(after <= before + 2, "{before} descriptors before 1,000 turns, {after} after");
    assert!(connections_to(server.pid(), model.addr().port()) <= 1);
}
