//! The turn engine and the application around it.
//!
//! [`engine`] is the round loop: the model answers, and when it calls tools the engine runs them,
//! reports each as a timeline step, gives the results back and asks again, up to
//! [`TurnRequest::rounds`]; the last round offers no tools, so a turn always ends with an answer.
//! The app's own tools a turn offers are an input of the turn ([`BuiltinTools`]: current date,
//! web search, page reading, a persona's memory), beside MCP tools (through the approval
//! broker, [`McpTurn`]). Everything a watching tab should see is a [`TurnEvent`] given to a
//! [`TurnSink`].
//!
//! [`App`] is the application: it starts, follows, stops and recovers turns for conversations
//! ([`conversations`], [`turns`]) and bots ([`bots`]) through one plan ([`setup`]), decides
//! which MCP tools a turn offers and what a changed tool list may use ([`mcp_servers`]), watches
//! servers for new tools ([`mcp_watch`]), and keeps the clients it builds under the outbound
//! policy ([`providers`], [`builtins`]). It knows nothing of HTTP: `llooma-api` maps its
//! answers and [`AppError`]s to requests and status codes.

mod accounts;
pub mod app;
pub mod approvals;
pub mod bot_settings;
pub mod bots;
pub mod builtins;
mod consent_gate;
pub mod context_window;
pub mod conversations;
pub mod engine;
pub mod error;
pub mod export;
pub mod fields;
pub mod files;
mod history_cache;
pub mod icon_cache;
pub mod icons;
pub mod import;
mod long_conversations;
pub mod mcp_servers;
pub mod mcp_watch;
pub mod providers;
mod setup;
mod snapshot_cache;
pub mod speech;
pub mod tool_freshness;
pub mod turns;
pub mod uploads;
pub mod usage;
pub mod view_calls;
pub mod views;

pub use app::{App, AppParts};
pub use consent_gate::StandingConsent;
pub use engine::html;
pub use engine::mcp::{
    ANNOUNCE_TOOL, AnnounceCost, InUseCheck, McpResource, McpTool, McpTurn, RESOURCE_LIST,
    RESOURCE_READ, ToolCost, announce_cost,
};
pub use engine::tools::{
    APP_TOOLS, BuiltinTools, CURRENT_DATE, FetchedPage, MAX_PAGE_CHARS, MAX_SEARCH_RESULTS,
    MEMORY_FORGET, MEMORY_READ, MEMORY_WRITE, MemoryBudget, MemoryEntry, MemoryPort, OFFER_CHOICES,
    PageReader, PersonaMemory, PortFuture, READ_PAGE, SearchHit, ToolError, WEB_SEARCH, WebSearch,
    default_description,
};
pub use engine::{
    Attachment, AttachmentKind, DEFAULT_SYSTEM_PROMPT, DELTA_MAX_BYTES, DELTA_WINDOW, ROUNDS,
    ROUNDS_WITH_MCP, Speaker, TurnEnd, TurnRequest, TurnSink, attachment_step, rounds_for,
    run_turn, system_prompt,
};
pub use error::{AppError, SinkError, TurnError};
/// The records the application reads and writes (accounts, sessions, personas, settings...):
/// the API reaches storage through here, never by naming `llooma-store` itself.
pub use llooma_store as store;
pub use llooma_types::TurnEvent;
