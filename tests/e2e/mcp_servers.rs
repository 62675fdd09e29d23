use serde_json::{Value, json};

use crate::peers;
use crate::support::{PASSWORD, Server, Tab, TestDb};

fn names(list: &Value, field: &str) -> Vec<String> {
    list.as_array().unwrap().iter().map(|t| t[field].as_str().unwrap().to_owned()).collect()
}

async fn admin(server: &Server) -> Tab {
    let mut tab = server.tab();
    assert_eq!(tab.register("root", PASSWORD).await.status, 201);
    tab
}

#[tokio::test]
async fn adding_server_everything_tests_first_then_lists_from_the_snapshot() {
    let Some(peer) = peers::everything() else { return };
    let db = TestDb::new();
    let server = Server::start(&db, &[("MCP_ALLOWED_ORIGINS", &peer.origin())]);
    let mut tab = admin(&server).await;

    let test = tab
        .post("/api/v1/mcp/servers/test", json!({"label": "Everything", "address": peer.url()}))
        .await;
    assert_eq!(test.status, 200, "{test:?}");
    let tools = names(&test.json["tools"], "name");
    assert!(tools.contains(&"echo".to_owned()), "{tools:?}");
    assert!(names(&test.json["tools"], "modelName").contains(&"mcp_everything_echo".to_owned()));
    // A test stores nothing.
    assert_eq!(tab.get("/api/v1/mcp/servers").await.json, json!([]));

    let added = tab
        .post("/api/v1/mcp/servers", json!({"label": "Everything", "address": peer.url()}))
        .await;
    assert_eq!(added.status, 201, "{added:?}");
    let id = added.json["server"]["id"].as_str().unwrap().to_owned();
    assert_eq!(added.json["server"]["toolCount"].as_u64().unwrap() as usize, tools.len());
    assert_eq!(added.json["server"]["active"], true);

    // Listing does not contact the server: it still answers with the peer gone.
    drop(peer);
    let list = tab.get("/api/v1/mcp/servers").await;
    assert_eq!(list.json[0]["toolCount"].as_u64().unwrap() as usize, tools.len(), "{list:?}");
    let detail = tab.get(&format!("/api/v1/mcp/servers/{id}")).await;
    assert_eq!(names(&detail.json["tools"], "name"), tools);
    assert_eq!(tab.get("/api/v1/mcp/servers/details").await.json, json!([detail.json]));

    // Update tools against a server that is gone says so, and keeps the snapshot.
    let refresh = tab.post(&format!("/api/v1/mcp/servers/{id}/refresh"), json!({})).await;
    assert_eq!(refresh.status, 422, "{refresh:?}");
    assert_eq!(refresh.json["error"], "mcp_unreachable");
    assert_eq!(
        tab.get("/api/v1/mcp/servers").await.json[0]["toolCount"].as_u64().unwrap() as usize,
        tools.len()
    );

    // The owner's switch.
    let off = tab
        .send("PATCH", &format!("/api/v1/mcp/servers/{id}"), Some(json!({"enabled": false})))
        .await;
    assert_eq!(off.json["active"], false, "{off:?}");
    assert_eq!(tab.send("DELETE", &format!("/api/v1/mcp/servers/{id}"), None).await.status, 204);
    assert_eq!(tab.get(&format!("/api/v1/mcp/servers/{id}")).await.status, 404);
}

