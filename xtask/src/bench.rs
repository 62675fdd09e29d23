//! `cargo xtask bench [group...] [-- args...]`: benchmark groups.
//!
//! Extension point: one function per group, listed in `GROUPS`. A group gets the context and the
//! arguments after `--`. To add one (e.g. the server benchmark: start-to-ready time, idle RSS,
//! logins/s), write `fn server(ctx: &Ctx, args: &[String]) -> Result<()>` and add a line to
//! `GROUPS`; `cargo xtask bench server` then runs it, and `cargo xtask bench` runs it with the rest.
//!
//! `--baseline <rev>` (turns only): the same rows on that revision's binary too, alternating, in
//! columns side by side (`bench_turns.rs`).

use anyhow::{Result, bail};

use crate::layering::Workspace;
use crate::util::{Ctx, Steps, fmt_duration, run};

// Declared here rather than in main.rs: the `turns` group lives in its own file.
#[path = "bench_turns.rs"]
mod turns;

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
        "the release binary running turns: one table of wall and server CPU per turn (plain, MCP, \
         card, bot, 100 at once, MCP client vs rmcp, 1,000 tabs); --baseline <rev> adds a column",
        turns::turns,
    ),
    (
        "bots",
        "the release binary polling 200 bot integrations every 5 s: CPU, memory, notification to post",
        crate::bench_bots::bots,
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
    // `--baseline <rev>` belongs to the turns group: handed to it in front of its arguments.
    let mut names = names.to_vec();
    let mut passthrough = passthrough.to_vec();
    if let Some(i) = names.iter().position(|n| n == "--baseline" || n.starts_with("--baseline=")) {
        let mut flag = vec![names.remove(i)];
        if flag[0] == "--baseline" {
            if i >= names.len() {
                bail!("--baseline needs a git revision (e.g. --baseline main)");
            }
            flag.push(names.remove(i));
        }
        if names.iter().any(|n| n != "turns") {
            bail!(
                "--baseline applies to the `turns` group only: cargo xtask bench turns --baseline <rev>"
            );
        }
        names = vec!["turns".to_owned()];
        flag.extend(passthrough);
        passthrough = flag;
    }
    if names.iter().any(|n| n == "--list") {
        for (name, what, _) in GROUPS {
            eprintln!("{name:<12} {what}");
        }
        return Ok(());
    }
    let mut chosen = Vec::new();
    for name in &names {
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
        steps.step(&format!("bench group `{name}`"), || group(ctx, &passthrough))?;
    }
    steps.print_table();
    eprintln!("\nxtask bench: {} group(s) done in {}", steps.count(), fmt_duration(steps.total()));
    Ok(())
}

/// Features a crate's bench targets need: (crate, features).
const BENCH_FEATURES: &[(&str, &str)] = &[("llooma-web", "ssr")];

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
        // Crates whose benches need a feature (`required-features` in their manifest).
        if let Some((_, features)) = BENCH_FEATURES.iter().find(|(name, _)| *name == m.name) {
            cmd.args(["--features", features]);
        }
        if !args.is_empty() {
            cmd.arg("--").args(args);
        }
        run(&mut cmd)?;
    }
    Ok(())
}
