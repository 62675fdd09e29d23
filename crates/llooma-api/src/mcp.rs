//! MCP servers: the signed-in account's own (Settings → Tools → MCP servers) and every server of
//! the instance for administrators.
//!
//! Adding a server tests the connection first and stores nothing unless the test succeeds; the
//! answer lists the tools found. Listing reads the stored snapshot and never contacts a server.
//! Tokens are write-only: encrypted with the instance secret, bound to the server's row, and only
//! ever described by `hasToken`.

use std::collections::{BTreeMap, HashMap};

use axum::Json;
use axum::extract::{Path, State};
use axum::http::StatusCode;
use llooma_mcp_client::{McpError, Snapshot, ToolDef};
use llooma_store::{McpServer, NewMcpServer, Suspension, ToolSettings};
use llooma_tool_naming::{
    GroupSwitches, Limits, NameTable, ServerTools, budget_warning, group_tools, select_tools,
    server_slug, switched_on,
};
use llooma_types::{
    ADD_SERVERS_REFUSED, AdminMcpServerView, AnnounceCostView, GroupCostView, LeftOutTool,
    McpGroupView, McpRefreshReport, McpServerDetail, McpServerView, McpTestReport, McpToolChange,
    McpToolSettingsPatch, McpToolSettingsView, McpToolView, Role, SuspensionView, ToolCostView,
};
use llooma_vault::{Secret, SecretContext};
use serde::Deserialize;

use crate::AppState;
use crate::error::ApiError;
use crate::extract::ApiJson;
use crate::session::{Admin, SignedIn};

const TABLE: &str = "mcp_servers";
const TOKEN_COLUMN: &str = "token_ciphertext";
/// The largest tool budget an account may set.
pub const MAX_TOOL_BUDGET: u32 = 1_000;
const MAX_LABEL_CHARS: usize = 60;

#[derive(Deserialize)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct ServerRequest {
    label: Option<String>,
    address: String,
    token: Option<Secret>,
    /// The `toolsDigest` of the test the person reviewed: adding then stores nothing unless the
    /// server still lists exactly those tools. The web interface always sends it.
    reviewed_tools: Option<String>,
}

#[derive(Deserialize, Default)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct RefreshRequest {
    /// The `toolsDigest` of the new list the person reviewed and consents to.
    reviewed_tools: Option<String>,
}

#[derive(Deserialize)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct PatchRequest {
    label: Option<String>,
    enabled: Option<bool>,
}

#[derive(Deserialize)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct TokenRequest {
    /// The new token, or null to remove it.
    token: Option<Secret>,
}

#[derive(Deserialize)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct GroupRequest {
    group: String,
    enabled: bool,
}

#[derive(Deserialize)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct SuspendRequest {
    reason: String,
}

/// How an MCP client error reaches a person: what happened and what to do, never the token.
fn mcp_error(err: McpError) -> ApiError {
    if let McpError::Busy { .. } = err {
        return ApiError::Busy(err.to_string());
    }
    let code = match &err {
        McpError::InvalidUrl { .. } => {
            return ApiError::bad_request("invalid_url", err.to_string());
        }
        McpError::Refused { .. } => "address_refused",
        McpError::Unreachable { .. } => "mcp_unreachable",
        McpError::TokenRefused { .. } => "mcp_token_refused",
        McpError::Timeout { .. } => "mcp_timeout",
        McpError::HttpStatus { .. } => "mcp_http_status",
        McpError::Protocol { .. } => "mcp_protocol",
        McpError::TooLarge { .. } => "mcp_too_large",
        _ => "mcp_error",
    };
    ApiError::Unprocessable { code, message: err.to_string() }
}

pub(crate) fn clean_label(label: Option<&str>, address: &str) -> Result<String, ApiError> {
    let host = || {
        url::Url::parse(address)
            .ok()
            .and_then(|u| u.host_str().map(str::to_owned))
            .unwrap_or_else(|| "server".to_owned())
    };
    crate::fields::label(label, host, MAX_LABEL_CHARS)
}

