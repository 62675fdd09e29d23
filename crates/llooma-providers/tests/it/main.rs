//! The provider client against the fake model, over real HTTP on 127.0.0.1.
//!
//! Providers have no purpose of their own in `llooma-policy` yet, so these tests reach the
//! fake model through the page-reading purpose's allow-list (`Purpose::Fetch`).

// Helpers outside `#[test]` functions are not covered by clippy's allow-unwrap-in-tests; a
// failed setup step should panic there too.
#![expect(clippy::unwrap_used, reason = "test helpers panic on failed setup")]

use std::future::Future;
use std::sync::Arc;
use std::time::Duration;

use futures::StreamExt as _;
use llooma_fake_model::{FakeModel, FakeToolCall, ReasoningField, Reply};
use llooma_net::{NetClient, OutboundPolicy, Purpose};
use llooma_providers::{
    ChatEvent, ChatReply, ChatRequest, FinishReason, Message, ProviderClient, ProviderConfig,
    ProviderError, Timeouts, ToolCall, ToolChoice, ToolDefinition,
};
use llooma_vault::Secret;
use serde_json::json;

const KEY: &str = "sk-llooma-test-9f8e7d6c5b4a3210";

/// Short enough that the timeout tests end quickly, long enough for a loaded machine to
/// serve loopback requests.
fn timeouts() -> Timeouts {
    Timeouts {
        connect: Duration::from_millis(500),
        first_byte: Duration::from_millis(800),
        idle: Duration::from_millis(500),
    }
}

fn config(base_url: &str) -> ProviderConfig {
    ProviderConfig::new(base_url).with_api_key(Secret::new(KEY)).with_timeouts(timeouts())
}

fn net_for(origin: &str, config: &ProviderConfig) -> NetClient {
    let policy = Arc::new(OutboundPolicy::from_allow_lists(None, Some(origin), None).unwrap());
    config.configure_net_client(NetClient::builder(policy, Purpose::Fetch)).build().unwrap()
}

fn client(model: &FakeModel) -> ProviderClient {
    client_with(model, config(&model.base_url()))
}

fn client_with(model: &FakeModel, config: ProviderConfig) -> ProviderClient {
    ProviderClient::new(net_for(&model.origin(), &config), config).unwrap()
}

fn hello() -> ChatRequest {
    ChatRequest::new("fake-model", vec![Message::system("Be brief."), Message::user("Hello?")])
}

/// Bounds every test: a hang is a failure, not a stuck CI job.
async fn finishes<T>(future: impl Future<Output = T>) -> T {
    match tokio::time::timeout(Duration::from_secs(20), future).await {
        Ok(value) => value,
        Err(_) => panic!("did not finish within 20 s"),
    }
}

async fn events(client: &ProviderClient, request: &ChatRequest) -> Vec<ChatEvent> {
    finishes(async {
        let mut stream = client.chat(request).await.unwrap();
        let mut events = Vec::new();
        while let Some(event) = stream.next_event().await.unwrap() {
            events.push(event);
        }
        events
    })
    .await
}

async fn reply(client: &ProviderClient, request: &ChatRequest) -> Result<ChatReply, ProviderError> {
    finishes(async { client.chat(request).await?.collect().await }).await
}

/// The key appears in neither the message nor the `Debug` form.
fn assert_keyless(err: &ProviderError) {
    let shown = format!("{err} / {err:?}");
    assert!(!shown.contains(KEY), "the key leaked into an error: {shown}");
    assert!(!shown.contains('\n'), "an error spans several lines: {shown}");
}

fn weather_tool() -> ToolDefinition {
    ToolDefinition {
        name: "get_weather".into(),
        description: Some("Current weather for a city".into()),
        parameters: json!({
            "type": "object",
            "properties": {"city": {"type": "string"}},
            "required": ["city"],
        }),
    }
}

#[tokio::test]
async fn streamed_text_arrives_in_pieces_then_usage_then_finished() {
    let model =
        FakeModel::start([Reply::text("Hello there, streaming world").chunks(4)]).await.unwrap();
    let events = events(&client(&model), &hello()).await;
    let deltas: Vec<&str> = events
        .iter()
        .filter_map(|e| match e {
            ChatEvent::TextDelta(text) => Some(text.as_str()),
            _ => None,
        })
        .collect();
    assert_eq!(deltas.len(), 4, "{events:?}");
    assert_eq!(deltas.concat(), "Hello there, streaming world");
    let tail = &events[events.len() - 2..];
    match tail {
        [ChatEvent::Usage(usage), ChatEvent::Finished { reason: FinishReason::Stop }] => {
            // The fake counts words: 3 in the prompt, 4 in the answer.
            assert_eq!(
                (usage.prompt_tokens, usage.completion_tokens, usage.total_tokens),
                (3, 4, 7)
            );
        }
        other => panic!("expected usage then finished, got {other:?}"),
    }
}

