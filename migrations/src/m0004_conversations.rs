//! Conversations, their messages, turns, and each turn's event log (what every watching tab
//! streams, and replays from `Last-Event-ID` after a reload).

use sea_orm_migration::prelude::*;

use crate::run_statements;

#[derive(DeriveMigrationName)]
pub struct Migration;

const STATEMENTS: &[&str] = &[
    // `mcp_enabled` is the composer's per-conversation MCP switch, off by default.
    "CREATE TABLE conversations (
        id TEXT PRIMARY KEY,
        account_id TEXT NOT NULL REFERENCES accounts (id) ON DELETE CASCADE,
        title TEXT NOT NULL,
        provider_id TEXT NULL REFERENCES providers (id) ON DELETE SET NULL,
        model TEXT NULL,
        mcp_enabled BOOLEAN NOT NULL DEFAULT FALSE,
        created_at_ms BIGINT NOT NULL,
        updated_at_ms BIGINT NOT NULL
    )",
    "CREATE INDEX conversations_by_account ON conversations (account_id, updated_at_ms)",
    "CREATE TABLE messages (
        id TEXT PRIMARY KEY,
        conversation_id TEXT NOT NULL REFERENCES conversations (id) ON DELETE CASCADE,
        role TEXT NOT NULL CHECK (role IN ('user', 'assistant')),
        content TEXT NOT NULL,
        turn_id TEXT NULL,
        created_at_ms BIGINT NOT NULL
    )",
    "CREATE INDEX messages_by_conversation ON messages (conversation_id, created_at_ms)",
    // At most one running turn per conversation: a partial unique index settles two tabs
    // sending at once.
    "CREATE TABLE turns (
        id TEXT PRIMARY KEY,
        conversation_id TEXT NOT NULL REFERENCES conversations (id) ON DELETE CASCADE,
        state TEXT NOT NULL CHECK (state IN ('running', 'done', 'failed', 'stopped')),
        started_at_ms BIGINT NOT NULL,
        ended_at_ms BIGINT NULL,
        error TEXT NULL
    )",
    "CREATE UNIQUE INDEX turns_one_running ON turns (conversation_id) WHERE state = 'running'",
    // `seq` orders a conversation's events and is the SSE event id.
    "CREATE TABLE turn_events (
        conversation_id TEXT NOT NULL REFERENCES conversations (id) ON DELETE CASCADE,
        seq BIGINT NOT NULL,
        turn_id TEXT NOT NULL,
        kind TEXT NOT NULL,
        data_json TEXT NOT NULL,
        at_ms BIGINT NOT NULL,
        PRIMARY KEY (conversation_id, seq)
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
