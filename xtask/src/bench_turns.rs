//! `cargo xtask bench turns [--baseline <rev>] [-- parts...]`: what a turn costs the release
//! binary, as ONE Markdown table on stdout (`llooma-e2e`'s `turns` bench, which documents each
//! row), with row 6 (our MCP client's `tools/call` against a bare rmcp client) measured by
//! `llooma-mcp-client`'s `call_ratio` bench and handed to it.
//!
//! With `--baseline <rev>` the same rows run on that revision's binary too, alternating with the
//! current one turn by turn, and the table gets a column for each and their ratio. The
//! revision is checked out with `git worktree add --detach` into
//! `<target>/bench-baseline/src-<sha>` and built in release with
//! `CARGO_TARGET_DIR=<target>/bench-baseline/target` (dependencies build once for every
//! baseline); the binary is kept as `<target>/bench-baseline/llooma-<sha>` and reused. The
//! current `call_ratio` bench is copied into that worktree, so both sides are measured the same
//! way (when it does not build against the baseline's client, row 6 has no baseline figures).
//!
//! Arguments after `--` go to the bench: the parts to run (start, plain, gateway, everything,
//! bot, concurrent, fan-out, fan-out-spread, idle-tabs, media, mcp-client; default all).

use std::path::{Path, PathBuf};
use std::process::Command;

use anyhow::{Context, Result, bail};

use crate::layering::Workspace;
use crate::util::{Ctx, output, run};

/// Runs of the `call_ratio` bench per binary, alternating (each run is a few seconds).
const CALL_RUNS: usize = 3;
const CALL_BENCH: &str = "call_ratio";

pub fn turns(ctx: &Ctx, args: &[String]) -> Result<()> {
    let (baseline_rev, passthrough) = split_baseline(args)?;
    run(&mut ctx.cargo(["build", "--release", "-p", "llooma-server"]))?;
    let ws = Workspace::load(ctx)?;
    let current = ws.target_dir.join("release").join(exe("llooma"));
    let baseline =
        baseline_rev.as_deref().map(|rev| Baseline::prepare(ctx, &ws, rev)).transpose()?;
    let peers = crate::ci::install_peers(ctx)?;

    // Row 6: built first, then run alternately (unless the parts asked for leave it out).
    let wants_call = passthrough.is_empty() || passthrough.iter().any(|p| p == "mcp-client");
    let mut current_lines = Vec::new();
    let mut baseline_lines = Vec::new();
    if wants_call {
        call_rows(ctx, baseline.as_ref(), &mut current_lines, &mut baseline_lines)?;
    }

    let mut cmd = ctx.cargo(["bench", "-p", "llooma-e2e", "--bench", "turns"]);
    cmd.env("LLOOMA_BIN", &current)
        .env("LLOOMA_BENCH_MCP_CALL", current_lines.join(";"))
        .envs(peers.iter().map(|(k, v)| (k.as_str(), v.as_str())));
    if let Some(b) = &baseline {
        cmd.env("LLOOMA_BIN_BASELINE", &b.bin)
            .env("LLOOMA_BASELINE_REV", b.rev.as_str())
            .env("LLOOMA_BENCH_MCP_CALL_BASELINE", baseline_lines.join(";"));
    }
    if !passthrough.is_empty() {
        cmd.arg("--").args(passthrough);
    }
    run(&mut cmd)
}

/// Builds and runs the `call_ratio` bench, alternating between the binaries: its lines.
fn call_rows(
    ctx: &Ctx,
    baseline: Option<&Baseline>,
    current_lines: &mut Vec<String>,
    baseline_lines: &mut Vec<String>,
) -> Result<()> {
    let current_call = call_bench(ctx, &ctx.root, None)?;
    let baseline_call = match baseline {
        Some(b) => match b.call_bench(ctx) {
            Ok(path) => Some(path),
            Err(err) => {
                eprintln!("xtask: no baseline figures for the MCP client row: {err:#}");
                None
            }
        },
        None => None,
    };
    for _ in 0..CALL_RUNS {
        if let Some(path) = &baseline_call {
            baseline_lines.push(run_call_bench(path)?);
        }
        current_lines.push(run_call_bench(&current_call)?);
    }
    Ok(())
}

/// `--baseline <rev>` (or `--baseline=<rev>`) taken out of the arguments.
fn split_baseline(args: &[String]) -> Result<(Option<String>, Vec<String>)> {
    let mut rest = Vec::new();
    let mut baseline = None;
    let mut args = args.iter();
    while let Some(arg) = args.next() {
        if arg == "--baseline" {
            match args.next() {
                Some(rev) => baseline = Some(rev.clone()),
                None => bail!("--baseline needs a git revision (e.g. --baseline main)"),
            }
        } else if let Some(rev) = arg.strip_prefix("--baseline=") {
            baseline = Some(rev.to_owned());
        } else {
            rest.push(arg.clone());
        }
    }
    Ok((baseline, rest))
}

