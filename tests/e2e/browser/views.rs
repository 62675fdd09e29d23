//! MCP Apps in a real Chromium: a tool's interactive view from npm's
//! `@modelcontextprotocol/server-basic-vanillajs`, drawn in its call's place on a phone, given
//! its call's result, again after a reload; what it asks the page is put to the person.

use llooma_fake_model::Reply;
use serde_json::json;

use super::driver::Browser;
use super::{mcp_conversation, sign_in};

#[tokio::test]
async fn browser_a_tools_view_shows_its_result_in_the_timeline_and_asks_the_person_for_the_rest() {
    let Some(peer) = llooma_test_support::peers::basic_app() else { return };
    let Some(browser) = Browser::start(390, 844).await else { return };
    // Kept whole: its fields drop in order (the server before its database).
    let world = mcp_conversation(&peer, "clock").await;
    let (model, id, added) = (&world.model, world.id.clone(), &world.added);
    let base = world.server.base.clone();
    let tool = crate::conversations::model_name_in(added, "get-time");
    model.push(Reply::tool_call(&tool, json!({})));
    model.push(Reply::text("Here is the clock."));

    sign_in(&browser, &base, "root").await;
    browser.goto(&format!("{base}/c/{id}")).await;
    browser.wait_live().await;
    browser.type_into("textarea[name=message]", "what time is it?").await;
    browser.click("button.send").await;
    browser.wait_text(".card.approval", "get-time").await;
    browser.click(".card.approval button.allow").await;
    browser.wait_text(".timeline", "Here is the clock.").await;
    let output =
        browser.script("return document.querySelector('.step.mcp pre.output').textContent").await;
    let output = output.as_str().unwrap().to_owned();

    for reloaded in [false, true] {
        if reloaded {
            browser.reload().await;
            browser.wait_live().await;
        }
        // The timeline opens on the latest message: the view is above it.
        browser.find(".mcp-view iframe").await;
        browser.scroll_to(".mcp-view").await;
        browser.wait_text(".mcp-view .mcp-view-title", "clock · get-time").await;
        // Inside the frame: the app's own page, showing the time of the call's stored result.
        browser.enter_frame(".mcp-view iframe").await;
        let shown = browser.wait_text("#server-time", "Z").await;
        browser.leave_frame().await;
        assert!(output.contains(&shown), "the view shows {shown}, the call returned {output}");
    }
    // Its origin is its own: the page cannot reach into it, nor it into the page.
    let reach = "try { return document.querySelector('.mcp-view iframe').contentWindow.document.title; } \
                 catch (e) { return 'blocked: ' + e.name; }";
    assert_eq!(browser.script(reach).await, json!("blocked: SecurityError"));
    let out = browser.sticking_out(390).await;
    assert!(out.is_empty(), "the view does not fit 390 pixels:\n{}", out.join("\n"));
    browser.scroll_to(".mcp-view").await;
    browser.screenshot("mcp-view-phone").await;

    // What it asks the page: a message goes into the composer, unsent; a link is shown whole
    // and opened only by a click.
    // (Pressed from inside the frame: the page's "latest" button floats over its lower part.)
    browser.enter_frame(".mcp-view iframe").await;
    browser.script("document.getElementById('send-message-btn').click()").await;
    browser.script("document.getElementById('open-link-btn').click()").await;
    browser.leave_frame().await;
    // The message waits beside the view; only the person's click puts it in the box.
    browser.wait_text(".mcp-view .mcp-view-suggestion", "This is message text.").await;
    assert_eq!(browser.value("textarea[name=message]").await, "");
    browser.click_text(".mcp-view .mcp-view-suggestion button", "Put in the message box").await;
    assert_eq!(browser.value("textarea[name=message]").await, "This is message text.");
    let link = browser.wait_text(".mcp-view .mcp-view-link", "The view asks to open").await;
    assert!(
        link.contains("https://modelcontextprotocol.io/ (on modelcontextprotocol.io)"),
        "{link}"
    );
    let sent = model.chat_bodies().iter().any(|b| b.to_string().contains("This is message text."));
    assert!(!sent, "the view's message reached the model without the person");

    // The view's own call to its server's tool: a card like the model's; allowed, its result
    // reaches the view.
    browser.enter_frame(".mcp-view iframe").await;
    let first = browser.text("#server-time").await;
    browser.script("document.getElementById('get-time-btn').click()").await;
    browser.leave_frame().await;
    let card = browser.wait_text(".card.approval", "get-time").await;
    assert!(card.contains("clock's view of get-time wants to run get-time"), "{card}");
    browser.click(".card.approval button.allow").await;
    browser.wait_gone(".card.approval").await;
    browser.enter_frame(".mcp-view iframe").await;
    let deadline = std::time::Instant::now() + std::time::Duration::from_secs(10);
    loop {
        let now = browser.text("#server-time").await;
        if now != first && now.ends_with('Z') {
            break;
        }
        assert!(
            std::time::Instant::now() < deadline,
            "the view never got its call's result: {now}"
        );
        tokio::time::sleep(std::time::Duration::from_millis(100)).await;
    }
    browser.leave_frame().await;

    // Full screen and back.
    browser.scroll_to(".mcp-view").await;
    browser.click(".mcp-view button.mcp-view-mode").await;
    let (width, height) = browser.window_size().await;
    let frame = browser.rect(".mcp-view.fullscreen").await;
    let covers = frame.left <= 0.5
        && frame.top <= 0.5
        && frame.right >= width - 1.0
        && frame.bottom >= height - 1.0;
    assert!(covers, "{frame:?} in {width}x{height}");
    browser.click(".mcp-view button.mcp-view-mode").await;
    browser.wait_gone(".mcp-view.fullscreen").await;
}

