//! Voice through the API, on both engines: a recording written down by the provider found with
//! no setting, the administrator's choice taking over, replies read aloud, every bad input and
//! failing speech service answered with a clear error, and spoken turns that refuse MCP tools
//! without a card while the app's own tools still run.

use llooma_fake_model::{Audio, FakeModel, Reply, silent_mp3};
use serde_json::{Value, json};

use crate::support::{Events, PASSWORD, Server, Tab, TestDb};

/// A few bytes that start like a WebM file (what a browser's MediaRecorder sends).
const RECORDING: &[u8] = b"\x1a\x45\xdf\xa3\x9f\x42\x86\x81\x01 opus frames...";

/// Adds a provider on this machine; returns its id.
async fn add_provider(tab: &mut Tab, name: &str, base_url: &str) -> String {
    let added = tab
        .post(
            "/api/v1/admin/providers",
            json!({"name": name, "baseUrl": base_url, "localNetwork": true}),
        )
        .await;
    assert_eq!(added.status, 201, "{added:?}");
    added.json["id"].as_str().unwrap().to_owned()
}

/// Sends a recording as the page does: the bytes as the body, with the recording's type.
async fn dictate(tab: &Tab, content_type: Option<&str>, audio: Vec<u8>) -> (u16, Value) {
    let mut request =
        tab.http.post(format!("{}/api/v1/speech/transcriptions", tab.base)).body(audio);
    if let Some(cookie) = &tab.cookie {
        request = request.header("cookie", format!("llooma_session={cookie}"));
    }
    if let Some(csrf) = &tab.csrf {
        request = request.header("x-csrf-token", csrf);
    }
    if let Some(origin) = &tab.origin {
        request = request.header("origin", origin);
    }
    if let Some(content_type) = content_type {
        request = request.header("content-type", content_type);
    }
    let response = request.send().await.unwrap();
    let status = response.status().as_u16();
    let text = response.text().await.unwrap();
    (status, serde_json::from_str(&text).unwrap_or(Value::Null))
}

/// Asks for a text read aloud: (status, content type, body).
async fn speak(tab: &Tab, body: Value) -> (u16, String, Vec<u8>) {
    let mut request = tab.http.post(format!("{}/api/v1/speech/speak", tab.base)).json(&body);
    if let Some(cookie) = &tab.cookie {
        request = request.header("cookie", format!("llooma_session={cookie}"));
    }
    if let Some(csrf) = &tab.csrf {
        request = request.header("x-csrf-token", csrf);
    }
    if let Some(origin) = &tab.origin {
        request = request.header("origin", origin);
    }
    let response = request.send().await.unwrap();
    let status = response.status().as_u16();
    let content_type = response
        .headers()
        .get("content-type")
        .map(|v| v.to_str().unwrap().to_owned())
        .unwrap_or_default();
    (status, content_type, response.bytes().await.unwrap().to_vec())
}

fn error_of(body: &[u8]) -> (String, String) {
    let json: Value = serde_json::from_slice(body).unwrap();
    (json["error"].as_str().unwrap().to_owned(), json["message"].as_str().unwrap().to_owned())
}

