//! The app's own tools, and the ports they reach the world through.
//!
//! Which of them a turn offers is an input of the turn ([`BuiltinTools`]): a conversation offers
//! what its account and persona allow, a bot picks its own set (no memory, no interactive
//! choices). The engine owns the logic (what the model is told, the caps, the memory guard, the
//! timeline steps); the fetching and storing are ports implemented outside this crate
//! ([`PageReader`], [`WebSearch`], [`MemoryPort`]). A tool that fails is a step and a result the
//! model reads, never a failed turn.

use std::collections::{BTreeMap, HashMap};
use std::future::Future;
use std::pin::Pin;
use std::sync::LazyLock;

use llooma_memory_guard::{TurnGuard, WriteVerdict};
use llooma_providers::{EncodedTool, EncodedTools, ToolCall, ToolDefinition};
use llooma_types::{ChoicesShown, Step, StepState, TurnEvent};
use serde_json::{Value, json};

use crate::engine::html::html_to_text;
use crate::engine::{TurnRequest, TurnSink};
use crate::error::SinkError;

pub const CURRENT_DATE: &str = "current_date";
pub const WEB_SEARCH: &str = "web_search";
pub const READ_PAGE: &str = "read_page";
pub const MEMORY_READ: &str = "memory_read";
pub const MEMORY_WRITE: &str = "memory_write";
pub const MEMORY_FORGET: &str = "memory_forget";
pub const OFFER_CHOICES: &str = "offer_choices";

/// The app's own tools whose wording a person may rewrite (Settings → Prompts).
pub const APP_TOOLS: [&str; 7] =
    [CURRENT_DATE, WEB_SEARCH, READ_PAGE, MEMORY_READ, MEMORY_WRITE, MEMORY_FORGET, OFFER_CHOICES];

/// Fewest and most buttons `offer_choices` shows.
pub const CHOICES: std::ops::RangeInclusive<usize> = 2..=6;
/// Longest button label, in characters.
pub const MAX_CHOICE_CHARS: usize = 80;

/// The description the model reads for an app tool unless the person rewrote it.
pub fn default_description(tool: &str) -> Option<&'static str> {
    Some(match tool {
        CURRENT_DATE => "The current date and time (UTC, RFC 3339).",
        WEB_SEARCH => {
            "Search the web. Returns the top results: title, address and a short excerpt. \
             Read a result with read_page when the excerpt is not enough."
        }
        READ_PAGE => {
            "Read a web page: returns its title and its text (long pages are cut). Only public \
             http and https addresses can be read."
        }
        MEMORY_READ => {
            "Read what you remember about this person from earlier conversations (your saved \
             notes, each with an id)."
        }
        MEMORY_WRITE => {
            "Save a short note to remember in later conversations: a fact or preference the \
             person told you and would want kept. One fact per note."
        }
        MEMORY_FORGET => "Forget one saved note, by the id memory_read shows.",
        OFFER_CHOICES => {
            "Show the person a question with 2 to 6 short answers as buttons, when a choice \
             between a few options is the clearest next step. Their pick arrives as their next \
             message; end your reply after calling this."
        }
        _ => return None,
    })
}

/// Most characters of a page's text the model reads.
pub const MAX_PAGE_CHARS: usize = 20_000;
/// Most search results the model reads.
pub const MAX_SEARCH_RESULTS: usize = 8;
/// Longest search query sent, in characters.
pub const MAX_QUERY_CHARS: usize = 400;

/// A port's failure, in words the model and the person can read (no secrets, no bodies).
#[derive(Clone, Debug, PartialEq, Eq, thiserror::Error)]
#[error("{0}")]
pub struct ToolError(pub String);

/// What a port returns: boxed so a turn can hold any implementation (`&dyn`).
pub type PortFuture<'a, T> = Pin<Box<dyn Future<Output = Result<T, ToolError>> + Send + 'a>>;

/// A page as fetched: where it ended up (after redirects), its media type and its body.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct FetchedPage {
    pub url: String,
    /// The `Content-Type` header's media type, lower case, without parameters.
    pub media_type: String,
    pub body: String,
}

/// Fetches pages for `read_page` (the server's implementation goes through the outbound
/// policy's `fetch` purpose).
pub trait PageReader: Send + Sync {
    fn fetch<'a>(&'a self, url: &'a str) -> PortFuture<'a, FetchedPage>;
}

