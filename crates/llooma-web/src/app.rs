//! The pages. Each renders on the server from [`Page`] and hydrates in the browser from the same
//! value; what changes afterwards comes from the API's event streams.

use std::rc::Rc;

use leptos::either::{Either, EitherOf3, EitherOf4};
use leptos::prelude::*;
use llooma_types::ShownPart;
use llooma_types::{
    ApprovalCardView, Attached, ContextFill, ConversationDetail, ConversationView, EndState,
    FileView, PersonaView, ProviderChoice, Reply, ReplyPart, Step, StepState, SummaryView,
    TurnEvent, TurnStarted,
};
use serde_json::{Value, json};

use crate::attach::{AttachPanel, Attachables, Chosen, Menu, NextMessage, message_parts};
use crate::card::{McpIcon, countdown, elsewhere_note, send_answer};
use crate::files::{FilePicker, Tray, TrayView, sent_files};
use crate::layout::TopBar;
use crate::link::{LinkCard, host_of};
use crate::mcp_view::McpViewFrame;
use crate::model::{Me, Page};
use crate::model_choices::{ModelChoices, ModelDatalist};
use crate::question::QuestionCard;
use crate::review::said_of_tool;
use crate::sidebar::ConversationList;
use crate::voice::{DictateButton, ReadAloudButton, Voice, VoiceModeBar, VoiceState};
use crate::{api, stream};

/// Calls `$finish` with a closure that builds the page's view. One list of pages for both sides:
/// the server erases the view's type ([`App`]), the browser hydrates each page with its own type
/// ([`hydrate_page`]), because an erased view also brings the code to hydrate it asynchronously,
/// which no page uses, for every page into the browser part.
macro_rules! with_page_view {
    ($page:expr, $finish:expr) => {
        match $page {
            Page::SignIn { first_run, registration_open } => {
                $finish(move || view! { <SignIn first_run registration_open /> })
            }
            Page::Home { me, conversations, older, newest, cards, now_ms, no_provider } => {
                $finish(move || {
                    view! { <Home me conversations older newest cards now_ms no_provider /> }
                })
            }
            Page::Conversation {
                me,
                detail,
                cards,
                providers,
                personas,
                attachables,
                always_allow,
                now_ms,
                conversations,
                older,
            } => $finish(move || {
                view! {
                    <Conversation
                        me
                        detail
                        cards
                        providers
                        personas
                        attachables
                        always_allow
                        now_ms
                        conversations
                        older
                    />
                }
            }),
            Page::SettingsTools { me, servers, settings, cost, consent, preferences } => {
                $finish(move || {
                    view! {
                        <crate::settings::SettingsTools
                            me
                            servers
                            settings
                            cost
                            consent
                            preferences
                        />
                    }
                })
            }
            Page::SettingsBots { me, bots, providers, personas } => $finish(move || {
                view! { <crate::bots::SettingsBots me bots providers personas /> }
            }),
            Page::SettingsPersonas { me, personas } => {
                $finish(move || view! { <crate::personas::SettingsPersonas me personas /> })
            }
            Page::SettingsPrompts { me, wordings } => {
                $finish(move || view! { <crate::personas::SettingsPrompts me wordings /> })
            }
            Page::AdminHome { me, providers, settings, servers } => $finish(move || {
                view! { <crate::admin::AdminHome me providers settings servers /> }
            }),
            Page::AdminInstance { me, providers, settings, files, speech } => $finish(move || {
                view! { <crate::admin::AdminInstance me providers settings files speech /> }
            }),
            Page::AdminMcp { me, users_can_add, servers } => $finish(move || {
                view! { <crate::settings::AdminMcp me users_can_add servers /> }
            }),
            Page::Discover { me, entries, tags, query, tag, can_add } => $finish(move || {
                view! { <crate::discover::Discover me entries tags query tag can_add /> }
            }),
            Page::AddServer { me, label, address, dropped, can_add, entry } => $finish(move || {
                view! { <crate::discover::AddServer me label address dropped can_add entry /> }
            }),
            Page::AdminCatalogue { me, entries } => {
                $finish(move || view! { <crate::discover::AdminCatalogue me entries /> })
            }
            Page::SettingsAccount { me } => {
                $finish(move || view! { <crate::account::SettingsAccount me /> })
            }
            Page::SettingsUsage { me, report } => {
                $finish(move || view! { <crate::usage::SettingsUsage me report /> })
            }
            Page::AdminUsage { me, report, prices, providers, defaults, accounts } => {
                $finish(move || {
                    view! {
                        <crate::usage::AdminUsage me report prices providers defaults accounts />
                    }
                })
            }
            Page::NotFound { me } => $finish(move || view! { <NotFound me /> }),
        }
    };
}

/// The whole body of a page, as the server renders it.
#[component]
pub fn App(page: Page) -> impl IntoView {
    with_page_view!(page, erased)
}

fn erased<V: IntoView + 'static>(view: impl FnOnce() -> V) -> AnyView {
    view().into_any()
}

/// Takes over the server-rendered body of `page` in the browser.
#[cfg(feature = "hydrate")]
pub fn hydrate_page(page: Page) {
    with_page_view!(page, leptos::mount::hydrate_body)
}

#[component]
fn NotFound(me: Option<Me>) -> impl IntoView {
    view! {
        <div class="page">
            {me.map(|me| view! { <TopBar me /> })}
            <main class="narrow">
                <h1>"Not found"</h1>
                <p>"There is nothing here, or it is not yours."</p>
                <p><a href="/">"Back to your conversations"</a></p>
            </main>
        </div>
    }
}

/// A tab title without the "(N waiting) " this page puts in front of it.
fn without_waiting_count(title: &str) -> &str {
    title
        .strip_prefix('(')
        .and_then(|rest| rest.split_once(" waiting) "))
        .filter(|(count, _)| !count.is_empty() && count.bytes().all(|b| b.is_ascii_digit()))
        .map_or(title, |(_, title)| title)
}

/// Sign in, or create the first account (the administrator) on a fresh instance.
#[component]
fn SignIn(first_run: bool, registration_open: bool) -> impl IntoView {
    let registering = RwSignal::new(first_run);
    let error = RwSignal::new(None::<String>);
    let busy = RwSignal::new(false);
    let username = NodeRef::<leptos::html::Input>::new();
    let password = NodeRef::<leptos::html::Input>::new();
    let submit = move |ev: leptos::ev::SubmitEvent| {
        ev.prevent_default();
        let (Some(user), Some(pass)) = (username.get(), password.get()) else { return };
        let body = json!({"username": user.value(), "password": pass.value()});
        let path = if registering.get_untracked() {
            "/api/v1/auth/register"
        } else {
            "/api/v1/auth/login"
        };
        busy.set(true);
        error.set(None);
        api::spawn(async move {
            match api::call("POST", path, Some(body), None).await {
                Ok(_) => api::go("/"),
                Err(failure) => {
                    error.set(Some(failure.message));
                    busy.set(false);
                }
            }
        });
    };
    let heading = move || match (registering.get(), first_run) {
        (true, true) => "Create the administrator account",
        (true, false) => "Create an account",
        (false, _) => "Sign in",
    };
    view! {
        <div class="page">
            <main class="narrow signin">
                <h1 class="brand-big">"Llooma"</h1>
                <h2>{heading}</h2>
                {first_run
                    .then(|| {
                        view! {
                            <p class="hint">
                                "This instance has no account yet. The first account becomes its administrator."
                            </p>
                        }
                    })}
                <form class="stack" on:submit=submit>
                    <label>
                        "Username"
                        <input
                            node_ref=username
                            name="username"
                            autocomplete="username"
                            required
                            minlength="3"
                        />
                    </label>
                    <label>
                        "Password"
                        <input
                            node_ref=password
                            name="password"
                            type="password"
                            autocomplete="current-password"
                            required
                        />
                    </label>
                    <button class="primary" type="submit" disabled=move || busy.get()>
                        {move || if registering.get() { "Create account" } else { "Sign in" }}
                    </button>
                    <p class="error" role="alert">{move || error.get()}</p>
                </form>
                {(registration_open && !first_run)
                    .then(|| {
                        view! {
                            <button
                                class="link"
                                type="button"
                                on:click=move |_| registering.update(|r| *r = !*r)
                            >
                                {move || {
                                    if registering.get() {
                                        "I have an account: sign in"
                                    } else {
                                        "Create an account"
                                    }
                                }}
                            </button>
                        }
                    })}
            </main>
        </div>
    }
}

