//! An MCP server's interactive view (MCP Apps) in the timeline: the document the instance serves
//! for the call's tool, framed in the call's place, and the host side of the view's protocol
//! (JSON-RPC over `postMessage`).
//!
//! The frame runs in an origin of its own (sandboxed by the document's policy and by the frame's
//! `sandbox` attribute, never `allow-same-origin`): it reaches neither the page nor the instance.
//! Everything it asks of the page beyond drawing is put to the person: a link is shown with its
//! whole address and opened only by their click; a message is put in the composer, for them to
//! send or not; a call to a tool of its server is an approval card like the model's.
//!
//! What the view may ask is decided by [`Host::answer`], which does no IO so that it is tested
//! natively; the hydrated page carries out what it decides.
#![cfg_attr(
    not(feature = "hydrate"),
    allow(dead_code, reason = "the protocol runs in the browser; the server only draws the frame")
)]

use leptos::prelude::*;
use llooma_types::StepView;
use serde_json::{Value, json};

/// The protocol revision the host speaks.
pub const PROTOCOL_VERSION: &str = "2026-01-26";

/// The tallest a view is drawn inline, in CSS pixels; a taller one scrolls inside its frame.
pub const MAX_INLINE_HEIGHT: f64 = 720.0;

/// The shortest a view is drawn, so that an empty one is still seen.
pub const MIN_HEIGHT: f64 = 48.0;

/// The largest message taken from a view, as JSON; a larger one is dropped.
pub const MAX_MESSAGE_BYTES: usize = 256 * 1024;

/// Messages taken from one view per second; the rest of that second are dropped.
pub const MAX_MESSAGES_PER_SECOND: u32 = 100;

/// The longest address a view may ask to open.
pub const MAX_LINK_BYTES: usize = 2048;

/// How the view is drawn.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum DisplayMode {
    Inline,
    Fullscreen,
}

impl DisplayMode {
    fn word(self) -> &'static str {
        match self {
            DisplayMode::Inline => "inline",
            DisplayMode::Fullscreen => "fullscreen",
        }
    }
}

/// What the page does for one message from a view.
#[derive(Clone, Debug, PartialEq)]
pub enum Action {
    /// Nothing: not a message of the protocol, or one the host need not act on.
    Ignore,
    /// Answer the view.
    Reply(Value),
    /// The view is ready: send it the call's input and result.
    Ready,
    /// Draw the view this tall.
    Resize(f64),
    /// The view asks to be drawn in this mode: it is offered to the person, never done unasked
    /// (a full-screen view could pass itself off as the page); answer with the mode it has.
    AskDisplay { id: Value, mode: DisplayMode },
    /// Show the person this address to open, and answer.
    OfferLink(String, Value),
    /// Offer these words to the person for their next message (never put in the box unasked),
    /// and answer.
    Suggest(String, Value),
    /// Put a call to this tool of the view's server to the person; answer with its result.
    CallTool { id: Value, name: String, arguments: Value },
    /// Read this resource of the view's server; answer with its contents.
    ReadResource { id: Value, uri: String },
}

/// The host side of one view's protocol: what it knows of the page and of the call.
#[derive(Clone, Debug)]
pub struct Host {
    pub dark: bool,
    pub locale: String,
    pub width: f64,
}

