//! MCP servers of an account (Settings → Tools → MCP servers) and of the instance (for
//! administrators), and the rules that decide which of their tools a turn may use.
//!
//! Adding a server tests the connection first and stores nothing unless the test succeeds; the
//! answer lists the tools found. Listing reads the stored snapshot and never contacts a server.
//! Tokens are write-only: encrypted with the instance secret, bound to the server's row.
//!
//! Consent rules of a changed tool list ("Update tools"): removals apply at once; added or
//! changed tools, and new instructions, wait until the person reviewed them (the review is named
//! by [`tools_digest`]); meanwhile only the tools consented to that the server still offers
//! unchanged stay in use ([`still_consented`]), so no grant outlives its definition.

use std::collections::{BTreeMap, HashMap, HashSet};
use std::sync::Arc;

use llooma_mcp_client::{Snapshot, ToolDef};
use llooma_store::{Account, McpServer, NewMcpServer, Suspension, ToolSettings};
use llooma_tool_naming::{
    Group, GroupSwitches, Limits, NameTable, ServerTools, budget_warning, group_tools,
    select_tools, server_slug, switched_on,
};
use llooma_types::{
    ADD_SERVERS_REFUSED, AdminMcpServerView, AnnounceCostView, GroupCostView, LeftOutTool,
    McpGroupView, McpRefreshReport, McpServerDetail, McpServerView, McpTestReport, McpToolChange,
    McpToolSettingsPatch, McpToolSettingsView, McpToolView, Role, SuspensionView, ToolCostView,
};
use llooma_vault::{Secret, SecretContext};

use crate::{App, AppError};

const TABLE: &str = "mcp_servers";
const TOKEN_COLUMN: &str = "token_ciphertext";
/// The largest tool budget an account may set.
pub const MAX_TOOL_BUDGET: u32 = 1_000;
const MAX_LABEL_CHARS: usize = 60;

/// A server's label as typed, or its address's host.
pub fn clean_label(label: Option<&str>, address: &str) -> Result<String, AppError> {
    let host = || {
        url::Url::parse(address)
            .ok()
            .and_then(|u| u.host_str().map(str::to_owned))
            .unwrap_or_else(|| "server".to_owned())
    };
    crate::fields::label(label, host, MAX_LABEL_CHARS)
}

/// An MCP server's address: http(s), no user name or password in it.
pub fn clean_address(address: &str) -> Result<String, AppError> {
    let address = address.trim();
    let parsed = url::Url::parse(address).map_err(|e| {
        AppError::invalid(
            "invalid_url",
            format!("`{address}` is not a URL ({e}); write it as https://host/path, usually ending in /mcp."),
        )
    })?;
    if !matches!(parsed.scheme(), "http" | "https") {
        return Err(AppError::invalid(
            "invalid_url",
            "Only http:// and https:// addresses are supported (MCP over Streamable HTTP).",
        ));
    }
    if !parsed.username().is_empty() || parsed.password().is_some() {
        return Err(AppError::invalid(
            "invalid_url",
            "Put no user name or password in the address; use the token field instead.",
        ));
    }
    Ok(parsed.to_string())
}

async fn require_can_add(app: &App, caller: &Account) -> Result<(), AppError> {
    if can_add(app, caller).await? {
        return Ok(());
    }
    Err(AppError::Forbidden(ADD_SERVERS_REFUSED.into()))
}

/// Whether the account may add servers (administrators always may).
async fn can_add(app: &App, caller: &Account) -> Result<bool, AppError> {
    Ok(caller.role == Role::Admin || app.store.instance_settings().await?.users_can_add_mcp_servers)
}

/// Names exactly what a review shows: the SHA-256 of each tool's name and definition hash, in
/// name order, then the server's instructions (they reach the model too). What the person
/// reviewed is compared with what would be stored by this value.
pub fn tools_digest(snapshot: &Snapshot) -> String {
    use sha2::Digest;
    let mut tools: Vec<(&str, &str)> =
        snapshot.tools.iter().map(|t| (t.name.as_str(), t.hash.as_str())).collect();
    tools.sort_unstable();
    let mut hasher = sha2::Sha256::new();
    for (name, hash) in tools {
        hasher.update(name.as_bytes());
        hasher.update([0]);
        hasher.update(hash.as_bytes());
        hasher.update([b'\n']);
    }
    hasher.update([0]);
    hasher.update(snapshot.server.instructions.as_deref().unwrap_or_default().as_bytes());
    hex::encode(hasher.finalize())
}

/// What stays in use while a new list waits for review: the consented tools the server still
/// offers with the same definition. Removed tools go at once; changed ones pause, so nothing runs
/// under a definition the person has not seen (and no "Always allow" outlives its tool).
pub fn still_consented(old: &Snapshot, new: &Snapshot) -> Snapshot {
    let offered: std::collections::HashSet<(&str, &str)> =
        new.tools.iter().map(|t| (t.name.as_str(), t.hash.as_str())).collect();
    let mut kept = old.clone();
    kept.tools.retain(|t| offered.contains(&(t.name.as_str(), t.hash.as_str())));
    kept
}

