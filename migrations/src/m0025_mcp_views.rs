//! MCP Apps: the documents of the views a server's tools come with. Kept apart from the server's
//! snapshot (read on every turn) and read only when a view is shown. A document is named by its
//! server and its hash, never replaced: a call made with an older version of a view still shows
//! that version after the server changed it. Removed with the server.

use sea_orm_migration::prelude::*;

use crate::run_statements;

#[derive(DeriveMigrationName)]
pub struct Migration;

const STATEMENTS: &[&str] = &["CREATE TABLE mcp_views (
        server_id TEXT NOT NULL REFERENCES mcp_servers (id) ON DELETE CASCADE,
        hash TEXT NOT NULL,
        uri TEXT NOT NULL,
        html TEXT NOT NULL,
        domains_json TEXT NOT NULL,
        prefers_border BOOLEAN NULL,
        created_at_ms BIGINT NOT NULL,
        PRIMARY KEY (server_id, hash)
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
