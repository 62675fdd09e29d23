//! SQLite: new messages reach the full-text index in batches, not one by one in the turn.
//!
//! With m0011's insert trigger every message was indexed by the statement that wrote it, and
//! FTS5 wrote a new index segment at each commit: two per turn (the person's message, the
//! reply), work the turn waited for though no search needed it yet. Now the insert trigger only
//! notes the message's rowid in `messages_search_pending`; the store moves the noted messages
//! into the index in one batch before every search and every few seconds besides
//! (`Store::index_pending_messages`), so a search still finds a message the moment it is
//! written.
//!
//! Invariant: a message is in the index exactly when it exists and its rowid is not in
//! `messages_search_pending`. The delete and update triggers keep it: an indexed message is
//! taken out of the index (FTS5 must be told the old content), a pending one only leaves the
//! pending list (a rowid SQLite hands out again after a delete is pending again, so it is never
//! taken for indexed). An operator who rebuilds the index (after `VACUUM`, see m0011) also empties
//! the pending list, in one transaction:
//! `INSERT INTO messages_search(messages_search) VALUES ('rebuild'); DELETE FROM messages_search_pending;`
//!
//! Postgres is unchanged: its GIN index already gathers new entries in a pending list.

use sea_orm_migration::prelude::*;
use sea_orm_migration::sea_orm::DbBackend;

use crate::run_statements;

#[derive(DeriveMigrationName)]
pub struct Migration;

const SQLITE: &[&str] = &[
    "CREATE TABLE messages_search_pending (message_rowid INTEGER PRIMARY KEY)",
    "DROP TRIGGER messages_search_insert",
    "CREATE TRIGGER messages_search_insert AFTER INSERT ON messages BEGIN \
     INSERT INTO messages_search_pending (message_rowid) VALUES (new.rowid); END",
    "DROP TRIGGER messages_search_delete",
    "CREATE TRIGGER messages_search_delete AFTER DELETE ON messages BEGIN \
     INSERT INTO messages_search(messages_search, rowid, content) \
     SELECT 'delete', old.rowid, old.content WHERE NOT EXISTS \
     (SELECT 1 FROM messages_search_pending WHERE message_rowid = old.rowid); \
     DELETE FROM messages_search_pending WHERE message_rowid = old.rowid; END",
    "DROP TRIGGER messages_search_update",
    "CREATE TRIGGER messages_search_update AFTER UPDATE OF content ON messages \
     WHEN NOT EXISTS (SELECT 1 FROM messages_search_pending WHERE message_rowid = old.rowid) \
     BEGIN \
     INSERT INTO messages_search(messages_search, rowid, content) \
     VALUES ('delete', old.rowid, old.content); \
     INSERT INTO messages_search(rowid, content) VALUES (new.rowid, new.content); END",
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