/// What "New conversation" does: creates one and opens it. It starts with the account's last
/// used model, else the instance's default: the server chooses.
fn new_conversation_button(
    csrf: String,
    error: RwSignal<Option<String>>,
) -> impl Fn(leptos::ev::MouseEvent) + Clone + 'static {
    move |_| {
        let csrf = csrf.clone();
        api::spawn(async move {
            let body = json!({"lastUsedModel": true});
            match api::call("POST", "/api/v1/conversations", Some(body), Some(&csrf)).await {
                Ok(created) => {
                    api::go(&format!("/c/{}", created["id"].as_str().unwrap_or_default()));
                }
                Err(failure) => error.set(Some(failure.message)),
            }
        });
    }
}

/// The conversation list.
#[component]
fn Home(
    me: Me,
    conversations: Vec<ConversationView>,
    older: Option<String>,
    newest: bool,
    cards: Vec<ApprovalCardView>,
    now_ms: i64,
    no_provider: bool,
) -> impl IntoView {
    let csrf = me.csrf_token.clone();
    let error = RwSignal::new(None::<String>);
    let new_conversation = new_conversation_button(csrf.clone(), error);
    // Until a model provider exists nobody can chat: say so, and lead an administrator there.
    let missing = no_provider.then(|| {
        if me.admin {
            Either::Left(view! {
                <section class="card setup-needed">
                    <h2>"One step left: a model provider"</h2>
                    <p>
                        "Llooma answers with a model from a provider (any service speaking the \
                         OpenAI chat completions API). There is none yet, so nobody can chat."
                    </p>
                    <a class="button primary" href="/admin/instance">"Add a model provider"</a>
                </section>
            })
        } else {
            Either::Right(view! {
                <section class="card setup-needed">
                    <p>
                        "There is no model provider yet, so conversations cannot be answered. \
                         Ask an administrator of this instance to add one."
                    </p>
                </section>
            })
        }
    });
    view! {
        <div class="page">
            <TopBar me=me.clone() />
            <main class="narrow">
                <ApprovalCards
                    cards
                    csrf=csrf.clone()
                    here=None
                    always_allow=false
                    now_ms
                    follow=None
                />
                <div class="row">
                    <h1>"Conversations"</h1>
                    <button class="primary new" type="button" on:click=new_conversation>
                        "New conversation"
                    </button>
                </div>
                <p class="error" role="alert">{move || error.get()}</p>
                {missing}
                <ConversationList conversations older current=None csrf=csrf.clone() />
                {(!newest)
                    .then(|| {
                        view! {
                            <nav class="row pages">
                                <a href="/">"Newest conversations"</a>
                            </nav>
                        }
                    })}
            </main>
        </div>
    }
}

/// One message of the timeline: the person's, or a reply built from its turn's events (live,
/// or from the stored log after a reload: the same fold, `Reply::apply`).
#[derive(Clone)]
struct Entry {
    key: usize,
    user: bool,
    turn_id: Option<String>,
    reply: RwSignal<Reply>,
    /// The files the person's message brought.
    files: Vec<FileView>,
    /// The summary the model reads in place of this message and all before it.
    summary_after: Option<SummaryView>,
}

/// Everything the conversation page changes as events arrive.
#[derive(Clone, Copy)]
struct Chat {
    id: StoredValue<String>,
    csrf: StoredValue<String>,
    entries: RwSignal<Vec<Entry>>,
    next_key: StoredValue<usize>,
    /// The key of the reply the stream is writing into.
    current: StoredValue<Option<usize>>,
    running: RwSignal<bool>,
    /// What went wrong with the last thing the person did (shown above the message box).
    error: RwSignal<Option<String>>,
    voice: Voice,
    /// The resources and prompts chosen for the next message.
    chosen: RwSignal<Vec<Chosen>>,
    /// How full the model's context window was after the last turn.
    context: RwSignal<Option<ContextFill>>,
    /// The oldest message shown, while older ones remain to load; and whether they are loading.
    older: RwSignal<Option<String>>,
    loading_older: RwSignal<bool>,
}

/// Messages a conversation page shows at first, and loads each time the reader reaches the
/// oldest shown.
pub const PAGE: u64 = 60;

/// A reply that is only its text (the person's message, or a stored reply without its log).
fn text_reply(turn_id: Option<&str>, text: String) -> Reply {
    Reply {
        turn_id: turn_id.unwrap_or_default().to_owned(),
        parts: vec![ReplyPart::Text { text }],
        ..Reply::default()
    }
}

impl Chat {
    fn entry(&self, user: bool, turn_id: Option<String>, reply: Reply) -> Entry {
        let key = self.next_key.get_value();
        self.next_key.set_value(key + 1);
        let reply = RwSignal::new(reply);
        Entry { key, user, turn_id, reply, files: Vec::new(), summary_after: None }
    }

    /// The stored conversation as entries: each person's message followed by its turn's reply
    /// as the log built it (failures and stops included), else as the stored text.
    fn stored_entries(&self, detail: &ConversationDetail) -> Vec<Entry> {
        let reply_of =
            |turn: Option<&str>| turn.and_then(|t| detail.replies.iter().find(|r| r.turn_id == t));
        let mut shown: Vec<&str> = Vec::new();
        let mut entries = Vec::new();
        for m in &detail.messages {
            let turn = m.turn_id.as_deref();
            if m.role == "user" {
                let mut entry =
                    self.entry(true, m.turn_id.clone(), text_reply(turn, m.content.clone()));
                entry.files.clone_from(&m.files);
                entries.push(entry);
                if let Some(reply) = reply_of(turn) {
                    shown.extend(turn);
                    entries.push(self.entry(false, m.turn_id.clone(), reply.clone()));
                }
            } else if !turn.is_some_and(|t| shown.contains(&t)) {
                entries.push(self.entry(
                    false,
                    m.turn_id.clone(),
                    text_reply(turn, m.content.clone()),
                ));
            }
            // The divider goes after the entry that shows the summary's last message.
            if let Some(summary) = &detail.summary
                && summary.through_message_id == m.id
                && let Some(last) = entries.last_mut()
            {
                last.summary_after = Some(summary.clone());
            }
        }
        entries
    }

    /// Loads the page of messages before the oldest shown, and shows it above them.
    fn load_older(&self) {
        let chat = *self;
        let Some(before) = chat.older.get_untracked() else { return };
        if chat.loading_older.get_untracked() {
            return;
        }
        chat.loading_older.set(true);
        api::spawn(async move {
            let path = format!(
                "/api/v1/conversations/{}?limit={PAGE}&before={before}",
                chat.id.get_value()
            );
            match api::call("GET", &path, None, None).await {
                Ok(page) => match serde_json::from_value::<ConversationDetail>(page) {
                    Ok(page) => {
                        let older = chat.stored_entries(&page);
                        chat.entries.update(|entries| {
                            entries.splice(0..0, older);
                        });
                        chat.older.set(page.older_messages);
                    }
                    Err(err) => api::console_error(&err.to_string()),
                },
                Err(failure) => chat.error.set(Some(failure.message)),
            }
            chat.loading_older.set(false);
        });
    }

    fn find(&self, user: bool, turn_id: &str) -> Option<Entry> {
        self.entries.with_untracked(|entries| {
            entries
                .iter()
                .find(|e| e.user == user && e.turn_id.as_deref() == Some(turn_id))
                .cloned()
        })
    }

    fn current(&self) -> Option<Entry> {
        let key = self.current.get_value()?;
        self.entries.with_untracked(|entries| entries.iter().find(|e| e.key == key).cloned())
    }

