//! MCP tools inside a turn. Every call goes through consent and the approval broker before
//! anything leaves the machine, and everything a server answers is wrapped as untrusted text.
//!
//! Order for one call: the consent gate (`crate::consent_gate`: remembered consent, else a card,
//! then the arguments about to be sent checked against those shown) → the tool still in use as
//! the turn began → the call → the result wrapped by the memory guard → a timeline step naming
//! server and tool.

use std::sync::Arc;

use llooma_approval_broker::{
    ApprovalPort, Broker, Context, Gate, NewCall, PendingCall, Unasked, gate,
};
use llooma_mcp_client::{
    CallNews, ContentItem, McpClient, Progress, Snapshot, TaskReport, ToolResult,
};
use llooma_memory_guard::{Caps, Source, TurnGuard};
use llooma_net::OutboundPolicy;
use llooma_providers::{
    EncodedTool, EncodedTools, ProviderClient, ToolCall, ToolDefinition, ToolsSize,
};
use llooma_types::{
    ApprovalCardView, ApprovalShown, CallProgress, ShownPart, Step, StepState, StepView, TurnEvent,
};
use llooma_vault::Secret;
use serde_json::{Value, json};

use crate::consent_gate::{Cleared, StandingConsent, answered, sendable};
use crate::engine::TurnSink;
use crate::error::TurnError;

/// An MCP tool offered in this turn (the caller applied switches, groups and the budget).
#[derive(Clone, Debug)]
pub struct McpTool {
    pub model_name: String,
    pub server_id: String,
    pub server_label: String,
    pub server_address: String,
    pub token: Option<Secret>,
    pub tool_name: String,
    /// The group the tool's name puts it in (a gateway's prefix), or the unnamed group's key.
    pub group: String,
    pub description: String,
    pub input_schema: Value,
    /// The stored definition the tool was read from; its `outputSchema`, if any, checks the
    /// structured results.
    pub definition: StoredTool,
    /// The catalogued definition's hash: what consent and the card are tied to.
    pub definition_hash: String,
    /// What the server says of the tool (title and hints), shown on the card: its claims,
    /// never trusted.
    pub hints: Option<llooma_types::ToolHints>,
}

/// One tool's definition in place inside its server's stored snapshot: shared by every turn that
/// offers it, never copied for each.
#[derive(Clone, Debug)]
pub struct StoredTool {
    snapshot: Arc<Snapshot>,
    index: usize,
}

impl StoredTool {
    /// The tool at `index` of `snapshot`.
    pub fn new(snapshot: Arc<Snapshot>, index: usize) -> StoredTool {
        StoredTool { snapshot, index }
    }

    /// Its definition (`None` only for an index the snapshot does not hold).
    pub fn def(&self) -> Option<&llooma_mcp_client::ToolDef> {
        self.snapshot.tools.get(self.index)
    }
}

/// A resource an MCP server listed (from its stored snapshot), readable in this turn.
#[derive(Clone, Debug)]
pub struct McpResource {
    pub server_label: String,
    pub server_address: String,
    pub token: Option<Secret>,
    pub uri: String,
    pub name: String,
    pub description: Option<String>,
    pub mime_type: Option<String>,
}

/// The model's tools for the servers' resources (offered when any server lists some).
pub const RESOURCE_LIST: &str = "mcp_resource_list";
pub const RESOURCE_READ: &str = "mcp_resource_read";

/// Everything a turn needs to offer and call MCP tools.
#[derive(Debug)]
pub struct McpTurn<'a, P: ApprovalPort> {
    pub tools: Vec<McpTool>,
    /// Resources the model may list and read (`mcp_resource_list`, `mcp_resource_read`). Only
    /// those listed here can be read: the model cannot make up an address on a server.
    pub resources: Vec<McpResource>,
    /// Asked just before each call goes out (none: the list the turn started with is trusted).
    pub in_use: Option<&'a dyn InUseCheck>,
    /// Each offering server's instructions: (server label, text). They reach the model wrapped
    /// as the server's reference material, never as instructions to follow.
    pub instructions: Vec<(String, String)>,
    pub client: &'a McpClient,
    pub broker: &'a Broker<P>,
    /// The account's remembered consent, read as the turn began.
    pub consent: StandingConsent,
    pub account_id: String,
    pub conversation_id: String,
    pub turn_id: String,
    /// Announce mode: the model is first offered [`ANNOUNCE_TOOL`] only, and a server's (or a
    /// group's) definitions once it asked for them.
    pub announce: bool,
    /// The instance's outbound policy: a page a server asks the person to open is judged by it.
    pub outbound: &'a OutboundPolicy,
    /// Images the calls of the current round returned for the model (raster, bounded), as
    /// `data:` URLs; the turn takes them after the round.
    pub result_images: std::sync::Mutex<Vec<std::sync::Arc<str>>>,
    /// Who started the turn: a person's conversation asks, a bot with MCP ticked runs its calls
    /// unasked, a spoken turn is refused MCP outright.
    pub context: Context,
}

