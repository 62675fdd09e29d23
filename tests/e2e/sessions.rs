use std::time::Duration;

use serde_json::json;

use crate::support::{PASSWORD, Server, TestDb};

#[tokio::test]
async fn an_idle_session_expires() {
    let db = TestDb::new();
    let server = Server::start(&db, &[("LLOOMA_SESSION_IDLE_SECS", "2")]);
    let mut tab = server.tab();
    tab.register("frank", PASSWORD).await;
    assert_eq!(tab.get("/api/v1/me").await.status, 200);
    tokio::time::sleep(Duration::from_millis(2500)).await;
    let reply = tab.get("/api/v1/me").await;
    assert_eq!(reply.status, 401, "{reply:?}");
    assert_eq!(reply.json["error"], "unauthenticated");
}

#[tokio::test]
async fn a_busy_session_still_ends_at_its_absolute_limit() {
    let db = TestDb::new();
    let server = Server::start(&db, &[("LLOOMA_SESSION_ABSOLUTE_SECS", "3")]);
    let mut tab = server.tab();
    tab.register("grace", PASSWORD).await;
    for _ in 0..2 {
        tokio::time::sleep(Duration::from_millis(1000)).await;
        assert_eq!(tab.get("/api/v1/me").await.status, 200);
    }
    tokio::time::sleep(Duration::from_millis(1500)).await;
    assert_eq!(tab.get("/api/v1/me").await.status, 401);
}

#[tokio::test]
async fn state_changing_requests_need_the_csrf_token_and_the_right_origin() {
    let db = TestDb::new();
    let server = Server::start(&db, &[]);
    let mut tab = server.tab();
    tab.register("heidi", PASSWORD).await;

    // A forged request carries the cookie (the browser adds it) but not the token.
    let token = tab.csrf.take();
    let forged = tab.post("/api/v1/auth/logout", json!({})).await;
    assert_eq!(forged.status, 403, "{forged:?}");
    assert_eq!(forged.json["error"], "csrf");
    tab.csrf = Some("not-the-token".into());
    assert_eq!(tab.post("/api/v1/auth/logout", json!({})).await.status, 403);
    tab.csrf = token;

    // Another site's page, even with the token, is refused by its Origin.
    tab.origin = Some("https://evil.example".into());
    let cross = tab.post("/api/v1/auth/logout", json!({})).await;
    assert_eq!(cross.status, 403);
    assert!(cross.json["message"].as_str().unwrap().contains("evil.example"), "{cross:?}");
    // Login CSRF: a sign-in form on another site is refused too.
    assert_eq!(
        server.tab_with_origin("https://evil.example").login("heidi", PASSWORD).await.status,
        403
    );

    // Still signed in: none of the refused requests did anything.
    tab.origin = Some(server.base.clone());
    assert_eq!(tab.get("/api/v1/me").await.status, 200);
    assert_eq!(tab.post("/api/v1/auth/logout", json!({})).await.status, 204);
}

#[tokio::test]
async fn a_public_https_address_makes_cookies_secure_and_is_the_only_origin_accepted() {
    let db = TestDb::new();
    let server = Server::start(&db, &[("LLOOMA_PUBLIC_URL", "https://chat.example.org")]);
    let mut tab = server.tab();
    tab.origin = Some("https://chat.example.org".into());
    let reply = tab.register("ivan", PASSWORD).await;
    assert_eq!(reply.status, 201, "{reply:?}");
    assert!(reply.set_cookie.unwrap().contains("; Secure"));
    // The server's own loopback address is not the public origin.
    let mut direct = server.tab();
    assert_eq!(direct.login("ivan", PASSWORD).await.status, 403);
}

/// A signed-in account with a conversation, and its two event streams open.
async fn watching(
    tab: &mut crate::support::Tab,
) -> (crate::support::Events, crate::support::Events) {
    let conversation = tab.post("/api/v1/conversations", json!({"title": "Watched"})).await;
    let id = conversation.json["id"].as_str().unwrap();
    let cards = crate::support::Events::open(tab, "/api/v1/approvals/events", None).await;
    let log =
        crate::support::Events::open(tab, &format!("/api/v1/conversations/{id}/events"), None)
            .await;
    (cards, log)
}