    /// Adds the person's message of a turn unless the timeline has it, before that turn's reply.
    fn add_user(&self, turn_id: &str, text: String, files: Vec<FileView>) {
        if self.find(true, turn_id).is_some() {
            return;
        }
        let mut entry = self.entry(true, Some(turn_id.to_owned()), text_reply(Some(turn_id), text));
        entry.files = files;
        self.entries.update(|entries| {
            let at = entries
                .iter()
                .position(|e| !e.user && e.turn_id.as_deref() == Some(turn_id))
                .unwrap_or(entries.len());
            entries.insert(at, entry);
        });
    }

    fn on_event(&self, event: TurnEvent) {
        if let TurnEvent::Start(started) = &event {
            self.start(started);
        }
        if let Some(reply) = self.current() {
            reply.reply.update(|r| r.apply(&event));
        }
        if let TurnEvent::End(ended) = event {
            self.current.set_value(None);
            self.running.set(false);
            if ended.context.is_some() {
                self.context.set(ended.context);
            }
        }
    }

    /// Drops the entries of `turn` and of every later turn: a message sent in place of that
    /// turn's (edited, or a reply asked for again) replaced them, in this tab or another.
    fn drop_from(&self, turn: &str) {
        self.entries.update(|entries| {
            if let Some(at) = entries.iter().position(|e| e.turn_id.as_deref() == Some(turn)) {
                entries.truncate(at);
            }
        });
    }

    /// Sends `content` in place of the person's message of `turn` and everything after it.
    fn resend(&self, turn: String, content: String) {
        let chat = *self;
        chat.error.set(None);
        // The message keeps its files.
        let files = chat.find(true, &turn).map(|e| e.files).unwrap_or_default();
        api::spawn(async move {
            let path = format!("/api/v1/conversations/{}/messages", chat.id.get_value());
            let body = json!({"content": content, "replaces": turn});
            match api::call("POST", &path, Some(body), Some(&chat.csrf.get_value())).await {
                Ok(started) => {
                    chat.drop_from(&turn);
                    if let Some(new_turn) = started["turnId"].as_str() {
                        chat.add_user(new_turn, content, files);
                        api::chat_to_latest();
                    }
                }
                Err(failure) => chat.error.set(Some(failure.message)),
            }
        });
    }

    /// Sends what the person said in voice mode as a spoken turn; gives the turn's id.
    async fn send_spoken(&self, content: String) -> Option<String> {
        let path = format!("/api/v1/conversations/{}/messages", self.id.get_value());
        let body = json!({"content": content, "spoken": true});
        match api::call("POST", &path, Some(body), Some(&self.csrf.get_value())).await {
            Ok(started) => {
                let turn = started["turnId"].as_str()?.to_owned();
                self.add_user(&turn, content, Vec::new());
                api::chat_to_latest();
                Some(turn)
            }
            Err(failure) => {
                self.error.set(Some(failure.message));
                None
            }
        }
    }

    /// The text of `turn`'s reply once it ended; `None` if voice mode was left meanwhile.
    async fn reply_when_done(&self, turn: &str) -> Option<String> {
        loop {
            if !self.voice.mode.get_untracked() {
                return None;
            }
            if let Some(entry) = self.find(false, turn)
                && entry.reply.with_untracked(|r| r.state.is_some())
            {
                return Some(entry.reply.with_untracked(Reply::text));
            }
            crate::media::sleep_ms(200).await;
        }
    }

    /// A turn's events begin: the reply they write into, after the person's message.
    fn start(&self, started: &TurnStarted) {
        if let Some(replaced) = &started.replaced {
            self.drop_from(replaced);
        }
        let turn = started.turn_id.as_str();
        self.running.set(true);
        if let Some(reply) = self.find(false, turn) {
            // The log is replayed from its start: `start` rebuilds the reply from it.
            self.current.set_value(Some(reply.key));
            return;
        }
        let reply = self.entry(false, Some(turn.to_owned()), Reply::new(turn));
        self.current.set_value(Some(reply.key));
        let has_user = self.find(true, turn).is_some();
        self.entries.update(|entries| {
            let at = entries
                .iter()
                .position(|e| e.user && e.turn_id.as_deref() == Some(turn))
                .map_or(entries.len(), |p| p + 1);
            entries.insert(at, reply);
        });
        if !has_user {
            // Sent from another tab: fetch what the person wrote.
            let chat = *self;
            let turn = turn.to_owned();
            api::spawn(async move {
                let path = format!("/api/v1/conversations/{}", chat.id.get_value());
                if let Ok(detail) = api::call("GET", &path, None, None).await
                    && let Ok(detail) = serde_json::from_value::<ConversationDetail>(detail)
                    && let Some(message) = detail
                        .messages
                        .into_iter()
                        .find(|m| m.role == "user" && m.turn_id.as_deref() == Some(&turn))
                {
                    chat.add_user(&turn, message.content, message.files);
                }
            });
        }
    }
}

/// One conversation: the timeline, the cards waiting for an answer, the composer.
#[component]
fn Conversation(
    me: Me,
    detail: ConversationDetail,
    cards: Vec<ApprovalCardView>,
    providers: Vec<ProviderChoice>,
    personas: Vec<PersonaView>,
    attachables: Attachables,
    always_allow: bool,
    now_ms: i64,
    conversations: Vec<ConversationView>,
    older: Option<String>,
) -> impl IntoView {
    let csrf = me.csrf_token.clone();
    let conversation = detail.conversation.clone();
    let id = conversation.id.clone();
    let error = RwSignal::new(None);
    let chat = Chat {
        id: StoredValue::new(id.clone()),
        csrf: StoredValue::new(csrf.clone()),
        entries: RwSignal::new(Vec::new()),
        next_key: StoredValue::new(0),
        current: StoredValue::new(None),
        running: RwSignal::new(detail.running_turn.is_some()),
        error,
        voice: Voice::new(csrf.clone(), error),
        chosen: RwSignal::new(Vec::new()),
        context: RwSignal::new(detail.replies.iter().rev().find_map(|r| r.context)),
        older: RwSignal::new(detail.older_messages.clone()),
        loading_older: RwSignal::new(false),
    };
    // A result's link to a resource can add it to the next message from the timeline.
    provide_context(NextMessage(chat.chosen));
    // A tool's view asks the instance for its calls with the page's token.
    provide_context(crate::mcp_view::PageToken(csrf.clone()));
    chat.entries.set(chat.stored_entries(&detail));
    let on: api::OnEvent =
        Rc::new(move |name: &str, data: &str| match TurnEvent::decode(name, data) {
            Ok(event) => chat.on_event(event),
            Err(err) => api::console_error(&err.to_string()),
        });
    let follow = stream::Follow {
        conversation_id: id.clone(),
        after: detail.events_after,
        names: &TurnEvent::KINDS,
        on,
    };

    // Scrolled up to read, the reader is not pulled down as the reply streams in; a button
    // brings the latest back.
    let away = RwSignal::new(false);
    let sidebar_open = RwSignal::new(false);
    let new_conversation = new_conversation_button(csrf.clone(), chat.error);

    view! {
        <div class="page chat-page">
            <TopBar me=me.clone() />
            <div class="chat-layout">
            // The account's conversations beside this one; on a phone, folded away until asked.
            <aside class="sidebar" class:open=move || sidebar_open.get() aria-label="Conversations">
                <div class="row sidebar-head">
                    <button class="primary new" type="button" on:click=new_conversation>
                        "New conversation"
                    </button>
                    <button
                        class="sidebar-close"
                        type="button"
                        aria-label="Close the list"
                        on:click=move |_| sidebar_open.set(false)
                    >
                        "✕"
                    </button>
                </div>
                <ConversationList conversations older current=Some(id.clone()) csrf=csrf.clone() />
            </aside>
            <main class="chat">
                <div class="row chat-head">
                    <button
                        class="sidebar-toggle"
                        type="button"
                        aria-label="Conversations"
                        title="Conversations"
                        on:click=move |_| sidebar_open.update(|open| *open = !*open)
                    >
                        "☰"
                    </button>
                    <a class="back" href="/">"← Conversations"</a>
                    <h1 class="title">{conversation.title.clone()}</h1>
                    <details class="export-menu">
                        <summary>"Export"</summary>
                        <div class="export-choices">
                            <a
                                class="export-markdown"
                                href=format!("/api/v1/conversations/{id}/export?format=markdown")
                                download=""
                            >
                                "As Markdown"
                            </a>
                            <a
                                class="export-json"
                                href=format!("/api/v1/conversations/{id}/export?format=json")
                                download=""
                            >
                                "As JSON (everything)"
                            </a>
                        </div>
                    </details>
                </div>
                // The messages scroll above the composer and open on the latest one; the cards
                // waiting for an answer come right after them, above the composer.
                <div
                    class="chat-scroll"
                    on:scroll=move |_| {
                        away.set(!api::chat_at_latest());
                        // Older messages load as the reader scrolls up to the oldest shown.
                        if api::chat_near_oldest() {
                            chat.load_older();
                        }
                    }
                >
                    <div class="chat-scroll-content">
                        <p class="older-messages" hidden=move || chat.older.with(Option::is_none)>
                            <button
                                class="load-older"
                                type="button"
                                disabled=move || chat.loading_older.get()
                                on:click=move |_| chat.load_older()
                            >
                                {move || {
                                    if chat.loading_older.get() {
                                        "Loading older messages…"
                                    } else {
                                        "Older messages"
                                    }
                                }}
                            </button>
                        </p>
                        <ol class="timeline">
                            <For
                                each=move || chat.entries.get()
                                key=|entry| entry.key
                                children=move |entry| entry_view(chat, entry)
                            />
                        </ol>
                        <ApprovalCards
                            cards
                            csrf=csrf.clone()
                            here=Some(id.clone())
                            always_allow
                            now_ms
                            follow=Some(follow)
                        />
                    </div>
                </div>
                <div class="jump-row">
                    <button
                        class="jump-latest"
                        type="button"
                        hidden=move || !away.get()
                        on:click=move |_| {
                            api::chat_to_latest();
                            away.set(false);
                        }
                    >
                        "↓ Latest"
                    </button>
                </div>
                <Composer
                    chat
                    conversation
                    providers
                    personas
                    attachables
                    pending_files=detail.pending_files.clone()
                />
            </main>
            </div>
        </div>
    }
}

