//! The events of a turn: what the turn engine reports, what a conversation's log stores, what
//! `GET /api/v1/conversations/{id}/events` streams and what the page reads. One type end to end.
//!
//! On the wire an event is a kind (the SSE `event:` name, the log's `kind` column) and a JSON
//! payload (the SSE `data:`, the log's `data_json`); [`TurnEvent::encode`] makes that pair once,
//! [`TurnEvent::decode`] reads it back. The payloads are the ones `docs/api.md` documents: fields
//! that an event does not carry are left out, never sent as `null`, except where the documented
//! shape has a `null` (`group` of an announce-mode step, `title` of a page without one).

use serde::{Deserialize, Deserializer, Serialize};

use crate::ApprovalCardView;

/// One event of a turn's log, in the order the turn produced it.
#[derive(Clone, Debug, PartialEq)]
pub enum TurnEvent {
    /// The turn began (its person's message is stored with this `turnId`).
    Start(TurnStarted),
    /// A piece of the reply (several of the model's tokens may be joined in one).
    Text(Delta),
    /// A piece of the model's reasoning, where the model shows it.
    Reasoning(Delta),
    /// An MCP call waits for the person's answer.
    Approval(ApprovalShown),
    /// Buttons to show; the pick is sent as the next message.
    Choices(ChoicesShown),
    /// What the tool definitions of one request to the model weighed.
    Request(RequestWeighed),
    /// An MCP call went out and runs: sent as it leaves, then with the server's progress
    /// reports (at most two a second). The `step` that settles the call follows.
    Progress(CallProgress),
    /// A tool call or an attached resource or prompt: what it was and what became of it
    /// (boxed: a step has many optional fields, the other events a few).
    Step(Box<Step>),
    /// The turn failed; why, in words for the person.
    Error(TurnFailure),
    /// The turn is over (a new message may be sent at once).
    End(TurnEnded),
}

/// A [`TurnEvent`] as it is stored and streamed: its kind and its JSON payload.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct EncodedEvent {
    pub kind: &'static str,
    pub data_json: String,
}

/// A stored or streamed event that is not one this version knows.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct UnknownEvent {
    pub kind: String,
    pub problem: String,
}

impl std::fmt::Display for UnknownEvent {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "a turn event `{}` that cannot be read: {}", self.kind, self.problem)
    }
}

impl std::error::Error for UnknownEvent {}

