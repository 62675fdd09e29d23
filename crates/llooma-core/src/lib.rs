//! The turn engine: what happens between a person's message and the reply.
//!
//! [`engine`] is the round loop: the model answers, and when it calls tools the engine runs them,
//! reports each as a timeline step, gives the results back and asks again, up to
//! [`TurnRequest::rounds`]; the last round offers no tools, so a turn always ends with an answer.
//! The app's own tools a turn offers are an input of the turn ([`BuiltinTools`]: current date,
//! web search, page reading, a persona's memory), beside MCP tools (through the approval
//! broker, [`McpTurn`]). Everything a watching tab should see is a [`TurnEvent`] given to a
//! [`TurnSink`].

pub mod engine;
pub mod error;
pub mod html;
mod mcp;
mod tools;

pub use engine::{
    Attachment, AttachmentKind, DEFAULT_SYSTEM_PROMPT, DELTA_MAX_BYTES, DELTA_WINDOW, ROUNDS,
    ROUNDS_WITH_MCP, Speaker, TurnEnd, TurnRequest, TurnSink, attachment_step, rounds_for,
    run_turn, system_prompt,
};
pub use error::{AppError, SinkError, TurnError};
pub use llooma_types::TurnEvent;
pub use mcp::{
    ANNOUNCE_TOOL, AnnounceCost, InUseCheck, McpResource, McpTool, McpTurn, RESOURCE_LIST,
    RESOURCE_READ, ToolCost, announce_cost,
};
pub use tools::{
    APP_TOOLS, BuiltinTools, CURRENT_DATE, FetchedPage, MAX_PAGE_CHARS, MAX_SEARCH_RESULTS,
    MEMORY_FORGET, MEMORY_READ, MEMORY_WRITE, MemoryBudget, MemoryEntry, MemoryPort, OFFER_CHOICES,
    PageReader, PersonaMemory, PortFuture, READ_PAGE, SearchHit, ToolError, WEB_SEARCH, WebSearch,
    default_description,
};
