//! The values the broker stores, answers with and broadcasts.

use std::fmt;

use serde::{Deserialize, Serialize};
use serde_json::Value;

use crate::BrokerError;

/// Where a call stands. Only `Pending` ever changes, and only once.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum CallState {
    /// Put to the person; no answer yet.
    Pending,
    /// Allowed by a person, or run unasked (bot, remembered consent).
    Allowed,
    /// Refused by a person.
    Refused,
    /// Nobody answered before the deadline: refused, because silence is never consent.
    Expired,
    /// The turn that asked is gone (process stopped, crashed, or the turn was cancelled).
    Interrupted,
}

impl CallState {
    pub const ALL: [CallState; 5] = [
        CallState::Pending,
        CallState::Allowed,
        CallState::Refused,
        CallState::Expired,
        CallState::Interrupted,
    ];

    /// The name stored in the database.
    pub fn as_str(self) -> &'static str {
        match self {
            CallState::Pending => "pending",
            CallState::Allowed => "allowed",
            CallState::Refused => "refused",
            CallState::Expired => "expired",
            CallState::Interrupted => "interrupted",
        }
    }

    pub fn parse(value: &str) -> Option<CallState> {
        CallState::ALL.into_iter().find(|state| state.as_str() == value)
    }

    /// Whether the call has its answer for good.
    pub fn is_final(self) -> bool {
        self != CallState::Pending
    }
}

impl fmt::Display for CallState {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.as_str())
    }
}

/// `answered_by` of a call a bot ran unasked (its owner ticked MCP in the bot's tools).
pub const ANSWERED_BY_BOT: &str = "bot";
/// `answered_by` of a call remembered consent let through (grant, rule, allow-all mode).
pub const ANSWERED_BY_CONSENT: &str = "consent";

/// What the turn engine knows about a call it is about to make.
#[derive(Debug, Clone, PartialEq)]
pub struct NewCall {
    pub account_id: String,
    pub conversation_id: String,
    pub turn_id: String,
    pub server_id: String,
    /// The label the person gave the server.
    pub server_label: String,
    /// The server's address (grants are keyed by it).
    pub server_address: String,
    /// The tool's name on the server.
    pub tool_name: String,
    /// The `mcp_<server>_<tool>` name the model used.
    pub model_tool_name: String,
    /// The tool's description as stored in the catalogue snapshot: what the card shows.
    pub tool_description: String,
    /// `llooma_consent::tool_definition_hash` of the catalogued definition.
    pub tool_definition_hash: String,
    /// What the server says of the tool (title and hints) as JSON, shown on the card.
    pub tool_hints_json: Option<String>,
    /// The arguments the model asked for.
    pub arguments: Value,
}

/// A tool call put to the person (or recorded as run unasked), as stored.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct PendingCall {
    pub id: String,
    pub account_id: String,
    pub conversation_id: String,
    pub turn_id: String,
    pub server_id: String,
    pub server_label: String,
    pub server_address: String,
    pub tool_name: String,
    pub model_tool_name: String,
    pub tool_description: String,
    pub tool_definition_hash: String,
    pub tool_hints_json: Option<String>,
    /// Set when the card is the server's question during the call (the call itself was
    /// allowed before): the form asked for, as JSON the instance wrote.
    pub question_json: Option<String>,
    /// A question's answer ([`Reply`] as JSON), from the moment it wins until the waiting
    /// turn has read it.
    pub reply_json: Option<String>,
    /// The exact arguments shown, as canonical JSON (sorted keys, no insignificant whitespace).
    pub arguments_json: String,
    /// SHA-256 (hex) of `arguments_json`.
    pub arguments_sha256: String,
    pub created_at_ms: i64,
    /// When the question lapses (created + the answer window, two minutes unless configured).
    pub deadline_ms: i64,
    pub state: CallState,
    /// The session id that answered, or [`ANSWERED_BY_BOT`] / [`ANSWERED_BY_CONSENT`].
    pub answered_by: Option<String>,
    pub answered_at_ms: Option<i64>,
    /// Whether the answer was "Always allow" (a grant was stored with it).
    pub remember: bool,
    /// Why an interrupted call was interrupted, or what let an unasked call through.
    pub reason: Option<String>,
    /// The process (replica) whose turn is waiting for the answer.
    pub owner_replica: String,
}

impl PendingCall {
    /// The arguments to send: exactly the ones stored (and shown), parsed back.
    pub fn arguments(&self) -> Result<Value, BrokerError> {
        serde_json::from_str(&self.arguments_json)
            .map_err(|e| BrokerError::CorruptArguments(e.to_string()))
    }

    /// What a tab shows.
    pub fn card(&self) -> ApprovalCard {
        ApprovalCard {
            id: self.id.clone(),
            conversation_id: self.conversation_id.clone(),
            turn_id: self.turn_id.clone(),
            server_id: self.server_id.clone(),
            server_label: self.server_label.clone(),
            tool_name: self.tool_name.clone(),
            model_tool_name: self.model_tool_name.clone(),
            tool_description: self.tool_description.clone(),
            // Written by the instance when the card was made; a row it cannot read shows none.
            tool_hints: self.tool_hints_json.as_deref().and_then(|j| serde_json::from_str(j).ok()),
            question: self.question_json.as_deref().and_then(|j| serde_json::from_str(j).ok()),
            arguments_json: self.arguments_json.clone(),
            created_at_ms: self.created_at_ms,
            deadline_ms: self.deadline_ms,
        }
    }
}

