//! Usage counted per account, day and model, priced at the price of the moment, limits that
//! replace the instance's defaults, and turns per minute counted by the database: on both
//! engines, with two replicas counting together.

use llooma_store::{InstanceSettingsChange, ModelPrice, NewProvider, UsageLimits, UsageRow};

use crate::support::{TestDb, account};

fn used(
    account_id: &str,
    day: &str,
    model: &str,
    input: i64,
    cached: i64,
    output: i64,
) -> UsageRow {
    UsageRow {
        account_id: account_id.into(),
        day: day.into(),
        provider_id: "p1".into(),
        model: model.into(),
        requests: 1,
        estimated_requests: 0,
        input_tokens: input,
        cached_input_tokens: cached,
        output_tokens: output,
        spend_nanos: 0,
    }
}

#[tokio::test]
async fn usage_adds_up_per_day_and_model_and_is_priced_when_it_happens() {
    let db = TestDb::new().await;
    let store = db.store().await;
    let alice = account(&store, "alice").await;
    let bob = account(&store, "bob").await;
    store
        .create_provider(NewProvider {
            id: "p1".into(),
            name: "hosted".into(),
            base_url: "https://api.example/v1".into(),
            api_key_ciphertext: None,
            local_network: false,
        })
        .await
        .unwrap();
    // Unpriced: counted, costs nothing.
    store.add_usage(&used(&alice, "2026-12-01", "big", 1_000, 0, 100)).await.unwrap();
    // $2.50 in, $1.25 cached in, $10 out per million tokens.
    let price = ModelPrice {
        provider_id: "p1".into(),
        model: "big".into(),
        input_micros: 2_500_000,
        cached_input_micros: Some(1_250_000),
        output_micros: 10_000_000,
    };
    store.set_model_price(&price).await.unwrap();
    store.add_usage(&used(&alice, "2026-12-01", "big", 2_000, 1_000, 500)).await.unwrap();
    let estimated =
        UsageRow { estimated_requests: 1, ..used(&alice, "2026-12-02", "big", 10, 0, 1) };
    store.add_usage(&estimated).await.unwrap();
    store.add_usage(&used(&bob, "2026-12-01", "small", 7, 0, 3)).await.unwrap();
    // A new price applies from now on only.
    store
        .set_model_price(&ModelPrice { input_micros: 0, output_micros: 0, ..price })
        .await
        .unwrap();
    store.add_usage(&used(&alice, "2026-12-01", "big", 5_000, 0, 5_000)).await.unwrap();

    let rows = store.usage(Some(&alice), "2026-12-01", "2026-12-31").await.unwrap();
    assert_eq!(rows.len(), 2, "{rows:?}");
    let first = &rows[0];
    assert_eq!(
        (first.day.as_str(), first.requests, first.estimated_requests),
        ("2026-12-01", 3, 0)
    );
    assert_eq!(
        (first.input_tokens, first.cached_input_tokens, first.output_tokens),
        (8_000, 1_000, 5_600)
    );
    // 1,000 uncached × 2.5 + 1,000 cached × 1.25 + 500 out × 10 = 8,750 millionths of a dollar.
    assert_eq!(first.spend_nanos, 8_750_000);
    assert_eq!((rows[1].day.as_str(), rows[1].estimated_requests), ("2026-12-02", 1));
    let everyone = store.usage(None, "2026-12-01", "2026-12-01").await.unwrap();
    assert_eq!(everyone.len(), 2);
    assert_eq!(store.usage(Some(&bob), "2026-11-01", "2026-11-30").await.unwrap(), []);

    let so_far = store.used_so_far(&alice, "2026-12-02", "2026-12-01").await.unwrap();
    assert_eq!((so_far.tokens_today, so_far.tokens_this_month), (11, 13_611));
    // And the next day: 10 in × 2,500 + 1 out × 10,000 billionths.
    assert_eq!(so_far.spend_nanos_this_month, 8_750_000 + 35_000);
    assert_eq!(store.model_prices().await.unwrap().len(), 1);
    store.delete_model_price("p1", "big").await.unwrap();
    assert_eq!(store.model_prices().await.unwrap(), []);
}

