//! Registration, sign-in, sign-out, the current account and password changes.

use axum::extract::State;
use axum::http::{StatusCode, header};
use axum::response::{IntoResponse, Response};
use llooma_core::store::{FailureScope, NewAccount, RegisterOutcome};
use llooma_types::{InstanceInfo, SessionView};
use llooma_vault::Secret;
use serde::Deserialize;

use crate::AppState;
use crate::error::ApiError;
use crate::extract::ApiJson;
use crate::session::{self, ClientInfo, SignedIn};

const MIN_PASSWORD_CHARS: usize = 10;
const MAX_PASSWORD_BYTES: usize = 1024;

#[derive(Deserialize)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct RegisterRequest {
    username: String,
    password: Secret,
    display_name: Option<String>,
}

#[derive(Deserialize)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct LoginRequest {
    username: String,
    password: Secret,
}

#[derive(Deserialize)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct PasswordChangeRequest {
    current_password: Secret,
    new_password: Secret,
}

/// Usernames are case-insensitive: stored and compared in lower case.
pub fn normalize_username(raw: &str) -> String {
    raw.trim().to_lowercase()
}

pub fn validate_username(username: &str) -> Result<(), ApiError> {
    let ok_chars = username
        .chars()
        .all(|c| c.is_ascii_lowercase() || c.is_ascii_digit() || matches!(c, '.' | '_' | '-'));
    if !(3..=64).contains(&username.len()) || !ok_chars {
        return Err(ApiError::bad_request(
            "invalid_username",
            "A username has 3 to 64 characters: letters, digits, '.', '_' or '-'.",
        ));
    }
    Ok(())
}

pub fn validate_password(password: &Secret) -> Result<(), ApiError> {
    let text = password.expose();
    if text.chars().count() < MIN_PASSWORD_CHARS || text.len() > MAX_PASSWORD_BYTES {
        return Err(ApiError::bad_request(
            "weak_password",
            format!(
                "A password has at least {MIN_PASSWORD_CHARS} characters (and at most {MAX_PASSWORD_BYTES} bytes)."
            ),
        ));
    }
    Ok(())
}

fn with_cookie(status: StatusCode, view: SessionView, cookie: axum::http::HeaderValue) -> Response {
    let mut response = (status, axum::Json(view)).into_response();
    response.headers_mut().insert(header::SET_COOKIE, cookie);
    response
}

pub async fn instance_info(
    State(state): State<AppState>,
) -> Result<axum::Json<InstanceInfo>, ApiError> {
    let instance = state.app.store.instance_state().await?;
    let settings = state.app.store.instance_settings().await?;
    Ok(axum::Json(InstanceInfo {
        setup_complete: instance.setup_complete,
        registration_open: settings.registration_open || !instance.setup_complete,
        version: state.config.version.clone(),
    }))
}

fn registration_closed() -> ApiError {
    ApiError::Forbidden(
        "Registration is closed on this instance. Ask an administrator to open it or to create an account for you."
            .into(),
    )
}

pub async fn register(
    State(state): State<AppState>,
    client: ClientInfo,
    ApiJson(body): ApiJson<RegisterRequest>,
) -> Result<Response, ApiError> {
    let username = normalize_username(&body.username);
    validate_username(&username)?;
    validate_password(&body.password)?;
    // A cheap early answer; the transaction below is what actually decides.
    let instance = state.app.store.instance_state().await?;
    if instance.setup_complete && !state.app.store.instance_settings().await?.registration_open {
        return Err(registration_closed());
    }
    let display_name = body
        .display_name
        .map(|name| name.trim().chars().take(100).collect::<String>())
        .filter(|name| !name.is_empty())
        .unwrap_or_else(|| username.clone());
    let password_hash = state.passwords.hash(body.password).await?;
    let outcome = state
        .app
        .store
        .register_account(NewAccount { username, display_name, password_hash })
        .await?;
    match outcome {
        RegisterOutcome::Created(account) => {
            tracing::info!(account = %account.id, role = account.role.as_str(), "account registered");
            let (view, cookie) = session::start(&state, &account, &client).await?;
            Ok(with_cookie(StatusCode::CREATED, view, cookie))
        }
        RegisterOutcome::Closed => Err(registration_closed()),
    }
}

fn millis(duration: std::time::Duration) -> i64 {
    i64::try_from(duration.as_millis()).unwrap_or(i64::MAX)
}

pub async fn login(
    State(state): State<AppState>,
    client: ClientInfo,
    ApiJson(body): ApiJson<LoginRequest>,
) -> Result<Response, ApiError> {
    let username = normalize_username(&body.username);
    let throttle = &state.config.throttle;
    let now = llooma_core::store::now_ms();
    let since = now - millis(throttle.window);
    // Each attempt is recorded as a failure *before* the password is checked and counted with
    // the others, so a burst of parallel guesses cannot all pass a count taken before any of them
    // was recorded. A successful sign-in forgets its own row. Identical whether or not the
    // account exists.
    state.app.store.record_login_failure(FailureScope::Account, &username, now).await?;
    let address_attempt =
        state.app.store.record_login_failure(FailureScope::Address, &client.addr, now).await?;
    for (scope, subject, limit) in [
        (FailureScope::Account, username.as_str(), throttle.max_failures_per_account),
        (FailureScope::Address, client.addr.as_str(), throttle.max_failures_per_address),
    ] {
        if state.app.store.count_login_failures(scope, subject, since).await? > limit {
            let oldest =
                state.app.store.oldest_login_failure(scope, subject, since).await?.unwrap_or(now);
            let retry_ms = (oldest + millis(throttle.window) - now).max(1000);
            tracing::warn!(?scope, "sign-in throttled");
            return Err(ApiError::TooManyAttempts {
                retry_after_secs: u64::try_from(retry_ms / 1000).unwrap_or(1).max(1),
            });
        }
    }
    let account = state.app.store.account_by_username(&username).await?;
    let matches = state
        .passwords
        .verify(body.password, account.as_ref().map(|a| a.password_hash.clone()))
        .await?;
    let Some(account) = account.filter(|_| matches) else {
        return Err(ApiError::InvalidCredentials);
    };
    state.app.store.clear_login_failures(FailureScope::Account, &username).await?;
    state.app.store.forget_login_attempt(&address_attempt).await?;
    tracing::info!(account = %account.id, "signed in");
    let (view, cookie) = session::start(&state, &account, &client).await?;
    Ok(with_cookie(StatusCode::OK, view, cookie))
}

