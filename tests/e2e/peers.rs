//! Real MCP servers no one here wrote, from the shared test tooling.

pub use llooma_test_support::peers::{everything, gateway};
