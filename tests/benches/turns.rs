#![allow(
    clippy::unwrap_used,
    clippy::expect_used,
    clippy::print_stdout,
    reason = "a benchmark that cannot run should stop loudly; its table goes to stdout"
)]

//! `cargo xtask bench turns`: what a turn costs the server, measured from outside the release
//! binary on SQLite (data directories on /dev/shm when there is one; `LLOOMA_TEST_DB=postgres`
//! puts each server on a fresh database of `LLOOMA_TEST_PG_URL` instead), with a model that answers
//! at once (`llooma-fake-model`, TCP_NODELAY on) so that only Llooma's own work is counted. It
//! prints ONE Markdown table on stdout (progress goes to stderr):
//!
//! 1. a plain turn (no tools, a short answer in 10 deltas);
//! 2. a turn with one MCP call allowed by a rule (no card), against the Python `mcp` SDK gateway
//!    (`home-assistant-turn_on`) and against npm's server-everything (`echo`);
//! 3. a turn whose call (the gateway's `home-assistant-turn_off`, no rule) puts an approval card up,
//!    answered `allow` by the bench as soon as `/api/v1/approvals/events` shows it;
//! 4. a bot's reply: from the poll that saw a mention (the fake Chatto's clock) to the post, less
//!    the fake model's own round trip (its median, measured beside);
//! 5. 100 conversations at once, each streaming 200 deltas to a tab watching it: a first round
//!    (each conversation's first turn, reported apart), then the measured one;
//! 6. the MCP client's `tools/call` against a bare rmcp client (run by xtask through
//!    `llooma-mcp-client`'s `call_ratio` bench and handed over in `LLOOMA_BENCH_MCP_CALL*`);
//! 7. 1,000 tabs watching one conversation's turn of 200 deltas (a warm-up round, then two), and
//!    1,000 tabs each watching its own new conversation's first turn, all at once (20 deltas
//!    each, not 200, so that this one round does not dominate the bench's run time);
//!
//! 8. 10,000 tabs each holding a conversation's event stream, nothing streaming: resident memory
//!    per open stream, and what the process still holds 5 s after they all closed;
//!
//! and the server's start to ready, idle resident memory (5 s after ready: fresh, and with one
//! account's MCP server, npm's server-everything, configured) and resident memory after 110
//! turns.
//!
//! Per turn: wall time from sending `POST /messages` to reading `end` on the conversation's event
//! stream; server CPU as the sum over every thread of `/proc/PID/task/*/schedstat` (first field,
//! ns; a thread that appears counts whole, one that exits loses only its time since the last
//! read, which for tokio's blocking threads is idle time), read just before the POST and again
//! once the turn is over: after `end`, when the sum has not moved for 10 ms (over two scheduler
//! ticks on a 250 Hz kernel, and a busy thread's counter only moves at a tick or a switch), 300 ms
//! at most.
//! Rows of single turns run 10 warm-up then 50 measured turns each.
//!
//! With `LLOOMA_BIN_BASELINE` (xtask's `--baseline <rev>`), every row runs on both binaries,
//! alternating turn by turn (round by round for the loaded rows), each binary with its own
//! server, database and fake model, and the table has a column for each and their ratio.
//!
//! 9. a conversation of 2,000 messages (1,000 exchanges of about 190 bytes each way): wall time
//!    and bytes of its page (the newest 60 messages) and of its API read, first page and whole;
//!    and the bytes a turn sends the provider, the model's window 8,192 tokens (the oldest
//!    messages summarized) against a window too large to need it;
//!
//! 10. importing a ChatGPT export of 50 MB (2,000 conversations of 12 exchanges): wall time and
//!     the server's peak resident memory;
//!
//! Arguments (after `--`): the parts to run, by name (default: all): start, plain, gateway,
//! everything, bot, concurrent, fan-out, fan-out-spread, idle-tabs, media, long, import,
//! mcp-client.
//!
//! Environment: `LLOOMA_BENCH_DATA_DIR` (optional: the servers' data folders there, on a disk,
//! instead of tmpfs), `LLOOMA_BIN` (the release binary, required), `LLOOMA_BIN_BASELINE` and
//! `LLOOMA_BASELINE_REV` (optional), the MCP peers' variables (`LLOOMA_NPM_PEERS`,
//! `LLOOMA_PYTHON`); xtask sets them all. `LLOOMA_BENCH_TURNS` (optional, default 50): measured
//! turns per single-turn row, more to give a profiler enough samples.

#[path = "../e2e/support.rs"]
#[allow(dead_code, reason = "the tests' helpers, of which a benchmark uses a few")]
mod support;

use std::collections::HashMap;
use std::io::{BufRead, BufReader};
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use chrono::{DateTime, Utc};
use futures::StreamExt;
use llooma_chatto_fake::{ALL_BOT_PERMISSIONS, BotStyle, FakeChatto, SignalKind};
use llooma_fake_model::{FakeModel, Fallback, Reply};
use serde_json::{Value, json};
use support::{Events, PASSWORD, Tab};

const WARMUP: usize = 10;
/// Measured turns per single-turn row; `LLOOMA_BENCH_TURNS` sets another number (many more
/// turns give a profiler attached to the server enough samples).
const MEASURED: usize = 50;

fn measured() -> usize {
    std::env::var("LLOOMA_BENCH_TURNS").ok().and_then(|n| n.parse().ok()).unwrap_or(MEASURED)
}
/// Turns the plain row's server has run when its resident memory is read.
const RSS_AFTER_TURNS: usize = 110;
/// A plain turn's answer: a short sentence in this many deltas.
const PLAIN_DELTAS: usize = 10;
const PLAIN_TEXT: &str = "The quick brown fox jumps over the lazy dog, and then it rests.";
/// The loaded rows: conversations at once, tabs, and deltas per answer.
const CONCURRENT: usize = 100;
const TABS: usize = 1000;
const DELTAS: usize = 200;
/// Deltas per answer when 1,000 new conversations answer at once: fewer than [`DELTAS`], so
/// that this row does not dominate the bench's run time (see the row).
const SPREAD_DELTAS: usize = 20;
/// Starts per binary for start-to-ready and idle memory.
const STARTS: usize = 5;
/// How long after ready idle memory is read.
const IDLE_AFTER: Duration = Duration::from_secs(5);
/// How long the server's CPU counter must stay still for a turn to count as over, and the most
/// the bench waits for that.
const QUIET: Duration = Duration::from_millis(10);
const SETTLE_CAP: Duration = Duration::from_millis(300);
/// The bots' poll interval here (the product's default is 5 s; 1 s is the shortest setting).
const BOT_POLL: Duration = Duration::from_secs(1);
/// Warnings only, but the line with the address the harness waits for (logging every request
/// would be measured too).
const QUIET_LOG: &str = "warn,llooma::serve=info";

fn main() {
    let wanted: Vec<String> = std::env::args().skip(1).filter(|a| !a.starts_with("--")).collect();
    let runs = |part: &str| wanted.is_empty() || wanted.iter().any(|w| w == part);
    let builds = builds();
    let started = Instant::now();
    let mut lines = Vec::new();
    tokio::runtime::Builder::new_multi_thread().enable_all().build().unwrap().block_on(async {
        let parts: [(&str, Part); 12] = [
            ("start", |b| Box::pin(start_and_idle(b))),
            ("plain", |b| Box::pin(plain(b))),
            ("gateway", |b| Box::pin(gateway(b))),
            ("everything", |b| Box::pin(everything(b))),
            ("bot", |b| Box::pin(bot(b))),
            ("concurrent", |b| Box::pin(concurrent(b))),
            ("fan-out", |b| Box::pin(fan_out(b))),
            ("fan-out-spread", |b| Box::pin(fan_out_spread(b))),
            ("idle-tabs", |b| Box::pin(idle_tabs(b))),
            ("media", |b| Box::pin(media(b))),
            ("long", |b| Box::pin(long_conversation(b))),
            ("import", |b| Box::pin(import_chatgpt(b))),
        ];
        for (name, part) in parts {
            if !runs(name) {
                continue;
            }
            eprintln!(
                "\n== {name} ({})",
                builds.iter().map(|b| b.label.as_str()).collect::<Vec<_>>().join(" / ")
            );
            let taken = Instant::now();
            match tokio::spawn(part(builds.clone())).await {
                Ok(got) => {
                    for line in &got {
                        eprintln!("   {}: {}: {}", line.case, line.figure, line.shown(&builds));
                    }
                    lines.extend(got);
                }
                Err(err) => {
                    eprintln!("   {name} failed: {err}");
                    lines.push(Line::new(
                        ORDER_FAILED,
                        &format!("`{name}`"),
                        "failed (see stderr)",
                        vec![Cell::None; builds.len()],
                    ));
                }
            }
            eprintln!("   ({name}: {:.0} s)", taken.elapsed().as_secs_f64());
        }
    });
    if runs("mcp-client") {
        lines.extend(mcp_client_lines(&builds));
    }
    print_table(&builds, lines, started.elapsed());
}

type Part = fn(Vec<Build>) -> std::pin::Pin<Box<dyn Future<Output = Vec<Line>> + Send>>;

// ------------------------------------------------------------------------------------------------
// Binaries, processes, measurements

/// One binary under test.
#[derive(Clone, Debug)]
struct Build {
    label: String,
    bin: PathBuf,
}

/// The baseline first (when there is one), then the current binary.
fn builds() -> Vec<Build> {
    let current = std::env::var_os("LLOOMA_BIN")
        .expect("set LLOOMA_BIN to the release binary (cargo xtask bench turns does)");
    let mut builds = Vec::new();
    if let Some(baseline) = std::env::var_os("LLOOMA_BIN_BASELINE").filter(|v| !v.is_empty()) {
        let rev = std::env::var("LLOOMA_BASELINE_REV").unwrap_or_else(|_| "?".into());
        builds.push(Build { label: format!("baseline `{rev}`"), bin: baseline.into() });
    }
    builds.push(Build { label: "current".into(), bin: current.into() });
    builds
}

