#![doc = include_str!("../README.md")]
//!
//! ## In detail
//!
//! - [`McpClient`] holds the policy-enforcing HTTP client and the bounds ([`McpConfig`],
//!   [`Limits`]); [`McpClient::connect`] gives an [`McpSession`] to reuse within a turn, and
//!   [`McpClient::probe`] and [`McpClient::snapshot`] are one-shot helpers. [`probe`] is what
//!   `llooma mcp probe` calls.
//! - [`McpClient::call_tool_for`] (what a turn calls) and [`McpClient::call_tool`] reuse a
//!   session kept per server, address and token for a while (its `Mcp-Session-Id`, its
//!   handshake) instead of connecting for every call; [`McpClient::forget`] drops a server's.
//!   A stale session is replaced, and the call sent again, only when the server did not run it.
//! - Handshake: `server/discover` at protocol 2026-07-28, falling back to `initialize` at
//!   2025-11-25 for servers that do not know it (rmcp's `ClientLifecycleMode::Auto`).
//! - Everything a server sends is bounded: pages per list, tools per server, description and
//!   schema sizes, the result given to the model, the size of one response. What a limit cuts
//!   is said in a [`Note`] or in the result itself, never silently.
//! - Every failure is a distinct [`McpError`] whose message says what to do. The token is a
//!   [`llooma_vault::Secret`] and appears in no message, log or `Debug` output of this crate.
//!
//! Must never: speak stdio or start a process; build an HTTP client of its own; name a
//! model-facing tool (that is `llooma-tool-naming`'s job: names here are the server's own).

mod ask;
mod canonical;
mod client;
mod config;
mod error;
mod http;
mod icon;
mod model;
mod pool;
mod session;
pub mod template;
mod view;

pub use ask::{
    Asked, Asker, CallNews, Completion, CompletionRequest, LinkThen, MAX_LINK_BYTES,
    MAX_PROGRESS_MESSAGE_BYTES, MAX_QUESTION_MESSAGE_BYTES, MAX_QUESTION_SCHEMA_BYTES,
    MAX_SAMPLING_BYTES, MAX_SAMPLING_MESSAGES, MAX_SAMPLING_TOKENS, Progress, QuestionAnswer,
    SampledMessage, ServerQuestion, TaskReport, TaskState, with_defaults,
};
pub use canonical::{canonical_json, definition_hash};
pub use client::{McpClient, probe};
pub use config::{Limits, McpConfig, TRUNCATION_MARKER};
pub use error::McpError;
pub use icon::MAX_ICON_BYTES;
pub use llooma_net::{OutboundPolicy, Refusal};
pub use model::{
    ContentItem, Note, ProbeReport, ProbeTool, PromptArgumentDef, PromptDef, PromptMessage,
    PromptResult, ResourceContents, ResourceDef, ResourceTemplateDef, ServerDescription, Snapshot,
    ToolDef, ToolList, ToolResult,
};
pub use session::McpSession;
pub use template::TemplateError;
pub use view::{
    MAX_VIEW_BYTES, MAX_VIEWS, ToolView, UI_EXTENSION_ID, VIEW_MIME_TYPE, ViewDocument, ViewDomains,
};
