//! What the fake model answers: [`Reply`] and its parts, and the JSON script file format.

use serde::{Deserialize, Serialize};

/// One scripted answer to one `POST /v1/chat/completions`.
///
/// Replies are consumed in order, one per chat request. Each has a JSON form (the script file
/// of the binary), tagged by `kind`, e.g. `{"kind": "completion", "text": "Hi", "chunks": 3}`.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(tag = "kind", rename_all = "snake_case")]
pub enum Reply {
    /// A completion: streamed when the request says `stream: true`, one JSON body otherwise.
    Completion(Completion),
    /// The last user message, word by word.
    Echo {
        /// Pause between streamed chunks, in milliseconds.
        #[serde(default)]
        chunk_delay_ms: u64,
    },
    /// An HTTP error: this status, this body (sent as JSON when it parses as JSON).
    HttpError {
        /// The status code (an invalid one becomes 500).
        status: u16,
        /// The body, as is.
        #[serde(default)]
        body: String,
        /// A `Retry-After` header value, if any.
        #[serde(default)]
        retry_after: Option<String>,
    },
    /// Never sends the response headers (until the server stops): a provider that accepted
    /// the connection and went silent.
    StallBeforeHeaders,
}

impl Reply {
    /// A text answer in one chunk. Chain [`Reply::chunks`], [`Reply::chunk_delay_ms`], etc.
    pub fn text(text: impl Into<String>) -> Self {
        Reply::Completion(Completion { text: Some(text.into()), ..Completion::default() })
    }

    /// An answer that calls one tool; `arguments` is sent as its JSON text.
    pub fn tool_call(name: impl Into<String>, arguments: serde_json::Value) -> Self {
        Self::tool_calls(vec![FakeToolCall::new(name, arguments)])
    }

    /// An answer that calls several tools (parallel tool calls).
    pub fn tool_calls(calls: Vec<FakeToolCall>) -> Self {
        Reply::Completion(Completion { tool_calls: calls, ..Completion::default() })
    }

    /// Reasoning (in `delta.reasoning_content`, see [`Reply::reasoning_field`]) then text.
    pub fn reasoning(reasoning: impl Into<String>, text: impl Into<String>) -> Self {
        Reply::Completion(Completion {
            reasoning: Some(reasoning.into()),
            text: Some(text.into()),
            ..Completion::default()
        })
    }

    /// An HTTP error with this status and body.
    pub fn http_error(status: u16, body: impl Into<String>) -> Self {
        Reply::HttpError { status, body: body.into(), retry_after: None }
    }

    /// A stall before any response header.
    pub fn stall_before_headers() -> Self {
        Reply::StallBeforeHeaders
    }

    /// The last user message, echoed.
    pub fn echo() -> Self {
        Reply::Echo { chunk_delay_ms: 0 }
    }

    /// Splits each streamed part (reasoning, text, each tool call's arguments) into `n` chunks.
    pub fn chunks(self, n: usize) -> Self {
        self.map_completion(|c| c.chunks = n)
    }

    /// Pauses this long between streamed chunks.
    pub fn chunk_delay_ms(self, ms: u64) -> Self {
        match self {
            Reply::Echo { .. } => Reply::Echo { chunk_delay_ms: ms },
            other => other.map_completion(|c| c.chunk_delay_ms = ms),
        }
    }

    /// Also streams this text (for a tool-call reply: text before the calls).
    pub fn with_text(self, text: impl Into<String>) -> Self {
        let text = text.into();
        self.map_completion(move |c| c.text = Some(text))
    }

    /// Also calls this tool.
    pub fn with_tool_call(self, call: FakeToolCall) -> Self {
        self.map_completion(move |c| c.tool_calls.push(call))
    }

    /// Streams the fragments of several tool calls interleaved (index 0, 1, 0, 1, ...), which
    /// some servers do; by default each call is streamed whole before the next.
    pub fn interleaved(self) -> Self {
        self.map_completion(|c| c.interleave_tool_calls = true)
    }

    /// Which delta field carries the reasoning.
    pub fn reasoning_field(self, field: ReasoningField) -> Self {
        self.map_completion(|c| c.reasoning_field = field)
    }

    /// The usage reported (when the request asks for it); computed from word counts otherwise.
    pub fn usage(self, prompt_tokens: u64, completion_tokens: u64) -> Self {
        self.map_completion(|c| {
            c.usage = Some(FakeUsage { prompt_tokens, completion_tokens, cached_tokens: None })
        })
    }

