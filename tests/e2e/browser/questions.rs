//! A server's question during a call, in a real Chromium: the card with its form on a phone,
//! an answer that does not fit said on the card, the answer sent, and the timeline after.

use llooma_fake_model::Reply;
use serde_json::json;

use super::driver::Browser;
use super::{mcp_conversation, sign_in};

#[tokio::test]
async fn browser_a_servers_question_is_a_form_on_its_card() {
    let Some(peer) = crate::peers::gateway(None) else { return };
    let Some(browser) = Browser::start(390, 844).await else { return };
    // Kept whole: its fields drop in order (the server before its database).
    let world = mcp_conversation(&peer, "hub").await;
    let (model, id, added) = (&world.model, world.id.clone(), &world.added);
    let base = world.server.base.clone();
    let thermostat = crate::conversations::model_name_in(added, "home-assistant-set_thermostat");
    model.push(Reply::tool_call(&thermostat, json!({"room": "hall"})));
    model.push(Reply::text("The hall is warming up."));

    sign_in(&browser, &base, "root").await;
    browser.goto(&format!("{base}/c/{id}")).await;
    browser.wait_live().await;
    browser.type_into("textarea[name=message]", "heat the hall").await;
    browser.click("button.send").await;
    browser.wait_text(".card.approval", "home-assistant-set_thermostat").await;
    browser.click(".card.approval button.allow").await;

    // The question: who asks, during which call, in the server's words, and the form.
    let card = browser.wait_text(".card.question", "Which temperature for the hall?").await;
    assert!(card.contains("hub asks you, while running home-assistant-set_thermostat"), "{card}");
    assert!(card.contains("Temperature (°C)") && card.contains("Mode (required)"), "{card}");
    // The server's default shows in its field and goes with the answer unless changed.
    assert_eq!(browser.value(".card.question input[type=number]").await, "20");
    // It survives a reload, and fits the phone.
    browser.reload().await;
    browser.wait_live().await;
    browser.wait_text(".card.question", "Which temperature for the hall?").await;
    let out = browser.sticking_out(390).await;
    assert!(out.is_empty(), "the card does not fit 390 pixels:\n{}", out.join("\n"));
    browser.screenshot("question-card-phone").await;

    // Accept without the required choice: said on the card, nothing sent, the card stays.
    browser.click(".card.question button.accept").await;
    browser.wait_text(".card.question .error", "Mode is required.").await;
    browser.click(".card.question select option[value=eco]").await;
    browser.clear(".card.question input[type=number]").await;
    browser.type_into(".card.question input[type=number]", "23").await;
    browser.click(".card.question button.accept").await;
    browser.wait_gone(".card.question").await;

    // The timeline says what was asked and that it was answered, never the values.
    let step = browser.wait_text(".step.question", "you answered").await;
    assert!(step.contains("Which temperature for the hall?"), "{step}");
    browser.wait_text(".timeline", "The hall is warming up.").await;
    let sent: Vec<String> = model.requests().into_iter().map(|r| r.raw_body).collect();
    assert!(sent.iter().any(|body| body.contains("set to 23 °C, eco")), "{sent:?}");
}

