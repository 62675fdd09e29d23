//! Turns the `data` of streamed events into [`ChatEvent`]s, assembling tool calls from their
//! fragments. Pure: no IO, so every provider quirk is a unit test.

use std::collections::{BTreeMap, VecDeque};

use serde_json::Value;

use crate::error::{ProviderError, excerpt, one_line};
use crate::types::{ChatEvent, FinishReason, ToolCall, Usage};
use crate::wire::{Chunk, ToolCallFragment};

/// A tool call whose fragments are still arriving.
#[derive(Debug, Default)]
struct PartialCall {
    id: String,
    name: String,
    arguments: String,
}

/// What the stream has said so far.
#[derive(Debug, Default)]
pub(crate) struct Assembler {
    /// By the provider's index; a BTreeMap so calls come out in index order.
    calls: BTreeMap<u32, PartialCall>,
    /// Where a fragment without an index goes: the last call that was opened.
    last_index: Option<u32>,
    calls_emitted: bool,
    finish: Option<FinishReason>,
    usage: Option<Usage>,
    finished: bool,
}

/// Whether the stream is over.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Progress {
    More,
    Done,
}

impl Assembler {
    /// Handles the data of one event. `key` is scrubbed from error excerpts.
    pub(crate) fn on_data(
        &mut self,
        data: &str,
        key: Option<&str>,
        out: &mut VecDeque<ChatEvent>,
    ) -> Result<Progress, ProviderError> {
        if self.finished {
            return Ok(Progress::Done);
        }
        let data = data.trim();
        if data == "[DONE]" {
            self.finish(out)?;
            return Ok(Progress::Done);
        }
        if data.is_empty() {
            return Ok(Progress::More);
        }
        let chunk: Chunk =
            serde_json::from_str(data).map_err(|err| ProviderError::MalformedStream {
                problem: format!(
                    "a data line is not a JSON chunk ({err}): {}",
                    one_line(&crate::error::scrub(data, key), 80)
                ),
            })?;
        if let Some(error) = chunk.error.filter(|e| !e.is_null()) {
            let body = serde_json::json!({ "error": error }).to_string();
            return Err(ProviderError::ProviderStreamError { excerpt: excerpt(&body, key) });
        }
        if let Some(usage) = chunk.usage {
            self.usage = Some(usage.into());
        }
        // One answer is asked for (no `n`), so only choice 0 matters.
        for choice in chunk.choices.unwrap_or_default() {
            if choice.index.unwrap_or(0) != 0 {
                continue;
            }
            if let Some(delta) = choice.delta {
                if let Some(text) = delta.content.filter(|t| !t.is_empty()) {
                    out.push_back(ChatEvent::TextDelta(text));
                }
                // Some servers send the same text in both fields; one of them is enough.
                let reasoning = delta
                    .reasoning_content
                    .filter(|t| !t.is_empty())
                    .or(delta.reasoning.filter(|t| !t.is_empty()));
                if let Some(reasoning) = reasoning {
                    out.push_back(ChatEvent::ReasoningDelta(reasoning));
                }
                for fragment in delta.tool_calls.unwrap_or_default() {
                    self.on_fragment(fragment)?;
                }
            }
            if let Some(reason) = choice.finish_reason.filter(|r| !r.is_empty()) {
                self.finish = Some(FinishReason::from_wire(&reason));
                // The calls are complete once the model has finished: hand them out now
                // rather than after the usage chunk.
                self.emit_calls(out)?;
            }
        }
        Ok(Progress::More)
    }

    /// The body ended. Fine if the model had finished (some servers omit `[DONE]`), an error
    /// otherwise.
    pub(crate) fn on_end(&mut self, out: &mut VecDeque<ChatEvent>) -> Result<(), ProviderError> {
        if self.finished {
            return Ok(());
        }
        if self.finish.is_none() {
            return Err(ProviderError::StreamEnded);
        }
        self.finish(out)
    }