/// The order the binaries take turns in on round `i`: reversed every other round, so neither
/// always goes first.
fn order(i: usize, n: usize) -> Vec<usize> {
    if i.is_multiple_of(2) { (0..n).collect() } else { (0..n).rev().collect() }
}

/// A data directory on tmpfs when the machine has one (as the figures in the notes were taken).
/// `LLOOMA_BENCH_DATA_DIR` puts them in that folder instead: a disk, where writing the
/// database costs what it costs an instance (tmpfs hides the cost of syncing and checkpoints).
fn data_dir() -> tempfile::TempDir {
    let mut builder = tempfile::Builder::new();
    builder.prefix("llooma-bench-");
    if let Some(dir) = std::env::var_os("LLOOMA_BENCH_DATA_DIR") {
        return builder.tempdir_in(dir).unwrap();
    }
    let shm = Path::new("/dev/shm");
    if shm.is_dir() { builder.tempdir_in(shm) } else { builder.tempdir() }.unwrap()
}

fn server_command(bin: &Path, data: &Path, listen: &str, env: &[(&str, &str)]) -> Command {
    let mut command = Command::new(bin);
    command
        .env_clear()
        .env("PATH", std::env::var("PATH").unwrap_or_default())
        .env("LLOOMA_LISTEN", listen)
        .env("LLOOMA_DATA_DIR", data)
        .env("LLOOMA_LOG", QUIET_LOG)
        .envs(env.iter().copied())
        .arg("serve")
        .stdin(Stdio::null())
        .stdout(Stdio::null());
    command
}

/// A running `llooma serve` of one build on its own database; killed when dropped.
struct Proc {
    child: Child,
    base: String,
    log: Arc<Mutex<Vec<String>>>,
    _data: Option<tempfile::TempDir>,
    /// With `LLOOMA_TEST_DB=postgres`: the server's own fresh database, dropped after it stops.
    _postgres: Option<llooma_test_support::TestDatabase>,
}

impl Proc {
    /// A server on its own SQLite file, or with `LLOOMA_TEST_DB=postgres` (and
    /// `LLOOMA_TEST_PG_URL`) on a fresh Postgres database.
    fn start(build: &Build, env: &[(&str, &str)]) -> Proc {
        let data = data_dir();
        let postgres = (llooma_test_support::engine() == llooma_test_support::Engine::Postgres)
            .then(llooma_test_support::TestDatabase::new);
        let url = postgres.as_ref().and_then(llooma_test_support::TestDatabase::postgres_url);
        let mut env = env.to_vec();
        if let Some(url) = &url {
            env.push(("DATABASE_URL", url.as_str()));
        }
        let mut proc = Proc::start_in(build, data.path(), &env);
        proc._data = Some(data);
        proc._postgres = postgres;
        proc
    }

    fn start_in(build: &Build, data: &Path, env: &[(&str, &str)]) -> Proc {
        let mut child = server_command(&build.bin, data, "127.0.0.1:0", env)
            .stderr(Stdio::piped())
            .spawn()
            .unwrap_or_else(|e| panic!("starting {}: {e}", build.bin.display()));
        let stderr = child.stderr.take().unwrap();
        let log = Arc::new(Mutex::new(Vec::new()));
        let (tx, rx) = std::sync::mpsc::channel();
        let sink = log.clone();
        // Drained for the server's whole life: a full pipe would stop it.
        std::thread::spawn(move || {
            for line in BufReader::new(stderr).lines().map_while(Result::ok) {
                if let Some(rest) = line.split("listening on http://").nth(1) {
                    let _ = tx.send(rest.split(['"', ' ']).next().unwrap_or_default().to_owned());
                }
                sink.lock().unwrap().push(line);
            }
        });
        let Ok(address) = rx.recv_timeout(Duration::from_secs(30)) else {
            let _ = child.kill();
            panic!("{} did not start:\n{}", build.label, log.lock().unwrap().join("\n"));
        };
        Proc { child, base: format!("http://{address}"), log, _data: None, _postgres: None }
    }

    fn pid(&self) -> u32 {
        self.child.id()
    }

    /// SIGTERM, then waits (15 s at most, then SIGKILL).
    fn terminate(mut self) {
        terminate(&mut self.child);
    }
}

impl Drop for Proc {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
        let log = self.log.lock().unwrap();
        let panics: Vec<_> = log.iter().filter(|l| l.contains("panicked")).collect();
        if !panics.is_empty() {
            eprintln!("   the server logged a panic: {panics:?}");
        }
    }
}

fn terminate(child: &mut Child) {
    let _ = Command::new("kill").args(["-TERM", &child.id().to_string()]).status();
    let deadline = Instant::now() + Duration::from_secs(15);
    while Instant::now() < deadline {
        if let Ok(Some(_)) = child.try_wait() {
            return;
        }
        std::thread::sleep(Duration::from_millis(5));
    }
    let _ = child.kill();
    let _ = child.wait();
}

/// CPU time of every thread of a process: thread id → nanoseconds on a CPU.
#[derive(Clone, Debug, Default)]
struct CpuSnap(HashMap<u32, u64>);

impl CpuSnap {
    fn read(pid: u32) -> CpuSnap {
        let mut threads = HashMap::new();
        let Ok(dir) = std::fs::read_dir(format!("/proc/{pid}/task")) else {
            return CpuSnap(threads);
        };
        for entry in dir.flatten() {
            let Ok(tid) = entry.file_name().to_string_lossy().parse::<u32>() else { continue };
            let Ok(text) = std::fs::read_to_string(entry.path().join("schedstat")) else {
                continue; // the thread just exited
            };
            if let Some(ns) = text.split_whitespace().next().and_then(|v| v.parse().ok()) {
                threads.insert(tid, ns);
            }
        }
        CpuSnap(threads)
    }

    fn total(&self) -> u64 {
        self.0.values().sum()
    }

    /// Milliseconds of CPU since `before`, over the threads alive now.
    fn ms_since(&self, before: &CpuSnap) -> f64 {
        let ns: u64 = self
            .0
            .iter()
            .map(|(tid, now)| now.saturating_sub(before.0.get(tid).copied().unwrap_or(0)))
            .sum();
        ns as f64 / 1e6
    }
}

/// Waits until the process's CPU counter has not moved for [`QUIET`] (at most [`SETTLE_CAP`])
/// and returns the reading.
async fn settle(pid: u32) -> CpuSnap {
    let started = Instant::now();
    let mut last = CpuSnap::read(pid);
    let mut still_since = Instant::now();
    loop {
        tokio::time::sleep(Duration::from_millis(1)).await;
        let now = CpuSnap::read(pid);
        if now.total() != last.total() {
            still_since = Instant::now();
        }
        last = now;
        if still_since.elapsed() >= QUIET || started.elapsed() >= SETTLE_CAP {
            return last;
        }
    }
}

fn resident_mib(pid: u32) -> f64 {
    let status = std::fs::read_to_string(format!("/proc/{pid}/status")).unwrap();
    let kib: f64 = status
        .lines()
        .find_map(|l| l.strip_prefix("VmRSS:"))
        .and_then(|v| v.trim().trim_end_matches("kB").trim().parse().ok())
        .unwrap();
    kib / 1024.0
}

fn ms(d: Duration) -> f64 {
    d.as_secs_f64() * 1000.0
}

/// The `p` quantile (0..=1) by linear interpolation; NaN for no samples.
fn quantile(samples: &[f64], p: f64) -> f64 {
    let mut sorted = samples.to_vec();
    sorted.retain(|v| v.is_finite());
    if sorted.is_empty() {
        return f64::NAN;
    }
    sorted.sort_by(f64::total_cmp);
    let at = (sorted.len() - 1) as f64 * p;
    let (lo, hi) = (at.floor() as usize, at.ceil() as usize);
    sorted[lo] + (sorted[hi] - sorted[lo]) * (at - lo as f64)
}

// ------------------------------------------------------------------------------------------------
// The table

/// Where a case sits in the table (the parts run in another order).
const ORDER_PLAIN: u32 = 10;
const ORDER_GATEWAY: u32 = 20;
const ORDER_EVERYTHING: u32 = 21;
const ORDER_CARD: u32 = 30;
const ORDER_BOT: u32 = 40;
const ORDER_CONCURRENT: u32 = 50;
const ORDER_MCP_CLIENT: u32 = 60;
const ORDER_FAN_OUT: u32 = 70;
const ORDER_FAN_OUT_SPREAD: u32 = 71;
const ORDER_IDLE_TABS: u32 = 75;
const ORDER_MEDIA: u32 = 77;
const ORDER_LONG: u32 = 78;
const ORDER_IMPORT: u32 = 79;
const ORDER_SERVER: u32 = 80;
const ORDER_FAILED: u32 = 90;

#[derive(Clone, Debug)]
enum Cell {
    Ms(f64),
    Us(f64),
    Mib(f64),
    Kib(f64),
    PerSec(f64),
    Ratio(f64),
    Text(String),
    None,
}

impl Cell {
    fn number(&self) -> Option<f64> {
        match self {
            Cell::Ms(v)
            | Cell::Us(v)
            | Cell::Mib(v)
            | Cell::Kib(v)
            | Cell::PerSec(v)
            | Cell::Ratio(v)
                if v.is_finite() =>
            {
                Some(*v)
            }
            _ => None,
        }
    }