/// Every kind of field a server may ask for, filled in a desktop browser, reaches the server as
/// typed (server-everything's form: text with formats, numbers, yes/no, one and several choices);
/// and a long call after it shows its progress.
#[tokio::test]
async fn browser_every_kind_of_field_reaches_the_server_as_given() {
    let Some(peer) = crate::peers::everything() else { return };
    let Some(browser) = Browser::start(1280, 900).await else { return };
    // Kept whole: its fields drop in order (the server before its database).
    let world = mcp_conversation(&peer, "every").await;
    let (model, id, added) = (&world.model, world.id.clone(), &world.added);
    let base = world.server.base.clone();
    let tool = crate::conversations::model_name_in(added, "trigger-elicitation-request");
    let long = crate::conversations::model_name_in(added, "trigger-long-running-operation");
    model.push(Reply::tool_call(&tool, json!({})));
    model.push(Reply::tool_call(&long, json!({"duration": 3, "steps": 6})));
    model.push(Reply::text("Noted."));

    sign_in(&browser, &base, "root").await;
    browser.goto(&format!("{base}/c/{id}")).await;
    browser.wait_live().await;
    browser.type_into("textarea[name=message]", "ask me").await;
    browser.click("button.send").await;
    browser.wait_text(".card.approval", "trigger-elicitation-request").await;
    browser.click(".card.approval button.allow").await;
    browser.wait_text(".card.question", "Please provide inputs for the following fields:").await;

    browser.screenshot("question-card-desktop").await;
    let field = |name: &str| format!(".card.question [name={name}]");
    browser.type_into(&field("name"), "Ada Lovelace").await;
    browser.click(&field("check")).await;
    // A slip the form catches before anything is sent.
    browser.type_into(&field("email"), "not-an-address").await;
    browser.click(".card.question button.accept").await;
    browser.wait_text(".card.question .error", "give an email address").await;
    browser.clear(&field("email")).await;
    browser.type_into(&field("email"), "ada@example.org").await;
    browser.clear(&field("integer")).await;
    browser.type_into(&field("integer"), "7").await;
    browser.click(".card.question select[name=titledSingleSelectEnum] option[value=hero-3]").await;
    browser.click_text(".card.question .choice", "Salmon").await;
    browser.click(".card.question button.accept").await;
    browser.wait_gone(".card.question").await;
    // A long call says it runs, and how far it has come as the server reports it.
    browser.wait_text(".card.approval", "trigger-long-running-operation").await;
    browser.click(".card.approval button.allow").await;
    browser.wait_text(".step.mcp.running", "of 6").await;
    browser.wait_text(".timeline", "Noted.").await;

    let sent: Vec<String> = model.requests().into_iter().map(|r| r.raw_body).collect();
    let result = sent.iter().find(|b| b.contains("Raw result")).expect("the server's answer");
    for said in [
        "Name: Ada Lovelace",
        "Agreed to terms: true",
        "Email: ada@example.org",
        "Favorite Integer: 7",
        "hero-3",
        "fish-2",
        "fish-1",
    ] {
        assert!(result.contains(said), "{said:?} missing from {result}");
    }
}

/// A page a server asks the person to open, on a phone: the host first, the whole address, a
/// new tab only on the person's click (one that cannot reach back into ours), then the card
/// waiting for "done" before the call goes again.
#[tokio::test]
async fn browser_a_page_to_open_is_opened_only_by_the_persons_click() {
    let Some(peer) = crate::peers::everything() else { return };
    let Some(browser) = Browser::start(390, 844).await else { return };
    // Kept whole: its fields drop in order (the server before its database).
    let world = mcp_conversation(&peer, "shop").await;
    let (model, id, added) = (&world.model, world.id.clone(), &world.added);
    let base = world.server.base.clone();
    let tool = crate::conversations::model_name_in(added, "trigger-url-elicitation");
    let address = "https://pay.example.com/checkout?order=42";
    model.push(Reply::tool_call(&tool, json!({"url": address, "errorPath": true})));
    model.push(Reply::text("Paid."));

    sign_in(&browser, &base, "root").await;
    browser.goto(&format!("{base}/c/{id}")).await;
    browser.wait_live().await;
    browser.type_into("textarea[name=message]", "pay the order").await;
    browser.click("button.send").await;
    // (On a phone the card names the tool by the title its server gives it.)
    browser.wait_text(".card.approval", "pay.example.com/checkout").await;
    browser.click(".card.approval button.allow").await;

    let card = browser.wait_text(".card.question.link", "asks you to open a page").await;
    assert!(card.contains("Leads to modelcontextprotocol.io"), "{card}");
    assert!(card.contains("https://modelcontextprotocol.io"), "{card}");
    let out = browser.sticking_out(390).await;
    assert!(out.is_empty(), "the card does not fit 390 pixels:\n{}", out.join("\n"));
    browser.screenshot("link-card-phone").await;
    // Nothing was opened by itself.
    let ours = browser.tab().await;
    assert_eq!(browser.tabs().await, std::slice::from_ref(&ours));

    browser.click(".card.question.link a.open").await;
    let waiting = browser.wait_text(".card.question.link.waiting", "waits for the page").await;
    assert!(waiting.contains("Done"), "{waiting}");
    // The page opened in a tab of its own, which has no hold on ours.
    let tabs = browser.tabs().await;
    assert_eq!(tabs.len(), 2, "{tabs:?}");
    let opened = tabs.iter().find(|t| **t != ours).unwrap().clone();
    browser.switch_to(&opened).await;
    assert_eq!(browser.script("return window.opener === null").await, json!(true));
    browser.switch_to(&ours).await;

    // The waiting card survives a reload; Done sends the call again, and the server then asks
    // for the page the model named, on a card of its own.
    browser.reload().await;
    browser.wait_live().await;
    browser.click(".card.question.link.waiting button.done").await;
    browser.wait_text(".card.question.link", "pay.example.com").await;
    browser.click(".card.question.link a.open").await;
    browser.wait_text(".timeline", "Paid.").await;
    let step = browser.wait_text(".timeline", "done; the call was sent again").await;
    assert!(step.contains("asked you to open a page on modelcontextprotocol.io"), "{step}");
    assert!(browser.text(".timeline").await.contains("you opened it"));
}