fn tools_changed() -> AppError {
    AppError::Conflict {
        code: "tools_changed",
        message: "The server's tools changed since you reviewed them: test it again, review the \
                  new list, then consent."
            .into(),
    }
}

fn non_empty(token: Option<Secret>) -> Option<Secret> {
    token.filter(|t| !t.expose().trim().is_empty())
}

/// A stored server with its parsed snapshot and group switches.
pub(crate) struct Loaded {
    pub(crate) server: McpServer,
    pub(crate) snapshot: Arc<Snapshot>,
    switches: GroupSwitches,
}

/// The server's stored snapshot, parsed (or as parsed before from the same text).
pub(crate) fn parse_snapshot(app: &App, server: &McpServer) -> Result<Arc<Snapshot>, AppError> {
    app.snapshots.parse(&server.id, &server.snapshot_json).map_err(|e| {
        AppError::Internal(format!("stored snapshot of server {} unreadable: {e}", server.id))
    })
}

pub(crate) async fn load(app: &App, server: McpServer) -> Result<Loaded, AppError> {
    let snapshot = parse_snapshot(app, &server)?;
    let switches = app.store.mcp_group_switches(&server.id).await?.into_iter().collect();
    Ok(Loaded { server, snapshot, switches })
}

/// Every server of the account, with its snapshot and switches.
pub(crate) async fn load_account(app: &App, account_id: &str) -> Result<Vec<Loaded>, AppError> {
    let mut loaded = Vec::new();
    for server in app.store.list_mcp_servers(account_id).await? {
        loaded.push(load(app, server).await?);
    }
    Ok(loaded)
}

/// The names of the tools the model may be offered: every tool but those only a view may call
/// (MCP Apps' `visibility: ["app"]`).
pub(crate) fn tool_names(snapshot: &Snapshot) -> Vec<String> {
    snapshot.tools.iter().filter(|t| for_model(t)).map(|t| t.name.clone()).collect()
}

/// Whether the model may be offered the tool.
pub(crate) fn for_model(tool: &ToolDef) -> bool {
    tool.view.as_ref().is_none_or(|view| view.for_model)
}

/// The server's tools the model may be offered, grouped, and the names of those whose group
/// the owner left on.
fn groups_on(snapshot: &Snapshot, switches: &GroupSwitches) -> (Vec<Group>, HashSet<String>) {
    let groups = group_tools(&tool_names(snapshot));
    let on = switched_on(&groups, switches).into_iter().map(|t| t.tool.to_owned()).collect();
    (groups, on)
}

impl Loaded {
    /// Whether the owner left on the group of a tool the model may be offered. A tool only a
    /// view calls is in no group: it is on with its server.
    pub(crate) fn group_on(&self, tool: &ToolDef) -> bool {
        !for_model(tool) || groups_on(&self.snapshot, &self.switches).1.contains(&tool.name)
    }
}

/// Keeps the documents of a snapshot's views (see migration m0025); a version already kept
/// stays as it is. Takes them by value: together they may weigh hundreds of megabytes, so they
/// leave the snapshot as soon as it arrives and are never copied.
async fn keep_views(
    app: &App,
    server_id: &str,
    documents: Vec<llooma_mcp_client::ViewDocument>,
) -> Result<(), AppError> {
    for document in documents {
        let domains_json = serde_json::to_string(&document.domains)
            .map_err(|e| AppError::Internal(format!("serializing a view's domains: {e}")))?;
        app.store
            .put_mcp_view(llooma_store::McpView {
                server_id: server_id.to_owned(),
                hash: document.hash,
                uri: document.uri,
                html: document.html,
                domains_json,
                prefers_border: document.prefers_border,
            })
            .await?;
    }
    Ok(())
}

/// Model-facing names for every tool of the account (plus, for a test, a server not yet stored).
pub(crate) fn name_table(
    loaded: &[Loaded],
    extra: Option<(&str, &str, Vec<String>)>,
) -> Result<NameTable<String>, AppError> {
    let mut servers: Vec<(String, String, Vec<String>)> = loaded
        .iter()
        .map(|l| (l.server.id.clone(), l.server.slug.clone(), tool_names(&l.snapshot)))
        .collect();
    if let Some((id, slug, tools)) = extra {
        servers.push((id.to_owned(), slug.to_owned(), tools));
    }
    // Ids are primary keys, so a duplicate would be a bug, not bad input.
    NameTable::build(servers).map_err(|e| AppError::Internal(format!("naming tools: {e}")))
}

fn notes_text(snapshot: &Snapshot) -> Vec<String> {
    snapshot.notes.iter().map(ToString::to_string).collect()
}

