//! The HTTP server: [`FakeModel`], its builder, and what it records.

use std::collections::VecDeque;
use std::io;
use std::net::{Ipv4Addr, SocketAddr};
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex, MutexGuard, PoisonError};

use axum::Router;
use axum::body::{Body, Bytes};
use axum::extract::{Request, State};
use axum::http::{HeaderMap, HeaderValue, Method, StatusCode, Uri, header};
use axum::response::{IntoResponse, Response};
use axum::routing::{get, post};
use axum::serve::ListenerExt as _;
use serde_json::{Value, json};
use tokio::sync::watch;
use tokio::task::JoinHandle;

use crate::multipart;
use crate::script::{Completion, Ending, Fallback, Reply};
use crate::wire::{self, Asked, Step};

/// The largest request body the fake model reads; real providers take a few MiB at most.
const MAX_REQUEST_BYTES: usize = 32 * 1024 * 1024;

/// One request the fake model received.
#[derive(Debug, Clone, PartialEq)]
pub struct RecordedRequest {
    /// `GET`, `POST`, ...
    pub method: String,
    /// The path, e.g. `/v1/chat/completions`.
    pub path: String,
    /// The `Authorization` header as received (this is test tooling: it keeps what it got so
    /// tests can check the key was sent as a bearer token).
    pub authorization: Option<String>,
    /// The body parsed as JSON, if it was JSON.
    pub body: Option<Value>,
    /// The body as text (invalid UTF-8 replaced).
    pub raw_body: String,
}

impl RecordedRequest {
    /// Whether this is a chat completions request.
    pub fn is_chat(&self) -> bool {
        self.method == "POST" && self.path == "/v1/chat/completions"
    }
}

/// A recording `POST /v1/audio/transcriptions` received, read from its multipart form.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ReceivedRecording {
    /// The `model` field.
    pub model: String,
    /// The `file` part's file name, type and bytes.
    pub file_name: String,
    pub content_type: String,
    pub audio: Vec<u8>,
    /// Every other text field (`response_format`, `language`, ...), in order.
    pub fields: Vec<(String, String)>,
}

/// How the audio endpoints answer.
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub enum Audio {
    /// As OpenAI does: a transcript as `{"text": ...}`, speech as MP3 bytes.
    #[default]
    Answer,
    /// As [`Audio::Answer`], after waiting this many milliseconds.
    Slow(u64),
    /// `503` with an OpenAI-style error body.
    Down,
    /// `200` with a body that is not what was asked for (HTML for a transcript, JSON for speech).
    Garbage,
    /// `200` with a body of this many bytes of the right type, too large to be real.
    Huge(usize),
}

/// The OpenAI names of speech models, listed by [`FakeModelBuilder::speech_models`].
pub const SPEECH_MODELS: [&str; 2] = ["whisper-1", "tts-1"];

/// A short silent MP3 (three MPEG-1 Layer III frames, 128 kbit/s, 44.1 kHz): what
/// `POST /v1/audio/speech` answers.
pub fn silent_mp3() -> Vec<u8> {
    let frame_len = 417;
    let mut mp3 = Vec::with_capacity(frame_len * 3);
    for _ in 0..3 {
        mp3.extend_from_slice(&[0xFF, 0xFB, 0x90, 0x64]);
        mp3.resize(mp3.len() + frame_len - 4, 0);
    }
    mp3
}

/// Settings for a [`FakeModel`]. Start from [`FakeModel::builder`].
#[derive(Debug, Clone)]
pub struct FakeModelBuilder {
    port: u16,
    replies: Vec<Reply>,
    fallback: Fallback,
    models: Vec<String>,
    log_requests: bool,
    close_after_answer: bool,
    audio: Audio,
    transcript: String,
    capabilities: Option<Vec<String>>,
    context_length: Option<u64>,
    standing: Vec<(String, Reply)>,
}

