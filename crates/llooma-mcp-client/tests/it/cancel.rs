//! An abandoned call tells the server: `notifications/cancelled` with the call's request id.

use std::time::{Duration, Instant};

use llooma_mcp_client::McpConfig;
use serde_json::{Value, json};

use crate::support::{Hostile, Reply, client_for, hostile, quick_config};

async fn cancelled_ids(server: &Hostile, want: usize) -> Vec<(Value, Value)> {
    let deadline = Instant::now() + Duration::from_secs(5);
    loop {
        let pairs: Vec<(Value, Value)> = {
            let seen = server.seen.lock().unwrap();
            let call_ids: Vec<Value> = seen
                .messages
                .iter()
                .filter(|m| m["method"] == "tools/call")
                .map(|m| m["id"].clone())
                .collect();
            let cancelled: Vec<Value> = seen
                .messages
                .iter()
                .filter(|m| m["method"] == "notifications/cancelled")
                .map(|m| m["params"]["requestId"].clone())
                .collect();
            call_ids.into_iter().zip(cancelled).collect()
        };
        if pairs.len() >= want || Instant::now() > deadline {
            return pairs;
        }
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
}

#[tokio::test]
async fn dropping_a_call_sends_a_cancellation() {
    let server = hostile(|method, _| match method {
        "tools/call" => Reply::Hang,
        _ => Reply::Default,
    })
    .await;
    let config = McpConfig { call_timeout: Duration::from_secs(30), ..quick_config() };
    let client = client_for(server.port(), config);
    let session = client.connect(&server.url(), None).await.unwrap();
    // The caller gives up first (a turn abandoned): the future is dropped.
    let abandoned =
        tokio::time::timeout(Duration::from_millis(300), session.call_tool("slow", json!({})))
            .await;
    assert!(abandoned.is_err());
    let pairs = cancelled_ids(&server, 1).await;
    assert_eq!(pairs.len(), 1, "no notifications/cancelled seen");
    assert_eq!(pairs[0].0, pairs[0].1, "the cancellation names another request");
}

#[tokio::test]
async fn a_call_that_times_out_is_cancelled_too() {
    let server = hostile(|method, _| match method {
        "tools/call" => Reply::Hang,
        _ => Reply::Default,
    })
    .await;
    let client = client_for(server.port(), quick_config());
    let session = client.connect(&server.url(), None).await.unwrap();
    let err = session.call_tool("slow", json!({})).await.unwrap_err();
    assert!(matches!(err, llooma_mcp_client::McpError::Timeout { .. }), "{err:?}");
    let pairs = cancelled_ids(&server, 1).await;
    assert_eq!(pairs.len(), 1, "no notifications/cancelled seen");
    assert_eq!(pairs[0].0, pairs[0].1);
}
