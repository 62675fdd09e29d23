//! Approval cards and remembered consent of an account.
//!
//! Cards: the ones still waiting (what a reloaded page shows), news of them for every tab and
//! device of the account ([`App::card_news`]), and answers: the first counts, a late one is told
//! which answer won and when. Consent: the permission mode, "Always allow" grants and allow
//! rules.

use std::collections::BTreeMap;

use futures::Stream;
use llooma_approval_broker::{
    AnswerChoice, AnswerResult, ApprovalCard, BrokerError, BrokerEvent, CallState, Reply,
};
use llooma_consent::{ALLOW_ALL_WARNING, ArgConstraint, PermissionMode};
use llooma_store::NewRule;
use llooma_types::question::QuestionForm;
use llooma_types::{ConsentGrantView as GrantView, ConsentRuleView as RuleView, ConsentView};
use serde::{Deserialize, Serialize};
use serde_json::{Value, json};
use sha2::{Digest, Sha256};
use tokio::sync::broadcast::error::RecvError;

use crate::{App, AppError};

/// A session's public name on answers: derived from its (secret) token hash, not reversible to
/// it, so "answered by" can be shown to other tabs without handing them anything usable.
pub fn public_session_id(token_hash: &str) -> String {
    let digest = Sha256::digest(format!("llooma-session-id:{token_hash}").as_bytes());
    format!("s-{}", &hex::encode(digest)[..16])
}

/// News of an account's cards, as a tab receives it: its name (the SSE event) and JSON.
#[derive(Debug)]
pub struct CardNews {
    pub name: &'static str,
    pub data_json: String,
}

impl CardNews {
    fn of(event: &BrokerEvent) -> Self {
        let name = match event {
            BrokerEvent::Appeared { .. } => "appeared",
            BrokerEvent::Answered { .. } => "answered",
            BrokerEvent::Expired { .. } => "expired",
            BrokerEvent::Interrupted { .. } => "interrupted",
        };
        CardNews { name, data_json: serde_json::to_string(event).unwrap_or_default() }
    }
}

/// A person's answer on a card: allow, refuse or always_allow a call; accept (with the form's
/// values), decline or cancel a server's question.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum CardChoice {
    Allow,
    Refuse,
    AlwaysAllow,
    Accept,
    Decline,
    Cancel,
}

/// The answer that won.
#[derive(Debug, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct AnswerView {
    id: String,
    state: CallState,
}

impl App {
    /// The account's cards still waiting for an answer.
    pub async fn waiting_cards(&self, account_id: &str) -> Result<Vec<ApprovalCard>, AppError> {
        let pending = self
            .broker
            .pending_for_account(account_id)
            .await
            .map_err(|e| AppError::Internal(format!("listing approvals: {e}")))?;
        Ok(pending.iter().map(|call| call.card()).collect())
    }

    async fn pending_news(&self, account_id: &str) -> CardNews {
        match self.broker.pending_for_account(account_id).await {
            Ok(calls) => {
                let cards: Vec<ApprovalCard> = calls.iter().map(|c| c.card()).collect();
                let data_json = json!({"type": "pending", "cards": cards}).to_string();
                CardNews { name: "pending", data_json }
            }
            Err(err) => {
                tracing::warn!(error = %err, "listing pending approvals for a stream failed");
                let data_json = json!({"type": "error", "message": "The waiting cards could not be read; reconnecting will retry."})
                    .to_string();
                CardNews { name: "error", data_json }
            }
        }
    }

    /// News of the account's cards for one tab, until the server stops: first every card
    /// waiting (`pending`), then `appeared`, `answered`, `expired`, `interrupted`. Subscribed
    /// before the first read, so nothing that happens in between is missed; a tab that falls
    /// behind gets the whole list again.
    pub async fn card_news(&self, account_id: &str) -> impl Stream<Item = CardNews> + Send + use<> {
        let receiver = self.broker.subscribe(account_id);
        let first = self.pending_news(account_id).await;
        let stopping = self.stopping.clone();
        let (app, account_id) = (self.clone(), account_id.to_owned());
        futures::stream::unfold(
            (Some(first), receiver, stopping, app, account_id),
            |(first, mut receiver, mut stopping, app, account_id)| async move {
                if let Some(news) = first {
                    return Some((news, (None, receiver, stopping, app, account_id)));
                }
                let received = tokio::select! {
                    received = receiver.recv() => received,
                    _ = stopping.wait_for(|stop| *stop) => return None,
                };
                let news = match received {
                    Ok(event) => CardNews::of(&event),
                    // Boxed, as a log read is for a tab's stream (see `Watcher::next`).
                    Err(RecvError::Lagged(_)) => Box::pin(app.pending_news(&account_id)).await,
                    Err(RecvError::Closed) => return None,
                };
                Some((news, (None, receiver, stopping, app, account_id)))
            },
        )
    }
}

