//! The consent every call to an MCP server passes, whoever asks for it: the model during a turn
//! ([`crate::McpTurn::call`]) or a server's view in the page ([`crate::App::view_tool_call`]).
//!
//! One order, in one place: the account's standing consent ("Always allow", allow rules, the
//! permission mode) decides → a call it covers is recorded unasked, any other is put to the
//! person on a card, withdrawn if the asker goes away → the arguments about to be sent are
//! checked against those shown.

use llooma_approval_broker::{
    AbandonGuard, ApprovalPort, Broker, BrokerError, NewCall, Outcome, PendingCall, Unasked,
};
use llooma_consent::{
    AllowRule, ConsentCall, ConsentDecision, Grant, PermissionMode, TrustLevel, decide,
};
use llooma_store::{Store, StoreError};
use serde_json::Value;

/// What an account has said once for all: its permission mode, its "Always allow" grants and
/// its allow rules, read when the asking starts (a turn reads them once, at its start).
#[derive(Debug, Clone)]
pub struct StandingConsent {
    pub mode: PermissionMode,
    pub grants: Vec<Grant>,
    pub rules: Vec<AllowRule>,
}

/// A call past the standing consent: recorded as made without asking, or waiting on its card.
pub(crate) enum Cleared<P: ApprovalPort> {
    Unasked(PendingCall),
    /// The card is out; dropping the guard before the answer withdraws it.
    Asking(PendingCall, AbandonGuard<P>),
}

impl StandingConsent {
    /// Nothing remembered: every call is asked (or, where the turn's context says so, never made).
    pub fn nothing() -> Self {
        StandingConsent { mode: PermissionMode::Ask, grants: Vec::new(), rules: Vec::new() }
    }

    pub(crate) async fn of(store: &Store, account_id: &str) -> Result<Self, StoreError> {
        Ok(StandingConsent {
            mode: store.permission_mode(account_id).await?,
            grants: store.consent_grants(account_id).await?.into_iter().map(|g| g.grant).collect(),
            rules: store.consent_rules(account_id).await?.into_iter().map(|r| r.rule).collect(),
        })
    }

    /// Records `call` as allowed when the standing consent covers it, else puts it to the
    /// person. `read_only` is the tool's own read-only hint (some rules allow only those).
    pub(crate) async fn clear<P: ApprovalPort>(
        &self,
        broker: &Broker<P>,
        call: NewCall,
        read_only: bool,
    ) -> Result<Cleared<P>, BrokerError> {
        let decision = decide(
            self.mode,
            TrustLevel::ExternalMcp,
            &self.grants,
            &self.rules,
            &ConsentCall {
                server_address: &call.server_address,
                tool_name: &call.tool_name,
                tool_definition_hash: &call.tool_definition_hash,
                arguments: &call.arguments,
                risk: None,
                read_only_hint: read_only,
            },
        );
        match decision {
            ConsentDecision::Allowed { because } => Ok(Cleared::Unasked(
                broker.record_unasked(call, Unasked::Remembered(because)).await?,
            )),
            ConsentDecision::Ask => {
                let pending = broker.request(call).await?;
                let guard = broker.abandon_guard(&pending.id);
                Ok(Cleared::Asking(pending, guard))
            }
        }
    }
}

/// Waits for the person's answer to a card: the allowed call, or the outcome that is not
/// (refused, expired, withdrawn). An error leaves the card to its guard, which withdraws it.
pub(crate) async fn answered<P: ApprovalPort>(
    broker: &Broker<P>,
    pending: &PendingCall,
    mut guard: AbandonGuard<P>,
) -> Result<Result<PendingCall, Outcome>, BrokerError> {
    let outcome = broker.wait(&pending.id).await?;
    guard.disarm();
    Ok(if outcome.allowed() { Ok(outcome.call) } else { Err(outcome) })
}

/// The arguments to send for an allowed call: exactly those it was allowed with, checked
/// against the ones about to go out.
pub(crate) fn sendable<P: ApprovalPort>(
    approved: &PendingCall,
    shown: &Value,
) -> Result<Value, BrokerError> {
    Broker::<P>::verify_arguments(approved, shown)?;
    approved.arguments()
}