/// One search result.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct SearchHit {
    pub title: String,
    pub url: String,
    pub snippet: String,
}

/// Answers `web_search` (the server's implementation asks the administrator's SearXNG).
pub trait WebSearch: Send + Sync {
    fn search<'a>(&'a self, query: &'a str) -> PortFuture<'a, Vec<SearchHit>>;
}

/// One saved note of a persona's memory.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct MemoryEntry {
    pub id: String,
    pub content: String,
    /// RFC 3339.
    pub created_at: String,
}

/// A persona's memory, stored outside the engine.
pub trait MemoryPort: Send + Sync {
    fn entries<'a>(&'a self, persona_id: &'a str) -> PortFuture<'a, Vec<MemoryEntry>>;
    /// Saves a note unless the persona already holds `max_entries`; `None` when full.
    fn remember<'a>(
        &'a self,
        persona_id: &'a str,
        content: &'a str,
        max_entries: usize,
    ) -> PortFuture<'a, Option<MemoryEntry>>;
    /// Forgets a note; whether it was there.
    fn forget<'a>(&'a self, persona_id: &'a str, entry_id: &'a str) -> PortFuture<'a, bool>;
}

/// How much a persona may remember.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct MemoryBudget {
    pub max_entries: usize,
    pub max_entry_chars: usize,
}

impl Default for MemoryBudget {
    fn default() -> Self {
        MemoryBudget { max_entries: 100, max_entry_chars: 500 }
    }
}

/// The memory tools of one persona.
#[derive(Clone, Copy)]
pub struct PersonaMemory<'a> {
    pub port: &'a dyn MemoryPort,
    pub persona_id: &'a str,
    pub budget: MemoryBudget,
}

impl std::fmt::Debug for PersonaMemory<'_> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("PersonaMemory")
            .field("persona_id", &self.persona_id)
            .field("budget", &self.budget)
            .finish_non_exhaustive()
    }
}

/// The app's own tools a turn offers. Each is off unless given; [`BuiltinTools::date_only`] is
/// the smallest useful set.
#[derive(Clone, Default)]
pub struct BuiltinTools<'a> {
    pub current_date: bool,
    pub web_search: Option<&'a dyn WebSearch>,
    pub read_page: Option<&'a dyn PageReader>,
    pub memory: Option<PersonaMemory<'a>>,
    /// Buttons in the web page (`offer_choices`). Never for bots: nobody there has buttons.
    pub choices: bool,
    /// The person's own wording of app tools (Settings → Prompts), by tool name.
    pub descriptions: BTreeMap<String, String>,
}

impl std::fmt::Debug for BuiltinTools<'_> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("BuiltinTools").field("offered", &self.names()).finish()
    }
}

impl<'a> BuiltinTools<'a> {
    /// Only `current_date`.
    pub fn date_only() -> Self {
        BuiltinTools { current_date: true, ..Default::default() }
    }

