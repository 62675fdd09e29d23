//! Bots: the application's side of the bot runtime (`llooma_chatto_bot::runtime` holds the
//! loop and everything Chatto-specific): the integrations to run, their leases and activation
//! ledger in the store, and the model behind each answer.
//!
//! The model is the turn engine, through the same plan as a conversation's turn
//! ([`crate::setup`]): the integration's model, its identity (the usual system prompt, a
//! persona's prompt, or its own instructions), the app tools it ticked that this instance
//! provides, and MCP tools only when ticked, then run unasked (the tick is the consent; every
//! call still leaves an `approval_calls` row). No conversation is created and nothing is kept.

use std::sync::Arc;
use std::time::Duration;

use chrono::{DateTime, Utc};
use llooma_chatto_bot::logic::{ContextMode, PlacementMode};
use llooma_chatto_bot::runtime::{IntegrationSpec, RunReport, RuntimeConfig, RuntimePort};
use llooma_chatto_bot::{
    ActivationKey, ActivationLedger, BotSettings, ModelMessage, Responder, Role,
};
use llooma_net::Purpose;
use llooma_store::{BotIntegration, BotRunReport, Store, StoreError};
use llooma_vault::SecretContext;
use tokio::sync::watch;
use tokio::task::JoinHandle;

use crate::setup::{AppTools, McpUse, TurnPlan};
use crate::{App, AppError, SinkError, Speaker, TurnEnd, TurnRequest, TurnSink};

const TABLE: &str = "bot_integrations";
const KEY_COLUMN: &str = "api_key_ciphertext";

/// Where a bot's key is sealed: to its own row.
pub(crate) fn key_context(id: &str) -> SecretContext<'_> {
    SecretContext::new(TABLE, KEY_COLUMN, id)
}

impl App {
    /// The usual system prompt of a conversation started with this model: the instance's
    /// default, or the administrator's rewrite for the model.
    async fn usual_system_prompt(
        &self,
        instance: &llooma_store::InstanceSettings,
        provider_id: &str,
        model: &str,
    ) -> Result<String, AppError> {
        let rewrite = self.store.model_prompt(provider_id, model).await?;
        Ok(crate::system_prompt(instance.system_prompt.as_deref(), rewrite.as_deref(), None))
    }

    /// Starts the polling runtime; it ends (giving its leases back) when the server stops.
    pub fn start_bots(&self, poll_every: Duration) -> JoinHandle<()> {
        let app = self.clone();
        let config = RuntimeConfig::new(poll_every, self.turns.replica_id.clone());
        tokio::spawn(async move {
            let net = match app.net(app.outbound.clone(), Purpose::Bot).build() {
                Ok(net) => net,
                Err(err) => {
                    tracing::error!(error = %err, "bots cannot run: the chat-server client failed");
                    return;
                }
            };
            let stop = app.stopping.clone();
            let ledger = BotLedger(app.store.clone());
            llooma_chatto_bot::runtime::run(Arc::new(BotPort { app, ledger }), net, config, stop)
                .await;
        })
    }
}

/// The activation ledger in the store: a unique insert per activation, and the hour of replies
/// the rate limit counts.
#[derive(Debug)]
pub struct BotLedger(Store);

impl ActivationLedger for BotLedger {
    type Error = StoreError;

    async fn try_record_activation(
        &self,
        key: &ActivationKey,
        at: DateTime<Utc>,
    ) -> Result<bool, StoreError> {
        self.0
            .record_bot_activation(
                &key.integration,
                &key.room,
                &key.event_id,
                at.timestamp_millis(),
            )
            .await
    }

    async fn replies_in_last_hour(
        &self,
        integration: &str,
        now: DateTime<Utc>,
    ) -> Result<Vec<DateTime<Utc>>, StoreError> {
        let until = now.timestamp_millis();
        let since = until - 3_600_000;
        Ok(self
            .0
            .bot_activation_times(integration, since, until)
            .await?
            .into_iter()
            .filter_map(DateTime::from_timestamp_millis)
            .collect())
    }
}

/// Storage, lease and model for the runtime.
#[derive(Debug)]
pub struct BotPort {
    app: App,
    ledger: BotLedger,
}
fn context_mode(b: &BotIntegration) -> ContextMode {
    match b.context_mode.as_str() {
        "calling_message" => ContextMode::OnlyCallingMessage,
        "whole_thread" => ContextMode::WholeThread,
        _ => ContextMode::messages_before(usize::try_from(b.context_count).unwrap_or(6)),
    }
}

fn placement(b: &BotIntegration) -> PlacementMode {
    match b.placement.as_str() {
        "always_thread" => PlacementMode::AlwaysThread,
        "always_room" => PlacementMode::AlwaysRoom,
        _ => PlacementMode::WhereAsked,
    }
}

impl RuntimePort for BotPort {
    type Error = StoreError;
    type Ledger = BotLedger;
    type Responder = TurnResponder;

    async fn runnable(&self) -> Result<Vec<IntegrationSpec>, StoreError> {
        let mut specs = Vec::new();
        for b in self.app.store.runnable_bot_integrations().await? {
            let key = match self.app.vault.decrypt(key_context(&b.id), &b.api_key_ciphertext) {
                Ok(key) => key,
                Err(err) => {
                    tracing::error!(integration = %b.id, error = %err, "a bot's key cannot be read");
                    continue;
                }
            };
            specs.push(IntegrationSpec {
                id: b.id.clone(),
                address: b.address.clone(),
                key,
                settings: BotSettings {
                    integration_id: b.id.clone(),
                    context: context_mode(&b),
                    placement: placement(&b),
                },
                version: b.updated_at_ms,
            });
        }
        Ok(specs)
    }

