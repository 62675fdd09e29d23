//! Integration tests of llooma-mcp-client against real peers (server-everything, the Python
//! SDK) and hostile servers written here.

#![allow(clippy::unwrap_used, clippy::expect_used, reason = "tests")]

mod cancel;
mod conformance;
mod everything;
mod gateway;
mod hostile;
mod pool;
mod support;
mod tasks;
mod views;
