//! A turn's `end` event ends the turn, in the database, as part of the event's insert: the turn
//! is never seen ended without its `end` in the log, nor the other way round, and ending a turn
//! is one statement instead of a transaction of four (begin, update, insert, commit; each a
//! round trip to the database). The turn takes the event's state (`done`, `failed`, `stopped`)
//! and time; a turn already ended (by the sweep of a stopped server's turns) is left as it is.

use sea_orm_migration::prelude::*;
use sea_orm_migration::sea_orm::DbBackend;

use crate::run_statements;

#[derive(DeriveMigrationName)]
pub struct Migration;

const SQLITE: &[&str] = &["CREATE TRIGGER turn_events_end_turn AFTER INSERT ON turn_events \
     WHEN new.kind = 'end' \
     BEGIN UPDATE turns SET state = json_extract(new.data_json, '$.state'), \
     ended_at_ms = new.at_ms WHERE id = new.turn_id AND state = 'running'; END"];

const POSTGRES: &[&str] = &[
    "CREATE FUNCTION turn_events_end_turn() RETURNS trigger LANGUAGE plpgsql AS $$ \
     BEGIN UPDATE turns SET state = NEW.data_json::json ->> 'state', \
     ended_at_ms = NEW.at_ms WHERE id = NEW.turn_id AND state = 'running'; RETURN NULL; END $$",
    "CREATE TRIGGER turn_events_end_turn AFTER INSERT ON turn_events \
     FOR EACH ROW WHEN (NEW.kind = 'end') EXECUTE FUNCTION turn_events_end_turn()",
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
