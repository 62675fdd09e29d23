//! MCP Apps: a tool's view is read with the snapshot, kept apart from it, and folded into the
//! tool's definition hash.

use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};

use llooma_mcp_client::{McpConfig, Note, VIEW_MIME_TYPE, definition_hash};
use serde_json::{Value, json};

use crate::support::{Reply, client_for, handshake, hostile, quick_config};

#[tokio::test]
async fn a_real_app_servers_view_is_read_with_its_snapshot_and_kept_out_of_the_stored_form() {
    let Some(peer) = llooma_test_support::peers::basic_app() else { return };
    let client = client_for(peer.port, McpConfig::default());
    let snapshot = client.snapshot(&peer.url(), None).await.unwrap();
    let tool = snapshot.tools.iter().find(|t| t.name == "get-time").expect("get-time");
    let view = tool.view.as_ref().expect("get-time has a view");
    assert_eq!(view.resource_uri, "ui://get-time/mcp-app.html");
    assert!(view.for_model && view.for_view);
    let hash = view.document_hash.clone().expect("its document was read");
    assert_eq!(snapshot.view_documents.len(), 1, "{:?}", snapshot.notes);
    let document = &snapshot.view_documents[0];
    assert_eq!(document.hash, hash);
    assert!(document.html.contains("Get Time App"), "not the app's page");
    // What is stored with the snapshot names the document; it does not hold it.
    let stored = serde_json::to_string(&snapshot).unwrap();
    assert!(!stored.contains("Get Time App"));
    assert!(stored.contains(&hash));
}

/// A server whose views are of every kind: good, shared, too large, not HTML, failing; the
/// good one's document changes when `changed` is set.
fn views_server(changed: Arc<AtomicBool>) -> impl Fn(&str, &Value) -> Reply + Send + Sync {
    move |method, params| {
        handshake(method).unwrap_or_else(|| match method {
            "tools/list" => {
                let tool = |name: &str, uri: &str| {
                    json!({"name": name, "inputSchema": {"type": "object"},
                           "_meta": {"ui": {"resourceUri": uri}}})
                };
                Reply::Result(json!({"tools": [
                    tool("chart", "ui://views/chart"),
                    tool("chart-too", "ui://views/chart"),
                    tool("huge", "ui://views/huge"),
                    tool("picture", "ui://views/picture"),
                    tool("broken", "ui://views/broken"),
                    {"name": "plain", "inputSchema": {"type": "object"}},
                ]}))
            }
            "resources/read" => {
                let uri = params["uri"].as_str().unwrap_or("");
                let item = |mime: &str, text: String| {
                    Reply::Result(
                        json!({"contents": [{"uri": uri, "mimeType": mime, "text": text}]}),
                    )
                };
                match uri {
                    "ui://views/chart" if changed.load(Ordering::SeqCst) => {
                        item(VIEW_MIME_TYPE, "<h1>Chart, new</h1>".into())
                    }
                    "ui://views/chart" => item(VIEW_MIME_TYPE, "<h1>Chart</h1>".into()),
                    "ui://views/huge" => item(VIEW_MIME_TYPE, "x".repeat(9 * 1024 * 1024)),
                    "ui://views/picture" => item("image/svg+xml", "<svg/>".into()),
                    _ => Reply::Error(-32002, "Resource not found"),
                }
            }
            _ => Reply::Default,
        })
    }
}

#[tokio::test]
async fn a_view_that_cannot_be_read_leaves_its_tool_working_and_says_why() {
    let changed = Arc::new(AtomicBool::new(false));
    let server = hostile(views_server(Arc::clone(&changed))).await;
    let client = client_for(server.port(), quick_config());
    let snapshot = client.snapshot(&server.url(), None).await.unwrap();
    assert_eq!(snapshot.tools.len(), 6, "every tool stays");
    // Two tools share one document: read once.
    assert_eq!(server.count("resources/read"), 4);
    assert_eq!(snapshot.view_documents.len(), 1);
    let view = |name: &str| {
        let tool = snapshot.tools.iter().find(|t| t.name == name).unwrap();
        tool.view.as_ref().and_then(|v| v.document_hash.clone())
    };
    assert_eq!(view("chart"), Some(snapshot.view_documents[0].hash.clone()));
    assert_eq!(view("chart"), view("chart-too"));
    assert_eq!(view("huge"), None);
    assert_eq!(view("picture"), None);
    assert_eq!(view("broken"), None);
    let said: Vec<String> = snapshot
        .notes
        .iter()
        .filter(|n| matches!(n, Note::ViewUnreadable { .. }))
        .map(ToString::to_string)
        .collect();
    assert_eq!(said.len(), 3, "{said:?}");
    assert!(
        said.iter().any(|n| n.contains("ui://views/huge") && n.contains("more than the 8 MiB"))
    );
    assert!(said.iter().any(|n| n.contains("image/svg+xml, not text/html;profile=mcp-app")));
    assert!(
        said.iter().any(|n| n.contains("ui://views/broken") && n.contains("Resource not found"))
    );
    // A tool without a view, or whose view is unreadable, keeps its plain definition hash.
    let plain = snapshot.tools.iter().find(|t| t.name == "plain").unwrap();
    assert_eq!(
        plain.hash,
        definition_hash(&json!({"name": "plain", "inputSchema": {"type": "object"}}))
    );

    // The same definitions with a changed document are changed tools: consent is asked again.
    changed.store(true, Ordering::SeqCst);
    let again = client.snapshot(&server.url(), None).await.unwrap();
    let hash_of = |s: &llooma_mcp_client::Snapshot, name: &str| {
        s.tools.iter().find(|t| t.name == name).unwrap().hash.clone()
    };
    assert_ne!(hash_of(&snapshot, "chart"), hash_of(&again, "chart"));
    assert_eq!(hash_of(&snapshot, "huge"), hash_of(&again, "huge"));
    assert_ne!(snapshot.tools_hash, again.tools_hash);
}
