//! Everyday chat in the browser: what a person does a hundred times a day.

use llooma_fake_model::{FakeModel, Reply};
use serde_json::json;

use super::driver::Browser;
use super::{sign_in, with_conversations};
use crate::support::{PASSWORD, Server, Tab, TestDb};

/// Before, each conversation page held two event streams and left pages kept theirs in the
/// back/forward cache: after a few clicks the browser's six connections to the host were taken
/// and Enter did nothing. Now a tab holds one stream, closed when its page is hidden.
#[tokio::test]
async fn browser_after_many_navigations_and_in_four_tabs_every_page_still_streams() {
    let Some(browser) = Browser::start(1280, 900).await else { return };
    let model = FakeModel::start([]).await.unwrap();
    let db = TestDb::new();
    let server = Server::start(&db, &[("PROVIDER_ALLOWED_ORIGINS", &model.origin())]);
    let base = server.base.clone();
    let (mut api, ids) = with_conversations(&server, &model, 4).await;
    sign_in(&browser, &base, "root").await;

    // Ten ordinary navigations: into conversations, Back, Settings, home.
    let first = format!("{base}/c/{}", ids[0]);
    for round in 0..2 {
        browser.goto(&format!("{base}/c/{}", ids[round + 1])).await;
        browser.wait_live().await;
        browser.back().await;
        browser.wait_live().await;
        browser.goto(&format!("{base}/settings")).await;
        browser.wait_live().await;
        browser.goto(&format!("{base}/")).await;
        browser.wait_live().await;
        browser.goto(&first).await;
        browser.wait_live().await;
    }
    model.push(Reply::text("Still here after ten pages."));
    browser.type_into("textarea[name=message]", "are you there?").await;
    browser.click("button.send").await;
    browser.wait_text(".timeline .msg.reply", "Still here after ten pages.").await;

    // Four tabs, each on its own conversation, each streaming what is sent to it.
    let mut handles = Vec::new();
    for id in &ids[1..] {
        let (old, new) = browser.new_tab().await;
        if handles.is_empty() {
            handles.push(old);
        }
        handles.push(new);
        browser.goto(&format!("{base}/c/{id}")).await;
        browser.wait_live().await;
    }
    for (n, id) in ids.iter().enumerate() {
        let text = format!("Reply number {n}.");
        model.push(Reply::text(text.clone()));
        let sent = api
            .post(&format!("/api/v1/conversations/{id}/messages"), json!({"content": "hello"}))
            .await;
        assert_eq!(sent.status, 202, "{sent:?}");
        // The fake model answers in the order asked: this reply is stored before the next.
        until_stored(&mut api, id, &text).await;
    }
    for (n, handle) in handles.iter().enumerate() {
        browser.switch_to(handle).await;
        browser.wait_text(".timeline", &format!("Reply number {n}.")).await;
    }
}

/// Waits until the conversation holds a reply with `text`.
async fn until_stored(api: &mut Tab, id: &str, text: &str) {
    for _ in 0..200 {
        let detail = api.get(&format!("/api/v1/conversations/{id}")).await;
        let stored = detail.json["messages"]
            .as_array()
            .is_some_and(|m| m.iter().any(|m| m["content"].as_str() == Some(text)));
        if stored {
            return;
        }
        tokio::time::sleep(std::time::Duration::from_millis(50)).await;
    }
    panic!("the reply {text:?} in {id} was never stored");
}

