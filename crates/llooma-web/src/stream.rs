//! The tab's one event stream, `/api/v1/events`: the account's approval cards and, on a
//! conversation's page, that conversation's turns.
//!
//! Why one: a browser keeps at most six connections to a host over HTTP/1.1. A page that held
//! one stream for its cards and another for its conversation, with a few tabs open and the
//! back/forward cache keeping left pages (and their streams) alive, left no connection for
//! sending a message: the page froze without a word. So a tab holds one stream, closes it when
//! the page is hidden (`pagehide`: left, or put in the back/forward cache) and opens it again,
//! from the last event it saw, when the page is shown again (`pageshow`). While the connection
//! is lost the page says so (`on_live(false)`) instead of going quiet.

use std::rc::Rc;

use crate::api::OnEvent;

/// What a conversation's page follows on the tab's stream.
#[derive(Clone)]
#[cfg_attr(
    not(feature = "hydrate"),
    expect(dead_code, reason = "read by the browser build; the server only renders")
)]
pub struct Follow {
    pub conversation_id: String,
    /// Where the page's stored messages end (the conversation's `eventsAfter`).
    pub after: i64,
    /// The turn's event names.
    pub names: &'static [&'static str],
    pub on: OnEvent,
}

/// Called with `false` when the connection is lost and the page is trying again, with `true`
/// once events flow again.
pub type OnLive = Rc<dyn Fn(bool)>;

#[cfg(feature = "hydrate")]
mod browser {
    use std::cell::{Cell, RefCell};
    use std::rc::Rc;

    use wasm_bindgen::JsCast;
    use wasm_bindgen::prelude::*;

    use super::{Follow, OnLive};
    use crate::api::OnEvent;

    /// How long a closed stream (the server answered with an error) waits before trying again;
    /// a dropped connection is retried by the browser itself.
    const RETRY_MS: i32 = 3000;

    struct Tab {
        conversation: Option<String>,
        /// The number of the last conversation event received: where a new connection resumes.
        last_id: Cell<i64>,
        handlers: Vec<(&'static str, OnEvent)>,
        on_live: OnLive,
        source: RefCell<Option<web_sys::EventSource>>,
        /// The page is hidden (left or in the back/forward cache): no stream until it is shown.
        hidden: Cell<bool>,
    }

    pub fn open(
        card_names: &'static [&'static str],
        on_cards: OnEvent,
        follow: Option<Follow>,
        on_live: OnLive,
    ) {
        let mut handlers: Vec<(&'static str, OnEvent)> =
            card_names.iter().map(|name| (*name, on_cards.clone())).collect();
        let (conversation, after) = match follow {
            Some(follow) => {
                handlers.extend(follow.names.iter().map(|name| (*name, follow.on.clone())));
                (Some(follow.conversation_id), follow.after)
            }
            None => (None, 0),
        };
        let tab = Rc::new(Tab {
            conversation,
            last_id: Cell::new(after),
            handlers,
            on_live,
            source: RefCell::new(None),
            hidden: Cell::new(false),
        });
        connect(&tab);
        let Some(window) = web_sys::window() else { return };
        let on_hide = {
            let tab = tab.clone();
            Closure::<dyn Fn(web_sys::Event)>::new(move |_: web_sys::Event| {
                tab.hidden.set(true);
                close(&tab);
            })
        };
        let on_show = {
            let tab = tab.clone();
            Closure::<dyn Fn(web_sys::Event)>::new(move |_: web_sys::Event| {
                tab.hidden.set(false);
                if tab.source.borrow().is_none() {
                    connect(&tab);
                }
            })
        };
        let _ =
            window.add_event_listener_with_callback("pagehide", on_hide.as_ref().unchecked_ref());
        let _ =
            window.add_event_listener_with_callback("pageshow", on_show.as_ref().unchecked_ref());
        // Both live as long as the page.
        on_hide.forget();
        on_show.forget();
    }

    fn address(tab: &Tab) -> String {
        match &tab.conversation {
            Some(id) => format!("/api/v1/events?conversation={id}&after={}", tab.last_id.get()),
            None => "/api/v1/events".to_owned(),
        }
    }

    fn close(tab: &Tab) {
        if let Some(source) = tab.source.borrow_mut().take() {
            source.close();
        }
    }

    fn connect(tab: &Rc<Tab>) {
        let Ok(source) = web_sys::EventSource::new(&address(tab)) else {
            (tab.on_live)(false);
            retry_later(tab);
            return;
        };
        for (name, on) in &tab.handlers {
            let (name, on, seen) = (*name, on.clone(), tab.clone());
            let listener = Closure::<dyn Fn(web_sys::Event)>::new(move |event: web_sys::Event| {
                // `error` is also the name of a turn's event: only a message is one.
                let Ok(message) = event.dyn_into::<web_sys::MessageEvent>() else { return };
                if let Ok(id) = message.last_event_id().parse::<i64>() {
                    seen.last_id.set(id);
                }
                on(name, &message.data().as_string().unwrap_or_default());
            });
            let _ =
                source.add_event_listener_with_callback(name, listener.as_ref().unchecked_ref());
            // A listener lives as long as its stream may call it; a few per connection.
            listener.forget();
        }
        let on_open = {
            let tab = tab.clone();
            Closure::<dyn Fn(web_sys::Event)>::new(move |_: web_sys::Event| (tab.on_live)(true))
        };
        let on_error = {
            let tab = tab.clone();
            Closure::<dyn Fn(web_sys::Event)>::new(move |event: web_sys::Event| {
                if event.is_instance_of::<web_sys::MessageEvent>() || tab.hidden.get() {
                    return;
                }
                (tab.on_live)(false);
                let closed = tab
                    .source
                    .borrow()
                    .as_ref()
                    .is_some_and(|s| s.ready_state() == web_sys::EventSource::CLOSED);
                if closed {
                    // The server answered with an error rather than dropping the connection:
                    // the browser will not try again by itself.
                    close(&tab);
                    retry_later(&tab);
                }
            })
        };
        source.set_onopen(Some(on_open.as_ref().unchecked_ref()));
        source.set_onerror(Some(on_error.as_ref().unchecked_ref()));
        on_open.forget();
        on_error.forget();
        *tab.source.borrow_mut() = Some(source);
    }

    fn retry_later(tab: &Rc<Tab>) {
        let Some(window) = web_sys::window() else { return };
        let tab = tab.clone();
        let again = Closure::once_into_js(move || {
            if !tab.hidden.get() && tab.source.borrow().is_none() {
                connect(&tab);
            }
        });
        let _ = window
            .set_timeout_with_callback_and_timeout_and_arguments_0(again.unchecked_ref(), RETRY_MS);
    }
}

#[cfg(feature = "hydrate")]
pub use browser::open;

/// Nothing in the server build: the server only renders.
#[cfg(not(feature = "hydrate"))]
pub fn open(
    _card_names: &'static [&'static str],
    _on_cards: OnEvent,
    _follow: Option<Follow>,
    _on_live: OnLive,
) {
}
