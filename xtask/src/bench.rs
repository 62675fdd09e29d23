//! `cargo xtask bench [group...] [-- args...]`: benchmark groups.
//!
//! Extension point: one function per group, listed in `GROUPS`. A group gets the context and the
//! arguments after `--`. To add one (e.g. the server benchmark: start-to-ready time, idle RSS,
//! logins/s), write `fn server(ctx: &Ctx, args: &[String]) -> Result<()>` and add a line to
//! `GROUPS`; `cargo xtask bench server` then runs it, and `cargo xtask bench` runs it with the rest.

use anyhow::{Result, bail};

use crate::layering::Workspace;
use crate::util::{Ctx, Steps, fmt_duration, run};

type Group = fn(&Ctx, &[String]) -> Result<()>;

/// (name, what it measures, function).
const GROUPS: &[(&str, &str, Group)] = &[
    (
        "server",
        "the release binary: start to ready, idle resident memory, sign-ins per second",
        crate::bench_server::server,
    ),
    (
        "turns",
        "the release binary running turns: per-turn overhead with one MCP call, SSE fan-out to 1,000 tabs",
        turns,
    ),
    (
        "criterion",
        "`cargo bench -p <crate>` for every workspace crate with bench targets (benches/)",
        criterion,
    ),
];

pub fn bench(ctx: &Ctx, args: &[String]) -> Result<()> {
    let (names, passthrough) = match args.iter().position(|a| a == "--") {
        Some(i) => (&args[..i], &args[i + 1..]),
        None => (args, &[][..]),
    };
    if names.iter().any(|n| n == "--list") {
        for (name, what, _) in GROUPS {
            eprintln!("{name:<12} {what}");
        }
        return Ok(());
    }
    let mut chosen = Vec::new();
    for name in names {
        match GROUPS.iter().find(|(n, _, _)| n == name) {
            Some(group) => chosen.push(group),
            None => {
                let known: Vec<_> = GROUPS.iter().map(|(n, _, _)| *n).collect();
                bail!("unknown bench group `{name}`; known groups: {}", known.join(", "));
            }
        }
    }
    if chosen.is_empty() {
        chosen = GROUPS.iter().collect();
    }
    let mut steps = Steps::new();
    for (name, _, group) in chosen {
        steps.step(&format!("bench group `{name}`"), || group(ctx, passthrough))?;
    }
    steps.print_table();
    eprintln!("\nxtask bench: {} group(s) done in {}", steps.count(), fmt_duration(steps.total()));
    Ok(())
}

/// Criterion (or any `harness = false`) benches: one `cargo bench -p <crate>` per crate that has
/// bench targets, so a crate without benches costs nothing.
fn criterion(ctx: &Ctx, args: &[String]) -> Result<()> {
    let ws = Workspace::load(ctx)?;
    // The end-to-end crate's benches drive the release binary: they are their own groups.
    let with_benches: Vec<_> =
        ws.members.iter().filter(|m| !m.benches.is_empty() && m.name != "llooma-e2e").collect();
    if with_benches.is_empty() {
        eprintln!("no workspace crate has bench targets yet (add `benches/*.rs` to a crate)");
        return Ok(());
    }
    for m in with_benches {
        eprintln!("{}: benches {}", m.name, m.benches.join(", "));
        // `--benches`: only the bench targets, not the lib's libtest harness in bench mode.
        let mut cmd = ctx.cargo(["bench", "-p", &m.name, "--benches"]);
        if !args.is_empty() {
            cmd.arg("--").args(args);
        }
        run(&mut cmd)?;
    }
    Ok(())
}

/// `cargo xtask bench turns`: `llooma-e2e`'s `turns` bench against the release binary, with
/// the MCP peers installed.
fn turns(ctx: &Ctx, args: &[String]) -> Result<()> {
    run(&mut ctx.cargo(["build", "--release", "-p", "llooma-server"]))?;
    let peers = crate::ci::install_peers(ctx)?;
    let binary = ctx.root.join("target").join("release").join("llooma");
    let mut cmd = ctx.cargo(["bench", "-p", "llooma-e2e", "--bench", "turns"]);
    cmd.env("LLOOMA_BIN", &binary).envs(peers.iter().map(|(k, v)| (k.as_str(), v.as_str())));
    if !args.is_empty() {
        cmd.arg("--").args(args);
    }
    run(&mut cmd)
}