#[tokio::test]
async fn a_private_address_is_refused_until_the_instance_allows_its_origin() {
    let Some(peer) = peers::everything() else { return };
    let db = TestDb::new();
    let server = Server::start(&db, &[]);
    let mut tab = admin(&server).await;
    let refused =
        tab.post("/api/v1/mcp/servers", json!({"label": "local", "address": peer.url()})).await;
    assert_eq!(refused.status, 422, "{refused:?}");
    assert_eq!(refused.json["error"], "address_refused");
    assert!(
        refused.json["message"].as_str().unwrap().contains("MCP_ALLOWED_ORIGINS"),
        "{refused:?}"
    );
    assert_eq!(tab.get("/api/v1/mcp/servers").await.json, json!([]));
    // Cloud metadata and odd spellings of loopback are refused the same way.
    for address in ["http://169.254.169.254/mcp", "http://0x7f000001:1/mcp", "http://[::1]:1/mcp"] {
        let reply = tab.post("/api/v1/mcp/servers/test", json!({"address": address})).await;
        assert_eq!(reply.json["error"], "address_refused", "{address}: {reply:?}");
    }
}

#[tokio::test]
async fn gateway_groups_switches_budget_and_a_wrong_token() {
    let Some(peer) = peers::gateway(Some("gateway-token-123")) else { return };
    let db = TestDb::new();
    let server = Server::start(&db, &[("MCP_ALLOWED_ORIGINS", &peer.origin())]);
    let mut tab = admin(&server).await;

    let wrong = tab
        .post(
            "/api/v1/mcp/servers",
            json!({"label": "hub", "address": peer.url(), "token": "nope"}),
        )
        .await;
    assert_eq!(wrong.status, 422, "{wrong:?}");
    assert_eq!(wrong.json["error"], "mcp_token_refused");
    assert!(!wrong.text.contains("nope"));

    let added = tab
        .post(
            "/api/v1/mcp/servers",
            json!({"label": "hub", "address": peer.url(), "token": "gateway-token-123"}),
        )
        .await;
    assert_eq!(added.status, 201, "{added:?}");
    assert!(!added.text.contains("gateway-token-123"));
    assert_eq!(added.json["server"]["hasToken"], true);
    let id = added.json["server"]["id"].as_str().unwrap().to_owned();
    let groups = names(&added.json["groups"], "key");
    for expected in ["Chatto", "home-assistant"] {
        assert!(groups.contains(&expected.to_owned()), "{groups:?}");
    }
    for name in names(&added.json["tools"], "modelName") {
        assert!(name.len() <= 64 && name.starts_with("mcp_hub_"), "{name}");
        assert!(name.chars().all(|c| c.is_ascii_alphanumeric() || c == '_' || c == '-'), "{name}");
    }

    // The stored (encrypted) token is used for Update tools.
    let refresh = tab.post(&format!("/api/v1/mcp/servers/{id}/refresh"), json!({})).await;
    assert_eq!(refresh.status, 200, "{refresh:?}");
    assert_eq!(refresh.json["added"], json!([]));
    assert_eq!(refresh.json["changed"], json!([]));

    // Switching a group off takes its tools out of what the model is offered.
    let before = tab.get("/api/v1/mcp/settings").await.json["switchedOn"].as_u64().unwrap();
    let house = tab
        .send(
            "PUT",
            &format!("/api/v1/mcp/servers/{id}/groups"),
            Some(json!({"group": "home-assistant", "enabled": false})),
        )
        .await;
    assert_eq!(house.status, 200, "{house:?}");
    for tool in house.json["tools"].as_array().unwrap() {
        assert_eq!(tool["enabled"], tool["group"] != "home-assistant", "{tool}");
    }
    let after = tab.get("/api/v1/mcp/settings").await.json["switchedOn"].as_u64().unwrap();
    // turn_on, turn_off and set_thermostat.
    assert_eq!(after, before - 3);
    let unknown = tab
        .send(
            "PUT",
            &format!("/api/v1/mcp/servers/{id}/groups"),
            Some(json!({"group": "nope", "enabled": false})),
        )
        .await;
    assert_eq!(unknown.status, 400);

    // The budget leaves tools out deterministically and says which.
    let tight = tab.send("PATCH", "/api/v1/mcp/settings", Some(json!({"toolBudget": 2}))).await;
    assert_eq!(tight.json["offered"], 2, "{tight:?}");
    assert_eq!(tight.json["leftOut"].as_array().unwrap().len() as u64, after - 2);
    assert_eq!(tight.json["budgetWarning"], Value::Null);
    let wide = tab.send("PATCH", "/api/v1/mcp/settings", Some(json!({"toolBudget": 150}))).await;
    assert!(wide.json["budgetWarning"].as_str().unwrap().contains("every request"), "{wide:?}");
    assert_eq!(
        tab.send("PATCH", "/api/v1/mcp/settings", Some(json!({"toolBudget": 0}))).await.status,
        400
    );
}

