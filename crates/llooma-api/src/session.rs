//! Sessions: the cookie, the signed-in extractors, and the second CSRF check (the session's token
//! in `X-CSRF-Token` on every state-changing request).

use std::collections::HashMap;
use std::net::SocketAddr;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex, PoisonError};

use axum::extract::{ConnectInfo, FromRequestParts};
use axum::http::request::Parts;
use axum::http::{HeaderMap, HeaderValue, Method, header};
use base64::Engine as _;
use llooma_core::store::{Account, NewSession, Session};
use llooma_types::{AccountView, Role, SessionView};
use sha2::{Digest, Sha256};
use subtle::ConstantTimeEq;
use tokio::sync::watch;

use crate::AppState;
use crate::error::ApiError;

pub const COOKIE_NAME: &str = "llooma_session";
pub const CSRF_HEADER: &str = "x-csrf-token";

/// Activity is written back at most this often per session, not on every request.
const TOUCH_EVERY_MS: i64 = 60_000;

fn random_token() -> Result<String, ApiError> {
    let mut bytes = [0u8; 32];
    getrandom::fill(&mut bytes).map_err(|e| ApiError::Internal(format!("random source: {e}")))?;
    Ok(base64::engine::general_purpose::URL_SAFE_NO_PAD.encode(bytes))
}

pub fn token_hash(token: &str) -> String {
    hex::encode(Sha256::digest(token.as_bytes()))
}

pub fn account_view(account: &Account) -> AccountView {
    AccountView {
        id: account.id.clone(),
        username: account.username.clone(),
        display_name: account.display_name.clone(),
        role: account.role,
        created_at: llooma_core::store::ms_to_rfc3339(account.created_at_ms),
    }
}

fn cookie(state: &AppState, value: &str, max_age_secs: u64) -> Result<HeaderValue, ApiError> {
    let secure = if state.config.secure_cookies { "; Secure" } else { "" };
    HeaderValue::from_str(&format!(
        "{COOKIE_NAME}={value}; Path=/; HttpOnly; SameSite=Lax; Max-Age={max_age_secs}{secure}"
    ))
    .map_err(|e| ApiError::Internal(format!("cookie header: {e}")))
}

/// A `Set-Cookie` value that removes the session cookie.
pub fn clearing_cookie(state: &AppState) -> Result<HeaderValue, ApiError> {
    cookie(state, "", 0)
}

/// Opens a new session (always a new id: nothing a visitor had before sign-in is reused).
pub async fn start(
    state: &AppState,
    account: &Account,
    client: &ClientInfo,
) -> Result<(SessionView, HeaderValue), ApiError> {
    let token = random_token()?;
    let csrf_token = random_token()?;
    let now = llooma_core::store::now_ms();
    let absolute = state.config.session_absolute;
    state
        .app
        .store
        .create_session(NewSession {
            token_hash: token_hash(&token),
            account_id: account.id.clone(),
            csrf_token: csrf_token.clone(),
            now_ms: now,
            expires_at_ms: now
                .saturating_add(i64::try_from(absolute.as_millis()).unwrap_or(i64::MAX)),
            client_addr: Some(client.addr.clone()),
            user_agent: client.user_agent.clone(),
        })
        .await?;
    let set_cookie = cookie(state, &token, absolute.as_secs())?;
    Ok((SessionView { account: account_view(account), csrf_token }, set_cookie))
}

fn session_cookie(headers: &HeaderMap) -> Option<&str> {
    headers
        .get_all(header::COOKIE)
        .iter()
        .filter_map(|v| v.to_str().ok())
        .flat_map(|v| v.split(';'))
        .filter_map(|pair| pair.trim().split_once('='))
        .find(|(name, _)| *name == COOKIE_NAME)
        .map(|(_, value)| value)
        .filter(|value| !value.is_empty())
}

/// A request from a signed-in account. On a state-changing method it has also presented the
/// session's CSRF token.
#[derive(Debug)]
pub struct SignedIn {
    pub account: Account,
    pub session: Session,
}

