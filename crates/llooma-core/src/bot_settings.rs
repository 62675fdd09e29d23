//! Settings → Bot integrations: an account's bots on chat servers (Chatto today).
//!
//! The API key is write-only: stored sealed to its row, never returned, never logged. The
//! connection is checked before anything is saved (the key is accepted and belongs to a bot).
//! Another account's id is not found. The polling itself is [`crate::bots`].

use llooma_chatto_bot::ChattoError;
use llooma_net::Purpose;
use llooma_store::{BotConnection, BotIntegration, BotSettingsRow};
use llooma_types::{
    BotAccountView as BotAccount, BotCardView as BotCard, BotContextSetting as ContextSetting,
    BotIdentitySetting as IdentitySetting, BotToolsView as ToolsView,
};
use llooma_vault::Secret;
use serde::Deserialize;

use crate::bots::key_context;
use crate::{App, AppError};

const MAX_LABEL_CHARS: usize = 80;
const MAX_INSTRUCTIONS_CHARS: usize = 20_000;
const DEFAULT_CONTEXT_COUNT: i64 = 6;
const MAX_CONTEXT_COUNT: i64 = 40;

/// The tools a bot can tick (the composer's list, without interactive choices).
const TICKABLE_TOOLS: [&str; 4] = llooma_types::BOT_TICKABLE_TOOLS;

/// Said where the MCP box is ticked.
pub const MCP_WARNING: &str = llooma_types::BOT_MCP_WARNING;

/// The app tools a bot's turn can run on this instance: the date and page reading always, web
/// search once an administrator set a search service. (Reasoning is the model's own, not a tool
/// Llooma runs: ticked, it stays off.)
async fn provided_tools(app: &App) -> Result<Vec<&'static str>, AppError> {
    let mut provided = vec![crate::CURRENT_DATE, crate::READ_PAGE];
    if app.store.instance_settings().await?.web_search_url.is_some() {
        provided.push(crate::WEB_SEARCH);
    }
    Ok(provided)
}

/// Which of the ticked tools this instance provides (the others stay off).
fn effective_tools(ticked: &[String], provided: &[&str]) -> Vec<String> {
    ticked.iter().filter(|t| provided.contains(&t.as_str())).cloned().collect()
}

/// A new integration as the person describes it (the body of `POST /api/v1/bots`).
#[derive(Debug, Deserialize)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct NewBot {
    pub label: Option<String>,
    pub address: String,
    pub api_key: Secret,
    pub provider_id: Option<String>,
    pub model: Option<String>,
    pub context: Option<ContextSetting>,
    pub placement: Option<String>,
    pub identity: Option<IdentitySetting>,
    pub tools: Option<Vec<String>>,
    pub mcp: Option<bool>,
    pub enabled: Option<bool>,
}

/// A change to an integration; absent fields stay (the body of `PATCH /api/v1/bots/{id}`).
#[derive(Debug, Deserialize)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct BotChange {
    pub label: Option<String>,
    pub address: Option<String>,
    pub api_key: Option<Secret>,
    /// `null` clears the model.
    #[serde(default, deserialize_with = "some_nullable")]
    pub provider_id: Option<Option<String>>,
    #[serde(default, deserialize_with = "some_nullable")]
    pub model: Option<Option<String>>,
    pub context: Option<ContextSetting>,
    pub placement: Option<String>,
    pub identity: Option<IdentitySetting>,
    pub tools: Option<Vec<String>>,
    pub mcp: Option<bool>,
    pub enabled: Option<bool>,
}

