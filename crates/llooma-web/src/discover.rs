//! Settings → Tools → Discover (the instance's catalogue with usage and ratings), the
//! registration page the catalogue and deeplinks open, and Admin → Catalogue.

use leptos::either::Either;
use leptos::prelude::*;
use llooma_types::CatalogueEntryView;
use serde_json::json;

use crate::forms::{change, input_value};
use crate::layout::{AdminNav, ToolsNav, TopBar};
use crate::model::Me;
use crate::review::AddServerForm;

fn rating_words(entry: &CatalogueEntryView) -> String {
    match entry.rating.average {
        Some(average) => format!(
            "★ {average:.1} ({} rating{})",
            entry.rating.count,
            if entry.rating.count == 1 { "" } else { "s" }
        ),
        None => "Not rated yet".to_owned(),
    }
}

fn usage_words(entry: &CatalogueEntryView) -> String {
    format!(
        "In use: {} · {} call{} in the last 30 days",
        entry.usage.accounts,
        entry.usage.calls_last_30_days,
        if entry.usage.calls_last_30_days == 1 { "" } else { "s" }
    )
}

#[component]
pub fn Discover(
    me: Me,
    entries: Vec<CatalogueEntryView>,
    tags: Vec<String>,
    query: String,
    tag: String,
    can_add: bool,
) -> impl IntoView {
    let csrf = me.csrf_token.clone();
    let error = RwSignal::new(None::<String>);
    let here = if query.is_empty() && tag.is_empty() {
        "/settings/tools/discover".to_owned()
    } else {
        format!(
            "/settings/tools/discover?q={}&tag={}",
            llooma_types::encode_query_value(&query),
            llooma_types::encode_query_value(&tag)
        )
    };
    let empty = entries.is_empty();
    view! {
        <div class="page">
            <TopBar me=me.clone() />
            <main class="narrow settings">
                <h1>"Settings → Tools → Discover"</h1>
                <ToolsNav />
                <p class="hint">
                    "MCP servers your administrators suggest. Registering opens the add form: you test the server, review its tools, then consent."
                </p>
                {(!can_add)
                    .then(|| {
                        view! { <p class="warning cannot-add">{llooma_types::ADD_SERVERS_REFUSED}</p> }
                    })}
                <form class="row search" method="get" action="/settings/tools/discover">
                    <input name="q" type="search" placeholder="Search" value=query />
                    <select name="tag">
                        <option value="" selected=tag.is_empty()>"Every tag"</option>
                        {tags
                            .into_iter()
                            .map(|t| {
                                let chosen = t == tag;
                                view! { <option value=t.clone() selected=chosen>{t.clone()}</option> }
                            })
                            .collect_view()}
                    </select>
                    <button type="submit">"Search"</button>
                </form>
                <p class="error" role="alert">{move || error.get()}</p>
                {empty.then(|| view! { <p class="hint">"Nothing in the catalogue matches."</p> })}
                {entries
                    .into_iter()
                    .map(|entry| {
                        let rating_path = format!("/api/v1/mcp/catalogue/{}/rating", entry.id);
                        let stars = (1..=5u8)
                            .map(|n| {
                                let (csrf, path, here) = (csrf.clone(), rating_path.clone(), here.clone());
                                let mine = entry.rating.mine == Some(n);
                                view! {
                                    <button
                                        class=if mine { "star mine" } else { "star" }
                                        type="button"
                                        data-stars=n.to_string()
                                        title=format!("{n} star{}", if n == 1 { "" } else { "s" })
                                        on:click=move |_| {
                                            change("PUT", path.clone(), json!({"stars": n}), csrf.clone(), error, here.clone())
                                        }
                                    >
                                        {if entry.rating.mine.is_some_and(|m| m >= n) { "★" } else { "☆" }}
                                    </button>
                                }
                            })
                            .collect_view();
                        let withdraw = entry
                            .rating
                            .mine
                            .map(|_| {
                                let (csrf, path, here) = (csrf.clone(), rating_path.clone(), here.clone());
                                view! {
                                    <button
                                        class="unrate"
                                        type="button"
                                        on:click=move |_| {
                                            change("DELETE", path.clone(), json!({}), csrf.clone(), error, here.clone())
                                        }
                                    >
                                        "Withdraw my rating"
                                    </button>
                                }
                            });
                        view! {
                            <article class="card catalogue-entry" data-entry=entry.id.clone()>
                                <header class="row">
                                    {(!entry.icon.is_empty()).then(|| view! { <span class="icon">{entry.icon.clone()}</span> })}
                                    <b class="label">{entry.label.clone()}</b>
                                    {if entry.added {
                                        Either::Left(view! { <span class="status added">"Added"</span> })
                                    } else {
                                        Either::Right(view! { <a class="register button" href=entry.register_link.clone()>"Register"</a> })
                                    }}
                                </header>
                                <p class="description">{entry.description.clone()}</p>
                                <p class="address">{entry.address.clone()}</p>
                                {entry
                                    .token_needed
                                    .then(|| view! { <p class="hint">"Needs a token. " {entry.token_help.clone()}</p> })}
                                <p class="tags">
                                    {entry.tags.iter().map(|t| view! { <span class="tag">{t.clone()}</span> }).collect_view()}
                                </p>
                                <p class="usage">{usage_words(&entry)}</p>
                                <div class="row rating">
                                    <span class="average">{rating_words(&entry)}</span>
                                    <span class="stars">{stars}</span>
                                    {withdraw}
                                </div>
                            </article>
                        }
                    })
                    .collect_view()}
            </main>
        </div>
    }
}

