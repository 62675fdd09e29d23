//! Against `@modelcontextprotocol/server-everything` (npm), which no one here wrote.

use std::collections::BTreeMap;
use std::time::Duration;

use llooma_mcp_client::{ContentItem, McpConfig, McpError};
use serde_json::json;

use crate::support::{client_for, start_everything};

#[tokio::test]
async fn probe_names_the_server_and_its_tools() {
    let Some(peer) = start_everything() else { return };
    let client = client_for(peer.port, McpConfig::default());
    let report = client.probe(&peer.url(), None).await.unwrap();
    assert!(!report.protocol_version.is_empty());
    assert!(report.server_name.is_some(), "{report:?}");
    let names: Vec<&str> = report.tools.iter().map(|t| t.name.as_str()).collect();
    for want in ["echo", "get-sum", "get-tiny-image", "trigger-long-running-operation"] {
        assert!(names.contains(&want), "{want} missing from {names:?}");
    }
    // The JSON the CLI prints.
    let json = serde_json::to_value(&report).unwrap();
    for key in ["protocolVersion", "serverName", "serverVersion", "instructions", "tools"] {
        assert!(json.get(key).is_some(), "{key} missing from {json}");
    }
    assert!(json["tools"][0]["name"].is_string());
}

#[tokio::test]
async fn snapshot_lists_tools_resources_templates_and_prompts() {
    let Some(peer) = start_everything() else { return };
    let client = client_for(peer.port, McpConfig::default());
    let snapshot = client.snapshot(&peer.url(), None).await.unwrap();
    let echo = snapshot.tools.iter().find(|t| t.name == "echo").unwrap();
    assert_eq!(echo.hash.len(), 64);
    assert_eq!(echo.input_schema["type"], "object");
    let structured = snapshot.tools.iter().find(|t| t.name == "get-structured-content").unwrap();
    assert!(structured.output_schema.is_some());
    let annotated =
        snapshot.tools.iter().find(|t| t.name == "trigger-long-running-operation").unwrap();
    assert_eq!(annotated.annotations.as_ref().unwrap()["readOnlyHint"], true);
    assert!(!snapshot.resources.is_empty(), "{:?}", snapshot.notes);
    assert!(
        snapshot.resource_templates.iter().any(|t| t.variables == ["resourceId"]),
        "{:?}",
        snapshot.resource_templates
    );
    assert!(
        snapshot.prompts.iter().any(|p| p.name == "args-prompt"
            && p.arguments.iter().any(|a| a.name == "city" && a.required))
    );
    // Taken twice, the same catalogue hashes the same.
    let again = client.snapshot(&peer.url(), None).await.unwrap();
    assert_eq!(snapshot.tools_hash, again.tools_hash);
}

#[tokio::test]
async fn calls_return_text_images_and_structured_content() {
    let Some(peer) = start_everything() else { return };
    let client = client_for(peer.port, McpConfig::default());
    let session = client.connect(&peer.url(), None).await.unwrap();
    let echo = session.call_tool("echo", json!({"message": "hello"})).await.unwrap();
    assert!(!echo.is_error);
    assert!(echo.text_for_model().contains("hello"), "{echo:?}");
    let sum = session.call_tool("get-sum", json!({"a": 2, "b": 40})).await.unwrap();
    assert!(sum.text_for_model().contains("42"), "{sum:?}");
    let image = session.call_tool("get-tiny-image", json!({})).await.unwrap();
    assert!(
        image
            .content
            .iter()
            .any(|c| matches!(c, ContentItem::Image { mime_type, .. } if mime_type == "image/png"))
    );
    let structured =
        session.call_tool("get-structured-content", json!({"location": "Chicago"})).await.unwrap();
    assert!(structured.structured_content.as_ref().unwrap().get("temperature").is_some());
    let bad = session.call_tool("get-sum", json!({"a": "x"})).await;
    // Either a tool error (isError) or a JSON-RPC error: both are reported, neither panics.
    match bad {
        Ok(result) => assert!(result.is_error),
        Err(err) => assert!(matches!(err, McpError::Server { .. }), "{err:?}"),
    }
    session.close().await;
}

