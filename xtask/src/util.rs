//! Running commands, timing steps, finding the workspace.

use std::ffi::{OsStr, OsString};
use std::path::{Path, PathBuf};
use std::process::Command;
use std::time::{Duration, Instant};

use anyhow::{Context, Result, bail};

/// Where things are. Built once per invocation.
#[derive(Debug)]
pub struct Ctx {
    /// The workspace root (the directory holding the virtual manifest).
    pub root: PathBuf,
    /// The `cargo` that runs us (`$CARGO`), so a pinned toolchain stays pinned.
    pub cargo: OsString,
}

impl Ctx {
    pub fn new() -> Result<Self> {
        let manifest_dir = Path::new(env!("CARGO_MANIFEST_DIR"));
        let root = manifest_dir
            .parent()
            .with_context(|| format!("{} has no parent directory", manifest_dir.display()))?
            .to_path_buf();
        let cargo = std::env::var_os("CARGO").unwrap_or_else(|| OsString::from("cargo"));
        Ok(Self { root, cargo })
    }

    /// `cargo <args>` with the workspace root as working directory.
    pub fn cargo<I, S>(&self, args: I) -> Command
    where
        I: IntoIterator<Item = S>,
        S: AsRef<OsStr>,
    {
        let mut cmd = Command::new(&self.cargo);
        cmd.args(args).current_dir(&self.root);
        cmd
    }

    /// Where the shared read-only material is looked for: `$LLOOMA_SHARED_DIR`, else
    /// `<root>/../shared` (which need not exist: a plain clone of the project has none).
    pub fn shared_dir_path(&self) -> PathBuf {
        match std::env::var_os("LLOOMA_SHARED_DIR") {
            Some(dir) => PathBuf::from(dir),
            None => self.root.join("..").join("shared"),
        }
    }

    /// The shared read-only material ([`Self::shared_dir_path`]); an error if it is not there.
    pub fn shared_dir(&self) -> Result<PathBuf> {
        let dir = self.shared_dir_path();
        if !dir.is_dir() {
            bail!(
                "shared directory {} not found; it is expected beside the repository \
                 (<repo>/../shared), or set LLOOMA_SHARED_DIR to its path",
                dir.display()
            );
        }
        Ok(dir)
    }
}

/// Renders a command the way a person would type it (for logs and error messages).
pub fn show(cmd: &Command) -> String {
    let mut out = String::new();
    for (key, val) in cmd.get_envs() {
        if let Some(val) = val {
            out.push_str(&format!("{}={} ", key.to_string_lossy(), val.to_string_lossy()));
        }
    }
    let program = cmd.get_program().to_string_lossy();
    // `$CARGO` is an absolute path into the toolchain; `cargo` reads better.
    let program = if Path::new(program.as_ref()).file_stem() == Some(OsStr::new("cargo")) {
        "cargo".into()
    } else {
        program
    };
    out.push_str(&program);
    for arg in cmd.get_args() {
        let arg = arg.to_string_lossy();
        if arg.is_empty() || arg.contains([' ', '"', '\'', '$', '{']) {
            out.push_str(&format!(" '{arg}'"));
        } else {
            out.push(' ');
            out.push_str(&arg);
        }
    }
    out
}

/// Runs a command with inherited stdio; an error (with the command line) if it does not succeed.
pub fn run(cmd: &mut Command) -> Result<()> {
    let shown = show(cmd);
    eprintln!("$ {shown}");
    let status = cmd.status().with_context(|| format!("could not start `{shown}`"))?;
    if !status.success() {
        match status.code() {
            Some(code) => bail!("`{shown}` failed with exit code {code}"),
            None => bail!("`{shown}` was killed by a signal"),
        }
    }
    Ok(())
}

/// Runs a command and returns its stdout; stderr is passed through. Errors carry the command line.
pub fn output(cmd: &mut Command) -> Result<String> {
    let shown = show(cmd);
    let out = cmd
        .stderr(std::process::Stdio::inherit())
        .output()
        .with_context(|| format!("could not start `{shown}`"))?;
    if !out.status.success() {
        bail!("`{shown}` failed ({})", out.status);
    }
    String::from_utf8(out.stdout).with_context(|| format!("`{shown}` printed non-UTF-8 output"))
}

/// True if the program can be started at all (e.g. `cargo deny --version`).
pub fn works(cmd: &mut Command) -> bool {
    cmd.stdout(std::process::Stdio::null())
        .stderr(std::process::Stdio::null())
        .status()
        .is_ok_and(|s| s.success())
}

/// A sequence of named, timed steps that stops at the first failure.
#[derive(Debug, Default)]
pub struct Steps {
    done: Vec<(String, Duration)>,
    started: Option<Instant>,
}

impl Steps {
    pub fn new() -> Self {
        Self { done: Vec::new(), started: Some(Instant::now()) }
    }

    pub fn step(&mut self, name: &str, body: impl FnOnce() -> Result<()>) -> Result<()> {
        let n = self.done.len() + 1;
        eprintln!("\n==> [{n}] {name}");
        let start = Instant::now();
        let result = body();
        let took = start.elapsed();
        match result {
            Ok(()) => {
                eprintln!("<== [{n}] {name}: ok ({})", fmt_duration(took));
                self.done.push((name.to_owned(), took));
                Ok(())
            }
            Err(err) => {
                self.print_table();
                Err(err.context(format!("step [{n}] `{name}` failed after {}", fmt_duration(took))))
            }
        }
    }

    pub fn print_table(&self) {
        if self.done.is_empty() {
            return;
        }
        eprintln!("\nsteps passed:");
        for (name, took) in &self.done {
            eprintln!("  {:>8}  {name}", fmt_duration(*took));
        }
    }

    pub fn total(&self) -> Duration {
        self.started.map(|s| s.elapsed()).unwrap_or_default()
    }

    pub fn count(&self) -> usize {
        self.done.len()
    }
}

pub fn fmt_duration(d: Duration) -> String {
    let secs = d.as_secs();
    if secs >= 60 {
        format!("{}m{:02}s", secs / 60, secs % 60)
    } else {
        format!("{:.1}s", d.as_secs_f64())
    }
}
