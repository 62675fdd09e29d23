//! MCP Apps: a tool that comes with an interactive view, against npm's
//! `@modelcontextprotocol/server-basic-vanillajs`. The view is read with the snapshot and kept by
//! version; a call made through its card carries what the view is drawn from; the document is
//! served to its owner only, under a policy that sandboxes it and lets it reach nothing.

use llooma_fake_model::Reply;
use serde_json::{Value, json};

use crate::support::{Events, PASSWORD};

#[tokio::test]
async fn a_tool_with_a_view_is_marked_and_its_call_carries_the_view_drawn_from_the_stored_result() {
    let Some(peer) = llooma_test_support::peers::basic_app() else { return };
    let mut w = crate::conversations::mcp_world(&peer, "clock").await;
    let (id, server_id) = (w.id.clone(), w.server_id());
    let tool = w.tool("get-time").clone();
    assert_eq!(tool["view"], true, "{tool}");
    assert!(tool.get("viewOnly").is_none(), "the model is offered it: {tool}");

    w.model.push(Reply::tool_call(tool["modelName"].as_str().unwrap(), json!({})));
    w.model.push(Reply::text("It is time."));
    let mut cards = Events::open(&w.tab, "/api/v1/approvals/events", None).await;
    let mut events =
        Events::open(&w.tab, &format!("/api/v1/conversations/{id}/events"), None).await;
    w.tab.post(&format!("/api/v1/conversations/{id}/messages"), json!({"content": "time?"})).await;
    let card = loop {
        let (name, data) = cards.next().await;
        if name == "appeared" {
            break data["card"].clone();
        }
    };
    let answered = w
        .tab
        .post(
            &format!("/api/v1/approvals/{}/answer", card["id"].as_str().unwrap()),
            json!({"choice": "allow"}),
        )
        .await;
    assert_eq!(answered.status, 200, "{answered:?}");
    let step = loop {
        let (name, data) = events.next().await;
        if name == "step" && data["state"] == "allowed" {
            break data;
        }
    };
    let view = &step["view"];
    let time = view["result"]["structuredContent"]["time"].as_str().expect("the server's time");
    assert!(time.starts_with("20") && time.ends_with('Z'), "{time}");
    assert_eq!(view["result"]["content"][0]["text"], time);
    assert_eq!(view["arguments"], json!({}));
    let document = view["document"].as_str().unwrap().to_owned();
    assert!(document.starts_with(&format!("/api/v1/mcp/servers/{server_id}/views/")), "{document}");

    // After a reload the step still holds it: the view is drawn again without a new call.
    loop {
        if events.next().await.0 == "end" {
            break;
        }
    }
    let detail = w.tab.get(&format!("/api/v1/conversations/{id}")).await.json;
    let parts = detail["replies"][0]["parts"].as_array().unwrap();
    let kept: Vec<&Value> =
        parts.iter().filter(|p| p["kind"] == "step").map(|p| &p["step"]["view"]).collect();
    assert_eq!(kept, [view], "{parts:?}");

    // The document: the app's own page, in an origin of its own that reaches nothing.
    let (status, headers, body) = w.tab.fetch(&document).await;
    assert_eq!(status, 200);
    assert_eq!(headers["content-type"], "text/html; charset=utf-8");
    assert!(String::from_utf8_lossy(&body).contains("Get Time App"));
    let policy = headers["content-security-policy"].to_str().unwrap();
    assert!(policy.starts_with("sandbox allow-scripts allow-forms;"), "{policy}");
    assert!(!policy.contains("allow-same-origin"), "{policy}");
    assert!(policy.contains("connect-src 'none'"), "{policy}");
    assert!(policy.contains("frame-ancestors 'self'"), "{policy}");
    assert!(headers.get("x-frame-options").is_none());
    // Nothing else of the API may be framed, by a view or anyone.
    let (_, api_headers, _) = w.tab.fetch(&format!("/api/v1/conversations/{id}")).await;
    assert_eq!(api_headers["x-frame-options"], "DENY");

    // Nobody else's.
    w.tab.send("PATCH", "/api/v1/admin/settings", Some(json!({"registrationOpen": true}))).await;
    let mut other = w.server.tab();
    other.register("other", PASSWORD).await;
    assert_eq!(other.fetch(&document).await.0, 404);
    assert_eq!(w.server.tab().fetch(&document).await.0, 401);
    let unknown = format!("/api/v1/mcp/servers/{server_id}/views/{}", "0".repeat(64));
    assert_eq!(w.tab.fetch(&unknown).await.0, 404);

    // The view's own calls: under the call that drew it, to its server's tools only, each put
    // to the person on a card.
    let call_id = step["callId"].as_str().unwrap().to_owned();
    let ask = |call_id: &str, name: &str| json!({"callId": call_id, "name": name, "arguments": {}});
    let forged = w.tab.post("/api/v1/mcp/view-calls", ask("no-such-call", "get-time")).await;
    assert_eq!(forged.status, 404, "{forged:?}");
    let theirs = other.post("/api/v1/mcp/view-calls", ask(&call_id, "get-time")).await;
    assert_eq!(theirs.status, 404, "another account's call: {theirs:?}");
    let elsewhere = w.tab.post("/api/v1/mcp/view-calls", ask(&call_id, "echo")).await;
    assert_eq!(elsewhere.status, 400, "{elsewhere:?}");
    assert_eq!(elsewhere.json["error"], "unknown_tool");
    // A group the person switched off stays off for the view too.
    let off = json!({"group": "", "enabled": false});
    let path = format!("/api/v1/mcp/servers/{server_id}/groups");
    assert_eq!(w.tab.send("PUT", &path, Some(off)).await.status, 200);
    let switched_off = w.tab.post("/api/v1/mcp/view-calls", ask(&call_id, "get-time")).await;
    assert_eq!(switched_off.status, 403, "{switched_off:?}");
    let on = json!({"group": "", "enabled": true});
    assert_eq!(w.tab.send("PUT", &path, Some(on)).await.status, 200);
    // Reading its server's resources needs no card, as reading does not for the person.
    let read_body = json!({"callId": call_id, "uri": "ui://get-time/mcp-app.html"});
    let read = w.tab.post("/api/v1/mcp/view-reads", read_body.clone()).await;
    assert_eq!(read.status, 200, "{read:?}");
    assert_eq!(read.json["contents"][0]["uri"], "ui://get-time/mcp-app.html");
    assert!(read.json["contents"][0]["text"].as_str().unwrap().contains("<html"), "{read:?}");
    assert_eq!(other.post("/api/v1/mcp/view-reads", read_body).await.status, 404);
    for (choice, status) in [("refuse", 409), ("allow", 200)] {
        let mut asking = w.server.tab();
        asking.login("root", PASSWORD).await;
        let body = ask(&call_id, "get-time");
        let made = tokio::spawn(async move { asking.post("/api/v1/mcp/view-calls", body).await });
        let card = loop {
            let (name, data) = cards.next().await;
            if name == "appeared" {
                break data["card"].clone();
            }
        };
        assert_eq!(card["toolName"], "get-time");
        assert_eq!(card["modelToolName"], "the view of get-time");
        assert_eq!(card["conversationId"], id.as_str());
        let path = format!("/api/v1/approvals/{}/answer", card["id"].as_str().unwrap());
        assert_eq!(w.tab.post(&path, json!({"choice": choice})).await.status, 200);
        let made = made.await.unwrap();
        assert_eq!(made.status, status, "{choice}: {made:?}");
        if choice == "allow" {
            let time = made.json["structuredContent"]["time"].as_str().unwrap();
            assert!(time.ends_with('Z'), "{made:?}");
        } else {
            assert_eq!(made.json["error"], "call_not_allowed");
        }
    }
}
