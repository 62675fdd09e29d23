//! What the broker needs from storage. `llooma-store` implements it; the broker never names a
//! database.
//!
//! Every state change is a single conditional update (`... WHERE state = 'pending'`), and the
//! implementation reports whether it changed the row: that is how exactly one answer wins. Each
//! change that another replica must hear about is published through the notification source
//! ([`ApprovalPort::notices`]) *in the same transaction*, so it is delivered only if it happened.

use std::future::Future;

use tokio::sync::mpsc;

use crate::{CallState, Notice, PendingCall, PortError};

/// `pending -> allowed|refused`, if still pending, for this account, before the deadline.
#[derive(Debug, Clone, Copy)]
pub struct AnswerUpdate<'a> {
    pub call_id: &'a str,
    pub account_id: &'a str,
    /// `Allowed` or `Refused`.
    pub state: CallState,
    pub by_session: &'a str,
    /// Also the deadline check: the update only applies while `deadline_ms > at_ms`.
    pub at_ms: i64,
    /// "Always allow": store a consent grant for the call's server, tool definition and exact
    /// arguments, in the same transaction, only if this answer wins.
    pub remember: bool,
    /// The replica answering (carried in the notice).
    pub origin: &'a str,
    /// A question's answer (the form's values, or the person's decline), stored with the
    /// state so the waiting turn reads it on whichever replica it runs.
    pub reply_json: Option<&'a str>,
    /// Whether this answers a server's question: the update applies only to a row of that
    /// kind (`question_json` set), and an answer to a call only to a call's row.
    pub question: bool,
}

/// Which pending calls lost the turn that was waiting for them.
#[derive(Debug, Clone, Copy)]
pub enum Orphans<'a> {
    /// Owned by a replica other than `me` whose heartbeat is older than `alive_since_ms` (or
    /// that has no heartbeat at all).
    NotAlive { me: &'a str, alive_since_ms: i64 },
    /// Owned by anyone but `me` (a sole process starting: every other owner is a past life).
    AllExcept { me: &'a str },
    /// Owned by one of these replicas (this process's previous lives, or itself shutting down).
    OwnedBy { owners: &'a [String] },
}

/// Storage for pending calls, replica heartbeats and cross-replica notices.
pub trait ApprovalPort: Send + Sync + 'static {
    /// Stores a new call. A `pending` one is announced through the notification source.
    fn insert_call(&self, call: &PendingCall)
    -> impl Future<Output = Result<(), PortError>> + Send;

    fn call_by_id(
        &self,
        call_id: &str,
    ) -> impl Future<Output = Result<Option<PendingCall>, PortError>> + Send;

    /// Every call of the account still `pending`, oldest first.
    fn pending_for_account(
        &self,
        account_id: &str,
    ) -> impl Future<Output = Result<Vec<PendingCall>, PortError>> + Send;

    /// One conditional update; `true` when this answer won.
    fn answer_call(
        &self,
        update: AnswerUpdate<'_>,
    ) -> impl Future<Output = Result<bool, PortError>> + Send;

    /// `pending -> expired` if the deadline is at or before `at_ms`; `true` when it changed.
    fn expire_call(
        &self,
        call_id: &str,
        at_ms: i64,
        origin: &str,
    ) -> impl Future<Output = Result<bool, PortError>> + Send;

    /// Expires every pending call whose deadline is at or before `at_ms`; the changes made.
    fn expire_overdue(
        &self,
        at_ms: i64,
        origin: &str,
    ) -> impl Future<Output = Result<Vec<Notice>, PortError>> + Send;

    /// `pending -> interrupted` with a reason; `true` when it changed.
    fn interrupt_call(
        &self,
        call_id: &str,
        at_ms: i64,
        reason: &str,
        origin: &str,
    ) -> impl Future<Output = Result<bool, PortError>> + Send;

    /// Interrupts every pending call matching `which`, with a reason; the changes made.
    fn interrupt_orphans(
        &self,
        which: Orphans<'_>,
        at_ms: i64,
        reason: &str,
        origin: &str,
    ) -> impl Future<Output = Result<Vec<Notice>, PortError>> + Send;

    /// Drops a question's stored answer once the waiting turn has read it: what a person
    /// typed into a server's form is kept no longer than needed to deliver it.
    fn forget_reply(&self, call_id: &str) -> impl Future<Output = Result<(), PortError>> + Send;

    /// Records that `replica_id` is alive at `at_ms`.
    fn heartbeat(
        &self,
        replica_id: &str,
        at_ms: i64,
    ) -> impl Future<Output = Result<(), PortError>> + Send;

    /// Forgets a replica that stopped cleanly.
    fn retire_replica(
        &self,
        replica_id: &str,
    ) -> impl Future<Output = Result<(), PortError>> + Send;

    /// Changes made by any replica (including this one), or `None` when the engine has no
    /// notification mechanism (SQLite: one process, so in-process wake-ups and the periodic
    /// re-check cover it). Notices can be lost (a dropped connection); the re-check covers that.
    fn notices(
        &self,
    ) -> impl Future<Output = Result<Option<mpsc::Receiver<Notice>>, PortError>> + Send;
}