    /// The usage reported, with `cached_tokens` of the prompt's served from the cache.
    pub fn usage_cached(self, prompt_tokens: u64, completion_tokens: u64, cached: u64) -> Self {
        self.map_completion(|c| {
            c.usage =
                Some(FakeUsage { prompt_tokens, completion_tokens, cached_tokens: Some(cached) })
        })
    }

    /// Reports no usage even when the request asks for it, as some servers do.
    pub fn without_usage(self) -> Self {
        self.map_completion(|c| c.no_usage = true)
    }

    /// The `finish_reason` sent; `stop`, or `tool_calls` when there are calls, otherwise.
    pub fn finish_reason(self, reason: impl Into<String>) -> Self {
        let reason = reason.into();
        self.map_completion(move |c| c.finish_reason = Some(reason))
    }

    /// How the stream ends after the content.
    pub fn ending(self, ending: Ending) -> Self {
        self.map_completion(|c| c.ending = ending)
    }

    /// After the content, a line that is not JSON (`data: {this is not json`).
    pub fn then_garbage(self) -> Self {
        self.ending(Ending::Garbage)
    }

    /// After the content, silence with the connection open (until the server stops).
    pub fn then_stall(self) -> Self {
        self.ending(Ending::Stall)
    }

    /// After the content, a clean end of the body with no `finish_reason` and no `[DONE]`.
    pub fn then_end_early(self) -> Self {
        self.ending(Ending::EndEarly)
    }

    /// After the content, the connection is dropped mid-body.
    pub fn then_disconnect(self) -> Self {
        self.ending(Ending::Disconnect)
    }

    /// Answers with one JSON body even when the request asks for a stream.
    pub fn ignoring_stream(self) -> Self {
        self.map_completion(|c| c.ignore_stream = true)
    }

    /// Sets `Retry-After` on an [`Reply::HttpError`]; other replies are unchanged.
    pub fn retry_after(self, value: impl Into<String>) -> Self {
        match self {
            Reply::HttpError { status, body, .. } => {
                Reply::HttpError { status, body, retry_after: Some(value.into()) }
            }
            other => other,
        }
    }

    fn map_completion(self, change: impl FnOnce(&mut Completion)) -> Self {
        match self {
            Reply::Completion(mut completion) => {
                change(&mut completion);
                Reply::Completion(completion)
            }
            other => other,
        }
    }
}

/// A scripted completion. Streamed in this order: reasoning, text, tool calls, then the
/// [`Ending`] (normally the chunk with `finish_reason`, a usage chunk if the request asked for
/// `stream_options.include_usage`, and `data: [DONE]`).
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
#[serde(default, deny_unknown_fields)]
pub struct Completion {
    /// Reasoning text, if any.
    pub reasoning: Option<String>,
    /// Which delta field carries the reasoning.
    pub reasoning_field: ReasoningField,
    /// The answer's text, if any.
    pub text: Option<String>,
    /// Tool calls, if any.
    pub tool_calls: Vec<FakeToolCall>,
    /// Stream the calls' fragments interleaved rather than one call after the other.
    pub interleave_tool_calls: bool,
    /// How many chunks each part is split into (0 counts as 1).
    pub chunks: usize,
    /// Pause between chunks, in milliseconds.
    pub chunk_delay_ms: u64,
    /// The usage reported; computed from word counts when absent.
    pub usage: Option<FakeUsage>,
    /// The `finish_reason`; `stop`, or `tool_calls` when there are calls, when absent.
    pub finish_reason: Option<String>,
    /// How the response ends.
    pub ending: Ending,
    /// Answer with one JSON body even when the request asks for a stream, as some servers
    /// do.
    pub ignore_stream: bool,
    /// Report no usage, even when asked.
    pub no_usage: bool,
}

/// A tool call the fake model makes.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct FakeToolCall {
    /// The call id; `call_<n>` when absent.
    #[serde(default)]
    pub id: Option<String>,
    /// The function's name.
    pub name: String,
    /// The arguments as JSON text, exactly as sent (fragmented when streamed).
    pub arguments: String,
}

impl FakeToolCall {
    /// A call with these arguments serialized as JSON.
    pub fn new(name: impl Into<String>, arguments: serde_json::Value) -> Self {
        Self { id: None, name: name.into(), arguments: arguments.to_string() }
    }

    /// A call with arguments given as raw text (which need not be valid JSON).
    pub fn raw(name: impl Into<String>, arguments: impl Into<String>) -> Self {
        Self { id: None, name: name.into(), arguments: arguments.into() }
    }

    /// Sets the call id.
    pub fn with_id(mut self, id: impl Into<String>) -> Self {
        self.id = Some(id.into());
        self
    }
}

