//! llooma-store integration tests. Every test runs on the engine `LLOOMA_TEST_DB` names
//! (`sqlite`, the default, or `postgres`); CI runs the binary once for each.

// Helpers outside `#[test]` functions are not covered by clippy's allow-unwrap-in-tests; a
// failed setup step should panic there too.
#![expect(clippy::unwrap_used, clippy::expect_used, reason = "test helpers panic on failed setup")]

mod accounts;
mod approvals;
mod bots;
mod catalogue;
mod consent;
mod conversations;
mod files;
mod mcp_servers;
mod personas;
mod support;
mod usage;
