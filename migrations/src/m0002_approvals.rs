//! The approval broker (pending tool calls, replica heartbeats) and remembered consent
//! (permission mode, "Always allow" grants, allow rules).

use sea_orm_migration::prelude::*;

use crate::run_statements;

#[derive(DeriveMigrationName)]
pub struct Migration;

const STATEMENTS: &[&str] = &[
    // One row per running process. A pending call whose owner's heartbeat is stale is
    // interrupted by any other replica: its turn died with the process.
    "CREATE TABLE replicas (
        id TEXT PRIMARY KEY,
        started_at_ms BIGINT NOT NULL,
        heartbeat_at_ms BIGINT NOT NULL
    )",
    // Every external tool call, asked or not. The arguments are stored exactly as shown, in
    // canonical JSON, with their SHA-256; the call that goes out must hash the same. `state`
    // leaves 'pending' once, by a conditional update: the first answer wins.
    "CREATE TABLE approval_calls (
        id TEXT PRIMARY KEY,
        account_id TEXT NOT NULL REFERENCES accounts (id) ON DELETE CASCADE,
        conversation_id TEXT NOT NULL,
        turn_id TEXT NOT NULL,
        server_id TEXT NOT NULL,
        server_label TEXT NOT NULL,
        server_address TEXT NOT NULL,
        tool_name TEXT NOT NULL,
        model_tool_name TEXT NOT NULL,
        tool_description TEXT NOT NULL,
        tool_definition_hash TEXT NOT NULL,
        arguments_json TEXT NOT NULL,
        arguments_sha256 TEXT NOT NULL,
        created_at_ms BIGINT NOT NULL,
        deadline_ms BIGINT NOT NULL,
        state TEXT NOT NULL
            CHECK (state IN ('pending', 'allowed', 'refused', 'expired', 'interrupted')),
        answered_by TEXT NULL,
        answered_at_ms BIGINT NULL,
        remember BOOLEAN NOT NULL DEFAULT FALSE,
        reason TEXT NULL,
        owner_replica TEXT NOT NULL
    )",
    "CREATE INDEX approval_calls_by_account ON approval_calls (account_id, state, created_at_ms)",
    // Sweeps look at pending rows only; keep that index small.
    "CREATE INDEX approval_calls_pending ON approval_calls (deadline_ms) WHERE state = 'pending'",
    "CREATE INDEX approval_calls_pending_owner ON approval_calls (owner_replica)
        WHERE state = 'pending'",
    // No row means the default, 'ask'.
    "CREATE TABLE consent_modes (
        account_id TEXT PRIMARY KEY REFERENCES accounts (id) ON DELETE CASCADE,
        mode TEXT NOT NULL CHECK (mode IN ('ask', 'rules', 'allow_all')),
        updated_at_ms BIGINT NOT NULL
    )",
    // "Always allow": the same server, the same tool as then described, the same arguments.
    "CREATE TABLE consent_grants (
        id TEXT PRIMARY KEY,
        account_id TEXT NOT NULL REFERENCES accounts (id) ON DELETE CASCADE,
        server_address TEXT NOT NULL,
        tool_name TEXT NOT NULL,
        tool_definition_hash TEXT NOT NULL,
        arguments_json TEXT NOT NULL,
        arguments_sha256 TEXT NOT NULL,
        source_call_id TEXT NULL,
        created_at_ms BIGINT NOT NULL,
        UNIQUE (account_id, server_address, tool_name, tool_definition_hash, arguments_sha256)
    )",
    // Allow rules written in settings; `constraints_json` maps argument names to
    // `{"exact": value}` or `"any"`.
    "CREATE TABLE consent_rules (
        id TEXT PRIMARY KEY,
        account_id TEXT NOT NULL REFERENCES accounts (id) ON DELETE CASCADE,
        server_address TEXT NOT NULL,
        tool_name TEXT NOT NULL,
        tool_definition_hash TEXT NOT NULL,
        constraints_json TEXT NOT NULL,
        created_at_ms BIGINT NOT NULL
    )",
    "CREATE INDEX consent_rules_by_account ON consent_rules (account_id, server_address, tool_name)",
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
