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
