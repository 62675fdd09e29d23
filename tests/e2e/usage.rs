//! Usage counted per account and model, priced, shown to the person and to administrators
//! (and as CSV); limits that refuse a reply before the provider is asked, say which limit and
//! when it resets, and hold across replicas.

use llooma_fake_model::{FakeModel, Reply};
use serde_json::{Value, json};

use crate::support::{Events, PASSWORD, Server, Tab, TestDb, engine};

/// Sends a message and reads the conversation's events to the end of its turn.
async fn exchange(tab: &mut Tab, id: &str, content: &str) -> crate::support::Reply {
    // From after what the conversation holds: the ends of earlier turns are not read again.
    let after =
        tab.get(&format!("/api/v1/conversations/{id}")).await.json["eventsAfter"].to_string();
    let path = format!("/api/v1/conversations/{id}/events");
    let mut events = Events::open(tab, &path, Some(&after)).await;
    let sent = tab
        .post(&format!("/api/v1/conversations/{id}/messages"), json!({"content": content}))
        .await;
    if sent.status == 202 {
        while events.next().await.0 != "end" {}
    }
    sent
}

fn provider_of(tab_detail: &Value) -> String {
    tab_detail["conversation"]["providerId"].as_str().unwrap().to_owned()
}

/// Waits, when a minute is about to turn, until it has: a test that counts turns per minute
/// must not straddle two.
async fn inside_one_minute() {
    let second = chrono::Utc::now().timestamp() % 60;
    if second > 50 {
        tokio::time::sleep(std::time::Duration::from_secs((61 - second) as u64)).await;
    }
}

#[tokio::test]
async fn every_request_is_counted_priced_and_shown_to_its_person_and_to_administrators() {
    let model = FakeModel::start([]).await.unwrap();
    let db = TestDb::new();
    let server = Server::start(&db, &[("PROVIDER_ALLOWED_ORIGINS", &model.origin())]);
    let (mut tab, id) = crate::conversations::setup(&server, &model).await;
    let conversation = tab.get(&format!("/api/v1/conversations/{id}")).await.json;
    let provider_id = provider_of(&conversation);
    // $2 in, $1 cached in, $8 out per million tokens, in euros.
    let settings =
        tab.send("PATCH", "/api/v1/admin/settings", Some(json!({"currency": "eur"}))).await;
    assert_eq!(settings.json["currency"], "EUR", "{settings:?}");
    let price = json!({"providerId": provider_id, "model": "fake-model", "input": 2.0, "cachedInput": 1.0, "output": 8.0});
    let priced = tab.send("PUT", "/api/v1/admin/prices", Some(price)).await;
    assert_eq!(priced.status, 200, "{priced:?}");

    model.push(Reply::text("Hello there.").usage_cached(1_000, 100, 400));
    model.push(Reply::text("word ".repeat(40)).without_usage());
    assert_eq!(exchange(&mut tab, &id, "hi").await.status, 202);
    assert_eq!(exchange(&mut tab, &id, "and again").await.status, 202);

    let mine = tab.get("/api/v1/usage?days=7").await;
    assert_eq!(mine.status, 200, "{mine:?}");
    let totals = &mine.json["totals"];
    assert_eq!(
        (totals["requests"].as_u64(), totals["estimatedRequests"].as_u64()),
        (Some(2), Some(1))
    );
    // The estimate: 200 characters of answer are 50 tokens.
    assert_eq!(totals["outputTokens"], 100 + 50);
    assert_eq!(totals["cachedInputTokens"], 400);
    let input = totals["inputTokens"].as_u64().unwrap();
    assert!(input > 1_000, "the estimate adds the second prompt: {input}");
    // 600 × 2 + 400 × 1 + 100 × 8 millionths for the first; the second at the same prices.
    let expected = (1_200.0 + 400.0 + 800.0 + (input - 1_000) as f64 * 2.0 + 50.0 * 8.0) / 1e6;
    let spend = totals["spend"].as_f64().unwrap();
    assert!((spend - expected).abs() < 1e-9, "{spend} != {expected}");
    assert_eq!(mine.json["currency"], "EUR");
    assert_eq!(mine.json["days"].as_array().unwrap().len(), 7);
    assert_eq!(mine.json["days"][6]["requests"], 2, "today is the last day");
    let models = mine.json["models"].as_array().unwrap();
    assert_eq!(models.len(), 1);
    assert_eq!(
        (models[0]["model"].as_str(), models[0]["priced"].as_bool()),
        (Some("fake-model"), Some(true))
    );
    assert_eq!(models[0]["provider"], "fake");
    assert!(mine.json.get("accounts").is_none(), "a person sees only their own");

    // Another person sees nothing of it, and no administrator's report.
    tab.send("PATCH", "/api/v1/admin/settings", Some(json!({"registrationOpen": true}))).await;
    let mut other = server.tab();
    other.register("other", PASSWORD).await;
    let theirs = other.get("/api/v1/usage").await;
    assert_eq!(theirs.json["totals"]["requests"], 0, "{theirs:?}");
    assert_eq!(other.get("/api/v1/admin/usage").await.status, 403);
    assert_eq!(other.fetch("/api/v1/admin/usage.csv").await.0, 403);

    let everyone = tab.get("/api/v1/admin/usage").await;
    let accounts = everyone.json["accounts"].as_array().unwrap();
    assert_eq!(accounts.len(), 1, "{accounts:?}");
    assert_eq!(
        (accounts[0]["username"].as_str(), accounts[0]["requests"].as_u64()),
        (Some("root"), Some(2))
    );
    let (status, headers, body) = tab.fetch("/api/v1/admin/usage.csv?days=2").await;
    assert_eq!(status, 200);
    assert_eq!(headers["content-type"], "text/csv; charset=utf-8");
    assert!(headers["content-disposition"].to_str().unwrap().starts_with("attachment;"));
    let csv = String::from_utf8(body).unwrap();
    let lines: Vec<&str> = csv.lines().collect();
    assert_eq!(
        lines[0],
        "day,account,provider,model,requests,estimated_requests,input_tokens,cached_input_tokens,output_tokens,spend_eur"
    );
    assert_eq!(lines.len(), 2, "{csv}");
    assert!(lines[1].contains(",root,fake,fake-model,2,1,"), "{csv}");

    // Prices that make no sense are refused and change nothing.
    let negative =
        json!({"providerId": provider_id, "model": "fake-model", "input": -1.0, "output": 8.0});
    let refused = tab.send("PUT", "/api/v1/admin/prices", Some(negative)).await;
    assert_eq!((refused.status, refused.json["error"].as_str()), (400, Some("invalid_amount")));
    let nowhere = json!({"providerId": "nope", "model": "m", "input": 1.0, "output": 1.0});
    assert_eq!(tab.send("PUT", "/api/v1/admin/prices", Some(nowhere)).await.status, 400);
    let long =
        json!({"providerId": provider_id, "model": "m".repeat(300), "input": 1.0, "output": 1.0});
    let refused = tab.send("PUT", "/api/v1/admin/prices", Some(long)).await;
    assert_eq!((refused.status, refused.json["error"].as_str()), (400, Some("invalid_model")));
    assert_eq!(tab.get("/api/v1/admin/prices").await.json[0]["input"], 2.0);
    assert_eq!(tab.get("/api/v1/usage?days=0").await.status, 400);
}

