use llooma_fake_model::{FakeModel, Reply};
use serde_json::{Value, json};

use crate::support::{Events, PASSWORD, Server, Tab, TestDb};

/// An administrator with the fake model as provider, and a conversation using it.
pub(crate) async fn setup(server: &Server, model: &FakeModel) -> (Tab, String) {
    let mut tab = server.tab();
    tab.register("root", PASSWORD).await;
    let provider = tab
        .post(
            "/api/v1/admin/providers",
            json!({"name": "fake", "baseUrl": model.base_url(), "apiKey": "sk-fake-provider-key"}),
        )
        .await;
    let provider_id = provider.json["id"].as_str().unwrap().to_owned();
    let conversation = tab
        .post(
            "/api/v1/conversations",
            json!({"title": "Test", "providerId": provider_id, "model": "fake-model"}),
        )
        .await;
    assert_eq!(conversation.status, 201, "{conversation:?}");
    (tab, conversation.json["id"].as_str().unwrap().to_owned())
}

/// A server that reaches the fake model and `peer`, an administrator's conversation with MCP
/// on, and `peer` added under `label` (`added` is that answer). Fields drop in order: the server
/// stops before its database goes.
pub(crate) struct McpWorld {
    pub(crate) model: FakeModel,
    pub(crate) server: Server,
    pub(crate) tab: Tab,
    /// The conversation's id.
    pub(crate) id: String,
    pub(crate) added: crate::support::Reply,
    pub(crate) _db: TestDb,
}

pub(crate) async fn mcp_world(peer: &llooma_test_support::peers::Peer, label: &str) -> McpWorld {
    let model = FakeModel::start([]).await.unwrap();
    let db = TestDb::new();
    let server = Server::start(
        &db,
        &[("PROVIDER_ALLOWED_ORIGINS", &model.origin()), ("MCP_ALLOWED_ORIGINS", &peer.origin())],
    );
    let (mut tab, id) = setup(&server, &model).await;
    let added =
        tab.post("/api/v1/mcp/servers", json!({"label": label, "address": peer.url()})).await;
    assert_eq!(added.status, 201, "{added:?}");
    tab.send("PATCH", &format!("/api/v1/conversations/{id}"), Some(json!({"mcpEnabled": true})))
        .await;
    McpWorld { model, server, tab, id, added, _db: db }
}

impl McpWorld {
    /// The MCP server's id.
    pub(crate) fn server_id(&self) -> String {
        self.added.json["server"]["id"].as_str().unwrap().to_owned()
    }

    /// The server's tool `name` as listed when it was added.
    pub(crate) fn tool(&self, name: &str) -> &Value {
        let tools = self.added.json["tools"].as_array().unwrap();
        tools.iter().find(|t| t["name"] == name).unwrap_or_else(|| panic!("no tool {name}"))
    }

    pub(crate) fn model_name(&self, tool: &str) -> String {
        model_name_in(&self.added.json, tool)
    }
}

/// The model-facing name the server answered for one of the added server's tools.
pub(crate) fn model_name_in(added: &Value, tool: &str) -> String {
    let tools = added["tools"].as_array().unwrap();
    let found = tools.iter().find(|t| t["name"] == tool).unwrap();
    found["modelName"].as_str().unwrap().to_owned()
}

/// What the person said last in a request the model received (`chat_bodies()[n]`).
pub(crate) fn last_user_message(body: &Value) -> String {
    let messages = body["messages"].as_array().unwrap();
    let user = messages.iter().rev().find(|m| m["role"] == "user").unwrap();
    user["content"].as_str().unwrap().to_owned()
}

/// Reads events until `end`, returning the text and the events' names.
async fn until_end(events: &mut Events) -> (String, Vec<String>, Value) {
    let mut text = String::new();
    let mut names = Vec::new();
    loop {
        let (name, data) = events.next().await;
        names.push(name.clone());
        match name.as_str() {
            "text" => text.push_str(data["delta"].as_str().unwrap()),
            "end" => return (text, names, data),
            _ => {}
        }
    }
}

#[tokio::test]
async fn a_reply_streams_to_the_tab_and_is_kept_in_the_conversation() {
    let model = FakeModel::start([Reply::text("Hello from the model.").chunks(4)]).await.unwrap();
    let db = TestDb::new();
    let server = Server::start(&db, &[("PROVIDER_ALLOWED_ORIGINS", &model.origin())]);
    let (mut tab, id) = setup(&server, &model).await;

    let mut events = Events::open(&tab, &format!("/api/v1/conversations/{id}/events"), None).await;
    let sent = tab
        .post(&format!("/api/v1/conversations/{id}/messages"), json!({"content": "hi there"}))
        .await;
    assert_eq!(sent.status, 202, "{sent:?}");
    let (text, names, end) = until_end(&mut events).await;
    assert_eq!(text, "Hello from the model.");
    assert_eq!(names.first().map(String::as_str), Some("start"));
    assert_eq!(end["state"], "done");

    // The model was asked with the key and the person's words.
    let request = &model.requests()[0];
    assert_eq!(request.authorization.as_deref(), Some("Bearer sk-fake-provider-key"));
    assert!(request.raw_body.contains("hi there"), "{}", request.raw_body);

    let detail = tab.get(&format!("/api/v1/conversations/{id}")).await;
    let messages: Vec<(String, String)> = detail.json["messages"]
        .as_array()
        .unwrap()
        .iter()
        .map(|m| {
            (m["role"].as_str().unwrap().to_owned(), m["content"].as_str().unwrap().to_owned())
        })
        .collect();
    assert_eq!(
        messages,
        vec![
            ("user".into(), "hi there".into()),
            ("assistant".into(), "Hello from the model.".into())
        ]
    );
    assert_eq!(detail.json["runningTurn"], Value::Null);
}

#[tokio::test]
async fn a_reload_mid_turn_replays_what_it_missed_and_continues() {
    let long = "one two three four five six seven eight nine ten eleven twelve";
    let model = FakeModel::start([Reply::text(long).chunks(12).chunk_delay_ms(150)]).await.unwrap();
    let db = TestDb::new();
    let server = Server::start(&db, &[("PROVIDER_ALLOWED_ORIGINS", &model.origin())]);
    let (mut tab, id) = setup(&server, &model).await;
    let path = format!("/api/v1/conversations/{id}/events");

    let mut first = Events::open(&tab, &path, None).await;
    tab.post(&format!("/api/v1/conversations/{id}/messages"), json!({"content": "count"})).await;
    let mut before = String::new();
    while before.len() < 10 {
        let (name, data) = first.next().await;
        if name == "text" {
            before.push_str(data["delta"].as_str().unwrap());
        }
    }
    let resume_from = first.last_id.clone().unwrap();
    drop(first); // the tab reloads

    let mut again = Events::open(&tab, &path, Some(&resume_from)).await;
    let (after, _, end) = until_end(&mut again).await;
    assert_eq!(format!("{before}{after}"), long, "nothing lost, nothing twice");
    assert_eq!(end["state"], "done");
    // A tab opened from scratch replays the whole turn.
    let mut fresh = Events::open(&tab, &path, None).await;
    assert_eq!(until_end(&mut fresh).await.0, long);
}

/// A browser tab holds one stream: the account's cards and its conversation's events together,
/// resumed from the last event it saw like the conversation's own stream.
#[tokio::test]
async fn a_tab_s_one_stream_carries_its_cards_and_its_conversation_and_resumes_where_it_was() {
    let long = "one two three four five six seven eight nine ten eleven twelve";
    let model = FakeModel::start([Reply::text(long).chunks(12).chunk_delay_ms(150)]).await.unwrap();
    let db = TestDb::new();
    let server = Server::start(&db, &[("PROVIDER_ALLOWED_ORIGINS", &model.origin())]);
    let (mut tab, id) = setup(&server, &model).await;
    let path = format!("/api/v1/events?conversation={id}");

    let mut first = Events::open(&tab, &path, None).await;
    let (name, data) = first.next().await;
    assert_eq!((name.as_str(), &data["cards"]), ("pending", &json!([])), "the cards come first");
    tab.post(&format!("/api/v1/conversations/{id}/messages"), json!({"content": "count"})).await;
    let mut before = String::new();
    while before.len() < 10 {
        let (name, data) = first.next().await;
        if name == "text" {
            before.push_str(data["delta"].as_str().unwrap());
        }
    }
    let resume_from = first.last_id.clone().unwrap();
    drop(first); // the page is hidden, then shown again

    let mut again = Events::open(&tab, &path, Some(&resume_from)).await;
    let (after, names, end) = until_end(&mut again).await;
    assert_eq!(names[0], "pending", "{names:?}");
    assert_eq!(format!("{before}{after}"), long, "nothing lost, nothing twice");
    assert_eq!(end["state"], "done");
    // `after` does the same for a first connection; the stored events are not sent again.
    let resumed = format!("{path}&after={resume_from}");
    let mut from_after = Events::open(&tab, &resumed, None).await;
    assert_eq!(until_end(&mut from_after).await.0, after);

    // Without a conversation it carries the cards alone.
    let mut cards_only = Events::open(&tab, "/api/v1/events", None).await;
    assert_eq!(cards_only.next().await.0, "pending");

    // Another account's conversation is not found, as on its own stream.
    tab.send("PATCH", "/api/v1/admin/settings", Some(json!({"registrationOpen": true}))).await;
    let mut other = server.tab();
    other.register("other", PASSWORD).await;
    let stream = other
        .http
        .get(format!("{}{path}", other.base))
        .header("cookie", format!("llooma_session={}", other.cookie.as_ref().unwrap()))
        .send()
        .await
        .unwrap();
    assert_eq!(stream.status(), 404);
}

