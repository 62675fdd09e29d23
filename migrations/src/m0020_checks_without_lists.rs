//! SQLite: the `state` checks of `turns` and `approval_calls` are written as comparisons, not
//! `IN` lists.
//!
//! SQLite checks `state IN ('running', 'done', 'failed', 'stopped')` (an `IN` list of more than
//! two values) by building a temporary b-tree of the values every time the row is written: a
//! turn wrote two (its row, and `end` updating it), an MCP call two more. Opening, filling and
//! closing those b-trees, and zeroing their pages, cost far more than the check itself.
//! `state = 'running' OR state = 'done' OR …` is the same rule and is checked with a few
//! comparisons. SQLite cannot change a check in place, so both tables are
//! built again (its documented way: new table, copy, drop, rename, indexes and triggers again);
//! rows, ids, indexes and the `end` trigger of m0015 are as before.
//!
//! Postgres checks an `IN` list without such cost and is unchanged.

use sea_orm_migration::prelude::*;
use sea_orm_migration::sea_orm::DbBackend;

use crate::run_statements;

#[derive(DeriveMigrationName)]
pub struct Migration;

const SQLITE: &[&str] = &[
    // The trigger names `turns`; renaming a table onto that name checks every trigger that
    // names it, so it goes first and comes back last.
    "DROP TRIGGER turn_events_end_turn",
    "CREATE TABLE turns_rebuilt (
        id TEXT PRIMARY KEY,
        conversation_id TEXT NOT NULL REFERENCES conversations (id) ON DELETE CASCADE,
        state TEXT NOT NULL CHECK (state = 'running' OR state = 'done' OR state = 'failed'
            OR state = 'stopped'),
        started_at_ms BIGINT NOT NULL,
        ended_at_ms BIGINT NULL,
        error TEXT NULL,
        owner_replica TEXT NULL,
        stop_requested_at_ms BIGINT NULL
    )",
    "INSERT INTO turns_rebuilt (id, conversation_id, state, started_at_ms, ended_at_ms, error, \
     owner_replica, stop_requested_at_ms) \
     SELECT id, conversation_id, state, started_at_ms, ended_at_ms, error, owner_replica, \
     stop_requested_at_ms FROM turns ORDER BY rowid",
    "DROP TABLE turns",
    "ALTER TABLE turns_rebuilt RENAME TO turns",
    "CREATE UNIQUE INDEX turns_one_running ON turns (conversation_id) WHERE state = 'running'",
    "CREATE TRIGGER turn_events_end_turn AFTER INSERT ON turn_events \
     WHEN new.kind = 'end' \
     BEGIN UPDATE turns SET state = json_extract(new.data_json, '$.state'), \
     ended_at_ms = new.at_ms WHERE id = new.turn_id AND state = 'running'; END",
    "CREATE TABLE approval_calls_rebuilt (
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
        state TEXT NOT NULL CHECK (state = 'pending' OR state = 'allowed' OR state = 'refused'
            OR state = 'expired' OR state = 'interrupted'),
        answered_by TEXT NULL,
        answered_at_ms BIGINT NULL,
        remember BOOLEAN NOT NULL DEFAULT FALSE,
        reason TEXT NULL,
        owner_replica TEXT NOT NULL
    )",
    "INSERT INTO approval_calls_rebuilt (id, account_id, conversation_id, turn_id, server_id, \
     server_label, server_address, tool_name, model_tool_name, tool_description, \
     tool_definition_hash, arguments_json, arguments_sha256, created_at_ms, deadline_ms, state, \
     answered_by, answered_at_ms, remember, reason, owner_replica) \
     SELECT id, account_id, conversation_id, turn_id, server_id, server_label, server_address, \
     tool_name, model_tool_name, tool_description, tool_definition_hash, arguments_json, \
     arguments_sha256, created_at_ms, deadline_ms, state, answered_by, answered_at_ms, remember, \
     reason, owner_replica FROM approval_calls ORDER BY rowid",
    "DROP TABLE approval_calls",
    "ALTER TABLE approval_calls_rebuilt RENAME TO approval_calls",
    "CREATE INDEX approval_calls_by_account ON approval_calls (account_id, state, created_at_ms)",
    "CREATE INDEX approval_calls_pending ON approval_calls (deadline_ms) WHERE state = 'pending'",
    "CREATE INDEX approval_calls_pending_owner ON approval_calls (owner_replica) \
     WHERE state = 'pending'",
    "CREATE INDEX approval_calls_sent_by_address ON approval_calls (server_address, \
     created_at_ms) WHERE state = 'allowed'",
];

#[async_trait::async_trait]
impl MigrationTrait for Migration {
    async fn up(&self, manager: &SchemaManager) -> Result<(), DbErr> {
        match manager.get_database_backend() {
            DbBackend::Postgres => Ok(()),
            _ => run_statements(manager, SQLITE).await,
        }
    }

    fn use_transaction(&self) -> Option<bool> {
        Some(true)
    }
}
