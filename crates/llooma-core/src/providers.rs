//! Model providers as the application uses them: [`ProviderClients`] keeps one client per
//! provider, reused across turns, bots and the list of models.
//!
//! A client is kept with the stored fields it was built from (base URL, key ciphertext); each
//! use reads the provider's row (as it always did) and reuses the client only while those
//! fields are unchanged, so a change made on any replica, a key rotation included, is picked
//! up by the next turn. Changing or deleting a provider through this replica's admin API drops
//! its entry at once, so no key outlives its row here.
//!
//! Reuse also keeps idle connections to the provider across turns. The outbound policy is
//! unaffected: every request's URL is still decided on, and a kept connection was checked
//! (address included) when it was made, under the same process-wide policy.

use std::collections::HashMap;
use std::sync::{Arc, Mutex, PoisonError};
use std::time::{Duration, Instant};

use llooma_net::{Decision, Origin, OutboundPolicy, Purpose, Refusal, Url};
use llooma_providers::{ModelReport, ProviderClient, ProviderConfig};
use llooma_store::Provider;
use llooma_types::{ModelChoice, ProviderModels};
use llooma_vault::SecretContext;

use crate::{App, AppError, TurnError};

/// Built provider clients by provider id. Cheap to clone (shared).
#[derive(Clone, Debug, Default)]
pub struct ProviderClients {
    built: Arc<Mutex<HashMap<String, Built>>>,
}

#[derive(Debug)]
struct Built {
    from: Fingerprint,
    client: ProviderClient,
}

/// The stored fields a client is built from. Kept as they are (no hash): comparing them is
/// exact, and the ciphertext is no more secret here than in the database.
#[derive(Debug, PartialEq, Eq)]
struct Fingerprint {
    base_url: String,
    key_ciphertext: Option<String>,
    local_network: bool,
}

impl Fingerprint {
    fn of(provider: &Provider) -> Self {
        Fingerprint {
            base_url: provider.base_url.clone(),
            key_ciphertext: provider.api_key_ciphertext.clone(),
            local_network: provider.local_network,
        }
    }

    fn matches(&self, provider: &Provider) -> bool {
        self.base_url == provider.base_url
            && self.key_ciphertext.as_deref() == provider.api_key_ciphertext.as_deref()
            && self.local_network == provider.local_network
    }
}

impl ProviderClients {
    /// The client built from this row, if one was and the row has not changed since.
    pub(crate) fn cached(&self, provider: &Provider) -> Option<ProviderClient> {
        let built = self.built.lock().unwrap_or_else(PoisonError::into_inner);
        built.get(&provider.id).filter(|b| b.from.matches(provider)).map(|b| b.client.clone())
    }

    /// Keeps `client`, built from `provider`, replacing what was kept for that provider.
    pub(crate) fn keep(&self, provider: &Provider, client: ProviderClient) {
        let mut built = self.built.lock().unwrap_or_else(PoisonError::into_inner);
        built.insert(provider.id.clone(), Built { from: Fingerprint::of(provider), client });
    }

    /// Drops the client of a provider that was changed or deleted.
    pub(crate) fn forget(&self, provider_id: &str) {
        self.built.lock().unwrap_or_else(PoisonError::into_inner).remove(provider_id);
    }
}

impl App {
    /// The client for a provider: the one kept while its stored address and key are unchanged,
    /// otherwise a new one (the row is read every time, so a change on any replica is seen).
    pub async fn provider_client(&self, provider_id: &str) -> Result<ProviderClient, TurnError> {
        let Some(provider) = self.store.provider(provider_id).await? else {
            self.providers.forget(provider_id);
            return Err(TurnError::ProviderRemoved);
        };
        self.provider_client_for(provider)
    }

