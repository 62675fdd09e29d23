//! The MCP icons this process fetched, by address, and where the instance serves them. The
//! fetching is `icons`'s.
//!
//! At most [`MAX_KEPT`] icons, each for [`KEPT_FOR`], and a failure for [`FAILURE_KEPT_FOR`] so a
//! broken icon is not fetched for every page view.

use std::collections::HashMap;
use std::sync::{Arc, Mutex, PoisonError};
use std::time::{Duration, Instant};

use sha2::{Digest, Sha256};

/// Icons (and failures) kept at once.
const MAX_KEPT: usize = 512;
/// How long a fetched icon is served before it is fetched again (a server may change it).
const KEPT_FOR: Duration = Duration::from_secs(24 * 3600);
/// How long a failed fetch is remembered.
const FAILURE_KEPT_FOR: Duration = Duration::from_secs(10 * 60);

/// An icon as the instance serves it: encoded anew, at most 96 pixels a side.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ServedIcon {
    pub bytes: bytes::Bytes,
    pub content_type: &'static str,
}

#[derive(Debug, Clone)]
pub(crate) enum Kept {
    Icon(Arc<ServedIcon>),
    Failed(String),
}

/// The icons this process fetched, by the SHA-256 of their address (a `data:` address is the
/// picture itself: kept whole as a key it would weigh as much again); cheap to clone (shared).
/// Fetches at once are bounded instance-wide: icons are a page's decoration, never worth many
/// connections to servers' origins.
#[derive(Debug, Clone)]
pub(crate) struct IconCache {
    kept: Arc<Mutex<Entries>>,
    pub(crate) fetches: Arc<tokio::sync::Semaphore>,
}

/// By the SHA-256 of the icon's address: when it was kept, and what.
type Entries = HashMap<[u8; 32], (Instant, Kept)>;

/// Icons fetched at once on the instance; more wait their turn.
const MAX_FETCHES: usize = 4;

impl Default for IconCache {
    fn default() -> Self {
        Self { kept: Arc::default(), fetches: Arc::new(tokio::sync::Semaphore::new(MAX_FETCHES)) }
    }
}

fn key(src: &str) -> [u8; 32] {
    Sha256::digest(src.as_bytes()).into()
}

impl IconCache {
    pub(crate) fn get(&self, src: &str) -> Option<Kept> {
        let kept = self.kept.lock().unwrap_or_else(PoisonError::into_inner);
        let (at, entry) = kept.get(&key(src))?;
        let keep_for = match entry {
            Kept::Icon(_) => KEPT_FOR,
            Kept::Failed(_) => FAILURE_KEPT_FOR,
        };
        (at.elapsed() < keep_for).then(|| entry.clone())
    }

    pub(crate) fn put(&self, src: &str, entry: Kept) {
        let key = key(src);
        let mut kept = self.kept.lock().unwrap_or_else(PoisonError::into_inner);
        if kept.len() >= MAX_KEPT && !kept.contains_key(&key) {
            // The one kept the longest makes room.
            let oldest = kept.iter().min_by_key(|(_, (at, _))| *at).map(|(k, _)| *k);
            if let Some(oldest) = oldest {
                kept.remove(&oldest);
            }
        }
        kept.insert(key, (Instant::now(), entry));
    }
}
