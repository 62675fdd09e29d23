//! Bringing conversations in from the page: Settings → Account takes ChatGPT's
//! `conversations.json`, says what came in and what did not, and the conversation is there to
//! read.

use base64::Engine as _;
use llooma_fake_model::FakeModel;

use super::driver::Browser;
use super::{sign_in, with_conversations};
use crate::support::{Server, TestDb};

#[tokio::test]
async fn browser_a_chatgpt_export_is_brought_in_from_settings_and_its_report_shown() {
    let Some(browser) = Browser::start(390, 844).await else { return };
    let model = FakeModel::start([]).await.unwrap();
    let db = TestDb::new();
    let server = Server::start(&db, &[("PROVIDER_ALLOWED_ORIGINS", &model.origin())]);
    let base = server.base.clone();
    let (mut api, _) = with_conversations(&server, &model, 1).await;
    sign_in(&browser, &base, "root").await;
    browser.goto(&format!("{base}/settings/account")).await;
    browser.wait_live().await;

    let file = crate::import::chatgpt_export().to_string();
    let b64 = base64::engine::general_purpose::STANDARD.encode(file.as_bytes());
    let script = format!(
        "const bin = atob('{b64}'); const bytes = new Uint8Array(bin.length); \
         for (let i = 0; i < bin.length; i++) bytes[i] = bin.charCodeAt(i); \
         const dt = new DataTransfer(); \
         dt.items.add(new File([bytes], 'conversations.json', {{type: 'application/json'}})); \
         const input = document.querySelector('input[name=import-file]'); input.files = dt.files; \
         input.dispatchEvent(new Event('change', {{bubbles: true}})); return true;"
    );
    browser.script(&script).await;
    let said = browser
        .wait_text(
            ".import-report .brought",
            "Brought in from ChatGPT: 1 conversation with 4 messages.",
        )
        .await;
    assert!(said.contains("See them"), "{said}");
    browser.wait_text(".import-report .left-out", "1 message left out").await;
    browser.wait_text(".import-report .skipped", "Empty: it holds no message").await;
    let out = browser.sticking_out(390).await;
    assert!(out.is_empty(), "the page does not fit 390 pixels:\n{}", out.join("\n"));
    browser.screenshot("settings-import-phone").await;
    let list = api.get("/api/v1/conversations").await.json;
    assert!(list.as_array().unwrap().iter().any(|c| c["title"] == "Kite names"), "{list}");

    // A file that is not one: said, nothing brought in.
    let script = "const dt = new DataTransfer(); \
         dt.items.add(new File(['hello'], 'notes.json', {type: 'application/json'})); \
         const input = document.querySelector('input[name=import-file]'); input.files = dt.files; \
         input.dispatchEvent(new Event('change', {bubbles: true})); return true;";
    browser.script(script).await;
    browser.wait_text(".import .error", "conversations.json").await;
    assert_eq!(api.get("/api/v1/conversations").await.json.as_array().unwrap().len(), 2);
}
