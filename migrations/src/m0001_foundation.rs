//! Accounts, sessions, login throttling, instance state and settings, model providers.

use sea_orm_migration::prelude::*;

use crate::run_statements;

#[derive(DeriveMigrationName)]
pub struct Migration;

const STATEMENTS: &[&str] = &[
    // One row (id = 1). `setup_complete` is claimed by a conditional update so that exactly one
    // first registration becomes the administrator. `vault_canary` detects a wrong instance secret.
    "CREATE TABLE instance_state (
        id INTEGER PRIMARY KEY,
        setup_complete BOOLEAN NOT NULL DEFAULT FALSE,
        vault_canary TEXT NULL,
        updated_at_ms BIGINT NOT NULL DEFAULT 0
    )",
    "INSERT INTO instance_state (id) VALUES (1)",
    // One row (id = 1): what administrators decide for the whole instance.
    "CREATE TABLE instance_settings (
        id INTEGER PRIMARY KEY,
        registration_open BOOLEAN NOT NULL DEFAULT FALSE,
        users_can_add_mcp_servers BOOLEAN NOT NULL DEFAULT FALSE,
        updated_at_ms BIGINT NOT NULL DEFAULT 0
    )",
    "INSERT INTO instance_settings (id) VALUES (1)",
    "CREATE TABLE accounts (
        id TEXT PRIMARY KEY,
        username TEXT NOT NULL UNIQUE,
        display_name TEXT NOT NULL,
        password_hash TEXT NOT NULL,
        role TEXT NOT NULL CHECK (role IN ('admin', 'user')),
        created_at_ms BIGINT NOT NULL,
        password_changed_at_ms BIGINT NOT NULL
    )",
    // The session token itself is never stored: only its SHA-256.
    "CREATE TABLE sessions (
        token_hash TEXT PRIMARY KEY,
        account_id TEXT NOT NULL REFERENCES accounts (id) ON DELETE CASCADE,
        csrf_token TEXT NOT NULL,
        created_at_ms BIGINT NOT NULL,
        last_seen_at_ms BIGINT NOT NULL,
        expires_at_ms BIGINT NOT NULL,
        client_addr TEXT NULL,
        user_agent TEXT NULL
    )",
    "CREATE INDEX sessions_by_account ON sessions (account_id)",
    // Failed logins, per account name and per client address, for throttling.
    "CREATE TABLE login_failures (
        id TEXT PRIMARY KEY,
        scope TEXT NOT NULL CHECK (scope IN ('account', 'address')),
        subject TEXT NOT NULL,
        at_ms BIGINT NOT NULL
    )",
    "CREATE INDEX login_failures_lookup ON login_failures (scope, subject, at_ms)",
    // Model providers, configured by administrators. The key is a vault ciphertext bound to
    // (providers, api_key_ciphertext, id).
    "CREATE TABLE providers (
        id TEXT PRIMARY KEY,
        name TEXT NOT NULL UNIQUE,
        base_url TEXT NOT NULL,
        api_key_ciphertext TEXT NULL,
        created_at_ms BIGINT NOT NULL,
        updated_at_ms BIGINT NOT NULL
    )",
];

#[async_trait::async_trait]
impl MigrationTrait for Migration {
    async fn up(&self, manager: &SchemaManager) -> Result<(), DbErr> {
        run_statements(manager, STATEMENTS).await
    }

    // All or nothing on SQLite too (Postgres wraps each migration in a transaction anyway).
    fn use_transaction(&self) -> Option<bool> {
        Some(true)
    }
}
