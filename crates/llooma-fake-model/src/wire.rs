//! The OpenAI chat-completions wire format the fake model writes: streamed chunks and whole
//! completions, shaped like OpenAI's own (the first chunk carries the role, a tool call's
//! first fragment carries id and name, later ones only pieces of the arguments).

use std::time::Duration;

use bytes::Bytes;
use serde_json::{Value, json};

use crate::script::{Completion, Ending, FakeToolCall, FakeUsage};

/// One step of a streamed body.
#[derive(Debug)]
pub(crate) enum Step {
    Send(Bytes),
    Sleep(Duration),
    /// Keep the connection open and silent until the server stops.
    Stall,
    /// Drop the connection mid-body.
    Abort,
}

/// What the request asked for that shapes the answer.
#[derive(Debug, Clone)]
pub(crate) struct Asked {
    pub(crate) model: String,
    pub(crate) include_usage: bool,
    /// Words in the prompt, the fake's stand-in for prompt tokens.
    pub(crate) prompt_words: u64,
}

impl Asked {
    pub(crate) fn from_request(body: &Value) -> Self {
        let model = body.get("model").and_then(Value::as_str).unwrap_or("fake-model").to_owned();
        let include_usage =
            body.pointer("/stream_options/include_usage").and_then(Value::as_bool).unwrap_or(false);
        let prompt_words = body
            .get("messages")
            .and_then(Value::as_array)
            .map(|messages| {
                messages.iter().map(|m| word_count(&content_text(m.get("content")))).sum()
            })
            .unwrap_or(0);
        Self { model, include_usage, prompt_words }
    }
}

/// The text of a message's `content`, a string or an array of `{type: text, text}` parts.
pub(crate) fn content_text(content: Option<&Value>) -> String {
    match content {
        Some(Value::String(text)) => text.clone(),
        Some(Value::Array(parts)) => parts
            .iter()
            .filter_map(|part| part.get("text").and_then(Value::as_str))
            .collect::<Vec<_>>()
            .join(""),
        _ => String::new(),
    }
}

/// The text of the last `user` message, for echo replies.
pub(crate) fn last_user_message(body: &Value) -> Option<String> {
    body.get("messages")?
        .as_array()?
        .iter()
        .rev()
        .find(|m| m.get("role").and_then(Value::as_str) == Some("user"))
        .map(|m| content_text(m.get("content")))
}

fn word_count(text: &str) -> u64 {
    text.split_whitespace().count() as u64
}

/// Splits `text` into at most `n` pieces of about equal length, on char boundaries.
pub(crate) fn split_pieces(text: &str, n: usize) -> Vec<String> {
    let chars: Vec<char> = text.chars().collect();
    if chars.is_empty() {
        return Vec::new();
    }
    let n = n.clamp(1, chars.len());
    let base = chars.len() / n;
    let extra = chars.len() % n;
    let mut pieces = Vec::with_capacity(n);
    let mut start = 0;
    for i in 0..n {
        let len = base + usize::from(i < extra);
        pieces.push(chars[start..start + len].iter().collect());
        start += len;
    }
    pieces
}

fn finish_reason(completion: &Completion) -> String {
    completion.finish_reason.clone().unwrap_or_else(|| {
        if completion.tool_calls.is_empty() { "stop".to_owned() } else { "tool_calls".to_owned() }
    })
}

fn usage(completion: &Completion, asked: &Asked) -> Value {
    let FakeUsage { prompt_tokens, completion_tokens, cached_tokens } =
        completion.usage.unwrap_or_else(|| FakeUsage {
            prompt_tokens: asked.prompt_words,
            completion_tokens: word_count(completion.text.as_deref().unwrap_or(""))
                + word_count(completion.reasoning.as_deref().unwrap_or(""))
                + completion.tool_calls.len() as u64,
            cached_tokens: None,
        });
    let mut usage = json!({
        "prompt_tokens": prompt_tokens,
        "completion_tokens": completion_tokens,
        "total_tokens": prompt_tokens + completion_tokens,
    });
    if let Some(cached) = cached_tokens {
        usage["prompt_tokens_details"] = json!({"cached_tokens": cached});
    }
    usage
}

fn call_id(call: &FakeToolCall, index: usize) -> String {
    call.id.clone().unwrap_or_else(|| format!("call_{index}"))
}

struct ChunkWriter<'a> {
    id: String,
    asked: &'a Asked,
}

impl ChunkWriter<'_> {
    fn chunk(&self, delta: Value, finish_reason: Option<&str>) -> Bytes {
        self.data(&json!({
            "id": self.id,
            "object": "chat.completion.chunk",
            "created": 0,
            "model": self.asked.model,
            "choices": [{"index": 0, "delta": delta, "finish_reason": finish_reason}],
        }))
    }

    fn data(&self, value: &Value) -> Bytes {
        Bytes::from(format!("data: {value}\n\n"))
    }
}

