use serde_json::json;

use crate::support::{PASSWORD, Server, TestDb, engine};

#[tokio::test]
async fn bad_requests_get_a_clear_json_error_never_a_500() {
    let db = TestDb::new();
    let server = Server::start(&db, &[]);
    // No connection reuse: a server may close a connection after refusing an oversized body
    // without reading it, and that must not be mistaken for the next case's answer.
    let http = reqwest::Client::builder().no_proxy().pool_max_idle_per_host(0).build().unwrap();
    let url = format!("{}/api/v1/auth/login", server.base);

    let cases: Vec<(&str, reqwest::RequestBuilder, u16, &str)> = vec![
        (
            "malformed",
            http.post(&url).header("content-type", "application/json").body("{\"username\": "),
            400,
            "invalid_json",
        ),
        (
            "wrong fields",
            http.post(&url).header("content-type", "application/json").body("{\"user\": 1}"),
            400,
            "invalid_fields",
        ),
        (
            "not json",
            http.post(&url).header("content-type", "text/plain").body("hello"),
            415,
            "unsupported_media_type",
        ),
        (
            "huge",
            http.post(&url)
                .header("content-type", "application/json")
                .body(format!("{{\"username\": \"{}\"}}", "x".repeat(200_000))),
            413,
            "payload_too_large",
        ),
        (
            "unknown route",
            http.get(format!("{}/api/v1/nothing-here", server.base)),
            404,
            "not_found",
        ),
    ];
    for (name, request, status, code) in cases {
        let response = request.send().await.unwrap();
        assert_eq!(response.status().as_u16(), status, "{name}");
        let body: serde_json::Value = response.json().await.unwrap();
        assert_eq!(body["error"], code, "{name}: {body}");
        assert!(body["message"].as_str().unwrap().len() > 10, "{name}: {body}");
    }
    // The server is fine afterwards.
    assert_eq!(server.tab().register("judy", PASSWORD).await.status, 201);
}

#[tokio::test]
async fn a_lost_database_gives_503_with_a_message_and_readyz_says_so() {
    let db = TestDb::new();
    let server = Server::start(&db, &[]);
    let mut tab = server.tab();
    tab.register("ken", PASSWORD).await;
    let http = reqwest::Client::builder().no_proxy().build().unwrap();
    assert_eq!(http.get(format!("{}/readyz", server.base)).send().await.unwrap().status(), 200);
    if engine() != "postgres" {
        // An open SQLite file cannot be taken away from a running process; the Postgres run
        // covers this case.
        return;
    }
    db.drop_now();
    let ready = http.get(format!("{}/readyz", server.base)).send().await.unwrap();
    assert_eq!(ready.status(), 503);
    let reply = tab
        .post(
            "/api/v1/me/password",
            json!({"currentPassword": PASSWORD, "newPassword": "x".repeat(12)}),
        )
        .await;
    assert_eq!(reply.status, 503, "{reply:?}");
    assert!(
        reply.json["message"].as_str().unwrap().contains("database cannot be reached"),
        "{reply:?}"
    );
    // Health (is the process alive) is not readiness.
    assert_eq!(http.get(format!("{}/healthz", server.base)).send().await.unwrap().status(), 200);
}
