//! MCP servers per account, their catalogue snapshots, group switches, and per-account tool
//! settings (budget, "MCP tools everywhere", announce mode).

use sea_orm_migration::prelude::*;

use crate::run_statements;

#[derive(DeriveMigrationName)]
pub struct Migration;

const STATEMENTS: &[&str] = &[
    // `slug` is the server half of model-facing tool names: chosen once from the label, never
    // changed, unique per account. `position` is the order servers were added in, which decides
    // who is left out when the tool budget is exceeded. The token is a vault ciphertext bound to
    // (mcp_servers, token_ciphertext, id). `enabled` is the owner's switch; `suspended_*` is an
    // administrator's decision, kept apart so the owner cannot undo it.
    "CREATE TABLE mcp_servers (
        id TEXT PRIMARY KEY,
        account_id TEXT NOT NULL REFERENCES accounts (id) ON DELETE CASCADE,
        label TEXT NOT NULL,
        slug TEXT NOT NULL,
        address TEXT NOT NULL,
        token_ciphertext TEXT NULL,
        enabled BOOLEAN NOT NULL DEFAULT TRUE,
        suspended_reason TEXT NULL,
        suspended_at_ms BIGINT NULL,
        suspended_by TEXT NULL,
        snapshot_json TEXT NOT NULL,
        snapshot_taken_at_ms BIGINT NOT NULL,
        snapshot_stale BOOLEAN NOT NULL DEFAULT FALSE,
        position BIGINT NOT NULL,
        created_at_ms BIGINT NOT NULL,
        updated_at_ms BIGINT NOT NULL,
        UNIQUE (account_id, slug)
    )",
    "CREATE INDEX mcp_servers_by_account ON mcp_servers (account_id, position)",
    // Absent row = the group is on. The unnamed group has the key ''.
    "CREATE TABLE mcp_group_switches (
        server_id TEXT NOT NULL REFERENCES mcp_servers (id) ON DELETE CASCADE,
        group_key TEXT NOT NULL,
        enabled BOOLEAN NOT NULL,
        PRIMARY KEY (server_id, group_key)
    )",
    // Absent row = the defaults.
    "CREATE TABLE account_tool_settings (
        account_id TEXT PRIMARY KEY REFERENCES accounts (id) ON DELETE CASCADE,
        tool_budget BIGINT NOT NULL,
        mcp_everywhere BOOLEAN NOT NULL,
        announce_mode BOOLEAN NOT NULL,
        updated_at_ms BIGINT NOT NULL
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
