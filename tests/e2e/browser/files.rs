//! Photos and documents in the composer of a real Chromium: picked, pasted and dropped, checked
//! by the server as they arrive, said before sending when the model does not see images, and
//! shown in the message live and after a reload, on a desktop and on a phone.

use base64::Engine as _;
use llooma_fake_model::{FakeModel, Reply};
use serde_json::json;

use super::driver::Browser;
use super::{sign_in, with_conversations};
use crate::files::{photo_with_exif, text_pdf};
use crate::support::{Server, TestDb};

/// How the page receives a file in the test: the three ways a person gives one.
#[derive(Clone, Copy)]
enum Given {
    Picked,
    Pasted,
    Dropped,
}

/// Gives the page a file as a person would: chosen in the file picker, pasted into the message
/// box, or dropped on the composer.
async fn give(browser: &Browser, how: Given, name: &str, content_type: &str, bytes: &[u8]) {
    let b64 = base64::engine::general_purpose::STANDARD.encode(bytes);
    let deliver = match how {
        Given::Picked => {
            "const input = document.querySelector('input[name=files]'); input.files = dt.files; \
             input.dispatchEvent(new Event('change', {bubbles: true}));"
        }
        Given::Pasted => {
            "document.querySelector('textarea[name=message]').dispatchEvent(\
             new ClipboardEvent('paste', {clipboardData: dt, bubbles: true, cancelable: true}));"
        }
        Given::Dropped => {
            "const form = document.querySelector('form.composer'); \
             form.dispatchEvent(new DragEvent('dragover', {dataTransfer: dt, bubbles: true, cancelable: true})); \
             form.dispatchEvent(new DragEvent('drop', {dataTransfer: dt, bubbles: true, cancelable: true}));"
        }
    };
    let script = format!(
        "const bin = atob('{b64}'); const bytes = new Uint8Array(bin.length); \
         for (let i = 0; i < bin.length; i++) bytes[i] = bin.charCodeAt(i); \
         const dt = new DataTransfer(); \
         dt.items.add(new File([bytes], {name:?}, {{type: {content_type:?}}})); \
         {deliver} return true;"
    );
    browser.script(&script).await;
}