fn state_word(state: CallState) -> &'static str {
    match state {
        CallState::Pending => "still waiting",
        CallState::Allowed => "allowed",
        CallState::Refused => "refused",
        CallState::Expired => "refused because nobody answered within two minutes",
        CallState::Interrupted => "dropped because its turn stopped",
    }
}

impl App {
    /// Answers one of the account's cards from a session (named by its token hash, which never
    /// leaves the server). The first answer counts; a late one is told which won and when.
    /// `content` is a question's form, with `accept` only; it is checked against the form the
    /// card shows, and a form that does not fit is refused with the card still open.
    pub async fn answer_card(
        &self,
        account_id: &str,
        session_token_hash: &str,
        id: &str,
        choice: CardChoice,
        content: Option<serde_json::Map<String, Value>>,
    ) -> Result<AnswerView, AppError> {
        if content.is_some() && choice != CardChoice::Accept {
            return Err(AppError::invalid(
                "content_without_accept",
                "Only an accepted question carries the form's values: send content with \
                 \"accept\" alone.",
            ));
        }
        if choice == CardChoice::AlwaysAllow
            && self.store.permission_mode(account_id).await? != PermissionMode::Rules
        {
            return Err(AppError::invalid(
                "always_allow_unavailable",
                "“Always allow” is remembered only in the “rules” permission mode (Settings → Tools → \
             Permissions). Allow this call once, or switch the mode first.",
            ));
        }
        let me = public_session_id(session_token_hash);
        let answered = match choice {
            CardChoice::Allow => self.broker.answer(account_id, id, &me, AnswerChoice::Allow).await,
            CardChoice::Refuse => {
                self.broker.answer(account_id, id, &me, AnswerChoice::Refuse).await
            }
            CardChoice::AlwaysAllow => {
                self.broker.answer(account_id, id, &me, AnswerChoice::AlwaysAllow).await
            }
            CardChoice::Decline => self.broker.reply(account_id, id, &me, &Reply::Decline).await,
            CardChoice::Cancel => self.broker.reply(account_id, id, &me, &Reply::Cancel).await,
            CardChoice::Accept => {
                let content =
                    self.checked_form(account_id, id, content.unwrap_or_default()).await?;
                self.broker.reply(account_id, id, &me, &Reply::Accept { content }).await
            }
        };
        let result = answered.map_err(|e| match e {
            BrokerError::WrongAnswer(message) => AppError::invalid("wrong_answer", message),
            other => AppError::Internal(format!("answering an approval: {other}")),
        })?;
        match result {
            AnswerResult::Won { call } => {
                tracing::info!(account = %account_id, call = %id, state = call.state.as_str(), "approval answered");
                Ok(AnswerView { id: id.to_owned(), state: call.state })
            }
            AnswerResult::AlreadyAnswered { state: final_state, answered_at_ms, by_session } => {
                let when = answered_at_ms
                    .and_then(chrono::DateTime::from_timestamp_millis)
                    .map(|t| format!(" at {} UTC", t.format("%H:%M:%S")))
                    .unwrap_or_default();
                let from = match by_session.as_deref() {
                    Some(s) if s == me => " from this tab",
                    Some(llooma_approval_broker::ANSWERED_BY_BOT)
                    | Some(llooma_approval_broker::ANSWERED_BY_CONSENT)
                    | None => "",
                    Some(_) => " from another tab or device",
                };
                Err(AppError::Conflict {
                    code: "already_answered",
                    message: format!(
                        "This call was already {}{from}{when}.",
                        state_word(final_state)
                    ),
                })
            }
            AnswerResult::NotFound => Err(AppError::NotFound),
        }
    }
}

impl App {
    /// A question's answer, checked against the form its card shows (defaults added for fields
    /// left out); the card's own kind is left to the broker to check.
    async fn checked_form(
        &self,
        account_id: &str,
        id: &str,
        content: serde_json::Map<String, Value>,
    ) -> Result<serde_json::Map<String, Value>, AppError> {
        let asked = llooma_approval_broker::ApprovalPort::call_by_id(self.broker.port(), id)
            .await
            .map_err(|e| AppError::Internal(format!("reading a question: {e}")))?
            .filter(|call| call.account_id == account_id)
            .ok_or(AppError::NotFound)?;
        let Some(form_json) = asked.question_json else {
            // A call's card: the broker says what to answer instead.
            return Ok(content);
        };
        let form: QuestionForm = serde_json::from_str(&form_json)
            .map_err(|e| AppError::Internal(format!("a stored question cannot be read: {e}")))?;
        form.check(&content).map_err(|why| {
            AppError::invalid(
                "answer_does_not_fit",
                format!("{why}. Correct it and send again: the question is still open."),
            )
        })
    }
}

