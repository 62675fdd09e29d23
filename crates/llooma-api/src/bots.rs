//! Settings → Bot integrations: the signed-in account's bots on chat servers (Chatto today).
//!
//! The API key is write-only: stored sealed to its row, never returned, never logged. The
//! connection is checked before anything is saved (the key is accepted and belongs to a bot).
//! Another account's id is answered 404. The polling itself is [`crate::bot_runtime`].

use axum::Json;
use axum::extract::{Path, State};
use axum::http::StatusCode;
use llooma_chatto_bot::ChattoError;
use llooma_net::{NetClient, Purpose};
use llooma_store::{BotConnection, BotIntegration, BotSettingsRow};
use llooma_types::{
    BotAccountView as BotAccount, BotCardView as BotCard, BotContextSetting as ContextSetting,
    BotIdentitySetting as IdentitySetting, BotToolsView as ToolsView,
};
use llooma_vault::{Secret, SecretContext};
use serde::{Deserialize, Serialize};

use crate::AppState;
use crate::error::ApiError;
use crate::extract::ApiJson;
use crate::session::SignedIn;

pub(crate) const TABLE: &str = "bot_integrations";
pub(crate) const KEY_COLUMN: &str = "api_key_ciphertext";
const MAX_LABEL_CHARS: usize = 80;
const MAX_INSTRUCTIONS_CHARS: usize = 20_000;
const DEFAULT_CONTEXT_COUNT: i64 = 6;
const MAX_CONTEXT_COUNT: i64 = 40;

/// The tools a bot can tick (the composer's list, without interactive choices).
pub(crate) const TICKABLE_TOOLS: [&str; 4] = llooma_types::BOT_TICKABLE_TOOLS;

/// Said where the MCP box is ticked.
pub const MCP_WARNING: &str = llooma_types::BOT_MCP_WARNING;

pub(crate) fn key_context(id: &str) -> SecretContext<'_> {
    SecretContext::new(TABLE, KEY_COLUMN, id)
}

/// The app tools a bot's turn can run on this instance: the date and page reading always, web
/// search once an administrator set a search service. (Reasoning is the model's own, not a tool
/// Llooma runs: ticked, it stays off.)
async fn provided_tools(state: &AppState) -> Result<Vec<&'static str>, ApiError> {
    let mut provided = vec![llooma_core::CURRENT_DATE, llooma_core::READ_PAGE];
    if state.store.instance_settings().await?.web_search_url.is_some() {
        provided.push(llooma_core::WEB_SEARCH);
    }
    Ok(provided)
}

/// Which of the ticked tools this instance provides (the others stay off).
pub(crate) fn effective_tools(ticked: &[String], provided: &[&str]) -> Vec<String> {
    ticked.iter().filter(|t| provided.contains(&t.as_str())).cloned().collect()
}

#[derive(Deserialize)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct NewBot {
    label: Option<String>,
    address: String,
    api_key: Secret,
    provider_id: Option<String>,
    model: Option<String>,
    context: Option<ContextSetting>,
    placement: Option<String>,
    identity: Option<IdentitySetting>,
    tools: Option<Vec<String>>,
    mcp: Option<bool>,
    enabled: Option<bool>,
}

#[derive(Deserialize)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct PatchBot {
    label: Option<String>,
    address: Option<String>,
    api_key: Option<Secret>,
    /// `null` clears the model.
    #[serde(default, deserialize_with = "some_nullable")]
    provider_id: Option<Option<String>>,
    #[serde(default, deserialize_with = "some_nullable")]
    model: Option<Option<String>>,
    context: Option<ContextSetting>,
    placement: Option<String>,
    identity: Option<IdentitySetting>,
    tools: Option<Vec<String>>,
    mcp: Option<bool>,
    enabled: Option<bool>,
}

fn some_nullable<'de, D, T>(deserializer: D) -> Result<Option<Option<T>>, D::Error>
where
    D: serde::Deserializer<'de>,
    T: Deserialize<'de>,
{
    Option::<T>::deserialize(deserializer).map(Some)
}

#[derive(Deserialize)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct TestBot {
    address: String,
    api_key: Secret,
}