/// Groups and tools of one server, with what is switched on.
fn catalogue(
    server_id: &str,
    active: bool,
    snapshot: &Snapshot,
    switches: &GroupSwitches,
    names: &NameTable<String>,
) -> (Vec<McpGroupView>, Vec<McpToolView>) {
    let (groups, on) = groups_on(snapshot, switches);
    let group_of: HashMap<&str, &str> = groups
        .iter()
        .flat_map(|g| g.tools.iter().map(move |t| (t.as_str(), g.key.as_str())))
        .collect();
    let group_views = groups
        .iter()
        .map(|g| McpGroupView {
            key: g.key.clone(),
            enabled: switches.is_on(&g.key),
            tool_count: g.tools.len(),
        })
        .collect();
    let id = server_id.to_owned();
    let tools = snapshot
        .tools
        .iter()
        .map(|t: &ToolDef| McpToolView {
            name: t.name.clone(),
            model_name: names.model_name(&id, &t.name).unwrap_or_default().to_owned(),
            group: group_of.get(t.name.as_str()).copied().unwrap_or_default().to_owned(),
            description: t.description.clone(),
            annotations: t.annotations.clone(),
            input_schema: t.input_schema.clone(),
            enabled: active && on.contains(&t.name),
            icon: t.icon.as_ref().map(|_| llooma_types::mcp_icon_path(&id, Some(&t.name))),
            view: t.view.as_ref().is_some_and(|v| v.document_hash.is_some()),
            view_only: !for_model(t),
        })
        .collect();
    (group_views, tools)
}

fn server_view(server: &McpServer, snapshot: &Snapshot) -> McpServerView {
    let groups = group_tools(&tool_names(snapshot));
    McpServerView {
        id: server.id.clone(),
        label: server.label.clone(),
        slug: server.slug.clone(),
        address: server.address.clone(),
        has_token: server.token_ciphertext.is_some(),
        enabled: server.enabled,
        suspended: server.suspension.as_ref().map(|s| SuspensionView {
            reason: s.reason.clone(),
            at: llooma_store::ms_to_rfc3339(s.at_ms),
        }),
        active: server.is_active(),
        server_name: snapshot.server.server_name.clone(),
        protocol_version: snapshot.server.protocol_version.clone(),
        tool_count: snapshot.tools.len(),
        group_count: groups.len(),
        snapshot_taken_at: llooma_store::ms_to_rfc3339(server.snapshot_taken_at_ms),
        snapshot_stale: server.snapshot_stale,
        icon: snapshot.server.icon.as_ref().map(|_| llooma_types::mcp_icon_path(&server.id, None)),
    }
}

fn without_query(address: &str) -> String {
    match url::Url::parse(address) {
        Ok(mut url) => {
            if url.query().is_some() {
                url.set_query(Some("[hidden]"));
            }
            url.set_fragment(None);
            url.to_string()
        }
        Err(_) => address.split(['?', '#']).next().unwrap_or_default().to_owned(),
    }
}

fn token_context(id: &str) -> SecretContext<'_> {
    SecretContext::new(TABLE, TOKEN_COLUMN, id)
}

/// The server's token, decrypted for a call.
pub(crate) fn decrypt_token(app: &App, server: &McpServer) -> Result<Option<Secret>, AppError> {
    server
        .token_ciphertext
        .as_deref()
        .map(|stored| {
            app.vault.decrypt(token_context(&server.id), stored).map_err(|e| {
                AppError::Internal(format!(
                    "the token of MCP server {} cannot be decrypted: {e}",
                    server.id
                ))
            })
        })
        .transpose()
}

/// The new server a person describes: label, address, token.
#[derive(Debug)]
pub struct ServerRequest {
    pub label: Option<String>,
    pub address: String,
    pub token: Option<Secret>,
}

impl App {
    /// What adding would find, storing nothing.
    pub async fn test_mcp_server(
        &self,
        caller: &Account,
        body: ServerRequest,
    ) -> Result<McpTestReport, AppError> {
        require_can_add(self, caller).await?;
        let address = clean_address(&body.address)?;
        let label = clean_label(body.label.as_deref(), &address)?;
        let token = non_empty(body.token);
        let snapshot = self.mcp.snapshot(&address, token.as_ref()).await?;
        let loaded = load_account(self, &caller.id).await?;
        let slug = server_slug(loaded.iter().map(|l| l.server.slug.as_str()), &label);
        let names = name_table(&loaded, Some(("", &slug, tool_names(&snapshot))))?;
        let (groups, mut tools) = catalogue("", true, &snapshot, &GroupSwitches::new(), &names);
        // Nothing is stored yet, so the instance has no icon to serve for it.
        for tool in &mut tools {
            tool.icon = None;
        }
        Ok(McpTestReport {
            protocol_version: snapshot.server.protocol_version.clone(),
            server_name: snapshot.server.server_name.clone(),
            server_version: snapshot.server.server_version.clone(),
            instructions: snapshot.server.instructions.clone(),
            slug,
            tools,
            groups,
            notes: notes_text(&snapshot),
            tools_digest: tools_digest(&snapshot),
        })
    }

