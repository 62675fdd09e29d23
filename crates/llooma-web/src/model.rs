//! What a page is rendered from. The server fills it from the API, renders it, and embeds it in
//! the page as JSON; the browser reads it back and renders the same components from it, so both
//! sides build the same tree.

use llooma_types::{
    AdminMcpServerView, AnnounceCostView, ApprovalCardView, BotCardView, CatalogueEntryView,
    ConsentView, ConversationDetail, ConversationView, InstanceSettingsView, McpServerDetail,
    McpToolSettingsView, MemoryNoteView, PersonaView, PreferencesView, ProviderChoice,
    ProviderView, ToolWordingView,
};
use serde::{Deserialize, Serialize};

/// The signed-in person, as the page needs it.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct Me {
    pub username: String,
    pub display_name: String,
    pub admin: bool,
    /// Sent back as `X-CSRF-Token` on every change the page asks the API for.
    pub csrf_token: String,
}

/// One page and its data.
///
/// Externally tagged (`{"conversation": {...}}`), not tagged inside: the browser reads it through
/// `serde_json::Value` like every answer of the API, so each type has one deserializer there, and
/// an inside tag would add serde's buffering deserializer for every page type.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[allow(
    clippy::large_enum_variant,
    reason = "one value per page rendered, never in bulk (and the sizes differ on wasm32)"
)]
#[serde(rename_all = "camelCase", rename_all_fields = "camelCase")]
pub enum Page {
    /// Not signed in. On a fresh instance it offers to create the administrator.
    SignIn { first_run: bool, registration_open: bool },
    /// The conversation list.
    Home {
        me: Me,
        /// One page, most recently active first.
        conversations: Vec<ConversationView>,
        /// Where the next (older) page starts, when there is one.
        older: Option<String>,
        /// Whether this is the first page.
        newest: bool,
        cards: Vec<ApprovalCardView>,
        /// The server's clock when it rendered (countdowns start from it on both sides).
        now_ms: i64,
        /// No model provider exists yet: nobody can chat, and the page says what to do.
        #[serde(default)]
        no_provider: bool,
    },
    /// One conversation with its composer.
    Conversation {
        me: Me,
        detail: ConversationDetail,
        cards: Vec<ApprovalCardView>,
        providers: Vec<ProviderChoice>,
        /// The account's personas, to choose one for the conversation.
        personas: Vec<PersonaView>,
        /// What `@` and `/` offer: the resources, templates and prompts of active servers.
        attachables: crate::attach::Attachables,
        /// The permission mode lets a card remember "Always allow".
        always_allow: bool,
        now_ms: i64,
        /// The account's conversations for the sidebar: the newest page, and where the next
        /// (older) page starts.
        conversations: Vec<ConversationView>,
        older: Option<String>,
    },
    /// Settings → Tools: the account's MCP servers, tool budget and permission mode.
    SettingsTools {
        me: Me,
        /// Each server with its whole catalogue (the full list and the group switches).
        servers: Vec<McpServerDetail>,
        settings: McpToolSettingsView,
        /// What announce mode would cost and save, measured on this account's catalogue.
        cost: AnnounceCostView,
        /// The permission mode, the rules and the "always allow" grants.
        consent: ConsentView,
        /// The account's preferences (how a new conversation is named).
        #[serde(default)]
        preferences: PreferencesView,
    },
    /// Settings → Bot integrations: the account's bots, and what their settings choose from.
    SettingsBots {
        me: Me,
        bots: Vec<BotCardView>,
        providers: Vec<ProviderChoice>,
        personas: Vec<PersonaView>,
    },
    /// Settings → Personas, each with what it remembers.
    SettingsPersonas { me: Me, personas: Vec<(PersonaView, Vec<MemoryNoteView>)> },
    /// Settings → Prompts: the person's wording of the app's own tools.
    SettingsPrompts { me: Me, wordings: Vec<ToolWordingView> },
    /// Admin → Providers and instance.
    AdminInstance {
        me: Me,
        providers: Vec<ProviderView>,
        settings: InstanceSettingsView,
        files: llooma_types::FileUsage,
        speech: llooma_types::AdminSpeechView,
    },
    /// Admin: what needs doing first, then the sections.
    AdminHome {
        me: Me,
        providers: Vec<ProviderView>,
        settings: InstanceSettingsView,
        servers: Vec<AdminMcpServerView>,
    },
    /// Settings → Tools → Discover: the instance's catalogue, searched and filtered by tag.
    Discover {
        me: Me,
        entries: Vec<CatalogueEntryView>,
        /// Every tag of the catalogue, for the filter.
        tags: Vec<String>,
        query: String,
        tag: String,
        /// Whether this account may add servers (Register says why not otherwise).
        can_add: bool,
    },
    /// Adding a server: from Settings → Tools, a catalogue entry or a registration deeplink.
    AddServer {
        me: Me,
        label: String,
        address: String,
        /// What the link carried that looked like a credential (a `token` parameter, a key in
        /// the address's query), dropped: names only.
        dropped: Vec<String>,
        can_add: bool,
        /// The catalogue entry at this address, if any.
        entry: Option<CatalogueEntryView>,
    },
    /// Admin → Catalogue.
    AdminCatalogue { me: Me, entries: Vec<CatalogueEntryView> },
    /// Settings → Account: who is signed in; deleting the account.
    SettingsAccount { me: Me },
    /// Settings → Usage: the person's usage, spend and limits.
    SettingsUsage { me: Me, report: llooma_types::UsageReport },
    /// Admin → Usage: every account's usage, the prices, the currency and the limits.
    AdminUsage {
        me: Me,
        report: llooma_types::UsageReport,
        prices: Vec<llooma_types::ModelPriceView>,
        providers: Vec<llooma_types::ProviderView>,
        defaults: llooma_types::LimitsView,
        accounts: Vec<(llooma_types::AccountView, llooma_types::AccountLimits)>,
    },
    /// Admin → MCP servers: every server of the instance.
    AdminMcp { me: Me, users_can_add: bool, servers: Vec<AdminMcpServerView> },
    /// Nothing here (or not this account's).
    NotFound { me: Option<Me> },
}

