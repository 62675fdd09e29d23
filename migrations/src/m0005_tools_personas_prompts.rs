//! The app's own tools, personas and prompts: the administrator's web search address and
//! default system prompt, per-model prompt rewrites, models declared for a provider, personas
//! with their memory, the conversation's persona, and each account's wording of the app's tools.

use sea_orm_migration::prelude::*;

use crate::run_statements;

#[derive(DeriveMigrationName)]
pub struct Migration;

const STATEMENTS: &[&str] = &[
    // NULL: no web search on the instance (the tool is then not offered).
    "ALTER TABLE instance_settings ADD COLUMN web_search_url TEXT NULL",
    // NULL: the built-in default prompt.
    "ALTER TABLE instance_settings ADD COLUMN system_prompt TEXT NULL",
    // A JSON array of model names the administrator declared, beside those the provider lists.
    "ALTER TABLE providers ADD COLUMN models_json TEXT NULL",
    // The administrator's rewrite of the system prompt for one model of one provider.
    "CREATE TABLE model_prompts (
        provider_id TEXT NOT NULL REFERENCES providers (id) ON DELETE CASCADE,
        model TEXT NOT NULL,
        prompt TEXT NOT NULL,
        updated_at_ms BIGINT NOT NULL,
        PRIMARY KEY (provider_id, model)
    )",
    "CREATE TABLE personas (
        id TEXT PRIMARY KEY,
        account_id TEXT NOT NULL REFERENCES accounts (id) ON DELETE CASCADE,
        name TEXT NOT NULL,
        prompt TEXT NOT NULL,
        memory_enabled BOOLEAN NOT NULL DEFAULT FALSE,
        created_at_ms BIGINT NOT NULL,
        updated_at_ms BIGINT NOT NULL
    )",
    "CREATE UNIQUE INDEX personas_unique_name ON personas (account_id, name)",
    "CREATE TABLE persona_memories (
        id TEXT PRIMARY KEY,
        persona_id TEXT NOT NULL REFERENCES personas (id) ON DELETE CASCADE,
        content TEXT NOT NULL,
        created_at_ms BIGINT NOT NULL
    )",
    "CREATE INDEX persona_memories_by_persona ON persona_memories (persona_id, created_at_ms)",
    "ALTER TABLE conversations ADD COLUMN persona_id TEXT NULL
        REFERENCES personas (id) ON DELETE SET NULL",
    // Settings → Prompts: the person's wording of an app tool's description.
    "CREATE TABLE tool_wordings (
        account_id TEXT NOT NULL REFERENCES accounts (id) ON DELETE CASCADE,
        tool TEXT NOT NULL,
        description TEXT NOT NULL,
        updated_at_ms BIGINT NOT NULL,
        PRIMARY KEY (account_id, tool)
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
