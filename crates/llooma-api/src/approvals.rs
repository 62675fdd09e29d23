//! Approval cards and remembered consent for the signed-in account.
//!
//! - `GET /api/v1/approvals`: the cards still waiting (what a reloaded page shows);
//! - `GET /api/v1/approvals/events`: server-sent events for every tab and device of the account:
//!   first the waiting cards (`pending`), then `appeared`, `answered`, `expired`, `interrupted`;
//! - `POST /api/v1/approvals/{id}/answer`: the first answer counts; a late one is told which
//!   answer won and when;
//! - `/api/v1/consent...`: the permission mode, "Always allow" grants and allow rules.

use std::collections::BTreeMap;
use std::convert::Infallible;
use std::time::Duration;

use axum::Json;
use axum::extract::{Path, State};
use axum::http::StatusCode;
use axum::response::sse::{Event, KeepAlive, Sse};
use futures::{Stream, StreamExt};
use llooma_approval_broker::{AnswerChoice, AnswerResult, ApprovalCard, BrokerEvent, CallState};
use llooma_policy::consent::{ALLOW_ALL_WARNING, ArgConstraint, PermissionMode};
use llooma_store::NewRule;
use llooma_types::{ConsentGrantView as GrantView, ConsentRuleView as RuleView, ConsentView};
use serde::{Deserialize, Serialize};
use serde_json::{Value, json};
use sha2::{Digest, Sha256};
use tokio::sync::broadcast::error::RecvError;

use crate::AppState;
use crate::error::ApiError;
use crate::extract::ApiJson;
use crate::session::SignedIn;

/// A session's public name on answers: derived from its (secret) token hash, not reversible to
/// it, so "answered by" can be shown to other tabs without handing them anything usable.
pub fn public_session_id(token_hash: &str) -> String {
    let digest = Sha256::digest(format!("llooma-session-id:{token_hash}").as_bytes());
    format!("s-{}", &hex::encode(digest)[..16])
}

/// `GET /api/v1/approvals`.
pub async fn list(
    State(state): State<AppState>,
    signed_in: SignedIn,
) -> Result<Json<Vec<ApprovalCard>>, ApiError> {
    let pending = state
        .broker
        .pending_for_account(&signed_in.account.id)
        .await
        .map_err(|e| ApiError::Internal(format!("listing approvals: {e}")))?;
    Ok(Json(pending.iter().map(|call| call.card()).collect()))
}

async fn pending_event(state: &AppState, account_id: &str) -> Event {
    match state.broker.pending_for_account(account_id).await {
        Ok(calls) => {
            let cards: Vec<ApprovalCard> = calls.iter().map(|c| c.card()).collect();
            Event::default()
                .event("pending")
                .data(json!({"type": "pending", "cards": cards}).to_string())
        }
        Err(err) => {
            tracing::warn!(error = %err, "listing pending approvals for a stream failed");
            Event::default().event("error").data(
                json!({"type": "error", "message": "The waiting cards could not be read; reconnecting will retry."})
                    .to_string(),
            )
        }
    }
}

fn broker_event(event: &BrokerEvent) -> Event {
    let name = match event {
        BrokerEvent::Appeared { .. } => "appeared",
        BrokerEvent::Answered { .. } => "answered",
        BrokerEvent::Expired { .. } => "expired",
        BrokerEvent::Interrupted { .. } => "interrupted",
    };
    Event::default().event(name).data(serde_json::to_string(event).unwrap_or_default())
}

/// `GET /api/v1/approvals/events`: subscribes first, then sends the waiting cards, so nothing
/// that happens in between is missed. A tab that falls behind gets the whole list again.
pub async fn events(
    State(state): State<AppState>,
    signed_in: SignedIn,
) -> Sse<impl Stream<Item = Result<Event, Infallible>>> {
    let account_id = signed_in.account.id.clone();
    let session_ended = signed_in.session_ended(&state);
    let receiver = state.broker.subscribe(&account_id);
    let first = pending_event(&state, &account_id).await;
    let stopping = state.stopping.clone();
    let stream = futures::stream::unfold(
        (Some(first), receiver, stopping, state, account_id),
        |(first, mut receiver, mut stopping, state, account_id)| async move {
            if let Some(event) = first {
                return Some((Ok(event), (None, receiver, stopping, state, account_id)));
            }
            let received = tokio::select! {
                received = receiver.recv() => received,
                _ = stopping.wait_for(|stop| *stop) => return None,
            };
            let event = match received {
                Ok(event) => broker_event(&event),
                Err(RecvError::Lagged(_)) => pending_event(&state, &account_id).await,
                Err(RecvError::Closed) => return None,
            };
            Some((Ok(event), (None, receiver, stopping, state, account_id)))
        },
    )
    .take_until(session_ended);
    Sse::new(stream).keep_alive(KeepAlive::new().interval(Duration::from_secs(15)))
}