fn constraint_json(constraint: &ArgConstraint) -> Value {
    match constraint {
        ArgConstraint::Any => json!("any"),
        ArgConstraint::Exact(value) => json!({"exact": value}),
    }
}

impl App {
    /// The account's permission mode, grants and rules.
    pub async fn consent(&self, account_id: &str) -> Result<ConsentView, AppError> {
        let mode = self.store.permission_mode(account_id).await?;
        let grants = self
            .store
            .consent_grants(account_id)
            .await?
            .into_iter()
            .map(|g| GrantView {
                arguments: serde_json::from_str(&g.grant.arguments_json).unwrap_or(Value::Null),
                id: g.grant.id,
                server_address: g.grant.server_address,
                tool_name: g.grant.tool_name,
                created_at: llooma_store::ms_to_rfc3339(g.created_at_ms),
            })
            .collect();
        let rules = self
            .store
            .consent_rules(account_id)
            .await?
            .into_iter()
            .map(|r| RuleView {
                arguments: r
                    .rule
                    .arguments
                    .iter()
                    .map(|(k, c)| (k.clone(), constraint_json(c)))
                    .collect(),
                id: r.rule.id,
                server_address: r.rule.server_address,
                tool_name: r.rule.tool_name,
                created_at: llooma_store::ms_to_rfc3339(r.created_at_ms),
            })
            .collect();
        Ok(ConsentView {
            mode: mode.as_str().to_owned(),
            allow_all_warning: ALLOW_ALL_WARNING.to_owned(),
            grants,
            rules,
        })
    }

    /// Sets the permission mode: `ask`, `rules` or `allow_all`.
    pub async fn set_permission_mode(
        &self,
        account_id: &str,
        mode: &str,
    ) -> Result<ConsentView, AppError> {
        let mode = PermissionMode::parse(mode).ok_or_else(|| {
            AppError::invalid(
                "invalid_mode",
                "The permission mode is one of ask, rules, allow_all.",
            )
        })?;
        self.store.set_permission_mode(account_id, mode).await?;
        tracing::info!(account = %account_id, mode = mode.as_str(), "permission mode changed");
        self.consent(account_id).await
    }

    /// Revokes an "Always allow" grant.
    pub async fn revoke_grant(&self, account_id: &str, id: &str) -> Result<(), AppError> {
        if self.store.revoke_consent_grant(account_id, id).await? {
            Ok(())
        } else {
            Err(AppError::NotFound)
        }
    }

    fn parse_constraint(name: &str, value: &Value) -> Result<ArgConstraint, AppError> {
        match value {
            Value::String(s) if s == "any" => Ok(ArgConstraint::Any),
            Value::Object(map) if map.len() == 1 && map.contains_key("exact") => {
                Ok(ArgConstraint::Exact(map.get("exact").cloned().unwrap_or(Value::Null)))
            }
            _ => Err(AppError::invalid(
                "invalid_rule",
                format!("The constraint for `{name}` must be \"any\" or {{\"exact\": value}}."),
            )),
        }
    }

    /// Adds an allow rule for one tool of one of the account's servers, tied to the tool as it
    /// is described now. `arguments`: `{"argument": "any" | {"exact": value}}`; arguments not named
    /// make the rule not apply.
    pub async fn add_rule(
        &self,
        account_id: &str,
        server_id: &str,
        tool: &str,
        arguments: &BTreeMap<String, Value>,
    ) -> Result<ConsentView, AppError> {
        let server =
            self.store.mcp_server(account_id, server_id).await?.ok_or(AppError::NotFound)?;
        let snapshot = crate::mcp_servers::parse_snapshot(self, &server)?;
        let tool = snapshot.tools.iter().find(|t| t.name == tool).ok_or_else(|| {
            AppError::invalid("unknown_tool", format!("The server has no tool named `{tool}`."))
        })?;
        let mut constraints = BTreeMap::new();
        for (name, value) in arguments {
            constraints.insert(name.clone(), Self::parse_constraint(name, value)?);
        }
        self.store
            .add_consent_rule(NewRule {
                account_id: account_id.to_owned(),
                server_address: server.address.clone(),
                tool_name: tool.name.clone(),
                tool_definition_hash: tool.hash.clone(),
                arguments: constraints,
            })
            .await?;
        self.consent(account_id).await
    }

    /// Revokes an allow rule.
    pub async fn revoke_rule(&self, account_id: &str, id: &str) -> Result<(), AppError> {
        if self.store.revoke_consent_rule(account_id, id).await? {
            Ok(())
        } else {
            Err(AppError::NotFound)
        }
    }
}
