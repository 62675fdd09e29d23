//! Against a server built with the Python `mcp` SDK whose catalogue looks like a gateway's.

use std::collections::BTreeMap;
use std::time::Duration;

use llooma_mcp_client::{ContentItem, McpConfig, McpError};
use llooma_vault::Secret;
use serde_json::json;

use crate::support::{client_for, start_gateway};

const TOKEN: &str = "gateway-token-7";

#[tokio::test]
async fn probe_reads_a_gateway_catalogue_with_its_token() {
    let Some(peer) = start_gateway(Some(TOKEN)) else { return };
    let client = client_for(peer.port, McpConfig::default());
    let report = client.probe(&peer.url(), Some(&Secret::new(TOKEN))).await.unwrap();
    assert_eq!(report.server_name.as_deref(), Some("fake-gateway"));
    assert_eq!(report.server_version.as_deref(), Some("9.8.7"));
    assert!(report.instructions.as_deref().unwrap().contains("Chatto"));
    let names: Vec<&str> = report.tools.iter().map(|t| t.name.as_str()).collect();
    for want in [
        "Chatto-send_message",
        "home-assistant-turn_on",
        "Infomaniak_Mail-search.messages",
        "odd.name-with_mixed.Chars",
    ] {
        assert!(names.contains(&want), "{want} missing from {names:?}");
    }
}

#[tokio::test]
async fn a_wrong_or_missing_token_is_refused_distinctly() {
    let Some(peer) = start_gateway(Some(TOKEN)) else { return };
    let client = client_for(peer.port, McpConfig::default());
    let err = client.probe(&peer.url(), Some(&Secret::new("wrong"))).await.unwrap_err();
    assert!(matches!(err, McpError::TokenRefused { status: 401, token_sent: true, .. }), "{err:?}");
    let err = client.probe(&peer.url(), None).await.unwrap_err();
    assert!(
        matches!(err, McpError::TokenRefused { status: 401, token_sent: false, .. }),
        "{err:?}"
    );
}

#[tokio::test]
async fn snapshot_calls_resources_templates_and_prompts() {
    let Some(peer) = start_gateway(None) else { return };
    let client = client_for(peer.port, McpConfig::default());
    let session = client.connect(&peer.url(), None).await.unwrap();
    let snapshot = session.snapshot().await.unwrap();
    assert!(snapshot.resources.iter().any(|r| r.uri == "gateway://status"));
    let template = snapshot
        .resource_templates
        .iter()
        .find(|t| t.name == "room_messages")
        .unwrap_or_else(|| panic!("{:?}", snapshot.resource_templates));
    assert_eq!(template.variables, ["room"]);
    assert!(snapshot.prompts.iter().any(|p| p.name == "summarize_room"));

    let sent = session
        .call_tool("Chatto-send_message", json!({"room": "general", "text": "hi"}))
        .await
        .unwrap();
    assert_eq!(sent.text_for_model(), "sent to general: hi");
    let failed = session.call_tool("gateway-fail", json!({})).await.unwrap();
    assert!(failed.is_error);
    // The SDK hides the exception text; what counts is that the failure is the tool's.
    assert!(failed.text_for_model().contains("gateway-fail"), "{failed:?}");

    let status = session.read_resource("gateway://status").await.unwrap();
    assert!(
        matches!(&status.contents[0], ContentItem::Resource { text: Some(t), .. } if t == "all servers up")
    );
    let values = BTreeMap::from([("room".to_owned(), "general".to_owned())]);
    let room = session.read_template(&template.uri_template, &values).await.unwrap();
    assert!(
        matches!(&room.contents[0], ContentItem::Resource { text: Some(t), .. } if t == "messages of general")
    );
    let escape = BTreeMap::from([("room".to_owned(), "../../etc".to_owned())]);
    assert!(matches!(
        session.read_template(&template.uri_template, &escape).await,
        Err(McpError::Template { .. })
    ));
    let prompt = session.get_prompt("summarize_room", &values).await.unwrap();
    assert!(
        matches!(&prompt.messages[0].content, ContentItem::Text { text } if text.contains("general"))
    );
}

#[tokio::test]
async fn a_tool_list_change_is_reported_to_the_session() {
    let Some(peer) = start_gateway(None) else { return };
    let client = client_for(peer.port, McpConfig::default());
    let session = client.connect(&peer.url(), None).await.unwrap();
    let mut changes = session.tool_list_changes().await;
    let before = *changes.borrow_and_update();
    session.call_tool("gateway-add_tool", json!({"name": "Chatto-new_tool"})).await.unwrap();
    tokio::time::timeout(Duration::from_secs(5), changes.changed())
        .await
        .expect("no tools/list_changed within 5 s")
        .unwrap();
    assert!(*changes.borrow() > before);
    let tools = session.list_tools().await.unwrap();
    assert!(tools.tools.iter().any(|t| t.name == "Chatto-new_tool"));
}

