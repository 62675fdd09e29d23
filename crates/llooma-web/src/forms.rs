//! What the settings and admin pages share: send one change and reload the page from the
//! server (so what is shown is always what is stored), and read a field.

use leptos::prelude::*;
use serde_json::Value;

use crate::api;

/// Sends one change; reloads `reload` when it worked, shows why in `error` when it did not.
pub fn change(
    method: &'static str,
    path: String,
    body: Value,
    csrf: String,
    error: RwSignal<Option<String>>,
    reload: impl Into<String>,
) {
    let reload = reload.into();
    api::spawn(async move {
        match api::call(method, &path, Some(body), Some(&csrf)).await {
            Ok(_) => api::go(&reload),
            Err(failure) => error.set(Some(failure.message)),
        }
    });
}

/// The text in an input field (empty before hydration).
pub fn input_value(node: NodeRef<leptos::html::Input>) -> String {
    node.get().map(|i| i.value()).unwrap_or_default()
}

/// The text in a text area (empty before hydration).
pub fn text_value(node: NodeRef<leptos::html::Textarea>) -> String {
    node.get().map(|t| t.value()).unwrap_or_default()
}

/// A Remove button that asks first, in place: `question`, then Remove (`.yes`) or Keep (`.no`).
/// `remove` runs only on the second Remove, so one stray click loses nothing.
#[component]
pub fn RemoveAfterAsking(
    /// What is asked, e.g. "Remove this server and its remembered consent?".
    #[prop(into)]
    question: String,
    /// The word on both buttons.
    #[prop(default = "Remove")]
    label: &'static str,
    remove: Callback<()>,
) -> impl IntoView {
    let asking = RwSignal::new(false);
    view! {
        <button class="remove" type="button" hidden=move || asking.get() on:click=move |_| asking.set(true)>
            {label}
        </button>
        <span class="confirm" role="group" hidden=move || !asking.get()>
            <span class="question">{question}</span>
            <button
                class="danger yes"
                type="button"
                on:click=move |_| {
                    asking.set(false);
                    remove.run(());
                }
            >
                {label}
            </button>
            <button class="no" type="button" on:click=move |_| asking.set(false)>"Keep"</button>
        </span>
    }
}