    fn show(&self) -> String {
        let n = |v: f64| {
            if v.abs() >= 100.0 {
                format!("{v:.0}")
            } else if v.abs() >= 10.0 {
                format!("{v:.1}")
            } else {
                format!("{v:.2}")
            }
        };
        match (self, self.number()) {
            (Cell::Text(t), _) => t.clone(),
            (Cell::Ms(_), Some(v)) if v >= 10_000.0 => format!("{:.1} s", v / 1000.0),
            (Cell::Ms(_), Some(v)) => format!("{} ms", n(v)),
            (Cell::Us(_), Some(v)) => format!("{v:.0} µs"),
            (Cell::Mib(_), Some(v)) => format!("{v:.1} MiB"),
            (Cell::Kib(_), Some(v)) => format!("{v:.1} KiB"),
            (Cell::PerSec(_), Some(v)) => format!("{v:.1}/s"),
            (Cell::Ratio(_), Some(v)) => format!("{v:.2}"),
            _ => "–".into(),
        }
    }
}

#[derive(Clone, Debug)]
struct Line {
    order: u32,
    case: String,
    figure: String,
    /// One per build, in the order of [`builds`].
    cells: Vec<Cell>,
}

impl Line {
    fn new(order: u32, case: &str, figure: &str, cells: Vec<Cell>) -> Line {
        Line { order, case: case.to_owned(), figure: figure.to_owned(), cells }
    }

    fn shown(&self, builds: &[Build]) -> String {
        builds
            .iter()
            .zip(&self.cells)
            .map(|(b, c)| format!("{} {}", b.label, c.show()))
            .collect::<Vec<_>>()
            .join(", ")
    }
}

/// Lines for the same figure of every build: `f` makes the cell of one build.
fn line(order: u32, case: &str, figure: &str, n: usize, f: impl Fn(usize) -> Cell) -> Line {
    Line::new(order, case, figure, (0..n).map(f).collect())
}

/// p50 and p90 of wall time and of server CPU, per build, from (wall ms, cpu ms) samples.
fn turn_lines(order: u32, case: &str, samples: &[Vec<(f64, f64)>], what: &str) -> Vec<Line> {
    let n = samples.len();
    let walls: Vec<Vec<f64>> = samples.iter().map(|s| s.iter().map(|x| x.0).collect()).collect();
    let cpus: Vec<Vec<f64>> = samples.iter().map(|s| s.iter().map(|x| x.1).collect()).collect();
    let count = samples.first().map_or(0, Vec::len);
    vec![
        line(order, case, &format!("wall, {what}, p50 (n={count})"), n, |b| {
            Cell::Ms(quantile(&walls[b], 0.5))
        }),
        line(order, case, &format!("wall, {what}, p90"), n, |b| Cell::Ms(quantile(&walls[b], 0.9))),
        line(order, case, &format!("wall, {what}, p99"), n, |b| {
            Cell::Ms(quantile(&walls[b], 0.99))
        }),
        line(order, case, "server CPU per turn, p50", n, |b| Cell::Ms(quantile(&cpus[b], 0.5))),
        line(order, case, "server CPU per turn, p90", n, |b| Cell::Ms(quantile(&cpus[b], 0.9))),
    ]
}

fn skipped(order: u32, case: &str, why: &str, n: usize) -> Vec<Line> {
    vec![line(order, case, why, n, |_| Cell::None)]
}

fn print_table(builds: &[Build], mut lines: Vec<Line>, took: Duration) {
    lines.sort_by_key(|l| l.order);
    let mut out = String::new();
    out.push_str(&format!(
        "\n`cargo xtask bench turns`: release binaries on {}, zero-latency fake \
         model, {} cores; wall and server CPU per turn unless said; {} measured turns \
         after {WARMUP} warm-up per single-turn row{}; took {:.0} s.\n\n",
        match llooma_test_support::engine() {
            llooma_test_support::Engine::Postgres => "Postgres (LLOOMA_TEST_DB=postgres)",
            llooma_test_support::Engine::Sqlite => "SQLite (tmpfs)",
        },
        std::thread::available_parallelism().map_or(0, |n| n.get()),
        measured(),
        if builds.len() > 1 { ", the binaries alternating" } else { "" },
        took.as_secs_f64()
    ));
    let mut header = String::from("| case | figure |");
    let mut rule = String::from("|---|---|");
    for b in builds {
        header.push_str(&format!(" {} |", b.label));
        rule.push_str("---:|");
    }
    if builds.len() == 2 {
        header.push_str(" current ÷ baseline |");
        rule.push_str("---:|");
    }
    out.push_str(&header);
    out.push('\n');
    out.push_str(&rule);
    out.push('\n');
    let mut previous_case = String::new();
    for l in &lines {
        let case = if l.case == previous_case { String::new() } else { l.case.clone() };
        previous_case = l.case.clone();
        out.push_str(&format!("| {case} | {} |", l.figure));
        for c in &l.cells {
            out.push_str(&format!(" {} |", c.show()));
        }
        if builds.len() == 2 {
            let ratio = match (l.cells[0].number(), l.cells[1].number()) {
                (Some(b), Some(c)) if b != 0.0 => format!("{:.2}", c / b),
                _ => String::new(),
            };
            out.push_str(&format!(" {ratio} |"));
        }
        out.push('\n');
    }
    println!("{out}");
}

// ------------------------------------------------------------------------------------------------
// A server with an administrator and the fake model

struct Rig {
    proc: Proc,
    model: FakeModel,
    tab: Tab,
    provider: String,
    /// The approval cards' stream, for a row that answers cards.
    cards: Option<Events>,
}

impl Rig {
    async fn start(build: &Build, env: &[(&str, &str)], fallback: Fallback) -> Rig {
        let model =
            FakeModel::builder().log_requests(false).fallback(fallback).start().await.unwrap();
        let origin = model.origin();
        let mut all = vec![("PROVIDER_ALLOWED_ORIGINS", origin.as_str())];
        all.extend_from_slice(env);
        let proc = Proc::start(build, &all);
        let mut tab = Tab::new(&proc.base);
        let registered = tab.register("root", PASSWORD).await;
        assert_eq!(registered.status, 201, "{registered:?}");
        let provider = tab
            .post("/api/v1/admin/providers", json!({"name": "fake", "baseUrl": model.base_url()}))
            .await;
        assert_eq!(provider.status, 201, "{provider:?}");
        let provider = provider.json["id"].as_str().unwrap().to_owned();
        Rig { proc, model, tab, provider, cards: None }
    }

    /// Another tab of the same person.
    fn tab(&self) -> Tab {
        same_person(&self.tab)
    }

    async fn conversation(&mut self, mcp: bool) -> String {
        let created = self
            .tab
            .post(
                "/api/v1/conversations",
                json!({"title": "Bench", "providerId": self.provider, "model": "fake-model"}),
            )
            .await;
        assert_eq!(created.status, 201, "{created:?}");
        let id = created.json["id"].as_str().unwrap().to_owned();
        if mcp {
            let patched = self
                .tab
                .send(
                    "PATCH",
                    &format!("/api/v1/conversations/{id}"),
                    Some(json!({"mcpEnabled": true})),
                )
                .await;
            assert_eq!(patched.status, 200, "{patched:?}");
        }
        id
    }

    /// Adds an MCP server; returns its id and its tools' model-facing names by tool name.
    async fn add_mcp(&mut self, label: &str, url: &str) -> (String, HashMap<String, String>) {
        let added =
            self.tab.post("/api/v1/mcp/servers", json!({"label": label, "address": url})).await;
        assert_eq!(added.status, 201, "{added:?}");
        let names = added.json["tools"]
            .as_array()
            .unwrap()
            .iter()
            .map(|t| {
                (
                    t["name"].as_str().unwrap().to_owned(),
                    t["modelName"].as_str().unwrap().to_owned(),
                )
            })
            .collect();
        (added.json["server"]["id"].as_str().unwrap().to_owned(), names)
    }

    /// Permission mode "rules" and a rule allowing `tool` with any value of `argument`.
    async fn allow(&mut self, server_id: &str, tool: &str, argument: &str) {
        let mode = self.tab.send("PATCH", "/api/v1/consent", Some(json!({"mode": "rules"}))).await;
        assert_eq!(mode.status, 200, "{mode:?}");
        let rule = self
            .tab
            .post(
                "/api/v1/consent/rules",
                json!({"serverId": server_id, "tool": tool, "arguments": {argument: "any"}}),
            )
            .await;
        assert_eq!(rule.status, 201, "{rule:?}");
    }

    async fn open_cards(&mut self) {
        let mut cards = Events::open(&self.tab, "/api/v1/approvals/events", None).await;
        assert_eq!(cards.next().await.0, "pending");
        self.cards = Some(cards);
    }
}

/// Another tab of the same person: the same session, its own connections.
fn same_person(tab: &Tab) -> Tab {
    Tab {
        base: tab.base.clone(),
        http: tab.http.clone(),
        cookie: tab.cookie.clone(),
        csrf: tab.csrf.clone(),
        origin: tab.origin.clone(),
    }
}

/// What a measured turn does.
#[derive(Clone, Debug)]
enum Kind {
    Plain,
    /// The model calls this tool (allowed without a card), then answers.
    Tool {
        name: String,
        arguments: Value,
    },
    /// The model calls this tool, a card goes up, the bench answers `allow`.
    Card {
        name: String,
        arguments: Value,
    },
}

/// One conversation with a tab watching it.
struct Conv {
    id: String,
    events: Events,
    kind: Kind,
}

impl Conv {
    async fn open(rig: &mut Rig, kind: Kind) -> Conv {
        let id = rig.conversation(!matches!(kind, Kind::Plain)).await;
        let events =
            Events::open(&rig.tab, &format!("/api/v1/conversations/{id}/events"), None).await;
        Conv { id, events, kind }
    }
}