    /// Tests the connection, then stores the server and its snapshot: only with the tools the
    /// person reviewed (`reviewed_tools`, a `toolsDigest`) when they say which.
    pub async fn add_mcp_server(
        &self,
        caller: &Account,
        body: ServerRequest,
        reviewed_tools: Option<&str>,
    ) -> Result<McpServerDetail, AppError> {
        require_can_add(self, caller).await?;
        let address = clean_address(&body.address)?;
        let label = clean_label(body.label.as_deref(), &address)?;
        let token = non_empty(body.token);
        let mut snapshot = self.mcp.snapshot(&address, token.as_ref()).await?;
        let documents = std::mem::take(&mut snapshot.view_documents);
        if reviewed_tools.is_some_and(|reviewed| reviewed != tools_digest(&snapshot)) {
            return Err(tools_changed());
        }
        let id = uuid::Uuid::new_v4().to_string();
        let token_ciphertext = token
            .map(|t| self.vault.encrypt(token_context(&id), &t))
            .transpose()
            .map_err(|e| AppError::Internal(format!("encrypting an MCP token: {e}")))?;
        let snapshot_json = serde_json::to_string(&snapshot)
            .map_err(|e| AppError::Internal(format!("serializing a snapshot: {e}")))?;
        let server = self
            .store
            .create_mcp_server(
                NewMcpServer {
                    id,
                    account_id: caller.id.clone(),
                    label: label.clone(),
                    address,
                    token_ciphertext,
                    snapshot_json,
                },
                |taken| server_slug(taken.iter().map(String::as_str), &label),
            )
            .await?;
        keep_views(self, &server.id, documents).await?;
        tracing::info!(account = %caller.id, server = %server.id, tools = snapshot.tools.len(), "MCP server added");
        self.mcp_server_detail(&caller.id, &server.id).await
    }

    /// One server of the account with its whole catalogue.
    pub async fn mcp_server_detail(
        &self,
        account_id: &str,
        id: &str,
    ) -> Result<McpServerDetail, AppError> {
        let loaded = load_account(self, account_id).await?;
        let names = name_table(&loaded, None)?;
        let this = loaded.iter().find(|l| l.server.id == id).ok_or(AppError::NotFound)?;
        Ok(detail_of(this, &names))
    }
}

/// One server's detail, with names from the account's whole table.
fn detail_of(this: &Loaded, names: &NameTable<String>) -> McpServerDetail {
    let (groups, tools) =
        catalogue(&this.server.id, this.server.is_active(), &this.snapshot, &this.switches, names);
    McpServerDetail {
        server: server_view(&this.server, &this.snapshot),
        instructions: this.snapshot.server.instructions.clone(),
        groups,
        tools,
        resources: to_json(&this.snapshot.resources),
        resource_templates: to_json(&this.snapshot.resource_templates),
        prompts: to_json(&this.snapshot.prompts),
        notes: notes_text(&this.snapshot),
    }
}

impl App {
    /// Every server of the account with its whole catalogue, read once (the settings page and the
    /// composer's `@`/`/` menus need them all).
    pub async fn mcp_server_details(
        &self,
        account_id: &str,
    ) -> Result<Vec<McpServerDetail>, AppError> {
        let loaded = load_account(self, account_id).await?;
        let names = name_table(&loaded, None)?;
        Ok(loaded.iter().map(|this| detail_of(this, &names)).collect())
    }

    /// The account's servers as cards, from stored snapshots only.
    pub async fn mcp_servers(&self, account_id: &str) -> Result<Vec<McpServerView>, AppError> {
        let loaded = load_account(self, account_id).await?;
        Ok(loaded.iter().map(|l| server_view(&l.server, &l.snapshot)).collect())
    }

    async fn owned_server(&self, account_id: &str, id: &str) -> Result<McpServer, AppError> {
        self.store.mcp_server(account_id, id).await?.ok_or(AppError::NotFound)
    }

    /// Renames a server, or flips the owner's switch.
    pub async fn change_mcp_server(
        &self,
        account_id: &str,
        id: &str,
        label: Option<&str>,
        enabled: Option<bool>,
    ) -> Result<McpServerView, AppError> {
        let server = self.owned_server(account_id, id).await?;
        if let Some(label) = label {
            let label = clean_label(Some(label), &server.address)?;
            self.store.rename_mcp_server(account_id, id, &label).await?;
        }
        if let Some(enabled) = enabled {
            self.store.set_mcp_server_enabled(account_id, id, enabled).await?;
            // Sessions the MCP client keeps for it between calls are closed.
            self.mcp.forget(id);
        }
        let server = self.owned_server(account_id, id).await?;
        let snapshot = parse_snapshot(self, &server)?;
        Ok(server_view(&server, &snapshot))
    }

