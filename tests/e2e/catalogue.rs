//! The instance's MCP catalogue through the API: administrators' entries, the catalogue file,
//! usage counted per instance (never per account), ratings, and consent tied to the reviewed
//! tool list.

use llooma_fake_model::{FakeModel, Reply};
use serde_json::{Value, json};

use crate::support::{Events, PASSWORD, Server, Tab, TestDb};

fn only_entry(list: &Value) -> &Value {
    let entries = list.as_array().unwrap();
    assert_eq!(entries.len(), 1, "{list}");
    &entries[0]
}

/// The account behind `tab` calls `tool` (a model-facing name of one of its MCP tools) once in a
/// new conversation, allowing the card, and waits for the turn's end.
pub(crate) async fn one_allowed_call(
    alice: &mut Tab,
    model: &FakeModel,
    provider_id: &str,
    tool: &str,
) {
    let conversation = alice
        .post(
            "/api/v1/conversations",
            json!({"title": "Echo", "providerId": provider_id, "model": "fake-model"}),
        )
        .await;
    let id = conversation.json["id"].as_str().unwrap().to_owned();
    alice
        .send("PATCH", &format!("/api/v1/conversations/{id}"), Some(json!({"mcpEnabled": true})))
        .await;
    model.push(Reply::tool_call(tool, json!({"message": "hello"})));
    model.push(Reply::text("It echoed."));
    let mut cards = Events::open(alice, "/api/v1/approvals/events", None).await;
    let mut events = Events::open(alice, &format!("/api/v1/conversations/{id}/events"), None).await;
    alice.post(&format!("/api/v1/conversations/{id}/messages"), json!({"content": "echo"})).await;
    let card = loop {
        let (name, data) = cards.next().await;
        if name == "appeared" {
            break data["card"]["id"].as_str().unwrap().to_owned();
        }
    };
    let allowed =
        alice.post(&format!("/api/v1/approvals/{card}/answer"), json!({"choice": "allow"})).await;
    assert_eq!(allowed.status, 200, "{allowed:?}");
    while events.next().await.0 != "end" {}
}