#[derive(Serialize)]
#[serde(rename_all = "camelCase")]
pub struct TestedBot {
    bot: BotAccount,
}

fn card(b: &BotIntegration, provided: &[&str]) -> BotCard {
    let effective = effective_tools(&b.tools, provided);
    let unavailable = b.tools.iter().filter(|t| !effective.contains(t)).cloned().collect();
    let has_model = b.provider_id.is_some() && b.model.as_deref().is_some_and(|m| !m.is_empty());
    let (state, status) = if !b.enabled {
        ("off", "Switched off.".to_owned())
    } else if b.run_state == "paused" {
        let reason = b.paused_reason.clone().unwrap_or_default();
        ("paused", format!("Paused until you change something: {reason}"))
    } else if !has_model {
        ("needs_model", "Choose a model: the bot does not answer until it has one.".to_owned())
    } else {
        match b.run_state.as_str() {
            "running" => ("running", "Running: answering in its rooms.".to_owned()),
            "backing_off" => (
                "backing_off",
                format!(
                    "Cannot reach the chat server; retrying with growing pauses. {}",
                    b.last_error.clone().unwrap_or_default()
                ),
            ),
            "slowed_down" => (
                "slowed_down",
                "The chat server asked the bot to slow down; it will retry later.".to_owned(),
            ),
            _ => ("starting", "Starting: the first poll is on its way.".to_owned()),
        }
    };
    BotCard {
        id: b.id.clone(),
        label: b.label.clone(),
        address: b.address.clone(),
        bot: BotAccount {
            id: b.bot_user_id.clone(),
            login: b.bot_login.clone(),
            display_name: b.bot_display_name.clone(),
        },
        has_key: true,
        provider_id: b.provider_id.clone(),
        model: b.model.clone(),
        context: ContextSetting {
            mode: b.context_mode.clone(),
            count: (b.context_mode == "messages_before").then_some(b.context_count),
        },
        placement: b.placement.clone(),
        identity: IdentitySetting {
            source: b.identity_source.clone(),
            persona_id: b.persona_id.clone(),
            instructions: b.instructions.clone(),
        },
        tools: ToolsView { ticked: b.tools.clone(), effective, unavailable },
        mcp: b.mcp_ticked,
        mcp_warning: b.mcp_ticked.then(|| MCP_WARNING.to_owned()),
        enabled: b.enabled,
        state: state.to_owned(),
        status,
        last_error: b.last_error.clone(),
        missing_permission: b.missing_permission.clone(),
        state_changed_at: llooma_store::ms_to_rfc3339(b.state_at_ms),
        created_at: llooma_store::ms_to_rfc3339(b.created_at_ms),
    }
}

fn clean_label(label: Option<&str>, fallback: &str) -> Result<String, ApiError> {
    crate::fields::label(label, || fallback.to_owned(), MAX_LABEL_CHARS)
}

fn clean_address(address: &str) -> Result<String, ApiError> {
    let address = address.trim();
    let parsed = url::Url::parse(address).map_err(|e| {
        ApiError::bad_request(
            "invalid_url",
            format!(
                "`{address}` is not a URL ({e}); write the chat server's address, like \
                 https://chat.example.org"
            ),
        )
    })?;
    if !matches!(parsed.scheme(), "http" | "https") {
        return Err(ApiError::bad_request(
            "invalid_url",
            "The chat server's address starts with https:// (or http://).",
        ));
    }
    if !parsed.username().is_empty() || parsed.password().is_some() {
        return Err(ApiError::bad_request(
            "invalid_url",
            "Put no user name or password in the address; the API key goes in its own field.",
        ));
    }
    Ok(parsed.as_str().trim_end_matches('/').to_owned())
}

