//! The API's one error type, and the one place errors become status codes.
//!
//! Bodies are always `{"error": code, "message": text}`. Upstream bodies, SQL and secrets are
//! never echoed: internal failures are logged and answered with a generic sentence.

use axum::http::{HeaderValue, StatusCode, header};
use axum::response::{IntoResponse, Response};
use llooma_core::AppError;
use llooma_core::store::StoreError;
use llooma_types::ErrorBody;

#[derive(Debug, thiserror::Error)]
pub enum ApiError {
    #[error("{message}")]
    BadRequest { code: &'static str, message: String },
    #[error("sign in first")]
    Unauthenticated,
    /// The same answer for an unknown account and a wrong password.
    #[error("wrong username or password")]
    InvalidCredentials,
    #[error("{0}")]
    Forbidden(String),
    #[error("{0}")]
    Csrf(String),
    /// The request's `Host` does not name this instance (DNS rebinding, or a missing
    /// `LLOOMA_PUBLIC_URL`).
    #[error("{0}")]
    UnknownHost(String),
    #[error("not found")]
    NotFound,
    /// The request was understood but what it points at cannot be used (an MCP server that
    /// does not answer, refuses the token, or is not allowed by the network policy).
    #[error("{message}")]
    Unprocessable { code: &'static str, message: String },
    #[error("{message}")]
    Conflict { code: &'static str, message: String },
    #[error("the request body is larger than the limit of {limit} bytes")]
    PayloadTooLarge { limit: usize },
    /// An upload larger than a file may be.
    #[error("the file is larger than the limit of {limit_bytes} bytes")]
    FileTooLarge { limit_bytes: usize },
    /// A recording larger than one may be.
    #[error("the recording is larger than the limit of {limit_bytes} bytes")]
    RecordingTooLarge { limit_bytes: usize },
    /// A file to import larger than one may be.
    #[error("the file to import is larger than the limit of {limit_bytes} bytes")]
    ImportTooLarge { limit_bytes: usize },
    #[error("send the body as JSON with Content-Type: application/json")]
    UnsupportedMediaType,
    /// A recording of a type no speech service reads.
    #[error("{0}")]
    UnsupportedRecording(String),
    #[error("too many failed sign-in attempts")]
    TooManyAttempts { retry_after_secs: u64 },
    #[error("{0}")]
    Unavailable(String),
    /// Too much of one kind of work is under way on the instance; the same request will work
    /// in a moment.
    #[error("{0}")]
    Busy(String),
    /// A usage limit of the account does not allow the request now.
    #[error("{message}")]
    LimitReached { message: String, retry_after_secs: u64 },
    #[error("internal error: {0}")]
    Internal(String),
}

impl ApiError {
    pub fn bad_request(code: &'static str, message: impl Into<String>) -> Self {
        ApiError::BadRequest { code, message: message.into() }
    }
}

/// The application's refusals and failures, each to its status code.
impl From<AppError> for ApiError {
    fn from(err: AppError) -> Self {
        match err {
            AppError::Invalid { code, message } => ApiError::BadRequest { code, message },
            AppError::Forbidden(message) => ApiError::Forbidden(message),
            AppError::NotFound => ApiError::NotFound,
            AppError::Unprocessable { code, message } => ApiError::Unprocessable { code, message },
            AppError::Conflict { code, message } => ApiError::Conflict { code, message },
            AppError::Busy(message) => ApiError::Busy(message),
            AppError::LimitReached { message, retry_after_secs } => {
                ApiError::LimitReached { message, retry_after_secs }
            }
            AppError::Unavailable(message) => ApiError::Unavailable(message),
            AppError::Internal(detail) => ApiError::Internal(detail),
        }
    }
}

impl From<StoreError> for ApiError {
    fn from(err: StoreError) -> Self {
        AppError::from(err).into()
    }
}

impl IntoResponse for ApiError {
    fn into_response(self) -> Response {
        let (status, code, message) = match &self {
            ApiError::BadRequest { code, message } => {
                (StatusCode::BAD_REQUEST, *code, message.clone())
            }
            ApiError::Unauthenticated => (
                StatusCode::UNAUTHORIZED,
                "unauthenticated",
                "You are not signed in, or your session has ended. Sign in and try again.".into(),
            ),
            ApiError::InvalidCredentials => (
                StatusCode::UNAUTHORIZED,
                "invalid_credentials",
                "The username or the password is wrong.".into(),
            ),
            ApiError::Forbidden(message) => (StatusCode::FORBIDDEN, "forbidden", message.clone()),
            ApiError::Csrf(message) => (StatusCode::FORBIDDEN, "csrf", message.clone()),
            ApiError::UnknownHost(message) => {
                (StatusCode::MISDIRECTED_REQUEST, "unknown_host", message.clone())
            }
            ApiError::NotFound => (StatusCode::NOT_FOUND, "not_found", "Nothing is here.".into()),
            ApiError::Unprocessable { code, message } => {
                (StatusCode::UNPROCESSABLE_ENTITY, *code, message.clone())
            }
            ApiError::Conflict { code, message } => (StatusCode::CONFLICT, *code, message.clone()),
            ApiError::PayloadTooLarge { limit } => (
                StatusCode::PAYLOAD_TOO_LARGE,
                "payload_too_large",
                format!("The request body is larger than the limit of {limit} bytes."),
            ),
            ApiError::FileTooLarge { limit_bytes } => (
                StatusCode::PAYLOAD_TOO_LARGE,
                "file_too_large",
                format!(
                    "This file is larger than the {} MB a file may be on this instance; send a \
                     smaller one (a photo is made smaller by the server anyway, a PDF can be \
                     split), or ask an administrator.",
                    limit_bytes / (1024 * 1024)
                ),
            ),
            ApiError::RecordingTooLarge { limit_bytes } => (
                StatusCode::PAYLOAD_TOO_LARGE,
                "recording_too_large",
                format!(
                    "This recording is larger than the {} MB a recording may be; record a \
                     shorter one (a few minutes at most), or send it in parts.",
                    limit_bytes / (1024 * 1024)
                ),
            ),
            ApiError::ImportTooLarge { limit_bytes } => (
                StatusCode::PAYLOAD_TOO_LARGE,
                "import_too_large",
                format!(
                    "This file is larger than the {} MB an import may be; ChatGPT's \
                     conversations.json can be split into several files of whole conversations.",
                    limit_bytes / (1024 * 1024)
                ),
            ),
            ApiError::UnsupportedRecording(message) => {
                (StatusCode::UNSUPPORTED_MEDIA_TYPE, "unsupported_recording", message.clone())
            }
            ApiError::UnsupportedMediaType => (
                StatusCode::UNSUPPORTED_MEDIA_TYPE,
                "unsupported_media_type",
                "Send the body as JSON with the header Content-Type: application/json.".into(),
            ),
            ApiError::TooManyAttempts { retry_after_secs } => (
                StatusCode::TOO_MANY_REQUESTS,
                "too_many_attempts",
                format!(
                    "Too many failed sign-in attempts. Wait {} and try again.",
                    human_wait(*retry_after_secs)
                ),
            ),
            ApiError::Unavailable(message) => {
                (StatusCode::SERVICE_UNAVAILABLE, "unavailable", message.clone())
            }
            ApiError::Busy(message) => (StatusCode::SERVICE_UNAVAILABLE, "busy", message.clone()),
            ApiError::LimitReached { message, .. } => {
                (StatusCode::TOO_MANY_REQUESTS, "limit_reached", message.clone())
            }
            ApiError::Internal(detail) => {
                tracing::error!(%detail, "internal error");
                (
                    StatusCode::INTERNAL_SERVER_ERROR,
                    "internal",
                    "Something went wrong on the server. It has been logged; try again.".into(),
                )
            }
        };
        let mut response =
            (status, axum::Json(ErrorBody { error: code.to_owned(), message })).into_response();
        if let ApiError::TooManyAttempts { retry_after_secs }
        | ApiError::LimitReached { retry_after_secs, .. } = self
            && let Ok(value) = HeaderValue::from_str(&retry_after_secs.to_string())
        {
            response.headers_mut().insert(header::RETRY_AFTER, value);
        }
        if let ApiError::Busy(_) = self {
            response.headers_mut().insert(header::RETRY_AFTER, HeaderValue::from_static("2"));
        }
        response
    }
}

fn human_wait(secs: u64) -> String {
    if secs <= 60 { "a minute".to_owned() } else { format!("{} minutes", secs.div_ceil(60)) }
}
