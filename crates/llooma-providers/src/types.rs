//! What goes to a model and what comes back, independent of the wire format.

use std::sync::Arc;
use std::time::Duration;

use serde_json::value::RawValue;

/// One chat completion request.
#[derive(Debug, Clone, PartialEq)]
pub struct ChatRequest {
    /// The model id, as the provider names it (`gpt-4o-mini`, `llama3.1:8b`, ...).
    pub model: String,
    /// The conversation so far.
    pub messages: Vec<Message>,
    /// Functions the model may call, written out. At most the provider's
    /// [`max_tools_per_request`](crate::ProviderConfig::max_tools_per_request).
    pub tools: EncodedTools,
    /// Whether and which tool the model must call; sent only when `tools` is not empty.
    pub tool_choice: Option<ToolChoice>,
    /// Sampling temperature, if the caller wants one.
    pub temperature: Option<f32>,
    /// A cap on the answer's length in tokens (`max_tokens`), if the caller wants one.
    pub max_tokens: Option<u32>,
}

impl ChatRequest {
    /// A request for `model` with these messages, no tools, provider defaults otherwise.
    pub fn new(model: impl Into<String>, messages: Vec<Message>) -> Self {
        Self {
            model: model.into(),
            messages,
            tools: EncodedTools::default(),
            tool_choice: None,
            temperature: None,
            max_tokens: None,
        }
    }

    /// Offers these tools.
    pub fn with_tools(mut self, tools: Vec<ToolDefinition>) -> Self {
        self.tools = tools.iter().map(EncodedTool::new).collect();
        self
    }

    /// Sets the tool choice.
    pub fn with_tool_choice(mut self, choice: ToolChoice) -> Self {
        self.tool_choice = Some(choice);
        self
    }
}

/// A message of the conversation.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Message {
    /// Instructions for the model.
    System {
        /// The text.
        content: String,
    },
    /// What the person wrote, and the images they attached.
    User {
        /// The text.
        content: String,
        /// Images as `data:` URLs, sent as content parts after the text (the OpenAI chat
        /// format, which Ollama, vLLM, llama.cpp and LM Studio take too). Shared: a
        /// conversation's images go with every later request.
        images: Vec<Arc<str>>,
    },
    /// An earlier answer of the model, with the tools it called.
    Assistant {
        /// The text, if the answer had any.
        content: Option<String>,
        /// The calls it made, in order.
        tool_calls: Vec<ToolCall>,
    },
    /// The result of one tool call.
    Tool {
        /// The [`ToolCall::id`] this answers.
        tool_call_id: String,
        /// The result, as text.
        content: String,
    },
    /// Messages written out before ([`EncodedMessages`]), sent here as they are, in order.
    Encoded(EncodedMessages),
}

impl Message {
    /// A system message.
    pub fn system(content: impl Into<String>) -> Self {
        Message::System { content: content.into() }
    }

    /// A user message.
    pub fn user(content: impl Into<String>) -> Self {
        Message::User { content: content.into(), images: Vec::new() }
    }

    /// A user message with images (`data:` URLs).
    pub fn user_with_images(content: impl Into<String>, images: Vec<Arc<str>>) -> Self {
        Message::User { content: content.into(), images }
    }

    /// An assistant message with text only.
    pub fn assistant(content: impl Into<String>) -> Self {
        Message::Assistant { content: Some(content.into()), tool_calls: Vec::new() }
    }

    /// A tool result.
    pub fn tool(tool_call_id: impl Into<String>, content: impl Into<String>) -> Self {
        Message::Tool { tool_call_id: tool_call_id.into(), content: content.into() }
    }
}

/// Messages already written as the provider receives them, to be sent again byte for byte
/// ([`Message::Encoded`]). A conversation's earlier messages are the same on every turn; writing
/// them out anew each time repeated work that grows with the conversation. Cheap to clone: each
/// message's text is shared, not copied.
#[derive(Debug, Clone, Default)]
///
/// Messages are written out by `wire.rs` ([`EncodedMessages::push`]), which alone knows the
/// wire format's field names.
pub struct EncodedMessages {
    pub(crate) each: Vec<Arc<RawValue>>,
    pub(crate) bytes: usize,
    /// What each message weighs in a model's context, in bytes as text weighs: its bytes as
    /// sent, with each image counted as [`IMAGE_WEIGHT`] instead of its `data:` URL.
    pub(crate) weights: Vec<usize>,
}

/// What an image weighs in a model's context, in bytes of text: about 750 tokens (what a
/// picture of a phone's screen costs most providers), however large its `data:` URL.
pub const IMAGE_WEIGHT: usize = 3000;

impl EncodedMessages {
    /// `messages`, written out.
    pub fn encode(messages: &[Message]) -> Self {
        let mut encoded = EncodedMessages::default();
        for message in messages {
            encoded.push(message);
        }
        encoded
    }

    /// How many messages.
    pub fn len(&self) -> usize {
        self.each.len()
    }

    /// True when there are none.
    pub fn is_empty(&self) -> bool {
        self.each.is_empty()
    }