/// An address on a private network, on a desktop: shown with why, never a link; declined.
#[tokio::test]
async fn browser_a_private_address_is_shown_and_never_linked() {
    let Some(peer) = crate::peers::everything() else { return };
    let Some(browser) = Browser::start(1280, 900).await else { return };
    let world = mcp_conversation(&peer, "router").await;
    let (model, id, added) = (&world.model, world.id.clone(), &world.added);
    let base = world.server.base.clone();
    let tool = crate::conversations::model_name_in(added, "trigger-url-elicitation");
    model.push(Reply::tool_call(
        &tool,
        json!({"url": "http://192.168.1.1/admin/reset", "message": "Confirm the reset on the router."}),
    ));
    model.push(Reply::text("Left alone."));

    sign_in(&browser, &base, "root").await;
    browser.goto(&format!("{base}/c/{id}")).await;
    browser.wait_live().await;
    browser.type_into("textarea[name=message]", "reset the router").await;
    browser.click("button.send").await;
    browser.wait_text(".card.approval", "trigger-url-elicitation").await;
    browser.click(".card.approval button.allow").await;
    let card = browser.wait_text(".card.question.link", "Not opened from here").await;
    assert!(card.contains("192.168.1.1") && card.contains("private"), "{card}");
    let links = browser.script("return document.querySelectorAll('.card.question a.open, .card.question a[href*=\"192.168\"]').length").await;
    assert_eq!(links, json!(0));
    browser.screenshot("link-card-desktop").await;
    browser.click(".card.question.link button.decline").await;
    browser.wait_text(".timeline", "Left alone.").await;
    browser.wait_text(".step.question", "you declined").await;
}

/// A server's request for the person's model, on a phone: the request as the server wrote it,
/// its last message changed by the person, then the model's answer before it goes back.
#[tokio::test]
async fn browser_a_servers_request_for_the_model_is_seen_changed_and_its_answer_checked() {
    let Some(peer) = crate::peers::everything() else { return };
    let Some(browser) = Browser::start(390, 844).await else { return };
    // Kept whole: its fields drop in order (the server before its database).
    let world = mcp_conversation(&peer, "writer").await;
    let (model, id, added) = (&world.model, world.id.clone(), &world.added);
    let base = world.server.base.clone();
    let tool = crate::conversations::model_name_in(added, "trigger-sampling-request");
    model.push(Reply::tool_call(&tool, json!({"prompt": "Name a colour.", "maxTokens": 20})));
    model.push(Reply::text("Teal."));
    model.push(Reply::text("The server got its colour."));

    sign_in(&browser, &base, "root").await;
    browser.goto(&format!("{base}/c/{id}")).await;
    browser.wait_live().await;
    browser.type_into("textarea[name=message]", "pick a colour with the server").await;
    browser.click("button.send").await;
    browser.wait_text(".card.approval", "Name a colour.").await;
    browser.click(".card.approval button.allow").await;

    let card = browser.wait_text(".card.question.sampling", "asks your model").await;
    assert!(card.contains("You are a helpful test server."), "{card}");
    assert!(card.contains("At most 20 tokens, temperature 0.7."), "{card}");
    let asked = browser.value(".card.question.sampling textarea[name=message]").await;
    assert!(asked.ends_with("Name a colour."), "{asked}");
    let out = browser.sticking_out(390).await;
    assert!(out.is_empty(), "the card does not fit 390 pixels:\n{}", out.join("\n"));
    browser.screenshot("sampling-card-phone").await;
    browser.clear(".card.question.sampling textarea[name=message]").await;
    browser
        .type_into(".card.question.sampling textarea[name=message]", "Name a dark colour.")
        .await;
    browser.click(".card.question.sampling button.accept").await;

    // The answer, before it goes back: changed again, then sent.
    browser.wait_text(".card.question.sampling", "for this answer").await;
    assert_eq!(browser.value(".card.question.sampling textarea[name=answer]").await, "Teal.");
    browser.screenshot("sampling-answer-phone").await;
    browser.clear(".card.question.sampling textarea[name=answer]").await;
    browser.type_into(".card.question.sampling textarea[name=answer]", "Dark teal.").await;
    browser.click(".card.question.sampling button.accept").await;
    browser.wait_text(".timeline", "The server got its colour.").await;
    browser.wait_text(".timeline", "you sent its answer back").await;

    let bodies = model.chat_bodies();
    assert!(bodies[1].to_string().contains("Name a dark colour."), "{}", bodies[1]);
    assert!(bodies[2].to_string().contains("Dark teal."), "{}", bodies[2]);
}