/// Reads events until `end`: (its data, the steps, the text).
async fn until_end(events: &mut Events, limit: Duration) -> (Value, Vec<Value>, String) {
    let mut steps = Vec::new();
    let mut text = String::new();
    loop {
        let (name, data) = events.next_within(limit).await;
        match name.as_str() {
            "end" => return (data, steps, text),
            "step" => steps.push(data),
            "text" => text.push_str(data["delta"].as_str().unwrap_or_default()),
            _ => {}
        }
    }
}

/// One turn: (wall ms from the POST to `end`, server CPU ms).
async fn one_turn(rig: &mut Rig, conv: &mut Conv) -> (f64, f64) {
    match &conv.kind {
        Kind::Plain => rig.model.push(Reply::text(PLAIN_TEXT).chunks(PLAIN_DELTAS)),
        Kind::Tool { name, arguments } | Kind::Card { name, arguments } => {
            rig.model.push(Reply::tool_call(name, arguments.clone()));
            rig.model.push(Reply::text("Done, the light is on."));
        }
    }
    let pid = rig.proc.pid();
    let before = CpuSnap::read(pid);
    let started = Instant::now();
    let sent = rig
        .tab
        .post(&format!("/api/v1/conversations/{}/messages", conv.id), json!({"content": "go"}))
        .await;
    assert_eq!(sent.status, 202, "{sent:?}");
    if matches!(conv.kind, Kind::Card { .. }) {
        let cards = rig.cards.as_mut().expect("the cards' stream");
        let card = loop {
            let (name, data) = cards.next().await;
            if name == "appeared" {
                break data["card"]["id"].as_str().unwrap().to_owned();
            }
        };
        let answered = rig
            .tab
            .post(&format!("/api/v1/approvals/{card}/answer"), json!({"choice": "allow"}))
            .await;
        assert_eq!(answered.status, 200, "{answered:?}");
    }
    let (end, steps, _) = until_end(&mut conv.events, Duration::from_secs(10)).await;
    let wall = started.elapsed();
    assert_eq!(end["state"], "done", "{end}");
    if !matches!(conv.kind, Kind::Plain) {
        let step = steps.last().expect("the tool call's step");
        assert_eq!(step["state"], "allowed", "the tool call did not go through: {step}");
    }
    let after = settle(pid).await;
    (ms(wall), after.ms_since(&before))
}

/// Runs `WARMUP + measured()` rounds; in each, every (rig, conversation) pair of every build has one
/// turn, the builds alternating. Returns the samples per pair, per build.
async fn alternate(
    rigs: &mut [Rig],
    convs: &mut [Vec<Conv>],
    rounds: usize,
) -> Vec<Vec<Vec<(f64, f64)>>> {
    let n = rigs.len();
    let per = convs[0].len();
    let mut samples = vec![vec![Vec::new(); n]; per];
    for i in 0..rounds {
        for b in order(i, n) {
            for (c, conv) in convs[b].iter_mut().enumerate() {
                let sample = one_turn(&mut rigs[b], conv).await;
                if i >= WARMUP {
                    samples[c][b].push(sample);
                }
            }
        }
    }
    samples
}

// ------------------------------------------------------------------------------------------------
// The parts

async fn start_and_idle(builds: Vec<Build>) -> Vec<Line> {
    let n = builds.len();
    let case = "server";
    // An existing database with an account, as a restart finds it.
    let mut dirs = Vec::new();
    for build in &builds {
        let dir = data_dir();
        let proc = Proc::start_in(build, dir.path(), &[]);
        let mut tab = Tab::new(&proc.base);
        assert_eq!(tab.register("root", PASSWORD).await.status, 201);
        proc.terminate();
        dirs.push(dir);
    }
    let http = reqwest::Client::builder().no_proxy().build().unwrap();
    let mut ready = vec![Vec::new(); n];
    let mut idle = vec![Vec::new(); n];
    for i in 0..STARTS {
        for b in order(i, n) {
            let port = llooma_test_support::peers::free_port();
            let started = Instant::now();
            let mut child =
                server_command(&builds[b].bin, dirs[b].path(), &format!("127.0.0.1:{port}"), &[])
                    .stderr(Stdio::null())
                    .spawn()
                    .unwrap();
            let url = format!("http://127.0.0.1:{port}/readyz");
            loop {
                if http.get(&url).send().await.is_ok_and(|r| r.status() == 200) {
                    break;
                }
                assert!(started.elapsed() < Duration::from_secs(30), "not ready within 30 s");
                tokio::time::sleep(Duration::from_millis(1)).await;
            }
            ready[b].push(ms(started.elapsed()));
            tokio::time::sleep(IDLE_AFTER).await;
            idle[b].push(resident_mib(child.id()));
            terminate(&mut child);
        }
    }
    vec![
        line(
            ORDER_SERVER,
            case,
            &format!("start to ready (spawn → `/readyz` 200, existing database), p50 of {STARTS}"),
            n,
            |b| Cell::Ms(quantile(&ready[b], 0.5)),
        ),
        line(ORDER_SERVER, case, "idle resident memory, 5 s after ready, p50", n, |b| {
            Cell::Mib(quantile(&idle[b], 0.5))
        }),
    ]
    .into_iter()
    .chain(idle_with_mcp_server(&builds).await)
    .collect()
}

/// Idle resident memory of a server whose one account has one MCP server (npm's
/// server-everything) configured, 5 s after a restart, nobody asking anything.
async fn idle_with_mcp_server(builds: &[Build]) -> Vec<Line> {
    let n = builds.len();
    let case = "server";
    let figure = "idle resident memory, one MCP server configured, 5 s after ready, p50";
    let Some(peer) = llooma_test_support::peers::everything() else {
        return skipped(ORDER_SERVER, case, "server-everything is not installed", n);
    };
    let mut dirs = Vec::new();
    for build in builds {
        let dir = data_dir();
        let env = [("MCP_ALLOWED_ORIGINS", peer.origin())];
        let env: Vec<(&str, &str)> = env.iter().map(|(k, v)| (*k, v.as_str())).collect();
        let proc = Proc::start_in(build, dir.path(), &env);
        let mut tab = Tab::new(&proc.base);
        assert_eq!(tab.register("root", PASSWORD).await.status, 201);
        let added = tab
            .post("/api/v1/mcp/servers", json!({"label": "everything", "address": peer.url()}))
            .await;
        assert_eq!(added.status, 201, "{added:?}");
        proc.terminate();
        dirs.push(dir);
    }
    let mut idle = vec![Vec::new(); n];
    for i in 0..STARTS {
        for b in order(i, n) {
            let env = [("MCP_ALLOWED_ORIGINS", peer.origin())];
            let env: Vec<(&str, &str)> = env.iter().map(|(k, v)| (*k, v.as_str())).collect();
            let proc = Proc::start_in(&builds[b], dirs[b].path(), &env);
            tokio::time::sleep(IDLE_AFTER).await;
            idle[b].push(resident_mib(proc.pid()));
            proc.terminate();
        }
    }
    vec![line(ORDER_SERVER, case, figure, n, |b| Cell::Mib(quantile(&idle[b], 0.5)))]
}

/// Streams open at once in the idle-tabs row.
const IDLE_TABS: usize = 10_000;

/// 10,000 tabs each holding the event stream of a conversation, nothing streaming: what each
/// costs the server, and whether the memory comes back once they all closed.
async fn idle_tabs(builds: Vec<Build>) -> Vec<Line> {
    let n = builds.len();
    let case = format!("8. {IDLE_TABS} idle tabs, each holding a conversation's event stream");
    raise_own_open_files(IDLE_TABS as u64 + 1000);
    let mut per_stream = vec![0.0; n];
    let mut held = vec![0.0; n];
    let mut before = vec![0.0; n];
    let mut after_close = vec![0.0; n];
    for b in 0..n {
        let mut rig = Rig::start(&builds[b], &[], Fallback::Error).await;
        let id = rig.conversation(false).await;
        let pid = rig.proc.pid();
        let address = rig.proc.base.trim_start_matches("http://").to_owned();
        let cookie = rig.tab.cookie.clone().unwrap();
        let head = format!(
            "GET /api/v1/conversations/{id}/events HTTP/1.1\r\nhost: {address}\r\n\
             cookie: llooma_session={cookie}\r\n\r\n"
        );
        // A first crowd, closed again: what a process keeps after its first use is not the
        // streams' cost.
        drop(open_idle_streams(&address, &head, 500).await);
        tokio::time::sleep(Duration::from_secs(2)).await;
        before[b] = resident_mib(pid);
        let streams = open_idle_streams(&address, &head, IDLE_TABS).await;
        tokio::time::sleep(Duration::from_secs(2)).await;
        held[b] = resident_mib(pid);
        per_stream[b] = (held[b] - before[b]) * 1024.0 / IDLE_TABS as f64;
        drop(streams);
        tokio::time::sleep(Duration::from_secs(5)).await;
        after_close[b] = resident_mib(pid);
        drop(rig);
    }
    vec![
        line(ORDER_IDLE_TABS, &case, "resident memory before the tabs open", n, |b| {
            Cell::Mib(before[b])
        }),
        line(ORDER_IDLE_TABS, &case, &format!("resident memory with {IDLE_TABS} open"), n, |b| {
            Cell::Mib(held[b])
        }),
        line(ORDER_IDLE_TABS, &case, "resident memory per open stream", n, |b| {
            Cell::Kib(per_stream[b])
        }),
        line(ORDER_IDLE_TABS, &case, "resident memory 5 s after all closed", n, |b| {
            Cell::Mib(after_close[b])
        }),
    ]
}

