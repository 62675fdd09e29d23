//! [`ProviderClient`]: chat completions and the model list over an OpenAI-compatible API.

use std::collections::VecDeque;
use std::fmt;
use std::time::Duration;

use bytes::Bytes;
use futures::Stream;
use http::header::{self, HeaderMap, HeaderValue};
use llooma_net::{NetClient, NetError, NetResponse};
use llooma_vault::Secret;
use tokio::time::{Instant, timeout_at};
use url::Url;

use crate::assemble::{Assembler, Progress};
use crate::config::ProviderConfig;
use crate::error::{Phase, ProviderError, excerpt, from_net};
use crate::sse::SseDecoder;
use crate::types::{ChatEvent, ChatReply, ChatRequest, Metered, ModelInfo, Usage};
use crate::wire::{self, ModelList, Whole};

/// How much of an error body is read for its excerpt; the rest is not worth waiting for.
const ERROR_BODY_BYTES: usize = 8 * 1024;

/// Ollama's native API beside its OpenAI-compatible one: `http://host:11434/v1` gives
/// `http://host:11434/api/show` (see `capabilities`).
pub(crate) fn show_url(base: &str) -> String {
    let root = base.strip_suffix("/v1").unwrap_or(base);
    format!("{root}/api/show")
}

/// A client for one OpenAI-compatible provider. Cheap to clone.
#[derive(Debug, Clone)]
pub struct ProviderClient {
    pub(crate) net: NetClient,
    config: ProviderConfig,
    /// Parsed once: every turn sends to it.
    chat_url: Url,
    models_url: String,
    /// `{base}/audio/transcriptions` and `{base}/audio/speech`.
    pub(crate) audio_urls: (String, String),
    /// Ollama's `/api/show`, where a model's capabilities are said.
    pub(crate) show_url: String,
}

impl ProviderClient {
    /// A client that sends through `net` (built by the caller for the purpose and policy it
    /// chose; see [`ProviderConfig::configure_net_client`] for the settings streams need).
    ///
    /// Fails if the base URL is not an `http`/`https` URL without query, fragment or
    /// credentials, or if the key cannot be sent in a header.
    pub fn new(net: NetClient, config: ProviderConfig) -> Result<Self, ProviderError> {
        let base = Url::parse(config.base_url.trim()).map_err(|err| {
            ProviderError::InvalidBaseUrl { problem: format!("not a URL: {err}") }
        })?;
        let problem = if !matches!(base.scheme(), "http" | "https") {
            Some(format!("scheme {} instead of http or https", base.scheme()))
        } else if base.query().is_some() || base.fragment().is_some() {
            Some("it has a query or a fragment".to_owned())
        } else if !base.username().is_empty() || base.password().is_some() {
            // Credentials in a URL end up in logs; the key has its own field.
            Some("it contains user:password@; put the key in the API key field".to_owned())
        } else {
            None
        };
        if let Some(problem) = problem {
            return Err(ProviderError::InvalidBaseUrl { problem });
        }
        if let Some(key) = &config.api_key {
            bearer(key)?;
        }
        let base = base.as_str().trim_end_matches('/').to_owned();
        let chat_url = Url::parse(&format!("{base}/chat/completions")).map_err(|err| {
            ProviderError::InvalidBaseUrl { problem: format!("not a URL: {err}") }
        })?;
        Ok(Self {
            net,
            chat_url,
            models_url: format!("{base}/models"),
            audio_urls: (format!("{base}/audio/transcriptions"), format!("{base}/audio/speech")),
            show_url: show_url(&base),
            config,
        })
    }

    /// The most tools one request may offer (from [`ProviderConfig::max_tools_per_request`]).
    pub fn max_tools_per_request(&self) -> usize {
        self.config.max_tools_per_request
    }

    /// The settings this client was made with.
    pub fn config(&self) -> &ProviderConfig {
        &self.config
    }