impl TurnEvent {
    /// The kind: the SSE event name and the log's `kind`.
    pub fn kind(&self) -> &'static str {
        match self {
            TurnEvent::Start(_) => "start",
            TurnEvent::Text(_) => "text",
            TurnEvent::Reasoning(_) => "reasoning",
            TurnEvent::Approval(_) => "approval",
            TurnEvent::Choices(_) => "choices",
            TurnEvent::Request(_) => "request",
            TurnEvent::Progress(_) => "progress",
            TurnEvent::Step(_) => "step",
            TurnEvent::Error(_) => "error",
            TurnEvent::End(_) => "end",
        }
    }

    /// Every kind, in the order of the variants (what a page subscribes to).
    pub const KINDS: [&'static str; 10] = [
        "start",
        "text",
        "reasoning",
        "approval",
        "choices",
        "request",
        "progress",
        "step",
        "error",
        "end",
    ];

    /// The kind and the JSON payload, made once for the log and for every watching tab.
    pub fn encode(&self) -> EncodedEvent {
        fn json<T: Serialize>(payload: &T) -> String {
            // These payloads are plain structs of strings, numbers and booleans (and the card's
            // JSON text): serializing them cannot fail.
            serde_json::to_string(payload).unwrap_or_else(|_| "{}".to_owned())
        }
        let data_json = match self {
            TurnEvent::Start(p) => json(p),
            TurnEvent::Text(p) | TurnEvent::Reasoning(p) => json(p),
            TurnEvent::Approval(p) => json(p),
            TurnEvent::Choices(p) => json(p),
            TurnEvent::Request(p) => json(p),
            TurnEvent::Progress(p) => json(p),
            TurnEvent::Step(p) => json(p),
            TurnEvent::Error(p) => json(p),
            TurnEvent::End(p) => json(p),
        };
        EncodedEvent { kind: self.kind(), data_json }
    }

    /// Reads an event back from its kind and JSON payload.
    pub fn decode(kind: &str, data_json: &str) -> Result<TurnEvent, UnknownEvent> {
        fn parse<'a, T: Deserialize<'a>>(kind: &str, data: &'a str) -> Result<T, UnknownEvent> {
            serde_json::from_str(data)
                .map_err(|e| UnknownEvent { kind: kind.to_owned(), problem: e.to_string() })
        }
        Ok(match kind {
            "start" => TurnEvent::Start(parse(kind, data_json)?),
            "text" => TurnEvent::Text(parse(kind, data_json)?),
            "reasoning" => TurnEvent::Reasoning(parse(kind, data_json)?),
            "approval" => TurnEvent::Approval(parse(kind, data_json)?),
            "choices" => TurnEvent::Choices(parse(kind, data_json)?),
            "request" => TurnEvent::Request(parse(kind, data_json)?),
            "progress" => TurnEvent::Progress(parse(kind, data_json)?),
            "step" => TurnEvent::Step(parse(kind, data_json)?),
            "error" => TurnEvent::Error(parse(kind, data_json)?),
            "end" => TurnEvent::End(parse(kind, data_json)?),
            other => {
                return Err(UnknownEvent {
                    kind: other.to_owned(),
                    problem: "not a kind of turn event".to_owned(),
                });
            }
        })
    }

    pub fn text(delta: impl Into<String>) -> Self {
        TurnEvent::Text(Delta { delta: delta.into() })
    }

    pub fn reasoning(delta: impl Into<String>) -> Self {
        TurnEvent::Reasoning(Delta { delta: delta.into() })
    }

    pub fn error(message: impl Into<String>) -> Self {
        TurnEvent::Error(TurnFailure { message: message.into() })
    }

    pub fn end(state: EndState) -> Self {
        TurnEvent::End(TurnEnded { state, context: None })
    }

    pub fn step(step: Step) -> Self {
        TurnEvent::Step(Box::new(step))
    }
}

#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct TurnStarted {
    pub turn_id: String,
    /// The model asked (absent in logs written before December 2026).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub model: Option<String>,
    /// When the turn started, RFC 3339.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub started_at: Option<String>,
    /// The turn whose message this turn's message replaced (an edited message, or a reply asked
    /// for again): that turn and every later one are gone from the conversation.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub replaced: Option<String>,
    /// `true` for a spoken turn (voice mode): its MCP calls are refused outright. Absent
    /// otherwise.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub spoken: Option<bool>,
}

impl TurnStarted {
    pub fn new(turn_id: impl Into<String>) -> Self {
        TurnStarted {
            turn_id: turn_id.into(),
            model: None,
            started_at: None,
            replaced: None,
            spoken: None,
        }
    }
}

#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct Delta {
    pub delta: String,
}

#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct ApprovalShown {
    pub card: ApprovalCardView,
}

#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct ChoicesShown {
    pub call_id: String,
    pub question: String,
    pub options: Vec<String>,
}

/// A running MCP call, and how far it has come as its server says.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct CallProgress {
    /// The call's approval id (the `callId` of its card and of the step that settles it).
    pub call_id: String,
    /// The tool's name as the model called it, its server's label and its name there.
    pub tool: String,
    pub server: String,
    pub server_tool: String,
    /// `progress` of `total` (when the server gives a total); absent until it reports.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub progress: Option<serde_json::Number>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub total: Option<serde_json::Number>,
    /// The server's words about it (its text, bounded).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub message: Option<String>,
    /// When the server runs the call as a long-running task: where the task stands,
    /// `working` or `input_required` (waiting for an answer to one of its questions).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub task: Option<String>,
}

#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct RequestWeighed {
    /// Which request of the turn (1 for the first).
    pub round: usize,
    /// How many tool definitions it carried (0 for the last, which offers none).
    pub tools: usize,
    pub tool_bytes: usize,
    pub tool_tokens: usize,
    /// Whether announce mode shaped it.
    pub announce: bool,
}

#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct TurnFailure {
    pub message: String,
}