/// The step to log if the turn is stopped while a card waits for its answer: the card is
/// withdrawn, and the timeline says so as it does for every other outcome of a call.
#[derive(Debug, Default)]
pub(crate) struct WaitingCard(std::sync::Mutex<Option<Step>>);

impl WaitingCard {
    pub(super) fn set(&self, step: Option<Step>) {
        *self.0.lock().unwrap_or_else(std::sync::PoisonError::into_inner) = step;
    }

    pub(crate) fn take(&self) -> Option<Step> {
        self.0.lock().unwrap_or_else(std::sync::PoisonError::into_inner).take()
    }
}

impl<P: ApprovalPort> McpTurn<'_, P> {
    /// The images of this round's results kept for the model, taken.
    pub(crate) fn take_images(&self) -> Vec<std::sync::Arc<str>> {
        std::mem::take(
            &mut *self.result_images.lock().unwrap_or_else(std::sync::PoisonError::into_inner),
        )
    }

    /// Keeps the images a result returned for the model (not those for the person only), at
    /// most [`ShownPart::MAX_IMAGES`] a round.
    fn keep_images(&self, shown: &[ShownPart]) {
        let mut kept = self.result_images.lock().unwrap_or_else(std::sync::PoisonError::into_inner);
        for part in shown {
            if let ShownPart::Image { mime_type, data, for_model: true } = part
                && kept.len() < ShownPart::MAX_IMAGES
            {
                kept.push(format!("data:{mime_type};base64,{data}").into());
            }
        }
    }

    /// Whether the turn offers the model any MCP tool: a server's tool or the resource tools.
    pub fn offers_tools(&self) -> bool {
        !self.tools.is_empty() || !self.resources.is_empty()
    }
}

/// Whether a tool is still in use, with the definition a turn started with, just before a call
/// goes out: while the turn ran or its card waited, the person may have paused it ("Update
/// tools" found it changed), removed it, or an administrator suspended its server.
pub trait InUseCheck: Send + Sync + std::fmt::Debug {
    fn still_in_use<'a>(
        &'a self,
        account_id: &'a str,
        server_id: &'a str,
        tool_name: &'a str,
        definition_hash: &'a str,
    ) -> crate::PortFuture<'a, bool>;
}

/// The one MCP tool a turn declares in announce mode. Calling it is not a call to any server:
/// nothing leaves the machine and nobody is asked.
pub const ANNOUNCE_TOOL: &str = "mcp_server_tools";

/// The tools the model asked to see in announce mode (their model-facing names).
pub(crate) type Opened = std::collections::BTreeSet<String>;

impl McpTool {
    /// The version of the tool's view (MCP Apps) kept with its snapshot, if it has one.
    pub fn view_hash(&self) -> Option<&str> {
        self.definition.def()?.view.as_ref()?.document_hash.as_deref()
    }

    /// The `outputSchema` the tool declares, if any.
    pub fn output_schema(&self) -> Option<&Value> {
        self.definition.def()?.output_schema.as_ref()
    }

    fn definition(&self) -> ToolDefinition {
        ToolDefinition {
            name: self.model_name.clone(),
            description: Some(self.description.clone()),
            parameters: self.input_schema.clone(),
        }
    }

    /// [`McpTool::definition`] as sent (the schema is not copied first).
    fn encoded(&self) -> EncodedTool {
        EncodedTool::from_parts(&self.model_name, Some(&self.description), &self.input_schema)
    }
}

/// Every server's groups with their tool counts, in the order offered.
fn catalogue(tools: &[McpTool]) -> Vec<(&str, Vec<(&str, usize)>)> {
    let mut servers: Vec<(&str, Vec<(&str, usize)>)> = Vec::new();
    for tool in tools {
        let index = match servers.iter().position(|(label, _)| *label == tool.server_label) {
            Some(index) => index,
            None => {
                servers.push((&tool.server_label, Vec::new()));
                servers.len() - 1
            }
        };
        let groups = &mut servers[index].1;
        match groups.iter_mut().find(|(key, _)| *key == tool.group) {
            Some((_, count)) => *count += 1,
            None => groups.push((&tool.group, 1)),
        }
    }
    servers
}