impl Host {
    /// What to do with one message the view sent (already known to come from its frame).
    pub fn answer(&self, message: &Value) -> Action {
        if message.get("jsonrpc").and_then(Value::as_str) != Some("2.0") {
            return Action::Ignore;
        }
        let Some(method) = message.get("method").and_then(Value::as_str) else {
            // An answer to something the host asked: the host asks nothing it waits for.
            return Action::Ignore;
        };
        let params = message.get("params").cloned().unwrap_or(Value::Null);
        let Some(id) = message.get("id").filter(|id| id.is_string() || id.is_number()).cloned()
        else {
            return match method {
                "ui/notifications/initialized" => Action::Ready,
                "ui/notifications/size-changed" => {
                    match params.get("height").and_then(Value::as_f64) {
                        Some(height) if height.is_finite() => {
                            Action::Resize(height.clamp(MIN_HEIGHT, MAX_INLINE_HEIGHT))
                        }
                        _ => Action::Ignore,
                    }
                }
                _ => Action::Ignore,
            };
        };
        let result = |value: Value| json!({"jsonrpc": "2.0", "id": id, "result": value});
        let error = |code: i64, text: &str| {
            Action::Reply(
                json!({"jsonrpc": "2.0", "id": id, "error": {"code": code, "message": text}}),
            )
        };
        match method {
            "ui/initialize" => Action::Reply(result(self.initialized())),
            "ping" => Action::Reply(result(json!({}))),
            "ui/request-display-mode" => {
                let mode = match params.get("mode").and_then(Value::as_str) {
                    Some("fullscreen") => DisplayMode::Fullscreen,
                    _ => DisplayMode::Inline,
                };
                Action::AskDisplay { id, mode }
            }
            "ui/open-link" => match params.get("url").and_then(Value::as_str) {
                Some(url) if openable(url) => Action::OfferLink(url.to_owned(), result(json!({}))),
                _ => error(-32602, "only an http or https address of at most 2048 bytes is opened"),
            },
            "ui/message" => {
                let text = message_text(&params);
                if text.trim().is_empty() {
                    return error(-32602, "a message needs text");
                }
                Action::Suggest(text, result(json!({})))
            }
            "tools/call" => match params.get("name").and_then(Value::as_str) {
                Some(name) if !name.is_empty() => Action::CallTool {
                    id,
                    name: name.to_owned(),
                    arguments: params.get("arguments").cloned().unwrap_or_else(|| json!({})),
                },
                _ => error(-32602, "a tool call needs the tool's name"),
            },
            "resources/read" => match params.get("uri").and_then(Value::as_str) {
                Some(uri) if !uri.is_empty() && uri.len() <= 2048 => {
                    Action::ReadResource { id, uri: uri.to_owned() }
                }
                _ => error(-32602, "a read needs the resource's address"),
            },
            _ => error(-32601, "Method not found"),
        }
    }

    /// The answer to `ui/initialize`: who the host is, what it offers, and the page's context.
    fn initialized(&self) -> Value {
        json!({
            "protocolVersion": PROTOCOL_VERSION,
            "hostInfo": {"name": "Llooma", "version": env!("CARGO_PKG_VERSION")},
            "hostCapabilities": {
                "openLinks": {},
                "serverTools": {},
                "serverResources": {},
                "message": {"text": {}},
            },
            "hostContext": {
                "theme": if self.dark { "dark" } else { "light" },
                "displayMode": "inline",
                "availableDisplayModes": ["inline", "fullscreen"],
                "containerDimensions": {"width": self.width, "maxHeight": MAX_INLINE_HEIGHT},
                "locale": self.locale,
                "platform": "web",
            },
        })
    }
}

/// Whether the page offers an address a view asks to open: the web only, within the bound.
pub fn openable(url: &str) -> bool {
    let lower = url.trim_start().to_ascii_lowercase();
    url.len() <= MAX_LINK_BYTES
        && (lower.starts_with("https://") || lower.starts_with("http://"))
        && !url.chars().any(|c| c.is_control() || c.is_whitespace() || invisible(c))
}

/// Characters that change how an address reads without being seen: direction marks and
/// overrides, zero-width ones, the soft hyphen.
fn invisible(c: char) -> bool {
    matches!(c, '\u{00AD}' | '\u{061C}' | '\u{200B}'..='\u{200F}' | '\u{202A}'..='\u{202E}'
        | '\u{2060}'..='\u{2069}' | '\u{FEFF}')
}

/// The host an address leads to, shown on its own beside it.
pub fn link_host(url: &str) -> String {
    let rest = url.split_once("://").map_or(url, |(_, rest)| rest);
    let authority = rest.split(['/', '?', '#']).next().unwrap_or_default();
    authority.rsplit('@').next().unwrap_or_default().to_ascii_lowercase()
}

/// The text of a `ui/message`'s content (its text blocks, one after another).
fn message_text(params: &Value) -> String {
    let content = params.get("content");
    let blocks: Vec<&Value> = match content {
        Some(Value::Array(items)) => items.iter().collect(),
        Some(item @ Value::Object(_)) => vec![item],
        _ => Vec::new(),
    };
    blocks
        .iter()
        .filter(|b| b.get("type").and_then(Value::as_str) == Some("text"))
        .filter_map(|b| b.get("text").and_then(Value::as_str))
        .collect::<Vec<_>>()
        .join("\n")
        .chars()
        .take(16 * 1024)
        .collect()
}

