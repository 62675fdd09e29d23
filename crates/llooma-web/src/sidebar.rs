//! The account's conversations: on the home page, and beside a conversation as a sidebar
//! (folded away on a phone until asked for). Newest first, a page at a time; a search over
//! titles and messages (the API's `?q=`, the database's full-text index); rename and delete
//! (asked first) in place; times in the reader's own time zone.

use leptos::prelude::*;
use llooma_types::{ConversationView, encode_query_value};
use serde_json::json;

use crate::api;

/// A time written by the reader's browser, in their zone: the server writes UTC (it cannot
/// know the zone) and the browser replaces it once live, so both render the same first.
#[component]
pub fn LocalTime(rfc3339: String) -> impl IntoView {
    let shown = RwSignal::new(utc_short(&rfc3339));
    let at = rfc3339.clone();
    Effect::new(move |_| {
        let local = api::local_time(&at);
        if !local.is_empty() {
            shown.set(local);
        }
    });
    view! { <time datetime=rfc3339>{move || shown.get()}</time> }
}

/// `2026-11-30T06:40:00Z` -> `2026-11-30 06:40 UTC`.
fn utc_short(rfc3339: &str) -> String {
    format!("{} UTC", rfc3339.get(..16).unwrap_or(rfc3339).replace('T', " "))
}

/// The list of conversations with its search; `current` is the one the page shows.
#[component]
pub fn ConversationList(
    conversations: Vec<ConversationView>,
    older: Option<String>,
    current: Option<String>,
    csrf: String,
) -> impl IntoView {
    let first_page = StoredValue::new(conversations.clone());
    let shown = RwSignal::new(conversations);
    let searching = RwSignal::new(false);
    let error = RwSignal::new(None::<String>);
    // Answers to an older search that arrive late are dropped.
    let asked = StoredValue::new(0_u32);
    let search = move |ev: leptos::ev::Event| {
        let q = event_target_value(&ev);
        asked.update_value(|n| *n += 1);
        let this = asked.get_value();
        if q.trim().is_empty() {
            searching.set(false);
            shown.set(first_page.get_value());
            return;
        }
        searching.set(true);
        api::spawn(async move {
            let path = format!("/api/v1/conversations?q={}", encode_query_value(&q));
            let answer = api::call("GET", &path, None, None).await;
            if asked.get_value() != this {
                return;
            }
            match answer.map(serde_json::from_value::<Vec<ConversationView>>) {
                Ok(Ok(found)) => {
                    error.set(None);
                    shown.set(found);
                }
                Ok(Err(_)) => error.set(Some("The search answer was unreadable.".into())),
                Err(failure) => error.set(Some(failure.message)),
            }
        });
    };
    let csrf = StoredValue::new(csrf);
    let current = StoredValue::new(current);
    view! {
        <div class="conversation-list">
            <input
                type="search"
                name="search"
                placeholder="Search conversations"
                aria-label="Search conversations"
                on:input=search
            />
            <p class="error" role="alert">{move || error.get()}</p>
            <p class="hint" hidden=move || !shown.with(Vec::is_empty)>
                {move || if searching.get() { "Nothing found." } else { "No conversation yet." }}
            </p>
            <ul class="conversations">
                <For
                    each=move || shown.get()
                    key=|c| (c.id.clone(), c.title.clone())
                    children=move |c| {
                        let here = current.with_value(|id| id.as_deref() == Some(c.id.as_str()));
                        view! { <ConversationItem c here shown csrf=csrf.get_value() error /> }
                    }
                />
            </ul>
            <nav class="row pages" hidden=move || searching.get()>
                {older
                    .map(|before| {
                        view! {
                            <a class="older" href=format!("/?before={before}")>
                                "Older conversations"
                            </a>
                        }
                    })}
            </nav>
        </div>
    }
}

/// One conversation: its link and time, Rename in place, Delete after asking.
#[component]
fn ConversationItem(
    c: ConversationView,
    here: bool,
    shown: RwSignal<Vec<ConversationView>>,
    csrf: String,
    error: RwSignal<Option<String>>,
) -> impl IntoView {
    let renaming = RwSignal::new(false);
    let confirming = RwSignal::new(false);
    let name = NodeRef::<leptos::html::Input>::new();
    let id = StoredValue::new(c.id.clone());
    let csrf = StoredValue::new(csrf);
    let path = move || format!("/api/v1/conversations/{}", id.get_value());
    let save = move || {
        let title = name.get().map(|i| i.value()).unwrap_or_default();
        renaming.set(false);
        if title.trim().is_empty() {
            return;
        }
        api::spawn(async move {
            let body = json!({"title": title.trim()});
            match api::call("PATCH", &path(), Some(body), Some(&csrf.get_value())).await {
                Ok(changed) => {
                    if let Ok(changed) = serde_json::from_value::<ConversationView>(changed) {
                        if here {
                            api::set_title(&format!("{} · Llooma", changed.title));
                            api::set_text(".chat-head .title", &changed.title);
                        }
                        shown.update(|list| {
                            if let Some(c) = list.iter_mut().find(|c| c.id == changed.id) {
                                *c = changed;
                            }
                        });
                    }
                }
                Err(failure) => error.set(Some(failure.message)),
            }
        });
    };
    let delete = move |_| {
        confirming.set(false);
        api::spawn(async move {
            match api::call("DELETE", &path(), None, Some(&csrf.get_value())).await {
                Ok(_) if here => api::go("/"),
                Ok(_) => shown.update(|list| list.retain(|c| c.id != id.get_value())),
                Err(failure) => error.set(Some(failure.message)),
            }
        });
    };
    let title = c.title.clone();
    view! {
        <li class:here=here data-id=c.id.clone()>
            <Show
                when=move || renaming.get()
                fallback=move || {
                    view! {
                        <a href=format!("/c/{}", id.get_value())>{title.clone()}</a>
                    }
                }
            >
                <input
                    node_ref=name
                    name="rename"
                    aria-label="New title"
                    value=c.title.clone()
                    on:keydown=move |ev: leptos::ev::KeyboardEvent| {
                        if ev.key() == "Enter" {
                            ev.prevent_default();
                            save();
                        } else if ev.key() == "Escape" {
                            renaming.set(false);
                        }
                    }
                />
                <button class="save-title" type="button" on:click=move |_| save()>
                    "Save"
                </button>
            </Show>
            <span class="meta">
                <LocalTime rfc3339=c.updated_at.clone() />
            </span>
            <span class="item-actions" hidden=move || renaming.get() || confirming.get()>
                <button class="rename" type="button" title="Rename" on:click=move |_| renaming.set(true)>
                    "Rename"
                </button>
                <button class="delete" type="button" title="Delete" on:click=move |_| confirming.set(true)>
                    "Delete"
                </button>
            </span>
            <span class="confirm" hidden=move || !confirming.get()>
                "Delete this conversation and its messages?"
                <button class="danger yes" type="button" on:click=delete>"Delete"</button>
                <button class="no" type="button" on:click=move |_| confirming.set(false)>
                    "Keep"
                </button>
            </span>
        </li>
    }
}