impl FakeModelBuilder {
    /// The port on 127.0.0.1; 0 (the default) lets the system pick.
    pub fn port(mut self, port: u16) -> Self {
        self.port = port;
        self
    }

    /// Queues a reply.
    pub fn reply(mut self, reply: Reply) -> Self {
        self.replies.push(reply);
        self
    }

    /// Queues replies, in order.
    pub fn replies(mut self, replies: impl IntoIterator<Item = Reply>) -> Self {
        self.replies.extend(replies);
        self
    }

    /// What to answer once the queue is empty. Default [`Fallback::Error`].
    pub fn fallback(mut self, fallback: Fallback) -> Self {
        self.fallback = fallback;
        self
    }

    /// The model ids `GET /v1/models` lists. Default `["fake-model"]`.
    pub fn models(mut self, models: impl IntoIterator<Item = impl Into<String>>) -> Self {
        self.models = models.into_iter().map(Into::into).collect();
        self
    }

    /// Also lists the speech models [`SPEECH_MODELS`] (`whisper-1`, `tts-1`) in `GET /v1/models`,
    /// as OpenAI does.
    pub fn speech_models(mut self) -> Self {
        self.models.extend(SPEECH_MODELS.iter().map(|m| (*m).to_owned()));
        self
    }

    /// How the audio endpoints answer. Default [`Audio::Answer`].
    pub fn audio(mut self, audio: Audio) -> Self {
        self.audio = audio;
        self
    }

    /// The text every transcription answers. Default `"Hello from the fake model."`.
    pub fn transcript(mut self, text: impl Into<String>) -> Self {
        self.transcript = text.into();
        self
    }

    /// Answers Ollama's `POST /api/show` as Ollama does: `capabilities` with `vision` for these
    /// models (and `completion` for every model). Without it, `/api/show` is not served (404),
    /// as on a server that is not Ollama.
    pub fn ollama_vision(mut self, models: impl IntoIterator<Item = impl Into<String>>) -> Self {
        self.capabilities = Some(models.into_iter().map(Into::into).collect());
        self
    }

    /// Answers Ollama's `POST /api/show` with this context length in `model_info` (as
    /// `fake.context_length`), beside the capabilities.
    pub fn ollama_context_length(mut self, tokens: u64) -> Self {
        self.context_length = Some(tokens);
        self.capabilities.get_or_insert_with(Vec::new);
        self
    }

    /// Answers every chat request whose body contains `marker` with `reply`, without taking
    /// from the queue: for requests a test cannot place in the queue's order.
    pub fn standing(mut self, marker: impl Into<String>, reply: Reply) -> Self {
        self.standing.push((marker.into(), reply));
        self
    }

    /// Writes one line per request to stderr (for the binary).
    pub fn log_requests(mut self, enabled: bool) -> Self {
        self.log_requests = enabled;
        self
    }

    /// Closes each connection after its answer (`Connection: close`), as a server without
    /// keep-alive does. Default false.
    pub fn close_after_answer(mut self, enabled: bool) -> Self {
        self.close_after_answer = enabled;
        self
    }