/// The notifications that give a ready view its call: the input, then the result.
pub fn call_notifications(view: &StepView) -> [Value; 2] {
    [
        json!({"jsonrpc": "2.0", "method": "ui/notifications/tool-input",
               "params": {"arguments": view.arguments}}),
        json!({"jsonrpc": "2.0", "method": "ui/notifications/tool-result", "params": view.result}),
    ]
}

/// The page's CSRF token, for the calls a view asks for.
#[derive(Clone, Debug)]
pub struct PageToken(pub String);

/// A call's view in the timeline: the frame, a bar to draw it full screen, and what it asked
/// that waits for the person.
#[component]
pub fn McpViewFrame(
    view: StepView,
    server: String,
    tool: String,
    /// The call that drew the view: what its own calls are asked for under.
    call_id: String,
) -> impl IntoView {
    let height = RwSignal::new(160.0_f64);
    let mode = RwSignal::new(DisplayMode::Inline);
    let link = RwSignal::new(None::<String>);
    let note = RwSignal::new(None::<String>);
    let suggestion = RwSignal::new(None::<String>);
    // Loaded only once the page listens to it: a view that speaks first is not missed.
    let src = RwSignal::new(None::<String>);
    let frame = NodeRef::<leptos::html::Iframe>::new();
    #[cfg(feature = "hydrate")]
    {
        let token = use_context::<PageToken>().map(|t| t.0).unwrap_or_default();
        let asked = hydrated::Asked { call_id, token, calling: RwSignal::new(false) };
        let shown = hydrated::Shown { height, mode, link, note, suggestion };
        hydrated::follow(frame, view.clone(), asked, shown);
        // After hydration (an attribute set while hydrating is taken as already drawn).
        let document = view.document.clone();
        Effect::new(move |_| src.set(Some(document.clone())));
    }
    // Drawn on the server, the view only waits for the browser.
    #[cfg(not(feature = "hydrate"))]
    let _ = (height, call_id, view);
    let title = format!("View from {server}: {tool}");
    let toggle = move |_| {
        mode.update(|m| {
            *m = match m {
                DisplayMode::Inline => DisplayMode::Fullscreen,
                DisplayMode::Fullscreen => DisplayMode::Inline,
            }
        })
    };
    view! {
        <div
            class="mcp-view"
            class:fullscreen=move || mode.get() == DisplayMode::Fullscreen
            data-tool=tool.clone()
        >
            <div class="mcp-view-bar">
                <span class="mcp-view-title">{format!("{server} · {tool}")}</span>
                <span class="hint">"runs sandboxed: it cannot reach this page or your account"</span>
                <button class="mcp-view-mode" type="button" on:click=toggle>
                    {move || match mode.get() {
                        DisplayMode::Inline => "Full screen",
                        DisplayMode::Fullscreen => "Close full screen",
                    }}
                </button>
            </div>
            <iframe
                node_ref=frame
                class="mcp-view-frame"
                title=title
                src=move || src.get()
                sandbox="allow-scripts allow-forms"
                referrerpolicy="no-referrer"
                allow=""
            ></iframe>
            {move || {
                link.get()
                    .map(|url| {
                        view! {
                            <p class="mcp-view-link" role="status">
                                "The view asks to open "
                                <code>{url.clone()}</code>
                                {format!(" (on {}) ", link_host(&url))}
                                <a
                                    href=url.clone()
                                    target="_blank"
                                    rel="noopener noreferrer"
                                    on:click=move |_| link.set(None)
                                >
                                    "Open"
                                </a>
                                " "
                                <button type="button" on:click=move |_| link.set(None)>
                                    "Dismiss"
                                </button>
                            </p>
                        }
                    })
            }}
            {move || {
                suggestion
                    .get()
                    .map(|words| {
                        let put = words.clone();
                        view! {
                            <p class="mcp-view-suggestion" role="status">
                                "The view suggests a message: "
                                <q>{words}</q>
                                " "
                                <button
                                    type="button"
                                    on:click=move |_| {
                                        put_in_composer(&put);
                                        suggestion.set(None);
                                    }
                                >
                                    "Put in the message box"
                                </button>
                                " "
                                <button type="button" on:click=move |_| suggestion.set(None)>
                                    "Dismiss"
                                </button>
                            </p>
                        }
                    })
            }}
            {move || note.get().map(|text| view! { <p class="mcp-view-note" role="status">{text}</p> })}
        </div>
    }
}

/// Puts a view's words in the composer, after what is typed there: the person's click did it,
/// and they send them or not.
fn put_in_composer(words: &str) {
    #[cfg(feature = "hydrate")]
    hydrated::compose(words);
    #[cfg(not(feature = "hydrate"))]
    let _ = words;
}

