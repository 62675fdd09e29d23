//! Administrators only: instance settings, accounts, model providers.

use axum::Json;
use axum::extract::{Path, State};
use axum::http::StatusCode;
use llooma_core::store::{InstanceSettings, InstanceSettingsChange, NewProvider, Provider};
use llooma_types::{
    AccountView, InstanceSettingsPatch, InstanceSettingsView, ProviderChoice, ProviderView,
};
use llooma_vault::{Secret, SecretContext};
use serde::Deserialize;

use crate::AppState;
use crate::error::ApiError;
use crate::extract::ApiJson;
use crate::session::{Admin, account_view};

const PROVIDERS_TABLE: &str = "providers";
const PROVIDER_KEY_COLUMN: &str = "api_key_ciphertext";

fn settings_view(settings: InstanceSettings) -> InstanceSettingsView {
    InstanceSettingsView {
        registration_open: settings.registration_open,
        users_can_add_mcp_servers: settings.users_can_add_mcp_servers,
        web_search_url: settings.web_search_url,
        system_prompt: settings.system_prompt,
        default_provider_id: settings.default_model.as_ref().map(|(p, _)| p.clone()),
        default_model: settings.default_model.map(|(_, m)| m),
        currency: settings.currency,
        context_tokens: settings.context_tokens,
    }
}

/// A context window an administrator wrote, in tokens, within the bounds a model may have.
fn window_tokens(tokens: Option<u32>) -> Result<Option<u32>, ApiError> {
    use llooma_core::context_window::{MAX_WINDOW_TOKENS, MIN_WINDOW_TOKENS};
    match tokens {
        Some(n) if !(MIN_WINDOW_TOKENS..=MAX_WINDOW_TOKENS).contains(&n) => {
            Err(ApiError::bad_request(
                "invalid_context_window",
                format!(
                    "A context window has {MIN_WINDOW_TOKENS} to {MAX_WINDOW_TOKENS} tokens; \
                     write the number the model's documentation gives (e.g. 8192 or 131072)."
                ),
            ))
        }
        other => Ok(other),
    }
}

/// The default model of a patch: both fields or neither; `""` for both clears it; the provider
/// must exist.
async fn default_model(
    state: &AppState,
    patch: &InstanceSettingsPatch,
) -> Result<Option<Option<(String, String)>>, ApiError> {
    let provider = patch.default_provider_id.as_deref().map(str::trim);
    let model = patch.default_model.as_deref().map(str::trim);
    match (provider, model) {
        (None, None) => Ok(None),
        (Some(""), Some("")) => Ok(Some(None)),
        (Some(provider), Some(model)) if !provider.is_empty() && !model.is_empty() => {
            if state.app.store.provider(provider).await?.is_none() {
                return Err(ApiError::bad_request(
                    "unknown_provider",
                    "There is no such model provider; choose one of Admin → Providers.",
                ));
            }
            Ok(Some(Some((provider.to_owned(), model.to_owned()))))
        }
        _ => Err(ApiError::bad_request(
            "invalid_default_model",
            "Give the default model's provider (defaultProviderId) and its name (defaultModel) \
             together, or both empty for no default.",
        )),
    }
}

/// A currency code: three letters (ISO 4217), kept in capitals.
fn currency(code: Option<&str>) -> Result<Option<String>, ApiError> {
    let Some(code) = code.map(str::trim) else { return Ok(None) };
    if code.len() != 3 || !code.chars().all(|c| c.is_ascii_alphabetic()) {
        return Err(ApiError::bad_request(
            "invalid_currency",
            "Write the currency as its three-letter code, such as USD, EUR or CHF.",
        ));
    }
    Ok(Some(code.to_ascii_uppercase()))
}

/// Longest system prompt (default, per model, or a persona's), in bytes.
pub(crate) const MAX_PROMPT_BYTES: usize = 16 * 1024;

/// An empty text means "none"; a longer one than the cap is refused.
pub(crate) fn optional_prompt(text: Option<String>) -> Result<Option<Option<String>>, ApiError> {
    let Some(text) = text else { return Ok(None) };
    let text = text.trim();
    if text.len() > MAX_PROMPT_BYTES {
        return Err(ApiError::bad_request(
            "invalid_prompt",
            format!("A prompt has at most {MAX_PROMPT_BYTES} bytes; shorten it."),
        ));
    }
    Ok(Some((!text.is_empty()).then(|| text.to_owned())))
}

pub async fn get_settings(
    State(state): State<AppState>,
    _admin: Admin,
) -> Result<Json<InstanceSettingsView>, ApiError> {
    Ok(Json(settings_view(state.app.store.instance_settings().await?)))
}

