//! SQLite's WAL checkpoints, on a thread of their own.
//!
//! Left to itself, SQLite checkpoints in whichever connection commits the write that takes the
//! log past 1,000 pages: that is often the hot path's connection ([`crate::inline`]), which runs
//! on the runtime's worker threads, so now and then a turn paid for copying the whole log into
//! the database file, and every task queued on that worker waited with it. So both of our
//! connections have automatic checkpoints switched off (`PRAGMA wal_autocheckpoint = 0`) and
//! this thread, with a connection of its own, runs a passive checkpoint every
//! [`CHECKPOINT_EVERY`]: it copies what no reader still needs and never waits for or blocks a
//! writer. `journal_size_limit` trims the log file back after it was reset, so a burst of
//! writes does not leave a large file behind.
//!
//! Invariant: no request waits for a checkpoint; the log is checkpointed within about a second
//! of any write.

use std::path::Path;
use std::sync::mpsc;
use std::time::Duration;

use rusqlite::{Connection, OpenFlags};

use crate::{StoreError, StoreResult};

/// How often the log is checkpointed.
pub(crate) const CHECKPOINT_EVERY: Duration = Duration::from_secs(1);

/// What the log file is cut back to when it is reset after a checkpoint (bytes).
pub(crate) const JOURNAL_SIZE_LIMIT: u64 = 64 * 1024 * 1024;

/// The pragmas every connection of ours sets: no automatic checkpoint, a bounded log file.
pub(crate) const CONNECTION_PRAGMAS: &str =
    "PRAGMA wal_autocheckpoint = 0; PRAGMA journal_size_limit = 67108864;";

/// The thread that checkpoints; it ends when this is dropped (the last clone of the store).
#[derive(Debug)]
pub(crate) struct Checkpointer {
    /// Dropping it wakes the thread, which then ends.
    _stop: mpsc::Sender<()>,
}

impl Checkpointer {
    /// Starts checkpointing the database file at `path` (already in WAL mode).
    pub(crate) fn start(path: &Path) -> StoreResult<Checkpointer> {
        let flags = OpenFlags::SQLITE_OPEN_READ_WRITE | OpenFlags::SQLITE_OPEN_NO_MUTEX;
        let conn = Connection::open_with_flags(path, flags).map_err(|err| {
            StoreError::Unavailable(format!("opening the checkpoint connection: {err}"))
        })?;
        conn.execute_batch(CONNECTION_PRAGMAS)
            .map_err(|err| StoreError::Database(format!("setting up checkpoints: {err}")))?;
        let (stop, stopped) = mpsc::channel::<()>();
        std::thread::Builder::new()
            .name("sqlite-checkpoint".to_owned())
            .spawn(move || {
                // Ends when the sender is dropped (or, never, sends).
                while let Err(mpsc::RecvTimeoutError::Timeout) =
                    stopped.recv_timeout(CHECKPOINT_EVERY)
                {
                    if let Err(err) = checkpoint(&conn) {
                        tracing::warn!(error = %err, "checkpointing the SQLite log failed");
                    }
                }
                // A last one, so a clean shutdown leaves the log folded into the file.
                let _ = checkpoint(&conn);
            })
            .map_err(|err| {
                StoreError::Database(format!("starting the checkpoint thread: {err}"))
            })?;
        Ok(Checkpointer { _stop: stop })
    }
}

/// One passive checkpoint: (whether a writer held the log, pages in the log, pages copied).
pub(crate) fn checkpoint(conn: &Connection) -> rusqlite::Result<(bool, i64, i64)> {
    conn.query_row("PRAGMA wal_checkpoint(PASSIVE)", [], |row| {
        Ok((row.get::<_, i64>(0)? != 0, row.get(1)?, row.get(2)?))
    })
}