#[cfg(feature = "hydrate")]
mod hydrated {
    use std::cell::Cell;
    use std::rc::Rc;

    use leptos::prelude::*;
    use llooma_types::StepView;
    use serde_json::{Value, json};
    use wasm_bindgen::JsCast;

    use super::{Action, DisplayMode, Host, MAX_MESSAGE_BYTES, MAX_MESSAGES_PER_SECOND};

    /// Where the view's calls are asked for: under the call that drew it, with the page's token,
    /// one at a time.
    #[derive(Clone)]
    pub struct Asked {
        pub call_id: String,
        pub token: String,
        pub calling: RwSignal<bool>,
    }

    /// What the page shows of the view and of what it asked.
    #[derive(Clone, Copy)]
    pub struct Shown {
        pub height: RwSignal<f64>,
        pub mode: RwSignal<DisplayMode>,
        pub link: RwSignal<Option<String>>,
        pub note: RwSignal<Option<String>>,
        pub suggestion: RwSignal<Option<String>>,
    }

    /// Listens to the frame's messages for as long as the view is on the page.
    pub fn follow(
        frame: NodeRef<leptos::html::Iframe>,
        view: StepView,
        asked: Asked,
        shown: Shown,
    ) {
        let Shown { height, mode, link, note, suggestion } = shown;
        let window = window();
        let dark = window
            .match_media("(prefers-color-scheme: dark)")
            .ok()
            .flatten()
            .is_some_and(|m| m.matches());
        let locale = window.navigator().language().unwrap_or_else(|| "en".to_owned());
        // Its height is set through the style object, never a `style` attribute: the page's
        // policy allows no inline style.
        Effect::new(move |_| {
            let (to, mode) = (height.get(), mode.get());
            if let Some(frame) = frame.get() {
                let style = web_sys::HtmlElement::style(&frame);
                let _ = match mode {
                    DisplayMode::Inline => style.set_property("height", &format!("{to}px")),
                    DisplayMode::Fullscreen => style.remove_property("height").map(|_| ()),
                };
            }
        });
        let pace = Rc::new(Cell::new((0_f64, 0_u32)));
        let handle = window_event_listener(leptos::ev::message, move |event| {
            let Some(frame) = frame.get_untracked() else { return };
            let Some(target) = frame.content_window() else { return };
            // Only the frame's own window: every other sender is ignored.
            let from_frame = event.source().is_some_and(|source| {
                js_sys::Object::is(&source, target.unchecked_ref::<js_sys::Object>())
            });
            if !from_frame {
                return;
            }
            // A flood is cut: at most so many messages a second.
            let now = js_sys::Date::now();
            let (since, count) = pace.get();
            let (since, count) = if now - since > 1000.0 { (now, 0) } else { (since, count) };
            pace.set((since, count + 1));
            if count >= MAX_MESSAGES_PER_SECOND {
                return;
            }
            // (`undefined` has no JSON: such a message is no message.)
            let Some(text) =
                js_sys::JSON::stringify(&event.data()).ok().and_then(|t| t.as_string())
            else {
                return;
            };
            if text.len() > MAX_MESSAGE_BYTES {
                return;
            }
            let Ok(message) = serde_json::from_str::<Value>(&text) else { return };
            let host =
                Host { dark, locale: locale.clone(), width: f64::from(frame.client_width()) };
            let post = |value: &Value| {
                if let Ok(value) = js_sys::JSON::parse(&value.to_string()) {
                    let _ = target.post_message(&value, "*");
                }
            };
            let busy = |id: &Value, why: &str| json!({"jsonrpc": "2.0", "id": id, "error": {"code": -32000, "message": why}});
            match host.answer(&message) {
                Action::Ignore => {}
                Action::Reply(answer) => post(&answer),
                Action::Ready => {
                    for notification in super::call_notifications(&view) {
                        post(&notification);
                    }
                }
                Action::Resize(to) => height.set(to),
                Action::AskDisplay { id, mode: wanted } => {
                    let now = mode.get_untracked();
                    if wanted == DisplayMode::Fullscreen && now == DisplayMode::Inline {
                        note.set(Some(
                            "The view asks to be shown full screen: use Full screen above."
                                .to_owned(),
                        ));
                    }
                    post(&json!({"jsonrpc": "2.0", "id": id, "result": {"mode": now.word()}}));
                }
                Action::OfferLink(url, answer) => {
                    // One at a time: the address shown is not swapped under the person's click.
                    if link.get_untracked().is_some() {
                        post(&busy(&answer["id"], "a link already waits for the person"));
                    } else {
                        link.set(Some(url));
                        post(&answer);
                    }
                }
                Action::Suggest(words, answer) => {
                    if suggestion.get_untracked().is_some() {
                        post(&busy(&answer["id"], "a message already waits for the person"));
                    } else {
                        suggestion.set(Some(words));
                        post(&answer);
                    }
                }
                Action::CallTool { id, name, arguments } => {
                    if asked.calling.get_untracked() {
                        post(&busy(&id, "the view's last call still waits for the person"));
                        return;
                    }
                    asked.calling.set(true);
                    // The card it asks for must not be hidden under the view.
                    mode.set(DisplayMode::Inline);
                    note.set(Some(format!(
                        "The view asks to call {name}: answer its card to let it, or not."
                    )));
                    let body =
                        json!({"callId": asked.call_id, "name": name, "arguments": arguments});
                    let request = Request { path: "/api/v1/mcp/view-calls", body, id };
                    ask_instance(request, &asked, target.clone(), Some(note));
                }
                Action::ReadResource { id, uri } => {
                    let body = json!({"callId": asked.call_id, "uri": uri});
                    let request = Request { path: "/api/v1/mcp/view-reads", body, id };
                    ask_instance(request, &asked, target.clone(), None);
                }
            }
        });
        on_cleanup(move || handle.remove());
    }