/// When the server goes away the page says it is reconnecting (before, it went silent), and
/// when the server is back the page carries on where it was.
#[tokio::test]
async fn browser_a_lost_connection_is_shown_and_the_page_carries_on_when_the_server_is_back() {
    let Some(browser) = Browser::start(1280, 900).await else { return };
    let model = FakeModel::start([]).await.unwrap();
    let db = TestDb::new();
    let mut server = Server::start(&db, &[("PROVIDER_ALLOWED_ORIGINS", &model.origin())]);
    let base = server.base.clone();
    let (_, ids) = with_conversations(&server, &model, 1).await;
    sign_in(&browser, &base, "root").await;
    browser.goto(&format!("{base}/c/{}", ids[0])).await;
    browser.wait_live().await;
    browser.find(".connection[hidden]").await;

    server.kill();
    browser.find(".connection:not([hidden])").await;
    let said = browser.text(".connection").await;
    assert!(said.contains("reconnecting"), "{said}");
    browser.screenshot("reconnecting").await;

    let listen = base.trim_start_matches("http://").to_owned();
    let _server = Server::start(
        &db,
        &[("PROVIDER_ALLOWED_ORIGINS", &model.origin()), ("LLOOMA_LISTEN", &listen)],
    );
    browser.find(".connection[hidden]").await;
    model.push(Reply::text("Back again."));
    browser.type_into("textarea[name=message]", "still there?").await;
    browser.click("button.send").await;
    browser.wait_text(".timeline .msg.reply", "Back again.").await;
}

/// Where the conversation's messages are scrolled: 0 at the latest, negative scrolled up.
async fn scrolled(browser: &Browser) -> f64 {
    browser
        .script("return document.querySelector('.chat-scroll').scrollTop")
        .await
        .as_f64()
        .unwrap()
}

/// The text of the first message whose top is inside the scrolling box: what the reader reads.
async fn first_in_view(browser: &Browser) -> String {
    let script = r#"
        const box = document.querySelector('.chat-scroll').getBoundingClientRect();
        const msg = [...document.querySelectorAll('.timeline .msg')]
            .find(m => m.getBoundingClientRect().top >= box.top);
        return msg ? msg.textContent.slice(0, 40) : '';
    "#;
    browser.script(script).await.as_str().unwrap().to_owned()
}

/// A reply is followed while the reader is at the latest; scrolled up, the reader stays put and
/// "Latest" brings the end back; a card waiting for an answer is brought into view above the
/// composer and the tab's title says a card waits.
#[tokio::test]
async fn browser_the_reply_is_followed_at_the_latest_and_a_waiting_card_comes_into_view() {
    let Some(peer) = crate::peers::everything() else { return };
    let Some(browser) = Browser::start(1280, 700).await else { return };
    let model = FakeModel::start([]).await.unwrap();
    let db = TestDb::new();
    let server = Server::start(
        &db,
        &[("PROVIDER_ALLOWED_ORIGINS", &model.origin()), ("MCP_ALLOWED_ORIGINS", &peer.origin())],
    );
    let base = server.base.clone();
    let (mut api, ids) = with_conversations(&server, &model, 1).await;
    let id = &ids[0];
    let added = api
        .post("/api/v1/mcp/servers", json!({"label": "everything", "address": peer.url()}))
        .await;
    let echo = crate::conversations::model_name_in(&added.json, "echo");
    let on = api
        .send("PATCH", &format!("/api/v1/conversations/{id}"), Some(json!({"mcpEnabled": true})))
        .await;
    assert_eq!(on.status, 200, "{on:?}");
    let lines = |tag: &str| (1..=30).map(|n| format!("{tag} line {n}.")).collect::<Vec<_>>();
    for n in 0..6 {
        let text = lines(&format!("Earlier {n}")).join("\n\n");
        model.push(Reply::text(text.clone()));
        api.post(&format!("/api/v1/conversations/{id}/messages"), json!({"content": "more"})).await;
        until_stored(&mut api, id, &text).await;
    }
    sign_in(&browser, &base, "root").await;
    browser.goto(&format!("{base}/c/{id}")).await;
    browser.wait_live().await;
    browser.wait_text(".timeline", "Earlier 5 line 30.").await;
    assert!(scrolled(&browser).await > -48.0, "the page opens on the latest");
    browser.find(".jump-latest[hidden]").await;

    // At the latest, a long reply streaming in is followed to its end.
    model.push(Reply::text(lines("Streamed").join("\n\n")).chunks(40).chunk_delay_ms(20));
    browser.type_into("textarea[name=message]", "a long one").await;
    browser.click("button.send").await;
    browser.wait_text(".timeline", "Streamed line 30.").await;
    assert!(scrolled(&browser).await > -48.0, "followed to the end: {}", scrolled(&browser).await);

    // Scrolled up, the reader is not moved by a reply streaming in, and "Latest" is offered.
    browser.script("document.querySelector('.chat-scroll').scrollTop = -3000").await;
    browser.find(".jump-latest:not([hidden])").await;
    let reading = first_in_view(&browser).await;
    model.push(Reply::text(lines("Meanwhile").join("\n\n")).chunks(40).chunk_delay_ms(20));
    api.post(&format!("/api/v1/conversations/{id}/messages"), json!({"content": "go on"})).await;
    browser.wait_text(".timeline", "Meanwhile line 30.").await;
    assert_eq!(first_in_view(&browser).await, reading, "the reader was moved");
    browser.click(".jump-latest").await;
    assert!(scrolled(&browser).await > -48.0, "Latest brings the end back");
    browser.find(".jump-latest[hidden]").await;

    // Scrolled up again, a card appears: it is brought into view, and the title says it waits.
    let title = browser.script("return document.title").await;
    browser.script("document.querySelector('.chat-scroll').scrollTop = -3000").await;
    browser.find(".jump-latest:not([hidden])").await;
    model.push(Reply::tool_call(&echo, json!({"message": "look at me"})));
    model.push(Reply::text("Refused, fine."));
    api.post(&format!("/api/v1/conversations/{id}/messages"), json!({"content": "echo"})).await;
    browser.wait_text(".card.approval pre.args", "look at me").await;
    let in_view = browser
        .script(
            r#"const box = document.querySelector('.chat-scroll').getBoundingClientRect();
               const card = document.querySelector('.card.approval').getBoundingClientRect();
               const answer = document.querySelector('.card.approval button.refuse')
                   .getBoundingClientRect();
               return card.bottom <= box.bottom + 1 && answer.top >= box.top;"#,
        )
        .await;
    assert_eq!(in_view, json!(true), "the card and its buttons are in view above the composer");
    let waiting = browser.script("return document.title").await;
    assert_eq!(waiting, json!(format!("(1 waiting) {}", title.as_str().unwrap())));
    browser.click(".card.approval button.refuse").await;
    browser.wait_text(".timeline", "Refused, fine.").await;
    assert_eq!(browser.script("return document.title").await, title);
}