#[tokio::test]
async fn discover_counts_use_per_instance_rates_and_registers_only_what_was_reviewed() {
    let Some(peer) = crate::peers::everything() else { return };
    let model = FakeModel::start([]).await.unwrap();
    let db = TestDb::new();
    let server = Server::start(
        &db,
        &[("MCP_ALLOWED_ORIGINS", &peer.origin()), ("PROVIDER_ALLOWED_ORIGINS", &model.origin())],
    );
    let mut root = server.tab();
    root.register("root", PASSWORD).await;
    root.send(
        "PATCH",
        "/api/v1/admin/settings",
        Some(json!({"registrationOpen": true, "usersCanAddMcpServers": true})),
    )
    .await;
    let provider = root
        .post(
            "/api/v1/admin/providers",
            json!({"name": "fake", "baseUrl": model.base_url(), "apiKey": "sk-fake"}),
        )
        .await;
    let provider_id = provider.json["id"].as_str().unwrap().to_owned();
    let mut alice = server.tab();
    alice.register("alice", PASSWORD).await;

    // Only administrators keep the catalogue, and an entry meets the same address rules.
    let entry = json!({
        "label": "Everything",
        "address": peer.url(),
        "description": "Every kind of tool, for trying things.",
        "tags": ["Demo", "testing"],
        "icon": "🧰",
    });
    assert_eq!(alice.post("/api/v1/admin/mcp/catalogue", entry.clone()).await.status, 403);
    let bad = root
        .post("/api/v1/admin/mcp/catalogue", json!({"label": "x", "address": "ftp://x.example/"}))
        .await;
    assert_eq!((bad.status, bad.json["error"].as_str()), (400, Some("invalid_url")), "{bad:?}");
    let unknown = root
        .post(
            "/api/v1/admin/mcp/catalogue",
            json!({"label": "x", "address": peer.url(), "token": "t"}),
        )
        .await;
    assert_eq!(unknown.status, 400, "unknown fields are refused: {unknown:?}");
    let created = root.post("/api/v1/admin/mcp/catalogue", entry).await;
    assert_eq!(created.status, 201, "{created:?}");
    let entry_id = created.json["id"].as_str().unwrap().to_owned();
    assert_eq!(created.json["tags"], json!(["demo", "testing"]));
    // One entry per server, however its address is spelled.
    let spelled = peer.url().replace("http://", "HTTP://");
    let again = root
        .post("/api/v1/admin/mcp/catalogue", json!({"label": "Again", "address": spelled}))
        .await;
    assert_eq!(
        (again.status, again.json["error"].as_str()),
        (409, Some("catalogue_address_taken"))
    );
    let path = format!(
        "/api/v1/mcp/catalogue?address={}",
        spelled.replace(':', "%3A").replace('/', "%2F")
    );
    assert_eq!(only_entry(&alice.get(&path).await.json)["id"], entry_id.as_str());

    let listed = alice.get("/api/v1/mcp/catalogue").await;
    let seen = only_entry(&listed.json);
    assert_eq!(seen["usage"], json!({"accounts": 0, "callsLast30Days": 0}));
    assert_eq!((seen["added"].clone(), seen["fromFile"].clone()), (json!(false), json!(false)));
    let link = seen["registerLink"].as_str().unwrap();
    assert!(link.starts_with("/settings/tools/mcp/new?address=http%3A%2F%2F127.0.0.1"), "{link}");
    assert!(link.ends_with("&label=Everything"), "{link}");
    // Search and tags narrow the list.
    assert_eq!(
        alice.get("/api/v1/mcp/catalogue?q=trying%20kind").await.json.as_array().unwrap().len(),
        1
    );
    assert_eq!(alice.get("/api/v1/mcp/catalogue?q=mail").await.json, json!([]));
    assert_eq!(alice.get("/api/v1/mcp/catalogue?tag=demo").await.json.as_array().unwrap().len(), 1);
    assert_eq!(alice.get("/api/v1/mcp/catalogue?tag=mail").await.json, json!([]));

    // Consent is tied to the reviewed tool list: another list stores nothing.
    let form = json!({"label": "everything", "address": peer.url()});
    let review = alice.post("/api/v1/mcp/servers/test", form.clone()).await;
    assert_eq!(review.status, 200, "{review:?}");
    let digest = review.json["toolsDigest"].as_str().unwrap().to_owned();
    assert_eq!(digest.len(), 64);
    let mut stale = form.clone();
    stale["reviewedTools"] = json!("f".repeat(64));
    let refused = alice.post("/api/v1/mcp/servers", stale).await;
    assert_eq!((refused.status, refused.json["error"].as_str()), (409, Some("tools_changed")));
    assert_eq!(alice.get("/api/v1/mcp/servers").await.json, json!([]));
    let mut consented = form.clone();
    consented["reviewedTools"] = json!(digest);
    let added = alice.post("/api/v1/mcp/servers", consented).await;
    assert_eq!(added.status, 201, "{added:?}");
    let alice_server = added.json["server"]["id"].as_str().unwrap().to_owned();
    let echo = crate::conversations::model_name_in(&added.json, "echo");

    // In use by one account: Alice sees it as hers, the administrator only sees the count.
    let mine = alice.get("/api/v1/mcp/catalogue").await;
    assert_eq!(only_entry(&mine.json)["usage"]["accounts"], 1);
    assert_eq!(only_entry(&mine.json)["added"], true);
    let theirs = root.get("/api/v1/mcp/catalogue").await;
    assert_eq!(only_entry(&theirs.json)["usage"]["accounts"], 1);
    assert_eq!(only_entry(&theirs.json)["added"], false);
    for private in ["alice", alice_server.as_str()] {
        assert!(!theirs.text.contains(private), "the catalogue names {private}: {}", theirs.text);
    }

    // A call that went out is counted for the instance.
    one_allowed_call(&mut alice, &model, &provider_id, &echo).await;
    let counted = root.get("/api/v1/mcp/catalogue").await;
    assert_eq!(only_entry(&counted.json)["usage"]["callsLast30Days"], 1, "{counted:?}");

    // Ratings: one per account, changeable, averaged; the caller's own is theirs alone.
    let rating = format!("/api/v1/mcp/catalogue/{entry_id}/rating");
    assert_eq!(alice.send("PUT", &rating, Some(json!({"stars": 4}))).await.status, 204);
    assert_eq!(root.send("PUT", &rating, Some(json!({"stars": 2}))).await.status, 204);
    let rated = alice.get("/api/v1/mcp/catalogue").await;
    assert_eq!(only_entry(&rated.json)["rating"], json!({"average": 3.0, "count": 2, "mine": 4}));
    assert_eq!(alice.send("PUT", &rating, Some(json!({"stars": 5}))).await.status, 204);
    let rated = root.get("/api/v1/mcp/catalogue").await;
    assert_eq!(only_entry(&rated.json)["rating"], json!({"average": 3.5, "count": 2, "mine": 2}));
    let zero = alice.send("PUT", &rating, Some(json!({"stars": 0}))).await;
    assert_eq!((zero.status, zero.json["error"].as_str()), (400, Some("invalid_rating")));
    let nowhere =
        alice.send("PUT", "/api/v1/mcp/catalogue/no-such-entry/rating", Some(json!({"stars": 3})));
    assert_eq!(nowhere.await.status, 404);
    assert_eq!(root.send("DELETE", &rating, None).await.status, 204);
    let rated = alice.get("/api/v1/mcp/catalogue").await;
    assert_eq!(only_entry(&rated.json)["rating"], json!({"average": 5.0, "count": 1, "mine": 5}));

    // Changing and removing the entry; the server Alice added stays hers.
    let mut changed = json!({"label": "Everything (demo)", "address": peer.url()});
    let put = root
        .send("PUT", &format!("/api/v1/admin/mcp/catalogue/{entry_id}"), Some(changed.clone()))
        .await;
    assert_eq!((put.status, put.json["label"].as_str()), (200, Some("Everything (demo)")));
    changed["label"] = json!("");
    let empty =
        root.send("PUT", &format!("/api/v1/admin/mcp/catalogue/{entry_id}"), Some(changed)).await;
    assert_eq!(empty.status, 400, "{empty:?}");
    let gone = root.send("DELETE", &format!("/api/v1/admin/mcp/catalogue/{entry_id}"), None).await;
    assert_eq!(gone.status, 204);
    assert_eq!(alice.get("/api/v1/mcp/catalogue").await.json, json!([]));
    assert_eq!(alice.get("/api/v1/mcp/servers").await.json.as_array().unwrap().len(), 1);
}

