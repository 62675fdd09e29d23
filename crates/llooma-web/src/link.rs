//! A server's request, during a call, that the person open a page (an MCP URL-mode question):
//! to sign in somewhere, pay, or type what must not pass through the chat. The card shows the
//! whole address with its host first; only the person's click on Open opens it, in a new tab
//! that cannot reach back into this one. An address the instance will not offer (not http or
//! https, a private or loopback address) is shown as text, with why.
//!
//! When the server would not run the call until the page is done, a second card follows the
//! opening: Done (or the server's own notice) sends the call again, Cancel ends it.

use leptos::prelude::*;
use llooma_types::ApprovalCardView;
use llooma_types::question::QuestionLink;
use serde_json::json;

use crate::card::{answer_button, countdown, elsewhere_note, send_answer};

/// The card of a page to open (or, `link.waiting`, of a page opened and not yet done).
#[component]
pub fn LinkCard(
    card: ApprovalCardView,
    message: String,
    link: QuestionLink,
    csrf: String,
    elsewhere: bool,
    now: RwSignal<i64>,
    cards: RwSignal<Vec<ApprovalCardView>>,
) -> impl IntoView {
    let error = RwSignal::new(None::<String>);
    let busy = RwSignal::new(false);
    let id = card.id.clone();
    let answer = move |choice: &'static str| {
        send_answer(&id, json!({"choice": choice}), &csrf, cards, busy, error);
    };
    let server = card.server_label.clone();
    let host = if link.host.is_empty() { "an unreadable address".to_owned() } else { link.host };
    // Never a link to anything but a web page, whatever the instance said.
    let openable = link.refused.is_none() && is_web_address(&link.url);
    let countdown = countdown(
        card.deadline_ms,
        now,
        if link.waiting {
            "Time is up: the call was not sent again."
        } else {
            "Time is up: the server will be told you did not answer."
        },
    );
    let (first, second) = (answer.clone(), answer);
    let actions = if link.waiting {
        view! {
            {answer_button("primary done", "Done", busy, move || first("accept"))}
            {answer_button("cancel", "Cancel", busy, move || second("cancel"))}
        }
        .into_any()
    } else {
        let (decline, cancel) = (second.clone(), second);
        view! {
            {openable
                .then(|| {
                    // The click both opens the page (the link's own default action, so the
                    // browser treats it as the person's) and tells the server.
                    let url = link.url.clone();
                    view! {
                        <a
                            class="button primary open"
                            href=url
                            target="_blank"
                            rel="noopener noreferrer"
                            on:click=move |_| first("accept")
                        >
                            "Open"
                        </a>
                    }
                })}
            {answer_button("decline", "Decline", busy, move || decline("decline"))}
            {answer_button("cancel", "Cancel", busy, move || cancel("cancel"))}
        }
        .into_any()
    };
    let hint = match (link.waiting, openable) {
        (true, _) => format!(
            "The page was opened in another tab. When you have finished there, press Done and \
             {server} is asked again; it may also say it is done by itself."
        ),
        (false, true) => format!(
            "Open opens this address in a new tab; nothing is opened until you click. What you \
             type there goes to {host}, not through this chat. Decline tells {server} no."
        ),
        (false, false) => {
            format!("This address is not opened from here. Decline tells {server} no.")
        }
    };
    view! {
        <article
            class="card approval question link"
            class:waiting=link.waiting
            data-call=card.id.clone()
        >
            <header>
                <span class="server">{card.server_label.clone()}</span>
                {if link.waiting {
                    " waits for the page you opened, while running "
                } else {
                    " asks you to open a page, while running "
                }}
                <b class="tool">{card.tool_name.clone()}</b>
            </header>
            {elsewhere_note(elsewhere, &card.conversation_id)}
            <blockquote class="question-message">{message}</blockquote>
            <p class="link-host">"Leads to " <b class="host">{host}</b></p>
            <p class="link-address">
                <code>{link.url.clone()}</code>
            </p>
            {link
                .refused
                .map(|why| {
                    view! { <p class="link-refused" role="note">{format!("Not opened from here: {why}.")}</p> }
                })}
            <p class="hint-note">{hint}</p>
            <p class="countdown">{countdown}</p>
            <div class="actions">{actions}</div>
            <p class="error" role="alert">{move || error.get()}</p>
        </article>
    }
}

/// Whether `url` is a web page's address (http or https), the only kind a card links to.
fn is_web_address(url: &str) -> bool {
    let lower = url.get(..8).unwrap_or(url).to_ascii_lowercase();
    lower.starts_with("https://") || lower.starts_with("http://")
}

/// The host of an address, for the timeline (empty when there is none to read).
pub fn host_of(url: &str) -> &str {
    let rest = url.split_once("://").map_or("", |(_, rest)| rest);
    let authority = rest.split(['/', '?', '#']).next().unwrap_or_default();
    let host_port = authority.rsplit_once('@').map_or(authority, |(_, host)| host);
    match host_port.strip_prefix('[') {
        Some(v6) => v6.split(']').next().unwrap_or_default(),
        None => host_port.split(':').next().unwrap_or_default(),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn only_web_addresses_are_linked() {
        assert!(is_web_address("https://example.com/sign-in"));
        assert!(is_web_address("HTTP://example.com"));
        assert!(!is_web_address("javascript:alert(1)"));
        assert!(!is_web_address("data:text/html,hi"));
        assert!(!is_web_address("https:/example.com"));
    }

    #[test]
    fn the_host_is_read_past_userinfo_and_port() {
        assert_eq!(host_of("https://login.example.com/a?b#c"), "login.example.com");
        assert_eq!(host_of("https://bank.com@evil.example:8443/x"), "evil.example");
        assert_eq!(host_of("http://[::1]:8080/"), "::1");
        assert_eq!(host_of("not an address"), "");
    }
}
