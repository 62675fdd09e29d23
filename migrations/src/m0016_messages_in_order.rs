//! A conversation's messages are read oldest first on every turn, ordered by
//! `(created_at_ms, id)`. The index of m0004 covered only `created_at_ms`, so SQLite sorted each
//! run of messages sharing a millisecond on its own (a sort per run, on every turn, more of them
//! the longer the conversation). This index gives the whole order and replaces it.

use sea_orm_migration::prelude::*;

use crate::run_statements;

#[derive(DeriveMigrationName)]
pub struct Migration;

const STATEMENTS: &[&str] = &[
    "CREATE INDEX messages_in_order ON messages (conversation_id, created_at_ms, id)",
    "DROP INDEX messages_by_conversation",
];

#[async_trait::async_trait]
impl MigrationTrait for Migration {
    async fn up(&self, manager: &SchemaManager) -> Result<(), DbErr> {
        run_statements(manager, STATEMENTS).await
    }

    fn use_transaction(&self) -> Option<bool> {
        Some(true)
    }
}