#[tokio::test]
async fn browser_photos_and_documents_are_picked_pasted_dropped_and_shown_in_the_message() {
    let Some(browser) = Browser::start(1280, 900).await else { return };
    let model = FakeModel::start([Reply::text("A gradient and your notes.")]).await.unwrap();
    let db = TestDb::new();
    let server = Server::start(&db, &[("PROVIDER_ALLOWED_ORIGINS", &model.origin())]);
    let base = server.base.clone();
    let (mut api, ids) = with_conversations(&server, &model, 1).await;
    let id = ids[0].clone();
    sign_in(&browser, &base, "root").await;
    browser.goto(&format!("{base}/c/{id}")).await;
    browser.wait_live().await;

    // A photo from the picker: uploaded at once, shown as a thumbnail in the tray.
    give(&browser, Given::Picked, "IMG_0001.jpg", "image/jpeg", &photo_with_exif(900, 600)).await;
    browser.find(".tray .waiting-file img.thumb").await;
    browser.wait_text(".tray .waiting-file .name", "IMG_0001.jpg").await;
    // The model is not marked as seeing images: said in the composer, and Send sends nothing.
    browser.wait_text(".vision-warning", "fake-model does not see images").await;
    browser.type_into("textarea[name=message]", "What is in these?").await;
    browser.click("button.send").await;
    tokio::time::sleep(std::time::Duration::from_millis(500)).await;
    assert!(model.chat_bodies().is_empty(), "sent to a model that does not see images");
    assert_eq!(browser.value("textarea[name=message]").await, "What is in these?");

    // The administrator marks it on the providers page; back in the conversation the photo
    // still waits in the tray.
    browser.goto(&format!("{base}/admin/instance")).await;
    browser.wait_live().await;
    browser.type_into(".card.provider input[name=vision-models]", "fake-model").await;
    browser.mark_page().await;
    browser.click(".card.provider button.save-vision").await;
    browser.wait_new_page().await;
    super::until_api(&mut api, "/api/v1/providers", "the models that see images", |p| {
        p[0]["visionModels"] == json!(["fake-model"])
    })
    .await;
    browser.goto(&format!("{base}/c/{id}")).await;
    browser.wait_live().await;
    browser.wait_text(".tray .waiting-file .name", "IMG_0001.jpg").await;
    browser.wait_gone(".vision-warning:not([hidden])").await;

    // Notes pasted, a report dropped; a "photo" that is a PDF is refused with its reason, and
    // what is typed stays.
    give(&browser, Given::Pasted, "notes.md", "text/markdown", b"# Notes\nBuy milk.\n").await;
    give(&browser, Given::Dropped, "report.pdf", "application/pdf", &text_pdf("Quarterly")).await;
    browser.type_into("textarea[name=message]", "What is in these?").await;
    give(&browser, Given::Dropped, "holiday.jpg", "image/jpeg", &text_pdf("not a photo")).await;
    browser.wait_text(".composer p.error", "holiday.jpg").await;
    for name in ["notes.md", "report.pdf"] {
        browser.wait_text(".tray", name).await;
    }
    assert!(!browser.text(".tray").await.contains("holiday.jpg"));
    assert_eq!(browser.value("textarea[name=message]").await, "What is in these?");
    browser.screenshot("files-composer").await;

    // Sent: the message shows the photo and the two documents; the model got all three.
    browser.click("button.send").await;
    browser.wait_text(".timeline .msg.reply", "A gradient and your notes.").await;
    browser.wait_gone(".tray .waiting-file").await;
    browser.find(".timeline .msg.user .sent-image img.thumb").await;
    let chips = browser.text(".timeline .msg.user .sent-files").await;
    assert!(chips.contains("notes.md") && chips.contains("report.pdf"), "{chips}");
    let body = &model.chat_bodies()[0];
    let person = body["messages"].as_array().unwrap().iter().rev().find(|m| m["role"] == "user");
    let content = person.unwrap()["content"].clone();
    assert!(content[0]["text"].as_str().unwrap().contains("Buy milk."), "{content}");
    assert!(content[0]["text"].as_str().unwrap().contains("Quarterly"), "{content}");
    assert!(content[1]["image_url"]["url"].as_str().unwrap().starts_with("data:image/jpeg"));
    browser.screenshot("files-sent").await;

    // After a reload: the same thumbnail (opening the stored image, in a new tab) and chips.
    browser.reload().await;
    browser.wait_live().await;
    let chips = browser.text(".timeline .msg.user .sent-files").await;
    assert!(chips.contains("notes.md") && chips.contains("report.pdf"), "{chips}");
    let link = browser
        .script(
            "const a = document.querySelector('.msg.user .sent-image'); \
             return [a.getAttribute('href'), a.target, a.rel, a.querySelector('img').naturalWidth];",
        )
        .await;
    assert!(link[0].as_str().unwrap().starts_with("/api/v1/files/"), "{link}");
    assert_eq!((link[1].as_str(), link[2].as_str()), (Some("_blank"), Some("noopener")));
    assert!(link[3].as_u64().unwrap() > 0, "the thumbnail did not load: {link}");

    // The administrator sees what the account's files take.
    browser.goto(&format!("{base}/admin/instance")).await;
    browser.wait_live().await;
    let usage = browser.wait_text(".file-usage table.usage tbody tr", "root").await;
    assert_eq!(usage.split_whitespace().take(2).collect::<Vec<_>>(), ["root", "3"], "{usage}");

    // On a phone the message with its files, and a tray with files, fit the screen.
    let Some(phone) = Browser::start(390, 844).await else { return };
    sign_in(&phone, &base, "root").await;
    phone.goto(&format!("{base}/c/{id}")).await;
    phone.wait_live().await;
    phone.find(".timeline .msg.user .sent-image img.thumb").await;
    let long = format!("{}.txt", "a-very-long-file-name-".repeat(6));
    give(&phone, Given::Picked, &long, "text/plain", b"some notes").await;
    phone.wait_text(".tray", "a-very-long").await;
    let out = phone.sticking_out(390).await;
    assert!(out.is_empty(), "past a phone's edge:\n{}", out.join("\n"));
    phone.screenshot("files-phone").await;
}
