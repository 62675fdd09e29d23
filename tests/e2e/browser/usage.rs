//! Usage in the browser: an administrator prices a model, sets the currency and the limits,
//! sees every account's usage; a person sees their own and their limits, and a reply a limit
//! refuses is told in the composer, with the message kept.

use llooma_fake_model::{FakeModel, Reply};
use serde_json::json;

use super::driver::Browser;
use super::{sign_in, until_api, with_conversations};
use crate::support::{PASSWORD, Server, TestDb};

#[tokio::test]
async fn browser_usage_is_priced_limited_and_shown_to_administrators_and_to_each_person() {
    let Some(browser) = Browser::start(1280, 900).await else { return };
    let model = FakeModel::start([]).await.unwrap();
    let db = TestDb::new();
    let server = Server::start(&db, &[("PROVIDER_ALLOWED_ORIGINS", &model.origin())]);
    let base = server.base.clone();
    let (mut api, ids) = with_conversations(&server, &model, 1).await;
    api.send("PATCH", "/api/v1/admin/settings", Some(json!({"registrationOpen": true}))).await;
    let mut bob = server.tab();
    bob.register("bob", PASSWORD).await;
    let bob_id = bob.get("/api/v1/me").await.json["account"]["id"].as_str().unwrap().to_owned();

    // Prices, currency and the default limits, set on the page.
    sign_in(&browser, &base, "root").await;
    browser.goto(&format!("{base}/admin/usage")).await;
    browser.wait_live().await;
    browser.wait_text(".no-prices", "No model has a price yet").await;
    browser.type_into("input[name=price-model]", "fake-model").await;
    browser.type_into("input[name=price-input]", "2").await;
    browser.type_into("input[name=price-output]", "8").await;
    browser.click("button.set-price-button").await;
    until_api(&mut api, "/api/v1/admin/prices", "the price", |p| p[0]["output"] == 8.0).await;
    browser.wait_text(".price-list tr.price", "fake-model").await;
    browser.wait_live().await;
    browser.clear("input[name=currency]").await;
    browser.type_into("input[name=currency]", "chf").await;
    browser.click("button.save-currency").await;
    until_api(&mut api, "/api/v1/admin/settings", "the currency", |s| s["currency"] == "CHF").await;
    // Each change reloads the page once stored: its reload is over before the next step.
    browser.wait_text(".usage-totals .spend", "CHF").await;
    browser.wait_live().await;
    browser.type_into(".default-limits input[name=tokens-per-day]", "5000").await;
    browser.click(".default-limits button.save-limits").await;
    until_api(&mut api, "/api/v1/admin/limits", "the defaults", |l| l["tokensPerDay"] == 5000)
        .await;

    // Bob gets limits of his own: two replies a minute, nothing else.
    browser.wait_live().await;
    let bob_row = "tr.account[data-username=bob]";
    browser.wait_text(&format!("{bob_row} summary"), "The defaults: 5,000 tokens a day").await;
    browser.click(&format!("{bob_row} summary")).await;
    browser.clear(&format!("{bob_row} input[name=tokens-per-day]")).await;
    browser.type_into(&format!("{bob_row} input[name=turns-per-minute]"), "2").await;
    browser.click(&format!("{bob_row} button.save-limits")).await;
    let path = format!("/api/v1/admin/accounts/{bob_id}/limits");
    let own = until_api(&mut api, &path, "Bob's limits", |l| !l["own"].is_null()).await;
    assert_eq!(
        own["own"],
        json!({"tokensPerDay": null, "tokensPerMonth": null, "spendPerDay": null, "spendPerMonth": null, "turnsPerMinute": 2})
    );
    browser.wait_text(&format!("{bob_row} summary"), "Its own: 2 replies a minute").await;
    browser.wait_live().await;

    // A reply is counted and priced; the administrator's page shows it.
    model.push(Reply::text("Counted.").usage(1_000, 250));
    browser.goto(&format!("{base}/c/{}", ids[0])).await;
    browser.wait_live().await;
    browser.type_into("textarea[name=message]", "count this").await;
    browser.click("button.send").await;
    browser.wait_text(".timeline .msg.reply", "Counted.").await;
    browser.goto(&format!("{base}/admin/usage")).await;
    browser.wait_live().await;
    browser.wait_text(".usage-totals .input", "1,000").await;
    // 1,000 × 2 + 250 × 8 millionths of a franc.
    browser.wait_text(".usage-totals .spend", "0.0040 CHF").await;
    browser.wait_text("tr.account[data-username=root]", "1,250").await;
    browser.wait_text(&format!("{bob_row} summary"), "Its own: 2 replies a minute").await;
    let bars =
        browser.script("return document.querySelectorAll('.usage-chart rect.bar').length").await;
    assert_eq!(bars, 30, "a bar for every day of the period");
    let csv = browser.script("return document.querySelector('a.csv').getAttribute('href')").await;
    assert_eq!(csv, "/api/v1/admin/usage.csv?days=30");
    browser.screenshot("admin-usage").await;

    // The person's own page: their usage and how much of each limit is used.
    browser.goto(&format!("{base}/settings/usage?days=7")).await;
    browser.wait_live().await;
    browser.wait_text(".usage-totals .output", "250").await;
    browser.wait_text(".limits-standing .used", "1,250 of 5,000 tokens").await;
    browser.wait_text(".usage-models", "fake-model").await;
    browser.screenshot("settings-usage").await;

    // Over the limit: the composer says which limit and when it resets; nothing is lost.
    let tight = json!({"own": {"tokensPerDay": 1_300}});
    let me = api.get("/api/v1/me").await.json["account"]["id"].as_str().unwrap().to_owned();
    let limits = format!("/api/v1/admin/accounts/{me}/limits");
    assert_eq!(api.send("PUT", &limits, Some(tight)).await.status, 200);
    browser.goto(&format!("{base}/c/{}", ids[0])).await;
    browser.wait_live().await;
    let asked = model.requests().len();
    browser.type_into("textarea[name=message]", "one more please, with a long question").await;
    browser.click("button.send").await;
    browser.wait_text(".composer .error", "limit of 1300 tokens a day").await;
    assert!(browser.text(".composer .error").await.contains("UTC"));
    assert_eq!(
        browser.value("textarea[name=message]").await,
        "one more please, with a long question"
    );
    assert_eq!(model.requests().len(), asked, "the model was not asked");

    // Bob finds no administrator's page.
    browser.click("button.signout").await;
    browser.wait_text("h2", "Sign in").await;
    sign_in(&browser, &base, "bob").await;
    browser.goto(&format!("{base}/admin/usage")).await;
    browser.wait_text("h1", "Not found").await;
    browser.goto(&format!("{base}/settings/usage")).await;
    browser.wait_live().await;
    browser.wait_text(".limits-standing .turns", "At most 2 replies a minute.").await;
}

