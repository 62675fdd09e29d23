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

#[tokio::test]
async fn a_views_document_is_kept_once_per_version_read_only_by_its_owner_and_goes_with_its_server()
{
    let db = TestDb::new().await;
    let store = db.store().await;
    let alice = account(&store, "alice").await;
    let bob = account(&store, "bob").await;
    let maps = add(&store, &alice, "Maps", None).await;
    let view = |hash: &str, html: &str| llooma_store::McpView {
        server_id: maps.clone(),
        hash: hash.into(),
        uri: "ui://maps/view.html".into(),
        html: html.into(),
        domains_json: r#"{"connect":["https://tiles.example"]}"#.into(),
        prefers_border: Some(true),
    };
    store.put_mcp_view(view("v1", "<h1>Map 1</h1>")).await.unwrap();
    // The same version again (another snapshot of the same server) changes nothing.
    store.put_mcp_view(view("v1", "<h1>something else</h1>")).await.unwrap();
    store.put_mcp_view(view("v2", "<h1>Map 2</h1>")).await.unwrap();

    let first = store.mcp_view(&alice, &maps, "v1").await.unwrap().expect("v1");
    assert_eq!(first, view("v1", "<h1>Map 1</h1>"));
    let second = store.mcp_view(&alice, &maps, "v2").await.unwrap().expect("v2 beside v1");
    assert_eq!(second.html, "<h1>Map 2</h1>");
    assert_eq!(store.mcp_view(&bob, &maps, "v1").await.unwrap(), None, "another account's");
    assert_eq!(store.mcp_view(&alice, &maps, "v3").await.unwrap(), None);

    store.delete_mcp_server(&alice, &maps).await.unwrap();
    let mut again = new_server(&alice, "Maps", "https://maps.example/mcp");
    again.id = maps.clone();
    store.create_mcp_server(again, |_| "maps2".into()).await.unwrap();
    assert_eq!(store.mcp_view(&alice, &maps, "v1").await.unwrap(), None, "removed with its server");
}
