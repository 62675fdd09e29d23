//! Data shapes shared by the server and the browser: what the JSON API sends and receives.
//!
//! Serde only: this crate does no IO and builds for `wasm32-unknown-unknown`, so the web client
//! and the server agree on the wire format by construction. Nothing here ever carries a secret:
//! a token or key is described by whether it is set (`has_key`), never by its value.

pub mod events;
pub mod question;
pub mod usage;

pub use events::{
    ApprovalShown, Attached, CallProgress, ChoicesShown, ContextFill, Delta, EncodedEvent,
    EndState, Reply, ReplyPart, RequestWeighed, ShownPart, Step, StepState, StepView, TurnEnded,
    TurnEvent, TurnFailure, TurnStarted, UnknownEvent,
};
use serde::{Deserialize, Serialize};
pub use usage::{
    AccountLimits, AccountLimitsPut, LimitStanding, LimitsView, ModelPriceView, UsageByAccount,
    UsageByModel, UsageDay, UsageReport, UsageTotals,
};

/// What an account may do on the instance.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum Role {
    /// Manages the instance: settings, providers, every account's MCP servers.
    Admin,
    /// Uses the instance within what administrators allow.
    User,
}

impl Role {
    /// The name stored in the database and shown in the API.
    pub fn as_str(self) -> &'static str {
        match self {
            Role::Admin => "admin",
            Role::User => "user",
        }
    }

    /// Reads a stored role name.
    pub fn parse(value: &str) -> Option<Role> {
        match value {
            "admin" => Some(Role::Admin),
            "user" => Some(Role::User),
            _ => None,
        }
    }
}

/// An account as the API shows it.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct AccountView {
    pub id: String,
    pub username: String,
    pub display_name: String,
    pub role: Role,
    /// RFC 3339.
    pub created_at: String,
}

/// The answer to login, registration and `GET /api/v1/me`.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct SessionView {
    pub account: AccountView,
    /// Send back as the `X-CSRF-Token` header on every state-changing request.
    pub csrf_token: String,
}

/// What administrators decide for the whole instance.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct InstanceSettingsView {
    /// Whether people may create accounts themselves after the first one.
    pub registration_open: bool,
    /// Whether accounts that are not administrators may add their own MCP servers.
    pub users_can_add_mcp_servers: bool,
    /// The SearXNG-compatible search service `web_search` asks; `None`: no web search.
    pub web_search_url: Option<String>,
    /// The instance's default system prompt; `None`: the built-in one.
    pub system_prompt: Option<String>,
    /// The model a new conversation starts with when its account never chose one.
    #[serde(default)]
    pub default_provider_id: Option<String>,
    #[serde(default)]
    pub default_model: Option<String>,
    /// The currency prices and spend are in (ISO 4217, e.g. `USD`).
    #[serde(default)]
    pub currency: String,
    /// The context window, in tokens, of a model that has none written or reported.
    #[serde(default)]
    pub context_tokens: u32,
}

/// A change to the instance settings; absent fields stay as they are. For the two texts, an
/// empty string goes back to "none" (no web search, the built-in prompt).
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct InstanceSettingsPatch {
    pub registration_open: Option<bool>,
    pub users_can_add_mcp_servers: Option<bool>,
    pub web_search_url: Option<String>,
    pub system_prompt: Option<String>,
    /// The default model: both together, or both `""` for none.
    pub default_provider_id: Option<String>,
    pub default_model: Option<String>,
    /// Three capital letters (ISO 4217).
    pub currency: Option<String>,
    /// 1,024 to 10,000,000.
    pub context_tokens: Option<u32>,
}

/// The signed-in account's preferences (`/api/v1/me/preferences`).
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct PreferencesView {
    /// After a conversation's first reply, the model is asked for a short title for it.
    pub titles_from_model: bool,
}

/// A change to the preferences; absent fields stay.
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct PreferencesPatch {
    pub titles_from_model: Option<bool>,
}

/// What anyone, signed in or not, may know about the instance (the sign-in page needs it).
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct InstanceInfo {
    /// False until the first account exists; that account becomes the administrator.
    pub setup_complete: bool,
    pub registration_open: bool,
    pub version: String,
}