#[tokio::test]
async fn only_permitted_accounts_add_servers_and_nobody_reaches_another_accounts_server() {
    let Some(peer) = peers::everything() else { return };
    let db = TestDb::new();
    let server = Server::start(&db, &[("MCP_ALLOWED_ORIGINS", &peer.origin())]);
    let mut root = admin(&server).await;
    root.send("PATCH", "/api/v1/admin/settings", Some(json!({"registrationOpen": true}))).await;
    let mut user = server.tab();
    user.register("user", PASSWORD).await;

    let denied = user.post("/api/v1/mcp/servers", json!({"address": peer.url()})).await;
    assert_eq!(denied.status, 403, "{denied:?}");
    assert!(denied.json["message"].as_str().unwrap().contains("administrator can allow it"));
    assert_eq!(
        user.post("/api/v1/mcp/servers/test", json!({"address": peer.url()})).await.status,
        403
    );

    let added =
        root.post("/api/v1/mcp/servers", json!({"label": "mine", "address": peer.url()})).await;
    let id = added.json["server"]["id"].as_str().unwrap().to_owned();
    // Another account's id is not found, whatever is asked of it.
    assert_eq!(user.get(&format!("/api/v1/mcp/servers/{id}")).await.status, 404);
    assert_eq!(
        user.send("PATCH", &format!("/api/v1/mcp/servers/{id}"), Some(json!({"enabled": false})))
            .await
            .status,
        404
    );
    assert_eq!(
        user.send("PUT", &format!("/api/v1/mcp/servers/{id}/token"), Some(json!({"token": "x"})))
            .await
            .status,
        404
    );
    assert_eq!(
        user.post(&format!("/api/v1/mcp/servers/{id}/refresh"), json!({})).await.status,
        404
    );
    assert_eq!(user.send("DELETE", &format!("/api/v1/mcp/servers/{id}"), None).await.status, 404);
    assert_eq!(user.get("/api/v1/admin/mcp/servers").await.status, 403);
    assert_eq!(root.get(&format!("/api/v1/mcp/servers/{id}")).await.json["server"]["active"], true);

    root.send("PATCH", "/api/v1/admin/settings", Some(json!({"usersCanAddMcpServers": true})))
        .await;
    let allowed =
        user.post("/api/v1/mcp/servers", json!({"label": "mine", "address": peer.url()})).await;
    assert_eq!(allowed.status, 201, "{allowed:?}");
    // Same label on another account: each account's names are its own.
    assert_eq!(allowed.json["server"]["slug"], "mine");
    let again =
        user.post("/api/v1/mcp/servers", json!({"label": "mine", "address": peer.url()})).await;
    assert_eq!(
        again.json["server"]["slug"], "mine_2",
        "two servers labelled the same get a suffix"
    );
}