    /// Sends a chat request with `stream: true` and returns the answer as it streams.
    ///
    /// Returns once the provider has accepted the request (status 200); every error status
    /// is a distinct [`ProviderError`]. The first-byte timeout covers the wait for the
    /// headers and the first chunk; after that, the idle timeout applies between chunks.
    /// Dropping the stream closes the connection, which stops generation at most providers.
    pub async fn chat(&self, request: &ChatRequest) -> Result<ChatStream, ProviderError> {
        let max = self.config.max_tools_per_request;
        if request.tools.len() > max {
            return Err(ProviderError::TooManyTools { given: request.tools.len(), max });
        }
        let body = wire::request_body(request, self.config.request_usage);
        let request_bytes = body.len();
        let builder = self
            .net
            .request_url(http::Method::POST, self.chat_url.clone())
            .map_err(|err| from_net(err, Phase::Send))?
            .headers(self.headers()?)
            .header(header::CONTENT_TYPE, "application/json")
            .header(header::ACCEPT, "text/event-stream")
            .body(body);
        let deadline = Instant::now() + self.config.timeouts.first_byte;
        tracing::debug!(url = %self.chat_url, model = %request.model, tools = request.tools.len(), "chat request");
        let response = self.send(builder, self.chat_url.as_str(), deadline).await?;
        let mut stream = ChatStream {
            response,
            decoder: SseDecoder::default(),
            assembler: Assembler::default(),
            pending: VecDeque::new(),
            first_byte_deadline: Some(deadline),
            timeouts: self.config.timeouts,
            url: self.chat_url.to_string(),
            key: self.config.api_key.clone(),
            state: StreamState::Reading,
            request_bytes,
            answer_chars: 0,
            reported: None,
        };
        if is_json(stream.response.headers()) {
            stream.read_whole().await?;
        }
        Ok(stream)
    }

    /// The models the provider offers (`GET {base}/models`).
    pub async fn list_models(&self) -> Result<Vec<ModelInfo>, ProviderError> {
        let builder = self
            .net
            .get(&self.models_url)
            .map_err(|err| from_net(err, Phase::Send))?
            .headers(self.headers()?)
            .header(header::ACCEPT, "application/json");
        let timeouts = self.config.timeouts;
        let deadline = Instant::now() + timeouts.first_byte;
        let mut response = self.send(builder, &self.models_url, deadline).await?;
        let mut body = Vec::new();
        let (mut deadline, mut waiting) = (deadline, Waiting::FirstByte(timeouts.first_byte));
        while let Some(chunk) =
            read_chunk(&mut response, deadline, &self.models_url, waiting).await?
        {
            body.extend_from_slice(&chunk);
            deadline = Instant::now() + timeouts.idle;
            waiting = Waiting::Idle(timeouts.idle);
        }
        let list: ModelList =
            serde_json::from_slice(&body).map_err(|err| ProviderError::MalformedResponse {
                problem: format!(
                    "the model list is not {{\"data\": [{{\"id\": ...}}]}} ({err}): {}",
                    excerpt(&String::from_utf8_lossy(&body), self.key())
                ),
            })?;
        Ok(list.into_models())
    }

    pub(crate) fn key(&self) -> Option<&str> {
        self.config.api_key.as_ref().map(Secret::expose)
    }

    pub(crate) fn headers(&self) -> Result<HeaderMap, ProviderError> {
        let mut headers = HeaderMap::new();
        if let Some(key) = &self.config.api_key {
            headers.insert(header::AUTHORIZATION, bearer(key)?);
        }
        Ok(headers)
    }

    /// Sends, waits for the headers until `deadline`, and turns error statuses into errors.
    pub(crate) async fn send(
        &self,
        builder: llooma_net::NetRequest,
        url: &str,
        deadline: Instant,
    ) -> Result<NetResponse, ProviderError> {
        let response = match timeout_at(deadline, self.net.send(builder)).await {
            Ok(sent) => sent.map_err(|err| from_net(err, Phase::Send))?,
            Err(_) => {
                return Err(ProviderError::FirstByteTimeout {
                    url: url.to_owned(),
                    after: self.config.timeouts.first_byte,
                });
            }
        };
        let status = response.status();
        if status.is_success() {
            return Ok(response);
        }
        let retry_after = retry_after(response.headers());
        let body =
            read_error_body(response, deadline.max(Instant::now() + Duration::from_secs(1))).await;
        let excerpt = excerpt(&body, self.key());
        let code = status.as_u16();
        tracing::debug!(url = %url, status = code, "provider answered with an error status");
        Err(match code {
            401 | 403 => ProviderError::KeyRefused { status: code, excerpt },
            429 => ProviderError::RateLimited { retry_after, excerpt },
            500..=599 => ProviderError::ServerError { status: code, excerpt },
            _ => ProviderError::Rejected { status: code, excerpt },
        })
    }
}

/// The `Authorization` value, marked sensitive so HTTP libraries never print it.
fn bearer(key: &Secret) -> Result<HeaderValue, ProviderError> {
    let mut value = HeaderValue::from_str(&format!("Bearer {}", key.expose().trim()))
        .map_err(|_| ProviderError::InvalidKey)?;
    value.set_sensitive(true);
    Ok(value)
}

/// Whether the body is one JSON document rather than an event stream.
fn is_json(headers: &HeaderMap) -> bool {
    headers
        .get(header::CONTENT_TYPE)
        .and_then(|v| v.to_str().ok())
        .is_some_and(|v| v.trim_start().to_ascii_lowercase().starts_with("application/json"))
}

