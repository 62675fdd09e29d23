use serde_json::json;

use crate::support::{PASSWORD, Server, TestDb};

#[tokio::test]
async fn the_first_of_many_racing_registrations_is_the_only_administrator() {
    let db = TestDb::new();
    let server = Server::start(&db, &[]);
    let base = server.base.clone();
    let attempts = (0..8).map(|i| {
        let base = base.clone();
        tokio::spawn(async move {
            let mut tab = crate::support::Tab::new(&base);
            tab.register(&format!("racer{i}"), PASSWORD).await
        })
    });
    let replies: Vec<_> =
        futures::future::join_all(attempts).await.into_iter().map(Result::unwrap).collect();
    let created: Vec<_> = replies.iter().filter(|r| r.status == 201).collect();
    assert_eq!(created.len(), 1, "{replies:#?}");
    assert_eq!(created[0].json["account"]["role"], "admin");
    for refused in replies.iter().filter(|r| r.status != 201) {
        assert_eq!(refused.status, 403, "{refused:?}");
        assert!(refused.json["message"].as_str().unwrap().contains("Registration is closed"));
    }
    let mut admin = server.tab();
    let username = created[0].json["account"]["username"].as_str().unwrap().to_owned();
    assert_eq!(admin.login(&username, PASSWORD).await.status, 200);
    let accounts = admin.get("/api/v1/admin/accounts").await;
    assert_eq!(accounts.json.as_array().unwrap().len(), 1, "{accounts:?}");
}

#[tokio::test]
async fn registration_stays_closed_until_an_administrator_opens_it() {
    let db = TestDb::new();
    let server = Server::start(&db, &[]);
    let mut admin = server.tab();
    assert_eq!(admin.register("Admin", PASSWORD).await.json["account"]["username"], "admin");
    let info = server.tab().get("/api/v1/instance").await;
    assert_eq!(info.json["setupComplete"], true);
    assert_eq!(info.json["registrationOpen"], false);

    let mut visitor = server.tab();
    assert_eq!(visitor.register("bob", PASSWORD).await.status, 403);

    let changed = admin
        .send("PATCH", "/api/v1/admin/settings", Some(json!({"registrationOpen": true})))
        .await;
    assert_eq!(changed.status, 200, "{changed:?}");
    assert_eq!(changed.json["usersCanAddMcpServers"], false, "off by default");

    let bob = visitor.register("bob", PASSWORD).await;
    assert_eq!(bob.status, 201, "{bob:?}");
    assert_eq!(bob.json["account"]["role"], "user");
    // Users are not administrators.
    assert_eq!(visitor.get("/api/v1/admin/settings").await.status, 403);
    let forbidden = visitor
        .send("PATCH", "/api/v1/admin/settings", Some(json!({"usersCanAddMcpServers": true})))
        .await;
    assert_eq!(forbidden.status, 403);
    assert_eq!(admin.get("/api/v1/admin/settings").await.json["usersCanAddMcpServers"], false);
    // Usernames are unique whatever their case.
    let mut other = server.tab();
    let taken = other.register("BOB", PASSWORD).await;
    assert_eq!(taken.status, 409, "{taken:?}");
}

#[tokio::test]
async fn login_me_logout_and_password_change_through_the_api() {
    let db = TestDb::new();
    let server = Server::start(&db, &[]);
    let mut first = server.tab();
    first.register("carol", PASSWORD).await;
    let mut second = server.tab();
    let login = second.login("Carol", PASSWORD).await;
    assert_eq!(login.status, 200, "{login:?}");
    let cookie = login.set_cookie.unwrap();
    assert!(cookie.contains("HttpOnly") && cookie.contains("SameSite=Lax"), "{cookie}");
    assert!(!cookie.contains("Secure"), "plain http must not mark the cookie Secure");
    assert_eq!(second.get("/api/v1/me").await.json["account"]["username"], "carol");

    // A new session id at each sign-in.
    let mut third = server.tab();
    third.login("carol", PASSWORD).await;
    assert_ne!(second.cookie, third.cookie);

    // Changing the password ends every other session; the tab that did it gets a new one.
    let changed = second
        .post(
            "/api/v1/me/password",
            json!({"currentPassword": PASSWORD, "newPassword": "a different long password"}),
        )
        .await;
    assert_eq!(changed.status, 200, "{changed:?}");
    assert_eq!(second.get("/api/v1/me").await.status, 200);
    assert_eq!(first.get("/api/v1/me").await.status, 401);
    assert_eq!(third.get("/api/v1/me").await.status, 401);
    assert_eq!(server.tab().login("carol", PASSWORD).await.status, 401);

    // Logout ends the session on the server, not just in the browser.
    let stolen_cookie = second.cookie.clone();
    let out = second.post("/api/v1/auth/logout", json!({})).await;
    assert_eq!(out.status, 204, "{out:?}");
    assert!(out.set_cookie.unwrap().contains("Max-Age=0"));
    let mut replay = server.tab();
    replay.cookie = stolen_cookie;
    assert_eq!(replay.get("/api/v1/me").await.status, 401);
}

