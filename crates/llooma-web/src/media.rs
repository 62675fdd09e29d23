//! The microphone and the speaker: recording what the person says (`MediaRecorder`), hearing
//! when they stop (a level meter), sending a recording to be written down, and playing a reply
//! read aloud. The words to read are prepared here too (pure, tested). Inert in the server
//! build.

/// A reply as it is read aloud: Markdown's marks taken out, code blocks skipped (read, they are
/// noise), in pieces of at most `max` characters cut at a sentence or a space.
pub fn speakable(text: &str, max: usize) -> Vec<String> {
    let mut plain = String::with_capacity(text.len());
    let mut in_code = false;
    for line in text.lines() {
        if line.trim_start().starts_with("```") {
            in_code = !in_code;
            continue;
        }
        if in_code {
            continue;
        }
        let line = line.trim_start_matches(['#', '>', ' ']);
        let line = line.strip_prefix("- ").or_else(|| line.strip_prefix("* ")).unwrap_or(line);
        plain.extend(line.chars().filter(|c| !matches!(c, '*' | '`' | '_' | '|')));
        plain.push('\n');
    }
    let mut pieces = Vec::new();
    let mut rest = plain.trim();
    let max = max.max(1);
    while !rest.is_empty() {
        if rest.chars().count() <= max {
            pieces.push(rest.to_owned());
            break;
        }
        let limit = rest.char_indices().nth(max).map_or(rest.len(), |(i, _)| i);
        let head = &rest[..limit];
        // The last sentence end, else the last space, else the hard limit.
        let cut = head
            .rfind(['.', '!', '?', '\n'])
            .map(|i| i + 1)
            .filter(|&i| i > limit / 2)
            .or_else(|| head.rfind(' '))
            .filter(|&i| i > 0)
            .unwrap_or(limit);
        pieces.push(rest[..cut].trim().to_owned());
        rest = rest[cut..].trim_start();
    }
    pieces.retain(|p| !p.is_empty());
    pieces
}

#[cfg(feature = "hydrate")]
mod browser {
    use std::cell::RefCell;
    use std::rc::Rc;

    use serde_json::Value;
    use wasm_bindgen::JsCast;
    use wasm_bindgen::prelude::*;
    use wasm_bindgen_futures::JsFuture;

    use crate::api::Failure;

    fn failure(message: &str) -> Failure {
        Failure { message: message.to_owned(), code: String::new() }
    }

    fn no_microphone() -> Failure {
        failure(
            "The microphone could not be used: allow it for this site in the browser, and check \
             that one is connected.",
        )
    }

    /// Waits `ms` milliseconds.
    pub async fn sleep_ms(ms: i32) {
        let promise = js_sys::Promise::new(&mut |resolve, _| {
            if let Some(window) = web_sys::window() {
                let _ = window.set_timeout_with_callback_and_timeout_and_arguments_0(&resolve, ms);
            }
        });
        let _ = JsFuture::from(promise).await;
    }

    /// The microphone, recording.
    pub struct Recording {
        recorder: web_sys::MediaRecorder,
        stream: web_sys::MediaStream,
        chunks: Rc<RefCell<Vec<web_sys::Blob>>>,
        meter: Option<(web_sys::AudioContext, web_sys::AnalyserNode)>,
        _on_data: Closure<dyn FnMut(web_sys::BlobEvent)>,
    }

    /// Asks for the microphone and starts recording.
    pub async fn start_recording() -> Result<Recording, Failure> {
        let window = web_sys::window().ok_or_else(no_microphone)?;
        let devices = window.navigator().media_devices().map_err(|_| no_microphone())?;
        let constraints = web_sys::MediaStreamConstraints::new();
        constraints.set_audio(&JsValue::TRUE);
        let asked =
            devices.get_user_media_with_constraints(&constraints).map_err(|_| no_microphone())?;
        let stream: web_sys::MediaStream = JsFuture::from(asked)
            .await
            .map_err(|_| no_microphone())?
            .dyn_into()
            .map_err(|_| no_microphone())?;
        let recorder =
            web_sys::MediaRecorder::new_with_media_stream(&stream).map_err(|_| no_microphone())?;
        let chunks = Rc::new(RefCell::new(Vec::new()));
        let sink = Rc::clone(&chunks);
        let on_data =
            Closure::<dyn FnMut(web_sys::BlobEvent)>::new(move |ev: web_sys::BlobEvent| {
                if let Some(blob) = ev.data().filter(|b| b.size() > 0.0) {
                    sink.borrow_mut().push(blob);
                }
            });
        recorder.set_ondataavailable(Some(on_data.as_ref().unchecked_ref()));
        recorder.start().map_err(|_| no_microphone())?;
        let meter = level_meter(&stream);
        Ok(Recording { recorder, stream, chunks, meter, _on_data: on_data })
    }

    fn level_meter(
        stream: &web_sys::MediaStream,
    ) -> Option<(web_sys::AudioContext, web_sys::AnalyserNode)> {
        let context = web_sys::AudioContext::new().ok()?;
        let source = context.create_media_stream_source(stream).ok()?;
        let analyser = context.create_analyser().ok()?;
        analyser.set_fft_size(1024);
        source.connect_with_audio_node(&analyser).ok()?;
        Some((context, analyser))
    }

