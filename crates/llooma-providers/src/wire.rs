//! The OpenAI chat-completions wire format: the request we send, the chunks and bodies we
//! read. Only this module knows field names.

use serde::Deserialize;
use serde_json::{Value, json};

use crate::types::{ChatRequest, Message, ModelInfo, ToolCall, ToolChoice, ToolDefinition, Usage};

/// The `tools` array of a request, as sent.
pub(crate) fn tools_json(tools: &[ToolDefinition]) -> Value {
    tools
        .iter()
        .map(|tool| {
            let mut function = json!({"name": tool.name, "parameters": tool.parameters});
            if let Some(description) = &tool.description {
                function["description"] = json!(description);
            }
            json!({"type": "function", "function": function})
        })
        .collect()
}

/// The request body for `POST /chat/completions` with `stream: true`.
pub(crate) fn request_body(request: &ChatRequest, include_usage: bool) -> Value {
    let messages: Vec<Value> = request.messages.iter().map(message).collect();
    let mut body = json!({
        "model": request.model,
        "messages": messages,
        "stream": true,
    });
    if include_usage {
        body["stream_options"] = json!({"include_usage": true});
    }
    if !request.tools.is_empty() {
        body["tools"] = tools_json(&request.tools);
        // Without tools a tool_choice is an error at OpenAI, so it goes only with them.
        if let Some(choice) = &request.tool_choice {
            body["tool_choice"] = match choice {
                ToolChoice::Auto => json!("auto"),
                ToolChoice::None => json!("none"),
                ToolChoice::Required => json!("required"),
                ToolChoice::Function(name) => {
                    json!({"type": "function", "function": {"name": name}})
                }
            };
        }
    }
    if let Some(temperature) = request.temperature {
        body["temperature"] = json!(temperature);
    }
    if let Some(max_tokens) = request.max_tokens {
        body["max_tokens"] = json!(max_tokens);
    }
    body
}

fn message(message: &Message) -> Value {
    match message {
        Message::System { content } => json!({"role": "system", "content": content}),
        Message::User { content } => json!({"role": "user", "content": content}),
        Message::Assistant { content, tool_calls } => {
            let mut value = json!({"role": "assistant", "content": content});
            if tool_calls.is_empty() {
                // Some servers (llama.cpp, older vLLM) reject a null content without calls.
                if content.is_none() {
                    value["content"] = json!("");
                }
            } else {
                value["tool_calls"] = tool_calls.iter().map(tool_call).collect();
            }
            value
        }
        Message::Tool { tool_call_id, content } => {
            json!({"role": "tool", "tool_call_id": tool_call_id, "content": content})
        }
    }
}

fn tool_call(call: &ToolCall) -> Value {
    json!({
        "id": call.id,
        "type": "function",
        "function": {"name": call.name, "arguments": call.arguments_json},
    })
}

/// One streamed chunk. Every field is optional: providers differ in what they leave out.
#[derive(Debug, Deserialize)]
pub(crate) struct Chunk {
    #[serde(default)]
    pub(crate) choices: Option<Vec<Choice>>,
    #[serde(default)]
    pub(crate) usage: Option<WireUsage>,
    /// OpenRouter and others report failures inside a 200 stream this way.
    #[serde(default)]
    pub(crate) error: Option<Value>,
}

#[derive(Debug, Deserialize)]
pub(crate) struct Choice {
    #[serde(default)]
    pub(crate) index: Option<u32>,
    #[serde(default)]
    pub(crate) delta: Option<Delta>,
    #[serde(default)]
    pub(crate) finish_reason: Option<String>,
}

#[derive(Debug, Default, Deserialize)]
pub(crate) struct Delta {
    #[serde(default)]
    pub(crate) content: Option<String>,
    /// DeepSeek, vLLM (older), llama.cpp server.
    #[serde(default)]
    pub(crate) reasoning_content: Option<String>,
    /// OpenRouter, Ollama, vLLM (newer).
    #[serde(default)]
    pub(crate) reasoning: Option<String>,
    #[serde(default)]
    pub(crate) tool_calls: Option<Vec<ToolCallFragment>>,
}

#[derive(Debug, Deserialize)]
pub(crate) struct ToolCallFragment {
    #[serde(default)]
    pub(crate) index: Option<u32>,
    #[serde(default)]
    pub(crate) id: Option<String>,
    #[serde(default)]
    pub(crate) function: Option<FunctionFragment>,
}

#[derive(Debug, Deserialize)]
pub(crate) struct FunctionFragment {
    #[serde(default)]
    pub(crate) name: Option<String>,
    /// A string piece normally; a few servers send the arguments as an object.
    #[serde(default)]
    pub(crate) arguments: Option<Value>,
}

