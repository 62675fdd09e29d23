//! Voice in a real Chromium with its fake microphone (a tone): dictation into the message box,
//! a reply read aloud, voice mode sending spoken turns and reading their replies, and the
//! administrator's speech settings showing what was found.

use std::time::Duration;

use llooma_fake_model::{FakeModel, Reply};

use super::driver::Browser;
use super::{sign_in, until_api, with_conversations};
use crate::support::{Server, TestDb};

/// Waits until `ok` holds, checking every 100 ms.
async fn until(what: &str, ok: impl Fn() -> bool) {
    for _ in 0..150 {
        if ok() {
            return;
        }
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
    panic!("never happened: {what}");
}

#[tokio::test]
async fn browser_dictation_read_aloud_and_voice_mode_with_spoken_turns() {
    let Some(browser) = Browser::start(1280, 900).await else { return };
    let model = FakeModel::builder()
        .speech_models()
        .transcript("what is the date today")
        .start()
        .await
        .unwrap();
    let db = TestDb::new();
    let server = Server::start(&db, &[("PROVIDER_ALLOWED_ORIGINS", &model.origin())]);
    let base = server.base.clone();
    let (mut api, ids) = with_conversations(&server, &model, 1).await;
    let id = ids[0].clone();
    sign_in(&browser, &base, "root").await;

    // With no voice setting, the administrator sees what was found.
    browser.goto(&format!("{base}/admin/instance")).await;
    browser.wait_live().await;
    browser
        .wait_text(".speech-settings", "Dictation: Fake · whisper-1 (found automatically)")
        .await;
    browser
        .wait_text(".speech-settings", "Reading aloud: Fake · tts-1 (found automatically)")
        .await;

    // Dictation: the words land after what is typed, for the person to edit and send.
    browser.goto(&format!("{base}/c/{id}")).await;
    browser.wait_live().await;
    browser.find("button.dictate:not([hidden])").await;
    browser.type_into("textarea[name=message]", "Note:").await;
    browser.click("button.dictate").await;
    browser.find("button.dictate.recording").await;
    tokio::time::sleep(Duration::from_millis(800)).await;
    browser.click("button.dictate").await;
    for _ in 0..100 {
        if browser.value("textarea[name=message]").await.contains("date today") {
            break;
        }
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
    assert_eq!(browser.value("textarea[name=message]").await, "Note: what is the date today");
    let recordings = model.recordings();
    assert_eq!(recordings.len(), 1);
    let recording = &recordings[0];
    assert!(recording.content_type.starts_with("audio/webm"), "{}", recording.content_type);
    assert!(recording.audio.len() > 100, "an empty recording: {} bytes", recording.audio.len());
    assert!(recording.audio.starts_with(b"\x1a\x45\xdf\xa3"), "not a WebM recording");

    // Sent as typed; its reply is read aloud on request.
    model.push(Reply::text("Today is **Sunday**."));
    browser.click("button.send").await;
    browser.wait_text(".timeline .msg.reply", "Today is Sunday.").await;
    browser.click(".msg-after.reply button.read-aloud").await;
    until("the reply was sent to be read", || !model.speech_bodies().is_empty()).await;
    assert_eq!(model.speech_bodies()[0]["input"], "Today is Sunday.");
    assert!(browser.text(".timeline").await.matches("Spoken turn").count() == 0);

    // Voice mode: the person talks, presses "Send now"; the message goes as a spoken turn, the
    // reply is read aloud, and it listens again.
    model.push(Reply::text("It is the sixth of December."));
    browser.click("button.talk").await;
    browser.find(".voice-mode:not([hidden]) button.send-now:not([hidden])").await;
    browser.screenshot("voice-mode").await;
    tokio::time::sleep(Duration::from_millis(800)).await;
    browser.click("button.send-now").await;
    browser.wait_text(".timeline", "It is the sixth of December.").await;
    browser.wait_text(".timeline", "Spoken turn: MCP tools are not called in it.").await;
    until("the spoken reply was read", || model.speech_bodies().len() == 2).await;
    assert_eq!(model.speech_bodies()[1]["input"], "It is the sixth of December.");
    browser.find(".voice-mode:not([hidden]) button.send-now:not([hidden])").await;
    assert_eq!(browser.text(".composer p.error").await, "", "reading aloud failed");
    browser.click("button.leave-voice").await;
    browser.wait_gone(".voice-mode:not([hidden])").await;
    let detail = api.get(&format!("/api/v1/conversations/{id}")).await;
    let replies = detail.json["replies"].as_array().unwrap();
    assert_eq!(replies.last().unwrap()["spoken"], true, "{replies:?}");
    assert_eq!(replies[0].get("spoken"), None, "a typed turn is not spoken");

    // After a reload the spoken turn still says so.
    browser.reload().await;
    browser.wait_live().await;
    browser.wait_text(".timeline", "Spoken turn: MCP tools are not called in it.").await;

    // On a phone, voice mode's bar fits the screen.
    let Some(phone) = Browser::start(390, 844).await else { return };
    sign_in(&phone, &base, "root").await;
    phone.goto(&format!("{base}/c/{id}")).await;
    phone.wait_live().await;
    phone.click("button.talk").await;
    phone.find(".voice-mode:not([hidden]) button.send-now:not([hidden])").await;
    let out = phone.sticking_out(390).await;
    assert!(out.is_empty(), "past a phone's edge:\n{}", out.join("\n"));
    phone.screenshot("voice-mode-phone").await;
    phone.click("button.leave-voice").await;
    phone.wait_gone(".voice-mode:not([hidden])").await;

    // The administrator picks the voice on the page.
    browser.goto(&format!("{base}/admin/instance")).await;
    browser.wait_live().await;
    browser.type_into(".speech-settings input[name=tts-voice]", "nova").await;
    browser.mark_page().await;
    browser.click(".speech-settings button.save-speech").await;
    browser.wait_new_page().await;
    until_api(&mut api, "/api/v1/admin/speech", "the voice", |s| s["voice"] == "nova").await;
    browser.wait_text(".speech-settings", "Voice: nova").await;
}