#[tokio::test]
async fn dictation_and_reading_aloud_work_with_no_setting_through_the_first_provider_offering_them()
{
    let chat = FakeModel::start([]).await.unwrap();
    let voice = FakeModel::builder()
        .speech_models()
        .transcript("Turn on the kitchen light.")
        .start()
        .await
        .unwrap();
    let db = TestDb::new();
    let server = Server::start(&db, &[]);
    let mut tab = server.tab();
    tab.register("root", PASSWORD).await;
    add_provider(&mut tab, "chat", &chat.base_url()).await;

    // No provider offers speech yet: the page hears so, and a recording is refused clearly.
    let nothing = tab.get("/api/v1/speech").await;
    assert_eq!(nothing.status, 200, "{nothing:?}");
    assert_eq!(nothing.json["dictation"], false);
    assert_eq!(nothing.json["readAloud"], false);
    let (status, body) = dictate(&tab, Some("audio/webm;codecs=opus"), RECORDING.to_vec()).await;
    assert_eq!((status, body["error"].as_str()), (422, Some("speech_unavailable")), "{body}");
    assert!(body["message"].as_str().unwrap().contains("Admin → Speech"), "{body}");

    let voice_id = add_provider(&mut tab, "voice", &voice.base_url()).await;
    let page = tab.get("/api/v1/speech").await;
    assert_eq!(page.json["dictation"], true, "{page:?}");
    assert_eq!(page.json["readAloud"], true);
    assert_eq!(page.json["voice"], "alloy");
    assert!(page.json["voices"].as_array().unwrap().iter().any(|v| v == "nova"));
    assert_eq!(page.json["maxRecordingBytes"], 25 * 1024 * 1024);

    // The settings page shows what is in effect, and that it was found rather than chosen.
    let admin = tab.get("/api/v1/admin/speech").await;
    assert_eq!(admin.status, 200, "{admin:?}");
    assert_eq!(admin.json["settings"]["sttProviderId"], Value::Null);
    let stt = &admin.json["transcription"];
    assert_eq!(stt["providerId"], voice_id.as_str());
    assert_eq!(stt["providerName"], "voice");
    assert_eq!(stt["model"], "whisper-1");
    assert_eq!(stt["autoDetected"], true);
    assert_eq!(admin.json["speech"]["model"], "tts-1");
    assert_eq!(admin.json["speech"]["autoDetected"], true);
    assert_eq!(admin.json["voice"], "alloy");

    // A recording from Chrome or Firefox (WebM/Opus) comes back as text for the person to edit.
    let (status, body) = dictate(&tab, Some("audio/webm;codecs=opus"), RECORDING.to_vec()).await;
    assert_eq!(status, 200, "{body}");
    assert_eq!(body, json!({"text": "Turn on the kitchen light."}));
    let received = voice.recordings();
    assert_eq!(received.len(), 1);
    assert_eq!(received[0].model, "whisper-1");
    assert_eq!(received[0].file_name, "recording.webm");
    assert_eq!(received[0].content_type, "audio/webm");
    assert_eq!(received[0].audio, RECORDING);
    assert!(received[0].fields.contains(&("response_format".into(), "json".into())));
    assert!(chat.recordings().is_empty(), "the provider without speech models is not asked");

    // Safari records MP4.
    let (status, _) = dictate(&tab, Some("audio/mp4"), RECORDING.to_vec()).await;
    assert_eq!(status, 200);
    assert_eq!(voice.recordings()[1].file_name, "recording.mp4");

    // A reply read aloud: MP3 from the provider, in the default voice.
    let (status, content_type, audio) =
        speak(&tab, json!({"text": "The kitchen light is on."})).await;
    assert_eq!(status, 200, "{}", String::from_utf8_lossy(&audio));
    assert_eq!(content_type, "audio/mpeg");
    assert_eq!(audio, silent_mp3());
    assert_eq!(
        voice.speech_bodies()[0],
        json!({"model": "tts-1", "input": "The kitchen light is on.", "voice": "alloy", "response_format": "mp3"})
    );

    // Like every other POST: signed in, and with the session's CSRF token.
    let mut stranger = server.tab();
    let (status, _) = dictate(&stranger, Some("audio/webm"), RECORDING.to_vec()).await;
    assert_eq!(status, 401);
    stranger.cookie = tab.cookie.clone();
    let (status, body) = dictate(&stranger, Some("audio/webm"), RECORDING.to_vec()).await;
    assert_eq!((status, body["error"].as_str()), (403, Some("csrf")), "{body}");
    assert_eq!(voice.recordings().len(), 2, "nothing refused reached the provider");
}