#[tokio::test]
async fn templates_and_prompts_are_read() {
    let Some(peer) = start_everything() else { return };
    let client = client_for(peer.port, McpConfig::default());
    let session = client.connect(&peer.url(), None).await.unwrap();
    let snapshot = session.snapshot().await.unwrap();
    let template =
        snapshot.resource_templates.iter().find(|t| t.uri_template.contains("/text/")).unwrap();
    let values = BTreeMap::from([("resourceId".to_owned(), "3".to_owned())]);
    let contents = session.read_template(&template.uri_template, &values).await.unwrap();
    assert!(
        matches!(&contents.contents[0], ContentItem::Resource { text: Some(_), .. }),
        "{contents:?}"
    );
    let bad = BTreeMap::from([("resourceId".to_owned(), "../1".to_owned())]);
    let err = session.read_template(&template.uri_template, &bad).await.unwrap_err();
    assert!(matches!(err, McpError::Template { .. }), "{err:?}");
    let prompt = session
        .get_prompt("args-prompt", &BTreeMap::from([("city".to_owned(), "Paris".to_owned())]))
        .await
        .unwrap();
    assert!(
        matches!(&prompt.messages[0].content, ContentItem::Text { text } if text.contains("Paris"))
    );
}

#[tokio::test]
async fn progress_keeps_a_long_call_alive_and_silence_does_not() {
    let Some(peer) = start_everything() else { return };
    let config = McpConfig { call_timeout: Duration::from_millis(1500), ..McpConfig::default() };
    let client = client_for(peer.port, config);
    let session = client.connect(&peer.url(), None).await.unwrap();
    // 3 s in 6 steps: a progress notification every 0.5 s, longer than the 1.5 s timeout.
    let result = session
        .call_tool("trigger-long-running-operation", json!({"duration": 3, "steps": 6}))
        .await
        .unwrap();
    assert!(!result.is_error, "{result:?}");
    // 3 s in one step: 3 s of silence.
    let err = session
        .call_tool("trigger-long-running-operation", json!({"duration": 3, "steps": 1}))
        .await
        .unwrap_err();
    assert!(matches!(err, McpError::Timeout { .. }), "{err:?}");
}

#[tokio::test]
async fn a_question_during_a_call_waits_for_the_person_longer_than_the_call_timeout() {
    use llooma_mcp_client::QuestionAnswer;
    let Some(peer) = start_everything() else { return };
    let config = McpConfig { call_timeout: Duration::from_millis(1000), ..McpConfig::default() };
    let client = client_for(peer.port, config);
    let session = client.connect(&peer.url(), None).await.unwrap();
    let (asker, mut questions) = tokio::sync::mpsc::channel::<llooma_mcp_client::CallNews>(1);
    let person = tokio::spawn(async move {
        let question = crate::support::next_question(&mut questions).await.unwrap();
        // The person takes their time: twice the call's idle limit.
        tokio::time::sleep(Duration::from_millis(2000)).await;
        let content = json!({"name": "Ada Lovelace", "check": true}).as_object().unwrap().clone();
        let _ = question.reply.send(QuestionAnswer::Accept(content));
        (question.message, crate::support::schema_of(&question.asked))
    });
    let result = session
        .call_tool_asking("trigger-elicitation-request", json!({}), Some(asker))
        .await
        .unwrap();
    let (message, schema) = person.await.unwrap();
    assert_eq!(message, "Please provide inputs for the following fields:");
    assert_eq!(schema["required"], json!(["name"]));
    let text = result.text_for_model();
    assert!(text.contains("- Name: Ada Lovelace"), "{text}");
    assert!(text.contains("- Agreed to terms: true"), "{text}");
    // A default the person let stand went with the answer.
    assert!(text.contains("- Favorite Integer: 42"), "{text}");

    // Nobody to ask: the server hears "decline".
    let result = session.call_tool("trigger-elicitation-request", json!({})).await.unwrap();
    assert!(result.text_for_model().contains("User declined"), "{}", result.text_for_model());
}

