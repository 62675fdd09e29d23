//! SQLite: which messages wait for the full-text index is told by one mark, not by a list.
//!
//! m0017's insert trigger noted every new message's rowid in `messages_search_pending`: a write
//! to one more b-tree, and so one more page of the write-ahead log, in each of a turn's two
//! commits. Now `messages_search_mark` holds the highest rowid indexed (`indexed_through`); a
//! message whose rowid is above it waits, and `Store::index_pending_messages` indexes those in
//! one transaction and moves the mark (before every search, and every few seconds besides).
//!
//! Invariant: a message is in the index exactly when it exists and its rowid is at most the
//! mark. The triggers keep it:
//! - insert: a message above the mark waits (nothing written); one at or below it (SQLite
//!   hands out a removed message's rowid again when it was the highest) is indexed at once;
//! - delete and update: only a message at or below the mark is in the index, so only then is
//!   FTS5 told (it must be given the old content).
//!
//! An operator who rebuilds the index (after `VACUUM`, see m0011) also moves the mark, in one
//! transaction: `INSERT INTO messages_search(messages_search) VALUES ('rebuild');
//! UPDATE messages_search_mark SET indexed_through = (SELECT COALESCE(MAX(rowid), 0) FROM messages);`
//!
//! Postgres is unchanged.

use sea_orm_migration::prelude::*;
use sea_orm_migration::sea_orm::DbBackend;

use crate::run_statements;

#[derive(DeriveMigrationName)]
pub struct Migration;

const SQLITE: &[&str] = &[
    // What m0017's list held goes into the index first, so the mark starts true.
    "INSERT INTO messages_search (rowid, content) SELECT m.rowid, m.content \
     FROM messages_search_pending p JOIN messages m ON m.rowid = p.message_rowid",
    "CREATE TABLE messages_search_mark (id INTEGER PRIMARY KEY CHECK (id = 1), \
     indexed_through INTEGER NOT NULL)",
    "INSERT INTO messages_search_mark (id, indexed_through) \
     VALUES (1, (SELECT COALESCE(MAX(rowid), 0) FROM messages))",
    "DROP TRIGGER messages_search_insert",
    "CREATE TRIGGER messages_search_insert AFTER INSERT ON messages \
     WHEN new.rowid <= (SELECT indexed_through FROM messages_search_mark) BEGIN \
     INSERT INTO messages_search (rowid, content) VALUES (new.rowid, new.content); END",
    "DROP TRIGGER messages_search_delete",
    "CREATE TRIGGER messages_search_delete AFTER DELETE ON messages \
     WHEN old.rowid <= (SELECT indexed_through FROM messages_search_mark) BEGIN \
     INSERT INTO messages_search (messages_search, rowid, content) \
     VALUES ('delete', old.rowid, old.content); END",
    "DROP TRIGGER messages_search_update",
    "CREATE TRIGGER messages_search_update AFTER UPDATE OF content ON messages \
     WHEN old.rowid <= (SELECT indexed_through FROM messages_search_mark) BEGIN \
     INSERT INTO messages_search (messages_search, rowid, content) \
     VALUES ('delete', old.rowid, old.content); \
     INSERT INTO messages_search (rowid, content) VALUES (new.rowid, new.content); END",
    "DROP TABLE messages_search_pending",
];

#[async_trait::async_trait]
impl MigrationTrait for Migration {
    async fn up(&self, manager: &SchemaManager) -> Result<(), DbErr> {
        match manager.get_database_backend() {
            DbBackend::Postgres => Ok(()),
            _ => run_statements(manager, SQLITE).await,
        }
    }

    fn use_transaction(&self) -> Option<bool> {
        Some(true)
    }
}