/// The delta field that carries reasoning: providers differ.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum ReasoningField {
    /// `delta.reasoning_content` (DeepSeek, vLLM, llama.cpp server).
    #[default]
    ReasoningContent,
    /// `delta.reasoning` (OpenRouter, Ollama).
    Reasoning,
}

impl ReasoningField {
    pub(crate) fn key(self) -> &'static str {
        match self {
            ReasoningField::ReasoningContent => "reasoning_content",
            ReasoningField::Reasoning => "reasoning",
        }
    }
}

/// Token counts reported by the fake model.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
pub struct FakeUsage {
    /// Tokens in the prompt.
    pub prompt_tokens: u64,
    /// Tokens in the answer.
    pub completion_tokens: u64,
    /// Of the prompt's tokens, those served from the cache (`prompt_tokens_details`).
    #[serde(default)]
    pub cached_tokens: Option<u64>,
}

/// How a completion ends after its content.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum Ending {
    /// `finish_reason`, usage if asked for, `data: [DONE]`.
    #[default]
    Done,
    /// A `data:` line that is not JSON, then the normal end.
    Garbage,
    /// Silence with the connection open, until the server stops.
    Stall,
    /// The body ends cleanly without `finish_reason` or `[DONE]`.
    EndEarly,
    /// The connection is dropped in the middle of the body.
    Disconnect,
}

/// What the server does when a chat request arrives and no scripted reply is left.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(tag = "kind", rename_all = "snake_case")]
pub enum Fallback {
    /// Answer 500 with a message saying the script ran out (the default for tests: an
    /// unexpected extra request should fail loudly).
    Error,
    /// Echo the last user message.
    Echo {
        /// Pause between streamed chunks, in milliseconds.
        #[serde(default)]
        chunk_delay_ms: u64,
    },
}

/// The script file of the binary: replies in order, then the fallback.
///
/// Either an object `{"replies": [...], "fallback": {"kind": "echo"}}` or just the array of
/// replies; the fallback defaults to echo.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct ScriptFile {
    /// Replies in order.
    pub replies: Vec<Reply>,
    /// What to do once they are used up.
    pub fallback: Fallback,
}

#[derive(Deserialize)]
#[serde(untagged)]
enum ScriptFileForm {
    Object {
        #[serde(default)]
        replies: Vec<Reply>,
        #[serde(default = "default_file_fallback")]
        fallback: Fallback,
    },
    Array(Vec<Reply>),
}

fn default_file_fallback() -> Fallback {
    Fallback::Echo { chunk_delay_ms: 0 }
}

impl ScriptFile {
    /// Parses a script file.
    pub fn from_json(text: &str) -> Result<Self, serde_json::Error> {
        // Parsed as a value first so that errors name the real problem: an untagged enum
        // only says that nothing matched.
        let value: serde_json::Value = serde_json::from_str(text)?;
        let form = match value {
            serde_json::Value::Array(items) => ScriptFileForm::Array(
                items.into_iter().map(serde_json::from_value).collect::<Result<_, _>>()?,
            ),
            other => serde_json::from_value(other)?,
        };
        Ok(match form {
            ScriptFileForm::Object { replies, fallback } => ScriptFile { replies, fallback },
            ScriptFileForm::Array(replies) => {
                ScriptFile { replies, fallback: default_file_fallback() }
            }
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn script_file_forms_parse() {
        let object = ScriptFile::from_json(
            r#"{"replies": [
                {"kind": "completion", "text": "Hi", "chunks": 3},
                {"kind": "completion", "tool_calls": [{"name": "f", "arguments": "{}"}]},
                {"kind": "http_error", "status": 429, "retry_after": "2"},
                {"kind": "stall_before_headers"}
            ], "fallback": {"kind": "error"}}"#,
        )
        .unwrap();
        assert_eq!(object.replies.len(), 4);
        assert_eq!(object.replies[0], Reply::text("Hi").chunks(3));
        assert_eq!(object.fallback, Fallback::Error);

        let array = ScriptFile::from_json(r#"[{"kind": "echo"}]"#).unwrap();
        assert_eq!(array.replies, vec![Reply::echo()]);
        assert_eq!(array.fallback, Fallback::Echo { chunk_delay_ms: 0 });
    }

    #[test]
    fn unknown_kind_is_an_error() {
        let err = ScriptFile::from_json(r#"[{"kind": "sing"}]"#).unwrap_err();
        assert!(err.to_string().contains("sing"), "{err}");
        // A typo in a field name would otherwise silently script something else.
        let err = ScriptFile::from_json(r#"[{"kind": "completion", "txt": "hi"}]"#).unwrap_err();
        assert!(err.to_string().contains("txt"), "{err}");
    }
}
