//! A server's questions to the person during a call (`elicitation/create` on 2025-11-25, an
//! `input_required` result's input requests on 2026-07-28).
//!
//! The client does not decide anything: it hands each question to whoever made the call,
//! through the [`Asker`] given with it, and sends back the answer it gets. A call made with no
//! asker (a bot, a test tool) has nobody to ask: every question is declined, and the server is
//! told so as the protocol says. The asker's side (a card, a form) is the caller's business.

use std::sync::Arc;
use std::sync::atomic::{AtomicUsize, Ordering};

use rmcp::model::{ElicitRequestParams, ElicitResult, ElicitationAction};
use serde_json::{Map, Value};
use tokio::sync::{mpsc, oneshot, watch};

/// The largest requested schema handed on, as JSON: a form of a few dozen fields fits many
/// times over; anything larger is refused with an error to the server.
pub const MAX_QUESTION_SCHEMA_BYTES: usize = 64 * 1024;
/// The longest message handed on, in bytes (cut beyond, with the truncation marker).
pub const MAX_QUESTION_MESSAGE_BYTES: usize = 4 * 1024;

/// The longest address of a page a server asks to be opened, in bytes; a longer one is an
/// error to the server.
pub const MAX_LINK_BYTES: usize = 16 * 1024;
/// The most pages one refusal (`-32042`) may ask to be opened before the call is sent again.
pub const MAX_LINKS_FIRST: usize = 5;
/// The longest elicitation id kept, in bytes (ids are opaque; a longer one cannot be matched).
const MAX_ELICITATION_ID_BYTES: usize = 256;

/// A question a server asked while one of its tools ran.
#[derive(Debug)]
pub struct ServerQuestion {
    /// The server's words to the person (bounded by [`MAX_QUESTION_MESSAGE_BYTES`]).
    pub message: String,
    /// What the server asks for: a form filled, or a page opened.
    pub asked: Asked,
    /// Where the answer goes. Dropping it unanswered tells the server "cancel".
    pub reply: oneshot::Sender<QuestionAnswer>,
}

/// What a question asks of the person.
#[derive(Debug, Clone, PartialEq)]
pub enum Asked {
    /// Let the person's model answer the server's messages (`sampling/createMessage`): the
    /// person sees the request, may change it, and sees the answer before it goes back.
    Completion(CompletionRequest),
    /// Fill a form (form mode): its `requestedSchema`, as the server sent it (bounded by
    /// [`MAX_QUESTION_SCHEMA_BYTES`]). Untrusted: read it as data, never as a schema to obey.
    Form { requested_schema: Value },
    /// Open a page (URL mode): to sign in, pay, or give what must not pass through the chat.
    /// The address is the server's, unchecked (bounded by [`MAX_LINK_BYTES`]).
    Link {
        url: String,
        /// The server's id for this question: its completion notice names it (empty on
        /// 2026-07-28, which has none).
        elicitation_id: String,
        /// What the answer means.
        then: LinkThen,
    },
}

/// What accepting a page question means, by the way the server asked.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum LinkThen {
    /// The server asked during the call and waits for the answer: "accept" says the person
    /// opened the page; the server learns the rest from the page itself.
    Answer,
    /// The server refused the call until the page is done (error `-32042`): "accept" says it is
    /// done (the server's completion notice came, or the person said so), and the call is sent
    /// again; anything else ends the call.
    Retry,
}

/// The most messages one completion request may carry.
pub const MAX_SAMPLING_MESSAGES: usize = 50;
/// The most text one completion request may carry, in bytes (messages and system prompt).
pub const MAX_SAMPLING_BYTES: usize = 64 * 1024;
/// The largest answer a server may ask for, in tokens; a larger `maxTokens` is lowered to it.
pub const MAX_SAMPLING_TOKENS: u32 = 4096;

/// A server's request for a completion, text only, as the server wrote it (untrusted: every
/// word of it is the server's).
#[derive(Debug, Clone, PartialEq)]
pub struct CompletionRequest {
    pub system_prompt: Option<String>,
    pub messages: Vec<SampledMessage>,
    /// The longest answer it wants, in tokens (at most [`MAX_SAMPLING_TOKENS`]).
    pub max_tokens: u32,
    pub temperature: Option<f32>,
    pub stop_sequences: Vec<String>,
}

