//! The OpenAI chat-completions wire format: the request we send, the chunks and bodies we
//! read. Only this module knows field names.

use serde::{Deserialize, Serialize};
use serde_json::value::RawValue;
use serde_json::{Value, json};

use std::sync::Arc;

use crate::types::{
    ChatRequest, EncodedMessages, EncodedTool, Message, ModelInfo, ToolChoice, Usage,
};

/// The request body for `POST /chat/completions` with `stream: true`, as JSON text. Written
/// straight from the request (nothing copied into an intermediate JSON tree: a long history or
/// a large tool list would be copied twice per request).
pub(crate) fn request_body(request: &ChatRequest, include_usage: bool) -> String {
    let tools = (!request.tools.is_empty()).then(|| request.tools.each().collect());
    let body = Body {
        model: &request.model,
        messages: wire_entries(&request.messages),
        stream: true,
        stream_options: include_usage.then_some(StreamOptions { include_usage: true }),
        // Without tools a tool_choice is an error at OpenAI, so it goes only with them.
        tool_choice: tools.as_ref().and(request.tool_choice.as_ref()).map(wire_choice),
        tools,
        temperature: request.temperature,
        max_tokens: request.max_tokens,
    };
    serde_json::to_string(&body)
        .unwrap_or_else(|e| unreachable!("a request always serializes: {e}"))
}

/// One tool definition written out, for [`EncodedTool`].
pub(crate) fn encode_tool(
    name: &str,
    description: Option<&str>,
    parameters: &Value,
) -> Box<RawValue> {
    let wire = function(OfferedFunction { name, description, parameters });
    serde_json::value::to_raw_value(&wire)
        .unwrap_or_else(|e| unreachable!("a tool always serializes: {e}"))
}

/// One message written out, for [`EncodedMessages`].
pub(crate) fn encode_message(message: &Message) -> Box<RawValue> {
    let Some(wire) = wire_message(message) else {
        unreachable!("an encoded run is joined, not written again")
    };
    serde_json::value::to_raw_value(&wire)
        .unwrap_or_else(|e| unreachable!("a message always serializes: {e}"))
}

impl EncodedMessages {
    /// Writes out one more message, after the others (an encoded run joins as it is).
    pub fn push(&mut self, message: &Message) {
        if let Message::Encoded(run) = message {
            self.each.extend(run.each.iter().cloned());
            self.bytes += run.bytes;
            self.weights.extend_from_slice(&run.weights);
            return;
        }
        let one = encode_message(message);
        let images = match message {
            Message::User { images, .. } => images.as_slice(),
            _ => &[],
        };
        let urls: usize = images.iter().map(|url| url.len()).sum();
        let weight =
            one.get().len().saturating_sub(urls) + images.len() * crate::types::IMAGE_WEIGHT;
        self.bytes += one.get().len();
        self.weights.push(weight);
        self.each.push(Arc::from(one));
    }
}

impl EncodedTool {
    /// The definition of these parts, written out (nothing copied into a
    /// [`ToolDefinition`](crate::ToolDefinition) first).
    pub fn from_parts(
        name: &str,
        description: Option<&str>,
        parameters: &serde_json::Value,
    ) -> Self {
        EncodedTool(Arc::from(encode_tool(name, description, parameters)))
    }
}

/// The entries of `messages`: each message, an encoded run spread out.
fn wire_entries(messages: &[Message]) -> Vec<WireEntry<'_>> {
    let mut entries = Vec::with_capacity(messages.len());
    for message in messages {
        match message {
            Message::Encoded(run) => entries.extend(run.each().map(WireEntry::Encoded)),
            plain => entries.extend(wire_message(plain).map(WireEntry::Message)),
        }
    }
    entries
}

#[derive(Serialize)]
#[serde(untagged)]
enum WireEntry<'a> {
    Message(WireMessage<'a>),
    Encoded(&'a RawValue),
}

#[derive(Serialize)]
struct Body<'a> {
    model: &'a str,
    messages: Vec<WireEntry<'a>>,
    stream: bool,
    #[serde(skip_serializing_if = "Option::is_none")]
    stream_options: Option<StreamOptions>,
    #[serde(skip_serializing_if = "Option::is_none")]
    tools: Option<Vec<&'a RawValue>>,
    #[serde(skip_serializing_if = "Option::is_none")]
    tool_choice: Option<WireChoice<'a>>,
    #[serde(skip_serializing_if = "Option::is_none")]
    temperature: Option<f32>,
    #[serde(skip_serializing_if = "Option::is_none")]
    max_tokens: Option<u32>,
}

#[derive(Serialize)]
struct StreamOptions {
    include_usage: bool,
}

#[derive(Serialize)]
#[serde(tag = "role", rename_all = "lowercase")]
enum WireMessage<'a> {
    System {
        content: &'a str,
    },
    User {
        content: UserContent<'a>,
    },
    Assistant {
        content: Option<&'a str>,
        #[serde(skip_serializing_if = "Vec::is_empty")]
        tool_calls: Vec<WireCall<'a>>,
    },
    Tool {
        tool_call_id: &'a str,
        content: &'a str,
    },
}