    async fn claim_lease(&self, id: &str, holder: &str, ttl: Duration) -> Result<bool, StoreError> {
        let ttl_ms = i64::try_from(ttl.as_millis()).unwrap_or(i64::MAX);
        self.app.store.claim_bot_lease(id, holder, llooma_store::now_ms(), ttl_ms).await
    }

    async fn release_lease(&self, id: &str, holder: &str) -> Result<(), StoreError> {
        self.app.store.release_bot_lease(id, holder).await
    }

    async fn report(&self, spec: &IntegrationSpec, report: &RunReport) -> Result<(), StoreError> {
        let row = BotRunReport {
            run_state: report.state.as_str().to_owned(),
            error: report.error.clone(),
            missing_permission: report.missing_permission.clone(),
        };
        self.app.store.report_bot_run(&spec.id, spec.version, &row).await.map(|_| ())
    }

    fn ledger(&self) -> &BotLedger {
        &self.ledger
    }

    fn responder(&self, spec: &IntegrationSpec) -> TurnResponder {
        TurnResponder { app: self.app.clone(), integration_id: spec.id.clone() }
    }
}

/// The model did not produce an answer to post.
#[derive(Debug, thiserror::Error)]
#[error("{0}")]
pub struct BotModelError(String);

/// Answers with the turn engine, as the integration is set up at the moment of the answer.
#[derive(Debug)]
pub struct TurnResponder {
    app: App,
    integration_id: String,
}

/// A bot's turn is shown to nobody: its events go nowhere.
struct Discard;

impl TurnSink for Discard {
    async fn event(&self, _event: crate::TurnEvent) -> Result<(), SinkError> {
        Ok(())
    }
}

impl Responder for TurnResponder {
    type Error = BotModelError;

    async fn respond(&self, context: &[ModelMessage]) -> Result<String, BotModelError> {
        let fail = |e: &dyn std::fmt::Display| BotModelError(e.to_string());
        let b = self
            .app
            .store
            .bot_integration_any(&self.integration_id)
            .await
            .map_err(|e| fail(&e))?
            .ok_or_else(|| BotModelError("the integration was deleted".into()))?;
        let (Some(provider_id), Some(model)) = (b.provider_id.clone(), b.model.clone()) else {
            return Err(BotModelError("no model is chosen for this bot".into()));
        };
        let instance = self.app.store.instance_settings().await.map_err(|e| fail(&e))?;
        let system_prompt = match b.identity_source.as_str() {
            "instructions" => b.instructions.clone(),
            // A persona contributes its prompt and nothing else: no memory, no library.
            "persona" => Some(
                self.app
                    .store
                    .persona(&b.account_id, b.persona_id.as_deref().unwrap_or(""))
                    .await
                    .map_err(|e| fail(&e))?
                    .map(|p| p.prompt)
                    .ok_or_else(|| {
                        BotModelError("the bot's persona no longer exists; choose another".into())
                    })?,
            ),
            _ => Some(
                self.app
                    .usual_system_prompt(&instance, &provider_id, &model)
                    .await
                    .map_err(|e| fail(&e))?,
            ),
        };
        let history = context
            .iter()
            .map(|m| {
                let speaker = match m.role {
                    Role::User => Speaker::Person,
                    Role::Assistant => Speaker::Model,
                };
                (speaker, m.text.clone())
            })
            .collect();
        let plan = TurnPlan {
            provider: None,
            tool_wordings: None,
            account_id: b.account_id.clone(),
            provider_id,
            request: TurnRequest {
                model,
                system_prompt,
                earlier: Default::default(),
                history,
                rounds: crate::ROUNDS,
                now_rfc3339: crate::conversations::now_rfc3339(),
                attachments: Vec::new(),
                images: Vec::new(),
                tool_images: false,
            },
            tools: AppTools::Ticked(b.tools.clone()),
            web_search_url: instance.web_search_url,
            mcp: if b.mcp_ticked { McpUse::Unasked } else { McpUse::Off },
            conversation_id: format!("bot:{}", b.id),
            turn_id: uuid::Uuid::new_v4().to_string(),
        };
        // Over its owner's limit the bot stays silent; its card says why.
        let limits = match self.app.store.account_limits(&b.account_id).await {
            Ok(Some(own)) => own,
            Ok(None) => instance.default_limits,
            Err(e) => return Err(fail(&e)),
        };
        let asking = plan.request.history.iter().map(|(_, text)| text.len()).sum::<usize>()
            + plan.request.system_prompt.as_ref().map_or(0, String::len);
        self.app
            .admit_turn(&b.account_id, &limits, &instance.currency, asking.div_ceil(4) as u64)
            .await
            .map_err(|e| {
                BotModelError(format!("it was not asked, by the limits of the bot's owner. {e}"))
            })?;
        // Nobody can press Stop on a bot's answer.
        let (_stop_tx, stop) = watch::channel(false);
        let meter = crate::usage::Meter::default();
        let (provider_id, model) = (plan.provider_id.clone(), plan.request.model.clone());
        let end = self.app.run_plan(plan, &Discard, stop, &meter).await;
        self.app.record_usage(&b.account_id, &provider_id, &model, meter.take()).await;
        match end {
            TurnEnd::Done { text } if !text.trim().is_empty() => Ok(text),
            TurnEnd::Done { .. } | TurnEnd::Stopped { .. } => {
                Err(BotModelError("the model gave an empty answer".into()))
            }
            TurnEnd::Failed { error, .. } => Err(BotModelError(error.to_string())),
        }
    }
}
