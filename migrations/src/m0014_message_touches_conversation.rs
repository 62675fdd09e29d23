//! A new message moves its conversation's `updated_at_ms` to the message's time, in the
//! database, as part of the insert: one statement per message instead of two (a turn writes
//! two messages, and each statement is a round trip to the database).

use sea_orm_migration::prelude::*;
use sea_orm_migration::sea_orm::DbBackend;

use crate::run_statements;

#[derive(DeriveMigrationName)]
pub struct Migration;

const SQLITE: &[&str] = &["CREATE TRIGGER messages_touch_conversation AFTER INSERT ON messages \
     BEGIN UPDATE conversations SET updated_at_ms = new.created_at_ms \
     WHERE id = new.conversation_id; END"];

const POSTGRES: &[&str] = &[
    "CREATE FUNCTION messages_touch_conversation() RETURNS trigger LANGUAGE plpgsql AS $$ \
     BEGIN UPDATE conversations SET updated_at_ms = NEW.created_at_ms \
     WHERE id = NEW.conversation_id; RETURN NULL; END $$",
    "CREATE TRIGGER messages_touch_conversation AFTER INSERT ON messages \
     FOR EACH ROW EXECUTE FUNCTION messages_touch_conversation()",
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