/// The announcing tool: what each server holds, and how to ask for its definitions.
fn announce_definition(tools: &[McpTool]) -> ToolDefinition {
    let catalogue = catalogue(tools);
    let mut listing = String::new();
    for (server, groups) in &catalogue {
        let groups: Vec<String> = groups
            .iter()
            .map(|(key, count)| {
                let key = if key.is_empty() { "(no group)" } else { key };
                format!("{key} ({count} tool{})", if *count == 1 { "" } else { "s" })
            })
            .collect();
        listing.push_str(&format!("\n- {server}: {}", groups.join(", ")));
    }
    let servers: Vec<&str> = catalogue.iter().map(|(server, _)| *server).collect();
    ToolDefinition {
        name: ANNOUNCE_TOOL.to_owned(),
        description: Some(format!(
            "Tools of the MCP servers the person connected are not listed yet. Call this with a \
             server, and optionally one of its groups, to receive those tools' definitions for \
             your next step; then call them as usual (each call is put to the person). Asking \
             runs nothing. Servers and their groups:{listing}"
        )),
        parameters: json!({
            "type": "object",
            "properties": {
                "server": {"type": "string", "enum": servers},
                "group": {"type": "string", "description": "One group of that server; all of its tools when left out."}
            },
            "required": ["server"]
        }),
    }
}

/// What a set of definitions costs each request that carries them.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct ToolCost {
    pub tools: usize,
    pub size: ToolsSize,
}

impl ToolCost {
    fn of(definitions: &[ToolDefinition]) -> Self {
        ToolCost { tools: definitions.len(), size: ToolsSize::of(definitions) }
    }
}

/// Announce mode measured on a catalogue: what every request carries with it off and on, and
/// what asking for each group adds.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct AnnounceCost {
    /// Announce mode off: every offered definition, in every request.
    pub every_definition: ToolCost,
    /// Announce mode on: the announcing tool alone, until the model asks.
    pub announced: ToolCost,
    /// (server label, group key, what that group's definitions add once asked for).
    pub per_group: Vec<(String, String, ToolCost)>,
}

/// Measures announce mode on the tools a turn of this account would offer.
pub fn announce_cost(tools: &[McpTool]) -> AnnounceCost {
    if tools.is_empty() {
        return AnnounceCost::default();
    }
    let every: Vec<ToolDefinition> = tools.iter().map(McpTool::definition).collect();
    let per_group = catalogue(tools)
        .into_iter()
        .flat_map(|(server, groups)| {
            groups.into_iter().map(move |(group, _)| {
                let definitions: Vec<ToolDefinition> = tools
                    .iter()
                    .filter(|t| t.server_label == server && t.group == group)
                    .map(McpTool::definition)
                    .collect();
                (server.to_owned(), group.to_owned(), ToolCost::of(&definitions))
            })
        })
        .collect();
    AnnounceCost {
        every_definition: ToolCost::of(&every),
        announced: ToolCost::of(&[announce_definition(tools)]),
        per_group,
    }
}

