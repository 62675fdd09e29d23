//! Errors of provider calls, and the helpers that keep upstream text short and key-free.

use std::error::Error as StdError;
use std::time::Duration;

use llooma_net::NetError;

/// The longest excerpt of an upstream body kept in an error, in characters.
const EXCERPT_CHARS: usize = 200;

/// Everything that can go wrong talking to a model provider. Each variant's message says what
/// happened and what to do; upstream text appears only as a short single-line excerpt with the
/// API key scrubbed out. No variant carries the key.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum ProviderError {
    /// The configured base URL cannot be used.
    #[error(
        "the provider base URL is not usable ({problem}); write it like https://api.openai.com/v1 \
         or http://127.0.0.1:11434/v1"
    )]
    InvalidBaseUrl {
        /// What is wrong with it.
        problem: String,
    },
    /// The API key cannot be sent in an HTTP header.
    #[error(
        "the API key contains characters that cannot be sent in an HTTP header (a line break, \
         usually from copying); enter the key again"
    )]
    InvalidKey,
    /// More tools than the provider accepts in one request.
    #[error(
        "{given} tools offered but this provider accepts at most {max} per request; offer fewer \
         tools (or raise the provider's tool limit if it really takes more)"
    )]
    TooManyTools {
        /// How many were offered.
        given: usize,
        /// The provider's limit.
        max: usize,
    },
    /// The outbound network policy does not allow the provider's address.
    #[error("the model provider at {url} is not allowed by the outbound network policy: {reason}")]
    Refused {
        /// The URL (without query).
        url: String,
        /// Why, with what an administrator can do (from the policy).
        reason: String,
    },
    /// Nothing answered at the provider's address (connection refused, unknown host, ...).
    #[error(
        "could not connect to the model provider at {url} ({detail}); check that it is running \
         and that the base URL is right"
    )]
    Unreachable {
        /// The URL (without query).
        url: String,
        /// The system's reason.
        detail: String,
    },
    /// Connecting took too long.
    #[error(
        "connecting to the model provider at {url} timed out; check the base URL and that the \
         provider is reachable from this server"
    )]
    ConnectTimeout {
        /// The URL (without query).
        url: String,
    },
    /// The provider accepted the request but sent nothing in time.
    #[error(
        "the model provider at {url} sent nothing for {after:?} after the request; it may be \
         overloaded or still loading the model. Try again, or raise the first-byte timeout"
    )]
    FirstByteTimeout {
        /// The URL (without query).
        url: String,
        /// The timeout that ran out.
        after: Duration,
    },
    /// The provider stopped sending in the middle of an answer.
    #[error(
        "the model provider at {url} stopped sending for {after:?} in the middle of an answer; \
         try again, or raise the idle timeout if this model pauses that long"
    )]
    IdleTimeout {
        /// The URL (without query).
        url: String,
        /// The timeout that ran out.
        after: Duration,
    },
    /// 401 or 403: the key is wrong, revoked, or lacks access.
    #[error(
        "the provider refused the key (HTTP {status}): {excerpt}; check the API key configured \
         for this provider and that it has access to the model"
    )]
    KeyRefused {
        /// 401 or 403.
        status: u16,
        /// The start of the provider's explanation, one line, key scrubbed.
        excerpt: String,
    },
    /// 429: too many requests or tokens, or the quota is used up.
    #[error(
        "the provider is rate limiting this key (HTTP 429){}: {excerpt}; wait and try again, or \
         check the account's quota",
        retry_hint(*retry_after)
    )]
    RateLimited {
        /// How long the provider asked to wait, if it said (`Retry-After` in seconds, or
        /// `retry-after-ms`).
        retry_after: Option<Duration>,
        /// The start of the provider's explanation, one line, key scrubbed.
        excerpt: String,
    },
    /// 5xx: the provider failed.
    #[error(
        "the model provider failed with HTTP {status}: {excerpt}; the problem is on the \
         provider's side, try again later"
    )]
    ServerError {
        /// The status.
        status: u16,
        /// The start of the provider's explanation, one line, key scrubbed.
        excerpt: String,
    },
    /// Another 4xx: the provider rejected the request itself.
    #[error(
        "the model provider rejected the request with HTTP {status}: {excerpt}; check the model \
         name and the base URL (an unknown model or a wrong path is the usual cause)"
    )]
    Rejected {
        /// The status.
        status: u16,
        /// The start of the provider's explanation, one line, key scrubbed.
        excerpt: String,
    },
    /// The streamed answer is not what an OpenAI-compatible API sends.
    #[error(
        "the provider's answer stream is malformed ({problem}); check that the base URL points \
         at an OpenAI-compatible API"
    )]
    MalformedStream {
        /// What was wrong, with a short excerpt of the offending line.
        problem: String,
    },
    /// A whole (non-streamed) answer is not what an OpenAI-compatible API sends.
    #[error(
        "the provider's answer is malformed ({problem}); check that the base URL points at an \
         OpenAI-compatible API"
    )]
    MalformedResponse {
        /// What was wrong.
        problem: String,
    },
    /// The stream ended cleanly but before the answer was complete.
    #[error(
        "the provider's answer stream ended before the answer was complete (no finish_reason \
         and no [DONE]); try again"
    )]
    StreamEnded,
    /// The connection broke in the middle of an answer.
    #[error(
        "the connection to the model provider broke in the middle of an answer ({detail}); try again"
    )]
    StreamInterrupted {
        /// What the connection reported.
        detail: String,
    },
    /// The provider put an error object in the stream.
    #[error("the model provider reported an error in the middle of the answer: {excerpt}")]
    ProviderStreamError {
        /// The start of the provider's explanation, one line, key scrubbed.
        excerpt: String,
    },
    /// The answer is larger than the client allows.
    #[error(
        "the provider's answer is larger than {limit} bytes, the limit of this HTTP client; \
         reading stopped there (the limit is NetClientBuilder::max_response_bytes, see \
         ProviderConfig::configure_net_client)"
    )]
    BodyTooLarge {
        /// The cap, in bytes.
        limit: u64,
    },
    /// A whole exchange (a recording written down, a text read aloud) took longer than allowed.
    #[error(
        "the provider at {url} did not finish answering within {after:?}; it may be overloaded \
         or still loading the model. Try again, or raise the time allowed"
    )]
    TimedOut {
        /// The URL (without query).
        url: String,
        /// The time allowed.
        after: Duration,
    },
    /// An answer read whole is larger than what such an answer may be.
    #[error(
        "the provider's {what} is larger than {limit} bytes, more than such an answer ever is; \
         check that the base URL points at an OpenAI-compatible API"
    )]
    AnswerTooLarge {
        /// What was being read ("transcript", "spoken answer").
        what: &'static str,
        /// The cap, in bytes.
        limit: u64,
    },
    /// Any other network failure.
    #[error("the request to the model provider failed: {0}")]
    Network(#[source] NetError),
}

