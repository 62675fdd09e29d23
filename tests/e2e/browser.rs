//! The web interface in a real headless Chromium, against the real binary, the fake model and
//! npm's server-everything: what a person does and sees.

mod driver;
mod everyday;
mod files;
mod import;
mod long_conversations;
mod questions;
mod usage;
mod views;
mod voice;

use llooma_fake_model::{FakeModel, Reply};
use serde_json::{Value, json};

use crate::support::{PASSWORD, Server, Tab, TestDb};
use driver::Browser;

/// A server that reaches the fake model and `peer`, and an administrator's conversation on the
/// fake model with `peer` added as `label` and MCP switched on. Fields drop in order: the server
/// stops before its database goes.
pub(crate) struct McpConversation {
    pub model: FakeModel,
    pub server: Server,
    pub id: String,
    /// The answer to adding the server (its tools with their model-facing names).
    pub added: Value,
    _db: TestDb,
}

pub(crate) async fn mcp_conversation(
    peer: &llooma_test_support::peers::Peer,
    label: &str,
) -> McpConversation {
    let model = FakeModel::start([]).await.unwrap();
    let db = TestDb::new();
    let server = Server::start(
        &db,
        &[("PROVIDER_ALLOWED_ORIGINS", &model.origin()), ("MCP_ALLOWED_ORIGINS", &peer.origin())],
    );
    let (mut api, ids) = with_conversations(&server, &model, 1).await;
    let id = ids[0].clone();
    let added = api.post("/api/v1/mcp/servers", json!({"label": label, "address": peer.url()}));
    let added = added.await;
    assert_eq!(added.status, 201, "{added:?}");
    let on = api
        .send("PATCH", &format!("/api/v1/conversations/{id}"), Some(json!({"mcpEnabled": true})))
        .await;
    assert_eq!(on.status, 200, "{on:?}");
    McpConversation { model, server, id, added: added.json, _db: db }
}

/// An administrator with a provider of the fake model and `count` conversations on it; returns
/// the API tab and the conversations' ids.
pub(crate) async fn with_conversations(
    server: &Server,
    model: &FakeModel,
    count: usize,
) -> (Tab, Vec<String>) {
    let mut api = server.tab();
    api.register("root", PASSWORD).await;
    let provider = api
        .post("/api/v1/admin/providers", json!({"name": "Fake", "baseUrl": model.base_url()}))
        .await;
    let provider_id = provider.json["id"].as_str().unwrap().to_owned();
    let mut ids = Vec::new();
    for n in 1..=count {
        let created = api
            .post(
                "/api/v1/conversations",
                json!({"title": format!("Chat {n}"), "providerId": provider_id, "model": "fake-model"}),
            )
            .await;
        ids.push(created.json["id"].as_str().unwrap().to_owned());
    }
    (api, ids)
}

/// Waits until the API shows what the page was asked to change.
async fn until_api(tab: &mut Tab, path: &str, what: &str, ok: impl Fn(&Value) -> bool) -> Value {
    for _ in 0..100 {
        let reply = tab.get(path).await;
        if ok(&reply.json) {
            return reply.json;
        }
        tokio::time::sleep(std::time::Duration::from_millis(100)).await;
    }
    panic!("the page did not change {what}");
}

#[tokio::test]
async fn browser_first_run_sign_in_chat_and_a_card_answered_in_another_tab() {
    let Some(peer) = crate::peers::everything() else { return };
    let Some(browser) = Browser::start(1280, 900).await else { return };
    let model = FakeModel::start([]).await.unwrap();
    let db = TestDb::new();
    let server = Server::start(
        &db,
        &[("PROVIDER_ALLOWED_ORIGINS", &model.origin()), ("MCP_ALLOWED_ORIGINS", &peer.origin())],
    );
    let base = server.base.clone();

    // First run: the page offers to create the administrator.
    browser.goto(&format!("{base}/")).await;
    browser.wait_live().await;
    browser.wait_text("h2", "Create the administrator account").await;
    browser.screenshot("first-run").await;
    browser.type_into("input[name=username]", "root").await;
    browser.type_into("input[name=password]", PASSWORD).await;
    browser.click("button[type=submit]").await;
    browser.wait_text("h1", "Conversations").await;
    browser.wait_text(".topbar .badge", "admin").await;

    // Sign out, a wrong password is said so, then sign in.
    browser.wait_live().await;
    browser.click("button.signout").await;
    browser.wait_text("h2", "Sign in").await;
    browser.wait_live().await;
    browser.type_into("input[name=username]", "root").await;
    browser.type_into("input[name=password]", "not the password").await;
    browser.click("button[type=submit]").await;
    browser.wait_text("p.error", "password").await;
    browser.goto(&format!("{base}/")).await;
    browser.wait_live().await;
    browser.type_into("input[name=username]", "root").await;
    browser.type_into("input[name=password]", PASSWORD).await;
    browser.click("button[type=submit]").await;
    browser.wait_text("h1", "Conversations").await;

    // Behind the scenes (through the API): a provider and server-everything.
    let mut api = server.tab();
    api.login("root", PASSWORD).await;
    let provider = api
        .post("/api/v1/admin/providers", json!({"name": "Fake", "baseUrl": model.base_url()}))
        .await;
    let provider_id = provider.json["id"].as_str().unwrap().to_owned();
    let added = api
        .post("/api/v1/mcp/servers", json!({"label": "everything", "address": peer.url()}))
        .await;
    assert_eq!(added.status, 201, "{added:?}");
    let echo = crate::conversations::model_name_in(&added.json, "echo");
    model.push(Reply::tool_call(&echo, json!({"message": "hello from the card"})));
    model.push(Reply::text("The server echoed it."));
    model.push(Reply::tool_call(&echo, json!({"message": "a second call"})));
    model.push(Reply::text("Understood, nothing was sent."));

    // A new conversation; the model and the MCP tools switch are chosen in the composer.
    browser.wait_live().await;
    browser.click("button.new").await;
    browser.find(".composer").await;
    browser.wait_live().await;
    let url = browser.url().await;
    let id = url.rsplit('/').next().unwrap().to_owned();
    browser.click(&format!("select[name=provider] option[value=\"{provider_id}\"]")).await;
    browser.type_into("input[name=model]", "fake-model\u{E004}").await;
    let path = format!("/api/v1/conversations/{id}");
    until_api(&mut api, &path, "the model", |c| c["conversation"]["model"] == "fake-model").await;
    browser.click(".lightning button").await;
    browser.click("input[name=mcp]").await;
    until_api(&mut api, &path, "the MCP switch", |c| c["conversation"]["mcpEnabled"] == true).await;
    browser.click(".lightning button").await;

    // The model calls a tool: the card shows server, tool, description and exact arguments.
    browser.type_into("textarea[name=message]", "please echo something").await;
    browser.click("button.send").await;
    browser.wait_text(".msg.user", "please echo something").await;
    let card = browser.wait_text(".card.approval", "echo").await;
    assert!(card.contains("everything"), "{card}");
    let arguments = browser.text(".card.approval pre.args").await;
    assert!(arguments.contains("\"message\": \"hello from the card\""), "{arguments}");
    browser.wait_text(".card.approval .countdown", "Answer within").await;
    browser.wait_text(".step.mcp.waiting", "waiting for your answer").await;
    browser.screenshot("approval-card").await;

    // The same card in a second tab; allowed there, it goes away in both, the reply arrives.
    let (first, second) = browser.new_tab().await;
    browser.goto(&url).await;
    browser.wait_live().await;
    browser.wait_text(".card.approval .tool", "echo").await;
    browser.click(".card.approval button.allow").await;
    browser.wait_gone(".card.approval").await;
    browser.switch_to(&first).await;
    browser.wait_gone(".card.approval").await;
    browser.wait_text(".timeline", "The server echoed it.").await;
    let step = browser.text(".step.mcp.allowed").await;
    assert!(step.contains("everything") && step.contains("echo"), "{step}");
    browser.screenshot("conversation").await;

    // A card pending across a reload is still there; refused, nothing is sent.
    browser.type_into("textarea[name=message]", "once more").await;
    browser.click("button.send").await;
    browser.wait_text(".card.approval pre.args", "a second call").await;
    browser.reload().await;
    browser.wait_live().await;
    browser.wait_text(".card.approval pre.args", "a second call").await;
    browser.click(".card.approval button.refuse").await;
    browser.wait_gone(".card.approval").await;
    browser.wait_text(".step.mcp.refused", "refused").await;
    browser.wait_text(".timeline", "Understood, nothing was sent.").await;
    // The other tab saw the answer too.
    browser.switch_to(&second).await;
    browser.wait_gone(".card.approval").await;
    let calls = api.get("/api/v1/approvals").await;
    assert_eq!(calls.json, json!([]), "nothing is left waiting");

    // With "ask, except what I always allow", a card offers to remember; Settings lists what was
    // remembered, and revoking it there brings the card back for the same call.
    let mode = api.send("PATCH", "/api/v1/consent", Some(json!({"mode": "rules"}))).await;
    assert_eq!(mode.status, 200, "{mode:?}");
    model.push(Reply::tool_call(&echo, json!({"message": "remember me"})));
    model.push(Reply::text("Remembered."));
    browser.switch_to(&first).await;
    browser.reload().await;
    browser.wait_live().await;
    browser.type_into("textarea[name=message]", "and remember").await;
    browser.click("button.send").await;
    browser.wait_text(".card.approval pre.args", "remember me").await;
    browser.click(".card.approval button.always").await;
    browser.wait_text(".timeline", "Remembered.").await;
    browser.goto(&format!("{base}/settings/tools")).await;
    browser.wait_live().await;
    let grant = browser.wait_text(".grants .grant", "echo").await;
    assert!(grant.contains("remember me"), "{grant}");
    browser.click(".grants button.revoke").await;
    until_api(&mut api, "/api/v1/consent", "the grant revoked", |c| c["grants"] == json!([])).await;
}