#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct TurnEnded {
    pub state: EndState,
    /// How full the model's context window was after the turn's last request (absent when no
    /// request was made).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub context: Option<ContextFill>,
}

/// How much of a model's context window a conversation fills: what its last request sent and
/// was answered, in tokens, against the window.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct ContextFill {
    pub used_tokens: u64,
    pub window_tokens: u64,
    /// The provider reported no usage: `usedTokens` is estimated from the request's size.
    #[serde(default, skip_serializing_if = "std::ops::Not::not")]
    pub estimated: bool,
}

/// How a turn ended.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum EndState {
    Done,
    Stopped,
    Failed,
}

impl EndState {
    /// The word stored in a turn's row and sent in `end`.
    pub fn as_str(self) -> &'static str {
        match self {
            EndState::Done => "done",
            EndState::Stopped => "stopped",
            EndState::Failed => "failed",
        }
    }
}

/// What became of a tool call, a chosen resource or prompt, or an announce-mode request.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum StepState {
    /// An app tool ran, a resource was read, a resource or prompt was attached.
    #[default]
    Done,
    /// It could not run (the step's `error` says why).
    Failed,
    /// The person refused the call, or memory was closed after an MCP answer, or the turn may
    /// not call MCP at all (a spoken turn).
    Refused,
    /// The MCP call was allowed and made (`isError` says whether the server reported an error).
    Allowed,
    /// Nobody answered the card in time: refused.
    Expired,
    /// The turn stopped (Stop, a restart) while the card waited.
    Interrupted,
    /// The model's arguments were not a JSON object: nothing was called.
    Invalid,
    /// Announce mode: the model asked for a server's (or group's) definitions.
    Opened,
    /// Shown by the page while a card waits for its answer; never sent by the server.
    Waiting,
    /// The MCP call went out and its answer has not come yet (with the server's progress, when
    /// it reports some); the step that settles it replaces this one.
    Running,
}

impl StepState {
    pub fn as_str(self) -> &'static str {
        match self {
            StepState::Done => "done",
            StepState::Failed => "failed",
            StepState::Refused => "refused",
            StepState::Allowed => "allowed",
            StepState::Expired => "expired",
            StepState::Interrupted => "interrupted",
            StepState::Invalid => "invalid",
            StepState::Opened => "opened",
            StepState::Waiting => "waiting",
            StepState::Running => "running",
        }
    }
}

/// What the person attached to a message.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum Attached {
    Resource,
    Prompt,
}