fn clean_context(context: Option<ContextSetting>) -> Result<(String, i64), ApiError> {
    let Some(context) = context else {
        return Ok(("messages_before".to_owned(), DEFAULT_CONTEXT_COUNT));
    };
    match context.mode.as_str() {
        "calling_message" | "whole_thread" => Ok((context.mode, DEFAULT_CONTEXT_COUNT)),
        "messages_before" => {
            let count = context.count.unwrap_or(DEFAULT_CONTEXT_COUNT);
            if !(1..=MAX_CONTEXT_COUNT).contains(&count) {
                return Err(ApiError::bad_request(
                    "invalid_context",
                    format!("Show between 1 and {MAX_CONTEXT_COUNT} messages before the call."),
                ));
            }
            Ok((context.mode, count))
        }
        other => Err(ApiError::bad_request(
            "invalid_context",
            format!(
                "`{other}` is not a context mode; use calling_message, messages_before or \
                 whole_thread."
            ),
        )),
    }
}

fn clean_placement(placement: Option<String>) -> Result<String, ApiError> {
    let placement = placement.unwrap_or_else(|| "where_asked".to_owned());
    match placement.as_str() {
        "where_asked" | "always_thread" | "always_room" => Ok(placement),
        other => Err(ApiError::bad_request(
            "invalid_placement",
            format!("`{other}` is not a placement; use where_asked, always_thread or always_room."),
        )),
    }
}

async fn clean_identity(
    state: &AppState,
    account_id: &str,
    identity: Option<IdentitySetting>,
) -> Result<IdentitySetting, ApiError> {
    let Some(identity) = identity else {
        return Ok(IdentitySetting {
            source: "system_prompt".into(),
            persona_id: None,
            instructions: None,
        });
    };
    match identity.source.as_str() {
        "system_prompt" => {
            Ok(IdentitySetting { source: identity.source, persona_id: None, instructions: None })
        }
        "instructions" => {
            let text = identity.instructions.as_deref().map(str::trim).unwrap_or_default();
            if text.is_empty() || text.chars().count() > MAX_INSTRUCTIONS_CHARS {
                return Err(ApiError::bad_request(
                    "invalid_identity",
                    format!(
                        "Write the bot's instructions (1 to {MAX_INSTRUCTIONS_CHARS} characters)."
                    ),
                ));
            }
            Ok(IdentitySetting {
                source: identity.source,
                persona_id: None,
                instructions: Some(text.to_owned()),
            })
        }
        "persona" => {
            let persona = identity.persona_id.unwrap_or_default();
            if crate::bot_runtime::persona_prompt(state, account_id, &persona).await?.is_none() {
                return Err(ApiError::bad_request(
                    "unknown_persona",
                    "There is no such persona in your account; choose one of yours.",
                ));
            }
            Ok(IdentitySetting {
                source: identity.source,
                persona_id: Some(persona),
                instructions: None,
            })
        }
        other => Err(ApiError::bad_request(
            "invalid_identity",
            format!(
                "`{other}` is not an identity source; use system_prompt, persona or instructions."
            ),
        )),
    }
}

fn clean_tools(tools: Option<Vec<String>>) -> Result<Vec<String>, ApiError> {
    let mut tools = tools.unwrap_or_default();
    if let Some(unknown) = tools.iter().find(|t| !TICKABLE_TOOLS.contains(&t.as_str())) {
        return Err(ApiError::bad_request(
            "invalid_tools",
            format!(
                "`{unknown}` is not a tool a bot can use; choose among {}.",
                TICKABLE_TOOLS.join(", ")
            ),
        ));
    }
    tools.sort();
    tools.dedup();
    Ok(tools)
}

async fn clean_model(
    state: &AppState,
    provider_id: Option<String>,
    model: Option<String>,
) -> Result<(Option<String>, Option<String>), ApiError> {
    let model = model.map(|m| m.trim().to_owned()).filter(|m| !m.is_empty());
    if let Some(id) = &provider_id
        && state.store.provider(id).await?.is_none()
    {
        return Err(ApiError::bad_request("unknown_provider", "There is no such model provider."));
    }
    if model.is_some() && provider_id.is_none() {
        return Err(ApiError::bad_request(
            "invalid_model",
            "Choose the model's provider too (providerId).",
        ));
    }
    Ok((provider_id, model))
}