    fn on_fragment(&mut self, fragment: ToolCallFragment) -> Result<(), ProviderError> {
        if self.calls_emitted {
            return Err(ProviderError::MalformedStream {
                problem: "a tool call fragment arrived after finish_reason".to_owned(),
            });
        }
        let id = fragment.id.filter(|id| !id.is_empty());
        let mut index = match fragment.index {
            Some(index) => index,
            // No index: a new id opens a new call, anything else continues the last one.
            None => match (&id, self.last_index) {
                (None, Some(last)) => last,
                _ => self.next_free_index(),
            },
        };
        // Some servers number every call 0 and tell them apart by id only.
        if let (Some(id), Some(existing)) = (&id, self.calls.get(&index))
            && !existing.id.is_empty()
            && existing.id != *id
        {
            index = self.next_free_index();
        }
        self.last_index = Some(index);
        let call = self.calls.entry(index).or_default();
        if let Some(id) = id
            && call.id.is_empty()
        {
            call.id = id;
        }
        if let Some(function) = fragment.function {
            if let Some(name) = function.name.filter(|n| !n.is_empty()) {
                // Usually the whole name comes once; some servers repeat it with every
                // fragment, a few split it.
                if call.name.is_empty() {
                    call.name = name;
                } else if call.name != name {
                    call.name.push_str(&name);
                }
            }
            match function.arguments {
                Some(Value::String(piece)) => call.arguments.push_str(&piece),
                Some(Value::Null) | None => {}
                Some(whole) => call.arguments.push_str(&whole.to_string()),
            }
        }
        Ok(())
    }

    fn next_free_index(&self) -> u32 {
        self.calls.keys().next_back().map_or(0, |last| last.saturating_add(1))
    }

    fn emit_calls(&mut self, out: &mut VecDeque<ChatEvent>) -> Result<(), ProviderError> {
        if self.calls_emitted {
            return Ok(());
        }
        self.calls_emitted = true;
        for (index, call) in std::mem::take(&mut self.calls) {
            if call.name.is_empty() {
                return Err(ProviderError::MalformedStream {
                    problem: format!("tool call {index} has no function name"),
                });
            }
            let id = if call.id.is_empty() { format!("call_{index}") } else { call.id };
            let arguments_json =
                if call.arguments.trim().is_empty() { "{}".to_owned() } else { call.arguments };
            out.push_back(ChatEvent::ToolCall(ToolCall { id, name: call.name, arguments_json }));
        }
        Ok(())
    }

