//! Files a person attaches to messages: `POST /api/v1/conversations/{id}/files` receives one
//! (the bytes as the body, streamed and bounded), `GET /api/v1/files/{id}` (and
//! `.../thumbnail`) serves it back to its owner only, `DELETE` removes one not sent yet.
//!
//! Served so that nothing a person uploaded can act in the instance's origin: the type decided
//! from the bytes when it was received (an SVG or an HTML file is text), `nosniff`, a
//! `sandbox` policy (no script, no same-origin access even if a browser rendered it), and
//! documents as downloads.

use axum::Json;
use axum::body::Body;
use axum::extract::{Path, State};
use axum::http::{HeaderValue, StatusCode, header};
use axum::response::{IntoResponse, Response};
use futures::StreamExt;
use llooma_core::uploads::ArrivingUpload;
use llooma_types::{FileUsage, FileView};
use serde::Deserialize;

use crate::AppState;
use crate::download::{Disposition, content_disposition};
use crate::error::ApiError;
use crate::extract::ApiQuery;
use crate::session::{Admin, SignedIn};

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
pub struct UploadQuery {
    /// The file's name as the person's browser gave it.
    name: String,
}

/// `POST /api/v1/conversations/{id}/files?name=`: the body is the file.
pub async fn upload(
    State(state): State<AppState>,
    signed_in: SignedIn,
    Path(id): Path<String>,
    ApiQuery(query): ApiQuery<UploadQuery>,
    body: Body,
) -> Result<(StatusCode, Json<FileView>), ApiError> {
    let limit = state.app.file_limits().max_upload_bytes;
    let declared = axum::body::HttpBody::size_hint(&body).exact();
    let mut arriving = state.app.arriving_upload(declared.filter(|d| *d <= limit)).await?;
    read_into(body, limit, |limit_bytes| ApiError::FileTooLarge { limit_bytes }, &mut arriving)
        .await?;
    let view = state.app.upload_file(&signed_in.account.id, &id, &query.name, arriving).await?;
    Ok((StatusCode::CREATED, Json(view)))
}

/// Where a request body goes as it arrives.
pub(crate) trait BodySink {
    /// Bytes received so far.
    fn received(&self) -> usize;
    async fn put(&mut self, chunk: &[u8]) -> Result<(), ApiError>;
}

impl BodySink for Vec<u8> {
    fn received(&self) -> usize {
        self.len()
    }

    async fn put(&mut self, chunk: &[u8]) -> Result<(), ApiError> {
        if self.is_empty() && self.capacity() < chunk.len() {
            // Most bodies arrive in many chunks: room for a few of them at once.
            self.reserve(chunk.len().max(64 * 1024));
        }
        self.extend_from_slice(chunk);
        Ok(())
    }
}

impl BodySink for ArrivingUpload {
    fn received(&self) -> usize {
        usize::try_from(self.len()).unwrap_or(usize::MAX)
    }

    async fn put(&mut self, chunk: &[u8]) -> Result<(), ApiError> {
        Ok(ArrivingUpload::put(self, chunk).await?)
    }
}

/// The body, read as it arrives into one buffer (of the declared length when there is one, so
/// a large file is not copied as the buffer grows), refused (`too_large` of the limit) as soon
/// as it passes `limit`.
pub(crate) async fn read_bounded(
    body: Body,
    limit: u64,
    too_large: impl Fn(usize) -> ApiError,
) -> Result<Vec<u8>, ApiError> {
    let declared = axum::body::HttpBody::size_hint(&body).exact();
    let capacity = declared.filter(|d| *d <= limit).and_then(|d| usize::try_from(d).ok());
    let mut bytes = Vec::with_capacity(capacity.unwrap_or(0));
    read_into(body, limit, too_large, &mut bytes).await?;
    Ok(bytes)
}