fn entry_view(chat: Chat, entry: Entry) -> impl IntoView {
    let divider = entry.summary_after.clone().map(summary_divider);
    let user = entry.user;
    let class = if user { "msg user" } else { "msg reply" };
    let reply = entry.reply;
    let files = sent_files(&entry.files);
    let turn = entry.turn_id.clone();
    let actions = if user {
        turn.map(|turn| Either::Left(message_actions(chat, turn, reply)))
    } else {
        Some(Either::Right(reply_actions(chat, entry.key, turn, reply)))
    };
    view! {
        <li class=class>
            {move || {
                reply.with(|r| r.parts.iter().cloned().map(|part| part_view(user, part)).collect_view())
            }}
            {files}
            {move || {
                (!user && reply.with(|r| r.spoken == Some(true))).then(|| {
                    view! {
                        <p class="note spoken">"Spoken turn: MCP tools are not called in it."</p>
                    }
                })
            }}
            {move || {
                (reply.with(|r| r.state) == Some(EndState::Stopped))
                    .then(|| view! { <p class="note">"Stopped."</p> })
            }}
            {move || {
                reply.with(|r| r.error.clone())
                    .map(|message| view! { <p class="error turn-error">{message}</p> })
            }}
        </li>
        // The actions sit under the message, outside it: its text stays only its text.
        {actions
            .map(|actions| {
                view! { <li class=if user { "msg-after user" } else { "msg-after reply" }>{actions}</li> }
            })}
        {divider}
    }
}

/// Where the summary the model reads in place of the oldest messages ends: they stay here to
/// read; the summary itself opens below the line.
fn summary_divider(summary: SummaryView) -> impl IntoView {
    let covered = summary.covered_messages;
    let said = if covered == 1 { "message".to_owned() } else { format!("{covered} messages") };
    view! {
        <li class="summary-divider" role="separator">
            <details>
                <summary>
                    {format!("The model reads the {said} above as a summary")}
                </summary>
                <p class="summary-text">{summary.content}</p>
            </details>
        </li>
    }
}

/// How full the model's context window is, in the composer: past three quarters the oldest
/// messages are summarized.
#[component]
fn ContextGauge(context: RwSignal<Option<ContextFill>>) -> impl IntoView {
    let percent = move || {
        context.get().map_or(0, |c| (c.used_tokens * 100 / c.window_tokens.max(1)).min(100))
    };
    let title = move || {
        context
            .get()
            .map(|c| {
                let about = if c.estimated { "about " } else { "" };
                format!(
                    "The conversation fills {about}{} of the model's {} tokens; past three \
                     quarters, the oldest messages are summarized for the model (they stay here).",
                    c.used_tokens, c.window_tokens
                )
            })
            .unwrap_or_default()
    };
    view! {
        <span class="context-gauge" hidden=move || context.get().is_none() title=title>
            <meter min="0" max="100" low="60" high="75" optimum="0" value=percent></meter>
            <span class="context-percent">{move || format!("{}%", percent())}</span>
        </span>
    }
}

/// Under the person's message: Edit, which sends the changed message in its place (the later
/// messages are replaced, as in other chat apps).
fn message_actions(chat: Chat, turn: String, message: RwSignal<Reply>) -> impl IntoView {
    let editing = RwSignal::new(false);
    let edited = NodeRef::<leptos::html::Textarea>::new();
    let turn = StoredValue::new(turn);
    let send = move |_| {
        let content = edited.get().map(|t| t.value()).unwrap_or_default();
        if !content.trim().is_empty() {
            editing.set(false);
            chat.resend(turn.get_value(), content.trim().to_owned());
        }
    };
    view! {
        <div class="msg-actions" hidden=move || editing.get()>
            <button
                class="edit"
                type="button"
                title="Edit this message and send it again; the later messages are replaced"
                disabled=move || chat.running.get()
                on:click=move |_| editing.set(true)
            >
                "Edit"
            </button>
        </div>
        <Show when=move || editing.get()>
            <div class="edit-box stack">
                <textarea node_ref=edited name="edited" rows="3" prop:value=move || message.with(Reply::text)></textarea>
                <div class="row">
                    <button class="primary resend" type="button" on:click=send>"Send"</button>
                    <button class="cancel" type="button" on:click=move |_| editing.set(false)>
                        "Cancel"
                    </button>
                </div>
            </div>
        </Show>
    }
}

/// Under a finished reply: the model that wrote it and when, Copy, and on the last reply,
/// Regenerate (the person's message is sent again in place of itself).
fn reply_actions(
    chat: Chat,
    key: usize,
    turn: Option<String>,
    reply: RwSignal<Reply>,
) -> impl IntoView {
    // The reader's own time zone is known only in the browser: the time is written there.
    let when = RwSignal::new(String::new());
    Effect::new(move |_| {
        let started = reply.with(|r| r.started_at.clone()).unwrap_or_default();
        when.set(api::local_time(&started));
    });
    let label = RwSignal::new("Copy");
    let copy = move |_| {
        let text = reply.with(Reply::text);
        api::spawn(async move {
            let done = api::copy_text(&text).await;
            label.set(if done { "Copied" } else { "Copy failed" });
        });
    };
    let last = move || chat.entries.with(|entries| entries.last().map(|e| e.key) == Some(key));
    let regenerate = move |_| {
        let Some(turn) = turn.clone() else { return };
        let asked = chat.find(true, &turn).map(|e| e.reply.with(Reply::text));
        if let Some(content) = asked.filter(|c| !c.trim().is_empty()) {
            chat.resend(turn, content);
        }
    };
    view! {
        <div class="msg-actions reply-meta" hidden=move || reply.with(|r| r.state.is_none())>
            <span class="model">{move || reply.with(|r| r.model.clone()).unwrap_or_default()}</span>
            <time datetime=move || reply.with(|r| r.started_at.clone())>{move || when.get()}</time>
            <button class="copy-reply" type="button" on:click=copy>
                {move || label.get()}
            </button>
            <ReadAloudButton voice=chat.voice text=Signal::derive(move || reply.with(Reply::text)) />
            <button
                class="regenerate"
                type="button"
                title="Ask the model again for this reply"
                hidden=move || !last() || chat.running.get()
                on:click=regenerate
            >
                "Regenerate"
            </button>
        </div>
    }
}

