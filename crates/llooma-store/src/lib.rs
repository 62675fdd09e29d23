//! Llooma's storage: sea-orm entities and the repositories the rest of the server calls.
//!
//! The same code runs on SQLite (the embedded default, one file in the data directory) and on
//! Postgres (`DATABASE_URL=postgres://...`, for several replicas). This crate and
//! `llooma-migration` are the only ones that name sea-orm; everything above talks to [`Store`].
//!
//! Races are settled by the database, never by a read followed by a write: a claim is a single
//! conditional `UPDATE ... WHERE state = expected` and whoever sees one affected row won.

mod accounts;
mod approvals;
mod bots;
mod catalogue;
mod checkpoint;
mod columns;
mod consent;
mod conversations;
mod entities;
mod files;
mod import;
mod inline;
mod inline_orm;
mod instance;
mod login_failures;
mod mcp_servers;
mod mcp_views;
mod personas;
mod preferences;
mod providers;
mod secrets;
mod sessions;
mod summaries;
mod turn_context;
mod turn_writes;
mod usage;

use std::sync::Arc;
use std::time::Duration;

use llooma_migration::MigratorTrait;
use sea_orm::sqlx::sqlite::{SqliteJournalMode, SqliteSynchronous};
use sea_orm::{ConnectOptions, ConnectionTrait, Database, DatabaseConnection, DbBackend, DbErr};

pub use accounts::{Account, Deleted, NewAccount, RegisterOutcome};
pub use approvals::APPROVAL_CHANNEL;
pub use bots::{BotConnection, BotIntegration, BotRunReport, BotSettingsRow};
pub use catalogue::{CatalogueEntry, CatalogueRatings, CatalogueUsage, NewCatalogueEntry};
pub use consent::{ConsentInputs, NewGrant, NewRule, StoredGrant, StoredRule};
pub use conversations::{Conversation, ConversationPatch, Message, StoredEvent};
pub use files::{AddFileError, FileKind, NewFile, SentFile, StoredFile, UNSENT_FILES_KEPT_MS};
pub use import::{ImportedConversation, ImportedMessage};
pub use instance::{InstanceSettings, InstanceSettingsChange, InstanceState, SpeechSettings};
pub use login_failures::FailureScope;
pub use mcp_servers::{McpServer, NewMcpServer, Suspension, ToolSettings};
pub use mcp_views::McpView;
pub use personas::{MemoryNote, Persona, PersonaPatch};
pub use preferences::Preferences;
pub use providers::{NewProvider, Provider};
pub use secrets::{ENCRYPTED_COLUMNS, EncryptedColumn};
pub use sessions::{NewSession, Session};
pub use summaries::Summary;
pub use turn_context::{HistoryMessage, TurnContext};
pub use turn_writes::{ClosedTurn, OpenedTurn};
pub use usage::{ModelPrice, UsageLimits, UsageRow, UsedSoFar};

/// Errors from the database, in words an operator can act on.
#[derive(Debug, thiserror::Error)]
pub enum StoreError {
    #[error(
        "the database cannot be reached ({0}); check that it is running and DATABASE_URL is right"
    )]
    Unavailable(String),
    #[error("that username is already taken; choose another")]
    UsernameTaken,
    #[error("that name is already used; choose another")]
    NameTaken,
    #[error("not found")]
    NotFound,
    #[error("a turn is already running in this conversation; wait for it or stop it")]
    TurnRunning,
    #[error("stored data is inconsistent: {0}")]
    Corrupt(String),
    #[error("database error: {0}")]
    Database(String),
}

impl From<DbErr> for StoreError {
    fn from(err: DbErr) -> Self {
        match &err {
            DbErr::Conn(_) | DbErr::ConnectionAcquire(_) => {
                StoreError::Unavailable(err.to_string())
            }
            _ => {
                let text = err.to_string();
                // A dropped connection surfaces as an IO error inside a query error.
                let lower = text.to_ascii_lowercase();
                if lower.contains("connection refused")
                    || lower.contains("broken pipe")
                    || lower.contains("connection reset")
                    || lower.contains("pool timed out")
                    || lower.contains("terminating connection")
                {
                    StoreError::Unavailable(text)
                } else {
                    StoreError::Database(text)
                }
            }
        }
    }
}

/// True when the error is a unique-constraint violation, on either engine.
fn is_unique_violation(err: &DbErr) -> bool {
    let text = err.to_string().to_ascii_lowercase();
    text.contains("unique constraint") || text.contains("duplicate key")
}

pub type StoreResult<T> = Result<T, StoreError>;

/// Which engine a [`Store`] runs on.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Engine {
    Sqlite,
    Postgres,
}