/// Checks address and key with the chat server: who the bot is, and that it is a bot.
async fn check(state: &AppState, address: &str, key: &Secret) -> Result<BotAccount, ApiError> {
    if key.expose().trim().is_empty() {
        return Err(ApiError::bad_request(
            "missing_key",
            "Paste the bot's API key (Chatto shows it once, when the bot is created).",
        ));
    }
    let net = NetClient::builder(state.outbound.clone(), Purpose::Bot)
        .build()
        .map_err(|e| ApiError::Internal(format!("building the chat-server client: {e}")))?;
    match llooma_chatto_bot::check_connection(net, address, Secret::new(key.expose().trim())).await
    {
        Ok(me) => Ok(BotAccount { id: me.id, login: me.login, display_name: me.display_name }),
        Err(err) => Err(connection_error(&err)),
    }
}

fn connection_error(err: &ChattoError) -> ApiError {
    let (code, message) = match err {
        ChattoError::NotABot { .. } => ("not_a_bot", err.to_string()),
        ChattoError::BadAddress { .. }
        | ChattoError::AddressNotAllowed { .. }
        | ChattoError::Blocked { .. } => ("address_not_allowed", err.to_string()),
        ChattoError::Unauthenticated { .. } => ("key_refused", err.to_string()),
        ChattoError::Unavailable { .. } => ("chat_server_unreachable", err.to_string()),
        ChattoError::Malformed { .. } => ("chat_server_not_understood", err.to_string()),
        // Other answers would echo what the server said: say what to check instead.
        _ => (
            "chat_server_refused",
            "The chat server refused the connection check; check the address and the key, and \
             that the server runs a supported Chatto version."
                .to_owned(),
        ),
    };
    ApiError::Unprocessable { code, message }
}

async fn owned(
    state: &AppState,
    signed_in: &SignedIn,
    id: &str,
) -> Result<BotIntegration, ApiError> {
    state.store.bot_integration(&signed_in.account.id, id).await?.ok_or(ApiError::NotFound)
}

/// `POST /api/v1/bots/test`: checks an address and key without saving anything.
pub async fn test(
    State(state): State<AppState>,
    _signed_in: SignedIn,
    ApiJson(body): ApiJson<TestBot>,
) -> Result<Json<TestedBot>, ApiError> {
    let address = clean_address(&body.address)?;
    let bot = check(&state, &address, &body.api_key).await?;
    Ok(Json(TestedBot { bot }))
}

/// `GET /api/v1/bots`: the account's bot cards.
pub async fn list(
    State(state): State<AppState>,
    signed_in: SignedIn,
) -> Result<Json<Vec<BotCard>>, ApiError> {
    let bots = state.store.list_bot_integrations(&signed_in.account.id).await?;
    let provided = provided_tools(&state).await?;
    Ok(Json(bots.iter().map(|b| card(b, &provided)).collect()))
}

/// `GET /api/v1/bots/{id}`.
pub async fn get(
    State(state): State<AppState>,
    signed_in: SignedIn,
    Path(id): Path<String>,
) -> Result<Json<BotCard>, ApiError> {
    Ok(Json(card(&owned(&state, &signed_in, &id).await?, &provided_tools(&state).await?)))
}

/// `POST /api/v1/bots`: checks the connection, then saves the integration (enabled).
pub async fn create(
    State(state): State<AppState>,
    signed_in: SignedIn,
    ApiJson(body): ApiJson<NewBot>,
) -> Result<(StatusCode, Json<BotCard>), ApiError> {
    let account_id = signed_in.account.id.clone();
    let address = clean_address(&body.address)?;
    let (context_mode, context_count) = clean_context(body.context)?;
    let placement = clean_placement(body.placement)?;
    let identity = clean_identity(&state, &account_id, body.identity).await?;
    let tools = clean_tools(body.tools)?;
    let (provider_id, model) = clean_model(&state, body.provider_id, body.model).await?;
    let bot = check(&state, &address, &body.api_key).await?;
    let label = clean_label(body.label.as_deref(), &format!("@{}", bot.login))?;
    let id = uuid::Uuid::new_v4().to_string();
    let ciphertext = state
        .vault
        .encrypt(key_context(&id), &Secret::new(body.api_key.expose().trim()))
        .map_err(|e| ApiError::Internal(format!("encrypting a bot key: {e}")))?;
    let settings = BotSettingsRow {
        label,
        provider_id,
        model,
        context_mode,
        context_count,
        placement,
        identity_source: identity.source,
        persona_id: identity.persona_id,
        instructions: identity.instructions,
        tools,
        mcp_ticked: body.mcp.unwrap_or(false),
        enabled: body.enabled.unwrap_or(true),
    };
    let connection = BotConnection {
        address,
        api_key_ciphertext: ciphertext,
        bot_user_id: bot.id,
        bot_login: bot.login,
        bot_display_name: bot.display_name,
    };
    let created =
        state.store.create_bot_integration(&id, &account_id, connection, settings).await?;
    tracing::info!(account = %account_id, integration = %created.id, "bot integration added");
    Ok((StatusCode::CREATED, Json(card(&created, &provided_tools(&state).await?))))
}

