//! Settings → Account: who is signed in, and deleting the account with everything of it.

use leptos::prelude::*;
use serde_json::json;

use crate::api;
use crate::forms::input_value;
use crate::layout::TopBar;
use crate::model::Me;

#[component]
pub fn SettingsAccount(me: Me) -> impl IntoView {
    let csrf = me.csrf_token.clone();
    let error = RwSignal::new(None::<String>);
    let asking = RwSignal::new(false);
    let password = NodeRef::<leptos::html::Input>::new();
    let delete = move |_| {
        let (csrf, typed) = (csrf.clone(), input_value(password));
        asking.set(false);
        error.set(None);
        api::spawn(async move {
            let body = json!({"password": typed});
            match api::call("DELETE", "/api/v1/me", Some(body), Some(&csrf)).await {
                Ok(_) => api::go("/"),
                Err(failure) => error.set(Some(failure.message)),
            }
        });
    };
    let role = if me.admin { "an administrator" } else { "a member" };
    // Bringing conversations in: the file goes as it is; the report says what came in.
    let importing = RwSignal::new(false);
    let report = RwSignal::new(None::<llooma_types::ImportReport>);
    let import_error = RwSignal::new(None::<String>);
    let import = {
        let csrf = me.csrf_token.clone();
        move |ev: leptos::ev::Event| {
            let Some(file) = api::picked_files(&ev).into_iter().next() else { return };
            let csrf = csrf.clone();
            importing.set(true);
            report.set(None);
            import_error.set(None);
            api::spawn(async move {
                match api::upload("/api/v1/import", &file, &csrf).await {
                    Ok(answer) => match serde_json::from_value(answer) {
                        Ok(done) => report.set(Some(done)),
                        Err(err) => import_error.set(Some(err.to_string())),
                    },
                    Err(failure) => import_error.set(Some(failure.message)),
                }
                importing.set(false);
            });
        }
    };
    view! {
        <div class="page">
            <TopBar me=me.clone() />
            <main class="narrow settings account">
                <h1>"Settings → Account"</h1>
                <p class="who-am-i">
                    {format!("Signed in as {} ({}), {role} of this instance.", me.display_name, me.username)}
                </p>
                <p><a class="usage-link" href="/settings/usage">"Your usage, spend and limits"</a></p>
                <h2>"Take your data out"</h2>
                <section class="card stack take-out">
                    <p>
                        "One JSON file with everything of your account: conversations with their replies' timelines, personas and their memory, prompts, MCP servers (never their tokens) and settings. It can be brought into another account or instance below."
                    </p>
                    <p><a class="export-account" href="/api/v1/me/export" download="">"Download everything"</a></p>
                </section>
                <h2>"Bring conversations in"</h2>
                <section class="card stack import">
                    <p>
                        "From a conversation exported from Llooma as JSON, an account's file from Download everything (its conversations and personas), or from ChatGPT: its data export (Settings → Data controls → Export) sends a zip holding conversations.json; choose that file. The person's and the model's words come in with their times; images, files and tools' output do not."
                    </p>
                    <label class="file-button">
                        {move || if importing.get() { "Bringing them in…" } else { "Choose a file to import" }}
                        <input
                            name="import-file"
                            type="file"
                            accept=".json,application/json"
                            disabled=move || importing.get()
                            on:change=import
                        />
                    </label>
                    <p class="error" role="alert">{move || import_error.get()}</p>
                    {move || report.get().map(import_report)}
                </section>
                <h2>"Delete your account"</h2>
                <section class="card stack delete-account">
                    <p>
                        "Deletes the account and everything in it, at once and for good: conversations with their files, personas and their memory, prompts, MCP servers and the consent you gave them, bots, usage. Download what you want to keep first (Export, at the top of each conversation)."
                    </p>
                    <label>
                        "Your password, to confirm"
                        <input node_ref=password name="delete-password" type="password" autocomplete="current-password" />
                    </label>
                    <p class="error" role="alert">{move || error.get()}</p>
                    <div class="row">
                        <button class="danger ask-delete" type="button" hidden=move || asking.get() on:click=move |_| asking.set(true)>
                            "Delete my account"
                        </button>
                        <span class="confirm" role="group" hidden=move || !asking.get()>
                            <span class="question">"Delete your account and everything in it? This cannot be undone."</span>
                            <button class="danger yes" type="button" on:click=delete>"Delete my account"</button>
                            <button class="no" type="button" on:click=move |_| asking.set(false)>"Keep it"</button>
                        </span>
                    </div>
                </section>
            </main>
        </div>
    }
}

/// What an import brought in, and what it left out and why.
fn import_report(report: llooma_types::ImportReport) -> impl IntoView {
    let from = if report.source == "chatgpt" { "ChatGPT" } else { "Llooma" };
    let plural = |n: usize, one: &str, many: &str| {
        if n == 1 { format!("1 {one}") } else { format!("{n} {many}") }
    };
    let brought = format!(
        "Brought in from {from}: {} with {}.",
        plural(report.conversations, "conversation", "conversations"),
        plural(report.messages, "message", "messages")
    );
    let brought = if report.personas > 0 {
        format!("{brought} And {}.", plural(report.personas, "persona", "personas"))
    } else {
        brought
    };
    let left = (report.skipped_messages > 0).then(|| {
        format!(
            "{} left out (system messages, tools' output).",
            plural(report.skipped_messages, "message", "messages")
        )
    });
    let skipped = report
        .skipped
        .into_iter()
        .map(|s| view! { <li>{format!("{}: {}", s.title, s.reason)}</li> })
        .collect_view();
    view! {
        <div class="import-report" role="status">
            <p class="brought">{brought} " " <a href="/">"See them"</a></p>
            {left.map(|left| view! { <p class="left-out">{left}</p> })}
            <ul class="skipped">{skipped}</ul>
        </div>
    }
}
