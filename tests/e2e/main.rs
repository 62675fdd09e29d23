#![allow(clippy::unwrap_used, clippy::expect_used, reason = "a failing test should fail loudly")]

//! End-to-end tests: the real `llooma` binary, a real database (SQLite, or Postgres when
//! `LLOOMA_TEST_DB=postgres`), real HTTP.

mod accounts;
mod api_errors;
mod approvals;
mod bots;
mod browser;
mod builtin_tools;
mod catalogue;
mod cli;
mod connections;
mod conversations;
mod files;
mod import;
mod long_conversations;
mod mcp_servers;
mod outbound;
mod peers;
mod questions;
mod secrets;
mod sessions;
mod support;
mod usage;
mod views;
mod voice;