impl ProviderError {
    /// Whether the same request may well succeed later (the provider was busy, slow, down or
    /// cut the connection), as opposed to a problem that repeats until someone changes the
    /// configuration or the request.
    pub fn is_transient(&self) -> bool {
        matches!(
            self,
            ProviderError::Unreachable { .. }
                | ProviderError::ConnectTimeout { .. }
                | ProviderError::FirstByteTimeout { .. }
                | ProviderError::IdleTimeout { .. }
                | ProviderError::TimedOut { .. }
                | ProviderError::RateLimited { .. }
                | ProviderError::ServerError { .. }
                | ProviderError::StreamEnded
                | ProviderError::StreamInterrupted { .. }
                | ProviderError::ProviderStreamError { .. }
        )
    }
}

fn retry_hint(retry_after: Option<Duration>) -> String {
    match retry_after {
        Some(after) => format!(", asked to wait {}s", after.as_secs_f64().ceil()),
        None => String::new(),
    }
}

/// Where in the exchange a network error happened.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Phase {
    /// Sending the request and waiting for the headers.
    Send,
    /// Reading the body.
    Body,
}

/// Maps a network error, by where it happened.
pub(crate) fn from_net(err: NetError, phase: Phase) -> ProviderError {
    match err {
        NetError::Refused { url, reason } => {
            ProviderError::Refused { url, reason: reason.to_string() }
        }
        NetError::BodyTooLarge { limit, .. } => ProviderError::BodyTooLarge { limit },
        // With the total timeout off (configure_net_client), a timeout before the headers is
        // the connect timeout; during the body it can only be a total timeout set by the
        // caller, which cut the stream.
        NetError::Timeout { url } => match phase {
            Phase::Send => ProviderError::ConnectTimeout { url },
            Phase::Body => ProviderError::StreamInterrupted {
                detail: "the HTTP client's total timeout ran out; build the client with \
                         ProviderConfig::configure_net_client, which turns it off for streams"
                    .to_owned(),
            },
        },
        NetError::Connect { url, source } => {
            ProviderError::Unreachable { url, detail: root_cause(source.as_ref()) }
        }
        NetError::Request { source, .. } if phase == Phase::Body => {
            ProviderError::StreamInterrupted { detail: root_cause(source.as_ref()) }
        }
        other => ProviderError::Network(other),
    }
}