/// What a call's result shows the person, on a phone: the server's image and the words it meant
/// for the person, under the call's step, live and after a reload.
#[tokio::test]
async fn browser_a_results_image_and_words_for_the_person_show_under_its_step() {
    let Some(peer) = crate::peers::everything() else { return };
    let Some(browser) = Browser::start(390, 844).await else { return };
    // Kept whole: its fields drop in order (the server before its database).
    let world = mcp_conversation(&peer, "show").await;
    let (model, id, added) = (&world.model, world.id.clone(), &world.added);
    let base = world.server.base.clone();
    let tool = crate::conversations::model_name_in(added, "get-annotated-message");
    model.push(Reply::tool_call(&tool, json!({"messageType": "success", "includeImage": true})));
    model.push(Reply::text("Done."));

    sign_in(&browser, &base, "root").await;
    browser.goto(&format!("{base}/c/{id}")).await;
    browser.wait_live().await;
    browser.type_into("textarea[name=message]", "show the status").await;
    browser.click("button.send").await;
    browser.wait_text(".card.approval", "success").await;
    browser.click(".card.approval button.allow").await;
    browser.wait_text(".timeline", "Done.").await;
    for reloaded in [false, true] {
        if reloaded {
            browser.reload().await;
            browser.wait_live().await;
        }
        let shown = browser.wait_text(".step-shown", "Operation completed successfully").await;
        assert!(shown.contains("From show:"), "{shown}");
        // The image is drawn, not only present.
        let drawn = browser
            .script("const i = document.querySelector('.step-shown img'); return i && i.complete && i.naturalWidth > 0")
            .await;
        assert_eq!(drawn, json!(true), "reloaded: {reloaded}");
    }
    let out = browser.sticking_out(390).await;
    assert!(out.is_empty(), "the step does not fit 390 pixels:\n{}", out.join("\n"));
    browser.screenshot("result-shown-phone").await;
}

