//! Llooma's web interface: pages rendered on the server with Leptos and made live in the browser
//! by the same components compiled to WebAssembly (hydration).
//!
//! Boundaries: every page reads its data through the JSON API of `llooma-api`, the server side
//! in-process (the request's own session cookie, the same authorization) and the browser side
//! over HTTP with the session cookie and `X-CSRF-Token`. This crate has no endpoint of its own
//! beyond pages and static files, never touches the database, and never puts a secret in a page
//! (the CSRF token, which the page needs to act, is the only session-bound value in it).
//!
//! Features: `ssr` (the server, through `llooma-server`) and `hydrate` (the wasm build of
//! `cargo xtask build-web`); never both at once.

#![recursion_limit = "256"]

mod account;
mod admin;
mod api;
mod app;
pub mod attach;
mod bots;
mod card;
mod discover;
mod files;
mod forms;
mod layout;
mod link;
mod markdown;
mod mcp_view;
mod media;
pub mod model;
mod model_choices;
mod personas;
mod question;
mod review;
mod settings;
mod sidebar;
mod stream;
mod usage;
mod voice;

#[cfg(feature = "ssr")]
pub mod server;

pub use app::App;

/// The entry point the page's loader script calls once the WebAssembly module is ready: reads
/// the page data the server embedded and takes over the server-rendered HTML.
#[cfg(feature = "hydrate")]
#[wasm_bindgen::prelude::wasm_bindgen]
pub fn hydrate() {
    let Some(page) = api::page_data() else {
        api::console_error("llooma: the page data is missing or unreadable; reload the page");
        return;
    };
    app::hydrate_page(page);
    // Says the page is live (browser tests wait for it).
    api::mark_hydrated();
}