#[tokio::test]
async fn browser_pages_carry_a_strict_content_security_policy_and_fit_a_phone() {
    let db = TestDb::new();
    let server = Server::start(&db, &[]);
    let mut tab = server.tab();
    let page = tab.http.get(format!("{}/", server.base)).send().await.unwrap();
    let csp = page.headers()["content-security-policy"].to_str().unwrap().to_owned();
    assert!(csp.contains("default-src 'none'") && csp.contains("'wasm-unsafe-eval'"), "{csp}");
    assert!(!csp.contains("unsafe-inline"), "{csp}");
    let html = page.text().await.unwrap();
    let nonce = csp.split("'nonce-").nth(1).unwrap().split('\'').next().unwrap();
    assert!(html.contains(&format!("nonce=\"{nonce}\"")), "the loader carries the nonce");
    assert!(!html.contains("http://") && !html.contains("https://"), "nothing from elsewhere");
    let missing = tab.get("/c/00000000-0000-0000-0000-000000000000").await;
    assert!(
        missing.text.contains("<main class=\"narrow signin\">"),
        "signed out, a conversation page sends to sign-in"
    );

    let wasm = tab
        .http
        .get(format!("{}/pkg/llooma_web_bg.wasm", server.base))
        .header("accept-encoding", "gzip")
        .send()
        .await
        .unwrap();
    assert_eq!(wasm.headers()["content-type"], "application/wasm");
    assert_eq!(wasm.headers()["content-encoding"], "gzip", "the browser part is sent gzipped");

    // Without the browser part, pages still render and say what to build.
    let bare_db = TestDb::new();
    let bare = Server::start(&bare_db, &[("LLOOMA_WEB_DIR", "/nonexistent/web/pkg")]);
    let page = bare.tab().get("/").await;
    assert!(page.text.contains("Create the administrator account"), "{}", page.text);
    assert!(page.text.contains("class=\"banner\"") && page.text.contains("cargo xtask build-web"));
    assert!(bare.log_text().contains("cargo xtask build-web"), "the server log says it too");

    let Some(browser) = Browser::start(390, 844).await else { return };
    browser.goto(&format!("{}/", server.base)).await;
    browser.wait_live().await;
    let out = browser.sticking_out(390).await;
    assert!(out.is_empty(), "the sign-in page does not fit 390 pixels:\n{}", out.join("\n"));
    browser.screenshot("sign-in-phone").await;
}

/// Phones from 360 to 430 pixels wide, and a desktop: on every page of a signed-in
/// administrator nothing reaches past the screen's edges (long words wrap), Sign out is on the
/// screen, and a conversation, however long, opens on its latest message with the box to write
/// in and Send below it, without scrolling.
#[tokio::test]
async fn browser_every_signed_in_page_fits_a_phone() {
    let model = FakeModel::start([]).await.unwrap();
    let db = TestDb::new();
    let server = Server::start(&db, &[("PROVIDER_ALLOWED_ORIGINS", &model.origin())]);
    let base = server.base.clone();
    let mut api = server.tab();
    api.register("root", PASSWORD).await;
    let provider = api
        .post("/api/v1/admin/providers", json!({"name": "Fake", "baseUrl": model.base_url()}))
        .await;
    let provider_id = provider.json["id"].as_str().unwrap().to_owned();

    // Words no phone is wide enough for, wherever people can put them.
    let word = "Donaudampfschifffahrtsgesellschaftskapitänsmützenabzeichen";
    let link = format!("https://docs.example.org/a/very/long/path/{word}/{word}?q={word}");
    let empty = api.post("/api/v1/conversations", json!({"title": word})).await;
    let empty = empty.json["id"].as_str().unwrap().to_owned();
    let persona = json!({"name": word, "prompt": link, "memoryEnabled": true});
    assert_eq!(api.post("/api/v1/personas", persona).await.status, 201);
    let entry = json!({"label": word, "address": link, "description": link, "tags": [&word[..30]]});
    let added = api.post("/api/v1/admin/mcp/catalogue", entry).await;
    assert_eq!(added.status, 201, "{added:?}");

    // A conversation of 30 messages, some with a long link and a long line of code.
    let created = api
        .post(
            "/api/v1/conversations",
            json!({"title": "A long one", "providerId": provider_id, "model": "fake-model"}),
        )
        .await;
    let long = created.json["id"].as_str().unwrap().to_owned();
    let path = format!("/api/v1/conversations/{long}");
    for turn in 1..=15 {
        model.push(Reply::text(format!(
            "Answer {turn}: run this.\nlet {word} = compute_{word}(&[1, 2, 3, 4, 5, 6, 7, 8]);"
        )));
        let question = json!({"content": format!("Question {turn}: {link}")});
        let sent = api.post(&format!("{path}/messages"), question).await;
        assert_eq!(sent.status, 202, "{sent:?}");
        until_api(&mut api, &path, "the turn's end", |c| c["runningTurn"].is_null()).await;
    }
    let messages = api.get(&path).await.json["messages"].as_array().unwrap().len();
    assert_eq!(messages, 30);

    let pages = [
        "/".to_owned(),
        format!("/c/{long}"),
        format!("/c/{empty}"),
        "/settings/tools".to_owned(),
        "/settings/personas".to_owned(),
        "/settings/prompts".to_owned(),
        "/settings/bots".to_owned(),
        "/admin".to_owned(),
        "/admin/mcp".to_owned(),
        "/admin/instance".to_owned(),
        "/admin/catalogue".to_owned(),
        "/admin/usage".to_owned(),
        "/settings/usage".to_owned(),
        "/settings/account".to_owned(),
        "/settings/tools/discover".to_owned(),
        "/settings/tools/mcp/new?address=https%3A%2F%2Fmcp.example.org%2Fmcp".to_owned(),
    ];
    // Everything that does not fit, on every page at every size, so one failure tells it all.
    let mut problems = Vec::new();
    for (width, height) in [(360, 844), (390, 844), (430, 844), (1280, 900)] {
        let Some(browser) = Browser::start(width, height).await else { return };
        sign_in(&browser, &base, "root").await;
        // A phone's window is the size asked for; a desktop's loses some height to the browser.
        let screen = browser.window_size().await;
        if width < 600 {
            assert_eq!(screen, (f64::from(width), f64::from(height)), "the phone's window");
        }
        for page in &pages {
            browser.goto(&format!("{base}{page}")).await;
            browser.wait_live().await;
            let at = format!("{page} at {width}×{height}");
            for out in browser.sticking_out(width).await {
                problems.push(format!("{at}: {out}"));
            }
            let sign_out = browser.rect(".topbar button.signout").await;
            if !sign_out.inside(screen) {
                problems.push(format!("{at}: Sign out is off the screen, at {sign_out:?}"));
            }
        }

        // A conversation opens on its latest message, with the box and Send below it, on the
        // screen without scrolling; scrolled to the latest message, they are still there.
        for conversation in [&long, &empty] {
            browser.goto(&format!("{base}/c/{conversation}")).await;
            browser.wait_live().await;
            for scrolled in [false, true] {
                let at = format!(
                    "/c/{conversation} at {width}×{height}{}",
                    if scrolled { ", scrolled to its latest message" } else { "" }
                );
                if scrolled {
                    if conversation == &empty {
                        continue;
                    }
                    browser.scroll_to_end(".timeline > li:last-child").await;
                }
                let textarea = browser.rect("textarea[name=message]").await;
                let send = browser.rect("button.send").await;
                if !textarea.inside(screen) {
                    problems.push(format!("{at}: the message box is off the screen: {textarea:?}"));
                }
                if !send.inside(screen) {
                    problems.push(format!("{at}: Send is off the screen: {send:?}"));
                }
                if conversation == &long {
                    let last = browser.rect(".timeline > li:last-child").await;
                    if last.bottom <= 0.0 || last.bottom > textarea.top + 0.5 {
                        problems.push(format!(
                            "{at}: the end of the latest message ({last:?}) is not on the screen \
                             above the message box"
                        ));
                    }
                }
            }
        }
        if width == 390 {
            browser.goto(&format!("{base}/c/{long}")).await;
            browser.wait_live().await;
            browser.screenshot("conversation-phone").await;
        }
    }
    assert!(problems.is_empty(), "what does not fit:\n{}", problems.join("\n"));
}

