//! A call an MCP Apps view asks for: put to the person exactly as the model's calls are.
//!
//! A view is the server's code in the person's page. It may ask to call a tool, but only a
//! tool of the server whose call drew it, only one the server lets views call
//! (`visibility` naming `app`, or none given), only while that server is in use, and only
//! through the account's consent: an approval card (or a remembered "Always allow" or allow
//! rule), with the same two-minute answer window and first-answer rule. A bot or a spoken turn
//! has no view, so it can never ask.

use llooma_approval_broker::{CallState, NewCall, PendingCall};
use llooma_mcp_client::ContentItem;
use serde_json::{Value, json};

use crate::app::App;
use crate::consent_gate::{Cleared, StandingConsent, answered, sendable};
use crate::error::AppError;
use crate::mcp_servers::{Loaded, decrypt_token, load};

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
        let (origin, loaded) = self.viewing(account_id, drawn_by).await?;
        let server = &loaded.server;
        let Some(tool) = loaded.snapshot.tools.iter().find(|t| t.name == name) else {
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
        if !loaded.group_on(tool) {
            return Err(AppError::Forbidden(format!(
                "You switched off the group of {name} on {}: it is not called.",
                server.label
            )));
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
        let read_only = hints.as_ref().and_then(|h| h.read_only) == Some(true);
        let consent = StandingConsent::of(&self.store, account_id).await?;
        let approved = match consent.clear(&self.broker, new_call, read_only).await? {
            Cleared::Unasked(call) => call,
            // The page that asked went away: the card goes with it.
            Cleared::Asking(pending, standing) => {
                answered(&self.broker, &pending, standing).await?.map_err(|_| {
                    AppError::conflict(
                        "call_not_allowed",
                        "The call was not made: it was refused, or not answered in time.",
                    )
                })?
            }
        };
        let sent = sendable::<llooma_store::Store>(&approved, &arguments)?;
        // The answer may have taken two minutes: the tool must still be in use as it was shown.
        let in_use = crate::engine::mcp::InUseCheck::still_in_use(
            self, account_id, &server.id, &tool.name, &tool.hash,
        )
        .await
        .map_err(|e| AppError::Internal(e.to_string()))?;
        if !in_use {
            return Err(AppError::conflict(
                "tool_changed",
                "The call was not made: the tool changed, or its server was switched off or \
                 suspended, while you were asked.",
            ));
        }
        let token = decrypt_token(self, server)?;
        let result = self
            .mcp
            .call_tool_asking(&server.id, &server.address, token.as_ref(), &tool.name, sent, None)
            .await?;
        if let Err(why) = result.check_output(tool.output_schema.as_ref()) {
            return Err(AppError::invalid(
                "result_not_used",
                format!("{} returned a result that was not used: {why}.", server.label),
            ));
        }
        Ok(crate::engine::mcp::result_for_view(&result))
    }

    /// Reads a resource of the server whose call drew the view (as reading is for the person:
    /// no card), for the view. Returns the contents as the view receives them (an MCP
    /// `ReadResourceResult`), bounded like any resource read.
    pub async fn view_resource_read(
        &self,
        account_id: &str,
        drawn_by: &str,
        uri: &str,
    ) -> Result<Value, AppError> {
        let (_, Loaded { server, .. }) = self.viewing(account_id, drawn_by).await?;
        let token = decrypt_token(self, &server)?;
        let session = self.mcp.connect(&server.address, token.as_ref()).await?;
        let read = session.read_resource(uri).await;
        session.close().await;
        let read = read?;
        let contents: Vec<Value> = read
            .contents
            .iter()
            .filter_map(|item| match item {
                ContentItem::Resource { uri, mime_type, text, blob } => {
                    let mut shaped = json!({"uri": uri});
                    if let Some(mime_type) = mime_type {
                        shaped["mimeType"] = json!(mime_type);
                    }
                    match (text, blob) {
                        (Some(text), _) => shaped["text"] = json!(text),
                        (None, Some(blob)) => shaped["blob"] = json!(blob),
                        (None, None) => shaped["text"] = json!(""),
                    }
                    Some(shaped)
                }
                // What a limit cut says so in words.
                ContentItem::Text { text } => Some(json!({"uri": uri, "text": text})),
                _ => None,
            })
            .collect();
        Ok(json!({"contents": contents}))
    }

    /// The call whose view asks (`drawn_by`), its server and that server's snapshot: only a
    /// call of the account's that was made, of a tool with a view, on a server still the
    /// account's and in use.
    async fn viewing(
        &self,
        account_id: &str,
        drawn_by: &str,
    ) -> Result<(PendingCall, Loaded), AppError> {
        let origin = self
            .store
            .approval_call(drawn_by)
            .await?
            .filter(|c| c.account_id == account_id && c.question_json.is_none())
            .ok_or(AppError::NotFound)?;
        // A call a view asked for draws no view of its own.
        if origin.state != CallState::Allowed
            || llooma_types::asking_view(&origin.model_tool_name).is_some()
        {
            return Err(AppError::NotFound);
        }
        let server = self
            .store
            .mcp_server(account_id, &origin.server_id)
            .await?
            .ok_or(AppError::NotFound)?;
        let loaded = load(self, server).await?;
        let (server, snapshot) = (&loaded.server, &loaded.snapshot);
        // The call that drew it was of a tool, as it is defined now, whose view was kept: a view
        // of this server, of this version, asks.
        let drew = snapshot.tools.iter().find(|t| {
            t.name == origin.tool_name
                && t.hash == origin.tool_definition_hash
                && t.view.as_ref().is_some_and(|v| v.document_hash.is_some())
        });
        if drew.is_none() {
            return Err(AppError::NotFound);
        }
        let conversation = self.conversation(account_id, &origin.conversation_id).await?;
        let settings = self.store.tool_settings(account_id).await?;
        if !(conversation.mcp_enabled || settings.mcp_everywhere) {
            return Err(AppError::Forbidden(
                "MCP is switched off in this conversation: its views' calls are not made."
                    .to_owned(),
            ));
        }
        if !server.is_active() {
            return Err(AppError::Forbidden(format!(
                "{} is switched off or suspended: its view's calls are not made.",
                server.label
            )));
        }
        Ok((origin, loaded))
    }
}