#[tokio::test]
async fn what_a_request_used_is_the_report_or_an_estimate_marked_as_one() {
    let answer = "word ".repeat(100);
    let model = FakeModel::start([
        Reply::text(&answer).usage_cached(40, 7, 30),
        Reply::text(&answer).without_usage(),
        Reply::text(&answer).without_usage().ignoring_stream(),
    ])
    .await
    .unwrap();
    let client = client(&model);
    let reported = reply(&client, &hello()).await.unwrap();
    assert!(!reported.metered.estimated);
    let usage = reported.metered.usage;
    assert_eq!((usage.prompt_tokens, usage.completion_tokens), (40, 7));
    assert_eq!(usage.cached_prompt_tokens, Some(30));

    for _ in 0..2 {
        let estimated = reply(&client, &hello()).await.unwrap();
        assert_eq!(estimated.usage, None);
        assert!(estimated.metered.estimated);
        // A quarter of the characters: 500 of answer, and the request's JSON body.
        assert_eq!(estimated.metered.usage.completion_tokens, 125);
        let sent = serde_json::to_string(&model.chat_bodies()[0]).unwrap().len() as u64;
        let prompt = estimated.metered.usage.prompt_tokens;
        assert!(prompt >= sent / 4 - 4 && prompt <= sent / 4 + 4, "{prompt} for {sent} bytes");
    }
}

#[tokio::test]
async fn an_answer_read_in_part_is_estimated_from_what_was_read() {
    let model =
        FakeModel::start([Reply::text("abcd".repeat(50)).chunks(10).then_stall()]).await.unwrap();
    let mut stream = finishes(client(&model).chat(&hello())).await.unwrap();
    let mut read = 0;
    while read < 80 {
        if let Some(ChatEvent::TextDelta(text)) = finishes(stream.next_event()).await.unwrap() {
            read += text.len();
        }
    }
    let metered = stream.metered();
    assert!(metered.estimated, "nothing was reported: {metered:?}");
    assert_eq!(metered.usage.completion_tokens, (read as u64).div_ceil(4));
}

#[tokio::test]
async fn usage_is_asked_for_only_when_configured() {
    let model = FakeModel::start([Reply::text("a").usage(11, 22), Reply::text("b")]).await.unwrap();
    let with = reply(&client(&model), &hello()).await.unwrap();
    assert_eq!(with.usage.map(|u| (u.prompt_tokens, u.completion_tokens)), Some((11, 22)));

    let mut config = config(&model.base_url());
    config.request_usage = false;
    let without = reply(&client_with(&model, config), &hello()).await.unwrap();
    assert_eq!(without.usage, None);
    let bodies = model.chat_bodies();
    assert_eq!(bodies[0]["stream_options"], json!({"include_usage": true}));
    assert!(bodies[1].get("stream_options").is_none());
}

#[tokio::test]
async fn tool_call_fragments_are_assembled_into_complete_calls() {
    let calls = vec![
        FakeToolCall::new("get_weather", json!({"city": "Oslo", "unit": "celsius"}))
            .with_id("call_oslo"),
        FakeToolCall::new("get_weather", json!({"city": "Zürich"})).with_id("call_zurich"),
    ];
    let model = FakeModel::start([
        Reply::tool_calls(calls.clone()).with_text("Checking both.").chunks(6),
        Reply::tool_calls(calls.clone()).chunks(5).interleaved(),
    ])
    .await
    .unwrap();
    let client = client(&model);
    let expected: Vec<ToolCall> = calls
        .iter()
        .map(|c| ToolCall {
            id: c.id.clone().unwrap(),
            name: c.name.clone(),
            arguments_json: c.arguments.clone(),
        })
        .collect();
    for round in ["one after the other", "interleaved"] {
        let reply = reply(&client, &hello().with_tools(vec![weather_tool()])).await.unwrap();
        assert_eq!(reply.tool_calls, expected, "{round}");
        assert_eq!(reply.finish_reason, Some(FinishReason::ToolCalls), "{round}");
    }
    let first = model.chat_bodies().remove(0);
    assert_eq!(first["tools"][0]["function"]["name"], "get_weather");
}

