//! Everyday chat in the browser: what a person does a hundred times a day.

use llooma_fake_model::{FakeModel, Reply};
use serde_json::json;

use super::driver::Browser;
use super::sign_in;
use crate::support::{PASSWORD, Server, Tab, TestDb};

/// An administrator with a provider of the fake model and `count` conversations on it; returns
/// the API tab and the conversations' ids.
async fn with_conversations(
    server: &Server,
    model: &FakeModel,
    count: usize,
) -> (Tab, Vec<String>) {
    let mut api = server.tab();
    api.register("root", PASSWORD).await;
    let provider = api
        .post("/api/v1/admin/providers", json!({"name": "Fake", "baseUrl": model.base_url()}))
        .await;
    let provider_id = provider.json["id"].as_str().unwrap().to_owned();
    let mut ids = Vec::new();
    for n in 1..=count {
        let created = api
            .post(
                "/api/v1/conversations",
                json!({"title": format!("Chat {n}"), "providerId": provider_id, "model": "fake-model"}),
            )
            .await;
        ids.push(created.json["id"].as_str().unwrap().to_owned());
    }
    (api, ids)
}

/// Before, each conversation page held two event streams and left pages kept theirs in the
/// back/forward cache: after a few clicks the browser's six connections to the host were taken
/// and Enter did nothing. Now a tab holds one stream, closed when its page is hidden.
#[tokio::test]
async fn browser_after_many_navigations_and_in_four_tabs_every_page_still_streams() {
    let Some(browser) = Browser::start(1280, 900).await else { return };
    let model = FakeModel::start([]).await.unwrap();
    let db = TestDb::new();
    let server = Server::start(&db, &[("PROVIDER_ALLOWED_ORIGINS", &model.origin())]);
    let base = server.base.clone();
    let (mut api, ids) = with_conversations(&server, &model, 4).await;
    sign_in(&browser, &base, "root").await;

    // Ten ordinary navigations: into conversations, Back, Settings, home.
    let first = format!("{base}/c/{}", ids[0]);
    for round in 0..2 {
        browser.goto(&format!("{base}/c/{}", ids[round + 1])).await;
        browser.wait_live().await;
        browser.back().await;
        browser.wait_live().await;
        browser.goto(&format!("{base}/settings")).await;
        browser.wait_live().await;
        browser.goto(&format!("{base}/")).await;
        browser.wait_live().await;
        browser.goto(&first).await;
        browser.wait_live().await;
    }
    model.push(Reply::text("Still here after ten pages."));
    browser.type_into("textarea[name=message]", "are you there?").await;
    browser.click("button.send").await;
    browser.wait_text(".timeline .msg.reply", "Still here after ten pages.").await;

    // Four tabs, each on its own conversation, each streaming what is sent to it.
    let mut handles = Vec::new();
    for id in &ids[1..] {
        let (old, new) = browser.new_tab().await;
        if handles.is_empty() {
            handles.push(old);
        }
        handles.push(new);
        browser.goto(&format!("{base}/c/{id}")).await;
        browser.wait_live().await;
    }
    for (n, id) in ids.iter().enumerate() {
        let text = format!("Reply number {n}.");
        model.push(Reply::text(text.clone()));
        let sent = api
            .post(&format!("/api/v1/conversations/{id}/messages"), json!({"content": "hello"}))
            .await;
        assert_eq!(sent.status, 202, "{sent:?}");
        // The fake model answers in the order asked: this reply is stored before the next.
        until_stored(&mut api, id, &text).await;
    }
    for (n, handle) in handles.iter().enumerate() {
        browser.switch_to(handle).await;
        browser.wait_text(".timeline", &format!("Reply number {n}.")).await;
    }
}

/// Waits until the conversation holds a reply with `text`.
async fn until_stored(api: &mut Tab, id: &str, text: &str) {
    for _ in 0..200 {
        let detail = api.get(&format!("/api/v1/conversations/{id}")).await;
        let stored = detail.json["messages"]
            .as_array()
            .is_some_and(|m| m.iter().any(|m| m["content"].as_str() == Some(text)));
        if stored {
            return;
        }
        tokio::time::sleep(std::time::Duration::from_millis(50)).await;
    }
    panic!("the reply {text:?} in {id} was never stored");
}

/// When the server goes away the page says it is reconnecting (before, it went silent), and
/// when the server is back the page carries on where it was.
#[tokio::test]
async fn browser_a_lost_connection_is_shown_and_the_page_carries_on_when_the_server_is_back() {
    let Some(browser) = Browser::start(1280, 900).await else { return };
    let model = FakeModel::start([]).await.unwrap();
    let db = TestDb::new();
    let mut server = Server::start(&db, &[("PROVIDER_ALLOWED_ORIGINS", &model.origin())]);
    let base = server.base.clone();
    let (_, ids) = with_conversations(&server, &model, 1).await;
    sign_in(&browser, &base, "root").await;
    browser.goto(&format!("{base}/c/{}", ids[0])).await;
    browser.wait_live().await;
    browser.find(".connection[hidden]").await;

    server.kill();
    browser.find(".connection:not([hidden])").await;
    let said = browser.text(".connection").await;
    assert!(said.contains("reconnecting"), "{said}");
    browser.screenshot("reconnecting").await;

    let listen = base.trim_start_matches("http://").to_owned();
    let _server = Server::start(
        &db,
        &[("PROVIDER_ALLOWED_ORIGINS", &model.origin()), ("LLOOMA_LISTEN", &listen)],
    );
    browser.find(".connection[hidden]").await;
    model.push(Reply::text("Back again."));
    browser.type_into("textarea[name=message]", "still there?").await;
    browser.click("button.send").await;
    browser.wait_text(".timeline .msg.reply", "Back again.").await;
}