/// A call the server runs as a task says so in its step while it runs; the icons of the server
/// and its tools come from the instance, and one that is not a picture is not shown.
#[tokio::test]
async fn browser_a_task_runs_in_its_step_and_icons_come_from_the_instance() {
    let Some(peer) = crate::peers::tasks() else { return };
    let Some(browser) = Browser::start(1280, 900).await else { return };
    // Kept whole: its fields drop in order (the server before its database).
    let world = mcp_conversation(&peer, "runner").await;
    let (model, id, added) = (&world.model, world.id.clone(), &world.added);
    let base = world.server.base.clone();
    let report = crate::conversations::model_name_in(added, "report");
    model.push(Reply::tool_call(&report, json!({"topic": "tea", "steps": 8})));
    model.push(Reply::text("Report written."));

    sign_in(&browser, &base, "root").await;
    browser.goto(&format!("{base}/c/{id}")).await;
    browser.wait_live().await;
    browser.type_into("textarea[name=message]", "write the tea report").await;
    browser.click("button.send").await;
    browser.wait_text(".card.approval", "report").await;
    // The tool's icon, drawn from the instance's own address.
    let drawn = "const i = document.querySelector('.card.approval img.mcp-icon'); \
                 return !!i && i.complete && i.naturalWidth > 0 \
                 && new URL(i.src).origin === location.origin;";
    wait_true(&browser, drawn).await;
    browser.click(".card.approval button.allow").await;
    let running =
        browser.wait_text(".step.mcp.running", "running as a task on the server — Stage").await;
    assert!(running.contains("reading about tea"), "{running}");
    browser.wait_text(".timeline", "Report written.").await;

    browser.goto(&format!("{base}/settings/tools")).await;
    browser.wait_live().await;
    browser.wait_text(".card.server", "runner").await;
    let server_icon = "const i = document.querySelector('.card.server header img.mcp-icon'); \
                       return !!i && i.complete && i.naturalWidth > 0;";
    wait_true(&browser, server_icon).await;
    browser.click(".card.server details.tool-list summary").await;
    // clarify names an SVG that calls itself a PNG: its icon stays out of sight.
    let hidden = "const rows = [...document.querySelectorAll('.card.server li.tool')]; \
                  const row = rows.find(r => r.textContent.includes('clarify')); \
                  const i = row && row.querySelector('img.mcp-icon'); \
                  return !!i && i.complete && getComputedStyle(i).display === 'none';";
    wait_true(&browser, hidden).await;
    browser.scroll_to(".card.server details.tool-list").await;
    browser.screenshot("tool-icons-desktop").await;
}

/// Polls a script until it returns true (five seconds at most).
async fn wait_true(browser: &Browser, script: &str) {
    for _ in 0..50 {
        if browser.script(script).await == json!(true) {
            return;
        }
        tokio::time::sleep(std::time::Duration::from_millis(100)).await;
    }
    panic!("never true: {script}");
}

/// A result's sound plays in the step; its link to a resource is attached to the next message
/// with one click, and that message reads it.
#[tokio::test]
async fn browser_a_results_sound_plays_and_its_link_is_attached_to_the_next_message() {
    let Some(peer) = crate::peers::tasks() else { return };
    let Some(browser) = Browser::start(390, 844).await else { return };
    // Kept whole: its fields drop in order (the server before its database).
    let world = mcp_conversation(&peer, "runner").await;
    let (model, id, added) = (&world.model, world.id.clone(), &world.added);
    let base = world.server.base.clone();
    let chime = crate::conversations::model_name_in(added, "chime");
    model.push(Reply::tool_call(&chime, json!({})));
    model.push(Reply::text("Listen."));
    model.push(Reply::text("It says to play softly."));

    sign_in(&browser, &base, "root").await;
    browser.goto(&format!("{base}/c/{id}")).await;
    browser.wait_live().await;
    browser.type_into("textarea[name=message]", "play the chime").await;
    browser.click("button.send").await;
    browser.wait_text(".card.approval", "chime").await;
    browser.click(".card.approval button.allow").await;
    browser.wait_text(".timeline", "Listen.").await;
    let players = browser
        .script(
            "return [...document.querySelectorAll('.step-shown audio.shown-audio')] \
             .map(a => a.src.slice(0, 22));",
        )
        .await;
    assert_eq!(players, json!(["data:audio/wav;base64,"]));
    let named = browser.text(".step-shown").await;
    assert!(named.contains("Audio not played"), "{named}");
    let out = browser.sticking_out(390).await;
    assert!(out.is_empty(), "the step does not fit 390 pixels:\n{}", out.join("\n"));
    browser.scroll_to(".step-shown").await;
    browser.screenshot("result-sound-phone").await;

    browser.click(".step-shown button.attach-link").await;
    browser.wait_text("ul.chips", "Chime sheet music").await;
    browser.type_into("textarea[name=message]", "what does the sheet say?").await;
    browser.click("button.send").await;
    browser.wait_text(".timeline", "It says to play softly.").await;
    let asked = model.chat_bodies().last().unwrap().to_string();
    assert!(asked.contains("C E G C, softly."), "{asked}");
}