/// One message of a completion request.
#[derive(Debug, Clone, PartialEq)]
pub struct SampledMessage {
    /// `true` for the assistant's turns, `false` for the user's.
    pub from_assistant: bool,
    pub text: String,
}

impl CompletionRequest {
    /// Reads `sampling/createMessage` parameters, or says why this client will not run them:
    /// anything but text (images, audio, tool use), tools offered, or more than the bounds.
    pub(crate) fn from_params(params: &Value) -> Result<CompletionRequest, String> {
        let listed = params
            .get("messages")
            .and_then(Value::as_array)
            .ok_or("the request has no messages")?;
        if listed.is_empty() {
            return Err("the request has no messages".to_owned());
        }
        if listed.len() > MAX_SAMPLING_MESSAGES {
            return Err(format!(
                "the request has {} messages; at most {MAX_SAMPLING_MESSAGES} are passed on",
                listed.len()
            ));
        }
        if params.get("tools").is_some_and(|t| !t.is_null()) {
            return Err("the request offers tools to the model, which this client does not \
                        pass on"
                .to_owned());
        }
        let mut messages = Vec::with_capacity(listed.len());
        let mut size = 0_usize;
        for message in listed {
            let from_assistant = match message.get("role").and_then(Value::as_str) {
                Some("assistant") => true,
                Some("user") => false,
                _ => return Err("a message has no role of user or assistant".to_owned()),
            };
            let blocks = match message.get("content") {
                Some(Value::Array(blocks)) => blocks.iter().collect::<Vec<_>>(),
                Some(block @ Value::Object(_)) => vec![block],
                _ => return Err("a message has no content".to_owned()),
            };
            let mut text = String::new();
            for block in blocks {
                match (block.get("type").and_then(Value::as_str), block.get("text")) {
                    (Some("text"), Some(Value::String(part))) => {
                        if !text.is_empty() {
                            text.push('\n');
                        }
                        text.push_str(part);
                    }
                    (kind, _) => {
                        return Err(format!(
                            "a message holds {} content; this client passes text only",
                            kind.unwrap_or("unknown")
                        ));
                    }
                }
            }
            size = size.saturating_add(text.len());
            messages.push(SampledMessage { from_assistant, text });
        }
        let system_prompt = params.get("systemPrompt").and_then(Value::as_str).map(str::to_owned);
        size = size.saturating_add(system_prompt.as_ref().map_or(0, String::len));
        if size > MAX_SAMPLING_BYTES {
            return Err(format!(
                "the request holds {size} bytes of text; at most {MAX_SAMPLING_BYTES} are passed on"
            ));
        }
        let max_tokens = params
            .get("maxTokens")
            .and_then(Value::as_u64)
            .ok_or("the request sets no maxTokens")?;
        let stop_sequences = params
            .get("stopSequences")
            .and_then(Value::as_array)
            .map(|list| list.iter().filter_map(Value::as_str).take(4).map(str::to_owned).collect())
            .unwrap_or_default();
        Ok(CompletionRequest {
            system_prompt,
            messages,
            max_tokens: u32::try_from(max_tokens).unwrap_or(u32::MAX).clamp(1, MAX_SAMPLING_TOKENS),
            temperature: params
                .get("temperature")
                .and_then(Value::as_f64)
                .map(|t| t.clamp(0.0, 2.0) as f32),
            stop_sequences,
        })
    }
}

/// The model's answer to a completion request, as the person let it go back.
#[derive(Debug, Clone, PartialEq)]
pub struct Completion {
    pub text: String,
    /// The model that answered, as its provider names it.
    pub model: String,
    /// `true` when the answer stopped at its token limit.
    pub cut: bool,
}

