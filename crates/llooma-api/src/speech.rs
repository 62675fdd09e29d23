//! Voice: `POST /api/v1/speech/transcriptions` writes a recording down (the body is the audio,
//! streamed and bounded), `POST /api/v1/speech/speak` reads a text aloud (the answer is the
//! audio), `GET`/`PATCH /api/v1/speech` what a person's page needs and their own voice, and
//! `GET`/`PUT /api/v1/admin/speech` an administrator's choice of provider, model and voice.

use axum::Json;
use axum::body::Body;
use axum::extract::State;
use axum::http::{HeaderMap, HeaderValue, header};
use axum::response::{IntoResponse, Response};
use llooma_core::speech::{MAX_RECORDING_BYTES, recording_file_name, unsupported_recording};
use llooma_types::{AdminSpeechView, SpeechSettingsView, SpeechView};
use serde::{Deserialize, Serialize};

use crate::AppState;
use crate::error::ApiError;
use crate::extract::ApiJson;
use crate::files::read_bounded;
use crate::session::{Admin, SignedIn};

/// `GET /api/v1/speech`.
pub async fn get(
    State(state): State<AppState>,
    signed_in: SignedIn,
) -> Result<Json<SpeechView>, ApiError> {
    Ok(Json(state.app.speech_view(&signed_in.account.id).await?))
}

#[derive(Deserialize)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct OwnVoiceBody {
    /// `null` or `""`: the administrator's voice.
    voice: Option<String>,
}

/// `PATCH /api/v1/speech`: the person's own voice.
pub async fn patch(
    State(state): State<AppState>,
    signed_in: SignedIn,
    ApiJson(body): ApiJson<OwnVoiceBody>,
) -> Result<Json<SpeechView>, ApiError> {
    Ok(Json(state.app.set_own_voice(&signed_in.account.id, body.voice.as_deref()).await?))
}

#[derive(Serialize)]
pub struct TranscriptView {
    text: String,
}

/// `POST /api/v1/speech/transcriptions`: the body is the recording, its `Content-Type` the type
/// the browser recorded it as.
pub async fn transcribe(
    State(state): State<AppState>,
    signed_in: SignedIn,
    headers: HeaderMap,
    body: Body,
) -> Result<Json<TranscriptView>, ApiError> {
    let content_type =
        headers.get(header::CONTENT_TYPE).and_then(|v| v.to_str().ok()).unwrap_or_default();
    // Refused before a byte of a recording is read.
    if recording_file_name(content_type).is_none() {
        return Err(ApiError::UnsupportedRecording(unsupported_recording(content_type)));
    }
    let audio = read_bounded(body, MAX_RECORDING_BYTES, |limit_bytes| {
        ApiError::RecordingTooLarge { limit_bytes }
    })
    .await?;
    let text = state.app.transcribe(&signed_in.account.id, audio, Some(content_type)).await?;
    Ok(Json(TranscriptView { text }))
}

#[derive(Deserialize)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct SpeakBody {
    text: String,
    #[serde(default)]
    voice: Option<String>,
}

/// `POST /api/v1/speech/speak`: the audio of the text, with the type the provider gave it.
pub async fn speak(
    State(state): State<AppState>,
    signed_in: SignedIn,
    ApiJson(body): ApiJson<SpeakBody>,
) -> Result<Response, ApiError> {
    let voice = body.voice.as_deref().filter(|v| !v.trim().is_empty());
    let audio = state.app.speak(&signed_in.account.id, &body.text, voice).await?;
    let mut response = Body::from(audio.bytes).into_response();
    let headers = response.headers_mut();
    let content_type = HeaderValue::from_str(&audio.content_type)
        .unwrap_or(HeaderValue::from_static("audio/mpeg"));
    headers.insert(header::CONTENT_TYPE, content_type);
    headers.insert("x-content-type-options", HeaderValue::from_static("nosniff"));
    headers.insert(header::CACHE_CONTROL, HeaderValue::from_static("private, no-store"));
    Ok(response)
}

/// `GET /api/v1/admin/speech`: the settings and what is in effect.
pub async fn admin_get(
    State(state): State<AppState>,
    _admin: Admin,
) -> Result<Json<AdminSpeechView>, ApiError> {
    Ok(Json(state.app.admin_speech().await?))
}

#[derive(Deserialize)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct SpeechSettingsBody {
    #[serde(default)]
    stt_provider_id: Option<String>,
    #[serde(default)]
    stt_model: Option<String>,
    #[serde(default)]
    tts_provider_id: Option<String>,
    #[serde(default)]
    tts_model: Option<String>,
    #[serde(default)]
    tts_voice: Option<String>,
}

/// `PUT /api/v1/admin/speech`: replaces the settings; what is absent or empty is detected.
pub async fn admin_put(
    State(state): State<AppState>,
    Admin(admin): Admin,
    ApiJson(body): ApiJson<SpeechSettingsBody>,
) -> Result<Json<AdminSpeechView>, ApiError> {
    let settings = SpeechSettingsView {
        stt_provider_id: body.stt_provider_id,
        stt_model: body.stt_model,
        tts_provider_id: body.tts_provider_id,
        tts_model: body.tts_model,
        tts_voice: body.tts_voice,
    };
    let view = state.app.set_admin_speech(settings).await?;
    tracing::info!(admin = %admin.account.id, "speech settings changed");
    Ok(Json(view))
}
