//! The instance's default model: what a new conversation of an account that never chose one
//! starts with, so the first message just works.

use sea_orm_migration::prelude::*;

use crate::run_statements;

#[derive(DeriveMigrationName)]
pub struct Migration;

const STATEMENTS: &[&str] = &[
    // Both NULL: no default (a new conversation waits for the person's choice).
    "ALTER TABLE instance_settings ADD COLUMN default_provider_id TEXT NULL",
    "ALTER TABLE instance_settings ADD COLUMN default_model TEXT NULL",
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
