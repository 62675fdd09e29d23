//! Settings → Personas (a name, a prompt, memory on or off, and what the persona remembers),
//! Settings → Prompts (the person's wording of the app's own tools), and the administrators'
//! per-model prompt rewrites.

use axum::Json;
use axum::extract::{Path, State};
use axum::http::StatusCode;
use llooma_core::store::{Persona, PersonaPatch};
use llooma_types::{MemoryNoteView as NoteView, PersonaView, ToolWordingView};
use serde::{Deserialize, Serialize};

use crate::AppState;
use crate::admin::{MAX_PROMPT_BYTES, optional_prompt};
use crate::error::ApiError;
use crate::extract::ApiJson;
use crate::session::{Admin, SignedIn};

const MAX_NAME_CHARS: usize = 80;
/// Longest wording of one app tool, in bytes.
const MAX_DESCRIPTION_BYTES: usize = 2 * 1024;

fn view(p: Persona) -> PersonaView {
    PersonaView {
        id: p.id,
        name: p.name,
        prompt: p.prompt,
        memory_enabled: p.memory_enabled,
        created_at: llooma_core::store::ms_to_rfc3339(p.created_at_ms),
        updated_at: llooma_core::store::ms_to_rfc3339(p.updated_at_ms),
    }
}

#[derive(Deserialize)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct NewPersona {
    name: String,
    #[serde(default)]
    prompt: String,
    #[serde(default)]
    memory_enabled: bool,
}

#[derive(Deserialize)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct PatchPersona {
    name: Option<String>,
    prompt: Option<String>,
    memory_enabled: Option<bool>,
}

fn clean_name(name: &str) -> Result<String, ApiError> {
    let name = name.trim();
    if name.is_empty() || name.chars().count() > MAX_NAME_CHARS {
        return Err(ApiError::bad_request(
            "invalid_name",
            format!("A persona's name has 1 to {MAX_NAME_CHARS} characters."),
        ));
    }
    Ok(name.to_owned())
}

fn clean_prompt(prompt: &str) -> Result<String, ApiError> {
    let prompt = prompt.trim();
    if prompt.len() > MAX_PROMPT_BYTES {
        return Err(ApiError::bad_request(
            "invalid_prompt",
            format!("A persona's prompt has at most {MAX_PROMPT_BYTES} bytes; shorten it."),
        ));
    }
    Ok(prompt.to_owned())
}

fn name_taken(err: llooma_core::store::StoreError) -> ApiError {
    match err {
        llooma_core::store::StoreError::NameTaken => ApiError::Conflict {
            code: "name_taken",
            message: "You already have a persona with that name; choose another.".into(),
        },
        other => other.into(),
    }
}

/// `GET /api/v1/personas`.
pub async fn list(
    State(state): State<AppState>,
    signed_in: SignedIn,
) -> Result<Json<Vec<PersonaView>>, ApiError> {
    Ok(Json(state.app.store.personas(&signed_in.account.id).await?.into_iter().map(view).collect()))
}

/// `POST /api/v1/personas`.
pub async fn create(
    State(state): State<AppState>,
    signed_in: SignedIn,
    ApiJson(body): ApiJson<NewPersona>,
) -> Result<(StatusCode, Json<PersonaView>), ApiError> {
    let name = clean_name(&body.name)?;
    let prompt = clean_prompt(&body.prompt)?;
    let persona = state
        .app
        .store
        .create_persona(&signed_in.account.id, &name, &prompt, body.memory_enabled)
        .await
        .map_err(name_taken)?;
    Ok((StatusCode::CREATED, Json(view(persona))))
}

async fn owned(state: &AppState, signed_in: &SignedIn, id: &str) -> Result<Persona, ApiError> {
    state.app.store.persona(&signed_in.account.id, id).await?.ok_or(ApiError::NotFound)
}

/// `GET /api/v1/personas/{id}`.
pub async fn get(
    State(state): State<AppState>,
    signed_in: SignedIn,
    Path(id): Path<String>,
) -> Result<Json<PersonaView>, ApiError> {
    Ok(Json(view(owned(&state, &signed_in, &id).await?)))
}

/// `PATCH /api/v1/personas/{id}`.
pub async fn patch(
    State(state): State<AppState>,
    signed_in: SignedIn,
    Path(id): Path<String>,
    ApiJson(body): ApiJson<PatchPersona>,
) -> Result<Json<PersonaView>, ApiError> {
    owned(&state, &signed_in, &id).await?;
    let patch = PersonaPatch {
        name: body.name.as_deref().map(clean_name).transpose()?,
        prompt: body.prompt.as_deref().map(clean_prompt).transpose()?,
        memory_enabled: body.memory_enabled,
    };
    state.app.store.update_persona(&signed_in.account.id, &id, patch).await.map_err(name_taken)?;
    Ok(Json(view(owned(&state, &signed_in, &id).await?)))
}

/// `DELETE /api/v1/personas/{id}`: the persona and its memory; conversations keep going
/// without one.
pub async fn delete(
    State(state): State<AppState>,
    signed_in: SignedIn,
    Path(id): Path<String>,
) -> Result<StatusCode, ApiError> {
    state.app.store.delete_persona(&signed_in.account.id, &id).await?;
    Ok(StatusCode::NO_CONTENT)
}