#[tokio::test]
async fn the_administrator_s_choice_overrides_detection_and_a_person_may_pick_a_voice() {
    let first = FakeModel::builder().speech_models().transcript("from the first").start().await;
    let first = first.unwrap();
    let local = FakeModel::builder().transcript("from the local server").start().await.unwrap();
    let db = TestDb::new();
    let server = Server::start(&db, &[]);
    let mut tab = server.tab();
    tab.register("root", PASSWORD).await;
    add_provider(&mut tab, "openai", &first.base_url()).await;
    let local_id = add_provider(&mut tab, "speaches", &local.base_url()).await;

    // A model needs its provider; the provider must exist; a voice is a short name.
    for (body, code) in [
        (json!({"sttModel": "whisper-large"}), "invalid_speech_settings"),
        (json!({"sttProviderId": "no-such-provider"}), "unknown_provider"),
        (json!({"ttsVoice": "a voice with spaces"}), "invalid_voice"),
    ] {
        let refused = tab.send("PUT", "/api/v1/admin/speech", Some(body)).await;
        assert_eq!((refused.status, refused.json["error"].as_str()), (400, Some(code)));
    }
    let chosen = tab
        .send(
            "PUT",
            "/api/v1/admin/speech",
            Some(json!({
                "sttProviderId": local_id,
                "sttModel": "Systran/faster-whisper-small",
                "ttsProviderId": local_id,
                "ttsModel": "kokoro",
                "ttsVoice": "af_heart",
            })),
        )
        .await;
    assert_eq!(chosen.status, 200, "{chosen:?}");
    assert_eq!(chosen.json["settings"]["sttModel"], "Systran/faster-whisper-small");
    assert_eq!(chosen.json["transcription"]["providerName"], "speaches");
    assert_eq!(chosen.json["transcription"]["autoDetected"], false);
    assert_eq!(chosen.json["speech"]["model"], "kokoro");
    assert_eq!(chosen.json["voice"], "af_heart");
    assert_eq!(tab.get("/api/v1/admin/speech").await.json, chosen.json, "kept as chosen");

    let (status, body) = dictate(&tab, Some("audio/ogg"), RECORDING.to_vec()).await;
    assert_eq!(status, 200, "{body}");
    assert_eq!(body["text"], "from the local server");
    assert_eq!(local.recordings()[0].model, "Systran/faster-whisper-small");
    assert_eq!(local.recordings()[0].file_name, "recording.ogg");
    assert!(first.recordings().is_empty());

    // The administrator's voice, then the person's own, then one asked for once.
    let (status, _, _) = speak(&tab, json!({"text": "One."})).await;
    assert_eq!(status, 200);
    let own = tab.send("PATCH", "/api/v1/speech", Some(json!({"voice": "echo"}))).await;
    assert_eq!(own.status, 200, "{own:?}");
    assert_eq!(
        (own.json["voice"].as_str(), own.json["ownVoice"].as_str()),
        (Some("echo"), Some("echo"))
    );
    assert!(own.json["voices"].as_array().unwrap().iter().any(|v| v == "af_heart"));
    speak(&tab, json!({"text": "Two."})).await;
    speak(&tab, json!({"text": "Three.", "voice": "nova"})).await;
    let voices: Vec<Value> = local.speech_bodies().iter().map(|b| b["voice"].clone()).collect();
    assert_eq!(voices, [json!("af_heart"), json!("echo"), json!("nova")]);
    assert!(local.speech_bodies().iter().all(|b| b["model"] == "kokoro"));
    let back = tab.send("PATCH", "/api/v1/speech", Some(json!({"voice": null}))).await;
    assert_eq!(back.json["voice"], "af_heart");
    assert_eq!(back.json["ownVoice"], Value::Null);

    // A provider chosen without a model has its model found on it.
    let provider_only =
        tab.send("PUT", "/api/v1/admin/speech", Some(json!({"sttProviderId": local_id}))).await;
    assert_eq!(provider_only.status, 200);
    let notes = provider_only.json["notes"].as_array().unwrap();
    assert!(notes.iter().any(|n| n.as_str().unwrap().contains("lists no such model")), "{notes:?}");
    assert_eq!(provider_only.json["transcription"]["providerName"], "openai", "detection steps in");

    // Nobody else changes the instance's settings.
    tab.send("PATCH", "/api/v1/admin/settings", Some(json!({"registrationOpen": true}))).await;
    let mut other = server.tab();
    other.register("other", PASSWORD).await;
    assert_eq!(other.get("/api/v1/admin/speech").await.status, 403);
    assert_eq!(other.send("PUT", "/api/v1/admin/speech", Some(json!({}))).await.status, 403);
    assert_eq!(other.get("/api/v1/speech").await.json["voice"], "alloy", "the default voice");
}