/// The values offered under a model field.
async fn offered(browser: &Browser, datalist: &str) -> Vec<String> {
    let script =
        format!("return [...document.querySelectorAll('#{datalist} option')].map(o => o.value)");
    let values = browser.script(&script).await;
    values.as_array().unwrap().iter().map(|v| v.as_str().unwrap().to_owned()).collect()
}

/// Models are picked from what the provider lists; with the administrator's default model a new
/// conversation's first message just works; the next new one starts with the last model used.
#[tokio::test]
async fn browser_models_are_picked_from_the_provider_s_list_and_a_new_conversation_just_works() {
    let Some(browser) = Browser::start(1280, 900).await else { return };
    let model = FakeModel::builder().models(["fake-model", "big-model"]).start().await.unwrap();
    let db = TestDb::new();
    let server = Server::start(&db, &[("PROVIDER_ALLOWED_ORIGINS", &model.origin())]);
    let base = server.base.clone();
    let (mut api, _) = with_conversations(&server, &model, 0).await;
    let provider_id = api.get("/api/v1/providers").await.json[0]["id"].as_str().unwrap().to_owned();
    sign_in(&browser, &base, "root").await;

    // Admin → Providers and instance: the default model, picked from the provider's list.
    browser.goto(&format!("{base}/admin/instance")).await;
    browser.wait_live().await;
    browser.click(&format!("select[name=default-provider] option[value=\"{provider_id}\"]")).await;
    browser.click("input[name=default-model]").await;
    browser.find("#default-model-choices option[value=big-model]").await;
    assert_eq!(offered(&browser, "default-model-choices").await, ["fake-model", "big-model"]);
    browser.type_into("input[name=default-model]", "fake-model").await;
    browser.mark_page().await;
    browser.click("button.save-default-model").await;
    // The page reloads from the server once the change is stored.
    browser.wait_new_page().await;
    super::until_api(&mut api, "/api/v1/admin/settings", "the default model", |s| {
        s["defaultModel"] == "fake-model" && s["defaultProviderId"] == provider_id.as_str()
    })
    .await;

    // A new conversation starts with it: the first message just works.
    browser.goto(&format!("{base}/")).await;
    browser.wait_live().await;
    browser.click("button.new").await;
    browser.find(".chat-page").await;
    browser.wait_live().await;
    assert_eq!(browser.value("input[name=model]").await, "fake-model");
    model.push(Reply::text("It just works."));
    browser.type_into("textarea[name=message]", "hello").await;
    browser.click("button.send").await;
    browser.wait_text(".timeline .msg.reply", "It just works.").await;

    // Another model, picked from the list under the field.
    let id = browser.url().await.rsplit('/').next().unwrap().to_owned();
    browser.click("input[name=model]").await;
    browser.find("#model-choices option[value=big-model]").await;
    assert_eq!(offered(&browser, "model-choices").await, ["fake-model", "big-model"]);
    browser.script("document.querySelector('input[name=model]').value = ''").await;
    browser.type_into("input[name=model]", "big-model\u{E004}").await;
    super::until_api(&mut api, &format!("/api/v1/conversations/{id}"), "the model", |c| {
        c["conversation"]["model"] == "big-model"
    })
    .await;

    // The next new conversation starts with the model last used.
    browser.goto(&format!("{base}/")).await;
    browser.wait_live().await;
    browser.click("button.new").await;
    browser.find(".chat-page").await;
    browser.wait_live().await;
    assert_eq!(browser.value("input[name=model]").await, "big-model");
}

