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

/// A question a server asked while one of its tools ran.
#[derive(Debug)]
pub struct ServerQuestion {
    /// The server's words to the person (bounded by [`MAX_QUESTION_MESSAGE_BYTES`]).
    pub message: String,
    /// The form mode's `requestedSchema`, as the server sent it (bounded by
    /// [`MAX_QUESTION_SCHEMA_BYTES`]). Untrusted: read it as data, never as a schema to obey.
    pub requested_schema: Value,
    /// Where the answer goes. Dropping it unanswered tells the server "cancel".
    pub reply: oneshot::Sender<QuestionAnswer>,
}

/// What the person did with a question.
#[derive(Debug, Clone, PartialEq)]
pub enum QuestionAnswer {
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
    pub(crate) fn into_result(self, requested_schema: &Value) -> ElicitResult {
        match self {
            QuestionAnswer::Accept(content) => ElicitResult::new(ElicitationAction::Accept)
                .with_content(Value::Object(with_defaults(requested_schema, content))),
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
/// or cancels. An oversized schema is an error for the server.
pub(crate) async fn put(
    asker: Option<&Asker>,
    message: String,
    requested_schema: Value,
) -> Result<ElicitResult, rmcp::ErrorData> {
    let Some(asker) = asker else {
        return Ok(ElicitResult::new(ElicitationAction::Decline));
    };
    let size = requested_schema.to_string().len();
    if size > MAX_QUESTION_SCHEMA_BYTES {
        return Err(rmcp::ErrorData::invalid_params(
            format!(
                "the requested schema is {size} bytes; this client shows forms of at most \
                 {MAX_QUESTION_SCHEMA_BYTES} bytes"
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
    let question = ServerQuestion { message, requested_schema: requested_schema.clone(), reply };
    if asker.send(CallNews::Question(question)).await.is_err() {
        return Ok(ElicitResult::new(ElicitationAction::Cancel));
    }
    let answer = answer.await.unwrap_or(QuestionAnswer::Cancel);
    Ok(answer.into_result(&requested_schema))
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
        params: ElicitRequestParams,
    ) -> Result<ElicitResult, rmcp::ErrorData> {
        let ElicitRequestParams::FormElicitationParams { message, requested_schema, .. } = params
        else {
            // Only form questions are offered (the capability says so).
            return Ok(ElicitResult::new(ElicitationAction::Decline));
        };
        let schema = serde_json::to_value(&requested_schema).unwrap_or(Value::Null);
        let asker = self.asker();
        self.asking.fetch_add(1, Ordering::SeqCst);
        let answer = put(asker.as_ref(), message, schema).await;
        self.asking.fetch_sub(1, Ordering::SeqCst);
        self.stirred();
        answer
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
