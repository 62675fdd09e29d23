//! The server's side of the bot runtime: storage, leases and the model behind
//! `llooma_chatto_bot::runtime` (the loop itself, and everything Chatto-specific, live there).
//!
//! The model is the turn engine: the integration's model, its identity (the usual system prompt,
//! a persona's prompt, or its own instructions), the built-in tools it ticked that this instance
//! provides, and MCP tools only when ticked, then run unasked (the tick is the consent; every call
//! still leaves an `approval_calls` row). No conversation is created and nothing is kept.

use std::sync::Arc;
use std::time::Duration;

use llooma_approval_broker::Context;
use llooma_chatto_bot::logic::{ContextMode, PlacementMode};
use llooma_chatto_bot::runtime::{IntegrationSpec, RunReport, RuntimeConfig, RuntimePort};
use llooma_chatto_bot::{BotSettings, ModelMessage, Responder, Role};
use llooma_core::{
    BuiltinTools, McpTurn, PageReader, SinkError, Speaker, TurnEnd, TurnRequest, TurnSink,
    WebSearch, run_turn,
};
use llooma_net::{NetClient, Purpose};
use llooma_store::{BotIntegration, BotRunReport, Store, StoreError};
use tokio::sync::watch;
use tokio::task::JoinHandle;

use crate::AppState;
use crate::error::ApiError;

/// The usual system prompt of a conversation started with this model: the instance's default,
/// or the administrator's rewrite for the model.
pub(crate) async fn usual_system_prompt(
    state: &AppState,
    provider_id: &str,
    model: &str,
) -> Result<Option<String>, ApiError> {
    let instance = state.store.instance_settings().await?;
    let rewrite = state.store.model_prompt(provider_id, model).await?;
    Ok(Some(llooma_core::system_prompt(
        instance.system_prompt.as_deref(),
        rewrite.as_deref(),
        None,
    )))
}

/// A persona's prompt (its prompt only: no memory, no library, no knowledge). None when the
/// account has no such persona.
pub(crate) async fn persona_prompt(
    state: &AppState,
    account_id: &str,
    persona_id: &str,
) -> Result<Option<String>, ApiError> {
    Ok(state.store.persona(account_id, persona_id).await?.map(|p| p.prompt))
}

/// Starts the polling runtime; it ends (giving its leases back) when `stop` turns true.
pub fn start_bots(state: AppState, poll_every: Duration, replica_id: String) -> JoinHandle<()> {
    let stop = state.stopping.clone();
    let config = RuntimeConfig::new(poll_every, replica_id);
    tokio::spawn(async move {
        let net = match NetClient::builder(state.outbound.clone(), Purpose::Bot).build() {
            Ok(net) => net,
            Err(err) => {
                tracing::error!(error = %err, "bots cannot run: the chat-server client failed");
                return;
            }
        };
        llooma_chatto_bot::runtime::run(Arc::new(BotPort { state }), net, config, stop).await;
    })
}

/// Storage, lease and model for the runtime.
pub struct BotPort {
    state: AppState,
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
    type Ledger = Store;
    type Responder = TurnResponder;

