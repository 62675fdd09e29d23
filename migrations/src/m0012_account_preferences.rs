//! An account's preferences for everyday chat (today: whether a new conversation is named by
//! the model after its first reply). One row per account that changed one; none means the
//! defaults.

use sea_orm_migration::prelude::*;

use crate::run_statements;

#[derive(DeriveMigrationName)]
pub struct Migration;

const STATEMENTS: &[&str] = &["CREATE TABLE account_preferences (
        account_id TEXT PRIMARY KEY REFERENCES accounts(id) ON DELETE CASCADE,
        titles_from_model BOOLEAN NOT NULL DEFAULT FALSE,
        updated_at_ms BIGINT NOT NULL
    )"];

#[async_trait::async_trait]
impl MigrationTrait for Migration {
    async fn up(&self, manager: &SchemaManager) -> Result<(), DbErr> {
        run_statements(manager, STATEMENTS).await
    }

    fn use_transaction(&self) -> Option<bool> {
        Some(true)
    }
}
