//! A scripted OpenAI-compatible model server on loopback, for tests and for trying Llooma
//! without a provider.
//!
//! It speaks the real wire protocol over real HTTP (`POST /v1/chat/completions`, streamed as
//! SSE or whole, `GET /v1/models`, and the audio API: `POST /v1/audio/transcriptions` reads a
//! multipart form, `POST /v1/audio/speech` answers MP3), so the code under test is exercised exactly as it is
//! against OpenAI, Ollama, vLLM or llama.cpp. Each chat request takes the next scripted
//! [`Reply`] from a queue; every request is recorded so tests can assert what the model was
//! sent.
//!
//! ```no_run
//! # async fn demo() -> std::io::Result<()> {
//! use llooma_fake_model::{FakeModel, FakeToolCall, Reply};
//! let model = FakeModel::start([
//!     Reply::text("Hello there").chunks(3),
//!     Reply::tool_call("get_weather", serde_json::json!({"city": "Oslo"})).chunks(4),
//!     Reply::http_error(429, r#"{"error":{"message":"slow down"}}"#).retry_after("2"),
//! ])
//! .await?;
//! let base_url = model.base_url(); // http://127.0.0.1:<port>/v1
//! # let _ = (base_url, FakeToolCall::raw("f", "{}"));
//! // ... run the code under test, then:
//! let sent = model.chat_bodies();
//! # let _ = sent;
//! # Ok(()) }
//! ```
//!
//! It binds 127.0.0.1 only and is test tooling: it keeps the `Authorization` header it
//! receives so tests can check it.

mod multipart;
mod script;
mod server;
mod wire;

pub use multipart::{FormPart, boundary as form_boundary, parse as parse_form};
pub use script::{
    Completion, Ending, FakeToolCall, FakeUsage, Fallback, ReasoningField, Reply, ScriptFile,
};
pub use server::{
    Audio, FakeModel, FakeModelBuilder, ReceivedRecording, RecordedRequest, SPEECH_MODELS,
    silent_mp3,
};