/// `count` connections that each sent `head` and read the response's head (an event stream
/// now open), kept open by the caller.
async fn open_idle_streams(address: &str, head: &str, count: usize) -> Vec<tokio::net::TcpStream> {
    use tokio::io::{AsyncReadExt, AsyncWriteExt};
    let opening = (0..count).map(|_| async move {
        let mut stream = tokio::net::TcpStream::connect(address).await.unwrap();
        stream.write_all(head.as_bytes()).await.unwrap();
        let mut seen = Vec::new();
        let mut buffer = [0u8; 1024];
        while !seen.windows(4).any(|w| w == b"\r\n\r\n") {
            let read = stream.read(&mut buffer).await.unwrap();
            assert!(read > 0, "the server closed an event stream as it opened");
            seen.extend_from_slice(&buffer[..read]);
        }
        assert!(seen.starts_with(b"HTTP/1.1 200"), "{}", String::from_utf8_lossy(&seen));
        stream
    });
    futures::stream::iter(opening).buffer_unordered(64).collect().await
}

/// Raises this process's soft limit on open files to at least `needed` (through `prlimit`,
/// as the bench may not use `unsafe`); the hard limit stays.
fn raise_own_open_files(needed: u64) {
    let status = Command::new("prlimit")
        .arg(format!("--pid={}", std::process::id()))
        .arg(format!("--nofile={needed}:"))
        .status();
    assert!(status.is_ok_and(|s| s.success()), "could not raise the open-files limit to {needed}");
}

async fn plain(builds: Vec<Build>) -> Vec<Line> {
    let n = builds.len();
    let mut rigs = Vec::new();
    let mut convs = Vec::new();
    for build in &builds {
        let mut rig = Rig::start(build, &[], Fallback::Error).await;
        convs.push(vec![Conv::open(&mut rig, Kind::Plain).await]);
        rigs.push(rig);
    }
    let samples = alternate(&mut rigs, &mut convs, WARMUP + measured()).await;
    // More turns, unmeasured, until the server has run RSS_AFTER_TURNS (at least).
    for i in 0..RSS_AFTER_TURNS.saturating_sub(WARMUP + measured()) {
        for b in order(i, n) {
            one_turn(&mut rigs[b], &mut convs[b][0]).await;
        }
    }
    let rss: Vec<f64> = rigs.iter().map(|r| resident_mib(r.proc.pid())).collect();
    let case = format!("1. plain turn (no tools, {PLAIN_DELTAS} deltas)");
    let mut lines = turn_lines(ORDER_PLAIN, &case, &samples[0], "POST → `end`");
    lines.push(line(
        ORDER_SERVER + 1,
        "server",
        &format!("resident memory after {RSS_AFTER_TURNS} plain turns"),
        n,
        |b| Cell::Mib(rss[b]),
    ));
    lines
}

async fn gateway(builds: Vec<Build>) -> Vec<Line> {
    let n = builds.len();
    let mcp_case = "2. one MCP call, Python `mcp` SDK (gateway peer), allowed by a rule";
    let card_case = "3. one MCP call put on an approval card, answered `allow` by the client";
    let Some(peer) = llooma_test_support::peers::gateway(None) else {
        let mut lines = skipped(ORDER_GATEWAY, mcp_case, "skipped: LLOOMA_PYTHON not set", n);
        lines.extend(skipped(ORDER_CARD, card_case, "skipped: LLOOMA_PYTHON not set", n));
        return lines;
    };
    let mut rigs = Vec::new();
    let mut convs = Vec::new();
    for build in &builds {
        let origin = peer.origin();
        let mut rig = Rig::start(build, &[("MCP_ALLOWED_ORIGINS", &origin)], Fallback::Error).await;
        let (server, names) = rig.add_mcp("hub", &peer.url()).await;
        rig.allow(&server, "home-assistant-turn_on", "entity_id").await;
        rig.open_cards().await;
        let arguments = json!({"entity_id": "light.bench"});
        let allowed = Kind::Tool {
            name: names["home-assistant-turn_on"].clone(),
            arguments: arguments.clone(),
        };
        let carded = Kind::Card { name: names["home-assistant-turn_off"].clone(), arguments };
        convs.push(vec![Conv::open(&mut rig, allowed).await, Conv::open(&mut rig, carded).await]);
        rigs.push(rig);
    }
    let samples = alternate(&mut rigs, &mut convs, WARMUP + measured()).await;
    let mut lines = turn_lines(ORDER_GATEWAY, mcp_case, &samples[0], "POST → `end`");
    lines.extend(turn_lines(
        ORDER_CARD,
        card_case,
        &samples[1],
        "POST → `end`, the answer included",
    ));
    lines
}

async fn everything(builds: Vec<Build>) -> Vec<Line> {
    let n = builds.len();
    let case = "2. one MCP call, npm server-everything (`echo`), allowed by a rule";
    let Some(peer) = llooma_test_support::peers::everything() else {
        return skipped(ORDER_EVERYTHING, case, "skipped: LLOOMA_NPM_PEERS not set", n);
    };
    let mut rigs = Vec::new();
    let mut convs = Vec::new();
    for build in &builds {
        let origin = peer.origin();
        let mut rig = Rig::start(build, &[("MCP_ALLOWED_ORIGINS", &origin)], Fallback::Error).await;
        let (server, names) = rig.add_mcp("everything", &peer.url()).await;
        rig.allow(&server, "echo", "message").await;
        let kind =
            Kind::Tool { name: names["echo"].clone(), arguments: json!({"message": "bench"}) };
        convs.push(vec![Conv::open(&mut rig, kind).await]);
        rigs.push(rig);
    }
    let samples = alternate(&mut rigs, &mut convs, WARMUP + measured()).await;
    turn_lines(ORDER_EVERYTHING, case, &samples[0], "POST → `end`")
}

/// The fake model's own round trip for a short streamed answer, median of 30.
async fn model_round_trip_ms(model: &FakeModel) -> f64 {
    let http = reqwest::Client::builder().no_proxy().build().unwrap();
    let mut times = Vec::new();
    for _ in 0..30 {
        let started = Instant::now();
        let body = json!({"model": "fake-model", "stream": true,
            "messages": [{"role": "user", "content": "Ann Lee (@ann): @bot question"}]});
        let response = http
            .post(format!("{}/chat/completions", model.base_url()))
            .json(&body)
            .send()
            .await
            .unwrap();
        assert_eq!(response.status(), 200);
        let body = response.bytes().await.unwrap();
        times.push(ms(started.elapsed()));
        assert!(
            String::from_utf8_lossy(&body).contains("[DONE]"),
            "the fake model's answer ended early"
        );
    }
    quantile(&times, 0.5)
}

fn chrono_ms(d: chrono::TimeDelta) -> f64 {
    d.num_microseconds().unwrap_or(0) as f64 / 1000.0
}

async fn bot(builds: Vec<Build>) -> Vec<Line> {
    let n = builds.len();
    let chat = FakeChatto::start().await.unwrap();
    let ann = chat.add_person("ann", "Ann Lee");
    let chat_origin = chat.origin();
    let mut rigs = Vec::new();
    let mut bots = Vec::new();
    for (b, build) in builds.iter().enumerate() {
        let rig = Rig::start(
            build,
            &[("BOT_ALLOWED_ORIGINS", &chat_origin), ("LLOOMA_BOT_POLL_SECS", "1")],
            Fallback::Echo { chunk_delay_ms: 0 },
        )
        .await;
        let login = format!("bot{b}");
        let fake =
            chat.add_bot(&login, &format!("Bot {b}"), BotStyle::IsBotFlag, &ALL_BOT_PERMISSIONS);
        let room = chat.add_channel(&format!("room{b}"), &[&fake.id, &ann]);
        let mut tab = rig.tab();
        let added = tab
            .post(
                "/api/v1/bots",
                json!({"address": chat_origin, "apiKey": fake.key, "providerId": rig.provider,
                       "model": "fake-model", "context": {"mode": "calling_message"}}),
            )
            .await;
        assert_eq!(added.status, 201, "{added:?}");
        bots.push((login, fake.id, room));
        rigs.push(rig);
    }
    // Every poller has started.
    let deadline = Instant::now() + Duration::from_secs(30);
    while bots.iter().any(|(_, id, _)| chat.list_times(id).len() < 2) {
        assert!(Instant::now() < deadline, "the bots did not start polling");
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
    let model_ms: Vec<f64> = {
        let mut v = Vec::new();
        let models: Vec<&FakeModel> = rigs.iter().map(|r| &r.model).collect();
        for model in models {
            v.push(model_round_trip_ms(model).await);
        }
        v
    };
    let mut overhead = vec![Vec::new(); n];
    let mut cpu = vec![Vec::new(); n];
    let poll = chrono::TimeDelta::from_std(BOT_POLL).unwrap();
    for i in 0..WARMUP + measured() {
        for b in order(i, n) {
            let (login, bot_id, room) = &bots[b];
            let pid = rigs[b].proc.pid();
            // Mention just before the next poll is due, so the bench does not wait a whole
            // interval for each (the wait is not measured either way).
            let last = *chat.list_times(bot_id).last().unwrap();
            let mut next = last + poll;
            while next - Utc::now() < chrono::TimeDelta::milliseconds(40) {
                next += poll;
            }
            let lead = (next - Utc::now() - chrono::TimeDelta::milliseconds(25))
                .to_std()
                .unwrap_or_default();
            tokio::time::sleep(lead).await;
            let before = CpuSnap::read(pid);
            let at: DateTime<Utc> = Utc::now();
            let event = chat.post(room, &ann, &format!("@{login} question {i}"), at);
            chat.notify(bot_id, SignalKind::DirectMentionReceived, room, &event, at);
            let deadline = Instant::now() + Duration::from_secs(15);
            let posted = loop {
                let calls = chat.create_message_calls();
                if let Some(call) = calls
                    .iter()
                    .find(|c| c.in_reply_to.as_deref() == Some(&event) && c.refused.is_none())
                {
                    break call.at;
                }
                assert!(Instant::now() < deadline, "bot {b} did not answer mention {i}");
                tokio::time::sleep(Duration::from_millis(1)).await;
            };
            let after = settle(pid).await;
            let picked = chat.list_times(bot_id).into_iter().find(|t| *t >= at).unwrap();
            if i >= WARMUP {
                overhead[b].push(chrono_ms(posted - picked) - model_ms[b]);
                cpu[b].push(after.ms_since(&before));
            }
        }
    }
    let case = "4. bot reply (Chatto fake, polled every 1 s)";
    vec![
        line(
            ORDER_BOT,
            case,
            &format!(
                "poll that saw the mention → post, model round trip subtracted, p50 (n={})",
                measured()
            ),
            n,
            |b| Cell::Ms(quantile(&overhead[b], 0.5)),
        ),
        line(ORDER_BOT, case, "poll → post, model subtracted, p90", n, |b| {
            Cell::Ms(quantile(&overhead[b], 0.9))
        }),
        line(ORDER_BOT, case, "server CPU per reply (its poll included), p50", n, |b| {
            Cell::Ms(quantile(&cpu[b], 0.5))
        }),
        line(ORDER_BOT, case, "server CPU per reply, p90", n, |b| Cell::Ms(quantile(&cpu[b], 0.9))),
        line(ORDER_BOT, case, "fake model round trip subtracted (p50 of 30)", n, |b| {
            Cell::Ms(model_ms[b])
        }),
    ]
}

/// What a loaded round measured.
#[derive(Debug, Default, Clone)]
struct Round {
    /// From the first POST until every tab saw its `end`.
    total_ms: f64,
    /// Per turn: its POST → its tab's `end`.
    walls: Vec<f64>,
    cpu_ms: f64,
    rss_mib: f64,
    all_received: bool,
}

/// What a loaded round needs of a rig (all `Sync`, unlike the rig's event streams).
#[derive(Clone, Copy)]
struct Loaded<'a> {
    model: &'a FakeModel,
    person: &'a Tab,
    pid: u32,
}