/// A model provider as administrators see it. The key itself never leaves the server.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct ProviderView {
    pub id: String,
    pub name: String,
    pub base_url: String,
    pub has_key: bool,
    /// Models the administrator declared, offered beside those the provider lists.
    #[serde(default)]
    pub declared_models: Vec<String>,
    /// Models the administrator marked as seeing images.
    #[serde(default)]
    pub vision_models: Vec<String>,
    /// Context windows, in tokens, the administrator wrote for some models.
    #[serde(default)]
    pub context_windows: std::collections::BTreeMap<String, u32>,
    /// Marked as running on this machine or the local network (docs/network-policy.md).
    #[serde(default)]
    pub local_network: bool,
    pub created_at: String,
}

/// The one error shape of the API.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct ErrorBody {
    /// A stable, machine-readable code such as `invalid_json` or `csrf`.
    pub error: String,
    /// A sentence for a person: what happened and what to do.
    pub message: String,
}

/// An administrator's suspension of an MCP server, as its owner sees it.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct SuspensionView {
    pub reason: String,
    pub at: String,
}

/// An MCP server card in Settings → Tools. Counts come from the stored snapshot: listing
/// servers never contacts them.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct McpServerView {
    pub id: String,
    pub label: String,
    /// The server half of its tools' names (`mcp_<slug>_<tool>`).
    pub slug: String,
    pub address: String,
    /// Whether a token is stored; the token itself is never sent back.
    pub has_token: bool,
    /// The owner's own switch.
    pub enabled: bool,
    /// Set when an administrator suspended it; the owner's switch then changes nothing.
    pub suspended: Option<SuspensionView>,
    /// Whether its tools can be offered now (switched on and not suspended).
    pub active: bool,
    pub server_name: Option<String>,
    pub protocol_version: String,
    pub tool_count: usize,
    pub group_count: usize,
    pub snapshot_taken_at: String,
    /// The server said its tools changed since the snapshot: "Update tools" to see what.
    pub snapshot_stale: bool,
    /// Where the instance serves the server's icon, when the server names one it can show
    /// (`GET`; the picture is fetched by the instance, never by the page).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub icon: Option<String>,
}

/// One tool of a server, as the catalogue shows it.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct McpToolView {
    /// The server's own name for it.
    pub name: String,
    /// The name the model sees.
    pub model_name: String,
    /// Its group's key ("" for the unnamed group).
    pub group: String,
    pub description: Option<String>,
    /// The server's annotations (`readOnlyHint`, ...): the server's claims, not facts.
    pub annotations: Option<serde_json::Value>,
    pub input_schema: serde_json::Value,
    /// Switched on (server active and its group on).
    pub enabled: bool,
    /// Where the instance serves the tool's icon, when the server names one it can show.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub icon: Option<String>,
    /// The tool comes with an interactive view (MCP Apps), shown where it is called.
    #[serde(default, skip_serializing_if = "std::ops::Not::not")]
    pub view: bool,
    /// Only the tool's view may call it: the model is never offered it (and it has no
    /// model-facing name or group).
    #[serde(default, skip_serializing_if = "std::ops::Not::not")]
    pub view_only: bool,
}

/// A group read off a server's tool names.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct McpGroupView {
    /// The prefix ("" for the tools that follow no pattern).
    pub key: String,
    pub enabled: bool,
    pub tool_count: usize,
}

/// A server with its whole catalogue (the card's "full list" and advanced settings).
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct McpServerDetail {
    pub server: McpServerView,
    pub instructions: Option<String>,
    pub groups: Vec<McpGroupView>,
    pub tools: Vec<McpToolView>,
    pub resources: serde_json::Value,
    pub resource_templates: serde_json::Value,
    pub prompts: serde_json::Value,
    /// What limits cut or left out when the snapshot was taken.
    pub notes: Vec<String>,
}

/// What the connection test found (nothing is stored by a test).
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct McpTestReport {
    pub protocol_version: String,
    pub server_name: Option<String>,
    pub server_version: Option<String>,
    pub instructions: Option<String>,
    /// The slug the server would get (from the label).
    pub slug: String,
    pub tools: Vec<McpToolView>,
    pub groups: Vec<McpGroupView>,
    pub notes: Vec<String>,
    /// Names this exact tool list and instructions: sent back as `reviewedTools` when adding, so
    /// the server joins only with what the person saw.
    pub tools_digest: String,
}