#[derive(Debug, Deserialize)]
pub(crate) struct WireUsage {
    #[serde(default)]
    prompt_tokens: u64,
    #[serde(default)]
    completion_tokens: u64,
    #[serde(default)]
    total_tokens: Option<u64>,
    #[serde(default)]
    completion_tokens_details: Option<Details>,
    #[serde(default)]
    prompt_tokens_details: Option<Details>,
}

#[derive(Debug, Deserialize)]
struct Details {
    #[serde(default)]
    reasoning_tokens: Option<u64>,
    #[serde(default)]
    cached_tokens: Option<u64>,
}

impl From<WireUsage> for Usage {
    fn from(wire: WireUsage) -> Self {
        Usage {
            prompt_tokens: wire.prompt_tokens,
            completion_tokens: wire.completion_tokens,
            total_tokens: wire
                .total_tokens
                .unwrap_or(wire.prompt_tokens.saturating_add(wire.completion_tokens)),
            reasoning_tokens: wire.completion_tokens_details.and_then(|d| d.reasoning_tokens),
            cached_prompt_tokens: wire.prompt_tokens_details.and_then(|d| d.cached_tokens),
        }
    }
}

/// A whole `chat.completion` body, for servers that answer a stream request without
/// streaming.
#[derive(Debug, Deserialize)]
pub(crate) struct Whole {
    choices: Vec<WholeChoice>,
    #[serde(default)]
    usage: Option<Value>,
}

#[derive(Debug, Deserialize)]
struct WholeChoice {
    #[serde(default)]
    message: Option<Value>,
    #[serde(default)]
    finish_reason: Option<String>,
}

impl Whole {
    /// The same answer as the data of one streamed chunk, so one code path reads both: the
    /// message becomes the delta and each tool call gets its index.
    pub(crate) fn into_chunk_data(self) -> String {
        let choice = self.choices.into_iter().next();
        let finish_reason = choice.as_ref().and_then(|c| c.finish_reason.clone());
        let mut delta = choice.and_then(|c| c.message).unwrap_or_else(|| json!({}));
        if let Some(calls) = delta.get_mut("tool_calls").and_then(Value::as_array_mut) {
            for (index, call) in calls.iter_mut().enumerate() {
                if call.is_object() {
                    call["index"] = json!(index);
                }
            }
        }
        json!({
            "choices": [{"index": 0, "delta": delta, "finish_reason": finish_reason}],
            "usage": self.usage,
        })
        .to_string()
    }
}

/// The body of `GET /models`.
#[derive(Debug, Deserialize)]
pub(crate) struct ModelList {
    data: Vec<WireModel>,
}

#[derive(Debug, Deserialize)]
struct WireModel {
    id: String,
    #[serde(default)]
    owned_by: Option<String>,
}

impl ModelList {
    pub(crate) fn into_models(self) -> Vec<ModelInfo> {
        self.data.into_iter().map(|m| ModelInfo { id: m.id, owned_by: m.owned_by }).collect()
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::types::ToolDefinition;

    #[test]
    fn request_body_has_the_openai_shape() {
        let request = ChatRequest::new(
            "m",
            vec![
                Message::system("be brief"),
                Message::user("weather?"),
                Message::Assistant {
                    content: None,
                    tool_calls: vec![ToolCall {
                        id: "call_1".into(),
                        name: "get_weather".into(),
                        arguments_json: r#"{"city":"Oslo"}"#.into(),
                    }],
                },
                Message::tool("call_1", "sunny"),
                Message::Assistant { content: None, tool_calls: vec![] },
            ],
        )
        .with_tools(vec![ToolDefinition {
            name: "get_weather".into(),
            description: Some("Weather by city".into()),
            parameters: json!({"type": "object"}),
        }])
        .with_tool_choice(ToolChoice::Function("get_weather".into()));
        let body = request_body(&request, true);
        assert_eq!(
            body,
            json!({
                "model": "m",
                "stream": true,
                "stream_options": {"include_usage": true},
                "messages": [
                    {"role": "system", "content": "be brief"},
                    {"role": "user", "content": "weather?"},
                    {"role": "assistant", "content": null, "tool_calls": [{
                        "id": "call_1", "type": "function",
                        "function": {"name": "get_weather", "arguments": "{\"city\":\"Oslo\"}"}
                    }]},
                    {"role": "tool", "tool_call_id": "call_1", "content": "sunny"},
                    {"role": "assistant", "content": ""},
                ],
                "tools": [{"type": "function", "function": {
                    "name": "get_weather", "description": "Weather by city",
                    "parameters": {"type": "object"}
                }}],
                "tool_choice": {"type": "function", "function": {"name": "get_weather"}},
            })
        );
    }

    #[test]
    fn tool_choice_is_left_out_without_tools() {
        let request = ChatRequest::new("m", vec![]).with_tool_choice(ToolChoice::Required);
        let body = request_body(&request, false);
        assert!(body.get("tool_choice").is_none() && body.get("tools").is_none());
        assert!(body.get("stream_options").is_none());
    }
}
