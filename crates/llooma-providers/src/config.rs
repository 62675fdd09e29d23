//! The settings of one provider.

use llooma_net::NetClientBuilder;
use llooma_vault::Secret;

use crate::types::Timeouts;

/// OpenAI's limit on tools in one chat request.
pub const OPENAI_MAX_TOOLS: usize = 128;

/// The response cap [`ProviderConfig::configure_net_client`] sets: 64 MiB.
///
/// `NetClient`'s cap counts every byte of a response, so for a stream it bounds the whole
/// answer, not a chunk. A long answer is a few hundred KiB of SSE (each token is wrapped in
/// ~150 bytes of JSON), so 64 MiB never cuts a real answer while still bounding a provider
/// that streams without end.
pub const DEFAULT_MAX_STREAM_BYTES: u64 = 64 * 1024 * 1024;

/// The settings of one OpenAI-compatible provider (OpenAI, Ollama, vLLM, llama.cpp server,
/// LM Studio, OpenRouter, ...). `Debug` shows the key as `Secret([REDACTED])`.
#[derive(Debug, Clone)]
pub struct ProviderConfig {
    /// The API base, ending before `/chat/completions`: `https://api.openai.com/v1`,
    /// `http://127.0.0.1:11434/v1` (Ollama), `https://openrouter.ai/api/v1`.
    pub base_url: String,
    /// Sent as `Authorization: Bearer <key>`; local servers usually need none.
    pub api_key: Option<Secret>,
    /// The most tools one request may offer. The turn engine reads it to decide what to
    /// expose; a request with more fails with [`ProviderError::TooManyTools`](crate::ProviderError)
    /// before anything is sent. Default [`OPENAI_MAX_TOOLS`].
    pub max_tools_per_request: usize,
    /// Time limits.
    pub timeouts: Timeouts,
    /// Whether to ask for usage in the stream (`stream_options.include_usage`). Default true;
    /// turn it off for an old server that rejects the field.
    pub request_usage: bool,
}

impl ProviderConfig {
    /// A provider at `base_url` with no key and the defaults.
    pub fn new(base_url: impl Into<String>) -> Self {
        Self {
            base_url: base_url.into(),
            api_key: None,
            max_tools_per_request: OPENAI_MAX_TOOLS,
            timeouts: Timeouts::default(),
            request_usage: true,
        }
    }

    /// Sets the API key.
    pub fn with_api_key(mut self, key: Secret) -> Self {
        self.api_key = Some(key);
        self
    }

    /// Sets the time limits.
    pub fn with_timeouts(mut self, timeouts: Timeouts) -> Self {
        self.timeouts = timeouts;
        self
    }

    /// Sets the tool limit.
    pub fn with_max_tools_per_request(mut self, max: usize) -> Self {
        self.max_tools_per_request = max;
        self
    }

    /// Adjusts a `NetClient` builder (whose purpose and policy the caller chose) for model
    /// streams: no total timeout (an answer may stream for minutes; [`ProviderClient`]
    /// enforces the first-byte and idle timeouts itself), the connect timeout of these
    /// settings, and a response cap of [`DEFAULT_MAX_STREAM_BYTES`].
    ///
    /// [`ProviderClient`]: crate::ProviderClient
    pub fn configure_net_client(&self, builder: NetClientBuilder) -> NetClientBuilder {
        builder
            .total_timeout(None)
            .connect_timeout(self.timeouts.connect)
            .max_response_bytes(DEFAULT_MAX_STREAM_BYTES)
    }
}
