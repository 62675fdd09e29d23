//! Voice: a recording written down (dictation) and a reply read aloud, through a provider's
//! OpenAI-compatible audio API.
//!
//! Which provider and model do it is an administrator's choice; where they chose nothing, the
//! first provider whose model list (or declared models) has a speech model is used, so voice
//! works with no setting at all on an instance with OpenAI. A detection that found something is
//! kept for a minute (it costs a model list per provider); one that found nothing is not kept,
//! so a provider just added is seen at once.

use std::sync::{Arc, Mutex, PoisonError};
use std::time::{Duration, Instant};

use bytes::Bytes;
use llooma_providers::{ProviderError, SpeechRequest, Transcription};
use llooma_store::{Provider, SpeechSettings};
use llooma_types::{AdminSpeechView, SpeechChoiceView, SpeechSettingsView, SpeechView};

use crate::{App, AppError, TurnError};

/// OpenAI's speech-to-text models, the preferred first.
pub const OPENAI_STT_MODELS: [&str; 3] =
    ["gpt-4o-mini-transcribe", "gpt-4o-transcribe", "whisper-1"];
/// OpenAI's text-to-speech models, the preferred first.
pub const OPENAI_TTS_MODELS: [&str; 3] = ["gpt-4o-mini-tts", "tts-1", "tts-1-hd"];
/// OpenAI's voices.
pub const OPENAI_VOICES: [&str; 11] = [
    "alloy", "ash", "ballad", "coral", "echo", "fable", "nova", "onyx", "sage", "shimmer", "verse",
];
/// The voice when nobody chose one.
pub const DEFAULT_VOICE: &str = "alloy";
/// The largest recording accepted (OpenAI's own limit).
pub const MAX_RECORDING_BYTES: u64 = 25 * 1024 * 1024;
/// The longest text read aloud in one request (OpenAI's own limit).
pub const MAX_SPEECH_CHARS: usize = 4096;
/// How long a detection that found something is kept.
const DETECTION_KEPT: Duration = Duration::from_secs(60);

/// How long one exchange with the speech provider may take.
#[derive(Clone, Copy, Debug)]
pub struct SpeechLimits {
    pub timeout: Duration,
}

impl Default for SpeechLimits {
    fn default() -> Self {
        SpeechLimits { timeout: Duration::from_secs(60) }
    }
}

/// The speech state the application keeps: its limits and the last detection.
#[derive(Clone, Debug, Default)]
pub(crate) struct SpeechState {
    pub limits: SpeechLimits,
    detected: Arc<Mutex<Option<(Instant, Detected)>>>,
}

impl SpeechState {
    pub fn new(limits: SpeechLimits) -> Self {
        SpeechState { limits, detected: Arc::default() }
    }

    fn kept(&self) -> Option<Detected> {
        let kept = self.detected.lock().unwrap_or_else(PoisonError::into_inner);
        kept.as_ref().filter(|(at, _)| at.elapsed() < DETECTION_KEPT).map(|(_, d)| d.clone())
    }

    fn keep(&self, detected: &Detected) {
        let mut kept = self.detected.lock().unwrap_or_else(PoisonError::into_inner);
        *kept = (detected.stt.is_some() || detected.tts.is_some())
            .then(|| (Instant::now(), detected.clone()));
    }

    fn forget(&self) {
        *self.detected.lock().unwrap_or_else(PoisonError::into_inner) = None;
    }
}

/// Which way speech goes.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Direction {
    ToText,
    ToSpeech,
}

impl Direction {
    fn known(self) -> &'static [&'static str] {
        match self {
            Direction::ToText => &OPENAI_STT_MODELS,
            Direction::ToSpeech => &OPENAI_TTS_MODELS,
        }
    }

    /// Whether a model's name says it does this, for servers that name them otherwise
    /// (`Systran/faster-whisper-small`, `kokoro-tts`).
    fn looks_like(self, model: &str) -> bool {
        let model = model.to_ascii_lowercase();
        match self {
            Direction::ToText => model.contains("whisper") || model.contains("transcribe"),
            Direction::ToSpeech => {
                model.starts_with("tts-") || model.contains("-tts") || model.contains("tts-")
            }
        }
    }

    /// The speech model of this direction among `models`: a known name, the preferred first,
    /// else the first whose name says so.
    fn pick(self, models: &[String]) -> Option<String> {
        let known = self.known().iter().find(|k| models.iter().any(|m| m == *k));
        known
            .map(|k| (*k).to_owned())
            .or_else(|| models.iter().find(|m| self.looks_like(m)).cloned())
    }
}