#[tokio::test]
async fn the_catalogue_file_adds_read_only_entries_and_a_mistake_stops_start_up_with_its_line() {
    let dir = tempfile::tempdir().unwrap();
    let file = dir.path().join("catalogue.toml");
    std::fs::write(
        &file,
        "[[server]]\nid = \"hub\"\nlabel = \"Team hub\"\naddress = \"https://hub.example.org/mcp\"\n\
         token_needed = true\ntoken_help = \"Ask the platform team.\"\ntags = [\"team\"]\n",
    )
    .unwrap();
    let db = TestDb::new();
    let path = file.to_string_lossy().into_owned();
    let server = Server::start(&db, &[("LLOOMA_MCP_CATALOGUE_FILE", &path)]);
    let mut root = server.tab();
    root.register("root", PASSWORD).await;
    let listed = root.get("/api/v1/mcp/catalogue").await;
    let entry = only_entry(&listed.json);
    assert_eq!(entry["id"], "file:hub");
    assert_eq!(
        (entry["fromFile"].clone(), entry["tokenNeeded"].clone()),
        (json!(true), json!(true))
    );
    assert_eq!(entry["tokenHelp"], "Ask the platform team.");
    // Edited in the file, not here; rated like any entry.
    let edit = root
        .send(
            "PUT",
            "/api/v1/admin/mcp/catalogue/file:hub",
            Some(json!({"label": "x", "address": "https://hub.example.org/mcp"})),
        )
        .await;
    assert_eq!((edit.status, edit.json["error"].as_str()), (409, Some("catalogue_file_entry")));
    assert_eq!(root.send("DELETE", "/api/v1/admin/mcp/catalogue/file:hub", None).await.status, 409);
    let rate =
        root.send("PUT", "/api/v1/mcp/catalogue/file:hub/rating", Some(json!({"stars": 5}))).await;
    assert_eq!(rate.status, 204);
    // An administrator cannot list the file's server again...
    let again = json!({"label": "Hub again", "address": "https://hub.example.org/mcp"});
    let again = root.post("/api/v1/admin/mcp/catalogue", again).await;
    assert_eq!(
        (again.status, again.json["error"].as_str()),
        (409, Some("catalogue_address_taken"))
    );
    let mail = json!({"label": "Mail", "address": "https://mail.example.org/mcp"});
    assert_eq!(root.post("/api/v1/admin/mcp/catalogue", mail).await.status, 201);
    drop(server);

    // ...and when the file later lists an administrator's server, start-up says so.
    let with_mail = format!(
        "{}\n[[server]]\nid = \"mail\"\nlabel = \"Mail\"\naddress = \"https://mail.example.org/mcp\"\n",
        std::fs::read_to_string(&file).unwrap()
    );
    std::fs::write(&file, with_mail).unwrap();
    let server = Server::start(&db, &[("LLOOMA_MCP_CATALOGUE_FILE", &path)]);
    let log = server.log_text();
    assert!(log.contains("list the same server") && log.contains("mail.example.org"), "{log}");
    drop(server);

    // A mistake stops start-up naming the file, the line and the field.
    std::fs::write(
        &file,
        "[[server]]\nid = \"hub\"\nlabel = \"Team hub\"\naddress = \"https://hub.example.org/mcp\"\n\
         token = \"secret\"\n",
    )
    .unwrap();
    let log =
        Server::try_start(&db, &[("LLOOMA_MCP_CATALOGUE_FILE", &path)]).err().expect("refused");
    assert!(log.contains("catalogue.toml") && log.contains("line 5"), "{log}");
    assert!(log.contains("token"), "{log}");
    std::fs::write(&file, "[[server]\nid = \"hub\"\n").unwrap();
    let log =
        Server::try_start(&db, &[("LLOOMA_MCP_CATALOGUE_FILE", &path)]).err().expect("refused");
    assert!(log.contains("line 1"), "{log}");
}
