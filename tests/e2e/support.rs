//! Starting the real binary against a fresh database, and a small HTTP client that behaves like
//! a browser tab (cookie, CSRF token, Origin).

use std::io::{BufRead, BufReader};
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use sea_orm::{Database, DatabaseConnection};
use serde_json::{Value, json};

/// Which engine this run tests, from `LLOOMA_TEST_DB` (CI runs the suite once for each).
pub fn engine() -> &'static str {
    match test_engine() {
        llooma_test_support::Engine::Postgres => "postgres",
        llooma_test_support::Engine::Sqlite => "sqlite",
    }
}

pub fn binary() -> PathBuf {
    if let Ok(path) = std::env::var("LLOOMA_BIN") {
        return PathBuf::from(path);
    }
    let root = Path::new(env!("CARGO_MANIFEST_DIR")).parent().unwrap().to_path_buf();
    let target =
        std::env::var("CARGO_TARGET_DIR").map(PathBuf::from).unwrap_or(root.join("target"));
    let path = target.join("debug").join("llooma");
    assert!(
        path.exists(),
        "build the server first (cargo build -p llooma-server) or set LLOOMA_BIN"
    );
    path
}

pub use llooma_test_support::{TestDatabase as TestDb, engine as test_engine};

/// A direct connection to the test's database, to look at or tamper with what is stored.
pub async fn connect(db: &TestDb) -> DatabaseConnection {
    Database::connect(db.url()).await.unwrap()
}

/// A running `llooma` process.
pub struct Server {
    child: Child,
    pub base: String,
    pub log: Arc<Mutex<Vec<String>>>,
}

/// Environment every test server gets.
fn base_command(db: &TestDb, extra_env: &[(&str, &str)]) -> Command {
    with_test_env(Command::new(binary()), db, extra_env)
}

/// `command` (the binary, or a program that runs it) with the environment of a test server.
fn with_test_env(mut command: Command, db: &TestDb, extra_env: &[(&str, &str)]) -> Command {
    command
        .env_clear()
        .env("PATH", std::env::var("PATH").unwrap_or_default())
        .env("LLOOMA_LISTEN", "127.0.0.1:0")
        .env("LLOOMA_DATA_DIR", db.dir.path())
        .env("LLOOMA_LOG", "info,tower_http=debug")
        // Fast tests: the argon2 cost is the production one, but two hashes at once suffice.
        .env("LLOOMA_PASSWORD_HASH_CONCURRENCY", "2");
    if let Some(url) = db.postgres_url() {
        command.env("DATABASE_URL", url);
    }
    for (key, value) in extra_env {
        command.env(key, value);
    }
    command
}

/// Runs a `llooma` subcommand to completion: (exit success, stdout, stderr).
pub fn run_cli(db: &TestDb, args: &[&str], extra_env: &[(&str, &str)]) -> (bool, String, String) {
    let output = base_command(db, extra_env).args(args).stdin(Stdio::null()).output().unwrap();
    (
        output.status.success(),
        String::from_utf8_lossy(&output.stdout).into_owned(),
        String::from_utf8_lossy(&output.stderr).into_owned(),
    )
}

impl Server {
    pub fn start(db: &TestDb, extra_env: &[(&str, &str)]) -> Server {
        Self::try_start(db, extra_env)
            .unwrap_or_else(|log| panic!("the server did not start:\n{log}"))
    }

    /// Starts the server; on failure returns everything it printed.
    pub fn try_start(db: &TestDb, extra_env: &[(&str, &str)]) -> Result<Server, String> {
        Self::spawn(base_command(db, extra_env))
    }

    /// Starts the server with the open-files limit `nofile` (`soft:hard`, as `prlimit` takes it).
    #[allow(dead_code, reason = "not every test binary that includes this file uses it")]
    pub fn start_with_open_files(db: &TestDb, nofile: &str, extra_env: &[(&str, &str)]) -> Server {
        let mut prlimit = Command::new("prlimit");
        prlimit.arg(format!("--nofile={nofile}")).arg("--").arg(binary());
        Self::spawn(with_test_env(prlimit, db, extra_env)).unwrap_or_else(|log| {
            panic!("the server did not start under prlimit (util-linux):\n{log}")
        })
    }

