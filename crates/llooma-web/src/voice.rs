//! Voice in a conversation: dictation into the message box, replies read aloud, and voice mode
//! (the person talks, the message goes when they stop, the reply is read aloud, and again until
//! they leave), whose turns are spoken turns. What the instance offers comes from
//! `GET /api/v1/speech`, asked once the page is live (it may ask the providers for their models).

use leptos::prelude::*;
use llooma_types::SpeechView;
use serde_json::json;

use crate::api;
use crate::layout::Sign;
use crate::media::{self, Recording};

/// Where the voice controls are.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum VoiceState {
    Idle,
    /// Recording for the message box.
    Dictating,
    /// A recording is being written down.
    Writing,
    /// Voice mode: recording until the person stops talking.
    Listening,
    /// Voice mode: the message was sent; the reply is being written.
    Waiting,
    /// Voice mode: the reply is being read aloud.
    Reading,
}

/// The voice controls' state, shared by the composer, the replies and voice mode.
#[derive(Clone, Copy)]
pub struct Voice {
    pub speech: RwSignal<Option<SpeechView>>,
    pub state: RwSignal<VoiceState>,
    /// Voice mode is on.
    pub mode: RwSignal<bool>,
    /// The person pressed "Send now" while talking.
    send_now: RwSignal<bool>,
    recording: StoredValue<Option<Recording>, LocalStorage>,
    csrf: StoredValue<String>,
    error: RwSignal<Option<String>>,
}

/// Quieter than this is silence (the meter's 0 to 1 scale).
const QUIET: f32 = 0.015;
/// This long quiet after speech ends a message in voice mode.
const QUIET_MS: i32 = 1500;
/// A message in voice mode is at most this long.
const LONGEST_MS: i32 = 120_000;
/// How often the meter is read.
const TICK_MS: i32 = 100;

/// Hears when a person has finished talking: some speech, then [`QUIET_MS`] of quiet (silence
/// before the first word never ends a message), or [`LONGEST_MS`] in all.
#[derive(Debug, Default)]
struct EndOfSpeech {
    heard_speech: bool,
    quiet_ms: i32,
    elapsed_ms: i32,
}

impl EndOfSpeech {
    /// Takes the level read after `ms` more milliseconds; true once the message is over.
    fn hear(&mut self, level: f32, ms: i32) -> bool {
        self.elapsed_ms += ms;
        if level > QUIET {
            self.heard_speech = true;
            self.quiet_ms = 0;
        } else if self.heard_speech {
            self.quiet_ms += ms;
        }
        (self.heard_speech && self.quiet_ms >= QUIET_MS) || self.elapsed_ms >= LONGEST_MS
    }
}

impl Voice {
    pub fn new(csrf: String, error: RwSignal<Option<String>>) -> Voice {
        let voice = Voice {
            speech: RwSignal::new(None),
            state: RwSignal::new(VoiceState::Idle),
            mode: RwSignal::new(false),
            send_now: RwSignal::new(false),
            recording: StoredValue::new_local(None),
            csrf: StoredValue::new(csrf),
            error,
        };
        api::spawn(async move {
            if let Ok(json) = api::call("GET", "/api/v1/speech", None, None).await
                && let Ok(speech) = serde_json::from_value::<SpeechView>(json)
            {
                voice.speech.set(Some(speech));
            }
        });
        voice
    }

    pub fn dictation(self) -> bool {
        self.speech.with(|s| s.as_ref().is_some_and(|s| s.dictation))
    }

    pub fn read_aloud(self) -> bool {
        self.speech.with(|s| s.as_ref().is_some_and(|s| s.read_aloud))
    }

    fn longest_text(self) -> usize {
        self.speech.with_untracked(|s| s.as_ref().map_or(4096, |s| s.max_speech_characters))
    }

    /// Reads `text` aloud (stopping whatever was being read).
    pub async fn read(self, text: String) -> Result<(), api::Failure> {
        media::stop_all_reading();
        media::begin_reading();
        media::read_aloud(&text, self.longest_text(), &self.csrf.get_value()).await
    }