    /// Replaces or removes a server's token (write-only).
    pub async fn set_mcp_token(
        &self,
        account_id: &str,
        id: &str,
        token: Option<Secret>,
    ) -> Result<McpServerView, AppError> {
        self.owned_server(account_id, id).await?;
        let ciphertext = non_empty(token)
            .map(|t| self.vault.encrypt(token_context(id), &t))
            .transpose()
            .map_err(|e| AppError::Internal(format!("encrypting an MCP token: {e}")))?;
        self.store.set_mcp_server_token(account_id, id, ciphertext).await?;
        // No session opened with the old token is used again.
        self.mcp.forget(id);
        let server = self.owned_server(account_id, id).await?;
        Ok(server_view(&server, &*parse_snapshot(self, &server)?))
    }

    /// Removes one of the account's servers.
    pub async fn delete_mcp_server(&self, account_id: &str, id: &str) -> Result<(), AppError> {
        self.store.delete_mcp_server(account_id, id).await?;
        self.mcp.forget(id);
        Ok(())
    }

    /// One group's switch.
    pub async fn switch_mcp_group(
        &self,
        account_id: &str,
        id: &str,
        group: &str,
        enabled: bool,
    ) -> Result<McpServerDetail, AppError> {
        let server = self.owned_server(account_id, id).await?;
        let snapshot = parse_snapshot(self, &server)?;
        let known = group_tools(&tool_names(&snapshot)).iter().any(|g| g.key == group);
        if !known {
            return Err(AppError::invalid(
                "unknown_group",
                format!(
                    "This server has no group named `{group}`; update its tools if it changed."
                ),
            ));
        }
        self.store.set_mcp_group_switch(id, group, enabled).await?;
        self.mcp_server_detail(account_id, id).await
    }
}

/// A catalogue list as JSON for the view (these types serialize infallibly).
fn to_json<T: serde::Serialize>(value: &T) -> serde_json::Value {
    serde_json::to_value(value).unwrap_or_default()
}

fn changes(old: &Snapshot, new: &Snapshot) -> (Vec<String>, Vec<String>, Vec<McpToolChange>) {
    let before: BTreeMap<&str, &ToolDef> = old.tools.iter().map(|t| (t.name.as_str(), t)).collect();
    let after: BTreeMap<&str, &ToolDef> = new.tools.iter().map(|t| (t.name.as_str(), t)).collect();
    let added =
        after.keys().filter(|n| !before.contains_key(*n)).map(|n| (*n).to_owned()).collect();
    let removed =
        before.keys().filter(|n| !after.contains_key(*n)).map(|n| (*n).to_owned()).collect();
    let changed = after
        .iter()
        .filter_map(|(name, new_def)| {
            let old_def = before.get(name)?;
            (old_def.hash != new_def.hash).then(|| McpToolChange {
                name: (*name).to_owned(),
                description_changed: old_def.description != new_def.description
                    || old_def.title != new_def.title,
                schema_changed: old_def.input_schema != new_def.input_schema
                    || old_def.output_schema != new_def.output_schema
                    || old_def.annotations != new_def.annotations,
                view_changed: old_def.view != new_def.view,
            })
        })
        .collect();
    (added, removed, changed)
}

impl App {
    /// "Update tools": retakes the snapshot and says what was added, removed and changed.
    /// Removals apply at once; added or changed tools (or new instructions) wait for the person's
    /// review (`reviewed_tools`), and meanwhile only the tools they consented to that the server
    /// still offers unchanged stay in use.
    pub async fn update_mcp_tools(
        &self,
        account_id: &str,
        id: &str,
        reviewed_tools: Option<&str>,
    ) -> Result<McpRefreshReport, AppError> {
        let server = self.owned_server(account_id, id).await?;
        if let Some(suspension) = &server.suspension {
            return Err(AppError::Forbidden(format!(
                "An administrator suspended this server ({}); Llooma does not contact it until the \
             suspension is lifted.",
                suspension.reason
            )));
        }
        let old = parse_snapshot(self, &server)?;
        let token = decrypt_token(self, &server)?;
        let mut new = self.mcp.snapshot(&server.address, token.as_ref()).await?;
        let documents = std::mem::take(&mut new.view_documents);
        let (added, removed, changed) = changes(&old, &new);
        let digest = tools_digest(&new);
        if reviewed_tools.is_some_and(|reviewed| reviewed != digest) {
            return Err(tools_changed());
        }
        let instructions_changed = old.server.instructions != new.server.instructions;
        let needs_review = !added.is_empty() || !changed.is_empty() || instructions_changed;
        let applied = !needs_review || reviewed_tools.is_some();
        let in_use = if applied { new.clone() } else { still_consented(&old, &new) };
        // The review names tools as the model would see them once the new list is in use. Built
        // before anything is stored, so a failure here changes nothing.
        let mut loaded = load_account(self, account_id).await?;
        let this = loaded.iter_mut().find(|l| l.server.id == id).ok_or(AppError::NotFound)?;
        this.snapshot = Arc::new(new.clone());
        let (active, switches) = (this.server.is_active(), this.switches.clone());
        let names = name_table(&loaded, None)?;
        let (groups, tools) = catalogue(id, active, &new, &switches, &names);
        let json = serde_json::to_string(&in_use)
            .map_err(|e| AppError::Internal(format!("serializing a snapshot: {e}")))?;
        // The documents first: a stored snapshot never names a view that is not kept.
        keep_views(self, id, documents).await?;
        // Not applied: stored with the stale mark in the same write, so the card says new tools wait.
        self.store.replace_mcp_snapshot(account_id, id, &json, !applied).await?;
        let server = self.owned_server(account_id, id).await?;
        Ok(McpRefreshReport {
            server: server_view(&server, &in_use),
            added,
            removed,
            changed,
            applied,
            tools_digest: digest,
            instructions: new.server.instructions.clone(),
            instructions_changed,
            tools,
            groups,
        })
    }
}

