//! `cargo xtask build-web`: the web interface's browser part.
//!
//! `llooma-web` compiled for `wasm32-unknown-unknown` with its `hydrate` feature (as a cdylib,
//! size-tuned `wasm-release` profile), then wasm-bindgen run as a library (pinned `=` to the
//! `wasm-bindgen` in Cargo.lock, so the two cannot disagree). Output: `<target>/web/pkg/`
//! (`llooma_web.js`, `llooma_web_bg.wasm`), where the `llooma` binary of the same target folder
//! looks by default.

use std::path::PathBuf;
use std::process::Command;
use std::time::Instant;

use anyhow::{Context, Result};

use crate::layering::Workspace;
use crate::util::{Ctx, fmt_duration, run};

const TARGET: &str = crate::setup::WASM_TARGET;
/// npm's binaryen. Not Debian's (version 108): its output breaks hydration at run time.
const BINARYEN: &str = "132";

/// `LLOOMA_WASM_OPT`, else npm's binaryen in `<target>/web-tools` (installed there on first use
/// when npm is on PATH); None when neither can be had.
fn wasm_opt(ctx: &Ctx, target_dir: &std::path::Path) -> Option<PathBuf> {
    if let Some(path) = std::env::var_os("LLOOMA_WASM_OPT") {
        return Some(PathBuf::from(path));
    }
    let tools = target_dir.join("web-tools");
    let tool = tools.join("node_modules/.bin/wasm-opt");
    if !tool.exists() {
        let _ = std::fs::create_dir_all(&tools);
        let installed = Command::new("npm")
            .args(["install", "--no-audit", "--no-fund", "--silent", "--prefix"])
            .arg(&tools)
            .arg(format!("binaryen@{BINARYEN}"))
            .current_dir(&ctx.root)
            .status()
            .is_ok_and(|s| s.success());
        if !installed {
            return None;
        }
    }
    tool.exists().then_some(tool)
}

/// Builds the browser part; returns the folder it wrote.
pub fn build_web(ctx: &Ctx) -> Result<PathBuf> {
    let started = Instant::now();
    // The first time, this adds the target with rustup.
    crate::setup::ensure(ctx, &[crate::setup::WASM])?;
    let ws = Workspace::load(ctx)?;
    run(&mut ctx.cargo([
        "rustc",
        "--quiet",
        "-p",
        "llooma-web",
        "--lib",
        "--crate-type",
        "cdylib",
        "--target",
        TARGET,
        "--profile",
        "wasm-release",
        "--no-default-features",
        "--features",
        "hydrate",
    ]))
    .context("compiling the web interface for the browser failed")?;
    let wasm = ws.target_dir.join(TARGET).join("wasm-release").join("llooma_web.wasm");
    let out = ws.target_dir.join("web").join("pkg");
    std::fs::create_dir_all(&out).with_context(|| format!("creating {}", out.display()))?;
    wasm_bindgen_cli_support::Bindgen::new()
        .input_path(&wasm)
        .web(true)
        .context("choosing wasm-bindgen's `web` output")?
        .typescript(false)
        .generate(&out)
        .with_context(|| format!("wasm-bindgen on {}", wasm.display()))?;
    let bg = out.join("llooma_web_bg.wasm");
    match wasm_opt(ctx, &ws.target_dir) {
        Some(tool) => {
            let before = std::fs::metadata(&bg).map(|m| m.len()).unwrap_or(0);
            let mut cmd = Command::new(&tool);
            cmd.arg("-Oz")
                .args(["--enable-bulk-memory", "--enable-nontrapping-float-to-int"])
                .args(["--enable-sign-ext", "--enable-mutable-globals"])
                .arg(&bg)
                .arg("-o")
                .arg(&bg);
            run(&mut cmd).context("wasm-opt failed on the browser part")?;
            let after = std::fs::metadata(&bg).map(|m| m.len()).unwrap_or(0);
            eprintln!("build-web: wasm-opt -Oz: {} KiB -> {} KiB", before / 1024, after / 1024);
        }
        None => eprintln!(
            "build-web: note: wasm-opt not found (npm was not usable), so the browser part is \
             larger than it needs to be; `npm install --prefix <target>/web-tools \
             binaryen@{BINARYEN}` or set LLOOMA_WASM_OPT"
        ),
    }
    // Gzipped siblings, which the server sends to browsers that accept them.
    for name in ["llooma_web_bg.wasm", "llooma_web.js"] {
        let zipped =
            Command::new("gzip").args(["-9", "-k", "-f", "-n"]).arg(out.join(name)).status();
        if !zipped.is_ok_and(|s| s.success()) {
            let _ = std::fs::remove_file(out.join(format!("{name}.gz")));
            eprintln!("build-web: note: gzip is not usable; the files are served uncompressed");
            break;
        }
    }
    let size = |name: &str| std::fs::metadata(out.join(name)).map(|m| m.len()).unwrap_or(0);
    eprintln!(
        "build-web: {} (wasm {} KiB, gzipped {} KiB; js {} KiB, gzipped {} KiB) in {}",
        out.display(),
        size("llooma_web_bg.wasm") / 1024,
        size("llooma_web_bg.wasm.gz") / 1024,
        size("llooma_web.js") / 1024,
        size("llooma_web.js.gz") / 1024,
        fmt_duration(started.elapsed())
    );
    Ok(out)
}
