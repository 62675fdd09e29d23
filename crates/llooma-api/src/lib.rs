//! Llooma's HTTP API: the axum router for `/api/v1`, health checks, sessions, CSRF and
//! authorization. HTTP only: what each request does is `llooma_core`'s [`App`]; this crate
//! reads requests, checks who sends them, frames answers and event streams, and maps
//! `llooma_core::AppError` to status codes in one place ([`error`]).
//!
//! Boundaries: requests and responses are `llooma-types` shapes (or small request structs here
//! that hold [`llooma_vault::Secret`]s, which cannot be serialized back out). Every error becomes
//! `{"error", "message"}` in [`error`]. Every state-changing request passes two CSRF checks: the
//! `Origin` check in [`csrf`] and, once signed in, the session's token in `X-CSRF-Token`.

mod admin;
mod approvals;
mod auth;
mod bots;
mod catalogue;
mod conversations;
mod csrf;
mod download;
pub mod error;
mod extract;
mod files;
mod host;
mod mcp;
mod passwords;
mod personas;
mod session;
mod speech;
mod usage;

use std::sync::Arc;
use std::time::Duration;

use axum::Router;
use axum::extract::{DefaultBodyLimit, State};
use axum::http::StatusCode;
use axum::response::IntoResponse;
use axum::routing::{get, post, put};
use llooma_core::App;

pub use auth::{normalize_username, validate_password, validate_username};
pub use catalogue::{
    CatalogueFileEntry, CatalogueFileError, catalogue_overlaps, parse_catalogue_file,
};
pub use host::{HostRule, check_host};
pub use passwords::Passwords;
pub use session::LiveSessions;

/// Login throttling: failures within `window` are counted per account name and per address.
#[derive(Clone, Debug)]
pub struct ThrottleConfig {
    pub window: Duration,
    pub max_failures_per_account: u64,
    pub max_failures_per_address: u64,
}

impl Default for ThrottleConfig {
    fn default() -> Self {
        ThrottleConfig {
            window: Duration::from_secs(15 * 60),
            max_failures_per_account: 5,
            max_failures_per_address: 20,
        }
    }
}

/// What the API needs to know about the deployment.
#[derive(Clone, Debug)]
pub struct ApiConfig {
    /// `scheme://host[:port]` the instance is reached at, if the operator set it. Without it,
    /// requests are checked against their own `Host` header.
    pub public_origin: Option<String>,
    /// Mark cookies `Secure` (the instance is served over HTTPS).
    pub secure_cookies: bool,
    /// A session unused for this long ends.
    pub session_idle: Duration,
    /// A session ends this long after sign-in, whatever the activity.
    pub session_absolute: Duration,
    pub throttle: ThrottleConfig,
    /// Take the client address from `X-Forwarded-For` (only behind a proxy you run).
    pub trust_forwarded_for: bool,
    pub version: String,
    /// The operator's catalogue file, read at start (`parse_catalogue_file`).
    pub catalogue_file: Arc<[CatalogueFileEntry]>,
}

impl Default for ApiConfig {
    fn default() -> Self {
        ApiConfig {
            public_origin: None,
            secure_cookies: false,
            session_idle: Duration::from_secs(7 * 24 * 3600),
            session_absolute: Duration::from_secs(30 * 24 * 3600),
            throttle: ThrottleConfig::default(),
            trust_forwarded_for: false,
            version: env!("CARGO_PKG_VERSION").to_owned(),
            catalogue_file: Arc::from(Vec::new()),
        }
    }
}

/// Everything a handler can reach: the application, and what only HTTP needs.
#[derive(Clone, Debug)]
pub struct AppState {
    /// Shared, not cloned: the state is cloned for every request and every middleware, and a
    /// clone of the application is some twenty reference counts.
    pub app: Arc<App>,
    pub passwords: Passwords,
    pub config: Arc<ApiConfig>,
    /// The sessions of this process's event streams, checked together.
    pub live_sessions: LiveSessions,
}

