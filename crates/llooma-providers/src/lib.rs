//! Model provider APIs: the OpenAI-compatible chat completions API first, which OpenAI,
//! Ollama, vLLM, llama.cpp server, LM Studio and OpenRouter all speak.
//!
//! [`ProviderClient::chat`] sends `POST {base}/chat/completions` with `stream: true` and
//! returns a [`ChatStream`] of [`ChatEvent`]s: text and reasoning deltas as they arrive, then
//! complete tool calls (assembled from their streamed fragments), usage, and
//! [`ChatEvent::Finished`]. [`ProviderClient::list_models`] reads `GET {base}/models`.
//! [`ProviderClient::transcribe`] and [`ProviderClient::speak`] use the audio API (speech to
//! text, a multipart form written here; text to speech), each bounded in time and size.
//!
//! Every request goes through a [`NetClient`](llooma_net::NetClient) the caller built, so the
//! outbound policy applies to provider URLs like to any other. Streams need that client
//! configured differently from the defaults (no total timeout, a whole-stream size cap):
//! [`ProviderConfig::configure_net_client`] does it.
//!
//! What this crate never does: put the API key anywhere but the `Authorization` header (it
//! is scrubbed from the upstream text kept in errors, and `Debug` redacts it), wait without a
//! bound (connect, first-byte and idle timeouts), or keep more of an upstream error body than a
//! short single-line excerpt.

mod assemble;
mod capabilities;
mod client;
mod config;
mod error;
mod multipart;
mod speech;
mod sse;
mod types;
mod wire;

pub use capabilities::ModelReport;
pub use client::{ChatStream, ProviderClient};
pub use config::{DEFAULT_MAX_STREAM_BYTES, OPENAI_MAX_TOOLS, ProviderConfig};
pub use error::ProviderError;
pub use speech::{
    MAX_SPEECH_BYTES, MAX_TRANSCRIPT_BYTES, SpeechAudio, SpeechRequest, Transcription,
};
pub use types::{
    ChatEvent, ChatReply, ChatRequest, EncodedMessages, EncodedTool, EncodedTools, FinishReason,
    IMAGE_WEIGHT, Message, Metered, ModelInfo, Timeouts, ToolCall, ToolChoice, ToolDefinition,
    ToolsSize, Usage,
};