/// A tool whose definition changed between two snapshots.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct McpToolChange {
    pub name: String,
    pub description_changed: bool,
    /// Input or output schema, or annotations.
    pub schema_changed: bool,
    /// Its interactive view (MCP Apps): added, removed, or its document changed.
    #[serde(default)]
    pub view_changed: bool,
}

/// What "Update tools" found.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct McpRefreshReport {
    pub server: McpServerView,
    pub added: Vec<String>,
    pub removed: Vec<String>,
    /// A changed description or schema matters for consent: remembered "Always allow" grants
    /// for these tools no longer apply.
    pub changed: Vec<McpToolChange>,
    /// False when tools were added or changed, or the instructions changed: the new list waits
    /// for the person's consent (send `reviewedTools` with `toolsDigest`); until then only the
    /// consented tools the server still offers unchanged stay in use.
    pub applied: bool,
    /// Names the new tool list and instructions.
    pub tools_digest: String,
    /// The server's instructions now.
    pub instructions: Option<String>,
    pub instructions_changed: bool,
    /// The new tool list, for the review.
    pub tools: Vec<McpToolView>,
    pub groups: Vec<McpGroupView>,
}

/// A tool the budget left out.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct LeftOutTool {
    pub server_id: String,
    pub server_label: String,
    pub tool: String,
}

/// The account's MCP tool settings and what they mean for a request.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct McpToolSettingsView {
    pub tool_budget: u32,
    pub mcp_everywhere: bool,
    pub announce_mode: bool,
    /// Set past 100: everything switched on rides along in every request of every turn.
    pub budget_warning: Option<String>,
    /// Tools switched on across every active server.
    pub switched_on: usize,
    /// How many of those reach the model.
    pub offered: usize,
    /// Which ones the budget leaves out, in the order they are dropped.
    pub left_out: Vec<LeftOutTool>,
    /// Whether this account may add MCP servers (otherwise `ADD_SERVERS_REFUSED` says why).
    pub can_add_servers: bool,
}

/// Why an account may not add an MCP server, and who can change that.
pub const ADD_SERVERS_REFUSED: &str = "Adding MCP servers is not allowed for your account on this \
    instance. An administrator can allow it (Admin → MCP servers → “Users can add their own MCP \
    servers”).";

/// An entry of the instance's catalogue of MCP servers, as Discover shows it.
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct CatalogueEntryView {
    /// An administrator's entry: a UUID; an entry of the catalogue file: `file:<its id>`.
    pub id: String,
    pub label: String,
    pub address: String,
    pub description: String,
    pub token_needed: bool,
    /// Where to get a token.
    pub token_help: String,
    pub icon: String,
    pub tags: Vec<String>,
    /// From the operator's catalogue file: edited there, not in the admin pages.
    pub from_file: bool,
    pub usage: CatalogueUsageView,
    pub rating: CatalogueRatingView,
    /// The signed-in account already has a server at this address.
    pub added: bool,
    /// The registration deeplink: the add form, pre-filled.
    pub register_link: String,
}

/// How much an entry is used on this instance: counts only.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct CatalogueUsageView {
    /// Accounts that added a server at this address.
    pub accounts: u64,
    /// Calls that went out to it in the last 30 days.
    pub calls_last_30_days: u64,
}

/// An entry's ratings.
#[derive(Clone, Copy, Debug, Default, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct CatalogueRatingView {
    /// Average stars, one decimal; none before the first rating.
    pub average: Option<f64>,
    pub count: u64,
    /// The signed-in account's own stars.
    pub mine: Option<u8>,
}

/// An administrator's catalogue entry, as written.
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct CatalogueEntryRequest {
    pub label: String,
    pub address: String,
    #[serde(default)]
    pub description: String,
    #[serde(default)]
    pub token_needed: bool,
    #[serde(default)]
    pub token_help: String,
    #[serde(default)]
    pub icon: String,
    #[serde(default)]
    pub tags: Vec<String>,
}

/// The registration deeplink of an address: the add form, pre-filled, nothing stored.
pub fn register_link(address: &str, label: &str) -> String {
    let mut link = String::from("/settings/tools/mcp/new?address=");
    link.push_str(&encode_query_value(address));
    if !label.is_empty() {
        link.push_str("&label=");
        link.push_str(&encode_query_value(label));
    }
    link
}

