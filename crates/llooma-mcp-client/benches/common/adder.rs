//! The MCP server the benches call: one tool, `add`, on rmcp's Streamable HTTP server in this
//! process, with TCP_NODELAY (so only the protocol's own cost is measured).

use axum::serve::ListenerExt;
use rmcp::model::{
    CallToolRequestParams, CallToolResponse, CallToolResult, ContentBlock, ServerCapabilities,
    ServerConfig,
};
use rmcp::service::RequestContext;
use rmcp::transport::streamable_http_server::session::local::LocalSessionManager;
use rmcp::transport::streamable_http_server::{StreamableHttpServerConfig, StreamableHttpService};
use rmcp::{ErrorData, RoleServer, ServerHandler};

#[derive(Clone)]
struct Adder;

impl ServerHandler for Adder {
    fn get_info(&self) -> ServerConfig {
        ServerConfig::new(ServerCapabilities::builder().enable_tools().build())
    }

    async fn call_tool(
        &self,
        request: CallToolRequestParams,
        _context: RequestContext<RoleServer>,
    ) -> Result<CallToolResponse, ErrorData> {
        let args = request.arguments.unwrap_or_default();
        let sum = args.get("a").and_then(|v| v.as_i64()).unwrap_or(0)
            + args.get("b").and_then(|v| v.as_i64()).unwrap_or(0);
        Ok(CallToolResult::success(vec![ContentBlock::text(sum.to_string())]).into())
    }
}

/// Starts the server on a free loopback port; its address (`http://ADDR/mcp`).
pub async fn start_server() -> std::net::SocketAddr {
    let service: StreamableHttpService<Adder, LocalSessionManager> = StreamableHttpService::new(
        || Ok(Adder),
        Default::default(),
        StreamableHttpServerConfig::default(),
    );
    let router = axum::Router::new().nest_service("/mcp", service);
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let addr = listener.local_addr().unwrap();
    let listener = listener.tap_io(|tcp| {
        let _ = tcp.set_nodelay(true);
    });
    tokio::spawn(async move {
        let _ = axum::serve(listener, router).await;
    });
    addr
}