/// The innermost message of an error chain ("Connection refused (os error 111)"), which is the
/// part a person can act on; the outer layers repeat the URL.
fn root_cause(err: &(dyn StdError + 'static)) -> String {
    let mut current = err;
    while let Some(next) = current.source() {
        current = next;
    }
    one_line(&current.to_string(), EXCERPT_CHARS)
}

/// A short, single-line excerpt of an upstream body with the key scrubbed out. For JSON
/// error bodies (`{"error": {"message": ...}}`, or `{"error": "..."}`) the message is used.
pub(crate) fn excerpt(body: &str, key: Option<&str>) -> String {
    let text = message_of(body).unwrap_or_else(|| body.to_owned());
    let text = scrub(&text, key);
    let line = one_line(&text, EXCERPT_CHARS);
    if line.is_empty() { "(no explanation given)".to_owned() } else { line }
}

fn message_of(body: &str) -> Option<String> {
    let value: serde_json::Value = serde_json::from_str(body).ok()?;
    let error = value.get("error").unwrap_or(&value);
    match error {
        serde_json::Value::String(message) => Some(message.clone()),
        other => other
            .get("message")
            .or_else(|| other.get("detail"))
            .and_then(serde_json::Value::as_str)
            .map(str::to_owned),
    }
}

/// Replaces every occurrence of the key. Providers echo parts of a wrong key in their error
/// messages; a hostile or buggy one could echo all of it.
pub(crate) fn scrub(text: &str, key: Option<&str>) -> String {
    match key {
        Some(key) if key.len() >= 4 => text.replace(key, "[REDACTED]"),
        _ => text.to_owned(),
    }
}

/// Collapses whitespace and control characters to single spaces and cuts at `max` characters.
pub(crate) fn one_line(text: &str, max: usize) -> String {
    let mut out = String::new();
    let mut count = 0;
    let mut space = false;
    for c in text.chars() {
        if c.is_whitespace() || c.is_control() {
            space = !out.is_empty();
            continue;
        }
        if count >= max {
            out.push('…');
            return out;
        }
        if space {
            out.push(' ');
            count += 1;
            space = false;
        }
        out.push(c);
        count += 1;
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn excerpts_are_short_single_lines_without_the_key() {
        let key = "sk-secret-123456";
        let body =
            format!("{{\"error\": {{\"message\": \"Incorrect API key\\n provided: {key}\"}}}}");
        assert_eq!(excerpt(&body, Some(key)), "Incorrect API key provided: [REDACTED]");
        assert_eq!(excerpt("  plain\r\n\ttext  ", None), "plain text");
        assert_eq!(excerpt("", None), "(no explanation given)");
        assert_eq!(excerpt(r#"{"error": "model not found"}"#, None), "model not found");
        let long = "é".repeat(500);
        let cut = excerpt(&long, None);
        assert_eq!(cut.chars().count(), EXCERPT_CHARS + 1);
        assert!(cut.ends_with('…'));
    }

    #[test]
    fn short_keys_are_not_scrubbed_from_everything() {
        // A one-letter "key" would otherwise blank out every such letter of the message.
        assert_eq!(scrub("a cat", Some("a")), "a cat");
    }
}
