//! What a server says during a call it runs: its questions (MCP forms, "elicitation"), a card
//! with the form, answered from any tab, checked before anything reaches the server, declined
//! where nobody can be asked; and its progress, live in the call's step.

use llooma_fake_model::Reply;
use llooma_test_support::peers::Peer;
use sea_orm::ConnectionTrait;
use serde_json::{Value, json};

use crate::support::Events;

use crate::conversations::{McpWorld as World, mcp_world};

async fn world(peer: &Peer) -> World {
    mcp_world(peer, "asker").await
}

impl World {
    /// Sends a message; allows the call's card; returns the question's card.
    async fn asked(&mut self, cards: &mut Events, message: &str) -> Value {
        let id = self.id.clone();
        self.tab
            .post(&format!("/api/v1/conversations/{id}/messages"), json!({"content": message}))
            .await;
        let call = next_card(cards).await;
        assert!(call.get("question").is_none(), "a call's card is no question: {call}");
        let allowed = self.answer(&call, json!({"choice": "allow"})).await;
        assert_eq!(allowed.status, 200, "{allowed:?}");
        next_card(cards).await
    }

    async fn answer(&mut self, card: &Value, body: Value) -> crate::support::Reply {
        let path = format!("/api/v1/approvals/{}/answer", card["id"].as_str().unwrap());
        self.tab.post(&path, body).await
    }
}

async fn next_card(cards: &mut Events) -> Value {
    loop {
        let (name, data) = cards.next().await;
        if name == "appeared" {
            return data["card"].clone();
        }
    }
}

/// The text and steps of the turn, up to its end.
async fn read_turn(events: &mut Events) -> (String, Vec<Value>) {
    let (text, steps, _) = read_turn_and_end(events).await;
    (text, steps)
}

/// The text and steps of the turn, and how it ended.
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

/// A running call's progress reports, up to the step `settles` picks.
async fn progress_until(
    events: &mut Events,
    settles: impl Fn(&Value) -> bool,
) -> (Vec<Value>, Value) {
    let mut progress = Vec::new();
    loop {
        let (name, data) = events.next().await;
        match name.as_str() {
            "progress" => progress.push(data),
            "step" if settles(&data) => return (progress, data),
            _ => {}
        }
    }
}

