//! Long conversations: a conversation that outgrows its model's context window has its oldest
//! messages summarized once by the model and sent in their place; every request fits the
//! window, the messages stay, the timeline says so, an edit of a summarized message drops the
//! summary, and a message too large for any window is refused with words that say what to do.

use llooma_fake_model::{FakeModel, Reply};
use serde_json::{Value, json};

use crate::support::{Events, Server, Tab, TestDb};

/// The summarizing request's own words (its system prompt).
pub(crate) const SUMMARIZING: &str = "You keep the summary";
pub(crate) const SUMMARY: &str = "Summary: the person collects kites and names each after a river.";

/// Sends a message (replacing `replaces`' turn if given) and reads its events to its `end`.
pub(crate) async fn exchange(
    tab: &mut Tab,
    id: &str,
    content: &str,
    replaces: Option<&str>,
) -> Value {
    let after =
        tab.get(&format!("/api/v1/conversations/{id}")).await.json["eventsAfter"].to_string();
    let path = format!("/api/v1/conversations/{id}/events");
    let mut events = Events::open(tab, &path, Some(&after)).await;
    let mut body = json!({"content": content});
    if let Some(turn) = replaces {
        body["replaces"] = json!(turn);
    }
    let sent = tab.post(&format!("/api/v1/conversations/{id}/messages"), body).await;
    assert_eq!(sent.status, 202, "{sent:?}");
    loop {
        let (kind, data) = events.next().await;
        if kind == "end" {
            return data;
        }
    }
}

/// A model that echoes each message and answers a summarizing request with [`SUMMARY`].
async fn echoing_model(summary: Reply) -> FakeModel {
    FakeModel::builder()
        .fallback(llooma_fake_model::Fallback::Echo { chunk_delay_ms: 0 })
        .standing(SUMMARIZING, summary)
        .start()
        .await
        .unwrap()
}

/// The provider of the conversation, with `window` tokens written for `fake-model`.
async fn window_of(tab: &mut Tab, id: &str, window: u32) {
    let detail = tab.get(&format!("/api/v1/conversations/{id}")).await.json;
    let provider = detail["conversation"]["providerId"].as_str().unwrap().to_owned();
    let path = format!("/api/v1/admin/providers/{provider}/context-windows");
    let set = tab.send("PUT", &path, Some(json!({"windows": {"fake-model": window}}))).await;
    assert_eq!(set.status, 200, "{set:?}");
    assert_eq!(set.json["contextWindows"]["fake-model"], window);
}

/// The `n`th message: recognizable, about 100 tokens.
pub(crate) fn message(n: usize) -> String {
    format!("Message {n:02}: {}", "the kite is named after a river and flies well. ".repeat(8))
}

fn is_summarizing(body: &Value) -> bool {
    body.to_string().contains(SUMMARIZING)
}