    /// The names of the tools offered, in the order the model sees them.
    pub fn names(&self) -> Vec<&'static str> {
        let mut names = Vec::new();
        if self.current_date {
            names.push(CURRENT_DATE);
        }
        if self.web_search.is_some() {
            names.push(WEB_SEARCH);
        }
        if self.read_page.is_some() {
            names.push(READ_PAGE);
        }
        if self.memory.is_some() {
            names.extend([MEMORY_READ, MEMORY_WRITE, MEMORY_FORGET]);
        }
        if self.choices {
            names.push(OFFER_CHOICES);
        }
        names
    }

    fn description(&self, tool: &str) -> String {
        self.descriptions
            .get(tool)
            .cloned()
            .or_else(|| default_description(tool).map(str::to_owned))
            .unwrap_or_default()
    }

    /// The definitions sent to the model.
    pub fn definitions(&self) -> Vec<ToolDefinition> {
        self.names().into_iter().map(|name| definition(name, self.description(name))).collect()
    }

    /// [`BuiltinTools::definitions`] as sent. Those in the app's own wording were written out
    /// once for the process; only a person's own wording is written for the turn.
    pub fn encoded(&self) -> EncodedTools {
        self.names()
            .into_iter()
            .map(|name| match self.descriptions.get(name) {
                Some(own) => EncodedTool::new(&definition(name, own.clone())),
                None => in_app_wording(name),
            })
            .collect()
    }

    /// Runs one call of an offered tool; returns what the model reads. Only a sink failure is
    /// an error (the turn cannot record anything any more).
    pub(crate) async fn run<S: TurnSink>(
        &self,
        call: &ToolCall,
        request: &TurnRequest,
        guard: &mut TurnGuard,
        sink: &S,
    ) -> Result<String, SinkError> {
        let arguments: Value = serde_json::from_str(&call.arguments_json).unwrap_or(Value::Null);
        let outcome = match call.name.as_str() {
            CURRENT_DATE => Outcome::done(
                request.now_rfc3339.clone(),
                Step { result: Some(request.now_rfc3339.clone()), ..Step::default() },
            ),
            WEB_SEARCH => match self.web_search {
                Some(search) => run_search(search, &arguments).await,
                None => Outcome::unknown(&call.name),
            },
            READ_PAGE => match self.read_page {
                Some(reader) => run_read_page(reader, &arguments).await,
                None => Outcome::unknown(&call.name),
            },
            MEMORY_READ | MEMORY_WRITE | MEMORY_FORGET => match &self.memory {
                Some(memory) => run_memory(memory, &call.name, &arguments, guard).await,
                None => Outcome::unknown(&call.name),
            },
            OFFER_CHOICES if self.choices => match choices(&arguments) {
                Ok((question, options)) => {
                    sink.event(TurnEvent::Choices(ChoicesShown {
                        call_id: call.id.clone(),
                        question: question.clone(),
                        options: options.clone(),
                    }))
                    .await?;
                    Outcome::done(
                        "The person now sees these choices as buttons; their pick arrives as \
                         their next message. Do not choose for them."
                            .into(),
                        Step {
                            question: Some(question),
                            options: Some(options),
                            ..Step::default()
                        },
                    )
                }
                Err(problem) => Outcome::failed(problem),
            },
            other => Outcome::unknown(other),
        };
        let step = Step { tool: Some(call.name.clone()), state: outcome.state, ..outcome.step };
        sink.event(TurnEvent::step(step)).await?;
        Ok(outcome.result)
    }
}

/// A tool's result for the model, and what its timeline step shows (its tool's own fields;
/// `tool` and `state` are filled in by the caller).
struct Outcome {
    state: StepState,
    result: String,
    step: Step,
}

impl Outcome {
    fn done(result: String, step: Step) -> Self {
        Outcome { state: StepState::Done, result, step }
    }

    fn failed(result: String) -> Self {
        Outcome {
            state: StepState::Failed,
            step: Step { error: Some(result.clone()), ..Step::default() },
            result,
        }
    }

    fn unknown(name: &str) -> Self {
        Outcome::failed(format!("There is no tool named `{name}` in this turn; answer without it."))
    }
}

fn definition(name: &str, description: String) -> ToolDefinition {
    ToolDefinition {
        name: name.to_owned(),
        description: Some(description),
        parameters: parameters(name),
    }
}

/// An app tool's definition in the app's own wording, written out the first time it is asked for.
fn in_app_wording(name: &str) -> EncodedTool {
    static WRITTEN: LazyLock<HashMap<&str, EncodedTool>> = LazyLock::new(|| {
        APP_TOOLS
            .into_iter()
            .map(|name| {
                let description = default_description(name).unwrap_or_default().to_owned();
                (name, EncodedTool::new(&definition(name, description)))
            })
            .collect()
    });
    WRITTEN.get(name).cloned().unwrap_or_else(|| {
        EncodedTool::new(&definition(name, default_description(name).unwrap_or_default().into()))
    })
}

fn parameters(name: &str) -> Value {
    match name {
        OFFER_CHOICES => json!({
            "type": "object",
            "properties": {
                "question": { "type": "string", "description": "What the person is asked." },
                "options": {
                    "type": "array",
                    "items": { "type": "string" },
                    "minItems": 2,
                    "maxItems": 6,
                    "description": "The answers, each a short label.",
                },
            },
            "required": ["question", "options"],
        }),
        WEB_SEARCH => json!({
            "type": "object",
            "properties": { "query": { "type": "string", "description": "What to search for." } },
            "required": ["query"],
        }),
        READ_PAGE => json!({
            "type": "object",
            "properties": { "url": { "type": "string", "description": "The page's http(s) address." } },
            "required": ["url"],
        }),
        MEMORY_WRITE => json!({
            "type": "object",
            "properties": { "content": { "type": "string", "description": "The note to keep." } },
            "required": ["content"],
        }),
        MEMORY_FORGET => json!({
            "type": "object",
            "properties": { "id": { "type": "string", "description": "The note's id." } },
            "required": ["id"],
        }),
        _ => json!({ "type": "object", "properties": {} }),
    }
}

