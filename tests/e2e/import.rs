//! Conversations brought into an account from a file: a conversation exported from Llooma as
//! JSON comes back whole; ChatGPT's `conversations.json` comes in as the branches it shows, with
//! their times, searchable and ready to go on with; what is left out is reported; anything else
//! is refused with what to choose.

use llooma_fake_model::{FakeModel, Reply};
use serde_json::{Value, json};

use crate::support::{Events, PASSWORD, Server, TestDb};

/// A ChatGPT export of two conversations: one with an edited question (two branches), a tool's
/// output and an image; one empty.
pub(crate) fn chatgpt_export() -> Value {
    let text = |s: &str| json!({"content_type": "text", "parts": [s]});
    let node = |id: &str, parent: Option<&str>, role: &str, content: Value, t: f64| {
        json!({"id": id, "parent": parent, "children": [],
               "message": {"id": id, "author": {"role": role}, "create_time": t,
                           "content": content, "metadata": {}}})
    };
    json!([
        {
            "title": "Kite names",
            "create_time": 1_700_000_000.0,
            "update_time": 1_700_000_400.0,
            "current_node": "a2",
            "mapping": {
                "root": {"id": "root", "parent": null, "children": ["q1"], "message": null},
                "q1": node("q1", Some("root"), "user", text("What should I call my red kite?"), 1_700_000_010.0),
                "a1": node("a1", Some("q1"), "assistant", text("How about Loire, after the river?"), 1_700_000_020.0),
                "q2-old": node("q2-old", Some("a1"), "user", text("a question I edited"), 1_700_000_030.0),
                "q2": node("q2", Some("a1"), "user", json!({"content_type": "multimodal_text", "parts": [
                    {"content_type": "image_asset_pointer", "asset_pointer": "file-service://kite"},
                    "And for this blue one?"]}), 1_700_000_040.0),
                "t": node("t", Some("q2"), "tool", text("image analysed"), 1_700_000_041.0),
                "a2": node("a2", Some("t"), "assistant", text("Call it Danube."), 1_700_000_050.0)
            }
        },
        {"title": "Empty", "create_time": 1_700_000_500.0, "current_node": null, "mapping": {}}
    ])
}

#[tokio::test]
async fn conversations_come_in_from_chatgpt_and_from_a_llooma_export_and_other_files_are_refused() {
    let model = FakeModel::start([Reply::text("Tides at noon."), Reply::text("Still noon.")])
        .await
        .unwrap();
    let db = TestDb::new();
    let server = Server::start(&db, &[("PROVIDER_ALLOWED_ORIGINS", &model.origin())]);
    let (mut tab, id) = crate::conversations::setup(&server, &model).await;

    // ChatGPT's export: the branch it shows, words only, at their times.
    let report = tab.upload("/api/v1/import", chatgpt_export().to_string().into_bytes()).await;
    assert_eq!(report.status, 200, "{report:?}");
    assert_eq!(report.json["source"], "chatgpt");
    assert_eq!(
        (report.json["conversations"].as_u64(), report.json["messages"].as_u64()),
        (Some(1), Some(4))
    );
    assert_eq!(report.json["skippedMessages"], 1, "the tool's output");
    assert_eq!(
        report.json["skipped"],
        json!([{"title": "Empty", "reason": "it holds no message"}])
    );
    let list = tab.get("/api/v1/conversations").await.json;
    let kites = list
        .as_array()
        .unwrap()
        .iter()
        .find(|c| c["title"] == "Kite names")
        .unwrap_or_else(|| panic!("{list}"))
        .clone();
    let kites_id = kites["id"].as_str().unwrap().to_owned();
    assert!(kites["updatedAt"].as_str().unwrap().starts_with("2023-11-14"), "{kites}");
    let detail = tab.get(&format!("/api/v1/conversations/{kites_id}")).await.json;
    let said: Vec<(String, String)> = detail["messages"]
        .as_array()
        .unwrap()
        .iter()
        .map(|m| {
            (m["role"].as_str().unwrap().to_owned(), m["content"].as_str().unwrap().to_owned())
        })
        .collect();
    assert_eq!(
        said,
        [
            ("user".to_owned(), "What should I call my red kite?".to_owned()),
            ("assistant".to_owned(), "How about Loire, after the river?".to_owned()),
            (
                "user".to_owned(),
                "[image asset pointer not imported]\nAnd for this blue one?".to_owned()
            ),
            ("assistant".to_owned(), "Call it Danube.".to_owned()),
        ]
    );
    assert_eq!(detail["conversation"]["model"], "fake-model", "ready to go on with");
    // Searchable once the index has caught up.
    let mut found = Value::Null;
    for _ in 0..100 {
        found = tab.get("/api/v1/conversations?q=danube").await.json;
        if found.as_array().is_some_and(|c| c.len() == 1) {
            break;
        }
        tokio::time::sleep(std::time::Duration::from_millis(100)).await;
    }
    assert_eq!(found[0]["id"], kites_id.as_str(), "{found}");
    // And it goes on: the model reads what was imported.
    let mut events =
        Events::open(&tab, &format!("/api/v1/conversations/{kites_id}/events"), None).await;
    let sent = tab
        .post(&format!("/api/v1/conversations/{kites_id}/messages"), json!({"content": "Thanks!"}))
        .await;
    assert_eq!(sent.status, 202, "{sent:?}");
    while events.next().await.0 != "end" {}
    let asked = model.chat_bodies().last().unwrap().to_string();
    assert!(asked.contains("Call it Danube.") && asked.contains("red kite"), "{asked}");

    // A conversation exported from Llooma comes back as a new one, whole.
    model.push(Reply::text("Tides at noon."));
    let mut events = Events::open(&tab, &format!("/api/v1/conversations/{id}/events"), None).await;
    tab.post(
        &format!("/api/v1/conversations/{id}/messages"),
        json!({"content": "When is high tide?"}),
    )
    .await;
    while events.next().await.0 != "end" {}
    let (status, _, exported) =
        tab.fetch(&format!("/api/v1/conversations/{id}/export?format=json")).await;
    assert_eq!(status, 200);
    let back = tab.upload("/api/v1/import", exported).await;
    assert_eq!((back.status, back.json["source"].as_str()), (200, Some("llooma")), "{back:?}");
    assert_eq!(back.json["messages"], 2);
    let list = tab.get("/api/v1/conversations").await.json;
    let copies: Vec<&Value> =
        list.as_array().unwrap().iter().filter(|c| c["title"] == "Test").collect();
    assert_eq!(copies.len(), 2, "{list}");

    // Anything else: refused, saying what to choose, nothing brought in.
    for bad in [&b"not json at all"[..], b"{\"hello\": 1}", b"[{\"mapping\": 7}]"] {
        let refused = tab.upload("/api/v1/import", bad.to_vec()).await;
        assert_eq!((refused.status, refused.json["error"].as_str()), (400, Some("invalid_import")));
        assert!(refused.json["message"].as_str().unwrap().contains("export"), "{refused:?}");
    }
    let after = tab.get("/api/v1/conversations").await.json;
    assert_eq!(after.as_array().unwrap().len(), 3);

    // Another account's import is its own.
    tab.send("PATCH", "/api/v1/admin/settings", Some(json!({"registrationOpen": true}))).await;
    let mut other = server.tab();
    other.register("bob", PASSWORD).await;
    assert_eq!(other.get(&format!("/api/v1/conversations/{kites_id}")).await.status, 404);
    assert!(other.get("/api/v1/conversations").await.json.as_array().unwrap().is_empty());
    let signed_out =
        server.tab().upload("/api/v1/import", chatgpt_export().to_string().into_bytes()).await;
    assert_eq!(signed_out.status, 401);
}