    /// Binds 127.0.0.1 and starts serving on the current tokio runtime.
    pub async fn start(self) -> io::Result<FakeModel> {
        let listener = tokio::net::TcpListener::bind((Ipv4Addr::LOCALHOST, self.port)).await?;
        let addr = listener.local_addr()?;
        // Without TCP_NODELAY, small SSE chunks on a kept-alive connection wait for delayed
        // ACKs (about 40 ms each), which would make streaming tests slow and misleading.
        let listener = listener.tap_io(|tcp| {
            let _ = tcp.set_nodelay(true);
        });
        let (shutdown, stopped) = watch::channel(false);
        let shared = Arc::new(Shared {
            queue: Mutex::new(self.replies.into()),
            fallback: self.fallback,
            requests: Mutex::new(Vec::new()),
            models: self.models,
            audio: Mutex::new(self.audio),
            transcript: self.transcript,
            capabilities: self.capabilities,
            context_length: self.context_length,
            standing: self.standing,
            recordings: Mutex::new(Vec::new()),
            log_requests: self.log_requests,
            serial: AtomicU64::new(0),
            stopped,
        });
        let mut app = Router::new()
            .route("/v1/chat/completions", post(chat))
            .route("/v1/models", get(models))
            .route("/v1/audio/transcriptions", post(transcriptions))
            .route("/v1/audio/speech", post(speech))
            .route("/api/show", post(show))
            .fallback(unknown)
            .with_state(Arc::clone(&shared));
        if self.close_after_answer {
            app = app.layer(axum::middleware::map_response(|mut response: Response| async {
                response
                    .headers_mut()
                    .insert(header::CONNECTION, HeaderValue::from_static("close"));
                response
            }));
        }
        let mut until = shared.stopped.clone();
        let task = tokio::spawn(async move {
            let _ = axum::serve(listener, app)
                .with_graceful_shutdown(async move {
                    let _ = until.wait_for(|stopped| *stopped).await;
                })
                .await;
        });
        Ok(FakeModel { addr, shared, shutdown, task })
    }
}

/// A running fake model. Stops when dropped (stalled streams are cut then).
#[derive(Debug)]
pub struct FakeModel {
    addr: SocketAddr,
    shared: Arc<Shared>,
    shutdown: watch::Sender<bool>,
    task: JoinHandle<()>,
}

#[derive(Debug)]
struct Shared {
    queue: Mutex<VecDeque<Reply>>,
    fallback: Fallback,
    requests: Mutex<Vec<RecordedRequest>>,
    models: Vec<String>,
    audio: Mutex<Audio>,
    transcript: String,
    /// The models that see images, for `/api/show`; `None`: not Ollama.
    capabilities: Option<Vec<String>>,
    /// The context length `/api/show` reports, if any.
    context_length: Option<u64>,
    /// Replies given to every request containing their marker.
    standing: Vec<(String, Reply)>,
    recordings: Mutex<Vec<ReceivedRecording>>,
    log_requests: bool,
    serial: AtomicU64,
    /// Flips to true when the server stops; stalls wait on it so nothing outlives the server.
    stopped: watch::Receiver<bool>,
}

/// A poisoned lock only means a handler panicked; the data is still what it was.
fn lock<T>(mutex: &Mutex<T>) -> MutexGuard<'_, T> {
    mutex.lock().unwrap_or_else(PoisonError::into_inner)
}

impl FakeModel {
    /// Settings: port 0, no replies, [`Fallback::Error`], one model `fake-model`.
    pub fn builder() -> FakeModelBuilder {
        FakeModelBuilder {
            port: 0,
            replies: Vec::new(),
            fallback: Fallback::Error,
            models: vec!["fake-model".to_owned()],
            log_requests: false,
            close_after_answer: false,
            audio: Audio::Answer,
            transcript: "Hello from the fake model.".to_owned(),
            capabilities: None,
            context_length: None,
            standing: Vec::new(),
        }
    }

    /// Starts a fake model with these replies and the default settings.
    pub async fn start(replies: impl IntoIterator<Item = Reply>) -> io::Result<FakeModel> {
        Self::builder().replies(replies).start().await
    }

    /// The address it listens on.
    pub fn addr(&self) -> SocketAddr {
        self.addr
    }

    /// The origin, `http://127.0.0.1:<port>` (what an allow-list needs).
    pub fn origin(&self) -> String {
        format!("http://{}", self.addr)
    }

    /// The base URL of the API, `http://127.0.0.1:<port>/v1`.
    pub fn base_url(&self) -> String {
        format!("http://{}/v1", self.addr)
    }

    /// Queues another reply.
    pub fn push(&self, reply: Reply) {
        lock(&self.shared.queue).push_back(reply);
    }

    /// How many scripted replies are still queued.
    pub fn remaining(&self) -> usize {
        lock(&self.shared.queue).len()
    }