/// The tool names and switches of the active servers, as the budget sees them.
fn active_tools(loaded: &[Loaded]) -> Vec<ServerTools<String>> {
    loaded
        .iter()
        .filter(|l| l.server.is_active())
        .map(|l| ServerTools {
            server: l.server.id.clone(),
            tools: tool_names(&l.snapshot),
            switches: l.switches.clone(),
        })
        .collect()
}

fn settings_view(
    settings: &ToolSettings,
    loaded: &[Loaded],
    can_add_servers: bool,
) -> McpToolSettingsView {
    let servers = active_tools(loaded);
    let budget = usize::try_from(settings.tool_budget).unwrap_or(usize::MAX);
    let outcome = select_tools(&servers, &Limits { budget, provider_cap: None, builtin_tools: 0 });
    let labels: HashMap<&str, &str> =
        loaded.iter().map(|l| (l.server.id.as_str(), l.server.label.as_str())).collect();
    McpToolSettingsView {
        tool_budget: settings.tool_budget,
        mcp_everywhere: settings.mcp_everywhere,
        announce_mode: settings.announce_mode,
        budget_warning: budget_warning(budget).map(str::to_owned),
        switched_on: outcome.offered.len() + outcome.left_out.len(),
        offered: outcome.offered.len(),
        left_out: outcome
            .left_out
            .iter()
            .map(|c| LeftOutTool {
                server_id: c.server.clone(),
                server_label: labels.get(c.server.as_str()).copied().unwrap_or_default().to_owned(),
                tool: c.tool.clone(),
            })
            .collect(),
        can_add_servers,
    }
}

impl App {
    /// The account's tool budget and switches, and what they leave out.
    pub async fn mcp_tool_settings(
        &self,
        caller: &Account,
    ) -> Result<McpToolSettingsView, AppError> {
        let settings = self.store.tool_settings(&caller.id).await?;
        let loaded = load_account(self, &caller.id).await?;
        Ok(settings_view(&settings, &loaded, can_add(self, caller).await?))
    }

    /// Changes the tool budget and the MCP switches of Settings → Tools.
    pub async fn change_mcp_tool_settings(
        &self,
        caller: &Account,
        patch: McpToolSettingsPatch,
    ) -> Result<McpToolSettingsView, AppError> {
        let mut settings = self.store.tool_settings(&caller.id).await?;
        if let Some(budget) = patch.tool_budget {
            if !(1..=MAX_TOOL_BUDGET).contains(&budget) {
                return Err(AppError::invalid(
                    "invalid_budget",
                    format!("The tool budget is between 1 and {MAX_TOOL_BUDGET}."),
                ));
            }
            settings.tool_budget = budget;
        }
        if let Some(on) = patch.mcp_everywhere {
            settings.mcp_everywhere = on;
        }
        if let Some(on) = patch.announce_mode {
            settings.announce_mode = on;
        }
        self.store.set_tool_settings(&caller.id, &settings).await?;
        let loaded = load_account(self, &caller.id).await?;
        Ok(settings_view(&settings, &loaded, can_add(self, caller).await?))
    }

    /// Every server of the instance with its owner (administrators).
    pub async fn all_mcp_servers(&self) -> Result<Vec<AdminMcpServerView>, AppError> {
        let mut views = Vec::new();
        for (server, owner_username) in self.store.admin_list_mcp_servers().await? {
            let snapshot = parse_snapshot(self, &server)?;
            let mut view = server_view(&server, &snapshot);
            // Hosted servers often carry a key in the query string: it is the owner's, not the
            // administrators'.
            view.address = without_query(&view.address);
            views.push(AdminMcpServerView {
                owner_id: server.account_id.clone(),
                server: view,
                owner_username,
            });
        }
        Ok(views)
    }