#[tokio::test]
async fn a_conversation_past_its_window_is_summarized_once_and_every_request_fits() {
    let model = echoing_model(Reply::text(SUMMARY)).await;
    let db = TestDb::new();
    let server = Server::start(&db, &[("PROVIDER_ALLOWED_ORIGINS", &model.origin())]);
    let (mut tab, id) = crate::conversations::setup(&server, &model).await;
    window_of(&mut tab, &id, 4096).await;

    let mut ends = Vec::new();
    for n in 0..24 {
        ends.push(exchange(&mut tab, &id, &message(n), None).await);
    }
    let bodies = model.chat_bodies();
    let (summarizing, turns): (Vec<&Value>, Vec<&Value>) =
        bodies.iter().partition(|b| is_summarizing(b));
    assert_eq!(turns.len(), 24);
    // The first summarizing request was given the oldest messages.
    assert!(summarizing[0].to_string().contains("Message 00"), "{}", summarizing[0]);
    // Every request fits the window (a token is about four bytes).
    for body in &turns {
        let bytes = body["messages"].to_string().len();
        assert!(bytes / 4 <= 4096, "a request of about {} tokens", bytes / 4);
    }
    // The last requests send the summary in place of the oldest messages.
    let last = turns.last().unwrap();
    let system = last["messages"][0]["content"].as_str().unwrap();
    assert!(system.contains(SUMMARY), "{system}");
    assert!(!last.to_string().contains("Message 00"), "the oldest message was sent again");
    assert!(last.to_string().contains("Message 23"));
    // Without it, all 24 exchanges would have gone (about 4,900 tokens).
    let first_after = turns.iter().position(|b| b.to_string().contains(SUMMARY)).unwrap();
    assert!(first_after < 24, "no turn sent the summary");

    // Everything is still stored and shown; the conversation says where the summary ends.
    let detail = tab.get(&format!("/api/v1/conversations/{id}")).await.json;
    let messages = detail["messages"].as_array().unwrap();
    assert_eq!(messages.len(), 48);
    let summary = &detail["summary"];
    assert_eq!(summary["content"], SUMMARY, "{detail}");
    let through = summary["throughMessageId"].as_str().unwrap();
    let at = messages.iter().position(|m| m["id"] == through).unwrap();
    assert_eq!(summary["coveredMessages"], at + 1);
    assert!(at > 2 && at < 46, "covers {} of 48", at + 1);
    // The turns that summarized show it as a step.
    let steps: Vec<&Value> = detail["replies"]
        .as_array()
        .unwrap()
        .iter()
        .flat_map(|r| r["parts"].as_array().unwrap())
        .filter(|p| p["step"]["tool"] == "conversation_summary")
        .collect();
    // Summarized when needed, not on every turn: a summary makes room for several more (each
    // may take more than one request, for what does not fit one).
    assert!((1..=3).contains(&steps.len()), "{} summaries in 24 turns", steps.len());
    assert!(summarizing.len() >= steps.len());
    assert!(
        steps
            .iter()
            .all(|s| s["step"]["state"] == "done" && s["step"]["entries"].as_u64() > Some(0))
    );
    // Each turn's end says how full the window is.
    let context = &ends.last().unwrap()["context"];
    assert_eq!(context["windowTokens"], 4096, "{:?}", ends.last());
    let used = context["usedTokens"].as_u64().unwrap();
    assert!(used > 500 && used < 4096, "{used}");
    let replies = detail["replies"].as_array().unwrap();
    assert_eq!(replies.last().unwrap()["context"]["windowTokens"], 4096);

    // Editing a summarized message drops the summary with the messages after it.
    let first_turn = messages[0]["turnId"].as_str().unwrap().to_owned();
    exchange(&mut tab, &id, "Message 00, edited: only one kite.", Some(&first_turn)).await;
    let detail = tab.get(&format!("/api/v1/conversations/{id}")).await.json;
    assert!(detail["summary"].is_null(), "{}", detail["summary"]);
    assert_eq!(detail["messages"].as_array().unwrap().len(), 2);
    let last = model.chat_bodies().pop().unwrap();
    assert!(!last.to_string().contains(SUMMARY), "the dropped summary was still sent");
}

#[tokio::test]
async fn a_summary_the_model_cannot_write_leaves_the_oldest_out_and_the_reply_comes() {
    let model = echoing_model(Reply::http_error(500, "overloaded")).await;
    let db = TestDb::new();
    let server = Server::start(&db, &[("PROVIDER_ALLOWED_ORIGINS", &model.origin())]);
    let (mut tab, id) = crate::conversations::setup(&server, &model).await;
    window_of(&mut tab, &id, 2048).await;
    let mut ends = Vec::new();
    for n in 0..12 {
        ends.push(exchange(&mut tab, &id, &message(n), None).await);
    }
    assert!(ends.iter().all(|e| e["state"] == "done"), "{ends:?}");
    let bodies = model.chat_bodies();
    assert!(bodies.iter().any(is_summarizing), "no summary was asked");
    for body in bodies.iter().filter(|b| !is_summarizing(b)) {
        let bytes = body["messages"].to_string().len();
        assert!(bytes / 4 <= 2048, "a request of about {} tokens", bytes / 4);
    }
    let detail = tab.get(&format!("/api/v1/conversations/{id}")).await.json;
    assert!(detail["summary"].is_null());
    let failed = detail["replies"]
        .as_array()
        .unwrap()
        .iter()
        .flat_map(|r| r["parts"].as_array().unwrap())
        .find(|p| p["step"]["tool"] == "conversation_summary")
        .unwrap()
        .clone();
    assert_eq!(failed["step"]["state"], "failed");
    assert!(failed["step"]["error"].as_str().unwrap().contains("written without them"));
}

