//! What Discover costs the database: usage counted per address and the ratings, at the scale of
//! a busy instance.
//!
//! `cargo bench -p llooma-store --bench catalogue` (SQLite); with `LLOOMA_TEST_DB=postgres` the
//! same on a fresh Postgres database. Data: 1,000 accounts, 2,000 MCP servers over 200 addresses,
//! 200,000 tool calls spread over the last 60 days (a third refused or expired), 5,000 ratings
//! over 200 catalogue entries; usage is asked for a catalogue of 20 addresses and of all 200. Figures: median and p95 of 30 runs of each query, the way
//! `GET /api/v1/mcp/catalogue` runs them.

#![expect(
    clippy::print_stdout,
    clippy::unwrap_used,
    reason = "a benchmark prints its figures and panics on a failed setup"
)]

use std::time::{Duration, Instant};

use llooma_store::Store;
use sea_orm::{ConnectionTrait, Database};

const ACCOUNTS: usize = 1_000;
const SERVERS: usize = 2_000;
const ADDRESSES: usize = 200;
const CALLS: usize = 200_000;
const RATINGS: usize = 5_000;
const RUNS: usize = 30;
const DAY_MS: i64 = 24 * 3600 * 1000;

/// Inserts `rows` (each a parenthesised tuple) into `table` in batches.
async fn insert_many(
    db: &sea_orm::DatabaseConnection,
    table: &str,
    columns: &str,
    rows: Vec<String>,
) {
    for batch in rows.chunks(500) {
        let sql = format!("INSERT INTO {table} ({columns}) VALUES {}", batch.join(","));
        db.execute_unprepared(&sql).await.unwrap();
    }
}

fn percentile(sorted: &[Duration], p: f64) -> Duration {
    #[expect(clippy::cast_possible_truncation, clippy::cast_sign_loss, clippy::cast_precision_loss)]
    let index = ((sorted.len() - 1) as f64 * p).round() as usize;
    sorted[index]
}

async fn measure<F, Fut>(what: &str, mut run: F)
where
    F: FnMut() -> Fut,
    Fut: std::future::Future<Output = ()>,
{
    let mut times = Vec::with_capacity(RUNS);
    for _ in 0..RUNS {
        let started = Instant::now();
        run().await;
        times.push(started.elapsed());
    }
    times.sort();
    println!(
        "{what}: median {:.2} ms, p95 {:.2} ms",
        percentile(&times, 0.5).as_secs_f64() * 1000.0,
        percentile(&times, 0.95).as_secs_f64() * 1000.0
    );
}

#[tokio::main]
async fn main() {
    let database = llooma_test_support::TestDatabase::new();
    let url = database.url();
    let store = Store::connect(&url).await.unwrap();
    store.migrate().await.unwrap();
    let db = Database::connect(&url).await.unwrap();
    let now = llooma_store::now_ms();
    let address = |n: usize| format!("https://mcp-{}.example.org/mcp", n % ADDRESSES);

    let setup = Instant::now();
    let accounts = (0..ACCOUNTS)
        .map(|a| format!("('account-{a}', 'user{a}', 'User {a}', 'x', 'user', {now}, {now})"))
        .collect();
    insert_many(
        &db,
        "accounts",
        "id, username, display_name, password_hash, role, created_at_ms, password_changed_at_ms",
        accounts,
    )
    .await;
    let servers = (0..SERVERS)
        .map(|s| {
            format!(
                "('server-{s}', 'account-{}', 'Label', 'label{s}', '{}', '{{}}', {now}, {s}, {now}, {now})",
                s % ACCOUNTS,
                address(s)
            )
        })
        .collect();
    insert_many(
        &db,
        "mcp_servers",
        "id, account_id, label, slug, address, snapshot_json, snapshot_taken_at_ms, position, \
         created_at_ms, updated_at_ms",
        servers,
    )
    .await;
    let states = ["allowed", "allowed", "refused", "allowed", "expired", "allowed"];
    let calls = (0..CALLS)
        .map(|c| {
            let at = now - (c as i64 * 60 * DAY_MS / CALLS as i64);
            format!(
                "('call-{c}', 'account-{}', 'conversation', 'turn', 'server-{}', 'Label', '{}', \
                 'tool', 'mcp_label_tool', 'Does a thing.', 'hash', '{{}}', 'sha', {at}, {at}, '{}', 'replica')",
                c % ACCOUNTS,
                c % SERVERS,
                address(c),
                states[c % states.len()]
            )
        })
        .collect();
    insert_many(
        &db,
        "approval_calls",
        "id, account_id, conversation_id, turn_id, server_id, server_label, server_address, \
         tool_name, model_tool_name, tool_description, tool_definition_hash, arguments_json, \
         arguments_sha256, created_at_ms, deadline_ms, state, owner_replica",
        calls,
    )
    .await;
    let ratings = (0..RATINGS)
        .map(|r| {
            format!(
                "('entry-{}', 'account-{}', {}, {now})",
                r % ADDRESSES,
                r / 5 % ACCOUNTS,
                r % 5 + 1
            )
        })
        .collect();
    insert_many(
        &db,
        "mcp_catalogue_ratings",
        "entry_id, account_id, stars, updated_at_ms",
        ratings,
    )
    .await;
    if llooma_test_support::engine() == llooma_test_support::Engine::Postgres {
        // What autovacuum does on a live instance: the planner needs statistics.
        db.execute_unprepared("VACUUM ANALYZE").await.unwrap();
    }
    println!(
        "{:?}: {ACCOUNTS} accounts, {SERVERS} servers over {ADDRESSES} addresses, {CALLS} calls, \
         {RATINGS} ratings written in {:.1} s",
        llooma_test_support::engine(),
        setup.elapsed().as_secs_f64()
    );

    let since = now - 30 * DAY_MS;
    // A catalogue of 20 entries among the 200 addresses in use.
    let catalogue: Vec<String> = (0..20).map(|n| address(n * 10)).collect();
    let usage = store.usage_by_address(&catalogue, since).await.unwrap();
    let calls_counted: u64 = usage.values().map(|u| u.calls).sum();
    assert!(calls_counted > 0 && usage.len() == catalogue.len(), "the data is counted");
    measure("usage of 20 catalogue addresses (accounts, calls in 30 days)", || async {
        store.usage_by_address(&catalogue, since).await.unwrap();
    })
    .await;
    let every: Vec<String> = (0..ADDRESSES).map(address).collect();
    measure("usage of all 200 addresses", || async {
        store.usage_by_address(&every, since).await.unwrap();
    })
    .await;
    measure("ratings of every entry", || async {
        store.catalogue_ratings().await.unwrap();
    })
    .await;
    measure("one account's own ratings", || async {
        store.my_catalogue_ratings("account-7").await.unwrap();
    })
    .await;
}