    /// A request to the instance on a view's behalf, and the view's request it answers.
    struct Request {
        path: &'static str,
        body: Value,
        id: Value,
    }

    /// Asks the instance on the view's behalf and answers the view with what came back: the
    /// result, or the instance's refusal in words (also said under the view when `note` is
    /// given, which marks a call: the view may ask the next once it is answered).
    fn ask_instance(
        request: Request,
        asked: &Asked,
        target: web_sys::Window,
        note: Option<RwSignal<Option<String>>>,
    ) {
        let (token, calling) = (asked.token.clone(), asked.calling);
        leptos::task::spawn_local(async move {
            let Request { path, body, id } = request;
            let answer = match crate::api::call("POST", path, Some(body), Some(&token)).await {
                Ok(result) => {
                    if let Some(note) = note {
                        note.set(None);
                    }
                    json!({"jsonrpc": "2.0", "id": id, "result": result})
                }
                Err(failure) => {
                    if let Some(note) = note {
                        note.set(Some(format!("The view's call: {}", failure.message)));
                    }
                    json!({"jsonrpc": "2.0", "id": id, "error": {
                        "code": -32000, "message": failure.message
                    }})
                }
            };
            if note.is_some() {
                calling.set(false);
            }
            if let Ok(value) = js_sys::JSON::parse(&answer.to_string()) {
                let _ = target.post_message(&value, "*");
            }
        });
    }