/// A handle on the database. Cheap to clone.
#[derive(Clone, Debug)]
pub struct Store {
    db: DatabaseConnection,
    engine: Engine,
    /// On SQLite, the connection the hot path's statements run on (see [`inline`]).
    inline: Option<Arc<inline::InlineSqlite>>,
    /// On SQLite, the thread that checkpoints the log (see [`checkpoint`]).
    _checkpoints: Option<Arc<checkpoint::Checkpointer>>,
}

/// Key of the Postgres advisory lock held while migrating, so replicas starting together take
/// turns instead of racing to create the same tables.
const MIGRATION_LOCK_KEY: i64 = 0x6c6c_6f6f_6d61;

impl Store {
    /// Opens the database at `url` (`sqlite://path?mode=rwc` or `postgres://...`).
    pub async fn connect(url: &str) -> StoreResult<Store> {
        let engine = if url.starts_with("postgres://") || url.starts_with("postgresql://") {
            Engine::Postgres
        } else if url.starts_with("sqlite:") {
            Engine::Sqlite
        } else {
            return Err(StoreError::Unavailable(format!(
                "unsupported database address scheme in {:?}; use sqlite://... or postgres://...",
                redact_url(url)
            )));
        };
        let file = match engine {
            Engine::Sqlite => Some(sqlite_file(url)?),
            Engine::Postgres => None,
        };
        let mut options = ConnectOptions::new(url.to_owned());
        options
            .sqlx_logging(false)
            .connect_timeout(Duration::from_secs(5))
            .acquire_timeout(Duration::from_secs(10));
        match engine {
            Engine::Sqlite => {
                // One connection: writes serialize instead of failing with SQLITE_BUSY. WAL keeps
                // readers of other processes (the CLI) from blocking on a writer.
                // A file on this machine: nothing can hang up on it, so it is not pinged
                // before each statement (the ping is a round trip to sqlx's worker thread, as
                // dear as the statement).
                options.max_connections(1).min_connections(1).test_before_acquire(false);
                options.map_sqlx_sqlite_opts(|o| {
                    o.journal_mode(SqliteJournalMode::Wal)
                        .synchronous(SqliteSynchronous::Normal)
                        .busy_timeout(Duration::from_secs(5))
                        .foreign_keys(true)
                        .create_if_missing(true)
                        // Checkpoints run on a thread of their own (see `checkpoint`).
                        .pragma("wal_autocheckpoint", "0")
                        .pragma("journal_size_limit", checkpoint::JOURNAL_SIZE_LIMIT.to_string())
                });
            }
            Engine::Postgres => {
                // A connection idle for a while may have been dropped by the server or the
                // network: it is pinged before use; a busy one is not (a ping per statement
                // doubles the round trips).
                options
                    .max_connections(16)
                    .min_connections(1)
                    .test_before_acquire_if_idle_for(Duration::from_secs(5));
            }
        }
        let db = Database::connect(options).await?;
        let (inline, checkpoints) = match file {
            Some(file) => (
                Some(Arc::new(inline::InlineSqlite::open(&file)?)),
                Some(Arc::new(checkpoint::Checkpointer::start(&file)?)),
            ),
            None => (None, None),
        };
        Ok(Store { db, engine, inline, _checkpoints: checkpoints })
    }

    /// Begins a transaction on sea-orm's connection. On SQLite it holds the hot path's
    /// connection still until the transaction ends (the guard, dropped after it), so that a
    /// write from there cannot come between the transaction's reads and its writes.
    pub(crate) async fn begin(
        &self,
    ) -> StoreResult<(
        Option<tokio::sync::MutexGuard<'_, rusqlite::Connection>>,
        sea_orm::DatabaseTransaction,
    )> {
        use sea_orm::TransactionTrait;
        let held = match &self.inline {
            Some(inline) => Some(inline.hold().await),
            None => None,
        };
        Ok((held, self.db.begin().await?))
    }

    /// Every row `select` finds. On SQLite the query runs on the hot path's connection, on this
    /// thread ([`inline_orm`]); on Postgres through sea-orm.
    pub(crate) async fn find_all<E>(&self, select: sea_orm::Select<E>) -> StoreResult<Vec<E::Model>>
    where
        E: sea_orm::EntityTrait,
        E::Model: sea_orm::FromQueryResult + Send + Sync,
        E::ActiveModel: sea_orm::TryIntoModel<E::Model>,
    {
        use sea_orm::QueryTrait;
        match &self.inline {
            Some(inline) => {
                let statement = select.build(DbBackend::Sqlite);
                Ok(inline.run(|conn| inline_orm::entity_rows::<E>(conn, &statement)).await?)
            }
            None => Ok(select.all(&self.db).await?),
        }
    }