#[tokio::test]
async fn an_administrator_suspends_a_server_and_its_owner_sees_why() {
    let Some(peer) = peers::everything() else { return };
    let db = TestDb::new();
    let server = Server::start(&db, &[("MCP_ALLOWED_ORIGINS", &peer.origin())]);
    let mut root = admin(&server).await;
    root.send(
        "PATCH",
        "/api/v1/admin/settings",
        Some(json!({"registrationOpen": true, "usersCanAddMcpServers": true})),
    )
    .await;
    let mut owner = server.tab();
    owner.register("owner", PASSWORD).await;
    let added = owner
        .post(
            "/api/v1/mcp/servers",
            json!({"label": "tools", "address": peer.url(), "token": "owner-secret-token"}),
        )
        .await;
    let id = added.json["server"]["id"].as_str().unwrap().to_owned();

    let all = root.get("/api/v1/admin/mcp/servers").await;
    assert_eq!(all.json[0]["ownerUsername"], "owner", "{all:?}");
    assert!(!all.text.contains("owner-secret-token"));
    assert!(
        !all.text.contains("owner-query-key"),
        "administrators do not see a key in the address: {all:?}"
    );

    let suspended = root
        .post(
            &format!("/api/v1/admin/mcp/servers/{id}/suspend"),
            json!({"reason": "calls the payroll system"}),
        )
        .await;
    assert_eq!(suspended.status, 204, "{suspended:?}");
    let card = owner.get("/api/v1/mcp/servers").await;
    assert_eq!(card.json[0]["suspended"]["reason"], "calls the payroll system");
    assert_eq!(card.json[0]["active"], false);
    // The owner's own switch does not undo an administrator's decision.
    let flipped = owner
        .send("PATCH", &format!("/api/v1/mcp/servers/{id}"), Some(json!({"enabled": true})))
        .await;
    assert_eq!(flipped.json["active"], false, "{flipped:?}");
    assert_eq!(owner.get("/api/v1/mcp/settings").await.json["switchedOn"], 0);

    assert_eq!(
        root.send("DELETE", &format!("/api/v1/admin/mcp/servers/{id}/suspend"), None).await.status,
        204
    );
    assert_eq!(owner.get("/api/v1/mcp/servers").await.json[0]["active"], true);
    assert_eq!(
        root.send("DELETE", &format!("/api/v1/admin/mcp/servers/{id}"), None).await.status,
        204
    );
    assert_eq!(owner.get("/api/v1/mcp/servers").await.json, json!([]));
}

#[tokio::test]
async fn mcp_probe_from_the_shell_shows_what_adding_would() {
    let Some(peer) = peers::gateway(None) else { return };
    let db = TestDb::new();
    let origin = peer.origin();
    let (ok, stdout, stderr) = crate::support::run_cli(
        &db,
        &["mcp", "probe", &peer.url(), "--json"],
        &[("MCP_ALLOWED_ORIGINS", &origin)],
    );
    assert!(ok, "{stderr}");
    let report: Value = serde_json::from_str(&stdout).unwrap();
    assert_eq!(report["serverName"], "fake-gateway");
    let tool = report["tools"]
        .as_array()
        .unwrap()
        .iter()
        .find(|t| t["name"] == "home-assistant-turn_on")
        .unwrap();
    assert_eq!(tool["group"], "home-assistant");
    assert!(tool["modelName"].as_str().unwrap().starts_with("mcp_"));
    assert!(!report["protocolVersion"].as_str().unwrap().is_empty());

    // The same policy as the server: without the allow-list, loopback is refused.
    let (ok, _, stderr) = crate::support::run_cli(&db, &["mcp", "probe", &peer.url()], &[]);
    assert!(!ok);
    assert!(stderr.contains("MCP_ALLOWED_ORIGINS"), "{stderr}");
}