impl Loaded<'_> {
    fn of(rig: &Rig) -> Loaded<'_> {
        Loaded { model: &rig.model, person: &rig.tab, pid: rig.proc.pid() }
    }
}

fn long_answer(deltas: usize) -> String {
    "word ".repeat(deltas)
}

/// Opens one event stream per conversation id (`ids` may repeat one id), each on its own
/// connection.
async fn open_tabs(person: &Tab, ids: &[String]) -> Vec<Events> {
    let opening: Vec<_> = ids
        .iter()
        .map(|id| {
            let tab = same_person(person);
            let path = format!("/api/v1/conversations/{id}/events");
            async move { Events::open(&tab, &path, None).await }
        })
        .collect();
    futures::stream::iter(opening).buffered(32).collect().await
}

/// Reads one tab's stream until `end`: whether it got the whole answer.
async fn watch(mut events: Events, expected: Arc<String>) -> (Events, bool, Instant) {
    let (end, _, text) = until_end(&mut events, Duration::from_secs(120)).await;
    let ok = end["state"] == "done" && text.trim() == expected.trim();
    (events, ok, Instant::now())
}

/// One turn in each of `conversations` at once, each watched by one tab.
async fn spread_round(on: Loaded<'_>, conversations: &[String], deltas: usize) -> Round {
    let Loaded { model, person, pid } = on;
    let tabs = open_tabs(person, conversations).await;
    let expected = Arc::new(long_answer(deltas));
    for _ in conversations {
        model.push(Reply::text(long_answer(deltas)).chunks(deltas));
    }
    let before = settle(pid).await;
    let started = Instant::now();
    let turns: Vec<_> = conversations
        .iter()
        .zip(tabs)
        .map(|(id, events)| {
            let mut tab = same_person(person);
            let path = format!("/api/v1/conversations/{id}/messages");
            let expected = expected.clone();
            tokio::spawn(async move {
                let posted = Instant::now();
                let sent = tab.post(&path, json!({"content": "go"})).await;
                assert_eq!(sent.status, 202, "{sent:?}");
                let (events, ok, ended) = watch(events, expected).await;
                (events, ok, ms(ended - posted))
            })
        })
        .collect();
    let mut kept = Vec::new();
    let mut round = Round { all_received: true, ..Round::default() };
    for turn in turns {
        let (events, ok, wall) = turn.await.unwrap();
        round.all_received &= ok;
        round.walls.push(wall);
        kept.push(events);
    }
    round.total_ms = ms(started.elapsed());
    round.cpu_ms = settle(pid).await.ms_since(&before);
    round.rss_mib = resident_mib(pid);
    drop(kept);
    round
}

/// One turn in one conversation watched by `TABS` tabs.
async fn fan_out_round(on: Loaded<'_>, conversation: &str) -> Round {
    let Loaded { model, person, pid } = on;
    let ids = vec![conversation.to_owned(); TABS];
    let tabs = open_tabs(person, &ids).await;
    let expected = Arc::new(long_answer(DELTAS));
    model.push(Reply::text(long_answer(DELTAS)).chunks(DELTAS));
    let before = settle(pid).await;
    let started = Instant::now();
    let mut tab = same_person(person);
    let watchers: Vec<_> =
        tabs.into_iter().map(|events| tokio::spawn(watch(events, expected.clone()))).collect();
    let sent = tab
        .post(&format!("/api/v1/conversations/{conversation}/messages"), json!({"content": "go"}))
        .await;
    assert_eq!(sent.status, 202, "{sent:?}");
    let mut kept = Vec::new();
    let mut round = Round { all_received: true, ..Round::default() };
    for watcher in watchers {
        let (events, ok, ended) = watcher.await.unwrap();
        round.all_received &= ok;
        round.walls.push(ms(ended - started));
        kept.push(events);
    }
    round.total_ms = ms(started.elapsed());
    round.cpu_ms = settle(pid).await.ms_since(&before);
    round.rss_mib = resident_mib(pid);
    drop(kept);
    round
}

async fn loaded_rigs(builds: &[Build], conversations: usize) -> (Vec<Rig>, Vec<Vec<String>>) {
    let mut rigs = Vec::new();
    let mut ids = Vec::new();
    for build in builds {
        let rig = Rig::start(build, &[], Fallback::Error).await;
        let person = same_person(&rig.tab);
        let made: Vec<String> = futures::stream::iter((0..conversations).map(|_| {
            let mut tab = same_person(&person);
            let provider = rig.provider.clone();
            async move {
                let created = tab
                    .post(
                        "/api/v1/conversations",
                        json!({"title": "Bench", "providerId": provider, "model": "fake-model"}),
                    )
                    .await;
                assert_eq!(created.status, 201, "{created:?}");
                created.json["id"].as_str().unwrap().to_owned()
            }
        }))
        .buffered(8)
        .collect()
        .await;
        ids.push(made);
        rigs.push(rig);
    }
    (rigs, ids)
}

fn yes_no(rounds: &[Vec<Round>], b: usize) -> Cell {
    Cell::Text(if rounds[b].iter().all(|r| r.all_received) { "yes" } else { "no" }.into())
}

async fn concurrent(builds: Vec<Build>) -> Vec<Line> {
    let n = builds.len();
    let (rigs, ids) = loaded_rigs(&builds, CONCURRENT).await;
    // Round 0 is each conversation's first turn (reported apart: it costs far more today), round
    // 1 the measured one.
    let mut rounds = vec![Vec::new(); n];
    let mut first = vec![Round::default(); n];
    for i in 0..2 {
        for b in order(i, n) {
            let round = spread_round(Loaded::of(&rigs[b]), &ids[b], DELTAS).await;
            if i == 0 {
                first[b] = round;
            } else {
                rounds[b].push(round);
            }
        }
    }
    let r = |b: usize| &rounds[b][0];
    let case =
        format!("5. {CONCURRENT} conversations at once, {DELTAS} deltas each, a tab on each");
    let per_turn = |round: &Round| round.cpu_ms / CONCURRENT as f64;
    vec![
        line(
            ORDER_CONCURRENT,
            &case,
            "turns per second (all POSTs at once → last `end`), each conversation's 2nd turn",
            n,
            |b| Cell::PerSec(CONCURRENT as f64 / (r(b).total_ms / 1000.0)),
        ),
        line(ORDER_CONCURRENT, &case, "wall per turn, POST → its `end`, p50", n, |b| {
            Cell::Ms(quantile(&r(b).walls, 0.5))
        }),
        line(ORDER_CONCURRENT, &case, "wall per turn, p90", n, |b| {
            Cell::Ms(quantile(&r(b).walls, 0.9))
        }),
        line(
            ORDER_CONCURRENT,
            &case,
            &format!("server CPU per turn (total ÷ {CONCURRENT})"),
            n,
            |b| Cell::Ms(per_turn(r(b))),
        ),
        line(ORDER_CONCURRENT, &case, "all deltas received", n, |b| yes_no(&rounds, b)),
        line(
            ORDER_CONCURRENT,
            &case,
            "the same round as each conversation's 1st turn (warm-up): turns per second",
            n,
            |b| Cell::PerSec(CONCURRENT as f64 / (first[b].total_ms / 1000.0)),
        ),
        line(ORDER_CONCURRENT, &case, "1st turns: server CPU per turn", n, |b| {
            Cell::Ms(per_turn(&first[b]))
        }),
    ]
}