impl Page {
    /// The document title.
    pub fn title(&self) -> String {
        match self {
            Page::SignIn { first_run: true, .. } => "Set up Llooma".to_owned(),
            Page::SignIn { .. } => "Sign in · Llooma".to_owned(),
            Page::Home { .. } => "Conversations · Llooma".to_owned(),
            Page::Conversation { detail, .. } => format!("{} · Llooma", detail.conversation.title),
            Page::SettingsTools { .. } => "Settings → Tools · Llooma".to_owned(),
            Page::SettingsBots { .. } => "Settings → Bot integrations · Llooma".to_owned(),
            Page::SettingsPersonas { .. } => "Settings → Personas · Llooma".to_owned(),
            Page::SettingsPrompts { .. } => "Settings → Prompts · Llooma".to_owned(),
            Page::AdminInstance { .. } => "Admin → Providers and instance · Llooma".to_owned(),
            Page::AdminMcp { .. } => "Admin → MCP servers · Llooma".to_owned(),
            Page::AdminHome { .. } => "Admin · Llooma".to_owned(),
            Page::Discover { .. } => "Settings → Tools → Discover · Llooma".to_owned(),
            Page::AddServer { .. } => "Add an MCP server · Llooma".to_owned(),
            Page::AdminCatalogue { .. } => "Admin → Catalogue · Llooma".to_owned(),
            Page::SettingsUsage { .. } => "Settings → Usage · Llooma".to_owned(),
            Page::SettingsAccount { .. } => "Settings → Account · Llooma".to_owned(),
            Page::AdminUsage { .. } => "Admin → Usage · Llooma".to_owned(),
            Page::NotFound { .. } => "Not found · Llooma".to_owned(),
        }
    }
}