impl<P: ApprovalPort> McpTurn<'_, P> {
    /// What the model is offered in the next request: every definition, or in announce mode
    /// the announcing tool and the definitions it asked for so far.
    pub(crate) fn definitions(&self, opened: &Opened) -> EncodedTools {
        let mut definitions = EncodedTools::default();
        if self.announce && !self.tools.is_empty() {
            definitions.push(EncodedTool::new(&announce_definition(&self.tools)));
        }
        let shown = self.tools.iter().filter(|t| !self.announce || opened.contains(&t.model_name));
        definitions.extend(shown.map(McpTool::encoded));
        if self.offers_resources() {
            definitions.push(EncodedTool::new(&ToolDefinition {
                name: RESOURCE_LIST.to_owned(),
                description: Some(
                    "List the resources (documents, records) your MCP servers publish: server, \
                     address and what each is. Nothing is sent to the servers."
                        .to_owned(),
                ),
                parameters: json!({"type": "object", "properties": {}}),
            }));
            definitions.push(EncodedTool::new(&ToolDefinition {
                name: RESOURCE_READ.to_owned(),
                description: Some(
                    "Read one resource listed by mcp_resource_list, by its address (uri). Its \
                     text is written by the server."
                        .to_owned(),
                ),
                parameters: json!({
                    "type": "object",
                    "properties": {
                        "uri": {"type": "string", "description": "The resource's address."},
                        "server": {"type": "string", "description": "The server's name, when two list the same address."},
                    },
                    "required": ["uri"],
                }),
            }));
        }
        definitions
    }

    /// The model asked for a server's (or group's) definitions: they join the next request. A
    /// step says so; nothing leaves the machine.
    pub(crate) async fn open<S: TurnSink>(
        &self,
        call: &ToolCall,
        opened: &mut Opened,
        sink: &S,
    ) -> Result<String, TurnError> {
        let arguments: Value = serde_json::from_str(&call.arguments_json).unwrap_or(Value::Null);
        let server = arguments["server"].as_str().unwrap_or_default();
        let group = arguments["group"].as_str().filter(|g| !g.is_empty());
        let matching: Vec<&McpTool> = self
            .tools
            .iter()
            .filter(|t| t.server_label.eq_ignore_ascii_case(server))
            .filter(|t| group.is_none_or(|g| t.group.eq_ignore_ascii_case(g)))
            .collect();
        if matching.is_empty() {
            let servers: Vec<&str> = catalogue(&self.tools).iter().map(|(s, _)| *s).collect();
            return Ok(format!(
                "No tools match server {server:?}{}. The servers are: {}.",
                group.map(|g| format!(" and group {g:?}")).unwrap_or_default(),
                servers.join(", ")
            ));
        }
        let names: Vec<&str> = matching.iter().map(|t| t.model_name.as_str()).collect();
        opened.extend(names.iter().map(|n| (*n).to_owned()));
        sink.event(TurnEvent::step(Step {
            server: Some(matching[0].server_label.clone()),
            group: Some(group.map(str::to_owned)),
            tools: Some(names.len()),
            ..Step::mcp_tool(ANNOUNCE_TOOL, StepState::Opened)
        }))
        .await?;
        Ok(format!(
            "These tools are now available to call: {}. Call them directly.",
            names.join(", ")
        ))
    }

    /// Resource tools are offered when a server lists resources, unless a server's own tool
    /// already has one of their names (the server's tool keeps it).
    fn offers_resources(&self) -> bool {
        !self.resources.is_empty()
            && !self
                .tools
                .iter()
                .any(|t| t.model_name == RESOURCE_LIST || t.model_name == RESOURCE_READ)
    }

    pub(crate) fn tool(&self, model_name: &str) -> Option<&McpTool> {
        self.tools.iter().find(|t| t.model_name == model_name)
    }

    /// Whether `name` is one of the resource tools this turn offers.
    pub(crate) fn is_resource_tool(&self, name: &str) -> bool {
        self.offers_resources() && (name == RESOURCE_LIST || name == RESOURCE_READ)
    }

    /// Runs `mcp_resource_list` or `mcp_resource_read`; returns what the model reads.
    pub(crate) async fn resource_tool<S: TurnSink>(
        &self,
        call: &ToolCall,
        guard: &mut TurnGuard,
        sink: &S,
    ) -> Result<String, TurnError> {
        if call.name == RESOURCE_LIST {
            let mut text =
                String::from("Resources your MCP servers publish (server: uri, name):\n");
            for r in &self.resources {
                let about: String =
                    r.description.as_deref().unwrap_or_default().chars().take(200).collect();
                text.push_str(&format!("- {}: {} ({}) {about}\n", r.server_label, r.uri, r.name));
            }
            sink.event(TurnEvent::step(Step {
                resources: Some(self.resources.len()),
                ..Step::mcp_tool(RESOURCE_LIST, StepState::Done)
            }))
            .await?;
            return Ok(text);
        }
        let arguments: Value = serde_json::from_str(&call.arguments_json).unwrap_or(Value::Null);
        let uri = arguments.get("uri").and_then(Value::as_str).unwrap_or_default().trim();
        let server = arguments.get("server").and_then(Value::as_str).map(str::trim);
        let found = self.resources.iter().find(|r| {
            r.uri == uri && server.is_none_or(|s| s.eq_ignore_ascii_case(&r.server_label))
        });
        let Some(resource) = found else {
            sink.event(TurnEvent::step(Step {
                uri: Some(uri.to_owned()),
                error: Some("not a listed resource".to_owned()),
                ..Step::mcp_tool(RESOURCE_READ, StepState::Failed)
            }))
            .await?;
            return Ok(format!(
                "No server lists a resource at `{uri}`; mcp_resource_list shows those that can \
                 be read."
            ));
        };
        let read = async {
            let session =
                self.client.connect(&resource.server_address, resource.token.as_ref()).await?;
            let contents = session.read_resource(&resource.uri).await;
            session.close().await;
            contents
        }
        .await;
        match read {
            Ok(contents) => {
                let text: Vec<String> = contents.contents.iter().map(|c| c.describe()).collect();
                let wrapped = guard
                    .admit(
                        &resource.server_label,
                        Source::Resource { uri: &resource.uri },
                        &text.join("\n"),
                        &Caps::default(),
                    )
                    .into_string();
                sink.event(TurnEvent::step(Step {
                    server: Some(resource.server_label.clone()),
                    uri: Some(resource.uri.clone()),
                    output: Some(wrapped.clone()),
                    ..Step::mcp_tool(RESOURCE_READ, StepState::Done)
                }))
                .await?;
                Ok(wrapped)
            }
            Err(err) => {
                sink.event(TurnEvent::step(Step {
                    server: Some(resource.server_label.clone()),
                    uri: Some(resource.uri.clone()),
                    error: Some(err.to_string()),
                    ..Step::mcp_tool(RESOURCE_READ, StepState::Failed)
                }))
                .await?;
                Ok(format!(
                    "The resource {} on the server {} could not be read: {err}",
                    resource.uri, resource.server_label
                ))
            }
        }
    }

    /// Runs one call of an MCP tool; returns what the model reads.
    pub(crate) async fn call<S: TurnSink>(
        &self,
        tool: &McpTool,
        call: &ToolCall,
        guard: &mut TurnGuard,
        sink: &S,
        waiting_card: &WaitingCard,
        sampler: Sampler<'_>,
    ) -> Result<String, TurnError> {
        let step = |state: StepState, call_id: Option<&str>| Step {
            call_id: call_id.map(str::to_owned),
            ..Step::mcp_call(&tool.model_name, &tool.server_label, &tool.tool_name, state)
        };
        let arguments: Value = match serde_json::from_str(&call.arguments_json) {
            Ok(Value::Object(map)) => Value::Object(map),
            _ => {
                sink.event(TurnEvent::step(step(StepState::Invalid, None))).await?;
                return Ok(format!(
                    "The arguments for {} were not a JSON object; nothing was called.",
                    tool.model_name
                ));
            }
        };
        let new_call = NewCall {
            account_id: self.account_id.clone(),
            conversation_id: self.conversation_id.clone(),
            turn_id: self.turn_id.clone(),
            server_id: tool.server_id.clone(),
            server_label: tool.server_label.clone(),
            server_address: tool.server_address.clone(),
            tool_name: tool.tool_name.clone(),
            model_tool_name: tool.model_name.clone(),
            tool_description: tool.description.clone(),
            tool_definition_hash: tool.definition_hash.clone(),
            tool_hints_json: tool.hints.as_ref().and_then(|h| serde_json::to_string(h).ok()),
            arguments: arguments.clone(),
        };
        let gate = gate(self.context);
        if let Gate::RefuseOutright { reason } = gate {
            let refused = Step {
                message: Some(refusal_note(self.context).to_owned()),
                ..step(StepState::Refused, None)
            };
            sink.event(TurnEvent::step(refused)).await?;
            return Ok(reason.to_owned());
        }
        let read_only = tool.hints.as_ref().and_then(|h| h.read_only) == Some(true);
        let cleared = if gate == Gate::Ask {
            self.consent.clear(self.broker, new_call, read_only).await?
        } else {
            // A ticked bot runs its calls unasked (the tick is the whole of the consent); recorded.
            Cleared::Unasked(self.broker.record_unasked(new_call, Unasked::Bot).await?)
        };
        let approved = match cleared {
            Cleared::Unasked(call) => call,
            // Stopped from here on, the card is withdrawn rather than left to lapse.
            Cleared::Asking(pending, standing) => {
                // Set as soon as the card exists: tabs may see it (and Stop) from now on.
                waiting_card.set(Some(step(StepState::Interrupted, Some(&pending.id))));
                sink.event(TurnEvent::Approval(ApprovalShown { card: card_view(pending.card()) }))
                    .await?;
                let answer = answered(self.broker, &pending, standing).await;
                waiting_card.set(None);
                match answer? {
                    Ok(call) => call,
                    Err(outcome) => {
                        let state = step_state(outcome.state());
                        sink.event(TurnEvent::step(step(state, Some(&pending.id)))).await?;
                        return Ok(outcome.model_text().unwrap_or_else(|| {
                            format!("The call to {} was not made.", tool.model_name)
                        }));
                    }
                }
            }
        };
        let sent = sendable::<P>(&approved, &arguments)?;
        if let Some(check) = self.in_use {
            let in_use = check
                .still_in_use(
                    &self.account_id,
                    &tool.server_id,
                    &tool.tool_name,
                    &tool.definition_hash,
                )
                .await;
            let why = match in_use {
                Ok(true) => None,
                Ok(false) => Some(format!(
                    "{} is no longer in use as it was when this reply began (its definition \
                     changed and waits for review, it was removed, or its server was switched \
                     off or suspended); it was not called",
                    tool.model_name
                )),
                Err(err) => Some(format!(
                    "whether {} is still in use could not be checked ({err}); it was not called",
                    tool.model_name
                )),
            };
            if let Some(why) = why {
                let failed = Step {
                    error: Some(why.clone()),
                    ..step(StepState::Failed, Some(&approved.id))
                };
                sink.event(TurnEvent::step(failed)).await?;
                return Ok(format!("The call was not made: {why}."));
            }
        }
        // On a session kept for this server record (its id belongs to one account, so two
        // people who added the same address never share one), reused across the turn's calls
        // and the turns that follow for a while. The server's questions during the call come
        // here, one at a time, and are put to the person on a card of their own.
        let (asker, mut news) = tokio::sync::mpsc::channel::<CallNews>(4);
        let called = self.client.call_tool_asking(
            &tool.server_id,
            &tool.server_address,
            tool.token.as_ref(),
            &tool.tool_name,
            sent,
            Some(asker),
        );
        // The call is out: the timeline says so (replacing the card's waiting step) until the
        // step that settles it, with the server's progress as it reports it.
        let running = |report: Option<Progress>, task: Option<TaskReport>| {
            let report = report.map(progress_numbers);
            TurnEvent::Progress(CallProgress {
                call_id: approved.id.clone(),
                tool: tool.model_name.clone(),
                server: tool.server_label.clone(),
                server_tool: tool.tool_name.clone(),
                progress: report.as_ref().and_then(|r| r.0.clone()),
                total: report.as_ref().and_then(|r| r.1.clone()),
                task: task.as_ref().map(|t| t.status.as_str().to_owned()),
                message: report.and_then(|r| r.2).or_else(|| task.and_then(|t| t.message)),
            })
        };
        sink.event(running(None, None)).await?;
        let mut progress = ProgressPace::default();
        // A task's words that came too soon after the last report: told once the pace allows.
        let mut task_state = None;
        let mut pending: Option<TaskReport> = None;
        let mut called = std::pin::pin!(called);
        let result = loop {
            tokio::select! {
                result = &mut called => break result,
                Some(item) = news.recv() => match item {
                    CallNews::Question(question) => {
                        let asked = Asking { tool, call: &approved, sink, waiting_card, sampler };
                        self.put_question(asked, question, &mut news).await?;
                    }
                    CallNews::LinkDone { .. } => {
                        // A notice for a page the server itself waits on: the server carries
                        // on by itself; the page's card was settled when it was opened.
                    }
                    CallNews::Progress(report) => {
                        if progress.due() {
                            sink.event(running(Some(report), None)).await?;
                        }
                    }
                    CallNews::Task(report) => {
                        // A new status is told at once; new words at the pace of progress
                        // reports, the latest kept until then so the step never keeps stale ones.
                        let changed = task_state.replace(report.status) != Some(report.status);
                        if progress.due() || changed {
                            pending = None;
                            sink.event(running(None, Some(report))).await?;
                        } else {
                            pending = Some(report);
                        }
                    }
                },
                () = progress.until_due(), if pending.is_some() => {
                    if let Some(report) = pending.take() {
                        progress.due();
                        sink.event(running(None, Some(report))).await?;
                    }
                }
            }
        };
        let unfit = result.as_ref().ok().and_then(|r| r.check_output(tool.output_schema()).err());
        if let Some(why) = unfit {
            let failed = Step {
                error: Some(format!("{}: {why}; the result was not used", tool.server_label)),
                ..step(StepState::Failed, Some(&approved.id))
            };
            sink.event(TurnEvent::step(failed)).await?;
            return Ok(format!(
                "The call to {} on the server {} returned a result that was not used: {why}.",
                tool.model_name, tool.server_label
            ));
        }
        match result {
            Ok(result) => {
                let wrapped = guard
                    .admit(
                        &tool.server_label,
                        Source::ToolResult { tool: &tool.model_name },
                        &result.text_for_model(),
                        &Caps::default(),
                    )
                    .into_string();
                let shown = shown_parts(&result);
                self.keep_images(&shown);
                let view = tool.view_hash().map(|hash| StepView {
                    document: llooma_types::mcp_view_path(&tool.server_id, hash),
                    arguments: arguments.clone(),
                    result: result_for_view(&result),
                });
                let allowed = Step {
                    server_id: Some(tool.server_id.clone()),
                    is_error: Some(result.is_error),
                    output: Some(wrapped.clone()),
                    shown,
                    view,
                    ..step(StepState::Allowed, Some(&approved.id))
                };
                sink.event(TurnEvent::step(allowed)).await?;
                Ok(wrapped)
            }
            Err(err) => {
                let failed = Step {
                    error: Some(err.to_string()),
                    ..step(StepState::Failed, Some(&approved.id))
                };
                sink.event(TurnEvent::step(failed)).await?;
                Ok(format!(
                    "The call to {} on the server {} failed: {err}",
                    tool.model_name, tool.server_label
                ))
            }
        }
    }
}