#[tokio::test]
async fn a_servers_question_is_a_card_with_its_form_and_only_a_fitting_answer_reaches_it() {
    let Some(peer) = crate::peers::everything() else { return };
    let mut w = world(&peer).await;
    let tool = w.model_name("trigger-elicitation-request");
    w.model.push(Reply::tool_call(&tool, json!({})));
    w.model.push(Reply::text("Thanks, Ada."));
    let mut cards = Events::open(&w.tab, "/api/v1/approvals/events", None).await;
    let mut events =
        Events::open(&w.tab, &format!("/api/v1/conversations/{}/events", w.id), None).await;

    let card = w.asked(&mut cards, "sign me up").await;
    // The card names server and tool, carries the server's words and the form it asked for.
    assert_eq!(card["serverLabel"], "asker");
    assert_eq!(card["toolName"], "trigger-elicitation-request");
    let question = &card["question"];
    assert_eq!(question["message"], "Please provide inputs for the following fields:");
    let field = |name: &str| {
        question["fields"].as_array().unwrap().iter().find(|f| f["name"] == name).unwrap().clone()
    };
    assert_eq!(field("name")["required"], true);
    assert_eq!(
        field("integer")["kind"],
        json!({"type": "number", "integer": true,
        "minimum": 1, "maximum": 100, "default": 42})
    );
    assert_eq!(field("email")["kind"]["format"], "email");
    let heroes = &field("titledSingleSelectEnum")["kind"];
    assert_eq!(heroes["type"], "choice");
    assert_eq!(heroes["options"][1], json!({"value": "hero-2", "title": "Green Lantern"}));
    assert_eq!(field("legacyTitledEnum")["kind"]["options"][0]["title"], "Cats");
    assert_eq!(field("titledMultipleSelectEnum")["kind"]["type"], "choices");
    // After a reload the question is still there, form and all.
    let waiting = w.tab.get("/api/v1/approvals").await.json;
    assert_eq!(waiting[0]["question"], *question);

    // Allow is for calls; a form that does not fit is refused with what is wrong, and the
    // question stays open.
    let wrong = w.answer(&card, json!({"choice": "allow"})).await;
    assert_eq!(wrong.status, 400, "{wrong:?}");
    assert!(wrong.json["message"].as_str().unwrap().contains("accept"), "{wrong:?}");
    let unfit = w.answer(&card, json!({"choice": "accept", "content": {"check": true}})).await;
    assert_eq!(unfit.status, 400, "{unfit:?}");
    assert!(unfit.json["message"].as_str().unwrap().contains("is required"), "{unfit:?}");
    let unfit = w
        .answer(&card, json!({"choice": "accept", "content": {"name": "Ada", "integer": 500}}))
        .await;
    assert!(unfit.json["message"].as_str().unwrap().contains("100 or less"), "{unfit:?}");
    let unfit =
        w.answer(&card, json!({"choice": "accept", "content": {"name": "Ada", "spy": "x"}})).await;
    assert_eq!(unfit.status, 400, "{unfit:?}");

    let accepted = w
        .answer(&card, json!({"choice": "accept", "content": {"name": "Ada", "check": true}}))
        .await;
    assert_eq!(accepted.status, 200, "{accepted:?}");
    assert_eq!(accepted.json["state"], "allowed");
    // A second tab is told it came too late.
    let late = w.answer(&card, json!({"choice": "decline"})).await;
    assert_eq!(late.status, 409, "{late:?}");

    let (text, steps) = read_turn(&mut events).await;
    assert_eq!(text, "Thanks, Ada.");
    let asked = steps.iter().find(|s| s.get("question").is_some()).unwrap();
    assert_eq!(asked["reply"], "accept");
    assert_eq!(asked["state"], "allowed");
    assert_eq!(asked["question"], "Please provide inputs for the following fields:");
    // What the server made of the answer (with the default the person let stand) reached the
    // model as the call's result, wrapped as the server's text.
    let result = &w.model.requests()[1].raw_body;
    assert!(result.contains("Name: Ada") && result.contains("Favorite Integer: 42"), "{result}");
    assert!(result.contains("untrusted"), "{result}");
    // The timeline says what was done with the question, never what was typed into it, and
    // the stored answer is dropped once the server has it.
    assert!(!asked.to_string().contains("Ada"), "{asked}");
    let conn = crate::support::connect(&w._db).await;
    let rows = conn
        .query_all_raw(sea_orm::Statement::from_string(
            conn.get_database_backend(),
            "SELECT reply_json FROM approval_calls WHERE question_json IS NOT NULL",
        ))
        .await
        .unwrap();
    let kept: Vec<Option<String>> = rows.iter().map(|r| r.try_get_by_index(0).unwrap()).collect();
    assert_eq!(kept, [None]);
    conn.close().await.unwrap();
}

#[tokio::test]
async fn a_declined_question_on_2026_07_28_tells_the_server_no() {
    let Some(peer) = crate::peers::gateway(None) else { return };
    let mut w = world(&peer).await;
    let tool = w.model_name("home-assistant-set_thermostat");
    w.model.push(Reply::tool_call(&tool, json!({"room": "hall"})));
    w.model.push(Reply::text("Left alone."));
    w.model.push(Reply::tool_call(&tool, json!({"room": "kitchen"})));
    w.model.push(Reply::text("Set."));
    let mut cards = Events::open(&w.tab, "/api/v1/approvals/events", None).await;
    let mut events =
        Events::open(&w.tab, &format!("/api/v1/conversations/{}/events", w.id), None).await;

    let card = w.asked(&mut cards, "heat the hall").await;
    assert_eq!(card["question"]["message"], "Which temperature for the hall?");
    let declined = w.answer(&card, json!({"choice": "decline"})).await;
    assert_eq!(declined.status, 200, "{declined:?}");
    let (_, steps) = read_turn(&mut events).await;
    assert_eq!(steps.iter().find(|s| s.get("question").is_some()).unwrap()["reply"], "decline");
    let result = &w.model.requests()[1].raw_body;
    assert!(result.contains("left alone: the person chose decline"), "{result}");
    let stray = w.answer(&card, json!({"choice": "accept", "content": {"x": 1}})).await;
    assert_eq!(stray.status, 400, "content of another form is refused before the race: {stray:?}");

    // Accepted with the default temperature and a chosen mode: the call is sent again with
    // the answer (the 2026-07-28 way) and the server acts on it.
    let card = w.asked(&mut cards, "heat the kitchen").await;
    let accepted =
        w.answer(&card, json!({"choice": "accept", "content": {"mode": "comfort"}})).await;
    assert_eq!(accepted.status, 200, "{accepted:?}");
    let (text, _) = read_turn(&mut events).await;
    assert_eq!(text, "Set.");
    let result = &w.model.requests()[3].raw_body;
    assert!(result.contains("set to 20 °C, comfort"), "{result}");
}