    /// The first row `select` finds, where [`Store::find_all`] runs it. On SQLite without a
    /// `LIMIT`: sea-orm binds its `LIMIT 1` as a parameter, and SQLite plans a `LIMIT ?` for the
    /// value bound, so it prepared the statement again on every run, and an MCP turn runs such
    /// reads several times; only the first row is read instead.
    pub(crate) async fn find_one<E>(
        &self,
        select: sea_orm::Select<E>,
    ) -> StoreResult<Option<E::Model>>
    where
        E: sea_orm::EntityTrait,
        E::Model: sea_orm::FromQueryResult + Send + Sync,
        E::ActiveModel: sea_orm::TryIntoModel<E::Model>,
    {
        use sea_orm::QueryTrait;
        match &self.inline {
            Some(inline) => {
                let statement = select.build(DbBackend::Sqlite);
                Ok(inline.run(|conn| inline_orm::first_entity_row::<E>(conn, &statement)).await?)
            }
            None => Ok(select.one(&self.db).await?),
        }
    }

    /// Applies every pending migration. Safe to run from several processes at once.
    pub async fn migrate(&self) -> StoreResult<()> {
        match self.engine {
            Engine::Sqlite => llooma_migration::Migrator::up(&self.db, None).await?,
            Engine::Postgres => {
                use sea_orm::TransactionTrait;
                let txn = self.db.begin().await?;
                txn.execute_unprepared(&format!(
                    "SELECT pg_advisory_xact_lock({MIGRATION_LOCK_KEY})"
                ))
                .await?;
                llooma_migration::Migrator::up(&txn, None).await?;
                txn.commit().await?;
            }
        }
        Ok(())
    }

    /// Answers whether the database is reachable right now.
    pub async fn ping(&self) -> StoreResult<()> {
        self.db.ping().await.map_err(|e| StoreError::Unavailable(e.to_string()))
    }

    pub fn engine(&self) -> Engine {
        self.engine
    }

    /// Closes every connection.
    pub async fn close(self) -> StoreResult<()> {
        self.db.close().await?;
        Ok(())
    }

    fn backend(&self) -> DbBackend {
        self.db.get_database_backend()
    }
}

/// The file a `sqlite:` address names. The database lives in a file: the hot path opens a
/// second connection to it, which an in-memory database would not share.
fn sqlite_file(url: &str) -> StoreResult<std::path::PathBuf> {
    use std::str::FromStr;
    let options = sea_orm::sqlx::sqlite::SqliteConnectOptions::from_str(url)
        .map_err(|e| StoreError::Unavailable(format!("{e} in {url:?}")))?;
    let file = options.get_filename();
    if file.as_os_str().is_empty() || file.as_os_str() == ":memory:" || url.contains("mode=memory")
    {
        return Err(StoreError::Unavailable(format!(
            "{url:?} is an in-memory database; give a file, e.g. sqlite://data/llooma.db?mode=rwc"
        )));
    }
    Ok(file.to_path_buf())
}

/// `?` placeholders numbered for Postgres (`$1`, `$2`, …); SQLite takes them as written.
pub(crate) fn numbered_placeholders(backend: DbBackend, sql: &str) -> String {
    if backend != DbBackend::Postgres {
        return sql.to_owned();
    }
    let mut out = String::with_capacity(sql.len() + 8);
    let mut n = 0;
    for c in sql.chars() {
        if c == '?' {
            n += 1;
            out.push('$');
            out.push_str(&n.to_string());
        } else {
            out.push(c);
        }
    }
    out
}

/// Removes a password from a database address before it is shown anywhere.
pub fn redact_url(url: &str) -> String {
    match url.split_once("://") {
        Some((scheme, rest)) => match rest.split_once('@') {
            Some((userinfo, host)) => {
                let user = userinfo.split(':').next().unwrap_or_default();
                if userinfo.contains(':') {
                    format!("{scheme}://{user}:[redacted]@{host}")
                } else {
                    format!("{scheme}://{user}@{host}")
                }
            }
            None => url.to_owned(),
        },
        None => url.to_owned(),
    }
}

/// The `n`th bind parameter of a raw statement, as each engine spells it.
pub(crate) fn placeholder(backend: DbBackend, n: usize) -> String {
    match backend {
        DbBackend::Postgres => format!("${n}"),
        _ => "?".to_owned(),
    }
}

/// Milliseconds since the Unix epoch, the one time format in the schema.
pub fn now_ms() -> i64 {
    chrono::Utc::now().timestamp_millis()
}

/// RFC 3339 text of a stored time.
pub fn ms_to_rfc3339(ms: i64) -> String {
    chrono::DateTime::from_timestamp_millis(ms)
        .map(|t| t.to_rfc3339_opts(chrono::SecondsFormat::Secs, true))
        .unwrap_or_default()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn redact_url_hides_the_password_only() {
        assert_eq!(redact_url("postgres://u:pw@h:5432/db"), "postgres://u:[redacted]@h:5432/db");
        assert_eq!(redact_url("postgres://u@h/db"), "postgres://u@h/db");
        assert_eq!(redact_url("sqlite://data/x.db"), "sqlite://data/x.db");
    }
}