#[tokio::test]
async fn tool_calls_come_after_the_text_and_before_finished() {
    let model = FakeModel::start([Reply::tool_call("get_weather", json!({"city": "Oslo"}))
        .with_text("Let me look.")
        .chunks(3)])
    .await
    .unwrap();
    let events = events(&client(&model), &hello()).await;
    let kinds: Vec<&str> = events
        .iter()
        .map(|e| match e {
            ChatEvent::TextDelta(_) => "text",
            ChatEvent::ReasoningDelta(_) => "reasoning",
            ChatEvent::ToolCall(_) => "call",
            ChatEvent::Usage(_) => "usage",
            ChatEvent::Finished { .. } => "finished",
        })
        .collect();
    assert_eq!(kinds, ["text", "text", "text", "call", "usage", "finished"]);
    // The fake names a call without an id `call_<index>`, as some servers do.
    assert!(matches!(&events[3], ChatEvent::ToolCall(call) if call.id == "call_0"));
}

#[tokio::test]
async fn reasoning_is_read_from_either_field() {
    let model = FakeModel::start([
        Reply::reasoning("First, think.", "Answer.").chunks(3),
        Reply::reasoning("Hmm.", "Done.").reasoning_field(ReasoningField::Reasoning),
    ])
    .await
    .unwrap();
    let client = client(&model);
    let deepseek_style = reply(&client, &hello()).await.unwrap();
    assert_eq!(
        (deepseek_style.reasoning.as_str(), deepseek_style.text.as_str()),
        ("First, think.", "Answer.")
    );
    let openrouter_style = reply(&client, &hello()).await.unwrap();
    assert_eq!(
        (openrouter_style.reasoning.as_str(), openrouter_style.text.as_str()),
        ("Hmm.", "Done.")
    );
}

#[tokio::test]
async fn the_request_carries_messages_tools_choice_and_the_key_as_bearer() {
    let model = FakeModel::start([Reply::text("ok")]).await.unwrap();
    let request = ChatRequest::new(
        "fake-model",
        vec![
            Message::system("Be brief."),
            Message::user("Weather in Oslo?"),
            Message::Assistant {
                content: None,
                tool_calls: vec![ToolCall {
                    id: "call_1".into(),
                    name: "get_weather".into(),
                    arguments_json: r#"{"city":"Oslo"}"#.into(),
                }],
            },
            Message::tool("call_1", "8°C, rain"),
        ],
    )
    .with_tools(vec![weather_tool()])
    .with_tool_choice(ToolChoice::Auto);
    reply(&client(&model), &request).await.unwrap();

    let requests = model.requests();
    assert_eq!(requests.len(), 1);
    assert_eq!(requests[0].path, "/v1/chat/completions");
    assert_eq!(requests[0].authorization.as_deref(), Some(format!("Bearer {KEY}").as_str()));
    let body = requests[0].body.clone().unwrap();
    assert_eq!(body["model"], "fake-model");
    assert_eq!(body["stream"], true);
    assert_eq!(body["tool_choice"], "auto");
    assert_eq!(
        body["tools"],
        json!([{"type": "function", "function": {
            "name": "get_weather",
            "description": "Current weather for a city",
            "parameters": weather_tool().parameters,
        }}])
    );
    assert_eq!(
        body["messages"],
        json!([
            {"role": "system", "content": "Be brief."},
            {"role": "user", "content": "Weather in Oslo?"},
            {"role": "assistant", "content": null, "tool_calls": [{
                "id": "call_1", "type": "function",
                "function": {"name": "get_weather", "arguments": "{\"city\":\"Oslo\"}"},
            }]},
            {"role": "tool", "tool_call_id": "call_1", "content": "8°C, rain"},
        ])
    );
}

#[tokio::test]
async fn no_key_means_no_authorization_header() {
    let model = FakeModel::start([Reply::text("ok")]).await.unwrap();
    let config = ProviderConfig::new(model.base_url()).with_timeouts(timeouts());
    reply(&client_with(&model, config), &hello()).await.unwrap();
    assert_eq!(model.requests()[0].authorization, None);
}

#[tokio::test]
async fn models_are_listed() {
    let model = FakeModel::builder().models(["small", "large"]).start().await.unwrap();
    let models = finishes(client(&model).list_models()).await.unwrap();
    let ids: Vec<&str> = models.iter().map(|m| m.id.as_str()).collect();
    assert_eq!(ids, ["small", "large"]);
    let requests = model.requests();
    assert_eq!((requests[0].method.as_str(), requests[0].path.as_str()), ("GET", "/v1/models"));
    assert_eq!(requests[0].authorization.as_deref(), Some(format!("Bearer {KEY}").as_str()));
}

