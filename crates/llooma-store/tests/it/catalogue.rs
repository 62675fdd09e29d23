//! The MCP catalogue: administrators' entries, ratings, and usage counted per address, on both
//! engines.

use std::sync::Arc;

use llooma_approval_broker::{SystemClock, Unasked};
use llooma_store::{NewCatalogueEntry, Store, StoreError};
use serde_json::json;

use crate::support::{SERVER, TestDb, account, broker, new_call, new_server};

fn entry(label: &str, address: &str) -> NewCatalogueEntry {
    NewCatalogueEntry {
        label: label.into(),
        address: address.into(),
        description: "Mail for the team".into(),
        token_needed: true,
        token_help: "Ask IT".into(),
        icon: "✉".into(),
        tags: vec!["mail".into(), "team".into()],
    }
}

async fn add_server(store: &Store, account_id: &str, address: &str) {
    store
        .create_mcp_server(new_server(account_id, "Mail", address), |taken| {
            format!("mail{}", taken.len())
        })
        .await
        .unwrap();
}

#[tokio::test]
async fn entries_are_kept_changed_and_removed_with_their_ratings() {
    let db = TestDb::new().await;
    let store = db.store().await;
    let alice = account(&store, "alice").await;
    let bob = account(&store, "bob").await;
    let mail = store.create_catalogue_entry(entry("Mail", SERVER)).await.unwrap();
    let other =
        store.create_catalogue_entry(entry("Other", "https://other.example/mcp")).await.unwrap();
    let listed = store.catalogue_entries().await.unwrap();
    assert_eq!(
        listed.iter().map(|e| e.entry.label.as_str()).collect::<Vec<_>>(),
        ["Mail", "Other"]
    );
    assert_eq!(listed[0].entry.tags, ["mail", "team"]);

    let mut changed = entry("Team mail", SERVER);
    changed.tags = vec![];
    let updated = store.update_catalogue_entry(&mail.id, changed).await.unwrap();
    assert_eq!(updated.entry.label, "Team mail");
    assert!(updated.entry.tags.is_empty());
    assert!(matches!(
        store.update_catalogue_entry("no-such-entry", entry("x", SERVER)).await,
        Err(StoreError::NotFound)
    ));

    // One rating per account, changed in place; the average is the store's sum over its count.
    store.rate_catalogue_entry(&mail.id, &alice, 5).await.unwrap();
    store.rate_catalogue_entry(&mail.id, &bob, 2).await.unwrap();
    store.rate_catalogue_entry(&mail.id, &bob, 4).await.unwrap();
    store.rate_catalogue_entry(&other.id, &bob, 1).await.unwrap();
    let ratings = store.catalogue_ratings().await.unwrap();
    assert_eq!((ratings[&mail.id].count, ratings[&mail.id].total_stars), (2, 9));
    assert_eq!(store.my_catalogue_ratings(&bob).await.unwrap()[&mail.id], 4);
    assert!(store.unrate_catalogue_entry(&mail.id, &bob).await.unwrap());
    assert!(!store.unrate_catalogue_entry(&mail.id, &bob).await.unwrap());
    assert_eq!(store.catalogue_ratings().await.unwrap()[&mail.id].count, 1);

    // Pointed at another server, an entry loses the ratings of the old one.
    store.rate_catalogue_entry(&other.id, &alice, 5).await.unwrap();
    let mut moved = entry("Other", "https://other.example/mcp");
    moved.description = "New words, same server".into();
    store.update_catalogue_entry(&other.id, moved).await.unwrap();
    assert_eq!(store.catalogue_ratings().await.unwrap()[&other.id].count, 2, "same address");
    let elsewhere = entry("Other", "https://moved.example/mcp");
    store.update_catalogue_entry(&other.id, elsewhere).await.unwrap();
    assert!(!store.catalogue_ratings().await.unwrap().contains_key(&other.id), "another server");
    store.rate_catalogue_entry(&other.id, &bob, 1).await.unwrap();

    // Removing an entry takes its ratings along and leaves the others alone.
    assert!(store.delete_catalogue_entry(&mail.id).await.unwrap());
    assert!(!store.delete_catalogue_entry(&mail.id).await.unwrap());
    let ratings = store.catalogue_ratings().await.unwrap();
    assert!(!ratings.contains_key(&mail.id));
    assert_eq!(ratings[&other.id].count, 1);
    assert_eq!(store.catalogue_entry(&mail.id).await.unwrap(), None);
}

#[tokio::test]
async fn usage_counts_accounts_and_calls_that_went_out_per_address() {
    let db = TestDb::new().await;
    let store = db.store().await;
    let alice = account(&store, "alice").await;
    let bob = account(&store, "bob").await;
    let carol = account(&store, "carol").await;
    // Alice added the address twice: still one account.
    add_server(&store, &alice, SERVER).await;
    add_server(&store, &alice, SERVER).await;
    add_server(&store, &bob, SERVER).await;
    add_server(&store, &carol, "https://elsewhere.example/mcp").await;

    let broker = broker(&store, Arc::new(SystemClock), "replica-a").await;
    for who in [&alice, &alice, &bob] {
        broker.record_unasked(new_call(who, json!({"to": "x"})), Unasked::Bot).await.unwrap();
    }
    // A call still waiting for its answer did not go out.
    broker.request(new_call(&bob, json!({"to": "pending"}))).await.unwrap();

    let before = llooma_store::now_ms() - 60_000;
    let elsewhere = "https://elsewhere.example/mcp".to_owned();
    let asked = [SERVER.to_owned(), elsewhere.clone(), "https://unused.example/mcp".to_owned()];
    let usage = store.usage_by_address(&asked, before).await.unwrap();
    assert_eq!((usage[SERVER].accounts, usage[SERVER].calls), (2, 3));
    assert_eq!(usage["https://elsewhere.example/mcp"].accounts, 1);
    assert_eq!(usage["https://elsewhere.example/mcp"].calls, 0);
    assert!(!usage.contains_key("https://unused.example/mcp"));
    // Only the addresses asked about are counted; calls older than the window do not count.
    let only = store.usage_by_address(&[elsewhere], before).await.unwrap();
    assert!(!only.contains_key(SERVER));
    let later = store.usage_by_address(&asked, llooma_store::now_ms() + 60_000).await.unwrap();
    assert_eq!((later[SERVER].accounts, later[SERVER].calls), (2, 0));
    assert!(store.usage_by_address(&[], before).await.unwrap().is_empty());
}
