//! Real MCP servers no one here wrote, from the shared test tooling.

pub use llooma_test_support::peers::{everything, gateway, tasks};

/// An MCP client of our own that may reach `peer`, to change or inspect it behind Llooma's back.
pub fn client_for(peer: &llooma_test_support::peers::Peer) -> llooma_mcp_client::McpClient {
    let policy =
        llooma_mcp_client::OutboundPolicy::from_allow_lists(Some(&peer.origin()), None, None)
            .unwrap();
    llooma_mcp_client::McpClient::new(std::sync::Arc::new(policy), Default::default()).unwrap()
}