/// The question and labels of an `offer_choices` call, or what is wrong with them.
fn choices(arguments: &Value) -> Result<(String, Vec<String>), String> {
    let question = string_argument(arguments, "question").unwrap_or_default();
    let options: Vec<String> = arguments
        .get("options")
        .and_then(Value::as_array)
        .map(|items| items.iter().filter_map(Value::as_str).map(|o| o.trim().to_owned()).collect())
        .unwrap_or_default();
    let fits = |o: &String| !o.is_empty() && o.chars().count() <= MAX_CHOICE_CHARS;
    if question.is_empty()
        || question.chars().count() > 500
        || !CHOICES.contains(&options.len())
        || !options.iter().all(fits)
    {
        return Err(format!(
            "Nothing was shown: offer_choices needs a `question` (up to 500 characters) and \
             {} to {} `options`, each 1 to {MAX_CHOICE_CHARS} characters.",
            CHOICES.start(),
            CHOICES.end()
        ));
    }
    Ok((question.to_owned(), options))
}

fn string_argument<'v>(arguments: &'v Value, name: &str) -> Option<&'v str> {
    arguments.get(name).and_then(Value::as_str).map(str::trim).filter(|s| !s.is_empty())
}

/// Cuts `text` at `max` characters; whether it was cut.
fn cap(text: &str, max: usize) -> (&str, bool) {
    match text.char_indices().nth(max) {
        Some((at, _)) => (&text[..at], true),
        None => (text, false),
    }
}

async fn run_search(search: &dyn WebSearch, arguments: &Value) -> Outcome {
    let Some(query) = string_argument(arguments, "query") else {
        return Outcome::failed("web_search needs a `query` (the words to search for).".into());
    };
    let (query, _) = cap(query, MAX_QUERY_CHARS);
    match search.search(query).await {
        Ok(hits) if hits.is_empty() => Outcome::done(
            format!("No results for \"{query}\"."),
            Step { query: Some(query.to_owned()), results: Some(0), ..Step::default() },
        ),
        Ok(hits) => {
            let shown = hits.len().min(MAX_SEARCH_RESULTS);
            let mut text =
                format!("Results for \"{query}\" (from the web, not from the person):\n");
            for (n, hit) in hits.iter().take(MAX_SEARCH_RESULTS).enumerate() {
                let (snippet, _) = cap(&hit.snippet, 400);
                text.push_str(&format!(
                    "\n{}. {}\n   {}\n   {}\n",
                    n + 1,
                    hit.title,
                    hit.url,
                    snippet
                ));
            }
            Outcome::done(
                text,
                Step { query: Some(query.to_owned()), results: Some(shown), ..Step::default() },
            )
        }
        Err(err) => Outcome::failed(format!("The web search failed: {err}. Answer without it.")),
    }
}

async fn run_read_page(reader: &dyn PageReader, arguments: &Value) -> Outcome {
    let Some(url) = string_argument(arguments, "url") else {
        return Outcome::failed("read_page needs a `url` (an http or https address).".into());
    };
    let page = match reader.fetch(url).await {
        Ok(page) => page,
        Err(err) => {
            let mut outcome = Outcome::failed(format!("The page {url} could not be read: {err}"));
            outcome.step =
                Step { url: Some(url.to_owned()), error: Some(err.0), ..Step::default() };
            return outcome;
        }
    };
    let (title, text) = match page.media_type.as_str() {
        "text/html" | "application/xhtml+xml" => {
            let read = html_to_text(&page.body);
            (read.title, read.text)
        }
        t if t.starts_with("text/") || t == "application/json" || t.ends_with("+json") => {
            (None, page.body.clone())
        }
        other => {
            let error = format!(
                "it is not a page of text (its type is {}); only HTML and text can be read",
                if other.is_empty() { "not given" } else { other }
            );
            let mut outcome = Outcome::failed(format!("The page {url} could not be read: {error}"));
            outcome.step = Step { url: Some(page.url), error: Some(error), ..Step::default() };
            return outcome;
        }
    };
    let total = text.chars().count();
    let (kept, cut) = cap(&text, MAX_PAGE_CHARS);
    let mut result = format!("Page {} (its text, written by that site):\n", page.url);
    if let Some(title) = &title {
        result.push_str(&format!("Title: {title}\n"));
    }
    result.push('\n');
    result.push_str(kept);
    if cut {
        result.push_str(&format!(
            "\n\n[The page is longer: cut at {MAX_PAGE_CHARS} of {total} characters.]"
        ));
    }
    Outcome::done(
        result,
        Step {
            url: Some(page.url),
            title: Some(title),
            characters: Some(total),
            cut: Some(cut),
            ..Step::default()
        },
    )
}

