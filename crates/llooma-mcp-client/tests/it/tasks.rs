//! Calls a server runs as long-running tasks (the `io.modelcontextprotocol/tasks` extension of
//! protocol 2026-07-28): against a server built on the Python `mcp` SDK's extension mechanism,
//! and against hostile servers.

use std::time::Duration;

use llooma_mcp_client::{CallNews, McpConfig, McpError, QuestionAnswer, TaskState};
use serde_json::{Value, json};

use crate::support::{Reply, client_for, handshake, hostile, quick_config};

fn start_tasks() -> Option<llooma_test_support::peers::Peer> {
    llooma_test_support::peers::tasks()
}

/// Everything the call told its asker, gathered until the call ends.
async fn gather(mut news: tokio::sync::mpsc::Receiver<CallNews>) -> Vec<CallNews> {
    let mut seen = Vec::new();
    while let Some(item) = news.recv().await {
        seen.push(item);
    }
    seen
}

/// The ids of the tasks the server saw cancelled, waiting a little for a cancellation sent as
/// the call was left.
async fn cancelled_on(session: &llooma_mcp_client::McpSession, want: usize) -> Vec<Value> {
    for _ in 0..50 {
        let listed = session.call_tool("cancelled_tasks", json!({})).await.unwrap();
        let ids = listed.structured_content.as_ref().and_then(|s| s.get("result")).cloned();
        let ids = ids.and_then(|v| v.as_array().cloned()).unwrap_or_default();
        if ids.len() >= want {
            return ids;
        }
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
    Vec::new()
}

#[tokio::test]
async fn a_task_is_followed_to_its_result_and_its_stages_are_told() {
    let Some(peer) = start_tasks() else { return };
    let client = client_for(peer.port, McpConfig::default());
    let session = client.connect(&peer.url(), None).await.unwrap();
    let (asker, news) = tokio::sync::mpsc::channel::<CallNews>(16);
    let told = tokio::spawn(gather(news));
    let result = session
        .call_tool_asking("report", json!({"topic": "tea", "steps": 3}), Some(asker))
        .await
        .unwrap();
    assert_eq!(result.text_for_model(), "A report on tea in 3 stages.");
    let told = told.await.unwrap();
    let stages: Vec<String> = told
        .iter()
        .filter_map(|item| match item {
            CallNews::Task(report) if report.status == TaskState::Working => report.message.clone(),
            _ => None,
        })
        .collect();
    assert!(stages.contains(&"Stage 2 of 3: reading about tea".to_owned()), "{stages:?}");
    // Each change once, however often it was polled.
    let mut unique = stages.clone();
    unique.dedup();
    assert_eq!(unique, stages);
}

#[tokio::test]
async fn a_tasks_question_is_put_once_and_its_answer_sent_with_tasks_update() {
    let Some(peer) = start_tasks() else { return };
    let client = client_for(peer.port, McpConfig::default());
    let session = client.connect(&peer.url(), None).await.unwrap();
    let (asker, mut news) = tokio::sync::mpsc::channel::<CallNews>(16);
    let person = tokio::spawn(async move {
        let mut questions = Vec::new();
        let mut waiting_seen = false;
        while let Some(item) = news.recv().await {
            match item {
                CallNews::Question(question) => {
                    // A person takes a moment: the server is polled meanwhile and asks again.
                    tokio::time::sleep(Duration::from_millis(600)).await;
                    questions.push(question.message.clone());
                    let mut values = serde_json::Map::new();
                    values.insert("meaning".into(), json!("snake"));
                    let _ = question.reply.send(QuestionAnswer::Accept(values));
                }
                CallNews::Task(report) if report.status == TaskState::InputRequired => {
                    waiting_seen = true;
                }
                _ => {}
            }
        }
        (questions, waiting_seen)
    });
    let result =
        session.call_tool_asking("clarify", json!({"topic": "python"}), Some(asker)).await.unwrap();
    assert_eq!(result.text_for_model(), "python, meaning snake.");
    let (questions, waiting_seen) = person.await.unwrap();
    assert_eq!(questions, ["Which python do you mean?"]);
    assert!(waiting_seen, "the task's wait for an answer was not told");

    // Nobody to ask: the question is declined, which the server hears and carries on with.
    let result = session.call_tool("clarify", json!({"topic": "rust"})).await.unwrap();
    assert_eq!(result.text_for_model(), "rust: the question was answered with decline.");
}

#[tokio::test]
async fn a_failed_task_ends_the_call_with_the_servers_error() {
    let Some(peer) = start_tasks() else { return };
    let client = client_for(peer.port, McpConfig::default());
    let session = client.connect(&peer.url(), None).await.unwrap();
    let err = session.call_tool("broken", json!({"topic": "maps"})).await.unwrap_err();
    assert!(matches!(err, McpError::TaskEnded { .. }), "{err:?}");
    assert!(
        err.to_string()
            .contains("ran as a task that failed: archive for maps unreachable (error -32603)"),
        "{err}"
    );
    // The session carries on.
    let ok = session.call_tool("report", json!({"topic": "ok", "steps": 1})).await.unwrap();
    assert_eq!(ok.text_for_model(), "A report on ok in 1 stages.");
}

#[tokio::test]
async fn a_task_left_by_its_caller_is_cancelled_on_the_server() {
    let Some(peer) = start_tasks() else { return };
    let client = client_for(peer.port, McpConfig::default());
    let session = client.connect(&peer.url(), None).await.unwrap();
    // Stop in the middle: the call's future is dropped.
    let left = tokio::time::timeout(
        Duration::from_millis(1200),
        session.call_tool("endless", json!({"topic": "stars"})),
    )
    .await;
    assert!(left.is_err(), "the endless task ended by itself: {left:?}");
    assert_eq!(cancelled_on(&session, 1).await.len(), 1);
}

#[tokio::test]
async fn a_task_past_the_longest_allowed_is_cancelled_and_the_call_says_so() {
    let Some(peer) = start_tasks() else { return };
    let config =
        McpConfig { max_task_duration: Duration::from_millis(1500), ..McpConfig::default() };
    let client = client_for(peer.port, config);
    let session = client.connect(&peer.url(), None).await.unwrap();
    let err = session.call_tool("endless", json!({"topic": "stars"})).await.unwrap_err();
    let text = err.to_string();
    assert!(text.contains("was still running after 1.5 s"), "{text}");
    assert!(text.contains("LLOOMA_MCP_TASK_MAX_SECS"), "{text}");
    assert_eq!(cancelled_on(&session, 1).await.len(), 1);
}

fn handle(poll_ms: u64) -> Value {
    json!({
        "resultType": "task", "taskId": "t-1", "status": "working",
        "createdAt": "2026-12-07T10:00:00Z", "lastUpdatedAt": "2026-12-07T10:00:00Z",
        "ttlMs": null, "pollIntervalMs": poll_ms,
    })
}

/// A `tasks/get` answer: task t-1 in `status`, to be polled again in `poll_ms`.
fn polled(status: &str, poll_ms: u64) -> Value {
    let mut task = handle(poll_ms);
    task["resultType"] = json!("complete");
    task["status"] = json!(status);
    task
}

/// A person who answers every question the call puts with `answer`; joins with how many they
/// were asked.
fn person(
    mut news: tokio::sync::mpsc::Receiver<CallNews>,
    answer: fn() -> QuestionAnswer,
) -> tokio::task::JoinHandle<usize> {
    tokio::spawn(async move {
        let mut questions = 0;
        while let Some(item) = news.recv().await {
            if let CallNews::Question(question) = item {
                questions += 1;
                let _ = question.reply.send(answer());
            }
        }
        questions
    })
}

#[tokio::test]
async fn a_server_cannot_make_the_client_poll_in_a_busy_loop() {
    // It asks to be polled every 0 ms and never ends.
    let server = hostile(|method, _| {
        handshake(method).unwrap_or_else(|| match method {
            "tools/call" => Reply::Result(handle(0)),
            "tasks/get" => Reply::Result(polled("working", 0)),
            "tasks/cancel" => Reply::Result(json!({"resultType": "complete"})),
            _ => Reply::Default,
        })
    })
    .await;
    let config = McpConfig { max_task_duration: Duration::from_secs(2), ..quick_config() };
    let client = client_for(server.port(), config);
    let session = client.connect(&server.url(), None).await.unwrap();
    let err = session.call_tool("busy", json!({})).await.unwrap_err();
    assert!(err.to_string().contains("still running after 2 s"), "{err}");
    let polls = server.count("tasks/get");
    assert!((2..=5).contains(&polls), "{polls} polls in 2 s");
    cancelled_once(&server).await;
}

#[tokio::test]
async fn a_task_the_server_forgot_or_garbled_ends_the_call_with_why() {
    let server = hostile(|method, params| {
        handshake(method).unwrap_or_else(|| match (method, params["name"].as_str()) {
            ("tools/call", Some("forgets")) => Reply::Result(handle(10)),
            ("tools/call", Some("garbles")) => {
                let mut task = handle(10);
                task["taskId"] = json!("t-2");
                Reply::Result(task)
            }
            ("tools/call", Some("swaps")) => {
                let mut task = handle(10);
                task["taskId"] = json!("t-3");
                Reply::Result(task)
            }
            // Asked about t-3, it answers about another task.
            ("tasks/get", _) if params["taskId"] == "t-3" => Reply::Result(json!({
                "resultType": "complete", "taskId": "t-9", "status": "working",
                "createdAt": "x", "lastUpdatedAt": "x", "ttlMs": null,
            })),
            ("tools/call", _) => Reply::Result(json!({"resultType": "task", "taskId": "", "status": "working", "createdAt": "x", "lastUpdatedAt": "x", "ttlMs": null})),
            ("tasks/get", _) if params["taskId"] == "t-1" => {
                Reply::Error(-32602, "Failed to retrieve task: Task has expired")
            }
            // Completed, but without its result.
            ("tasks/get", _) => Reply::Result(json!({
                "resultType": "complete", "taskId": "t-2", "status": "completed",
                "createdAt": "x", "lastUpdatedAt": "x", "ttlMs": null,
            })),
            _ => Reply::Default,
        })
    })
    .await;
    let client = client_for(server.port(), quick_config());
    let session = client.connect(&server.url(), None).await.unwrap();
    let err = session.call_tool("forgets", json!({})).await.unwrap_err();
    assert!(
        err.to_string()
            .contains("the server no longer knows (Failed to retrieve task: Task has expired)"),
        "{err}"
    );
    // Nothing to cancel: it is gone (a cancellation would be on its way by now).
    tokio::time::sleep(Duration::from_millis(500)).await;
    assert_eq!(server.count("tasks/cancel"), 0);

    let err = client.connect(&server.url(), None).await.unwrap();
    let err = err.call_tool("garbles", json!({})).await.unwrap_err();
    assert!(matches!(err, McpError::Protocol { .. }), "{err:?}");

    let session = client.connect(&server.url(), None).await.unwrap();
    let err = session.call_tool("no-id", json!({})).await.unwrap_err();
    assert!(err.to_string().contains("whose id is empty"), "{err}");

    let session = client.connect(&server.url(), None).await.unwrap();
    let err = session.call_tool("swaps", json!({})).await.unwrap_err();
    assert!(err.to_string().contains("about another task"), "{err}");
}

#[tokio::test]
async fn a_question_the_server_repeats_while_it_is_answered_is_put_once() {
    use std::sync::atomic::{AtomicUsize, Ordering};
    let polls = std::sync::Arc::new(AtomicUsize::new(0));
    let seen = std::sync::Arc::clone(&polls);
    // The same question, under the same key, on the first six polls (before and after its
    // answer arrived), then the result.
    let server = hostile(move |method, _| {
        handshake(method).unwrap_or_else(|| match method {
            "tools/call" => Reply::Result(handle(10)),
            "tasks/get" => {
                let n = seen.fetch_add(1, Ordering::SeqCst);
                let mut task = polled("input_required", 10);
                if n < 6 {
                    task["inputRequests"] = json!({"pick": {
                        "method": "elicitation/create",
                        "params": {"mode": "form", "message": "Which one?",
                                   "requestedSchema": {"type": "object", "properties": {}}},
                    }});
                } else {
                    task = polled("completed", 10);
                    task["result"] = json!({"content": [{"type": "text", "text": "picked"}]});
                }
                Reply::Result(task)
            }
            "tasks/update" => Reply::Result(json!({"resultType": "complete"})),
            _ => Reply::Default,
        })
    })
    .await;
    let client = client_for(server.port(), quick_config());
    let session = client.connect(&server.url(), None).await.unwrap();
    let (asker, news) = tokio::sync::mpsc::channel::<CallNews>(4);
    let person = person(news, || QuestionAnswer::Accept(serde_json::Map::new()));
    let result = session.call_tool_asking("pick", json!({}), Some(asker)).await.unwrap();
    assert_eq!(result.text_for_model(), "picked");
    assert_eq!(person.await.unwrap(), 1);
    assert_eq!(server.count("tasks/update"), 1);
    assert!(polls.load(Ordering::SeqCst) >= 7);
}

#[tokio::test]
async fn a_task_whose_session_is_lost_is_never_sent_again() {
    // The call became a task; then its polls are refused as a request the server did not run
    // (a restart, another replica behind a balancer): the call itself ran, so it must not run
    // again on a new session.
    let server = crate::support::hostile_with_sessions(|method, params| {
        handshake(method).unwrap_or_else(|| match (method, params["name"].as_str()) {
            ("tools/call", Some("warm")) => {
                Reply::Result(json!({"content": [{"type": "text", "text": "warm"}]}))
            }
            ("tools/call", _) => Reply::Result(handle(10)),
            // What a server says of a request it did not run.
            ("tasks/get", _) => Reply::Status(400, "no such session"),
            _ => Reply::Default,
        })
    })
    .await;
    let client = client_for(server.port(), quick_config());
    let url = server.url();
    // A first call leaves its session kept: the next one reuses it.
    client.call_tool(&url, None, "warm", json!({})).await.unwrap();
    let err = client.call_tool(&url, None, "once", json!({})).await.unwrap_err();
    assert_eq!(server.count("tools/call"), 2, "the call was sent again: {err}");
}

#[tokio::test]
async fn a_task_that_keeps_asking_is_cancelled_after_twenty_questions() {
    use std::sync::atomic::{AtomicUsize, Ordering};
    let asked = std::sync::Arc::new(AtomicUsize::new(0));
    let counter = std::sync::Arc::clone(&asked);
    // Every poll brings a new question under a new key.
    let server = hostile(move |method, _| {
        handshake(method).unwrap_or_else(|| match method {
            "tools/call" => Reply::Result(handle(10)),
            "tasks/get" => {
                let n = counter.fetch_add(1, Ordering::SeqCst);
                let mut task = polled("input_required", 10);
                task["inputRequests"] = json!({format!("q{n}"): {
                    "method": "elicitation/create",
                    "params": {"mode": "form", "message": format!("question {n}"),
                               "requestedSchema": {"type": "object", "properties": {}}},
                }});
                Reply::Result(task)
            }
            "tasks/update" | "tasks/cancel" => Reply::Result(json!({"resultType": "complete"})),
            _ => Reply::Default,
        })
    })
    .await;
    let client = client_for(server.port(), quick_config());
    let session = client.connect(&server.url(), None).await.unwrap();
    let (asker, news) = tokio::sync::mpsc::channel::<CallNews>(4);
    let person = person(news, || QuestionAnswer::Decline);
    let err = session.call_tool_asking("nosy", json!({}), Some(asker)).await.unwrap_err();
    assert!(err.to_string().contains("asked more than 20 questions"), "{err}");
    assert_eq!(person.await.unwrap(), 20);
    assert_eq!(server.count("tasks/update"), 20);
    cancelled_once(&server).await;
}

/// Waits for the one `tasks/cancel` a left task sends (from a task of its own), 2.5 s at most.
async fn cancelled_once(server: &crate::support::Hostile) {
    for _ in 0..50 {
        if server.count("tasks/cancel") == 1 {
            return;
        }
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
    panic!("the task was not cancelled once: {} times", server.count("tasks/cancel"));
}