/// `GET /api/v1/personas/{id}/memory`: what the persona remembers.
pub async fn memory(
    State(state): State<AppState>,
    signed_in: SignedIn,
    Path(id): Path<String>,
) -> Result<Json<Vec<NoteView>>, ApiError> {
    owned(&state, &signed_in, &id).await?;
    let notes = state.app.store.memory_notes(&id).await?;
    Ok(Json(
        notes
            .into_iter()
            .map(|n| NoteView {
                id: n.id,
                content: n.content,
                created_at: llooma_core::store::ms_to_rfc3339(n.created_at_ms),
            })
            .collect(),
    ))
}

/// `DELETE /api/v1/personas/{id}/memory/{note}`: the person makes it forget one note.
pub async fn forget(
    State(state): State<AppState>,
    signed_in: SignedIn,
    Path((id, note)): Path<(String, String)>,
) -> Result<StatusCode, ApiError> {
    owned(&state, &signed_in, &id).await?;
    if state.app.store.forget_memory_note(&id, &note).await? {
        Ok(StatusCode::NO_CONTENT)
    } else {
        Err(ApiError::NotFound)
    }
}

/// `GET /api/v1/prompts/tools`: every app tool's wording, the app's and the person's.
pub async fn tool_wordings(
    State(state): State<AppState>,
    signed_in: SignedIn,
) -> Result<Json<Vec<ToolWordingView>>, ApiError> {
    let own: std::collections::BTreeMap<String, String> =
        state.app.store.tool_wordings(&signed_in.account.id).await?.into_iter().collect();
    Ok(Json(
        llooma_core::APP_TOOLS
            .iter()
            .map(|tool| ToolWordingView {
                tool: (*tool).to_owned(),
                default_description: llooma_core::default_description(tool)
                    .unwrap_or_default()
                    .to_owned(),
                description: own.get(*tool).cloned(),
            })
            .collect(),
    ))
}

#[derive(Deserialize)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct WordingRequest {
    /// The new wording; null or empty goes back to the app's.
    description: Option<String>,
}

/// `PUT /api/v1/prompts/tools/{tool}`: rewrite an app tool's wording. An MCP server's tools are
/// described by their server and are not the person's to rewrite.
pub async fn set_tool_wording(
    State(state): State<AppState>,
    signed_in: SignedIn,
    Path(tool): Path<String>,
    ApiJson(body): ApiJson<WordingRequest>,
) -> Result<Json<Vec<ToolWordingView>>, ApiError> {
    if !llooma_core::APP_TOOLS.contains(&tool.as_str()) {
        let message = if tool.starts_with("mcp_") {
            "That is an MCP server's tool: its description comes from its server and is not \
             yours to rewrite here."
                .to_owned()
        } else {
            format!("There is no app tool `{tool}`; these can be reworded: {}.", {
                llooma_core::APP_TOOLS.join(", ")
            })
        };
        return Err(ApiError::bad_request("not_an_app_tool", message));
    }
    let description = body.description.as_deref().map(str::trim).filter(|d| !d.is_empty());
    if description.is_some_and(|d| d.len() > MAX_DESCRIPTION_BYTES) {
        return Err(ApiError::bad_request(
            "invalid_description",
            format!("A tool's wording has at most {MAX_DESCRIPTION_BYTES} bytes; shorten it."),
        ));
    }
    state.app.store.set_tool_wording(&signed_in.account.id, &tool, description).await?;
    tool_wordings(State(state), signed_in).await
}

#[derive(Serialize)]
#[serde(rename_all = "camelCase")]
pub struct ModelPromptView {
    model: String,
    prompt: String,
}

/// `GET /api/v1/admin/providers/{id}/prompts`: the per-model rewrites of a provider.
pub async fn model_prompts(
    State(state): State<AppState>,
    _admin: Admin,
    Path(provider_id): Path<String>,
) -> Result<Json<Vec<ModelPromptView>>, ApiError> {
    state.app.store.provider(&provider_id).await?.ok_or(ApiError::NotFound)?;
    let prompts = state.app.store.model_prompts(&provider_id).await?;
    Ok(Json(prompts.into_iter().map(|(model, prompt)| ModelPromptView { model, prompt }).collect()))
}

#[derive(Deserialize)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct ModelPromptRequest {
    model: String,
    /// The system prompt for this model; empty removes the rewrite.
    prompt: String,
}

/// `PUT /api/v1/admin/providers/{id}/prompts`: set or remove one model's rewrite.
pub async fn set_model_prompt(
    State(state): State<AppState>,
    admin: Admin,
    Path(provider_id): Path<String>,
    ApiJson(body): ApiJson<ModelPromptRequest>,
) -> Result<Json<Vec<ModelPromptView>>, ApiError> {
    state.app.store.provider(&provider_id).await?.ok_or(ApiError::NotFound)?;
    let model = body.model.trim();
    if model.is_empty() || model.len() > 200 {
        return Err(ApiError::bad_request(
            "invalid_model",
            "Name the model the prompt is for (1 to 200 bytes), as the provider spells it.",
        ));
    }
    let prompt = optional_prompt(Some(body.prompt))?.flatten();
    state.app.store.set_model_prompt(&provider_id, model, prompt.as_deref()).await?;
    model_prompts(State(state), admin, Path(provider_id)).await
}