pub async fn patch_settings(
    State(state): State<AppState>,
    Admin(admin): Admin,
    ApiJson(patch): ApiJson<InstanceSettingsPatch>,
) -> Result<Json<InstanceSettingsView>, ApiError> {
    let web_search_url = match patch.web_search_url.as_deref().map(str::trim) {
        None => None,
        Some("") => Some(None),
        Some(address) => {
            let endpoint = state.app.web_search_endpoint(address)?;
            Some(Some(endpoint.to_string()))
        }
    };
    let change = InstanceSettingsChange {
        registration_open: patch.registration_open,
        users_can_add_mcp_servers: patch.users_can_add_mcp_servers,
        web_search_url,
        system_prompt: optional_prompt(patch.system_prompt.clone())?,
        default_model: default_model(&state, &patch).await?,
        currency: currency(patch.currency.as_deref())?,
        default_limits: None,
        context_tokens: window_tokens(patch.context_tokens)?,
    };
    let settings = state.app.store.change_instance_settings(change).await?;
    tracing::info!(
        admin = %admin.account.id,
        registration_open = ?patch.registration_open,
        users_can_add_mcp_servers = ?patch.users_can_add_mcp_servers,
        web_search_changed = patch.web_search_url.is_some(),
        system_prompt_changed = patch.system_prompt.is_some(),
        default_model = ?patch.default_model,
        "instance settings changed"
    );
    Ok(Json(settings_view(settings)))
}

pub async fn list_accounts(
    State(state): State<AppState>,
    _admin: Admin,
) -> Result<Json<Vec<AccountView>>, ApiError> {
    Ok(Json(state.app.store.list_accounts().await?.iter().map(account_view).collect()))
}

fn provider_view(provider: &Provider) -> ProviderView {
    ProviderView {
        id: provider.id.clone(),
        name: provider.name.clone(),
        base_url: provider.base_url.clone(),
        has_key: provider.api_key_ciphertext.is_some(),
        declared_models: provider.declared_models.clone(),
        vision_models: provider.vision_models.clone(),
        context_windows: provider.context_windows.clone(),
        local_network: provider.local_network,
        created_at: llooma_core::store::ms_to_rfc3339(provider.created_at_ms),
    }
}

#[derive(Deserialize)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct NewProviderRequest {
    name: String,
    base_url: String,
    api_key: Option<Secret>,
    /// Models to offer beside those the provider lists.
    #[serde(default)]
    models: Vec<String>,
    /// Runs on this machine or the local network: its origin may reach loopback and private
    /// addresses without `PROVIDER_ALLOWED_ORIGINS`.
    #[serde(default)]
    local_network: bool,
}

#[derive(Deserialize)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct ProviderModelsRequest {
    models: Vec<String>,
}

const MAX_DECLARED_MODELS: usize = 100;

/// Model names as the provider spells them: trimmed, each 1 to 200 bytes, no repeats.
fn clean_models(models: Vec<String>) -> Result<Vec<String>, ApiError> {
    if models.len() > MAX_DECLARED_MODELS {
        return Err(ApiError::bad_request(
            "invalid_models",
            format!("At most {MAX_DECLARED_MODELS} models can be declared for a provider."),
        ));
    }
    let mut clean: Vec<String> = Vec::with_capacity(models.len());
    for model in models {
        let model = model.trim();
        if model.is_empty() || model.len() > 200 {
            return Err(ApiError::bad_request(
                "invalid_models",
                "Each model name has 1 to 200 bytes, spelled as the provider expects it.",
            ));
        }
        if !clean.iter().any(|m| m == model) {
            clean.push(model.to_owned());
        }
    }
    Ok(clean)
}

/// `PUT /api/v1/admin/providers/{id}/models`: the models declared for a provider.
pub async fn set_provider_models(
    State(state): State<AppState>,
    _admin: Admin,
    Path(id): Path<String>,
    ApiJson(body): ApiJson<ProviderModelsRequest>,
) -> Result<Json<ProviderView>, ApiError> {
    let models = clean_models(body.models)?;
    state.app.store.set_provider_models(&id, &models).await?;
    let provider = state.app.store.provider(&id).await?.ok_or(ApiError::NotFound)?;
    Ok(Json(provider_view(&provider)))
}

/// `PUT /api/v1/admin/providers/{id}/vision-models`: the models of the provider that see
/// images (only these are sent a conversation's images).
pub async fn set_provider_vision_models(
    State(state): State<AppState>,
    _admin: Admin,
    Path(id): Path<String>,
    ApiJson(body): ApiJson<ProviderModelsRequest>,
) -> Result<Json<ProviderView>, ApiError> {
    let models = clean_models(body.models)?;
    state.app.store.set_provider_vision_models(&id, &models).await?;
    let provider = state.app.store.provider(&id).await?.ok_or(ApiError::NotFound)?;
    Ok(Json(provider_view(&provider)))
}

#[derive(Deserialize)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct ContextWindowsRequest {
    /// Model name → its context window in tokens; the models not named have none written.
    windows: std::collections::BTreeMap<String, u32>,
}