/// Where the instance serves the icon of an MCP server (`tool: None`) or of one of its tools (a
/// server's tool names may hold any character, so the name is percent-encoded).
pub fn mcp_icon_path(server_id: &str, tool: Option<&str>) -> String {
    match tool {
        None => format!("/api/v1/mcp/servers/{server_id}/icon"),
        Some(tool) => {
            format!("/api/v1/mcp/servers/{server_id}/icon?tool={}", encode_query_value(tool))
        }
    }
}

/// How a card's `modelToolName` begins when no model asked for the call but a tool's view (MCP
/// Apps): "the view of get-time".
pub const VIEW_CALLER: &str = "the view of ";

/// The tool whose view asks for a call, when a view asks (see [`VIEW_CALLER`]).
pub fn asking_view(model_tool_name: &str) -> Option<&str> {
    model_tool_name.strip_prefix(VIEW_CALLER)
}

/// Where the instance serves the document of an MCP server's view (MCP Apps) of one version.
pub fn mcp_view_path(server_id: &str, hash: &str) -> String {
    format!("/api/v1/mcp/servers/{server_id}/views/{hash}")
}

/// Percent-encodes everything but unreserved characters (RFC 3986), for a query value.
pub fn encode_query_value(text: &str) -> String {
    let mut out = String::with_capacity(text.len());
    for byte in text.bytes() {
        if byte.is_ascii_alphanumeric() || matches!(byte, b'-' | b'.' | b'_' | b'~') {
            out.push(char::from(byte));
        } else {
            out.push_str(&format!("%{byte:02X}"));
        }
    }
    out
}

/// A change to the account's MCP tool settings.
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct McpToolSettingsPatch {
    pub tool_budget: Option<u32>,
    pub mcp_everywhere: Option<bool>,
    pub announce_mode: Option<bool>,
}

/// What a set of tool definitions adds to every request that carries it.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct ToolCostView {
    pub tools: usize,
    /// Bytes of the definitions as sent.
    pub bytes: usize,
    /// A quarter of the bytes: for comparing, not for billing (tokenizers differ by model).
    pub estimated_tokens: usize,
}

/// One group's definitions, added to the following requests once the model asked for them.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct GroupCostView {
    pub server_label: String,
    /// The group's key; empty for the unnamed group.
    pub group: String,
    pub cost: ToolCostView,
}

/// Announce mode measured on the account's own catalogue (`GET /api/v1/mcp/announce-cost`).
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct AnnounceCostView {
    pub announce_mode: bool,
    /// Announce mode off: every offered definition rides along in every request.
    pub every_request_without: ToolCostView,
    /// Announce mode on: the one announcing tool, until the model asks for a server or group.
    pub every_request_with: ToolCostView,
    pub per_group: Vec<GroupCostView>,
}

/// Every MCP server of the instance, for administrators.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct AdminMcpServerView {
    pub server: McpServerView,
    pub owner_id: String,
    pub owner_username: String,
}

/// A model provider as every signed-in account sees it (to choose a model): no address, no key.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct ProviderChoice {
    pub id: String,
    pub name: String,
    /// The models an administrator marked as seeing images (the composer says before sending
    /// when the chosen one does not).
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub vision_models: Vec<String>,
}

/// One model a provider offers (`GET /api/v1/models`).
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct ModelChoice {
    pub id: String,
    /// `provider` (listed by the provider) or `declared` (by an administrator).
    pub source: String,
    /// Marked by an administrator as seeing images: a conversation's images are sent to it.
    /// Absent when false, so the list reads as it did before images.
    #[serde(default, skip_serializing_if = "std::ops::Not::not")]
    pub sees_images: bool,
}

/// A provider with the models it offers (`GET /api/v1/models`).
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct ProviderModels {
    pub provider_id: String,
    pub provider_name: String,
    pub models: Vec<ModelChoice>,
    /// Why the provider's own list is missing (it did not answer, refused the key, ...).
    pub list_error: Option<String>,
}

/// A conversation of the signed-in account.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct ConversationView {
    pub id: String,
    pub title: String,
    pub provider_id: Option<String>,
    pub model: Option<String>,
    /// The conversation's MCP tools switch (the account may also have them on everywhere).
    pub mcp_enabled: bool,
    /// The persona answering in it, if any.
    #[serde(default)]
    pub persona_id: Option<String>,
    /// RFC 3339.
    pub created_at: String,
    /// RFC 3339.
    pub updated_at: String,
}