/// Signs in through the form.
async fn sign_in(browser: &Browser, base: &str, username: &str) {
    browser.goto(&format!("{base}/")).await;
    browser.wait_live().await;
    browser.type_into("input[name=username]", username).await;
    browser.type_into("input[name=password]", PASSWORD).await;
    browser.click("button[type=submit]").await;
    browser.wait_text("h1", "Conversations").await;
}

#[tokio::test]
async fn browser_settings_add_a_server_after_its_test_and_admin_suspends_a_users_server() {
    let Some(peer) = crate::peers::everything() else { return };
    let Some(admin) = Browser::start(1280, 900).await else { return };
    let Some(user) = Browser::start(390, 844).await else { return };
    let db = TestDb::new();
    let server = Server::start(&db, &[("MCP_ALLOWED_ORIGINS", &peer.origin())]);
    let base = server.base.clone();
    let mut root = server.tab();
    root.register("root", PASSWORD).await;
    root.send("PATCH", "/api/v1/admin/settings", Some(json!({"registrationOpen": true}))).await;
    let mut alice = server.tab();
    alice.register("alice", PASSWORD).await;
    let token = "tok-never-shown-4f81c2";

    // The administrator tests a server: its tool names show before anything is stored.
    sign_in(&admin, &base, "root").await;
    admin.goto(&format!("{base}/settings/tools")).await;
    admin.wait_live().await;
    admin.type_into("input[name=label]", "everything").await;
    admin.type_into("input[name=address]", &peer.url()).await;
    admin.type_into("input[name=token]", token).await;
    admin.click("button.test").await;
    let found = admin.wait_text(".test-result .review", "echo").await;
    assert!(found.contains("get-sum"), "{found}");
    assert_eq!(root.get("/api/v1/mcp/servers").await.json, json!([]), "a test stores nothing");
    admin.screenshot("settings-tools-test").await;
    admin.click("button.consent").await;
    admin.wait_text(".card.server .label", "everything").await;
    admin.wait_live().await;
    admin.wait_text(".card.server .meta", "token set").await;
    // The token is in no page and no answer.
    assert!(!admin.source().await.contains(token), "the token is on the settings page");
    let listed = root.get("/api/v1/mcp/servers").await;
    assert!(!listed.text.contains(token), "{}", listed.text);
    let server_id = listed.json[0]["id"].as_str().unwrap().to_owned();

    // The full list is one click away; a group switched off in the advanced settings.
    admin.click(".card.server details.tool-list summary").await;
    let tools = admin.wait_text(".card.server details.tool-list ul", "echo").await;
    assert!(tools.contains("get-sum") || tools.contains("get_sum"), "{tools}");
    let detail = root.get(&format!("/api/v1/mcp/servers/{server_id}")).await.json;
    let group = detail["groups"][0]["key"].as_str().unwrap().to_owned();
    admin.click(".card.server details.advanced summary").await;
    admin.click(&format!(".card.server input[name=\"group-{group}\"]")).await;
    until_api(&mut root, &format!("/api/v1/mcp/servers/{server_id}"), "the group", |d| {
        d["groups"][0]["enabled"] == false
    })
    .await;

    // Announce mode with its measured cost, then an allow rule added and removed.
    admin.wait_live().await;
    admin.wait_text(".announce-cost", "Without announcing, every request carries").await;
    admin.click("input[name=announce]").await;
    until_api(&mut root, "/api/v1/mcp/settings", "announce mode", |s| s["announceMode"] == true)
        .await;
    admin.wait_live().await;
    admin.click("button.add-rule").await;
    let consent = until_api(&mut root, "/api/v1/consent", "the rule", |c| {
        c["rules"].as_array().is_some_and(|r| r.len() == 1)
    })
    .await;
    let ruled = consent["rules"][0]["toolName"].as_str().unwrap().to_owned();
    admin.wait_text(".rules .rule", &ruled).await;
    admin.wait_live().await;
    admin.click(".rules button.remove-rule").await;
    until_api(&mut root, "/api/v1/consent", "the rule removed", |c| c["rules"] == json!([])).await;

    // A user may not add one while the instance does not allow it: the page says why.
    sign_in(&user, &base, "alice").await;
    user.goto(&format!("{base}/settings/tools")).await;
    user.wait_live().await;
    user.wait_text(".add-server .refusal", "not allowed for your account").await;
    assert_eq!(alice.get("/api/v1/mcp/servers").await.json, json!([]));

    // The administrator allows it; the user adds one; the administrator suspends it with a
    // reason, which the user then reads on the card.
    admin.goto(&format!("{base}/admin/mcp")).await;
    admin.wait_live().await;
    admin.click("input[name=users-can-add]").await;
    until_api(&mut root, "/api/v1/admin/settings", "the instance setting", |s| {
        s["usersCanAddMcpServers"] == true
    })
    .await;
    user.reload().await;
    user.wait_live().await;
    user.type_into("input[name=label]", "mine").await;
    user.type_into("input[name=address]", &peer.url()).await;
    user.click("button.test").await;
    user.wait_text(".test-result .review", "echo").await;
    user.click("button.consent").await;
    user.wait_text(".card.server .label", "mine").await;
    admin.reload().await;
    admin.wait_live().await;
    admin
        .type_into("article[data-owner=alice] input[name=reason]", "Too many calls at night")
        .await;
    admin.click("article[data-owner=alice] button.suspend").await;
    admin.wait_text("article[data-owner=alice] .suspension", "Too many calls at night").await;
    assert!(!admin.source().await.contains(token), "the token is on the admin page");
    admin.screenshot("admin-mcp-servers").await;
    user.reload().await;
    user.wait_live().await;
    let card = user.wait_text(".card.server .suspension", "Too many calls at night").await;
    assert!(card.contains("Suspended by an administrator"), "{card}");
    user.screenshot("settings-tools-suspended-phone").await;
}