/// One direction in effect.
#[derive(Clone, Debug, PartialEq, Eq)]
pub(crate) struct InEffect {
    provider: Provider,
    model: String,
    auto_detected: bool,
}

impl InEffect {
    fn view(&self) -> SpeechChoiceView {
        SpeechChoiceView {
            provider_id: self.provider.id.clone(),
            provider_name: self.provider.name.clone(),
            model: self.model.clone(),
            auto_detected: self.auto_detected,
        }
    }
}

/// What detection found: the first provider with a model of each direction.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
struct Detected {
    stt: Option<InEffect>,
    tts: Option<InEffect>,
}

/// Both directions in effect, the voice, and why a choice is not in effect.
struct Effective {
    stt: Option<InEffect>,
    tts: Option<InEffect>,
    voice: String,
    notes: Vec<String>,
}

/// A spoken answer.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct SpokenAudio {
    pub content_type: String,
    pub bytes: Bytes,
}

/// The file name a recording is sent under (providers read the format from its extension) for
/// the type a browser recorded it as; `None` for a type no provider reads.
pub fn recording_file_name(content_type: &str) -> Option<&'static str> {
    let base = content_type.split(';').next().unwrap_or_default().trim().to_ascii_lowercase();
    Some(match base.as_str() {
        "audio/webm" | "video/webm" => "recording.webm",
        "audio/mp4" | "video/mp4" => "recording.mp4",
        "audio/m4a" | "audio/x-m4a" => "recording.m4a",
        "audio/mpeg" | "audio/mp3" | "audio/mpga" => "recording.mp3",
        "audio/ogg" | "application/ogg" | "audio/opus" => "recording.ogg",
        "audio/wav" | "audio/x-wav" | "audio/wave" | "audio/vnd.wave" => "recording.wav",
        "audio/flac" | "audio/x-flac" => "recording.flac",
        _ => return None,
    })
}

/// Why a recording of this type is refused.
pub fn unsupported_recording(content_type: &str) -> String {
    let shown = if content_type.is_empty() { "(none)" } else { content_type };
    format!(
        "A recording of type {shown} cannot be written down: send WebM, MP4/M4A, MP3, Ogg, WAV \
         or FLAC audio, with its type in the Content-Type header."
    )
}

/// A voice name as a person or an administrator may write it.
pub fn checked_voice(voice: &str) -> Result<String, AppError> {
    let voice = voice.trim();
    let fine = (1..=64).contains(&voice.len())
        && voice.chars().all(|c| c.is_ascii_alphanumeric() || "_-.".contains(c));
    if fine {
        Ok(voice.to_owned())
    } else {
        Err(AppError::invalid(
            "invalid_voice",
            "A voice is a name of 1 to 64 letters, digits, '_', '-' or '.' (such as alloy).",
        ))
    }
}

impl App {
    /// What a person's page needs for voice.
    pub async fn speech_view(&self, account_id: &str) -> Result<SpeechView, AppError> {
        let effective = self.effective_speech(false).await?;
        let own_voice = self.store.speech_voice(account_id).await?;
        let mut voices: Vec<String> = OPENAI_VOICES.iter().map(|v| (*v).to_owned()).collect();
        for extra in [Some(&effective.voice), own_voice.as_ref()].into_iter().flatten() {
            if !voices.contains(extra) {
                voices.insert(0, extra.clone());
            }
        }
        Ok(SpeechView {
            dictation: effective.stt.is_some(),
            read_aloud: effective.tts.is_some(),
            voice: own_voice.clone().unwrap_or(effective.voice),
            own_voice,
            voices,
            max_recording_bytes: MAX_RECORDING_BYTES,
            max_speech_characters: MAX_SPEECH_CHARS,
        })
    }