    /// Every request received so far, in order.
    pub fn requests(&self) -> Vec<RecordedRequest> {
        lock(&self.shared.requests).clone()
    }

    /// The JSON bodies of the chat requests received so far, in order.
    pub fn chat_bodies(&self) -> Vec<Value> {
        lock(&self.shared.requests)
            .iter()
            .filter(|r| r.is_chat())
            .map(|r| r.body.clone().unwrap_or(Value::Null))
            .collect()
    }

    /// The recordings `POST /v1/audio/transcriptions` received so far, in order.
    pub fn recordings(&self) -> Vec<ReceivedRecording> {
        lock(&self.shared.recordings).clone()
    }

    /// The JSON bodies of the `POST /v1/audio/speech` requests received so far, in order.
    pub fn speech_bodies(&self) -> Vec<Value> {
        lock(&self.shared.requests)
            .iter()
            .filter(|r| r.method == "POST" && r.path == "/v1/audio/speech")
            .map(|r| r.body.clone().unwrap_or(Value::Null))
            .collect()
    }

    /// Changes how the audio endpoints answer from now on.
    pub fn set_audio(&self, audio: Audio) {
        *lock(&self.shared.audio) = audio;
    }

    /// Stops serving and waits until the server task has ended.
    pub async fn stop(self) {
        let _ = self.shutdown.send(true);
        // The graceful shutdown waits for open connections; stalls end on the same signal,
        // so this finishes.
        let task = &self.task;
        let _ = tokio::time::timeout(std::time::Duration::from_secs(5), async {
            while !task.is_finished() {
                tokio::time::sleep(std::time::Duration::from_millis(5)).await;
            }
        })
        .await;
    }
}

impl Drop for FakeModel {
    fn drop(&mut self) {
        let _ = self.shutdown.send(true);
        self.task.abort();
    }
}

fn record(shared: &Shared, method: &Method, uri: &Uri, headers: &HeaderMap, body: &Bytes) {
    let authorization =
        headers.get(header::AUTHORIZATION).map(|v| String::from_utf8_lossy(v.as_bytes()).into());
    let parsed = serde_json::from_slice(body).ok();
    if shared.log_requests {
        eprintln!("{method} {} ({} bytes)", uri.path(), body.len());
    }
    lock(&shared.requests).push(RecordedRequest {
        method: method.to_string(),
        path: uri.path().to_owned(),
        authorization,
        body: parsed,
        raw_body: String::from_utf8_lossy(body).into_owned(),
    });
}

async fn read_body(request: Request) -> (Method, Uri, HeaderMap, Result<Bytes, Response>) {
    let (parts, body) = request.into_parts();
    let bytes = axum::body::to_bytes(body, MAX_REQUEST_BYTES).await.map_err(|_| {
        json_response(
            StatusCode::PAYLOAD_TOO_LARGE,
            &wire::error_body("request body too large for the fake model", "invalid_request"),
        )
    });
    (parts.method, parts.uri, parts.headers, bytes)
}