/// What a question during a call is put with: the call, where its steps go, and the model
/// that would answer a request for a completion.
pub(crate) struct Asking<'a, S> {
    pub(crate) tool: &'a McpTool,
    pub(crate) call: &'a PendingCall,
    pub(crate) sink: &'a S,
    pub(crate) waiting_card: &'a WaitingCard,
    pub(crate) sampler: Sampler<'a>,
}

impl<S> Clone for Asking<'_, S> {
    fn clone(&self) -> Self {
        *self
    }
}
impl<S> Copy for Asking<'_, S> {}

/// The turn's own provider and model: what answers a server's request for a completion, once
/// the person lets it.
#[derive(Clone, Copy)]
pub(crate) struct Sampler<'a> {
    pub(crate) provider: &'a ProviderClient,
    pub(crate) model: &'a str,
    /// The turn's meter: what the answer used counts to the turn's account.
    pub(crate) meter: &'a crate::usage::Meter,
}

/// What of a call's result the person sees beside the model's reading of it: images (raster,
/// bounded), what the server marked for the person only, and the rest of what is not text by
/// name. Every part stays the server's words; the page shows them as such.
/// A result as a view receives it: an MCP `CallToolResult` of its text and structured content
/// (the model's and the person's), within [`StepView::MAX_RESULT_BYTES`].
pub(crate) fn result_for_view(result: &ToolResult) -> Value {
    let content: Vec<Value> = result
        .content
        .iter()
        .chain(&result.for_person)
        .filter_map(|item| match item {
            ContentItem::Text { text } => Some(json!({"type": "text", "text": text})),
            _ => None,
        })
        .collect();
    let mut shaped = json!({"content": content, "isError": result.is_error});
    if let Some(structured) = &result.structured_content {
        shaped["structuredContent"] = structured.clone();
    }
    if shaped.to_string().len() > StepView::MAX_RESULT_BYTES {
        return json!({
            "content": [{"type": "text", "text": format!(
                "The result is larger than the {} KiB a view is given.",
                StepView::MAX_RESULT_BYTES / 1024
            )}],
            "isError": true,
        });
    }
    shaped
}

