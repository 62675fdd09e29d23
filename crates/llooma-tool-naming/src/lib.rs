#![doc = include_str!("../README.md")]
//!
//! ## Invariants
//!
//! - Every name a [`NameTable`] produces matches `^[a-zA-Z0-9_-]{1,64}$` and starts with
//!   [`MCP_PREFIX`], so no MCP tool can be mistaken for one of the app's own tools
//!   ([`BUILTIN_TOOL_NAMES`]); the built-ins inside the `mcp_` namespace ([`RESERVED_MCP_NAMES`])
//!   are never produced either.
//! - Names within one table are unique, even ignoring ASCII case.
//! - The way back from a model-facing name to `(server, original tool name)` is a lookup in the
//!   map built together with the names ([`NameTable::resolve`]), never a parse of the name.
//! - Everything is deterministic and independent of input order, except where an order is the
//!   point (servers in the order the account added them, for the budget).
//!
//! ## Pieces
//!
//! - [`server_slug`]: the server half, from the label, with a numeric suffix for a repeat
//!   (`home`, `home_2`); computed once and stored.
//! - [`NameTable`]: `mcp_<slug>_<tool>` for a whole catalogue, and [`NameTable::resolve`].
//! - [`group_tools`] and [`switched_on`]: groups read off tool names and their switches; the
//!   heuristic and its limits are documented in the [`group`] module.
//! - [`select_tools`]: the budget and provider cap, with a reported, deterministic left-out list.

mod budget;
mod error;
pub mod group;
mod name;
mod table;

pub use budget::{
    BUDGET_WARNING, BUDGET_WARNING_ABOVE, BudgetOutcome, Candidate, DEFAULT_TOOL_BUDGET, LimitedBy,
    Limits, OPENAI_MAX_TOOLS, ServerTools, budget_warning, select_tools,
};
pub use error::NamingError;
pub use group::{
    Group, GroupSwitches, GroupedTool, Separator, UNNAMED_GROUP, detect_separator, group_tools,
    switched_on,
};
pub use name::{
    BUILTIN_TOOL_NAMES, FALLBACK_SLUG, MAX_NAME_LEN, MAX_SLUG_LEN, MCP_PREFIX, RESERVED_MCP_NAMES,
    is_valid_model_name, sanitize, server_slug, slugify,
};
pub use table::{NameTable, NamedTool};