    fn spawn(mut command: Command) -> Result<Server, String> {
        let mut child =
            command.arg("serve").stdout(Stdio::null()).stderr(Stdio::piped()).spawn().unwrap();
        let stderr = child.stderr.take().unwrap();
        let log = Arc::new(Mutex::new(Vec::new()));
        let (tx, rx) = std::sync::mpsc::channel();
        let sink = log.clone();
        std::thread::spawn(move || {
            for line in BufReader::new(stderr).lines().map_while(Result::ok) {
                let address = line
                    .split("listening on http://")
                    .nth(1)
                    .map(|rest| rest.split(['"', ' ']).next().unwrap_or_default().to_owned());
                sink.lock().unwrap().push(line);
                if let Some(address) = address {
                    let _ = tx.send(address);
                }
            }
        });
        let deadline = Instant::now() + Duration::from_secs(30);
        loop {
            if let Ok(address) = rx.recv_timeout(Duration::from_millis(50)) {
                return Ok(Server { child, base: format!("http://{address}"), log });
            }
            if let Ok(Some(_)) = child.try_wait() {
                std::thread::sleep(Duration::from_millis(100));
                return Err(log.lock().unwrap().join("\n"));
            }
            if Instant::now() > deadline {
                let _ = child.kill();
                return Err(format!("timed out\n{}", log.lock().unwrap().join("\n")));
            }
        }
    }

    /// The process id (benchmarks read its CPU time from /proc).
    #[allow(dead_code, reason = "used by benches/turns.rs, which includes this file")]
    pub fn pid(&self) -> u32 {
        self.child.id()
    }

    pub fn log_text(&self) -> String {
        self.log.lock().unwrap().join("\n")
    }

    /// Sends SIGTERM and waits; returns whether it exited cleanly.
    pub fn terminate(mut self) -> (bool, String) {
        let pid = self.child.id().to_string();
        Command::new("kill").args(["-TERM", &pid]).status().unwrap();
        let deadline = Instant::now() + Duration::from_secs(15);
        let status = loop {
            if let Some(status) = self.child.try_wait().unwrap() {
                break status;
            }
            assert!(Instant::now() < deadline, "the server did not stop on SIGTERM");
            std::thread::sleep(Duration::from_millis(20));
        };
        std::thread::sleep(Duration::from_millis(100));
        (status.success(), self.log_text())
    }

    pub fn tab(&self) -> Tab {
        Tab::new(&self.base)
    }