    /// Suspends any account's server: the owner sees the reason, and their own switch changes
    /// nothing until an administrator lifts it.
    pub async fn suspend_mcp_server(
        &self,
        admin_id: &str,
        id: &str,
        reason: &str,
    ) -> Result<(), AppError> {
        let reason = reason.trim();
        if reason.is_empty() || reason.chars().count() > 500 {
            return Err(AppError::invalid(
                "invalid_reason",
                "Give the owner a reason (1 to 500 characters): they will see it on the server's card.",
            ));
        }
        let suspension = Suspension {
            reason: reason.to_owned(),
            at_ms: llooma_store::now_ms(),
            by: admin_id.to_owned(),
        };
        self.store.admin_suspend_mcp_server(id, Some(suspension)).await?;
        self.mcp.forget(id);
        tracing::info!(admin = %admin_id, server = %id, "MCP server suspended");
        Ok(())
    }

    /// Lifts a suspension.
    pub async fn lift_mcp_suspension(&self, admin_id: &str, id: &str) -> Result<(), AppError> {
        self.store.admin_suspend_mcp_server(id, None).await?;
        self.mcp.forget(id);
        tracing::info!(admin = %admin_id, server = %id, "MCP server suspension lifted");
        Ok(())
    }

    /// Removes any account's server (administrators).
    pub async fn remove_any_mcp_server(&self, admin_id: &str, id: &str) -> Result<(), AppError> {
        self.store.admin_delete_mcp_server(id).await?;
        self.mcp.forget(id);
        tracing::info!(admin = %admin_id, server = %id, "MCP server removed by an administrator");
        Ok(())
    }
}

/// What a turn of an account may use of its MCP servers: tools (active servers, groups
/// switched on, within the tool budget and what the provider takes), the instructions of the
/// servers they come from, and the resources the active servers list. One read of the
/// account's servers serves all three.
pub(crate) struct Offered {
    pub tools: Vec<crate::McpTool>,
    /// (server label, text) of each server offering a tool.
    pub instructions: Vec<(String, String)>,
    pub resources: Vec<crate::McpResource>,
}

/// Whether the offered tools carry their servers' tokens (a turn calls them; a measurement
/// does not, and should not fail over a token it never uses).
#[derive(Clone, Copy, PartialEq, Eq)]
pub(crate) enum Tokens {
    Decrypt,
    Leave,
}

/// The limits a turn's tools are chosen within.
pub(crate) struct OfferLimits {
    /// The most tools the provider takes in one request.
    pub provider_cap: usize,
    /// The app's own tools the turn offers (they count against the provider's cap).
    pub builtin_tools: usize,
    /// Offer the resource tools too (a conversation; a bot does not read resources).
    pub resources: bool,
}

