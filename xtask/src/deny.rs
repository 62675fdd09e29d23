//! `cargo deny check` (licences, advisories, bans, sources), with the RustSec advisory database
//! from one of two sources:
//!
//! - the snapshot in `<shared>/advisory-db` when there is one (`../shared` beside the repository,
//!   or `LLOOMA_SHARED_DIR`; see `notes/ci-field-notes.md` there): no network needed. cargo-deny
//!   looks for the default database in `<db-path>/advisory-db-3157b0e258782691/` (the folder name
//!   it derives from the default URL) and wants a git checkout there. So we copy the snapshot in,
//!   make it a repository with one commit dated at the snapshot's date (so staleness is honest),
//!   and run `cargo deny --offline check`;
//! - otherwise (a plain clone of the project) cargo-deny fetches the database from GitHub itself,
//!   as it normally does, into the same folder: `cargo deny check`. A copy of the snapshot left
//!   there is removed first (it has no remote to fetch from, and cargo-deny would fail on it).

use std::fs;
use std::path::{Path, PathBuf};
use std::process::Command;

use anyhow::{Context, Result};

use crate::setup;
use crate::util::{Ctx, run};

/// Must match `[advisories] db-path` in deny.toml (relative to the workspace root).
const DB_PATH: &str = "target/advisory-db";
/// The folder cargo-deny derives from the default database URL (github.com/RustSec/advisory-db).
const DB_FOLDER: &str = "advisory-db-3157b0e258782691";

/// The offline database, ready for `cargo deny --offline check`.
pub struct Snapshot {
    /// Where it was copied from.
    pub src: PathBuf,
    /// The date in its SNAPSHOT.txt.
    pub date: String,
}

/// Prepares the offline database (idempotent) from `<shared>/advisory-db`.
pub fn prepare_db(ctx: &Ctx) -> Result<Snapshot> {
    let src = ctx.shared_dir()?.join("advisory-db");
    let snapshot_file = src.join("SNAPSHOT.txt");
    let snapshot = fs::read_to_string(&snapshot_file).with_context(|| {
        format!(
            "cannot read {}; the advisory snapshot is expected in <shared>/advisory-db",
            snapshot_file.display()
        )
    })?;
    let snapshot = snapshot.trim();
    let date = snapshot_date(snapshot)
        .with_context(|| {
            format!("no date (YYYY-MM-DD) found in {}: {snapshot:?}", snapshot_file.display())
        })?
        .to_owned();
    let prepared = Snapshot { src: src.clone(), date: date.clone() };

    let db_root = ctx.root.join(DB_PATH);
    let dest = db_root.join(DB_FOLDER);
    let stamp = db_root.join(format!("{DB_FOLDER}.snapshot"));
    if dest.join(".git").is_dir() && fs::read_to_string(&stamp).is_ok_and(|s| s.trim() == snapshot)
    {
        eprintln!("advisory db: up to date at {} ({snapshot})", dest.display());
        return Ok(prepared);
    }

    if dest.exists() {
        fs::remove_dir_all(&dest)
            .with_context(|| format!("cannot remove stale {}", dest.display()))?;
    }
    fs::create_dir_all(&dest).with_context(|| format!("cannot create {}", dest.display()))?;
    let files = copy_tree(&src, &dest)?;

    let when = format!("{date}T00:00:00+0000");
    let git = |args: &[&str]| -> Command {
        let mut cmd = Command::new("git");
        cmd.current_dir(&dest)
            .args([
                "-c",
                "user.name=llooma xtask",
                "-c",
                "user.email=xtask@llooma.invalid",
                "-c",
                "commit.gpgsign=false",
                "-c",
                "core.hooksPath=/dev/null",
            ])
            .args(args)
            .env("GIT_AUTHOR_DATE", &when)
            .env("GIT_COMMITTER_DATE", &when);
        cmd
    };
    run(&mut git(&["init", "--quiet", "--initial-branch=main"]))
        .context("`git` is needed to prepare the advisory database")?;
    run(&mut git(&["add", "--all"]))?;
    let message = format!("RustSec advisory-db snapshot\n\n{snapshot}");
    run(&mut git(&["commit", "--quiet", "--no-verify", "-m", &message]))?;

    fs::write(&stamp, snapshot).with_context(|| format!("cannot write {}", stamp.display()))?;
    eprintln!(
        "advisory db: {files} files from {} prepared at {} (dated {date})",
        src.display(),
        dest.display()
    );
    Ok(prepared)
}