#[tokio::test]
async fn a_calls_progress_reaches_its_caller_as_the_server_reports_it() {
    let Some(peer) = start_everything() else { return };
    let client = client_for(peer.port, McpConfig::default());
    let session = client.connect(&peer.url(), None).await.unwrap();
    let (asker, mut news) = tokio::sync::mpsc::channel::<llooma_mcp_client::CallNews>(8);
    let reports = tokio::spawn(async move {
        let mut reports = Vec::new();
        while let Some(item) = news.recv().await {
            if let llooma_mcp_client::CallNews::Progress(progress) = item {
                reports.push(progress);
            }
        }
        reports
    });
    let result = session
        .call_tool_asking(
            "trigger-long-running-operation",
            json!({"duration": 2, "steps": 4}),
            Some(asker),
        )
        .await
        .unwrap();
    assert!(!result.is_error, "{result:?}");
    let reports = reports.await.unwrap();
    let steps: Vec<(f64, Option<f64>)> = reports.iter().map(|p| (p.progress, p.total)).collect();
    assert_eq!(steps, [(1.0, Some(4.0)), (2.0, Some(4.0)), (3.0, Some(4.0)), (4.0, Some(4.0))]);
}

/// Answers each question of a call with what `answer` says for it, and keeps what was asked.
fn person(
    answer: impl Fn(&llooma_mcp_client::Asked) -> llooma_mcp_client::QuestionAnswer + Send + 'static,
) -> (llooma_mcp_client::Asker, tokio::task::JoinHandle<Vec<(String, llooma_mcp_client::Asked)>>) {
    let (asker, mut news) = tokio::sync::mpsc::channel::<llooma_mcp_client::CallNews>(1);
    let asked = tokio::spawn(async move {
        let mut asked = Vec::new();
        while let Some(question) = crate::support::next_question(&mut news).await {
            let _ = question.reply.send(answer(&question.asked));
            asked.push((question.message, question.asked));
        }
        asked
    });
    (asker, asked)
}

#[tokio::test]
async fn a_page_to_open_reaches_the_person_and_their_answer_the_server() {
    use llooma_mcp_client::{Asked, LinkThen, QuestionAnswer};
    let Some(peer) = start_everything() else { return };
    let client = client_for(peer.port, McpConfig::default());
    let session = client.connect(&peer.url(), None).await.unwrap();
    // The tool is only listed to a client that said it can show pages to open.
    let tools = session.list_tools().await.unwrap();
    assert!(tools.tools.iter().any(|t| t.name == "trigger-url-elicitation"));
    let arguments =
        json!({"url": "https://login.example.com/device?code=42", "message": "Sign in"});

    // Opened: the server hears "accept".
    let (asker, asked) = person(|_| QuestionAnswer::Accept(serde_json::Map::new()));
    let result = session
        .call_tool_asking("trigger-url-elicitation", arguments.clone(), Some(asker))
        .await
        .unwrap();
    let text = result.text_for_model();
    assert!(text.contains("User completed the URL elicitation flow"), "{text}");
    let asked = asked.await.unwrap();
    assert_eq!(asked.len(), 1, "{asked:?}");
    assert_eq!(asked[0].0, "Sign in");
    let Asked::Link { url, elicitation_id, then } = &asked[0].1 else { panic!("{asked:?}") };
    assert_eq!(url, "https://login.example.com/device?code=42");
    assert!(!elicitation_id.is_empty());
    assert_eq!(*then, LinkThen::Answer);

    // Declined, and nobody to ask: the server hears "decline" both times.
    let (asker, _) = person(|_| QuestionAnswer::Decline);
    let result = session
        .call_tool_asking("trigger-url-elicitation", arguments.clone(), Some(asker))
        .await
        .unwrap();
    assert!(result.text_for_model().contains("User declined"), "{}", result.text_for_model());
    let result = session.call_tool("trigger-url-elicitation", arguments).await.unwrap();
    assert!(result.text_for_model().contains("User declined"), "{}", result.text_for_model());
}

