//! Test tooling shared by the crates' integration tests and the end-to-end suite (a
//! dev-dependency only):
//!
//! - [`TestDatabase`]: a database of its own for one test, SQLite or a fresh Postgres database
//!   (`LLOOMA_TEST_DB=postgres`, server at `LLOOMA_TEST_PG_URL`), dropped at the end;
//! - [`peers`]: real MCP servers no one here wrote (npm's `server-everything`, a gateway-like
//!   server on the Python `mcp` SDK), started on loopback.
//!
//! It talks to Postgres through `psql`, so it needs no database library (and stays out of the
//! layering rule that keeps sea-orm inside llooma-store).

#![allow(
    clippy::expect_used,
    reason = "test tooling: a broken environment should stop the test loudly"
)]

pub mod peers;

use std::process::Command;

/// The engine a test run uses.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Engine {
    Sqlite,
    Postgres,
}

/// `LLOOMA_TEST_DB` (CI runs every suite once with `sqlite`, once with `postgres`).
pub fn engine() -> Engine {
    match std::env::var("LLOOMA_TEST_DB").as_deref() {
        Ok("postgres") => Engine::Postgres,
        _ => Engine::Sqlite,
    }
}

/// A database for one test: a directory (where SQLite's file, and anything else the test wants
/// to keep, lives) and, on Postgres, a fresh database dropped when this value is.
#[derive(Debug)]
pub struct TestDatabase {
    pub dir: tempfile::TempDir,
    postgres: Option<(String, String)>, // (server url, database name)
}

fn psql(base: &str, sql: &str) -> Result<(), String> {
    let output = Command::new("psql")
        .arg(format!("{base}/postgres"))
        .args(["-v", "ON_ERROR_STOP=1", "-q", "-c", sql])
        .output()
        .map_err(|e| format!("cannot run psql ({e}); install the Postgres client"))?;
    if output.status.success() {
        Ok(())
    } else {
        Err(String::from_utf8_lossy(&output.stderr).trim().to_owned())
    }
}

impl TestDatabase {
    pub fn new() -> TestDatabase {
        let dir = tempfile::tempdir().expect("a temporary directory");
        let postgres = (engine() == Engine::Postgres).then(|| {
            let base = std::env::var("LLOOMA_TEST_PG_URL")
                .unwrap_or_else(|_| "postgres://postgres@127.0.0.1:5432".into());
            let name = format!("llooma_test_{}", uuid::Uuid::new_v4().simple());
            psql(&base, &format!("CREATE DATABASE \"{name}\"")).unwrap_or_else(|e| {
                panic!("cannot create a test database on {base} ({e}); start Postgres or set LLOOMA_TEST_PG_URL")
            });
            (base, name)
        });
        TestDatabase { dir, postgres }
    }

    /// The Postgres address of this test's database, if the run is on Postgres.
    pub fn postgres_url(&self) -> Option<String> {
        self.postgres.as_ref().map(|(base, name)| format!("{base}/{name}"))
    }

    /// The database address: Postgres, or an SQLite file `llooma.db` in [`TestDatabase::dir`].
    pub fn url(&self) -> String {
        self.postgres_url().unwrap_or_else(|| {
            format!("sqlite://{}?mode=rwc", self.dir.path().join("llooma.db").display())
        })
    }

    /// Drops the Postgres database now (whoever is connected loses it).
    pub fn drop_now(&self) {
        if let Some((base, name)) = &self.postgres {
            let _ = psql(base, &format!("DROP DATABASE IF EXISTS \"{name}\" WITH (FORCE)"));
        }
    }
}

impl Default for TestDatabase {
    fn default() -> Self {
        TestDatabase::new()
    }
}

impl Drop for TestDatabase {
    fn drop(&mut self) {
        self.drop_now();
    }
}