/// One stored message of a conversation.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct MessageView {
    pub id: String,
    /// `user` or `assistant`.
    pub role: String,
    pub content: String,
    /// The turn the message belongs to (its events carry the same id in their `start`).
    #[serde(default)]
    pub turn_id: Option<String>,
    /// RFC 3339.
    pub created_at: String,
    /// The images and documents the person attached to it.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub files: Vec<FileView>,
}

/// `GET /api/v1/admin/files`: the limits files are held to, and what each account's take.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct FileUsage {
    pub max_upload_bytes: u64,
    pub account_quota_bytes: u64,
    /// Every account, the largest use first.
    pub accounts: Vec<AccountFileUsage>,
}

/// One account's files.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct AccountFileUsage {
    pub account_id: String,
    pub username: String,
    pub files: u64,
    pub bytes: u64,
}

/// An image or a document a person attached (or is about to attach) to a message.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct FileView {
    pub id: String,
    /// The name the person's browser gave.
    pub name: String,
    /// `image` or `document`.
    pub kind: String,
    /// Decided by the server from the bytes (an image after it was scaled: JPEG or PNG).
    pub content_type: String,
    /// Bytes stored.
    pub size: u64,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub width: Option<u32>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub height: Option<u32>,
    /// A document's text, in characters, as the model reads it.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub text_chars: Option<u64>,
    /// The document held more text than the model is given (cut at the cap).
    #[serde(default)]
    pub cut: bool,
    /// Sent with a message (else only uploaded, waiting in the composer).
    pub sent: bool,
    /// `GET` it here (the account's own only).
    pub url: String,
    /// An image's small version.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub thumbnail_url: Option<String>,
}

/// `GET /api/v1/conversations/{id}`.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct ConversationDetail {
    pub conversation: ConversationView,
    pub messages: Vec<MessageView>,
    /// The turn running now, if any (its events are on the stream).
    pub running_turn: Option<String>,
    /// Read the event stream from here (`?after=`): what came before is in `messages`, the
    /// running turn's events come after it.
    #[serde(default)]
    pub events_after: i64,
    /// The timeline of every finished reply, as its turn's stored events built it (the running
    /// turn's comes on the event stream).
    #[serde(default)]
    pub replies: Vec<Reply>,
    /// Files uploaded to the conversation and not sent yet (the composer shows them).
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub pending_files: Vec<FileView>,
    /// The summary sent to the model in place of the oldest messages, if the conversation
    /// grew past its model's context window.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub summary: Option<SummaryView>,
    /// Read a page (`?limit=`): older messages remain before this one (the oldest of the page);
    /// `?before=` it reads them.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub older_messages: Option<String>,
}

/// A summary of a conversation's oldest messages: the model reads it in their place.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct SummaryView {
    /// The last message it covers: it covers this one and all before it.
    pub through_message_id: String,
    /// How many messages it covers.
    pub covered_messages: u64,
    pub content: String,
    pub created_at: String,
}

/// An MCP call waiting for the person's answer, as `GET /api/v1/approvals` and its event stream
/// show it.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct ApprovalCardView {
    pub id: String,
    pub conversation_id: String,
    pub turn_id: String,
    pub server_id: String,
    pub server_label: String,
    /// The tool's name on its server.
    pub tool_name: String,
    /// The name the model used.
    pub model_tool_name: String,
    /// What the server says the tool does (its claim, not a fact).
    pub tool_description: String,
    /// The exact arguments that will be sent (canonical JSON).
    pub arguments_json: String,
    pub created_at_ms: i64,
    /// After this the call expires unanswered.
    pub deadline_ms: i64,
    /// What the server says of the tool (its annotations); absent when it says nothing.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub tool_hints: Option<ToolHints>,
    /// Set when the card is the server's question during the (already allowed) call, not a
    /// call to allow: the form to fill. Answered with `accept` (and the form's values),
    /// `decline` or `cancel`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub question: Option<Box<question::QuestionForm>>,
}

/// What a server says of one of its tools (the tool's `annotations`), as a card shows it: the
/// server's claims about its own tool, never facts, and they allow nothing by themselves. A
/// claim the server leaves out is absent.
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct ToolHints {
    /// A name for people (the tool's `title`, else `annotations.title`), at most
    /// [`ToolHints::MAX_TITLE_CHARS`].
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub title: Option<String>,
    /// `readOnlyHint`: the tool only reads.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub read_only: Option<bool>,
    /// `destructiveHint`: the tool may delete or overwrite.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub destructive: Option<bool>,
    /// `idempotentHint`: calling it again with the same arguments does nothing more.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub idempotent: Option<bool>,
    /// `openWorldHint`: the tool reaches beyond the server (the web, other people).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub open_world: Option<bool>,
}