/// The registration page: the add form, pre-filled from a catalogue entry or a deeplink.
#[component]
pub fn AddServer(
    me: Me,
    label: String,
    address: String,
    /// What the link carried that could be a credential, dropped: credential-like parameters
    /// (of the link or inside the address), the address's user name and password, and its
    /// `#fragment`. Tokens are typed, never linked.
    dropped: Vec<String>,
    can_add: bool,
    /// The catalogue entry at this address, if any (its description and token help).
    entry: Option<CatalogueEntryView>,
) -> impl IntoView {
    let token_help = entry.as_ref().filter(|e| e.token_needed).map(|e| {
        if e.token_help.is_empty() {
            "This server needs a token.".to_owned()
        } else {
            format!("This server needs a token. {}", e.token_help)
        }
    });
    view! {
        <div class="page">
            <TopBar me=me.clone() />
            <main class="narrow settings">
                <h1>"Add an MCP server"</h1>
                <ToolsNav />
                {entry
                    .as_ref()
                    .map(|e| {
                        view! {
                            <p class="from-catalogue">
                                {format!("From the catalogue: {}. {}", e.label, e.description)}
                            </p>
                        }
                    })}
                {(!dropped.is_empty())
                    .then(|| {
                        view! {
                            <p class="warning token-dropped">
                                {format!(
                                    "The link you followed carried what looks like a credential ({}); it was ignored. A token is only ever typed here by you; if the server wants a key in its address, add it yourself.",
                                    dropped.join(", "),
                                )}
                            </p>
                        }
                    })}
                <section class="card">
                    <AddServerForm csrf=me.csrf_token.clone() label address can_add token_help=token_help />
                </section>
            </main>
        </div>
    }
}