    /// Sets (or with `None` or `""` clears) the voice a person hears replies in.
    pub async fn set_own_voice(
        &self,
        account_id: &str,
        voice: Option<&str>,
    ) -> Result<SpeechView, AppError> {
        let voice = voice.filter(|v| !v.trim().is_empty()).map(checked_voice).transpose()?;
        self.store.set_speech_voice(account_id, voice).await?;
        self.speech_view(account_id).await
    }

    /// The speech settings as chosen and as in effect (detection done afresh).
    pub async fn admin_speech(&self) -> Result<AdminSpeechView, AppError> {
        let settings = self.store.speech_settings().await?;
        let effective = self.effective_speech(true).await?;
        Ok(AdminSpeechView {
            settings: SpeechSettingsView {
                stt_provider_id: settings.stt_provider_id,
                stt_model: settings.stt_model,
                tts_provider_id: settings.tts_provider_id,
                tts_model: settings.tts_model,
                tts_voice: settings.tts_voice,
            },
            transcription: effective.stt.as_ref().map(InEffect::view),
            speech: effective.tts.as_ref().map(InEffect::view),
            voice: effective.voice,
            notes: effective.notes,
        })
    }

    /// Replaces the speech settings: each direction's provider and model (a model needs its
    /// provider; a provider without a model has its model detected), and the voice.
    pub async fn set_admin_speech(
        &self,
        settings: SpeechSettingsView,
    ) -> Result<AdminSpeechView, AppError> {
        let text = |v: Option<String>| v.map(|v| v.trim().to_owned()).filter(|v| !v.is_empty());
        let mut chosen = SpeechSettings {
            stt_provider_id: text(settings.stt_provider_id),
            stt_model: text(settings.stt_model),
            tts_provider_id: text(settings.tts_provider_id),
            tts_model: text(settings.tts_model),
            tts_voice: text(settings.tts_voice).map(|v| checked_voice(&v)).transpose()?,
        };
        for (provider, model) in [
            (&chosen.stt_provider_id, &chosen.stt_model),
            (&chosen.tts_provider_id, &chosen.tts_model),
        ] {
            if let Some(model) = model
                && (model.len() > 200 || model.chars().any(char::is_control))
            {
                return Err(AppError::invalid(
                    "invalid_speech_settings",
                    "A model name has at most 200 characters and no line breaks.",
                ));
            }
            match provider {
                None if model.is_some() => {
                    return Err(AppError::invalid(
                        "invalid_speech_settings",
                        "A speech model needs its provider: give the provider's id with it, or \
                         leave both empty to use the first provider that offers one.",
                    ));
                }
                Some(id) if self.store.provider(id).await?.is_none() => {
                    return Err(AppError::invalid(
                        "unknown_provider",
                        "There is no such model provider; choose one of Admin → Providers.",
                    ));
                }
                _ => {}
            }
        }
        chosen = self.store.set_speech_settings(chosen).await?;
        tracing::info!(?chosen, "speech settings changed");
        self.speech.forget();
        self.admin_speech().await
    }

