//! m0020 builds `turns` and `approval_calls` again on SQLite: what they held before is what they
//! hold after, and every rule on them (checks, the one running turn, the `end` trigger) still
//! holds. SQLite only: Postgres runs nothing in m0020.

#![expect(clippy::unwrap_used, reason = "test helpers panic on failed setup")]

use std::path::Path;

use llooma_migration::{Migrator, MigratorTrait};
use sea_orm_migration::sea_orm::{
    ConnectionTrait, Database, DatabaseConnection, DbBackend, QueryResult, Statement,
};

async fn run(db: &DatabaseConnection, sql: &str) {
    db.execute_unprepared(sql).await.unwrap_or_else(|err| panic!("{sql}: {err}"));
}

async fn rows(db: &DatabaseConnection, sql: &str) -> Vec<QueryResult> {
    db.query_all_raw(Statement::from_string(DbBackend::Sqlite, sql)).await.unwrap()
}

/// Every row of `table`, every column as text, in id order.
async fn dump(db: &DatabaseConnection, table: &str, columns: &[&str]) -> Vec<Vec<Option<String>>> {
    let select = columns.iter().map(|c| format!("CAST({c} AS TEXT)")).collect::<Vec<_>>();
    let sql = format!("SELECT {} FROM {table} ORDER BY id", select.join(", "));
    rows(db, &sql)
        .await
        .iter()
        .map(|row| (0..columns.len()).map(|i| row.try_get_by_index(i).unwrap()).collect())
        .collect()
}

/// The opcodes SQLite would run for `sql`, prepared as the server's hot path prepares it
/// (rusqlite, a connection of its own to the file).
fn plan(file: &Path, sql: &str) -> Vec<String> {
    let conn = rusqlite::Connection::open(file).unwrap();
    let mut explain = conn.prepare(&format!("EXPLAIN {sql}")).unwrap();
    let unbound = vec![rusqlite::types::Null; explain.parameter_count()];
    let opcodes = explain.query_map(rusqlite::params_from_iter(unbound), |row| row.get(1));
    opcodes.unwrap().map(Result::unwrap).collect()
}

const TURN_COLUMNS: &[&str] = &[
    "id",
    "conversation_id",
    "state",
    "started_at_ms",
    "ended_at_ms",
    "error",
    "owner_replica",
    "stop_requested_at_ms",
];

const CALL_COLUMNS: &[&str] = &[
    "id",
    "account_id",
    "conversation_id",
    "turn_id",
    "server_id",
    "server_label",
    "server_address",
    "tool_name",
    "model_tool_name",
    "tool_description",
    "tool_definition_hash",
    "arguments_json",
    "arguments_sha256",
    "created_at_ms",
    "deadline_ms",
    "state",
    "answered_by",
    "answered_at_ms",
    "remember",
    "reason",
    "owner_replica",
];

fn call(id: &str, state: &str, answered: &str) -> String {
    format!(
        "INSERT INTO approval_calls ({}) VALUES ('{id}', 'a1', 'c1', 't-done', 's1', 'Hub', \
         'https://hub.example/mcp', 'send', 'mcp_hub_send', 'Sends', 'hash', '{{\"to\":1}}', \
         'sha', 10, 130, '{state}', {answered}, FALSE, NULL, 'replica-a')",
        CALL_COLUMNS.join(", ")
    )
}