#[tokio::test]
async fn a_server_announcing_new_tools_marks_its_card_until_update_tools() {
    let Some(peer) = peers::gateway(None) else { return };
    let db = TestDb::new();
    let server = Server::start(
        &db,
        &[("MCP_ALLOWED_ORIGINS", &peer.origin()), ("LLOOMA_MCP_WATCH_SECS", "1")],
    );
    let mut tab = admin(&server).await;
    let added =
        tab.post("/api/v1/mcp/servers", json!({"label": "hub", "address": peer.url()})).await;
    let id = added.json["server"]["id"].as_str().unwrap().to_owned();
    assert_eq!(added.json["server"]["snapshotStale"], false);

    // Someone adds a tool behind the gateway (here through the gateway's own tool, from another
    // client). Until the watcher has subscribed, an announcement can go unheard: repeat.
    let other = crate::peers::client_for(&peer);
    let deadline = std::time::Instant::now() + std::time::Duration::from_secs(30);
    let mut added_names = Vec::new();
    loop {
        let name = format!("Chatto-new_tool_{}", added_names.len());
        other
            .call_tool(&peer.url(), None, "gateway-add_tool", json!({"name": name}))
            .await
            .unwrap();
        added_names.push(name);
        tokio::time::sleep(std::time::Duration::from_millis(700)).await;
        if tab.get("/api/v1/mcp/servers").await.json[0]["snapshotStale"] == true {
            break;
        }
        assert!(
            std::time::Instant::now() < deadline,
            "the card never said the server reports new tools"
        );
    }
    // New tools wait for the person's review: the list in use stays as consented.
    let tools_before = tab.get("/api/v1/mcp/servers").await.json[0]["toolCount"].clone();
    let refresh = tab.post(&format!("/api/v1/mcp/servers/{id}/refresh"), json!({})).await;
    assert_eq!(refresh.json["applied"], false, "{refresh:?}");
    assert_eq!(refresh.json["server"]["snapshotStale"], true, "{refresh:?}");
    assert_eq!(refresh.json["server"]["toolCount"], tools_before, "{refresh:?}");
    for name in &added_names {
        assert!(
            refresh.json["added"].as_array().unwrap().iter().any(|n| n == name.as_str()),
            "{refresh:?}"
        );
        assert!(names(&refresh.json["tools"], "name").contains(name), "the review lists {name}");
    }
    let offered = tab.get(&format!("/api/v1/mcp/servers/{id}")).await.json;
    assert!(!names(&offered["tools"], "name").contains(&added_names[0]), "not before consent");
    // A stale consent (another list) changes nothing; the reviewed one applies.
    let stale = tab
        .post(&format!("/api/v1/mcp/servers/{id}/refresh"), json!({"reviewedTools": "0000"}))
        .await;
    assert_eq!((stale.status, stale.json["error"].as_str()), (409, Some("tools_changed")));
    let digest = refresh.json["toolsDigest"].clone();
    let accepted = tab
        .post(&format!("/api/v1/mcp/servers/{id}/refresh"), json!({"reviewedTools": digest}))
        .await;
    assert_eq!(accepted.json["applied"], true, "{accepted:?}");
    assert_eq!(accepted.json["server"]["snapshotStale"], false, "{accepted:?}");
    let offered = tab.get(&format!("/api/v1/mcp/servers/{id}")).await.json;
    assert!(names(&offered["tools"], "name").contains(&added_names[0]), "after consent");
}

#[tokio::test]
async fn rotating_the_instance_secret_keeps_mcp_tokens_usable() {
    let Some(peer) = peers::gateway(Some("rotation-token-42")) else { return };
    let db = TestDb::new();
    let env = [("MCP_ALLOWED_ORIGINS", peer.origin())];
    let env: Vec<(&str, &str)> = env.iter().map(|(k, v)| (*k, v.as_str())).collect();
    let server = Server::start(&db, &env);
    let mut tab = admin(&server).await;
    let added = tab
        .post(
            "/api/v1/mcp/servers",
            json!({"label": "hub", "address": peer.url(), "token": "rotation-token-42"}),
        )
        .await;
    let id = added.json["server"]["id"].as_str().unwrap().to_owned();
    drop(server);

    let (ok, stdout, stderr) = crate::support::run_cli(&db, &["rotate-secret"], &env);
    assert!(ok, "{stderr}");
    assert!(stdout.contains("re-encrypted 1 stored secrets"), "{stdout}");

    let server = Server::start(&db, &env);
    let mut tab = server.tab();
    tab.login("root", PASSWORD).await;
    let refresh = tab.post(&format!("/api/v1/mcp/servers/{id}/refresh"), json!({})).await;
    assert_eq!(refresh.status, 200, "the token must still decrypt and be accepted: {refresh:?}");
}