/// `cargo xtask deny`: cargo-deny (installed if missing), then `cargo deny check` with the
/// advisory snapshot when there is one, else with the database cargo-deny fetches itself.
pub fn check(ctx: &Ctx) -> Result<()> {
    setup::ensure(ctx, &[setup::CARGO_DENY])?;
    let snapshot_dir = ctx.shared_dir_path().join("advisory-db");
    if snapshot_dir.is_dir() {
        let snapshot = prepare_db(ctx)?;
        let source =
            format!("offline snapshot from {} dated {}", snapshot.src.display(), snapshot.date);
        eprintln!("advisories: {source}");
        // `--offline` reads every crate of the lock file, other platforms' included, from the
        // local registry: a fresh machine has only what its own builds downloaded.
        run(&mut ctx.cargo(["fetch", "--locked"]))?;
        run(&mut ctx.cargo(["deny", "--offline", "check"])).with_context(|| {
            format!("`cargo deny --offline check` failed (advisories: {source})")
        })?;
        eprintln!("cargo-deny: all checks passed (advisories: {source})");
    } else {
        clear_foreign_db(ctx)?;
        let source = format!("fetched by cargo-deny (no {} here)", snapshot_dir.display());
        eprintln!("advisories: {source}");
        run(&mut ctx.cargo(["deny", "check"])).with_context(|| {
            format!(
                "the advisory database was to be fetched by cargo-deny from \
                 github.com/RustSec/advisory-db, as there is no {snap} here. If that fetch failed \
                 (see cargo-deny's message above), this machine cannot reach GitHub: put a \
                 RustSec advisory-db snapshot (with a SNAPSHOT.txt naming its date) at {snap}, \
                 or set LLOOMA_SHARED_DIR to a folder holding one in advisory-db/",
                snap = snapshot_dir.display()
            )
        })?;
        eprintln!("cargo-deny: all checks passed (advisories: {source})");
    }
    Ok(())
}

/// Before cargo-deny fetches the database itself: removes whatever in its folder is not its own
/// clone (our snapshot copy, which has no remote, or a half-written folder), and our stamp.
fn clear_foreign_db(ctx: &Ctx) -> Result<()> {
    let db_root = ctx.root.join(DB_PATH);
    let dest = db_root.join(DB_FOLDER);
    let stamp = db_root.join(format!("{DB_FOLDER}.snapshot"));
    let has_remote = fs::read_to_string(dest.join(".git").join("config"))
        .is_ok_and(|config| config.contains("[remote \""));
    if dest.exists() && !has_remote {
        eprintln!(
            "advisories: removing {} (an offline snapshot copy or a partial download, not a \
             clone cargo-deny can update)",
            dest.display()
        );
        fs::remove_dir_all(&dest).with_context(|| format!("cannot remove {}", dest.display()))?;
    }
    if stamp.exists() {
        fs::remove_file(&stamp).with_context(|| format!("cannot remove {}", stamp.display()))?;
    }
    Ok(())
}

/// The first `YYYY-MM-DD` in the snapshot description.
fn snapshot_date(text: &str) -> Option<&str> {
    let bytes = text.as_bytes();
    (0..bytes.len().saturating_sub(9)).find_map(|i| {
        let cand = bytes.get(i..i + 10)?;
        let shape_ok = cand.iter().enumerate().all(|(j, b)| match j {
            4 | 7 => *b == b'-',
            _ => b.is_ascii_digit(),
        });
        let bounded = i == 0 || !bytes[i - 1].is_ascii_digit();
        (shape_ok && bounded).then(|| &text[i..i + 10])
    })
}

/// Copies a directory tree (files and folders; no symlinks expected). Returns the file count.
fn copy_tree(src: &Path, dest: &Path) -> Result<usize> {
    let mut count = 0;
    for entry in fs::read_dir(src).with_context(|| format!("cannot read {}", src.display()))? {
        let entry = entry.with_context(|| format!("cannot read {}", src.display()))?;
        let from = entry.path();
        let to = dest.join(entry.file_name());
        let kind = entry.file_type().with_context(|| format!("cannot stat {}", from.display()))?;
        if kind.is_dir() {
            fs::create_dir_all(&to).with_context(|| format!("cannot create {}", to.display()))?;
            count += copy_tree(&from, &to)?;
        } else {
            // Read and write rather than fs::copy: the snapshot is read-only, the copy must not be.
            let data =
                fs::read(&from).with_context(|| format!("cannot read {}", from.display()))?;
            fs::write(&to, data).with_context(|| format!("cannot write {}", to.display()))?;
            count += 1;
        }
    }
    Ok(count)
}

#[cfg(test)]
mod tests {
    use super::snapshot_date;

    #[test]
    fn finds_the_snapshot_date() {
        let text = "RustSec advisory database snapshot: commit bf5c0d245a92671908518d7e765914d437954ed6 (2026-08-21), CC0-1.0.";
        assert_eq!(snapshot_date(text), Some("2026-08-21"));
        assert_eq!(snapshot_date("2024-01-02"), Some("2024-01-02"));
        assert_eq!(snapshot_date("no date here"), None);
        assert_eq!(snapshot_date("12024-01-0"), None);
    }
}