impl App {
    pub(crate) async fn offered(
        &self,
        account_id: &str,
        settings: &ToolSettings,
        limits: &OfferLimits,
        tokens: Tokens,
    ) -> Result<Offered, AppError> {
        let mut loaded = load_account(self, account_id).await?;
        if tokens == Tokens::Decrypt {
            // A turn about to offer the lists: any its server said have gone stale is retaken
            // first, under the rules of "Update tools" (removals apply, the rest waits).
            let now = llooma_store::now_ms();
            let due: Vec<String> = loaded
                .iter()
                .filter(|l| self.freshness.take_due(&l.server, &l.snapshot, now))
                .map(|l| l.server.id.clone())
                .collect();
            for id in &due {
                if let Err(err) = self.update_mcp_tools(account_id, id, None).await {
                    tracing::warn!(server = %id, error = %err, "retaking a stale tool list failed; the stored one is used");
                }
            }
            if !due.is_empty() {
                loaded = load_account(self, account_id).await?;
            }
        }
        let names = name_table(&loaded, None)?;
        let mut resources = Vec::new();
        if limits.resources {
            for l in loaded.iter().filter(|l| l.server.is_active()) {
                if l.snapshot.resources.is_empty() {
                    continue;
                }
                let token = match tokens {
                    Tokens::Decrypt => decrypt_token(self, &l.server)?,
                    Tokens::Leave => None,
                };
                for r in &l.snapshot.resources {
                    resources.push(crate::McpResource {
                        server_label: l.server.label.clone(),
                        server_address: l.server.address.clone(),
                        token: token.clone(),
                        uri: r.uri.clone(),
                        name: r.name.clone(),
                        description: r.description.clone(),
                        mime_type: r.mime_type.clone(),
                    });
                }
            }
        }
        let servers = active_tools(&loaded);
        // The two resource tools count against the provider's cap like the app's own.
        let own = limits.builtin_tools + if resources.is_empty() { 0 } else { 2 };
        let outcome = select_tools(
            &servers,
            &Limits {
                budget: usize::try_from(settings.tool_budget).unwrap_or(usize::MAX),
                provider_cap: Some(limits.provider_cap),
                builtin_tools: own,
            },
        );
        let mut tools = Vec::new();
        // Each server's token, decrypted once for all its tools.
        let mut server_tokens: std::collections::HashMap<&str, Option<Secret>> =
            std::collections::HashMap::new();
        for candidate in outcome.offered {
            let Some(this) = loaded.iter().find(|l| l.server.id == candidate.server) else {
                continue;
            };
            let token = match server_tokens.get(this.server.id.as_str()) {
                Some(token) => token.clone(),
                None => {
                    let token = match tokens {
                        Tokens::Decrypt => decrypt_token(self, &this.server)?,
                        Tokens::Leave => None,
                    };
                    server_tokens.insert(&this.server.id, token.clone());
                    token
                }
            };
            let Some(index) = this.snapshot.tools.iter().position(|t| t.name == candidate.tool)
            else {
                continue;
            };
            let def = &this.snapshot.tools[index];
            tools.push(crate::McpTool {
                model_name: names
                    .model_name(&this.server.id, &def.name)
                    .unwrap_or_default()
                    .to_owned(),
                server_id: this.server.id.clone(),
                server_label: this.server.label.clone(),
                server_address: this.server.address.clone(),
                token,
                tool_name: def.name.clone(),
                group: candidate.group.clone(),
                description: def.description.clone().unwrap_or_default(),
                input_schema: def.input_schema.clone(),
                definition: crate::engine::mcp::StoredTool::new(Arc::clone(&this.snapshot), index),
                definition_hash: def.hash.clone(),
                hints: llooma_types::ToolHints::new(def.title.as_deref(), def.annotations.as_ref()),
            });
        }
        let offering: std::collections::HashSet<&str> =
            tools.iter().map(|t| t.server_id.as_str()).collect();
        let instructions = loaded
            .iter()
            .filter(|l| offering.contains(l.server.id.as_str()))
            .filter_map(|l| Some((l.server.label.clone(), l.snapshot.server.instructions.clone()?)))
            .collect();
        Ok(Offered { tools, instructions, resources })
    }

    /// What the account's catalogue costs each request with announce mode off and on,
    /// measured on the definitions a turn would send.
    pub async fn announce_cost(&self, account_id: &str) -> Result<AnnounceCostView, AppError> {
        let settings = self.store.tool_settings(account_id).await?;
        let limits = OfferLimits {
            provider_cap: llooma_providers::OPENAI_MAX_TOOLS,
            builtin_tools: 0,
            resources: false,
        };
        let offered = self.offered(account_id, &settings, &limits, Tokens::Leave).await?;
        let cost = crate::announce_cost(&offered.tools);
        let view = |c: crate::ToolCost| ToolCostView {
            tools: c.tools,
            bytes: c.size.bytes,
            estimated_tokens: c.size.estimated_tokens,
        };
        Ok(AnnounceCostView {
            announce_mode: settings.announce_mode,
            every_request_without: view(cost.every_definition),
            every_request_with: view(cost.announced),
            per_group: cost
                .per_group
                .into_iter()
                .map(|(server_label, group, c)| GroupCostView {
                    server_label,
                    group,
                    cost: view(c),
                })
                .collect(),
        })
    }

    /// One of the account's servers that may be asked now: (label, address, token).
    pub(crate) async fn active_server(
        &self,
        account_id: &str,
        server_id: &str,
    ) -> Result<(String, String, Option<Secret>), AppError> {
        let server = self.store.mcp_server(account_id, server_id).await?.ok_or_else(|| {
            AppError::invalid("unknown_mcp_server", "There is no such MCP server in your settings.")
        })?;
        if !server.is_active() {
            return Err(AppError::invalid(
                "mcp_server_off",
                format!("The MCP server {} is switched off or suspended.", server.label),
            ));
        }
        let token = decrypt_token(self, &server)?;
        Ok((server.label, server.address, token))
    }
}

/// A call goes out only if its tool is still in use as the turn saw it: the server active and
/// its stored list holding the tool with the same definition.
impl crate::InUseCheck for App {
    fn still_in_use<'a>(
        &'a self,
        account_id: &'a str,
        server_id: &'a str,
        tool_name: &'a str,
        definition_hash: &'a str,
    ) -> crate::PortFuture<'a, bool> {
        Box::pin(async move {
            let unreadable = |e: &dyn std::fmt::Display| crate::ToolError(e.to_string());
            let Some(server) =
                self.store.mcp_server(account_id, server_id).await.map_err(|e| unreadable(&e))?
            else {
                return Ok(false);
            };
            let snapshot = parse_snapshot(self, &server).map_err(|e| unreadable(&e))?;
            Ok(server.is_active()
                && snapshot.tools.iter().any(|t| t.name == tool_name && t.hash == definition_hash))
        })
    }
}