async fn chat(State(shared): State<Arc<Shared>>, request: Request) -> Response {
    let (method, uri, headers, body) = read_body(request).await;
    let body = match body {
        Ok(body) => body,
        Err(response) => return response,
    };
    record(&shared, &method, &uri, &headers, &body);
    let Ok(request) = serde_json::from_slice::<Value>(&body) else {
        return json_response(
            StatusCode::BAD_REQUEST,
            &wire::error_body("request body is not JSON", "invalid_request_error"),
        );
    };
    let text = String::from_utf8_lossy(&body);
    let standing = shared.standing.iter().find(|(marker, _)| text.contains(marker.as_str()));
    let next = match standing {
        Some((_, reply)) => Some(reply.clone()),
        None => lock(&shared.queue).pop_front(),
    };
    let reply = match (next, shared.fallback) {
        (Some(reply), _) => reply,
        (None, Fallback::Echo { chunk_delay_ms }) => Reply::Echo { chunk_delay_ms },
        (None, Fallback::Error) => {
            return json_response(
                StatusCode::INTERNAL_SERVER_ERROR,
                &wire::error_body(
                    "fake model: the script has no reply left for this request",
                    "server_error",
                ),
            );
        }
    };
    let serial = shared.serial.fetch_add(1, Ordering::Relaxed);
    let asked = Asked::from_request(&request);
    let streamed = request.get("stream").and_then(Value::as_bool).unwrap_or(false);
    let completion = match reply {
        Reply::Completion(completion) => completion,
        Reply::Echo { chunk_delay_ms } => echo(&request, chunk_delay_ms),
        Reply::HttpError { status, body, retry_after } => {
            return http_error(status, body, retry_after);
        }
        Reply::StallBeforeHeaders => {
            let mut stopped = shared.stopped.clone();
            let _ = stopped.wait_for(|stopped| *stopped).await;
            return StatusCode::SERVICE_UNAVAILABLE.into_response();
        }
    };
    if streamed && !completion.ignore_stream {
        let steps = wire::stream_steps(&completion, &asked, serial);
        stream_response(steps, shared.stopped.clone())
    } else {
        whole_response(&completion, &asked, serial, shared.stopped.clone()).await
    }
}

fn echo(request: &Value, chunk_delay_ms: u64) -> Completion {
    let text = wire::last_user_message(request)
        .filter(|text| !text.trim().is_empty())
        .unwrap_or_else(|| "(there was no user message to echo)".to_owned());
    let words = text.split_whitespace().count();
    Completion { text: Some(text), chunks: words.min(64), chunk_delay_ms, ..Completion::default() }
}

fn http_error(status: u16, body: String, retry_after: Option<String>) -> Response {
    let status = StatusCode::from_u16(status).unwrap_or(StatusCode::INTERNAL_SERVER_ERROR);
    let content_type = if serde_json::from_str::<Value>(&body).is_ok() {
        "application/json"
    } else {
        "text/plain; charset=utf-8"
    };
    let mut response = (status, [(header::CONTENT_TYPE, content_type)], body).into_response();
    if let Some(value) = retry_after.and_then(|v| HeaderValue::from_str(&v).ok()) {
        response.headers_mut().insert(header::RETRY_AFTER, value);
    }
    response
}

fn stream_response(steps: Vec<Step>, stopped: watch::Receiver<bool>) -> Response {
    let body = futures::stream::unfold(
        (VecDeque::from(steps), stopped),
        |(mut steps, mut stopped)| async move {
            loop {
                match steps.pop_front()? {
                    Step::Send(bytes) => return Some((Ok(bytes), (steps, stopped))),
                    Step::Sleep(duration) => tokio::time::sleep(duration).await,
                    Step::Stall => {
                        let _ = stopped.wait_for(|stopped| *stopped).await;
                        return Some((Err(io::Error::other("server stopped")), (steps, stopped)));
                    }
                    Step::Abort => {
                        // An error from the body stream makes hyper drop the connection
                        // without the final empty chunk: the client sees a cut body.
                        return Some((
                            Err(io::Error::other("scripted disconnect")),
                            (VecDeque::new(), stopped),
                        ));
                    }
                }
            }
        },
    );
    Response::builder()
        .status(StatusCode::OK)
        .header(header::CONTENT_TYPE, "text/event-stream")
        .header(header::CACHE_CONTROL, "no-cache")
        .body(Body::from_stream(body))
        .unwrap_or_else(|_| StatusCode::INTERNAL_SERVER_ERROR.into_response())
}

