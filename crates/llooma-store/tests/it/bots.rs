//! Bot integrations, the activation ledger and leases over the real store (both engines).

use std::sync::Arc;

use llooma_store::{BotConnection, BotRunReport, BotSettingsRow, Store, StoreError};

use crate::support::{TestDb, account};

fn connection() -> BotConnection {
    BotConnection {
        address: "https://chat.example.org".into(),
        api_key_ciphertext: "v1.k.ciphertext".into(),
        bot_user_id: "b1".into(),
        bot_login: "helper".into(),
        bot_display_name: "Helper".into(),
    }
}

fn settings(model: Option<&str>) -> BotSettingsRow {
    BotSettingsRow {
        label: "Helper".into(),
        provider_id: None,
        model: model.map(str::to_owned),
        context_mode: "messages_before".into(),
        context_count: 6,
        placement: "where_asked".into(),
        identity_source: "system_prompt".into(),
        persona_id: None,
        instructions: None,
        tools: vec!["current_date".into()],
        mcp_ticked: false,
        enabled: true,
    }
}

async fn integration(store: &Store, account_id: &str, id: &str) {
    store.create_bot_integration(id, account_id, connection(), settings(None)).await.unwrap();
}

const HOUR: i64 = 3_600_000;

/// A moment `seconds` after a fixed start, in milliseconds.
fn ms(seconds: i64) -> i64 {
    1_800_000_000_000 + seconds * 1000
}

#[tokio::test]
async fn an_integration_belongs_to_its_account_and_takes_its_rows_when_deleted() {
    let db = TestDb::new().await;
    let store = db.store().await;
    let alice = account(&store, "alice").await;
    let bob = account(&store, "bob").await;
    integration(&store, &alice, "i1").await;

    let listed = store.list_bot_integrations(&alice).await.unwrap();
    assert_eq!(listed.len(), 1);
    assert_eq!(listed[0].tools, ["current_date"]);
    assert!(store.list_bot_integrations(&bob).await.unwrap().is_empty());
    assert!(store.bot_integration(&bob, "i1").await.unwrap().is_none());
    assert!(matches!(
        store.update_bot_settings(&bob, "i1", &settings(Some("m"))).await,
        Err(StoreError::NotFound)
    ));
    assert!(matches!(store.delete_bot_integration(&bob, "i1").await, Err(StoreError::NotFound)));
    // Without a model it does not run.
    assert!(store.runnable_bot_integrations().await.unwrap().is_empty());

    assert!(store.record_bot_activation("i1", "r1", "e1", ms(0)).await.unwrap());
    assert!(store.claim_bot_lease("i1", "replica-a", 0, 1000).await.unwrap());
    store.delete_bot_integration(&alice, "i1").await.unwrap();
    assert!(store.bot_lease("i1").await.unwrap().is_none());
    assert!(store.bot_activation_times("i1", ms(1) - HOUR, ms(1)).await.unwrap().is_empty());
}

#[tokio::test]
async fn an_activation_is_recorded_once_and_counts_for_an_hour() {
    let db = TestDb::new().await;
    let store = db.store().await;
    let alice = account(&store, "alice").await;
    integration(&store, &alice, "i1").await;
    integration(&store, &alice, "i2").await;

    // Twenty recorders racing for the same activation: exactly one wins.
    let mut tasks = Vec::new();
    for _ in 0..20 {
        let store = store.clone();
        tasks.push(tokio::spawn(async move {
            store.record_bot_activation("i1", "r1", "race", ms(0)).await.unwrap()
        }));
    }
    let mut won = 0;
    for task in tasks {
        won += usize::from(task.await.unwrap());
    }
    assert_eq!(won, 1);

    for i in 1..=3 {
        assert!(
            store.record_bot_activation("i1", "r1", &format!("e{i}"), ms(i * 600)).await.unwrap()
        );
    }
    assert!(store.record_bot_activation("i2", "r1", "e1", ms(600)).await.unwrap());
    // At t=3600 the one at t=0 is exactly an hour old and out of the window.
    let window = store.bot_activation_times("i1", ms(3600) - HOUR, ms(3600)).await.unwrap();
    assert_eq!(window, vec![ms(600), ms(1200), ms(1800)]);
    assert_eq!(store.purge_bot_activations(ms(1000)).await.unwrap(), 3);
    // Purged rows are gone from the window; the unique key of a kept one still holds.
    assert_eq!(store.bot_activation_times("i1", ms(3600) - HOUR, ms(3600)).await.unwrap().len(), 2);
    assert!(!store.record_bot_activation("i1", "r1", "e2", ms(4000)).await.unwrap());
}