#[tokio::test]
async fn an_accounts_own_limits_replace_the_instances_as_a_whole() {
    let db = TestDb::new().await;
    let store = db.store().await;
    let alice = account(&store, "alice").await;
    assert!(store.limits_for(&alice).await.unwrap().is_empty());
    let defaults = UsageLimits {
        tokens_per_day: Some(1_000),
        turns_per_minute: Some(5),
        ..Default::default()
    };
    let settings = store
        .change_instance_settings(InstanceSettingsChange {
            default_limits: Some(defaults),
            currency: Some("EUR".into()),
            ..Default::default()
        })
        .await
        .unwrap();
    assert_eq!((settings.default_limits, settings.currency.as_str()), (defaults, "EUR"));
    assert_eq!(store.limits_for(&alice).await.unwrap(), defaults);
    let conversation = store.create_conversation(&alice, "c", None, None).await.unwrap();
    let context = store.turn_context(&alice, &conversation.id, None).await.unwrap().unwrap();
    assert_eq!((context.account_limits, context.instance.default_limits), (None, defaults));

    // Its own: only a monthly spend; no daily token limit any more.
    let own = UsageLimits { spend_micros_per_month: Some(5_000_000), ..Default::default() };
    store.set_account_limits(&alice, Some(own)).await.unwrap();
    assert_eq!(store.limits_for(&alice).await.unwrap(), own);
    let context = store.turn_context(&alice, &conversation.id, None).await.unwrap().unwrap();
    assert_eq!(context.account_limits, Some(own));
    assert_eq!(store.all_account_limits().await.unwrap(), [(alice.clone(), own)]);
    store.set_account_limits(&alice, None).await.unwrap();
    assert_eq!(store.limits_for(&alice).await.unwrap(), defaults);
}

#[tokio::test]
async fn two_replicas_count_turns_per_minute_together_and_never_past_the_limit() {
    let db = TestDb::new().await;
    let (one, two) = (db.store().await, db.store().await);
    let alice = account(&one, "alice").await;
    let minute = 1_700_000_000_000;
    let tries = (0..12).map(|i| {
        let (store, alice) = (if i % 2 == 0 { one.clone() } else { two.clone() }, alice.clone());
        tokio::spawn(async move { store.count_turn(&alice, minute, 5).await.unwrap() })
    });
    let counted = futures::future::join_all(tries).await;
    assert_eq!(counted.iter().filter(|c| *c.as_ref().unwrap()).count(), 5, "{counted:?}");
    // The next minute starts afresh; a limit of nothing refuses at once.
    assert!(one.count_turn(&alice, minute + 60_000, 5).await.unwrap());
    assert!(!two.count_turn(&alice, minute + 60_000, 0).await.unwrap());
}

#[tokio::test]
async fn a_turn_s_usage_is_counted_with_its_end_whether_it_wrote_a_reply_or_not() {
    let db = TestDb::new().await;
    let store = db.store().await;
    let alice = account(&store, "alice").await;
    let c = store.create_conversation(&alice, "c", None, None).await.unwrap();
    let started = llooma_types::TurnStarted::new(String::new());
    for (reply, state) in
        [("Hi", llooma_types::EndState::Done), ("", llooma_types::EndState::Stopped)]
    {
        let opened = store.open_turn(&c.id, "replica-1", "hello", started.clone()).await.unwrap();
        let used = used(&alice, "2026-12-03", "big", 100, 0, 10);
        let ended = llooma_types::TurnEnded { state, context: None };
        store
            .close_turn_counted(&c.id, &opened.turn_id, &[], reply, ended, None, Some(&used))
            .await
            .unwrap();
    }
    let rows = store.usage(Some(&alice), "2026-12-03", "2026-12-03").await.unwrap();
    assert_eq!((rows[0].requests, rows[0].input_tokens, rows[0].output_tokens), (2, 200, 20));
    assert_eq!(store.messages(&c.id).await.unwrap().len(), 3, "two asked, one reply");
}