    /// Puts a view's words in the composer, after what is typed there: the person sends them.
    pub fn compose(words: &str) {
        let area = document()
            .query_selector("form.composer textarea")
            .ok()
            .flatten()
            .and_then(|e| e.dyn_into::<web_sys::HtmlTextAreaElement>().ok());
        if let Some(area) = area {
            let typed = area.value();
            let joined = if typed.trim().is_empty() {
                words.to_owned()
            } else {
                format!("{}\n{words}", typed.trim_end())
            };
            area.set_value(&joined);
            let _ = area.focus();
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn host() -> Host {
        Host { dark: true, locale: "de-CH".into(), width: 640.0 }
    }

    #[test]
    fn initialize_is_answered_with_the_host_and_the_pages_context() {
        let asked = json!({"jsonrpc": "2.0", "id": 0, "method": "ui/initialize", "params": {
            "appInfo": {"name": "Get Time App", "version": "1.0.0"}, "appCapabilities": {},
            "protocolVersion": "2026-01-26"}});
        let Action::Reply(answer) = host().answer(&asked) else { panic!() };
        assert_eq!(answer["id"], 0, "id 0 is an id");
        let result = &answer["result"];
        assert_eq!(result["protocolVersion"], PROTOCOL_VERSION);
        assert_eq!(result["hostInfo"]["name"], "Llooma");
        assert!(result["hostInfo"]["version"].is_string());
        assert_eq!(result["hostContext"]["theme"], "dark");
        assert_eq!(result["hostContext"]["locale"], "de-CH");
        assert_eq!(result["hostContext"]["displayMode"], "inline");
        assert!(result["hostCapabilities"].is_object());
    }

    #[test]
    fn a_ready_view_gets_its_calls_input_and_result() {
        let ready = json!({"jsonrpc": "2.0", "method": "ui/notifications/initialized"});
        assert_eq!(host().answer(&ready), Action::Ready);
        let view = StepView {
            document: "/d".into(),
            arguments: json!({"city": "Bern"}),
            result: json!({"content": [], "structuredContent": {"time": "now"}}),
        };
        let [input, result] = call_notifications(&view);
        assert_eq!(input["method"], "ui/notifications/tool-input");
        assert_eq!(input["params"]["arguments"]["city"], "Bern");
        assert_eq!(result["method"], "ui/notifications/tool-result");
        assert_eq!(result["params"]["structuredContent"]["time"], "now");
    }

    #[test]
    fn a_view_cannot_grow_past_the_bound_or_shrink_out_of_sight() {
        let size = |h: Value| json!({"jsonrpc": "2.0", "method": "ui/notifications/size-changed", "params": {"height": h}});
        assert_eq!(host().answer(&size(json!(100_000))), Action::Resize(MAX_INLINE_HEIGHT));
        assert_eq!(host().answer(&size(json!(-5))), Action::Resize(MIN_HEIGHT));
        assert_eq!(host().answer(&size(json!(300))), Action::Resize(300.0));
        assert_eq!(host().answer(&size(json!("tall"))), Action::Ignore);
    }

    #[test]
    fn a_link_is_offered_only_for_the_web_and_words_only_go_to_the_composer() {
        let open = |url: &str| json!({"jsonrpc": "2.0", "id": 3, "method": "ui/open-link", "params": {"url": url}});
        assert!(
            matches!(host().answer(&open("https://example.com/a?b")), Action::OfferLink(u, _) if u == "https://example.com/a?b")
        );
        for bad in ["javascript:alert(1)", "file:///etc/passwd", "data:text/html,x"] {
            let Action::Reply(answer) = host().answer(&open(bad)) else { panic!("{bad}") };
            assert_eq!(answer["error"]["code"], -32602, "{bad}");
        }
        let long = format!("https://example.com/{}", "a".repeat(MAX_LINK_BYTES));
        assert!(matches!(host().answer(&open(&long)), Action::Reply(_)));
        let message = json!({"jsonrpc": "2.0", "id": "m", "method": "ui/message", "params": {
            "role": "user", "content": [{"type": "text", "text": "Book it"}]}});
        assert!(matches!(host().answer(&message), Action::Suggest(t, _) if t == "Book it"));
        for hidden in
            ["https://exa\u{202E}lpmaxe.com/", "https://a.example/\u{200B}x", "https://a b/"]
        {
            assert!(!openable(hidden), "{hidden:?}");
        }
        assert_eq!(link_host("https://user@Docs.Example.com:8443/a?b#c"), "docs.example.com:8443");
    }

    #[test]
    fn what_is_not_the_protocol_is_ignored_and_unknown_requests_refused() {
        for noise in [
            json!("hello"),
            json!({"method": "ui/initialize", "id": 1}),
            json!(null),
            json!({"jsonrpc": "2.0", "id": 1, "result": {}}),
        ] {
            assert_eq!(host().answer(&noise), Action::Ignore, "{noise}");
        }
        let unknown =
            json!({"jsonrpc": "2.0", "id": 9, "method": "ui/download-file", "params": {}});
        let Action::Reply(answer) = host().answer(&unknown) else { panic!() };
        assert_eq!(answer["error"]["code"], -32601);
        let read = json!({"jsonrpc": "2.0", "id": 5, "method": "resources/read", "params": {"uri": "ui://a/b"}});
        assert_eq!(
            host().answer(&read),
            Action::ReadResource { id: json!(5), uri: "ui://a/b".into() }
        );
        let nowhere = json!({"jsonrpc": "2.0", "id": 6, "method": "resources/read", "params": {}});
        assert!(
            matches!(host().answer(&nowhere), Action::Reply(a) if a["error"]["code"] == -32602)
        );
        let call = json!({"jsonrpc": "2.0", "id": 4, "method": "tools/call", "params": {"name": "get-time"}});
        assert_eq!(
            host().answer(&call),
            Action::CallTool { id: json!(4), name: "get-time".into(), arguments: json!({}) }
        );
    }
}