/// Answers each question of a call with `answer`, and keeps what was asked.
fn answering(
    answer: llooma_mcp_client::QuestionAnswer,
) -> (llooma_mcp_client::Asker, tokio::task::JoinHandle<Vec<(String, serde_json::Value)>>) {
    let (asker, mut questions) = tokio::sync::mpsc::channel::<llooma_mcp_client::CallNews>(1);
    let asked = tokio::spawn(async move {
        let mut asked = Vec::new();
        while let Some(question) = crate::support::next_question(&mut questions).await {
            asked.push((question.message.clone(), crate::support::schema_of(&question.asked)));
            let _ = question.reply.send(answer.clone());
        }
        asked
    });
    (asker, asked)
}

#[tokio::test]
async fn a_question_on_2026_07_28_is_answered_and_the_call_sent_again() {
    use llooma_mcp_client::QuestionAnswer;
    let Some(peer) = start_gateway(None) else { return };
    let client = client_for(peer.port, McpConfig::default());
    let session = client.connect(&peer.url(), None).await.unwrap();
    assert_eq!(session.server().protocol_version, "2026-07-28");
    let content = json!({"mode": "eco"}).as_object().unwrap().clone();
    let (asker, asked) = answering(QuestionAnswer::Accept(content));
    let result = session
        .call_tool_asking("home-assistant-set_thermostat", json!({"room": "kitchen"}), Some(asker))
        .await
        .unwrap();
    // The default the person let stand (20) went with what they chose.
    assert_eq!(result.text_for_model(), "thermostat of the kitchen set to 20 °C, eco");
    let asked = asked.await.unwrap();
    assert_eq!(asked.len(), 1);
    assert_eq!(asked[0].0, "Which temperature for the kitchen?");
    assert_eq!(asked[0].1["properties"]["celsius"]["maximum"], 30);

    let (asker, _) = answering(QuestionAnswer::Decline);
    let result = session
        .call_tool_asking("home-assistant-set_thermostat", json!({"room": "hall"}), Some(asker))
        .await
        .unwrap();
    assert_eq!(
        result.text_for_model(),
        "thermostat of the hall left alone: the person chose decline"
    );
    // Nobody to ask: declined, and the server says so.
    let result =
        session.call_tool("home-assistant-set_thermostat", json!({"room": "attic"})).await.unwrap();
    assert!(result.text_for_model().contains("chose decline"), "{}", result.text_for_model());
}

#[tokio::test]
async fn a_request_for_a_completion_on_2026_07_28_is_answered_and_the_call_sent_again() {
    use llooma_mcp_client::{Asked, Completion, QuestionAnswer};
    let Some(peer) = start_gateway(None) else { return };
    let client = client_for(peer.port, McpConfig::default());
    let session = client.connect(&peer.url(), None).await.unwrap();
    let (asker, mut news) = tokio::sync::mpsc::channel::<llooma_mcp_client::CallNews>(1);
    let person = tokio::spawn(async move {
        let question = crate::support::next_question(&mut news).await.unwrap();
        let answer = QuestionAnswer::Completed(Completion {
            text: "Tea is calm.".into(),
            model: "smollm2".into(),
            cut: false,
        });
        let _ = question.reply.send(answer);
        question.asked
    });
    let result = session
        .call_tool_asking("gateway-summarize", json!({"text": "a long essay on tea"}), Some(asker))
        .await
        .unwrap();
    assert_eq!(result.text_for_model(), "summary by smollm2: Tea is calm.");
    let Asked::Completion(request) = person.await.unwrap() else { panic!() };
    assert_eq!(request.system_prompt.as_deref(), Some("Answer in one sentence."));
    assert_eq!(request.messages[0].text, "Summarize: a long essay on tea");
    assert_eq!(request.max_tokens, 40);

    // Nobody to ask: 2026-07-28 has no answer that says "refused", so the call is not sent
    // again, and the caller is told why.
    let err = session.call_tool("gateway-summarize", json!({"text": "x"})).await.unwrap_err();
    assert!(matches!(err, McpError::Withheld { .. }), "{err:?}");
    assert!(err.to_string().contains("was refused"), "{err}");
}
