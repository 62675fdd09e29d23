//! Full-text search over messages, with each engine's own index: SQLite's FTS5 (an external-
//! content table kept by triggers, keyed by the messages' rowid) and Postgres's `tsvector` (a
//! GIN index on the expression). Both use no stemming (`unicode61`, `simple`), so a search finds
//! the same messages on both engines whatever their language.
//!
//! Invariant (SQLite): the index is keyed by `messages.rowid`, which `VACUUM` may renumber on a
//! table without an integer primary key; the store never vacuums, and an operator who does runs
//! `INSERT INTO messages_search(messages_search) VALUES ('rebuild')` after it.

use sea_orm_migration::prelude::*;
use sea_orm_migration::sea_orm::DbBackend;

use crate::run_statements;

#[derive(DeriveMigrationName)]
pub struct Migration;

const SQLITE: &[&str] = &[
    "CREATE VIRTUAL TABLE messages_search USING fts5(content, content='messages', \
     content_rowid='rowid', tokenize='unicode61 remove_diacritics 2')",
    "CREATE TRIGGER messages_search_insert AFTER INSERT ON messages BEGIN \
     INSERT INTO messages_search(rowid, content) VALUES (new.rowid, new.content); END",
    "CREATE TRIGGER messages_search_delete AFTER DELETE ON messages BEGIN \
     INSERT INTO messages_search(messages_search, rowid, content) \
     VALUES ('delete', old.rowid, old.content); END",
    "CREATE TRIGGER messages_search_update AFTER UPDATE OF content ON messages BEGIN \
     INSERT INTO messages_search(messages_search, rowid, content) \
     VALUES ('delete', old.rowid, old.content); \
     INSERT INTO messages_search(rowid, content) VALUES (new.rowid, new.content); END",
    // The messages written before this migration.
    "INSERT INTO messages_search(messages_search) VALUES ('rebuild')",
];

const POSTGRES: &[&str] =
    &["CREATE INDEX messages_search ON messages USING GIN (to_tsvector('simple', content))"];

#[async_trait::async_trait]
impl MigrationTrait for Migration {
    async fn up(&self, manager: &SchemaManager) -> Result<(), DbErr> {
        match manager.get_database_backend() {
            DbBackend::Postgres => run_statements(manager, POSTGRES).await,
            _ => run_statements(manager, SQLITE).await,
        }
    }

    fn use_transaction(&self) -> Option<bool> {
        Some(true)
    }
}
