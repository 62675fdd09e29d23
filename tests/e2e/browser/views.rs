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
    browser.wait_text(".mcp-view .mcp-view-note", "put a message in the box below").await;
    assert_eq!(browser.value("textarea[name=message]").await, "This is message text.");
    let link = browser.wait_text(".mcp-view .mcp-view-link", "The view asks to open").await;
    assert!(link.contains("https://modelcontextprotocol.io/"), "{link}");
    let sent = model.chat_bodies().iter().any(|b| b.to_string().contains("This is message text."));
    assert!(!sent, "the view's message reached the model without the person");

    // Full screen and back.
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