#[tokio::test]
async fn one_replica_holds_a_lease_until_it_expires_or_is_given_back() {
    let db = TestDb::new().await;
    let store = db.store().await;
    let other = db.store().await; // a second replica with its own pool
    let alice = account(&store, "alice").await;
    integration(&store, &alice, "i1").await;

    // Ten replicas claim at once: one holds it.
    let mut tasks = Vec::new();
    for n in 0..10 {
        let store = if n % 2 == 0 { store.clone() } else { other.clone() };
        tasks.push(tokio::spawn(async move {
            store.claim_bot_lease("i1", &format!("replica-{n}"), 1_000, 30_000).await.unwrap()
        }));
    }
    let mut holders = 0;
    for task in tasks {
        holders += usize::from(task.await.unwrap());
    }
    assert_eq!(holders, 1);
    let (holder, expires) = store.bot_lease("i1").await.unwrap().unwrap();
    let holder = holder.unwrap();
    assert_eq!(expires, 31_000);

    // Renewal by the holder; refusal for the others while it is valid.
    assert!(store.claim_bot_lease("i1", &holder, 20_000, 30_000).await.unwrap());
    assert!(!other.claim_bot_lease("i1", "newcomer", 49_000, 30_000).await.unwrap());
    // The holder stops renewing: once expired, another replica takes over.
    assert!(other.claim_bot_lease("i1", "newcomer", 50_001, 30_000).await.unwrap());
    assert!(!store.claim_bot_lease("i1", &holder, 50_002, 30_000).await.unwrap());
    // Given back, it is free at once.
    store.release_bot_lease("i1", "newcomer").await.unwrap();
    assert!(store.claim_bot_lease("i1", &holder, 50_003, 30_000).await.unwrap());
}

#[tokio::test]
async fn a_pause_holds_until_the_owner_changes_something() {
    let db = TestDb::new().await;
    let store = Arc::new(db.store().await);
    let alice = account(&store, "alice").await;
    integration(&store, &alice, "i1").await;
    store.update_bot_settings(&alice, "i1", &settings(Some("m"))).await.unwrap();
    // A model without a provider does not run either.
    assert!(store.runnable_bot_integrations().await.unwrap().is_empty());
    let mut with_provider = settings(Some("m"));
    with_provider.provider_id = Some("p".into());
    // No such provider row: the reference refuses it.
    assert!(store.update_bot_settings(&alice, "i1", &with_provider).await.is_err());
    store
        .create_provider(llooma_store::NewProvider {
            id: "p".into(),
            name: "p".into(),
            base_url: "https://models.example/v1".into(),
            api_key_ciphertext: None,
            local_network: false,
        })
        .await
        .unwrap();
    store.update_bot_settings(&alice, "i1", &with_provider).await.unwrap();
    let runnable = store.runnable_bot_integrations().await.unwrap();
    assert_eq!(runnable.len(), 1);
    let version = runnable[0].updated_at_ms;

    let paused = BotRunReport {
        run_state: "paused".into(),
        error: Some("the key was revoked".into()),
        missing_permission: None,
    };
    assert!(store.report_bot_run("i1", version, &paused).await.unwrap());
    let running =
        BotRunReport { run_state: "running".into(), error: None, missing_permission: None };
    // A late report from the poller does not lift the pause.
    assert!(!store.report_bot_run("i1", version, &running).await.unwrap());
    let row = store.bot_integration(&alice, "i1").await.unwrap().unwrap();
    assert_eq!(row.run_state, "paused");
    assert_eq!(row.paused_reason.as_deref(), Some("the key was revoked"));
    assert!(store.runnable_bot_integrations().await.unwrap().is_empty());

    // The owner changes something: it starts afresh; a report about the old version is dropped.
    tokio::time::sleep(std::time::Duration::from_millis(5)).await;
    store.update_bot_settings(&alice, "i1", &with_provider).await.unwrap();
    let row = store.bot_integration(&alice, "i1").await.unwrap().unwrap();
    assert_eq!((row.run_state.as_str(), row.paused_reason), ("idle", None));
    assert!(!store.report_bot_run("i1", version, &running).await.unwrap());
    assert_eq!(store.runnable_bot_integrations().await.unwrap().len(), 1);
}
