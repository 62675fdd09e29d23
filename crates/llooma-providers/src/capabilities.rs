//! What a model says it can do, where its server reports it. Ollama answers `POST /api/show`
//! with `capabilities` (`vision` for a model that sees images) and its context window (the
//! `num_ctx` its model file sets, else the `<architecture>.context_length` of `model_info`);
//! the OpenAI API has no such list, and other servers answer 404 there, which means "not
//! said".

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
    /// The model file's parameters, one `name value` per line.
    parameters: Option<String>,
    model_info: Option<serde_json::Map<String, serde_json::Value>>,
}

/// What a model's server said of it; each `None` is "not said".
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct ModelReport {
    /// Whether it sees images.
    pub vision: Option<bool>,
    /// Its context window, in tokens.
    pub context_tokens: Option<u32>,
}

impl Shown {
    fn report(&self) -> ModelReport {
        let vision = self.capabilities.as_ref().map(|all| all.iter().any(|c| c == "vision"));
        let set = self.parameters.as_deref().and_then(|lines| {
            lines.lines().find_map(|line| {
                let mut words = line.split_whitespace();
                (words.next() == Some("num_ctx")).then(|| words.next()?.parse::<u32>().ok())?
            })
        });
        let trained = self.model_info.as_ref().and_then(|info| {
            info.iter()
                .find(|(key, _)| key.ends_with(".context_length"))
                .and_then(|(_, value)| value.as_u64())
                .map(|n| u32::try_from(n).unwrap_or(u32::MAX))
        });
        ModelReport { vision, context_tokens: set.or(trained).filter(|n| *n > 0) }
    }
}

impl ProviderClient {
    /// What `model`'s server says of it; all `None` when it does not say (no `/api/show`, or
    /// nothing known in its answer).
    pub async fn reported_model(
        &self,
        model: &str,
        within: Duration,
    ) -> Result<ModelReport, ProviderError> {
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
                Err(ProviderError::Rejected { .. }) => return Ok(ModelReport::default()),
                Err(err) => return Err(err),
            };
        let Ok(shown) = serde_json::from_slice::<Shown>(&bytes) else {
            return Ok(ModelReport::default());
        };
        Ok(shown.report())
    }
}

#[cfg(test)]
mod tests {
    use super::{ModelReport, Shown};
    use crate::client::show_url;

    fn shown(json: serde_json::Value) -> ModelReport {
        serde_json::from_value::<Shown>(json).unwrap().report()
    }

    #[test]
    fn the_window_a_model_file_sets_comes_before_the_one_it_was_trained_with() {
        let info =
            serde_json::json!({"general.architecture": "llama", "llama.context_length": 131072});
        let both = serde_json::json!({
            "capabilities": ["completion", "vision"],
            "parameters": "stop \"<|eot_id|>\"\nnum_ctx                        16384",
            "model_info": info,
        });
        assert_eq!(shown(both), ModelReport { vision: Some(true), context_tokens: Some(16384) });
        let trained = serde_json::json!({"capabilities": ["completion"], "model_info": info});
        assert_eq!(
            shown(trained),
            ModelReport { vision: Some(false), context_tokens: Some(131072) }
        );
        assert_eq!(shown(serde_json::json!({})), ModelReport::default());
    }

    #[test]
    fn ollama_s_own_api_sits_beside_its_openai_one() {
        assert_eq!(show_url("http://gpu:11434/v1"), "http://gpu:11434/api/show");
        assert_eq!(show_url("http://gpu:11434"), "http://gpu:11434/api/show");
    }
}