async fn fan_out(builds: Vec<Build>) -> Vec<Line> {
    let n = builds.len();
    let (rigs, ids) = loaded_rigs(&builds, 1).await;
    // A warm-up round, then two measured ones.
    let mut rounds = vec![Vec::new(); n];
    for i in 0..3 {
        for b in order(i, n) {
            let round = fan_out_round(Loaded::of(&rigs[b]), &ids[b][0]).await;
            if i > 0 {
                rounds[b].push(round);
            }
        }
    }
    let median = |b: usize, f: fn(&Round) -> f64| {
        quantile(&rounds[b].iter().map(f).collect::<Vec<_>>(), 0.5)
    };
    let case = format!("7. {TABS} tabs on one conversation (one turn, {DELTAS} deltas)");
    vec![
        line(ORDER_FAN_OUT, &case, "POST → every tab saw `end` (median of 2 rounds)", n, |b| {
            Cell::Ms(median(b, |r| r.total_ms))
        }),
        line(ORDER_FAN_OUT, &case, "server CPU for the turn", n, |b| {
            Cell::Ms(median(b, |r| r.cpu_ms))
        }),
        line(ORDER_FAN_OUT, &case, &format!("resident memory with {TABS} tabs"), n, |b| {
            Cell::Mib(median(b, |r| r.rss_mib))
        }),
        line(ORDER_FAN_OUT, &case, "all deltas received", n, |b| yes_no(&rounds, b)),
    ]
}

async fn fan_out_spread(builds: Vec<Build>) -> Vec<Line> {
    let n = builds.len();
    let (rigs, ids) = loaded_rigs(&builds, TABS).await;
    let mut rounds = vec![Vec::new(); n];
    for b in order(0, n) {
        rounds[b].push(spread_round(Loaded::of(&rigs[b]), &ids[b], SPREAD_DELTAS).await);
    }
    let r = |b: usize| &rounds[b][0];
    let case = format!(
        "7. {TABS} tabs on {TABS} new conversations (a first turn each, {SPREAD_DELTAS} deltas)"
    );
    vec![
        line(
            ORDER_FAN_OUT_SPREAD,
            &case,
            "all POSTs at once → every tab saw its `end`",
            n,
            |b| Cell::Ms(r(b).total_ms),
        ),
        line(ORDER_FAN_OUT_SPREAD, &case, "server CPU, all turns", n, |b| Cell::Ms(r(b).cpu_ms)),
        line(
            ORDER_FAN_OUT_SPREAD,
            &case,
            &format!("server CPU per turn (total ÷ {TABS})"),
            n,
            |b| Cell::Ms(r(b).cpu_ms / TABS as f64),
        ),
        line(ORDER_FAN_OUT_SPREAD, &case, &format!("resident memory with {TABS} tabs"), n, |b| {
            Cell::Mib(r(b).rss_mib)
        }),
        line(ORDER_FAN_OUT_SPREAD, &case, "all deltas received", n, |b| yes_no(&rounds, b)),
    ]
}

/// Row 6, from the lines `llooma-mcp-client`'s `call_ratio` bench printed (xtask ran it, once or
/// more per build, and passes them in `LLOOMA_BENCH_MCP_CALL` / `LLOOMA_BENCH_MCP_CALL_BASELINE`).
fn mcp_client_lines(builds: &[Build]) -> Vec<Line> {
    let n = builds.len();
    let case = "6. MCP client `tools/call`, local rmcp server (in process, TCP_NODELAY)";
    let var = |b: usize| {
        if n == 2 && b == 0 { "LLOOMA_BENCH_MCP_CALL_BASELINE" } else { "LLOOMA_BENCH_MCP_CALL" }
    };
    // Per build: the runs, each key → value.
    let runs: Vec<Vec<HashMap<String, f64>>> = (0..n)
        .map(|b| {
            std::env::var(var(b))
                .unwrap_or_default()
                .split([';', '\n'])
                .map(str::trim)
                .filter(|l| l.starts_with("call_ratio "))
                .map(|l| {
                    l.split_whitespace()
                        .filter_map(|kv| kv.split_once('='))
                        .filter_map(|(k, v)| Some((k.to_owned(), v.parse().ok()?)))
                        .collect()
                })
                .collect()
        })
        .collect();
    if runs.iter().all(Vec::is_empty) {
        return skipped(
            ORDER_MCP_CLIENT,
            case,
            "not run (run through `cargo xtask bench turns`)",
            n,
        );
    }
    let median = |b: usize, key: &str| {
        quantile(&runs[b].iter().filter_map(|r| r.get(key).copied()).collect::<Vec<_>>(), 0.5)
    };
    let ratio = |b: usize, ours: &str, bare: &str| {
        let per_run: Vec<f64> =
            runs[b].iter().filter_map(|r| Some(r.get(ours)? / r.get(bare)?)).collect();
        quantile(&per_run, 0.5)
    };
    let runs_count = runs.last().map_or(0, Vec::len);
    vec![
        line(
            ORDER_MCP_CLIENT,
            case,
            &format!(
                "ours, `McpClient::call_tool` as a turn calls it, p50 (median of {runs_count} runs)"
            ),
            n,
            |b| Cell::Us(median(b, "client_ours_p50_us")),
        ),
        line(ORDER_MCP_CLIENT, case, "bare rmcp client on an open session, p50", n, |b| {
            Cell::Us(median(b, "session_bare_p50_us"))
        }),
        line(ORDER_MCP_CLIENT, case, "`McpClient::call_tool` ÷ bare session, p50", n, |b| {
            Cell::Ratio(ratio(b, "client_ours_p50_us", "session_bare_p50_us"))
        }),
        line(
            ORDER_MCP_CLIENT,
            case,
            "ours on an open session (`McpSession::call_tool`), p50",
            n,
            |b| Cell::Us(median(b, "session_ours_p50_us")),
        ),
        line(ORDER_MCP_CLIENT, case, "`McpSession::call_tool` ÷ bare session, p50", n, |b| {
            Cell::Ratio(ratio(b, "session_ours_p50_us", "session_bare_p50_us"))
        }),
        line(ORDER_MCP_CLIENT, case, "bare rmcp connect, call, close (reference), p50", n, |b| {
            Cell::Us(median(b, "oneshot_bare_p50_us"))
        }),
    ]
}

// ------------------------------------------------------------------------------------------------
// Photos: accepting a phone's photo, ten at once, and a turn in a conversation holding ten

/// A 12-megapixel photo (4000 x 3000) of about 6 MB: noise, which JPEG cannot shrink much, like
/// the detail of a real photo.
fn twelve_megapixel_jpeg() -> Vec<u8> {
    let mut seed = 0x2545_f491_u32;
    let image = image::RgbImage::from_fn(4000, 3000, |x, y| {
        seed ^= seed << 13;
        seed ^= seed >> 17;
        seed ^= seed << 5;
        let noise = (seed & 0x1f) as u8;
        image::Rgb([(x / 16) as u8 ^ noise, (y / 12) as u8 ^ noise, ((x + y) / 28) as u8 ^ noise])
    });
    let mut out = std::io::Cursor::new(Vec::new());
    let encoder = image::codecs::jpeg::JpegEncoder::new_with_quality(&mut out, 90);
    image::DynamicImage::from(image).write_with_encoder(encoder).unwrap();
    out.into_inner()
}

/// The peak resident memory of a process so far (`VmHWM`), in MiB.
fn peak_resident_mib(pid: u32) -> f64 {
    let status = std::fs::read_to_string(format!("/proc/{pid}/status")).unwrap_or_default();
    let kib = status
        .lines()
        .find_map(|l| l.strip_prefix("VmHWM:"))
        .and_then(|v| v.trim().trim_end_matches("kB").trim().parse::<f64>().ok())
        .unwrap_or(0.0);
    kib / 1024.0
}