impl Completion {
    /// The `sampling/createMessage` result.
    pub(crate) fn into_result(self) -> Value {
        let stop = if self.cut { "maxTokens" } else { "endTurn" };
        serde_json::json!({
            "role": "assistant",
            "content": {"type": "text", "text": self.text},
            "model": self.model,
            "stopReason": stop,
        })
    }
}

/// What the person did with a question.
#[derive(Debug, Clone, PartialEq)]
pub enum QuestionAnswer {
    /// A completion request run, and its answer let go back.
    Completed(Completion),
    /// Answered: the form's values, by field name. Defaults the schema gives for fields left
    /// out are added before it is sent (SEP-1034).
    Accept(Map<String, Value>),
    /// Said no.
    Decline,
    /// Dismissed it, or nobody answered.
    Cancel,
}

/// What a server tells of a call while it runs.
#[derive(Debug)]
pub enum CallNews {
    /// A question for the person; answer it through its `reply`.
    Question(ServerQuestion),
    /// How far the call has come (`notifications/progress`), as the server says.
    Progress(Progress),
    /// The server says the page it asked to be opened is done
    /// (`notifications/elicitation/complete`), naming the question's elicitation id.
    LinkDone { elicitation_id: String },
    /// The server runs the call as a long-running task, and this is where the task stands:
    /// sent when it starts and whenever its status or the server's words about it change.
    Task(TaskReport),
}

/// Where a server's long-running task stands while it runs, as the server says.
#[derive(Debug, Clone, PartialEq)]
pub struct TaskReport {
    /// The server's id for the task (its text, bounded).
    pub task_id: String,
    pub status: TaskState,
    /// The server's words about it (its text, bounded to [`MAX_PROGRESS_MESSAGE_BYTES`]).
    pub message: Option<String>,
}

/// A running task's status.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum TaskState {
    /// At work.
    Working,
    /// Waiting for answers to its questions (each put to the person as any question is).
    InputRequired,
}

impl TaskState {
    /// The protocol's word for it.
    pub fn as_str(self) -> &'static str {
        match self {
            TaskState::Working => "working",
            TaskState::InputRequired => "input_required",
        }
    }
}

/// A server's progress report on a running call. Its message is the server's text, bounded.
#[derive(Debug, Clone, PartialEq)]
pub struct Progress {
    pub progress: f64,
    pub total: Option<f64>,
    pub message: Option<String>,
}

/// The longest progress message handed on, in bytes.
pub const MAX_PROGRESS_MESSAGE_BYTES: usize = 300;

/// Where a call's news goes: the caller receives each question and progress report. Progress is
/// dropped rather than waited for when the caller is busy (the next report says more).
pub type Asker = mpsc::Sender<CallNews>;

impl QuestionAnswer {
    /// The answer as the protocol carries it, with the schema's defaults applied to accepted
    /// content.
    pub(crate) fn into_result(self, asked: &Asked) -> ElicitResult {
        match self {
            QuestionAnswer::Accept(content) => match asked {
                Asked::Form { requested_schema } => ElicitResult::new(ElicitationAction::Accept)
                    .with_content(Value::Object(with_defaults(requested_schema, content))),
                Asked::Link { .. } | Asked::Completion(_) => {
                    ElicitResult::new(ElicitationAction::Accept)
                }
            },
            // Not an answer to a question of a form or a page: nothing to accept.
            QuestionAnswer::Completed(_) => ElicitResult::new(ElicitationAction::Cancel),
            QuestionAnswer::Decline => ElicitResult::new(ElicitationAction::Decline),
            QuestionAnswer::Cancel => ElicitResult::new(ElicitationAction::Cancel),
        }
    }
}

/// `content` with each property the schema gives a `default` for, and `content` leaves out,
/// set to that default (SEP-1034: the person saw the default and let it stand).
pub fn with_defaults(
    requested_schema: &Value,
    mut content: Map<String, Value>,
) -> Map<String, Value> {
    if let Some(properties) = requested_schema.get("properties").and_then(Value::as_object) {
        for (name, property) in properties {
            if let Some(default) = property.get("default").filter(|d| !d.is_null())
                && !content.contains_key(name)
            {
                content.insert(name.clone(), default.clone());
            }
        }
    }
    content
}