fn shown_parts(result: &ToolResult) -> Vec<ShownPart> {
    let mut parts = Vec::new();
    let mut images = 0;
    let mut sounds = 0;
    let items = result.content.iter().map(|i| (i, true));
    let for_person = result.for_person.iter().map(|i| (i, false));
    for (item, for_model) in items.chain(for_person) {
        if parts.len() >= ShownPart::MAX_PARTS {
            break;
        }
        let named = |what: &str, uri: Option<&str>, name: Option<&str>, mime: Option<&str>| {
            ShownPart::Named {
                what: what.to_owned(),
                uri: uri.map(|u| u.chars().take(2048).collect()),
                name: name.map(|n| n.chars().take(200).collect()),
                mime_type: mime.map(|m| m.chars().take(100).collect()),
            }
        };
        let part = match item {
            ContentItem::Text { text } if !for_model => {
                ShownPart::Text { text: text.chars().take(ShownPart::MAX_TEXT_CHARS).collect() }
            }
            // Text for the model is in the step's output already.
            ContentItem::Text { .. } | ContentItem::Unknown { .. } => continue,
            ContentItem::Image { data, mime_type } => {
                let raster = ShownPart::IMAGE_TYPES.contains(&mime_type.as_str());
                let base64 = data.bytes().all(|b| b.is_ascii_alphanumeric() || b"+/=".contains(&b));
                if raster
                    && !data.is_empty()
                    && base64
                    && data.len() <= ShownPart::MAX_IMAGE_BYTES
                    && images < ShownPart::MAX_IMAGES
                {
                    images += 1;
                    ShownPart::Image { mime_type: mime_type.clone(), data: data.clone(), for_model }
                } else {
                    named("image", None, None, Some(mime_type))
                }
            }
            ContentItem::Audio { mime_type, data } => {
                match playable(data).filter(|_| sounds < ShownPart::MAX_AUDIO) {
                    Some(sniffed) => {
                        sounds += 1;
                        let mime_type = sniffed.to_owned();
                        ShownPart::Audio { mime_type, data: data.clone(), for_model }
                    }
                    None => named("audio", None, None, Some(mime_type)),
                }
            }
            ContentItem::Resource { uri, mime_type, .. } => {
                named("resource", Some(uri), None, mime_type.as_deref())
            }
            ContentItem::ResourceLink { uri, name, mime_type, .. } => {
                named("link", Some(uri), name.as_deref(), mime_type.as_deref())
            }
            _ => continue,
        };
        parts.push(part);
    }
    parts
}