    impl Recording {
        /// How loud the microphone is now: 0 is silence, speech is around 0.02 and more.
        pub fn level(&self) -> f32 {
            let Some((_, analyser)) = &self.meter else { return 1.0 };
            let mut samples = vec![0u8; analyser.fft_size() as usize];
            analyser.get_byte_time_domain_data(&mut samples);
            let energy: f32 = samples
                .iter()
                .map(|&s| {
                    let v = (f32::from(s) - 128.0) / 128.0;
                    v * v
                })
                .sum();
            #[expect(clippy::cast_precision_loss, reason = "at most a few thousand samples")]
            let count = samples.len().max(1) as f32;
            (energy / count).sqrt()
        }

        fn release(&self) {
            for track in self.stream.get_tracks().iter() {
                if let Ok(track) = track.dyn_into::<web_sys::MediaStreamTrack>() {
                    track.stop();
                }
            }
            if let Some((context, _)) = &self.meter {
                let _ = context.close();
            }
        }

        /// Stops recording and gives the recording with its type.
        pub async fn finish(self) -> Result<(web_sys::Blob, String), Failure> {
            let recorder = self.recorder.clone();
            let stopped = js_sys::Promise::new(&mut |resolve, _| {
                let on_stop = Closure::once_into_js(move || {
                    let _ = resolve.call0(&JsValue::NULL);
                });
                recorder.set_onstop(Some(on_stop.unchecked_ref()));
            });
            let _ = self.recorder.stop();
            let _ = JsFuture::from(stopped).await;
            self.release();
            let kind = self.recorder.mime_type();
            let parts = js_sys::Array::new();
            for chunk in self.chunks.borrow().iter() {
                parts.push(chunk);
            }
            let options = web_sys::BlobPropertyBag::new();
            options.set_type(&kind);
            let blob = web_sys::Blob::new_with_blob_sequence_and_options(&parts, &options)
                .map_err(|_| failure("The recording could not be read; try again."))?;
            Ok((blob, kind))
        }

        /// Stops recording and drops what was recorded.
        pub fn cancel(self) {
            let _ = self.recorder.stop();
            self.release();
        }
    }

    /// A request's answer: the response when it succeeded, else the API's error.
    async fn answered(request: web_sys::Request) -> Result<web_sys::Response, Failure> {
        let unreachable =
            || failure("The server could not be reached; check the connection and try again.");
        let window = web_sys::window().ok_or_else(unreachable)?;
        let response: web_sys::Response = JsFuture::from(window.fetch_with_request(&request))
            .await
            .ok()
            .and_then(|r| r.dyn_into().ok())
            .ok_or_else(unreachable)?;
        if response.ok() {
            return Ok(response);
        }
        let status = response.status();
        let text = match response.text() {
            Ok(promise) => JsFuture::from(promise).await.ok().and_then(|t| t.as_string()),
            Err(_) => None,
        }
        .unwrap_or_default();
        let json: Value = serde_json::from_str(&text).unwrap_or(Value::Null);
        Err(Failure::from_answer(status, &json))
    }

    fn post(
        path: &str,
        csrf: &str,
        content_type: &str,
        body: &JsValue,
    ) -> Option<web_sys::Request> {
        let init = web_sys::RequestInit::new();
        init.set_method("POST");
        init.set_credentials(web_sys::RequestCredentials::SameOrigin);
        let headers = web_sys::Headers::new().ok()?;
        let _ = headers.set("X-CSRF-Token", csrf);
        let _ = headers.set("Content-Type", content_type);
        init.set_headers(&headers);
        init.set_body(body);
        web_sys::Request::new_with_str_and_init(path, &init).ok()
    }

    /// The words heard in a recording.
    pub async fn transcribe(
        blob: &web_sys::Blob,
        kind: &str,
        csrf: &str,
    ) -> Result<String, Failure> {
        let kind = if kind.is_empty() { "audio/webm" } else { kind };
        let request = post("/api/v1/speech/transcriptions", csrf, kind, blob)
            .ok_or_else(|| failure("The recording could not be sent; try again."))?;
        let response = answered(request).await?;
        let json = match response.json() {
            Ok(promise) => JsFuture::from(promise).await.ok(),
            Err(_) => None,
        };
        let text = json.and_then(|j| js_sys::Reflect::get(&j, &"text".into()).ok());
        Ok(text.and_then(|t| t.as_string()).unwrap_or_default())
    }

    thread_local! {
        /// What is being read aloud now (one thing at a time in a tab).
        static PLAYING: RefCell<Option<web_sys::HtmlAudioElement>> = const { RefCell::new(None) };
    }

    /// Stops what is being read aloud.
    pub fn stop_reading() {
        if let Some(audio) = PLAYING.with(|p| p.borrow_mut().take()) {
            let _ = audio.pause();
        }
    }