    async fn runnable(&self) -> Result<Vec<IntegrationSpec>, StoreError> {
        let mut specs = Vec::new();
        for b in self.state.store.runnable_bot_integrations().await? {
            let key = match self
                .state
                .vault
                .decrypt(crate::bots::key_context(&b.id), &b.api_key_ciphertext)
            {
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
        self.state.store.claim_bot_lease(id, holder, llooma_store::now_ms(), ttl_ms).await
    }

    async fn release_lease(&self, id: &str, holder: &str) -> Result<(), StoreError> {
        self.state.store.release_bot_lease(id, holder).await
    }

    async fn report(&self, spec: &IntegrationSpec, report: &RunReport) -> Result<(), StoreError> {
        let row = BotRunReport {
            run_state: report.state.as_str().to_owned(),
            error: report.error.clone(),
            missing_permission: report.missing_permission.clone(),
        };
        self.state.store.report_bot_run(&spec.id, spec.version, &row).await.map(|_| ())
    }

    fn ledger(&self) -> &Store {
        &self.state.store
    }

    fn responder(&self, spec: &IntegrationSpec) -> TurnResponder {
        TurnResponder { state: self.state.clone(), integration_id: spec.id.clone() }
    }
}

/// The model did not produce an answer to post.
#[derive(Debug, thiserror::Error)]
#[error("{0}")]
pub struct BotModelError(String);

/// Answers with the turn engine, as the integration is set up at the moment of the answer.
pub struct TurnResponder {
    state: AppState,
    integration_id: String,
}

/// A bot's turn is shown to nobody: its events go nowhere.
struct Discard;

impl TurnSink for Discard {
    async fn event(&self, _event: llooma_core::TurnEvent) -> Result<(), SinkError> {
        Ok(())
    }
}

impl Responder for TurnResponder {
    type Error = BotModelError;

    async fn respond(&self, context: &[ModelMessage]) -> Result<String, BotModelError> {
        let fail = |e: &dyn std::fmt::Display| BotModelError(e.to_string());
        let b = self
            .state
            .store
            .bot_integration_any(&self.integration_id)
            .await
            .map_err(|e| fail(&e))?
            .ok_or_else(|| BotModelError("the integration was deleted".into()))?;
        let (Some(provider_id), Some(model)) = (b.provider_id.clone(), b.model.clone()) else {
            return Err(BotModelError("no model is chosen for this bot".into()));
        };
        let system_prompt = match b.identity_source.as_str() {
            "instructions" => b.instructions.clone(),
            "persona" => Some(
                persona_prompt(&self.state, &b.account_id, b.persona_id.as_deref().unwrap_or(""))
                    .await
                    .map_err(|e| fail(&e))?
                    .ok_or_else(|| {
                        BotModelError("the bot's persona no longer exists; choose another".into())
                    })?,
            ),
            _ => usual_system_prompt(&self.state, &provider_id, &model)
                .await
                .map_err(|e| fail(&e))?,
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
        let mut request = TurnRequest {
            model,
            system_prompt,
            history,
            // 8 once MCP tools are known to be offered (below), else 4.
            rounds: llooma_core::ROUNDS,
            now_rfc3339: chrono::Utc::now().to_rfc3339_opts(chrono::SecondsFormat::Secs, true),
            attachments: Vec::new(),
        };
        let provider = crate::conversations::provider_client(&self.state, &provider_id)
            .await
            .map_err(BotModelError)?;
        // The bot's ticked tools that this instance provides; no memory, no buttons.
        let ticked = |name: &str| b.tools.iter().any(|t| t == name);
        let search = match self.state.store.instance_settings().await.map_err(|e| fail(&e))? {
            settings if ticked(llooma_core::WEB_SEARCH) => {
                settings.web_search_url.and_then(|address| self.state.searches.get(&address).ok())
            }
            _ => None,
        };
        let descriptions = self
            .state
            .store
            .tool_wordings(&b.account_id)
            .await
            .map_err(|e| fail(&e))?
            .into_iter()
            .collect();
        let builtins = BuiltinTools {
            current_date: ticked(llooma_core::CURRENT_DATE),
            web_search: search.as_ref().map(|s| s as &dyn WebSearch),
            read_page: ticked(llooma_core::READ_PAGE)
                .then_some(&self.state.pages as &dyn PageReader),
            memory: None,
            choices: false,
            descriptions,
        };
        let (_stop_tx, stop) = watch::channel(false);
        let end = if b.mcp_ticked {
            let (tools, instructions) = crate::mcp::offered_tools(
                &self.state,
                &b.account_id,
                provider.max_tools_per_request(),
                builtins.names().len(),
            )
            .await
            .map_err(|e| fail(&e))?;
            let mcp = McpTurn {
                tools,
                resources: Vec::new(),
                in_use: Some(&self.state),
                instructions,
                client: &self.state.mcp,
                broker: &self.state.broker,
                mode: llooma_policy::consent::PermissionMode::Ask,
                grants: Vec::new(),
                rules: Vec::new(),
                account_id: b.account_id.clone(),
                conversation_id: format!("bot:{}", b.id),
                turn_id: uuid::Uuid::new_v4().to_string(),
                announce: false,
                context: Context::Bot { mcp_ticked: true },
            };
            request.rounds = llooma_core::rounds_for(Some(&mcp));
            run_turn(&provider, &request, &builtins, Some(&mcp), &Discard, stop).await
        } else {
            run_turn(&provider, &request, &builtins, None::<&McpTurn<'_, Store>>, &Discard, stop)
                .await
        };
        match end {
            TurnEnd::Done { text } if !text.trim().is_empty() => Ok(text),
            TurnEnd::Done { .. } | TurnEnd::Stopped { .. } => {
                Err(BotModelError("the model gave an empty answer".into()))
            }
            TurnEnd::Failed { error, .. } => Err(BotModelError(error.to_string())),
        }
    }
}