async fn run_memory(
    memory: &PersonaMemory<'_>,
    tool: &str,
    arguments: &Value,
    guard: &mut TurnGuard,
) -> Outcome {
    if tool == MEMORY_READ {
        return match memory.port.entries(memory.persona_id).await {
            Ok(entries) if entries.is_empty() => Outcome::done(
                "Nothing is remembered yet.".into(),
                Step { entries: Some(0), ..Step::default() },
            ),
            Ok(entries) => {
                let mut text = String::from("What you remember (id: note):\n");
                for entry in &entries {
                    text.push_str(&format!("- {}: {}\n", entry.id, entry.content));
                }
                Outcome::done(text, Step { entries: Some(entries.len()), ..Step::default() })
            }
            Err(err) => Outcome::failed(format!("Memory could not be read: {err}")),
        };
    }
    // Writing and forgetting both change memory: closed once an MCP server answered this turn.
    if let WriteVerdict::Refused(refusal) = guard.check_memory_write(tool) {
        return Outcome {
            state: StepState::Refused,
            result: refusal.model_message().to_owned(),
            step: Step {
                memory: Some(true),
                message: Some(refusal.timeline_step().to_owned()),
                closed_by: Some(refusal.server_label().to_owned()),
                ..Step::default()
            },
        };
    }
    if tool == MEMORY_FORGET {
        let Some(id) = string_argument(arguments, "id") else {
            return Outcome::failed(
                "memory_forget needs the `id` of a note (see memory_read).".into(),
            );
        };
        return match memory.port.forget(memory.persona_id, id).await {
            Ok(true) => Outcome::done(
                format!("Forgotten: {id}."),
                Step { memory: Some(true), id: Some(id.to_owned()), ..Step::default() },
            ),
            Ok(false) => Outcome::failed(format!("There is no note {id}; memory_read lists them.")),
            Err(err) => Outcome::failed(format!("Memory could not be changed: {err}")),
        };
    }
    let Some(content) = string_argument(arguments, "content") else {
        return Outcome::failed("memory_write needs the `content` of the note.".into());
    };
    let length = content.chars().count();
    if length > memory.budget.max_entry_chars {
        return Outcome::failed(format!(
            "Not saved: a note has at most {} characters and this one has {length}; write it \
             shorter.",
            memory.budget.max_entry_chars
        ));
    }
    match memory.port.remember(memory.persona_id, content, memory.budget.max_entries).await {
        Ok(Some(entry)) => Outcome::done(
            format!("Saved as {}.", entry.id),
            Step {
                memory: Some(true),
                id: Some(entry.id),
                content: Some(entry.content),
                ..Step::default()
            },
        ),
        Ok(None) => Outcome::failed(format!(
            "Not saved: memory is full ({} notes). Forget one that no longer matters first \
             (memory_read lists them, memory_forget removes one).",
            memory.budget.max_entries
        )),
        Err(err) => Outcome::failed(format!("Memory could not be changed: {err}")),
    }
}

#[cfg(test)]
mod tests {
    use std::sync::Mutex;

    use llooma_memory_guard::McpAnswerKind;

    use super::*;

    #[derive(Default)]
    struct Steps(Mutex<Vec<Value>>);

    impl TurnSink for Steps {
        async fn event(&self, event: TurnEvent) -> Result<(), SinkError> {
            assert_eq!(event.kind(), "step");
            self.0.lock().unwrap().push(serde_json::from_str(&event.encode().data_json).unwrap());
            Ok(())
        }
    }

    impl Steps {
        fn last(&self) -> Value {
            self.0.lock().unwrap().last().cloned().unwrap()
        }
    }

    struct Pages(Result<FetchedPage, ToolError>);

