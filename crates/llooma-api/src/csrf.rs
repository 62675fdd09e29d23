//! The first CSRF check: a state-changing request must come from the instance's own origin.
//!
//! Browsers always send `Origin` on cross-site POST/PUT/PATCH/DELETE, so a mismatch is a forged
//! request. A request without `Origin` (curl, a script) is let through here; once signed in it
//! still needs the session's CSRF token, which another site cannot read.

use axum::extract::{Request, State};
use axum::http::{Method, header};
use axum::middleware::Next;
use axum::response::{IntoResponse, Response};

use crate::AppState;
use crate::error::ApiError;

fn is_safe(method: &Method) -> bool {
    matches!(*method, Method::GET | Method::HEAD | Method::OPTIONS)
}

/// The origin requests must come from: the configured public origin, else the request's host.
fn expected_origin(state: &AppState, request: &Request) -> Option<String> {
    if let Some(origin) = &state.config.public_origin {
        return Some(origin.clone());
    }
    let host = request.headers().get(header::HOST)?.to_str().ok()?;
    let scheme = if state.config.secure_cookies { "https" } else { "http" };
    Some(format!("{scheme}://{host}"))
}

pub async fn check_origin(State(state): State<AppState>, request: Request, next: Next) -> Response {
    if is_safe(request.method()) {
        return next.run(request).await;
    }
    let headers = request.headers();
    if let Some(origin) = headers.get(header::ORIGIN) {
        let origin = origin.to_str().unwrap_or("");
        let expected = expected_origin(&state, &request);
        if expected.as_deref().map(|e| e.eq_ignore_ascii_case(origin)) != Some(true) {
            tracing::warn!(%origin, "refused a cross-origin request");
            return ApiError::Csrf(format!(
                "This request came from another site ({origin}) and was refused. Use Llooma's own pages; \
                 if this is your instance's address, set LLOOMA_PUBLIC_URL to it."
            ))
            .into_response();
        }
    } else if headers
        .get("sec-fetch-site")
        .and_then(|v| v.to_str().ok())
        .is_some_and(|v| v.eq_ignore_ascii_case("cross-site"))
    {
        return ApiError::Csrf("This request came from another site and was refused.".into())
            .into_response();
    }
    next.run(request).await
}