fn part_view(user: bool, part: ReplyPart) -> impl IntoView {
    match part {
        ReplyPart::Text { text } if user => EitherOf4::A(view! { <div class="text">{text}</div> }),
        // A reply's Markdown, rendered again as each piece of the stream arrives.
        ReplyPart::Text { text } => EitherOf4::B(crate::markdown::markdown(&text)),
        ReplyPart::Reasoning { text } => EitherOf4::C(view! {
            <details class="reasoning">
                <summary>"Reasoning"</summary>
                <div class="text">{text}</div>
            </details>
        }),
        ReplyPart::Step { step } => EitherOf4::D(step_view(&step)),
    }
}

/// A tool call in the timeline: which server and tool, and what became of it.
fn step_view(step: &Step) -> impl IntoView + use<> {
    let text = |field: &Option<String>| field.clone().unwrap_or_default();
    let state = step.state.as_str();
    if step.tool.as_deref() == Some("conversation_summary") {
        let n = step.entries.unwrap_or(0);
        let what = match step.state {
            StepState::Running => format!("Summarizing the {n} oldest messages for the model…"),
            StepState::Done => format!(
                "The {n} oldest messages were summarized: the model reads the summary in their \
                 place (they stay here)"
            ),
            _ => format!("Could not summarize: {}", text(&step.error)),
        };
        return EitherOf4::A(
            view! {
                <p class=format!("step builtin summary-step {state}") data-state=state>{what}</p>
            }
            .into_any(),
        );
    }
    if !step.is_mcp() {
        let tool = text(&step.tool);
        let result = text(&step.result);
        // A refusal (memory closed after an MCP answer) or a failure says why, unopened.
        let outcome = match step.state {
            StepState::Refused => format!(" — refused: {}", text(&step.message)),
            StepState::Failed => format!(" — failed: {}", text(&step.error)),
            _ => String::new(),
        };
        return EitherOf4::A(
            view! {
                <details class=format!("step builtin {state}") data-state=state>
                    <summary>"Used " <b>{tool}</b> {outcome}</summary>
                    <pre class="result">{result}</pre>
                </details>
            }
            .into_any(),
        );
    }
    let server = text(&step.server);
    if let Some(question) = step.question.clone() {
        return EitherOf4::D(question_step(step, server, question));
    }
    // An MCP tool call names the server's tool; a resource or prompt the person attached, or the
    // model's reading of resources and asking for tools, say what it was.
    let tool = match (&step.server_tool, step.attached) {
        (Some(name), _) if !name.is_empty() => name.clone(),
        (_, Some(Attached::Resource)) => format!("resource {}", text(&step.uri)),
        (_, Some(Attached::Prompt)) => format!("prompt {}", text(&step.name)),
        _ => match &step.uri {
            Some(uri) if !uri.is_empty() => format!("{} {uri}", text(&step.tool)),
            _ => text(&step.tool),
        },
    };
    let group = step.group.clone().flatten().unwrap_or_default();
    let (icon, what) = match step.state {
        StepState::Done if step.attached.is_some() => ("✓", "attached".to_owned()),
        StepState::Done => ("✓", "read".to_owned()),
        StepState::Opened => ("✓", format!("tools of {group} offered")),
        StepState::Waiting => ("…", "waiting for your answer".to_owned()),
        StepState::Running => ("…", running_words(step)),
        StepState::Allowed if step.is_error == Some(true) => {
            ("!", "called; the server answered with an error".to_owned())
        }
        StepState::Allowed => ("✓", "called".to_owned()),
        StepState::Refused => match step.message.as_deref() {
            // Refused without asking (a spoken turn, a bot without MCP): the reason.
            Some(reason) if !reason.is_empty() => ("✕", format!("refused: {reason}")),
            _ => ("✕", "refused: nothing was sent".to_owned()),
        },
        StepState::Expired => ("⌛", "not answered in time: nothing was sent".to_owned()),
        StepState::Interrupted => ("■", "dropped: the reply stopped".to_owned()),
        StepState::Failed => ("!", format!("could not be called: {}", text(&step.error))),
        StepState::Invalid => {
            ("!", "the model's arguments were not an object: nothing was called".to_owned())
        }
    };
    // The tool's interactive view, drawn from the stored call and result.
    let frame = step.view.clone().map(|view| {
        let call_id = step.call_id.clone().unwrap_or_default();
        view! { <McpViewFrame view server=text(&step.server) tool=tool.clone() call_id /> }
    });
    let summary = view! {
        <span class="icon">{icon}</span>
        <span class="server">{server}</span>
        " · "
        <b class="tool">{tool}</b>
        " — "
        <span class="what">{what}</span>
    };
    let shown = (!step.shown.is_empty())
        .then(|| shown_view(&step.shown, &text(&step.server), step.server_id.clone()));
    match step.output.clone() {
        // What the server returned, as the model read it (wrapped and labelled as its text),
        // then what of it is for the person's eyes.
        Some(output) => EitherOf4::B(view! {
            <details class=format!("step mcp {state}") data-state=state>
                <summary>{summary}</summary>
                <pre class="output">{output}</pre>
            </details>
            {shown}
            {frame}
        }),
        None => EitherOf4::C(
            view! { <div class=format!("step mcp {state}") data-state=state>{summary}</div> },
        ),
    }
}

/// What a call's result shows the person: its images, what the server marked for them only,
/// and the rest by name. All of it is the server's, and says so.
fn shown_view(
    parts: &[ShownPart],
    server: &str,
    server_id: Option<String>,
) -> impl IntoView + use<> {
    let next = use_context::<NextMessage>();
    let items = parts
        .iter()
        .cloned()
        .map(|part| match part {
            ShownPart::Text { text } => EitherOf4::A(view! {
                <p class="shown-text">{text}</p>
            }),
            ShownPart::Image { mime_type, data, for_model } => {
                let alt = if for_model { "An image in the result" } else { "An image for you only" };
                EitherOf4::B(view! {
                    <img class="shown-image" src=format!("data:{mime_type};base64,{data}") alt=alt />
                })
            }
            ShownPart::Audio { mime_type, data, .. } => EitherOf4::C(view! {
                <audio
                    class="shown-audio"
                    controls=true
                    preload="none"
                    src=format!("data:{mime_type};base64,{data}")
                ></audio>
            }),
            ShownPart::Named { what, uri, name, mime_type } => {
                let label = match what.as_str() {
                    "link" => "Link to a resource",
                    "resource" => "Resource",
                    "audio" => "Audio not played",
                    _ => "Image not shown",
                };
                // A resource of the server can be read with the next message, as if chosen
                // with @: the person sends it, nothing is read before.
                let attach = match (next, &server_id, &uri) {
                    (Some(next), Some(server_id), Some(uri)) if what == "link" || what == "resource" => {
                        let (server_id, uri) = (server_id.clone(), uri.clone());
                        let title = name.clone().unwrap_or_else(|| uri.clone());
                        let server = server.to_owned();
                        Some(view! {
                            <button
                                class="attach-link"
                                type="button"
                                title="Adds it to your next message, as if chosen with @"
                                on:click=move |_| {
                                    next.add_resource(server_id.clone(), server.clone(), title.clone(), uri.clone())
                                }
                            >
                                "Attach to next message"
                            </button>
                        })
                    }
                    _ => None,
                };
                let detail = [name, uri, mime_type].into_iter().flatten().collect::<Vec<_>>();
                EitherOf4::D(view! {
                    <p class="shown-named">
                        {label} ": " <code>{detail.join(" · ")}</code> " " {attach}
                    </p>
                })
            }
        })
        .collect_view();
    view! {
        <div class="step-shown">
            <p class="shown-from">{format!("From {server}:")}</p>
            {items}
        </div>
    }
}

