//! A model provider an administrator marked as running on this machine or the local network
//! (Ollama, llama.cpp, vLLM, LM Studio): its own origin may reach loopback and private
//! addresses without `PROVIDER_ALLOWED_ORIGINS` (docs/network-policy.md).

use sea_orm_migration::prelude::*;

use crate::run_statements;

#[derive(DeriveMigrationName)]
pub struct Migration;

const STATEMENTS: &[&str] =
    &["ALTER TABLE providers ADD COLUMN local_network BOOLEAN NOT NULL DEFAULT FALSE"];

#[async_trait::async_trait]
impl MigrationTrait for Migration {
    async fn up(&self, manager: &SchemaManager) -> Result<(), DbErr> {
        run_statements(manager, STATEMENTS).await
    }

    fn use_transaction(&self) -> Option<bool> {
        Some(true)
    }
}