async fn whole_response(
    completion: &Completion,
    asked: &Asked,
    serial: u64,
    mut stopped: watch::Receiver<bool>,
) -> Response {
    let delay = completion.chunk_delay_ms.saturating_mul(completion.chunks.max(1) as u64);
    tokio::time::sleep(std::time::Duration::from_millis(delay)).await;
    let whole = wire::whole_completion(completion, asked, serial).to_string();
    let body = match completion.ending {
        Ending::Done => whole,
        Ending::Garbage => "{this is not json".to_owned(),
        Ending::Stall => {
            let _ = stopped.wait_for(|stopped| *stopped).await;
            return StatusCode::SERVICE_UNAVAILABLE.into_response();
        }
        Ending::EndEarly => whole.chars().take(whole.chars().count() / 2).collect(),
        Ending::Disconnect => {
            let cut = futures::stream::iter([
                Ok(Bytes::from(whole.chars().take(10).collect::<String>())),
                Err(io::Error::other("scripted disconnect")),
            ]);
            return Response::builder()
                .header(header::CONTENT_TYPE, "application/json")
                .body(Body::from_stream(cut))
                .unwrap_or_else(|_| StatusCode::INTERNAL_SERVER_ERROR.into_response());
        }
    };
    ([(header::CONTENT_TYPE, "application/json")], body).into_response()
}

async fn models(State(shared): State<Arc<Shared>>, request: Request) -> Response {
    let (method, uri, headers, body) = read_body(request).await;
    record(&shared, &method, &uri, &headers, &body.unwrap_or_default());
    let data: Vec<Value> = shared
        .models
        .iter()
        .map(|id| json!({"id": id, "object": "model", "created": 0, "owned_by": "llooma-fake-model"}))
        .collect();
    json_response(StatusCode::OK, &json!({"object": "list", "data": data}))
}

/// Ollama's `POST /api/show {model}`: what the model can do.
async fn show(State(shared): State<Arc<Shared>>, request: Request) -> Response {
    let (method, uri, headers, body) = read_body(request).await;
    let body = body.unwrap_or_default();
    record(&shared, &method, &uri, &headers, &body);
    let Some(vision) = &shared.capabilities else {
        return (StatusCode::NOT_FOUND, "404 page not found").into_response();
    };
    let asked: Value = serde_json::from_slice(&body).unwrap_or(Value::Null);
    let model = asked["model"].as_str().or_else(|| asked["name"].as_str()).unwrap_or_default();
    if !shared.models.iter().any(|m| m == model) {
        let error = json!({"error": format!("model '{model}' not found")});
        return json_response(StatusCode::NOT_FOUND, &error);
    }
    let mut capabilities = vec!["completion"];
    if vision.iter().any(|m| m == model) {
        capabilities.push("vision");
    }
    let mut shown =
        json!({"modelfile": "", "details": {"family": "fake"}, "capabilities": capabilities});
    if let Some(tokens) = shared.context_length {
        shown["model_info"] =
            json!({"general.architecture": "fake", "fake.context_length": tokens});
    }
    json_response(StatusCode::OK, &shown)
}

/// Waits as [`Audio::Slow`] says, and answers for the other failures; `None`: answer.
async fn audio_failure(shared: &Shared, garbage: Response) -> Option<Response> {
    let audio = lock(&shared.audio).clone();
    match audio {
        Audio::Answer | Audio::Huge(_) => None,
        Audio::Slow(ms) => {
            let mut stopped = shared.stopped.clone();
            tokio::select! {
                () = tokio::time::sleep(std::time::Duration::from_millis(ms)) => None,
                _ = stopped.wait_for(|stopped| *stopped) => Some(StatusCode::SERVICE_UNAVAILABLE.into_response()),
            }
        }
        Audio::Down => Some(json_response(
            StatusCode::SERVICE_UNAVAILABLE,
            &wire::error_body("fake model: the speech service is down", "server_error"),
        )),
        Audio::Garbage => Some(garbage),
    }
}

fn huge(shared: &Shared) -> Option<usize> {
    match *lock(&shared.audio) {
        Audio::Huge(bytes) => Some(bytes),
        _ => None,
    }
}

fn bad_request(message: &str) -> Response {
    json_response(StatusCode::BAD_REQUEST, &wire::error_body(message, "invalid_request_error"))
}

