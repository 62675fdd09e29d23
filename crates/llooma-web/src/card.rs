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