impl ToolHints {
    /// The longest title kept.
    pub const MAX_TITLE_CHARS: usize = 120;

    /// A tool's title and the hints in its `annotations`, as its server sent them; None when
    /// it says none of them.
    pub fn new(title: Option<&str>, annotations: Option<&serde_json::Value>) -> Option<ToolHints> {
        let annotations = annotations.and_then(serde_json::Value::as_object);
        let claim =
            |key: &str| annotations.and_then(|a| a.get(key)).and_then(serde_json::Value::as_bool);
        let title = title
            .or_else(|| annotations?.get("title")?.as_str())
            .map(|t| t.trim().chars().take(Self::MAX_TITLE_CHARS).collect::<String>())
            .filter(|t| !t.is_empty());
        let hints = ToolHints {
            title,
            read_only: claim("readOnlyHint"),
            destructive: claim("destructiveHint"),
            idempotent: claim("idempotentHint"),
            open_world: claim("openWorldHint"),
        };
        (hints != ToolHints::default()).then_some(hints)
    }
}

/// What a bot is shown of the room (a setting; also part of its card).
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct BotContextSetting {
    /// `calling_message`, `messages_before` or `whole_thread`.
    pub mode: String,
    /// For `messages_before`: 1 to 40 (6 when absent).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub count: Option<i64>,
}

/// Who a bot is: the usual system prompt, a persona's prompt, or its own instructions.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct BotIdentitySetting {
    /// `system_prompt`, `persona` or `instructions`.
    pub source: String,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub persona_id: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub instructions: Option<String>,
}

/// The chat server's account a bot integration speaks as.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct BotAccountView {
    pub id: String,
    pub login: String,
    pub display_name: String,
}

/// A bot's tools: what the owner ticked and what this instance lets through.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct BotToolsView {
    /// What the owner ticked.
    pub ticked: Vec<String>,
    /// What the model is offered: ticked and provided by this instance.
    pub effective: Vec<String>,
    /// Ticked but not provided here: they stay off.
    pub unavailable: Vec<String>,
}

/// A bot integration's card. The API key is never part of it.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct BotCardView {
    pub id: String,
    pub label: String,
    pub address: String,
    pub bot: BotAccountView,
    /// Always true: a key is required, and it is never sent back.
    pub has_key: bool,
    pub provider_id: Option<String>,
    pub model: Option<String>,
    pub context: BotContextSetting,
    pub placement: String,
    pub identity: BotIdentitySetting,
    pub tools: BotToolsView,
    pub mcp: bool,
    /// Present when MCP is ticked: what that means, in plain words.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub mcp_warning: Option<String>,
    pub enabled: bool,
    /// `off`, `needs_model`, `starting`, `running`, `backing_off`, `slowed_down` or `paused`.
    pub state: String,
    /// The state in words.
    pub status: String,
    pub last_error: Option<String>,
    pub missing_permission: Option<String>,
    pub state_changed_at: String,
    pub created_at: String,
}

/// A persona of the signed-in account.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct PersonaView {
    pub id: String,
    pub name: String,
    pub prompt: String,
    pub memory_enabled: bool,
    /// RFC 3339.
    pub created_at: String,
    /// RFC 3339.
    pub updated_at: String,
}

/// Said wherever a bot's MCP box is ticked.
pub const BOT_MCP_WARNING: &str = "With MCP tools ticked, this bot's calls to your MCP servers \
    run without asking you, on your servers, prompted by whoever is in the room.";

/// The tools a bot integration can tick (the composer's, without interactive choices).
pub const BOT_TICKABLE_TOOLS: [&str; 4] = ["web_search", "read_page", "current_date", "reasoning"];

/// One note a persona remembers.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct MemoryNoteView {
    pub id: String,
    pub content: String,
    /// RFC 3339.
    pub created_at: String,
}

/// How one of the app's own tools is described to the model: the app's words and the person's.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct ToolWordingView {
    pub tool: String,
    /// What the app says unless rewritten.
    pub default_description: String,
    /// The person's own wording, if any.
    pub description: Option<String>,
}

