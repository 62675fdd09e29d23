//! A call an MCP Apps view asks for: put to the person exactly as the model's calls are.
//!
//! A view is the server's code in the person's page. It may ask to call a tool, but only a
//! tool of the server whose call drew it, only one the server lets views call
//! (`visibility` naming `app`, or none given), only while that server is in use, and only
//! through the account's consent: an approval card (or a remembered "Always allow" or allow
//! rule), with the same two-minute answer window and first-answer rule. A bot or a spoken turn
//! has no view, so it can never ask.

use llooma_approval_broker::{Broker, CallState, NewCall, Unasked};
use llooma_consent::{ConsentCall, ConsentDecision, TrustLevel, decide};
use serde_json::Value;

use crate::app::App;
use crate::error::AppError;
use crate::mcp_servers::{decrypt_token, parse_snapshot};

impl App {
    /// Runs the call a view asks for: `drawn_by` is the id of the call whose view asks (its
    /// step's `callId`), `name` a tool of that call's server. Returns the result as the view
    /// receives it (an MCP `CallToolResult`). `Conflict` (`call_not_allowed`) when the person
    /// refused it or did not answer in time; `NotFound` when `drawn_by` is no call of the
    /// account's that drew a view.
    pub async fn view_tool_call(
        &self,
        account_id: &str,
        drawn_by: &str,
        name: &str,
        arguments: Value,
    ) -> Result<Value, AppError> {
        let origin = self
            .store
            .approval_call(drawn_by)
            .await?
            .filter(|c| c.account_id == account_id && c.question_json.is_none())
            .ok_or(AppError::NotFound)?;
        if origin.state != CallState::Allowed {
            return Err(AppError::NotFound);
        }
        let server = self
            .store
            .mcp_server(account_id, &origin.server_id)
            .await?
            .ok_or(AppError::NotFound)?;
        let snapshot = parse_snapshot(self, &server)?;
        // The call that drew it was of a tool with a view: a view of this server asks.
        let drew = snapshot.tools.iter().find(|t| t.name == origin.tool_name);
        if drew.is_none_or(|t| t.view.is_none()) {
            return Err(AppError::NotFound);
        }
        if !server.is_active() {
            return Err(AppError::Forbidden(format!(
                "{} is switched off or suspended: its view's calls are not made.",
                server.label
            )));
        }
        let Some(tool) = snapshot.tools.iter().find(|t| t.name == name) else {
            return Err(AppError::invalid(
                "unknown_tool",
                format!("{} has no tool named {name:?} in use.", server.label),
            ));
        };
        if tool.view.as_ref().is_some_and(|v| !v.for_view) {
            return Err(AppError::invalid(
                "not_for_views",
                format!("{} lets only the model call {name}, not its view.", server.label),
            ));
        }
        let arguments = match arguments {
            Value::Object(map) => Value::Object(map),
            Value::Null => Value::Object(serde_json::Map::new()),
            _ => {
                return Err(AppError::invalid(
                    "invalid_arguments",
                    "A call's arguments are an object.",
                ));
            }
        };
        let hints = llooma_types::ToolHints::new(tool.title.as_deref(), tool.annotations.as_ref());
        let new_call = NewCall {
            account_id: account_id.to_owned(),
            conversation_id: origin.conversation_id.clone(),
            turn_id: origin.turn_id.clone(),
            server_id: server.id.clone(),
            server_label: server.label.clone(),
            server_address: server.address.clone(),
            tool_name: tool.name.clone(),
            // What the card names as asked for: not the model, the view.
            model_tool_name: format!("{}{}", llooma_types::VIEW_CALLER, origin.tool_name),
            tool_description: tool.description.clone().unwrap_or_default(),
            tool_definition_hash: tool.hash.clone(),
            tool_hints_json: hints.as_ref().and_then(|h| serde_json::to_string(h).ok()),
            arguments: arguments.clone(),
        };
        let mode = self.store.permission_mode(account_id).await?;
        let grants: Vec<_> =
            self.store.consent_grants(account_id).await?.into_iter().map(|g| g.grant).collect();
        let rules: Vec<_> =
            self.store.consent_rules(account_id).await?.into_iter().map(|r| r.rule).collect();
        let decision = decide(
            mode,
            TrustLevel::ExternalMcp,
            &grants,
            &rules,
            &ConsentCall {
                server_address: &server.address,
                tool_name: &tool.name,
                tool_definition_hash: &tool.hash,
                arguments: &arguments,
                risk: None,
                read_only_hint: hints.as_ref().and_then(|h| h.read_only) == Some(true),
            },
        );
        let approved = match decision {
            ConsentDecision::Allowed { because } => {
                self.broker.record_unasked(new_call, Unasked::Remembered(because)).await?
            }
            ConsentDecision::Ask => {
                let pending = self.broker.request(new_call).await?;
                // The page that asked went away: the card goes with it.
                let mut standing = self.broker.abandon_guard(&pending.id);
                let outcome = self.broker.wait(&pending.id).await?;
                standing.disarm();
                if !outcome.allowed() {
                    return Err(AppError::conflict(
                        "call_not_allowed",
                        "The call was not made: it was refused, or not answered in time.",
                    ));
                }
                outcome.call
            }
        };
        Broker::<llooma_store::Store>::verify_arguments(&approved, &arguments)?;
        let sent = approved.arguments()?;
        let token = decrypt_token(self, &server)?;
        let result = self
            .mcp
            .call_tool_asking(&server.id, &server.address, token.as_ref(), &tool.name, sent, None)
            .await?;
        Ok(crate::engine::mcp::result_for_view(&result))
    }
}
