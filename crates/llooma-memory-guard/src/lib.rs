#![doc = include_str!("../README.md")]
//!
//! ## The two rules
//!
//! 1. **Memory is closed for the rest of the turn.** A [`TurnGuard`] lives for one turn. Once
//!    an MCP server has answered in it ([`TurnGuard::record_mcp_answer`], for a tool result, a
//!    resource read or a prompt get, see [`McpAnswerKind`]), every memory write is refused with
//!    a [`WriteVerdict::Refused`] carrying the message the model sees, the server that closed
//!    memory and a timeline step. Reads are never checked. A new turn starts open, so what the
//!    model learned can still be remembered on a later turn a person starts.
//! 2. **What a server wrote is not what the user wrote.** Tool results, resource bodies, prompt
//!    bodies and server instructions reach the model only through [`wrap`] (or
//!    [`TurnGuard::admit`], which also records the answer), inside a labelled block naming the
//!    server and the kind of text; server instructions are framed as reference material, not
//!    instructions to follow.
//!
//! ## Invariants
//!
//! - Memory closes only through [`TurnGuard::record_mcp_answer`]. Built-in tools (`web_search`,
//!   `read_page`) have no way to close it, and server instructions do not close it.
//! - Once closed, memory stays closed until the [`TurnGuard`] is dropped; every write check
//!   after that is refused and counted ([`TurnGuard::refusals`]).
//! - A wrapped block starts with [`OPENER_PREFIX`] on its first line and ends with a line
//!   starting with [`CLOSER_PREFIX`]; both lines end with [`MARKER_END`]. Nothing in between
//!   contains `<<<` or `>>>`, nor three same-direction angle brackets separated only by
//!   whitespace, invisible characters or combining marks, counting Unicode look-alikes
//!   (`＜`, `‹`, `〈`, `≪`, `⋘`, ...) and escaped spellings (`&lt;`, `&#x3c;`, `\u003c`, `%3C`).
//!   Such runs become an inert `[3×<]`. So server text can neither close its block nor open a
//!   new one, whatever the server label, tool name or content.
//! - Zero-width characters, bidi controls, tag characters and other controls except tab and
//!   newline are removed from server text; all line breaks become `\n`; `<|` and `|>` are
//!   split so chat-template tokens cannot form; lines that open by naming a chat role
//!   (`User:`, `[SYSTEM]`, `<assistant>`) are prefixed with `[server text] `.
//! - Labels in headers and messages contain no quotes, line breaks or angle brackets.
//! - Text inside a block is at most its [`Caps`] cap in bytes, cut on a character boundary;
//!   when it was cut, the closer says how many of how many bytes were cut.
//! - This crate does no IO, spawns nothing and reads no clock or environment.

mod error;
mod file;
mod neutralize;
mod turn;
mod wrap;

pub use error::GuardError;
pub use file::{FILE_CLOSER_PREFIX, FILE_OPENER_PREFIX, WrappedFile, wrap_file};
pub use turn::{ClosedBy, MemoryAccess, Refusal, TurnGuard, WriteVerdict};
pub use wrap::{
    CLOSER_PREFIX, Caps, ContentKind, MARKER_END, McpAnswerKind, OPENER_PREFIX, Source, Truncation,
    Wrapped, wrap,
};