/// What the page shows of the conversation: each message's role and text.
async fn exchange(browser: &Browser) -> Vec<String> {
    let script = r#"
        return [...document.querySelectorAll('.timeline .msg')].map(m =>
            (m.matches('.user') ? 'person: ' : 'model: ') +
            [...m.querySelectorAll('.text')].map(t => t.textContent.trim()).join(' '));
    "#;
    let shown = browser.script(script).await;
    shown.as_array().unwrap().iter().map(|v| v.as_str().unwrap().to_owned()).collect()
}

/// A reply names its model and time and is copied; the last one is written again on request;
/// a sent message is edited and sent again, replacing what followed it, in every tab and after
/// a reload.
#[tokio::test]
async fn browser_a_reply_is_copied_and_regenerated_and_a_message_is_edited_and_sent_again() {
    let Some(browser) = Browser::start(1280, 900).await else { return };
    let model = FakeModel::start([]).await.unwrap();
    let db = TestDb::new();
    let server = Server::start(&db, &[("PROVIDER_ALLOWED_ORIGINS", &model.origin())]);
    let base = server.base.clone();
    let (_api, ids) = with_conversations(&server, &model, 1).await;
    let url = format!("{base}/c/{}", ids[0]);
    sign_in(&browser, &base, "root").await;
    browser.goto(&url).await;
    browser.wait_live().await;
    // Permissions are the page's origin's: granted once it is open.
    browser.grant("clipboard-read").await;
    browser.grant("clipboard-write").await;
    let send = |text: &'static str| {
        let browser = &browser;
        async move {
            browser.type_into("textarea[name=message]", text).await;
            browser.click("button.send").await;
        }
    };
    model.push(Reply::text("First answer."));
    send("first question").await;
    browser.wait_text(".timeline .msg.reply", "First answer.").await;
    model.push(Reply::text("Second answer."));
    send("second question").await;
    browser.wait_text(".timeline", "Second answer.").await;

    // The actions sit under a message, not in it: its text is only its text.
    assert_eq!(browser.text(".msg.reply").await, "First answer.");
    assert_eq!(browser.text(".msg.user").await, "first question");
    // Each reply names its model and when it was written, in the reader's time.
    let meta = browser.wait_text(".reply-meta", "fake-model").await;
    let when = browser.text(".reply-meta time").await;
    assert!(when.chars().any(|c| c.is_ascii_digit()), "a time: {meta:?} {when:?}");

    // Copy puts the reply's text on the clipboard.
    browser.click(".reply-meta .copy-reply").await;
    browser.wait_text(".reply-meta .copy-reply", "Copied").await;
    let copied = browser.script("return navigator.clipboard.readText()").await;
    assert_eq!(copied, "First answer.");

    // Regenerate is offered on the last reply only, and writes it again.
    let offered = browser
        .script("return [...document.querySelectorAll('.regenerate')].map(b => !b.hidden)")
        .await;
    assert_eq!(offered, json!([false, true]));
    model.push(Reply::text("Second answer, again."));
    browser.click(".timeline > li:last-child .regenerate").await;
    browser.wait_text(".timeline", "Second answer, again.").await;
    let asked = model.requests().last().unwrap().raw_body.clone();
    assert!(asked.contains("second question") && !asked.contains("Second answer."), "{asked}");
    assert_eq!(
        exchange(&browser).await,
        [
            "person: first question",
            "model: First answer.",
            "person: second question",
            "model: Second answer, again."
        ]
    );

    // A second tab on the conversation follows the edit made in the first.
    let (first_tab, second_tab) = browser.new_tab().await;
    browser.goto(&url).await;
    browser.wait_live().await;
    browser.switch_to(&first_tab).await;
    browser.click(".msg-after.user .edit").await;
    browser.script("document.querySelector('textarea[name=edited]').value = ''").await;
    browser.type_into("textarea[name=edited]", "first question, edited").await;
    model.push(Reply::text("Edited answer."));
    browser.click(".edit-box .resend").await;
    browser.wait_text(".timeline", "Edited answer.").await;
    let edited = ["person: first question, edited", "model: Edited answer."];
    assert_eq!(exchange(&browser).await, edited);
    let asked = model.requests().last().unwrap().raw_body.clone();
    assert!(!asked.contains("First answer.") && !asked.contains("second question"), "{asked}");
    browser.switch_to(&second_tab).await;
    browser.wait_text(".timeline", "Edited answer.").await;
    assert_eq!(exchange(&browser).await, edited);
    browser.reload().await;
    browser.wait_live().await;
    browser.wait_text(".timeline", "Edited answer.").await;
    assert_eq!(exchange(&browser).await, edited);
    browser.screenshot("message-actions").await;
}