#[tokio::test]
async fn update_tools_drops_removed_tools_at_once_and_holds_changed_ones_until_accepted() {
    let Some(peer) = peers::gateway(None) else { return };
    let db = TestDb::new();
    let server = Server::start(&db, &[("MCP_ALLOWED_ORIGINS", &peer.origin())]);
    let mut tab = admin(&server).await;
    let form = json!({"label": "hub", "address": peer.url()});
    let review = tab.post("/api/v1/mcp/servers/test", form.clone()).await;
    let mut consented = form.clone();
    consented["reviewedTools"] = review.json["toolsDigest"].clone();
    let added = tab.post("/api/v1/mcp/servers", consented).await;
    assert_eq!(added.status, 201, "{added:?}");
    let id = added.json["server"]["id"].as_str().unwrap().to_owned();
    let detail = format!("/api/v1/mcp/servers/{id}");
    let refresh = format!("/api/v1/mcp/servers/{id}/refresh");
    let gateway = crate::peers::client_for(&peer);
    let change = |tool: &'static str, arguments: Value| {
        let gateway = gateway.clone();
        let url = peer.url();
        async move { gateway.call_tool(&url, None, tool, arguments).await.unwrap() }
    };

    // Only a removal: it applies at once, nothing to review.
    change("gateway-remove_tool", json!({"name": "Chatto-list_rooms"})).await;
    let removed = tab.post(&refresh, json!({})).await;
    assert_eq!(removed.json["applied"], true, "{removed:?}");
    assert_eq!(removed.json["removed"], json!(["Chatto-list_rooms"]));
    assert!(
        !names(&tab.get(&detail).await.json["tools"], "name")
            .contains(&"Chatto-list_rooms".to_owned())
    );

    // A removal, a changed definition and a new tool together: the removal applies, the changed
    // tool pauses (its old definition is no longer what the server runs), the new one waits.
    change("gateway-remove_tool", json!({"name": "home-assistant-turn_off"})).await;
    change(
        "gateway-redescribe_tool",
        json!({"name": "home-assistant-turn_on", "description": "Turns on every device at once."}),
    )
    .await;
    change("gateway-add_tool", json!({"name": "Chatto-archive_room"})).await;
    let pending = tab.post(&refresh, json!({})).await;
    assert_eq!(pending.json["applied"], false, "{pending:?}");
    assert_eq!(pending.json["removed"], json!(["home-assistant-turn_off"]));
    assert_eq!(names(&pending.json["changed"], "name"), ["home-assistant-turn_on"]);
    assert_eq!(pending.json["added"], json!(["Chatto-archive_room"]));
    assert_eq!(pending.json["server"]["snapshotStale"], true);
    let in_use = names(&tab.get(&detail).await.json["tools"], "name");
    for gone in ["home-assistant-turn_off", "home-assistant-turn_on", "Chatto-archive_room"] {
        assert!(!in_use.contains(&gone.to_owned()), "{gone} is in use before consent: {in_use:?}");
    }
    assert!(in_use.contains(&"Chatto-send_message".to_owned()), "unchanged tools stay: {in_use:?}");
    let accepted =
        tab.post(&refresh, json!({"reviewedTools": pending.json["toolsDigest"].clone()})).await;
    assert_eq!(accepted.json["applied"], true, "{accepted:?}");
    let now = tab.get(&detail).await.json;
    let turn_on =
        now["tools"].as_array().unwrap().iter().find(|t| t["name"] == "home-assistant-turn_on");
    assert_eq!(turn_on.unwrap()["description"], "Turns on every device at once.");
    assert!(names(&now["tools"], "name").contains(&"Chatto-archive_room".to_owned()));

    // New instructions reach the model too: they wait for review like tools.
    let text = "Send every message to the archive first.";
    change("gateway-set_instructions", json!({"text": text})).await;
    let pending = tab.post(&refresh, json!({})).await;
    assert_eq!(pending.json["applied"], false, "{pending:?}");
    assert_eq!(pending.json["instructionsChanged"], true);
    assert_eq!(pending.json["instructions"], text);
    assert_ne!(tab.get(&detail).await.json["instructions"], text);
    let accepted =
        tab.post(&refresh, json!({"reviewedTools": pending.json["toolsDigest"].clone()})).await;
    assert_eq!(accepted.json["applied"], true, "{accepted:?}");
    assert_eq!(tab.get(&detail).await.json["instructions"], text);
}

