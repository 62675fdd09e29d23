//! The turn engine: what happens between a person's message and the reply.
//!
//! A turn runs in rounds: the model answers, and when it calls tools the engine runs them, reports
//! each as a timeline step, gives the results back and asks again, up to [`TurnRequest::rounds`];
//! the last round offers no tools, so the turn always ends with an answer. Today the one tool is
//! the built-in `current_date`; web search, page reading, memory and MCP tools (through the
//! approval broker) join here next. The engine does no storage and no
//! HTTP of its own: it reports everything a watching tab should see to a [`TurnSink`] (the API
//! writes it to the conversation's event log), and asks the model through `llooma-providers`.

mod mcp;

pub use mcp::{McpTool, McpTurn};
/// Names of the built-in tools this engine provides (what a bot's tick list can turn on).
pub const BUILTIN_TOOLS: &[&str] = &[CURRENT_DATE];

use llooma_approval_broker::ApprovalPort;
use llooma_memory_guard::TurnGuard;
use llooma_providers::{ChatEvent, ChatRequest, Message, ProviderClient, ToolCall, ToolDefinition};
use serde_json::{Value, json};
use tokio::sync::watch;

/// Where a turn reports what happens, in order. Each event has a kind (`text`, `reasoning`,
/// `error`, `end`) and a JSON payload.
pub trait TurnSink: Send + Sync {
    fn event(
        &self,
        kind: &str,
        data: Value,
    ) -> impl std::future::Future<Output = Result<(), SinkError>> + Send;
}

/// The sink could not record an event (the database went away): the turn stops.
#[derive(Debug, thiserror::Error)]
#[error("the turn's events could not be recorded: {0}")]
pub struct SinkError(pub String);

/// Who said a message of the history.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Speaker {
    Person,
    Model,
}

/// What a turn is asked.
#[derive(Clone, Debug)]
pub struct TurnRequest {
    pub model: String,
    pub system_prompt: Option<String>,
    /// The conversation so far, oldest first, ending with the person's new message.
    pub history: Vec<(Speaker, String)>,
    /// How many times the model may be asked: 4, or 8 when MCP tools are offered.
    pub rounds: usize,
    /// The time `current_date` reports (passed in, so a turn is reproducible in tests).
    pub now_rfc3339: String,
}

/// Rounds of a turn without MCP tools (one search then one page read, and an answer).
pub const ROUNDS: usize = 4;
/// Rounds of a turn that offers MCP tools: a chain against one's own tools is longer.
pub const ROUNDS_WITH_MCP: usize = 8;

const CURRENT_DATE: &str = "current_date";

fn builtin_tools() -> Vec<ToolDefinition> {
    vec![ToolDefinition {
        name: CURRENT_DATE.to_owned(),
        description: Some("The current date and time (UTC, RFC 3339).".to_owned()),
        parameters: json!({"type": "object", "properties": {}}),
    }]
}

/// Runs one tool call; the result is what the model reads.
fn run_tool(call: &ToolCall, request: &TurnRequest) -> String {
    match call.name.as_str() {
        CURRENT_DATE => request.now_rfc3339.clone(),
        other => format!("There is no tool named `{other}`; answer without it."),
    }
}

/// How a turn ended.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum TurnEnd {
    /// The model finished; its answer.
    Done { text: String },
    /// Stopped by the person; what had arrived so far.
    Stopped { text: String },
    /// The model or the sink failed; what had arrived so far and why.
    Failed { text: String, error: String },
}

fn history_messages(request: &TurnRequest) -> Vec<Message> {
    let mut messages = Vec::new();
    if let Some(system) = &request.system_prompt {
        messages.push(Message::System { content: system.clone() });
    }
    for (speaker, text) in &request.history {
        messages.push(match speaker {
            Speaker::Person => Message::User { content: text.clone() },
            Speaker::Model => {
                Message::Assistant { content: Some(text.clone()), tool_calls: Vec::new() }
            }
        });
    }
    messages
}

/// What one round produced.
struct Round {
    text: String,
    calls: Vec<ToolCall>,
    stopped: bool,
}