#[tokio::test]
async fn browser_a_bot_is_tested_added_given_a_model_and_answers_in_its_room() {
    use llooma_chatto_fake::{ALL_BOT_PERMISSIONS, BotStyle, FakeChatto, SignalKind};
    use llooma_fake_model::Fallback;

    let Some(browser) = Browser::start(1280, 900).await else { return };
    let model =
        FakeModel::builder().fallback(Fallback::Echo { chunk_delay_ms: 0 }).start().await.unwrap();
    let chat = FakeChatto::start().await.unwrap();
    let bot = chat.add_bot("helper", "Helper", BotStyle::IsBotFlag, &ALL_BOT_PERMISSIONS);
    let ann = chat.add_person("ann", "Ann Lee");
    let general = chat.add_channel("general", &[&bot.id, &ann]);
    let db = TestDb::new();
    let server = Server::start(
        &db,
        &[
            ("PROVIDER_ALLOWED_ORIGINS", &model.origin()),
            ("BOT_ALLOWED_ORIGINS", &chat.origin()),
            ("LLOOMA_BOT_POLL_SECS", "1"),
        ],
    );
    let base = server.base.clone();
    let mut api = server.tab();
    api.register("root", PASSWORD).await;
    let provider = api
        .post("/api/v1/admin/providers", json!({"name": "Fake", "baseUrl": model.base_url()}))
        .await;
    let provider_id = provider.json["id"].as_str().unwrap().to_owned();

    // The connection is tested first: who the bot is shows, nothing is stored.
    sign_in(&browser, &base, "root").await;
    browser.goto(&format!("{base}/settings/bots")).await;
    browser.wait_live().await;
    browser.type_into("input[name=label]", "Room helper").await;
    browser.type_into("input[name=address]", &chat.origin()).await;
    browser.type_into("input[name=key]", &bot.key).await;
    browser.click("button.test").await;
    browser.wait_text(".test-result", "Connected as Helper (@helper)").await;
    assert_eq!(api.get("/api/v1/bots").await.json, json!([]), "a test stores nothing");

    // Added, it waits for a model, and says so.
    browser.click("button.add").await;
    browser.wait_text(".card.bot .label", "Room helper").await;
    browser.wait_live().await;
    browser.wait_text(".card.bot .status-line", "Choose a model").await;

    // A model and the MCP box chosen in the card: the warning shows before saving.
    browser
        .click(&format!(".card.bot select[name=provider] option[value=\"{provider_id}\"]"))
        .await;
    browser.type_into(".card.bot input[name=model]", "fake-model\u{E004}").await;
    browser.click(".card.bot input[name=tool-current_date]").await;
    browser.click(".card.bot input[name=mcp]").await;
    browser.wait_text(".card.bot .mcp-warning", "run without asking you").await;

    tokio::time::sleep(std::time::Duration::from_secs(1)).await;
    browser.click(".card.bot button.save").await;
    let saved = until_api(&mut api, "/api/v1/bots", "the bot's model", |bots| {
        bots[0]["model"] == "fake-model" && bots[0]["mcp"] == true
    })
    .await;
    assert_eq!(saved[0]["tools"]["ticked"], json!(["current_date"]));

    // Mentioned in its room, it answers there; the card then says it is running.
    let now = chrono::Utc::now();
    let asked = chat.post(&general, &ann, "@helper are you there?", now);
    chat.notify(&bot.id, SignalKind::DirectMentionReceived, &general, &asked, now);
    for _ in 0..150 {
        if chat.create_message_calls().iter().any(|c| c.caller == bot.id) {
            break;
        }
        tokio::time::sleep(std::time::Duration::from_millis(200)).await;
    }
    let posted = chat.create_message_calls();
    assert!(
        posted.iter().any(|c| c.caller == bot.id && c.body.contains("are you there?")),
        "{posted:?}"
    );
    browser.reload().await;
    browser.wait_live().await;
    browser.wait_text(".card.bot .status-line", "Running").await;
    assert!(!browser.source().await.contains(&bot.key), "the bot's key is on the page");
    assert!(!api.get("/api/v1/bots").await.text.contains(&bot.key));
    browser.screenshot("settings-bots").await;

    // Switched off from its card.
    browser.click(".card.bot input[name=enabled]").await;
    until_api(&mut api, "/api/v1/bots", "the switch", |bots| bots[0]["enabled"] == false).await;
}

#[tokio::test]
async fn browser_personas_are_created_edited_and_made_to_forget_and_app_tools_reworded() {
    let Some(browser) = Browser::start(1280, 900).await else { return };
    let model = FakeModel::start([]).await.unwrap();
    let db = TestDb::new();
    let server = Server::start(&db, &[("PROVIDER_ALLOWED_ORIGINS", &model.origin())]);
    let base = server.base.clone();
    let mut api = server.tab();
    api.register("root", PASSWORD).await;
    let provider = api
        .post("/api/v1/admin/providers", json!({"name": "Fake", "baseUrl": model.base_url()}))
        .await;
    let provider_id = provider.json["id"].as_str().unwrap().to_owned();

    // Created on the page, with memory on.
    sign_in(&browser, &base, "root").await;
    browser.goto(&format!("{base}/settings/personas")).await;
    browser.wait_live().await;
    browser.type_into(".add-persona input[name=name]", "Tutor").await;
    browser.type_into(".add-persona textarea[name=prompt]", "You teach patiently.").await;
    browser.click(".add-persona input[name=memory]").await;
    browser.click("button.create").await;
    browser.wait_text(".card.persona .hint", "Nothing yet").await;
    let personas = api.get("/api/v1/personas").await.json;
    assert_eq!(personas[0]["name"], "Tutor");
    assert_eq!(personas[0]["prompt"], "You teach patiently.");
    assert_eq!(personas[0]["memoryEnabled"], true);
    let persona_id = personas[0]["id"].as_str().unwrap().to_owned();

    // A conversation with it: the model keeps a note, which the page then shows.
    let created = api
        .post(
            "/api/v1/conversations",
            json!({"providerId": provider_id, "model": "fake-model", "personaId": persona_id}),
        )
        .await;
    let conversation = created.json["id"].as_str().unwrap().to_owned();
    model.push(Reply::tool_call("memory_write", json!({"content": "prefers tea to coffee"})));
    model.push(Reply::text("Noted."));
    let sent = api
        .post(
            &format!("/api/v1/conversations/{conversation}/messages"),
            json!({"content": "remember that I prefer tea"}),
        )
        .await;
    assert_eq!(sent.status, 202, "{sent:?}");
    let memory = format!("/api/v1/personas/{persona_id}/memory");
    until_api(&mut api, &memory, "the persona's memory", |notes| notes[0].is_object()).await;
    browser.reload().await;
    browser.wait_live().await;
    browser.wait_text(".card.persona .note .content", "prefers tea to coffee").await;
    browser.screenshot("settings-personas").await;

    // Forget from the page; then the prompt is changed and saved.
    browser.click(".card.persona .note button.forget").await;
    browser.wait_text(".card.persona .hint", "Nothing yet").await;
    assert_eq!(api.get(&memory).await.json, json!([]));
    browser.wait_live().await;
    browser.type_into(".card.persona textarea[name=prompt]", " Use short sentences.").await;
    browser.mark_page().await;
    browser.click(".card.persona button.save").await;
    until_api(&mut api, &format!("/api/v1/personas/{persona_id}"), "the prompt", |p| {
        p["prompt"] == "You teach patiently. Use short sentences."
    })
    .await;
    // A saved change reloads the page; leaving before that reload would be undone by it.
    browser.wait_new_page().await;

    // An app tool reworded on Settings → Prompts, its own page; the next request to the model
    // carries the new words.
    assert!(!browser.source().await.contains("card wording"), "wordings on the personas page");
    browser.goto(&format!("{base}/settings/prompts")).await;
    browser.wait_live().await;
    browser
        .type_into(".card.wording[data-tool=current_date] textarea", "Tells the date in Bern.")
        .await;
    browser.click(".card.wording[data-tool=current_date] button.save").await;
    let wordings = until_api(&mut api, "/api/v1/prompts/tools", "the wording", |w| {
        w.as_array().unwrap().iter().any(|t| t["description"] == "Tells the date in Bern.")
    })
    .await;
    assert!(
        wordings
            .as_array()
            .unwrap()
            .iter()
            .any(|t| t["tool"] == "current_date" && t["description"] == "Tells the date in Bern.")
    );
    browser.wait_text(".card.wording[data-tool=current_date] .status", "yours").await;
    model.push(Reply::text("Fine."));
    api.post(
        &format!("/api/v1/conversations/{conversation}/messages"),
        json!({"content": "what day is it?"}),
    )
    .await;
    for _ in 0..100 {
        if model.chat_bodies().len() >= 3 {
            break;
        }
        tokio::time::sleep(std::time::Duration::from_millis(100)).await;
    }
    let tools = model.chat_bodies()[2]["tools"].clone();
    let date = tools
        .as_array()
        .unwrap()
        .iter()
        .find(|t| t["function"]["name"] == "current_date")
        .unwrap_or_else(|| panic!("no current_date offered: {tools}"));
    assert_eq!(date["function"]["description"], "Tells the date in Bern.");
}

