//! `/api/v1/bots`: Settings → Bot integrations for the signed-in account
//! (`llooma_core::bot_settings`; the polling is `llooma_core::bots`). The API key arrives as a
//! write-only [`Secret`] and is never returned.

use axum::Json;
use axum::extract::{Path, State};
use axum::http::StatusCode;
use llooma_core::bot_settings::{BotChange, NewBot};
use llooma_types::{BotAccountView, BotCardView};
use llooma_vault::Secret;
use serde::{Deserialize, Serialize};

use crate::AppState;
use crate::error::ApiError;
use crate::extract::ApiJson;
use crate::session::SignedIn;

#[derive(Deserialize)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct TestBody {
    address: String,
    api_key: Secret,
}

#[derive(Serialize)]
#[serde(rename_all = "camelCase")]
pub struct TestedBot {
    bot: BotAccountView,
}

/// `POST /api/v1/bots/test`: checks an address and key without saving anything.
pub async fn test(
    State(state): State<AppState>,
    _signed_in: SignedIn,
    ApiJson(body): ApiJson<TestBody>,
) -> Result<Json<TestedBot>, ApiError> {
    Ok(Json(TestedBot { bot: state.app.test_bot(&body.address, &body.api_key).await? }))
}

/// `GET /api/v1/bots`: the account's bot cards.
pub async fn list(
    State(state): State<AppState>,
    signed_in: SignedIn,
) -> Result<Json<Vec<BotCardView>>, ApiError> {
    Ok(Json(state.app.bots(&signed_in.account.id).await?))
}

/// `GET /api/v1/bots/{id}`.
pub async fn get(
    State(state): State<AppState>,
    signed_in: SignedIn,
    Path(id): Path<String>,
) -> Result<Json<BotCardView>, ApiError> {
    Ok(Json(state.app.bot(&signed_in.account.id, &id).await?))
}

/// `POST /api/v1/bots`: checks the connection, then saves the integration (enabled).
pub async fn create(
    State(state): State<AppState>,
    signed_in: SignedIn,
    ApiJson(body): ApiJson<NewBot>,
) -> Result<(StatusCode, Json<BotCardView>), ApiError> {
    Ok((StatusCode::CREATED, Json(state.app.create_bot(&signed_in.account.id, body).await?)))
}

/// `PATCH /api/v1/bots/{id}`: changes settings; a new address or key is checked first.
pub async fn patch(
    State(state): State<AppState>,
    signed_in: SignedIn,
    Path(id): Path<String>,
    ApiJson(body): ApiJson<BotChange>,
) -> Result<Json<BotCardView>, ApiError> {
    Ok(Json(state.app.change_bot(&signed_in.account.id, &id, body).await?))
}

/// `DELETE /api/v1/bots/{id}`: the integration, its ledger and lease go.
pub async fn delete(
    State(state): State<AppState>,
    signed_in: SignedIn,
    Path(id): Path<String>,
) -> Result<StatusCode, ApiError> {
    state.app.delete_bot(&signed_in.account.id, &id).await?;
    Ok(StatusCode::NO_CONTENT)
}
