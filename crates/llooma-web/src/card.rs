//! What every card waiting for an answer shares: sending the answer, and the time left.

use leptos::prelude::*;
use llooma_types::ApprovalCardView;
use serde_json::Value;

use crate::api;

/// Sends a card's answer; the card goes once it is taken, or says why it was not.
pub fn send_answer(
    id: &str,
    body: Value,
    csrf: &str,
    cards: RwSignal<Vec<ApprovalCardView>>,
    busy: RwSignal<bool>,
    error: RwSignal<Option<String>>,
) {
    let path = format!("/api/v1/approvals/{id}/answer");
    let (id, csrf) = (id.to_owned(), csrf.to_owned());
    busy.set(true);
    error.set(None);
    api::spawn(async move {
        match api::call("POST", &path, Some(body), Some(&csrf)).await {
            Ok(_) => cards.update(|list| list.retain(|c| c.id != id)),
            Err(failure) => {
                error.set(Some(failure.message));
                busy.set(false);
            }
        }
    });
}

/// A card's time left ("Answer within 1:42"), or `expired` once it is up.
pub fn countdown(
    deadline_ms: i64,
    now: RwSignal<i64>,
    expired: &'static str,
) -> impl Fn() -> String + Copy {
    move || {
        let left = (deadline_ms - now.get()).max(0) / 1000;
        if left == 0 {
            expired.to_owned()
        } else {
            format!("Answer within {}:{:02}", left / 60, left % 60)
        }
    }
}

/// One of a card's answer buttons, disabled while an answer is on its way.
pub fn answer_button(
    class: &'static str,
    label: &'static str,
    busy: RwSignal<bool>,
    answer: impl Fn() + 'static,
) -> impl IntoView {
    view! {
        <button class=class type="button" disabled=move || busy.get() on:click=move |_| answer()>
            {label}
        </button>
    }
}

/// A server's or tool's icon as the instance serves it (never from the server's own address);
/// it stays out of sight when there is none to show.
#[component]
pub fn McpIcon(src: String) -> impl IntoView {
    let failed = RwSignal::new(false);
    let image = NodeRef::<leptos::html::Img>::new();
    // An icon that failed before the page came alive fired its error with nobody listening.
    Effect::new(move |_| {
        if let Some(image) = image.get()
            && image.complete()
            && image.natural_width() == 0
        {
            failed.set(true);
        }
    });
    view! {
        <img
            node_ref=image
            class="mcp-icon"
            class:failed=move || failed.get()
            src=src
            alt=""
            width="20"
            height="20"
            loading="lazy"
            on:error=move |_| failed.set(true)
        />
    }
}

/// On a card of another conversation than the one on screen: where it comes from.
pub fn elsewhere_note(elsewhere: bool, conversation_id: &str) -> impl IntoView + use<> {
    let href = format!("/c/{conversation_id}");
    elsewhere.then(|| {
        view! {
            <p class="elsewhere">
                <a href=href>"In another conversation"</a>
            </p>
        }
    })
}
