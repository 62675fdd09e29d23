//! What pending calls cost and how fast an answer reaches the waiting turn.
//!
//! `cargo bench -p llooma-approval-broker --bench broker`. Three measurements:
//!
//! 1. memory: 10,000 pending calls on SQLite, each with a parked waiter, as the growth of this
//!    process's resident set (VmRSS) — what a replica pays per call that waits for a person;
//! 2. answer -> waiting task resumed, in one process on SQLite (in-process wake-up);
//! 3. the same across two `Store` instances (separate pools, like two replicas) on Postgres,
//!    where only LISTEN/NOTIFY can wake the waiter quickly. Runs when `LLOOMA_BENCH_PG_URL`
//!    names a database (e.g. `postgres://postgres@127.0.0.1:5432/llooma_bench`, created once
//!    with `createdb llooma_bench`); it is migrated and left in place.
//!
//! Latency samples: `LLOOMA_BENCH_SAMPLES` (default 500).

#![expect(
    clippy::print_stdout,
    clippy::unwrap_used,
    reason = "a benchmark prints its figures and panics on a failed setup"
)]

use std::sync::Arc;
use std::time::{Duration, Instant};

use llooma_approval_broker::{
    AnswerChoice, AnswerResult, Broker, BrokerConfig, Clock, ManualClock, NewCall, SystemClock,
};
use llooma_store::{NewAccount, Store};
use serde_json::json;

const PENDING: usize = 10_000;

fn rss_kib() -> Option<u64> {
    let status = std::fs::read_to_string("/proc/self/status").ok()?;
    let line = status.lines().find(|l| l.starts_with("VmRSS:"))?;
    line.split_whitespace().nth(1)?.parse().ok()
}

fn new_call(account: &str, n: usize) -> NewCall {
    NewCall {
        account_id: account.into(),
        conversation_id: "bench-conversation".into(),
        turn_id: format!("turn-{n}"),
        server_id: "server".into(),
        server_label: "Home".into(),
        server_address: "https://hub.example/mcp".into(),
        tool_name: "lights".into(),
        model_tool_name: "mcp_home_lights".into(),
        tool_description: "Switches the lights of one room on or off.".into(),
        tool_definition_hash: "0".repeat(64),
        tool_hints_json: None,
        arguments: json!({"room": format!("room-{n}"), "on": n.is_multiple_of(2), "level": 0.5}),
    }
}

async fn store(url: &str) -> Store {
    let store = Store::connect(url).await.unwrap();
    store.migrate().await.unwrap();
    store
}

async fn account(store: &Store) -> String {
    let name = format!("bench-{}", uuid::Uuid::new_v4().simple());
    store
        .create_admin(NewAccount {
            username: name.clone(),
            display_name: name,
            password_hash: "x".into(),
        })
        .await
        .unwrap()
        .id
}

async fn memory(url: &str) {
    let store = store(url).await;
    let alice = account(&store).await;
    // A clock that stands still: no re-checks, so only the resting cost is measured.
    let clock: Arc<dyn Clock> = Arc::new(ManualClock::new(1_700_000_000_000));
    let broker = Broker::start(store, clock, BrokerConfig::new("bench")).await.unwrap();
    let before = rss_kib();
    let started = Instant::now();
    let mut ids = Vec::with_capacity(PENDING);
    for n in 0..PENDING {
        ids.push(broker.request(new_call(&alice, n)).await.unwrap().id);
    }
    let insert_time = started.elapsed();
    let after_rows = rss_kib();
    let future_size = std::mem::size_of_val(&broker.wait(&ids[0]));
    // Turns start waiting over time, not all in one instant: spawn in batches and let each
    // batch park, so the figure is the resting cost, not a burst of 10,000 queued queries.
    let mut waiters = Vec::with_capacity(PENDING);
    for batch in ids.chunks(100) {
        for id in batch {
            let broker = broker.clone();
            let id = id.clone();
            waiters.push(tokio::spawn(async move { broker.wait(&id).await }));
        }
        while broker.local_counts().0 < waiters.len() {
            tokio::time::sleep(Duration::from_millis(1)).await;
        }
        tokio::time::sleep(Duration::from_millis(5)).await;
    }
    tokio::time::sleep(Duration::from_millis(200)).await; // every waiter parked
    let after_waiters = rss_kib();
    println!("memory, {PENDING} pending calls (SQLite, one process):");
    println!("  size of a `wait` future: {future_size} bytes");
    println!(
        "  requests stored in {:.2?} ({:.0}/s)",
        insert_time,
        PENDING as f64 / insert_time.as_secs_f64()
    );
    if let (Some(before), Some(rows), Some(parked)) = (before, after_rows, after_waiters) {
        println!(
            "  RSS growth: {} KiB after storing (SQLite page cache included), +{} KiB for {PENDING} \
             parked waiters = {:.0} bytes per waiting call",
            rows.saturating_sub(before),
            parked.saturating_sub(rows),
            parked.saturating_sub(rows) as f64 * 1024.0 / PENDING as f64
        );
    }
    // Settle them all so the waiters end (and are not interrupted by being dropped).
    let started = Instant::now();
    for id in &ids {
        broker.answer(&alice, id, "bench", AnswerChoice::Refuse).await.unwrap();
    }
    for waiter in waiters {
        waiter.await.unwrap().unwrap();
    }
    println!("  {PENDING} answered and their waiters resumed in {:.2?}", started.elapsed());
}