#[tokio::test]
async fn a_limit_refuses_a_reply_before_the_provider_is_asked_and_says_when_it_resets() {
    let model = FakeModel::start([]).await.unwrap();
    let db = TestDb::new();
    let server = Server::start(&db, &[("PROVIDER_ALLOWED_ORIGINS", &model.origin())]);
    let (mut tab, id) = crate::conversations::setup(&server, &model).await;
    let limits = json!({"tokensPerDay": 1_200});
    assert_eq!(tab.send("PUT", "/api/v1/admin/limits", Some(limits)).await.status, 200);
    model.push(Reply::text("Hello there.").usage(1_000, 150));
    assert_eq!(exchange(&mut tab, &id, "hi").await.status, 202);
    let asked = model.requests().len();

    // 1,150 used: the next reply's prompt would pass 1,200.
    let refused = exchange(&mut tab, &id, "tell me more about everything you know").await;
    assert_eq!(refused.status, 429, "{refused:?}");
    assert_eq!(refused.json["error"], "limit_reached");
    let message = refused.json["message"].as_str().unwrap();
    assert!(message.contains("1200 tokens a day"), "{message}");
    assert!(message.contains("00:00 UTC"), "{message}");
    let wait: u64 = refused.retry_after.as_deref().unwrap().parse().unwrap();
    assert!((1..=86_400).contains(&wait), "{refused:?}");
    assert_eq!(model.requests().len(), asked, "the provider was not asked");
    let detail = tab.get(&format!("/api/v1/conversations/{id}")).await.json;
    assert_eq!(detail["messages"].as_array().unwrap().len(), 2, "nothing was stored: {detail}");
    let standing = &tab.get("/api/v1/usage").await.json["standing"];
    assert_eq!(
        (standing["limits"]["tokensPerDay"].as_u64(), standing["tokensToday"].as_u64()),
        (Some(1_200), Some(1_150))
    );
    assert_eq!(standing["own"], false);

    // Limits of its own replace the defaults as a whole: now only two replies a minute.
    let me = tab.get("/api/v1/me").await.json["account"]["id"].as_str().unwrap().to_owned();
    let path = format!("/api/v1/admin/accounts/{me}/limits");
    let own = tab.send("PUT", &path, Some(json!({"own": {"turnsPerMinute": 2}}))).await;
    assert_eq!(own.status, 200, "{own:?}");
    assert_eq!(own.json["defaults"]["tokensPerDay"], 1_200);
    inside_one_minute().await;
    // A message sent while a reply is still being written is refused as such, and is not
    // counted as a reply of the minute.
    model.push(Reply::text("One, slowly.").chunks(4).chunk_delay_ms(250));
    model.push(Reply::text("Two."));
    let after =
        tab.get(&format!("/api/v1/conversations/{id}")).await.json["eventsAfter"].to_string();
    let path_events = format!("/api/v1/conversations/{id}/events");
    let mut events = Events::open(&tab, &path_events, Some(&after)).await;
    let messages = format!("/api/v1/conversations/{id}/messages");
    assert_eq!(tab.post(&messages, json!({"content": "one"})).await.status, 202);
    let busy = tab.post(&messages, json!({"content": "meanwhile"})).await;
    assert_eq!((busy.status, busy.json["error"].as_str()), (409, Some("turn_running")), "{busy:?}");
    while events.next().await.0 != "end" {}
    assert_eq!(exchange(&mut tab, &id, "two").await.status, 202);
    let third = exchange(&mut tab, &id, "three").await;
    assert_eq!(third.status, 429, "{third:?}");
    assert!(third.json["message"].as_str().unwrap().contains("2 replies a minute"), "{third:?}");
    // Back to the defaults.
    assert_eq!(tab.send("PUT", &path, Some(json!({"own": null}))).await.json["own"], Value::Null);
    assert_eq!(
        tab.send("PUT", "/api/v1/admin/accounts/nobody/limits", Some(json!({"own": null})))
            .await
            .status,
        404
    );
    let bad = tab.send("PUT", "/api/v1/admin/limits", Some(json!({"spendPerDay": -3}))).await;
    assert_eq!(bad.status, 400, "{bad:?}");
}