/// `POST /v1/audio/transcriptions`: a multipart form with `file` and `model`, as OpenAI reads it.
async fn transcriptions(State(shared): State<Arc<Shared>>, request: Request) -> Response {
    let (method, uri, headers, body) = read_body(request).await;
    let body = match body {
        Ok(body) => body,
        Err(response) => return response,
    };
    record(&shared, &method, &uri, &headers, &body);
    let content_type = headers.get(header::CONTENT_TYPE).and_then(|v| v.to_str().ok());
    let Some(boundary) = content_type.and_then(multipart::boundary) else {
        return bad_request("the body must be multipart/form-data with a boundary");
    };
    let parts = match multipart::parse(&body, &boundary) {
        Ok(parts) => parts,
        Err(problem) => return bad_request(&format!("malformed form: {problem}")),
    };
    let mut file = None;
    let mut model = None;
    let mut fields = Vec::new();
    for part in parts {
        match (part.name.as_str(), part.file_name) {
            ("file", Some(name)) => {
                file = Some((name, part.content_type.unwrap_or_default(), part.data));
            }
            ("model", None) => model = Some(String::from_utf8_lossy(&part.data).into_owned()),
            (name, None) => {
                fields.push((name.to_owned(), String::from_utf8_lossy(&part.data).into_owned()));
            }
            (name, Some(_)) => return bad_request(&format!("unexpected file in field {name}")),
        }
    }
    let (Some((file_name, content_type, audio)), Some(model)) = (file, model) else {
        return bad_request("the form needs a file part `file` and a field `model`");
    };
    if audio.is_empty() {
        return bad_request("Audio file is empty");
    }
    lock(&shared.recordings).push(ReceivedRecording {
        model,
        file_name,
        content_type,
        audio,
        fields,
    });
    let garbage = ([(header::CONTENT_TYPE, "text/html")], "<html><body>Bad gateway</body></html>")
        .into_response();
    if let Some(response) = audio_failure(&shared, garbage).await {
        return response;
    }
    if let Some(bytes) = huge(&shared) {
        let text = "a".repeat(bytes);
        return json_response(StatusCode::OK, &json!({"text": text}));
    }
    json_response(StatusCode::OK, &json!({"text": shared.transcript}))
}

/// `POST /v1/audio/speech`: `{model, input, voice}` in, MP3 out.
async fn speech(State(shared): State<Arc<Shared>>, request: Request) -> Response {
    let (method, uri, headers, body) = read_body(request).await;
    let body = match body {
        Ok(body) => body,
        Err(response) => return response,
    };
    record(&shared, &method, &uri, &headers, &body);
    let Ok(request) = serde_json::from_slice::<Value>(&body) else {
        return bad_request("request body is not JSON");
    };
    let given =
        |field: &str| request.get(field).and_then(Value::as_str).is_some_and(|v| !v.is_empty());
    if !(given("model") && given("input") && given("voice")) {
        return bad_request("model, input and voice are required");
    }
    let garbage = json_response(StatusCode::OK, &json!({"note": "this is not audio"}));
    if let Some(response) = audio_failure(&shared, garbage).await {
        return response;
    }
    let audio = match huge(&shared) {
        Some(bytes) => vec![0; bytes],
        None => silent_mp3(),
    };
    ([(header::CONTENT_TYPE, "audio/mpeg")], audio).into_response()
}

async fn unknown(State(shared): State<Arc<Shared>>, request: Request) -> Response {
    let (method, uri, headers, body) = read_body(request).await;
    record(&shared, &method, &uri, &headers, &body.unwrap_or_default());
    json_response(
        StatusCode::NOT_FOUND,
        &wire::error_body(
            &format!(
                "fake model: no route {method} {}; it serves POST /v1/chat/completions, \
                 GET /v1/models, POST /v1/audio/transcriptions and POST /v1/audio/speech",
                uri.path()
            ),
            "not_found",
        ),
    )
}

fn json_response(status: StatusCode, body: &Value) -> Response {
    (status, [(header::CONTENT_TYPE, "application/json")], body.to_string()).into_response()
}
