//! One account with 100,000 conversations: the first page of its list and a search, the way
//! `GET /api/v1/conversations` runs them.
//!
//! `cargo bench -p llooma-store --bench conversations` (SQLite); with `LLOOMA_TEST_DB=postgres`
//! the same on a fresh Postgres database. Data: 100,000 conversations of one account (and 1,000
//! of another), each with one message; one title holds the word `zanzibar`, one message the word
//! `quokka`. Figures: median and p95 of 30 runs.

#![expect(
    clippy::print_stdout,
    clippy::unwrap_used,
    reason = "a benchmark prints its figures and panics on a failed setup"
)]

use std::time::{Duration, Instant};

use llooma_store::Store;
use sea_orm::{ConnectionTrait, Database};

const CONVERSATIONS: usize = 100_000;
const OTHERS: usize = 1_000;
const RUNS: usize = 30;

async fn insert_many(
    db: &sea_orm::DatabaseConnection,
    table: &str,
    columns: &str,
    rows: Vec<String>,
) {
    for batch in rows.chunks(1_000) {
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
    Fut: std::future::Future<Output = usize>,
{
    let found = run().await;
    let mut times = Vec::with_capacity(RUNS);
    for _ in 0..RUNS {
        let started = Instant::now();
        run().await;
        times.push(started.elapsed());
    }
    times.sort();
    println!(
        "{what} ({found} found): median {:.2} ms, p95 {:.2} ms",
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

    let setup = Instant::now();
    let accounts = [
        "('alice', 'alice', 'Alice', 'x', 'user', 0, 0)",
        "('bob', 'bob', 'Bob', 'x', 'user', 0, 0)",
    ];
    insert_many(
        &db,
        "accounts",
        "id, username, display_name, password_hash, role, created_at_ms, password_changed_at_ms",
        accounts.iter().map(|a| (*a).to_owned()).collect(),
    )
    .await;
    let words = ["tides", "museum", "recipe", "invoice", "garden", "python", "travel", "budget"];
    let conversation = |n: usize, account: &str| {
        let topic = if n == 4_242 { "zanzibar" } else { words[n % words.len()] };
        let at = now - i64::try_from(n).unwrap() * 1000;
        format!(
            "('{account}-{n}', '{account}', 'About the {topic} number {n}', NULL, NULL, false, {at}, {at})"
        )
    };
    let columns =
        "id, account_id, title, provider_id, model, mcp_enabled, created_at_ms, updated_at_ms";
    insert_many(
        &db,
        "conversations",
        columns,
        (0..CONVERSATIONS).map(|n| conversation(n, "alice")).collect(),
    )
    .await;
    insert_many(
        &db,
        "conversations",
        columns,
        (0..OTHERS).map(|n| conversation(n, "bob")).collect(),
    )
    .await;
    let message = |n: usize| {
        let word = if n == 77_777 { "quokka" } else { words[(n + 3) % words.len()] };
        format!("('m-{n}', 'alice-{n}', 'user', 'Tell me more about {word}, please', NULL, {now})")
    };
    insert_many(
        &db,
        "messages",
        "id, conversation_id, role, content, turn_id, created_at_ms",
        (0..CONVERSATIONS).map(message).collect(),
    )
    .await;
    // As a database in use has them: the planner's statistics (Postgres's autovacuum gathers
    // them on its own after a while; on SQLite nothing does unless asked).
    db.execute_unprepared("ANALYZE").await.unwrap();
    println!("setup: {:.1} s", setup.elapsed().as_secs_f64());

    measure("first page of the list (50)", || async {
        store.list_conversations("alice", None, 50).await.unwrap().len()
    })
    .await;
    // The search as it was before m0027: every title of the account read and compared.
    let backend = db.get_database_backend();
    let before = match backend {
        sea_orm::DbBackend::Postgres => {
            "SELECT * FROM conversations WHERE account_id = $1 AND (title ILIKE $2 ESCAPE '\\' \
             OR ($3 <> '' AND id IN (SELECT conversation_id FROM messages \
             WHERE to_tsvector('simple', content) @@ to_tsquery('simple', $3)))) \
             ORDER BY updated_at_ms DESC, id DESC LIMIT 50"
        }
        _ => {
            "SELECT * FROM conversations WHERE account_id = ? AND (title LIKE ? ESCAPE '\\' \
             OR (? <> '' AND id IN (SELECT m.conversation_id FROM messages_search s \
             JOIN messages m ON m.rowid = s.rowid WHERE messages_search MATCH ?))) \
             ORDER BY updated_at_ms DESC, id DESC LIMIT 50"
        }
    };
    measure("before m0027, search: a word in one title", || async {
        let words =
            if backend == sea_orm::DbBackend::Postgres { "zanzibar:*" } else { "\"zanzibar\"*" };
        let mut values: Vec<sea_orm::Value> =
            vec!["alice".into(), "%zanzibar%".into(), words.into()];
        if backend != sea_orm::DbBackend::Postgres {
            values.push(words.into());
        }
        let statement = sea_orm::Statement::from_sql_and_values(backend, before, values);
        db.query_all_raw(statement).await.unwrap().len()
    })
    .await;
    measure("search: a word in one title", || async {
        store.search_conversations("alice", "zanzibar", 50).await.unwrap().len()
    })
    .await;
    measure("search: a word in one message", || async {
        store.search_conversations("alice", "quokka", 50).await.unwrap().len()
    })
    .await;
    measure("search: a word in 12,500 titles", || async {
        store.search_conversations("alice", "garden", 50).await.unwrap().len()
    })
    .await;
}