    /// Bytes of them all as sent.
    pub fn bytes(&self) -> usize {
        self.bytes
    }

    /// What each message weighs in a model's context, in order ([`IMAGE_WEIGHT`]).
    pub fn weights(&self) -> impl Iterator<Item = usize> + '_ {
        self.weights.iter().copied()
    }

    /// What they all weigh in a model's context.
    pub fn weight(&self) -> usize {
        self.weights.iter().sum()
    }

    /// Drops the first `n` messages (or all there are): a summary stands for them now.
    pub fn drop_first(&mut self, n: usize) {
        let n = n.min(self.each.len());
        for gone in self.each.drain(..n) {
            self.bytes -= gone.get().len();
        }
        self.weights.drain(..n);
    }

    /// Each message as sent, in order.
    pub(crate) fn each(&self) -> impl Iterator<Item = &RawValue> {
        self.each.iter().map(|one| &**one)
    }
}

/// The same messages, written the same.
impl PartialEq for EncodedMessages {
    fn eq(&self, other: &Self) -> bool {
        self.each.len() == other.each.len()
            && self.each().zip(other.each()).all(|(a, b)| a.get() == b.get())
    }
}

impl Eq for EncodedMessages {}

/// A function the model may call.
#[derive(Debug, Clone, PartialEq)]
pub struct ToolDefinition {
    /// The name the model uses to call it.
    pub name: String,
    /// What it does, for the model.
    pub description: Option<String>,
    /// Its parameters as a JSON Schema object.
    pub parameters: serde_json::Value,
}

/// What a set of tool definitions adds to every request that carries it.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub struct ToolsSize {
    /// Bytes of the `tools` array as sent (compact JSON).
    pub bytes: usize,
    /// A token estimate: a quarter of the bytes, rounded up. Tokenizers differ by model; this
    /// is for comparing two sets on the same model, not for billing.
    pub estimated_tokens: usize,
}

impl ToolsSize {
    /// The size of `tools` as this client sends them.
    pub fn of(tools: &[ToolDefinition]) -> Self {
        tools.iter().map(EncodedTool::new).collect::<EncodedTools>().size()
    }
}

/// One tool definition written as the provider receives it. The same definitions go out in
/// every request of a turn, and the app's own tools in every turn: written once, they are
/// neither rebuilt nor written again for each request (and for weighing it). Cheap to clone.
///
/// Written out by `wire.rs` ([`EncodedTool::from_parts`]).
#[derive(Debug, Clone)]
pub struct EncodedTool(pub(crate) Arc<RawValue>);

impl EncodedTool {
    /// `tool`, written out.
    pub fn new(tool: &ToolDefinition) -> Self {
        Self::from_parts(&tool.name, tool.description.as_deref(), &tool.parameters)
    }
}

/// The same definition, written the same.
impl PartialEq for EncodedTool {
    fn eq(&self, other: &Self) -> bool {
        self.0.get() == other.0.get()
    }
}

impl Eq for EncodedTool {}

/// The tools a request offers, each written out ([`EncodedTool`]), with their size as sent.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct EncodedTools {
    each: Vec<EncodedTool>,
    /// Bytes of the definitions themselves, without the array's brackets and commas.
    definition_bytes: usize,
}

impl EncodedTools {
    /// Adds one more, after the others.
    pub fn push(&mut self, tool: EncodedTool) {
        self.definition_bytes += tool.0.get().len();
        self.each.push(tool);
    }

    /// How many tools.
    pub fn len(&self) -> usize {
        self.each.len()
    }

    /// True when there are none.
    pub fn is_empty(&self) -> bool {
        self.each.is_empty()
    }

    /// What the `tools` array adds to a request, as sent (nothing when empty: it is left out).
    pub fn size(&self) -> ToolsSize {
        if self.each.is_empty() {
            return ToolsSize::default();
        }
        // `[`, `]` and a comma between each two.
        let bytes = self.definition_bytes + 2 + (self.each.len() - 1);
        ToolsSize { bytes, estimated_tokens: bytes.div_ceil(4) }
    }

    /// Each definition as sent, in order.
    pub(crate) fn each(&self) -> impl Iterator<Item = &RawValue> {
        self.each.iter().map(|one| &*one.0)
    }
}

impl Extend<EncodedTool> for EncodedTools {
    fn extend<I: IntoIterator<Item = EncodedTool>>(&mut self, tools: I) {
        for tool in tools {
            self.push(tool);
        }
    }
}

impl IntoIterator for EncodedTools {
    type Item = EncodedTool;
    type IntoIter = std::vec::IntoIter<EncodedTool>;

    fn into_iter(self) -> Self::IntoIter {
        self.each.into_iter()
    }
}

impl FromIterator<EncodedTool> for EncodedTools {
    fn from_iter<I: IntoIterator<Item = EncodedTool>>(tools: I) -> Self {
        let mut all = EncodedTools::default();
        all.extend(tools);
        all
    }
}

/// Whether and which tool the model must call.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum ToolChoice {
    /// The model decides (the provider's default when tools are offered).
    Auto,
    /// No tool call.
    None,
    /// At least one tool call.
    Required,
    /// A call of this function.
    Function(String),
}

