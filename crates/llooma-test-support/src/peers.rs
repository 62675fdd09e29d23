//! Real MCP servers no one here wrote, started as child processes on loopback. They are installed
//! by `crates/llooma-mcp-client/tests/peers/install.sh` and found through `LLOOMA_NPM_PEERS` and
//! `LLOOMA_PYTHON` (which `cargo xtask ci` sets).

use std::net::TcpListener;
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

/// The location a peer variable points at, or None to skip the test. With `LLOOMA_SLOW_TESTS`
/// set (CI) a missing peer fails instead: CI must not pass by skipping.
pub fn peer_path(var: &str) -> Option<PathBuf> {
    match std::env::var_os(var) {
        Some(value) if !value.is_empty() => Some(PathBuf::from(value)),
        _ => {
            assert!(
                std::env::var_os("LLOOMA_SLOW_TESTS").is_none(),
                "{var} is not set but LLOOMA_SLOW_TESTS is: run \
                 crates/llooma-mcp-client/tests/peers/install.sh and export what it prints"
            );
            eprintln!(
                "skipped: {var} is not set (run crates/llooma-mcp-client/tests/peers/install.sh)"
            );
            None
        }
    }
}

/// A running peer, killed when dropped.
#[derive(Debug)]
pub struct Peer {
    child: Child,
    pub port: u16,
}

impl Peer {
    /// Its MCP endpoint.
    pub fn url(&self) -> String {
        format!("http://127.0.0.1:{}/mcp", self.port)
    }

    /// The `MCP_ALLOWED_ORIGINS` entry that lets a server reach it.
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

/// A port nobody listens on right now.
pub fn free_port() -> u16 {
    TcpListener::bind("127.0.0.1:0")
        .and_then(|l| l.local_addr())
        .map(|a| a.port())
        .expect("a free loopback port")
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
    let _ = child.kill();
    panic!("{what} did not listen on port {port} within 30 s");
}

/// npm's `@modelcontextprotocol/server-everything` in `streamableHttp` mode.
pub fn everything() -> Option<Peer> {
    let dir = peer_path("LLOOMA_NPM_PEERS")?;
    let script = dir.join("node_modules/@modelcontextprotocol/server-everything/dist/index.js");
    assert!(script.exists(), "{} is missing; run install.sh", script.display());
    let port = free_port();
    let child = Command::new("node")
        .arg(script)
        .arg("streamableHttp")
        .env("PORT", port.to_string())
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .spawn()
        .expect("starting node");
    Some(wait_for(child, port, "server-everything"))
}

/// npm's `@modelcontextprotocol/server-basic-vanillajs`: one tool, `get-time`, with an
/// interactive view (MCP Apps) at `ui://get-time/mcp-app.html`.
pub fn basic_app() -> Option<Peer> {
    let dir = peer_path("LLOOMA_NPM_PEERS")?;
    let script =
        dir.join("node_modules/@modelcontextprotocol/server-basic-vanillajs/dist/index.js");
    assert!(script.exists(), "{} is missing; run install.sh", script.display());
    let port = free_port();
    let child = Command::new("node")
        .arg(script)
        .env("PORT", port.to_string())
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .spawn()
        .expect("starting node");
    Some(wait_for(child, port, "server-basic-vanillajs"))
}

/// The Python `mcp` SDK server whose tools come with a hostile view (MCP Apps)
/// (`tests/peers/hostile_view_server.py` of llooma-mcp-client).
pub fn hostile_view() -> Option<Peer> {
    python_peer("hostile_view_server.py", "the Python hostile view server")
}

/// The gateway-like server on the Python `mcp` SDK (`tests/peers/gateway_server.py` of
/// llooma-mcp-client); with `token`, every request must carry it as a bearer token.
pub fn gateway(token: Option<&str>) -> Option<Peer> {
    let python = peer_path("LLOOMA_PYTHON")?;
    let script = Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("../llooma-mcp-client/tests/peers/gateway_server.py");
    let port = free_port();
    let mut command = Command::new(python);
    command.arg(script).arg(port.to_string());
    if let Some(token) = token {
        command.arg(token);
    }
    let child =
        command.stdout(Stdio::null()).stderr(Stdio::null()).spawn().expect("starting python");
    Some(wait_for(child, port, "the Python gateway server"))
}

/// The Python `mcp` SDK server whose tools run as long-running tasks
/// (`tests/peers/tasks_server.py` of llooma-mcp-client).
pub fn tasks() -> Option<Peer> {
    python_peer("tasks_server.py", "the Python tasks server")
}

/// A server of ours on the Python `mcp` SDK (`script` in llooma-mcp-client's `tests/peers/`),
/// given its port as its one argument.
fn python_peer(script: &str, what: &str) -> Option<Peer> {
    let python = peer_path("LLOOMA_PYTHON")?;
    let script =
        Path::new(env!("CARGO_MANIFEST_DIR")).join("../llooma-mcp-client/tests/peers").join(script);
    let port = free_port();
    let child = Command::new(python)
        .arg(script)
        .arg(port.to_string())
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .spawn()
        .expect("starting python");
    Some(wait_for(child, port, what))
}
