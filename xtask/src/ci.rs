//! `cargo xtask ci` (exactly what CI runs) and `cargo xtask run`.
//!
//! Environment contract for the test suites (set here, read by the test harnesses):
//! - `LLOOMA_TEST_DB`: `sqlite` or `postgres`; which engine storage tests use in this run.
//! - `LLOOMA_TEST_PG_URL`: the Postgres *server* URL (no database name). The harness creates a
//!   fresh database per test and drops it (`DROP DATABASE ... WITH (FORCE)`).
//! - `LLOOMA_BIN`: absolute path of the already built `llooma` binary (e2e tests start it; they
//!   must not build it themselves).
//! - `LLOOMA_SLOW_TESTS=1`: slow suites run, and a missing peer or browser (chromium,
//!   chromedriver) fails a test instead of skipping it.

use std::ffi::OsString;
use std::net::{TcpStream, ToSocketAddrs};
use std::path::PathBuf;
use std::process::Command;
use std::time::Duration;

use anyhow::{Context, Result, bail};

use crate::layering::Workspace;
use crate::pg::{host_port, pg_unreachable, pg_url};
use crate::util::{Ctx, Steps, fmt_duration, run, works};
use crate::{deny, layering, setup};

pub fn ci(ctx: &Ctx) -> Result<()> {
    let pg_url = pg_url();
    let mut steps = Steps::new();

    // The machine first: what is missing is installed now, and what cannot be installed here
    // fails in seconds, not after a 10-minute build.
    steps.step(
        "set-up (rustfmt, clippy, cargo-deny, cargo-nextest, wasm32 target, chromium, postgres)",
        || setup::setup(ctx),
    )?;
    steps.step("cargo fmt --all --check", || {
        run(&mut ctx.cargo(["fmt", "--all", "--check"])).context(
            "rustfmt disagrees (run `cargo fmt --all` and commit the result) or could not \
             read a file (see its message above)",
        )
    })?;
    steps.step("cargo clippy", || {
        run(&mut ctx.cargo(["clippy", "--workspace", "--all-targets", "--", "-D", "warnings"]))
            .context("clippy found problems (warnings are errors in CI)")
    })?;
    steps.step("cargo clippy (web interface, browser part, wasm32)", || {
        run(&mut ctx.cargo([
            "clippy",
            "-p",
            "llooma-web",
            "--target",
            "wasm32-unknown-unknown",
            "--no-default-features",
            "--features",
            "hydrate",
            "--",
            "-D",
            "warnings",
        ]))
        .context(
            "clippy found problems in the browser part (is the wasm32-unknown-unknown target \
             installed? `rustup target add wasm32-unknown-unknown`)",
        )
    })?;
    steps.step("cargo deny check", || {
        deny::check(ctx).context(
            "cargo-deny failed: a license outside deny.toml's allow-list, a known advisory, a \
             banned crate or a source other than crates.io",
        )
    })?;
    steps.step("layering checks", || layering::check(ctx))?;

    // Tests.
    steps.step("postgres reachable", || postgres_reachable(&pg_url))?;
    let ws = Workspace::load(ctx)?;
    let bin = llooma_bin(&ws);
    steps.step("cargo build -p llooma-server (for LLOOMA_BIN)", || {
        run(&mut ctx.cargo(["build", "-p", "llooma-server"]))?;
        if !bin.is_file() {
            bail!(
                "built llooma-server but {} does not exist (is the binary still named `llooma`?)",
                bin.display()
            );
        }
        Ok(())
    })?;
    // The browser tests load the web interface the binary serves from <target>/web/pkg.
    steps.step("cargo xtask build-web", || crate::web::build_web(ctx).map(|_| ()))?;
    // Real MCP servers for the tests (npm's server-everything, the Python SDK, the conformance
    // suite): installed into target/peers by the script, found through the variables it prints.
    let mut peers: Vec<(String, String)> = Vec::new();
    steps.step("MCP peers (npm, PyPI)", || {
        peers = install_peers(ctx)?;
        Ok(())
    })?;
    let test_env = |cmd: &mut Command, db: &str| {
        cmd.env("LLOOMA_SLOW_TESTS", "1").env("LLOOMA_BIN", &bin).env("LLOOMA_TEST_DB", db);
        cmd.envs(peers.iter().map(|(k, v)| (k.as_str(), v.as_str())));
        if db == "postgres" {
            cmd.env("LLOOMA_TEST_PG_URL", &pg_url);
        } else {
            cmd.env_remove("LLOOMA_TEST_PG_URL");
        }
    };
    for db in ["sqlite", "postgres"] {
        steps.step(&format!("nextest (LLOOMA_TEST_DB={db})"), || {
            let mut cmd = ctx.cargo(["nextest", "run", "--workspace", "--no-fail-fast"]);
            test_env(&mut cmd, db);
            run(&mut cmd).with_context(|| format!("tests failed with LLOOMA_TEST_DB={db}"))
        })?;
    }
    steps.step("cargo test --workspace --doc", || {
        let mut cmd = ctx.cargo(["test", "--workspace", "--doc"]);
        test_env(&mut cmd, "sqlite");
        run(&mut cmd).context("doc tests failed")
    })?;

    steps.print_table();
    eprintln!("\nxtask ci: all {} steps passed in {}", steps.count(), fmt_duration(steps.total()));
    Ok(())
}