#[tokio::test]
async fn a_running_calls_progress_is_told_live_and_the_step_settles_it() {
    let Some(peer) = crate::peers::everything() else { return };
    let mut w = world(&peer).await;
    let tool = w.model_name("trigger-long-running-operation");
    w.model.push(Reply::tool_call(&tool, json!({"duration": 3, "steps": 6})));
    w.model.push(Reply::text("All six steps done."));
    let mut cards = Events::open(&w.tab, "/api/v1/approvals/events", None).await;
    let mut events =
        Events::open(&w.tab, &format!("/api/v1/conversations/{}/events", w.id), None).await;
    let id = w.id.clone();
    w.tab.post(&format!("/api/v1/conversations/{id}/messages"), json!({"content": "go"})).await;
    let card = next_card(&mut cards).await;
    w.answer(&card, json!({"choice": "allow"})).await;

    let (progress, settled) = progress_until(&mut events, |_| true).await;
    // As it leaves: the call runs, nothing reported yet; then the server's own reports, at
    // most two a second.
    assert_eq!(progress[0]["callId"], card["id"]);
    assert_eq!(progress[0]["serverTool"], "trigger-long-running-operation");
    assert!(progress[0].get("progress").is_none(), "{progress:?}");
    let reports: Vec<&Value> = progress.iter().skip(1).collect();
    assert!(reports.len() >= 3, "{progress:?}");
    assert!(reports.iter().all(|r| r["total"] == 6), "{progress:?}");
    assert!(reports.windows(2).all(|w| w[0]["progress"].as_i64() < w[1]["progress"].as_i64()));
    assert_eq!(settled["state"], "allowed");
    assert_eq!(settled["callId"], card["id"]);
    let (text, _) = read_turn(&mut events).await;
    assert_eq!(text, "All six steps done.");
    // After a reload the reply holds the settled step only.
    let detail = w.tab.get(&format!("/api/v1/conversations/{id}")).await.json;
    let parts = detail["replies"][0]["parts"].as_array().unwrap();
    let steps: Vec<&Value> = parts.iter().filter(|p| p["kind"] == "step").collect();
    assert_eq!(steps.len(), 1, "{parts:?}");
    assert_eq!(steps[0]["step"]["state"], "allowed");
}

#[tokio::test]
async fn stop_while_a_question_waits_withdraws_its_card_and_ends_the_call() {
    let Some(peer) = crate::peers::gateway(None) else { return };
    let mut w = world(&peer).await;
    let tool = w.model_name("home-assistant-set_thermostat");
    w.model.push(Reply::tool_call(&tool, json!({"room": "hall"})));
    let mut cards = Events::open(&w.tab, "/api/v1/approvals/events", None).await;
    let mut events =
        Events::open(&w.tab, &format!("/api/v1/conversations/{}/events", w.id), None).await;
    let card = w.asked(&mut cards, "heat the hall").await;
    let id = w.id.clone();
    let stopped = w.tab.post(&format!("/api/v1/conversations/{id}/stop"), json!({})).await;
    assert_eq!(stopped.status, 202, "{stopped:?}");
    // Every tab hears the card go; the timeline says the question was dropped with the reply.
    loop {
        let (name, data) = cards.next().await;
        if name == "interrupted" && data["id"] == card["id"] {
            break;
        }
    }
    let (_, steps, end) = read_turn_and_end(&mut events).await;
    assert_eq!(end["state"], "stopped");
    let asked = steps.iter().find(|s| s["callId"] == card["id"]).expect("the question's step");
    assert_eq!(asked["state"], "interrupted");
    assert_eq!(asked["reply"], "cancel");
    assert!(w.tab.get("/api/v1/approvals").await.json.as_array().unwrap().is_empty());
    // Too late to answer it now.
    let late = w.answer(&card, json!({"choice": "decline"})).await;
    assert_eq!(late.status, 409, "{late:?}");
}

