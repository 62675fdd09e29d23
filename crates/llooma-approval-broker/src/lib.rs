#![doc = include_str!("../README.md")]
//!
//! ## Invariants
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
    CallState, NewCall, Notice, Outcome, PendingCall, Reply,
};
pub use clock::{Clock, ManualClock, Sleep, SystemClock};
pub use context::{BOT_UNTICKED_REFUSAL, Context, Gate, SPOKEN_REFUSAL, gate};
pub use error::{BrokerError, PortError};
pub use port::ApprovalPort;

#[cfg(test)]
mod tests;