#[tokio::test]
async fn an_account_s_archive_holds_everything_but_secrets_and_comes_back_into_another_account() {
    let Some(peer) = crate::peers::gateway(Some("gateway-token-123")) else { return };
    let model = FakeModel::start([Reply::text("At noon.")]).await.unwrap();
    let db = TestDb::new();
    let server = Server::start(
        &db,
        &[("PROVIDER_ALLOWED_ORIGINS", &model.origin()), ("MCP_ALLOWED_ORIGINS", &peer.origin())],
    );
    let (mut tab, id) = crate::conversations::setup(&server, &model).await;
    let mut events = Events::open(&tab, &format!("/api/v1/conversations/{id}/events"), None).await;
    tab.post(&format!("/api/v1/conversations/{id}/messages"), json!({"content": "High tide?"}))
        .await;
    while events.next().await.0 != "end" {}
    let persona =
        json!({"name": "Sailor", "prompt": "Speak like a sailor.", "memoryEnabled": true});
    assert_eq!(tab.post("/api/v1/personas", persona).await.status, 201);
    let server_token = "gateway-token-123";
    let added = tab
        .post(
            "/api/v1/mcp/servers",
            json!({"label": "tides", "address": peer.url(), "token": server_token}),
        )
        .await;
    assert_eq!(added.status, 201, "{added:?}");

    let (status, headers, body) = tab.fetch("/api/v1/me/export").await;
    assert_eq!(status, 200);
    let disposition = headers["content-disposition"].to_str().unwrap().to_owned();
    assert!(
        disposition.starts_with("attachment") && disposition.contains("llooma-root"),
        "{disposition}"
    );
    let text = String::from_utf8(body.clone()).unwrap();
    assert!(!text.contains(server_token), "the archive holds a token");
    let archive: Value = serde_json::from_str(&text).unwrap();
    assert_eq!(archive["format"], "llooma.account");
    assert_eq!(archive["account"]["username"], "root");
    assert_eq!(archive["conversations"][0]["messages"][1]["content"], "At noon.");
    assert_eq!(archive["personas"][0]["name"], "Sailor");
    assert!(archive["settings"]["toolBudget"].is_number(), "{}", archive["settings"]);
    let servers = &archive["mcpServers"];
    assert_eq!(
        (servers[0]["label"].as_str(), servers[0]["hadToken"].as_bool()),
        (Some("tides"), Some(true)),
        "{servers}"
    );

    // Into another account: its conversations and personas.
    tab.send("PATCH", "/api/v1/admin/settings", Some(json!({"registrationOpen": true}))).await;
    let mut bob = server.tab();
    bob.register("bob", PASSWORD).await;
    let report = bob.upload("/api/v1/import", body).await;
    assert_eq!(report.status, 200, "{report:?}");
    assert_eq!(report.json["source"], "llooma-account");
    assert_eq!(
        (report.json["conversations"].as_u64(), report.json["personas"].as_u64()),
        (Some(1), Some(1))
    );
    let list = bob.get("/api/v1/conversations").await.json;
    let copy = list[0]["id"].as_str().unwrap().to_owned();
    let detail = bob.get(&format!("/api/v1/conversations/{copy}")).await.json;
    assert_eq!(detail["messages"][0]["content"], "High tide?");
    let personas = bob.get("/api/v1/personas").await.json;
    assert_eq!(personas[0]["name"], "Sailor", "{personas}");
    // Twice: the persona's name is taken, said so; the conversation comes again.
    let again = bob.upload("/api/v1/import", text.into_bytes()).await;
    assert_eq!(again.json["personas"], 0);
    assert_eq!(again.json["skipped"][0]["title"], "persona Sailor", "{again:?}");
    // Signed out: nothing.
    assert_eq!(server.tab().fetch("/api/v1/me/export").await.0, 401);
}
