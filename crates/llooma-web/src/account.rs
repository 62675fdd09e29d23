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
    view! {
        <div class="page">
            <TopBar me=me.clone() />
            <main class="narrow settings account">
                <h1>"Settings → Account"</h1>
                <p class="who-am-i">
                    {format!("Signed in as {} ({}), {role} of this instance.", me.display_name, me.username)}
                </p>
                <p><a class="usage-link" href="/settings/usage">"Your usage, spend and limits"</a></p>
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