    /// The client for a provider's row just read: the kept one while the row's address, key
    /// and mark are unchanged, otherwise a new one.
    pub(crate) fn provider_client_for(
        &self,
        provider: Provider,
    ) -> Result<ProviderClient, TurnError> {
        if let Some(client) = self.providers.cached(&provider) {
            return Ok(client);
        }
        let mut config = ProviderConfig::new(provider.base_url.clone());
        if let Some(stored) = provider.api_key_ciphertext.as_deref() {
            let key = self
                .vault
                .decrypt(
                    SecretContext::new("providers", "api_key_ciphertext", &provider.id),
                    stored,
                )
                .map_err(|e| TurnError::ProviderKey(e.to_string()))?;
            config = config.with_api_key(key);
        }
        let policy = self.provider_policy(&provider.base_url, provider.local_network);
        let net = config
            .configure_net_client(self.net(policy, Purpose::Provider))
            .build()
            .map_err(|e| TurnError::Setup(e.to_string()))?;
        let client = ProviderClient::new(net, config)?;
        self.providers.keep(&provider, client.clone());
        Ok(client)
    }

    /// The outbound policy a provider's client runs under: the server's, and for a provider the
    /// administrator marked as on this machine or the local network, its own origin as a local
    /// origin (loopback and private addresses, nothing else; docs/network-policy.md). While
    /// `PROVIDER_ALLOWED_ORIGINS` is set, that list alone decides.
    fn provider_policy(&self, base_url: &str, local_network: bool) -> Arc<OutboundPolicy> {
        let origin = Url::parse(base_url).ok().as_ref().and_then(Origin::of_url);
        match origin {
            Some(origin) if local_network => {
                Arc::new((*self.outbound).clone().with_local_origin(Purpose::Provider, origin))
            }
            _ => self.outbound.clone(),
        }
    }

    /// Refuses a provider an administrator is adding at `base_url` when it could never be
    /// reached as asked (`local_network`: marked as on this machine or the local network), with
    /// what to do. Only an address written as such is judged here; a name is judged on every
    /// connection, by what it then resolves to. An unmarked provider is judged when used, as it
    /// always was: one added before the policy allowed it starts working once it does.
    pub fn check_provider_address(
        &self,
        base_url: &str,
        local_network: bool,
    ) -> Result<(), AppError> {
        if !local_network {
            return Ok(());
        }
        let policy = self.provider_policy(base_url, true);
        let Decision::Refused { reason } = policy.decide_str(Purpose::Provider, base_url) else {
            return Ok(());
        };
        Err(local_address_refused("provider", reason))
    }

    /// Drops the kept client of a provider changed or deleted through this replica, so no key
    /// outlives its row here.
    pub fn forget_provider(&self, provider_id: &str) {
        self.providers.forget(provider_id);
    }

    /// For each provider, the models it lists (`GET {base}/models`) and those an administrator
    /// declared, to choose a conversation's model from.
    pub async fn models(&self) -> Result<Vec<ProviderModels>, AppError> {
        let providers = self.store.list_providers().await?;
        let lists = futures::future::join_all(providers.iter().map(|p| async move {
            let client = self.provider_client(&p.id).await?;
            Ok::<_, TurnError>(client.list_models().await?)
        }))
        .await;
        let mut answer = Vec::with_capacity(providers.len());
        for (provider, listed) in providers.into_iter().zip(lists) {
            let (listed, list_error) = match listed {
                Ok(models) => (models.into_iter().map(|m| m.id).collect(), None),
                Err(error) => {
                    // The detail (which may quote the provider) is for the operator's log.
                    tracing::warn!(provider = %provider.id, %error, "listing a provider's models failed");
                    let message = "The provider did not list its models (it may be down, or \
                                   refuse the key); an administrator can check it. Declared \
                                   models are still offered.";
                    (Vec::new(), Some(message.to_owned()))
                }
            };
            let mut models: Vec<ModelChoice> = listed
                .into_iter()
                .map(|id| ModelChoice { sees_images: false, id, source: "provider".to_owned() })
                .collect();
            for id in &provider.declared_models {
                if !models.iter().any(|m| m.id == *id) {
                    models.push(ModelChoice {
                        sees_images: false,
                        id: id.clone(),
                        source: "declared".to_owned(),
                    });
                }
            }
            let seen = futures::future::join_all(
                models.iter().take(MAX_MODELS_ASKED).map(|m| self.sees_images(&provider, &m.id)),
            )
            .await;
            for (model, sees) in models.iter_mut().zip(seen) {
                model.sees_images = sees;
            }
            for model in models.iter_mut().skip(MAX_MODELS_ASKED) {
                model.sees_images = provider.vision_models.contains(&model.id);
            }
            answer.push(ProviderModels {
                provider_id: provider.id,
                provider_name: provider.name,
                models,
                list_error,
            });
        }
        Ok(answer)
    }
}