/// "Always allow" pressed on a card: the same tool of the same server with the same arguments.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct ConsentGrantView {
    pub id: String,
    pub server_address: String,
    pub tool_name: String,
    pub arguments: serde_json::Value,
    /// RFC 3339.
    pub created_at: String,
}

/// An allow rule the person added: a tool, and per argument `"any"` or `{"exact": value}`.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct ConsentRuleView {
    pub id: String,
    pub server_address: String,
    pub tool_name: String,
    pub arguments: std::collections::BTreeMap<String, serde_json::Value>,
    /// RFC 3339.
    pub created_at: String,
}

/// The account's permission mode with what it remembers (`GET /api/v1/consent`).
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct ConsentView {
    /// `ask`, `rules` or `allow_all`.
    pub mode: String,
    /// Shown beside the "allow all" choice, and whenever it is on.
    pub allow_all_warning: String,
    pub grants: Vec<ConsentGrantView>,
    pub rules: Vec<ConsentRuleView>,
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_register_link_carries_the_address_and_label_encoded_and_nothing_else() {
        let link = register_link("https://mcp.example.org/mcp?team=a&b", "Team & Co");
        assert_eq!(
            link,
            "/settings/tools/mcp/new?address=https%3A%2F%2Fmcp.example.org%2Fmcp%3Fteam%3Da%26b\
             &label=Team%20%26%20Co"
        );
        assert_eq!(
            register_link("https://x.example/", ""),
            "/settings/tools/mcp/new?address=https%3A%2F%2Fx.example%2F"
        );
    }
}

/// What a signed-in person's page needs for voice (`GET /api/v1/speech`).
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct SpeechView {
    /// Whether a recording can be written down (a speech-to-text model is set up or found).
    pub dictation: bool,
    /// Whether replies can be read aloud (a text-to-speech model is set up or found).
    pub read_aloud: bool,
    /// The voice replies are read with: the person's own, else the administrator's.
    pub voice: String,
    /// The person's own choice, if they made one.
    pub own_voice: Option<String>,
    /// Voices to offer (the OpenAI names, and the administrator's voice when it is another).
    pub voices: Vec<String>,
    /// The largest recording accepted, in bytes.
    pub max_recording_bytes: u64,
    /// The longest text read aloud at once, in characters.
    pub max_speech_characters: usize,
}

/// One direction of speech as it is in effect: which provider and model, and whether they were
/// found by detection rather than chosen.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct SpeechChoiceView {
    pub provider_id: String,
    pub provider_name: String,
    pub model: String,
    /// The provider or the model was found by the models the providers list, not chosen.
    pub auto_detected: bool,
}

/// The speech settings as an administrator chose them; `None` is left to detection.
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct SpeechSettingsView {
    pub stt_provider_id: Option<String>,
    pub stt_model: Option<String>,
    pub tts_provider_id: Option<String>,
    pub tts_model: Option<String>,
    pub tts_voice: Option<String>,
}

/// `GET /api/v1/admin/speech`: what was chosen and what is in effect.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct AdminSpeechView {
    pub settings: SpeechSettingsView,
    /// Speech to text in effect; `None`: dictation is unavailable.
    pub transcription: Option<SpeechChoiceView>,
    /// Text to speech in effect; `None`: reading aloud is unavailable.
    pub speech: Option<SpeechChoiceView>,
    /// The voice in effect for people who did not choose one.
    pub voice: String,
    /// Why a chosen setting is not in effect, in words for the administrator (a provider that
    /// was removed, one that lists no speech model).
    pub notes: Vec<String>,
}

/// What `POST /api/v1/import` brought into the account.
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct ImportReport {
    /// What the file was: `llooma` (a conversation exported as JSON) or `chatgpt`.
    pub source: String,
    /// Conversations and messages brought in.
    pub conversations: usize,
    pub messages: usize,
    /// Conversations not brought in, and why.
    pub skipped: Vec<ImportSkipped>,
    /// Messages left out of the conversations brought in (system messages, tools' output).
    pub skipped_messages: usize,
    /// Personas brought in (from an account's archive).
    #[serde(default)]
    pub personas: usize,
}

/// A conversation of a file that was not brought in.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct ImportSkipped {
    pub title: String,
    pub reason: String,
}
