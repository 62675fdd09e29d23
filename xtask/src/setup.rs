//! Machine set-up: what `cargo xtask ci` needs beyond the Rust toolchain, installed when missing.
//!
//! `cargo xtask setup` runs it alone; `cargo xtask ci` runs it first. Every piece is checked
//! first (a machine that has everything spends well under a second here and installs nothing);
//! then, if something is missing that xtask cannot install itself (Chromium when not root, a
//! Postgres it cannot start), it stops at once and names the exact command for a person to run,
//! before spending minutes on the rest. Otherwise it installs what is missing, each install
//! printed with its command and how long it took, and checks again that it is now there.
//!
//! - rustfmt and clippy: `rustup component add rustfmt clippy` (rust-toolchain.toml lists them,
//!   but a toolchain installed earlier may lack them);
//! - cargo-deny (pinned) and cargo-nextest: `cargo install --locked`;
//! - the `wasm32-unknown-unknown` target (the web interface's browser part): `rustup target add`;
//! - Chromium and chromedriver (browser tests): Debian's `chromium chromium-driver` with apt-get
//!   when running as root (`LLOOMA_CHROMIUM` / `LLOOMA_CHROMEDRIVER` name other paths);
//! - Postgres at `LLOOMA_TEST_PG_URL`: when nothing answers at the default 127.0.0.1:5432 and we
//!   are root on a machine with a cluster in /etc/postgresql, it is started with `pg_ctlcluster`.
//!
//! The MCP peers (npm, PyPI) are installed later by `ci` itself, into target/peers.

use std::net::{TcpStream, ToSocketAddrs};
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

use anyhow::{Context, Result, bail};

use crate::pg;
use crate::util::{Ctx, fmt_duration, run, show, works};

/// The cargo-deny release deny.toml is written for.
pub const CARGO_DENY_VERSION: &str = "0.20.2";
pub const WASM_TARGET: &str = "wasm32-unknown-unknown";

/// How long a freshly started Postgres may take to accept connections.
const PG_START_WAIT: Duration = Duration::from_secs(30);

/// One thing the machine needs, and how to tell whether it has it.
#[derive(Clone, Copy)]
pub struct Need {
    name: &'static str,
    probe: fn(&Ctx, &Machine) -> Result<Probe>,
}

pub const COMPONENTS: Need = Need { name: "rustfmt and clippy", probe: probe_components };
pub const CARGO_DENY: Need = Need { name: "cargo-deny", probe: probe_cargo_deny };
pub const NEXTEST: Need = Need { name: "cargo-nextest", probe: probe_nextest };
pub const WASM: Need = Need { name: WASM_TARGET, probe: probe_wasm_target };
pub const CHROMIUM: Need = Need { name: "chromium and chromedriver", probe: probe_chromium };
pub const POSTGRES: Need = Need { name: "postgres", probe: probe_postgres };

/// Everything `cargo xtask ci` needs, in the order it is checked and installed.
pub const ALL: [Need; 6] = [COMPONENTS, CARGO_DENY, NEXTEST, WASM, CHROMIUM, POSTGRES];

/// What a probe found.
enum Probe {
    /// There; the text says what was found (a version, a path).
    Present(String),
    /// Missing (the text says what was found instead), and what puts it right.
    Missing(String, Fix),
}

