//! Real MCP servers no one here wrote, started as child processes on loopback: npm's
//! `server-everything` and a gateway-like server on the Python `mcp` SDK. Installed by
//! `crates/llooma-mcp-client/tests/peers/install.sh`, found through `LLOOMA_NPM_PEERS` and
//! `LLOOMA_PYTHON`.

use std::net::TcpListener;
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

/// The peer's location, or None to skip; with `LLOOMA_SLOW_TESTS` set (CI) a missing peer fails.
fn peer_path(var: &str) -> Option<PathBuf> {
    match std::env::var_os(var) {
        Some(value) if !value.is_empty() => Some(PathBuf::from(value)),
        _ => {
            assert!(
                std::env::var_os("LLOOMA_SLOW_TESTS").is_none(),
                "{var} is not set: run crates/llooma-mcp-client/tests/peers/install.sh and export what it prints"
            );
            eprintln!("skipped: {var} is not set");
            None
        }
    }
}

pub struct Peer {
    child: Child,
    pub port: u16,
}

impl Peer {
    pub fn url(&self) -> String {
        format!("http://127.0.0.1:{}/mcp", self.port)
    }

    /// The value of `MCP_ALLOWED_ORIGINS` that lets the server reach this peer.
    pub fn origin(&self) -> String {
        format!("http://127.0.0.1:{}", self.port)
    }
}

impl Drop for Peer {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

pub fn free_port() -> u16 {
    TcpListener::bind("127.0.0.1:0").unwrap().local_addr().unwrap().port()
}

fn wait_for(mut child: Child, port: u16, what: &str) -> Peer {
    let deadline = Instant::now() + Duration::from_secs(30);
    while Instant::now() < deadline {
        if std::net::TcpStream::connect(("127.0.0.1", port)).is_ok() {
            return Peer { child, port };
        }
        if let Ok(Some(status)) = child.try_wait() {
            panic!("{what} exited early with {status}");
        }
        std::thread::sleep(Duration::from_millis(50));
    }
    panic!("{what} did not listen on port {port}");
}

pub fn everything() -> Option<Peer> {
    let dir = peer_path("LLOOMA_NPM_PEERS")?;
    let port = free_port();
    let script = dir.join("node_modules/@modelcontextprotocol/server-everything/dist/index.js");
    let child = Command::new("node")
        .arg(script)
        .arg("streamableHttp")
        .env("PORT", port.to_string())
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .spawn()
        .unwrap();
    Some(wait_for(child, port, "server-everything"))
}

pub fn gateway(token: Option<&str>) -> Option<Peer> {
    let python = peer_path("LLOOMA_PYTHON")?;
    let port = free_port();
    let script = Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("../crates/llooma-mcp-client/tests/peers/gateway_server.py");
    let mut command = Command::new(python);
    command.arg(script).arg(port.to_string());
    if let Some(token) = token {
        command.arg(token);
    }
    let child = command.stdout(Stdio::null()).stderr(Stdio::null()).spawn().unwrap();
    Some(wait_for(child, port, "the Python gateway server"))
}