#[tokio::test]
async fn the_event_stream_form_yields_the_same_events() {
    let model = FakeModel::start([Reply::text("one two").chunks(2)]).await.unwrap();
    let stream = finishes(client(&model).chat(&hello())).await.unwrap();
    let events: Vec<ChatEvent> =
        finishes(stream.into_stream().map(Result::unwrap).collect::<Vec<_>>()).await;
    assert_eq!(events[0], ChatEvent::TextDelta("one ".into()));
    assert_eq!(events[1], ChatEvent::TextDelta("two".into()));
    assert!(matches!(events.last(), Some(ChatEvent::Finished { .. })));
}

#[tokio::test]
async fn pauses_shorter_than_the_idle_timeout_are_fine() {
    let model = FakeModel::start([Reply::text("slow but steady").chunks(3).chunk_delay_ms(150)])
        .await
        .unwrap();
    assert_eq!(reply(&client(&model), &hello()).await.unwrap().text, "slow but steady");
}

#[tokio::test]
async fn a_server_that_ignores_stream_true_gives_the_same_events() {
    let model = FakeModel::start([
        Reply::reasoning("thinking", "whole answer").usage(2, 3).ignoring_stream(),
        Reply::tool_call("get_weather", json!({"city": "Oslo"})).ignoring_stream(),
    ])
    .await
    .unwrap();
    let client = client(&model);
    let text = reply(&client, &hello()).await.unwrap();
    assert_eq!((text.reasoning.as_str(), text.text.as_str()), ("thinking", "whole answer"));
    assert_eq!(text.usage.map(|u| u.total_tokens), Some(5));
    assert_eq!(text.finish_reason, Some(FinishReason::Stop));
    let call = reply(&client, &hello()).await.unwrap();
    assert_eq!(
        call.tool_calls,
        vec![ToolCall {
            id: "call_0".into(),
            name: "get_weather".into(),
            arguments_json: r#"{"city":"Oslo"}"#.into()
        }]
    );
}

// ---- errors: each distinct, prompt, keyless ----

#[tokio::test]
async fn a_refused_key_is_reported_as_such_without_echoing_it() {
    // Providers quote the key they were given; this one quotes all of it.
    let body =
        json!({"error": {"message": format!("Incorrect API key provided: {KEY}.\nSee docs."),
                                "type": "invalid_request_error"}})
        .to_string();
    let model =
        FakeModel::start([Reply::http_error(401, body), Reply::http_error(403, "forbidden")])
            .await
            .unwrap();
    let client = client(&model);
    for expected in [401, 403] {
        let err = reply(&client, &hello()).await.unwrap_err();
        assert_keyless(&err);
        match &err {
            ProviderError::KeyRefused { status, .. } => assert_eq!(*status, expected),
            other => panic!("expected KeyRefused, got {other:?}"),
        }
        assert!(err.to_string().contains("refused the key"), "{err}");
        assert!(!err.is_transient());
    }
}