/// `retry-after-ms` (OpenAI) or `Retry-After` in seconds. An HTTP-date form is not read:
/// model providers send seconds.
fn retry_after(headers: &HeaderMap) -> Option<Duration> {
    let read = |name: &str| {
        headers
            .get(name)?
            .to_str()
            .ok()?
            .trim()
            .parse::<f64>()
            .ok()
            .filter(|v| v.is_finite() && *v >= 0.0)
    };
    if let Some(ms) = read("retry-after-ms") {
        return Some(Duration::from_secs_f64(ms / 1000.0));
    }
    read("retry-after").map(Duration::from_secs_f64)
}

/// Up to [`ERROR_BODY_BYTES`] of an error body, or what arrived before `deadline`.
async fn read_error_body(mut response: NetResponse, deadline: Instant) -> String {
    let mut body = Vec::new();
    while body.len() < ERROR_BODY_BYTES {
        match timeout_at(deadline, response.chunk()).await {
            Ok(Ok(Some(chunk))) => body.extend_from_slice(&chunk),
            _ => break,
        }
    }
    body.truncate(ERROR_BODY_BYTES);
    String::from_utf8_lossy(&body).into_owned()
}

/// Which wait a deadline bounds, for the error when it runs out.
#[derive(Debug, Clone, Copy)]
pub(crate) enum Waiting {
    /// The first bytes of the answer, bounded by this first-byte timeout.
    FirstByte(Duration),
    /// The next chunk, bounded by this idle timeout.
    Idle(Duration),
}

/// The next chunk of a body, or a timeout error once `deadline` passes.
pub(crate) async fn read_chunk(
    response: &mut NetResponse,
    deadline: Instant,
    url: &str,
    waiting: Waiting,
) -> Result<Option<Bytes>, ProviderError> {
    match timeout_at(deadline, response.chunk()).await {
        Ok(chunk) => chunk.map_err(|err: NetError| from_net(err, Phase::Body)),
        Err(_) => Err(match waiting {
            Waiting::FirstByte(after) => {
                ProviderError::FirstByteTimeout { url: url.to_owned(), after }
            }
            Waiting::Idle(after) => ProviderError::IdleTimeout { url: url.to_owned(), after },
        }),
    }
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum StreamState {
    Reading,
    /// The body has ended or failed; only queued events remain.
    Over,
}

/// A streamed answer. Read it with [`ChatStream::next_event`], or turn it into a
/// [`Stream`] with [`ChatStream::into_stream`]. After an error or
/// [`ChatEvent::Finished`] it yields nothing more.
pub struct ChatStream {
    response: NetResponse,
    decoder: SseDecoder,
    assembler: Assembler,
    pending: VecDeque<ChatEvent>,
    /// Until the first chunk has arrived, the first-byte deadline applies.
    first_byte_deadline: Option<Instant>,
    timeouts: crate::types::Timeouts,
    url: String,
    /// Kept only to scrub it from upstream text in errors.
    key: Option<Secret>,
    state: StreamState,
    /// The size of the request sent, and of the answer read so far: what an estimate of the
    /// usage counts when the provider reports none.
    request_bytes: usize,
    answer_chars: usize,
    /// The provider's last usage report.
    reported: Option<Usage>,
}

impl fmt::Debug for ChatStream {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("ChatStream")
            .field("url", &self.url)
            .field("pending", &self.pending.len())
            .field("state", &self.state)
            .finish_non_exhaustive()
    }
}

impl ChatStream {
    /// The next event; `Ok(None)` once the answer is over.
    pub async fn next_event(&mut self) -> Result<Option<ChatEvent>, ProviderError> {
        loop {
            if let Some(event) = self.pending.pop_front() {
                match &event {
                    ChatEvent::TextDelta(text) | ChatEvent::ReasoningDelta(text) => {
                        self.answer_chars += text.chars().count();
                    }
                    ChatEvent::ToolCall(call) => {
                        self.answer_chars += call.name.len() + call.arguments_json.len();
                    }
                    ChatEvent::Usage(usage) => self.reported = Some(*usage),
                    ChatEvent::Finished { .. } => {}
                }
                return Ok(Some(event));
            }
            if self.state == StreamState::Over {
                return Ok(None);
            }
            if let Err(err) = self.read_more().await {
                self.state = StreamState::Over;
                self.pending.clear();
                tracing::debug!(url = %self.url, error = %err, "chat stream failed");
                return Err(err);
            }
        }
    }

