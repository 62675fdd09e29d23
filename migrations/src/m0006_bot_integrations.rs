//! Chatto bot integrations per account, the activation ledger behind the guard rails, and a lease
//! per integration so exactly one replica polls it.

use sea_orm_migration::prelude::*;

use crate::run_statements;

#[derive(DeriveMigrationName)]
pub struct Migration;

const STATEMENTS: &[&str] = &[
    // The API key is a vault ciphertext bound to (bot_integrations, api_key_ciphertext, id).
    // `bot_*` is who the key belongs to, read when the connection was checked. `run_state` is what
    // the polling replica last reported (idle, running, backing_off, slowed_down, paused);
    // `paused_reason` is set only while paused, `last_error` and `missing_permission` describe the
    // latest failure. Nothing of a room's conversation is ever stored here.
    "CREATE TABLE bot_integrations (
        id TEXT PRIMARY KEY,
        account_id TEXT NOT NULL REFERENCES accounts (id) ON DELETE CASCADE,
        label TEXT NOT NULL,
        address TEXT NOT NULL,
        api_key_ciphertext TEXT NOT NULL,
        bot_user_id TEXT NOT NULL,
        bot_login TEXT NOT NULL,
        bot_display_name TEXT NOT NULL,
        provider_id TEXT NULL REFERENCES providers (id) ON DELETE SET NULL,
        model TEXT NULL,
        context_mode TEXT NOT NULL
            CHECK (context_mode IN ('calling_message', 'messages_before', 'whole_thread')),
        context_count BIGINT NOT NULL,
        placement TEXT NOT NULL CHECK (placement IN ('where_asked', 'always_thread', 'always_room')),
        identity_source TEXT NOT NULL
            CHECK (identity_source IN ('system_prompt', 'persona', 'instructions')),
        persona_id TEXT NULL,
        instructions TEXT NULL,
        tools_json TEXT NOT NULL,
        mcp_ticked BOOLEAN NOT NULL DEFAULT FALSE,
        enabled BOOLEAN NOT NULL DEFAULT TRUE,
        run_state TEXT NOT NULL DEFAULT 'idle',
        paused_reason TEXT NULL,
        last_error TEXT NULL,
        missing_permission TEXT NULL,
        state_at_ms BIGINT NOT NULL,
        created_at_ms BIGINT NOT NULL,
        updated_at_ms BIGINT NOT NULL
    )",
    "CREATE INDEX bot_integrations_by_account ON bot_integrations (account_id, created_at_ms)",
    // One row per activation, inserted before the answer is generated: the primary key is what
    // makes an activation answered at most once, and the rows of the last hour are the reply
    // count of the 60-per-hour rail. Rows older than the rails need are purged.
    "CREATE TABLE bot_activations (
        integration_id TEXT NOT NULL REFERENCES bot_integrations (id) ON DELETE CASCADE,
        room_id TEXT NOT NULL,
        event_id TEXT NOT NULL,
        recorded_at_ms BIGINT NOT NULL,
        PRIMARY KEY (integration_id, room_id, event_id)
    )",
    "CREATE INDEX bot_activations_by_time ON bot_activations (integration_id, recorded_at_ms)",
    // Created with the integration; claimed by one conditional UPDATE (free, expired, or already
    // ours), so exactly one replica polls an integration.
    "CREATE TABLE bot_leases (
        integration_id TEXT PRIMARY KEY REFERENCES bot_integrations (id) ON DELETE CASCADE,
        holder TEXT NULL,
        expires_at_ms BIGINT NOT NULL
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
