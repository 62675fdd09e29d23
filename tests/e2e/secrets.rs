use sea_orm::{ConnectionTrait, Statement};
use serde_json::json;

use crate::support::{PASSWORD, Server, TestDb, run_cli};

const OTHER_SECRET: &str = "a-completely-different-instance-secret-0123456789";

async fn admin_with_providers(
    server: &Server,
    keys: &[&str],
) -> (crate::support::Tab, Vec<String>) {
    let mut admin = server.tab();
    assert_eq!(admin.register("root", PASSWORD).await.status, 201);
    let mut ids = Vec::new();
    for (i, key) in keys.iter().enumerate() {
        let reply = admin
            .post(
                "/api/v1/admin/providers",
                json!({"name": format!("provider {i}"), "baseUrl": "https://api.example.org/v1", "apiKey": key}),
            )
            .await;
        assert_eq!(reply.status, 201, "{reply:?}");
        assert_eq!(reply.json["hasKey"], true);
        ids.push(reply.json["id"].as_str().unwrap().to_owned());
    }
    (admin, ids)
}

async fn stored_keys(db: &TestDb) -> Vec<(String, String)> {
    let conn = crate::support::connect(db).await;
    let rows = conn
        .query_all_raw(Statement::from_string(
            conn.get_database_backend(),
            "SELECT id, api_key_ciphertext FROM providers ORDER BY name",
        ))
        .await
        .unwrap();
    let keys = rows
        .iter()
        .map(|r| {
            (r.try_get_by_index::<String>(0).unwrap(), r.try_get_by_index::<String>(1).unwrap())
        })
        .collect();
    conn.close().await.unwrap();
    keys
}

#[tokio::test]
async fn a_secret_that_does_not_match_the_data_stops_start_up() {
    let db = TestDb::new();
    let server = Server::start(&db, &[]);
    let generated = server.log_text();
    assert!(generated.contains("generated a new instance secret"), "{generated}");
    let secret_file = db.dir.path().join("instance-secret");
    let mode = std::os::unix::fs::PermissionsExt::mode(
        &std::fs::metadata(&secret_file).unwrap().permissions(),
    );
    assert_eq!(mode & 0o777, 0o600);
    drop(server);

    let refused =
        Server::try_start(&db, &[("LLOOMA_SECRET", OTHER_SECRET)]).err().expect("must refuse");
    assert!(refused.contains("does not match this database"), "{refused}");

    // Losing the file is not a reason to make a new secret over existing data.
    std::fs::rename(&secret_file, db.dir.path().join("moved-away")).unwrap();
    let refused = Server::try_start(&db, &[]).err().expect("must refuse");
    assert!(refused.contains("is missing") && refused.contains("never generates"), "{refused}");
    assert!(!secret_file.exists(), "no new secret may be written");

    std::fs::rename(db.dir.path().join("moved-away"), &secret_file).unwrap();
    Server::start(&db, &[]);
}

#[tokio::test]
async fn a_ciphertext_copied_to_another_row_does_not_decrypt() {
    let db = TestDb::new();
    let server = Server::start(&db, &[]);
    admin_with_providers(&server, &["sk-first-key-0001", "sk-second-key-0002"]).await;
    drop(server);

    let keys = stored_keys(&db).await;
    let conn = crate::support::connect(&db).await;
    let backend = conn.get_database_backend();
    for ((id, _), (_, other)) in keys.iter().zip(keys.iter().rev()) {
        conn.execute_raw(Statement::from_string(
            backend,
            format!("UPDATE providers SET api_key_ciphertext = '{other}' WHERE id = '{id}'"),
        ))
        .await
        .unwrap();
    }
    conn.close().await.unwrap();

    // Rotation must decrypt every value: the swapped ones fail, and nothing is changed.
    let (ok, _, stderr) = run_cli(&db, &["rotate-secret"], &[]);
    assert!(!ok);
    assert!(stderr.contains("providers.api_key_ciphertext"), "{stderr}");
    let swapped = stored_keys(&db).await;
    assert_eq!(swapped[0].1, keys[1].1);
    // The instance secret did not change either: the server still starts.
    Server::start(&db, &[]);
}