/// `PATCH /api/v1/bots/{id}`: changes settings; a new address or key is checked first. Any
/// change lifts a pause (the person says they fixed it).
pub async fn patch(
    State(state): State<AppState>,
    signed_in: SignedIn,
    Path(id): Path<String>,
    ApiJson(body): ApiJson<PatchBot>,
) -> Result<Json<BotCard>, ApiError> {
    let account_id = signed_in.account.id.clone();
    let current = owned(&state, &signed_in, &id).await?;
    if body.address.is_some() || body.api_key.is_some() {
        let address = clean_address(body.address.as_deref().unwrap_or(&current.address))?;
        let key = match &body.api_key {
            Some(key) => Secret::new(key.expose().trim()),
            None => state
                .vault
                .decrypt(key_context(&current.id), &current.api_key_ciphertext)
                .map_err(|e| ApiError::Internal(format!("the bot's key cannot be read: {e}")))?,
        };
        let bot = check(&state, &address, &key).await?;
        let ciphertext = state
            .vault
            .encrypt(key_context(&id), &key)
            .map_err(|e| ApiError::Internal(format!("encrypting a bot key: {e}")))?;
        state
            .store
            .update_bot_connection(
                &account_id,
                &id,
                BotConnection {
                    address,
                    api_key_ciphertext: ciphertext,
                    bot_user_id: bot.id,
                    bot_login: bot.login,
                    bot_display_name: bot.display_name,
                },
            )
            .await?;
    }
    let context = match body.context {
        Some(context) => clean_context(Some(context))?,
        None => (current.context_mode.clone(), current.context_count),
    };
    let identity = match body.identity {
        Some(identity) => clean_identity(&state, &account_id, Some(identity)).await?,
        None => IdentitySetting {
            source: current.identity_source.clone(),
            persona_id: current.persona_id.clone(),
            instructions: current.instructions.clone(),
        },
    };
    let (provider_id, model) = clean_model(
        &state,
        body.provider_id.unwrap_or(current.provider_id.clone()),
        body.model.unwrap_or(current.model.clone()),
    )
    .await?;
    let settings = BotSettingsRow {
        label: clean_label(body.label.as_deref(), &current.label)?,
        provider_id,
        model,
        context_mode: context.0,
        context_count: context.1,
        placement: match body.placement {
            Some(placement) => clean_placement(Some(placement))?,
            None => current.placement.clone(),
        },
        identity_source: identity.source,
        persona_id: identity.persona_id,
        instructions: identity.instructions,
        tools: match body.tools {
            Some(tools) => clean_tools(Some(tools))?,
            None => current.tools.clone(),
        },
        mcp_ticked: body.mcp.unwrap_or(current.mcp_ticked),
        enabled: body.enabled.unwrap_or(current.enabled),
    };
    state.store.update_bot_settings(&account_id, &id, &settings).await?;
    Ok(Json(card(&owned(&state, &signed_in, &id).await?, &provided_tools(&state).await?)))
}

/// `DELETE /api/v1/bots/{id}`: the integration, its ledger and lease go; its poller stops at
/// the next pass.
pub async fn delete(
    State(state): State<AppState>,
    signed_in: SignedIn,
    Path(id): Path<String>,
) -> Result<StatusCode, ApiError> {
    state.store.delete_bot_integration(&signed_in.account.id, &id).await?;
    Ok(StatusCode::NO_CONTENT)
}
