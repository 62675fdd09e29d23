//! Files a person attaches to a message: images and documents, kept in the database so every
//! replica serves them and a backup holds them. A file belongs to an account and a
//! conversation (deleted with either); it is attached to a turn (the person's message of that
//! turn) once sent, and unattached until then.
//!
//! Metadata and contents are two tables: lists and checks read the small rows, and only a
//! download or a model request reads the bytes. A model's vision is per provider and model
//! (`providers.vision_models_json`, a JSON list of model ids), set by an administrator.

use sea_orm_migration::prelude::*;
use sea_orm_migration::sea_orm::DbBackend;

use crate::run_statements;

#[derive(DeriveMigrationName)]
pub struct Migration;

/// The two engines differ only in the type of bytes (SQLite `BLOB`, Postgres `BYTEA`).
fn statements(bytes: &str) -> Vec<String> {
    vec![
        "CREATE TABLE files (
            id TEXT PRIMARY KEY,
            account_id TEXT NOT NULL REFERENCES accounts (id) ON DELETE CASCADE,
            conversation_id TEXT NOT NULL REFERENCES conversations (id) ON DELETE CASCADE,
            turn_id TEXT NULL,
            name TEXT NOT NULL,
            kind TEXT NOT NULL CHECK (kind = 'image' OR kind = 'document'),
            content_type TEXT NOT NULL,
            size_bytes BIGINT NOT NULL,
            width BIGINT NULL,
            height BIGINT NULL,
            text_chars BIGINT NULL,
            text_cut BOOLEAN NOT NULL DEFAULT FALSE,
            created_at_ms BIGINT NOT NULL
        )"
        .to_owned(),
        "CREATE INDEX files_of_turns ON files (conversation_id, turn_id)".to_owned(),
        "CREATE INDEX files_of_accounts ON files (account_id)".to_owned(),
        format!(
            "CREATE TABLE file_contents (
                file_id TEXT PRIMARY KEY REFERENCES files (id) ON DELETE CASCADE,
                bytes {bytes} NOT NULL,
                thumbnail {bytes} NULL,
                text TEXT NULL
            )"
        ),
        "ALTER TABLE providers ADD COLUMN vision_models_json TEXT NULL".to_owned(),
    ]
}

#[async_trait::async_trait]
impl MigrationTrait for Migration {
    async fn up(&self, manager: &SchemaManager) -> Result<(), DbErr> {
        let statements = match manager.get_database_backend() {
            DbBackend::Postgres => statements("BYTEA"),
            _ => statements("BLOB"),
        };
        let statements: Vec<&str> = statements.iter().map(String::as_str).collect();
        run_statements(manager, &statements).await
    }

    fn use_transaction(&self) -> Option<bool> {
        Some(true)
    }
}