/// `cargo run -p llooma-server -- serve <args>`; exits with the server's exit code.
/// Installs the MCP peers (idempotent) and returns the variables the tests find them by.
pub fn install_peers(ctx: &Ctx) -> Result<Vec<(String, String)>> {
    let script = ctx.root.join("crates/llooma-mcp-client/tests/peers/install.sh");
    let printed = crate::util::output(Command::new("bash").arg(&script).current_dir(&ctx.root))
        .context("installing the MCP peers failed")?;
    Ok(printed
        .lines()
        .filter_map(|l| l.split_once('='))
        .map(|(k, v)| (k.trim().to_owned(), v.trim().to_owned()))
        .collect())
}

/// `cargo xtask conformance`: the official MCP conformance suite's client scenarios
/// (`initialize`, `tools_call`, `sse-retry`) against our client.
pub fn conformance(ctx: &Ctx) -> Result<()> {
    let peers = install_peers(ctx)?;
    let mut cmd =
        ctx.cargo(["nextest", "run", "-p", "llooma-mcp-client", "--test", "it", "conformance"]);
    cmd.env("LLOOMA_SLOW_TESTS", "1").envs(peers.iter().map(|(k, v)| (k.as_str(), v.as_str())));
    run(&mut cmd).context("the conformance scenarios failed")
}

pub fn run_server(ctx: &Ctx, args: &[String]) -> Result<()> {
    let mut cmd = ctx.cargo(["run", "-p", "llooma-server", "--", "serve"]);
    cmd.args(args);
    let status = cmd.status().context("could not start `cargo run -p llooma-server`")?;
    if !status.success() {
        // cargo (or the server) already said why; pass its exit code on, as `cargo run` would.
        std::process::exit(status.code().unwrap_or(1));
    }
    Ok(())
}

/// `<target>/debug/llooma`, absolute.
fn llooma_bin(ws: &Workspace) -> PathBuf {
    let mut name = OsString::from("llooma");
    name.push(std::env::consts::EXE_SUFFIX);
    ws.target_dir.join("debug").join(name)
}

/// A TCP connect to the URL's host:port, then (if `psql` is on PATH) `SELECT 1` as the URL's user.
fn postgres_reachable(url: &str) -> Result<()> {
    let hostport = host_port(url)
        .with_context(|| format!("LLOOMA_TEST_PG_URL={url} is not a postgres://host[:port] URL"))?;
    let addrs: Vec<_> = hostport
        .to_socket_addrs()
        .with_context(|| format!("cannot resolve {hostport} (from LLOOMA_TEST_PG_URL={url})"))?
        .collect();
    let connected =
        addrs.iter().any(|a| TcpStream::connect_timeout(a, Duration::from_secs(3)).is_ok());
    if !connected {
        bail!("{}", pg_unreachable(&hostport, url));
    }
    if works(Command::new("psql").arg("--version")) {
        let login_url = maintenance_url(url);
        let out = Command::new("psql")
            .args([login_url.as_str(), "-X", "-q", "-A", "-t", "-c", "SELECT 1"])
            .output()
            .context("could not start psql")?;
        if !out.status.success() {
            bail!(
                "Postgres answers at {hostport} but `psql {login_url} -c 'SELECT 1'` fails: {}; \
                 check that the user in LLOOMA_TEST_PG_URL exists, may log in and may create \
                 databases",
                String::from_utf8_lossy(&out.stderr).trim()
            );
        }
        eprintln!("postgres: {login_url} accepts connections and queries");
    } else {
        eprintln!(
            "postgres: {hostport} accepts TCP connections (psql not found; login not checked)"
        );
    }
    Ok(())
}

/// The URL with the maintenance database `postgres` when it names none (psql would otherwise
/// pick a database named after the user, which need not exist).
fn maintenance_url(url: &str) -> String {
    let (base, query) = match url.split_once('?') {
        Some((b, q)) => (b, Some(q)),
        None => (url, None),
    };
    let after_scheme = base.split_once("://").map_or(base, |(_, rest)| rest);
    let base = match after_scheme.split_once('/') {
        Some((_, db)) if !db.is_empty() => base.to_owned(),
        Some(_) => format!("{base}postgres"),
        None => format!("{base}/postgres"),
    };
    match query {
        Some(q) => format!("{base}?{q}"),
        None => base,
    }
}

#[cfg(test)]
mod tests {
    use super::maintenance_url;

    #[test]
    fn maintenance_database_when_none_is_named() {
        let cases = [
            ("postgres://root@127.0.0.1:5432", "postgres://root@127.0.0.1:5432/postgres"),
            ("postgres://root@127.0.0.1:5432/", "postgres://root@127.0.0.1:5432/postgres"),
            ("postgres://u@h/app?sslmode=disable", "postgres://u@h/app?sslmode=disable"),
            ("postgres://u@h?sslmode=disable", "postgres://u@h/postgres?sslmode=disable"),
        ];
        for (url, want) in cases {
            assert_eq!(maintenance_url(url), want, "{url}");
        }
    }
}