#[tokio::test]
async fn event_streams_end_with_their_session_however_it_ends() {
    let db = TestDb::new();
    let server = Server::start(&db, &[("LLOOMA_SESSION_IDLE_SECS", "6")]);
    let mut tab = server.tab();
    tab.register("ivan", PASSWORD).await;
    let limit = Duration::from_secs(5);

    // Sign-out.
    let (mut cards, mut log) = watching(&mut tab).await;
    assert_eq!(tab.post("/api/v1/auth/logout", json!({})).await.status, 204);
    assert!(cards.ends_within(limit).await, "the cards stream outlived sign-out");
    assert!(log.ends_within(limit).await, "the conversation stream outlived sign-out");

    // A password change elsewhere ends every other session, and their streams.
    tab.login("ivan", PASSWORD).await;
    let mut laptop = server.tab();
    laptop.login("ivan", PASSWORD).await;
    let (mut cards, mut log) = watching(&mut tab).await;
    let changed = laptop
        .post(
            "/api/v1/me/password",
            json!({"currentPassword": PASSWORD, "newPassword": "another long passphrase 42"}),
        )
        .await;
    assert_eq!(changed.status, 200, "{changed:?}");
    assert!(cards.ends_within(limit).await, "the cards stream outlived a password change");
    assert!(log.ends_within(limit).await, "the conversation stream outlived a password change");

    // Expiry: a stream is not activity; an idle session ends, and so do its streams.
    let (mut cards, mut log) = watching(&mut laptop).await;
    assert!(!cards.ends_within(Duration::from_secs(2)).await, "a live session keeps its stream");
    assert!(cards.ends_within(Duration::from_secs(6 + 5)).await, "outlived the idle limit");
    assert!(log.ends_within(limit).await);
}

#[tokio::test]
async fn a_stream_on_one_replica_ends_when_its_session_ends_on_another() {
    if crate::support::engine() != "postgres" {
        return; // replicas share a Postgres database
    }
    let db = TestDb::new();
    let a = Server::start(&db, &[]);
    let b = Server::start(&db, &[]);
    let mut on_a = a.tab();
    on_a.register("judy", PASSWORD).await;
    // The same session, used on both replicas (a load balancer may send a tab anywhere).
    let mut on_b = b.tab();
    on_b.cookie = on_a.cookie.clone();
    on_b.csrf = on_a.csrf.clone();
    let (mut cards, mut log) = watching(&mut on_b).await;
    assert_eq!(on_a.post("/api/v1/auth/logout", json!({})).await.status, 204);
    assert!(cards.ends_within(Duration::from_secs(5)).await);
    assert!(log.ends_within(Duration::from_secs(5)).await);
}

#[tokio::test]
async fn a_rebound_host_name_cannot_claim_a_fresh_instance() {
    let db = TestDb::new();
    let server = Server::start(&db, &[]);
    let port = server.base.rsplit(':').next().unwrap().to_owned();
    let attacker = format!("rebind.attacker.example:{port}");
    let http = reqwest::Client::builder().no_proxy().build().unwrap();
    let forged = http
        .post(format!("{}/api/v1/auth/register", server.base))
        .header("host", &attacker)
        .header("origin", format!("http://{attacker}"))
        .json(&json!({"username": "mallory", "password": PASSWORD}))
        .send()
        .await
        .unwrap();
    assert_eq!(forged.status(), 421);
    let body: serde_json::Value = forged.json().await.unwrap();
    assert_eq!(body["error"], "unknown_host");
    assert!(body["message"].as_str().unwrap().contains("LLOOMA_PUBLIC_URL"), "{body}");
    // Pages are refused the same way; the health check still answers.
    let page = http.get(format!("{}/", server.base)).header("host", &attacker).send().await;
    assert_eq!(page.unwrap().status(), 421);
    let health = http.get(format!("{}/healthz", server.base)).header("host", &attacker).send();
    assert_eq!(health.await.unwrap().status(), 200);

    // The instance is still fresh: its own address (and `localhost`) may claim it.
    let mut tab = server.tab();
    let first = tab.register("root", PASSWORD).await;
    assert_eq!(first.status, 201, "{first:?}");
    assert_eq!(first.json["account"]["role"], "admin");
    let local = http
        .get(format!("{}/api/v1/me", server.base))
        .header("host", format!("localhost:{port}"))
        .header("cookie", format!("llooma_session={}", tab.cookie.as_ref().unwrap()))
        .send()
        .await
        .unwrap();
    assert_eq!(local.status(), 200);
}

#[tokio::test]
async fn with_a_public_address_its_host_is_answered_and_others_are_not() {
    let db = TestDb::new();
    let server = Server::start(&db, &[("LLOOMA_PUBLIC_URL", "https://chat.example.org")]);
    let http = reqwest::Client::builder().no_proxy().build().unwrap();
    for (host, status) in [("chat.example.org", 200), ("rebind.attacker.example", 421)] {
        let reply =
            http.get(format!("{}/api/v1/instance", server.base)).header("host", host).send().await;
        assert_eq!(reply.unwrap().status(), status, "{host}");
    }
}