/// Reads the body into `sink` as it arrives, refused (`too_large` of the limit) as soon as it
/// declares or passes more than `limit`.
pub(crate) async fn read_into(
    body: Body,
    limit: u64,
    too_large: impl Fn(usize) -> ApiError,
    sink: &mut impl BodySink,
) -> Result<(), ApiError> {
    let declared_too_large =
        axum::body::HttpBody::size_hint(&body).exact().is_some_and(|d| d > limit);
    let limit = usize::try_from(limit).unwrap_or(usize::MAX);
    let too_large = || too_large(limit);
    let mut stream = body.into_data_stream();
    if declared_too_large {
        drain(stream, 0, limit).await;
        return Err(too_large());
    }
    while let Some(chunk) = stream.next().await {
        let chunk = chunk.map_err(|_| ApiError::BadRequest {
            code: "upload_cut",
            message: "The upload was cut off before its end; send the file again.".into(),
        })?;
        let seen = sink.received() + chunk.len();
        if seen > limit {
            drain(stream, seen, limit).await;
            return Err(too_large());
        }
        sink.put(&chunk).await?;
    }
    Ok(())
}

/// Reads and drops the rest of a refused upload, so that its sender, still writing, gets the
/// answer rather than a reset connection (browsers and most clients read the answer only once
/// their body is sent). Nothing is kept; past four times the limit the connection is dropped
/// instead, and the request pacing bounds how long this can take.
async fn drain(
    mut stream: impl futures::Stream<Item = Result<axum::body::Bytes, axum::Error>> + Unpin,
    mut seen: usize,
    limit: usize,
) {
    let cap = limit.saturating_mul(4).max(64 * 1024 * 1024);
    while let Some(Ok(chunk)) = stream.next().await {
        seen += chunk.len();
        if seen > cap {
            return;
        }
    }
}

/// `GET /api/v1/files/{id}`.
pub async fn download(
    State(state): State<AppState>,
    signed_in: SignedIn,
    Path(id): Path<String>,
) -> Result<Response, ApiError> {
    let (view, content_type, bytes) =
        state.app.file_bytes(&signed_in.account.id, &id, false).await?;
    Ok(served(&view, &content_type, bytes))
}

/// `GET /api/v1/files/{id}/thumbnail`: an image's small version.
pub async fn thumbnail(
    State(state): State<AppState>,
    signed_in: SignedIn,
    Path(id): Path<String>,
) -> Result<Response, ApiError> {
    let (view, content_type, bytes) =
        state.app.file_bytes(&signed_in.account.id, &id, true).await?;
    Ok(served(&view, &content_type, bytes))
}

/// `DELETE /api/v1/files/{id}`: a file not sent yet.
pub async fn delete(
    State(state): State<AppState>,
    signed_in: SignedIn,
    Path(id): Path<String>,
) -> Result<StatusCode, ApiError> {
    state.app.delete_file(&signed_in.account.id, &id).await?;
    Ok(StatusCode::NO_CONTENT)
}

/// A stored file as a response that cannot run in the instance's origin.
fn served(view: &FileView, content_type: &str, bytes: Vec<u8>) -> Response {
    let mut response = Body::from(bytes).into_response();
    let headers = response.headers_mut();
    let content_type = HeaderValue::from_str(content_type)
        .unwrap_or(HeaderValue::from_static("application/octet-stream"));
    headers.insert(header::CONTENT_TYPE, content_type);
    headers.insert("x-content-type-options", HeaderValue::from_static("nosniff"));
    headers.insert(header::CONTENT_SECURITY_POLICY, HeaderValue::from_static("sandbox"));
    // A file never changes under its id; it is the account's own.
    headers.insert(header::CACHE_CONTROL, HeaderValue::from_static("private, max-age=86400"));
    let disposition =
        if view.kind == "image" { Disposition::Inline } else { Disposition::Attachment };
    headers.insert(header::CONTENT_DISPOSITION, content_disposition(disposition, &view.name));
    response
}

/// `GET /api/v1/admin/files`: how much each account's files take, and the limits.
pub async fn usage(
    State(state): State<AppState>,
    _admin: Admin,
) -> Result<Json<FileUsage>, ApiError> {
    Ok(Json(state.app.file_usage().await?))
}
