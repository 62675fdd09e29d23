//! MCP tools inside a turn. Every call goes through consent and the approval broker before
//! anything leaves the machine, and everything a server answers is wrapped as untrusted text.
//!
//! Order for one call: remembered consent (`llooma_policy::consent::decide`) → either recorded as
//! run unasked, or put to the person (`Broker::request`, a card, `Broker::wait`) → the arguments
//! about to be sent are checked against those shown (`Broker::verify_arguments`) → the call →
//! the result wrapped by the memory guard → a timeline step naming server and tool.

use llooma_approval_broker::{ApprovalPort, Broker, Context, Gate, NewCall, Unasked, gate};
use llooma_mcp_client::McpClient;
use llooma_memory_guard::{Caps, Source, TurnGuard};
use llooma_policy::consent::{
    AllowRule, ConsentCall, ConsentDecision, Grant, PermissionMode, TrustLevel, decide,
};
use llooma_providers::{ToolCall, ToolDefinition};
use llooma_vault::Secret;
use serde_json::{Value, json};

use crate::TurnSink;

/// An MCP tool offered in this turn (the caller applied switches, groups and the budget).
#[derive(Clone, Debug)]
pub struct McpTool {
    pub model_name: String,
    pub server_id: String,
    pub server_label: String,
    pub server_address: String,
    pub token: Option<Secret>,
    pub tool_name: String,
    pub description: String,
    pub input_schema: Value,
    /// The catalogued definition's hash: what consent and the card are tied to.
    pub definition_hash: String,
    /// The server's own `readOnlyHint` (shown, never trusted).
    pub read_only_hint: bool,
}

/// Everything a turn needs to offer and call MCP tools.
#[derive(Debug)]
pub struct McpTurn<'a, P: ApprovalPort> {
    pub tools: Vec<McpTool>,
    pub client: &'a McpClient,
    pub broker: &'a Broker<P>,
    pub mode: PermissionMode,
    pub grants: Vec<Grant>,
    pub rules: Vec<AllowRule>,
    pub account_id: String,
    pub conversation_id: String,
    pub turn_id: String,
}

impl<P: ApprovalPort> McpTurn<'_, P> {
    pub(crate) fn definitions(&self) -> Vec<ToolDefinition> {
        self.tools
            .iter()
            .map(|t| ToolDefinition {
                name: t.model_name.clone(),
                description: Some(t.description.clone()),
                parameters: t.input_schema.clone(),
            })
            .collect()
    }

    pub(crate) fn tool(&self, model_name: &str) -> Option<&McpTool> {
        self.tools.iter().find(|t| t.model_name == model_name)
    }

    /// Runs one call of an MCP tool; returns what the model reads.
    pub(crate) async fn call<S: TurnSink>(
        &self,
        tool: &McpTool,
        call: &ToolCall,
        guard: &mut TurnGuard,
        sink: &S,
        context: Context,
    ) -> Result<String, String> {
        let step = |state: &str, extra: Value| {
            let mut data = json!({
                "tool": tool.model_name, "server": tool.server_label, "serverTool": tool.tool_name,
                "mcp": true, "state": state,
            });
            if let (Some(data), Value::Object(extra)) = (data.as_object_mut(), extra) {
                data.extend(extra);
            }
            data
        };
        let arguments: Value = match serde_json::from_str(&call.arguments_json) {
            Ok(Value::Object(map)) => Value::Object(map),
            _ => {
                sink.event("step", step("invalid", json!({}))).await.map_err(|e| e.to_string())?;
                return Ok(format!(
                    "The arguments for {} were not a JSON object; nothing was called.",
                    tool.model_name
                ));
            }
        };
        let new_call = NewCall {
            account_id: self.account_id.clone(),
            conversation_id: self.conversation_id.clone(),
            turn_id: self.turn_id.clone(),
            server_id: tool.server_id.clone(),
            server_label: tool.server_label.clone(),
            server_address: tool.server_address.clone(),
            tool_name: tool.tool_name.clone(),
            model_tool_name: tool.model_name.clone(),
            tool_description: tool.description.clone(),
            tool_definition_hash: tool.definition_hash.clone(),
            arguments: arguments.clone(),
        };
        let gate = gate(context);
        if let Gate::RefuseOutright { reason } = gate {
            sink.event("step", step("refused", json!({}))).await.map_err(|e| e.to_string())?;
            return Ok(reason.to_owned());
        }
        // A ticked bot runs its calls unasked (the tick is the whole of the consent); recorded.
        let decision = (gate == Gate::Ask).then(|| {
            decide(
                self.mode,
                TrustLevel::ExternalMcp,
                &self.grants,
                &self.rules,
                &ConsentCall {
                    server_address: &tool.server_address,
                    tool_name: &tool.tool_name,
                    tool_definition_hash: &tool.definition_hash,
                    arguments: &arguments,
                    risk: None,
                    read_only_hint: tool.read_only_hint,
                },
            )
        });
        let approved = match decision {
            None => self
                .broker
                .record_unasked(new_call, Unasked::Bot)
                .await
                .map_err(|e| e.to_string())?,
            Some(ConsentDecision::Allowed { because }) => self
                .broker
                .record_unasked(new_call, Unasked::Remembered(because))
                .await
                .map_err(|e| e.to_string())?,
            Some(ConsentDecision::Ask) => {
                let pending = self.broker.request(new_call).await.map_err(|e| e.to_string())?;
                sink.event("approval", json!({ "card": pending.card() }))
                    .await
                    .map_err(|e| e.to_string())?;
                let outcome = self.broker.wait(&pending.id).await.map_err(|e| e.to_string())?;
                if !outcome.allowed() {
                    let state = outcome.state().as_str();
                    sink.event("step", step(state, json!({ "callId": pending.id })))
                        .await
                        .map_err(|e| e.to_string())?;
                    return Ok(outcome.model_text().unwrap_or_else(|| {
                        format!("The call to {} was not made.", tool.model_name)
                    }));
                }
                outcome.call
            }
        };
        Broker::<P>::verify_arguments(&approved, &arguments).map_err(|e| e.to_string())?;
        let sent = approved.arguments().map_err(|e| e.to_string())?;
        match self
            .client
            .call_tool(&tool.server_address, tool.token.as_ref(), &tool.tool_name, sent)
            .await
        {
            Ok(result) => {
                let wrapped = guard.admit(
                    &tool.server_label,
                    Source::ToolResult { tool: &tool.model_name },
                    &result.text_for_model(),
                    &Caps::default(),
                );
                sink.event(
                    "step",
                    step("allowed", json!({ "callId": approved.id, "isError": result.is_error })),
                )
                .await
                .map_err(|e| e.to_string())?;
                Ok(wrapped.into_string())
            }
            Err(err) => {
                sink.event(
                    "step",
                    step("failed", json!({ "callId": approved.id, "error": err.to_string() })),
                )
                .await
                .map_err(|e| e.to_string())?;
                Ok(format!(
                    "The call to {} on the server {} failed: {err}",
                    tool.model_name, tool.server_label
                ))
            }
        }
    }
}