/// The titles the sidebar lists, top to bottom.
async fn listed(browser: &Browser) -> Vec<String> {
    let script = "return [...document.querySelectorAll('.sidebar .conversations li a')]\
                  .map(a => a.textContent.trim())";
    let titles = browser.script(script).await;
    titles.as_array().unwrap().iter().map(|v| v.as_str().unwrap().to_owned()).collect()
}

/// Beside a conversation, the account's conversations, newest first and named by their first
/// message: searched by the words in them, renamed and deleted (asked first) in place; on a
/// phone the list folds away behind a button.
#[tokio::test]
async fn browser_the_sidebar_lists_searches_renames_and_deletes_conversations() {
    let Some(browser) = Browser::start(1280, 900).await else { return };
    let model = FakeModel::start([
        Reply::text("High tide is at noon."),
        Reply::text("The Louvre."),
        Reply::text("Bread, eggs."),
    ])
    .await
    .unwrap();
    let db = TestDb::new();
    let server = Server::start(&db, &[("PROVIDER_ALLOWED_ORIGINS", &model.origin())]);
    let base = server.base.clone();
    let (mut api, _) = with_conversations(&server, &model, 0).await;
    let provider = api.get("/api/v1/providers").await.json[0]["id"].clone();
    let chat = json!({"providerId": provider, "model": "fake-model"});
    let mut ids = Vec::new();
    for (asked, answer) in [
        ("When is the tide in Brest?", "High tide is at noon."),
        ("Which museum in Paris?", "The Louvre."),
        ("Shopping list please", "Bread, eggs."),
    ] {
        let id = api.post("/api/v1/conversations", chat.clone()).await.json["id"]
            .as_str()
            .unwrap()
            .to_owned();
        api.post(&format!("/api/v1/conversations/{id}/messages"), json!({"content": asked})).await;
        until_stored(&mut api, &id, answer).await;
        ids.push(id);
    }
    sign_in(&browser, &base, "root").await;
    browser.goto(&format!("{base}/c/{}", ids[0])).await;
    browser.wait_live().await;
    assert_eq!(
        listed(&browser).await,
        ["Shopping list please", "Which museum in Paris?", "When is the tide in Brest?"],
        "newest first, each named by its first message"
    );
    let here = browser.text(".sidebar .conversations li.here a").await;
    assert_eq!(here, "When is the tide in Brest?");
    let when = browser.text(".sidebar .conversations li .meta time").await;
    assert!(!when.is_empty() && !when.ends_with("UTC"), "written by the browser: {when}");

    // Search: the words of a reply find its conversation; cleared, the list comes back.
    browser.type_into(".sidebar input[name=search]", "louvre").await;
    browser.wait_gone(".sidebar .conversations li:nth-child(2)").await;
    assert_eq!(listed(&browser).await, ["Which museum in Paris?"]);
    browser.type_into(".sidebar input[name=search]", " tides").await;
    browser.find(".sidebar .hint:not([hidden])").await;
    assert_eq!(browser.text(".sidebar .hint").await, "Nothing found.");
    browser.script("const s = document.querySelector('.sidebar input[name=search]'); s.value = ''; s.dispatchEvent(new Event('input'))").await;
    browser.find(".sidebar .conversations li:nth-child(3)").await;

    // Rename the conversation shown: the list, the heading and the API agree.
    browser.click(".sidebar li.here button.rename").await;
    browser.script("document.querySelector('.sidebar input[name=rename]').value = ''").await;
    browser.type_into(".sidebar input[name=rename]", "Tides\u{E007}").await;
    browser.wait_text(".chat-head .title", "Tides").await;
    browser.wait_text(".sidebar li.here a", "Tides").await;
    let path = format!("/api/v1/conversations/{}", ids[0]);
    super::until_api(&mut api, &path, "the title", |c| c["conversation"]["title"] == "Tides").await;

    // Delete asks first; "Keep" keeps it; "Delete" removes it.
    let shopping = format!(".sidebar li[data-id=\"{}\"]", ids[2]);
    browser.click(&format!("{shopping} button.delete")).await;
    browser.wait_text(&format!("{shopping} .confirm"), "Delete this conversation").await;
    browser.click(&format!("{shopping} .confirm button.no")).await;
    assert_eq!(api.get(&format!("/api/v1/conversations/{}", ids[2])).await.status, 200);
    browser.click(&format!("{shopping} button.delete")).await;
    browser.click(&format!("{shopping} .confirm button.yes")).await;
    browser.wait_gone(&shopping).await;
    assert_eq!(api.get(&format!("/api/v1/conversations/{}", ids[2])).await.status, 404);
    assert_eq!(listed(&browser).await, ["Which museum in Paris?", "Tides"]);
    browser.screenshot("sidebar").await;

    // On a phone the list is folded away behind ☰, and fits the screen when opened.
    let phone = Browser::start(390, 844).await.unwrap();
    sign_in(&phone, &base, "root").await;
    phone.goto(&format!("{base}/c/{}", ids[1])).await;
    phone.wait_live().await;
    let hidden =
        phone.script("return getComputedStyle(document.querySelector('.sidebar')).display").await;
    assert_eq!(hidden, "none");
    phone.click("button.sidebar-toggle").await;
    phone.find(".sidebar.open").await;
    let right = phone.rect(".sidebar").await.right;
    assert!(right <= 390.0, "the open list fits the screen: {right}");
    // Renaming made "Tides" the most recently changed.
    assert_eq!(listed(&phone).await, ["Tides", "Which museum in Paris?"]);
    phone.click(".sidebar button.sidebar-close").await;
    phone.wait_gone(".sidebar.open").await;
}