#[tokio::test]
async fn turns_and_calls_keep_every_row_and_rule_and_need_no_temporary_btree() {
    let dir = tempfile::tempdir().unwrap();
    let file = dir.path().join("llooma.db");
    let url = format!("sqlite://{}?mode=rwc", file.display());
    let db = Database::connect(&url).await.unwrap();
    run(&db, "PRAGMA foreign_keys = ON").await;
    // Every migration before m0020 (m0007 was never used).
    Migrator::up(&db, Some(18)).await.unwrap();

    run(&db, "INSERT INTO accounts (id, username, display_name, password_hash, role, \
              created_at_ms, password_changed_at_ms) VALUES ('a1', 'ann', 'Ann', 'x', 'admin', 1, 1)")
        .await;
    run(
        &db,
        "INSERT INTO conversations (id, account_id, title, created_at_ms, updated_at_ms) \
              VALUES ('c1', 'a1', 'One', 1, 1), ('c2', 'a1', 'Two', 1, 1)",
    )
    .await;
    run(
        &db,
        "INSERT INTO turns (id, conversation_id, state, started_at_ms, ended_at_ms, error, \
              owner_replica, stop_requested_at_ms) VALUES \
              ('t-done', 'c1', 'done', 5, 9, NULL, 'replica-a', NULL), \
              ('t-failed', 'c1', 'failed', 10, 12, 'the model refused', 'replica-a', 11), \
              ('t-running', 'c2', 'running', 20, NULL, NULL, 'replica-b', NULL)",
    )
    .await;
    run(&db, &call("k1", "allowed", "'a1', 60")).await;
    run(&db, &call("k2", "pending", "NULL, NULL")).await;
    let turns = dump(&db, "turns", TURN_COLUMNS).await;
    let calls = dump(&db, "approval_calls", CALL_COLUMNS).await;
    assert_eq!((turns.len(), calls.len()), (3, 2));
    // What this migration is for: before it, a row's check built a temporary b-tree.
    let insert_turn = "INSERT INTO turns (id, conversation_id, state, started_at_ms) \
                       VALUES ('t-new', 'c1', 'running', 30)";
    assert!(plan(&file, insert_turn).contains(&"OpenEphemeral".to_owned()));

    Migrator::up(&db, None).await.unwrap();

    assert_eq!(dump(&db, "turns", TURN_COLUMNS).await, turns, "turns changed");
    assert_eq!(dump(&db, "approval_calls", CALL_COLUMNS).await, calls, "calls changed");
    let insert_call = call("k3", "pending", "NULL, NULL");
    let update_call = "UPDATE approval_calls SET state = 'refused' WHERE id = 'k2'";
    for sql in [insert_turn, insert_call.as_str(), update_call] {
        assert!(
            !plan(&file, sql).contains(&"OpenEphemeral".to_owned()),
            "{sql} still builds a temporary b-tree"
        );
    }

    // The checks still refuse what they refused.
    for bad in [
        "INSERT INTO turns (id, conversation_id, state, started_at_ms) \
         VALUES ('t-bad', 'c1', 'paused', 1)",
        "UPDATE approval_calls SET state = 'maybe' WHERE id = 'k2'",
    ] {
        let err = db.execute_unprepared(bad).await.expect_err(bad).to_string();
        assert!(err.contains("CHECK constraint failed"), "{bad}: {err}");
    }
    // One running turn per conversation.
    let second = "INSERT INTO turns (id, conversation_id, state, started_at_ms) \
                  VALUES ('t-second', 'c2', 'running', 40)";
    let err = db.execute_unprepared(second).await.expect_err("a second running turn");
    assert!(err.to_string().contains("UNIQUE constraint failed"), "{err}");
    // A turn's `end` event still ends it (m0015's trigger).
    run(
        &db,
        "INSERT INTO turn_events (conversation_id, seq, turn_id, kind, data_json, at_ms) \
              VALUES ('c2', 1, 't-running', 'end', '{\"state\":\"stopped\"}', 50)",
    )
    .await;
    let ended = rows(&db, "SELECT state, ended_at_ms FROM turns WHERE id = 't-running'").await;
    let state: String = ended[0].try_get_by_index(0).unwrap();
    let at: i64 = ended[0].try_get_by_index(1).unwrap();
    assert_eq!((state.as_str(), at), ("stopped", 50));
    // Rows still go with their conversation and account.
    run(&db, "DELETE FROM conversations WHERE id = 'c1'").await;
    assert_eq!(dump(&db, "turns", TURN_COLUMNS).await.len(), 1);
    run(&db, "DELETE FROM accounts WHERE id = 'a1'").await;
    assert!(dump(&db, "approval_calls", CALL_COLUMNS).await.is_empty());
    // Every index is back.
    let indexes = rows(
        &db,
        "SELECT name FROM sqlite_master WHERE type = 'index' AND sql IS NOT NULL \
         AND tbl_name IN ('turns', 'approval_calls') ORDER BY name",
    )
    .await;
    let names: Vec<String> = indexes.iter().map(|r| r.try_get_by_index(0).unwrap()).collect();
    assert_eq!(
        names,
        [
            "approval_calls_by_account",
            "approval_calls_pending",
            "approval_calls_pending_owner",
            "approval_calls_sent_by_address",
            "turns_one_running",
        ]
    );
}
