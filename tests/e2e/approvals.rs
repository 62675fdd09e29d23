use sea_orm::{ConnectionTrait, Statement};
use serde_json::json;

use crate::support::{Events, PASSWORD, Server, TestDb, engine};

/// The replica ids the database knows, newest first.
async fn replicas(db: &TestDb) -> Vec<String> {
    let conn = crate::support::connect(db).await;
    let rows = conn
        .query_all_raw(Statement::from_string(
            conn.get_database_backend(),
            "SELECT id FROM replicas ORDER BY started_at_ms DESC",
        ))
        .await
        .unwrap();
    conn.close().await.unwrap();
    rows.iter().map(|r| r.try_get_by_index::<String>(0).unwrap()).collect()
}

/// A call waiting for an answer, as a turn running on `replica` would have stored it.
async fn pending_call(db: &TestDb, account_id: &str, replica: &str) -> String {
    let id = uuid::Uuid::new_v4().to_string();
    let now = chrono_ms();
    let args = r#"{"amount":120,"to":"alice@example.org"}"#;
    let conn = crate::support::connect(db).await;
    conn.execute_raw(Statement::from_string(
        conn.get_database_backend(),
        format!(
            "INSERT INTO approval_calls (id, account_id, conversation_id, turn_id, server_id, server_label, \
             server_address, tool_name, model_tool_name, tool_description, tool_definition_hash, arguments_json, \
             arguments_sha256, created_at_ms, deadline_ms, state, remember, owner_replica) VALUES \
             ('{id}', '{account_id}', 'c1', 't1', 's1', 'bank', 'https://bank.example/mcp', 'pay', 'mcp_bank_pay', \
             'Pays someone.', 'h', '{args}', 'x', {now}, {deadline}, 'pending', FALSE, '{replica}')",
            deadline = now + 120_000
        ),
    ))
    .await
    .unwrap();
    conn.close().await.unwrap();
    id
}

fn chrono_ms() -> i64 {
    i64::try_from(
        std::time::SystemTime::now().duration_since(std::time::UNIX_EPOCH).unwrap().as_millis(),
    )
    .unwrap()
}

