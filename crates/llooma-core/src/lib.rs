//! The turn engine: what happens between a person's message and the reply.
//!
//! Today a turn asks the model once and streams its answer; tools (built-in and MCP, through the
//! approval broker), rounds and announce mode join here next. The engine does no storage and no
//! HTTP of its own: it reports everything a watching tab should see to a [`TurnSink`] (the API
//! writes it to the conversation's event log), and asks the model through `llooma-providers`.

use llooma_providers::{ChatEvent, ChatRequest, Message, ProviderClient};
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

fn chat_request(request: &TurnRequest) -> ChatRequest {
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
    ChatRequest::new(request.model.clone(), messages)
}

/// Runs one turn to its end. `stop` turning true stops it (the provider stream is dropped).
pub async fn run_turn<S: TurnSink>(
    provider: &ProviderClient,
    request: &TurnRequest,
    sink: &S,
    mut stop: watch::Receiver<bool>,
) -> TurnEnd {
    let mut text = String::new();
    let outcome = async {
        let mut stream = provider.chat(&chat_request(request)).await.map_err(|e| e.to_string())?;
        loop {
            let next = tokio::select! {
                next = stream.next_event() => next,
                _ = stop.wait_for(|s| *s) => return Ok(true),
            };
            match next.map_err(|e| e.to_string())? {
                Some(ChatEvent::TextDelta(delta)) => {
                    text.push_str(&delta);
                    sink.event("text", json!({ "delta": delta }))
                        .await
                        .map_err(|e| e.to_string())?;
                }
                Some(ChatEvent::ReasoningDelta(delta)) => {
                    sink.event("reasoning", json!({ "delta": delta }))
                        .await
                        .map_err(|e| e.to_string())?;
                }
                Some(ChatEvent::Finished { .. }) | None => return Ok(false),
                Some(_) => {}
            }
        }
    }
    .await;
    match outcome {
        Ok(false) => TurnEnd::Done { text },
        Ok(true) => TurnEnd::Stopped { text },
        Err(error) => TurnEnd::Failed { text, error },
    }
}