    /// The mic button: the first press records, the second writes down what was said and adds
    /// it to the message box (`add`), for the person to edit and send.
    pub fn dictate(self, add: impl Fn(String) + 'static) {
        match self.state.get_untracked() {
            VoiceState::Idle => {
                self.error.set(None);
                self.state.set(VoiceState::Dictating);
                api::spawn(async move {
                    match media::start_recording().await {
                        Ok(recording) => self.recording.set_value(Some(recording)),
                        Err(failure) => {
                            self.state.set(VoiceState::Idle);
                            self.error.set(Some(failure.message));
                        }
                    }
                });
            }
            VoiceState::Dictating => {
                let Some(recording) = self.recording.try_update_value(Option::take).flatten()
                else {
                    return;
                };
                self.state.set(VoiceState::Writing);
                api::spawn(async move {
                    let heard = self.written_down(recording).await;
                    self.state.set(VoiceState::Idle);
                    match heard {
                        Ok(text) => add(text),
                        Err(failure) => self.error.set(Some(failure.message)),
                    }
                });
            }
            _ => {}
        }
    }

    async fn written_down(self, recording: Recording) -> Result<String, api::Failure> {
        let (blob, kind) = recording.finish().await?;
        media::transcribe(&blob, &kind, &self.csrf.get_value()).await
    }

    /// Voice mode: records until the person has spoken and then been quiet (or pressed "Send
    /// now"), and gives what they said; `None` when they left voice mode meanwhile or said
    /// nothing.
    pub async fn listen(self) -> Result<Option<String>, api::Failure> {
        self.state.set(VoiceState::Listening);
        self.send_now.set(false);
        let recording = media::start_recording().await?;
        let mut end = EndOfSpeech::default();
        loop {
            media::sleep_ms(TICK_MS).await;
            if !self.mode.get_untracked() {
                recording.cancel();
                return Ok(None);
            }
            if self.send_now.get_untracked() || end.hear(recording.level(), TICK_MS) {
                break;
            }
        }
        self.state.set(VoiceState::Writing);
        match self.written_down(recording).await {
            Ok(text) if !text.trim().is_empty() => Ok(Some(text.trim().to_owned())),
            Ok(_) => Ok(None),
            Err(failure) if failure.code == "nothing_heard" => Ok(None),
            Err(failure) => Err(failure),
        }
    }

    /// Leaves voice mode: stops listening and reading.
    pub fn leave(self) {
        self.mode.set(false);
        media::stop_all_reading();
        if let Some(recording) = self.recording.try_update_value(Option::take).flatten() {
            recording.cancel();
        }
        self.state.set(VoiceState::Idle);
    }

    /// Saves the person's own voice (empty: the administrator's).
    fn choose_voice(self, voice: String) {
        let csrf = self.csrf.get_value();
        api::spawn(async move {
            let body = json!({ "voice": voice });
            match api::call("PATCH", "/api/v1/speech", Some(body), Some(&csrf)).await {
                Ok(json) => {
                    if let Ok(speech) = serde_json::from_value::<SpeechView>(json) {
                        self.speech.set(Some(speech));
                    }
                }
                Err(failure) => self.error.set(Some(failure.message)),
            }
        });
    }
}

/// A microphone.
fn mic_sign() -> impl IntoView {
    view! {
        <Sign class="sign" size=18>
            <rect x="9" y="3" width="6" height="11" rx="3" />
            <path d="M5.5 11a6.5 6.5 0 0 0 13 0 M12 17.5V21" />
        </Sign>
    }
}

/// The composer's microphone: dictation into the message box.
#[component]
pub fn DictateButton(voice: Voice, add: impl Fn(String) + Copy + 'static) -> impl IntoView {
    let recording = move || voice.state.get() == VoiceState::Dictating;
    let writing = move || voice.state.get() == VoiceState::Writing && !voice.mode.get();
    view! {
        <button
            class="icon-button dictate"
            class:recording=recording
            type="button"
            hidden=move || !voice.dictation() || voice.mode.get()
            disabled=writing
            aria-pressed=move || recording().to_string()
            title=move || {
                if recording() {
                    "Stop and write down what you said"
                } else if writing() {
                    "Writing down what you said…"
                } else {
                    "Dictate: speak, then press again; the words land in the box"
                }
            }
            on:click=move |_| voice.dictate(add)
        >
            {mic_sign()}
        </button>
    }
}