    /// Writes a recording down: the text the provider heard.
    pub async fn transcribe(
        &self,
        account_id: &str,
        audio: Vec<u8>,
        content_type: Option<&str>,
    ) -> Result<String, AppError> {
        if audio.is_empty() {
            return Err(AppError::unprocessable(
                "empty_recording",
                "The recording is empty (nothing was recorded); record again, and check that \
                 the browser may use the microphone.",
            ));
        }
        let content_type = content_type.unwrap_or_default();
        let Some(file_name) = recording_file_name(content_type) else {
            return Err(AppError::unprocessable(
                "unsupported_recording",
                unsupported_recording(content_type),
            ));
        };
        let effective = self.effective_speech(false).await?;
        let Some(stt) = effective.stt else {
            return Err(AppError::unprocessable(
                "speech_unavailable",
                "Dictation is not set up on this instance: an administrator adds a provider that \
                 offers a speech-to-text model (OpenAI's whisper-1, or a local server such as \
                 speaches), or chooses one under Admin → Speech.",
            ));
        };
        let client = self.speech_client(&stt).await?;
        let base_type = content_type.split(';').next().unwrap_or_default().trim().to_owned();
        let request = Transcription {
            model: stt.model.clone(),
            audio: audio.into(),
            content_type: base_type,
            file_name: file_name.to_owned(),
            language: None,
        };
        let text = client
            .transcribe(&request, self.speech.limits.timeout)
            .await
            .map_err(|e| self.speech_failure(&stt, Direction::ToText, e))?;
        let text = text.trim();
        if text.is_empty() {
            return Err(AppError::unprocessable(
                "nothing_heard",
                "No words were heard in the recording; record again, speaking closer to the \
                 microphone.",
            ));
        }
        tracing::debug!(account = %account_id, characters = text.chars().count(), "recording written down");
        Ok(text.to_owned())
    }

    /// Reads a text aloud in the voice given, else the person's, else the administrator's.
    pub async fn speak(
        &self,
        account_id: &str,
        text: &str,
        voice: Option<&str>,
    ) -> Result<SpokenAudio, AppError> {
        let text = text.trim();
        if text.is_empty() {
            return Err(AppError::invalid("invalid_text", "There is no text to read aloud."));
        }
        let characters = text.chars().count();
        if characters > MAX_SPEECH_CHARS {
            return Err(AppError::invalid(
                "text_too_long",
                format!(
                    "A text read aloud at once has at most {MAX_SPEECH_CHARS} characters (this \
                     one has {characters}); send it in parts."
                ),
            ));
        }
        let voice = voice.map(checked_voice).transpose()?;
        let effective = self.effective_speech(false).await?;
        let Some(tts) = effective.tts else {
            return Err(AppError::unprocessable(
                "speech_unavailable",
                "Reading aloud is not set up on this instance: an administrator adds a provider \
                 that offers a text-to-speech model (OpenAI's tts-1, or a local server such as \
                 speaches), or chooses one under Admin → Speech.",
            ));
        };
        let voice = match voice {
            Some(voice) => voice,
            None => self.store.speech_voice(account_id).await?.unwrap_or(effective.voice),
        };
        let client = self.speech_client(&tts).await?;
        let request = SpeechRequest { model: tts.model.clone(), input: text.to_owned(), voice };
        let audio = client
            .speak(&request, self.speech.limits.timeout)
            .await
            .map_err(|e| self.speech_failure(&tts, Direction::ToSpeech, e))?;
        Ok(SpokenAudio { content_type: audio.content_type, bytes: audio.bytes })
    }

    async fn speech_client(
        &self,
        chosen: &InEffect,
    ) -> Result<llooma_providers::ProviderClient, AppError> {
        match self.provider_client(&chosen.provider.id).await {
            Ok(client) => Ok(client),
            Err(TurnError::ProviderRemoved) => {
                self.speech.forget();
                Err(AppError::conflict(
                    "speech_changed",
                    "The speech provider was just removed; try again to use another.",
                ))
            }
            Err(error) => Err(AppError::Internal(format!("speech client: {error}"))),
        }
    }