/// A view that tries everything a view must not: it reaches nothing, what it asks for goes
/// through the person, and the page stays usable.
#[tokio::test]
async fn browser_a_hostile_view_reaches_nothing_and_the_page_stays_usable() {
    let Some(peer) = llooma_test_support::peers::hostile_view() else { return };
    let Some(browser) = Browser::start(1280, 900).await else { return };
    // Kept whole: its fields drop in order (the server before its database).
    let world = mcp_conversation(&peer, "shady").await;
    let (model, id, added) = (&world.model, world.id.clone(), &world.added);
    let base = world.server.base.clone();
    let tools = added["tools"].as_array().unwrap();
    let secret = tools.iter().find(|t| t["name"] == "secret_action").unwrap();
    assert_eq!(secret["viewOnly"], true, "{secret}");
    let probe = crate::conversations::model_name_in(added, "probe");
    model.push(Reply::tool_call(&probe, json!({})));
    model.push(Reply::text("Probed."));
    // The model is never offered the tool only its view may call.
    let offered = |body: &serde_json::Value| body.to_string().contains("secret_action");

    sign_in(&browser, &base, "root").await;
    browser.goto(&format!("{base}/c/{id}")).await;
    browser.wait_live().await;
    browser.type_into("textarea[name=message]", "probe it").await;
    // The view floods from when it is drawn, after this reply: no earlier.
    let flood_from = std::time::Instant::now();
    browser.click("button.send").await;
    browser.wait_text(".card.approval", "probe").await;
    browser.click(".card.approval button.allow").await;
    browser.wait_text(".timeline", "Probed.").await;
    assert!(!model.chat_bodies().iter().any(offered));

    // Its call to the tool only it may call is a card; refused, nothing is called.
    let card = browser.wait_text(".card.approval", "secret_action").await;
    assert!(card.contains("shady's view of probe wants to run secret_action"), "{card}");
    browser.screenshot("mcp-view-call-card-desktop").await;
    browser.click(".card.approval button.refuse").await;
    browser.wait_gone(".card.approval").await;

    browser.find(".mcp-view iframe").await;
    browser.scroll_to(".mcp-view").await;
    browser.enter_frame(".mcp-view iframe").await;
    let read = "return document.getElementById('report').textContent";
    let mut report = serde_json::Value::Null;
    for _ in 0..100 {
        let text = browser.script(read).await;
        report = serde_json::from_str(text.as_str().unwrap_or("{}")).unwrap_or_default();
        if report.get("answer secret").is_some() && report.get("private").is_some() {
            break;
        }
        tokio::time::sleep(std::time::Duration::from_millis(100)).await;
    }
    browser.leave_frame().await;
    let said = |key: &str| report[key].as_str().unwrap_or_default().to_owned();
    for key in ["cookie", "parent", "storage"] {
        assert!(said(key).starts_with("blocked"), "{key}: {report}");
    }
    assert!(said("open").starts_with("blocked") || said("open") == "refused", "{report}");
    assert_eq!(said("instance"), "blocked", "{report}");
    assert_eq!(said("private"), "blocked", "{report}");
    assert!(said("answer secret").contains("not made"), "{report}");
    // One call at a time: the next waits until the person answered the last.
    assert!(said("answer other").contains("last call still waits for the person"), "{report}");
    // At most 100 a second: a flood sent over a slow second or two gets each second's share.
    let answered: u64 = said("flood answers").parse().unwrap_or(0);
    let seconds = flood_from.elapsed().as_secs() + 1;
    assert!(
        answered <= 100 * seconds && answered < 5000,
        "{answered} of 5000 flooding requests answered within {seconds} s"
    );

    // Nothing left the frame: the page is where it was, the view no taller than allowed, and
    // the private address was never asked.
    assert!(browser.url().await.starts_with(&format!("{base}/c/{id}")));
    let frame = browser.rect(".mcp-view iframe").await;
    assert!(frame.bottom - frame.top <= 721.0, "{frame:?}");
    let hits: Vec<String> =
        reqwest::get(format!("{}/hits", peer.origin())).await.unwrap().json().await.unwrap();
    assert!(hits.is_empty(), "{hits:?}");

    // And the page works on.
    model.push(Reply::text("Still here."));
    browser.type_into("textarea[name=message]", "are you there?").await;
    browser.click("button.send").await;
    browser.wait_text(".timeline", "Still here.").await;
    assert!(!model.chat_bodies().iter().any(offered));
}
