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