/// At most this many of a provider's models are asked about when its list is shown.
const MAX_MODELS_ASKED: usize = 64;
/// How long a server's word on a model is kept.
const REPORT_KEPT: Duration = Duration::from_secs(600);
/// How long a server may take to say what a model can do.
const REPORT_WAIT: Duration = Duration::from_secs(5);

/// What providers on this machine or network said about their models (Ollama's
/// `capabilities` and context window), by provider and model, with when they said it.
#[derive(Debug, Default, Clone)]
pub(crate) struct ReportedModels(Arc<Mutex<HashMap<ModelKey, (Instant, ModelReport)>>>);

/// A provider's id and one of its models.
type ModelKey = (String, String);

impl ReportedModels {
    fn get(&self, provider_id: &str, model: &str) -> Option<ModelReport> {
        let kept = self.0.lock().unwrap_or_else(PoisonError::into_inner);
        let key = (provider_id.to_owned(), model.to_owned());
        kept.get(&key).filter(|(at, _)| at.elapsed() < REPORT_KEPT).map(|(_, said)| *said)
    }

    fn keep(&self, provider_id: &str, model: &str, said: ModelReport) {
        let mut kept = self.0.lock().unwrap_or_else(PoisonError::into_inner);
        kept.retain(|_, (at, _)| at.elapsed() < REPORT_KEPT);
        kept.insert((provider_id.to_owned(), model.to_owned()), (Instant::now(), said));
    }
}

/// Where a model's context window was learned.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum WindowSource {
    /// Written by an administrator for this model.
    Administrator,
    /// Said by the model's server.
    Provider,
    /// The instance's default.
    Default,
}

impl App {
    /// What a provider on this machine or network says of `model` (asked once, kept ten
    /// minutes); nothing for another provider, or one that does not say or cannot be asked.
    async fn reported_model(&self, provider: &Provider, model: &str) -> ModelReport {
        if !provider.local_network {
            return ModelReport::default();
        }
        if let Some(said) = self.reported_models.get(&provider.id, model) {
            return said;
        }
        let Ok(client) = self.provider_client(&provider.id).await else {
            return ModelReport::default();
        };
        let said = match client.reported_model(model, REPORT_WAIT).await {
            Ok(said) => said,
            Err(error) => {
                tracing::debug!(provider = %provider.id, %error, "asking about a model failed");
                ModelReport::default()
            }
        };
        self.reported_models.keep(&provider.id, model, said);
        said
    }

    /// Whether `model` of `provider` sees images: marked so by an administrator, or, for a
    /// provider on this machine or network, said so by its server (Ollama's `capabilities`).
    /// A server that does not say, or cannot be asked, is "no".
    pub(crate) async fn sees_images(&self, provider: &Provider, model: &str) -> bool {
        if provider.vision_models.iter().any(|m| m == model) {
            return true;
        }
        self.reported_model(provider, model).await.vision.unwrap_or(false)
    }

    /// `model`'s context window in tokens, and where it was learned: as an administrator wrote
    /// it for the model, else as a provider on this machine or network says, else the
    /// instance's `default`. The provider is asked only when `ask` (a conversation large enough
    /// for its window to matter: a short one's reply waits for no round trip); otherwise what
    /// it said lately, if anything.
    pub(crate) async fn context_window(
        &self,
        provider: Option<&Provider>,
        model: &str,
        default: u32,
        ask: bool,
    ) -> (u32, WindowSource) {
        let Some(provider) = provider else { return (default, WindowSource::Default) };
        if let Some(&tokens) = provider.context_windows.get(model) {
            return (tokens, WindowSource::Administrator);
        }
        let said = match ask {
            true => self.reported_model(provider, model).await,
            false => self.reported_models.get(&provider.id, model).unwrap_or_default(),
        };
        match said.context_tokens {
            Some(tokens) => {
                (tokens.max(crate::context_window::MIN_WINDOW_TOKENS), WindowSource::Provider)
            }
            None => (default, WindowSource::Default),
        }
    }
}