#[tokio::test]
async fn browser_a_person_deletes_their_account_from_settings_after_giving_their_password() {
    let Some(browser) = Browser::start(390, 844).await else { return };
    let model = FakeModel::start([]).await.unwrap();
    let db = TestDb::new();
    let server = Server::start(&db, &[("PROVIDER_ALLOWED_ORIGINS", &model.origin())]);
    let base = server.base.clone();
    let (mut api, _) = with_conversations(&server, &model, 1).await;
    api.send("PATCH", "/api/v1/admin/settings", Some(json!({"registrationOpen": true}))).await;
    let mut bob = server.tab();
    bob.register("bob", PASSWORD).await;
    bob.post("/api/v1/conversations", json!({"title": "Bob's secrets"})).await;

    sign_in(&browser, &base, "bob").await;
    browser.click(".topbar a.who").await;
    browser.wait_text("h1", "Settings → Account").await;
    browser.wait_live().await;
    browser.type_into("input[name=delete-password]", "not my password").await;
    browser.click("button.ask-delete").await;
    browser.wait_text(".delete-account .confirm .question", "cannot be undone").await;
    browser.click(".delete-account .confirm button.yes").await;
    browser
        .wait_text(".delete-account .error", "The password is wrong; nothing was deleted.")
        .await;
    assert_eq!(bob.get("/api/v1/conversations").await.json.as_array().unwrap().len(), 1);
    browser.screenshot("settings-account-phone").await;

    browser.clear("input[name=delete-password]").await;
    browser.type_into("input[name=delete-password]", PASSWORD).await;
    browser.click("button.ask-delete").await;
    browser.click(".delete-account .confirm button.yes").await;
    browser.wait_text("h2", "Sign in").await;
    assert_eq!(server.tab().login("bob", PASSWORD).await.status, 401, "the account is gone");
    let accounts = api.get("/api/v1/admin/accounts").await.json;
    assert_eq!(accounts.as_array().unwrap().len(), 1, "{accounts}");
}