/// Right after the administrator account is created the home page says what is missing (a
/// model provider) and leads there; someone else is told to ask an administrator; once a
/// provider exists the notice is gone.
#[tokio::test]
async fn browser_the_first_run_says_a_model_provider_is_missing_and_leads_to_it() {
    let Some(browser) = Browser::start(1280, 900).await else { return };
    let model = FakeModel::start([]).await.unwrap();
    let db = TestDb::new();
    let server = Server::start(&db, &[("PROVIDER_ALLOWED_ORIGINS", &model.origin())]);
    let base = server.base.clone();
    browser.goto(&format!("{base}/")).await;
    browser.wait_live().await;
    browser.type_into("input[name=username]", "root").await;
    browser.type_into("input[name=password]", PASSWORD).await;
    browser.click("button[type=submit]").await;
    browser.wait_text(".setup-needed h2", "a model provider").await;
    browser.screenshot("first-run-provider").await;
    browser.click(".setup-needed a.button").await;
    browser.wait_text("h1", "Providers and instance").await;

    let mut api = server.tab();
    api.login("root", PASSWORD).await;
    api.send("PATCH", "/api/v1/admin/settings", Some(json!({"registrationOpen": true}))).await;
    let mut other = server.tab();
    other.register("someone", PASSWORD).await;
    let page = other.get("/").await;
    assert!(page.text.contains("Ask an administrator"), "{}", page.text);

    api.post("/api/v1/admin/providers", json!({"name": "Fake", "baseUrl": model.base_url()})).await;
    browser.goto(&format!("{base}/")).await;
    browser.wait_live().await;
    browser.wait_gone(".setup-needed").await;
}