/// A user message's content: its text alone, or content parts when images go with it.
#[derive(Serialize)]
#[serde(untagged)]
enum UserContent<'a> {
    Text(&'a str),
    Parts(Vec<Part<'a>>),
}

/// One content part: `{"type": "text", "text": ...}` or
/// `{"type": "image_url", "image_url": {"url": "data:image/jpeg;base64,..."}}`.
#[derive(Serialize)]
#[serde(tag = "type", rename_all = "snake_case")]
enum Part<'a> {
    Text { text: &'a str },
    ImageUrl { image_url: ImageUrl<'a> },
}

#[derive(Serialize)]
struct ImageUrl<'a> {
    url: &'a str,
}

/// `{"type": "function", "function": ...}`, the shape of a tool, a call and a forced choice.
#[derive(Serialize)]
struct Typed<T> {
    #[serde(rename = "type")]
    kind: &'static str,
    function: T,
}

fn function<T>(function: T) -> Typed<T> {
    Typed { kind: "function", function }
}

#[derive(Serialize)]
struct WireCall<'a> {
    id: &'a str,
    #[serde(flatten)]
    typed: Typed<CalledFunction<'a>>,
}

#[derive(Serialize)]
struct CalledFunction<'a> {
    name: &'a str,
    arguments: &'a str,
}

#[derive(Serialize)]
struct OfferedFunction<'a> {
    name: &'a str,
    #[serde(skip_serializing_if = "Option::is_none")]
    description: Option<&'a str>,
    parameters: &'a Value,
}

#[derive(Serialize)]
#[serde(untagged)]
enum WireChoice<'a> {
    Mode(&'static str),
    Function(Typed<ChosenFunction<'a>>),
}

#[derive(Serialize)]
struct ChosenFunction<'a> {
    name: &'a str,
}

fn wire_choice(choice: &ToolChoice) -> WireChoice<'_> {
    match choice {
        ToolChoice::Auto => WireChoice::Mode("auto"),
        ToolChoice::None => WireChoice::Mode("none"),
        ToolChoice::Required => WireChoice::Mode("required"),
        ToolChoice::Function(name) => WireChoice::Function(function(ChosenFunction { name })),
    }
}