/// A running call in words, with the server's progress when it reports some: "running: 3 of 6
/// — indexing", or where its task stands when the server runs it as one.
fn running_words(step: &Step) -> String {
    let number = |n: &serde_json::Number| {
        let n = n.as_f64().unwrap_or_default();
        if n.fract() == 0.0 && n.abs() < 1e15 { format!("{}", n as i64) } else { format!("{n:.1}") }
    };
    let mut words = match step.task.as_deref() {
        // A task's question is its own card in the timeline; the step says why the call waits.
        Some("input_required") => "running as a task on the server: waiting for an answer",
        Some(_) => "running as a task on the server",
        None => "running",
    }
    .to_owned();
    if let Some(progress) = &step.progress {
        words.push_str(": ");
        words.push_str(&number(progress));
        if let Some(total) = &step.total {
            words.push_str(" of ");
            words.push_str(&number(total));
        }
    }
    if let Some(message) = step.message.as_deref().filter(|m| !m.is_empty()) {
        words.push_str(" — ");
        words.push_str(message);
    }
    words
}

/// A server's question during a call, in the timeline: what it asked and what became of it
/// (never the values given: those went to the server and are not kept).
fn question_step(step: &Step, server: String, question: String) -> impl IntoView + use<> {
    let state = step.state.as_str();
    let tool = step.server_tool.clone().unwrap_or_default();
    let link = step.link.as_deref();
    let (icon, what) = match (step.state, step.reply.as_deref()) {
        (StepState::Waiting, _) => ("…", "waiting for your answer".to_owned()),
        (StepState::Allowed, Some("done")) => ("✓", "done; the call was sent again".to_owned()),
        (StepState::Allowed, _) if link.is_some() => ("✓", "you opened it".to_owned()),
        (StepState::Allowed, Some("sent")) => ("✓", "you sent its answer back".to_owned()),
        (StepState::Allowed, _) if step.sampled.is_some() => ("✓", "you let it answer".to_owned()),
        (StepState::Allowed, _) => ("✓", "you answered".to_owned()),
        (StepState::Expired, _) => {
            ("⌛", "not answered in time: the server was told so".to_owned())
        }
        (StepState::Interrupted, _) => ("■", "dropped: the reply stopped".to_owned()),
        (StepState::Failed, _) => ("!", step.error.clone().unwrap_or_default()),
        (_, Some("cancel")) => ("✕", "you dismissed it".to_owned()),
        (_, _) => match step.message.as_deref() {
            Some(reason) if !reason.is_empty() => ("✕", reason.to_owned()),
            _ => ("✕", "you declined".to_owned()),
        },
    };
    view! {
        <div class=format!("step mcp question {state}") data-state=state>
            <span class="icon">{icon}</span>
            <span class="server">{server}</span>
            {match (link, step.sampled.as_deref()) {
                (Some(url), _) => format!(" asked you to open a page on {}, while running ", host_of(url)),
                (None, Some(model)) => format!(" asked your model ({model}), while running "),
                (None, None) => " asked, while running ".to_owned(),
            }}
            <b class="tool">{tool}</b>
            {(!question.trim().is_empty())
                .then(|| view! { ": " <q class="asked">{question}</q> })}
            " — "
            <span class="what">{what}</span>
        </div>
    }
}

/// JSON text, indented; anything else as it is.
fn pretty(raw: &str) -> String {
    serde_json::from_str::<Value>(raw)
        .ok()
        .and_then(|v| serde_json::to_string_pretty(&v).ok())
        .unwrap_or_else(|| raw.to_owned())
}

/// The message box, the model, the lightning menu, send and stop.
#[component]
fn Composer(
    chat: Chat,
    conversation: ConversationView,
    providers: Vec<ProviderChoice>,
    personas: Vec<PersonaView>,
    attachables: Attachables,
    pending_files: Vec<FileView>,
) -> impl IntoView {
    let error = chat.error;
    let attach_open = RwSignal::new(None::<Menu>);
    let chosen = chat.chosen;
    let message = NodeRef::<leptos::html::Textarea>::new();
    let tray = Tray::new(chat.id.get_value(), chat.csrf.get_value(), error, pending_files);
    let provider_id = RwSignal::new(conversation.provider_id.clone().unwrap_or_default());
    let model = RwSignal::new(conversation.model.clone().unwrap_or_default());
    // Said before sending, not left to the provider's refusal: images for a model that does not
    // see them.
    // Marked by an administrator (known at once), or said by the provider's model list (which
    // also holds what a local server such as Ollama reports; asked for once an image waits).
    let choices = ModelChoices::new();
    Effect::new(move |_| {
        if tray.has_images() {
            choices.load();
        }
    });
    let vision_models = providers.clone();
    let blind = Memo::new(move |_| {
        let model = model.get();
        let model = model.trim();
        if !tray.has_images() || model.is_empty() {
            return None;
        }
        let provider = provider_id.get();
        let marked = vision_models
            .iter()
            .find(|p| p.id == provider)
            .is_some_and(|p| p.vision_models.iter().any(|m| m == model));
        let listed = choices.sees_images(&provider, model);
        (!marked && listed == Some(false)).then(|| model.to_owned())
    });
    let send = move || send_message(chat, message, chosen, tray, blind);
    // Dictated words join what is in the box, for the person to edit and send.
    let add_words = move |words: String| {
        if let Some(area) = message.get_untracked() {
            let typed = area.value();
            let joined = if typed.trim().is_empty() {
                words
            } else {
                format!("{} {words}", typed.trim_end())
            };
            area.set_value(&joined);
        }
    };
    let persona_id = conversation.persona_id.clone().unwrap_or_default();
    let dragging = RwSignal::new(false);
    view! {
        <form
            class="composer"
            class:dragging=move || dragging.get()
            on:submit=move |ev: leptos::ev::SubmitEvent| {
                ev.prevent_default();
                send();
            }
            on:dragover=move |ev: leptos::ev::DragEvent| {
                // Saying so lets the files be dropped here rather than opened by the browser.
                ev.prevent_default();
                dragging.set(true);
            }
            on:dragleave=move |_| dragging.set(false)
            on:drop=move |ev: leptos::ev::DragEvent| {
                ev.prevent_default();
                dragging.set(false);
                tray.add(api::dropped_files(&ev));
            }
        >
            <p class="error" role="alert">{move || error.get()}</p>
            <p class="warning vision-warning" role="status" hidden=move || blind.get().is_none()>
                {move || {
                    blind
                        .get()
                        .map(|model| {
                            format!(
                                "{model} does not see images: choose a model that does, or remove the images."
                            )
                        })
                }}
            </p>
            <VoiceModeBar voice=chat.voice start=move || start_voice_mode(chat) />
            <AttachPanel offer=attachables open=attach_open chosen />
            <TrayView tray />
            <MessageBox message attach_open send tray />
            <div class="composer-bar">
                <ToolsMenu chat mcp_enabled=conversation.mcp_enabled />
                <FilePicker tray />
                <DictateButton voice=chat.voice add=add_words />
                <AttachButtons attach_open />
                <PersonaPicker chat personas persona_id />
                <ModelPicker chat providers provider_id model choices />
                <span class="spacer"></span>
                <ContextGauge context=chat.context />
                <button
                    class="stop"
                    type="button"
                    hidden=move || !chat.running.get()
                    on:click=move |_| stop_reply(chat)
                >
                    "Stop"
                </button>
                <button
                    class="primary send"
                    type="submit"
                    disabled=move || tray.uploading()
                    title=move || if tray.uploading() { "Waiting for the files to upload" } else { "" }
                >
                    "Send"
                </button>
            </div>
        </form>
    }
}