#[tokio::test]
async fn a_page_opened_mid_conversation_reads_only_the_running_turns_events() {
    let long = "alpha beta gamma delta epsilon zeta eta theta";
    let model = FakeModel::start([
        Reply::text("The first answer."),
        Reply::text(long).chunks(8).chunk_delay_ms(200),
    ])
    .await
    .unwrap();
    let db = TestDb::new();
    let server = Server::start(&db, &[("PROVIDER_ALLOWED_ORIGINS", &model.origin())]);
    let (mut tab, id) = setup(&server, &model).await;
    let path = format!("/api/v1/conversations/{id}/events");
    let detail_path = format!("/api/v1/conversations/{id}");

    // A finished turn: a page rendered now starts after all of its events.
    let mut events = Events::open(&tab, &path, None).await;
    tab.post(&format!("/api/v1/conversations/{id}/messages"), json!({"content": "first"})).await;
    until_end(&mut events).await;
    let last = events.last_id.clone().unwrap();
    let detail = tab.get(&detail_path).await.json;
    assert_eq!(detail["eventsAfter"].to_string(), last, "{detail}");

    // A turn running when the page renders: its events come from its start, and only they.
    tab.post(&format!("/api/v1/conversations/{id}/messages"), json!({"content": "second"})).await;
    let detail = loop {
        let detail = tab.get(&detail_path).await.json;
        if detail["runningTurn"].is_string() {
            break detail;
        }
        tokio::time::sleep(std::time::Duration::from_millis(20)).await;
    };
    assert_eq!(detail["eventsAfter"].to_string(), last, "the running turn's events come after");
    let after = detail["eventsAfter"].as_i64().unwrap();
    let mut page = Events::open(&tab, &format!("{path}?after={after}"), None).await;
    let (first_name, start) = page.next().await;
    assert_eq!(first_name, "start");
    assert_eq!(start["turnId"], detail["runningTurn"]);
    let (text, _, end) = until_end(&mut page).await;
    assert_eq!(text, long, "the running turn whole, nothing of the first");
    assert_eq!(end["state"], "done");

    // A bad value is said so in the API's shape.
    let bad = tab.get(&format!("{path}?after=soon")).await;
    assert_eq!(bad.status, 400);
    assert_eq!(bad.json["error"], "invalid_query", "{bad:?}");
}

#[tokio::test]
async fn provider_failures_end_the_turn_with_a_clear_error() {
    let model =
        FakeModel::start([Reply::http_error(401, "{\"error\": \"bad key sk-fake-provider-key\"}")])
            .await
            .unwrap();
    let db = TestDb::new();
    let server = Server::start(&db, &[("PROVIDER_ALLOWED_ORIGINS", &model.origin())]);
    let (mut tab, id) = setup(&server, &model).await;
    let mut events = Events::open(&tab, &format!("/api/v1/conversations/{id}/events"), None).await;
    tab.post(&format!("/api/v1/conversations/{id}/messages"), json!({"content": "hi"})).await;
    let mut error = None;
    loop {
        let (name, data) = events.next().await;
        if name == "error" {
            error = Some(data["message"].as_str().unwrap().to_owned());
        }
        if name == "end" {
            assert_eq!(data["state"], "failed");
            break;
        }
    }
    let error = error.expect("an error event");
    assert!(error.contains("key"), "{error}");
    assert!(!error.contains("sk-fake-provider-key"), "the key leaked: {error}");
    assert!(!server.log_text().contains("sk-fake-provider-key"));
}

#[tokio::test]
async fn conversations_are_private_and_one_turn_runs_at_a_time() {
    let model =
        FakeModel::start([Reply::text("slow answer").chunks(5).chunk_delay_ms(300)]).await.unwrap();
    let db = TestDb::new();
    let server = Server::start(&db, &[("PROVIDER_ALLOWED_ORIGINS", &model.origin())]);
    let (mut tab, id) = setup(&server, &model).await;

    let no_model = tab.post("/api/v1/conversations", json!({})).await;
    let bare = no_model.json["id"].as_str().unwrap().to_owned();
    let refused =
        tab.post(&format!("/api/v1/conversations/{bare}/messages"), json!({"content": "hi"})).await;
    assert_eq!(refused.json["error"], "no_model", "{refused:?}");

    assert_eq!(
        tab.post(&format!("/api/v1/conversations/{id}/messages"), json!({"content": "a"}))
            .await
            .status,
        202
    );
    let second =
        tab.post(&format!("/api/v1/conversations/{id}/messages"), json!({"content": "b"})).await;
    assert_eq!(second.status, 409, "{second:?}");
    assert_eq!(second.json["error"], "turn_running");
    assert_eq!(tab.post(&format!("/api/v1/conversations/{id}/stop"), json!({})).await.status, 202);

    tab.send("PATCH", "/api/v1/admin/settings", Some(json!({"registrationOpen": true}))).await;
    let mut other = server.tab();
    other.register("other", PASSWORD).await;
    assert_eq!(other.get("/api/v1/conversations").await.json, json!([]));
    assert_eq!(other.get(&format!("/api/v1/conversations/{id}")).await.status, 404);
    assert_eq!(
        other
            .post(&format!("/api/v1/conversations/{id}/messages"), json!({"content": "x"}))
            .await
            .status,
        404
    );
    let stream = other
        .http
        .get(format!("{}/api/v1/conversations/{id}/events", other.base))
        .header("cookie", format!("llooma_session={}", other.cookie.as_ref().unwrap()))
        .send()
        .await
        .unwrap();
    assert_eq!(stream.status(), 404);
    assert_eq!(
        other.send("DELETE", &format!("/api/v1/conversations/{id}"), None).await.status,
        404
    );

    // The MCP tools switch is per conversation and off by default.
    let detail = tab.get(&format!("/api/v1/conversations/{id}")).await;
    assert_eq!(detail.json["conversation"]["mcpEnabled"], false);
    let on = tab
        .send("PATCH", &format!("/api/v1/conversations/{id}"), Some(json!({"mcpEnabled": true})))
        .await;
    assert_eq!(on.json["mcpEnabled"], true);
}

#[tokio::test]
async fn tools_run_in_rounds_and_the_last_round_must_answer() {
    let model = FakeModel::start([
        Reply::tool_call("current_date", json!({})),
        Reply::text("Today it is.").chunks(2),
        Reply::tool_call("current_date", json!({})),
        Reply::tool_call("current_date", json!({})),
        Reply::tool_call("current_date", json!({})),
        Reply::text("Out of rounds, here is my answer."),
    ])
    .await
    .unwrap();
    let db = TestDb::new();
    let server = Server::start(&db, &[("PROVIDER_ALLOWED_ORIGINS", &model.origin())]);
    let (mut tab, id) = setup(&server, &model).await;
    let path = format!("/api/v1/conversations/{id}/events");

    // A tool call is a step on the timeline; its result goes back to the model.
    let mut events = Events::open(&tab, &path, None).await;
    tab.post(
        &format!("/api/v1/conversations/{id}/messages"),
        json!({"content": "what day is it?"}),
    )
    .await;
    let mut steps = Vec::new();
    let mut text = String::new();
    loop {
        let (name, data) = events.next().await;
        match name.as_str() {
            "step" => steps.push(data),
            "text" => text.push_str(data["delta"].as_str().unwrap()),
            "end" => break,
            _ => {}
        }
    }
    assert_eq!(text, "Today it is.");
    assert_eq!(steps.len(), 1);
    assert_eq!(steps[0]["tool"], "current_date");
    let date = steps[0]["result"].as_str().unwrap().to_owned();
    assert_eq!(date.len(), "2026-11-30T05:00:00Z".len(), "{date}");
    let bodies = model.requests();
    assert!(bodies[0].raw_body.contains("\"tools\""), "tools are offered");
    assert!(bodies[1].raw_body.contains(&date), "the result went back to the model");

    // Four rounds at most; the last offers no tools, so the turn ends with an answer.
    tab.post(&format!("/api/v1/conversations/{id}/messages"), json!({"content": "keep calling"}))
        .await;
    let mut steps = 0;
    loop {
        let (name, data) = events.next().await;
        match name.as_str() {
            "step" => steps += 1,
            "end" => {
                assert_eq!(data["state"], "done");
                break;
            }
            _ => {}
        }
    }
    assert_eq!(steps, 3);
    let bodies = model.requests();
    assert_eq!(bodies.len(), 6);
    assert!(!bodies[5].raw_body.contains("\"tools\""), "{}", bodies[5].raw_body);
}