/// Why an address an administrator entered for something on this machine or the local network
/// (a provider marked local, the web search service) can never be reached, with what such an
/// address looks like when that is the reason.
pub(crate) fn local_address_refused(what: &str, reason: Refusal) -> AppError {
    let mut message = format!("The {what}'s address is refused: {reason}.");
    if matches!(reason, Refusal::BlockedAddress { .. }) {
        message.push_str(&format!(
            " A {what} on this machine or the local network listens on a loopback or private \
             address (127.0.0.1, ::1, 10.x, 172.16-31.x, 192.168.x, 100.64-127.x, fc00::/7); \
             link-local addresses, where cloud metadata services answer, are never reachable."
        ));
    }
    AppError::Unprocessable { code: "address_refused", message }
}

#[cfg(test)]
mod tests {
    use std::sync::Arc;

    use llooma_net::{NetClient, OutboundPolicy, Purpose};
    use llooma_providers::{ProviderClient, ProviderConfig};
    use llooma_store::Provider;

    use super::ProviderClients;

    fn row(id: &str, base_url: &str, key: Option<&str>) -> Provider {
        Provider {
            id: id.to_owned(),
            name: "Local".to_owned(),
            base_url: base_url.to_owned(),
            api_key_ciphertext: key.map(str::to_owned),
            declared_models: Vec::new(),
            local_network: false,
            vision_models: Vec::new(),
            context_windows: Default::default(),
            created_at_ms: 0,
        }
    }

    fn client(base_url: &str) -> ProviderClient {
        let net = NetClient::builder(Arc::new(OutboundPolicy::public_only()), Purpose::Provider)
            .build()
            .unwrap();
        ProviderClient::new(net, ProviderConfig::new(base_url)).unwrap()
    }

    #[test]
    fn a_client_is_reused_while_its_row_is_unchanged() {
        let clients = ProviderClients::default();
        let first = row("p1", "https://models.example/v1", Some("v1.k.aaa"));
        assert!(clients.cached(&first).is_none());
        clients.keep(&first, client(&first.base_url));

        let mut same = row("p1", "https://models.example/v1", Some("v1.k.aaa"));
        same.name = "Renamed".to_owned();
        same.declared_models = vec!["m".to_owned()];
        let reused = clients.cached(&same).unwrap();
        assert_eq!(reused.config().base_url, "https://models.example/v1");
        // Another provider's row does not find it.
        assert!(
            clients.cached(&row("p2", "https://models.example/v1", Some("v1.k.aaa"))).is_none()
        );
    }

    #[test]
    fn a_changed_address_or_key_is_not_served_the_old_client() {
        let clients = ProviderClients::default();
        let first = row("p1", "https://models.example/v1", Some("v1.k.aaa"));
        clients.keep(&first, client(&first.base_url));

        assert!(clients.cached(&row("p1", "https://other.example/v1", Some("v1.k.aaa"))).is_none());
        assert!(
            clients.cached(&row("p1", "https://models.example/v1", Some("v1.k.bbb"))).is_none()
        );
        assert!(clients.cached(&row("p1", "https://models.example/v1", None)).is_none());

        let moved = row("p1", "https://other.example/v1", None);
        clients.keep(&moved, client(&moved.base_url));
        assert_eq!(clients.cached(&moved).unwrap().config().base_url, "https://other.example/v1");
        assert!(clients.cached(&first).is_none());
    }

    #[test]
    fn a_forgotten_provider_is_built_again() {
        let clients = ProviderClients::default();
        let first = row("p1", "https://models.example/v1", None);
        clients.keep(&first, client(&first.base_url));
        clients.forget("p1");
        assert!(clients.cached(&first).is_none());
    }
}