/// Asks `asker` (if any) and waits for the answer; no asker, or one that went away, declines
/// or cancels. An oversized schema or address is an error for the server.
pub(crate) async fn put(
    asker: Option<&Asker>,
    message: String,
    asked: Asked,
) -> Result<QuestionAnswer, rmcp::ErrorData> {
    let Some(asker) = asker else {
        return Ok(QuestionAnswer::Decline);
    };
    let bound = match &asked {
        Asked::Form { requested_schema } => Some((
            "requested schema",
            requested_schema.to_string().len(),
            MAX_QUESTION_SCHEMA_BYTES,
            "forms",
        )),
        Asked::Link { url, .. } => Some(("address", url.len(), MAX_LINK_BYTES, "addresses")),
        // Bounded as it was read (`CompletionRequest::from_params`).
        Asked::Completion(_) => None,
    };
    if let Some((what, size, limit, shown)) = bound
        && size > limit
    {
        return Err(rmcp::ErrorData::invalid_params(
            format!(
                "the {what} is {size} bytes; this client shows {shown} of at most {limit} bytes"
            ),
            None,
        ));
    }
    let (message, _) = crate::canonical::truncate(
        &message,
        MAX_QUESTION_MESSAGE_BYTES,
        crate::config::TRUNCATION_MARKER,
    );
    let (reply, answer) = oneshot::channel();
    let question = ServerQuestion { message, asked, reply };
    if asker.send(CallNews::Question(question)).await.is_err() {
        return Ok(QuestionAnswer::Cancel);
    }
    Ok(answer.await.unwrap_or(QuestionAnswer::Cancel))
}

/// What a question carried in an `elicitation/create` request (or an input request) asks;
/// none for a mode this client does not know.
pub(crate) fn asked_of(params: ElicitRequestParams) -> Option<(String, Asked)> {
    Some(match params {
        ElicitRequestParams::FormElicitationParams { message, requested_schema, .. } => {
            let requested_schema = serde_json::to_value(&requested_schema).unwrap_or(Value::Null);
            (message, Asked::Form { requested_schema })
        }
        ElicitRequestParams::UrlElicitationParams { message, url, elicitation_id, .. } => {
            (message, Asked::Link { url, elicitation_id, then: LinkThen::Answer })
        }
        _ => return None,
    })
}

/// The pages a server's `-32042` refusal asks to be opened before the call is sent again
/// (its error data's `elicitations`, URL mode only), or why they cannot be put to the person.
pub(crate) fn links_first(data: Option<&Value>) -> Result<Vec<(String, Asked)>, String> {
    let listed = data
        .and_then(|d| d.get("elicitations"))
        .and_then(Value::as_array)
        .ok_or("it named no page to open")?;
    if listed.is_empty() {
        return Err("it named no page to open".to_owned());
    }
    if listed.len() > MAX_LINKS_FIRST {
        return Err(format!(
            "it named {} pages to open; at most {MAX_LINKS_FIRST} are put to the person",
            listed.len()
        ));
    }
    listed
        .iter()
        .map(|item| {
            let text = |key: &str| item.get(key).and_then(Value::as_str).map(str::to_owned);
            if item.get("mode").and_then(Value::as_str) != Some("url") {
                return Err("one of the questions it named is not a page to open".to_owned());
            }
            let url = text("url").ok_or("one of the pages it named has no address")?;
            Ok((
                text("message").unwrap_or_default(),
                Asked::Link {
                    url,
                    elicitation_id: text("elicitationId").unwrap_or_default(),
                    then: LinkThen::Retry,
                },
            ))
        })
        .collect()
}

/// The elicitation id a `notifications/elicitation/complete` names, if it is one this client
/// could have handed on.
pub(crate) fn completed_id(params: Option<&Value>) -> Option<String> {
    let id = params?.get("elicitationId")?.as_str()?;
    (!id.is_empty() && id.len() <= MAX_ELICITATION_ID_BYTES).then(|| id.to_owned())
}