/// One step of a reply's timeline. Which fields are set depends on what the step is (see
/// `docs/api.md`): an app tool (`tool`, `state` and that tool's own fields), an MCP call
/// (`mcp`, `tool`, `server`, `serverTool`, `callId`, ...), a chosen resource or prompt
/// (`mcp`, `server`, `attached`, `uri` or `name`), the resource tools, announce mode's `opened`.
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct Step {
    /// The tool's name as the model called it (absent for an attached resource or prompt).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub tool: Option<String>,
    pub state: StepState,
    /// Set on every step that involves an MCP server.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub mcp: Option<bool>,
    /// The MCP server's label.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub server: Option<String>,
    /// The tool's name on its server.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub server_tool: Option<String>,
    /// The approval call's id (every MCP call that reached consent has one).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub call_id: Option<String>,
    /// The server answered the call with an error result.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub is_error: Option<bool>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub error: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub attached: Option<Attached>,
    /// A resource's address.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub uri: Option<String>,
    /// A prompt's name.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub name: Option<String>,
    /// Announce mode: the group asked for (`null`: every group of the server).
    #[serde(default, skip_serializing_if = "Option::is_none", deserialize_with = "nullable")]
    pub group: Option<Option<String>>,
    /// Announce mode: how many definitions were opened.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub tools: Option<usize>,
    /// `mcp_resource_list`: how many resources were listed.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub resources: Option<usize>,
    /// `current_date`: the date told.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub result: Option<String>,
    /// `web_search`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub query: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub results: Option<usize>,
    /// `read_page`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub url: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none", deserialize_with = "nullable")]
    pub title: Option<Option<String>>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub characters: Option<usize>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub cut: Option<bool>,
    /// `memory_read`: how many notes.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub entries: Option<usize>,
    /// Set on memory writes and forgets, and on refusals because memory is closed.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub memory: Option<bool>,
    /// The note written or forgotten.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub id: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub content: Option<String>,
    /// Why memory is closed, for the timeline.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub message: Option<String>,
    /// The MCP server whose answer closed memory.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub closed_by: Option<String>,
    /// `offer_choices`; on an MCP call's step, the server's question during the call.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub question: Option<String>,
    /// A running MCP call's progress as its server reports it (`progress` of `total`, when it
    /// gives a total); the server's words about it are in `message`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub progress: Option<serde_json::Number>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub total: Option<serde_json::Number>,
    /// On an MCP call that was made: the id of its server (what the person may read more of it
    /// through, such as a resource its result links to).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub server_id: Option<String>,
    /// A running MCP call the server runs as a long-running task: where the task stands
    /// (`working`, `input_required`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub task: Option<String>,
    /// What the person did with a server's question: `accept`, `decline` or `cancel` (also
    /// when nobody answered in time, or the turn has nobody to ask); for a page the call could
    /// not go on without, `done` once the page is done.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub reply: Option<String>,
    /// On an MCP call that was made: what of its result is shown to the person beside the
    /// model's reading of it (images, what the server marked for the person only, links to its
    /// resources). Bounded: see [`ShownPart`].
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub shown: Vec<ShownPart>,
    /// On a server's request for a completion (sampling): the model that would answer it.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub sampled: Option<String>,
    /// On a server's question that asked the person to open a page: its full address.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub link: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub options: Option<Vec<String>>,
    /// What the server returned, as the model read it (wrapped and labelled, and cut to the
    /// result caps), on an MCP call that was made.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub output: Option<String>,
    /// On an MCP call that was made whose tool comes with an interactive view (MCP Apps): what
    /// the view is drawn from, again after a reload, without calling the tool again.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub view: Option<StepView>,
}

/// What an MCP call's interactive view is drawn from.
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct StepView {
    /// Where the instance serves the view's document (the version the call was made with).
    pub document: String,
    /// The call's arguments, as sent to the server.
    pub arguments: serde_json::Value,
    /// The call's result as the view receives it (an MCP `CallToolResult`: `content`,
    /// `structuredContent`, `isError`), at most [`StepView::MAX_RESULT_BYTES`] as JSON.
    pub result: serde_json::Value,
}

impl StepView {
    /// The largest result handed to a view; a larger one is replaced by an error saying so.
    pub const MAX_RESULT_BYTES: usize = 256 * 1024;
}

/// A field that may be `null` on the wire: absent is `None`, `null` is `Some(None)`.
fn nullable<'de, D, T>(deserializer: D) -> Result<Option<Option<T>>, D::Error>
where
    D: Deserializer<'de>,
    T: Deserialize<'de>,
{
    Option::<T>::deserialize(deserializer).map(Some)
}

impl Step {
    /// A step of one of the app's own tools.
    pub fn app_tool(tool: impl Into<String>, state: StepState) -> Self {
        Step { tool: Some(tool.into()), state, ..Step::default() }
    }

    /// A step of an MCP tool call.
    pub fn mcp_call(
        model_tool: impl Into<String>,
        server: impl Into<String>,
        server_tool: impl Into<String>,
        state: StepState,
    ) -> Self {
        Step {
            tool: Some(model_tool.into()),
            server: Some(server.into()),
            server_tool: Some(server_tool.into()),
            mcp: Some(true),
            state,
            ..Step::default()
        }
    }

    /// A step of one of the turn's MCP tools that is no call to a server (the resource tools,
    /// announce mode's request for definitions).
    pub fn mcp_tool(tool: impl Into<String>, state: StepState) -> Self {
        Step { tool: Some(tool.into()), mcp: Some(true), state, ..Step::default() }
    }

    /// Whether the step involves an MCP server.
    pub fn is_mcp(&self) -> bool {
        self.mcp == Some(true)
    }
}

/// One piece of a reply, in the order it happened.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(tag = "kind", rename_all = "snake_case")]
pub enum ReplyPart {
    Text {
        text: String,
    },
    Reasoning {
        text: String,
    },
    /// A tool call, an attached resource or prompt, or a card waiting for its answer.
    Step {
        step: Box<Step>,
    },
}