/// `PUT /api/v1/admin/providers/{id}/context-windows`: the context windows of the provider's
/// models, as the administrator knows them (they come before what the provider says).
pub async fn set_provider_context_windows(
    State(state): State<AppState>,
    _admin: Admin,
    Path(id): Path<String>,
    ApiJson(body): ApiJson<ContextWindowsRequest>,
) -> Result<Json<ProviderView>, ApiError> {
    // The names as models are declared (trimmed, 1 to 200 bytes, at most so many).
    clean_models(body.windows.keys().cloned().collect())?;
    let mut windows = std::collections::BTreeMap::new();
    for (model, tokens) in body.windows {
        windows.insert(model.trim().to_owned(), window_tokens(Some(tokens))?.unwrap_or(tokens));
    }
    state.app.store.set_provider_context_windows(&id, &windows).await?;
    let provider = state.app.store.provider(&id).await?.ok_or(ApiError::NotFound)?;
    Ok(Json(provider_view(&provider)))
}

#[derive(Deserialize)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct ProviderKeyRequest {
    /// The new key, or null to remove it.
    api_key: Option<Secret>,
}

fn encrypt_key(state: &AppState, provider_id: &str, key: &Secret) -> Result<String, ApiError> {
    state
        .app
        .vault
        .encrypt(SecretContext::new(PROVIDERS_TABLE, PROVIDER_KEY_COLUMN, provider_id), key)
        .map_err(|e| ApiError::Internal(format!("encrypting a provider key: {e}")))
}

fn validate_base_url(raw: &str) -> Result<String, ApiError> {
    let parsed = url::Url::parse(raw.trim()).map_err(|e| {
        ApiError::bad_request("invalid_url", format!("The base address is not a valid URL ({e})."))
    })?;
    if !matches!(parsed.scheme(), "http" | "https")
        || !parsed.username().is_empty()
        || parsed.password().is_some()
    {
        return Err(ApiError::bad_request(
            "invalid_url",
            "The base address must be http:// or https:// and carry no user name or password (put the key in its own field).",
        ));
    }
    Ok(parsed.to_string())
}

pub async fn list_providers(
    State(state): State<AppState>,
    _admin: Admin,
) -> Result<Json<Vec<ProviderView>>, ApiError> {
    Ok(Json(state.app.store.list_providers().await?.iter().map(provider_view).collect()))
}

/// `GET /api/v1/providers`: what any signed-in account may choose a model from (names only).
pub async fn provider_choices(
    State(state): State<AppState>,
    _signed_in: crate::session::SignedIn,
) -> Result<Json<Vec<ProviderChoice>>, ApiError> {
    let providers = state.app.store.list_providers().await?;
    Ok(Json(
        providers
            .iter()
            .map(|p| ProviderChoice {
                id: p.id.clone(),
                name: p.name.clone(),
                vision_models: p.vision_models.clone(),
            })
            .collect(),
    ))
}

pub async fn create_provider(
    State(state): State<AppState>,
    _admin: Admin,
    ApiJson(body): ApiJson<NewProviderRequest>,
) -> Result<(StatusCode, Json<ProviderView>), ApiError> {
    let name = body.name.trim().to_owned();
    if name.is_empty() || name.chars().count() > 100 {
        return Err(ApiError::bad_request(
            "invalid_name",
            "A provider name has 1 to 100 characters.",
        ));
    }
    let base_url = validate_base_url(&body.base_url)?;
    state.app.check_provider_address(&base_url, body.local_network)?;
    let id = uuid::Uuid::new_v4().to_string();
    let api_key_ciphertext = match body.api_key.filter(|k| !k.expose().is_empty()) {
        Some(key) => Some(encrypt_key(&state, &id, &key)?),
        None => None,
    };
    let models = clean_models(body.models)?;
    let mut provider = state
        .app
        .store
        .create_provider(NewProvider {
            id,
            name,
            base_url,
            api_key_ciphertext,
            local_network: body.local_network,
        })
        .await?;
    if !models.is_empty() {
        state.app.store.set_provider_models(&provider.id, &models).await?;
        provider.declared_models = models;
    }
    Ok((StatusCode::CREATED, Json(provider_view(&provider))))
}

pub async fn set_provider_key(
    State(state): State<AppState>,
    _admin: Admin,
    Path(id): Path<String>,
    ApiJson(body): ApiJson<ProviderKeyRequest>,
) -> Result<Json<ProviderView>, ApiError> {
    let ciphertext = match body.api_key.filter(|k| !k.expose().is_empty()) {
        Some(key) => Some(encrypt_key(&state, &id, &key)?),
        None => None,
    };
    state.app.store.set_provider_key(&id, ciphertext).await?;
    state.app.forget_provider(&id);
    let provider = state.app.store.provider(&id).await?.ok_or(ApiError::NotFound)?;
    Ok(Json(provider_view(&provider)))
}

pub async fn delete_provider(
    State(state): State<AppState>,
    _admin: Admin,
    Path(id): Path<String>,
) -> Result<StatusCode, ApiError> {
    state.app.store.delete_provider(&id).await?;
    state.app.forget_provider(&id);
    Ok(StatusCode::NO_CONTENT)
}
