//! Conversation titles in each engine's full-text index, as messages are (m0011): a search
//! finds a title by the start of its words through the index instead of reading every title of
//! the account (which took 27 ms on SQLite and 49 ms on Postgres for 100,000 conversations).
//! SQLite: an external-content FTS5 table kept by triggers on the title alone (a conversation's
//! `updated_at_ms` changes with every message; its title seldom), keyed by the conversations'
//! rowid, with the same invariant as m0011: after a `VACUUM`, an operator runs
//! `INSERT INTO conversations_search(conversations_search) VALUES ('rebuild')`.
//! Postgres: a GIN index on the title's `tsvector`.

use sea_orm_migration::prelude::*;
use sea_orm_migration::sea_orm::DbBackend;

use crate::run_statements;

#[derive(DeriveMigrationName)]
pub struct Migration;

const SQLITE: &[&str] = &[
    "CREATE VIRTUAL TABLE conversations_search USING fts5(title, content='conversations', \
     content_rowid='rowid', tokenize='unicode61 remove_diacritics 2')",
    "CREATE TRIGGER conversations_search_insert AFTER INSERT ON conversations BEGIN \
     INSERT INTO conversations_search(rowid, title) VALUES (new.rowid, new.title); END",
    "CREATE TRIGGER conversations_search_delete AFTER DELETE ON conversations BEGIN \
     INSERT INTO conversations_search(conversations_search, rowid, title) \
     VALUES ('delete', old.rowid, old.title); END",
    "CREATE TRIGGER conversations_search_update AFTER UPDATE OF title ON conversations BEGIN \
     INSERT INTO conversations_search(conversations_search, rowid, title) \
     VALUES ('delete', old.rowid, old.title); \
     INSERT INTO conversations_search(rowid, title) VALUES (new.rowid, new.title); END",
    // The titles written before this migration.
    "INSERT INTO conversations_search(conversations_search) VALUES ('rebuild')",
];

const POSTGRES: &[&str] = &["CREATE INDEX conversations_search ON conversations \
     USING GIN (to_tsvector('simple', title))"];

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
