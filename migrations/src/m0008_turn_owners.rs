//! Which process runs a turn, and a stop asked for from elsewhere.
//!
//! With several replicas, the person's Stop can reach a replica that is not running the turn:
//! it records the request and the owner, which looks at its turns every second, stops it. A turn
//! whose owner stopped heartbeating is ended by the survivors, so a crashed replica cannot leave
//! a conversation blocked behind a turn nobody runs.

use sea_orm_migration::prelude::*;

use crate::run_statements;

#[derive(DeriveMigrationName)]
pub struct Migration;

const STATEMENTS: &[&str] = &[
    // NULL for turns started before this migration (none of them can still be running).
    "ALTER TABLE turns ADD COLUMN owner_replica TEXT NULL",
    "ALTER TABLE turns ADD COLUMN stop_requested_at_ms BIGINT NULL",
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