/// The composer's "Talk" button, and while voice mode is on, the bar saying what it is doing.
#[component]
pub fn VoiceModeBar(voice: Voice, start: impl Fn() + Copy + 'static) -> impl IntoView {
    let status = move || match voice.state.get() {
        VoiceState::Listening => "Listening… (the message goes when you stop talking)",
        VoiceState::Writing => "Writing down what you said…",
        VoiceState::Waiting => "Waiting for the reply…",
        VoiceState::Reading => "Reading the reply aloud…",
        VoiceState::Idle | VoiceState::Dictating => "",
    };
    let voices =
        move || voice.speech.with(|s| s.as_ref().map(|s| s.voices.clone()).unwrap_or_default());
    let current =
        move || voice.speech.with(|s| s.as_ref().map(|s| s.voice.clone()).unwrap_or_default());
    view! {
        <button
            class="icon-button talk"
            type="button"
            hidden=move || !(voice.dictation() && voice.read_aloud()) || voice.mode.get()
            title="Voice mode: talk, and hear the replies (MCP tools are not called in spoken turns)"
            on:click=move |_| start()
        >
            "Talk"
        </button>
        <div class="voice-mode" role="status" hidden=move || !voice.mode.get()>
            <span class="pulse" class:live=move || voice.state.get() == VoiceState::Listening></span>
            <span class="voice-status">{status}</span>
            <span class="spacer"></span>
            <label class="voice-choice">
                "Voice "
                <select
                    name="voice"
                    on:change=move |ev| voice.choose_voice(event_target_value(&ev))
                >
                    {move || {
                        let now = current();
                        voices()
                            .into_iter()
                            .map(|v| {
                                let selected = v == now;
                                view! { <option value=v.clone() selected=selected>{v.clone()}</option> }
                            })
                            .collect_view()
                    }}
                </select>
            </label>
            <button
                class="send-now"
                type="button"
                hidden=move || voice.state.get() != VoiceState::Listening
                on:click=move |_| voice.send_now.set(true)
            >
                "Send now"
            </button>
            <button
                class="skip-reading"
                type="button"
                hidden=move || voice.state.get() != VoiceState::Reading
                on:click=move |_| media::stop_all_reading()
            >
                "Skip"
            </button>
            <button class="leave-voice" type="button" on:click=move |_| voice.leave()>
                "Leave voice mode"
            </button>
        </div>
    }
}

/// Under a finished reply: read it aloud (pressed again, stop).
#[component]
pub fn ReadAloudButton(voice: Voice, text: Signal<String>) -> impl IntoView {
    let playing = RwSignal::new(false);
    let read = move |_| {
        if playing.get_untracked() {
            media::stop_all_reading();
            return;
        }
        playing.set(true);
        api::spawn(async move {
            let result = voice.read(text.get_untracked()).await;
            playing.set(false);
            if let Err(failure) = result {
                voice.error.set(Some(failure.message));
            }
        });
    };
    view! {
        <button
            class="read-aloud"
            type="button"
            hidden=move || !voice.read_aloud()
            title="Read this reply aloud"
            on:click=read
        >
            {move || if playing.get() { "Stop reading" } else { "Read aloud" }}
        </button>
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Feeds `levels`, one per tick; the tick at which the message ended, if it did.
    fn ends_at(levels: impl IntoIterator<Item = f32>) -> Option<usize> {
        let mut end = EndOfSpeech::default();
        levels.into_iter().position(|level| end.hear(level, TICK_MS))
    }

    #[test]
    fn a_message_ends_after_speech_and_a_pause_never_before_the_first_word() {
        let silence = |ticks| std::iter::repeat_n(0.0, ticks);
        let speech = |ticks| std::iter::repeat_n(0.1, ticks);
        // Ten seconds of silence before anything is said: still listening.
        assert_eq!(ends_at(silence(100)), None);
        // Speech, then 1.5 s of quiet: over on the fifteenth quiet tick.
        assert_eq!(ends_at(speech(20).chain(silence(20))), Some(20 + 14));
        // A pause shorter than that between words does not end it.
        let words = speech(5).chain(silence(10)).chain(speech(5)).chain(silence(14));
        assert_eq!(ends_at(words), None);
        // Talking without a pause ends at the longest message.
        let longest = usize::try_from(LONGEST_MS / TICK_MS).unwrap();
        assert_eq!(ends_at(speech(longest + 10)), Some(longest - 1));
    }
}