/// The fields of a catalogue entry, for adding one or changing it.
#[component]
fn EntryForm(
    csrf: String,
    error: RwSignal<Option<String>>,
    method: &'static str,
    path: String,
    entry: Option<CatalogueEntryView>,
    button: &'static str,
) -> impl IntoView {
    let label = NodeRef::<leptos::html::Input>::new();
    let address = NodeRef::<leptos::html::Input>::new();
    let description = NodeRef::<leptos::html::Input>::new();
    let token_needed = NodeRef::<leptos::html::Input>::new();
    let token_help = NodeRef::<leptos::html::Input>::new();
    let icon = NodeRef::<leptos::html::Input>::new();
    let tags = NodeRef::<leptos::html::Input>::new();
    let e = entry.unwrap_or_default();
    let submit = move |ev: leptos::ev::SubmitEvent| {
        ev.prevent_default();
        let tags: Vec<String> = input_value(tags)
            .split(',')
            .map(str::trim)
            .filter(|t| !t.is_empty())
            .map(str::to_owned)
            .collect();
        let body = json!({
            "label": input_value(label),
            "address": input_value(address),
            "description": input_value(description),
            "tokenNeeded": token_needed.get().is_some_and(|i| i.checked()),
            "tokenHelp": input_value(token_help),
            "icon": input_value(icon),
            "tags": tags,
        });
        change(method, path.clone(), body, csrf.clone(), error, "/admin/catalogue");
    };
    view! {
        <form class="stack entry-form" on:submit=submit>
            <label>"Label" <input node_ref=label name="label" required value=e.label /></label>
            <label>
                "Address"
                <input node_ref=address name="address" required placeholder="https://mcp.example.org/mcp" value=e.address />
            </label>
            <label>"Description" <input node_ref=description name="description" value=e.description /></label>
            <label class="switch">
                <input node_ref=token_needed type="checkbox" name="token-needed" checked=e.token_needed />
                "Needs a token"
            </label>
            <label>
                "Where to get a token"
                <input node_ref=token_help name="token-help" value=e.token_help />
            </label>
            <label>"Icon (a short text or an emoji)" <input node_ref=icon name="icon" value=e.icon /></label>
            <label>"Tags, separated by commas" <input node_ref=tags name="tags" value=e.tags.join(", ") /></label>
            <button class="primary save-entry" type="submit">{button}</button>
        </form>
    }
}

#[component]
pub fn AdminCatalogue(me: Me, entries: Vec<CatalogueEntryView>) -> impl IntoView {
    let csrf = me.csrf_token.clone();
    let error = RwSignal::new(None::<String>);
    let empty = entries.is_empty();
    view! {
        <div class="page">
            <TopBar me=me.clone() />
            <main class="narrow settings">
                <h1>"Admin → Catalogue"</h1>
                <AdminNav />
                <p class="hint">
                    "Servers people can pick from under Settings → Tools → Discover. An entry only suggests: each person still tests, reviews and consents, under the instance's network policy."
                </p>
                <p class="error" role="alert">{move || error.get()}</p>
                {empty.then(|| view! { <p class="hint">"The catalogue is empty."</p> })}
                {entries
                    .into_iter()
                    .map(|entry| {
                        let path = format!("/api/v1/admin/mcp/catalogue/{}", entry.id);
                        let from_file = entry.from_file;
                        let remove = {
                            let (csrf, path) = (csrf.clone(), path.clone());
                            move |_| {
                                change("DELETE", path.clone(), json!({}), csrf.clone(), error, "/admin/catalogue")
                            }
                        };
                        view! {
                            <article class="card admin-entry" data-entry=entry.id.clone()>
                                <header class="row">
                                    <span class="icon">{entry.icon.clone()}</span>
                                    <b class="label">{entry.label.clone()}</b>
                                    <span class="usage">{usage_words(&entry)}</span>
                                </header>
                                <p class="address">{entry.address.clone()}</p>
                                <p class="description">{entry.description.clone()}</p>
                                {if from_file {
                                    Either::Left(view! {
                                        <p class="hint from-file">
                                            "From the catalogue file: change it there and restart Llooma."
                                        </p>
                                    })
                                } else {
                                    Either::Right(view! {
                                        <details class="edit">
                                            <summary>"Change"</summary>
                                            <EntryForm
                                                csrf=csrf.clone()
                                                error
                                                method="PUT"
                                                path=path.clone()
                                                entry=Some(entry.clone())
                                                button="Save"
                                            />
                                        </details>
                                        <button class="remove" type="button" on:click=remove>
                                            "Remove"
                                        </button>
                                    })
                                }}
                            </article>
                        }
                    })
                    .collect_view()}
                <section class="card add-entry">
                    <h2>"Add an entry"</h2>
                    <EntryForm
                        csrf=csrf.clone()
                        error
                        method="POST"
                        path="/api/v1/admin/mcp/catalogue".to_owned()
                        entry=None
                        button="Add to the catalogue"
                    />
                </section>
            </main>
        </div>
    }
}
