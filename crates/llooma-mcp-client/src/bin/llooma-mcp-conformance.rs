//! A client for the official MCP conformance suite (`@modelcontextprotocol/conformance`):
//!
//! ```text
//! conformance client --command "llooma-mcp-conformance" --scenario tools_call
//! ```
//!
//! The suite appends its test server's URL as the last argument and names the scenario in
//! `MCP_CONFORMANCE_SCENARIO` (or pass `--scenario NAME` before the URL). The suite's servers
//! listen on `localhost`, which the outbound policy refuses unless allowed, so this test tool
//! allows exactly the origin of the URL it was given. It is a test tool: a real server never
//! derives its allow-list from the address it is asked to reach.

use std::process::ExitCode;
use std::sync::Arc;

use llooma_mcp_client::{CallNews, McpClient, McpConfig, McpError, OutboundPolicy, QuestionAnswer};
use serde_json::json;

#[tokio::main(flavor = "current_thread")]
async fn main() -> ExitCode {
    let args: Vec<String> = std::env::args().skip(1).collect();
    let Some(url) = args.last().cloned() else {
        eprintln!("usage: llooma-mcp-conformance [--scenario NAME] SERVER_URL");
        return ExitCode::from(2);
    };
    let scenario = args
        .windows(2)
        .find(|w| w[0] == "--scenario")
        .map(|w| w[1].clone())
        .or_else(|| std::env::var("MCP_CONFORMANCE_SCENARIO").ok())
        .unwrap_or_default();
    match run(&scenario, &url).await {
        Ok(()) => ExitCode::SUCCESS,
        Err(err) => {
            eprintln!("scenario {scenario}: {err}");
            ExitCode::FAILURE
        }
    }
}

async fn run(scenario: &str, url: &str) -> Result<(), McpError> {
    let origin = url::Url::parse(url)
        .map(|u| u.origin().ascii_serialization())
        .map_err(|err| McpError::InvalidUrl { url: url.to_owned(), problem: err.to_string() })?;
    let policy = OutboundPolicy::from_allow_lists(Some(&origin), None, None)
        .map_err(|err| McpError::InvalidUrl { url: url.to_owned(), problem: err.to_string() })?;
    let client = McpClient::new(Arc::new(policy), McpConfig::default())?;
    let session = client.connect(url, None).await?;
    let server = session.server();
    eprintln!(
        "connected to {} {} (protocol {})",
        server.server_name.as_deref().unwrap_or("?"),
        server.server_version.as_deref().unwrap_or("?"),
        server.protocol_version
    );
    let tools = session.list_tools().await?;
    eprintln!("tools: {:?}", tools.tools.iter().map(|t| &t.name).collect::<Vec<_>>());
    match scenario {
        "tools_call" => {
            let result = session.call_tool("add_numbers", json!({"a": 5, "b": 3})).await?;
            eprintln!("add_numbers: {}", result.text_for_model());
        }
        "sse-retry" => {
            let result = session.call_tool("test_reconnection", json!({})).await?;
            eprintln!("test_reconnection: {}", result.text_for_model());
        }
        "elicitation-sep1034-client-defaults" => {
            // Stands for a person who lets every default stand: accepts an empty form, and the
            // client fills in the defaults it showed.
            let (asker, mut questions) = tokio::sync::mpsc::channel::<CallNews>(1);
            tokio::spawn(async move {
                while let Some(news) = questions.recv().await {
                    let CallNews::Question(question) = news else { continue };
                    eprintln!("question: {}", question.message);
                    let _ = question.reply.send(QuestionAnswer::Accept(Default::default()));
                }
            });
            let result = session
                .call_tool_asking("test_client_elicitation_defaults", json!({}), Some(asker))
                .await?;
            eprintln!("test_client_elicitation_defaults: {}", result.text_for_model());
        }
        // `initialize` checks the handshake alone; other scenarios get the same.
        _ => {}
    }
    session.close().await;
    Ok(())
}
