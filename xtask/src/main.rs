//! `cargo xtask <cmd>`: the one entry point for developer automation.
//!
//! Every subcommand shells out to `cargo` (and `git`) with `std::process::Command`; output goes to
//! stderr so that `cargo xtask ... | ...` pipes stay clean.

mod bench;
mod bench_bots;
mod bench_server;
mod ci;
mod deny;
mod dist;
mod layering;
mod pg;
mod setup;
mod util;
mod web;

use std::process::ExitCode;

use anyhow::{Result, bail};

use crate::util::Ctx;

const USAGE: &str = "\
usage: cargo xtask <command> [args]

commands:
  ci                 everything CI runs, in order, failing fast: set-up (below), fmt, clippy,
                     cargo-deny, layering checks, then tests (nextest on SQLite and on Postgres,
                     doc tests)
  setup              install what `ci` needs and this machine lacks (rustfmt, clippy,
                     cargo-deny, cargo-nextest, the wasm32 target; as root also Chromium and
                     chromedriver with apt-get, and start the local Postgres); names the exact
                     command for what it cannot do itself. Installs nothing when all is there
  run [args...]      build the web interface, then build and run the server:
                     `cargo run -p llooma-server -- serve [args...]`
  build-web          build the web interface's browser part (wasm) into <target>/web/pkg
  dist               what people download: the server (profile `dist`: no debug information,
                     stripped) and the browser part in <target>/dist-archive/llooma-*.tar.gz;
                     fails when the binary is over 40 MB
  bench [group...] [-- cargo-bench-args...]
                     run benchmark groups (default: all); groups: see `cargo xtask bench --list`
  fake-model [args]  an OpenAI-compatible model server that echoes (or follows a script), to try
                     Llooma with no provider: `cargo xtask fake-model --port 8090`
  conformance        the official MCP conformance suite (client scenarios initialize,
                     tools_call, sse-retry, elicitation-sep1034-client-defaults)
                     against our MCP client
  deny-db            prepare the offline RustSec advisory database from ../shared/advisory-db
  deny               `cargo deny check` (installs cargo-deny if missing): offline with deny-db
                     when ../shared/advisory-db exists, else cargo-deny fetches the database
  layering [--write] only the layering checks (which crate may depend on what, and that
                     ARCHITECTURE.md's crate graph is true); --write rewrites that graph
  help               this text

environment:
  LLOOMA_SHARED_DIR    shared read-only material (default: <workspace>/../shared)
  LLOOMA_CHROMIUM, LLOOMA_CHROMEDRIVER
                       the browser tests' Chromium and chromedriver
                       (default: /usr/bin/chromium, /usr/bin/chromedriver)
  LLOOMA_TEST_PG_URL   Postgres server URL for the Postgres test run
                       (default: postgres://postgres@127.0.0.1:5432)
";

fn main() -> ExitCode {
    let args: Vec<String> = std::env::args().skip(1).collect();
    match dispatch(&args) {
        Ok(()) => ExitCode::SUCCESS,
        Err(err) => {
            eprintln!("\nxtask: error: {err:#}");
            ExitCode::FAILURE
        }
    }
}

fn dispatch(args: &[String]) -> Result<()> {
    let Some((cmd, rest)) = args.split_first() else {
        eprint!("{USAGE}");
        bail!("no command given");
    };
    let ctx = Ctx::new()?;
    match cmd.as_str() {
        "ci" => {
            if !rest.is_empty() {
                bail!("`cargo xtask ci` takes no arguments (it is exactly what CI runs)");
            }
            ci::ci(&ctx)
        }
        "run" => {
            web::build_web(&ctx)?;
            ci::run_server(&ctx, rest)
        }
        "build-web" => web::build_web(&ctx).map(|_| ()),
        "dist" => dist::dist(&ctx),
        "bench" => bench::bench(&ctx, rest),
        "conformance" => ci::conformance(&ctx),
        "fake-model" => {
            let mut cmd = ctx.cargo(["run", "--quiet", "-p", "llooma-fake-model", "--"]);
            cmd.args(rest);
            util::run(&mut cmd)
        }
        "setup" => {
            if !rest.is_empty() {
                bail!("`cargo xtask setup` takes no arguments");
            }
            setup::setup(&ctx)
        }
        "deny-db" => deny::prepare_db(&ctx).map(|_| ()),
        "deny" => deny::check(&ctx),
        "layering" => match rest {
            [] => layering::check(&ctx),
            [flag] if flag == "--write" => layering::write_graph(&ctx),
            _ => bail!("`cargo xtask layering` takes only `--write`"),
        },
        "help" | "-h" | "--help" => {
            eprint!("{USAGE}");
            Ok(())
        }
        other => {
            eprint!("{USAGE}");
            bail!("unknown command `{other}`")
        }
    }
}
