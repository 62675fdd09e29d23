//! The fake model over real HTTP: what it sends for the replies the provider tests don't
//! read (whole completions, fallbacks, unknown routes), and the binary.

// Helpers outside `#[test]` functions are not covered by clippy's allow-unwrap-in-tests; a
// failed setup step should panic there too.
#![expect(clippy::unwrap_used, reason = "test helpers panic on failed setup")]

use std::process::Stdio;
use std::time::Duration;

use llooma_fake_model::{FakeModel, FakeToolCall, Fallback, Reply};
use serde_json::{Value, json};
use tokio::io::{AsyncBufReadExt as _, BufReader};

async fn post(url: &str, body: &Value) -> (u16, String) {
    let response = reqwest::Client::new()
        .post(url)
        .header("content-type", "application/json")
        .header("authorization", "Bearer test-key")
        .body(body.to_string())
        .send()
        .await
        .unwrap();
    let status = response.status().as_u16();
    (status, response.text().await.unwrap())
}

fn chat(stream: bool, user: &str) -> Value {
    json!({
        "model": "fake-model",
        "stream": stream,
        "messages": [{"role": "system", "content": "sys"}, {"role": "user", "content": user}],
    })
}

/// The concatenated `delta.content` of an SSE body, and whether it ended with `[DONE]`.
fn streamed_text(body: &str) -> (String, bool) {
    let mut text = String::new();
    let mut done = false;
    for data in body.lines().filter_map(|l| l.strip_prefix("data: ")) {
        if data == "[DONE]" {
            done = true;
            continue;
        }
        let chunk: Value = serde_json::from_str(data).unwrap();
        if let Some(piece) = chunk.pointer("/choices/0/delta/content").and_then(Value::as_str) {
            text.push_str(piece);
        }
    }
    (text, done)
}

#[tokio::test]
async fn a_whole_completion_has_the_openai_shape() {
    let model =
        FakeModel::start([Reply::tool_call("f", json!({"a": 1})).with_text("calling").usage(5, 6)])
            .await
            .unwrap();
    let url = format!("{}/chat/completions", model.base_url());
    let (status, body) = post(&url, &chat(false, "hi")).await;
    assert_eq!(status, 200);
    let body: Value = serde_json::from_str(&body).unwrap();
    assert_eq!(body["object"], "chat.completion");
    assert_eq!(body["choices"][0]["finish_reason"], "tool_calls");
    assert_eq!(body["choices"][0]["message"]["content"], "calling");
    assert_eq!(
        body["choices"][0]["message"]["tool_calls"],
        json!([{"id": "call_0", "type": "function", "function": {"name": "f", "arguments": "{\"a\":1}"}}])
    );
    assert_eq!(
        body["usage"],
        json!({"prompt_tokens": 5, "completion_tokens": 6, "total_tokens": 11})
    );
    let recorded = model.requests();
    assert_eq!(recorded[0].authorization.as_deref(), Some("Bearer test-key"));
    assert_eq!(recorded[0].body, Some(chat(false, "hi")));
}

#[tokio::test]
async fn an_empty_script_fails_loudly_or_echoes_as_configured() {
    let strict = FakeModel::start([]).await.unwrap();
    let (status, body) =
        post(&format!("{}/chat/completions", strict.base_url()), &chat(true, "hi")).await;
    assert_eq!(status, 500);
    assert!(body.contains("no reply left"), "{body}");

    let echo =
        FakeModel::builder().fallback(Fallback::Echo { chunk_delay_ms: 0 }).start().await.unwrap();
    let (status, body) =
        post(&format!("{}/chat/completions", echo.base_url()), &chat(true, "say it back")).await;
    assert_eq!(status, 200);
    assert_eq!(streamed_text(&body), ("say it back".to_owned(), true));
}

#[tokio::test]
async fn unknown_routes_are_404_and_recorded() {
    let model = FakeModel::start([]).await.unwrap();
    let (status, _) = post(&format!("{}/completions", model.base_url()), &json!({})).await;
    assert_eq!(status, 404);
    assert_eq!(model.requests()[0].path, "/v1/completions");
}

#[tokio::test]
async fn pushed_replies_are_served_in_order() {
    let model = FakeModel::start([Reply::text("first")]).await.unwrap();
    model.push(Reply::tool_calls(vec![FakeToolCall::raw("g", "not json").with_id("x")]));
    assert_eq!(model.remaining(), 2);
    let url = format!("{}/chat/completions", model.base_url());
    assert_eq!(streamed_text(&post(&url, &chat(true, "a")).await.1).0, "first");
    let (_, body) = post(&url, &chat(true, "b")).await;
    assert!(body.contains(r#""arguments":"not json""#), "{body}");
    assert_eq!(model.remaining(), 0);
}

#[tokio::test]
async fn the_binary_prints_its_base_url_and_echoes() {
    let mut child = tokio::process::Command::new(env!("CARGO_BIN_EXE_llooma-fake-model"))
        .args(["--port", "0", "--chunk-delay-ms", "0"])
        .stdout(Stdio::piped())
        .stderr(Stdio::null())
        .kill_on_drop(true)
        .spawn()
        .unwrap();
    let stdout = child.stdout.take().unwrap();
    let mut lines = BufReader::new(stdout).lines();
    let base_url = tokio::time::timeout(Duration::from_secs(20), lines.next_line())
        .await
        .unwrap()
        .unwrap()
        .unwrap();
    assert!(base_url.starts_with("http://127.0.0.1:") && base_url.ends_with("/v1"), "{base_url}");
    let (status, body) =
        post(&format!("{base_url}/chat/completions"), &chat(true, "hello from a person")).await;
    assert_eq!(status, 200);
    assert_eq!(streamed_text(&body).0, "hello from a person");
    let models = reqwest::get(format!("{base_url}/models")).await.unwrap().text().await.unwrap();
    assert!(models.contains("fake-model"), "{models}");
    child.kill().await.unwrap();
}