#[tokio::test]
async fn a_page_to_open_is_a_card_with_its_whole_address_and_a_private_one_is_never_a_link() {
    let Some(peer) = crate::peers::everything() else { return };
    let mut w = world(&peer).await;
    let tool = w.model_name("trigger-url-elicitation");
    let address = "https://login.example.com/device?code=42";
    w.model.push(Reply::tool_call(&tool, json!({"url": address, "message": "Sign in first"})));
    w.model.push(Reply::text("Signed in."));
    w.model.push(Reply::tool_call(&tool, json!({"url": "http://10.0.0.5/admin"})));
    w.model.push(Reply::text("Not opened."));
    let mut cards = Events::open(&w.tab, "/api/v1/approvals/events", None).await;
    let mut events =
        Events::open(&w.tab, &format!("/api/v1/conversations/{}/events", w.id), None).await;

    let card = w.asked(&mut cards, "sign me in").await;
    let question = &card["question"];
    assert_eq!(question["message"], "Sign in first");
    assert_eq!(question["fields"], json!([]));
    assert_eq!(
        question["link"],
        json!({"url": address, "host": "login.example.com", "waiting": false})
    );
    // Opened (Accept with nothing to send): the server is told, the call goes on.
    let opened = w.answer(&card, json!({"choice": "accept"})).await;
    assert_eq!(opened.status, 200, "{opened:?}");
    let (text, steps) = read_turn(&mut events).await;
    assert_eq!(text, "Signed in.");
    let asked = steps.iter().find(|s| s.get("question").is_some()).unwrap();
    assert_eq!((&asked["reply"], &asked["link"]), (&json!("accept"), &json!(address)));
    let result = &w.model.requests()[1].raw_body;
    assert!(result.contains("User completed the URL elicitation flow"), "{result}");

    // An address on a private network: shown, refused as a link, and only a no can answer.
    let card = w.asked(&mut cards, "open the router").await;
    let link = &card["question"]["link"];
    assert_eq!(link["host"], "10.0.0.5");
    let why = link["refused"].as_str().unwrap();
    assert!(why.contains("10.0.0.5") && why.contains("private"), "{why}");
    let opened = w.answer(&card, json!({"choice": "accept"})).await;
    assert_eq!(opened.status, 400, "{opened:?}");
    assert_eq!(opened.json["error"], "answer_does_not_fit");
    let declined = w.answer(&card, json!({"choice": "decline"})).await;
    assert_eq!(declined.status, 200, "{declined:?}");
    read_turn(&mut events).await;
    let result = &w.model.requests()[3].raw_body;
    assert!(result.contains("User declined to open the URL"), "{result}");
}

#[tokio::test]
async fn a_call_refused_until_a_page_is_done_waits_for_done_then_runs() {
    let Some(peer) = crate::peers::everything() else { return };
    let mut w = world(&peer).await;
    let tool = w.model_name("trigger-url-elicitation");
    let address = "https://pay.example.com/checkout";
    w.model.push(Reply::tool_call(&tool, json!({"url": address, "errorPath": true})));
    w.model.push(Reply::text("Paid."));
    w.model.push(Reply::tool_call(
        &tool,
        json!({"url": "https://pay.example.com/2", "errorPath": true}),
    ));
    w.model.push(Reply::text("Not paid."));
    let mut cards = Events::open(&w.tab, "/api/v1/approvals/events", None).await;
    let mut events =
        Events::open(&w.tab, &format!("/api/v1/conversations/{}/events", w.id), None).await;

    // The server refuses the call until its own page is done: the person opens it ...
    let card = w.asked(&mut cards, "pay").await;
    assert_eq!(card["question"]["link"]["url"], "https://modelcontextprotocol.io");
    assert_eq!(w.answer(&card, json!({"choice": "accept"})).await.status, 200);
    // ... the card then waits for "done" (after a reload too) ...
    let waiting = next_card(&mut cards).await;
    assert_eq!(waiting["question"]["link"]["waiting"], true);
    let listed = w.tab.get("/api/v1/approvals").await.json;
    assert_eq!(listed[0]["id"], waiting["id"]);
    assert_eq!(w.answer(&waiting, json!({"choice": "accept"})).await.status, 200);
    // ... and the call is sent again: this time the server asks for the page the model named.
    let asked = next_card(&mut cards).await;
    assert_eq!(asked["question"]["link"]["url"], address);
    assert_eq!(w.answer(&asked, json!({"choice": "accept"})).await.status, 200);
    let (text, steps) = read_turn(&mut events).await;
    assert_eq!(text, "Paid.");
    let replies: Vec<&Value> =
        steps.iter().filter(|s| s.get("question").is_some()).map(|s| &s["reply"]).collect();
    assert_eq!(replies, [&json!("accept"), &json!("done"), &json!("accept")]);
    let result = &w.model.requests()[1].raw_body;
    assert!(result.contains("User completed the URL elicitation flow"), "{result}");

    // Not done: the call ends, and the model is told why.
    let card = w.asked(&mut cards, "pay again").await;
    assert_eq!(w.answer(&card, json!({"choice": "accept"})).await.status, 200);
    let waiting = next_card(&mut cards).await;
    assert_eq!(w.answer(&waiting, json!({"choice": "cancel"})).await.status, 200);
    let (_, steps) = read_turn(&mut events).await;
    let failed = steps.iter().find(|s| s["state"] == "failed").unwrap();
    assert!(failed["error"].as_str().unwrap().contains("was not"), "{failed}");
    let result = &w.model.requests()[3].raw_body;
    assert!(result.contains("browser-based authorization"), "{result}");
}

