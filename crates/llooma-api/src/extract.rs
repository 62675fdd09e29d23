//! Extractors that turn bad input into the API's error shape instead of axum's plain text.

use axum::extract::rejection::JsonRejection;
use axum::extract::{FromRequest, Request};
use axum::http::StatusCode;
use serde::de::DeserializeOwned;

use crate::error::ApiError;

/// The largest JSON body the API accepts.
pub const BODY_LIMIT: usize = 64 * 1024;

/// `axum::Json`, with every rejection answered as `{"error", "message"}`.
#[derive(Debug)]
pub struct ApiJson<T>(pub T);

impl<S, T> FromRequest<S> for ApiJson<T>
where
    T: DeserializeOwned,
    S: Send + Sync,
{
    type Rejection = ApiError;

    async fn from_request(req: Request, state: &S) -> Result<Self, Self::Rejection> {
        match axum::Json::<T>::from_request(req, state).await {
            Ok(axum::Json(value)) => Ok(ApiJson(value)),
            Err(rejection) => Err(json_rejection(rejection)),
        }
    }
}

fn json_rejection(rejection: JsonRejection) -> ApiError {
    match rejection {
        JsonRejection::MissingJsonContentType(_) => ApiError::UnsupportedMediaType,
        JsonRejection::JsonSyntaxError(err) => ApiError::bad_request(
            "invalid_json",
            format!("The request body is not valid JSON: {}", err.body_text()),
        ),
        JsonRejection::JsonDataError(err) => ApiError::bad_request(
            "invalid_fields",
            format!("The request body does not have the expected fields: {}", err.body_text()),
        ),
        JsonRejection::BytesRejection(err) if err.status() == StatusCode::PAYLOAD_TOO_LARGE => {
            ApiError::PayloadTooLarge { limit: BODY_LIMIT }
        }
        other => ApiError::bad_request("invalid_body", other.body_text()),
    }
}

/// `axum::extract::Query`, with a rejection answered as `{"error", "message"}`.
#[derive(Debug)]
pub struct ApiQuery<T>(pub T);

impl<S, T> axum::extract::FromRequestParts<S> for ApiQuery<T>
where
    T: DeserializeOwned,
    S: Send + Sync,
{
    type Rejection = ApiError;

    async fn from_request_parts(
        parts: &mut axum::http::request::Parts,
        state: &S,
    ) -> Result<Self, Self::Rejection> {
        match axum::extract::Query::<T>::from_request_parts(parts, state).await {
            Ok(axum::extract::Query(value)) => Ok(ApiQuery(value)),
            Err(rejection) => Err(ApiError::bad_request(
                "invalid_query",
                format!(
                    "The address's query is not what this endpoint takes: {}",
                    rejection.body_text()
                ),
            )),
        }
    }
}
