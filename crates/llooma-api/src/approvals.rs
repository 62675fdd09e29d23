//! Approval cards and remembered consent for the signed-in account (`llooma_core::approvals`).
//!
//! - `GET /api/v1/approvals`: the cards still waiting (what a reloaded page shows);
//! - `GET /api/v1/approvals/events`: server-sent events for every tab and device of the account:
//!   first the waiting cards (`pending`), then `appeared`, `answered`, `expired`, `interrupted`;
//! - `POST /api/v1/approvals/{id}/answer`: the first answer counts; a late one is told which
//!   answer won and when (a server's question is answered with its form, or declined);
//! - `/api/v1/consent...`: the permission mode, "Always allow" grants and allow rules.

use std::collections::BTreeMap;
use std::convert::Infallible;
use std::time::Duration;

use axum::Json;
use axum::extract::{Path, State};
use axum::http::StatusCode;
use axum::response::IntoResponse;
use axum::response::sse::{Event, KeepAlive, Sse};
use futures::{Stream, StreamExt};
use llooma_core::approvals::{AnswerView, CardChoice};
use llooma_types::ConsentView;
use serde::Deserialize;
use serde_json::Value;

use crate::AppState;
use crate::error::ApiError;
use crate::extract::ApiJson;
use crate::session::SignedIn;

/// `GET /api/v1/approvals`.
pub async fn list(
    State(state): State<AppState>,
    signed_in: SignedIn,
) -> Result<impl IntoResponse, ApiError> {
    Ok(Json(state.app.waiting_cards(&signed_in.account.id).await?))
}

/// `GET /api/v1/approvals/events`: the waiting cards, then news of them as it happens.
pub async fn events(
    State(state): State<AppState>,
    signed_in: SignedIn,
) -> Sse<impl Stream<Item = Result<Event, Infallible>>> {
    let session_ended = signed_in.session_ended(&state);
    let news = state.app.card_news(&signed_in.account.id).await;
    let stream = news
        .map(|news| Ok(Event::default().event(news.name).data(news.data_json)))
        .take_until(session_ended);
    Sse::new(stream).keep_alive(KeepAlive::new().interval(Duration::from_secs(15)))
}

#[derive(Deserialize)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct AnswerBody {
    choice: CardChoice,
    /// A question's form, with `accept`: its values by field name.
    #[serde(default)]
    content: Option<serde_json::Map<String, Value>>,
}

/// `POST /api/v1/approvals/{id}/answer` with `{"choice": "allow" | "refuse" | "always_allow"}`
/// for a call, `{"choice": "accept", "content": {...}}`, `{"choice": "decline"}` or
/// `{"choice": "cancel"}` for a server's question.
pub async fn answer(
    State(state): State<AppState>,
    signed_in: SignedIn,
    Path(id): Path<String>,
    ApiJson(body): ApiJson<AnswerBody>,
) -> Result<Json<AnswerView>, ApiError> {
    let (account, session) = (&signed_in.account.id, &signed_in.session.token_hash);
    Ok(Json(state.app.answer_card(account, session, &id, body.choice, body.content).await?))
}

/// `GET /api/v1/consent`.
pub async fn get_consent(
    State(state): State<AppState>,
    signed_in: SignedIn,
) -> Result<Json<ConsentView>, ApiError> {
    Ok(Json(state.app.consent(&signed_in.account.id).await?))
}

#[derive(Deserialize)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct ModeBody {
    mode: String,
}

/// `PATCH /api/v1/consent` with `{"mode": "ask" | "rules" | "allow_all"}`.
pub async fn set_mode(
    State(state): State<AppState>,
    signed_in: SignedIn,
    ApiJson(body): ApiJson<ModeBody>,
) -> Result<Json<ConsentView>, ApiError> {
    Ok(Json(state.app.set_permission_mode(&signed_in.account.id, &body.mode).await?))
}

/// `DELETE /api/v1/consent/grants/{id}`.
pub async fn revoke_grant(
    State(state): State<AppState>,
    signed_in: SignedIn,
    Path(id): Path<String>,
) -> Result<StatusCode, ApiError> {
    state.app.revoke_grant(&signed_in.account.id, &id).await?;
    Ok(StatusCode::NO_CONTENT)
}

#[derive(Deserialize)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct RuleBody {
    server_id: String,
    tool: String,
    /// `{"argument": "any" | {"exact": value}}`; arguments not named make the rule not apply.
    arguments: BTreeMap<String, Value>,
}

/// `POST /api/v1/consent/rules`: an allow rule for one tool of one of the account's servers.
pub async fn add_rule(
    State(state): State<AppState>,
    signed_in: SignedIn,
    ApiJson(body): ApiJson<RuleBody>,
) -> Result<(StatusCode, Json<ConsentView>), ApiError> {
    let account = &signed_in.account.id;
    let view = state.app.add_rule(account, &body.server_id, &body.tool, &body.arguments).await?;
    Ok((StatusCode::CREATED, Json(view)))
}

/// `DELETE /api/v1/consent/rules/{id}`.
pub async fn revoke_rule(
    State(state): State<AppState>,
    signed_in: SignedIn,
    Path(id): Path<String>,
) -> Result<StatusCode, ApiError> {
    state.app.revoke_rule(&signed_in.account.id, &id).await?;
    Ok(StatusCode::NO_CONTENT)
}