#[tokio::test]
async fn browser_admin_adds_a_provider_and_sets_the_instance_and_a_user_cannot() {
    let Some(browser) = Browser::start(1280, 900).await else { return };
    let model = FakeModel::start([]).await.unwrap();
    let db = TestDb::new();
    let server = Server::start(&db, &[("PROVIDER_ALLOWED_ORIGINS", &model.origin())]);
    let base = server.base.clone();
    let mut root = server.tab();
    root.register("root", PASSWORD).await;
    let key = "sk-provider-never-shown-77aa";

    // A provider with a key and a declared model: the key is in no page and no answer.
    sign_in(&browser, &base, "root").await;
    browser.goto(&format!("{base}/admin/instance")).await;
    browser.wait_live().await;
    browser.wait_text(".no-providers", "nobody can chat until you add one").await;
    browser.type_into(".add-provider input[name=name]", "Local").await;
    browser.type_into(".add-provider input[name=base-url]", &model.base_url()).await;
    browser.type_into(".add-provider input[name=key]", key).await;
    browser.type_into(".add-provider input[name=models]", "small-model, big-model").await;
    browser.click(".add-provider button.add").await;
    browser.wait_text(".card.provider .meta", "key set").await;
    let providers = root.get("/api/v1/admin/providers").await;
    assert_eq!(providers.json[0]["declaredModels"], json!(["small-model", "big-model"]));
    assert!(!providers.text.contains(key));
    assert!(!browser.source().await.contains(key), "the provider key is on the page");

    // The instance: registration, web search and the default prompt.
    browser.wait_live().await;
    browser.click("input[name=registration]").await;
    until_api(&mut root, "/api/v1/admin/settings", "registration", |s| {
        s["registrationOpen"] == true
    })
    .await;
    browser.wait_live().await;
    browser.type_into("input[name=web-search]", "http://127.0.0.1:8888").await;
    browser.click("button.save-search").await;
    until_api(&mut root, "/api/v1/admin/settings", "the search service", |s| {
        s["webSearchUrl"] == "http://127.0.0.1:8888/search"
    })
    .await;
    browser.wait_live().await;
    browser.type_into("textarea[name=system-prompt]", "Answer in French.").await;
    browser.click("button.save-prompt").await;
    until_api(&mut root, "/api/v1/admin/settings", "the prompt", |s| {
        s["systemPrompt"] == "Answer in French."
    })
    .await;
    browser.wait_live().await;
    browser.screenshot("admin-instance").await;

    // A person who is not an administrator finds nothing there.
    let mut bob = server.tab();
    bob.register("bob", PASSWORD).await;
    browser.click("button.signout").await;
    browser.wait_text("h2", "Sign in").await;
    sign_in(&browser, &base, "bob").await;
    browser.goto(&format!("{base}/admin/instance")).await;
    browser.wait_text("h1", "Not found").await;
    assert!(!browser.source().await.contains("Answer in French."));

    // Removed by the administrator.
    browser.wait_live().await;
    browser.click("button.signout").await;
    browser.wait_text("h2", "Sign in").await;
    sign_in(&browser, &base, "root").await;
    browser.goto(&format!("{base}/admin/instance")).await;
    browser.wait_live().await;
    // Removing asks first: Keep leaves it, Remove removes it.
    browser.click(".card.provider button.remove").await;
    browser.wait_text(".card.provider .confirm .question", "Remove this provider?").await;
    browser.click(".card.provider .confirm button.no").await;
    browser.wait_text(".card.provider button.remove", "Remove").await;
    assert_eq!(root.get("/api/v1/admin/providers").await.json.as_array().unwrap().len(), 1);
    browser.click(".card.provider button.remove").await;
    browser.click(".card.provider .confirm button.yes").await;
    browser.wait_text(".no-providers", "nobody can chat until you add one").await;
    assert_eq!(root.get("/api/v1/admin/providers").await.json, json!([]));
}

#[tokio::test]
async fn browser_the_composer_attaches_a_resource_a_filled_template_and_a_prompt_and_picks_a_persona()
 {
    let Some(peer) = crate::peers::everything() else { return };
    let Some(browser) = Browser::start(1280, 900).await else { return };
    let model = FakeModel::start([]).await.unwrap();
    let db = TestDb::new();
    let server = Server::start(
        &db,
        &[("PROVIDER_ALLOWED_ORIGINS", &model.origin()), ("MCP_ALLOWED_ORIGINS", &peer.origin())],
    );
    let base = server.base.clone();
    let mut api = server.tab();
    api.register("root", PASSWORD).await;
    let provider = api
        .post("/api/v1/admin/providers", json!({"name": "Fake", "baseUrl": model.base_url()}))
        .await;
    let provider_id = provider.json["id"].as_str().unwrap().to_owned();
    let persona = api
        .post(
            "/api/v1/personas",
            json!({"name": "Guide", "prompt": "Be brief.", "memoryEnabled": true}),
        )
        .await;
    let persona_id = persona.json["id"].as_str().unwrap().to_owned();
    let added = api
        .post("/api/v1/mcp/servers", json!({"label": "Everything", "address": peer.url()}))
        .await;
    let server_id = added.json["server"]["id"].as_str().unwrap().to_owned();
    let detail = api.get(&format!("/api/v1/mcp/servers/{server_id}")).await.json;
    let title = |v: &Value| v["title"].as_str().or(v["name"].as_str()).unwrap().to_owned();
    let features = detail["resources"]
        .as_array()
        .unwrap()
        .iter()
        .find(|r| r["uri"].as_str().unwrap().ends_with("features.md"))
        .map(title)
        .unwrap();
    let template = detail["resourceTemplates"]
        .as_array()
        .unwrap()
        .iter()
        .find(|t| t["uriTemplate"].as_str().unwrap().contains("/text/"))
        .map(title)
        .unwrap();
    let prompt = detail["prompts"]
        .as_array()
        .unwrap()
        .iter()
        .find(|p| p["name"] == "args-prompt")
        .map(|p| p["title"].as_str().unwrap_or("args-prompt").to_owned())
        .unwrap();
    let created = api
        .post("/api/v1/conversations", json!({"providerId": provider_id, "model": "fake-model"}))
        .await;
    let id = created.json["id"].as_str().unwrap().to_owned();

    sign_in(&browser, &base, "root").await;
    browser.goto(&format!("{base}/c/{id}")).await;
    browser.wait_live().await;

    // The persona, chosen in the composer.
    browser.click(&format!("select[name=persona] option[value=\"{persona_id}\"]")).await;
    let path = format!("/api/v1/conversations/{id}");
    until_api(&mut api, &path, "the persona", |c| c["conversation"]["personaId"] == persona_id)
        .await;

    // `@` typed in the message opens the resources; a resource, then a template with its blank.
    browser.type_into("textarea[name=message]", "@").await;
    browser.click_text(".attach-menu.resources .attach-item", &features).await;
    browser.wait_text(".chips .chip", &features).await;
    browser.click("button.attach-resource").await;
    browser.click_text(".attach-menu.resources .attach-item", &template).await;
    browser.type_into(".attach-form input[name=blank-resourceId]", "7").await;
    browser.click("button.attach-add").await;
    browser.wait_text(".chips", "resourceId=7").await;
    // `/` first in an empty message opens the prompts; this one asks for a city.
    browser.type_into("textarea[name=message]", "/").await;
    browser.click_text(".attach-menu.prompts .attach-item", &prompt).await;
    browser.type_into(".attach-form input[name=blank-city]", "Bern").await;
    browser.click("button.attach-add").await;
    browser.wait_text(".chips", "city=Bern").await;
    browser.screenshot("composer-attachments").await;

    // What the servers wrote closes the persona's memory for the turn: the timeline says so.
    model.push(Reply::tool_call("memory_write", json!({"content": "from the resources"})));
    model.push(Reply::text("Read all three."));
    browser.type_into("textarea[name=message]", "use these").await;
    browser.click("button.send").await;
    browser.wait_text(".msg.reply", "Read all three.").await;
    browser.wait_text(".step.builtin.refused", "refused: ").await;
    let body = &model.chat_bodies()[0];
    let user = crate::conversations::last_user_message(body);
    assert!(user.starts_with("use these"), "{user}");
    assert!(user.contains("Everything Server - Features"), "the resource: {user}");
    assert!(user.contains("Resource 7"), "the filled template: {user}");
    assert!(user.contains("Bern"), "the prompt with its argument: {user}");
    assert_eq!(
        body["messages"][0]["content"].as_str().map(|s| s.contains("Be brief.")),
        Some(true)
    );
    // Sent, the chips are gone.
    browser.wait_gone(".chips .chip").await;
}