async fn media(builds: Vec<Build>) -> Vec<Line> {
    let n = builds.len();
    let photo = Arc::new(twelve_megapixel_jpeg());
    eprintln!("   the photo: {:.1} MB", photo.len() as f64 / 1e6);
    let case = "6. photos (a 12-megapixel JPEG)";
    let mut upload_cpu = vec![Cell::None; n];
    let mut peak = vec![Cell::None; n];
    let mut turn_cpu = vec![Cell::None; n];
    let mut plain_cpu = vec![Cell::None; n];
    let mut sent_bytes = vec![Cell::None; n];
    for (b, build) in builds.iter().enumerate() {
        // Ten people upload one each at once, on a fresh server: its peak memory.
        let mut rig = Rig::start(build, &[], Fallback::Error).await;
        let mut people = Vec::new();
        for i in 0..10 {
            let id = rig.conversation(false).await;
            people.push((rig.tab(), id, i));
        }
        let uploads = people.into_iter().map(|(mut tab, id, i)| {
            let photo = Arc::clone(&photo);
            tokio::spawn(async move {
                let path = format!("/api/v1/conversations/{id}/files?name=IMG_{i}.jpg");
                tab.upload(&path, photo.to_vec()).await.status
            })
        });
        let statuses = futures::future::join_all(uploads).await;
        if statuses.iter().any(|s| !matches!(s, Ok(201))) {
            eprintln!("   {}: uploads not taken ({statuses:?}); no figures", build.label);
            continue;
        }
        peak[b] = Cell::Mib(peak_resident_mib(rig.proc.pid()));

        // One upload at a time: server CPU to accept, scale, strip and store it.
        let id = rig.conversation(false).await;
        let mut cpu = Vec::new();
        for i in 0..5 {
            let before = settle(rig.proc.pid()).await;
            let path = format!("/api/v1/conversations/{id}/files?name=one_{i}.jpg");
            assert_eq!(rig.tab.upload(&path, photo.to_vec()).await.status, 201);
            cpu.push(settle(rig.proc.pid()).await.ms_since(&before));
        }
        upload_cpu[b] = Cell::Ms(quantile(&cpu, 0.5));

        // A conversation holding ten photos, on a model that sees them: a turn's CPU beyond a
        // plain one, and the bytes of the request the provider gets.
        let marked = rig
            .tab
            .send(
                "PUT",
                &format!("/api/v1/admin/providers/{}/vision-models", rig.provider),
                Some(json!({"models": ["fake-model"]})),
            )
            .await;
        assert_eq!(marked.status, 200, "{marked:?}");
        let mut conv = Conv::open(&mut rig, Kind::Plain).await;
        let mut plain = Vec::new();
        for _ in 0..5 {
            plain.push(one_turn(&mut rig, &mut conv).await.1);
        }
        for i in 0..10 {
            let path = format!("/api/v1/conversations/{}/files?name=held_{i}.jpg", conv.id);
            let file = rig.tab.upload(&path, photo.to_vec()).await;
            rig.model.push(Reply::text(PLAIN_TEXT).chunks(PLAIN_DELTAS));
            let sent = rig
                .tab
                .post(
                    &format!("/api/v1/conversations/{}/messages", conv.id),
                    json!({"content": "and this one?", "files": [file.json["id"]]}),
                )
                .await;
            assert_eq!(sent.status, 202, "{sent:?}");
            until_end(&mut conv.events, Duration::from_secs(30)).await;
        }
        let mut held = Vec::new();
        for _ in 0..5 {
            held.push(one_turn(&mut rig, &mut conv).await.1);
        }
        plain_cpu[b] = Cell::Ms(quantile(&plain, 0.5));
        turn_cpu[b] = Cell::Ms(quantile(&held, 0.5));
        let last = rig.model.chat_bodies().last().map(|body| body.to_string().len()).unwrap_or(0);
        sent_bytes[b] = Cell::Text(format!("{:.2} MB", last as f64 / 1e6));
    }
    vec![
        Line::new(ORDER_MEDIA, case, "server CPU to accept one (p50 of 5)", upload_cpu),
        Line::new(ORDER_MEDIA, case, "peak resident memory, 10 uploads at once", peak),
        Line::new(ORDER_MEDIA, case, "server CPU of a plain turn (p50 of 5)", plain_cpu),
        Line::new(ORDER_MEDIA, case, "server CPU of a turn holding 10 photos (p50 of 5)", turn_cpu),
        Line::new(ORDER_MEDIA, case, "bytes sent to the provider for that turn", sent_bytes),
    ]
}

/// Part 9: a conversation of 2,000 messages.
async fn long_conversation(builds: Vec<Build>) -> Vec<Line> {
    let n = builds.len();
    let case = "9. a conversation of 2,000 messages";
    let cells = || vec![Cell::None; n];
    let (mut page_ms, mut page_kib, mut first_ms, mut first_kib) =
        (cells(), cells(), cells(), cells());
    let (mut whole_ms, mut whole_kib, mut sent_bounded, mut sent_whole) =
        (cells(), cells(), cells(), cells());
    for (b, build) in builds.iter().enumerate() {
        let model = FakeModel::builder()
            .log_requests(false)
            .fallback(Fallback::Echo { chunk_delay_ms: 0 })
            .standing("You keep the summary", Reply::text("A summary of the conversation so far."))
            .start()
            .await
            .unwrap();
        let origin = model.origin();
        let proc = Proc::start(build, &[("PROVIDER_ALLOWED_ORIGINS", origin.as_str())]);
        let mut tab = Tab::new(&proc.base);
        assert_eq!(tab.register("root", PASSWORD).await.status, 201);
        let provider = tab
            .post("/api/v1/admin/providers", json!({"name": "fake", "baseUrl": model.base_url()}))
            .await;
        let provider = provider.json["id"].as_str().unwrap().to_owned();
        let windows = format!("/api/v1/admin/providers/{provider}/context-windows");
        let window = |tokens: u32| json!({"windows": {"fake-model": tokens}});
        tab.send("PUT", &windows, Some(window(10_000_000))).await;
        let created = tab
            .post(
                "/api/v1/conversations",
                json!({"title": "Long", "providerId": provider, "model": "fake-model"}),
            )
            .await;
        let id = created.json["id"].as_str().unwrap().to_owned();
        let mut events =
            Events::open(&tab, &format!("/api/v1/conversations/{id}/events"), None).await;
        let say =
            |i: usize| format!("Message {i:04}: {}", "a line of an ordinary long chat. ".repeat(5));
        for i in 0..1000 {
            let path = format!("/api/v1/conversations/{id}/messages");
            assert_eq!(tab.post(&path, json!({"content": say(i)})).await.status, 202);
            until_end(&mut events, Duration::from_secs(30)).await;
        }
        let mut timed = async |path: String| {
            let mut ms = Vec::new();
            let mut bytes = 0;
            for _ in 0..20 {
                let started = Instant::now();
                let got = tab.get(&path).await;
                ms.push(started.elapsed().as_secs_f64() * 1e3);
                assert_eq!(got.status, 200, "{path}");
                bytes = got.text.len();
            }
            (Cell::Ms(quantile(&ms, 0.5)), Cell::Kib(bytes as f64 / 1024.0))
        };
        (page_ms[b], page_kib[b]) = timed(format!("/c/{id}")).await;
        (first_ms[b], first_kib[b]) = timed(format!("/api/v1/conversations/{id}?limit=60")).await;
        (whole_ms[b], whole_kib[b]) = timed(format!("/api/v1/conversations/{id}")).await;
        let mut turn = async |tab: &mut Tab, i: usize| {
            let path = format!("/api/v1/conversations/{id}/messages");
            assert_eq!(tab.post(&path, json!({"content": say(i)})).await.status, 202);
            until_end(&mut events, Duration::from_secs(60)).await;
            let bodies = model.chat_bodies();
            let last =
                bodies.iter().rev().find(|b| !b.to_string().contains("You keep the summary"));
            Cell::Kib(last.map_or(0, |b| b.to_string().len()) as f64 / 1024.0)
        };
        sent_whole[b] = turn(&mut tab, 1000).await;
        tab.send("PUT", &windows, Some(window(8192))).await;
        turn(&mut tab, 1001).await;
        sent_bounded[b] = turn(&mut tab, 1002).await;
    }
    vec![
        Line::new(ORDER_LONG, case, "its page (the newest 60 messages), p50 of 20", page_ms),
        Line::new(ORDER_LONG, case, "its page's size", page_kib),
        Line::new(ORDER_LONG, case, "API, first page (?limit=60), p50 of 20", first_ms),
        Line::new(ORDER_LONG, case, "API, first page's size", first_kib),
        Line::new(ORDER_LONG, case, "API, the whole conversation, p50 of 20", whole_ms),
        Line::new(ORDER_LONG, case, "API, the whole conversation's size", whole_kib),
        Line::new(ORDER_LONG, case, "sent to the provider, window 10M tokens", sent_whole),
        Line::new(ORDER_LONG, case, "sent to the provider, window 8,192 tokens", sent_bounded),
    ]
}

/// Part 10: a ChatGPT export of about 50 MB brought in at once.
async fn import_chatgpt(builds: Vec<Build>) -> Vec<Line> {
    let n = builds.len();
    let case = "10. import of a 50 MB ChatGPT export";
    let (mut took, mut peak, mut size) =
        (vec![Cell::None; n], vec![Cell::None; n], vec![Cell::None; n]);
    // 2,000 conversations of 12 exchanges, each message about 1 KB: about 50 MB as ChatGPT
    // writes it.
    let words = "the kite climbs over the river and the wind turns west again; ".repeat(16);
    let mut all = Vec::new();
    for c in 0..2000 {
        let mut mapping = serde_json::Map::new();
        mapping.insert("root".into(), json!({"id": "root", "parent": null, "message": null}));
        let mut parent = "root".to_owned();
        for m in 0..24 {
            let id = format!("c{c}m{m}");
            let role = if m % 2 == 0 { "user" } else { "assistant" };
            mapping.insert(
                id.clone(),
                json!({"id": id, "parent": parent, "children": [], "message": {
                    "id": id, "author": {"role": role, "name": null, "metadata": {}},
                    "create_time": 1_700_000_000.0 + f64::from(c * 100 + m),
                    "content": {"content_type": "text", "parts": [format!("{m}: {words}")]},
                    "status": "finished_successfully", "metadata": {"model_slug": "gpt-4o"}
                }}),
            );
            parent = id;
        }
        all.push(json!({"title": format!("Conversation {c}"), "create_time": 1_700_000_000.0,
                        "mapping": mapping, "current_node": parent}));
    }
    let file = serde_json::to_vec(&Value::Array(all)).unwrap();
    eprintln!("   the export: {:.1} MB", file.len() as f64 / 1e6);
    for (b, build) in builds.iter().enumerate() {
        let proc = Proc::start(build, &[]);
        let mut tab = Tab::new(&proc.base);
        assert_eq!(tab.register("root", PASSWORD).await.status, 201);
        let started = Instant::now();
        let report = tab.upload("/api/v1/import", file.clone()).await;
        took[b] = Cell::Ms(started.elapsed().as_secs_f64() * 1e3);
        assert_eq!(report.status, 200, "{}", report.text);
        assert_eq!(report.json["conversations"], 2000);
        peak[b] = Cell::Mib(peak_resident_mib(proc.pid()));
        size[b] = Cell::Text(format!("{:.1} MB", file.len() as f64 / 1e6));
    }
    vec![
        Line::new(ORDER_IMPORT, case, "the file", size),
        Line::new(ORDER_IMPORT, case, "wall time to bring it in", took),
        Line::new(ORDER_IMPORT, case, "server's peak resident memory", peak),
    ]
}
