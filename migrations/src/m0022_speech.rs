//! Speech: which provider and model write recordings down and read replies aloud, and with
//! which voice (all empty: found by the models the providers list), and the voice a person
//! chose for themselves.

use sea_orm_migration::prelude::*;

use crate::run_statements;

#[derive(DeriveMigrationName)]
pub struct Migration;

const STATEMENTS: &[&str] = &[
    "ALTER TABLE instance_settings ADD COLUMN stt_provider_id TEXT NULL",
    "ALTER TABLE instance_settings ADD COLUMN stt_model TEXT NULL",
    "ALTER TABLE instance_settings ADD COLUMN tts_provider_id TEXT NULL",
    "ALTER TABLE instance_settings ADD COLUMN tts_model TEXT NULL",
    "ALTER TABLE instance_settings ADD COLUMN tts_voice TEXT NULL",
    "ALTER TABLE account_preferences ADD COLUMN speech_voice TEXT NULL",
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
