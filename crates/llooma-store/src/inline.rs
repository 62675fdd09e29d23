//! SQLite statements of the turn's hot path, run on the calling thread.
//!
//! sqlx runs each SQLite connection on a worker thread of its own: every statement is two
//! hand-offs (the runtime wakes the worker, the worker wakes the runtime), and every release to
//! the pool is one more round trip (a ping). A turn's statements are little work for SQLite
//! itself; the hand-offs around them cost more than the statements do. So the requests every
//! signed-in page and every turn make (the session, the turn's context, the turn's writes) go to
//! a second connection to the same file, run here and now.
//!
//! Two connections mean two writers, and SQLite lets one write at a time:
//! - this connection writes in `BEGIN IMMEDIATE` transactions (it takes the write lock before
//!   reading anything, all or nothing); when the other connection holds the lock it gets
//!   `SQLITE_BUSY` at once (no busy wait here: that would block a runtime thread), lets go of
//!   the connection, sleeps a millisecond without blocking and tries again;
//! - the other connection's transactions (sea-orm's, which read and then write) hold this
//!   connection's lock for their whole length ([`Store::begin`](crate::Store::begin)): a write
//!   from here between their read and their write would make theirs fail with `SQLITE_BUSY`;
//! - the other connection's single statements wait for the lock in SQLite's busy handler, on
//!   sqlx's worker thread, as they always did.

use std::path::Path;
use std::time::{Duration, Instant};

use rusqlite::{Connection, ErrorCode, OpenFlags};
use tokio::sync::{Mutex, MutexGuard};

use crate::{StoreError, StoreResult};

/// How long a statement here waits for the other connection's write before giving up: as long
/// as the other connection's busy timeout.
const BUSY_PATIENCE: Duration = Duration::from_secs(5);

/// The pause between two tries while the other connection writes.
const BUSY_PAUSE: Duration = Duration::from_millis(1);

/// How many prepared statements the connection keeps (the hot path has about a dozen, an MCP
/// turn's reads about as many again).
const PREPARED_STATEMENTS: usize = 64;

/// The connection, and the lock that makes it the writer whenever it writes.
pub(crate) struct InlineSqlite {
    conn: Mutex<Connection>,
}

impl std::fmt::Debug for InlineSqlite {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("InlineSqlite").finish_non_exhaustive()
    }
}

/// Why a piece of work here failed: the database's error, or one of ours.
#[derive(Debug)]
pub(crate) enum InlineError {
    Sqlite(rusqlite::Error),
    Store(StoreError),
}

impl From<rusqlite::Error> for InlineError {
    fn from(err: rusqlite::Error) -> Self {
        InlineError::Sqlite(err)
    }
}

impl From<StoreError> for InlineError {
    fn from(err: StoreError) -> Self {
        InlineError::Store(err)
    }
}

impl From<InlineError> for StoreError {
    fn from(err: InlineError) -> Self {
        match err {
            InlineError::Store(err) => err,
            InlineError::Sqlite(err) => sqlite_error(err),
        }
    }
}

/// A SQLite error in an operator's words.
fn sqlite_error(err: rusqlite::Error) -> StoreError {
    match err.sqlite_error_code() {
        Some(ErrorCode::CannotOpen | ErrorCode::NotADatabase | ErrorCode::ReadOnly) => {
            StoreError::Unavailable(err.to_string())
        }
        Some(ErrorCode::DatabaseBusy | ErrorCode::DatabaseLocked) => StoreError::Unavailable(
            format!("the database stayed locked by another writer for {BUSY_PATIENCE:?} ({err})"),
        ),
        _ => StoreError::Database(err.to_string()),
    }
}

/// True when `err` is a unique-constraint violation.
pub(crate) fn is_unique_violation(err: &InlineError) -> bool {
    matches!(
        err,
        InlineError::Sqlite(rusqlite::Error::SqliteFailure(e, _))
            if e.extended_code == rusqlite::ffi::SQLITE_CONSTRAINT_UNIQUE
                || e.extended_code == rusqlite::ffi::SQLITE_CONSTRAINT_PRIMARYKEY
    )
}

