//! MCP servers as a turn reads them (on SQLite through the hot path's own connection, on
//! Postgres through sea-orm): every field as written, only the owner's, on both engines.

use llooma_store::{NewMcpServer, Store, Suspension, ToolSettings};

use crate::support::{TestDb, account, new_server};

async fn add(store: &Store, account_id: &str, label: &str, token: Option<&str>) -> String {
    let address = format!("https://{}.example/mcp", label.to_lowercase());
    let new = NewMcpServer {
        token_ciphertext: token.map(Into::into),
        snapshot_json: format!(r#"{{"tools":[],"label":"{label}"}}"#),
        ..new_server(account_id, label, &address)
    };
    let id = new.id.clone();
    store.create_mcp_server(new, |_| label.to_lowercase()).await.unwrap();
    id
}

#[tokio::test]
async fn a_server_reads_back_every_field_as_written_and_only_for_its_owner() {
    let db = TestDb::new().await;
    let store = db.store().await;
    let alice = account(&store, "alice").await;
    let bob = account(&store, "bob").await;
    let mail = add(&store, &alice, "Mail", Some("sealed-token")).await;
    let files = add(&store, &alice, "Files", None).await;

    store.set_mcp_server_enabled(&alice, &mail, false).await.unwrap();
    let suspension =
        Suspension { reason: "leaks files".into(), at_ms: 1_700_000_000_123, by: bob.clone() };
    store.admin_suspend_mcp_server(&files, Some(suspension.clone())).await.unwrap();
    store.mark_mcp_snapshot_stale(&files).await.unwrap();
    store.set_mcp_group_switch(&mail, "calendar", false).await.unwrap();
    store.set_mcp_group_switch(&mail, "inbox", true).await.unwrap();
    let settings = ToolSettings { tool_budget: 7, mcp_everywhere: true, announce_mode: true };
    store.set_tool_settings(&alice, &settings).await.unwrap();

    let listed = store.list_mcp_servers(&alice).await.unwrap();
    assert_eq!(listed.iter().map(|s| s.label.as_str()).collect::<Vec<_>>(), ["Mail", "Files"]);
    let (first, second) = (&listed[0], &listed[1]);
    assert_eq!(first.id, mail);
    assert_eq!(first.account_id, alice);
    assert_eq!(first.slug, "mail");
    assert_eq!(first.address, "https://mail.example/mcp");
    assert_eq!(first.token_ciphertext.as_deref(), Some("sealed-token"));
    assert!(!first.enabled);
    assert_eq!(first.suspension, None);
    assert!(!first.snapshot_stale);
    assert_eq!(first.snapshot_json, r#"{"tools":[],"label":"Mail"}"#);
    assert!(first.position < second.position);
    assert!(first.created_at_ms > 0 && first.snapshot_taken_at_ms > 0);
    assert_eq!(second.token_ciphertext, None);
    assert!(second.enabled);
    assert_eq!(second.suspension, Some(suspension));
    assert!(second.snapshot_stale);
    assert!(!second.is_active());

    assert_eq!(store.mcp_server(&alice, &files).await.unwrap().as_ref(), Some(second));
    assert_eq!(store.mcp_server(&bob, &files).await.unwrap(), None, "another account's server");
    assert!(store.list_mcp_servers(&bob).await.unwrap().is_empty());

    let mut switches = store.mcp_group_switches(&mail).await.unwrap();
    switches.sort();
    assert_eq!(switches, [("calendar".to_owned(), false), ("inbox".to_owned(), true)]);
    assert_eq!(store.tool_settings(&alice).await.unwrap(), settings);
    assert_eq!(store.tool_settings(&bob).await.unwrap(), ToolSettings::default());
}