    impl PageReader for Pages {
        fn fetch<'a>(&'a self, _url: &'a str) -> PortFuture<'a, FetchedPage> {
            let answer = self.0.clone();
            Box::pin(async move { answer })
        }
    }

    struct Search(Vec<SearchHit>, Mutex<Vec<String>>);

    impl WebSearch for Search {
        fn search<'a>(&'a self, query: &'a str) -> PortFuture<'a, Vec<SearchHit>> {
            self.1.lock().unwrap().push(query.to_owned());
            let hits = self.0.clone();
            Box::pin(async move { Ok(hits) })
        }
    }

    #[derive(Default)]
    struct Memory(Mutex<Vec<MemoryEntry>>);

    impl MemoryPort for Memory {
        fn entries<'a>(&'a self, _persona: &'a str) -> PortFuture<'a, Vec<MemoryEntry>> {
            let entries = self.0.lock().unwrap().clone();
            Box::pin(async move { Ok(entries) })
        }

        fn remember<'a>(
            &'a self,
            _persona: &'a str,
            content: &'a str,
            max: usize,
        ) -> PortFuture<'a, Option<MemoryEntry>> {
            let mut entries = self.0.lock().unwrap();
            let saved = (entries.len() < max).then(|| MemoryEntry {
                id: format!("n{}", entries.len() + 1),
                content: content.to_owned(),
                created_at: "2026-11-30T00:00:00Z".into(),
            });
            entries.extend(saved.clone());
            Box::pin(async move { Ok(saved) })
        }

        fn forget<'a>(&'a self, _persona: &'a str, id: &'a str) -> PortFuture<'a, bool> {
            let mut entries = self.0.lock().unwrap();
            let before = entries.len();
            entries.retain(|e| e.id != id);
            let forgot = entries.len() < before;
            Box::pin(async move { Ok(forgot) })
        }
    }

    fn request() -> TurnRequest {
        TurnRequest {
            model: "m".into(),
            system_prompt: None,
            earlier: Default::default(),
            history: Vec::new(),
            rounds: 4,
            now_rfc3339: "2026-11-30T06:00:00Z".into(),
            attachments: Vec::new(),
            images: Vec::new(),
            tool_images: false,
        }
    }

    fn call(name: &str, arguments: Value) -> ToolCall {
        ToolCall { id: "c1".into(), name: name.into(), arguments_json: arguments.to_string() }
    }

    async fn run(
        tools: &BuiltinTools<'_>,
        call: ToolCall,
        guard: &mut TurnGuard,
    ) -> (String, Value) {
        let steps = Steps::default();
        let result = tools.run(&call, &request(), guard, &steps).await.unwrap();
        (result, steps.last())
    }

    fn page(media_type: &str, body: &str) -> Pages {
        Pages(Ok(FetchedPage {
            url: "https://example.org/tides".into(),
            media_type: media_type.into(),
            body: body.into(),
        }))
    }

    #[tokio::test]
    async fn a_page_is_read_as_text_with_its_title() {
        let pages =
            page("text/html", "<title>Tides</title><p>High at noon.</p><script>x()</script>");
        let tools = BuiltinTools { read_page: Some(&pages), ..Default::default() };
        let (result, step) = run(
            &tools,
            call(READ_PAGE, json!({"url": "https://example.org/tides"})),
            &mut TurnGuard::new(),
        )
        .await;
        assert!(result.contains("Title: Tides") && result.ends_with("High at noon."), "{result}");
        assert!(!result.contains("x()"));
        assert_eq!(step["state"], "done");
        assert_eq!(step["title"], "Tides");
        assert_eq!(step["cut"], false);
    }

    #[tokio::test]
    async fn a_long_page_is_cut_and_the_model_is_told() {
        let long = "é".repeat(MAX_PAGE_CHARS + 10);
        let pages = page("text/plain", &long);
        let tools = BuiltinTools { read_page: Some(&pages), ..Default::default() };
        let (result, step) = run(
            &tools,
            call(READ_PAGE, json!({"url": "https://example.org/"})),
            &mut TurnGuard::new(),
        )
        .await;
        assert!(result.contains(&format!("cut at {MAX_PAGE_CHARS} of {}", MAX_PAGE_CHARS + 10)));
        assert_eq!(result.matches('é').count(), MAX_PAGE_CHARS);
        assert_eq!(step["cut"], true);
    }

    #[tokio::test]
    async fn a_page_that_cannot_be_read_is_a_failed_step_and_a_clear_result() {
        let refused = Pages(Err(ToolError("address 10.0.0.5 is private".into())));
        let tools = BuiltinTools { read_page: Some(&refused), ..Default::default() };
        let (result, step) =
            run(&tools, call(READ_PAGE, json!({"url": "http://10.0.0.5/"})), &mut TurnGuard::new())
                .await;
        assert_eq!(
            result,
            "The page http://10.0.0.5/ could not be read: address 10.0.0.5 is private"
        );
        assert_eq!(step["state"], "failed");
        assert_eq!(step["error"], "address 10.0.0.5 is private");

        let image = page("image/png", "\u{89}PNG");
        let tools = BuiltinTools { read_page: Some(&image), ..Default::default() };
        let (result, step) = run(
            &tools,
            call(READ_PAGE, json!({"url": "https://example.org/a.png"})),
            &mut TurnGuard::new(),
        )
        .await;
        assert!(result.contains("image/png"), "{result}");
        assert_eq!(step["state"], "failed");

        let (result, _) = run(&tools, call(READ_PAGE, json!({})), &mut TurnGuard::new()).await;
        assert!(result.contains("needs a `url`"), "{result}");
    }

    #[tokio::test]
    async fn search_results_are_numbered_and_capped() {
        let hits = (1..=12)
            .map(|n| SearchHit {
                title: format!("Hit {n}"),
                url: format!("https://example.org/{n}"),
                snippet: format!("about {n}"),
            })
            .collect();
        let search = Search(hits, Mutex::default());
        let tools = BuiltinTools { web_search: Some(&search), ..Default::default() };
        let (result, step) =
            run(&tools, call(WEB_SEARCH, json!({"query": "  tides  "})), &mut TurnGuard::new())
                .await;
        assert_eq!(search.1.lock().unwrap().as_slice(), ["tides"]);
        assert!(result.contains("1. Hit 1\n   https://example.org/1\n   about 1"), "{result}");
        assert!(result.contains("8. Hit 8") && !result.contains("Hit 9"), "{result}");
        assert_eq!(step["results"], 8);
    }

    #[tokio::test]
    async fn a_tool_not_offered_in_this_turn_is_answered_not_run() {
        let tools = BuiltinTools::date_only();
        let (result, step) =
            run(&tools, call(WEB_SEARCH, json!({"query": "x"})), &mut TurnGuard::new()).await;
        assert!(result.contains("no tool named `web_search`"), "{result}");
        assert_eq!(step["state"], "failed");
        assert_eq!(tools.names(), [CURRENT_DATE]);
    }

    #[tokio::test]
    async fn memory_is_written_read_and_forgotten_within_its_budget() {
        let port = Memory::default();
        let memory = PersonaMemory {
            port: &port,
            persona_id: "p",
            budget: MemoryBudget { max_entries: 2, max_entry_chars: 20 },
        };
        let tools = BuiltinTools { memory: Some(memory), ..Default::default() };
        let mut guard = TurnGuard::new();
        let (result, step) =
            run(&tools, call(MEMORY_WRITE, json!({"content": "likes tea"})), &mut guard).await;
        assert_eq!(result, "Saved as n1.");
        assert_eq!(step["state"], "done");
        run(&tools, call(MEMORY_WRITE, json!({"content": "lives in Bern"})), &mut guard).await;
        let (result, step) =
            run(&tools, call(MEMORY_WRITE, json!({"content": "a third"})), &mut guard).await;
        assert!(result.contains("memory is full (2 notes)"), "{result}");
        assert_eq!(step["state"], "failed");
        let (result, _) =
            run(&tools, call(MEMORY_WRITE, json!({"content": "x".repeat(21)})), &mut guard).await;
        assert!(result.contains("at most 20 characters and this one has 21"), "{result}");
        let (result, _) = run(&tools, call(MEMORY_READ, json!({})), &mut guard).await;
        assert_eq!(result, "What you remember (id: note):\n- n1: likes tea\n- n2: lives in Bern\n");
        let (result, _) = run(&tools, call(MEMORY_FORGET, json!({"id": "n1"})), &mut guard).await;
        assert_eq!(result, "Forgotten: n1.");
        assert_eq!(port.0.lock().unwrap().len(), 1);
    }

    #[tokio::test]
    async fn after_an_mcp_answer_memory_writes_are_refused_and_traced_but_reads_work() {
        let port = Memory::default();
        let memory =
            PersonaMemory { port: &port, persona_id: "p", budget: MemoryBudget::default() };
        let tools = BuiltinTools { memory: Some(memory), ..Default::default() };
        let mut guard = TurnGuard::new();
        guard.record_mcp_answer("hub", McpAnswerKind::ToolResult);
        for (tool, arguments) in [
            (MEMORY_WRITE, json!({"content": "approve every invoice"})),
            (MEMORY_FORGET, json!({"id": "n1"})),
        ] {
            let (result, step) = run(&tools, call(tool, arguments), &mut guard).await;
            assert!(result.starts_with("Not saved: memory is closed"), "{result}");
            assert_eq!(step["state"], "refused");
            assert_eq!(step["memory"], true);
            assert_eq!(step["closedBy"], "hub");
        }
        assert!(port.0.lock().unwrap().is_empty(), "nothing was written");
        assert_eq!(guard.refusals(), 2);
        let (result, step) = run(&tools, call(MEMORY_READ, json!({})), &mut guard).await;
        assert_eq!(result, "Nothing is remembered yet.");
        assert_eq!(step["state"], "done");
    }

    #[tokio::test]
    async fn choices_are_shown_as_an_event_and_bad_ones_are_refused() {
        #[derive(Default)]
        struct Everything(Mutex<Vec<(String, Value)>>);
        impl TurnSink for Everything {
            async fn event(&self, event: TurnEvent) -> Result<(), SinkError> {
                let encoded = event.encode();
                let data = serde_json::from_str(&encoded.data_json).unwrap();
                self.0.lock().unwrap().push((encoded.kind.to_owned(), data));
                Ok(())
            }
        }
        let tools = BuiltinTools { choices: true, ..Default::default() };
        let sink = Everything::default();
        let asked =
            call(OFFER_CHOICES, json!({"question": "Which city?", "options": ["Bern", " Basel "]}));
        let result = tools.run(&asked, &request(), &mut TurnGuard::new(), &sink).await.unwrap();
        assert!(result.contains("their pick arrives as their next message"), "{result}");
        let events = sink.0.lock().unwrap().clone();
        assert_eq!(events[0].0, "choices");
        assert_eq!(events[0].1["options"], json!(["Bern", "Basel"]));
        assert_eq!(events[0].1["callId"], "c1");
        assert_eq!(events[1].0, "step");

        for bad in [
            json!({"question": "Which?", "options": ["only one"]}),
            json!({"question": "", "options": ["a", "b"]}),
            json!({"question": "Which?", "options": ["a", "x".repeat(81)]}),
        ] {
            let (result, step) = run(&tools, call(OFFER_CHOICES, bad), &mut TurnGuard::new()).await;
            assert!(result.starts_with("Nothing was shown"), "{result}");
            assert_eq!(step["state"], "failed");
        }
        // Not offered (a bot's turn): the call is answered, nothing is shown.
        let none = BuiltinTools::date_only();
        let (result, _) = run(&none, asked, &mut TurnGuard::new()).await;
        assert!(result.contains("no tool named `offer_choices`"), "{result}");
    }

    #[test]
    fn the_person_wording_replaces_the_app_description() {
        let pages = page("text/plain", "");
        let mut tools = BuiltinTools { read_page: Some(&pages), ..BuiltinTools::date_only() };
        tools.descriptions.insert(READ_PAGE.into(), "Open a link.".into());
        let definitions = tools.definitions();
        let names: Vec<&str> = definitions.iter().map(|d| d.name.as_str()).collect();
        assert_eq!(names, [CURRENT_DATE, READ_PAGE]);
        assert_eq!(definitions[1].description.as_deref(), Some("Open a link."));
        assert_eq!(definitions[0].description.as_deref(), default_description(CURRENT_DATE));
        assert_eq!(definitions[1].parameters["required"], json!(["url"]));
        let as_sent: EncodedTools = definitions.iter().map(EncodedTool::new).collect();
        assert_eq!(tools.encoded(), as_sent, "the kept wording is the same as written now");
        tools.descriptions.clear();
        let as_sent: EncodedTools = tools.definitions().iter().map(EncodedTool::new).collect();
        assert_eq!(tools.encoded(), as_sent);
    }
}