/// A complete tool call of the model.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ToolCall {
    /// The id the result must quote ([`Message::Tool`]). Providers that send none get
    /// `call_<index>`.
    pub id: String,
    /// The function's name.
    pub name: String,
    /// The arguments as the model wrote them: JSON text, not checked here (a model can write
    /// invalid JSON; the caller decides what to tell it). `{}` when the model sent nothing.
    pub arguments_json: String,
}

/// Token counts of one completion, as the provider reported them.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct Usage {
    /// Tokens in the prompt.
    pub prompt_tokens: u64,
    /// Tokens in the answer (reasoning included).
    pub completion_tokens: u64,
    /// Their sum, as reported.
    pub total_tokens: u64,
    /// Of the answer's tokens, those spent reasoning, when reported.
    pub reasoning_tokens: Option<u64>,
    /// Of the prompt's tokens, those served from the provider's cache, when reported.
    pub cached_prompt_tokens: Option<u64>,
}

/// Characters per token in an estimate: about four make a token in English prose and in JSON
/// across the common tokenizers. An estimate is marked as one wherever it is shown.
const CHARS_PER_TOKEN: usize = 4;

impl Usage {
    /// An estimate for a request of `request_bytes` (its JSON body, tool definitions and all)
    /// whose answer was `answer_chars` long: a quarter of each, rounded up.
    pub fn estimate(request_bytes: usize, answer_chars: usize) -> Usage {
        let tokens = |n: usize| n.div_ceil(CHARS_PER_TOKEN) as u64;
        let (prompt_tokens, completion_tokens) = (tokens(request_bytes), tokens(answer_chars));
        Usage {
            prompt_tokens,
            completion_tokens,
            total_tokens: prompt_tokens + completion_tokens,
            reasoning_tokens: None,
            cached_prompt_tokens: None,
        }
    }
}

/// Why the model stopped.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum FinishReason {
    /// It finished its answer.
    Stop,
    /// It hit the length limit (`max_tokens` or the context window).
    Length,
    /// It wants the tool calls it made run.
    ToolCalls,
    /// The provider's content filter stopped it.
    ContentFilter,
    /// Something else, as the provider named it.
    Other(String),
}

impl FinishReason {
    pub(crate) fn from_wire(reason: &str) -> Self {
        match reason {
            "stop" | "eos" | "end_turn" => FinishReason::Stop,
            "length" | "max_tokens" => FinishReason::Length,
            "tool_calls" | "function_call" | "tool_use" => FinishReason::ToolCalls,
            "content_filter" => FinishReason::ContentFilter,
            other => FinishReason::Other(other.to_owned()),
        }
    }
}

/// One event of a streamed answer.
///
/// Order: text and reasoning deltas as they come; then, once the model has finished, every
/// [`ChatEvent::ToolCall`] (complete, in index order), [`ChatEvent::Usage`] if the provider
/// reported it, and [`ChatEvent::Finished`] last.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum ChatEvent {
    /// A piece of the answer's text.
    TextDelta(String),
    /// A piece of the model's reasoning (providers that expose it).
    ReasoningDelta(String),
    /// A complete tool call.
    ToolCall(ToolCall),
    /// Token counts (the last report, when a provider reports more than once).
    Usage(Usage),
    /// The answer is complete.
    Finished {
        /// Why the model stopped.
        reason: FinishReason,
    },
}

/// A whole answer, gathered from the events by [`ChatStream::collect`](crate::ChatStream).
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct ChatReply {
    /// The text.
    pub text: String,
    /// The reasoning, if any.
    pub reasoning: String,
    /// The tool calls, in order.
    pub tool_calls: Vec<ToolCall>,
    /// Token counts, if reported.
    pub usage: Option<Usage>,
    /// What the request used: the report, or an estimate where there was none.
    pub metered: Metered,
    /// Why the model stopped.
    pub finish_reason: Option<FinishReason>,
}

/// What one request used, as reported or, where the provider reported nothing, estimated.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct Metered {
    pub usage: Usage,
    /// True when the counts are an estimate ([`Usage::estimate`]), not the provider's.
    pub estimated: bool,
}

/// A model a provider offers.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ModelInfo {
    /// The id to put in [`ChatRequest::model`].
    pub id: String,
    /// Who owns it, as the provider says.
    pub owned_by: Option<String>,
}

/// How long to wait, at each step of a request.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Timeouts {
    /// Establishing the connection. Applied through the [`NetClient`](llooma_net::NetClient)
    /// (see [`ProviderConfig::configure_net_client`](crate::ProviderConfig)).
    pub connect: Duration,
    /// From sending the request to the first bytes of the answer (headers and first chunk):
    /// a local server loading a model, or a reasoning model, can take a while.
    pub first_byte: Duration,
    /// Between two chunks of a streamed answer, once it has started.
    pub idle: Duration,
}

impl Default for Timeouts {
    fn default() -> Self {
        Self {
            connect: Duration::from_secs(10),
            first_byte: Duration::from_secs(120),
            idle: Duration::from_secs(90),
        }
    }
}
