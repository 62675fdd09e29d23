//! `cargo xtask bench bots`: the release `llooma` binary polling 200 bot integrations every five
//! seconds against the fake Chatto server (CPU, memory), and the time from a notification to the
//! posted answer with model time excluded.
//!
//! The driver is the example `bots_bench` of `llooma-e2e` (it needs the fakes, which are Rust
//! libraries); it prints the figures. Arguments after `--` are not used; set `BENCH_BOTS`,
//! `BENCH_SECS` or `BENCH_QUESTIONS` to change the load.

use anyhow::Result;

use crate::layering::Workspace;
use crate::util::{Ctx, run};

pub fn bots(ctx: &Ctx, _args: &[String]) -> Result<()> {
    run(&mut ctx.cargo(["build", "--release", "-p", "llooma-server"]))?;
    let target = Workspace::load(ctx)?.target_dir;
    let binary = target.join("release").join("llooma");
    let mut driver = ctx.cargo(["run", "-p", "llooma-e2e", "--example", "bots_bench"]);
    driver.env("LLOOMA_BIN", &binary);
    run(&mut driver)
}