#[derive(Deserialize)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct AnswerRequest {
    choice: AnswerChoice,
}

#[derive(Serialize)]
#[serde(rename_all = "camelCase")]
pub struct AnswerView {
    id: String,
    state: CallState,
}

fn state_word(state: CallState) -> &'static str {
    match state {
        CallState::Pending => "still waiting",
        CallState::Allowed => "allowed",
        CallState::Refused => "refused",
        CallState::Expired => "refused because nobody answered within two minutes",
        CallState::Interrupted => "dropped because its turn stopped",
    }
}

/// `POST /api/v1/approvals/{id}/answer` with `{"choice": "allow" | "refuse" | "always_allow"}`.
pub async fn answer(
    State(state): State<AppState>,
    signed_in: SignedIn,
    Path(id): Path<String>,
    ApiJson(body): ApiJson<AnswerRequest>,
) -> Result<Json<AnswerView>, ApiError> {
    if body.choice == AnswerChoice::AlwaysAllow
        && state.store.permission_mode(&signed_in.account.id).await? != PermissionMode::Rules
    {
        return Err(ApiError::bad_request(
            "always_allow_unavailable",
            "“Always allow” is remembered only in the “rules” permission mode (Settings → Tools → \
             Permissions). Allow this call once, or switch the mode first.",
        ));
    }
    let me = public_session_id(&signed_in.session.token_hash);
    let result = state
        .broker
        .answer(&signed_in.account.id, &id, &me, body.choice)
        .await
        .map_err(|e| ApiError::Internal(format!("answering an approval: {e}")))?;
    match result {
        AnswerResult::Won { call } => {
            tracing::info!(account = %signed_in.account.id, call = %id, state = call.state.as_str(), "approval answered");
            Ok(Json(AnswerView { id, state: call.state }))
        }
        AnswerResult::AlreadyAnswered { state: final_state, answered_at_ms, by_session } => {
            let when = answered_at_ms
                .and_then(chrono::DateTime::from_timestamp_millis)
                .map(|t| format!(" at {} UTC", t.format("%H:%M:%S")))
                .unwrap_or_default();
            let from = match by_session.as_deref() {
                Some(s) if s == me => " from this tab",
                Some(llooma_approval_broker::ANSWERED_BY_BOT)
                | Some(llooma_approval_broker::ANSWERED_BY_CONSENT)
                | None => "",
                Some(_) => " from another tab or device",
            };
            Err(ApiError::Conflict {
                code: "already_answered",
                message: format!("This call was already {}{from}{when}.", state_word(final_state)),
            })
        }
        AnswerResult::NotFound => Err(ApiError::NotFound),
    }
}

fn constraint_json(constraint: &ArgConstraint) -> Value {
    match constraint {
        ArgConstraint::Any => json!("any"),
        ArgConstraint::Exact(value) => json!({"exact": value}),
    }
}

async fn consent_view(state: &AppState, account_id: &str) -> Result<ConsentView, ApiError> {
    let mode = state.store.permission_mode(account_id).await?;
    let grants = state
        .store
        .consent_grants(account_id)
        .await?
        .into_iter()
        .map(|g| GrantView {
            arguments: serde_json::from_str(&g.grant.arguments_json).unwrap_or(Value::Null),
            id: g.grant.id,
            server_address: g.grant.server_address,
            tool_name: g.grant.tool_name,
            created_at: llooma_store::ms_to_rfc3339(g.created_at_ms),
        })
        .collect();
    let rules = state
        .store
        .consent_rules(account_id)
        .await?
        .into_iter()
        .map(|r| RuleView {
            arguments: r
                .rule
                .arguments
                .iter()
                .map(|(k, c)| (k.clone(), constraint_json(c)))
                .collect(),
            id: r.rule.id,
            server_address: r.rule.server_address,
            tool_name: r.rule.tool_name,
            created_at: llooma_store::ms_to_rfc3339(r.created_at_ms),
        })
        .collect();
    Ok(ConsentView {
        mode: mode.as_str().to_owned(),
        allow_all_warning: ALLOW_ALL_WARNING.to_owned(),
        grants,
        rules,
    })
}