enum Fix {
    /// Commands xtask runs itself, in order; `note` says how long they usually take.
    Run { cmds: Vec<Command>, note: &'static str },
    /// `pg_ctlcluster --skip-systemctl-redirect <version> main start`, then wait for `addr`.
    StartPostgres { version: String, addr: String },
    /// Nothing xtask can do on this machine: what a person must do.
    Manual(String),
}

/// Facts about the machine that decide what may be installed.
pub struct Machine {
    root: bool,
}

impl Machine {
    fn probe() -> Self {
        let uid = Command::new("id").arg("-u").stderr(Stdio::null()).output();
        let root = uid.is_ok_and(|o| o.status.success() && o.stdout.trim_ascii() == b"0");
        Self { root }
    }
}

/// `cargo xtask setup`: everything in [`ALL`].
pub fn setup(ctx: &Ctx) -> Result<()> {
    ensure(ctx, &ALL)
}

/// Checks each need; stops with the commands a person must run when one cannot be installed
/// here; otherwise installs what is missing and checks again.
pub fn ensure(ctx: &Ctx, needs: &[Need]) -> Result<()> {
    let started = Instant::now();
    let machine = Machine::probe();
    let mut missing = Vec::new();
    for need in needs {
        match (need.probe)(ctx, &machine)? {
            Probe::Present(found) => eprintln!("setup: {}: {found}", need.name),
            Probe::Missing(found, fix) => {
                eprintln!("setup: {}: missing ({found})", need.name);
                missing.push((need, fix));
            }
        }
    }

    let manual: Vec<String> = missing
        .iter()
        .filter_map(|(need, fix)| match fix {
            Fix::Manual(what) => Some(format!("  - {}: {what}", need.name)),
            _ => None,
        })
        .collect();
    if !manual.is_empty() {
        bail!(
            "this machine lacks what xtask cannot install by itself here:\n{}",
            manual.join("\n")
        );
    }

    let installs = missing.len();
    for (need, fix) in missing {
        let took = Instant::now();
        apply(need, fix)?;
        match (need.probe)(ctx, &machine)? {
            Probe::Present(found) => eprintln!(
                "setup: {}: done in {} ({found})",
                need.name,
                fmt_duration(took.elapsed())
            ),
            Probe::Missing(found, _) => bail!(
                "set-up of {} ran without an error but it is still missing ({found})",
                need.name
            ),
        }
    }
    let took = fmt_duration(started.elapsed());
    if installs == 0 {
        eprintln!("setup: nothing to install ({took})");
    } else {
        eprintln!("setup: {installs} installed or started in {took}");
    }
    Ok(())
}

fn apply(need: &Need, fix: Fix) -> Result<()> {
    match fix {
        Fix::Run { cmds, note } => {
            let shown: Vec<String> = cmds.iter().map(show).collect();
            eprintln!("setup: {}: installing ({note}): {}", need.name, shown.join(" && "));
            for mut cmd in cmds {
                // stdout (apt-get prints there) goes to stderr like all of xtask's output.
                cmd.stdout(std::io::stderr());
                run(&mut cmd).with_context(|| format!("installing {} failed", need.name))?;
            }
            Ok(())
        }
        Fix::StartPostgres { version, addr } => {
            eprintln!(
                "setup: postgres: nothing answers at {addr}; starting cluster {version}/main"
            );
            let mut cmd = Command::new("pg_ctlcluster");
            cmd.args(["--skip-systemctl-redirect", &version, "main", "start"]);
            cmd.stdout(std::io::stderr());
            run(&mut cmd).context("starting Postgres failed")?;
            let deadline = Instant::now() + PG_START_WAIT;
            while !answers(&addr) {
                if Instant::now() >= deadline {
                    bail!(
                        "started Postgres cluster {version}/main but nothing answers at {addr} \
                         after {}s; see /var/log/postgresql/",
                        PG_START_WAIT.as_secs()
                    );
                }
                std::thread::sleep(Duration::from_millis(250));
            }
            Ok(())
        }
        Fix::Manual(what) => bail!("{}: {what}", need.name),
    }
}

/// `rustup <args>` in the workspace root, so rust-toolchain.toml picks the toolchain.
fn rustup<const N: usize>(ctx: &Ctx, args: [&str; N]) -> Command {
    let mut cmd = Command::new("rustup");
    cmd.args(args).current_dir(&ctx.root);
    cmd
}

fn no_rustup(what: &str) -> Fix {
    Fix::Manual(format!(
        "rustup is not on PATH, so xtask cannot add {what}; install it with your toolchain's \
         own means, or install rustup (https://rustup.rs) and run `cargo xtask setup`"
    ))
}

fn probe_components(ctx: &Ctx, _: &Machine) -> Result<Probe> {
    let fmt = works(&mut ctx.cargo(["fmt", "--version"]));
    let clippy = works(&mut ctx.cargo(["clippy", "--version"]));
    if fmt && clippy {
        return Ok(Probe::Present("present".into()));
    }
    let found = match (fmt, clippy) {
        (false, false) => "neither `cargo fmt` nor `cargo clippy` runs",
        (false, true) => "`cargo fmt` does not run",
        _ => "`cargo clippy` does not run",
    };
    let fix = if works(&mut rustup(ctx, ["--version"])) {
        Fix::Run {
            cmds: vec![rustup(ctx, ["component", "add", "rustfmt", "clippy"])],
            note: "seconds",
        }
    } else {
        no_rustup("the rustfmt and clippy components")
    };
    Ok(Probe::Missing(found.into(), fix))
}

/// First line of `cargo <sub> --version`, if it runs.
fn tool_version(ctx: &Ctx, sub: &str) -> Option<String> {
    let out = ctx.cargo([sub, "--version"]).stderr(Stdio::null()).output().ok()?;
    if !out.status.success() {
        return None;
    }
    let text = String::from_utf8_lossy(&out.stdout);
    Some(text.lines().next().unwrap_or_default().trim().to_owned())
}

fn cargo_install(ctx: &Ctx, args: &[&str]) -> Command {
    let mut cmd = ctx.cargo(["install", "--locked"]);
    cmd.args(args);
    cmd
}

fn probe_cargo_deny(ctx: &Ctx, _: &Machine) -> Result<Probe> {
    let version = tool_version(ctx, "deny");
    if let Some(v) = &version
        && is_version(v, "cargo-deny", CARGO_DENY_VERSION)
    {
        return Ok(Probe::Present(v.clone()));
    }
    let found = match version {
        Some(v) => format!("{v} installed, deny.toml is written for {CARGO_DENY_VERSION}"),
        None => "not installed".to_owned(),
    };
    let cmd = cargo_install(ctx, &["cargo-deny", "--version", CARGO_DENY_VERSION]);
    Ok(Probe::Missing(found, Fix::Run { cmds: vec![cmd], note: "about 4 minutes on 2 cores" }))
}

/// `cargo-deny 0.20.2` (maybe followed by more words) is `name` at `version`.
fn is_version(line: &str, name: &str, version: &str) -> bool {
    let mut words = line.split_whitespace();
    words.next() == Some(name) && words.next() == Some(version)
}

fn probe_nextest(ctx: &Ctx, _: &Machine) -> Result<Probe> {
    if let Some(v) = tool_version(ctx, "nextest") {
        return Ok(Probe::Present(v));
    }
    let cmd = cargo_install(ctx, &["cargo-nextest"]);
    Ok(Probe::Missing(
        "not installed".into(),
        Fix::Run { cmds: vec![cmd], note: "about 3 minutes on 2 cores" },
    ))
}

fn probe_wasm_target(ctx: &Ctx, _: &Machine) -> Result<Probe> {
    let Ok(out) = rustup(ctx, ["target", "list", "--installed"]).stderr(Stdio::null()).output()
    else {
        return Ok(Probe::Missing("rustup not found".into(), no_rustup("a target")));
    };
    let listed = String::from_utf8_lossy(&out.stdout);
    if out.status.success() && listed.lines().any(|l| l.trim() == WASM_TARGET) {
        return Ok(Probe::Present("installed".into()));
    }
    let cmd = rustup(ctx, ["target", "add", WASM_TARGET]);
    Ok(Probe::Missing("not installed".into(), Fix::Run { cmds: vec![cmd], note: "seconds" }))
}

/// `$var`, else the Debian path; the browser tests look in the same places.
fn browser_path(var: &str, default: &str) -> (PathBuf, bool) {
    match std::env::var_os(var) {
        Some(path) => (PathBuf::from(path), true),
        None => (PathBuf::from(default), false),
    }
}

fn probe_chromium(_: &Ctx, machine: &Machine) -> Result<Probe> {
    let tools = [
        browser_path("LLOOMA_CHROMIUM", "/usr/bin/chromium"),
        browser_path("LLOOMA_CHROMEDRIVER", "/usr/bin/chromedriver"),
    ];
    let absent: Vec<&(PathBuf, bool)> = tools.iter().filter(|(p, _)| !p.is_file()).collect();
    if absent.is_empty() {
        let [(browser, _), (driver, _)] = &tools;
        return Ok(Probe::Present(format!("{} and {}", browser.display(), driver.display())));
    }
    let found =
        absent.iter().map(|(p, _)| format!("no {}", p.display())).collect::<Vec<_>>().join(", ");
    if let Some((path, _)) = absent.iter().find(|(_, from_env)| *from_env) {
        let fix = Fix::Manual(format!(
            "{} (named by LLOOMA_CHROMIUM or LLOOMA_CHROMEDRIVER) does not exist; fix or unset \
             the variable",
            path.display()
        ));
        return Ok(Probe::Missing(found, fix));
    }
    let apt = works(Command::new("apt-get").arg("--version"));
    let fix = chromium_fix(machine.root, apt);
    Ok(Probe::Missing(found, fix))
}

/// Debian's packages with apt-get as root; otherwise the command for a person.
fn chromium_fix(root: bool, apt: bool) -> Fix {
    if root && apt {
        let mut update = Command::new("apt-get");
        update.arg("update");
        let mut install = Command::new("apt-get");
        install.env("DEBIAN_FRONTEND", "noninteractive").args([
            "install",
            "-y",
            "chromium",
            "chromium-driver",
        ]);
        Fix::Run { cmds: vec![update, install], note: "about a minute" }
    } else if apt {
        Fix::Manual(
            "not running as root, so xtask does not install system packages; run \
             `sudo apt-get install -y chromium chromium-driver`"
                .into(),
        )
    } else {
        Fix::Manual(
            "no apt-get here; install Chromium and its chromedriver, and set LLOOMA_CHROMIUM and \
             LLOOMA_CHROMEDRIVER to their paths"
                .into(),
        )
    }
}

fn probe_postgres(_: &Ctx, machine: &Machine) -> Result<Probe> {
    let url = pg::pg_url();
    let Some(addr) = pg::host_port(&url) else {
        let fix =
            Fix::Manual(format!("LLOOMA_TEST_PG_URL={url} is not a postgres://host[:port] URL"));
        return Ok(Probe::Missing("no address".into(), fix));
    };
    if answers(&addr) {
        return Ok(Probe::Present(format!("{addr} answers")));
    }
    let found = format!("nothing answers at {addr}");
    let local = matches!(addr.as_str(), "127.0.0.1:5432" | "localhost:5432");
    let cluster =
        if local && machine.root { newest_cluster(Path::new("/etc/postgresql")) } else { None };
    let fix = match cluster {
        Some(version) => Fix::StartPostgres { version, addr },
        None => Fix::Manual(pg::pg_unreachable(&addr, &url)),
    };
    Ok(Probe::Missing(found, fix))
}

/// A TCP connection to `host:port` succeeds.
fn answers(addr: &str) -> bool {
    let Ok(addrs) = addr.to_socket_addrs() else {
        return false;
    };
    addrs.into_iter().any(|a| TcpStream::connect_timeout(&a, Duration::from_secs(2)).is_ok())
}

/// The highest `<version>` with a `main` cluster under /etc/postgresql (Debian's layout).
fn newest_cluster(etc: &Path) -> Option<String> {
    let versions = std::fs::read_dir(etc).ok()?.filter_map(|entry| {
        let entry = entry.ok()?;
        let name = entry.file_name().into_string().ok()?;
        entry.path().join("main").is_dir().then_some(name)
    });
    versions.max_by_key(|v| version_key(v))
}

/// `15` < `9.6` by text, not by number: compare the numeric parts.
fn version_key(v: &str) -> Vec<u64> {
    v.split('.').map(|p| p.parse().unwrap_or(0)).collect()
}

#[cfg(test)]
mod tests {
    use super::{Fix, chromium_fix, is_version, newest_cluster, version_key};
    use crate::util::show;