/// The message as sent; `None` for an encoded run, which is sent as it was written.
fn wire_message(message: &Message) -> Option<WireMessage<'_>> {
    Some(match message {
        Message::System { content } => WireMessage::System { content },
        Message::User { content, images } => WireMessage::User {
            content: if images.is_empty() {
                UserContent::Text(content)
            } else {
                UserContent::Parts(
                    // A photo sent without words has no text part: some servers refuse an
                    // empty one.
                    (!content.is_empty())
                        .then_some(Part::Text { text: content })
                        .into_iter()
                        .chain(
                            images.iter().map(|url| Part::ImageUrl { image_url: ImageUrl { url } }),
                        )
                        .collect(),
                )
            },
        },
        Message::Assistant { content, tool_calls } => WireMessage::Assistant {
            // Some servers (llama.cpp, older vLLM) reject a null content without calls.
            content: match content {
                None if tool_calls.is_empty() => Some(""),
                content => content.as_deref(),
            },
            tool_calls: tool_calls
                .iter()
                .map(|call| WireCall {
                    id: &call.id,
                    typed: function(CalledFunction {
                        name: &call.name,
                        arguments: &call.arguments_json,
                    }),
                })
                .collect(),
        },
        Message::Tool { tool_call_id, content } => WireMessage::Tool { tool_call_id, content },
        Message::Encoded(_) => return None,
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

    #[test]
    fn an_image_weighs_what_a_model_counts_for_it_not_its_size_as_sent() {
        use crate::types::IMAGE_WEIGHT;
        let photo: std::sync::Arc<str> =
            format!("data:image/jpeg;base64,{}", "A".repeat(400_000)).into();
        let mut messages = crate::EncodedMessages::encode(&[
            crate::Message::user("hello"),
            crate::Message::user_with_images("look", vec![photo.clone(), photo]),
        ]);
        let weights: Vec<usize> = messages.weights().collect();
        assert!(messages.bytes() > 800_000);
        assert!(
            weights[1] > 2 * IMAGE_WEIGHT && weights[1] < 2 * IMAGE_WEIGHT + 200,
            "{weights:?}"
        );
        assert_eq!(weights[0], r#"{"role":"user","content":"hello"}"#.len());
        // Carried along when messages are encoded again, and dropped with them.
        let again = crate::EncodedMessages::encode(&[crate::Message::Encoded(messages.clone())]);
        assert_eq!(again.weight(), messages.weight());
        messages.drop_first(1);
        assert_eq!((messages.weight(), messages.len()), (weights[1], 1));
    }
    use super::*;
    use crate::types::{ToolCall, ToolDefinition, ToolsSize};

    #[test]
    fn images_go_as_content_parts_after_the_text_also_when_written_out_earlier() {
        let image: Arc<str> = Arc::from("data:image/png;base64,iVBORw0KGgo=");
        let earlier = Message::Encoded(EncodedMessages::encode(&[Message::user_with_images(
            "before",
            vec![image.clone()],
        )]));
        let request = ChatRequest::new(
            "m",
            vec![earlier, Message::user_with_images("what is this?", vec![image.clone()])],
        );
        let body: Value = serde_json::from_str(&request_body(&request, false)).unwrap();
        let parts = |text: &str| {
            json!({"role": "user", "content": [
                {"type": "text", "text": text},
                {"type": "image_url", "image_url": {"url": "data:image/png;base64,iVBORw0KGgo="}},
            ]})
        };
        assert_eq!(body["messages"], json!([parts("before"), parts("what is this?")]));
        // Without images the content stays a plain string, as every server takes it.
        let plain = ChatRequest::new("m", vec![Message::user("hi")]);
        let body: Value = serde_json::from_str(&request_body(&plain, false)).unwrap();
        assert_eq!(body["messages"], json!([{"role": "user", "content": "hi"}]));
    }

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
        let body: Value = serde_json::from_str(&request_body(&request, true)).unwrap();
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
    fn messages_encoded_before_are_sent_exactly_as_if_written_now() {
        let quoted = "a \"quote\", a line\nbreak, ünïcödé and </script>";
        let earlier = [
            Message::user(quoted),
            Message::assistant("sure"),
            Message::Assistant {
                content: Some("calling".into()),
                tool_calls: vec![ToolCall {
                    id: "c1".into(),
                    name: "f".into(),
                    arguments_json: "{}".into(),
                }],
            },
            Message::tool("c1", quoted),
        ];
        let mut encoded = EncodedMessages::encode(&earlier[..2]);
        encoded.push(&Message::Encoded(EncodedMessages::encode(&earlier[2..])));
        assert_eq!(encoded, EncodedMessages::encode(&earlier));
        assert_eq!(encoded.len(), 4);
        let now = |earlier: Message| {
            ChatRequest::new("m", vec![Message::system("s"), earlier, Message::user("next")])
        };
        let spread = ChatRequest::new(
            "m",
            [Message::system("s")]
                .into_iter()
                .chain(earlier.iter().cloned())
                .chain([Message::user("next")])
                .collect(),
        );
        assert_eq!(
            request_body(&now(Message::Encoded(encoded.clone())), true),
            request_body(&spread, true)
        );
        assert_eq!(
            request_body(&now(Message::Encoded(EncodedMessages::default())), true),
            request_body(
                &ChatRequest::new("m", vec![Message::system("s"), Message::user("next")]),
                true
            ),
            "an empty run adds nothing"
        );
        assert_eq!(
            encoded.bytes(),
            {
                let written = request_body(&ChatRequest::new("m", earlier.to_vec()), false);
                let start = written.find('[').unwrap() + 1;
                let end = written.rfind(']').unwrap();
                written[start..end].len() - (earlier.len() - 1)
            },
            "the bytes of the messages without the commas between them"
        );
    }

    #[test]
    fn the_size_of_the_tools_is_what_the_request_carries() {
        let tool = |name: &str, description: Option<&str>| ToolDefinition {
            name: name.into(),
            description: description.map(str::to_owned),
            parameters: json!({"type": "object", "properties": {"q": {"type": "string",
                "description": "a \"quote\", ünïcödé, </script>"}}}),
        };
        let tools = vec![tool("a", Some("line\nbreak")), tool("b", None), tool("c", Some(""))];
        let request = ChatRequest::new("m", vec![Message::user("hi")]).with_tools(tools.clone());
        let written = request_body(&request, false);
        let start = written.find(r#""tools":"#).unwrap() + r#""tools":"#.len();
        let array: &RawValue = serde_json::Deserializer::from_str(&written[start..])
            .into_iter::<&RawValue>()
            .next()
            .unwrap()
            .unwrap();
        assert_eq!(ToolsSize::of(&tools).bytes, array.get().len());
        assert_eq!(request.tools.size(), ToolsSize::of(&tools));
        assert_eq!(ToolsSize::of(&tools[..1]).bytes, tools_bytes_alone(&tools[0]));
        assert_eq!(ToolsSize::of(&[]), ToolsSize::default(), "no tools, no array");
        assert_eq!(request.tools.len(), 3);
    }

    /// `[definition]` written on its own.
    fn tools_bytes_alone(tool: &ToolDefinition) -> usize {
        serde_json::to_string(&[json!({"type": "function", "function": {
            "name": tool.name, "description": tool.description, "parameters": tool.parameters,
        }})])
        .unwrap()
        .len()
    }

    #[test]
    fn tool_choice_is_left_out_without_tools() {
        let request = ChatRequest::new("m", vec![]).with_tool_choice(ToolChoice::Required);
        let body: Value = serde_json::from_str(&request_body(&request, false)).unwrap();
        assert!(body.get("tool_choice").is_none() && body.get("tools").is_none());
        assert!(body.get("stream_options").is_none());
    }
}