#[tokio::test]
async fn a_servers_request_for_a_completion_is_run_by_the_persons_model_only_as_they_let_it() {
    let Some(peer) = crate::peers::everything() else { return };
    let mut w = world(&peer).await;
    let tool = w.model_name("trigger-sampling-request");
    w.model.push(Reply::tool_call(
        &tool,
        json!({"prompt": "What is six times seven?", "maxTokens": 30}),
    ));
    // The model's answer to the server's request, then its reply to the person.
    w.model.push(Reply::text("Forty-two."));
    w.model.push(Reply::text("The server has its answer."));
    w.model.push(Reply::tool_call(&tool, json!({"prompt": "Tell me a secret."})));
    w.model.push(Reply::text("It was refused."));
    let mut cards = Events::open(&w.tab, "/api/v1/approvals/events", None).await;
    let mut events =
        Events::open(&w.tab, &format!("/api/v1/conversations/{}/events", w.id), None).await;

    // First the request, as the server wrote it, with its last message to edit.
    let card = w.asked(&mut cards, "my private plans for Tuesday").await;
    let sampling = &card["question"]["sampling"];
    assert_eq!(sampling["systemPrompt"], "You are a helpful test server.");
    assert_eq!(sampling["maxTokens"], 30);
    assert!(
        sampling["messages"][0]["text"].as_str().unwrap().ends_with("What is six times seven?")
    );
    assert_eq!(sampling["messages"][0]["role"], "user");
    let model = sampling["model"].as_str().unwrap().to_owned();
    assert!(!model.is_empty());
    assert_eq!(card["question"]["fields"][0]["name"], "message");
    let run = w
        .answer(
            &card,
            json!({"choice": "accept", "content": {"message": "What is 6 × 7? In words."}}),
        )
        .await;
    assert_eq!(run.status, 200, "{run:?}");

    // The model read the request as the person left it, marked as the server's, with nothing
    // of the conversation, and within the server's limit; its answer is on a card of its own.
    let answer = next_card(&mut cards).await;
    let sampled = w.model.chat_bodies()[1].clone();
    let read = sampled.to_string();
    assert!(read.contains("What is 6 × 7? In words."), "{read}");
    assert!(!read.contains("six times seven"), "the person's edit was not used: {read}");
    assert!(read.contains("written by the server"), "{read}");
    assert!(
        !read.contains("private plans"),
        "the conversation reached the server's request: {read}"
    );
    assert_eq!(sampled["max_tokens"], 30);
    assert_eq!(sampled["model"], model.as_str());

    // The answer, before it goes back; what the person leaves is what the server gets.
    assert_eq!(answer["question"]["sampling"]["answer"], "Forty-two.");
    assert_eq!(answer["question"]["fields"][0]["kind"]["default"], "Forty-two.");
    let sent = w
        .answer(&answer, json!({"choice": "accept", "content": {"answer": "Forty-two, exactly."}}))
        .await;
    assert_eq!(sent.status, 200, "{sent:?}");
    let (text, steps) = read_turn(&mut events).await;
    assert_eq!(text, "The server has its answer.");
    let replies: Vec<(&Value, &Value)> = steps
        .iter()
        .filter(|s| s.get("sampled").is_some())
        .map(|s| (&s["reply"], &s["sampled"]))
        .collect();
    assert_eq!(replies, [(&json!("accept"), &json!(model)), (&json!("sent"), &json!(model))]);
    let result = &w.model.requests()[2].raw_body;
    assert!(result.contains("Forty-two, exactly.") && !result.contains("Forty-two.\\"), "{result}");

    // Declined at the first card: the model is not asked, the server hears it was rejected.
    let card = w.asked(&mut cards, "again").await;
    assert_eq!(w.answer(&card, json!({"choice": "decline"})).await.status, 200);
    read_turn(&mut events).await;
    let bodies = w.model.chat_bodies();
    assert_eq!(bodies.len(), 5, "the model was asked for the declined request");
    assert!(bodies[4].to_string().contains("User rejected sampling request"), "{}", bodies[4]);
}