#[tokio::test]
async fn logins_are_throttled_per_account_without_revealing_which_accounts_exist() {
    let db = TestDb::new();
    let server = Server::start(&db, &[("LLOOMA_LOGIN_MAX_FAILURES_PER_ACCOUNT", "3")]);
    server.tab().register("dave", PASSWORD).await;

    let mut answers_for = Vec::new();
    for name in ["dave", "nobody"] {
        let mut tab = server.tab();
        let mut statuses = Vec::new();
        let mut bodies = Vec::new();
        for _ in 0..3 {
            let reply = tab.login(name, "wrong password!").await;
            statuses.push(reply.status);
            bodies.push(reply.text);
        }
        // Even the right password is refused while throttled.
        let locked = tab.login(name, PASSWORD).await;
        statuses.push(locked.status);
        assert!(locked.json["message"].as_str().unwrap().contains("Wait"), "{locked:?}");
        bodies.push(locked.json["error"].to_string());
        answers_for.push((statuses, bodies));
    }
    assert_eq!(answers_for[0].0, vec![401, 401, 401, 429]);
    assert_eq!(answers_for[0], answers_for[1], "an unknown account must look like a known one");
}

#[tokio::test]
async fn logins_are_throttled_per_client_address() {
    let db = TestDb::new();
    let server = Server::start(&db, &[("LLOOMA_LOGIN_MAX_FAILURES_PER_ADDRESS", "4")]);
    server.tab().register("erin", PASSWORD).await;
    for i in 0..4 {
        assert_eq!(server.tab().login(&format!("guess{i}"), "wrong password!").await.status, 401);
    }
    let reply = server.tab().login("erin", PASSWORD).await;
    assert_eq!(reply.status, 429, "{reply:?}");
    assert!(reply.json["message"].as_str().unwrap().contains("Too many failed sign-in attempts"));
}

#[tokio::test]
async fn a_burst_of_parallel_guesses_is_held_to_the_limit() {
    let db = TestDb::new();
    let server = Server::start(&db, &[("LLOOMA_LOGIN_MAX_FAILURES_PER_ACCOUNT", "5")]);
    server.tab().register("mallory", PASSWORD).await;
    let base = server.base.clone();
    let guesses = (0..20).map(|i| {
        let base = base.clone();
        tokio::spawn(async move {
            crate::support::Tab::new(&base)
                .login("mallory", &format!("guess number {i}"))
                .await
                .status
        })
    });
    let statuses: Vec<u16> =
        futures::future::join_all(guesses).await.into_iter().map(Result::unwrap).collect();
    let checked = statuses.iter().filter(|s| **s == 401).count();
    // However the requests interleave, no more than the limit are ever checked.
    assert!(checked <= 5, "{checked} guesses were checked: {statuses:?}");
    assert_eq!(statuses.iter().filter(|s| **s == 429).count(), 20 - checked);
}

#[tokio::test]
async fn behind_a_proxy_only_the_address_the_proxy_saw_counts() {
    let db = TestDb::new();
    let server = Server::start(
        &db,
        &[("LLOOMA_TRUST_FORWARDED_FOR", "true"), ("LLOOMA_LOGIN_MAX_FAILURES_PER_ADDRESS", "4")],
    );
    server.tab().register("trent", PASSWORD).await;
    let http = reqwest::Client::builder().no_proxy().build().unwrap();
    let mut statuses = Vec::new();
    for i in 0..6 {
        // The client writes a different address each time; the proxy appends the real one.
        let response = http
            .post(format!("{}/api/v1/auth/login", server.base))
            .header("x-forwarded-for", format!("203.0.113.{i}, 198.51.100.7"))
            .json(&serde_json::json!({"username": format!("someone{i}"), "password": "wrong password!"}))
            .send()
            .await
            .unwrap();
        statuses.push(response.status().as_u16());
    }
    assert_eq!(statuses, vec![401, 401, 401, 401, 429, 429]);
}