    /// A provider's failure as the person reads it: what happened and what to do, never the
    /// provider's own words (those go to the log).
    fn speech_failure(
        &self,
        chosen: &InEffect,
        direction: Direction,
        error: ProviderError,
    ) -> AppError {
        tracing::warn!(provider = %chosen.provider.id, model = %chosen.model, %error, "speech request failed");
        let name = &chosen.provider.name;
        let seconds = self.speech.limits.timeout.as_secs();
        let nothing_lost = match direction {
            Direction::ToText => "Nothing was lost: send the recording again",
            Direction::ToSpeech => "Nothing was lost: try again",
        };
        let (code, message) = match &error {
            ProviderError::Unreachable { .. }
            | ProviderError::ConnectTimeout { .. }
            | ProviderError::Refused { .. }
            | ProviderError::Network(_) => (
                "speech_unreachable",
                format!(
                    "The speech service ({name}) could not be reached. {nothing_lost} in a \
                     moment; if it keeps happening, an administrator checks the provider under \
                     Admin → Providers."
                ),
            ),
            ProviderError::TimedOut { .. }
            | ProviderError::FirstByteTimeout { .. }
            | ProviderError::IdleTimeout { .. } => (
                "speech_timeout",
                format!(
                    "The speech service ({name}) did not answer within {seconds} seconds. \
                     {nothing_lost}, perhaps shorter."
                ),
            ),
            ProviderError::KeyRefused { .. } | ProviderError::InvalidKey => (
                "speech_refused",
                format!(
                    "The speech service ({name}) refused the provider's key; an administrator \
                     checks it under Admin → Providers."
                ),
            ),
            ProviderError::RateLimited { .. } => (
                "speech_refused",
                format!(
                    "The speech service ({name}) is limiting requests right now. {nothing_lost} \
                     in a minute."
                ),
            ),
            ProviderError::Rejected { .. } if direction == Direction::ToText => (
                "recording_not_understood",
                format!(
                    "The speech service ({name}) could not use this recording: it may be too \
                     short, or in a format it does not read. Record again."
                ),
            ),
            ProviderError::Rejected { .. } => (
                "speech_refused",
                format!(
                    "The speech service ({name}) refused the request (the model {} or the voice \
                     may not exist there); an administrator checks Admin → Speech.",
                    chosen.model
                ),
            ),
            ProviderError::ServerError { .. } => (
                "speech_failed",
                format!("The speech service ({name}) failed on its side. {nothing_lost} later."),
            ),
            _ => (
                "speech_not_understood",
                format!(
                    "The speech service's answer ({name}) could not be read (not what an \
                     OpenAI-compatible audio API sends, or far too large); an administrator \
                     checks that the provider's address points at such an API."
                ),
            ),
        };
        AppError::Unprocessable { code, message }
    }

    /// Both directions as in effect: the administrator's choice where there is one (its model
    /// detected on its provider when not given), else detection; `fresh` detects again rather
    /// than using a kept detection.
    async fn effective_speech(&self, fresh: bool) -> Result<Effective, AppError> {
        let settings = self.store.speech_settings().await?;
        let mut notes = Vec::new();
        let stt = self
            .chosen_speech(
                settings.stt_provider_id.as_deref(),
                settings.stt_model.as_deref(),
                Direction::ToText,
                &mut notes,
            )
            .await?;
        let tts = self
            .chosen_speech(
                settings.tts_provider_id.as_deref(),
                settings.tts_model.as_deref(),
                Direction::ToSpeech,
                &mut notes,
            )
            .await?;
        let detected = if stt.is_some() && tts.is_some() {
            Detected::default()
        } else {
            self.detect(fresh).await?
        };
        Ok(Effective {
            stt: stt.or(detected.stt),
            tts: tts.or(detected.tts),
            voice: settings.tts_voice.unwrap_or_else(|| DEFAULT_VOICE.to_owned()),
            notes,
        })
    }

    /// One direction as the administrator chose it; `None` (with a note when a choice is not
    /// usable) leaves it to detection.
    async fn chosen_speech(
        &self,
        provider_id: Option<&str>,
        model: Option<&str>,
        direction: Direction,
        notes: &mut Vec<String>,
    ) -> Result<Option<InEffect>, AppError> {
        let Some(provider_id) = provider_id else { return Ok(None) };
        let what = match direction {
            Direction::ToText => "speech to text",
            Direction::ToSpeech => "text to speech",
        };
        let Some(provider) = self.store.provider(provider_id).await? else {
            notes.push(format!(
                "The provider chosen for {what} was removed; the first provider that offers a \
                 model is used instead."
            ));
            return Ok(None);
        };
        if let Some(model) = model {
            return Ok(Some(InEffect { provider, model: model.to_owned(), auto_detected: false }));
        }
        let models = self.models_of(&provider).await;
        match direction.pick(&models) {
            Some(model) => Ok(Some(InEffect { provider, model, auto_detected: true })),
            None => {
                notes.push(format!(
                    "The provider chosen for {what} ({}) lists no such model; give the model's \
                     name. The first provider that offers one is used meanwhile.",
                    provider.name
                ));
                Ok(None)
            }
        }
    }