/// Settings: naming new conversations with the model is the account's choice, off at first.
#[tokio::test]
async fn browser_naming_conversations_with_the_model_is_switched_on_in_settings() {
    let Some(browser) = Browser::start(1280, 900).await else { return };
    let model = FakeModel::start([]).await.unwrap();
    let db = TestDb::new();
    let server = Server::start(&db, &[("PROVIDER_ALLOWED_ORIGINS", &model.origin())]);
    let base = server.base.clone();
    let (mut api, _) = with_conversations(&server, &model, 0).await;
    sign_in(&browser, &base, "root").await;
    browser.goto(&format!("{base}/settings/tools")).await;
    browser.wait_live().await;
    let checked = "return document.querySelector('input[name=titles-from-model]').checked";
    assert_eq!(browser.script(checked).await, json!(false));
    browser.scroll_to("input[name=titles-from-model]").await;
    browser.mark_page().await;
    browser.click("input[name=titles-from-model]").await;
    super::until_api(&mut api, "/api/v1/me/preferences", "the preference", |p| {
        p["titlesFromModel"] == true
    })
    .await;
    browser.wait_new_page().await;
    assert_eq!(browser.script(checked).await, json!(true), "kept after the page reloads");
}

/// A new instance, as its administrator meets it: Admin opens on what needs doing; a model on
/// the same machine is added from the page alone (no PROVIDER_ALLOWED_ORIGINS, no restart) and
/// answers; the tool budget says nothing alarming while few tools are in use; Settings → Prompts
/// is its own page; removing a persona asks first.
#[tokio::test]
async fn browser_admin_opens_on_what_needs_doing_and_adds_a_model_on_this_machine_from_the_page() {
    let Some(browser) = Browser::start(1280, 900).await else { return };
    let model = FakeModel::start([]).await.unwrap();
    let db = TestDb::new();
    let server = Server::start(&db, &[]);
    let base = server.base.clone();
    let mut api = server.tab();
    api.register("root", PASSWORD).await;
    sign_in(&browser, &base, "root").await;

    // Admin first shows what is missing, most pressing first, and leads there.
    browser.click_text(".topbar a", "Admin").await;
    browser.wait_text(".todo-item.needed .title", "Add a model provider").await;
    browser.screenshot("admin-home").await;
    browser.wait_live().await;
    browser.click(".todo-item.needed a").await;
    browser.wait_text("h1", "Admin → Providers and instance").await;
    browser.wait_live().await;

    // An Ollama-like server on loopback, marked as on this machine.
    browser.type_into(".add-provider input[name=name]", "Ollama").await;
    browser.type_into(".add-provider input[name=base-url]", &model.base_url()).await;
    browser.click(".add-provider input[name=local-network]").await;
    browser.click(".add-provider button.add").await;
    browser.wait_text(".card.provider .status.local", "this machine or local network").await;
    let providers = api.get("/api/v1/admin/providers").await.json;
    assert_eq!(providers[0]["localNetwork"], true, "{providers}");
    let provider_id = providers[0]["id"].as_str().unwrap().to_owned();

    // Now the default model is what is left to do; no longer the provider.
    browser.goto(&format!("{base}/admin")).await;
    browser.wait_text(".todo-item.advised .title", "Choose a default model").await;
    assert!(!browser.body_text().await.contains("Add a model provider"));

    // It answers a message sent from the page.
    let created = api
        .post("/api/v1/conversations", json!({"providerId": provider_id, "model": "fake-model"}))
        .await;
    let id = created.json["id"].as_str().unwrap().to_owned();
    model.push(Reply::text("Answered from this machine."));
    browser.goto(&format!("{base}/c/{id}")).await;
    browser.wait_live().await;
    browser.type_into("textarea[name=message]", "hello").await;
    browser.click("button.send").await;
    browser.wait_text(".timeline .msg.reply", "Answered from this machine.").await;

    // The tool budget (200 by default) only notes its size while no tool is in use.
    browser.goto(&format!("{base}/settings/tools")).await;
    browser.wait_text(".budget-note", "0 are in use").await;
    assert!(
        !browser.body_text().await.contains("the cheaper answer"),
        "the budget warns with no tool in use"
    );

    // Settings → Prompts is its own page, linked from the top bar.
    browser.click_text(".topbar a", "Prompts").await;
    browser.wait_text("h1", "Settings → Prompts").await;
    browser.find(".card.wording[data-tool=current_date] textarea").await;

    // Deleting a persona asks first; Keep keeps it.
    let persona = api
        .post(
            "/api/v1/personas",
            json!({"name": "Tutor", "prompt": "Teach.", "memoryEnabled": true}),
        )
        .await;
    assert_eq!(persona.status, 201, "{persona:?}");
    browser.goto(&format!("{base}/settings/personas")).await;
    browser.wait_live().await;
    browser.click(".card.persona button.remove").await;
    browser.wait_text(".card.persona .confirm .question", "everything it remembers").await;
    browser.click(".card.persona .confirm button.no").await;
    browser.wait_text(".card.persona button.remove", "Delete").await;
    assert_eq!(api.get("/api/v1/personas").await.json.as_array().unwrap().len(), 1);
    browser.click(".card.persona button.remove").await;
    browser.click(".card.persona .confirm button.yes").await;
    browser.wait_text("main", "No persona yet.").await;
    assert_eq!(api.get("/api/v1/personas").await.json, json!([]));
}