    /// Kills the process (SIGKILL: no shutdown, like a crash) and waits for it.
    pub fn kill(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

impl Drop for Server {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

/// What a browser tab does: keeps the session cookie, sends the CSRF token and its Origin.
pub struct Tab {
    pub base: String,
    pub http: reqwest::Client,
    pub cookie: Option<String>,
    pub csrf: Option<String>,
    pub origin: Option<String>,
}

/// One answer: status, JSON body (Null when none), and the raw text.
#[derive(Debug)]
pub struct Reply {
    pub status: u16,
    pub json: Value,
    pub text: String,
    pub set_cookie: Option<String>,
    /// The `Retry-After` header, when there is one.
    pub retry_after: Option<String>,
}

impl Tab {
    pub fn new(base: &str) -> Tab {
        Tab {
            base: base.to_owned(),
            http: reqwest::Client::builder().no_proxy().build().unwrap(),
            cookie: None,
            csrf: None,
            origin: Some(base.to_owned()),
        }
    }

    pub async fn send(&mut self, method: &str, path: &str, body: Option<Value>) -> Reply {
        let method = reqwest::Method::from_bytes(method.as_bytes()).unwrap();
        let mut request = self.http.request(method, format!("{}{}", self.base, path));
        if let Some(cookie) = &self.cookie {
            request = request.header("cookie", format!("llooma_session={cookie}"));
        }
        if let Some(csrf) = &self.csrf {
            request = request.header("x-csrf-token", csrf);
        }
        if let Some(origin) = &self.origin {
            request = request.header("origin", origin);
        }
        if let Some(body) = body {
            request = request.json(&body);
        }
        let response = request.send().await.unwrap();
        let status = response.status().as_u16();
        let set_cookie =
            response.headers().get("set-cookie").map(|v| v.to_str().unwrap().to_owned());
        let retry_after =
            response.headers().get("retry-after").map(|v| v.to_str().unwrap().to_owned());
        let text = response.text().await.unwrap();
        let json = serde_json::from_str(&text).unwrap_or(Value::Null);
        if let Some(cookie) = &set_cookie {
            let value = cookie.split(';').next().unwrap().trim_start_matches("llooma_session=");
            self.cookie = if value.is_empty() { None } else { Some(value.to_owned()) };
        }
        if let Some(csrf) = json.get("csrfToken").and_then(Value::as_str) {
            self.csrf = Some(csrf.to_owned());
        }
        Reply { status, json, text, set_cookie, retry_after }
    }

    /// Sends `bytes` as a request's whole body (an upload).
    pub async fn upload(&mut self, path: &str, bytes: Vec<u8>) -> Reply {
        let mut request = self.http.post(format!("{}{}", self.base, path)).body(bytes);
        if let Some(cookie) = &self.cookie {
            request = request.header("cookie", format!("llooma_session={cookie}"));
        }
        if let Some(csrf) = &self.csrf {
            request = request.header("x-csrf-token", csrf);
        }
        if let Some(origin) = &self.origin {
            request = request.header("origin", origin);
        }
        let response = request.send().await.unwrap();
        let status = response.status().as_u16();
        let text = response.text().await.unwrap();
        let json = serde_json::from_str(&text).unwrap_or(Value::Null);
        Reply { status, json, text, set_cookie: None, retry_after: None }
    }

    /// A `GET` whose answer is bytes: (status, headers, body).
    pub async fn fetch(&self, path: &str) -> (u16, reqwest::header::HeaderMap, Vec<u8>) {
        let mut request = self.http.get(format!("{}{}", self.base, path));
        if let Some(cookie) = &self.cookie {
            request = request.header("cookie", format!("llooma_session={cookie}"));
        }
        let response = request.send().await.unwrap();
        let status = response.status().as_u16();
        let headers = response.headers().clone();
        (status, headers, response.bytes().await.unwrap().to_vec())
    }

    pub async fn get(&mut self, path: &str) -> Reply {
        self.send("GET", path, None).await
    }

    pub async fn post(&mut self, path: &str, body: Value) -> Reply {
        self.send("POST", path, Some(body)).await
    }

    pub async fn register(&mut self, username: &str, password: &str) -> Reply {
        self.post("/api/v1/auth/register", json!({"username": username, "password": password}))
            .await
    }

    pub async fn login(&mut self, username: &str, password: &str) -> Reply {
        self.post("/api/v1/auth/login", json!({"username": username, "password": password})).await
    }
}

pub const PASSWORD: &str = "correct horse battery staple";

impl Server {
    pub fn tab_with_origin(&self, origin: &str) -> Tab {
        let mut tab = Tab::new(&self.base);
        tab.origin = Some(origin.to_owned());
        tab
    }
}

/// An open server-sent event stream of one tab.
pub struct Events {
    stream: futures::stream::BoxStream<'static, reqwest::Result<bytes::Bytes>>,
    buffer: String,
    /// The id of the last event read (what a reconnect sends as `Last-Event-ID`).
    pub last_id: Option<String>,
}

impl Events {
    pub async fn open(tab: &Tab, path: &str, last_event_id: Option<&str>) -> Events {
        use futures::StreamExt;
        let mut request = tab
            .http
            .get(format!("{}{}", tab.base, path))
            .header("cookie", format!("llooma_session={}", tab.cookie.as_ref().unwrap()));
        if let Some(id) = last_event_id {
            request = request.header("last-event-id", id);
        }
        let response = request.send().await.unwrap();
        assert_eq!(response.status(), 200);
        assert_eq!(response.headers()["content-type"], "text/event-stream");
        Events { stream: response.bytes_stream().boxed(), buffer: String::new(), last_id: None }
    }

    /// Whether the server ends the stream within `limit` (events before the end are skipped).
    pub async fn ends_within(&mut self, limit: Duration) -> bool {
        use futures::StreamExt;
        let deadline = tokio::time::Instant::now() + limit;
        loop {
            match tokio::time::timeout_at(deadline, self.stream.next()).await {
                Err(_) => return false,
                Ok(None | Some(Err(_))) => return true,
                Ok(Some(Ok(_))) => {}
            }
        }
    }

    /// Everything the stream still sends until the server ends it, if it does within `limit`.
    pub async fn rest_within(&mut self, limit: Duration) -> Option<String> {
        use futures::StreamExt;
        let deadline = tokio::time::Instant::now() + limit;
        let mut rest = std::mem::take(&mut self.buffer);
        loop {
            match tokio::time::timeout_at(deadline, self.stream.next()).await {
                Err(_) => return None,
                Ok(None | Some(Err(_))) => return Some(rest),
                Ok(Some(Ok(chunk))) => rest.push_str(&String::from_utf8_lossy(&chunk)),
            }
        }
    }

    /// The next event's (name, data), waiting at most ten seconds.
    pub async fn next(&mut self) -> (String, Value) {
        self.next_within(Duration::from_secs(10)).await
    }

    /// The next event's (name, data), waiting at most `limit` for each piece of the stream.
    pub async fn next_within(&mut self, limit: Duration) -> (String, Value) {
        use futures::StreamExt;
        loop {
            if let Some(end) = self.buffer.find("\n\n") {
                let block: String = self.buffer.drain(..end + 2).collect();
                let name = block.lines().find_map(|l| l.strip_prefix("event: ")).map(str::to_owned);
                if let Some(id) = block.lines().find_map(|l| l.strip_prefix("id: ")) {
                    self.last_id = Some(id.to_owned());
                }
                let data: String = block.lines().filter_map(|l| l.strip_prefix("data: ")).collect();
                if let Some(name) = name {
                    return (name, serde_json::from_str(&data).unwrap());
                }
                continue; // a keep-alive comment
            }
            let chunk = tokio::time::timeout(limit, self.stream.next())
                .await
                .unwrap_or_else(|_| panic!("no event within {limit:?}"))
                .expect("the stream ended")
                .unwrap();
            self.buffer.push_str(&String::from_utf8_lossy(&chunk));
        }
    }
}