    /// The first provider with a speech-to-text model and the first with a text-to-speech
    /// model, by the models each lists and those declared for it.
    async fn detect(&self, fresh: bool) -> Result<Detected, AppError> {
        if !fresh && let Some(kept) = self.speech.kept() {
            return Ok(kept);
        }
        let providers = self.store.list_providers().await?;
        let lists = futures::future::join_all(providers.iter().map(|p| self.models_of(p))).await;
        let mut detected = Detected::default();
        for (provider, models) in providers.into_iter().zip(lists) {
            for (direction, slot) in
                [(Direction::ToText, &mut detected.stt), (Direction::ToSpeech, &mut detected.tts)]
            {
                if slot.is_none()
                    && let Some(model) = direction.pick(&models)
                {
                    *slot =
                        Some(InEffect { provider: provider.clone(), model, auto_detected: true });
                }
            }
        }
        self.speech.keep(&detected);
        Ok(detected)
    }

    /// A provider's models: those it lists (none when listing fails) and those declared.
    async fn models_of(&self, provider: &Provider) -> Vec<String> {
        let listed = match self.provider_client_for(provider.clone()) {
            Ok(client) => client.list_models().await.map_err(TurnError::from),
            Err(error) => Err(error),
        };
        let mut models = match listed {
            Ok(models) => models.into_iter().map(|m| m.id).collect(),
            Err(error) => {
                tracing::debug!(provider = %provider.id, %error, "no model list for speech detection");
                Vec::new()
            }
        };
        for declared in &provider.declared_models {
            if !models.contains(declared) {
                models.push(declared.clone());
            }
        }
        models
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn names(list: &[&str]) -> Vec<String> {
        list.iter().map(|m| (*m).to_owned()).collect()
    }

    #[test]
    fn speech_models_are_found_by_name() {
        let table: [(&[&str], Option<&str>, Option<&str>); 6] = [
            (&["gpt-4o", "whisper-1", "tts-1"], Some("whisper-1"), Some("tts-1")),
            (
                &["whisper-1", "gpt-4o-mini-transcribe", "tts-1-hd", "gpt-4o-mini-tts"],
                Some("gpt-4o-mini-transcribe"),
                Some("gpt-4o-mini-tts"),
            ),
            (&["Systran/faster-whisper-small"], Some("Systran/faster-whisper-small"), None),
            (&["kokoro-tts"], None, Some("kokoro-tts")),
            (&["llama3.1:8b", "gpt-4o-mini"], None, None),
            (&[], None, None),
        ];
        for (models, stt, tts) in table {
            let models = names(models);
            assert_eq!(Direction::ToText.pick(&models).as_deref(), stt, "{models:?}");
            assert_eq!(Direction::ToSpeech.pick(&models).as_deref(), tts, "{models:?}");
        }
    }

    #[test]
    fn a_recording_is_named_for_its_type() {
        let table = [
            ("audio/webm;codecs=opus", Some("recording.webm")),
            ("audio/mp4", Some("recording.mp4")),
            ("Audio/Ogg; codecs=opus", Some("recording.ogg")),
            ("audio/wav", Some("recording.wav")),
            ("application/json", None),
            ("", None),
        ];
        for (content_type, name) in table {
            assert_eq!(recording_file_name(content_type), name, "{content_type}");
        }
    }

    #[test]
    fn voices_are_short_names() {
        assert_eq!(checked_voice(" nova ").unwrap(), "nova");
        assert!(checked_voice("af_heart").is_ok());
        assert!(checked_voice("").is_err());
        assert!(checked_voice("a b").is_err());
        assert!(checked_voice(&"a".repeat(65)).is_err());
    }
}