fn is_busy(err: &InlineError) -> bool {
    matches!(
        err,
        InlineError::Sqlite(e)
            if matches!(e.sqlite_error_code(), Some(ErrorCode::DatabaseBusy | ErrorCode::DatabaseLocked))
    )
}

impl InlineSqlite {
    /// Opens a second connection to the database file at `path`, which sqlx has opened (and
    /// put in WAL mode, which the file keeps) before.
    pub(crate) fn open(path: &Path) -> StoreResult<InlineSqlite> {
        let flags = OpenFlags::SQLITE_OPEN_READ_WRITE | OpenFlags::SQLITE_OPEN_NO_MUTEX;
        let conn = Connection::open_with_flags(path, flags).map_err(sqlite_error)?;
        // No busy wait (see the module's comment): a busy database is tried again from
        // `retrying`, without blocking the thread.
        conn.busy_timeout(Duration::ZERO).map_err(sqlite_error)?;
        conn.execute_batch("PRAGMA foreign_keys = ON; PRAGMA synchronous = NORMAL;")
            .map_err(sqlite_error)?;
        // Never a checkpoint on the request path (see `checkpoint`).
        conn.execute_batch(crate::checkpoint::CONNECTION_PRAGMAS).map_err(sqlite_error)?;
        conn.set_prepared_statement_cache_capacity(PREPARED_STATEMENTS);
        Ok(InlineSqlite { conn: Mutex::new(conn) })
    }

    /// Runs `work` (reads, or single statements) on the connection, on this thread; again
    /// while another writer holds the database, for up to five seconds.
    pub(crate) async fn run<T>(
        &self,
        mut work: impl FnMut(&Connection) -> Result<T, InlineError>,
    ) -> Result<T, InlineError> {
        self.retrying(|conn| work(conn)).await
    }

    /// Runs `work` in one write transaction, all or nothing, on this thread; again while
    /// another writer holds the database, for up to five seconds.
    pub(crate) async fn write<T>(
        &self,
        mut work: impl FnMut(&Connection) -> Result<T, InlineError>,
    ) -> Result<T, InlineError> {
        self.retrying(|conn| in_transaction(conn, &mut work)).await
    }

    /// Runs `work` with the connection; while another writer holds the database, lets go of
    /// the connection, pauses without blocking the thread, and runs it again.
    async fn retrying<T>(
        &self,
        mut work: impl FnMut(&mut Connection) -> Result<T, InlineError>,
    ) -> Result<T, InlineError> {
        let since = Instant::now();
        loop {
            let result = work(&mut *self.conn.lock().await);
            match result {
                Err(err) if is_busy(&err) && since.elapsed() < BUSY_PATIENCE => {
                    tokio::time::sleep(BUSY_PAUSE).await;
                }
                result => return result,
            }
        }
    }

    /// Holds this connection still: nothing is written from here until the guard is dropped.
    /// Held by the other connection's transactions for their whole length.
    pub(crate) async fn hold(&self) -> MutexGuard<'_, Connection> {
        self.conn.lock().await
    }
}

/// `work` between `BEGIN IMMEDIATE` and `COMMIT`, rolled back when it fails. The three are
/// prepared once (rusqlite's `Transaction` parses `BEGIN` and `COMMIT` again on every write).
fn in_transaction<T>(
    conn: &mut Connection,
    work: &mut impl FnMut(&Connection) -> Result<T, InlineError>,
) -> Result<T, InlineError> {
    conn.prepare_cached("BEGIN IMMEDIATE")?.execute([])?;
    let done = work(conn).and_then(|value| {
        conn.prepare_cached("COMMIT")?.execute([])?;
        Ok(value)
    });
    if done.is_err() && !conn.is_autocommit() {
        // The error is what the caller needs; a failed rollback leaves nothing more to undo.
        let _ = conn.prepare_cached("ROLLBACK").and_then(|mut rollback| rollback.execute([]));
    }
    done
}