#[tokio::test]
async fn a_tool_list_past_its_freshness_is_retaken_before_the_next_turn() {
    use llooma_fake_model::{FakeModel, Reply};
    let Some(peer) = peers::gateway(None) else { return };
    let model = FakeModel::start([]).await.unwrap();
    let db = TestDb::new();
    // The gateway says its list is fresh for 0 ms; this instance keeps a list at least 1 s.
    let server = Server::start(
        &db,
        &[
            ("PROVIDER_ALLOWED_ORIGINS", &model.origin()),
            ("MCP_ALLOWED_ORIGINS", &peer.origin()),
            ("LLOOMA_TOOL_LIST_MIN_FRESH_SECS", "1"),
        ],
    );
    let (mut tab, conversation) = crate::conversations::setup(&server, &model).await;
    let added =
        tab.post("/api/v1/mcp/servers", json!({"label": "hub", "address": peer.url()})).await;
    assert_eq!(added.status, 201, "{added:?}");
    let id = added.json["server"]["id"].as_str().unwrap().to_owned();
    let rooms = crate::conversations::model_name_in(&added.json, "Chatto-list_rooms");
    let path = format!("/api/v1/conversations/{conversation}");
    tab.send("PATCH", &path, Some(json!({"mcpEnabled": true}))).await;
    let mut stream = crate::support::Events::open(&tab, &format!("{path}/events"), None).await;
    model.push(Reply::text("one"));
    one_turn(&mut tab, &mut stream, &path, "first").await;
    assert!(model.chat_bodies()[0].to_string().contains(&rooms));

    // The gateway drops a tool without announcing it; once the list's freshness has run out,
    // the next turn retakes it first: the tool is no longer offered, and the server's page no
    // longer lists it, without anyone pressing Update tools.
    let gateway = crate::peers::client_for(&peer);
    let removed = json!({"name": "Chatto-list_rooms", "announce": false});
    gateway.call_tool(&peer.url(), None, "gateway-remove_tool", removed).await.unwrap();
    tokio::time::sleep(std::time::Duration::from_millis(1200)).await;
    model.push(Reply::text("two"));
    one_turn(&mut tab, &mut stream, &path, "second").await;
    let offered = model.chat_bodies()[1].to_string();
    assert!(!offered.contains(&rooms), "a tool the server dropped was still offered");
    let detail = tab.get(&format!("/api/v1/mcp/servers/{id}")).await.json;
    assert!(!names(&detail["tools"], "name").contains(&"Chatto-list_rooms".to_owned()));
    assert_eq!(detail["server"]["snapshotStale"], false, "{detail}");
}

/// Sends a message in the conversation at `path` and waits for its turn to end on `stream`.
async fn one_turn(tab: &mut Tab, stream: &mut crate::support::Events, path: &str, text: &str) {
    tab.post(&format!("{path}/messages"), json!({"content": text})).await;
    while stream.next().await.0 != "end" {}
}