/// The type a sound is played as, from its bytes (a server's word for it is a claim): none
/// when it is not base64 within the bound, or not audio the page plays.
fn playable(data: &str) -> Option<&'static str> {
    use base64::Engine;
    let base64 = data.bytes().all(|b| b.is_ascii_alphanumeric() || b"+/=".contains(&b));
    if !base64 || data.len() > ShownPart::MAX_AUDIO_BYTES || data.len() < 16 {
        return None;
    }
    // The first bytes say what it is (the sniffer looks at the first KiB at most).
    let head = &data[..data.len().min(1368) / 4 * 4];
    let bytes = base64::engine::general_purpose::STANDARD.decode(head).ok()?;
    match llooma_media::sniff(&bytes, "").kind {
        llooma_media::Kind::Audio(format) => Some(llooma_media::Kind::Audio(format).content_type()),
        _ => None,
    }
}

/// Progress reports reach the timeline at most twice a second: each is an event every tab
/// receives and the turn's log keeps, and a server may report far more often.
#[derive(Default)]
struct ProgressPace {
    last: Option<std::time::Instant>,
}

impl ProgressPace {
    const EVERY: std::time::Duration = std::time::Duration::from_millis(500);

    /// Waits until a report would be due.
    async fn until_due(&self) {
        if let Some(last) = self.last {
            tokio::time::sleep_until((last + Self::EVERY).into()).await;
        }
    }