#[tokio::test]
async fn browser_discover_register_review_consent_and_rate_a_catalogue_entry() {
    let Some(peer) = crate::peers::everything() else { return };
    let Some(browser) = Browser::start(1280, 900).await else { return };
    let model = FakeModel::start([]).await.unwrap();
    let db = TestDb::new();
    let server = Server::start(
        &db,
        &[("MCP_ALLOWED_ORIGINS", &peer.origin()), ("PROVIDER_ALLOWED_ORIGINS", &model.origin())],
    );
    let base = server.base.clone();
    let mut root = server.tab();
    root.register("root", PASSWORD).await;
    let open = json!({"registrationOpen": true, "usersCanAddMcpServers": true});
    root.send("PATCH", "/api/v1/admin/settings", Some(open)).await;
    let provider = root
        .post("/api/v1/admin/providers", json!({"name": "Fake", "baseUrl": model.base_url()}))
        .await;
    let provider_id = provider.json["id"].as_str().unwrap().to_owned();
    let mut alice = server.tab();
    alice.register("alice", PASSWORD).await;

    // The administrator adds server-everything to the catalogue.
    sign_in(&browser, &base, "root").await;
    browser.goto(&format!("{base}/admin/catalogue")).await;
    browser.wait_live().await;
    browser.type_into(".add-entry input[name=label]", "Everything").await;
    browser.type_into(".add-entry input[name=address]", &peer.url()).await;
    browser.type_into(".add-entry input[name=description]", "Every kind of tool.").await;
    browser.type_into(".add-entry input[name=tags]", "demo, testing").await;
    browser.click(".add-entry button.save-entry").await;
    browser.wait_text(".admin-entry .label", "Everything").await;
    browser.wait_live().await;
    browser.click(".admin-entry details.edit summary").await;
    browser.type_into(".admin-entry input[name=description]", " Try it.").await;
    browser.click(".admin-entry button.save-entry").await;
    browser.wait_text(".admin-entry .description", "Every kind of tool. Try it.").await;
    browser.screenshot("admin-catalogue").await;
    browser.wait_live().await;
    browser.click("button.signout").await;
    browser.wait_text("h2", "Sign in").await;

    // Alice discovers it, unused so far, and filters by tag.
    sign_in(&browser, &base, "alice").await;
    browser.goto(&format!("{base}/settings/tools/discover?tag=demo")).await;
    browser.wait_text(".catalogue-entry .usage", "In use: 0").await;
    browser.goto(&format!("{base}/settings/tools/discover?q=nothing-like-it")).await;
    browser.wait_text("main", "Nothing in the catalogue matches.").await;
    browser.goto(&format!("{base}/settings/tools/discover")).await;
    browser.wait_live().await;

    // Register opens the add form pre-filled; the review shows the tools and the server's own
    // claims before anything is stored.
    browser.click(".catalogue-entry a.register").await;
    browser.wait_text(".from-catalogue", "From the catalogue: Everything").await;
    browser.wait_live().await;
    assert_eq!(browser.value("input[name=address]").await, peer.url());
    assert_eq!(browser.value("input[name=label]").await, "Everything");
    browser.click("button.test").await;
    let review = browser.wait_text(".test-result .review", "echo").await;
    assert!(review.contains("The server says:"), "{review}");
    assert!(review.contains("read-only:") && review.contains("open world:"), "{review}");
    let echo = browser.text(".review-tool[data-tool=echo]").await;
    assert!(echo.contains("message") && echo.contains("required"), "its argument: {echo}");
    browser.scroll_to(".test-result").await;
    browser.screenshot("review-before-consent").await;
    assert_eq!(alice.get("/api/v1/mcp/servers").await.json, json!([]), "nothing before consent");
    browser.click("button.consent").await;
    browser.wait_text(".card.server .label", "Everything").await;

    // In use: 1, and it shows as added; a call counts once it went out.
    browser.goto(&format!("{base}/settings/tools/discover")).await;
    browser.wait_text(".catalogue-entry .usage", "In use: 1").await;
    browser.wait_text(".catalogue-entry .added", "Added").await;
    let servers = alice.get("/api/v1/mcp/servers").await.json;
    let path = format!("/api/v1/mcp/servers/{}", servers[0]["id"].as_str().unwrap());
    let detail = alice.get(&path).await.json;
    let echo = crate::conversations::model_name_in(&detail, "echo");
    crate::catalogue::one_allowed_call(&mut alice, &model, &provider_id, &echo).await;
    browser.reload().await;
    browser.wait_text(".catalogue-entry .usage", "1 call in the last 30 days").await;

    // Ratings: Alice gives four stars, the administrator two; the average follows.
    browser.wait_live().await;
    browser.click(".catalogue-entry button.star[data-stars=\"4\"]").await;
    browser.wait_text(".catalogue-entry .average", "★ 4.0 (1 rating)").await;
    let entry_id =
        root.get("/api/v1/mcp/catalogue").await.json[0]["id"].as_str().unwrap().to_owned();
    let rating = format!("/api/v1/mcp/catalogue/{entry_id}/rating");
    root.send("PUT", &rating, Some(json!({"stars": 2}))).await;
    browser.reload().await;
    browser.wait_text(".catalogue-entry .average", "★ 3.0 (2 ratings)").await;
    browser.screenshot("discover").await;

    // A deeplink to a private address meets the policy when tested; a token in it is dropped.
    // A token in the link, or a key inside its address, is dropped and named.
    let link = "/settings/tools/mcp/new?address=http%3A%2F%2F10.20.30.40%2Fmcp%3Fapi_key%3Dsk-in-address\
                &label=Internal&Token=sk-linked-token";
    browser.goto(&format!("{base}{link}")).await;
    let warning = browser.wait_text(".token-dropped", "it was ignored").await;
    assert!(warning.contains("Token") && warning.contains("api_key"), "{warning}");
    browser.wait_live().await;
    assert_eq!(browser.value("input[name=token]").await, "");
    assert_eq!(browser.value("input[name=address]").await, "http://10.20.30.40/mcp");
    let source = browser.source().await;
    assert!(!source.contains("sk-linked-token") && !source.contains("sk-in-address"), "{source}");
    browser.click("button.test").await;
    browser.wait_text(".add-server p.error", "MCP_ALLOWED_ORIGINS").await;
    assert_eq!(alice.get("/api/v1/mcp/servers").await.json.as_array().unwrap().len(), 1);

    // Without permission to add servers, Discover and the same link explain why.
    root.send("PATCH", "/api/v1/admin/settings", Some(json!({"usersCanAddMcpServers": false})))
        .await;
    browser.goto(&format!("{base}/settings/tools/discover")).await;
    browser.wait_text(".cannot-add", "not allowed for your account").await;
    browser
        .goto(&format!("{base}/settings/tools/mcp/new?address=https%3A%2F%2Fmcp.example.org%2Fmcp"))
        .await;
    browser.wait_text(".add-server .refusal", "not allowed for your account").await;
}

