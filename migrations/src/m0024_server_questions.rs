//! A server's question during a call (an MCP form) is a card like a call to allow: the form it
//! asks for is kept with it, and the person's answer until the waiting turn has read it.

use sea_orm_migration::prelude::*;

use crate::run_statements;

#[derive(DeriveMigrationName)]
pub struct Migration;

const STATEMENTS: &[&str] = &[
    "ALTER TABLE approval_calls ADD COLUMN question_json TEXT NULL",
    "ALTER TABLE approval_calls ADD COLUMN reply_json TEXT NULL",
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