    fn due(&mut self) -> bool {
        let now = std::time::Instant::now();
        let due = self.last.is_none_or(|last| now.duration_since(last) >= Self::EVERY);
        if due {
            self.last = Some(now);
        }
        due
    }
}

/// A progress report's numbers as the timeline carries them (whole numbers as such: "3 of 6",
/// not "3.0 of 6.0"), and its message.
fn progress_numbers(
    report: Progress,
) -> (Option<serde_json::Number>, Option<serde_json::Number>, Option<String>) {
    let number = |n: f64| {
        if n.fract() == 0.0 && n.abs() < 9e15 {
            Some(serde_json::Number::from(n as i64))
        } else {
            serde_json::Number::from_f64(n)
        }
    };
    (number(report.progress), report.total.and_then(number), report.message)
}

/// The card as a tab shows it.
pub(super) fn card_view(card: llooma_approval_broker::ApprovalCard) -> ApprovalCardView {
    ApprovalCardView {
        id: card.id,
        conversation_id: card.conversation_id,
        turn_id: card.turn_id,
        server_id: card.server_id,
        server_label: card.server_label,
        tool_name: card.tool_name,
        model_tool_name: card.model_tool_name,
        tool_description: card.tool_description,
        arguments_json: card.arguments_json,
        created_at_ms: card.created_at_ms,
        deadline_ms: card.deadline_ms,
        tool_hints: card.tool_hints.and_then(|hints| serde_json::from_value(hints).ok()),
        question: card.question.and_then(|form| serde_json::from_value(form).ok()),
    }
}

/// The timeline's word for how a card was settled.
pub(crate) fn step_state(state: llooma_approval_broker::CallState) -> StepState {
    use llooma_approval_broker::CallState;
    match state {
        CallState::Allowed => StepState::Allowed,
        CallState::Refused | CallState::Pending => StepState::Refused,
        CallState::Expired => StepState::Expired,
        CallState::Interrupted => StepState::Interrupted,
    }
}

/// What the timeline says of an MCP call refused outright, by where the turn ran.
pub(crate) fn refusal_note(context: Context) -> &'static str {
    match context {
        Context::Spoken => {
            "Not called: this was a spoken turn, and MCP tools are never called in one (nobody \
             is looking at a screen to approve the call). The model was told why."
        }
        Context::Bot { .. } => {
            "Not called: MCP tools are off for this bot; its owner can switch them on in the \
             bot's tools."
        }
        Context::Conversation => "Not called.",
    }
}