/// `GET /api/v1/consent`.
pub async fn get_consent(
    State(state): State<AppState>,
    signed_in: SignedIn,
) -> Result<Json<ConsentView>, ApiError> {
    Ok(Json(consent_view(&state, &signed_in.account.id).await?))
}

#[derive(Deserialize)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct ModeRequest {
    mode: String,
}

/// `PATCH /api/v1/consent` with `{"mode": "ask" | "rules" | "allow_all"}`.
pub async fn set_mode(
    State(state): State<AppState>,
    signed_in: SignedIn,
    ApiJson(body): ApiJson<ModeRequest>,
) -> Result<Json<ConsentView>, ApiError> {
    let mode = PermissionMode::parse(&body.mode).ok_or_else(|| {
        ApiError::bad_request(
            "invalid_mode",
            "The permission mode is one of ask, rules, allow_all.",
        )
    })?;
    state.store.set_permission_mode(&signed_in.account.id, mode).await?;
    tracing::info!(account = %signed_in.account.id, mode = mode.as_str(), "permission mode changed");
    Ok(Json(consent_view(&state, &signed_in.account.id).await?))
}

/// `DELETE /api/v1/consent/grants/{id}`.
pub async fn revoke_grant(
    State(state): State<AppState>,
    signed_in: SignedIn,
    Path(id): Path<String>,
) -> Result<StatusCode, ApiError> {
    if state.store.revoke_consent_grant(&signed_in.account.id, &id).await? {
        Ok(StatusCode::NO_CONTENT)
    } else {
        Err(ApiError::NotFound)
    }
}

#[derive(Deserialize)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct RuleRequest {
    server_id: String,
    tool: String,
    /// `{"argument": "any" | {"exact": value}}`; arguments not named make the rule not apply.
    arguments: BTreeMap<String, Value>,
}

fn parse_constraint(name: &str, value: &Value) -> Result<ArgConstraint, ApiError> {
    match value {
        Value::String(s) if s == "any" => Ok(ArgConstraint::Any),
        Value::Object(map) if map.len() == 1 && map.contains_key("exact") => {
            Ok(ArgConstraint::Exact(map.get("exact").cloned().unwrap_or(Value::Null)))
        }
        _ => Err(ApiError::bad_request(
            "invalid_rule",
            format!("The constraint for `{name}` must be \"any\" or {{\"exact\": value}}."),
        )),
    }
}

/// `POST /api/v1/consent/rules`: an allow rule for one tool of one of the account's servers,
/// tied to the tool as it is described now.
pub async fn add_rule(
    State(state): State<AppState>,
    signed_in: SignedIn,
    ApiJson(body): ApiJson<RuleRequest>,
) -> Result<(StatusCode, Json<ConsentView>), ApiError> {
    let server = state
        .store
        .mcp_server(&signed_in.account.id, &body.server_id)
        .await?
        .ok_or(ApiError::NotFound)?;
    let snapshot: llooma_mcp_client::Snapshot = serde_json::from_str(&server.snapshot_json)
        .map_err(|e| ApiError::Internal(format!("stored snapshot unreadable: {e}")))?;
    let tool = snapshot.tools.iter().find(|t| t.name == body.tool).ok_or_else(|| {
        ApiError::bad_request(
            "unknown_tool",
            format!("The server has no tool named `{}`.", body.tool),
        )
    })?;
    let mut arguments = BTreeMap::new();
    for (name, value) in &body.arguments {
        arguments.insert(name.clone(), parse_constraint(name, value)?);
    }
    state
        .store
        .add_consent_rule(NewRule {
            account_id: signed_in.account.id.clone(),
            server_address: server.address.clone(),
            tool_name: tool.name.clone(),
            tool_definition_hash: tool.hash.clone(),
            arguments,
        })
        .await?;
    Ok((StatusCode::CREATED, Json(consent_view(&state, &signed_in.account.id).await?)))
}

/// `DELETE /api/v1/consent/rules/{id}`.
pub async fn revoke_rule(
    State(state): State<AppState>,
    signed_in: SignedIn,
    Path(id): Path<String>,
) -> Result<StatusCode, ApiError> {
    if state.store.revoke_consent_rule(&signed_in.account.id, &id).await? {
        Ok(StatusCode::NO_CONTENT)
    } else {
        Err(ApiError::NotFound)
    }
}