#[tokio::test]
async fn a_card_survives_a_reload_is_answered_once_and_disappears_from_every_tab() {
    let db = TestDb::new();
    let server = Server::start(&db, &[]);
    let mut first_tab = server.tab();
    let me = first_tab.register("root", PASSWORD).await;
    let account_id = me.json["account"]["id"].as_str().unwrap().to_owned();
    let mut second_tab = server.tab();
    second_tab.login("root", PASSWORD).await;
    let replica = replicas(&db).await.remove(0);
    let id = pending_call(&db, &account_id, &replica).await;

    // A tab opening its stream gets the waiting card with the exact arguments.
    let mut events = Events::open(&first_tab, "/api/v1/approvals/events", None).await;
    let (name, data) = events.next().await;
    assert_eq!(name, "pending");
    let card = &data["cards"][0];
    assert_eq!(card["id"], id.as_str());
    assert_eq!(card["serverLabel"], "bank");
    assert_eq!(card["toolDescription"], "Pays someone.");
    assert_eq!(card["argumentsJson"], r#"{"amount":120,"to":"alice@example.org"}"#);
    // A reloaded page finds it too.
    assert_eq!(second_tab.get("/api/v1/approvals").await.json[0]["id"], id.as_str());

    // "Always allow" is only remembered in the rules mode.
    let always = second_tab
        .post(&format!("/api/v1/approvals/{id}/answer"), json!({"choice": "always_allow"}))
        .await;
    assert_eq!(always.status, 400, "{always:?}");

    // Another account cannot see or answer it.
    first_tab
        .send("PATCH", "/api/v1/admin/settings", Some(json!({"registrationOpen": true})))
        .await;
    let mut stranger = server.tab();
    stranger.register("stranger", PASSWORD).await;
    assert_eq!(stranger.get("/api/v1/approvals").await.json, json!([]));
    assert_eq!(
        stranger
            .post(&format!("/api/v1/approvals/{id}/answer"), json!({"choice": "allow"}))
            .await
            .status,
        404
    );

    // The second tab answers; the first sees it go.
    let allowed = second_tab
        .post(&format!("/api/v1/approvals/{id}/answer"), json!({"choice": "allow"}))
        .await;
    assert_eq!(allowed.status, 200, "{allowed:?}");
    assert_eq!(allowed.json["state"], "allowed");
    let (name, data) = events.next().await;
    assert_eq!((name.as_str(), data["id"].as_str()), ("answered", Some(id.as_str())));
    assert_eq!(data["state"], "allowed");

    // A late answer from the first tab is told what happened.
    let late = first_tab
        .post(&format!("/api/v1/approvals/{id}/answer"), json!({"choice": "refuse"}))
        .await;
    assert_eq!(late.status, 409, "{late:?}");
    let message = late.json["message"].as_str().unwrap();
    assert!(message.contains("already allowed from another tab or device at"), "{message}");
    assert_eq!(first_tab.get("/api/v1/approvals").await.json, json!([]));
}

#[tokio::test]
async fn an_answer_through_one_replica_reaches_the_tabs_of_another() {
    if engine() != "postgres" {
        // Several replicas share a Postgres database; SQLite is one process by design.
        return;
    }
    let db = TestDb::new();
    let a = Server::start(&db, &[]);
    let a_replica = replicas(&db).await.remove(0);
    let b = Server::start(&db, &[]);
    let mut on_a = a.tab();
    let me = on_a.register("root", PASSWORD).await;
    let account_id = me.json["account"]["id"].as_str().unwrap().to_owned();
    let mut on_b = b.tab();
    on_b.login("root", PASSWORD).await;
    let id = pending_call(&db, &account_id, &a_replica).await;

    let mut events = Events::open(&on_a, "/api/v1/approvals/events", None).await;
    assert_eq!(events.next().await.0, "pending");
    let refused =
        on_b.post(&format!("/api/v1/approvals/{id}/answer"), json!({"choice": "refuse"})).await;
    assert_eq!(refused.status, 200, "{refused:?}");
    let (name, data) = events.next().await;
    assert_eq!(name, "answered");
    assert_eq!(data["state"], "refused");
}

#[tokio::test]
async fn a_restart_interrupts_the_questions_of_the_process_that_died() {
    let db = TestDb::new();
    let server = Server::start(&db, &[]);
    let mut tab = server.tab();
    let me = tab.register("root", PASSWORD).await;
    let account_id = me.json["account"]["id"].as_str().unwrap().to_owned();
    let replica = replicas(&db).await.remove(0);
    let id = pending_call(&db, &account_id, &replica).await;
    assert_eq!(tab.get("/api/v1/approvals").await.json[0]["id"], id.as_str());
    drop(server); // killed: no graceful shutdown, the row stays pending

    let server = Server::start(&db, &[("LLOOMA_LOG", "info")]);
    let mut tab = server.tab();
    tab.login("root", PASSWORD).await;
    if engine() == "postgres" {
        // Another replica may still be alive: the dead one is recognised by its stale heartbeat,
        // which takes the staleness window; the sole SQLite process knows at once.
        return;
    }
    assert_eq!(tab.get("/api/v1/approvals").await.json, json!([]));
    let late =
        tab.post(&format!("/api/v1/approvals/{id}/answer"), json!({"choice": "allow"})).await;
    assert_eq!(late.status, 409);
    assert!(late.json["message"].as_str().unwrap().contains("its turn stopped"), "{late:?}");
}

#[tokio::test]
async fn permission_mode_and_allow_rules_are_the_persons_own() {
    let Some(peer) = crate::peers::gateway(None) else { return };
    let db = TestDb::new();
    let server = Server::start(&db, &[("MCP_ALLOWED_ORIGINS", &peer.origin())]);
    let mut tab = server.tab();
    tab.register("root", PASSWORD).await;
    let consent = tab.get("/api/v1/consent").await;
    assert_eq!(consent.json["mode"], "ask", "asking is the default");
    let all = tab.send("PATCH", "/api/v1/consent", Some(json!({"mode": "allow_all"}))).await;
    assert_eq!(all.json["mode"], "allow_all");
    assert!(all.json["allowAllWarning"].as_str().unwrap().contains("without asking"));
    assert_eq!(
        tab.send("PATCH", "/api/v1/consent", Some(json!({"mode": "yolo"}))).await.status,
        400
    );

    let added =
        tab.post("/api/v1/mcp/servers", json!({"label": "hub", "address": peer.url()})).await;
    let server_id = added.json["server"]["id"].as_str().unwrap().to_owned();
    let rule = tab
        .post(
            "/api/v1/consent/rules",
            json!({"serverId": server_id, "tool": "home-assistant-turn_on", "arguments": {"entity_id": {"exact": "light.kitchen"}}}),
        )
        .await;
    assert_eq!(rule.status, 201, "{rule:?}");
    let stored = &rule.json["rules"][0];
    assert_eq!(stored["toolName"], "home-assistant-turn_on");
    assert_eq!(stored["arguments"]["entity_id"]["exact"], "light.kitchen");
    let bad = tab
        .post(
            "/api/v1/consent/rules",
            json!({"serverId": server_id, "tool": "nope", "arguments": {}}),
        )
        .await;
    assert_eq!(bad.status, 400);

    // Nobody else sees or revokes it.
    tab.send("PATCH", "/api/v1/admin/settings", Some(json!({"registrationOpen": true}))).await;
    let mut other = server.tab();
    other.register("other", PASSWORD).await;
    assert_eq!(other.get("/api/v1/consent").await.json["rules"], json!([]));
    let rule_id = stored["id"].as_str().unwrap().to_owned();
    assert_eq!(
        other.send("DELETE", &format!("/api/v1/consent/rules/{rule_id}"), None).await.status,
        404
    );
    assert_eq!(
        other
            .post(
                "/api/v1/consent/rules",
                json!({"serverId": server_id, "tool": "Chatto-list_rooms", "arguments": {}})
            )
            .await
            .status,
        404
    );
    assert_eq!(
        tab.send("DELETE", &format!("/api/v1/consent/rules/{rule_id}"), None).await.status,
        204
    );
    assert_eq!(tab.get("/api/v1/consent").await.json["rules"], json!([]));
}

#[tokio::test]
async fn an_open_event_stream_does_not_hold_up_shutdown() {
    let db = TestDb::new();
    let server = Server::start(&db, &[]);
    let mut tab = server.tab();
    tab.register("root", PASSWORD).await;
    let mut events = Events::open(&tab, "/api/v1/approvals/events", None).await;
    assert_eq!(events.next().await.0, "pending");
    let (clean, log) = server.terminate();
    assert!(clean, "{log}");
    assert!(log.contains("shut down"), "{log}");
}