#[tokio::test]
async fn a_call_refused_until_a_page_is_done_is_sent_again_once_it_is() {
    use llooma_mcp_client::{Asked, LinkThen, QuestionAnswer};
    let Some(peer) = start_everything() else { return };
    let client = client_for(peer.port, McpConfig::default());
    let session = client.connect(&peer.url(), None).await.unwrap();
    let arguments = json!({"url": "https://pay.example.com/checkout", "errorPath": true});

    // Done: the call goes again with the same arguments, and this time the server asks
    // during the call for the page it first wanted.
    let (asker, asked) = person(|_| QuestionAnswer::Accept(serde_json::Map::new()));
    let result = session
        .call_tool_asking("trigger-url-elicitation", arguments.clone(), Some(asker))
        .await
        .unwrap();
    let text = result.text_for_model();
    assert!(text.contains("User completed the URL elicitation flow"), "{text}");
    let asked = asked.await.unwrap();
    let pages: Vec<(&str, LinkThen)> = asked
        .iter()
        .map(|(_, asked)| match asked {
            Asked::Link { url, then, .. } => (url.as_str(), *then),
            other => panic!("{other:?}"),
        })
        .collect();
    assert_eq!(
        pages,
        [
            ("https://modelcontextprotocol.io", LinkThen::Retry),
            ("https://pay.example.com/checkout", LinkThen::Answer)
        ]
    );

    // Not done: the call ends with the server's refusal and why it was not sent again.
    let (asker, _) = person(|_| QuestionAnswer::Cancel);
    let arguments = json!({"url": "https://pay.example.com/other", "errorPath": true});
    let err = session
        .call_tool_asking("trigger-url-elicitation", arguments, Some(asker))
        .await
        .unwrap_err();
    let McpError::Server { code, message, .. } = &err else { panic!("{err:?}") };
    assert_eq!(*code, -32042);
    assert!(message.contains("requires browser-based authorization"), "{message}");
    assert!(message.contains("was not"), "{message}");
}

#[tokio::test]
async fn a_request_for_a_completion_reaches_the_person_and_only_their_answer_goes_back() {
    use llooma_mcp_client::{Asked, Completion, QuestionAnswer};
    let Some(peer) = start_everything() else { return };
    let client = client_for(peer.port, McpConfig::default());
    let session = client.connect(&peer.url(), None).await.unwrap();
    let tools = session.list_tools().await.unwrap();
    assert!(tools.tools.iter().any(|t| t.name == "trigger-sampling-request"));
    let arguments = json!({"prompt": "What is six times seven?", "maxTokens": 50});

    let (asker, asked) = person(|_| {
        QuestionAnswer::Completed(Completion {
            text: "Forty-two.".into(),
            model: "smollm2".into(),
            cut: false,
        })
    });
    let result = session
        .call_tool_asking("trigger-sampling-request", arguments.clone(), Some(asker))
        .await
        .unwrap();
    let text = result.text_for_model();
    assert!(text.contains("Forty-two.") && text.contains("smollm2"), "{text}");
    let asked = asked.await.unwrap();
    let Asked::Completion(request) = &asked[0].1 else { panic!("{asked:?}") };
    assert_eq!(request.system_prompt.as_deref(), Some("You are a helpful test server."));
    assert_eq!(request.max_tokens, 50);
    assert_eq!(request.messages.len(), 1);
    assert!(!request.messages[0].from_assistant);
    assert!(request.messages[0].text.ends_with("What is six times seven?"), "{request:?}");

    // Refused, and nobody to ask: the server is told the person rejected it.
    for asker in [Some(person(|_| QuestionAnswer::Decline).0), None] {
        let outcome =
            session.call_tool_asking("trigger-sampling-request", arguments.clone(), asker).await;
        let said = match outcome {
            Ok(result) => result.text_for_model(),
            Err(err) => err.to_string(),
        };
        assert!(said.contains("User rejected sampling request"), "{said}");
    }
}

#[tokio::test]
async fn a_structured_result_matches_the_schema_its_tool_declares() {
    let Some(peer) = start_everything() else { return };
    let client = client_for(peer.port, McpConfig::default());
    let session = client.connect(&peer.url(), None).await.unwrap();
    let tools = session.list_tools().await.unwrap();
    let tool = tools.tools.iter().find(|t| t.name == "get-structured-content").unwrap();
    let schema = tool.output_schema.clone().expect("the tool declares an output schema");
    let result =
        session.call_tool("get-structured-content", json!({"location": "Chicago"})).await.unwrap();
    assert_eq!(result.check_output(Some(&schema)), Ok(()));
    // The same result with a value of the wrong kind would not be used.
    let mut wrong = result.clone();
    wrong.structured_content.as_mut().unwrap()["humidity"] = json!("high");
    let why = wrong.check_output(Some(&schema)).unwrap_err();
    assert!(why.contains("humidity"), "{why}");
}