#[tokio::test]
async fn a_results_images_and_words_for_the_person_are_shown_and_kept_from_the_model() {
    let Some(peer) = crate::peers::everything() else { return };
    let mut w = world(&peer).await;
    let annotated = w.model_name("get-annotated-message");
    let links = w.model_name("get-resource-links");
    w.model.push(Reply::tool_call(
        &annotated,
        json!({"messageType": "success", "includeImage": true}),
    ));
    w.model.push(Reply::tool_call(&links, json!({"count": 2})));
    w.model.push(Reply::text("Shown."));
    let mut cards = Events::open(&w.tab, "/api/v1/approvals/events", None).await;
    let mut events =
        Events::open(&w.tab, &format!("/api/v1/conversations/{}/events", w.id), None).await;
    let id = w.id.clone();
    w.tab
        .post(&format!("/api/v1/conversations/{id}/messages"), json!({"content": "show me"}))
        .await;
    for _ in 0..2 {
        let card = next_card(&mut cards).await;
        assert_eq!(w.answer(&card, json!({"choice": "allow"})).await.status, 200);
    }
    let (_, steps) = read_turn(&mut events).await;
    let called: Vec<&Value> = steps.iter().filter(|s| s["state"] == "allowed").collect();
    // The server marked its words and its image for the person: shown, not sent.
    let shown = &called[0]["shown"];
    assert_eq!(shown[0], json!({"kind": "text", "text": "Operation completed successfully"}));
    assert_eq!(shown[1]["kind"], "image");
    assert_eq!(shown[1]["mimeType"], "image/png");
    assert_eq!(shown[1]["forModel"], false);
    let image = shown[1]["data"].as_str().unwrap().to_owned();
    let read = w.model.chat_bodies()[1].to_string();
    assert!(!read.contains("Operation completed successfully"), "{read}");
    assert!(!read.contains(&image[..40]), "the image went to the model");
    assert!(read.contains("showed the person 2 item(s)"), "{read}");
    // Links to the server's resources are listed by name.
    let listed = called[1]["shown"].as_array().unwrap();
    assert_eq!(listed.len(), 2, "{listed:?}");
    assert!(listed.iter().all(|p| p["kind"] == "named" && p["what"] == "link"), "{listed:?}");
    assert!(listed[0]["uri"].as_str().unwrap().starts_with("demo://resource/"), "{listed:?}");
    // After a reload the timeline still has them.
    let page = w.tab.get(&format!("/api/v1/conversations/{id}")).await.json.to_string();
    assert!(page.contains(&image[..40]) && page.contains("Operation completed successfully"));
}