/// A reply as its turn's events built it: what the page shows live, and the same again from
/// the stored log after a reload ([`Reply::apply`] is the one fold of both).
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct Reply {
    pub turn_id: String,
    pub parts: Vec<ReplyPart>,
    /// The model that wrote it, and when it started (RFC 3339), from its `start` event.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub model: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub started_at: Option<String>,
    /// `true` for a spoken turn, from its `start` event.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub spoken: Option<bool>,
    /// How the turn ended, once it did.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub state: Option<EndState>,
    /// Why it failed, in words for the person.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub error: Option<String>,
    /// How full the model's context window was after it, from its `end` event.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub context: Option<ContextFill>,
}

impl Reply {
    pub fn new(turn_id: impl Into<String>) -> Self {
        Reply { turn_id: turn_id.into(), ..Reply::default() }
    }

    /// Adds one event of the reply's turn: pieces of text and reasoning join the part they
    /// continue, a card shows as a waiting step until the step that settles its call replaces
    /// it, `start` begins again from nothing (the log is being replayed).
    pub fn apply(&mut self, event: &TurnEvent) {
        match event {
            TurnEvent::Start(started) => {
                *self = Reply::new(started.turn_id.clone());
                self.model = started.model.clone();
                self.started_at = started.started_at.clone();
                self.spoken = started.spoken;
            }
            TurnEvent::Text(piece) => match self.parts.last_mut() {
                Some(ReplyPart::Text { text }) => text.push_str(&piece.delta),
                _ => self.parts.push(ReplyPart::Text { text: piece.delta.clone() }),
            },
            TurnEvent::Reasoning(piece) => match self.parts.last_mut() {
                Some(ReplyPart::Reasoning { text }) => text.push_str(&piece.delta),
                _ => self.parts.push(ReplyPart::Reasoning { text: piece.delta.clone() }),
            },
            TurnEvent::Approval(shown) => {
                let card = &shown.card;
                let step = Step {
                    call_id: Some(card.id.clone()),
                    question: card.question.as_ref().map(|q| q.message.clone()),
                    ..Step::mcp_call(
                        card.model_tool_name.clone(),
                        card.server_label.clone(),
                        card.tool_name.clone(),
                        StepState::Waiting,
                    )
                };
                self.parts.push(ReplyPart::Step { step: Box::new(step) });
            }
            TurnEvent::Step(step) => {
                // A call's step settles its card or running step; a step of the app's own that
                // was shown running (a summary being written) is settled by the next of its
                // tool.
                let waiting = match step.call_id.as_ref() {
                    Some(call) => self.parts.iter_mut().find(|p| {
                        matches!(p, ReplyPart::Step { step: s } if s.call_id.as_ref() == Some(call))
                    }),
                    None => self.parts.iter_mut().rev().find(|p| {
                        matches!(p, ReplyPart::Step { step: s }
                            if s.call_id.is_none() && s.tool.is_some() && s.tool == step.tool
                                && s.state == StepState::Running)
                    }),
                };
                let part = ReplyPart::Step { step: step.clone() };
                match waiting {
                    Some(waiting) => *waiting = part,
                    None => self.parts.push(part),
                }
            }
            TurnEvent::Error(failure) => self.error = Some(failure.message.clone()),
            TurnEvent::End(ended) => {
                self.state = Some(ended.state);
                self.context = ended.context;
                // A call or card the turn never settled (Stop during the call, a restart) did
                // not finish: it says so rather than "running" for ever.
                for part in &mut self.parts {
                    if let ReplyPart::Step { step } = part
                        && matches!(step.state, StepState::Running | StepState::Waiting)
                    {
                        step.state = StepState::Interrupted;
                    }
                }
            }
            TurnEvent::Progress(progress) => {
                let running = Step {
                    call_id: Some(progress.call_id.clone()),
                    progress: progress.progress.clone(),
                    total: progress.total.clone(),
                    message: progress.message.clone(),
                    task: progress.task.clone(),
                    ..Step::mcp_call(
                        progress.tool.clone(),
                        progress.server.clone(),
                        progress.server_tool.clone(),
                        StepState::Running,
                    )
                };
                let part = ReplyPart::Step { step: Box::new(running) };
                let earlier = self.parts.iter_mut().find(|p| {
                    matches!(p, ReplyPart::Step { step } if step.call_id.as_ref() == Some(&progress.call_id))
                });
                match earlier {
                    Some(earlier) => *earlier = part,
                    None => self.parts.push(part),
                }
            }
            TurnEvent::Choices(_) | TurnEvent::Request(_) => {}
        }
    }

