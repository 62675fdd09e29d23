//! A long conversation on a phone: the administrator writes the model's context window on the
//! page; past it, the timeline marks where the summary the model reads begins (the messages stay,
//! the summary opens), and the composer's gauge says how full the window is.

use llooma_fake_model::{FakeModel, Reply};

use super::driver::Browser;
use super::{sign_in, until_api, with_conversations};
use crate::long_conversations::{SUMMARIZING, SUMMARY, exchange, message};
use crate::support::{Server, TestDb};

#[tokio::test]
async fn browser_a_long_conversation_shows_where_its_summary_begins_and_how_full_the_window_is() {
    let Some(browser) = Browser::start(390, 844).await else { return };
    let model = FakeModel::builder()
        .fallback(llooma_fake_model::Fallback::Echo { chunk_delay_ms: 0 })
        .standing(SUMMARIZING, Reply::text(SUMMARY))
        .start()
        .await
        .unwrap();
    let db = TestDb::new();
    let server = Server::start(&db, &[("PROVIDER_ALLOWED_ORIGINS", &model.origin())]);
    let base = server.base.clone();
    let (mut api, ids) = with_conversations(&server, &model, 1).await;
    let id = ids[0].clone();

    // The model's window, written on the admin page.
    sign_in(&browser, &base, "root").await;
    browser.goto(&format!("{base}/admin/instance")).await;
    browser.wait_live().await;
    browser.type_into(".provider input[name=context-windows]", "fake-model = 4096").await;
    browser.click(".provider button.save-windows").await;
    until_api(&mut api, "/api/v1/admin/providers", "the window", |p| {
        p[0]["contextWindows"]["fake-model"] == 4096
    })
    .await;

    for n in 0..20 {
        exchange(&mut api, &id, &message(n), None).await;
    }
    browser.goto(&format!("{base}/c/{id}")).await;
    browser.wait_live().await;
    let gauge = browser.wait_text(".composer .context-gauge", "%").await;
    let percent: u64 = gauge.trim().trim_end_matches('%').parse().unwrap();
    assert!((10..=75).contains(&percent), "the gauge says {gauge}");
    // The timeline opens on the latest message: the older ones are above.
    browser.scroll_to(".summary-step").await;
    let step = browser.wait_text(".summary-step", "oldest messages were summarized").await;
    assert!(step.contains("they stay here"), "{step}");
    // Every message is still there; the line says which the summary stands for, and opens it.
    browser.scroll_to(".summary-divider").await;
    let divider = browser.wait_text(".summary-divider summary", "as a summary").await;
    let covered: String = divider.chars().filter(char::is_ascii_digit).collect();
    let detail = api.get(&format!("/api/v1/conversations/{id}")).await.json;
    assert_eq!(covered, detail["summary"]["coveredMessages"].to_string(), "{divider}");
    browser.click(".summary-divider summary").await;
    browser.wait_text(".summary-divider .summary-text", SUMMARY).await;
    let shown = browser.script("return document.querySelectorAll('.timeline .msg').length").await;
    assert_eq!(shown, serde_json::json!(40));
    let out = browser.sticking_out(390).await;
    assert!(out.is_empty(), "the page does not fit 390 pixels:\n{}", out.join("\n"));
    browser.screenshot("long-conversation-phone").await;

    // A turn from the page: the gauge follows it.
    browser.type_into("textarea[name=message]", &message(20)).await;
    browser.click("button.send").await;
    let path = format!("/api/v1/conversations/{id}");
    let latest = until_api(&mut api, &path, "the reply", |d| {
        d["replies"].as_array().is_some_and(|r| r.len() == 21 && !r[20]["context"].is_null())
    })
    .await;
    let replies = latest["replies"].as_array().unwrap();
    let fill = &replies.last().unwrap()["context"];
    let expected = fill["usedTokens"].as_u64().unwrap_or(0) * 100 / 4096;
    let mut seen = String::new();
    for _ in 0..50 {
        seen = browser.text(".composer .context-percent").await;
        if seen == format!("{expected}%") {
            break;
        }
        tokio::time::sleep(std::time::Duration::from_millis(100)).await;
    }
    assert_eq!(seen, format!("{expected}%"));
}

#[tokio::test]
async fn browser_a_long_conversation_opens_on_its_newest_messages_and_loads_older_ones_on_scrolling_up()
 {
    let Some(browser) = Browser::start(1280, 900).await else { return };
    let model = FakeModel::builder()
        .fallback(llooma_fake_model::Fallback::Echo { chunk_delay_ms: 0 })
        .start()
        .await
        .unwrap();
    let db = TestDb::new();
    let server = Server::start(&db, &[("PROVIDER_ALLOWED_ORIGINS", &model.origin())]);
    let base = server.base.clone();
    let (mut api, ids) = with_conversations(&server, &model, 1).await;
    let id = ids[0].clone();
    for n in 0..70 {
        exchange(&mut api, &id, &format!("question {n:02}"), None).await;
    }
    sign_in(&browser, &base, "root").await;
    browser.goto(&format!("{base}/c/{id}")).await;
    browser.wait_live().await;
    let count = "return document.querySelectorAll('.timeline .msg').length";
    let first = browser.script(count).await.as_u64().unwrap();
    assert!((60..=61).contains(&first), "{first} messages at first");
    let page = browser.script("return document.documentElement.outerHTML.length").await;
    assert!(page.as_u64().unwrap() < 256 * 1024, "the page weighs {page} bytes");
    let oldest = browser
        .script("return document.querySelector('.timeline .msg.user').textContent.trim()")
        .await;
    assert_eq!(oldest, serde_json::json!("question 40"));

    // Scrolling up to the oldest shown loads the ones before, until the first.
    let mut shown = first;
    for _ in 0..100 {
        browser
            .script(
                "const s = document.querySelector('.chat-scroll'); s.scrollTop = -s.scrollHeight;",
            )
            .await;
        shown = browser.script(count).await.as_u64().unwrap();
        if shown == 140 {
            break;
        }
        tokio::time::sleep(std::time::Duration::from_millis(100)).await;
    }
    assert_eq!(shown, 140, "every message once, in the end");
    let order = browser
        .script("return Array.from(document.querySelectorAll('.timeline .msg.user')).map(m => m.textContent.trim())")
        .await;
    let expected: Vec<String> = (0..70).map(|n| format!("question {n:02}")).collect();
    assert_eq!(order, serde_json::json!(expected));
    browser.wait_gone(".older-messages:not([hidden])").await;
}