#[tokio::test]
async fn browser_update_tools_shows_new_tools_for_review_and_they_join_only_when_accepted() {
    let Some(peer) = crate::peers::gateway(None) else { return };
    let Some(browser) = Browser::start(1280, 900).await else { return };
    let db = TestDb::new();
    let server = Server::start(&db, &[("MCP_ALLOWED_ORIGINS", &peer.origin())]);
    let base = server.base.clone();
    let mut root = server.tab();
    root.register("root", PASSWORD).await;
    let added = root.post("/api/v1/mcp/servers", json!({"label": "hub", "address": peer.url()}));
    let id = added.await.json["server"]["id"].as_str().unwrap().to_owned();
    let before = root.get(&format!("/api/v1/mcp/servers/{id}")).await.json["tools"]
        .as_array()
        .unwrap()
        .len();

    // The gateway gains a tool behind Llooma's back.
    let other = crate::peers::client_for(&peer);
    other
        .call_tool(&peer.url(), None, "gateway-add_tool", json!({"name": "Chatto-delete_room"}))
        .await
        .unwrap();

    // Update tools shows it for review; "Not now" keeps the list consented to.
    sign_in(&browser, &base, "root").await;
    browser.goto(&format!("{base}/settings/tools")).await;
    browser.wait_live().await;
    browser.click(".card.server button.refresh").await;
    let review = browser.wait_text(".tools-review", "Chatto-delete_room").await;
    assert!(review.contains("Added: Chatto-delete_room"), "{review}");
    browser.wait_text(".review-tool[data-tool=\"Chatto-delete_room\"] .badge", "new").await;
    let path = format!("/api/v1/mcp/servers/{id}");
    assert_eq!(root.get(&path).await.json["tools"].as_array().unwrap().len(), before);
    browser.click(".tools-review button.cancel").await;
    browser.wait_gone(".tools-review").await;
    assert_eq!(root.get(&path).await.json["tools"].as_array().unwrap().len(), before);

    // Accepted, it joins.
    browser.click(".card.server button.refresh").await;
    browser.wait_text(".tools-review", "Chatto-delete_room").await;
    browser.click(".tools-review button.accept-tools").await;
    until_api(&mut root, &path, "the accepted tool", |d| {
        d["tools"].as_array().is_some_and(|t| t.iter().any(|t| t["name"] == "Chatto-delete_room"))
    })
    .await;
    browser.wait_live().await;
    browser.wait_text(".card.server .meta", &format!("{} tools", before + 1)).await;
}

#[tokio::test]
async fn browser_a_second_page_load_reuses_the_browser_part_and_the_stylesheet() {
    let db = TestDb::new();
    let server = Server::start(&db, &[]);
    let mut tab = server.tab();
    let page = tab.get("/").await.text;
    // Pages name the files by their content's hash; those names may be kept for good.
    let wasm = page.split("module_or_path: '/pkg/").nth(1).unwrap().split('\'').next().unwrap();
    let css = page.split("href=\"/assets/").nth(1).unwrap().split('"').next().unwrap();
    assert!(wasm.starts_with("llooma_web_bg.") && wasm.len() > "llooma_web_bg.wasm".len());
    assert!(css.starts_with("style.") && css.len() > "style.css".len(), "{css}");
    for path in [format!("/pkg/{wasm}"), format!("/assets/{css}")] {
        let reply = tab.http.get(format!("{}{path}", server.base)).send().await.unwrap();
        assert_eq!(reply.status(), 200, "{path}");
        let cache = reply.headers()["cache-control"].to_str().unwrap().to_owned();
        assert_eq!(cache, "public, max-age=31536000, immutable", "{path}");
    }
    let stale = tab.http.get(format!("{}/pkg/llooma_web_bg.0000000000000000.wasm", server.base));
    assert_eq!(stale.send().await.unwrap().status(), 404, "a name of another build is not served");

    let Some(browser) = Browser::start(1280, 900).await else { return };
    tab.register("root", PASSWORD).await;
    sign_in(&browser, &server.base, "root").await;
    browser.goto(&format!("{}/", server.base)).await;
    browser.wait_live().await;
    // Everything this second load fetched over the network (cached files count as 0).
    let transferred = browser
        .script(
            "const nav = performance.getEntriesByType('navigation')[0].transferSize; \
             const files = performance.getEntriesByType('resource') \
               .reduce((sum, r) => sum + r.transferSize, 0); \
             return nav + files;",
        )
        .await
        .as_f64()
        .unwrap();
    eprintln!("a second page load transferred {transferred} bytes");
    assert!(transferred < 20.0 * 1024.0, "a second page load transferred {transferred} bytes");
}

/// What the last reply shows, read from its elements (not its text).
async fn reply_markdown(browser: &Browser) -> Value {
    browser
        .script(
            r#"
            const replies = document.querySelectorAll('.msg.reply');
            const reply = replies[replies.length - 1];
            const all = (css) => [...reply.querySelectorAll(css)];
            const link = reply.querySelector('a');
            return {
                heading: all('h2').map(e => e.textContent),
                strong: all('strong').map(e => e.textContent),
                items: all('li').map(e => e.textContent),
                cells: all('th, td').map(e => e.textContent),
                href: link && link.getAttribute('href'),
                rel: link && link.getAttribute('rel'),
                target: link && link.getAttribute('target'),
                links: all('a').length,
                injected: all('script, img, [onerror]').length + document.querySelectorAll('body img').length,
                text: reply.textContent,
                language: all('pre code.language-rust').length,
                keywords: all('pre code .tok-kw').map(e => e.textContent),
                strings: all('pre code .tok-str').map(e => e.textContent),
                comments: all('pre code .tok-com').map(e => e.textContent),
                copy: all('.code button.copy').map(e => e.textContent),
                alerted: window.alerted === true,
            };
            "#,
        )
        .await
}

#[tokio::test]
async fn browser_a_reply_in_markdown_is_rendered_live_and_after_a_reload_with_its_html_escaped() {
    let Some(browser) = Browser::start(1280, 900).await else { return };
    let model = FakeModel::start([]).await.unwrap();
    let db = TestDb::new();
    let server = Server::start(&db, &[("PROVIDER_ALLOWED_ORIGINS", &model.origin())]);
    let base = server.base.clone();
    let mut api = server.tab();
    api.register("root", PASSWORD).await;
    let provider = api
        .post("/api/v1/admin/providers", json!({"name": "Fake", "baseUrl": model.base_url()}))
        .await;
    let provider_id = provider.json["id"].as_str().unwrap().to_owned();
    let created = api
        .post("/api/v1/conversations", json!({"providerId": provider_id, "model": "fake-model"}))
        .await;
    let id = created.json["id"].as_str().unwrap().to_owned();
    let reply = "## Results\n\nSome **bold** words and [the docs](https://example.com/docs) \
        but not [this](javascript:window.alerted=true).\n\n- first item\n- second item\n\n\
        | Name | Value |\n|------|------:|\n| alpha | 1 |\n\n\
        <script>window.alerted = true</script>\n\n\
        Inline <img src=x onerror=\"window.alerted=true\"> too.\n\n\
        ```rust\nfn main() {\n    let greeting = \"hi\"; // say it\n}\n```\n";
    // Streamed in small pieces: the page renders what it has each time a piece arrives.
    model.push(Reply::text(reply).chunks(20).chunk_delay_ms(40));

    sign_in(&browser, &base, "root").await;
    browser.goto(&format!("{base}/c/{id}")).await;
    browser.wait_live().await;
    browser.type_into("textarea[name=message]", "show me markdown").await;
    browser.click("button.send").await;
    browser.find(".msg.reply h2").await;
    browser.wait_text(".msg.reply .code", "say it").await;
    browser.find(".msg.reply .code button.copy").await;
    browser.screenshot("markdown-reply").await;

    for moment in ["live", "after a reload"] {
        let seen = reply_markdown(&browser).await;
        assert_eq!(seen["heading"], json!(["Results"]), "{moment}: {seen}");
        assert_eq!(seen["strong"], json!(["bold"]), "{moment}: {seen}");
        assert_eq!(seen["items"], json!(["first item", "second item"]), "{moment}: {seen}");
        assert_eq!(seen["cells"], json!(["Name", "Value", "alpha", "1"]), "{moment}: {seen}");
        assert_eq!(seen["href"], "https://example.com/docs", "{moment}: {seen}");
        assert_eq!(seen["rel"], "noopener noreferrer nofollow", "{moment}: {seen}");
        assert_eq!(seen["target"], "_blank", "{moment}: {seen}");
        // The javascript: link is its text only; the HTML is shown, never made into elements.
        assert_eq!(seen["links"], 1, "{moment}: {seen}");
        assert_eq!(seen["injected"], 0, "{moment}: {seen}");
        let text = seen["text"].as_str().unwrap();
        assert!(text.contains("<script>window.alerted = true</script>"), "{moment}: {text}");
        assert!(text.contains("<img src=x onerror="), "{moment}: {text}");
        assert!(!text.contains("**") && !text.contains("## "), "{moment}: {text}");
        assert_eq!(seen["alerted"], false, "{moment}: {seen}");
        assert_eq!(seen["language"], 1, "{moment}: {seen}");
        assert_eq!(seen["keywords"], json!(["fn", "let"]), "{moment}: {seen}");
        assert_eq!(seen["strings"], json!(["\"hi\""]), "{moment}: {seen}");
        assert_eq!(seen["comments"], json!(["// say it"]), "{moment}: {seen}");
        assert_eq!(seen["copy"], json!(["Copy"]), "{moment}: {seen}");
        if moment == "live" {
            browser.reload().await;
            browser.wait_live().await;
            browser.find(".msg.reply .code button.copy").await;
        }
    }
    let console = browser.console().await;
    assert!(!console.to_lowercase().contains("hydrat"), "{console}");
}