    /// The reply's text, all its text parts joined (what the conversation keeps as the
    /// model's message).
    pub fn text(&self) -> String {
        self.parts
            .iter()
            .filter_map(|p| match p {
                ReplyPart::Text { text } => Some(text.as_str()),
                _ => None,
            })
            .collect()
    }
}

#[cfg(test)]
mod tests {
    use serde_json::{Value, json};

    use super::*;

    fn round_trip(kind: &str, payload: Value) {
        let event = TurnEvent::decode(kind, &payload.to_string()).unwrap();
        let encoded = event.encode();
        assert_eq!(encoded.kind, kind);
        let back: Value = serde_json::from_str(&encoded.data_json).unwrap();
        assert_eq!(back, payload, "{kind} changed on the way through");
    }

    /// Every payload docs/api.md shows reads into the type and comes out exactly as it was:
    /// same fields, nothing added, `null` only where the documented shape has one.
    #[test]
    fn the_documented_payloads_keep_their_exact_shape() {
        round_trip("start", json!({"turnId": "t1"}));
        round_trip("text", json!({"delta": "Hel"}));
        round_trip("reasoning", json!({"delta": "hmm"}));
        round_trip("choices", json!({"callId": "c", "question": "Which?", "options": ["a", "b"]}));
        round_trip(
            "request",
            json!({"round": 1, "tools": 3, "toolBytes": 512, "toolTokens": 128, "announce": false}),
        );
        round_trip("error", json!({"message": "the provider refused the key"}));
        round_trip("end", json!({"state": "stopped"}));
        round_trip(
            "progress",
            json!({"callId": "c2", "tool": "mcp_home_index", "server": "home",
                   "serverTool": "index"}),
        );
        round_trip(
            "progress",
            json!({"callId": "c2", "tool": "mcp_home_index", "server": "home",
                   "serverTool": "index", "progress": 3, "total": 6, "message": "indexing"}),
        );
        let steps = [
            json!({"tool": "current_date", "state": "done", "result": "2026-12-01T10:00:00Z"}),
            json!({"tool": "read_page", "state": "done", "url": "https://e.org/", "title": null,
                   "characters": 10, "cut": false}),
            json!({"tool": "read_page", "state": "failed", "url": "https://e.org/", "error": "x"}),
            json!({"tool": "web_search", "state": "done", "query": "tides", "results": 3}),
            json!({"tool": "memory_write", "state": "refused", "memory": true,
                   "message": "closed", "closedBy": "mail"}),
            json!({"tool": "memory_write", "state": "done", "memory": true, "id": "n1",
                   "content": "likes tea"}),
            json!({"tool": "offer_choices", "state": "done", "question": "Q?",
                   "options": ["a", "b"]}),
            json!({"mcp": true, "server": "home", "attached": "resource", "uri": "file:///a",
                   "state": "failed", "error": "gone"}),
            json!({"mcp": true, "server": "home", "attached": "prompt", "name": "p",
                   "state": "done"}),
            json!({"tool": "mcp_resource_list", "mcp": true, "state": "done", "resources": 2}),
            json!({"tool": "mcp_home_turn_on", "server": "home", "serverTool": "turn_on",
                   "mcp": true, "state": "allowed", "callId": "c1", "isError": false}),
            json!({"tool": "mcp_server_tools", "mcp": true, "state": "opened", "server": "home",
                   "group": null, "tools": 4}),
            json!({"tool": "mcp_server_tools", "mcp": true, "state": "opened", "server": "home",
                   "group": "lights", "tools": 2}),
            json!({"tool": "mcp_home_heat", "server": "home", "serverTool": "heat", "mcp": true,
                   "state": "allowed", "callId": "c3", "question": "Which room?",
                   "reply": "decline"}),
        ];
        for step in steps {
            round_trip("step", step);
        }
    }