    /// Reads one piece of text aloud; returns once it was heard out or stopped.
    pub async fn read_piece(text: &str, csrf: &str) -> Result<(), Failure> {
        let body = serde_json::json!({ "text": text }).to_string();
        let request = post("/api/v1/speech/speak", csrf, "application/json", &body.into())
            .ok_or_else(|| failure("The reply could not be sent to be read; try again."))?;
        let response = answered(request).await?;
        let unplayable = || failure("The reply's audio could not be played in this browser.");
        let blob: web_sys::Blob = JsFuture::from(response.blob().map_err(|_| unplayable())?)
            .await
            .ok()
            .and_then(|b| b.dyn_into().ok())
            .ok_or_else(unplayable)?;
        let url = web_sys::Url::create_object_url_with_blob(&blob).map_err(|_| unplayable())?;
        let audio = web_sys::HtmlAudioElement::new_with_src(&url).map_err(|_| unplayable())?;
        stop_reading();
        PLAYING.with(|p| *p.borrow_mut() = Some(audio.clone()));
        let heard = js_sys::Promise::new(&mut |resolve, _| {
            // Ended, stopped (paused) or broken: the reading is over either way.
            let done = Closure::<dyn FnMut()>::new(move || {
                let _ = resolve.call0(&JsValue::NULL);
            });
            audio.set_onended(Some(done.as_ref().unchecked_ref()));
            audio.set_onpause(Some(done.as_ref().unchecked_ref()));
            audio.set_onerror(Some(done.as_ref().unchecked_ref()));
            done.forget();
        });
        let played = match audio.play() {
            Ok(promise) => JsFuture::from(promise).await.is_ok(),
            Err(_) => false,
        };
        if played {
            let _ = JsFuture::from(heard).await;
        }
        PLAYING.with(|p| {
            if p.borrow().as_ref() == Some(&audio) {
                p.borrow_mut().take();
            }
        });
        let _ = web_sys::Url::revoke_object_url(&url);
        if played { Ok(()) } else { Err(unplayable()) }
    }
}

#[cfg(feature = "hydrate")]
pub use browser::{Recording, read_piece, sleep_ms, start_recording, stop_reading, transcribe};

#[cfg(not(feature = "hydrate"))]
mod inert {
    use crate::api::Failure;

    fn nothing() -> Failure {
        Failure { message: String::new(), code: String::new() }
    }

    /// Never made on the server.
    pub struct Recording;

    impl Recording {
        pub fn level(&self) -> f32 {
            0.0
        }

        pub async fn finish(self) -> Result<((), String), Failure> {
            Err(nothing())
        }

        pub fn cancel(self) {}
    }

    pub async fn sleep_ms(_ms: i32) {}

    pub async fn start_recording() -> Result<Recording, Failure> {
        Err(nothing())
    }

    pub async fn transcribe(_blob: &(), _kind: &str, _csrf: &str) -> Result<String, Failure> {
        Err(nothing())
    }

    pub fn stop_reading() {}

    pub async fn read_piece(_text: &str, _csrf: &str) -> Result<(), Failure> {
        Err(nothing())
    }
}

#[cfg(not(feature = "hydrate"))]
pub use inert::{Recording, read_piece, sleep_ms, start_recording, stop_reading, transcribe};

/// Reads `text` aloud piece by piece; stops at the first failure or when another reading
/// (or the person) stopped this one.
pub async fn read_aloud(text: &str, max: usize, csrf: &str) -> Result<(), crate::api::Failure> {
    let pieces = speakable(text, max);
    for (n, piece) in pieces.iter().enumerate() {
        read_piece(piece, csrf).await?;
        if n + 1 < pieces.len() && !reading_may_go_on() {
            break;
        }
    }
    Ok(())
}

thread_local! {
    static STOPPED: std::cell::Cell<bool> = const { std::cell::Cell::new(false) };
}

/// Stops reading aloud, including the pieces still to come.
pub fn stop_all_reading() {
    STOPPED.with(|s| s.set(true));
    stop_reading();
}

/// A new reading starts: earlier stops no longer apply.
pub fn begin_reading() {
    STOPPED.with(|s| s.set(false));
}

fn reading_may_go_on() -> bool {
    !STOPPED.with(std::cell::Cell::get)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn markdown_marks_and_code_are_not_read() {
        let reply =
            "# Title\n\nSome **bold** and `code` here.\n\n```rust\nfn main() {}\n```\n- one\n- two";
        assert_eq!(speakable(reply, 4096), ["Title\n\nSome bold and code here.\n\none\ntwo"]);
    }

    #[test]
    fn long_text_is_cut_at_sentences_within_the_limit() {
        let text = "First sentence here. Second one is a little longer. Third.";
        let pieces = speakable(text, 30);
        assert!(pieces.iter().all(|p| p.chars().count() <= 30), "{pieces:?}");
        assert_eq!(pieces.join(" "), text);
        assert_eq!(pieces[0], "First sentence here.");
        // No sentence end, no space: cut at the limit, nothing lost.
        let word = "x".repeat(25);
        assert_eq!(speakable(&word, 10).concat(), word);
        assert!(speakable("   ", 10).is_empty());
    }
}