#[tokio::test]
async fn a_message_too_large_for_the_window_is_refused_in_words_and_never_sent() {
    let model = echoing_model(Reply::text(SUMMARY)).await;
    let db = TestDb::new();
    let server = Server::start(&db, &[("PROVIDER_ALLOWED_ORIGINS", &model.origin())]);
    let (mut tab, id) = crate::conversations::setup(&server, &model).await;
    window_of(&mut tab, &id, 1024).await;
    let huge = "a very long paste ".repeat(400);
    let end = exchange(&mut tab, &id, &huge, None).await;
    assert_eq!(end["state"], "failed", "{end}");
    let detail = tab.get(&format!("/api/v1/conversations/{id}")).await.json;
    let error = detail["replies"][0]["error"].as_str().unwrap_or_default().to_owned();
    assert!(error.contains("1024-token context window") && error.contains("shorten"), "{error}");
    assert!(model.chat_bodies().is_empty(), "the provider was asked");
}

#[tokio::test]
async fn windows_come_from_the_administrator_then_the_provider_then_the_default() {
    // A provider on this machine that says its model's window, as Ollama does.
    let model = FakeModel::builder()
        .fallback(llooma_fake_model::Fallback::Echo { chunk_delay_ms: 0 })
        .ollama_context_length(32768)
        .start()
        .await
        .unwrap();
    let db = TestDb::new();
    let server = Server::start(&db, &[]);
    let mut tab = server.tab();
    tab.register("root", crate::support::PASSWORD).await;
    let settings = tab.get("/api/v1/admin/settings").await;
    assert_eq!(settings.json["contextTokens"], 8192, "{settings:?}");
    let wrong =
        tab.send("PATCH", "/api/v1/admin/settings", Some(json!({"contextTokens": 100}))).await;
    assert_eq!((wrong.status, wrong.json["error"].as_str()), (400, Some("invalid_context_window")));
    let set =
        tab.send("PATCH", "/api/v1/admin/settings", Some(json!({"contextTokens": 16000}))).await;
    assert_eq!(set.json["contextTokens"], 16000, "{set:?}");

    let local = json!({"name": "local", "baseUrl": model.base_url(), "localNetwork": true});
    let local = tab.post("/api/v1/admin/providers", local).await;
    assert_eq!(local.status, 201, "{local:?}");
    let provider = local.json["id"].as_str().unwrap().to_owned();
    let conversation = json!({"title": "w", "providerId": provider, "model": "fake-model"});
    let id = tab.post("/api/v1/conversations", conversation).await.json["id"]
        .as_str()
        .unwrap()
        .to_owned();
    // A short conversation's reply waits for no question to the provider: the default.
    let said = exchange(&mut tab, &id, "hello", None).await;
    assert_eq!(said["context"]["windowTokens"], 16000, "{said}");
    assert!(!model.requests().iter().any(|r| r.path == "/api/show"));
    // One whose size may matter: asked once, then what it said.
    let said = exchange(&mut tab, &id, &"a long question ".repeat(300), None).await;
    assert_eq!(said["context"]["windowTokens"], 32768, "{said}");
    let said = exchange(&mut tab, &id, "and a short one", None).await;
    assert_eq!(said["context"]["windowTokens"], 32768, "{said}");
    assert_eq!(model.requests().iter().filter(|r| r.path == "/api/show").count(), 1);

    let path = format!("/api/v1/admin/providers/{provider}/context-windows");
    let small = tab.send("PUT", &path, Some(json!({"windows": {"fake-model": 12}}))).await;
    assert_eq!(small.json["error"], "invalid_context_window", "{small:?}");
    let written = tab.send("PUT", &path, Some(json!({"windows": {" fake-model ": 4096}}))).await;
    assert_eq!(written.json["contextWindows"], json!({"fake-model": 4096}), "{written:?}");
    let end = exchange(&mut tab, &id, "again", None).await;
    assert_eq!(end["context"]["windowTokens"], 4096);

    // Another model of the provider: the provider does not know it; the instance's default.
    tab.send("PATCH", &format!("/api/v1/conversations/{id}"), Some(json!({"model": "other"})))
        .await;
    let end = exchange(&mut tab, &id, "and a third", None).await;
    assert_eq!(end["context"]["windowTokens"], 16000, "{end}");
}