#[tokio::test]
async fn a_stolen_session_cannot_guess_the_password_through_password_change() {
    let db = TestDb::new();
    let server = Server::start(&db, &[("LLOOMA_LOGIN_MAX_FAILURES_PER_ACCOUNT", "2")]);
    let mut tab = server.tab();
    tab.register("victor", PASSWORD).await;
    let change = |current: &'static str| serde_json::json!({"currentPassword": current, "newPassword": "another long password"});
    assert_eq!(tab.post("/api/v1/me/password", change("wrong guess one")).await.status, 403);
    assert_eq!(tab.post("/api/v1/me/password", change("wrong guess two")).await.status, 403);
    let locked = tab.post("/api/v1/me/password", change(PASSWORD)).await;
    assert_eq!(locked.status, 429, "{locked:?}");
}

#[tokio::test]
async fn a_person_deletes_their_account_with_everything_of_theirs_and_the_last_administrator_cannot()
 {
    use llooma_fake_model::{FakeModel, Reply};
    let model = FakeModel::start([]).await.unwrap();
    let db = TestDb::new();
    let server = Server::start(&db, &[("PROVIDER_ALLOWED_ORIGINS", &model.origin())]);
    let (mut root, roots) = crate::conversations::setup(&server, &model).await;
    root.send("PATCH", "/api/v1/admin/settings", Some(json!({"registrationOpen": true}))).await;
    let provider = root.get(&format!("/api/v1/conversations/{roots}")).await.json["conversation"]
        ["providerId"]
        .clone();
    let mut bob = server.tab();
    assert_eq!(bob.register("bob", PASSWORD).await.status, 201);
    let chat = json!({"title": "Bob's", "providerId": provider, "model": "fake-model"});
    let bobs =
        bob.post("/api/v1/conversations", chat).await.json["id"].as_str().unwrap().to_owned();
    // A reply still being written when the account goes.
    model.push(Reply::text("a long answer ".repeat(50)).chunks(50).chunk_delay_ms(100));
    let sent =
        bob.post(&format!("/api/v1/conversations/{bobs}/messages"), json!({"content": "hi"})).await;
    assert_eq!(sent.status, 202);

    let wrong =
        bob.send("DELETE", "/api/v1/me", Some(json!({"password": "not-the-password"}))).await;
    assert_eq!(wrong.status, 403, "{wrong:?}");
    assert_eq!(bob.get(&format!("/api/v1/conversations/{bobs}")).await.status, 200, "nothing went");
    let deleted = bob.send("DELETE", "/api/v1/me", Some(json!({"password": PASSWORD}))).await;
    assert_eq!(deleted.status, 204, "{deleted:?}");
    assert!(
        deleted
            .set_cookie
            .as_deref()
            .is_some_and(|c| c.contains("Max-Age=0") || c.contains("llooma_session=;")),
        "{deleted:?}"
    );
    assert_eq!(bob.get("/api/v1/me").await.status, 401, "the session ended");
    let mut again = server.tab();
    assert_eq!(again.login("bob", PASSWORD).await.status, 401, "the account is gone");
    let accounts = root.get("/api/v1/admin/accounts").await.json;
    assert_eq!(accounts.as_array().unwrap().len(), 1, "{accounts}");
    // The name is free again, and holds nothing of before.
    assert_eq!(again.register("bob", PASSWORD).await.status, 201);
    assert_eq!(again.get("/api/v1/conversations").await.json, json!([]));
    assert_eq!(again.get(&format!("/api/v1/conversations/{bobs}")).await.status, 404);

    // The instance keeps its administrator; its own conversations still answer.
    let last = root.send("DELETE", "/api/v1/me", Some(json!({"password": PASSWORD}))).await;
    assert_eq!((last.status, last.json["error"].as_str()), (409, Some("last_admin")), "{last:?}");
    model.push(Reply::text("Still here."));
    let mut events =
        crate::support::Events::open(&root, &format!("/api/v1/conversations/{roots}/events"), None)
            .await;
    let sent = root
        .post(&format!("/api/v1/conversations/{roots}/messages"), json!({"content": "there?"}))
        .await;
    assert_eq!(sent.status, 202, "{sent:?}");
    while events.next().await.0 != "end" {}
}