/// Sends what the message box holds, with the resources and prompts chosen for it; once the
/// turn has started the box and the choices are emptied and the message joins the timeline.
fn send_message(
    chat: Chat,
    message: NodeRef<leptos::html::Textarea>,
    chosen: RwSignal<Vec<Chosen>>,
    tray: Tray,
    blind: Memo<Option<String>>,
) {
    let Some(area) = message.get() else { return };
    let content = area.value();
    if content.trim().is_empty() && !tray.has_files() {
        return;
    }
    let error = chat.error;
    if tray.uploading() {
        error.set(Some("Wait for the files to finish uploading, then send.".to_owned()));
        return;
    }
    if blind.get_untracked().is_some() {
        // The warning above the box says why; nothing is sent.
        return;
    }
    let path = format!("/api/v1/conversations/{}/messages", chat.id.get_value());
    let (resources, prompts) = message_parts(&chosen.get_untracked());
    let files = tray.ids();
    api::spawn(async move {
        let body = json!({
            "content": content, "resources": resources, "prompts": prompts, "files": files
        });
        match api::call("POST", &path, Some(body), Some(&chat.csrf.get_value())).await {
            Ok(started) => {
                area.set_value("");
                chosen.set(Vec::new());
                let sent = tray.take_sent(&files);
                error.set(None);
                if let Some(turn) = started["turnId"].as_str() {
                    chat.add_user(turn, content.trim().to_owned(), sent);
                    // What the person just sent, and the reply to come, are in view.
                    api::chat_to_latest();
                }
            }
            Err(failure) => error.set(Some(failure.message)),
        }
    });
}

/// Voice mode: listen until the person stops talking, send what they said as a spoken turn,
/// read the reply aloud, and again, until they leave it (or something fails, which is said).
fn start_voice_mode(chat: Chat) {
    let voice = chat.voice;
    if voice.mode.get_untracked() || chat.running.get_untracked() {
        return;
    }
    voice.mode.set(true);
    chat.error.set(None);
    api::spawn(async move {
        while voice.mode.get_untracked() {
            let said = match voice.listen().await {
                Ok(Some(said)) => said,
                Ok(None) => continue,
                Err(failure) => {
                    chat.error.set(Some(failure.message));
                    break;
                }
            };
            voice.state.set(VoiceState::Waiting);
            let Some(turn) = chat.send_spoken(said).await else { break };
            let Some(reply) = chat.reply_when_done(&turn).await else { break };
            if reply.trim().is_empty() || !voice.mode.get_untracked() {
                continue;
            }
            voice.state.set(VoiceState::Reading);
            if let Err(failure) = voice.read(reply).await {
                chat.error.set(Some(failure.message));
                break;
            }
        }
        voice.leave();
    });
}

/// Asks the server to stop the reply being written.
fn stop_reply(chat: Chat) {
    let path = format!("/api/v1/conversations/{}/stop", chat.id.get_value());
    api::spawn(async move {
        if let Err(failure) =
            api::call("POST", &path, Some(json!({})), Some(&chat.csrf.get_value())).await
        {
            chat.error.set(Some(failure.message));
        }
    });
}

/// Changes the conversation's settings (`body`: what changes); a failure is shown above the
/// message box.
fn patch_conversation(chat: Chat, body: Value) {
    let path = format!("/api/v1/conversations/{}", chat.id.get_value());
    api::spawn(async move {
        match api::call("PATCH", &path, Some(body), Some(&chat.csrf.get_value())).await {
            Ok(_) => chat.error.set(None),
            Err(failure) => chat.error.set(Some(failure.message)),
        }
    });
}

/// Where the message is written: Enter sends (Shift+Enter is a new line), `@` after a space
/// opens the resources, `/` as the first sign the prompts.
#[component]
fn MessageBox(
    message: NodeRef<leptos::html::Textarea>,
    attach_open: RwSignal<Option<Menu>>,
    send: impl Fn() + Copy + 'static,
    tray: Tray,
) -> impl IntoView {
    view! {
        <textarea
            node_ref=message
            name="message"
            rows="3"
            placeholder="Write a message (@ attaches a resource, / at the start picks a prompt)"
            on:input=move |_| {
                let Some(area) = message.get() else { return };
                let text = area.value();
                // `@` typed after a space (or first), `/` typed first: open the menu, and
                // take the sign back out of the message.
                let at = text.ends_with('@')
                    && text[..text.len() - 1].chars().last().is_none_or(char::is_whitespace);
                if at {
                    area.set_value(&text[..text.len() - 1]);
                    attach_open.set(Some(Menu::Resources));
                } else if text == "/" {
                    area.set_value("");
                    attach_open.set(Some(Menu::Prompts));
                }
            }
            on:paste=move |ev: leptos::ev::ClipboardEvent| {
                // A screenshot or a copied file joins the tray; pasted text stays text.
                let files = api::pasted_files(&ev);
                if !files.is_empty() {
                    ev.prevent_default();
                    tray.add(files);
                }
            }
            on:keydown=move |ev: leptos::ev::KeyboardEvent| {
                if ev.key() == "Enter" && !ev.shift_key() {
                    ev.prevent_default();
                    send();
                }
            }
        ></textarea>
    }
}

/// The lightning menu: whether this conversation offers the tools of the person's MCP servers.
#[component]
fn ToolsMenu(chat: Chat, mcp_enabled: bool) -> impl IntoView {
    let menu_open = RwSignal::new(false);
    let mcp_on = RwSignal::new(mcp_enabled);
    view! {
        <div class="lightning">
            <button
                class="icon-button"
                type="button"
                title="Tools for this conversation"
                aria-expanded=move || menu_open.get().to_string()
                on:click=move |_| menu_open.update(|o| *o = !*o)
            >
                "⚡"
            </button>
            <div class="menu" hidden=move || !menu_open.get()>
                <label class="switch">
                    <input
                        type="checkbox"
                        name="mcp"
                        prop:checked=move || mcp_on.get()
                        on:change=move |ev| {
                            let on = event_target_checked(&ev);
                            mcp_on.set(on);
                            patch_conversation(chat, json!({"mcpEnabled": on}));
                        }
                    />
                    "MCP tools"
                </label>
                <p class="hint">
                    "Offer the tools of your MCP servers in this conversation. Every call is put to you first."
                </p>
            </div>
        </div>
    }
}

/// `@` and `/` as buttons, for those who do not type them.
#[component]
fn AttachButtons(attach_open: RwSignal<Option<Menu>>) -> impl IntoView {
    view! {
        <button
            class="icon-button attach-resource"
            type="button"
            title="Attach a resource of your MCP servers"
            on:click=move |_| attach_open.set(Some(Menu::Resources))
        >
            "@"
        </button>
        <button
            class="icon-button attach-prompt"
            type="button"
            title="Use a prompt of your MCP servers"
            on:click=move |_| attach_open.set(Some(Menu::Prompts))
        >
            "/"
        </button>
    }
}

/// The conversation's persona (or none).
#[component]
fn PersonaPicker(chat: Chat, personas: Vec<PersonaView>, persona_id: String) -> impl IntoView {
    view! {
        <select
            name="persona"
            title="Persona"
            on:change=move |ev| {
                patch_conversation(chat, json!({"personaId": event_target_value(&ev)}))
            }
        >
            <option value="" selected=persona_id.is_empty()>"No persona"</option>
            {personas
                .into_iter()
                .map(|p| {
                    let selected = p.id == persona_id;
                    view! { <option value=p.id.clone() selected=selected>{p.name}</option> }
                })
                .collect_view()}
        </select>
    }
}

/// The conversation's provider and model: the model is typed or picked from what the provider
/// lists (asked for when the person is about to pick one: listing asks each provider), and saved
/// once both are there.
#[component]
fn ModelPicker(
    chat: Chat,
    providers: Vec<ProviderChoice>,
    provider_id: RwSignal<String>,
    model: RwSignal<String>,
    choices: ModelChoices,
) -> impl IntoView {
    let save_model = move || {
        let provider = provider_id.get_untracked();
        let name = model.get_untracked();
        if !provider.is_empty() && !name.trim().is_empty() {
            patch_conversation(chat, json!({"providerId": provider, "model": name.trim()}));
        }
    };
    let no_provider = providers.is_empty();
    view! {
        <select
            name="provider"
            title="Model provider"
            on:change=move |ev| {
                provider_id.set(event_target_value(&ev));
                choices.load();
                save_model();
            }
        >
            <option value="" selected=provider_id.get_untracked().is_empty()>
                {if no_provider { "No provider yet" } else { "Provider…" }}
            </option>
            {providers
                .into_iter()
                .map(|p| {
                    let selected = p.id == provider_id.get_untracked();
                    view! {
                        <option value=p.id.clone() selected=selected>
                            {p.name}
                        </option>
                    }
                })
                .collect_view()}
        </select>
        <input
            class="model"
            name="model"
            title="Model (pick one the provider lists, or type its name)"
            placeholder=move || {
                choices.of(&provider_id.get()).into_iter().next().unwrap_or_else(|| "model".into())
            }
            list="model-choices"
            autocomplete="off"
            prop:value=move || model.get()
            on:focus=move |_| choices.load()
            on:change=move |ev| {
                model.set(event_target_value(&ev));
                save_model();
            }
        />
        <ModelDatalist id="model-choices" choices provider=provider_id />
    }
}

