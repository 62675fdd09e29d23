//! Speech over the OpenAI-compatible audio API: a recording to text
//! (`POST {base}/audio/transcriptions`, a multipart form of `file` and `model`) and text to
//! audio (`POST {base}/audio/speech`, `{model, input, voice}`). OpenAI, speaches, LocalAI and
//! vLLM speak it.
//!
//! Each exchange has one deadline for the whole of it (sending, the provider's work, the
//! answer), and what is read of an answer is capped: a transcript is a small JSON document, a
//! spoken answer a few MiB of audio at most.

use std::time::Duration;

use bytes::Bytes;
use http::header::{self, HeaderMap};
use llooma_net::NetRequest;
use serde::Deserialize;
use tokio::time::Instant;

use crate::client::{ProviderClient, Waiting, read_chunk};
use crate::error::{Phase, ProviderError, excerpt, from_net};
use crate::multipart::Form;

/// The most a transcription answer may hold: its JSON with the text of a long recording.
pub const MAX_TRANSCRIPT_BYTES: usize = 256 * 1024;

/// The most a spoken answer may hold (a 4,096-character text is under 1 MiB of MP3).
pub const MAX_SPEECH_BYTES: usize = 10 * 1024 * 1024;

/// A recording to write down.
#[derive(Debug, Clone)]
pub struct Transcription {
    /// The speech-to-text model (`whisper-1`, `gpt-4o-mini-transcribe`, ...).
    pub model: String,
    /// The recording's bytes.
    pub audio: Bytes,
    /// Its type as recorded (`audio/webm`, `audio/mp4`, ...).
    pub content_type: String,
    /// The name it is sent under; providers read the format from its extension.
    pub file_name: String,
    /// The language spoken (ISO 639-1), when known; otherwise the provider guesses.
    pub language: Option<String>,
}

/// A text to read aloud.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct SpeechRequest {
    /// The text-to-speech model (`tts-1`, `gpt-4o-mini-tts`, ...).
    pub model: String,
    /// What to say.
    pub input: String,
    /// The voice (`alloy`, ...; local servers have their own names).
    pub voice: String,
}

/// Audio the provider made.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct SpeechAudio {
    /// Its type as the provider said (`audio/mpeg` unless asked otherwise).
    pub content_type: String,
    pub bytes: Bytes,
}

#[derive(Deserialize)]
struct TranscriptBody {
    text: String,
}

impl ProviderClient {
    /// Writes down a recording: its text as the provider heard it. The whole exchange must
    /// end `within` this long ([`ProviderError::TimedOut`]).
    pub async fn transcribe(
        &self,
        request: &Transcription,
        within: Duration,
    ) -> Result<String, ProviderError> {
        let url = &self.audio_urls.0;
        let mut form = Form::default()
            .file("file", &request.file_name, &request.content_type, request.audio.clone())
            .text("model", &request.model)
            .text("response_format", "json");
        if let Some(language) = &request.language {
            form = form.text("language", language);
        }
        let written = form.write();
        let builder = self
            .net
            .post(url)
            .map_err(|err| from_net(err, Phase::Send))?
            .headers(self.headers()?)
            .header(header::CONTENT_TYPE, written.content_type)
            .header(header::ACCEPT, "application/json")
            .body(written.body);
        tracing::debug!(%url, model = %request.model, bytes = request.audio.len(), "transcription request");
        let (_, body) =
            self.exchange(builder, url, within, MAX_TRANSCRIPT_BYTES, "transcript").await?;
        let parsed: TranscriptBody =
            serde_json::from_slice(&body).map_err(|err| ProviderError::MalformedResponse {
                problem: format!(
                    "the transcription answer is not {{\"text\": ...}} ({err}): {}",
                    excerpt(&String::from_utf8_lossy(&body), self.key())
                ),
            })?;
        Ok(parsed.text)
    }

    /// Reads a text aloud: the audio the provider made (MP3 unless it chose otherwise). The
    /// whole exchange must end `within` this long ([`ProviderError::TimedOut`]).
    pub async fn speak(
        &self,
        request: &SpeechRequest,
        within: Duration,
    ) -> Result<SpeechAudio, ProviderError> {
        let url = &self.audio_urls.1;
        let body = serde_json::json!({
            "model": request.model,
            "input": request.input,
            "voice": request.voice,
            "response_format": "mp3",
        });
        let builder = self
            .net
            .post(url)
            .map_err(|err| from_net(err, Phase::Send))?
            .headers(self.headers()?)
            .header(header::CONTENT_TYPE, "application/json")
            .header(header::ACCEPT, "audio/*")
            .body(body.to_string());
        tracing::debug!(%url, model = %request.model, characters = request.input.chars().count(), "speech request");
        let (headers, bytes) =
            self.exchange(builder, url, within, MAX_SPEECH_BYTES, "spoken answer").await?;
        let content_type = headers
            .get(header::CONTENT_TYPE)
            .and_then(|v| v.to_str().ok())
            .map(|v| v.trim().to_ascii_lowercase())
            .unwrap_or_default();
        let audio = content_type.starts_with("audio/")
            || content_type.starts_with("application/octet-stream")
            || content_type.is_empty();
        if !audio {
            return Err(ProviderError::MalformedResponse {
                problem: format!(
                    "audio was asked for but the answer is {content_type}: {}",
                    excerpt(&String::from_utf8_lossy(&bytes), self.key())
                ),
            });
        }
        if bytes.is_empty() {
            return Err(ProviderError::MalformedResponse {
                problem: "audio was asked for but the answer is empty".to_owned(),
            });
        }
        let content_type =
            if content_type.starts_with("audio/") { content_type } else { "audio/mpeg".to_owned() };
        Ok(SpeechAudio { content_type, bytes: bytes.into() })
    }

    /// Sends and reads the whole answer, at most `cap` bytes, all before `within` runs out.
    pub(crate) async fn exchange(
        &self,
        builder: NetRequest,
        url: &str,
        within: Duration,
        cap: usize,
        what: &'static str,
    ) -> Result<(HeaderMap, Vec<u8>), ProviderError> {
        let deadline = Instant::now() + within;
        let timed_out = || ProviderError::TimedOut { url: url.to_owned(), after: within };
        let exchange = async {
            let mut response = self.send(builder, url, deadline).await?;
            let headers = response.headers().clone();
            let mut body = Vec::new();
            while let Some(chunk) =
                read_chunk(&mut response, deadline, url, Waiting::Idle(within)).await?
            {
                if body.len() + chunk.len() > cap {
                    return Err(ProviderError::AnswerTooLarge { what, limit: cap as u64 });
                }
                body.extend_from_slice(&chunk);
            }
            Ok((headers, body))
        };
        match tokio::time::timeout_at(deadline, exchange).await {
            Ok(Err(ProviderError::FirstByteTimeout { .. } | ProviderError::IdleTimeout { .. }))
            | Err(_) => Err(timed_out()),
            Ok(answer) => answer,
        }
    }
}