#[tokio::test]
async fn a_long_conversation_is_read_a_page_at_a_time_from_the_newest() {
    let model = echoing_model(Reply::text(SUMMARY)).await;
    let db = TestDb::new();
    let server = Server::start(&db, &[("PROVIDER_ALLOWED_ORIGINS", &model.origin())]);
    let (mut tab, id) = crate::conversations::setup(&server, &model).await;
    for n in 0..13 {
        exchange(&mut tab, &id, &format!("question {n}"), None).await;
    }
    let whole = tab.get(&format!("/api/v1/conversations/{id}")).await.json;
    assert!(whole["olderMessages"].is_null(), "everything was read");
    let all: Vec<Value> = whole["messages"].as_array().unwrap().clone();
    assert_eq!(all.len(), 26);

    // Pages of five from the newest: each begins with the person's message (a page that would
    // begin with a reply takes its question too) and carries its own replies' timelines.
    let mut pages: Vec<Vec<Value>> = Vec::new();
    let mut path = format!("/api/v1/conversations/{id}?limit=5");
    loop {
        let page = tab.get(&path).await;
        assert_eq!(page.status, 200, "{page:?}");
        let messages = page.json["messages"].as_array().unwrap().clone();
        assert!((5..=6).contains(&messages.len()) || page.json["olderMessages"].is_null());
        assert_eq!(messages[0]["role"], "user", "{messages:?}");
        let turns: Vec<&Value> = messages.iter().map(|m| &m["turnId"]).collect();
        let replies = page.json["replies"].as_array().unwrap();
        assert!(replies.iter().all(|r| turns.contains(&&r["turnId"])));
        assert_eq!(replies.len(), messages.iter().filter(|m| m["role"] == "user").count());
        pages.push(messages);
        match page.json["olderMessages"].as_str() {
            Some(cursor) => {
                assert_eq!(cursor, pages.last().unwrap()[0]["id"]);
                path = format!("/api/v1/conversations/{id}?limit=5&before={cursor}");
            }
            None => break,
        }
    }
    let joined: Vec<Value> = pages.into_iter().rev().flatten().collect();
    assert_eq!(joined, all, "the pages are the conversation, each message once, in order");

    let wrong = tab.get(&format!("/api/v1/conversations/{id}?limit=5&before=nope")).await;
    assert_eq!((wrong.status, wrong.json["error"].as_str()), (400, Some("invalid_cursor")));
    for bad in ["limit=0", "limit=501", "before=x", "limit=lots"] {
        let refused = tab.get(&format!("/api/v1/conversations/{id}?{bad}")).await;
        assert_eq!(refused.status, 400, "{bad}: {refused:?}");
    }
    // Another account reads no page of it.
    tab.send("PATCH", "/api/v1/admin/settings", Some(json!({"registrationOpen": true}))).await;
    let mut other = server.tab();
    other.register("mallory", crate::support::PASSWORD).await;
    let theirs = other.get(&format!("/api/v1/conversations/{id}?limit=5")).await;
    assert_eq!(theirs.status, 404);
}