/// The timeline of every reply as the page shows it: per reply, its parts in order (text,
/// reasoning, steps with their state), "Stopped." and the failure.
async fn timeline(browser: &Browser) -> Value {
    browser
        .script(
            r#"
            return [...document.querySelectorAll('.timeline .msg.reply')].map(reply => ({
                parts: [...reply.children].map(part => {
                    if (part.matches('.step')) {
                        const summary = part.querySelector('summary');
                        return (part.matches('.mcp') ? 'mcp ' : 'app ') + part.dataset.state + ': ' +
                            (summary || part).textContent.trim();
                    }
                    return part.className + ': ' + part.textContent.trim();
                }),
            }));
            "#,
        )
        .await
}

#[tokio::test]
async fn browser_a_reload_shows_every_reply_s_timeline_as_it_was_shown_live() {
    let Some(peer) = crate::peers::everything() else { return };
    let Some(browser) = Browser::start(1280, 900).await else { return };
    let model = FakeModel::start([]).await.unwrap();
    let db = TestDb::new();
    let server = Server::start(
        &db,
        &[("PROVIDER_ALLOWED_ORIGINS", &model.origin()), ("MCP_ALLOWED_ORIGINS", &peer.origin())],
    );
    let base = server.base.clone();
    let mut api = server.tab();
    api.register("root", PASSWORD).await;
    let provider = api
        .post("/api/v1/admin/providers", json!({"name": "Fake", "baseUrl": model.base_url()}))
        .await;
    let provider_id = provider.json["id"].as_str().unwrap().to_owned();
    let added = api
        .post("/api/v1/mcp/servers", json!({"label": "everything", "address": peer.url()}))
        .await;
    let echo = crate::conversations::model_name_in(&added.json, "echo");
    let created = api
        .post(
            "/api/v1/conversations",
            json!({"title": "Timeline", "providerId": provider_id, "model": "fake-model"}),
        )
        .await;
    let id = created.json["id"].as_str().unwrap().to_owned();
    let on = api
        .send("PATCH", &format!("/api/v1/conversations/{id}"), Some(json!({"mcpEnabled": true})))
        .await;
    assert_eq!(on.status, 200, "{on:?}");

    // Four replies: the date, an allowed call and its answer; a refused call; a reply stopped
    // half-way; a reply the provider fails.
    model.push(
        Reply::reasoning("The date first.", "Let me look.")
            .with_tool_call(llooma_fake_model::FakeToolCall::new("current_date", json!({}))),
    );
    model.push(Reply::tool_call(&echo, json!({"message": "sent to the server"})));
    model.push(Reply::text("The server said it back."));
    model.push(Reply::tool_call(&echo, json!({"message": "not this one"})));
    model.push(Reply::text("Nothing was sent."));
    model.push(
        Reply::text("A long answer that will be stopped. ".repeat(20))
            .chunks(40)
            .chunk_delay_ms(100),
    );
    model.push(Reply::http_error(500, "the model broke"));

    sign_in(&browser, &base, "root").await;
    let url = format!("{base}/c/{id}");
    browser.goto(&url).await;
    browser.wait_live().await;
    let send = |text: &'static str| {
        let browser = &browser;
        async move {
            browser.type_into("textarea[name=message]", text).await;
            browser.click("button.send").await;
        }
    };
    send("what day is it, then echo").await;
    browser.wait_text(".card.approval pre.args", "sent to the server").await;
    browser.click(".card.approval button.allow").await;
    browser.wait_text(".timeline", "The server said it back.").await;
    send("echo again").await;
    browser.wait_text(".card.approval pre.args", "not this one").await;
    browser.click(".card.approval button.refuse").await;
    browser.wait_text(".timeline", "Nothing was sent.").await;
    send("tell me a long story").await;
    browser.wait_text(".timeline", "A long answer").await;
    browser.click("button.stop").await;
    browser.wait_text(".timeline .note", "Stopped.").await;
    send("and now fail").await;
    browser.wait_text(".timeline .turn-error", "").await;
    let live = timeline(&browser).await;

    let replies = live.as_array().unwrap();
    assert_eq!(replies.len(), 4, "{live:#}");
    let first = replies[0]["parts"].to_string();
    assert!(first.contains("reasoning: Reasoning"), "{first}");
    assert!(first.contains("app done: Used current_date"), "{first}");
    assert!(first.contains("mcp allowed:") && first.contains("echo"), "{first}");
    assert!(replies[1]["parts"].to_string().contains("mcp refused:"), "{live:#}");
    assert!(replies[2]["parts"].to_string().contains("note: Stopped."), "{live:#}");
    assert!(replies[3]["parts"].to_string().contains("error turn-error:"), "{live:#}");

    // After a reload the same timeline is drawn from the stored log, not just the texts.
    browser.reload().await;
    browser.wait_live().await;
    browser.find(".timeline .step.mcp.refused").await;
    assert_eq!(timeline(&browser).await, live, "the stored timeline differs from the live one");
    // And a call opens to show what the server returned, as the model read it.
    browser.scroll_to(".step.mcp.allowed").await;
    browser.click(".step.mcp.allowed summary").await;
    let output = browser.wait_text(".step.mcp.allowed pre.output", "sent to the server").await;
    assert!(output.contains("everything"), "labelled with its server: {output}");
    browser.screenshot("timeline-after-reload").await;
    let console = browser.console().await;
    assert!(!console.contains("cannot be read"), "{console}");
}

/// What a server says of its tool is on the card, in a person's words, with the reminder that
/// these are the server's claims: live, after a reload, and on a phone.
#[tokio::test]
async fn browser_a_card_says_what_the_server_claims_of_its_tool() {
    let Some(peer) = crate::peers::gateway(None) else { return };
    let Some(browser) = Browser::start(390, 844).await else { return };
    // Kept whole: its fields drop in order (the server before its database).
    let world = mcp_conversation(&peer, "hub").await;
    let (model, id, added) = (&world.model, world.id.clone(), &world.added);
    let base = world.server.base.clone();
    let turn_on = crate::conversations::model_name_in(added, "home-assistant-turn_on");
    let turn_off = crate::conversations::model_name_in(added, "home-assistant-turn_off");
    model.push(Reply::tool_call(&turn_on, json!({"entity_id": "light.kitchen"})));
    model.push(Reply::tool_call(&turn_off, json!({"entity_id": "light.hall"})));
    model.push(Reply::text("Both done."));

    sign_in(&browser, &base, "root").await;
    browser.goto(&format!("{base}/c/{id}")).await;
    browser.wait_live().await;
    browser.type_into("textarea[name=message]", "kitchen on, hall off").await;
    browser.click("button.send").await;

    // Switching on: the title, and what the server says, worded; the reminder after it.
    let card = browser.wait_text(".card.approval", "home-assistant-turn_on").await;
    assert!(card.contains("(Switch a device on)"), "{card}");
    let hints = browser.text(".card.approval .hints").await;
    for said in [
        "It says it only adds: it deletes nothing.",
        "It says running it twice does no more than running it once.",
        "It says it stays within its own server.",
        "(The server describes its own tool: its claims allow nothing by themselves.)",
    ] {
        assert!(hints.contains(said), "{said:?} missing from {hints:?}");
    }
    // Still there after a reload, and it fits the phone.
    browser.reload().await;
    browser.wait_live().await;
    browser.wait_text(".card.approval .hints", "It says it only adds").await;
    let out = browser.sticking_out(390).await;
    assert!(out.is_empty(), "the card does not fit 390 pixels:\n{}", out.join("\n"));
    browser.click(".card.approval button.allow").await;

    // Switching off: the server says it may delete or overwrite, and that stands out.
    let card = browser.wait_text(".card.approval", "home-assistant-turn_off").await;
    assert!(card.contains("(Switch a device off)"), "{card}");
    browser
        .wait_text(".card.approval .hint.destructive", "It says it may delete or overwrite things.")
        .await;
    browser.screenshot("approval-card-hints-phone").await;
    browser.click(".card.approval button.refuse").await;
    browser.wait_gone(".card.approval").await;
}