/// Answer on `answerer`, wait on `waiter`; (answer -> resumed, answer call duration) per sample.
async fn latency(
    waiter: &Broker<Store>,
    answerer: &Broker<Store>,
    account: &str,
    samples: usize,
) -> (Vec<Duration>, Vec<Duration>) {
    let mut resumed = Vec::with_capacity(samples);
    let mut answer_calls = Vec::with_capacity(samples);
    for n in 0..samples {
        let call = waiter.request(new_call(account, n)).await.unwrap();
        let task = tokio::spawn({
            let waiter = waiter.clone();
            let id = call.id.clone();
            async move {
                let outcome = waiter.wait(&id).await;
                (outcome, Instant::now())
            }
        });
        while waiter.local_counts().0 == 0 {
            tokio::time::sleep(Duration::from_micros(100)).await;
        }
        tokio::time::sleep(Duration::from_millis(2)).await; // parked, not mid-read
        let start = Instant::now();
        let result =
            answerer.answer(account, &call.id, "bench", AnswerChoice::Allow).await.unwrap();
        answer_calls.push(start.elapsed());
        assert!(matches!(result, AnswerResult::Won { .. }));
        let (outcome, woke) = task.await.unwrap();
        assert!(outcome.unwrap().allowed());
        resumed.push(woke.duration_since(start));
    }
    (resumed, answer_calls)
}

fn report(what: &str, mut samples: Vec<Duration>) {
    samples.sort();
    let at = |q: f64| samples[((samples.len() as f64 - 1.0) * q).round() as usize];
    println!(
        "  {what}: p50 {:.2?}  p90 {:.2?}  p99 {:.2?}  max {:.2?}  (n={})",
        at(0.5),
        at(0.9),
        at(0.99),
        at(1.0),
        samples.len()
    );
}

async fn run() {
    if std::env::var("LLOOMA_BENCH_ONLY").as_deref() == Ok("memory") {
        let dir = tempfile::tempdir().unwrap();
        memory(&format!("sqlite://{}?mode=rwc", dir.path().join("bench.db").display())).await;
        return;
    }
    let samples: usize =
        std::env::var("LLOOMA_BENCH_SAMPLES").ok().and_then(|s| s.parse().ok()).unwrap_or(500);
    let dir = tempfile::tempdir().unwrap();
    let sqlite = format!("sqlite://{}?mode=rwc", dir.path().join("bench.db").display());

    memory(&sqlite).await;

    let store_one = store(&sqlite).await;
    let alice = account(&store_one).await;
    let broker = Broker::start(store_one, Arc::new(SystemClock), BrokerConfig::new("sqlite-bench"))
        .await
        .unwrap();
    let (resumed, answer_calls) = latency(&broker, &broker, &alice, samples).await;
    println!("answer -> waiting task resumed, in-process (SQLite):");
    report("answer started -> waiter resumed", resumed);
    report("answer() call itself", answer_calls);
    broker.shutdown().await.unwrap();

    match std::env::var("LLOOMA_BENCH_PG_URL") {
        Ok(url) => {
            let store_a = store(&url).await;
            let store_b = store(&url).await;
            let alice = account(&store_a).await;
            let mut config_a = BrokerConfig::new(format!("bench-a-{}", uuid::Uuid::new_v4()));
            // Only LISTEN/NOTIFY can be measured here, not the safety-net re-check.
            config_a.recheck_every = Duration::from_secs(3600);
            let a = Broker::start(store_a, Arc::new(SystemClock), config_a).await.unwrap();
            let config_b = BrokerConfig::new(format!("bench-b-{}", uuid::Uuid::new_v4()));
            let b = Broker::start(store_b, Arc::new(SystemClock), config_b).await.unwrap();
            let (resumed, answer_calls) = latency(&a, &b, &alice, samples).await;
            println!("answer on replica B -> waiting task on replica A resumed (Postgres):");
            report("answer started -> waiter resumed", resumed);
            report("answer() call itself (commit incl. NOTIFY)", answer_calls);
            let (resumed, _) = latency(&a, &a, &alice, samples).await;
            println!("answer -> waiting task resumed, in-process (Postgres):");
            report("answer started -> waiter resumed", resumed);
            a.shutdown().await.unwrap();
            b.shutdown().await.unwrap();
        }
        Err(_) => println!(
            "Postgres part skipped: set LLOOMA_BENCH_PG_URL to a database URL to measure it"
        ),
    }
}

fn main() {
    // `cargo bench` passes `--bench`; nothing here takes arguments.
    let runtime =
        tokio::runtime::Builder::new_multi_thread().worker_threads(4).enable_all().build().unwrap();
    runtime.block_on(run());
}
