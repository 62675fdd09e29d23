//! What every page around its content shares: the bar on top of a signed-in page, the links
//! between the pages of a section, the small drawn signs on buttons. Below every page module, so pages use it and it uses none of
//! them.

use leptos::prelude::*;
use serde_json::json;

use crate::api;
use crate::model::Me;

/// The bar on top of every signed-in page: home, who is signed in, sign out.
#[component]
pub fn TopBar(me: Me) -> impl IntoView {
    let csrf = me.csrf_token.clone();
    let sign_out = move |_| {
        let csrf = csrf.clone();
        api::spawn(async move {
            let _ = api::call("POST", "/api/v1/auth/logout", Some(json!({})), Some(&csrf)).await;
            api::go("/");
        });
    };
    view! {
        <header class="topbar">
            <a class="brand" href="/">"Llooma"</a>
            <nav class="links">
                <a href="/settings/tools">"Settings"</a>
                <a href="/settings/personas">"Personas"</a>
                <a href="/settings/prompts">"Prompts"</a>
                <a href="/settings/bots">"Bots"</a>
                {me.admin.then(|| view! { <a href="/admin">"Admin"</a> })}
            </nav>
            <a class="who" href="/settings/account" title="Your account">
                {me.display_name.clone()}
                {me.admin.then(|| view! { <span class="badge">"admin"</span> })}
            </a>
            <button class="signout" type="button" on:click=sign_out>"Sign out"</button>
        </header>
    }
}

/// The links between the administrator's pages.
#[component]
pub fn AdminNav() -> impl IntoView {
    view! {
        <nav class="row admin-nav">
            <a href="/admin">"What needs doing"</a>
            <a href="/admin/mcp">"MCP servers"</a>
            <a href="/admin/catalogue">"Catalogue"</a>
            <a href="/admin/instance">"Providers and instance"</a>
            <a href="/admin/usage">"Usage"</a>
        </nav>
    }
}

/// The links between the pages of Settings → Tools.
#[component]
pub fn ToolsNav() -> impl IntoView {
    view! {
        <nav class="row tools-nav">
            <a href="/settings/tools">"Your servers"</a>
            <a href="/settings/tools/discover">"Discover"</a>
            <a href="/settings/tools/mcp/new">"Add by address"</a>
        </nav>
    }
}

/// A small line drawing in the colour of the text around it, `size` pixels square on a 24-unit
/// grid, its strokes as children (drawn here: no icon font is assumed).
#[component]
pub fn Sign(class: &'static str, size: u32, children: Children) -> impl IntoView {
    view! {
        <svg
            class=class
            viewBox="0 0 24 24"
            width=size
            height=size
            aria-hidden="true"
            fill="none"
            stroke="currentColor"
            stroke-width="2"
            stroke-linecap="round"
            stroke-linejoin="round"
        >
            {children()}
        </svg>
    }
}