async fn one_round<S: TurnSink>(
    provider: &ProviderClient,
    chat: &ChatRequest,
    sink: &S,
    stop: &mut watch::Receiver<bool>,
    all_text: &mut String,
) -> Result<Round, String> {
    let mut round = Round { text: String::new(), calls: Vec::new(), stopped: false };
    let mut stream = provider.chat(chat).await.map_err(|e| e.to_string())?;
    loop {
        let next = tokio::select! {
            next = stream.next_event() => next,
            _ = stop.wait_for(|s| *s) => {
                round.stopped = true;
                return Ok(round);
            }
        };
        match next.map_err(|e| e.to_string())? {
            Some(ChatEvent::TextDelta(delta)) => {
                round.text.push_str(&delta);
                all_text.push_str(&delta);
                sink.event("text", json!({ "delta": delta })).await.map_err(|e| e.to_string())?;
            }
            Some(ChatEvent::ReasoningDelta(delta)) => {
                sink.event("reasoning", json!({ "delta": delta }))
                    .await
                    .map_err(|e| e.to_string())?;
            }
            Some(ChatEvent::ToolCall(call)) => round.calls.push(call),
            Some(ChatEvent::Finished { .. }) | None => return Ok(round),
            Some(_) => {}
        }
    }
}

/// How a turn that is not a person's conversation differs (a bot's). The default is a
/// conversation's turn: every built-in tool, every MCP call put to the person.
#[derive(Clone, Debug, Default)]
pub struct TurnOptions {
    /// The built-in tools offered, by name; `None` offers every one the instance provides.
    pub builtin_tools: Option<Vec<String>>,
    /// Who started the turn: decides whether an MCP call is asked, run unasked or refused.
    pub context: Option<llooma_approval_broker::Context>,
}

/// Runs one turn to its end. `stop` turning true stops it (the provider stream is dropped).
/// With `mcp`, its tools are offered beside the built-in ones and each call goes through the
/// approval broker.
pub async fn run_turn<S: TurnSink, P: ApprovalPort>(
    provider: &ProviderClient,
    request: &TurnRequest,
    mcp: Option<&McpTurn<'_, P>>,
    sink: &S,
    stop: watch::Receiver<bool>,
) -> TurnEnd {
    run_turn_with(provider, request, mcp, sink, stop, &TurnOptions::default()).await
}

/// [`run_turn`] with [`TurnOptions`] (a bot's turn: its ticked tools, MCP run unasked).
pub async fn run_turn_with<S: TurnSink, P: ApprovalPort>(
    provider: &ProviderClient,
    request: &TurnRequest,
    mcp: Option<&McpTurn<'_, P>>,
    sink: &S,
    mut stop: watch::Receiver<bool>,
    options: &TurnOptions,
) -> TurnEnd {
    let mut text = String::new();
    let mut messages = history_messages(request);
    let mut guard = TurnGuard::new();
    let mut tools = builtin_tools();
    if let Some(ticked) = &options.builtin_tools {
        tools.retain(|t| ticked.contains(&t.name));
    }
    let context = options.context.unwrap_or(llooma_approval_broker::Context::Conversation);
    if let Some(mcp) = mcp {
        tools.extend(mcp.definitions());
    }
    let rounds = request.rounds.max(1);
    let outcome: Result<bool, String> = async {
        for round_number in 1..=rounds {
            let last = round_number == rounds;
            let mut chat = ChatRequest::new(request.model.clone(), messages.clone());
            // The last round offers no tools: out of rounds, the model answers with what it has.
            if !last {
                chat = chat.with_tools(tools.clone());
            }
            let round = one_round(provider, &chat, sink, &mut stop, &mut text).await?;
            if round.stopped {
                return Ok(true);
            }
            if round.calls.is_empty() || last {
                return Ok(false);
            }
            let content = (!round.text.is_empty()).then(|| round.text.clone());
            messages.push(Message::Assistant { content, tool_calls: round.calls.clone() });
            for call in &round.calls {
                let result = match mcp.and_then(|m| m.tool(&call.name).map(|t| (m, t))) {
                    Some((mcp, tool)) => mcp.call(tool, call, &mut guard, sink, context).await?,
                    None if !tools.iter().any(|t| t.name == call.name) => format!(
                        "There is no tool named `{}` in this turn; answer without it.",
                        call.name
                    ),
                    None => {
                        let result = run_tool(call, request);
                        sink.event(
                            "step",
                            json!({ "tool": call.name, "arguments": call.arguments_json, "result": result }),
                        )
                        .await
                        .map_err(|e| e.to_string())?;
                        result
                    }
                };
                messages.push(Message::Tool { tool_call_id: call.id.clone(), content: result });
            }
        }
        Ok(false)
    }
    .await;
    match outcome {
        Ok(false) => TurnEnd::Done { text },
        Ok(true) => TurnEnd::Stopped { text },
        Err(error) => TurnEnd::Failed { text, error },
    }
}