#[tokio::test]
async fn turns_per_minute_hold_across_two_replicas_answering_at_once() {
    if engine() != "postgres" {
        // Several replicas share a Postgres database; SQLite is one process by design.
        return;
    }
    let model = FakeModel::start([]).await.unwrap();
    let db = TestDb::new();
    let env = [("PROVIDER_ALLOWED_ORIGINS", model.origin())];
    let env: Vec<(&str, &str)> = env.iter().map(|(k, v)| (*k, v.as_str())).collect();
    let a = Server::start(&db, &env);
    let b = Server::start(&db, &env);
    let (mut on_a, first) = crate::conversations::setup(&a, &model).await;
    let conversation = on_a.get(&format!("/api/v1/conversations/{first}")).await.json;
    let provider_id = provider_of(&conversation);
    let mut ids = vec![first];
    for _ in 0..5 {
        let body = json!({"title": "t", "providerId": provider_id, "model": "fake-model"});
        ids.push(
            on_a.post("/api/v1/conversations", body).await.json["id"].as_str().unwrap().to_owned(),
        );
    }
    assert_eq!(
        on_a.send("PUT", "/api/v1/admin/limits", Some(json!({"turnsPerMinute": 3}))).await.status,
        200
    );
    for _ in 0..6 {
        model.push(Reply::text("ok").chunk_delay_ms(50).chunks(4));
    }
    // A tab of its own for each, half on each replica.
    let mut tabs = Vec::new();
    for i in 0..ids.len() {
        let mut tab = if i % 2 == 0 { a.tab() } else { b.tab() };
        assert_eq!(tab.login("root", PASSWORD).await.status, 200);
        tabs.push(tab);
    }
    inside_one_minute().await;
    let sends = tabs.into_iter().zip(&ids).map(|(mut tab, id)| {
        let path = format!("/api/v1/conversations/{id}/messages");
        async move { tab.post(&path, json!({"content": "hello"})).await.status }
    });
    let statuses = futures::future::join_all(sends).await;
    let accepted = statuses.iter().filter(|s| **s == 202).count();
    let refused = statuses.iter().filter(|s| **s == 429).count();
    assert_eq!((accepted, refused), (3, 3), "{statuses:?}");
}

#[tokio::test]
async fn a_title_is_not_asked_of_the_model_once_the_reply_used_what_the_limit_allows() {
    let model = FakeModel::start([]).await.unwrap();
    let db = TestDb::new();
    let server = Server::start(&db, &[("PROVIDER_ALLOWED_ORIGINS", &model.origin())]);
    let (mut tab, _) = crate::conversations::setup(&server, &model).await;
    tab.send("PATCH", "/api/v1/me/preferences", Some(json!({"titlesFromModel": true}))).await;
    let limits = json!({"tokensPerDay": 1_000});
    assert_eq!(tab.send("PUT", "/api/v1/admin/limits", Some(limits)).await.status, 200);
    let provider = tab.get("/api/v1/providers").await.json[0]["id"].clone();
    let created = tab
        .post("/api/v1/conversations", json!({"providerId": provider, "model": "fake-model"}))
        .await;
    let id = created.json["id"].as_str().unwrap().to_owned();
    // The reply leaves 5 tokens of the day: the title would pass the limit.
    model.push(Reply::text("High tide is at noon.").usage(990, 5));
    model.push(Reply::text("Brest tide times"));
    assert_eq!(exchange(&mut tab, &id, "when is high tide in Brest?").await.status, 202);
    tokio::time::sleep(std::time::Duration::from_millis(500)).await;
    assert_eq!(model.requests().len(), 1, "the title was asked past the limit");
    let title =
        tab.get(&format!("/api/v1/conversations/{id}")).await.json["conversation"]["title"].clone();
    assert_eq!(title, "when is high tide in Brest?");
}
