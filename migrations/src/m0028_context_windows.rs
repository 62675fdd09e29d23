//! Long conversations. A model's context window, in tokens, where an administrator writes it
//! (`providers.context_windows_json`, a JSON object of model id to tokens), else the instance's
//! default (`instance_settings.context_tokens`). When a turn would fill too much of it, the
//! oldest messages are summarized once by the model and the summary is sent in their place: a
//! row of `conversation_summaries` names the last message it covers.
//!
//! Invariants:
//! - A summary covers every message of its conversation up to and including
//!   `through_message_id` (in the messages' order) and what the summary before it covered; the
//!   conversation's newest summary is the one sent.
//! - A summary lives only while the message it ends at does (removing messages from an edit
//!   removes the summaries that covered them, by cascade).
//! - Writing a summary moves the conversation's `history_version` (m0019) like a message does:
//!   a history held under the old number was not cut at the summary, and must be read again.

use sea_orm_migration::prelude::*;
use sea_orm_migration::sea_orm::DbBackend;

use crate::run_statements;

#[derive(DeriveMigrationName)]
pub struct Migration;

const TABLES: &[&str] = &[
    "ALTER TABLE providers ADD COLUMN context_windows_json TEXT NULL",
    "ALTER TABLE instance_settings ADD COLUMN context_tokens BIGINT NOT NULL DEFAULT 8192",
    "CREATE TABLE conversation_summaries (
        id TEXT PRIMARY KEY,
        conversation_id TEXT NOT NULL REFERENCES conversations (id) ON DELETE CASCADE,
        through_message_id TEXT NOT NULL REFERENCES messages (id) ON DELETE CASCADE,
        content TEXT NOT NULL,
        covered_messages BIGINT NOT NULL,
        created_at_ms BIGINT NOT NULL
    )",
    "CREATE INDEX conversation_summaries_newest \
     ON conversation_summaries (conversation_id, created_at_ms)",
    "CREATE INDEX conversation_summaries_through ON conversation_summaries (through_message_id)",
];

const SQLITE: &[&str] = &["CREATE TRIGGER conversation_summaries_count AFTER INSERT \
     ON conversation_summaries BEGIN UPDATE conversations \
     SET history_version = history_version + 1 WHERE id = new.conversation_id; END"];

const POSTGRES: &[&str] = &[
    "CREATE FUNCTION conversation_summaries_count() RETURNS trigger LANGUAGE plpgsql AS $$ \
     BEGIN UPDATE conversations SET history_version = history_version + 1 \
     WHERE id = NEW.conversation_id; RETURN NULL; END $$",
    "CREATE TRIGGER conversation_summaries_count AFTER INSERT ON conversation_summaries \
     FOR EACH ROW EXECUTE FUNCTION conversation_summaries_count()",
];

#[async_trait::async_trait]
impl MigrationTrait for Migration {
    async fn up(&self, manager: &SchemaManager) -> Result<(), DbErr> {
        run_statements(manager, TABLES).await?;
        match manager.get_database_backend() {
            DbBackend::Postgres => run_statements(manager, POSTGRES).await,
            _ => run_statements(manager, SQLITE).await,
        }
    }

    fn use_transaction(&self) -> Option<bool> {
        Some(true)
    }
}