    /// Reads the next chunk and queues the events it completes.
    async fn read_more(&mut self) -> Result<(), ProviderError> {
        let (deadline, waiting) = match self.first_byte_deadline {
            Some(deadline) => (deadline, Waiting::FirstByte(self.timeouts.first_byte)),
            None => (Instant::now() + self.timeouts.idle, Waiting::Idle(self.timeouts.idle)),
        };
        let chunk = read_chunk(&mut self.response, deadline, &self.url, waiting).await?;
        self.first_byte_deadline = None;
        let key = self.key.as_ref().map(Secret::expose);
        let mut datas = Vec::new();
        let malformed =
            |e: crate::sse::NotUtf8| ProviderError::MalformedStream { problem: e.to_string() };
        let ended = chunk.is_none();
        match chunk {
            Some(bytes) => self.decoder.feed(&bytes, &mut datas).map_err(malformed)?,
            None => self.decoder.finish(&mut datas).map_err(malformed)?,
        }
        for data in &datas {
            if self.assembler.on_data(data, key, &mut self.pending)? == Progress::Done {
                // Whatever follows `[DONE]` is not read; dropping the response closes the
                // connection or returns it to the pool once drained.
                self.state = StreamState::Over;
                return Ok(());
            }
        }
        if ended {
            self.state = StreamState::Over;
            self.assembler.on_end(&mut self.pending)?;
        }
        Ok(())
    }

    /// Reads a whole `chat.completion` body (a server that ignored `stream: true`) and
    /// queues its events, so the caller sees the same events as for a stream.
    async fn read_whole(&mut self) -> Result<(), ProviderError> {
        let mut body = Vec::new();
        let mut deadline = self.first_byte_deadline.unwrap_or_else(Instant::now);
        let mut waiting = Waiting::FirstByte(self.timeouts.first_byte);
        while let Some(chunk) = read_chunk(&mut self.response, deadline, &self.url, waiting).await?
        {
            body.extend_from_slice(&chunk);
            deadline = Instant::now() + self.timeouts.idle;
            waiting = Waiting::Idle(self.timeouts.idle);
        }
        self.state = StreamState::Over;
        let key = self.key.as_ref().map(Secret::expose);
        let whole: Whole =
            serde_json::from_slice(&body).map_err(|err| ProviderError::MalformedResponse {
                problem: format!(
                    "a JSON answer that is not a chat completion ({err}): {}",
                    excerpt(&String::from_utf8_lossy(&body), key)
                ),
            })?;
        self.assembler.on_data(&whole.into_chunk_data(), key, &mut self.pending)?;
        self.assembler.on_data("[DONE]", key, &mut self.pending)?;
        Ok(())
    }

    /// What the request used so far: as the provider reported it, or, where it reported
    /// nothing (yet: an answer stopped early never gets its report), an estimate from what
    /// was sent and read. Asked for at any time, as often as wanted.
    pub fn metered(&self) -> Metered {
        match &self.reported {
            Some(usage) => Metered { usage: *usage, estimated: false },
            None => Metered {
                usage: Usage::estimate(self.request_bytes, self.answer_chars),
                estimated: true,
            },
        }
    }

    /// The events as a [`Stream`]; it ends after [`ChatEvent::Finished`] or an error.
    pub fn into_stream(self) -> impl Stream<Item = Result<ChatEvent, ProviderError>> + Send {
        futures::stream::unfold(Some(self), |stream| async move {
            let mut stream = stream?;
            match stream.next_event().await {
                Ok(Some(event)) => Some((Ok(event), Some(stream))),
                Ok(None) => None,
                Err(err) => Some((Err(err), None)),
            }
        })
    }

    /// Reads the whole answer.
    pub async fn collect(mut self) -> Result<ChatReply, ProviderError> {
        let mut reply = ChatReply::default();
        while let Some(event) = self.next_event().await? {
            match event {
                ChatEvent::TextDelta(text) => reply.text.push_str(&text),
                ChatEvent::ReasoningDelta(text) => reply.reasoning.push_str(&text),
                ChatEvent::ToolCall(call) => reply.tool_calls.push(call),
                ChatEvent::Usage(usage) => reply.usage = Some(usage),
                ChatEvent::Finished { reason } => reply.finish_reason = Some(reason),
            }
        }
        reply.metered = self.metered();
        Ok(reply)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn retry_after_reads_seconds_and_milliseconds() {
        let mut headers = HeaderMap::new();
        assert_eq!(retry_after(&headers), None);
        headers.insert("retry-after", HeaderValue::from_static("7"));
        assert_eq!(retry_after(&headers), Some(Duration::from_secs(7)));
        headers.insert("retry-after-ms", HeaderValue::from_static("1500"));
        assert_eq!(retry_after(&headers), Some(Duration::from_millis(1500)));
        headers.insert("retry-after-ms", HeaderValue::from_static("soon"));
        headers.insert("retry-after", HeaderValue::from_static("Wed, 21 Oct 2015 07:28:00 GMT"));
        assert_eq!(retry_after(&headers), None);
    }
}