#[tokio::test]
async fn a_results_image_reaches_a_model_that_sees_images_and_only_a_line_reaches_the_others() {
    let Some(peer) = crate::peers::everything() else { return };
    let mut w = world(&peer).await;
    let tiny = w.model_name("get-tiny-image");
    for reply in ["Seen nothing.", "Seen it."] {
        w.model.push(Reply::tool_call(&tiny, json!({})));
        w.model.push(Reply::text(reply));
    }
    let mut cards = Events::open(&w.tab, "/api/v1/approvals/events", None).await;
    let mut events =
        Events::open(&w.tab, &format!("/api/v1/conversations/{}/events", w.id), None).await;
    let image_parts = |body: &Value| -> Vec<String> {
        let messages = body["messages"].as_array().unwrap();
        messages
            .iter()
            .filter_map(|m| m["content"].as_array())
            .flatten()
            .filter_map(|part| part["image_url"]["url"].as_str().map(str::to_owned))
            .collect()
    };
    // A model not marked as seeing images reads a line about the image.
    look(&mut w, &mut cards, &mut events, "look").await;
    let read = w.model.chat_bodies()[1].clone();
    assert!(image_parts(&read).is_empty(), "{read}");
    assert!(read.to_string().contains("[image image/png"), "{read}");

    // Marked as seeing images, it gets the image itself after the call's result.
    let providers = w.tab.get("/api/v1/admin/providers").await.json;
    let provider = providers[0]["id"].as_str().unwrap().to_owned();
    let model = read["model"].as_str().unwrap().to_owned();
    let marked = w
        .tab
        .send(
            "PUT",
            &format!("/api/v1/admin/providers/{provider}/vision-models"),
            Some(json!({"models": [model]})),
        )
        .await;
    assert_eq!(marked.status, 200, "{marked:?}");
    let (_, steps) = look(&mut w, &mut cards, &mut events, "look again").await;
    let shown = steps.iter().find(|s| s.get("shown").is_some()).unwrap();
    let data = shown["shown"][0]["data"].as_str().unwrap();
    let read = w.model.chat_bodies()[3].clone();
    assert_eq!(image_parts(&read), [format!("data:image/png;base64,{data}")], "{read}");
}

/// Sends `text`, allows the call the model makes, and reads the turn to its end.
async fn look(
    w: &mut World,
    cards: &mut Events,
    events: &mut Events,
    text: &str,
) -> (String, Vec<Value>) {
    let id = w.id.clone();
    w.tab.post(&format!("/api/v1/conversations/{id}/messages"), json!({"content": text})).await;
    let card = next_card(cards).await;
    assert_eq!(w.answer(&card, json!({"choice": "allow"})).await.status, 200);
    read_turn(events).await
}

/// A call the server runs as a long-running task: where it stands is told live, its question is
/// a card like any other, and its result settles the step.
#[tokio::test]
async fn a_call_run_as_a_task_tells_where_it_stands_and_asks_through_a_card() {
    let Some(peer) = crate::peers::tasks() else { return };
    let mut w = world(&peer).await;
    let tool = w.model_name("clarify");
    w.model.push(Reply::tool_call(&tool, json!({"topic": "python"})));
    w.model.push(Reply::text("It is about the snake."));
    let mut cards = Events::open(&w.tab, "/api/v1/approvals/events", None).await;
    let mut events =
        Events::open(&w.tab, &format!("/api/v1/conversations/{}/events", w.id), None).await;
    let card = w.asked(&mut cards, "tell me about python").await;
    assert_eq!(card["toolName"], "clarify");
    assert_eq!(card["question"]["message"], "Which python do you mean?");
    let answered =
        w.answer(&card, json!({"choice": "accept", "content": {"meaning": "snake"}})).await;
    assert_eq!(answered.status, 200, "{answered:?}");

    let (progress, settled) = progress_until(&mut events, |step| {
        step["state"] != "waiting" && step.get("question").is_none()
    })
    .await;
    let told = |status: &str| progress.iter().filter(|p| p["task"] == status).count();
    assert!(told("working") >= 1, "{progress:?}");
    assert!(told("input_required") >= 1, "{progress:?}");
    assert!(
        progress
            .iter()
            .any(|p| p["task"] == "input_required" && p["message"] == "Waiting for your choice"),
        "{progress:?}"
    );
    assert_eq!(settled["state"], "allowed", "{settled}");
    assert!(settled["output"].as_str().unwrap().contains("python, meaning snake."), "{settled}");
    let (text, _) = read_turn(&mut events).await;
    assert_eq!(text, "It is about the snake.");
}