fn some_nullable<'de, D, T>(deserializer: D) -> Result<Option<Option<T>>, D::Error>
where
    D: serde::Deserializer<'de>,
    T: Deserialize<'de>,
{
    Option::<T>::deserialize(deserializer).map(Some)
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

fn clean_label(label: Option<&str>, fallback: &str) -> Result<String, AppError> {
    crate::fields::label(label, || fallback.to_owned(), MAX_LABEL_CHARS)
}

fn clean_address(address: &str) -> Result<String, AppError> {
    let address = address.trim();
    let parsed = url::Url::parse(address).map_err(|e| {
        AppError::invalid(
            "invalid_url",
            format!(
                "`{address}` is not a URL ({e}); write the chat server's address, like \
                 https://chat.example.org"
            ),
        )
    })?;
    if !matches!(parsed.scheme(), "http" | "https") {
        return Err(AppError::invalid(
            "invalid_url",
            "The chat server's address starts with https:// (or http://).",
        ));
    }
    if !parsed.username().is_empty() || parsed.password().is_some() {
        return Err(AppError::invalid(
            "invalid_url",
            "Put no user name or password in the address; the API key goes in its own field.",
        ));
    }
    Ok(parsed.as_str().trim_end_matches('/').to_owned())
}

fn clean_context(context: Option<ContextSetting>) -> Result<(String, i64), AppError> {
    let Some(context) = context else {
        return Ok(("messages_before".to_owned(), DEFAULT_CONTEXT_COUNT));
    };
    match context.mode.as_str() {
        "calling_message" | "whole_thread" => Ok((context.mode, DEFAULT_CONTEXT_COUNT)),
        "messages_before" => {
            let count = context.count.unwrap_or(DEFAULT_CONTEXT_COUNT);
            if !(1..=MAX_CONTEXT_COUNT).contains(&count) {
                return Err(AppError::invalid(
                    "invalid_context",
                    format!("Show between 1 and {MAX_CONTEXT_COUNT} messages before the call."),
                ));
            }
            Ok((context.mode, count))
        }
        other => Err(AppError::invalid(
            "invalid_context",
            format!(
                "`{other}` is not a context mode; use calling_message, messages_before or \
                 whole_thread."
            ),
        )),
    }
}

fn clean_placement(placement: Option<String>) -> Result<String, AppError> {
    let placement = placement.unwrap_or_else(|| "where_asked".to_owned());
    match placement.as_str() {
        "where_asked" | "always_thread" | "always_room" => Ok(placement),
        other => Err(AppError::invalid(
            "invalid_placement",
            format!("`{other}` is not a placement; use where_asked, always_thread or always_room."),
        )),
    }
}

async fn clean_identity(
    app: &App,
    account_id: &str,
    identity: Option<IdentitySetting>,
) -> Result<IdentitySetting, AppError> {
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
                return Err(AppError::invalid(
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
            if app.store.persona(account_id, &persona).await?.is_none() {
                return Err(AppError::invalid(
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
        other => Err(AppError::invalid(
            "invalid_identity",
            format!(
                "`{other}` is not an identity source; use system_prompt, persona or instructions."
            ),
        )),
    }
}

fn clean_tools(tools: Option<Vec<String>>) -> Result<Vec<String>, AppError> {
    let mut tools = tools.unwrap_or_default();
    if let Some(unknown) = tools.iter().find(|t| !TICKABLE_TOOLS.contains(&t.as_str())) {
        return Err(AppError::invalid(
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
    app: &App,
    provider_id: Option<String>,
    model: Option<String>,
) -> Result<(Option<String>, Option<String>), AppError> {
    let model = model.map(|m| m.trim().to_owned()).filter(|m| !m.is_empty());
    if let Some(id) = &provider_id
        && app.store.provider(id).await?.is_none()
    {
        return Err(AppError::invalid("unknown_provider", "There is no such model provider."));
    }
    if model.is_some() && provider_id.is_none() {
        return Err(AppError::invalid(
            "invalid_model",
            "Choose the model's provider too (providerId).",
        ));
    }
    Ok((provider_id, model))
}

/// Checks address and key with the chat server: who the bot is, and that it is a bot.
async fn check(app: &App, address: &str, key: &Secret) -> Result<BotAccount, AppError> {
    if key.expose().trim().is_empty() {
        return Err(AppError::invalid(
            "missing_key",
            "Paste the bot's API key (Chatto shows it once, when the bot is created).",
        ));
    }
    let net = app
        .net(app.outbound.clone(), Purpose::Bot)
        .build()
        .map_err(|e| AppError::Internal(format!("building the chat-server client: {e}")))?;
    match llooma_chatto_bot::check_connection(net, address, Secret::new(key.expose().trim())).await
    {
        Ok(me) => Ok(BotAccount { id: me.id, login: me.login, display_name: me.display_name }),
        Err(err) => Err(connection_error(&err)),
    }
}

fn connection_error(err: &ChattoError) -> AppError {
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
    AppError::Unprocessable { code, message }
}

impl App {
    async fn owned_bot(&self, account_id: &str, id: &str) -> Result<BotIntegration, AppError> {
        self.store.bot_integration(account_id, id).await?.ok_or(AppError::NotFound)
    }

    /// Checks a chat server's address and a bot's key without saving anything: who the bot is.
    pub async fn test_bot(&self, address: &str, api_key: &Secret) -> Result<BotAccount, AppError> {
        let address = clean_address(address)?;
        check(self, &address, api_key).await
    }

    /// The account's bot cards.
    pub async fn bots(&self, account_id: &str) -> Result<Vec<BotCard>, AppError> {
        let bots = self.store.list_bot_integrations(account_id).await?;
        let provided = provided_tools(self).await?;
        Ok(bots.iter().map(|b| card(b, &provided)).collect())
    }

    pub async fn bot(&self, account_id: &str, id: &str) -> Result<BotCard, AppError> {
        Ok(card(&self.owned_bot(account_id, id).await?, &provided_tools(self).await?))
    }

    /// Checks the connection, then saves the integration (enabled unless told otherwise).
    pub async fn create_bot(&self, account_id: &str, body: NewBot) -> Result<BotCard, AppError> {
        let address = clean_address(&body.address)?;
        let (context_mode, context_count) = clean_context(body.context)?;
        let placement = clean_placement(body.placement)?;
        let identity = clean_identity(self, account_id, body.identity).await?;
        let tools = clean_tools(body.tools)?;
        let (provider_id, model) = clean_model(self, body.provider_id, body.model).await?;
        let bot = check(self, &address, &body.api_key).await?;
        let label = clean_label(body.label.as_deref(), &format!("@{}", bot.login))?;
        let id = uuid::Uuid::new_v4().to_string();
        let ciphertext = self
            .vault
            .encrypt(key_context(&id), &Secret::new(body.api_key.expose().trim()))
            .map_err(|e| AppError::Internal(format!("encrypting a bot key: {e}")))?;
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
            self.store.create_bot_integration(&id, account_id, connection, settings).await?;
        tracing::info!(account = %account_id, integration = %created.id, "bot integration added");
        Ok(card(&created, &provided_tools(self).await?))
    }

    /// Changes an integration's settings; a new address or key is checked first. Any change
    /// lifts a pause (the person says they fixed it).
    pub async fn change_bot(
        &self,
        account_id: &str,
        id: &str,
        body: BotChange,
    ) -> Result<BotCard, AppError> {
        let current = self.owned_bot(account_id, id).await?;
        if body.address.is_some() || body.api_key.is_some() {
            let address = clean_address(body.address.as_deref().unwrap_or(&current.address))?;
            let key = match &body.api_key {
                Some(key) => Secret::new(key.expose().trim()),
                None => self
                    .vault
                    .decrypt(key_context(&current.id), &current.api_key_ciphertext)
                    .map_err(|e| {
                    AppError::Internal(format!("the bot's key cannot be read: {e}"))
                })?,
            };
            let bot = check(self, &address, &key).await?;
            let ciphertext = self
                .vault
                .encrypt(key_context(id), &key)
                .map_err(|e| AppError::Internal(format!("encrypting a bot key: {e}")))?;
            self.store
                .update_bot_connection(
                    account_id,
                    id,
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
            Some(identity) => clean_identity(self, account_id, Some(identity)).await?,
            None => IdentitySetting {
                source: current.identity_source.clone(),
                persona_id: current.persona_id.clone(),
                instructions: current.instructions.clone(),
            },
        };
        let (provider_id, model) = clean_model(
            self,
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
        self.store.update_bot_settings(account_id, id, &settings).await?;
        Ok(card(&self.owned_bot(account_id, id).await?, &provided_tools(self).await?))
    }

    /// Removes an integration: its ledger and lease go, its poller stops at the next pass.
    pub async fn delete_bot(&self, account_id: &str, id: &str) -> Result<(), AppError> {
        Ok(self.store.delete_bot_integration(account_id, id).await?)
    }
}
