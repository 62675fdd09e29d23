//! llooma-approval-broker: every external tool call is put to the person first.
//!
//! A turn that wants to call an MCP tool asks the [`Broker`]: [`Broker::request`] stores a
//! [`PendingCall`] row with the exact arguments in canonical JSON and their SHA-256, a deadline
//! two minutes away and this process as its owner, and shows an [`ApprovalCard`] to every tab
//! watching the account ([`Broker::subscribe`]); the turn then [`Broker::wait`]s.
//! [`Broker::answer`] is one conditional update `pending -> allowed|refused`, so the first
//! answer wins across tabs, devices and replicas; a late one gets
//! [`AnswerResult::AlreadyAnswered`] saying who won and when.
//!
//! # Invariants
//!
//! - A call changes state once, from `pending`, by a conditional update in storage; the broker
//!   never reads a row and then writes it.
//! - Silence is never consent: at the deadline a call becomes `expired`, which the model is told
//!   in [`Outcome::model_text`].
//! - Nothing is left hanging: calls whose owning process is gone (stale heartbeat, a previous
//!   life, or every other owner when this is the sole process) become `interrupted` with a
//!   reason, at start-up and every heartbeat; a dropped [`Broker::wait`] interrupts its call.
//! - The arguments sent are the ones shown: [`Broker::verify_arguments`].
//! - An unknown call and another account's call look the same ([`AnswerResult::NotFound`]).
//! - This crate names no database: storage is the [`ApprovalPort`] that `llooma-store`
//!   implements, including the cross-replica notification source.
//! - Time comes from a [`Clock`], so tests pass a two-minute deadline without waiting for it.

mod broker;
mod call;
mod clock;
mod context;
mod error;
pub mod port;

pub use broker::{
    AbandonGuard, Broker, BrokerConfig, REASON_PROCESS_GONE, REASON_SHUTDOWN, REASON_TURN_STOPPED,
    Unasked,
};
pub use call::{
    ANSWERED_BY_BOT, ANSWERED_BY_CONSENT, AnswerChoice, AnswerResult, ApprovalCard, BrokerEvent,
    CallState, NewCall, Notice, Outcome, PendingCall,
};
pub use clock::{Clock, ManualClock, Sleep, SystemClock};
pub use context::{BOT_UNTICKED_REFUSAL, Context, Gate, SPOKEN_REFUSAL, gate};
pub use error::{BrokerError, PortError};
pub use port::ApprovalPort;

#[cfg(test)]
mod tests;