    #[test]
    fn chromium_is_installed_by_root_and_named_to_others() {
        let Fix::Run { cmds, .. } = chromium_fix(true, true) else {
            panic!("root with apt-get installs Chromium itself");
        };
        let shown: Vec<String> = cmds.iter().map(show).collect();
        assert_eq!(
            shown,
            [
                "apt-get update",
                "DEBIAN_FRONTEND=noninteractive apt-get install -y chromium chromium-driver"
            ]
        );
        let Fix::Manual(what) = chromium_fix(false, true) else {
            panic!("a non-root user is told the command");
        };
        assert!(what.contains("`sudo apt-get install -y chromium chromium-driver`"), "{what}");
        assert!(matches!(chromium_fix(true, false), Fix::Manual(_)));
    }

    #[test]
    fn version_lines() {
        assert!(is_version("cargo-deny 0.20.2", "cargo-deny", "0.20.2"));
        assert!(is_version("cargo-deny 0.20.2 (abc 2026-01-01)", "cargo-deny", "0.20.2"));
        assert!(!is_version("cargo-deny 0.20.21", "cargo-deny", "0.20.2"));
        assert!(!is_version("cargo-deny 0.19.0", "cargo-deny", "0.20.2"));
        assert!(!is_version("", "cargo-deny", "0.20.2"));
    }

    #[test]
    fn newest_postgres_cluster() {
        assert!(version_key("15") > version_key("9.6"));
        let dir = std::env::temp_dir().join(format!("xtask-pg-{}", std::process::id()));
        for v in ["9.6", "15", "16"] {
            std::fs::create_dir_all(dir.join(v).join("main")).unwrap();
        }
        // A version folder without a `main` cluster does not count.
        std::fs::create_dir_all(dir.join("17")).unwrap();
        assert_eq!(newest_cluster(&dir).as_deref(), Some("16"));
        std::fs::remove_dir_all(&dir).unwrap();
        assert_eq!(newest_cluster(&dir), None);
    }
}
