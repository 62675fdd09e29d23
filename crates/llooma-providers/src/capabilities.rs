//! What a model says it can do, where its server reports it. Ollama answers `POST /api/show`
//! with `capabilities` (`vision` for a model that sees images); the OpenAI API has no such
//! list, and other servers answer 404 there, which means "not said".

use std::time::Duration;

use http::header;
use serde::Deserialize;

use crate::client::ProviderClient;
use crate::error::{Phase, ProviderError, from_net};

/// A model's details are small; more is not an answer to this question.
const MAX_SHOW_BYTES: usize = 1024 * 1024;

#[derive(Deserialize)]
struct Shown {
    capabilities: Option<Vec<String>>,
}

impl ProviderClient {
    /// Whether `model` sees images, as its server reports it; `Ok(None)` when the server does
    /// not say (no `/api/show`, or no `capabilities` in its answer).
    pub async fn reported_vision(
        &self,
        model: &str,
        within: Duration,
    ) -> Result<Option<bool>, ProviderError> {
        let url = self.show_url.clone();
        let body = serde_json::json!({ "model": model }).to_string();
        let builder = self
            .net
            .post(&url)
            .map_err(|err| from_net(err, Phase::Send))?
            .headers(self.headers()?)
            .header(header::CONTENT_TYPE, "application/json")
            .header(header::ACCEPT, "application/json")
            .body(body);
        let bytes =
            match self.exchange(builder, &url, within, MAX_SHOW_BYTES, "model's details").await {
                Ok((_, bytes)) => bytes,
                // Not Ollama (no such path), or a model it does not know: nothing said.
                Err(ProviderError::Rejected { .. }) => return Ok(None),
                Err(err) => return Err(err),
            };
        let Ok(shown) = serde_json::from_slice::<Shown>(&bytes) else { return Ok(None) };
        Ok(shown.capabilities.map(|all| all.iter().any(|c| c == "vision")))
    }
}

#[cfg(test)]
mod tests {
    use crate::client::show_url;

    #[test]
    fn ollama_s_own_api_sits_beside_its_openai_one() {
        assert_eq!(show_url("http://gpu:11434/v1"), "http://gpu:11434/api/show");
        assert_eq!(show_url("http://gpu:11434"), "http://gpu:11434/api/show");
    }
}
