//! `cargo xtask dist`: what people download. The server built with the `dist` profile (the
//! release build without debug information, symbols stripped) and the browser part, laid out as
//! the binary finds its files by default, in one `.tar.gz`:
//!
//! ```text
//! llooma-<version>-<target>/
//!   bin/llooma          the server (`llooma serve`, `llooma admin ...`)
//!   web/pkg/...         the browser part; the binary looks for it at ../web/pkg by default
//!   README.md, LICENSE-NOTICE (what the archive is, where the docs are)
//! ```

use std::path::Path;
use std::process::Command;
use std::time::Instant;

use anyhow::{Context, Result, bail};

use crate::layering::Workspace;
use crate::util::{Ctx, fmt_duration, run};

/// The ceiling the downloadable binary is held to (the issue that asked for it: under 40 MB).
const MAX_BINARY_BYTES: u64 = 40 * 1000 * 1000;

pub fn dist(ctx: &Ctx) -> Result<()> {
    let started = Instant::now();
    let ws = Workspace::load(ctx)?;
    run(&mut ctx.cargo(["build", "--profile", "dist", "-p", "llooma-server"]))
        .context("building the server with the dist profile failed")?;
    let pkg = crate::web::build_web(ctx)?;
    let binary = ws.target_dir.join("dist").join("llooma");
    let binary_bytes = std::fs::metadata(&binary)
        .with_context(|| format!("{} was not built", binary.display()))?
        .len();
    let version = env!("CARGO_PKG_VERSION");
    let target = host_target()?;
    let name = format!("llooma-{version}-{target}");
    let root = ws.target_dir.join("dist-archive").join(&name);
    if root.exists() {
        std::fs::remove_dir_all(&root).with_context(|| format!("clearing {}", root.display()))?;
    }
    let bin_dir = root.join("bin");
    let web_dir = root.join("web").join("pkg");
    std::fs::create_dir_all(&bin_dir)?;
    std::fs::create_dir_all(&web_dir)?;
    std::fs::copy(&binary, bin_dir.join("llooma"))
        .with_context(|| format!("copying {}", binary.display()))?;
    for entry in std::fs::read_dir(&pkg).with_context(|| format!("reading {}", pkg.display()))? {
        let path = entry?.path();
        if let Some(file) = path.file_name() {
            std::fs::copy(&path, web_dir.join(file))
                .with_context(|| format!("copying {}", path.display()))?;
        }
    }
    std::fs::write(root.join("README.md"), archive_readme(&name))?;
    let archive = ws.target_dir.join("dist-archive").join(format!("{name}.tar.gz"));
    run(Command::new("tar")
        .arg("-czf")
        .arg(&archive)
        .arg("-C")
        .arg(root.parent().unwrap_or(Path::new(".")))
        .arg(&name))
    .context("packing the archive with tar failed")?;
    let archive_bytes = std::fs::metadata(&archive)?.len();
    eprintln!(
        "dist: {} ({:.1} MB; the binary {:.1} MB) in {}",
        archive.display(),
        archive_bytes as f64 / 1e6,
        binary_bytes as f64 / 1e6,
        fmt_duration(started.elapsed())
    );
    if binary_bytes > MAX_BINARY_BYTES {
        bail!(
            "the binary is {:.1} MB, over the {:.0} MB the download is held to: look at what \
             grew (`cargo bloat --profile dist -p llooma-server`, if installed)",
            binary_bytes as f64 / 1e6,
            MAX_BINARY_BYTES as f64 / 1e6
        );
    }
    Ok(())
}

/// The host's target triple, from `rustc -vV`.
fn host_target() -> Result<String> {
    let output = Command::new("rustc").arg("-vV").output().context("running rustc -vV")?;
    let text = String::from_utf8_lossy(&output.stdout);
    text.lines()
        .find_map(|line| line.strip_prefix("host: "))
        .map(str::to_owned)
        .context("rustc -vV named no host target")
}

fn archive_readme(name: &str) -> String {
    format!(
        "# {name}\n\n\
         Llooma, a self-hosted, multi-account LLM chat server.\n\n\
         Run it with `bin/llooma serve` (SQLite in `./data`, listening on \
         http://127.0.0.1:8080); `bin/llooma --help` lists the other commands. The browser part \
         is in `web/pkg`, where the binary looks for it; keep the two folders together, or point \
         `LLOOMA_WEB_DIR` at `web/pkg`.\n\n\
         Settings, operations and the HTTP API are documented in the project's README.md and \
         docs/ folder.\n"
    )
}