#[tokio::test]
async fn an_mcp_call_is_put_to_the_person_and_a_refusal_sends_nothing() {
    let Some(peer) = crate::peers::gateway(None) else { return };
    let McpWorld { model, server: _server, mut tab, id, added, _db } =
        mcp_world(&peer, "hub").await;
    let turn_on = model_name_in(&added.json, "home-assistant-turn_on");
    let add_tool = model_name_in(&added.json, "gateway-add_tool");
    model.push(Reply::tool_call(&turn_on, json!({"entity_id": "light.kitchen"})));
    model.push(Reply::text("The light is on."));
    model.push(Reply::tool_call(&add_tool, json!({"name": "Chatto-sneaky"})));
    model.push(Reply::text("Understood, I did not."));
    tab.send("PATCH", &format!("/api/v1/conversations/{id}"), Some(json!({"mcpEnabled": true})))
        .await;

    let mut cards = Events::open(&tab, "/api/v1/approvals/events", None).await;
    assert_eq!(cards.next().await.0, "pending");
    let mut events = Events::open(&tab, &format!("/api/v1/conversations/{id}/events"), None).await;

    // The card shows server, tool, what it says it does, and the exact arguments.
    tab.post(
        &format!("/api/v1/conversations/{id}/messages"),
        json!({"content": "kitchen light on"}),
    )
    .await;
    let (name, data) = cards.next().await;
    assert_eq!(name, "appeared");
    let card = &data["card"];
    assert_eq!(card["serverLabel"], "hub");
    assert_eq!(card["toolName"], "home-assistant-turn_on");
    assert_eq!(card["toolDescription"], "Turn on a device.");
    assert_eq!(card["argumentsJson"], r#"{"entity_id":"light.kitchen"}"#);
    // What the server says of its tool, as it said it (a claim, shown, never acted on), also
    // after a reload.
    let hints = json!({"title": "Switch a device on", "destructive": false, "idempotent": true,
                       "openWorld": false});
    assert_eq!(card["toolHints"], hints);
    assert_eq!(tab.get("/api/v1/approvals").await.json[0]["toolHints"], hints);
    let call_id = card["id"].as_str().unwrap().to_owned();
    let allowed =
        tab.post(&format!("/api/v1/approvals/{call_id}/answer"), json!({"choice": "allow"})).await;
    assert_eq!(allowed.status, 200, "{allowed:?}");
    let (text, steps) = read_turn(&mut events).await;
    assert_eq!(text, "The light is on.");
    assert_eq!(steps.last().unwrap()["state"], "allowed");
    assert_eq!(steps.last().unwrap()["server"], "hub");
    // The server's instructions reached the model after the system prompt, labelled as the
    // server's reference material.
    let system = model.chat_bodies()[0]["messages"][0]["content"].as_str().unwrap().to_owned();
    assert!(system.contains("server-instructions from server \"hub\""), "{system}");
    assert!(system.contains("Tools of three servers"), "{system}");
    // The server's answer reached the model wrapped as untrusted text.
    let second = &model.requests()[1].raw_body;
    assert!(second.contains("light.kitchen is on") && second.contains("untrusted"), "{second}");

    // Refused: the model is told, and nothing reaches the server.
    tab.post(&format!("/api/v1/conversations/{id}/messages"), json!({"content": "add a tool"}))
        .await;
    let data = loop {
        // The first card's `answered` comes first on this stream.
        let (name, data) = cards.next().await;
        if name == "appeared" {
            break data;
        }
    };
    let call_id = data["card"]["id"].as_str().unwrap().to_owned();
    tab.post(&format!("/api/v1/approvals/{call_id}/answer"), json!({"choice": "refuse"})).await;
    let (text, steps) = read_turn(&mut events).await;
    assert_eq!(text, "Understood, I did not.");
    assert_eq!(steps.last().unwrap()["state"], "refused");
    assert!(model.requests()[3].raw_body.contains("refused"), "the model is told");
    let client = crate::peers::client_for(&peer);
    let tools = client.probe(&peer.url(), None).await.unwrap().tools;
    assert!(!tools.iter().any(|t| t.name == "Chatto-sneaky"), "a refused call reached the server");
}

/// A reply and a card made right after a sign-out never reach the tab that signed out: its
/// stream ends before the sign-out is answered, not at the next periodic check of sessions.
#[tokio::test]
async fn a_tab_that_signed_out_receives_nothing_of_what_follows() {
    let Some(peer) = crate::peers::gateway(None) else { return };
    let McpWorld { model, server, mut tab, id, added, _db } = mcp_world(&peer, "hub").await;
    let turn_on = model_name_in(&added.json, "home-assistant-turn_on");
    model.push(Reply::text("Hello from the model."));
    model.push(Reply::tool_call(&turn_on, json!({"entity_id": "light.kitchen"})));
    tab.send("PATCH", &format!("/api/v1/conversations/{id}"), Some(json!({"mcpEnabled": true})))
        .await;
    let mut phone = server.tab();
    assert_eq!(phone.login("root", PASSWORD).await.status, 200);
    let mut phone_cards = Events::open(&phone, "/api/v1/approvals/events", None).await;
    assert_eq!(phone_cards.next().await.0, "pending");
    let mut phone_log =
        Events::open(&phone, &format!("/api/v1/conversations/{id}/events"), None).await;

    for round in 0..2 {
        if round == 1 {
            tab.login("root", PASSWORD).await;
        }
        // From where the conversation is now: what came before is not the question.
        let path = format!("/api/v1/events?conversation={id}");
        let mut old = Events::open(&tab, &path, phone_log.last_id.as_deref()).await;
        assert_eq!(old.next().await.0, "pending");
        assert_eq!(tab.post("/api/v1/auth/logout", json!({})).await.status, 204);
        let content = if round == 0 { "say hello" } else { "kitchen light on" };
        let path = format!("/api/v1/conversations/{id}/messages");
        assert_eq!(phone.post(&path, json!({"content": content})).await.status, 202);
        if round == 0 {
            assert_eq!(until_end(&mut phone_log).await.0, "Hello from the model.");
        } else {
            loop {
                if phone_cards.next().await.0 == "appeared" {
                    break;
                }
            }
        }
        let rest = old.rest_within(std::time::Duration::from_secs(1)).await;
        let rest = rest.expect("the signed-out tab's stream is still open");
        assert!(
            !rest.contains("event: ") && !rest.contains("kitchen") && !rest.contains("Hello"),
            "the signed-out tab received: {rest}"
        );
    }
}

/// The text and the steps of one turn, read until its end.
async fn read_turn(events: &mut Events) -> (String, Vec<Value>) {
    let (text, steps, _) = read_turn_and_end(events).await;
    (text, steps)
}

/// [`read_turn`], with the `end` event's data.
async fn read_turn_and_end(events: &mut Events) -> (String, Vec<Value>, Value) {
    let mut text = String::new();
    let mut steps = Vec::new();
    loop {
        let (name, data) = events.next().await;
        match name.as_str() {
            "text" => text.push_str(data["delta"].as_str().unwrap()),
            "step" => steps.push(data),
            "end" => return (text, steps, data),
            _ => {}
        }
    }
}

/// The gateway, a fake model, a server allowed to reach both, and an administrator's
/// conversation with MCP on (see [`mcp_conversation`]). Fields drop in order: the server stops
/// before its database goes.
struct GatewayConversation {
    model: FakeModel,
    server: Server,
    tab: Tab,
    id: String,
    _db: TestDb,
}

async fn gateway_conversation(peer: &llooma_test_support::peers::Peer) -> GatewayConversation {
    let model = FakeModel::start([]).await.unwrap();
    let db = TestDb::new();
    let env =
        [("PROVIDER_ALLOWED_ORIGINS", model.origin()), ("MCP_ALLOWED_ORIGINS", peer.origin())];
    let env: Vec<(&str, &str)> = env.iter().map(|(k, v)| (*k, v.as_str())).collect();
    let server = Server::start(&db, &env);
    let (tab, id) = mcp_conversation(&server, &model, peer).await;
    GatewayConversation { model, server, tab, id, _db: db }
}

#[tokio::test]
async fn a_server_that_cannot_be_reached_is_a_step_not_silence() {
    let Some(peer) = crate::peers::gateway(None) else { return };
    let McpWorld { model, server: _server, mut tab, id, added, _db } =
        mcp_world(&peer, "hub").await;
    let tool = model_name_in(&added.json, "Chatto-list_rooms");
    // The person has allowed everything: the call goes out without a card.
    tab.send("PATCH", "/api/v1/consent", Some(json!({"mode": "allow_all"}))).await;
    tab.send("PATCH", &format!("/api/v1/conversations/{id}"), Some(json!({"mcpEnabled": true})))
        .await;
    model.push(Reply::tool_call(&tool, json!({})));
    model.push(Reply::text("The server is down."));
    drop(peer);

    let mut events = Events::open(&tab, &format!("/api/v1/conversations/{id}/events"), None).await;
    tab.post(&format!("/api/v1/conversations/{id}/messages"), json!({"content": "list rooms"}))
        .await;
    let (text, steps) = read_turn(&mut events).await;
    assert_eq!(text, "The server is down.");
    let step = steps.last().unwrap();
    assert_eq!(step["state"], "failed", "{step}");
    assert_eq!(step["server"], "hub");
    assert!(step["error"].as_str().unwrap().contains("could not reach"), "{step}");
    // The offered tools were in the request: MCP tools ride along only where switched on.
    assert!(model.requests()[0].raw_body.contains(&tool));
}

/// The gateway, the fake model scripted to call one tool, and a conversation with MCP on.
async fn mcp_conversation(
    server: &Server,
    model: &FakeModel,
    peer: &llooma_test_support::peers::Peer,
) -> (Tab, String) {
    let (mut tab, id) = setup(server, model).await;
    let added =
        tab.post("/api/v1/mcp/servers", json!({"label": "hub", "address": peer.url()})).await;
    let tool = model_name_in(&added.json, "home-assistant-turn_on");
    model.push(Reply::tool_call(&tool, json!({"entity_id": "light.hall"})));
    model.push(Reply::text("Done."));
    tab.send("PATCH", &format!("/api/v1/conversations/{id}"), Some(json!({"mcpEnabled": true})))
        .await;
    (tab, id)
}

#[tokio::test]
async fn an_answer_given_through_another_replica_resumes_the_waiting_turn() {
    if crate::support::engine() != "postgres" {
        return; // replicas share a Postgres database
    }
    let Some(peer) = crate::peers::gateway(None) else { return };
    let model = FakeModel::start([]).await.unwrap();
    let db = TestDb::new();
    let env =
        [("PROVIDER_ALLOWED_ORIGINS", model.origin()), ("MCP_ALLOWED_ORIGINS", peer.origin())];
    let env: Vec<(&str, &str)> = env.iter().map(|(k, v)| (*k, v.as_str())).collect();
    let a = Server::start(&db, &env);
    let b = Server::start(&db, &env);
    let (mut on_a, id) = mcp_conversation(&a, &model, &peer).await;
    let mut on_b = b.tab();
    on_b.login("root", PASSWORD).await;

    let mut events = Events::open(&on_a, &format!("/api/v1/conversations/{id}/events"), None).await;
    on_a.post(&format!("/api/v1/conversations/{id}/messages"), json!({"content": "hall light"}))
        .await;
    let card = loop {
        let (name, data) = events.next().await;
        if name == "approval" {
            break data["card"].clone();
        }
    };
    // Replica B reads the card from the database and answers it.
    let pending = on_b.get("/api/v1/approvals").await;
    assert_eq!(pending.json[0]["id"], card["id"]);
    let answered = on_b
        .post(
            &format!("/api/v1/approvals/{}/answer", card["id"].as_str().unwrap()),
            json!({"choice": "allow"}),
        )
        .await;
    assert_eq!(answered.status, 200, "{answered:?}");
    let (text, steps) = read_turn(&mut events).await;
    assert_eq!(steps.last().unwrap()["state"], "allowed");
    assert_eq!(text, "Done.");
}

#[tokio::test]
async fn a_restart_ends_the_turn_that_was_waiting_and_its_log_says_so() {
    if crate::support::engine() != "sqlite" {
        return; // with Postgres another replica may still run it; SQLite is one process
    }
    let Some(peer) = crate::peers::gateway(None) else { return };
    let model = FakeModel::start([]).await.unwrap();
    let db = TestDb::new();
    let env =
        [("PROVIDER_ALLOWED_ORIGINS", model.origin()), ("MCP_ALLOWED_ORIGINS", peer.origin())];
    let env: Vec<(&str, &str)> = env.iter().map(|(k, v)| (*k, v.as_str())).collect();
    let server = Server::start(&db, &env);
    let (mut tab, id) = mcp_conversation(&server, &model, &peer).await;
    let path = format!("/api/v1/conversations/{id}/events");
    let mut events = Events::open(&tab, &path, None).await;
    tab.post(&format!("/api/v1/conversations/{id}/messages"), json!({"content": "hall light"}))
        .await;
    while events.next().await.0 != "approval" {}
    drop(events);
    drop(server); // killed while the card waits

    let server = Server::start(&db, &env);
    let mut tab = server.tab();
    tab.login("root", PASSWORD).await;
    let mut replay = Events::open(&tab, &path, None).await;
    let mut error = None;
    let mut steps = Vec::new();
    loop {
        let (name, data) = replay.next().await;
        if name == "error" {
            error = data["message"].as_str().map(str::to_owned);
        }
        if name == "step" {
            steps.push(data.clone());
        }
        if name == "end" {
            assert_eq!(data["state"], "failed");
            break;
        }
    }
    assert!(error.unwrap().contains("server stopped"));
    // The card the turn waited on has its step, as a Stop would have given it.
    assert_eq!(steps.len(), 1, "{steps:?}");
    assert_eq!(steps[0]["state"], "interrupted");
    assert_eq!(steps[0]["serverTool"], "home-assistant-turn_on");
    assert_eq!(tab.get("/api/v1/approvals").await.json, json!([]), "the card is gone too");
    // And the conversation takes a new message.
    model.push(Reply::text("Back."));
    let sent = tab
        .post(&format!("/api/v1/conversations/{id}/messages"), json!({"content": "hello?"}))
        .await;
    assert_eq!(sent.status, 202, "{sent:?}");
}

#[tokio::test]
async fn an_unanswered_card_lapses_into_a_refusal_and_nothing_is_sent() {
    let Some(peer) = crate::peers::gateway(None) else { return };
    let model = FakeModel::start([]).await.unwrap();
    let db = TestDb::new();
    let server = Server::start(
        &db,
        &[
            ("PROVIDER_ALLOWED_ORIGINS", &model.origin()),
            ("MCP_ALLOWED_ORIGINS", &peer.origin()),
            ("LLOOMA_APPROVAL_WINDOW_SECS", "2"),
        ],
    );
    let (mut tab, id) = setup(&server, &model).await;
    let added =
        tab.post("/api/v1/mcp/servers", json!({"label": "hub", "address": peer.url()})).await;
    let add_tool = model_name_in(&added.json, "gateway-add_tool");
    model.push(Reply::tool_call(&add_tool, json!({"name": "Chatto-unasked"})));
    model.push(Reply::text("Nobody answered, so I did not."));
    tab.send("PATCH", &format!("/api/v1/conversations/{id}"), Some(json!({"mcpEnabled": true})))
        .await;

    let mut cards = Events::open(&tab, "/api/v1/approvals/events", None).await;
    assert_eq!(cards.next().await.0, "pending");
    let mut events = Events::open(&tab, &format!("/api/v1/conversations/{id}/events"), None).await;
    tab.post(&format!("/api/v1/conversations/{id}/messages"), json!({"content": "add a tool"}))
        .await;
    let (name, appeared) = cards.next().await;
    assert_eq!(name, "appeared");
    let call_id = appeared["card"]["id"].as_str().unwrap().to_owned();

    // Nobody answers: the turn carries on without the call.
    let (text, steps) = read_turn(&mut events).await;
    assert_eq!(text, "Nobody answered, so I did not.");
    assert_eq!(steps.last().unwrap()["state"], "expired", "{steps:?}");
    let told = &model.requests()[1].raw_body;
    assert!(told.contains("did not answer within 2 seconds"), "{told}");
    // Every tab is told the card is gone, and a late answer changes nothing.
    let (name, gone) = cards.next().await;
    assert_eq!(name, "expired", "{gone}");
    assert!(gone.to_string().contains(&call_id), "{gone}");
    let late =
        tab.post(&format!("/api/v1/approvals/{call_id}/answer"), json!({"choice": "allow"})).await;
    assert_eq!(late.status, 409, "{late:?}");
    assert!(tab.get("/api/v1/approvals").await.json.as_array().unwrap().is_empty());
    let client = crate::peers::client_for(&peer);
    let tools = client.probe(&peer.url(), None).await.unwrap().tools;
    assert!(!tools.iter().any(|t| t.name == "Chatto-unasked"), "a lapsed call reached the server");
}

/// Two replicas on one Postgres database, and a turn started on the first that waits on a card.
/// Bind every field: one left to `..` is dropped at once (the database with it).
struct TwoReplicas {
    model: FakeModel,
    a: Server,
    b: Server,
    on_b: Tab,
    id: String,
    _peer: llooma_test_support::peers::Peer,
    _db: TestDb,
}

async fn turn_waiting_on_replica_a() -> Option<TwoReplicas> {
    if crate::support::engine() != "postgres" {
        return None; // replicas share a Postgres database
    }
    let peer = crate::peers::gateway(None)?;
    let model = FakeModel::start([]).await.unwrap();
    let db = TestDb::new();
    let env =
        [("PROVIDER_ALLOWED_ORIGINS", model.origin()), ("MCP_ALLOWED_ORIGINS", peer.origin())];
    let env: Vec<(&str, &str)> = env.iter().map(|(k, v)| (*k, v.as_str())).collect();
    let a = Server::start(&db, &env);
    let b = Server::start(&db, &env);
    let (mut on_a, id) = mcp_conversation(&a, &model, &peer).await;
    let mut events = Events::open(&on_a, &format!("/api/v1/conversations/{id}/events"), None).await;
    on_a.post(&format!("/api/v1/conversations/{id}/messages"), json!({"content": "hall light"}))
        .await;
    while events.next().await.0 != "approval" {}
    let mut on_b = b.tab();
    on_b.login("root", PASSWORD).await;
    Some(TwoReplicas { model, a, b, on_b, id, _peer: peer, _db: db })
}

#[tokio::test]
async fn stop_pressed_on_another_replica_stops_the_turn() {
    let Some(TwoReplicas { model: _model, a: _a, b: _b, mut on_b, id, _peer, _db }) =
        turn_waiting_on_replica_a().await
    else {
        return;
    };
    let mut events = Events::open(&on_b, &format!("/api/v1/conversations/{id}/events"), None).await;
    let stopped = on_b.post(&format!("/api/v1/conversations/{id}/stop"), json!({})).await;
    assert_eq!(stopped.status, 202, "{stopped:?}");
    let end = loop {
        let (name, data) = events.next().await;
        if name == "end" {
            break data;
        }
    };
    assert_eq!(end["state"], "stopped", "{end}");
    // The card it was waiting on is gone, and nothing is running anymore.
    assert_eq!(on_b.get("/api/v1/approvals").await.json, json!([]));
    let again = on_b.post(&format!("/api/v1/conversations/{id}/stop"), json!({})).await;
    assert_eq!(again.status, 409, "{again:?}");
}

#[tokio::test]
async fn a_replica_that_dies_mid_turn_does_not_block_its_conversation() {
    let Some(TwoReplicas { model, a, b: _b, mut on_b, id, _peer, _db }) =
        turn_waiting_on_replica_a().await
    else {
        return;
    };
    let mut events = Events::open(&on_b, &format!("/api/v1/conversations/{id}/events"), None).await;
    drop(a); // killed while its turn waits on the card
    // The survivor notices the silence (30 s without a heartbeat) and ends the turn in its log.
    let mut error = None;
    let end = loop {
        let (name, data) = events.next_within(std::time::Duration::from_secs(60)).await;
        match name.as_str() {
            "error" => error = data["message"].as_str().map(str::to_owned),
            "end" => break data,
            _ => {}
        }
    };
    assert_eq!(end["state"], "failed", "{end}");
    assert!(error.unwrap().contains("stopped before it ended"));
    model.push(Reply::text("Back."));
    let sent = on_b
        .post(&format!("/api/v1/conversations/{id}/messages"), json!({"content": "hello?"}))
        .await;
    assert_eq!(sent.status, 202, "the conversation takes a new message: {sent:?}");
}

#[tokio::test]
async fn stop_withdraws_the_card_the_turn_was_waiting_on() {
    let Some(peer) = crate::peers::gateway(None) else { return };
    let GatewayConversation { model, server: _server, mut tab, id, _db } =
        gateway_conversation(&peer).await;
    let mut cards = Events::open(&tab, "/api/v1/approvals/events", None).await;
    assert_eq!(cards.next().await.0, "pending");
    let mut events = Events::open(&tab, &format!("/api/v1/conversations/{id}/events"), None).await;
    tab.post(&format!("/api/v1/conversations/{id}/messages"), json!({"content": "hall light"}))
        .await;
    assert_eq!(cards.next().await.0, "appeared");
    let stopped = tab.post(&format!("/api/v1/conversations/{id}/stop"), json!({})).await;
    assert_eq!(stopped.status, 202, "{stopped:?}");
    let (_, steps, end) = read_turn_and_end(&mut events).await;
    assert_eq!(end["state"], "stopped");
    // The timeline says what became of the call, as for every other outcome.
    assert_eq!(steps.len(), 1, "{steps:?}");
    assert_eq!(steps[0]["state"], "interrupted");
    assert_eq!(steps[0]["server"], "hub");
    assert_eq!(steps[0]["serverTool"], "home-assistant-turn_on");
    // Every tab is told the card is gone; nothing waits anymore.
    assert_eq!(cards.next().await.0, "interrupted");
    assert_eq!(tab.get("/api/v1/approvals").await.json, json!([]));
    assert_eq!(model.requests().len(), 1, "the model is not asked again after a stop");
}

#[tokio::test]
async fn announce_mode_offers_a_server_s_tools_once_the_model_asks() {
    let Some(peer) = crate::peers::gateway(None) else { return };
    let McpWorld { model, server: _server, mut tab, id, added, _db } =
        mcp_world(&peer, "hub").await;
    tab.send("PATCH", "/api/v1/mcp/settings", Some(json!({"announceMode": true}))).await;
    tab.send("PATCH", &format!("/api/v1/conversations/{id}"), Some(json!({"mcpEnabled": true})))
        .await;
    let all: Vec<String> = added.json["tools"]
        .as_array()
        .unwrap()
        .iter()
        .map(|t| t["modelName"].as_str().unwrap().to_owned())
        .collect();
    let house: Vec<&String> = all.iter().filter(|n| n.contains("home-assistant")).collect();
    let turn_on = model_name_in(&added.json, "home-assistant-turn_on");

    // The measurement the person decides from: one definition instead of the catalogue.
    let cost = tab.get("/api/v1/mcp/announce-cost").await;
    assert_eq!(cost.status, 200, "{cost:?}");
    let without = &cost.json["everyRequestWithout"];
    let with = &cost.json["everyRequestWith"];
    assert_eq!(without["tools"], all.len(), "{cost:?}");
    assert_eq!(with["tools"], 1);
    assert!(with["bytes"].as_u64() < without["bytes"].as_u64(), "{cost:?}");
    let groups = cost.json["perGroup"].as_array().unwrap();
    let group = groups.iter().find(|g| g["group"] == "home-assistant").unwrap();
    assert_eq!(group["cost"]["tools"], house.len(), "{cost:?}");

    model.push(Reply::tool_call(
        "mcp_server_tools",
        json!({"server": "hub", "group": "home-assistant"}),
    ));
    model.push(Reply::tool_call(&turn_on, json!({"entity_id": "light.porch"})));
    model.push(Reply::text("The porch light is on."));
    let mut cards = Events::open(&tab, "/api/v1/approvals/events", None).await;
    assert_eq!(cards.next().await.0, "pending");
    let mut events = Events::open(&tab, &format!("/api/v1/conversations/{id}/events"), None).await;
    tab.post(&format!("/api/v1/conversations/{id}/messages"), json!({"content": "porch light"}))
        .await;
    // Asking what a server offers is never put to the person: the first card is the call.
    let (name, data) = cards.next().await;
    assert_eq!(name, "appeared");
    assert_eq!(data["card"]["toolName"], "home-assistant-turn_on");
    let call_id = data["card"]["id"].as_str().unwrap();
    tab.post(&format!("/api/v1/approvals/{call_id}/answer"), json!({"choice": "allow"})).await;
    let mut text = String::new();
    let mut steps = Vec::new();
    let mut requests = Vec::new();
    loop {
        let (name, data) = events.next().await;
        match name.as_str() {
            "text" => text.push_str(data["delta"].as_str().unwrap()),
            "step" => steps.push(data),
            "request" => requests.push(data),
            "end" => break,
            _ => {}
        }
    }
    assert_eq!(text, "The porch light is on.");
    assert_eq!(steps[0]["state"], "opened", "{steps:?}");
    assert_eq!(steps[0]["tools"], house.len());
    assert_eq!(steps[1]["state"], "allowed", "{steps:?}");

    // First request: the announcing tool and no MCP definition; then the group's definitions.
    let bodies = model.requests();
    assert!(bodies[0].raw_body.contains("mcp_server_tools"));
    assert!(!all.iter().any(|n| bodies[0].raw_body.contains(n.as_str())), "{}", bodies[0].raw_body);
    assert!(house.iter().all(|n| bodies[1].raw_body.contains(n.as_str())));
    let others = all.iter().filter(|n| !n.contains("home-assistant"));
    assert!(others.clone().all(|n| !bodies[1].raw_body.contains(n.as_str())));
    // Each request recorded what its definitions weighed.
    assert_eq!(requests[0]["announce"], true);
    let first = requests[0]["tools"].as_u64().unwrap() as usize;
    assert_eq!(requests[1]["tools"], first + house.len(), "the group joined: {requests:?}");
    assert!(requests[1]["toolBytes"].as_u64() > requests[0]["toolBytes"].as_u64());
}

#[tokio::test]
async fn a_tool_paused_by_update_tools_while_its_card_waits_is_not_called() {
    let Some(peer) = crate::peers::gateway(None) else { return };
    let McpWorld { model, server: _server, mut tab, id, added, _db } =
        mcp_world(&peer, "hub").await;
    let server_id = added.json["server"]["id"].as_str().unwrap().to_owned();
    let turn_on = model_name_in(&added.json, "home-assistant-turn_on");
    model.push(Reply::tool_call(&turn_on, json!({"entity_id": "light.porch"})));
    model.push(Reply::text("Told."));
    tab.send("PATCH", &format!("/api/v1/conversations/{id}"), Some(json!({"mcpEnabled": true})))
        .await;
    let mut cards = Events::open(&tab, "/api/v1/approvals/events", None).await;
    let mut events = Events::open(&tab, &format!("/api/v1/conversations/{id}/events"), None).await;
    tab.post(&format!("/api/v1/conversations/{id}/messages"), json!({"content": "porch light"}))
        .await;
    let call_id = loop {
        let (name, data) = cards.next().await;
        if name == "appeared" {
            break data["card"]["id"].as_str().unwrap().to_owned();
        }
    };

    // While the card waits, the server changes the tool and Update tools pauses it.
    crate::peers::client_for(&peer)
        .call_tool(
            &peer.url(),
            None,
            "gateway-redescribe_tool",
            json!({"name": "home-assistant-turn_on", "description": "Turns on every device."}),
        )
        .await
        .unwrap();
    let refresh = tab.post(&format!("/api/v1/mcp/servers/{server_id}/refresh"), json!({})).await;
    assert_eq!(refresh.json["applied"], false, "{refresh:?}");

    // Allowed afterwards, the call does not go out under the definition the card showed.
    tab.post(&format!("/api/v1/approvals/{call_id}/answer"), json!({"choice": "allow"})).await;
    let (text, steps) = read_turn(&mut events).await;
    assert_eq!(text, "Told.");
    let last = steps.last().unwrap();
    assert_eq!(last["state"], "failed", "{last}");
    assert!(last["error"].as_str().unwrap().contains("no longer in use"), "{last}");
    let told = &model.requests()[1].raw_body;
    assert!(told.contains("was not called") && !told.contains("redescribed"), "{told}");
}

#[tokio::test]
async fn another_account_cannot_stop_delete_or_answer_what_is_yours() {
    let Some(peer) = crate::peers::gateway(None) else { return };
    let GatewayConversation { model: _model, server, mut tab, id, _db } =
        gateway_conversation(&peer).await;
    tab.send("PATCH", "/api/v1/admin/settings", Some(json!({"registrationOpen": true}))).await;
    let mut stranger = server.tab();
    stranger.register("stranger", PASSWORD).await;

    let mut events = Events::open(&tab, &format!("/api/v1/conversations/{id}/events"), None).await;
    tab.post(&format!("/api/v1/conversations/{id}/messages"), json!({"content": "hall light"}))
        .await;
    let card = loop {
        let (name, data) = events.next().await;
        if name == "approval" {
            break data["card"]["id"].as_str().unwrap().to_owned();
        }
    };
    // Everything the stranger tries on the owner's ids is "not found", and changes nothing.
    let deleted = stranger.send("DELETE", &format!("/api/v1/conversations/{id}"), None).await;
    assert_eq!(deleted.status, 404, "{deleted:?}");
    let stopped = stranger.post(&format!("/api/v1/conversations/{id}/stop"), json!({})).await;
    assert_eq!(stopped.status, 404, "{stopped:?}");
    let answered = stranger
        .post(&format!("/api/v1/approvals/{card}/answer"), json!({"choice": "refuse"}))
        .await;
    assert_eq!(answered.status, 404, "{answered:?}");
    // A stop asked through the database is looked for every second: give it the chance.
    tokio::time::sleep(std::time::Duration::from_millis(1500)).await;
    let pending = tab.get("/api/v1/approvals").await;
    assert_eq!(pending.json[0]["id"], card, "the card still waits for its owner: {pending:?}");

    let allowed =
        tab.post(&format!("/api/v1/approvals/{card}/answer"), json!({"choice": "allow"})).await;
    assert_eq!(allowed.status, 200, "{allowed:?}");
    let (text, _, end) = read_turn_and_end(&mut events).await;
    assert_eq!(end["state"], "done", "the owner's reply ran to its end");
    assert_eq!(text, "Done.");
    let detail = tab.get(&format!("/api/v1/conversations/{id}")).await;
    assert_eq!(detail.status, 200, "the conversation is still there");
}

#[tokio::test]
async fn a_message_sent_the_moment_end_arrives_is_taken() {
    let replies = (0..100).map(|i| Reply::text(format!("Answer {i}.")).chunks(2));
    let model = FakeModel::start(replies).await.unwrap();
    let db = TestDb::new();
    let server = Server::start(&db, &[("PROVIDER_ALLOWED_ORIGINS", &model.origin())]);
    let (mut tab, id) = setup(&server, &model).await;
    let mut events = Events::open(&tab, &format!("/api/v1/conversations/{id}/events"), None).await;
    for i in 0..100 {
        let sent = tab
            .post(&format!("/api/v1/conversations/{id}/messages"), json!({"content": "next"}))
            .await;
        // Each message goes out as soon as the previous reply's `end` was read.
        assert_eq!(sent.status, 202, "message {i} was refused right after `end`: {sent:?}");
        let (text, _, end) = until_end(&mut events).await;
        assert_eq!(end["state"], "done");
        assert_eq!(text, format!("Answer {i}."));
    }
}

#[tokio::test]
async fn a_turn_with_mcp_switched_on_but_no_mcp_tool_gets_four_rounds_and_the_last_request_is_reported()
 {
    let calls = (0..8).map(|_| Reply::tool_call("current_date", json!({})));
    let model = FakeModel::start(calls.chain([Reply::text("Out of rounds.")])).await.unwrap();
    let db = TestDb::new();
    let server = Server::start(&db, &[("PROVIDER_ALLOWED_ORIGINS", &model.origin())]);
    let (mut tab, id) = setup(&server, &model).await;
    // MCP on for the conversation, but the account has no MCP server: no MCP tool is offered.
    tab.send("PATCH", &format!("/api/v1/conversations/{id}"), Some(json!({"mcpEnabled": true})))
        .await;
    let mut events = Events::open(&tab, &format!("/api/v1/conversations/{id}/events"), None).await;
    tab.post(&format!("/api/v1/conversations/{id}/messages"), json!({"content": "keep calling"}))
        .await;
    let mut requests = Vec::new();
    loop {
        let (name, data) = events.next().await;
        match name.as_str() {
            "request" => requests.push(data),
            "end" => break,
            _ => {}
        }
    }
    assert_eq!(model.requests().len(), 4, "4 rounds without MCP tools");
    // Every request to the model is reported, the last (which offers no tools) too.
    assert_eq!(requests.len(), 4, "{requests:?}");
    assert_eq!(requests[3]["round"], 4);
    assert_eq!(requests[3]["tools"], 0);
    assert!(requests[0]["tools"].as_u64().unwrap() > 0);
}

#[tokio::test]
async fn the_conversation_list_and_the_home_page_come_in_pages() {
    let db = TestDb::new();
    let server = Server::start(&db, &[]);
    let mut tab = server.tab();
    tab.register("root", PASSWORD).await;
    for i in 0..53 {
        let made = tab.post("/api/v1/conversations", json!({"title": format!("c{i:02}")})).await;
        assert_eq!(made.status, 201);
    }
    // Followed page by page through `Link: rel="next"`: every conversation once, newest first.
    let mut titles = Vec::new();
    let mut next = Some("/api/v1/conversations?limit=20".to_owned());
    while let Some(path) = next {
        let page = tab.get(&path).await;
        assert_eq!(page.status, 200, "{page:?}");
        let items = page.json.as_array().unwrap();
        assert!(items.len() <= 20);
        titles.extend(items.iter().map(|c| c["title"].as_str().unwrap().to_owned()));
        let response = tab
            .http
            .get(format!("{}{path}", tab.base))
            .header("cookie", format!("llooma_session={}", tab.cookie.as_ref().unwrap()))
            .send()
            .await
            .unwrap();
        next = response.headers().get("link").map(|link| {
            let link = link.to_str().unwrap();
            assert!(link.ends_with("; rel=\"next\""), "{link}");
            link.trim_start_matches('<').split('>').next().unwrap().to_owned()
        });
    }
    let expected: Vec<String> = (0..53).rev().map(|i| format!("c{i:02}")).collect();
    assert_eq!(titles, expected);
    // Without a limit: the first 50.
    assert_eq!(tab.get("/api/v1/conversations").await.json.as_array().unwrap().len(), 50);
    for bad in ["limit=0", "limit=201", "before=nonsense", "before=12.", "page=2"] {
        let reply = tab.get(&format!("/api/v1/conversations?{bad}")).await;
        assert_eq!(reply.status, 400, "{bad}: {reply:?}");
    }

    // The home page shows the newest 50 and links to the older ones.
    let home = tab.get("/").await;
    assert!(home.text.contains(">c52<") && !home.text.contains(">c02<"), "{}", home.text);
    let older = home.text.split("href=\"/?before=").nth(1).unwrap().split('"').next().unwrap();
    let page = tab.get(&format!("/?before={older}")).await;
    assert!(page.text.contains(">c02<") && page.text.contains(">c00<"), "{}", page.text);
    assert!(!page.text.contains(">c52<"));
    assert!(page.text.contains("Newest conversations"));
}

#[tokio::test]
async fn a_fast_stream_is_written_in_a_few_joined_deltas_and_loses_nothing() {
    let long: String = (0..200).map(|i| format!("w{i} ")).collect();
    let model = FakeModel::start([
        Reply::text(long.clone()).chunks(200),
        Reply::text("slow and steady").chunks(3).chunk_delay_ms(120),
        Reply::text("a steady trickle of small words").chunks(12).chunk_delay_ms(25),
    ])
    .await
    .unwrap();
    let db = TestDb::new();
    let server = Server::start(&db, &[("PROVIDER_ALLOWED_ORIGINS", &model.origin())]);
    let (mut tab, id) = setup(&server, &model).await;
    let path = format!("/api/v1/conversations/{id}/events");
    let mut events = Events::open(&tab, &path, None).await;
    tab.post(&format!("/api/v1/conversations/{id}/messages"), json!({"content": "go"})).await;
    let (text, names, _) = until_end(&mut events).await;
    assert_eq!(text, long, "every delta arrives, in order");
    let written = names.iter().filter(|n| *n == "text").count();
    assert!(written < 50, "200 deltas arriving at once are joined: {written} text events");
    // A reload replays exactly what the live tab saw.
    let mut replay = Events::open(&tab, &path, Some("0")).await;
    let (replayed, _, _) = until_end(&mut replay).await;
    assert_eq!(replayed, long);

    // Deltas further apart than the window are not held back.
    tab.post(&format!("/api/v1/conversations/{id}/messages"), json!({"content": "again"})).await;
    let (text, names, _) = until_end(&mut events).await;
    assert_eq!(text, "slow and steady");
    assert_eq!(names.iter().filter(|n| *n == "text").count(), 3, "{names:?}");

    // Deltas closer together than the window go out each time it has passed, while the model
    // still streams, not all at its end.
    tab.post(&format!("/api/v1/conversations/{id}/messages"), json!({"content": "more"})).await;
    let (text, names, _) = until_end(&mut events).await;
    assert_eq!(text, "a steady trickle of small words");
    let written = names.iter().filter(|n| *n == "text").count();
    assert!(written >= 3, "300 ms of deltas 25 ms apart go out window by window: {names:?}");
}

/// Creates a conversation that starts with the last used model: (its provider id, its model).
async fn started_with(tab: &mut Tab) -> (Value, Value) {
    let created = tab.post("/api/v1/conversations", json!({"lastUsedModel": true})).await;
    assert_eq!(created.status, 201, "{created:?}");
    (created.json["providerId"].clone(), created.json["model"].clone())
}

#[tokio::test]
async fn a_new_conversation_starts_with_the_last_used_model_else_the_instance_default() {
    let model = FakeModel::start([]).await.unwrap();
    let db = TestDb::new();
    let server = Server::start(&db, &[("PROVIDER_ALLOWED_ORIGINS", &model.origin())]);
    let mut admin = server.tab();
    admin.register("root", PASSWORD).await;
    let provider = admin
        .post("/api/v1/admin/providers", json!({"name": "fake", "baseUrl": model.base_url()}))
        .await;
    let provider_id = provider.json["id"].as_str().unwrap().to_owned();
    assert_eq!(
        started_with(&mut admin).await,
        (Value::Null, Value::Null),
        "nothing to start with yet"
    );

    // Half a default, or one of a provider that does not exist, is refused with what to do.
    let settings = "/api/v1/admin/settings";
    let half = admin.send("PATCH", settings, Some(json!({"defaultModel": "fake-model"}))).await;
    assert_eq!((half.status, half.json["error"].as_str()), (400, Some("invalid_default_model")));
    let unknown = json!({"defaultProviderId": "nope", "defaultModel": "fake-model"});
    let unknown = admin.send("PATCH", settings, Some(unknown)).await;
    assert_eq!((unknown.status, unknown.json["error"].as_str()), (400, Some("unknown_provider")));

    // The administrator's default model: a new conversation starts with it.
    let default = json!({"defaultProviderId": provider_id, "defaultModel": "fake-model"});
    let set = admin.send("PATCH", settings, Some(default)).await;
    assert_eq!(set.status, 200, "{set:?}");
    assert_eq!(set.json["defaultModel"], "fake-model");
    assert_eq!(admin.get(settings).await.json["defaultProviderId"], provider_id.as_str());
    let (started_provider, started_model) = started_with(&mut admin).await;
    assert_eq!(
        (started_provider.as_str(), started_model.as_str()),
        (Some(&*provider_id), Some("fake-model"))
    );

    // Without asking for it, a new conversation has no model, as always.
    let bare = admin.post("/api/v1/conversations", json!({})).await;
    assert_eq!(bare.json["model"], Value::Null, "{bare:?}");

    // Once a person has used a model, their next conversation starts with it.
    let id = admin.post("/api/v1/conversations", json!({"lastUsedModel": true})).await.json["id"]
        .as_str()
        .unwrap()
        .to_owned();
    let picked = admin
        .send(
            "PATCH",
            &format!("/api/v1/conversations/{id}"),
            Some(json!({"providerId": provider_id, "model": "big-model"})),
        )
        .await;
    assert_eq!(picked.status, 200, "{picked:?}");
    assert_eq!(started_with(&mut admin).await.1, "big-model");

    // Another account, which never chose, gets the default; a chosen model is kept as chosen.
    admin.send("PATCH", settings, Some(json!({"registrationOpen": true}))).await;
    let mut other = server.tab();
    other.register("other", PASSWORD).await;
    assert_eq!(started_with(&mut other).await.1, "fake-model");
    let chosen = other
        .post("/api/v1/conversations", json!({"providerId": provider_id, "model": "small-model"}))
        .await;
    assert_eq!(chosen.json["model"], "small-model");

    // Cleared, and with its provider gone, nothing is started with.
    let cleared = admin
        .send("PATCH", settings, Some(json!({"defaultProviderId": "", "defaultModel": ""})))
        .await;
    assert_eq!(cleared.json["defaultModel"], Value::Null, "{cleared:?}");
    let mut third = server.tab();
    third.register("third", PASSWORD).await;
    assert_eq!(started_with(&mut third).await.1, Value::Null);
    let removed =
        admin.send("DELETE", &format!("/api/v1/admin/providers/{provider_id}"), None).await;
    assert_eq!(removed.status, 204, "{removed:?}");
    assert_eq!(started_with(&mut admin).await, (Value::Null, Value::Null));
}

#[tokio::test]
async fn a_message_sent_in_place_of_an_earlier_one_replaces_it_and_everything_after_it() {
    let model =
        FakeModel::start([Reply::text("One."), Reply::text("Two."), Reply::text("One, again.")])
            .await
            .unwrap();
    let db = TestDb::new();
    let server = Server::start(&db, &[("PROVIDER_ALLOWED_ORIGINS", &model.origin())]);
    let (mut tab, id) = setup(&server, &model).await;
    let path = format!("/api/v1/conversations/{id}/events");
    let mut events = Events::open(&tab, &path, None).await;
    let messages = format!("/api/v1/conversations/{id}/messages");
    let first = tab.post(&messages, json!({"content": "first"})).await;
    let first_turn = first.json["turnId"].as_str().unwrap().to_owned();
    let (name, started) = events.next().await;
    assert_eq!(name, "start");
    assert_eq!(started["model"], "fake-model", "{started}");
    assert!(started["startedAt"].as_str().unwrap().starts_with("20"), "{started}");
    assert!(started.get("replaced").is_none(), "{started}");
    until_end(&mut events).await;
    tab.post(&messages, json!({"content": "second"})).await;
    until_end(&mut events).await;

    // A turn that is not this conversation's is refused with what to do; nothing changes.
    let wrong = tab.post(&messages, json!({"content": "x", "replaces": "no-such-turn"})).await;
    assert_eq!((wrong.status, wrong.json["error"].as_str()), (400, Some("unknown_message")));
    assert_eq!(
        tab.get(&format!("/api/v1/conversations/{id}")).await.json["messages"]
            .as_array()
            .unwrap()
            .len(),
        4
    );

    // In place of the first message: the model reads nothing after it, and the conversation
    // keeps only the new exchange; a watching page is told which turn was replaced.
    let again =
        tab.post(&messages, json!({"content": "first, edited", "replaces": first_turn})).await;
    assert_eq!(again.status, 202, "{again:?}");
    let (name, started) = events.next().await;
    assert_eq!((name.as_str(), started["replaced"].as_str()), ("start", Some(first_turn.as_str())));
    until_end(&mut events).await;
    let asked = model.requests().last().unwrap().raw_body.clone();
    assert!(
        asked.contains("first, edited") && !asked.contains("One.") && !asked.contains("second"),
        "{asked}"
    );
    let detail = tab.get(&format!("/api/v1/conversations/{id}")).await.json;
    let contents: Vec<&str> = detail["messages"]
        .as_array()
        .unwrap()
        .iter()
        .map(|m| m["content"].as_str().unwrap())
        .collect();
    assert_eq!(contents, ["first, edited", "One, again."]);
    let reply = &detail["replies"].as_array().unwrap().last().unwrap().clone();
    assert_eq!(reply["model"], "fake-model", "{reply}");
}

#[tokio::test]
async fn conversations_are_named_by_their_first_message_and_found_by_the_words_in_them() {
    let model = FakeModel::start([
        Reply::text("High tide in Brest is at noon."),
        Reply::text("The Louvre is the largest."),
        Reply::text("Brest is far from here."),
    ])
    .await
    .unwrap();
    let db = TestDb::new();
    let server = Server::start(&db, &[("PROVIDER_ALLOWED_ORIGINS", &model.origin())]);
    let (mut tab, _) = setup(&server, &model).await;
    let provider = tab.get("/api/v1/providers").await.json[0]["id"].clone();
    let chat = json!({"providerId": provider, "model": "fake-model"});
    let ask = async |tab: &mut Tab, text: &str| {
        let created = tab.post("/api/v1/conversations", chat.clone()).await;
        let id = created.json["id"].as_str().unwrap().to_owned();
        assert_eq!(created.json["title"], "New conversation");
        let mut events =
            Events::open(tab, &format!("/api/v1/conversations/{id}/events"), None).await;
        tab.post(&format!("/api/v1/conversations/{id}/messages"), json!({"content": text})).await;
        until_end(&mut events).await;
        id
    };
    let tides = ask(&mut tab, "What about the tides in Brest?\nThanks!").await;
    let museums = ask(&mut tab, "Which Paris museum is the biggest?").await;
    let title =
        tab.get(&format!("/api/v1/conversations/{tides}")).await.json["conversation"]["title"]
            .clone();
    assert_eq!(title, "What about the tides in Brest?", "named by its first line");
    // Another account's words are never found.
    tab.send("PATCH", "/api/v1/admin/settings", Some(json!({"registrationOpen": true}))).await;
    let mut other = server.tab();
    other.register("other", PASSWORD).await;
    let provider_other = other.post("/api/v1/conversations", chat.clone()).await;
    let theirs = provider_other.json["id"].as_str().unwrap().to_owned();
    let mut events =
        Events::open(&other, &format!("/api/v1/conversations/{theirs}/events"), None).await;
    other
        .post(&format!("/api/v1/conversations/{theirs}/messages"), json!({"content": "Brest?"}))
        .await;
    until_end(&mut events).await;

    let found = async |tab: &mut Tab, q: &str| -> Vec<String> {
        let answer = tab.get(&format!("/api/v1/conversations?q={}", urlencode(q))).await;
        assert_eq!(answer.status, 200, "{q}: {answer:?}");
        answer
            .json
            .as_array()
            .unwrap()
            .iter()
            .map(|c| c["id"].as_str().unwrap().to_owned())
            .collect()
    };
    assert_eq!(found(&mut tab, "brest").await, [tides.as_str()], "in any case");
    assert_eq!(found(&mut tab, "tide").await, [tides.as_str()], "a word's start finds it");
    assert_eq!(found(&mut tab, "noon").await, [tides.as_str()], "replies are searched too");
    assert_eq!(found(&mut tab, "louvre largest").await, [museums.as_str()], "every word");
    assert_eq!(found(&mut tab, "louvre brest").await, Vec::<String>::new());
    assert_eq!(found(&mut tab, "\"); DROP TABLE messages; --").await, Vec::<String>::new());
    assert_eq!(found(&mut tab, "50%_\\").await, Vec::<String>::new(), "no wildcard");
    assert_eq!(found(&mut other, "brest").await, [theirs.as_str()]);
    let empty = tab.get("/api/v1/conversations?q=%20").await;
    assert_eq!((empty.status, empty.json["error"].as_str()), (400, Some("invalid_query")));

    // Renamed, it is found by its new title; deleted, it is found no more.
    let renamed = tab
        .send(
            "PATCH",
            &format!("/api/v1/conversations/{museums}"),
            Some(json!({"title": "Trip to Paris"})),
        )
        .await;
    assert_eq!(renamed.json["title"], "Trip to Paris");
    assert_eq!(found(&mut tab, "trip").await, [museums.as_str()]);
    tab.send("DELETE", &format!("/api/v1/conversations/{tides}"), None).await;
    assert_eq!(found(&mut tab, "brest").await, Vec::<String>::new());
}

/// `text` for a query string.
fn urlencode(text: &str) -> String {
    text.bytes()
        .map(|b| match b {
            b'a'..=b'z' | b'A'..=b'Z' | b'0'..=b'9' | b'-' | b'_' | b'.' => (b as char).to_string(),
            _ => format!("%{b:02X}"),
        })
        .collect()
}

#[tokio::test]
async fn with_titles_from_model_on_a_new_conversation_is_named_by_the_model_after_its_first_reply()
{
    let model = FakeModel::start([
        Reply::text("High tide is at noon."),
        Reply::text("\"Brest tide times\""),
        Reply::text("Low tide at six."),
    ])
    .await
    .unwrap();
    let db = TestDb::new();
    let server = Server::start(&db, &[("PROVIDER_ALLOWED_ORIGINS", &model.origin())]);
    let (mut tab, _) = setup(&server, &model).await;
    let preferences = "/api/v1/me/preferences";
    assert_eq!(tab.get(preferences).await.json, json!({"titlesFromModel": false}), "off at first");
    let wrong = tab.send("PATCH", preferences, Some(json!({"titles": true}))).await;
    assert_eq!(wrong.status, 400, "{wrong:?}");
    let on = tab.send("PATCH", preferences, Some(json!({"titlesFromModel": true}))).await;
    assert_eq!(on.json, json!({"titlesFromModel": true}));

    let provider = tab.get("/api/v1/providers").await.json[0]["id"].clone();
    let created = tab
        .post("/api/v1/conversations", json!({"providerId": provider, "model": "fake-model"}))
        .await;
    let id = created.json["id"].as_str().unwrap().to_owned();
    let path = format!("/api/v1/conversations/{id}");
    let mut events = Events::open(&tab, &format!("{path}/events"), None).await;
    tab.post(&format!("{path}/messages"), json!({"content": "when is high tide in Brest?"})).await;
    until_end(&mut events).await;
    let mut title = Value::Null;
    for _ in 0..100 {
        title = tab.get(&path).await.json["conversation"]["title"].clone();
        if title == "Brest tide times" {
            break;
        }
        tokio::time::sleep(std::time::Duration::from_millis(50)).await;
    }
    assert_eq!(title, "Brest tide times", "the model's title, its quotes taken off");
    let asked = model.requests()[1].raw_body.clone();
    assert!(asked.contains("Write a title") && asked.contains("when is high tide"), "{asked}");
    assert!(asked.contains("High tide is at noon.") && !asked.contains("\"tools\""), "{asked}");

    // Only the first reply names it.
    tab.post(&format!("{path}/messages"), json!({"content": "and low tide?"})).await;
    until_end(&mut events).await;
    assert_eq!(model.requests().len(), 3);
    assert_eq!(tab.get(&path).await.json["conversation"]["title"], "Brest tide times");
}

/// A new conversation on `provider` (its answer's `id`) asked "hi": the conversation's id, how
/// the turn ended and its error, if any.
async fn ask_once(tab: &mut Tab, provider: &Value) -> (String, String, Option<String>) {
    let body = json!({"providerId": provider["id"], "model": "fake-model"});
    let conversation = tab.post("/api/v1/conversations", body).await;
    let id = conversation.json["id"].as_str().unwrap().to_owned();
    let mut events = Events::open(tab, &format!("/api/v1/conversations/{id}/events"), None).await;
    tab.post(&format!("/api/v1/conversations/{id}/messages"), json!({"content": "hi"})).await;
    let mut error = None;
    loop {
        let (name, data) = events.next().await;
        if name == "error" {
            error = data["message"].as_str().map(str::to_owned);
        }
        if name == "end" {
            return (id, data["state"].as_str().unwrap_or_default().to_owned(), error);
        }
    }
}

#[tokio::test]
async fn an_administrator_adds_a_provider_on_this_machine_without_editing_the_environment() {
    let model =
        FakeModel::start([Reply::text("Hello from the box under the desk.")]).await.unwrap();
    let db = TestDb::new();
    // No PROVIDER_ALLOWED_ORIGINS: the fake model listens on loopback, like an Ollama would.
    let server = Server::start(&db, &[]);
    let mut root = server.tab();
    root.register("root", PASSWORD).await;

    // Not marked: kept, but refused when used, as before (the message says what to do).
    let plain = root
        .post("/api/v1/admin/providers", json!({"name": "plain", "baseUrl": model.base_url()}))
        .await;
    assert_eq!(plain.status, 201, "{plain:?}");
    assert_eq!(plain.json["localNetwork"], false);
    let (_, state, error) = ask_once(&mut root, &plain.json).await;
    assert_eq!(state, "failed");
    let error = error.expect("an error event");
    assert!(error.contains("PROVIDER_ALLOWED_ORIGINS"), "{error}");
    assert!(model.chat_bodies().is_empty(), "the unmarked loopback provider was reached");

    // Marked as on this machine: the same address answers.
    let local = root
        .post(
            "/api/v1/admin/providers",
            json!({"name": "ollama", "baseUrl": model.base_url(), "localNetwork": true}),
        )
        .await;
    assert_eq!(local.status, 201, "{local:?}");
    assert_eq!(local.json["localNetwork"], true);
    let listed = root.get("/api/v1/admin/providers").await.json;
    assert!(
        listed
            .as_array()
            .unwrap()
            .iter()
            .any(|p| p["name"] == "ollama" && p["localNetwork"] == true)
    );
    let (id, state, error) = ask_once(&mut root, &local.json).await;
    assert_eq!(state, "done", "{error:?}");
    let detail = root.get(&format!("/api/v1/conversations/{id}")).await.json;
    assert!(detail.to_string().contains("Hello from the box under the desk."), "{detail}");

    // The mark opens this provider's address only: not the metadata service, not the same
    // address for anyone's MCP server or for page reading.
    for never in
        ["http://169.254.169.254/v1", "http://[fe80::1]:11434/v1", "http://0.0.0.0:11434/v1"]
    {
        let refused = root
            .post(
                "/api/v1/admin/providers",
                json!({"name": "metadata", "baseUrl": never, "localNetwork": true}),
            )
            .await;
        assert_eq!(refused.status, 422, "{never}: {refused:?}");
        assert_eq!(refused.json["error"], "address_refused", "{never}");
    }
    let mcp = root
        .post("/api/v1/mcp/servers", json!({"label": "same box", "address": model.base_url()}))
        .await;
    assert_eq!(mcp.json["error"], "address_refused", "{mcp:?}");
    assert!(mcp.json["message"].as_str().unwrap().contains("MCP_ALLOWED_ORIGINS"), "{mcp:?}");

    // Only administrators add providers at all.
    let mut bob = server.tab();
    root.send("PATCH", "/api/v1/admin/settings", Some(json!({"registrationOpen": true}))).await;
    bob.register("bob", PASSWORD).await;
    let denied = bob
        .post(
            "/api/v1/admin/providers",
            json!({"name": "mine", "baseUrl": model.base_url(), "localNetwork": true}),
        )
        .await;
    assert_eq!(denied.status, 403, "{denied:?}");
}

#[tokio::test]
async fn a_set_provider_allow_list_decides_alone_over_a_local_provider() {
    let model = FakeModel::start([Reply::text("never")]).await.unwrap();
    let db = TestDb::new();
    let server = Server::start(&db, &[("PROVIDER_ALLOWED_ORIGINS", "http://127.0.0.1:1")]);
    let mut root = server.tab();
    root.register("root", PASSWORD).await;
    let local = root
        .post(
            "/api/v1/admin/providers",
            json!({"name": "ollama", "baseUrl": model.base_url(), "localNetwork": true}),
        )
        .await;
    assert_eq!(local.status, 422, "{local:?}");
    assert_eq!(local.json["error"], "address_refused");
    let message = local.json["message"].as_str().unwrap();
    assert!(message.contains("PROVIDER_ALLOWED_ORIGINS"), "{message}");
    assert_eq!(root.get("/api/v1/admin/providers").await.json, json!([]));
    assert!(model.chat_bodies().is_empty());
}

/// What the model was last asked, as (role, content), the system prompt left out.
fn last_asked(model: &FakeModel) -> Vec<(String, String)> {
    let request = model.requests().into_iter().rev().find(|r| r.is_chat()).expect("a request");
    let body = request.body.expect("a JSON body");
    body["messages"]
        .as_array()
        .unwrap()
        .iter()
        .filter(|m| m["role"] != "system")
        .map(|m| {
            (m["role"].as_str().unwrap().to_owned(), m["content"].as_str().unwrap().to_owned())
        })
        .collect()
}

fn exchange(pairs: &[(&str, &str)]) -> Vec<(String, String)> {
    pairs.iter().map(|(role, content)| ((*role).to_owned(), (*content).to_owned())).collect()
}

/// The model reads the whole conversation, in order, on every turn: after a reply that stayed
/// empty, after an edit, and (Postgres) after another replica added to it in between. The
/// server keeps a conversation's messages between its turns; none of this may show through.
#[tokio::test]
async fn the_model_reads_the_conversation_as_it_stands_on_every_turn() {
    let model = FakeModel::start([]).await.unwrap();
    let db = TestDb::new();
    let env = [("PROVIDER_ALLOWED_ORIGINS", model.origin())];
    let env: Vec<(&str, &str)> = env.iter().map(|(k, v)| (*k, v.as_str())).collect();
    let server = Server::start(&db, &env);
    let (mut tab, id) = setup(&server, &model).await;
    let mut events = Events::open(&tab, &format!("/api/v1/conversations/{id}/events"), None).await;
    let messages = format!("/api/v1/conversations/{id}/messages");
    let say = async |tab: &mut Tab, events: &mut Events, body: Value, reply: &str| {
        model.push(Reply::text(reply));
        let sent = tab.post(&messages, body).await;
        assert_eq!(sent.status, 202, "{sent:?}");
        until_end(events).await;
        sent.json["turnId"].as_str().unwrap().to_owned()
    };

    say(&mut tab, &mut events, json!({"content": "a"}), "A.").await;
    let second = say(&mut tab, &mut events, json!({"content": "b"}), "").await;
    say(&mut tab, &mut events, json!({"content": "c"}), "C.").await;
    assert_eq!(
        last_asked(&model),
        exchange(&[("user", "a"), ("assistant", "A."), ("user", "b"), ("user", "c")]),
        "an empty reply is not kept"
    );
    say(&mut tab, &mut events, json!({"content": "b, edited", "replaces": second}), "B.").await;
    say(&mut tab, &mut events, json!({"content": "d"}), "D.").await;
    let mut conversation = exchange(&[
        ("user", "a"),
        ("assistant", "A."),
        ("user", "b, edited"),
        ("assistant", "B."),
        ("user", "d"),
    ]);
    assert_eq!(last_asked(&model), conversation);

    if crate::support::engine() != "postgres" {
        return; // replicas share a Postgres database
    }
    let other = Server::start(&db, &env);
    let mut on_other = other.tab();
    on_other.login("root", PASSWORD).await;
    // The first replica's tab sees that turn end too (its log is re-read within a second).
    say(&mut on_other, &mut events, json!({"content": "e"}), "E.").await;
    say(&mut tab, &mut events, json!({"content": "f"}), "F.").await;
    conversation.extend(exchange(&[
        ("assistant", "D."),
        ("user", "e"),
        ("assistant", "E."),
        ("user", "f"),
    ]));
    assert_eq!(last_asked(&model), conversation, "what the other replica wrote is read");
}

/// A conversation downloads as Markdown to read and as JSON holding all of it; nobody else's.
#[tokio::test]
async fn a_conversation_exports_as_markdown_and_json_for_its_owner_only() {
    let model = FakeModel::start([Reply::text("Bonjour! Paris is lovely in May.").chunks(5)])
        .await
        .unwrap();
    let db = TestDb::new();
    let server = Server::start(&db, &[("PROVIDER_ALLOWED_ORIGINS", &model.origin())]);
    let (mut tab, id) = setup(&server, &model).await;
    tab.send(
        "PATCH",
        &format!("/api/v1/conversations/{id}"),
        Some(json!({"title": "Trip: Paris / May?"})),
    )
    .await;
    let mut events = Events::open(&tab, &format!("/api/v1/conversations/{id}/events"), None).await;
    tab.post(&format!("/api/v1/conversations/{id}/messages"), json!({"content": "When to go?"}))
        .await;
    until_end(&mut events).await;

    let (status, headers, body) =
        tab.fetch(&format!("/api/v1/conversations/{id}/export?format=markdown")).await;
    assert_eq!(status, 200);
    assert_eq!(headers["content-type"], "text/markdown; charset=utf-8");
    let disposition = headers["content-disposition"].to_str().unwrap();
    assert!(disposition.starts_with("attachment; filename=\"Trip-Paris-May.md\""), "{disposition}");
    let markdown = String::from_utf8(body).unwrap();
    assert!(markdown.starts_with("# Trip: Paris / May?\n"), "{markdown}");
    let you = markdown.find("## You · ").expect("the person's message");
    let asked = markdown.find("When to go?").unwrap();
    let model_heading = markdown.find("## fake-model · ").expect("the reply, under its model");
    let answer = markdown.find("Bonjour! Paris is lovely in May.").unwrap();
    assert!(you < asked && asked < model_heading && model_heading < answer, "{markdown}");

    let (status, headers, body) =
        tab.fetch(&format!("/api/v1/conversations/{id}/export?format=json")).await;
    assert_eq!(status, 200);
    assert_eq!(headers["content-type"], "application/json");
    let all: Value = serde_json::from_slice(&body).unwrap();
    assert_eq!(all["format"], "llooma.conversation");
    assert_eq!(all["version"], 1);
    assert_eq!(all["conversation"]["title"], "Trip: Paris / May?");
    let detail = tab.get(&format!("/api/v1/conversations/{id}")).await.json;
    assert_eq!(all["messages"], detail["messages"]);
    assert_eq!(all["replies"], detail["replies"]);
    assert_eq!(all["replies"][0]["parts"][0]["text"], "Bonjour! Paris is lovely in May.");

    let wrong = tab.get(&format!("/api/v1/conversations/{id}/export?format=pdf")).await;
    assert_eq!(wrong.status, 400, "{wrong:?}");
    assert!(wrong.json["message"].as_str().unwrap().contains("markdown or json"), "{wrong:?}");
    // Another account, or nobody, gets nothing.
    tab.send("PATCH", "/api/v1/admin/settings", Some(json!({"registrationOpen": true}))).await;
    let mut other = server.tab();
    other.register("other", PASSWORD).await;
    let (status, _, _) =
        other.fetch(&format!("/api/v1/conversations/{id}/export?format=json")).await;
    assert_eq!(status, 404);
    let (status, _, _) =
        server.tab().fetch(&format!("/api/v1/conversations/{id}/export?format=json")).await;
    assert_eq!(status, 401);
}