pub(crate) fn clean_address(address: &str) -> Result<String, ApiError> {
    let address = address.trim();
    let parsed = url::Url::parse(address).map_err(|e| {
        ApiError::bad_request(
            "invalid_url",
            format!("`{address}` is not a URL ({e}); write it as https://host/path, usually ending in /mcp."),
        )
    })?;
    if !matches!(parsed.scheme(), "http" | "https") {
        return Err(ApiError::bad_request(
            "invalid_url",
            "Only http:// and https:// addresses are supported (MCP over Streamable HTTP).",
        ));
    }
    if !parsed.username().is_empty() || parsed.password().is_some() {
        return Err(ApiError::bad_request(
            "invalid_url",
            "Put no user name or password in the address; use the token field instead.",
        ));
    }
    Ok(parsed.to_string())
}

async fn require_can_add(state: &AppState, signed_in: &SignedIn) -> Result<(), ApiError> {
    if can_add(state, signed_in).await? {
        return Ok(());
    }
    Err(ApiError::Forbidden(ADD_SERVERS_REFUSED.into()))
}

/// Whether the account may add servers (administrators always may).
async fn can_add(state: &AppState, signed_in: &SignedIn) -> Result<bool, ApiError> {
    Ok(signed_in.account.role == Role::Admin
        || state.store.instance_settings().await?.users_can_add_mcp_servers)
}