    #[test]
    fn a_reply_is_folded_the_same_from_any_replay_of_its_log() {
        let card = ApprovalCardView {
            id: "c1".into(),
            conversation_id: "v".into(),
            turn_id: "t".into(),
            server_id: "s".into(),
            server_label: "home".into(),
            tool_name: "turn_on".into(),
            model_tool_name: "mcp_home_turn_on".into(),
            tool_description: String::new(),
            arguments_json: "{}".into(),
            created_at_ms: 1,
            deadline_ms: 2,
            tool_hints: None,
            question: None,
        };
        let settled = Step {
            call_id: Some("c1".into()),
            is_error: Some(false),
            output: Some("on".into()),
            ..Step::mcp_call("mcp_home_turn_on", "home", "turn_on", StepState::Allowed)
        };
        let log = [
            TurnEvent::Start(TurnStarted::new("t")),
            TurnEvent::reasoning("Let me "),
            TurnEvent::reasoning("think."),
            TurnEvent::text("Turning "),
            TurnEvent::text("it on."),
            TurnEvent::Approval(ApprovalShown { card }),
            TurnEvent::step(settled.clone()),
            TurnEvent::text("Done."),
            TurnEvent::error("the provider stopped answering"),
            TurnEvent::end(EndState::Failed),
        ];
        let mut reply = Reply::default();
        for event in &log {
            reply.apply(event);
        }
        assert_eq!(reply.turn_id, "t");
        assert_eq!(
            reply.parts,
            vec![
                ReplyPart::Reasoning { text: "Let me think.".into() },
                ReplyPart::Text { text: "Turning it on.".into() },
                ReplyPart::Step { step: Box::new(settled) },
                ReplyPart::Text { text: "Done.".into() },
            ],
            "the card's waiting step is replaced by the step that settled it"
        );
        assert_eq!(reply.state, Some(EndState::Failed));
        assert_eq!(reply.error.as_deref(), Some("the provider stopped answering"));
        assert_eq!(reply.text(), "Turning it on.Done.");
        // Replaying the log over a reply already built gives the same reply, not a double one.
        for event in &log {
            reply.apply(event);
        }
        let mut again = Reply::default();
        log.iter().for_each(|e| again.apply(e));
        assert_eq!(reply, again);
        let json = serde_json::to_value(&reply).unwrap();
        assert_eq!(json["parts"][2]["kind"], "step");
        assert_eq!(json["parts"][2]["step"]["state"], "allowed");
        assert_eq!(serde_json::from_value::<Reply>(json).unwrap(), reply);
    }

    #[test]
    fn a_call_the_turn_never_settled_ends_interrupted_not_running() {
        let progress = |progress: Option<i64>| {
            TurnEvent::Progress(CallProgress {
                call_id: "c1".into(),
                tool: "mcp_home_index".into(),
                server: "home".into(),
                server_tool: "index".into(),
                progress: progress.map(Into::into),
                total: progress.map(|_| 6.into()),
                message: None,
                task: None,
            })
        };
        let mut reply = Reply::default();
        reply.apply(&TurnEvent::Start(TurnStarted::new("t")));
        reply.apply(&progress(None));
        reply.apply(&progress(Some(3)));
        // One step for the call, with the latest report.
        assert_eq!(reply.parts.len(), 1);
        let ReplyPart::Step { step } = &reply.parts[0] else { panic!("{:?}", reply.parts) };
        assert_eq!((step.state, step.progress.clone()), (StepState::Running, Some(3.into())));
        reply.apply(&TurnEvent::end(EndState::Stopped));
        let ReplyPart::Step { step } = &reply.parts[0] else { panic!("{:?}", reply.parts) };
        assert_eq!(step.state, StepState::Interrupted);
    }