impl FromRequestParts<AppState> for SignedIn {
    type Rejection = ApiError;

    async fn from_request_parts(parts: &mut Parts, state: &AppState) -> Result<Self, ApiError> {
        let token = session_cookie(&parts.headers).ok_or(ApiError::Unauthenticated)?;
        let hash = token_hash(token);
        let (session, account) =
            state.app.store.session_with_account(&hash).await?.ok_or(ApiError::Unauthenticated)?;
        let now = llooma_core::store::now_ms();
        let idle_ms = i64::try_from(state.config.session_idle.as_millis()).unwrap_or(i64::MAX);
        if now >= session.expires_at_ms || now.saturating_sub(session.last_seen_at_ms) >= idle_ms {
            state.app.store.delete_session(&hash).await?;
            return Err(ApiError::Unauthenticated);
        }
        if !matches!(parts.method, Method::GET | Method::HEAD | Method::OPTIONS) {
            let presented =
                parts.headers.get(CSRF_HEADER).map(HeaderValue::as_bytes).unwrap_or(b"");
            if !bool::from(presented.ct_eq(session.csrf_token.as_bytes())) {
                return Err(ApiError::Csrf(
                    "This request is missing the CSRF token of your session (header X-CSRF-Token). \
                     Reload the page and try again."
                        .into(),
                ));
            }
        }
        if now - session.last_seen_at_ms >= TOUCH_EVERY_MS.min(idle_ms / 4) {
            state.app.store.touch_session(&hash, now).await?;
        }
        Ok(SignedIn { account, session })
    }
}

/// How often the sessions of open event streams are checked.
const STREAM_SESSION_CHECK: std::time::Duration = std::time::Duration::from_secs(2);

/// The sessions this process's event streams belong to, checked together: one query every
/// [`STREAM_SESSION_CHECK`] for all of them (not one per stream), in the database, so a session
/// ended on any replica (sign-out, a password change, expiry) ends its streams here too.
///
/// A session ended by a request to this process ends its streams here before that request is
/// answered ([`LiveSessions::end`], [`LiveSessions::end_account`]): a reply or a card produced
/// right after a sign-out must not reach the tab that signed out, and the periodic check would
/// leave it up to two seconds to do so.
#[derive(Clone, Debug, Default)]
pub struct LiveSessions {
    /// Token hash → the session's account and a watch turned true when the session has ended.
    watched: Arc<Mutex<HashMap<String, Watched>>>,
    /// Whether the checking task runs (it stops when no stream is left).
    checking: Arc<AtomicBool>,
}

/// One watched session.
#[derive(Debug)]
struct Watched {
    account_id: String,
    ended: watch::Sender<bool>,
}