/// Stop while the server's task runs: the task is cancelled on the server too.
#[tokio::test]
async fn stop_during_a_task_cancels_it_on_the_server() {
    let Some(peer) = crate::peers::tasks() else { return };
    let mut w = world(&peer).await;
    let tool = w.model_name("endless");
    w.model.push(Reply::tool_call(&tool, json!({"topic": "stars"})));
    let mut cards = Events::open(&w.tab, "/api/v1/approvals/events", None).await;
    let mut events =
        Events::open(&w.tab, &format!("/api/v1/conversations/{}/events", w.id), None).await;
    let id = w.id.clone();
    w.tab.post(&format!("/api/v1/conversations/{id}/messages"), json!({"content": "go"})).await;
    let card = next_card(&mut cards).await;
    w.answer(&card, json!({"choice": "allow"})).await;
    loop {
        let (name, data) = events.next().await;
        if name == "progress" && data["message"] == "Still digging into stars" {
            break;
        }
    }
    let stopped = w.tab.post(&format!("/api/v1/conversations/{id}/stop"), json!({})).await;
    assert_eq!(stopped.status, 202, "{stopped:?}");
    let (_, _, end) = read_turn_and_end(&mut events).await;
    assert_eq!(end["state"], "stopped");
    // The server heard it: its own list of cancelled tasks, read behind Llooma's back.
    let ours = crate::peers::client_for(&peer);
    let session = ours.connect(&peer.url(), None).await.unwrap();
    for _ in 0..50 {
        let listed = session.call_tool("cancelled_tasks", json!({})).await.unwrap();
        let ids = listed.structured_content.as_ref().and_then(|s| s["result"].as_array().cloned());
        if let Some(ids) = ids.filter(|ids| !ids.is_empty()) {
            assert_eq!(ids.len(), 1, "{ids:?}");
            return;
        }
        tokio::time::sleep(std::time::Duration::from_millis(100)).await;
    }
    panic!("the server's task was not cancelled");
}

/// A sound a call returns is kept to be played only when its bytes are audio; a link to the
/// server's resource names the server, so the person can read it with their next message.
#[tokio::test]
async fn a_results_sound_is_played_only_when_it_is_one_and_its_link_can_be_read_next() {
    let Some(peer) = crate::peers::tasks() else { return };
    let mut w = world(&peer).await;
    let chime = w.model_name("chime");
    w.model.push(Reply::tool_call(&chime, json!({})));
    w.model.push(Reply::text("Listen."));
    w.model.push(Reply::text("It says to play softly."));
    let mut cards = Events::open(&w.tab, "/api/v1/approvals/events", None).await;
    let mut events =
        Events::open(&w.tab, &format!("/api/v1/conversations/{}/events", w.id), None).await;
    let id = w.id.clone();
    w.tab.post(&format!("/api/v1/conversations/{id}/messages"), json!({"content": "chime"})).await;
    let card = next_card(&mut cards).await;
    assert_eq!(w.answer(&card, json!({"choice": "allow"})).await.status, 200);
    let (_, steps) = read_turn(&mut events).await;
    let called = steps.iter().find(|s| s["state"] == "allowed").expect("the call's step");
    let shown = called["shown"].as_array().unwrap();
    assert_eq!(shown[0]["kind"], "audio", "{shown:?}");
    assert_eq!(shown[0]["mimeType"], "audio/wav");
    assert!(shown[0]["data"].as_str().unwrap().starts_with("UklGR"), "{shown:?}");
    // A page calling itself MP3 is named, never played.
    assert_eq!(shown[1], json!({"kind": "named", "what": "audio", "mimeType": "audio/mpeg"}));
    let link = &shown[2];
    assert_eq!(link["what"], "link");
    assert_eq!(link["uri"], "music://chime/sheet");
    let server_id = called["serverId"].as_str().expect("the step names its server").to_owned();

    // Read with the next message, as a resource chosen with @ would be.
    let sent = w
        .tab
        .post(
            &format!("/api/v1/conversations/{id}/messages"),
            json!({"content": "what does the sheet say?",
                   "resources": [{"serverId": server_id, "uri": link["uri"]}]}),
        )
        .await;
    assert_eq!(sent.status, 202, "{sent:?}");
    let (text, _) = read_turn(&mut events).await;
    assert_eq!(text, "It says to play softly.");
    let asked = w.model.chat_bodies().last().unwrap().to_string();
    assert!(asked.contains("C E G C, softly."), "{asked}");
}
