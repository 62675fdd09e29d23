//! Stored tool lists past the freshness their server gave them (`ttlMs`, 2026-07-28) are
//! retaken before the next turn uses them, through the same path as "Update tools": a removed
//! tool goes at once, an added or changed one waits for the person's review.
//!
//! A server may ask for less than makes sense before every turn (the Python SDK sends
//! `ttlMs: 0`): a list is retaken at most once per [`Freshness::floor`]. A server that cannot be
//! reached is tried again no sooner either, so a dead server never slows every turn.

use std::collections::HashMap;
use std::sync::{Arc, Mutex, PoisonError};
use std::time::{Duration, Instant};

use llooma_mcp_client::Snapshot;
use llooma_store::McpServer;

/// The shortest freshness honoured, unless the operator sets another
/// (`LLOOMA_TOOL_LIST_MIN_FRESH_SECS`).
pub const DEFAULT_MIN_FRESH: Duration = Duration::from_secs(60);

/// When this process last retook (or tried to retake) each server's list.
#[derive(Debug, Clone)]
pub(crate) struct Freshness {
    floor: Duration,
    tried: Arc<Mutex<HashMap<String, Instant>>>,
}

impl Freshness {
    pub(crate) fn new(floor: Duration) -> Freshness {
        Freshness { floor, tried: Arc::default() }
    }

    /// Whether `server`'s stored list is past its freshness at `now_ms` and may be retaken now:
    /// the server gave one, the list is not already waiting for review, and this process has
    /// not tried within the floor. Marks it tried when it answers yes.
    pub(crate) fn take_due(&self, server: &McpServer, snapshot: &Snapshot, now_ms: i64) -> bool {
        let Some(ttl_ms) = snapshot.tools_ttl_ms else { return false };
        if !server.is_active() || server.snapshot_stale {
            return false;
        }
        let floor_ms = u64::try_from(self.floor.as_millis()).unwrap_or(u64::MAX);
        let fresh_ms = i64::try_from(ttl_ms.max(floor_ms)).unwrap_or(i64::MAX);
        if now_ms.saturating_sub(server.snapshot_taken_at_ms) < fresh_ms {
            return false;
        }
        let mut tried = self.tried.lock().unwrap_or_else(PoisonError::into_inner);
        let now = Instant::now();
        if tried.get(&server.id).is_some_and(|at| now.duration_since(*at) < self.floor) {
            return false;
        }
        // Servers removed since are forgotten with the rest now and then.
        if tried.len() > 10_000 {
            tried.retain(|_, at| now.duration_since(*at) < self.floor);
        }
        tried.insert(server.id.clone(), now);
        true
    }
}