/// Names exactly what a review shows: the SHA-256 of each tool's name and definition hash, in
/// name order, then the server's instructions (they reach the model too). What the person
/// reviewed is compared with what would be stored by this value.
fn tools_digest(snapshot: &Snapshot) -> String {
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
fn still_consented(old: &Snapshot, new: &Snapshot) -> Snapshot {
    let offered: std::collections::HashSet<(&str, &str)> =
        new.tools.iter().map(|t| (t.name.as_str(), t.hash.as_str())).collect();
    let mut kept = old.clone();
    kept.tools.retain(|t| offered.contains(&(t.name.as_str(), t.hash.as_str())));
    kept
}

fn tools_changed() -> ApiError {
    ApiError::Conflict {
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
struct Loaded {
    server: McpServer,
    snapshot: Snapshot,
    switches: GroupSwitches,
}

fn parse_snapshot(server: &McpServer) -> Result<Snapshot, ApiError> {
    serde_json::from_str(&server.snapshot_json).map_err(|e| {
        ApiError::Internal(format!("stored snapshot of server {} unreadable: {e}", server.id))
    })
}

async fn load(state: &AppState, server: McpServer) -> Result<Loaded, ApiError> {
    let snapshot = parse_snapshot(&server)?;
    let switches = state.store.mcp_group_switches(&server.id).await?.into_iter().collect();
    Ok(Loaded { server, snapshot, switches })
}

async fn load_account(state: &AppState, account_id: &str) -> Result<Vec<Loaded>, ApiError> {
    let mut loaded = Vec::new();
    for server in state.store.list_mcp_servers(account_id).await? {
        loaded.push(load(state, server).await?);
    }
    Ok(loaded)
}

fn tool_names(snapshot: &Snapshot) -> Vec<String> {
    snapshot.tools.iter().map(|t| t.name.clone()).collect()
}

/// Model-facing names for every tool of the account (plus, for a test, a server not yet stored).
fn name_table(
    loaded: &[Loaded],
    extra: Option<(&str, &str, Vec<String>)>,
) -> Result<NameTable<String>, ApiError> {
    let mut servers: Vec<(String, String, Vec<String>)> = loaded
        .iter()
        .map(|l| (l.server.id.clone(), l.server.slug.clone(), tool_names(&l.snapshot)))
        .collect();
    if let Some((id, slug, tools)) = extra {
        servers.push((id.to_owned(), slug.to_owned(), tools));
    }
    // Ids are primary keys, so a duplicate would be a bug, not bad input.
    NameTable::build(servers).map_err(|e| ApiError::Internal(format!("naming tools: {e}")))
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
    let groups = group_tools(&tool_names(snapshot));
    let on: std::collections::HashSet<&str> =
        switched_on(&groups, switches).into_iter().map(|t| t.tool).collect();
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
            enabled: active && on.contains(t.name.as_str()),
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

fn decrypt_token(state: &AppState, server: &McpServer) -> Result<Option<Secret>, ApiError> {
    server
        .token_ciphertext
        .as_deref()
        .map(|stored| {
            state.vault.decrypt(token_context(&server.id), stored).map_err(|e| {
                ApiError::Internal(format!(
                    "the token of MCP server {} cannot be decrypted: {e}",
                    server.id
                ))
            })
        })
        .transpose()
}

/// `POST /api/v1/mcp/servers/test`: what adding would find, storing nothing.
pub async fn test_server(
    State(state): State<AppState>,
    signed_in: SignedIn,
    ApiJson(body): ApiJson<ServerRequest>,
) -> Result<Json<McpTestReport>, ApiError> {
    require_can_add(&state, &signed_in).await?;
    let address = clean_address(&body.address)?;
    let label = clean_label(body.label.as_deref(), &address)?;
    let token = non_empty(body.token);
    let snapshot = state.mcp.snapshot(&address, token.as_ref()).await.map_err(mcp_error)?;
    let loaded = load_account(&state, &signed_in.account.id).await?;
    let slug = server_slug(loaded.iter().map(|l| l.server.slug.as_str()), &label);
    let names = name_table(&loaded, Some(("", &slug, tool_names(&snapshot))))?;
    let (groups, tools) = catalogue("", true, &snapshot, &GroupSwitches::new(), &names);
    Ok(Json(McpTestReport {
        protocol_version: snapshot.server.protocol_version.clone(),
        server_name: snapshot.server.server_name.clone(),
        server_version: snapshot.server.server_version.clone(),
        instructions: snapshot.server.instructions.clone(),
        slug,
        tools,
        groups,
        notes: notes_text(&snapshot),
        tools_digest: tools_digest(&snapshot),
    }))
}

/// `POST /api/v1/mcp/servers`: tests the connection, then stores the server and its snapshot.
pub async fn add_server(
    State(state): State<AppState>,
    signed_in: SignedIn,
    ApiJson(body): ApiJson<ServerRequest>,
) -> Result<(StatusCode, Json<McpServerDetail>), ApiError> {
    require_can_add(&state, &signed_in).await?;
    let address = clean_address(&body.address)?;
    let label = clean_label(body.label.as_deref(), &address)?;
    let token = non_empty(body.token);
    let snapshot = state.mcp.snapshot(&address, token.as_ref()).await.map_err(mcp_error)?;
    if body.reviewed_tools.is_some_and(|reviewed| reviewed != tools_digest(&snapshot)) {
        return Err(tools_changed());
    }
    let id = uuid::Uuid::new_v4().to_string();
    let token_ciphertext =
        token
            .map(|t| state.vault.encrypt(token_context(&id), &t))
            .transpose()
            .map_err(|e| ApiError::Internal(format!("encrypting an MCP token: {e}")))?;
    let snapshot_json = serde_json::to_string(&snapshot)
        .map_err(|e| ApiError::Internal(format!("serializing a snapshot: {e}")))?;
    let server = state
        .store
        .create_mcp_server(
            NewMcpServer {
                id,
                account_id: signed_in.account.id.clone(),
                label: label.clone(),
                address,
                token_ciphertext,
                snapshot_json,
            },
            |taken| server_slug(taken.iter().map(String::as_str), &label),
        )
        .await?;
    tracing::info!(account = %signed_in.account.id, server = %server.id, tools = snapshot.tools.len(), "MCP server added");
    let detail = detail(&state, &signed_in.account.id, &server.id).await?;
    Ok((StatusCode::CREATED, Json(detail)))
}

async fn detail(state: &AppState, account_id: &str, id: &str) -> Result<McpServerDetail, ApiError> {
    let loaded = load_account(state, account_id).await?;
    let names = name_table(&loaded, None)?;
    let this = loaded.iter().find(|l| l.server.id == id).ok_or(ApiError::NotFound)?;
    Ok(detail_of(this, &names))
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

/// `GET /api/v1/mcp/servers/details`: every server of the account with its whole catalogue, read
/// once (the settings page and the composer's `@`/`/` menus need them all).
pub async fn list_details(
    State(state): State<AppState>,
    signed_in: SignedIn,
) -> Result<Json<Vec<McpServerDetail>>, ApiError> {
    let loaded = load_account(&state, &signed_in.account.id).await?;
    let names = name_table(&loaded, None)?;
    Ok(Json(loaded.iter().map(|this| detail_of(this, &names)).collect()))
}

/// A catalogue list as JSON for the view (these types serialize infallibly).
fn to_json<T: serde::Serialize>(value: &T) -> serde_json::Value {
    serde_json::to_value(value).unwrap_or_default()
}

/// `GET /api/v1/mcp/servers`: the cards, from stored snapshots only.
pub async fn list_servers(
    State(state): State<AppState>,
    signed_in: SignedIn,
) -> Result<Json<Vec<McpServerView>>, ApiError> {
    let loaded = load_account(&state, &signed_in.account.id).await?;
    Ok(Json(loaded.iter().map(|l| server_view(&l.server, &l.snapshot)).collect()))
}

/// `GET /api/v1/mcp/servers/{id}`: one server with its whole catalogue.
pub async fn get_server(
    State(state): State<AppState>,
    signed_in: SignedIn,
    Path(id): Path<String>,
) -> Result<Json<McpServerDetail>, ApiError> {
    Ok(Json(detail(&state, &signed_in.account.id, &id).await?))
}

async fn owned(state: &AppState, signed_in: &SignedIn, id: &str) -> Result<McpServer, ApiError> {
    state.store.mcp_server(&signed_in.account.id, id).await?.ok_or(ApiError::NotFound)
}

/// `PATCH /api/v1/mcp/servers/{id}`: label and the owner's switch.
pub async fn patch_server(
    State(state): State<AppState>,
    signed_in: SignedIn,
    Path(id): Path<String>,
    ApiJson(body): ApiJson<PatchRequest>,
) -> Result<Json<McpServerView>, ApiError> {
    let server = owned(&state, &signed_in, &id).await?;
    if let Some(label) = body.label {
        let label = clean_label(Some(&label), &server.address)?;
        state.store.rename_mcp_server(&signed_in.account.id, &id, &label).await?;
    }
    if let Some(enabled) = body.enabled {
        state.store.set_mcp_server_enabled(&signed_in.account.id, &id, enabled).await?;
        // Sessions the MCP client keeps for it between calls are closed.
        state.mcp.forget(&id);
    }
    let server = owned(&state, &signed_in, &id).await?;
    let snapshot = parse_snapshot(&server)?;
    Ok(Json(server_view(&server, &snapshot)))
}

/// `PUT /api/v1/mcp/servers/{id}/token`: replaces or removes the token (write-only).
pub async fn set_token(
    State(state): State<AppState>,
    signed_in: SignedIn,
    Path(id): Path<String>,
    ApiJson(body): ApiJson<TokenRequest>,
) -> Result<Json<McpServerView>, ApiError> {
    owned(&state, &signed_in, &id).await?;
    let ciphertext = non_empty(body.token)
        .map(|t| state.vault.encrypt(token_context(&id), &t))
        .transpose()
        .map_err(|e| ApiError::Internal(format!("encrypting an MCP token: {e}")))?;
    state.store.set_mcp_server_token(&signed_in.account.id, &id, ciphertext).await?;
    // No session opened with the old token is used again.
    state.mcp.forget(&id);
    let server = owned(&state, &signed_in, &id).await?;
    Ok(Json(server_view(&server, &parse_snapshot(&server)?)))
}

/// `DELETE /api/v1/mcp/servers/{id}`.
pub async fn delete_server(
    State(state): State<AppState>,
    signed_in: SignedIn,
    Path(id): Path<String>,
) -> Result<StatusCode, ApiError> {
    state.store.delete_mcp_server(&signed_in.account.id, &id).await?;
    state.mcp.forget(&id);
    Ok(StatusCode::NO_CONTENT)
}

/// `PUT /api/v1/mcp/servers/{id}/groups`: one group's switch.
pub async fn set_group(
    State(state): State<AppState>,
    signed_in: SignedIn,
    Path(id): Path<String>,
    ApiJson(body): ApiJson<GroupRequest>,
) -> Result<Json<McpServerDetail>, ApiError> {
    let server = owned(&state, &signed_in, &id).await?;
    let snapshot = parse_snapshot(&server)?;
    let known = group_tools(&tool_names(&snapshot)).iter().any(|g| g.key == body.group);
    if !known {
        return Err(ApiError::bad_request(
            "unknown_group",
            format!(
                "This server has no group named `{}`; update its tools if it changed.",
                body.group
            ),
        ));
    }
    state.store.set_mcp_group_switch(&id, &body.group, body.enabled).await?;
    Ok(Json(detail(&state, &signed_in.account.id, &id).await?))
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
            })
        })
        .collect();
    (added, removed, changed)
}

/// `POST /api/v1/mcp/servers/{id}/refresh` ("Update tools"): retakes the snapshot and says what
/// was added, removed and changed. Removals apply at once; added or changed tools (or new
/// instructions) wait for the person's review (`reviewedTools`), and meanwhile only the tools
/// they consented to that the server still offers unchanged stay in use.
pub async fn refresh_server(
    State(state): State<AppState>,
    signed_in: SignedIn,
    Path(id): Path<String>,
    body: axum::body::Bytes,
) -> Result<Json<McpRefreshReport>, ApiError> {
    // The body is optional: without it, removals apply and anything new waits for a review.
    let body: RefreshRequest = if body.iter().all(u8::is_ascii_whitespace) {
        RefreshRequest::default()
    } else {
        serde_json::from_slice(&body).map_err(|e| {
            ApiError::bad_request(
                "invalid_fields",
                format!("Send {{}} or {{\"reviewedTools\": \"<toolsDigest>\"}}: {e}"),
            )
        })?
    };
    let server = owned(&state, &signed_in, &id).await?;
    if let Some(suspension) = &server.suspension {
        return Err(ApiError::Forbidden(format!(
            "An administrator suspended this server ({}); Llooma does not contact it until the \
             suspension is lifted.",
            suspension.reason
        )));
    }
    let old = parse_snapshot(&server)?;
    let token = decrypt_token(&state, &server)?;
    let new = state.mcp.snapshot(&server.address, token.as_ref()).await.map_err(mcp_error)?;
    let (added, removed, changed) = changes(&old, &new);
    let digest = tools_digest(&new);
    if body.reviewed_tools.as_ref().is_some_and(|reviewed| *reviewed != digest) {
        return Err(tools_changed());
    }
    let instructions_changed = old.server.instructions != new.server.instructions;
    let needs_review = !added.is_empty() || !changed.is_empty() || instructions_changed;
    let applied = !needs_review || body.reviewed_tools.is_some();
    let in_use = if applied { new.clone() } else { still_consented(&old, &new) };
    // The review names tools as the model would see them once the new list is in use. Built
    // before anything is stored, so a failure here changes nothing.
    let mut loaded = load_account(&state, &signed_in.account.id).await?;
    let this = loaded.iter_mut().find(|l| l.server.id == id).ok_or(ApiError::NotFound)?;
    this.snapshot = new.clone();
    let (active, switches) = (this.server.is_active(), this.switches.clone());
    let names = name_table(&loaded, None)?;
    let (groups, tools) = catalogue(&id, active, &new, &switches, &names);
    let json = serde_json::to_string(&in_use)
        .map_err(|e| ApiError::Internal(format!("serializing a snapshot: {e}")))?;
    // Not applied: stored with the stale mark in the same write, so the card says new tools wait.
    state.store.replace_mcp_snapshot(&signed_in.account.id, &id, &json, !applied).await?;
    let server = owned(&state, &signed_in, &id).await?;
    Ok(Json(McpRefreshReport {
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
    }))
}

fn settings_view(
    settings: &ToolSettings,
    loaded: &[Loaded],
    can_add_servers: bool,
) -> McpToolSettingsView {
    let servers: Vec<ServerTools<String>> = loaded
        .iter()
        .filter(|l| l.server.is_active())
        .map(|l| ServerTools {
            server: l.server.id.clone(),
            tools: tool_names(&l.snapshot),
            switches: l.switches.clone(),
        })
        .collect();
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

/// `GET /api/v1/mcp/settings`: budget, switches, and what they leave out.
pub async fn get_settings(
    State(state): State<AppState>,
    signed_in: SignedIn,
) -> Result<Json<McpToolSettingsView>, ApiError> {
    let settings = state.store.tool_settings(&signed_in.account.id).await?;
    let loaded = load_account(&state, &signed_in.account.id).await?;
    Ok(Json(settings_view(&settings, &loaded, can_add(&state, &signed_in).await?)))
}

/// `PATCH /api/v1/mcp/settings`.
pub async fn patch_settings(
    State(state): State<AppState>,
    signed_in: SignedIn,
    ApiJson(patch): ApiJson<McpToolSettingsPatch>,
) -> Result<Json<McpToolSettingsView>, ApiError> {
    let mut settings = state.store.tool_settings(&signed_in.account.id).await?;
    if let Some(budget) = patch.tool_budget {
        if !(1..=MAX_TOOL_BUDGET).contains(&budget) {
            return Err(ApiError::bad_request(
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
    state.store.set_tool_settings(&signed_in.account.id, &settings).await?;
    let loaded = load_account(&state, &signed_in.account.id).await?;
    Ok(Json(settings_view(&settings, &loaded, can_add(&state, &signed_in).await?)))
}

/// `GET /api/v1/admin/mcp/servers`: every server of the instance with its owner.
pub async fn admin_list(
    State(state): State<AppState>,
    _admin: Admin,
) -> Result<Json<Vec<AdminMcpServerView>>, ApiError> {
    let mut views = Vec::new();
    for (server, owner_username) in state.store.admin_list_mcp_servers().await? {
        let snapshot = parse_snapshot(&server)?;
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
    Ok(Json(views))
}

/// `POST /api/v1/admin/mcp/servers/{id}/suspend`: the owner sees the reason, and their own
/// switch changes nothing until an administrator lifts it.
pub async fn admin_suspend(
    State(state): State<AppState>,
    Admin(admin): Admin,
    Path(id): Path<String>,
    ApiJson(body): ApiJson<SuspendRequest>,
) -> Result<StatusCode, ApiError> {
    let reason = body.reason.trim();
    if reason.is_empty() || reason.chars().count() > 500 {
        return Err(ApiError::bad_request(
            "invalid_reason",
            "Give the owner a reason (1 to 500 characters): they will see it on the server's card.",
        ));
    }
    let suspension = Suspension {
        reason: reason.to_owned(),
        at_ms: llooma_store::now_ms(),
        by: admin.account.id.clone(),
    };
    state.store.admin_suspend_mcp_server(&id, Some(suspension)).await?;
    state.mcp.forget(&id);
    tracing::info!(admin = %admin.account.id, server = %id, "MCP server suspended");
    Ok(StatusCode::NO_CONTENT)
}

/// `DELETE /api/v1/admin/mcp/servers/{id}/suspend`: lifts a suspension.
pub async fn admin_unsuspend(
    State(state): State<AppState>,
    Admin(admin): Admin,
    Path(id): Path<String>,
) -> Result<StatusCode, ApiError> {
    state.store.admin_suspend_mcp_server(&id, None).await?;
    state.mcp.forget(&id);
    tracing::info!(admin = %admin.account.id, server = %id, "MCP server suspension lifted");
    Ok(StatusCode::NO_CONTENT)
}

/// `DELETE /api/v1/admin/mcp/servers/{id}`: removes any account's server.
pub async fn admin_delete(
    State(state): State<AppState>,
    Admin(admin): Admin,
    Path(id): Path<String>,
) -> Result<StatusCode, ApiError> {
    state.store.admin_delete_mcp_server(&id).await?;
    state.mcp.forget(&id);
    tracing::info!(admin = %admin.account.id, server = %id, "MCP server removed by an administrator");
    Ok(StatusCode::NO_CONTENT)
}

/// The MCP tools a turn of this account offers: active servers, groups switched on, within the
/// tool budget and what the provider takes (`provider_cap`, the app's own tool counted).
///
/// Beside them, the instructions of the servers they come from, as (label, text): one read of
/// the account's servers serves both.
pub(crate) async fn offered_tools(
    state: &AppState,
    account_id: &str,
    provider_cap: usize,
    builtin_tools: usize,
) -> Result<(Vec<llooma_core::McpTool>, Vec<(String, String)>), ApiError> {
    select_offered(state, account_id, provider_cap, builtin_tools, Tokens::Decrypt).await
}

/// Whether the offered tools carry their servers' tokens (a turn calls them; a measurement
/// does not, and should not fail over a token it never uses).
#[derive(Clone, Copy, PartialEq, Eq)]
enum Tokens {
    Decrypt,
    Leave,
}

async fn select_offered(
    state: &AppState,
    account_id: &str,
    provider_cap: usize,
    builtin_tools: usize,
    tokens: Tokens,
) -> Result<(Vec<llooma_core::McpTool>, Vec<(String, String)>), ApiError> {
    let loaded = load_account(state, account_id).await?;
    let names = name_table(&loaded, None)?;
    let settings = state.store.tool_settings(account_id).await?;
    let servers: Vec<ServerTools<String>> = loaded
        .iter()
        .filter(|l| l.server.is_active())
        .map(|l| ServerTools {
            server: l.server.id.clone(),
            tools: tool_names(&l.snapshot),
            switches: l.switches.clone(),
        })
        .collect();
    let limits = Limits {
        budget: usize::try_from(settings.tool_budget).unwrap_or(usize::MAX),
        provider_cap: Some(provider_cap),
        builtin_tools,
    };
    let outcome = select_tools(&servers, &limits);
    let mut tools = Vec::new();
    for candidate in outcome.offered {
        let Some(this) = loaded.iter().find(|l| l.server.id == candidate.server) else { continue };
        let Some(def) = this.snapshot.tools.iter().find(|t| t.name == candidate.tool) else {
            continue;
        };
        tools.push(llooma_core::McpTool {
            model_name: names.model_name(&this.server.id, &def.name).unwrap_or_default().to_owned(),
            server_id: this.server.id.clone(),
            server_label: this.server.label.clone(),
            server_address: this.server.address.clone(),
            token: match tokens {
                Tokens::Decrypt => decrypt_token(state, &this.server)?,
                Tokens::Leave => None,
            },
            tool_name: def.name.clone(),
            group: candidate.group.clone(),
            description: def.description.clone().unwrap_or_default(),
            input_schema: def.input_schema.clone(),
            definition_hash: def.hash.clone(),
            read_only_hint: def
                .annotations
                .as_ref()
                .and_then(|a| a.get("readOnlyHint"))
                .and_then(serde_json::Value::as_bool)
                .unwrap_or(false),
        });
    }
    let offering: std::collections::HashSet<&str> =
        tools.iter().map(|t| t.server_id.as_str()).collect();
    let instructions = loaded
        .iter()
        .filter(|l| offering.contains(l.server.id.as_str()))
        .filter_map(|l| Some((l.server.label.clone(), l.snapshot.server.instructions.clone()?)))
        .collect();
    Ok((tools, instructions))
}

/// `GET /api/v1/mcp/announce-cost`: what the account's catalogue costs each request with
/// announce mode off and on, measured on the definitions a turn would send.
pub async fn announce_cost(
    State(state): State<AppState>,
    signed_in: SignedIn,
) -> Result<Json<AnnounceCostView>, ApiError> {
    let account = &signed_in.account.id;
    let (tools, _) =
        select_offered(&state, account, llooma_providers::OPENAI_MAX_TOOLS, 0, Tokens::Leave)
            .await?;
    let cost = llooma_core::announce_cost(&tools);
    let view = |c: llooma_core::ToolCost| ToolCostView {
        tools: c.tools,
        bytes: c.size.bytes,
        estimated_tokens: c.size.estimated_tokens,
    };
    let settings = state.store.tool_settings(&signed_in.account.id).await?;
    Ok(Json(AnnounceCostView {
        announce_mode: settings.announce_mode,
        every_request_without: view(cost.every_definition),
        every_request_with: view(cost.announced),
        per_group: cost
            .per_group
            .into_iter()
            .map(|(server_label, group, c)| GroupCostView { server_label, group, cost: view(c) })
            .collect(),
    }))
}

/// The resources the account's active servers list in their snapshots, for
/// `mcp_resource_list` / `mcp_resource_read` (no network: the snapshot says what there is).
pub(crate) async fn offered_resources(
    state: &AppState,
    account_id: &str,
) -> Result<Vec<llooma_core::McpResource>, ApiError> {
    let mut resources = Vec::new();
    for loaded in load_account(state, account_id).await? {
        if !loaded.server.is_active() || loaded.snapshot.resources.is_empty() {
            continue;
        }
        let token = decrypt_token(state, &loaded.server)?;
        for r in &loaded.snapshot.resources {
            resources.push(llooma_core::McpResource {
                server_label: loaded.server.label.clone(),
                server_address: loaded.server.address.clone(),
                token: token.clone(),
                uri: r.uri.clone(),
                name: r.name.clone(),
                description: r.description.clone(),
                mime_type: r.mime_type.clone(),
            });
        }
    }
    Ok(resources)
}

/// A call goes out only if its tool is still in use as the turn saw it: the server active and
/// its stored list holding the tool with the same definition.
impl llooma_core::InUseCheck for AppState {
    fn still_in_use<'a>(
        &'a self,
        account_id: &'a str,
        server_id: &'a str,
        tool_name: &'a str,
        definition_hash: &'a str,
    ) -> llooma_core::PortFuture<'a, bool> {
        Box::pin(async move {
            let unreadable = |e: String| llooma_core::ToolError(e);
            let Some(server) = self
                .store
                .mcp_server(account_id, server_id)
                .await
                .map_err(|e| unreadable(e.to_string()))?
            else {
                return Ok(false);
            };
            let snapshot = parse_snapshot(&server).map_err(|e| unreadable(e.to_string()))?;
            Ok(server.is_active()
                && snapshot.tools.iter().any(|t| t.name == tool_name && t.hash == definition_hash))
        })
    }
}

/// One of the account's servers that may be asked now: (label, address, token).
pub(crate) async fn active_server(
    state: &AppState,
    account_id: &str,
    server_id: &str,
) -> Result<(String, String, Option<Secret>), ApiError> {
    let server = state.store.mcp_server(account_id, server_id).await?.ok_or_else(|| {
        ApiError::bad_request("unknown_mcp_server", "There is no such MCP server in your settings.")
    })?;
    if !server.is_active() {
        return Err(ApiError::bad_request(
            "mcp_server_off",
            format!("The MCP server {} is switched off or suspended.", server.label),
        ));
    }
    let token = decrypt_token(state, &server)?;
    Ok((server.label, server.address, token))
}