pub async fn logout(
    State(state): State<AppState>,
    signed_in: SignedIn,
) -> Result<Response, ApiError> {
    state.app.store.delete_session(&signed_in.session.token_hash).await?;
    state.live_sessions.end(&signed_in.session.token_hash);
    let mut response = StatusCode::NO_CONTENT.into_response();
    response.headers_mut().insert(header::SET_COOKIE, session::clearing_cookie(&state)?);
    Ok(response)
}

pub async fn me(signed_in: SignedIn) -> axum::Json<SessionView> {
    axum::Json(SessionView {
        account: session::account_view(&signed_in.account),
        csrf_token: signed_in.session.csrf_token,
    })
}

/// `GET /api/v1/me/preferences`.
pub async fn preferences(
    State(state): State<AppState>,
    signed_in: SignedIn,
) -> Result<axum::Json<llooma_types::PreferencesView>, ApiError> {
    let stored = state.app.store.preferences(&signed_in.account.id).await?;
    Ok(axum::Json(llooma_types::PreferencesView { titles_from_model: stored.titles_from_model }))
}

/// `PATCH /api/v1/me/preferences`: absent fields stay.
pub async fn set_preferences(
    State(state): State<AppState>,
    signed_in: SignedIn,
    ApiJson(patch): ApiJson<llooma_types::PreferencesPatch>,
) -> Result<axum::Json<llooma_types::PreferencesView>, ApiError> {
    let account_id = &signed_in.account.id;
    let mut stored = state.app.store.preferences(account_id).await?;
    if let Some(on) = patch.titles_from_model {
        stored.titles_from_model = on;
    }
    state.app.store.set_preferences(account_id, stored).await?;
    Ok(axum::Json(llooma_types::PreferencesView { titles_from_model: stored.titles_from_model }))
}

/// Checks the signed-in account's password given again. A stolen session must not become a way
/// to guess it without limit: each try counts against the account like a failed sign-in
/// (cleared when it is right); a wrong one is `Forbidden` with `wrong`.
async fn confirm_password(
    state: &AppState,
    account: &llooma_core::store::Account,
    given: Secret,
    wrong: &str,
) -> Result<(), ApiError> {
    let throttle = &state.config.throttle;
    let now = llooma_core::store::now_ms();
    state.app.store.record_login_failure(FailureScope::Account, &account.username, now).await?;
    let since = now - millis(throttle.window);
    if state.app.store.count_login_failures(FailureScope::Account, &account.username, since).await?
        > throttle.max_failures_per_account
    {
        return Err(ApiError::TooManyAttempts {
            retry_after_secs: throttle.window.as_secs().max(1),
        });
    }
    if !state.passwords.verify(given, Some(account.password_hash.clone())).await? {
        return Err(ApiError::Forbidden(wrong.to_owned()));
    }
    state.app.store.clear_login_failures(FailureScope::Account, &account.username).await?;
    Ok(())
}

#[derive(Deserialize)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct AccountDeleteRequest {
    password: Secret,
}

/// `DELETE /api/v1/me`: deletes the signed-in account with everything of its, after its
/// password is given again (counted like a sign-in, so a stolen session cannot guess it). Every
/// session of the account ends.
pub async fn delete_me(
    State(state): State<AppState>,
    signed_in: SignedIn,
    ApiJson(body): ApiJson<AccountDeleteRequest>,
) -> Result<Response, ApiError> {
    let account = signed_in.account;
    confirm_password(
        &state,
        &account,
        body.password,
        "The password is wrong; nothing was deleted.",
    )
    .await?;
    state.app.delete_account(&account.id).await?;
    state.live_sessions.end_account(&account.id);
    let mut response = StatusCode::NO_CONTENT.into_response();
    response.headers_mut().insert(header::SET_COOKIE, session::clearing_cookie(&state)?);
    Ok(response)
}

/// Changes the password and ends every session of the account, this one included; the answer
/// carries a fresh session for the tab that made the change.
pub async fn change_password(
    State(state): State<AppState>,
    client: ClientInfo,
    signed_in: SignedIn,
    ApiJson(body): ApiJson<PasswordChangeRequest>,
) -> Result<Response, ApiError> {
    validate_password(&body.new_password)?;
    let account = signed_in.account;
    confirm_password(&state, &account, body.current_password, "The current password is wrong.")
        .await?;
    let hash = state.passwords.hash(body.new_password).await?;
    state.app.store.change_password(&account.id, &hash).await?;
    state.live_sessions.end_account(&account.id);
    tracing::info!(account = %account.id, "password changed; every session ended");
    let (view, cookie) = session::start(&state, &account, &client).await?;
    Ok(with_cookie(StatusCode::OK, view, cookie))
}
