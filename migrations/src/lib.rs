//! Forward-only schema migrations for Llooma's database (SQLite and Postgres).
//!
//! Every migration is plain SQL that both engines accept, so the schema reads the same on both.
//! Conventions that keep it portable:
//! - ids are `TEXT` (UUIDs in their hyphenated form), never auto-increment;
//! - timestamps are `BIGINT` milliseconds since the Unix epoch (comparable and sortable on both
//!   engines, unlike SQLite's text dates);
//! - secrets are `TEXT` ciphertexts produced by `llooma-vault`, never plaintext.
//!
//! Migrations never go down: a mistake is fixed by the next migration. The exceptions to "the
//! same SQL on both" are full-text search (`m0011`, `m0017`, `m0018`), which uses each engine's
//! own index, triggers (each engine's own syntax), and SQLite's own costs (`m0020`: checks
//! written so SQLite needs no temporary b-tree to run them).

use sea_orm_migration::prelude::*;

pub use sea_orm_migration::MigratorTrait;

mod m0001_foundation;
mod m0002_approvals;
mod m0003_mcp_servers;
mod m0004_conversations;
mod m0005_tools_personas_prompts;
mod m0006_bot_integrations;
mod m0008_turn_owners;
mod m0009_mcp_catalogue;
mod m0010_default_model;
mod m0011_message_search;
mod m0012_account_preferences;
mod m0013_local_providers;
mod m0014_message_touches_conversation;
mod m0015_end_event_ends_turn;
mod m0016_messages_in_order;
mod m0017_search_index_behind;
mod m0018_search_index_mark;
mod m0019_history_version;
mod m0020_checks_without_lists;
mod m0021_files;
mod m0022_speech;
mod m0023_tool_hints;
mod m0024_server_questions;
mod m0025_mcp_views;
mod m0026_usage;
mod m0027_title_search;
mod m0028_context_windows;

/// The list of migrations, oldest first.
#[derive(Debug)]
pub struct Migrator;

impl MigratorTrait for Migrator {
    fn migrations() -> Vec<Box<dyn MigrationTrait>> {
        vec![
            Box::new(m0001_foundation::Migration),
            Box::new(m0002_approvals::Migration),
            Box::new(m0003_mcp_servers::Migration),
            Box::new(m0004_conversations::Migration),
            Box::new(m0005_tools_personas_prompts::Migration),
            Box::new(m0006_bot_integrations::Migration),
            // m0007 is reserved for work in progress (web).
            Box::new(m0008_turn_owners::Migration),
            Box::new(m0009_mcp_catalogue::Migration),
            Box::new(m0010_default_model::Migration),
            Box::new(m0011_message_search::Migration),
            Box::new(m0012_account_preferences::Migration),
            Box::new(m0013_local_providers::Migration),
            Box::new(m0014_message_touches_conversation::Migration),
            Box::new(m0015_end_event_ends_turn::Migration),
            Box::new(m0016_messages_in_order::Migration),
            Box::new(m0017_search_index_behind::Migration),
            Box::new(m0018_search_index_mark::Migration),
            Box::new(m0019_history_version::Migration),
            Box::new(m0020_checks_without_lists::Migration),
            Box::new(m0021_files::Migration),
            Box::new(m0022_speech::Migration),
            Box::new(m0023_tool_hints::Migration),
            Box::new(m0024_server_questions::Migration),
            Box::new(m0025_mcp_views::Migration),
            Box::new(m0026_usage::Migration),
            Box::new(m0027_title_search::Migration),
            Box::new(m0028_context_windows::Migration),
        ]
    }
}

/// Runs each statement of a migration in order.
pub(crate) async fn run_statements(
    manager: &SchemaManager<'_>,
    statements: &[&str],
) -> Result<(), DbErr> {
    let conn = manager.get_connection();
    for statement in statements {
        conn.execute_unprepared(statement).await?;
    }
    Ok(())
}