#[tokio::test]
async fn rate_limiting_carries_retry_after() {
    let model = FakeModel::start([
        Reply::http_error(429, r#"{"error":{"message":"Rate limit reached"}}"#).retry_after("3"),
        Reply::http_error(429, "slow down"),
    ])
    .await
    .unwrap();
    let client = client(&model);
    match reply(&client, &hello()).await.unwrap_err() {
        ProviderError::RateLimited { retry_after, excerpt } => {
            assert_eq!(retry_after, Some(Duration::from_secs(3)));
            assert_eq!(excerpt, "Rate limit reached");
        }
        other => panic!("expected RateLimited, got {other:?}"),
    }
    let err = reply(&client, &hello()).await.unwrap_err();
    assert!(err.is_transient());
    match err {
        ProviderError::RateLimited { retry_after: None, .. } => {}
        other => panic!("expected RateLimited without Retry-After, got {other:?}"),
    }
}

#[tokio::test]
async fn server_errors_and_rejections_are_told_apart() {
    let long_body = format!("upstream exploded\n{}", "x".repeat(5000));
    let model = FakeModel::start([
        Reply::http_error(503, long_body),
        Reply::http_error(404, r#"{"error":{"message":"The model `nope` does not exist"}}"#),
    ])
    .await
    .unwrap();
    let client = client(&model);
    let err = reply(&client, &hello()).await.unwrap_err();
    assert_keyless(&err);
    match &err {
        ProviderError::ServerError { status: 503, excerpt } => {
            assert!(excerpt.starts_with("upstream exploded x"), "{excerpt}");
            assert!(excerpt.chars().count() <= 201, "excerpt too long: {}", excerpt.len());
        }
        other => panic!("expected ServerError, got {other:?}"),
    }
    match reply(&client, &hello()).await.unwrap_err() {
        ProviderError::Rejected { status: 404, excerpt } => {
            assert_eq!(excerpt, "The model `nope` does not exist")
        }
        other => panic!("expected Rejected, got {other:?}"),
    }
}

#[tokio::test]
async fn a_line_that_is_not_json_is_a_malformed_stream() {
    let model = FakeModel::start([Reply::text("partial").then_garbage()]).await.unwrap();
    let err = reply(&client(&model), &hello()).await.unwrap_err();
    assert_keyless(&err);
    assert!(matches!(err, ProviderError::MalformedStream { .. }), "{err:?}");
}

#[tokio::test]
async fn a_stream_that_ends_without_finishing_is_reported() {
    let model =
        FakeModel::start([Reply::text("half an answ").chunks(2).then_end_early()]).await.unwrap();
    let mut stream = finishes(client(&model).chat(&hello())).await.unwrap();
    // The text that did arrive is still handed out before the error.
    let mut text = String::new();
    let err = finishes(async {
        loop {
            match stream.next_event().await {
                Ok(Some(ChatEvent::TextDelta(piece))) => text.push_str(&piece),
                Ok(other) => panic!("unexpected {other:?}"),
                Err(err) => break err,
            }
        }
    })
    .await;
    assert_eq!(text, "half an answ");
    assert!(matches!(err, ProviderError::StreamEnded), "{err:?}");
    // After the error the stream is over.
    assert!(matches!(stream.next_event().await, Ok(None)));
}

#[tokio::test]
async fn a_connection_cut_mid_stream_is_reported() {
    let model =
        FakeModel::start([Reply::text("cut here").chunks(2).then_disconnect()]).await.unwrap();
    let err = reply(&client(&model), &hello()).await.unwrap_err();
    assert_keyless(&err);
    assert!(matches!(err, ProviderError::StreamInterrupted { .. }), "{err:?}");
}

#[tokio::test]
async fn silence_before_the_first_byte_times_out() {
    let model = FakeModel::start([Reply::stall_before_headers()]).await.unwrap();
    let err = reply(&client(&model), &hello()).await.unwrap_err();
    assert_keyless(&err);
    match err {
        ProviderError::FirstByteTimeout { after, .. } => assert_eq!(after, timeouts().first_byte),
        other => panic!("expected FirstByteTimeout, got {other:?}"),
    }
}

#[tokio::test]
async fn silence_in_the_middle_of_a_stream_times_out() {
    let model = FakeModel::start([Reply::text("and then").then_stall()]).await.unwrap();
    let err = reply(&client(&model), &hello()).await.unwrap_err();
    assert_keyless(&err);
    match err {
        ProviderError::IdleTimeout { after, .. } => assert_eq!(after, timeouts().idle),
        other => panic!("expected IdleTimeout, got {other:?}"),
    }
}

#[tokio::test]
async fn a_provider_that_is_down_is_unreachable() {
    // A port that was just free: nothing listens there.
    let port = {
        let listener = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
        listener.local_addr().unwrap().port()
    };
    let origin = format!("http://127.0.0.1:{port}");
    let config = config(&format!("{origin}/v1"));
    let client = ProviderClient::new(net_for(&origin, &config), config).unwrap();
    let err = reply(&client, &hello()).await.unwrap_err();
    assert_keyless(&err);
    assert!(matches!(err, ProviderError::Unreachable { .. }), "{err:?}");
    let err = finishes(client.list_models()).await.unwrap_err();
    assert!(matches!(err, ProviderError::Unreachable { .. }), "{err:?}");
}

#[tokio::test]
async fn a_connection_that_is_never_established_times_out() {
    // A listener with a backlog of 0 that never accepts: once its queue is full, the kernel
    // drops further SYNs, so a new connection neither succeeds nor fails.
    let socket = tokio::net::TcpSocket::new_v4().unwrap();
    socket.bind("127.0.0.1:0".parse().unwrap()).unwrap();
    let listener = socket.listen(0).unwrap();
    let addr = listener.local_addr().unwrap();
    let mut fillers = Vec::new();
    loop {
        match tokio::time::timeout(Duration::from_millis(200), tokio::net::TcpStream::connect(addr))
            .await
        {
            Ok(Ok(stream)) => fillers.push(stream),
            Ok(Err(err)) => panic!("filling the backlog failed: {err}"),
            Err(_) => break,
        }
        assert!(fillers.len() < 64, "the backlog never filled up");
    }
    let origin = format!("http://{addr}");
    let config = config(&format!("{origin}/v1"));
    let client = ProviderClient::new(net_for(&origin, &config), config).unwrap();
    let err = reply(&client, &hello()).await.unwrap_err();
    assert_keyless(&err);
    assert!(matches!(err, ProviderError::ConnectTimeout { .. }), "{err:?}");
    drop(listener);
}

#[tokio::test]
async fn an_answer_over_the_size_cap_stops_with_body_too_large() {
    let model = FakeModel::start([Reply::text("x".repeat(20_000)).chunks(50)]).await.unwrap();
    let config = config(&model.base_url());
    let policy =
        Arc::new(OutboundPolicy::from_allow_lists(None, Some(&model.origin()), None).unwrap());
    let net = config
        .configure_net_client(NetClient::builder(policy, Purpose::Fetch))
        .max_response_bytes(4096)
        .build()
        .unwrap();
    let client = ProviderClient::new(net, config).unwrap();
    let err = reply(&client, &hello()).await.unwrap_err();
    assert!(matches!(err, ProviderError::BodyTooLarge { limit: 4096 }), "{err:?}");
}

#[tokio::test]
async fn more_tools_than_the_provider_takes_are_refused_before_sending() {
    let model = FakeModel::start([]).await.unwrap();
    let client = client_with(&model, config(&model.base_url()).with_max_tools_per_request(2));
    assert_eq!(client.max_tools_per_request(), 2);
    let tools = vec![weather_tool(); 3];
    let err = reply(&client, &hello().with_tools(tools)).await.unwrap_err();
    assert!(matches!(err, ProviderError::TooManyTools { given: 3, max: 2 }), "{err:?}");
    assert!(model.requests().is_empty());
}

#[tokio::test]
async fn a_provider_outside_the_policy_is_refused_before_connecting() {
    let model = FakeModel::start([]).await.unwrap();
    let config = config(&model.base_url());
    // No allow-list: loopback is private, so refused.
    let net = NetClient::builder(Arc::new(OutboundPolicy::public_only()), Purpose::Fetch)
        .build()
        .unwrap();
    let client = ProviderClient::new(net, config).unwrap();
    let err = reply(&client, &hello()).await.unwrap_err();
    assert_keyless(&err);
    assert!(matches!(err, ProviderError::Refused { .. }), "{err:?}");
    assert!(model.requests().is_empty());
}

#[tokio::test]
async fn unusable_base_urls_and_keys_are_refused_up_front() {
    let net = NetClient::builder(Arc::new(OutboundPolicy::public_only()), Purpose::Fetch)
        .build()
        .unwrap();
    for base in [
        "not a url",
        "ftp://example.com/v1",
        "https://u:p@example.com/v1",
        "https://example.com/v1?x=1",
    ] {
        let err = ProviderClient::new(net.clone(), ProviderConfig::new(base)).unwrap_err();
        assert!(matches!(err, ProviderError::InvalidBaseUrl { .. }), "{base}: {err:?}");
        assert!(!err.to_string().contains("u:p"), "{err}");
    }
    let bad_key = ProviderConfig::new("https://example.com/v1")
        .with_api_key(Secret::new(format!("{KEY}\nX-Injected: 1")));
    let err = ProviderClient::new(net, bad_key).unwrap_err();
    assert!(matches!(err, ProviderError::InvalidKey), "{err:?}");
    assert_keyless(&err);
}

#[tokio::test]
async fn the_key_is_not_in_the_clients_debug_form() {
    let model = FakeModel::start([]).await.unwrap();
    let client = client(&model);
    let shown = format!("{client:?}");
    assert!(!shown.contains(KEY), "{shown}");
    assert!(shown.contains("REDACTED"), "{shown}");
}

#[tokio::test]
async fn a_trailing_slash_on_the_base_url_is_fine() {
    let model = FakeModel::start([Reply::text("ok")]).await.unwrap();
    let client = client_with(&model, config(&format!("{}/", model.base_url())));
    assert_eq!(reply(&client, &hello()).await.unwrap().text, "ok");
    assert_eq!(model.requests()[0].path, "/v1/chat/completions");
}