    #[test]
    fn an_unknown_kind_or_a_malformed_payload_is_an_error_not_a_guess() {
        assert!(TurnEvent::decode("sparkle", "{}").is_err());
        let err = TurnEvent::decode("end", r#"{"state":"exploded"}"#).unwrap_err();
        assert_eq!(err.kind, "end");
        assert!(TurnEvent::decode("text", "not json").is_err());
    }

    #[test]
    fn every_kind_is_listed_once() {
        let events = [
            TurnEvent::Start(TurnStarted::new("t")),
            TurnEvent::text("a"),
            TurnEvent::reasoning("b"),
            TurnEvent::Approval(ApprovalShown {
                card: ApprovalCardView {
                    id: "c".into(),
                    conversation_id: "v".into(),
                    turn_id: "t".into(),
                    server_id: "s".into(),
                    server_label: "home".into(),
                    tool_name: "x".into(),
                    model_tool_name: "mcp_home_x".into(),
                    tool_description: String::new(),
                    arguments_json: "{}".into(),
                    created_at_ms: 1,
                    deadline_ms: 2,
                    tool_hints: None,
                    question: None,
                },
            }),
            TurnEvent::Choices(ChoicesShown {
                call_id: "c".into(),
                question: "q".into(),
                options: vec![],
            }),
            TurnEvent::Request(RequestWeighed {
                round: 1,
                tools: 0,
                tool_bytes: 0,
                tool_tokens: 0,
                announce: false,
            }),
            TurnEvent::Progress(CallProgress {
                call_id: "c".into(),
                tool: "mcp_home_x".into(),
                server: "home".into(),
                server_tool: "x".into(),
                progress: None,
                total: None,
                message: None,
                task: None,
            }),
            TurnEvent::step(Step::app_tool("current_date", StepState::Done)),
            TurnEvent::error("x"),
            TurnEvent::end(EndState::Done),
        ];
        let kinds: Vec<&str> = events.iter().map(TurnEvent::kind).collect();
        assert_eq!(kinds, TurnEvent::KINDS);
        for event in events {
            let encoded = event.encode();
            assert_eq!(TurnEvent::decode(encoded.kind, &encoded.data_json).unwrap(), event);
        }
    }
}

/// Part of an MCP call's result shown to the person in its step. Every word is the server's.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(tag = "kind", rename_all = "snake_case")]
pub enum ShownPart {
    /// Text the server marked for the person only: shown, never sent to the model.
    Text { text: String },
    /// An image (PNG, JPEG, GIF or WebP only; base64 of at most [`ShownPart::MAX_IMAGE_BYTES`]).
    #[serde(rename_all = "camelCase")]
    Image {
        mime_type: String,
        data: String,
        /// Whether the model was told of it too (false: marked for the person only).
        for_model: bool,
    },
    /// A sound to play (WAV, MP3, Ogg, WebM or MP4 audio, as its bytes say; base64 of at most
    /// [`ShownPart::MAX_AUDIO_BYTES`]).
    #[serde(rename_all = "camelCase")]
    Audio {
        mime_type: String,
        data: String,
        /// Whether the model was told of it (by a line: models here do not hear).
        for_model: bool,
    },
    /// Something shown only by name: a link to one of the server's resources, an embedded
    /// resource, audio, an image too large or of another kind.
    #[serde(rename_all = "camelCase")]
    Named {
        /// `link`, `resource`, `audio` or `image`.
        what: String,
        #[serde(default, skip_serializing_if = "Option::is_none")]
        uri: Option<String>,
        #[serde(default, skip_serializing_if = "Option::is_none")]
        name: Option<String>,
        #[serde(default, skip_serializing_if = "Option::is_none")]
        mime_type: Option<String>,
    },
}

impl ShownPart {
    /// The largest image shown, in base64 bytes (the step is kept in the conversation's log).
    pub const MAX_IMAGE_BYTES: usize = 512 * 1024;
    /// The most images one step shows.
    pub const MAX_IMAGES: usize = 4;
    /// The largest sound played, in base64 bytes (about 45 s of speech as MP3).
    pub const MAX_AUDIO_BYTES: usize = 1024 * 1024;
    /// The most sounds one step plays.
    pub const MAX_AUDIO: usize = 2;
    /// The most parts one step shows.
    pub const MAX_PARTS: usize = 20;
    /// The longest text shown, in characters.
    pub const MAX_TEXT_CHARS: usize = 4000;
    /// The image types shown as images.
    pub const IMAGE_TYPES: [&'static str; 4] =
        ["image/png", "image/jpeg", "image/gif", "image/webp"];
}