#[tokio::test]
async fn bad_recordings_and_failing_speech_services_get_clear_errors_and_lose_nothing() {
    let voice = FakeModel::builder().speech_models().start().await.unwrap();
    let db = TestDb::new();
    let server = Server::start(&db, &[("LLOOMA_SPEECH_TIMEOUT_SECS", "1")]);
    let mut tab = server.tab();
    tab.register("root", PASSWORD).await;
    add_provider(&mut tab, "voice", &voice.base_url()).await;

    // Nothing recorded, a type no service reads, a recording past 25 MiB: refused here.
    let (status, body) = dictate(&tab, Some("audio/webm"), Vec::new()).await;
    assert_eq!((status, body["error"].as_str()), (422, Some("empty_recording")), "{body}");
    assert!(body["message"].as_str().unwrap().contains("record again"), "{body}");
    let (status, body) = dictate(&tab, Some("application/json"), b"{}".to_vec()).await;
    assert_eq!((status, body["error"].as_str()), (415, Some("unsupported_recording")), "{body}");
    let (status, body) = dictate(&tab, None, RECORDING.to_vec()).await;
    assert_eq!((status, body["error"].as_str()), (415, Some("unsupported_recording")), "{body}");
    let (status, body) = dictate(&tab, Some("audio/webm"), vec![7; 25 * 1024 * 1024 + 1]).await;
    assert_eq!((status, body["error"].as_str()), (413, Some("recording_too_large")), "{body}");
    assert!(body["message"].as_str().unwrap().contains("25 MB"), "{body}");
    assert!(voice.recordings().is_empty(), "nothing refused reached the provider");

    // Texts: none, or longer than one request may read.
    let (status, _, body) = speak(&tab, json!({"text": "  "})).await;
    assert_eq!((status, error_of(&body).0.as_str()), (400, "invalid_text"));
    let (status, _, body) = speak(&tab, json!({"text": "a".repeat(4097)})).await;
    assert_eq!((status, error_of(&body).0.as_str()), (400, "text_too_long"));
    let (status, _, body) = speak(&tab, json!({"text": "hi", "voice": "no such\nvoice"})).await;
    assert_eq!((status, error_of(&body).0.as_str()), (400, "invalid_voice"));

    // The service is down: the person reads that, and may send the same recording again.
    voice.set_audio(Audio::Down);
    let (status, body) = dictate(&tab, Some("audio/webm"), RECORDING.to_vec()).await;
    assert_eq!((status, body["error"].as_str()), (422, Some("speech_failed")), "{body}");
    let message = body["message"].as_str().unwrap();
    assert!(message.contains("Nothing was lost") && message.contains("voice"), "{message}");
    assert!(!message.contains("fake model"), "the provider's own words stay in the log");
    let (status, _, body) = speak(&tab, json!({"text": "hello"})).await;
    assert_eq!((status, error_of(&body).0.as_str()), (422, "speech_failed"));

    // Slow: cut at the time allowed (LLOOMA_SPEECH_TIMEOUT_SECS).
    voice.set_audio(Audio::Slow(5_000));
    let started = std::time::Instant::now();
    let (status, body) = dictate(&tab, Some("audio/webm"), RECORDING.to_vec()).await;
    assert_eq!((status, body["error"].as_str()), (422, Some("speech_timeout")), "{body}");
    assert!(body["message"].as_str().unwrap().contains("within 1 seconds"), "{body}");
    assert!(
        started.elapsed() < std::time::Duration::from_secs(4),
        "it did not wait for the provider"
    );
    let (status, _, body) = speak(&tab, json!({"text": "hello"})).await;
    assert_eq!((status, error_of(&body).0.as_str()), (422, "speech_timeout"));

    // Answers that are not what was asked for, or far too large.
    voice.set_audio(Audio::Garbage);
    let (status, body) = dictate(&tab, Some("audio/webm"), RECORDING.to_vec()).await;
    assert_eq!((status, body["error"].as_str()), (422, Some("speech_not_understood")), "{body}");
    let (status, _, body) = speak(&tab, json!({"text": "hello"})).await;
    assert_eq!((status, error_of(&body).0.as_str()), (422, "speech_not_understood"));
    voice.set_audio(Audio::Huge(11 * 1024 * 1024));
    let (status, body) = dictate(&tab, Some("audio/webm"), RECORDING.to_vec()).await;
    assert_eq!((status, body["error"].as_str()), (422, Some("speech_not_understood")), "{body}");
    let (status, _, body) = speak(&tab, json!({"text": "hello"})).await;
    assert_eq!((status, error_of(&body).0.as_str()), (422, "speech_not_understood"));

    // Back up: the same recording is written down.
    voice.set_audio(Audio::Answer);
    let (status, body) = dictate(&tab, Some("audio/webm"), RECORDING.to_vec()).await;
    assert_eq!(status, 200, "{body}");
    assert_eq!(voice.recordings().last().unwrap().audio, RECORDING);

    // A provider that cannot be reached at all.
    let closed = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
    let gone = format!("http://{}/v1", closed.local_addr().unwrap());
    drop(closed);
    let gone_id = add_provider(&mut tab, "gone", &gone).await;
    tab.send(
        "PUT",
        "/api/v1/admin/speech",
        Some(json!({"sttProviderId": gone_id, "sttModel": "whisper-1"})),
    )
    .await;
    let (status, body) = dictate(&tab, Some("audio/webm"), RECORDING.to_vec()).await;
    assert_eq!((status, body["error"].as_str()), (422, Some("speech_unreachable")), "{body}");
    assert!(body["message"].as_str().unwrap().contains("gone"), "{body}");
}