/// The names of the card news on the tab's stream.
const CARD_NEWS: [&str; 5] = ["pending", "appeared", "answered", "expired", "interrupted"];

/// The cards waiting for this account's answer, live in every tab: `here` is the conversation
/// the page shows (its cards come first; others link to theirs). It opens the tab's one event
/// stream, which also carries the events of the conversation the page `follow`s, and says so
/// when that stream's connection is lost.
#[component]
fn ApprovalCards(
    cards: Vec<ApprovalCardView>,
    csrf: String,
    here: Option<String>,
    always_allow: bool,
    now_ms: i64,
    follow: Option<stream::Follow>,
) -> impl IntoView {
    let cards = RwSignal::new(cards);
    let now = RwSignal::new(now_ms);
    let live = RwSignal::new(true);
    let here = StoredValue::new(here);
    let on: api::OnEvent = Rc::new(move |name: &str, data: &str| {
        let data: Value = serde_json::from_str(data).unwrap_or(Value::Null);
        on_card_event(cards, name, &data);
        // A card of this conversation sits just above the composer: bring it into view, even
        // for a reader scrolled up, so its two minutes are not spent unseen.
        let card_here = here.with_value(|h| {
            h.as_deref().is_some_and(|h| data["card"]["conversationId"].as_str() == Some(h))
        });
        if name == "appeared" && card_here {
            api::chat_to_latest();
        }
    });
    stream::open(&CARD_NEWS, on, follow, Rc::new(move |up| live.set(up)));
    api::every_second(move || now.set(api::now_ms()));
    // The tab's title says when cards wait, so a card is not missed from another tab. The
    // title under the count is read each time (a rename from the sidebar changes it).
    Effect::new(move |_| {
        let waiting = cards.with(Vec::len);
        let current = api::title();
        let title = without_waiting_count(&current);
        if waiting == 0 {
            api::set_title(title);
        } else {
            api::set_title(&format!("({waiting} waiting) {title}"));
        }
    });
    let csrf = StoredValue::new(csrf);

    view! {
        <p class="connection" role="status" hidden=move || live.get()>
            "The connection to the server was lost; reconnecting…"
        </p>
        <section class="approvals" aria-live="polite">
            <For
                each=move || cards.get()
                key=|card| card.id.clone()
                children=move |card| {
                    let elsewhere = here
                        .with_value(|h| h.as_deref() != Some(card.conversation_id.as_str()));
                    view! {
                        <ApprovalCard
                            card
                            csrf=csrf.get_value()
                            elsewhere
                            always_allow
                            now
                            cards
                        />
                    }
                }
            />
        </section>
    }
}

#[component]
fn ApprovalCard(
    card: ApprovalCardView,
    csrf: String,
    elsewhere: bool,
    always_allow: bool,
    now: RwSignal<i64>,
    cards: RwSignal<Vec<ApprovalCardView>>,
) -> impl IntoView {
    // A server's question during a call it already runs: a form, not a call to allow.
    if let Some(form) = card.question.clone() {
        let form = *form;
        if let Some(link) = form.link {
            let message = form.message;
            return EitherOf3::A(view! { <LinkCard card message link csrf elsewhere now cards /> });
        }
        return EitherOf3::B(view! { <QuestionCard card form csrf elsewhere now cards /> });
    }
    let error = RwSignal::new(None::<String>);
    let busy = RwSignal::new(false);
    let id = card.id.clone();
    let answer = move |choice: &'static str| {
        send_answer(&id, json!({"choice": choice}), &csrf, cards, busy, error);
    };
    let countdown = countdown(card.deadline_ms, now, "Time is up: the call will not be made.");
    let allow = answer.clone();
    let refuse = answer.clone();
    let always = answer;
    EitherOf3::C(view! {
        <article class="card approval" data-call=card.id.clone()>
            <header>
                <McpIcon src=llooma_types::mcp_icon_path(&card.server_id, Some(&card.tool_name)) />
                <span class="server">{card.server_label.clone()}</span>
                {match llooma_types::asking_view(&card.model_tool_name) {
                    // Not the model: the server's own view asks, from the conversation.
                    Some(of) => format!("'s view of {of} wants to run "),
                    None => " wants to run ".to_owned(),
                }}
                <b class="tool">{card.tool_name.clone()}</b>
                {card
                    .tool_hints
                    .as_ref()
                    .and_then(|h| h.title.clone())
                    .map(|title| view! { <span class="tool-title">{format!(" ({title})")}</span> })}
            </header>
            {elsewhere_note(elsewhere, &card.conversation_id)}
            <p class="description">{card.tool_description.clone()}</p>
            {card.tool_hints.as_ref().map(said_of_tool).filter(|said| !said.is_empty()).map(|said| {
                let said = said
                    .into_iter()
                    .map(|(class, sentence)| {
                        view! { <span class=format!("hint {class}")>{sentence}</span> " " }
                    })
                    .collect_view();
                view! {
                    <p class="hints">
                        {said}
                        <span class="hint-note">
                            "(The server describes its own tool: its claims allow nothing by themselves.)"
                        </span>
                    </p>
                }
            })}
            <p class="args-label">"Arguments, exactly as they will be sent:"</p>
            <pre class="args" tabindex="0">{pretty(&card.arguments_json)}</pre>
            <p class="countdown">{countdown}</p>
            <div class="actions">
                <button
                    class="primary allow"
                    type="button"
                    disabled=move || busy.get()
                    on:click=move |_| allow("allow")
                >
                    "Allow"
                </button>
                <button
                    class="refuse"
                    type="button"
                    disabled=move || busy.get()
                    on:click=move |_| refuse("refuse")
                >
                    "Refuse"
                </button>
                {always_allow
                    .then(|| {
                        view! {
                            <button
                                class="always"
                                type="button"
                                disabled=move || busy.get()
                                on:click=move |_| always("always_allow")
                            >
                                "Always allow"
                            </button>
                        }
                    })}
            </div>
            <p class="error" role="alert">{move || error.get()}</p>
        </article>
    })
}

/// Keeps the waiting cards as the account's approval stream tells them.
fn on_card_event(cards: RwSignal<Vec<ApprovalCardView>>, name: &str, data: &Value) {
    match name {
        "pending" => {
            if let Ok(list) = serde_json::from_value::<Vec<ApprovalCardView>>(data["cards"].clone())
            {
                cards.set(list);
            }
        }
        "appeared" => {
            if let Ok(card) = serde_json::from_value::<ApprovalCardView>(data["card"].clone()) {
                cards.update(|list| {
                    if !list.iter().any(|c| c.id == card.id) {
                        list.push(card);
                    }
                });
            }
        }
        "answered" | "expired" | "interrupted" => {
            let id = data["id"].as_str().unwrap_or_default().to_owned();
            cards.update(|list| list.retain(|c| c.id != id));
        }
        _ => {}
    }
}

#[cfg(test)]
mod tests {
    use super::without_waiting_count;

    #[test]
    fn the_waiting_count_is_taken_off_a_title_and_only_it() {
        assert_eq!(without_waiting_count("(2 waiting) Trip · Llooma"), "Trip · Llooma");
        assert_eq!(without_waiting_count("Trip · Llooma"), "Trip · Llooma");
        assert_eq!(without_waiting_count("(draft) Trip"), "(draft) Trip");
        assert_eq!(without_waiting_count("( waiting) Trip"), "( waiting) Trip");
    }
}
