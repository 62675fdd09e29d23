use crate::support::{PASSWORD, Server, TestDb, run_cli};

#[tokio::test]
async fn admin_create_from_the_shell_claims_a_fresh_instance() {
    let db = TestDb::new();
    let (ok, stdout, stderr) = run_cli(
        &db,
        &["admin", "create", "--username", "Operator", "--password-env", "PW"],
        &[("PW", PASSWORD)],
    );
    assert!(ok, "{stderr}");
    assert!(stdout.contains("administrator operator created"), "{stdout}");
    let server = Server::start(&db, &[]);
    let mut tab = server.tab();
    let login = tab.login("operator", PASSWORD).await;
    assert_eq!(login.json["account"]["role"], "admin", "{login:?}");
    // The instance is claimed: the sign-up form no longer makes administrators.
    assert_eq!(server.tab().register("late", PASSWORD).await.status, 403);
    // A weak password is refused before anything is stored.
    let (ok, _, stderr) = run_cli(
        &db,
        &["admin", "create", "--username", "weak", "--password-env", "PW"],
        &[("PW", "short")],
    );
    assert!(!ok && stderr.contains("at least"), "{stderr}");
}

#[tokio::test]
async fn migrate_and_config_commands() {
    let db = TestDb::new();
    let (ok, stdout, stderr) = run_cli(&db, &["migrate"], &[]);
    assert!(ok, "{stderr}");
    assert!(stdout.contains("migrations applied"));
    // Twice is fine.
    assert!(run_cli(&db, &["migrate"], &[]).0);
    let (ok, stdout, _) = run_cli(&db, &["config"], &[("LLOOMA_SESSION_IDLE_SECS", "99")]);
    assert!(ok);
    assert!(stdout.contains("session_idle_secs = 99"), "{stdout}");
    let (ok, _, stderr) = run_cli(&db, &["config"], &[("LLOOMA_LISTEN", "not an address")]);
    assert!(!ok && stderr.contains("LLOOMA_LISTEN"), "{stderr}");
}

#[tokio::test]
async fn sigterm_shuts_down_cleanly() {
    let db = TestDb::new();
    let server = Server::start(&db, &[]);
    let http = reqwest::Client::builder().no_proxy().build().unwrap();
    assert_eq!(
        http.get(format!("{}/healthz", server.base)).send().await.unwrap().text().await.unwrap(),
        "ok"
    );
    let (clean, log) = server.terminate();
    assert!(clean, "{log}");
    assert!(log.contains("SIGTERM received") && log.contains("shut down"), "{log}");
}

#[tokio::test]
async fn json_logs_on_request() {
    let db = TestDb::new();
    let server = Server::start(&db, &[("LLOOMA_LOG_FORMAT", "json")]);
    let log = server.log_text();
    let line = log.lines().find(|l| l.contains("listening on")).unwrap();
    let parsed: serde_json::Value = serde_json::from_str(line).unwrap();
    assert_eq!(parsed["level"], "INFO");
}

#[tokio::test]
async fn check_address_answers_like_the_server_would() {
    let db = TestDb::new();
    /// (arguments, environment, exit code, start of the first line)
    type Case<'a> = (&'a [&'a str], &'a [(&'a str, &'a str)], i32, &'a str);
    let cases: &[Case] = &[
        (&["check-address", "http://127.0.0.1:3000/mcp"], &[], 3, "refused: "),
        (&["check-address", "http://169.254.169.254/latest/meta-data"], &[], 3, "refused: "),
        (&["check-address", "http://0x7f000001:3000/"], &[], 3, "refused: "),
        (
            &["check-address", "http://127.0.0.1:3000/mcp"],
            &[("MCP_ALLOWED_ORIGINS", "http://127.0.0.1:3000")],
            0,
            "allowed",
        ),
        // The MCP list does not open page reading.
        (
            &["check-address", "--purpose", "fetch", "http://127.0.0.1:3000/"],
            &[("MCP_ALLOWED_ORIGINS", "http://127.0.0.1:3000")],
            3,
            "refused: ",
        ),
        (&["check-address", "--purpose", "bot", "http://93.184.215.14/"], &[], 0, "allowed"),
        (&["check-address", "--purpose", "mail", "http://93.184.215.14/"], &[], 2, ""),
        (
            &["check-address", "http://93.184.215.14/"],
            &[("MCP_ALLOWED_ORIGINS", "not an origin")],
            2,
            "",
        ),
    ];
    for (args, env, code, first_line) in cases {
        let output = std::process::Command::new(crate::support::binary())
            .args(*args)
            .env_clear()
            .env("LLOOMA_DATA_DIR", db.dir.path())
            .envs(env.iter().copied())
            .output()
            .unwrap();
        let stdout = String::from_utf8_lossy(&output.stdout);
        assert_eq!(
            output.status.code(),
            Some(*code),
            "{args:?} {env:?}: {stdout} {}",
            String::from_utf8_lossy(&output.stderr)
        );
        assert!(stdout.lines().next().unwrap_or("").starts_with(first_line), "{args:?}: {stdout}");
    }
}