#[tokio::test]
async fn an_empty_transcript_says_nothing_was_heard() {
    let voice = FakeModel::builder().speech_models().transcript(" ").start().await.unwrap();
    let db = TestDb::new();
    let server = Server::start(&db, &[]);
    let mut tab = server.tab();
    tab.register("root", PASSWORD).await;
    add_provider(&mut tab, "voice", &voice.base_url()).await;
    let (status, body) = dictate(&tab, Some("audio/webm"), RECORDING.to_vec()).await;
    assert_eq!((status, body["error"].as_str()), (422, Some("nothing_heard")), "{body}");
}

#[tokio::test]
async fn a_spoken_turn_refuses_mcp_tools_without_a_card_and_the_app_s_own_tools_still_run() {
    let Some(peer) = crate::peers::gateway(None) else { return };
    let model = FakeModel::start([]).await.unwrap();
    let db = TestDb::new();
    let server = Server::start(&db, &[("MCP_ALLOWED_ORIGINS", &peer.origin())]);
    let mut tab = server.tab();
    tab.register("root", PASSWORD).await;
    let provider_id = add_provider(&mut tab, "fake", &model.base_url()).await;
    let conversation = tab
        .post(
            "/api/v1/conversations",
            json!({"title": "Voice", "providerId": provider_id, "model": "fake-model"}),
        )
        .await;
    let id = conversation.json["id"].as_str().unwrap().to_owned();
    let added =
        tab.post("/api/v1/mcp/servers", json!({"label": "hub", "address": peer.url()})).await;
    let turn_on = crate::conversations::model_name_in(&added.json, "home-assistant-turn_on");
    tab.send("PATCH", &format!("/api/v1/conversations/{id}"), Some(json!({"mcpEnabled": true})))
        .await;
    model.push(Reply::tool_call(&turn_on, json!({"entity_id": "light.kitchen"})));
    model.push(Reply::tool_call("current_date", json!({})));
    model.push(Reply::text("I cannot switch lights by voice, but today is a fine day."));

    let mut events = Events::open(&tab, &format!("/api/v1/conversations/{id}/events"), None).await;
    let sent = tab
        .post(
            &format!("/api/v1/conversations/{id}/messages"),
            json!({"content": "turn on the kitchen light", "spoken": true}),
        )
        .await;
    assert_eq!(sent.status, 202, "{sent:?}");
    assert_eq!(sent.json["spoken"], true);
    let mut names = Vec::new();
    let mut steps = Vec::new();
    let mut text = String::new();
    loop {
        let (name, data) = events.next().await;
        match name.as_str() {
            "start" => assert_eq!(data["spoken"], true, "{data}"),
            "step" => steps.push(data.clone()),
            "text" => text.push_str(data["delta"].as_str().unwrap()),
            _ => {}
        }
        names.push(name.clone());
        if name == "end" {
            assert_eq!(data["state"], "done");
            break;
        }
    }
    assert!(!names.contains(&"approval".to_owned()), "no card: {names:?}");
    assert_eq!(tab.get("/api/v1/approvals").await.json, json!([]));
    assert_eq!(text, "I cannot switch lights by voice, but today is a fine day.");
    assert_eq!(steps.len(), 2, "{steps:?}");
    let refused = &steps[0];
    assert_eq!(refused["state"], "refused", "{refused}");
    assert_eq!(refused["mcp"], true);
    assert_eq!(refused["server"], "hub");
    assert!(refused["message"].as_str().unwrap().contains("spoken turn"), "{refused}");
    assert_eq!(steps[1]["tool"], "current_date");
    assert_eq!(steps[1]["state"], "done");
    // The model was told why, and the tools were offered (it could try).
    let requests = model.chat_bodies();
    assert!(serde_json::to_string(&requests[0]["tools"]).unwrap().contains(&turn_on));
    let told = serde_json::to_string(&requests[1]["messages"]).unwrap();
    assert!(told.contains("cannot be called in a spoken turn"), "{told}");

    // After a reload the timeline says the same.
    let detail = tab.get(&format!("/api/v1/conversations/{id}")).await;
    let reply = &detail.json["replies"][0];
    assert_eq!(reply["spoken"], true, "{reply}");
    let stored: Vec<&Value> = reply["parts"]
        .as_array()
        .unwrap()
        .iter()
        .filter(|p| p["kind"] == "step")
        .map(|p| &p["step"])
        .collect();
    assert_eq!(stored[0]["state"], "refused");
    assert_eq!(stored[0]["message"], refused["message"]);

    // A turn typed afterwards asks as usual: its MCP call gets a card.
    model.push(Reply::tool_call(&turn_on, json!({"entity_id": "light.kitchen"})));
    model.push(Reply::text("Done."));
    tab.post(&format!("/api/v1/conversations/{id}/messages"), json!({"content": "now typed"}))
        .await;
    let card = loop {
        let (name, data) = events.next().await;
        if name == "start" {
            assert_eq!(data.get("spoken"), None, "a typed turn is not spoken: {data}");
        }
        if name == "approval" {
            break data;
        }
    };
    let call_id = card["card"]["id"].as_str().unwrap().to_owned();
    tab.post(&format!("/api/v1/approvals/{call_id}/answer"), json!({"choice": "refuse"})).await;
    loop {
        if events.next().await.0 == "end" {
            break;
        }
    }
}