/// The question as a tab shows it: which server, which tool, what the tool says it does, and the
/// exact arguments.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct ApprovalCard {
    pub id: String,
    pub conversation_id: String,
    pub turn_id: String,
    pub server_id: String,
    pub server_label: String,
    pub tool_name: String,
    pub model_tool_name: String,
    pub tool_description: String,
    /// What the server says of the tool (title and hints): its claims, not facts.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub tool_hints: Option<Value>,
    /// The server's question (the form to fill), when the card is one.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub question: Option<Value>,
    /// Canonical JSON of the arguments, exactly what will be sent.
    pub arguments_json: String,
    pub created_at_ms: i64,
    pub deadline_ms: i64,
}

/// A person's answer on a card.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum AnswerChoice {
    Allow,
    Refuse,
    /// Allow, and remember it for the same tool with the same arguments.
    AlwaysAllow,
}

/// A person's answer to a server's question.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(tag = "action", rename_all = "snake_case")]
pub enum Reply {
    /// The form's values, by field name.
    Accept { content: serde_json::Map<String, Value> },
    /// Said no.
    Decline,
    /// Dismissed the question without an answer.
    Cancel,
}

impl Reply {
    /// The state a question's card settles in: `allowed` when answered, else `refused`.
    pub fn state(&self) -> CallState {
        match self {
            Reply::Accept { .. } => CallState::Allowed,
            Reply::Decline | Reply::Cancel => CallState::Refused,
        }
    }
}

/// What happened to an answer.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum AnswerResult {
    /// This answer counted.
    Won { call: Box<PendingCall> },
    /// Another answer (another tab, device or replica), the deadline or an interruption came
    /// first. Enough to say "already allowed from another tab at 14:02:11".
    AlreadyAnswered { state: CallState, answered_at_ms: Option<i64>, by_session: Option<String> },
    /// No such call for this account. Deliberately the same for "someone else's call".
    NotFound,
}

/// What a tab watching an account hears.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(tag = "type", rename_all = "snake_case")]
pub enum BrokerEvent {
    Appeared { card: Box<ApprovalCard> },
    Answered { id: String, state: CallState },
    Expired { id: String },
    Interrupted { id: String },
}

impl BrokerEvent {
    /// The call the event is about.
    pub fn call_id(&self) -> &str {
        match self {
            BrokerEvent::Appeared { card } => &card.id,
            BrokerEvent::Answered { id, .. }
            | BrokerEvent::Expired { id }
            | BrokerEvent::Interrupted { id } => id,
        }
    }
}

/// How a wait ended: the call with its final state.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Outcome {
    pub call: PendingCall,
}

impl Outcome {
    pub fn state(&self) -> CallState {
        self.call.state
    }

    /// Whether the call may go out.
    pub fn allowed(&self) -> bool {
        self.call.state == CallState::Allowed
    }

    /// A question's answer: what the person gave, or `Cancel` when nobody answered (expired,
    /// interrupted) or the stored answer cannot be read.
    pub fn reply(&self) -> Reply {
        self.call
            .reply_json
            .as_deref()
            .and_then(|json| serde_json::from_str(json).ok())
            .unwrap_or(Reply::Cancel)
    }

    /// What the model is told instead of a result when the call did not go out; `None` when it
    /// was allowed (the model then gets the tool's result).
    pub fn model_text(&self) -> Option<String> {
        let what = format!("the call to {} on {}", self.call.tool_name, self.call.server_label);
        match self.call.state {
            CallState::Allowed => None,
            CallState::Refused => Some(format!(
                "The person refused {what}. Nothing was sent to the server. Carry on without \
                 its result."
            )),
            CallState::Expired => Some(format!(
                "The person did not answer within {}, so {what} was not made. Nothing was sent \
                 to the server. Carry on without its result.",
                window_words(self.call.deadline_ms - self.call.created_at_ms)
            )),
            CallState::Interrupted => Some(format!(
                "{} was not made: {}. Nothing was sent to the server.",
                capitalize(&what),
                self.call.reason.as_deref().unwrap_or("the turn was interrupted")
            )),
            // `wait` only returns final states; say something true if it ever does not.
            CallState::Pending => Some(format!("{} was not made.", capitalize(&what))),
        }
    }
}

/// "two minutes", "90 seconds": how long a question stood, in words.
fn window_words(window_ms: i64) -> String {
    let seconds = (window_ms.max(0) + 500) / 1000;
    match seconds {
        120 => "two minutes".to_owned(),
        1 => "one second".to_owned(),
        s if s % 60 == 0 => format!("{} minutes", s / 60),
        s => format!("{s} seconds"),
    }
}

fn capitalize(text: &str) -> String {
    let mut chars = text.chars();
    match chars.next() {
        Some(first) => first.to_uppercase().chain(chars).collect(),
        None => String::new(),
    }
}

/// A change to a call, as the store's notification source carries it between replicas.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Notice {
    #[serde(rename = "i")]
    pub call_id: String,
    #[serde(rename = "a")]
    pub account_id: String,
    #[serde(rename = "s")]
    pub state: CallState,
    /// The replica that made the change (a replica ignores its own notices: it already woke its
    /// waiters and told its watchers).
    #[serde(rename = "o")]
    pub origin: String,
}

impl Notice {
    /// Compact JSON, well under Postgres' 8000-byte NOTIFY payload limit.
    pub fn to_payload(&self) -> String {
        serde_json::to_string(self).unwrap_or_default()
    }

    pub fn from_payload(payload: &str) -> Option<Notice> {
        serde_json::from_str(payload).ok()
    }
}
