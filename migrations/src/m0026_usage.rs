//! Usage, spend and limits. Every model request adds its tokens to its account's row for the
//! day (UTC) and model; the database adds (one conditional upsert), so several replicas count
//! together. Spend is counted at the model's price when the request was made (in nanounits of
//! the instance's currency: a price change applies from then on). Prices are per million
//! tokens, in millionths of the currency. An account's limits, when it has a row, replace the
//! instance's defaults as a whole; a null column is no limit. Turns per minute are counted per
//! minute window by a conditional upsert that refuses past the limit.

use sea_orm_migration::prelude::*;

use crate::run_statements;

#[derive(DeriveMigrationName)]
pub struct Migration;

const STATEMENTS: &[&str] = &[
    // No reference to the provider: what was used stays counted after a provider is removed.
    "CREATE TABLE usage_days (
        account_id TEXT NOT NULL REFERENCES accounts (id) ON DELETE CASCADE,
        day TEXT NOT NULL,
        provider_id TEXT NOT NULL,
        model TEXT NOT NULL,
        requests BIGINT NOT NULL,
        estimated_requests BIGINT NOT NULL,
        input_tokens BIGINT NOT NULL,
        cached_input_tokens BIGINT NOT NULL,
        output_tokens BIGINT NOT NULL,
        spend_nanos BIGINT NOT NULL,
        PRIMARY KEY (account_id, day, provider_id, model)
    )",
    "CREATE INDEX usage_days_by_day ON usage_days (day)",
    "CREATE TABLE model_prices (
        provider_id TEXT NOT NULL REFERENCES providers (id) ON DELETE CASCADE,
        model TEXT NOT NULL,
        input_micros BIGINT NOT NULL,
        cached_input_micros BIGINT NULL,
        output_micros BIGINT NOT NULL,
        updated_at_ms BIGINT NOT NULL,
        PRIMARY KEY (provider_id, model)
    )",
    "CREATE TABLE account_limits (
        account_id TEXT PRIMARY KEY REFERENCES accounts (id) ON DELETE CASCADE,
        tokens_per_day BIGINT NULL,
        tokens_per_month BIGINT NULL,
        spend_micros_per_day BIGINT NULL,
        spend_micros_per_month BIGINT NULL,
        turns_per_minute BIGINT NULL,
        updated_at_ms BIGINT NOT NULL
    )",
    "ALTER TABLE instance_settings ADD COLUMN currency TEXT NOT NULL DEFAULT 'USD'",
    "ALTER TABLE instance_settings ADD COLUMN limit_tokens_per_day BIGINT NULL",
    "ALTER TABLE instance_settings ADD COLUMN limit_tokens_per_month BIGINT NULL",
    "ALTER TABLE instance_settings ADD COLUMN limit_spend_micros_per_day BIGINT NULL",
    "ALTER TABLE instance_settings ADD COLUMN limit_spend_micros_per_month BIGINT NULL",
    "ALTER TABLE instance_settings ADD COLUMN limit_turns_per_minute BIGINT NULL",
    // Old windows are removed as new ones are counted.
    "CREATE TABLE turn_windows (
        account_id TEXT NOT NULL REFERENCES accounts (id) ON DELETE CASCADE,
        window_start_ms BIGINT NOT NULL,
        turns BIGINT NOT NULL,
        PRIMARY KEY (account_id, window_start_ms)
    )",
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
