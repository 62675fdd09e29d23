//! The instance's catalogue of MCP servers (Settings → Tools → Discover) and the accounts'
//! ratings of its entries.
//!
//! Entries kept by administrators live here; entries from the operator's catalogue file are read
//! at start and never stored, so their ratings name them by the file's key (`file:<id>`) and
//! carry no foreign key. Usage is never stored: it is counted from `mcp_servers` and
//! `approval_calls` by address, hence the two indexes.

use sea_orm_migration::prelude::*;

use crate::run_statements;

#[derive(DeriveMigrationName)]
pub struct Migration;

const STATEMENTS: &[&str] = &[
    "CREATE TABLE mcp_catalogue_entries (
        id TEXT PRIMARY KEY,
        label TEXT NOT NULL,
        address TEXT NOT NULL,
        description TEXT NOT NULL,
        token_needed BOOLEAN NOT NULL,
        token_help TEXT NOT NULL,
        icon TEXT NOT NULL,
        tags_json TEXT NOT NULL,
        created_at_ms BIGINT NOT NULL,
        updated_at_ms BIGINT NOT NULL
    )",
    "CREATE TABLE mcp_catalogue_ratings (
        entry_id TEXT NOT NULL,
        account_id TEXT NOT NULL REFERENCES accounts (id) ON DELETE CASCADE,
        stars INTEGER NOT NULL CHECK (stars BETWEEN 1 AND 5),
        updated_at_ms BIGINT NOT NULL,
        PRIMARY KEY (entry_id, account_id)
    )",
    "CREATE INDEX mcp_servers_by_address ON mcp_servers (address)",
    // Only calls that went out are counted: a partial index that covers the count, so it never
    // reads the table (measured: `cargo bench -p llooma-store --bench catalogue`).
    "CREATE INDEX approval_calls_sent_by_address ON approval_calls (server_address, created_at_ms)
        WHERE state = 'allowed'",
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