/// On a phone the conversation's Export menu fits and its links download the conversation.
#[tokio::test]
async fn browser_a_conversation_is_exported_from_its_header_on_a_phone() {
    let Some(browser) = Browser::start(390, 844).await else { return };
    let model = FakeModel::start([Reply::text("Take the night train.")]).await.unwrap();
    let db = TestDb::new();
    let server = Server::start(&db, &[("PROVIDER_ALLOWED_ORIGINS", &model.origin())]);
    let base = server.base.clone();
    let (_, ids) = with_conversations(&server, &model, 1).await;
    sign_in(&browser, &base, "root").await;
    browser.goto(&format!("{base}/c/{}", ids[0])).await;
    browser.wait_live().await;
    browser.type_into("textarea[name=message]", "How do I get to Vienna?").await;
    browser.click("button.send").await;
    browser.wait_text(".timeline", "Take the night train.").await;

    browser.click(".chat-head .export-menu summary").await;
    browser.wait_text(".export-choices", "As Markdown").await;
    let out = browser.sticking_out(390).await;
    assert!(out.is_empty(), "the export menu does not fit 390 pixels:\n{}", out.join("\n"));
    browser.screenshot("export-phone").await;
    // What the link downloads: the conversation, as Markdown.
    let text = browser
        .script(
            "const a = document.querySelector('.export-choices a.export-markdown'); \
             if (!a.hasAttribute('download')) return 'no download attribute'; \
             const r = new XMLHttpRequest(); r.open('GET', a.href, false); r.send(); \
             return r.status + ' ' + r.responseText;",
        )
        .await;
    let text = text.as_str().unwrap();
    assert!(text.starts_with("200 # Chat 1"), "{text}");
    assert!(text.contains("How do I get to Vienna?") && text.contains("Take the night train."));
}