/// The steps of a streamed completion.
pub(crate) fn stream_steps(completion: &Completion, asked: &Asked, serial: u64) -> Vec<Step> {
    let writer = ChunkWriter { id: format!("chatcmpl-fake-{serial}"), asked };
    let n = completion.chunks.max(1);
    let mut chunks = vec![writer.chunk(json!({"role": "assistant", "content": ""}), None)];

    if let Some(reasoning) = &completion.reasoning {
        let key = completion.reasoning_field.key();
        for piece in split_pieces(reasoning, n) {
            chunks.push(writer.chunk(json!({ key: piece }), None));
        }
    }
    if let Some(text) = &completion.text {
        for piece in split_pieces(text, n) {
            chunks.push(writer.chunk(json!({ "content": piece }), None));
        }
    }

    // Per call: the opening fragment (id, name, empty arguments), then argument pieces.
    let per_call: Vec<Vec<Bytes>> = completion
        .tool_calls
        .iter()
        .enumerate()
        .map(|(index, call)| {
            let mut fragments = vec![writer.chunk(
                json!({"tool_calls": [{
                    "index": index,
                    "id": call_id(call, index),
                    "type": "function",
                    "function": {"name": call.name, "arguments": ""},
                }]}),
                None,
            )];
            for piece in split_pieces(&call.arguments, n) {
                fragments.push(writer.chunk(
                    json!({"tool_calls": [{"index": index, "function": {"arguments": piece}}]}),
                    None,
                ));
            }
            fragments
        })
        .collect();
    if completion.interleave_tool_calls {
        let longest = per_call.iter().map(Vec::len).max().unwrap_or(0);
        for i in 0..longest {
            for fragments in &per_call {
                if let Some(fragment) = fragments.get(i) {
                    chunks.push(fragment.clone());
                }
            }
        }
    } else {
        chunks.extend(per_call.into_iter().flatten());
    }

    let delay = Duration::from_millis(completion.chunk_delay_ms);
    let mut steps = Vec::with_capacity(chunks.len() * 2 + 4);
    for (i, chunk) in chunks.into_iter().enumerate() {
        if i > 0 && !delay.is_zero() {
            steps.push(Step::Sleep(delay));
        }
        steps.push(Step::Send(chunk));
    }

    let finish = || {
        let mut end = vec![Step::Send(writer.chunk(json!({}), Some(&finish_reason(completion))))];
        if asked.include_usage && !completion.no_usage {
            end.push(Step::Send(writer.data(&json!({
                "id": writer.id,
                "object": "chat.completion.chunk",
                "created": 0,
                "model": asked.model,
                "choices": [],
                "usage": usage(completion, asked),
            }))));
        }
        end.push(Step::Send(Bytes::from_static(b"data: [DONE]\n\n")));
        end
    };
    match completion.ending {
        Ending::Done => steps.extend(finish()),
        Ending::Garbage => {
            steps.push(Step::Send(Bytes::from_static(b"data: {this is not json\n\n")));
            steps.extend(finish());
        }
        Ending::Stall => steps.push(Step::Stall),
        Ending::EndEarly => {}
        Ending::Disconnect => {
            // A pause first, so what was sent is flushed and the client really is cut in the
            // middle of a body it has started reading, not before the headers.
            steps.push(Step::Sleep(Duration::from_millis(20)));
            steps.push(Step::Abort);
        }
    }
    steps
}

/// The whole (non-streamed) completion body.
pub(crate) fn whole_completion(completion: &Completion, asked: &Asked, serial: u64) -> Value {
    let mut message = json!({"role": "assistant", "content": completion.text});
    if let Some(reasoning) = &completion.reasoning {
        message[completion.reasoning_field.key()] = json!(reasoning);
    }
    if !completion.tool_calls.is_empty() {
        message["tool_calls"] = completion
            .tool_calls
            .iter()
            .enumerate()
            .map(|(index, call)| {
                json!({
                    "id": call_id(call, index),
                    "type": "function",
                    "function": {"name": call.name, "arguments": call.arguments},
                })
            })
            .collect();
    }
    json!({
        "id": format!("chatcmpl-fake-{serial}"),
        "object": "chat.completion",
        "created": 0,
        "model": asked.model,
        "choices": [{"index": 0, "message": message, "finish_reason": finish_reason(completion)}],
        "usage": if completion.no_usage { Value::Null } else { usage(completion, asked) },
    })
}

/// An OpenAI-style error body.
pub(crate) fn error_body(message: &str, kind: &str) -> Value {
    json!({"error": {"message": message, "type": kind, "code": null}})
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn split_pieces_keeps_every_char_once() {
        for (text, n) in [("hello world", 3), ("héllo", 10), ("abc", 0), ("", 4), ("ab", 1)] {
            let pieces = split_pieces(text, n);
            assert_eq!(pieces.concat(), text);
            assert!(pieces.len() <= n.max(1));
            assert!(pieces.iter().all(|p| !p.is_empty()));
        }
        assert_eq!(split_pieces("abcdefg", 3), ["abc", "de", "fg"]);
    }

    #[test]
    fn last_user_message_takes_text_parts() {
        let body = json!({"messages": [
            {"role": "user", "content": "first"},
            {"role": "assistant", "content": "ok"},
            {"role": "user", "content": [{"type": "text", "text": "sec"}, {"type": "text", "text": "ond"}]},
            {"role": "tool", "tool_call_id": "x", "content": "result"},
        ]});
        assert_eq!(last_user_message(&body).as_deref(), Some("second"));
    }
}