    fn finish(&mut self, out: &mut VecDeque<ChatEvent>) -> Result<(), ProviderError> {
        let had_calls = !self.calls.is_empty() || self.calls_emitted;
        self.emit_calls(out)?;
        if let Some(usage) = self.usage.take() {
            out.push_back(ChatEvent::Usage(usage));
        }
        // `[DONE]` without a finish_reason: say what the answer evidently was.
        let reason = self.finish.take().unwrap_or(if had_calls {
            FinishReason::ToolCalls
        } else {
            FinishReason::Stop
        });
        out.push_back(ChatEvent::Finished { reason });
        self.finished = true;
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn run(lines: &[&str]) -> Result<Vec<ChatEvent>, ProviderError> {
        let mut assembler = Assembler::default();
        let mut out = VecDeque::new();
        for line in lines {
            if assembler.on_data(line, Some("sk-test-key"), &mut out)? == Progress::Done {
                return Ok(out.into());
            }
        }
        assembler.on_end(&mut out)?;
        Ok(out.into())
    }

    fn call(id: &str, name: &str, args: &str) -> ChatEvent {
        ChatEvent::ToolCall(ToolCall {
            id: id.into(),
            name: name.into(),
            arguments_json: args.into(),
        })
    }

    #[test]
    fn text_usage_and_finish_in_order() {
        let events = run(&[
            r#"{"choices":[{"index":0,"delta":{"role":"assistant","content":""},"finish_reason":null}]}"#,
            r#"{"choices":[{"index":0,"delta":{"content":"Hel"}}]}"#,
            r#"{"choices":[{"index":0,"delta":{"content":"lo"}}]}"#,
            r#"{"choices":[{"index":0,"delta":{},"finish_reason":"stop"}]}"#,
            r#"{"choices":[],"usage":{"prompt_tokens":3,"completion_tokens":2,"total_tokens":5,"completion_tokens_details":{"reasoning_tokens":1}}}"#,
            "[DONE]",
        ])
        .unwrap();
        assert_eq!(
            events,
            vec![
                ChatEvent::TextDelta("Hel".into()),
                ChatEvent::TextDelta("lo".into()),
                ChatEvent::Usage(Usage {
                    prompt_tokens: 3,
                    completion_tokens: 2,
                    total_tokens: 5,
                    reasoning_tokens: Some(1),
                    cached_prompt_tokens: None,
                }),
                ChatEvent::Finished { reason: FinishReason::Stop },
            ]
        );
    }

    #[test]
    fn interleaved_tool_call_fragments_assemble_by_index() {
        let events = run(&[
            r#"{"choices":[{"delta":{"tool_calls":[{"index":0,"id":"a","type":"function","function":{"name":"f","arguments":""}}]}}]}"#,
            r#"{"choices":[{"delta":{"tool_calls":[{"index":1,"id":"b","type":"function","function":{"name":"g","arguments":"{\"y\""}}]}}]}"#,
            r#"{"choices":[{"delta":{"tool_calls":[{"index":0,"function":{"arguments":"{\"x\":"}}]}}]}"#,
            r#"{"choices":[{"delta":{"tool_calls":[{"index":1,"function":{"arguments":":2}"}}]}}]}"#,
            r#"{"choices":[{"delta":{"tool_calls":[{"index":0,"function":{"arguments":"1}"}}]}}]}"#,
            r#"{"choices":[{"delta":{},"finish_reason":"tool_calls"}]}"#,
            "[DONE]",
        ])
        .unwrap();
        assert_eq!(
            events,
            vec![
                call("a", "f", r#"{"x":1}"#),
                call("b", "g", r#"{"y":2}"#),
                ChatEvent::Finished { reason: FinishReason::ToolCalls },
            ]
        );
    }

    #[test]
    fn provider_quirks_in_tool_calls() {
        // Every call numbered 0, told apart by id; no ids at all; arguments as an object;
        // the name repeated in each fragment; empty arguments.
        let events = run(&[
            r#"{"choices":[{"delta":{"tool_calls":[{"index":0,"id":"a","function":{"name":"f","arguments":"{}"}}]}}]}"#,
            r#"{"choices":[{"delta":{"tool_calls":[{"index":0,"id":"b","function":{"name":"g","arguments":{"k":1}}}]}}]}"#,
            r#"{"choices":[{"delta":{"tool_calls":[{"function":{"name":"g"}}]}}]}"#,
            r#"{"choices":[{"delta":{"tool_calls":[{"index":5,"function":{"name":"h"}}]}}]}"#,
            r#"{"choices":[{"delta":{},"finish_reason":"tool_calls"}]}"#,
        ])
        .unwrap();
        assert_eq!(
            events,
            vec![
                call("a", "f", "{}"),
                call("b", "g", r#"{"k":1}"#),
                call("call_5", "h", "{}"),
                ChatEvent::Finished { reason: FinishReason::ToolCalls },
            ]
        );
    }

    #[test]
    fn reasoning_from_either_field_once() {
        let events = run(&[
            r#"{"choices":[{"delta":{"reasoning_content":"think"}}]}"#,
            r#"{"choices":[{"delta":{"reasoning":"more"}}]}"#,
            r#"{"choices":[{"delta":{"reasoning":"dup","reasoning_content":"dup"}}]}"#,
            r#"{"choices":[{"delta":{"content":"ok"},"finish_reason":"stop"}]}"#,
            "[DONE]",
        ])
        .unwrap();
        assert_eq!(
            events,
            vec![
                ChatEvent::ReasoningDelta("think".into()),
                ChatEvent::ReasoningDelta("more".into()),
                ChatEvent::ReasoningDelta("dup".into()),
                ChatEvent::TextDelta("ok".into()),
                ChatEvent::Finished { reason: FinishReason::Stop },
            ]
        );
    }

    #[test]
    fn end_without_done_is_fine_after_finish_reason_only() {
        let finished =
            run(&[r#"{"choices":[{"delta":{"content":"x"},"finish_reason":"length"}]}"#]);
        assert_eq!(
            finished.unwrap().last(),
            Some(&ChatEvent::Finished { reason: FinishReason::Length })
        );
        let cut = run(&[r#"{"choices":[{"delta":{"content":"x"}}]}"#]);
        assert!(matches!(cut, Err(ProviderError::StreamEnded)), "{cut:?}");
    }

    #[test]
    fn malformed_and_error_chunks() {
        let garbage = run(&["{not json"]);
        assert!(matches!(garbage, Err(ProviderError::MalformedStream { .. })), "{garbage:?}");
        let nameless = run(&[
            r#"{"choices":[{"delta":{"tool_calls":[{"index":0,"function":{"arguments":"{}"}}]}}]}"#,
            "[DONE]",
        ]);
        assert!(matches!(nameless, Err(ProviderError::MalformedStream { .. })), "{nameless:?}");
        let error = run(&[r#"{"error":{"message":"overloaded, key sk-test-key"}}"#]);
        match error {
            Err(ProviderError::ProviderStreamError { excerpt }) => {
                assert_eq!(excerpt, "overloaded, key [REDACTED]")
            }
            other => panic!("{other:?}"),
        }
    }
}