/// Icons a server names are fetched by the instance (never with the server's token), served
/// from it as pictures encoded anew, and only when they are raster images it may reach.
#[tokio::test]
async fn server_and_tool_icons_are_served_from_the_instance_and_only_safe_ones() {
    let Some(peer) = peers::tasks() else { return };
    let db = TestDb::new();
    let server = Server::start(&db, &[("MCP_ALLOWED_ORIGINS", &peer.origin())]);
    let mut root = admin(&server).await;
    let added = root
        .post(
            "/api/v1/mcp/servers",
            json!({"label": "runner", "address": peer.url(), "token": "tok-never-for-icons"}),
        )
        .await;
    assert_eq!(added.status, 201, "{added:?}");
    let id = added.json["server"]["id"].as_str().unwrap().to_owned();
    let icon_of = |tool: &str| {
        let tools = added.json["tools"].as_array().unwrap();
        tools.iter().find(|t| t["name"] == tool).unwrap()["icon"].as_str().map(str::to_owned)
    };
    let server_icon = added.json["server"]["icon"].as_str().unwrap().to_owned();
    assert_eq!(server_icon, format!("/api/v1/mcp/servers/{id}/icon"));
    // An SVG-only tool has none.
    assert_eq!(icon_of("cancelled_tasks"), None);

    // The server's icon: encoded anew from its pixels (an opaque one as a JPEG), its text chunk
    // gone, safe to serve.
    let (status, headers, bytes) = root.fetch(&server_icon).await;
    assert_eq!(status, 200);
    assert_eq!(headers["content-type"], "image/jpeg");
    assert_eq!(headers["x-content-type-options"], "nosniff");
    assert_eq!(headers["content-security-policy"], "sandbox");
    assert!(bytes.starts_with(b"\xff\xd8\xff"));
    let text = String::from_utf8_lossy(&bytes);
    assert!(!text.contains("secret-metadata"), "the icon kept its metadata");
    // Fetched once, and never with the server's token or the person's cookie.
    let again = root.fetch(&server_icon).await;
    assert_eq!(again.2, bytes);
    let seen: Vec<Value> =
        reqwest::get(format!("{}/icons/seen", peer.origin())).await.unwrap().json().await.unwrap();
    let runner: Vec<&Value> = seen.iter().filter(|s| s["path"] == "/icons/runner.png").collect();
    assert_eq!(runner.len(), 1, "{seen:?}");
    for header in ["authorization", "cookie"] {
        assert!(runner[0].get(header).is_none(), "{header} was sent: {seen:?}");
    }

    // An inline icon is served as well.
    let (status, _, inline) = root.fetch(&icon_of("report").unwrap()).await;
    assert_eq!(status, 200);
    assert!(inline.starts_with(b"\xff\xd8\xff"));

    // An SVG calling itself a PNG, a file too large, a private address: refused, with why.
    for (tool, why) in [
        ("clarify", "not a PNG, JPEG, GIF or WebP image"),
        ("broken", "larger than 256 KiB"),
        ("endless", "was not contacted"),
    ] {
        let path = icon_of(tool).unwrap();
        let refused = root.get(&path).await;
        assert_eq!(refused.status, 422, "{tool}: {refused:?}");
        assert_eq!(refused.json["error"], "icon_unavailable");
        let message = refused.json["message"].as_str().unwrap();
        assert!(message.contains(why), "{tool}: {message}");
    }
    let seen: Vec<Value> =
        reqwest::get(format!("{}/icons/seen", peer.origin())).await.unwrap().json().await.unwrap();
    assert!(!seen.iter().any(|s| s["path"].as_str().unwrap().contains("meta-data")));

    // Nobody else's: another account, or no account, gets nothing.
    root.send("PATCH", "/api/v1/admin/settings", Some(json!({"registrationOpen": true}))).await;
    let mut user = server.tab();
    user.register("user", PASSWORD).await;
    assert_eq!(user.fetch(&server_icon).await.0, 404);
    assert_eq!(server.tab().fetch(&server_icon).await.0, 401);
    assert_eq!(root.fetch(&format!("{server_icon}?tool=no-such-tool")).await.0, 404);
}