/// What the handler knows of the call running on its session (a session carries one call at
/// a time: see the pool's `Lease`).
#[derive(Debug, Clone, Default)]
pub(crate) struct CallSlot {
    /// Who the running call's questions go to; none: they are declined.
    asker: Arc<std::sync::Mutex<Option<Asker>>>,
    /// Questions being put to the person now: the call's idle timer stands still meanwhile.
    pub(crate) asking: Arc<AtomicUsize>,
    /// Goes up with each progress notification and each answered question: the server is
    /// still at work, so the call's idle timer starts again.
    pub(crate) activity: Arc<watch::Sender<u64>>,
}

impl CallSlot {
    pub(crate) fn asker(&self) -> Option<Asker> {
        self.asker.lock().unwrap_or_else(std::sync::PoisonError::into_inner).clone()
    }

    pub(crate) fn lend(&self, asker: Option<Asker>) -> Lent<'_> {
        *self.asker.lock().unwrap_or_else(std::sync::PoisonError::into_inner) = asker;
        Lent(self)
    }

    pub(crate) fn stirred(&self) {
        self.activity.send_modify(|n| *n = n.wrapping_add(1));
    }

    /// Puts one question to the call's asker, the idle timer held meanwhile.
    pub(crate) async fn put(
        &self,
        message: String,
        asked: Asked,
    ) -> Result<QuestionAnswer, rmcp::ErrorData> {
        let asker = self.asker();
        self.asking.fetch_add(1, Ordering::SeqCst);
        let answer = put(asker.as_ref(), message, asked).await;
        self.asking.fetch_sub(1, Ordering::SeqCst);
        self.stirred();
        answer
    }

    /// [`CallSlot::put`] for a question carried in a request, answered as the protocol says.
    pub(crate) async fn elicit(
        &self,
        params: ElicitRequestParams,
    ) -> Result<ElicitResult, rmcp::ErrorData> {
        let Some((message, asked)) = asked_of(params) else {
            // A mode not offered (the capability names form and URL only).
            return Ok(ElicitResult::new(ElicitationAction::Decline));
        };
        let answer = self.put(message, asked.clone()).await?;
        Ok(answer.into_result(&asked))
    }

    /// Puts a server's request for a completion to the call's asker: the `sampling/createMessage`
    /// result, or the error the protocol gives for a request the person did not let run.
    pub(crate) async fn complete(&self, params: &Value) -> Result<Value, rmcp::ErrorData> {
        let request = CompletionRequest::from_params(params)
            .map_err(|why| rmcp::ErrorData::invalid_params(why, None))?;
        match self.put(String::new(), Asked::Completion(request)).await? {
            QuestionAnswer::Completed(completion) => Ok(completion.into_result()),
            // The protocol's word for it (code -1).
            _ => Err(rmcp::ErrorData::new(
                rmcp::model::ErrorCode(-1),
                "User rejected sampling request",
                None,
            )),
        }
    }

    /// Hands a page's completion notice to the call's asker (never waits).
    pub(crate) fn link_done(&self, elicitation_id: String) {
        if let Some(asker) = self.asker() {
            let _ = asker.try_send(CallNews::LinkDone { elicitation_id });
        }
    }
}

/// The asker lent to a call, taken back when the call ends however it ends.
pub(crate) struct Lent<'a>(&'a CallSlot);

impl Drop for Lent<'_> {
    fn drop(&mut self) {
        *self.0.asker.lock().unwrap_or_else(std::sync::PoisonError::into_inner) = None;
    }
}

#[cfg(test)]
mod tests {
    use serde_json::json;

    use super::*;

    #[test]
    fn defaults_fill_only_what_the_person_left_out() {
        let schema = json!({"type": "object", "properties": {
            "name": {"type": "string", "default": "John Doe"},
            "age": {"type": "integer", "default": 30},
            "note": {"type": "string"},
        }});
        let mut given = Map::new();
        given.insert("name".into(), json!("Ada"));
        let filled = with_defaults(&schema, given);
        assert_eq!(Value::Object(filled), json!({"name": "Ada", "age": 30}));
    }
}
