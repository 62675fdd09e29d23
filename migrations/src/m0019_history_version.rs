//! Each conversation counts the changes to its messages in `history_version`: every message
//! inserted, deleted or updated adds one, in the database, by trigger, whoever writes it (this
//! process, another replica, an operator's SQL). A turn that already holds a conversation's
//! messages from an earlier turn names the version it holds them at, and the messages are read
//! again only when the number differs (`Store::turn_context`): reading a history costs more the
//! longer it is, and on most turns it is the one the previous turn already read.
//!
//! Invariant: the number only grows, and two reads of a conversation that see the same number
//! see the same messages.
//!
//! On insert the count moves in the statement m0014 already runs (the conversation's
//! `updated_at_ms`), so a turn's two messages write nothing more.

use sea_orm_migration::prelude::*;
use sea_orm_migration::sea_orm::DbBackend;

use crate::run_statements;

#[derive(DeriveMigrationName)]
pub struct Migration;

const SQLITE: &[&str] = &[
    "ALTER TABLE conversations ADD COLUMN history_version BIGINT NOT NULL DEFAULT 0",
    "DROP TRIGGER messages_touch_conversation",
    "CREATE TRIGGER messages_touch_conversation AFTER INSERT ON messages \
     BEGIN UPDATE conversations SET updated_at_ms = new.created_at_ms, \
     history_version = history_version + 1 WHERE id = new.conversation_id; END",
    "CREATE TRIGGER messages_delete_counts AFTER DELETE ON messages \
     BEGIN UPDATE conversations SET history_version = history_version + 1 \
     WHERE id = old.conversation_id; END",
    "CREATE TRIGGER messages_update_counts AFTER UPDATE ON messages \
     BEGIN UPDATE conversations SET history_version = history_version + 1 \
     WHERE id IN (old.conversation_id, new.conversation_id); END",
];

const POSTGRES: &[&str] = &[
    "ALTER TABLE conversations ADD COLUMN history_version BIGINT NOT NULL DEFAULT 0",
    "CREATE OR REPLACE FUNCTION messages_touch_conversation() RETURNS trigger LANGUAGE plpgsql \
     AS $$ BEGIN UPDATE conversations SET updated_at_ms = NEW.created_at_ms, \
     history_version = history_version + 1 WHERE id = NEW.conversation_id; RETURN NULL; END $$",
    "CREATE FUNCTION messages_count_change() RETURNS trigger LANGUAGE plpgsql AS $$ BEGIN \
     IF TG_OP = 'UPDATE' THEN UPDATE conversations SET history_version = history_version + 1 \
     WHERE id IN (OLD.conversation_id, NEW.conversation_id); \
     ELSE UPDATE conversations SET history_version = history_version + 1 \
     WHERE id = OLD.conversation_id; END IF; RETURN NULL; END $$",
    "CREATE TRIGGER messages_count_change AFTER DELETE OR UPDATE ON messages \
     FOR EACH ROW EXECUTE FUNCTION messages_count_change()",
];

#[async_trait::async_trait]
impl MigrationTrait for Migration {
    async fn up(&self, manager: &SchemaManager) -> Result<(), DbErr> {
        match manager.get_database_backend() {
            DbBackend::Postgres => run_statements(manager, POSTGRES).await,
            _ => run_statements(manager, SQLITE).await,
        }
    }

    fn use_transaction(&self) -> Option<bool> {
        Some(true)
    }
}