impl LiveSessions {
    fn watched(&self) -> std::sync::MutexGuard<'_, HashMap<String, Watched>> {
        self.watched.lock().unwrap_or_else(PoisonError::into_inner)
    }

    /// Ends the streams of the session `token_hash` at once.
    pub fn end(&self, token_hash: &str) {
        if let Some(session) = self.watched().remove(token_hash) {
            let _ = session.ended.send(true);
        }
    }

    /// Ends the streams of every session of `account_id` at once.
    pub fn end_account(&self, account_id: &str) {
        let mut watched = self.watched();
        watched.retain(|_, session| {
            if session.account_id != account_id {
                return true;
            }
            let _ = session.ended.send(true);
            false
        });
    }

    fn subscribe(
        &self,
        state: &AppState,
        token_hash: &str,
        account_id: &str,
    ) -> watch::Receiver<bool> {
        let receiver = {
            let mut watched = self.watched();
            match watched.get(token_hash) {
                Some(session) => session.ended.subscribe(),
                None => {
                    let (ended, receiver) = watch::channel(false);
                    let account_id = account_id.to_owned();
                    watched.insert(token_hash.to_owned(), Watched { account_id, ended });
                    receiver
                }
            }
        };
        if !self.checking.swap(true, Ordering::AcqRel) {
            tokio::spawn(self.clone().check(state.app.store.clone(), state.config.session_idle));
        }
        receiver
    }

    async fn check(self, store: llooma_core::store::Store, idle: std::time::Duration) {
        let idle_ms = i64::try_from(idle.as_millis()).unwrap_or(i64::MAX);
        loop {
            tokio::time::sleep(STREAM_SESSION_CHECK).await;
            let hashes: Vec<String> = {
                let mut watched = self.watched();
                watched.retain(|_, session| session.ended.receiver_count() > 0);
                if watched.is_empty() {
                    // Nobody left to tell; the next stream starts the task again.
                    self.checking.store(false, Ordering::Release);
                    return;
                }
                watched.keys().cloned().collect()
            };
            let now = llooma_core::store::now_ms();
            match store.sessions_standing(&hashes, now, idle_ms).await {
                Ok(standing) => {
                    let mut watched = self.watched();
                    for hash in hashes.iter().filter(|h| !standing.contains(*h)) {
                        if let Some(session) = watched.remove(hash) {
                            let _ = session.ended.send(true);
                        }
                    }
                }
                // The database did not answer: the next check decides.
                Err(err) => tracing::warn!(error = %err, "checking the streams' sessions failed"),
            }
        }
    }
}

impl SignedIn {
    /// Ends when this request's session does, whichever way: sign-out, a password change (which
    /// ends every session of the account), expiry, or removal through another replica. Event
    /// streams end with it: at once when the session was ended through this process, within a
    /// few seconds when through another replica.
    pub fn session_ended(
        &self,
        state: &AppState,
    ) -> impl Future<Output = ()> + Send + 'static + use<> {
        let mut ended =
            state.live_sessions.subscribe(state, &self.session.token_hash, &self.account.id);
        async move {
            // An error means the watch was dropped without an end: treat it as ended.
            let _ = ended.wait_for(|ended| *ended).await;
        }
    }
}

/// A signed-in administrator.
#[derive(Debug)]
pub struct Admin(pub SignedIn);

impl FromRequestParts<AppState> for Admin {
    type Rejection = ApiError;

    async fn from_request_parts(parts: &mut Parts, state: &AppState) -> Result<Self, ApiError> {
        let signed_in = SignedIn::from_request_parts(parts, state).await?;
        if signed_in.account.role != Role::Admin {
            return Err(ApiError::Forbidden("Only administrators can do this.".into()));
        }
        Ok(Admin(signed_in))
    }
}

/// Where a request came from, for throttling and the session record.
#[derive(Debug, Clone)]
pub struct ClientInfo {
    pub addr: String,
    pub user_agent: Option<String>,
}

impl FromRequestParts<AppState> for ClientInfo {
    type Rejection = ApiError;

    async fn from_request_parts(parts: &mut Parts, state: &AppState) -> Result<Self, ApiError> {
        let peer = parts
            .extensions
            .get::<ConnectInfo<SocketAddr>>()
            .map(|ConnectInfo(addr)| addr.ip().to_string());
        let forwarded = if state.config.trust_forwarded_for {
            parts
                .headers
                .get("x-forwarded-for")
                .and_then(|v| v.to_str().ok())
                // A proxy appends the address it saw; earlier entries are whatever the client
                // wrote, so only the last one can be trusted (with one proxy in front).
                .and_then(|v| v.rsplit(',').next())
                .map(|v| v.trim().to_owned())
                .filter(|v| !v.is_empty())
        } else {
            None
        };
        let user_agent = parts
            .headers
            .get(header::USER_AGENT)
            .and_then(|v| v.to_str().ok())
            .map(|v| v.chars().take(200).collect());
        Ok(ClientInfo { addr: forwarded.or(peer).unwrap_or_else(|| "unknown".into()), user_agent })
    }
}