#[tokio::test]
async fn rotating_the_secret_re_encrypts_everything() {
    let db = TestDb::new();
    let server = Server::start(&db, &[]);
    admin_with_providers(&server, &["sk-rotate-me-0001"]).await;
    drop(server);
    let secret_file = db.dir.path().join("instance-secret");
    let before_file = std::fs::read(&secret_file).unwrap();
    let before = stored_keys(&db).await;

    let (ok, stdout, stderr) = run_cli(&db, &["rotate-secret"], &[]);
    assert!(ok, "{stderr}");
    assert!(stdout.contains("re-encrypted 1 stored secrets"), "{stdout}");
    assert_ne!(std::fs::read(&secret_file).unwrap(), before_file);
    let after = stored_keys(&db).await;
    assert_ne!(after[0].1, before[0].1);
    assert_ne!(after[0].1.split('.').nth(1), before[0].1.split('.').nth(1), "new key id");

    // The new secret opens the data, and a second rotation can decrypt what the first wrote.
    let server = Server::start(&db, &[]);
    let mut admin = server.tab();
    admin.login("root", PASSWORD).await;
    assert_eq!(admin.get("/api/v1/admin/providers").await.json[0]["hasKey"], true);
    drop(server);
    let (ok, _, stderr) = run_cli(&db, &["rotate-secret"], &[]);
    assert!(ok, "{stderr}");
}

#[tokio::test]
async fn keys_passwords_and_session_tokens_never_reach_a_response_or_a_log_line() {
    let db = TestDb::new();
    let key = format!("sk-live-{}", uuid::Uuid::new_v4().simple());
    let secret = "instance-secret-for-this-test-0123456789abcdef";
    let server = Server::start(&db, &[("LLOOMA_SECRET", secret), ("LLOOMA_LOG", "trace")]);
    let (mut admin, ids) = admin_with_providers(&server, &[&key]).await;
    let mut seen = Vec::new();
    seen.push(admin.get("/api/v1/admin/providers").await.text);
    let replaced = admin
        .send(
            "PUT",
            &format!("/api/v1/admin/providers/{}/key", ids[0]),
            Some(json!({"apiKey": key})),
        )
        .await;
    assert_eq!(replaced.status, 200, "{replaced:?}");
    seen.push(replaced.text);
    seen.push(admin.get("/api/v1/me").await.text);
    let mut bad = server.tab();
    seen.push(bad.login("root", "not the password at all").await.text);

    let session_token = admin.cookie.clone().unwrap();
    let (_, config_out, _) = run_cli(&db, &["config"], &[("LLOOMA_SECRET", secret)]);
    seen.push(config_out);
    seen.push(server.log_text());
    for text in &seen {
        for forbidden in
            [key.as_str(), secret, PASSWORD, session_token.as_str(), "not the password at all"]
        {
            assert!(!text.contains(forbidden), "{forbidden:?} leaked into:\n{text}");
        }
    }
    // At rest, the key is a ciphertext.
    let stored = stored_keys(&db).await;
    assert!(stored[0].1.starts_with("v1.") && !stored[0].1.contains(&key));
}

/// A credential someone put in an address (a registration link's `token`, an API call's
/// `api_key`, a key or a password inside the link's `address`) is not written to the log, even
/// at `debug`, where every request's target is: the path is, with the values left out.
#[tokio::test]
async fn a_credential_in_a_requested_address_never_reaches_the_debug_log() {
    let db = TestDb::new();
    let server = Server::start(&db, &[("LLOOMA_LOG", "debug")]);
    let mut alice = server.tab();
    assert_eq!(alice.register("alice", PASSWORD).await.status, 201);
    let requests = [
        "/settings/tools/mcp/new?address=http://x.example/mcp&token=SEKRET123",
        "/settings/tools/mcp/new?label=Docs&address=https%3A%2F%2Fu%3ASEKRET456%40x.example%2Fmcp\
         %3Fteam%3Da%26api_key%3DSEKRET789",
        "/api/v1/mcp/catalogue?q=docs&api_key=SEKRET000",
        "/api/v1/mcp/catalogue?accessToken=SEKRET111",
    ];
    for path in requests {
        let reply = alice.get(path).await;
        // The API refuses a parameter it does not take (400) without echoing its value.
        let want = if path.starts_with("/api/") { 400 } else { 200 };
        assert_eq!(reply.status, want, "{path}: {reply:?}");
        assert!(!reply.text.contains("SEKRET"), "{path}: {}", reply.text);
    }
    let (_, log) = server.terminate();
    assert!(log.contains("/settings/tools/mcp/new?address=http://x.example/mcp&token="), "{log}");
    assert!(log.contains("/api/v1/mcp/catalogue?q=docs&api_key="), "{log}");
    assert!(!log.contains("SEKRET"), "a credential leaked into the log:\n{log}");
}