fn exe(name: &str) -> String {
    format!("{name}{}", std::env::consts::EXE_SUFFIX)
}

/// A revision's release binary, built in its own worktree.
struct Baseline {
    /// As given on the command line (for the table's header).
    rev: String,
    src: PathBuf,
    target: PathBuf,
    bin: PathBuf,
}

impl Baseline {
    fn prepare(ctx: &Ctx, ws: &Workspace, rev: &str) -> Result<Baseline> {
        let sha = output(Command::new("git").current_dir(&ctx.root).args([
            "rev-parse",
            "--verify",
            "--quiet",
            &format!("{rev}^{{commit}}"),
        ]))
        .with_context(|| format!("`{rev}` is not a commit of this repository"))?
        .trim()
        .to_owned();
        let short = sha.get(..12).unwrap_or(&sha);
        let dir = ws.target_dir.join("bench-baseline");
        let src = dir.join(format!("src-{short}"));
        let target = dir.join("target");
        let bin = dir.join(exe(&format!("llooma-{short}")));
        if !src.join(".git").exists() {
            if src.exists() {
                // Left by an attempt that did not finish; it is ours (under target/).
                std::fs::remove_dir_all(&src)
                    .with_context(|| format!("removing {}", src.display()))?;
            }
            run(Command::new("git").current_dir(&ctx.root).args(["worktree", "prune"]))?;
            run(Command::new("git")
                .current_dir(&ctx.root)
                .args(["worktree", "add", "--detach"])
                .arg(&src)
                .arg(&sha))?;
        }
        if bin.exists() {
            eprintln!("xtask: baseline {rev} ({short}): reusing {}", bin.display());
        } else {
            run(Command::new(&ctx.cargo)
                .current_dir(&src)
                .env("CARGO_TARGET_DIR", &target)
                .args(["build", "--release", "-p", "llooma-server"]))?;
            let built = target.join("release").join(exe("llooma"));
            std::fs::copy(&built, &bin)
                .with_context(|| format!("copying {} to {}", built.display(), bin.display()))?;
        }
        Ok(Baseline { rev: rev.to_owned(), src, target, bin })
    }

    /// The current `call_ratio` bench, built in the baseline's worktree against its client.
    fn call_bench(&self, ctx: &Ctx) -> Result<PathBuf> {
        let crate_dir = self.src.join("crates/llooma-mcp-client");
        if !crate_dir.is_dir() {
            bail!("the baseline has no crates/llooma-mcp-client");
        }
        std::fs::create_dir_all(crate_dir.join("benches/common"))?;
        // The bench and the server it calls (shared with the crate's other benches).
        for file in [format!("benches/{CALL_BENCH}.rs"), "benches/common/adder.rs".to_owned()] {
            std::fs::copy(
                ctx.root.join("crates/llooma-mcp-client").join(&file),
                crate_dir.join(&file),
            )
            .with_context(|| format!("copying {file} into the baseline's worktree"))?;
        }
        let manifest = crate_dir.join("Cargo.toml");
        let text = std::fs::read_to_string(&manifest)?;
        if !text.contains(&format!("name = \"{CALL_BENCH}\"")) {
            let entry = format!(
                "\n# Added by `cargo xtask bench turns --baseline`.\n[[bench]]\nname = \"{CALL_BENCH}\"\nharness = false\n"
            );
            std::fs::write(&manifest, text + &entry)?;
        }
        call_bench(ctx, &self.src, Some(&self.target))
    }
}

/// Builds the `call_ratio` bench of the workspace at `root` and returns its executable.
fn call_bench(ctx: &Ctx, root: &Path, target: Option<&Path>) -> Result<PathBuf> {
    let mut cmd = Command::new(&ctx.cargo);
    cmd.current_dir(root).args([
        "bench",
        "-p",
        "llooma-mcp-client",
        "--bench",
        CALL_BENCH,
        "--no-run",
        "--message-format=json-render-diagnostics",
    ]);
    if let Some(target) = target {
        cmd.env("CARGO_TARGET_DIR", target);
    }
    let printed = output(&mut cmd)?;
    printed
        .lines()
        .filter_map(|l| serde_json::from_str::<serde_json::Value>(l).ok())
        .filter(|m| m["reason"] == "compiler-artifact" && m["target"]["name"] == CALL_BENCH)
        .find_map(|m| m["executable"].as_str().map(PathBuf::from))
        .with_context(|| format!("cargo built no `{CALL_BENCH}` executable in {}", root.display()))
}

/// Runs the bench once; its `call_ratio ...` line.
fn run_call_bench(path: &Path) -> Result<String> {
    let printed = output(Command::new(path).arg("--bench"))?;
    printed
        .lines()
        .find(|l| l.starts_with("call_ratio "))
        .map(str::to_owned)
        .with_context(|| format!("{} printed no `call_ratio` line", path.display()))
}