/// The whole HTTP surface of the API (health checks included).
pub fn router(state: AppState) -> Router {
    let api = Router::new()
        .route("/instance", get(auth::instance_info))
        .route("/auth/register", post(auth::register))
        .route("/auth/login", post(auth::login))
        .route("/auth/logout", post(auth::logout))
        .route("/me", get(auth::me).delete(auth::delete_me))
        .route("/me/export", get(conversations::export_account))
        .route("/me/password", post(auth::change_password))
        .route("/me/preferences", get(auth::preferences).patch(auth::set_preferences))
        .route("/admin/settings", get(admin::get_settings).patch(admin::patch_settings))
        .route("/admin/accounts", get(admin::list_accounts))
        .route("/usage", get(usage::mine))
        .route("/admin/usage", get(usage::all))
        .route("/admin/usage.csv", get(usage::all_csv))
        .route(
            "/admin/prices",
            get(usage::prices).put(usage::set_price).delete(usage::delete_price),
        )
        .route("/admin/limits", get(usage::default_limits).put(usage::set_default_limits))
        .route(
            "/admin/accounts/{id}/limits",
            get(usage::account_limits).put(usage::set_account_limits),
        )
        .route("/admin/providers", get(admin::list_providers).post(admin::create_provider))
        .route("/providers", get(admin::provider_choices))
        .route("/admin/providers/{id}", axum::routing::delete(admin::delete_provider))
        .route("/admin/providers/{id}/key", put(admin::set_provider_key))
        .route("/admin/providers/{id}/models", put(admin::set_provider_models))
        .route("/admin/providers/{id}/vision-models", put(admin::set_provider_vision_models))
        .route("/admin/providers/{id}/context-windows", put(admin::set_provider_context_windows))
        .route("/models", get(conversations::models))
        .route("/mcp/servers", get(mcp::list_servers).post(mcp::add_server))
        .route("/mcp/servers/test", post(mcp::test_server))
        .route("/mcp/servers/details", get(mcp::list_details))
        .route(
            "/mcp/servers/{id}",
            get(mcp::get_server).patch(mcp::patch_server).delete(mcp::delete_server),
        )
        .route("/mcp/servers/{id}/token", put(mcp::set_token))
        .route("/mcp/servers/{id}/groups", put(mcp::set_group))
        .route("/mcp/servers/{id}/refresh", post(mcp::refresh_server))
        .route("/mcp/servers/{id}/icon", get(mcp::icon))
        .route("/mcp/servers/{id}/views/{hash}", get(mcp::view))
        .route("/mcp/view-calls", post(mcp::view_call))
        .route("/mcp/view-reads", post(mcp::view_read))
        .route("/mcp/catalogue", get(catalogue::list))
        .route("/mcp/catalogue/{id}/rating", put(catalogue::rate).delete(catalogue::unrate))
        .route("/mcp/settings", get(mcp::get_settings).patch(mcp::patch_settings))
        .route("/mcp/announce-cost", get(mcp::announce_cost))
        .route("/conversations", get(conversations::list).post(conversations::create))
        .route(
            "/conversations/{id}",
            get(conversations::get).patch(conversations::patch).delete(conversations::delete),
        )
        .route("/conversations/{id}/messages", post(conversations::send))
        .route("/conversations/{id}/export", get(conversations::export))
        .route("/conversations/{id}/files", post(files::upload))
        .route("/import", post(conversations::import))
        .route("/files/{id}", get(files::download).delete(files::delete))
        .route("/files/{id}/thumbnail", get(files::thumbnail))
        .route("/admin/files", get(files::usage))
        .route("/speech", get(speech::get).patch(speech::patch))
        .route("/speech/transcriptions", post(speech::transcribe))
        .route("/speech/speak", post(speech::speak))
        .route("/admin/speech", get(speech::admin_get).put(speech::admin_put))
        .route("/conversations/{id}/stop", post(conversations::stop))
        .route("/conversations/{id}/events", get(conversations::events))
        .route("/events", get(conversations::tab_events))
        .route("/personas", get(personas::list).post(personas::create))
        .route("/personas/{id}", get(personas::get).patch(personas::patch).delete(personas::delete))
        .route("/personas/{id}/memory", get(personas::memory))
        .route("/personas/{id}/memory/{note}", axum::routing::delete(personas::forget))
        .route("/prompts/tools", get(personas::tool_wordings))
        .route("/prompts/tools/{tool}", put(personas::set_tool_wording))
        .route(
            "/admin/providers/{id}/prompts",
            get(personas::model_prompts).put(personas::set_model_prompt),
        )
        .route("/bots", get(bots::list).post(bots::create))
        .route("/bots/test", post(bots::test))
        .route("/bots/{id}", get(bots::get).patch(bots::patch).delete(bots::delete))
        .route("/approvals", get(approvals::list))
        .route("/approvals/events", get(approvals::events))
        .route("/approvals/{id}/answer", post(approvals::answer))
        .route("/consent", get(approvals::get_consent).patch(approvals::set_mode))
        .route("/consent/grants/{id}", axum::routing::delete(approvals::revoke_grant))
        .route("/consent/rules", post(approvals::add_rule))
        .route("/consent/rules/{id}", axum::routing::delete(approvals::revoke_rule))
        .route("/admin/mcp/servers", get(mcp::admin_list))
        .route("/admin/mcp/catalogue", post(catalogue::admin_create))
        .route(
            "/admin/mcp/catalogue/{id}",
            put(catalogue::admin_update).delete(catalogue::admin_delete),
        )
        .route("/admin/mcp/servers/{id}", axum::routing::delete(mcp::admin_delete))
        .route(
            "/admin/mcp/servers/{id}/suspend",
            post(mcp::admin_suspend).delete(mcp::admin_unsuspend),
        )
        .fallback(|| async { error::ApiError::NotFound })
        .layer(axum::middleware::map_response(never_framed))
        .layer(axum::middleware::from_fn_with_state(state.clone(), csrf::check_origin))
        .layer(DefaultBodyLimit::max(extract::BODY_LIMIT));
    Router::new()
        .route("/healthz", get(|| async { "ok" }))
        .route("/readyz", get(readyz))
        .nest("/api/v1", api)
        .with_state(state)
}

/// No API answer may be framed, but a view's document (whose own policy says who may frame it):
/// the page frames views from its own origin, and a view must not load the API, a file or an
/// event stream into a frame of its own with the person's session.
async fn never_framed(mut response: axum::response::Response) -> axum::response::Response {
    let framed_by_policy = response
        .headers()
        .get(axum::http::header::CONTENT_SECURITY_POLICY)
        .and_then(|v| v.to_str().ok())
        .is_some_and(|policy| policy.contains("frame-ancestors"));
    if !framed_by_policy {
        response.headers_mut().insert(
            axum::http::header::X_FRAME_OPTIONS,
            axum::http::HeaderValue::from_static("DENY"),
        );
    }
    response
}

/// Ready when the database answers.
async fn readyz(State(state): State<AppState>) -> impl IntoResponse {
    match state.app.store.ping().await {
        Ok(()) => (StatusCode::OK, "ready"),
        Err(err) => {
            tracing::warn!(error = %err, "not ready");
            (StatusCode::SERVICE_UNAVAILABLE, "database unreachable")
        }
    }
}
