//! The MCP icons this process fetched, by address, and where the instance serves them. The
//! fetching is `icons`'s.
//!
//! At most [`MAX_KEPT`] icons, each for [`KEPT_FOR`], and a failure for [`FAILURE_KEPT_FOR`] so a
//! broken icon is not fetched for every page view.

use std::collections::HashMap;
use std::sync::{Arc, Mutex, PoisonError};
use std::time::{Duration, Instant};

/// Icons (and failures) kept at once.
const MAX_KEPT: usize = 512;
/// How long a fetched icon is served before it is fetched again (a server may change it).
const KEPT_FOR: Duration = Duration::from_secs(24 * 3600);
/// How long a failed fetch is remembered.
const FAILURE_KEPT_FOR: Duration = Duration::from_secs(10 * 60);

/// An icon as the instance serves it: encoded anew, at most 96 pixels a side.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ServedIcon {
    pub bytes: Vec<u8>,
    pub content_type: &'static str,
}

#[derive(Debug, Clone)]
pub(crate) enum Kept {
    Icon(Arc<ServedIcon>),
    Failed(String),
}

/// The icons this process fetched, by address; cheap to clone (shared).
#[derive(Debug, Clone, Default)]
pub(crate) struct IconCache(Arc<Mutex<HashMap<String, (Instant, Kept)>>>);

impl IconCache {
    pub(crate) fn get(&self, src: &str) -> Option<Kept> {
        let kept = self.0.lock().unwrap_or_else(PoisonError::into_inner);
        let (at, entry) = kept.get(src)?;
        let keep_for = match entry {
            Kept::Icon(_) => KEPT_FOR,
            Kept::Failed(_) => FAILURE_KEPT_FOR,
        };
        (at.elapsed() < keep_for).then(|| entry.clone())
    }

    pub(crate) fn put(&self, src: String, entry: Kept) {
        let mut kept = self.0.lock().unwrap_or_else(PoisonError::into_inner);
        if kept.len() >= MAX_KEPT && !kept.contains_key(&src) {
            // Whole-sale: a few fetches again are the whole cost.
            kept.clear();
        }
        kept.insert(src, (Instant::now(), entry));
    }
}

/// Where the instance serves the icon of a server (`tool: None`) or of one of its tools.
pub fn icon_path(server_id: &str, tool: Option<&str>) -> String {
    let path = format!("/api/v1/mcp/servers/{server_id}/icon");
    match tool {
        None => path,
        Some(tool) => {
            let query: String = url::form_urlencoded::Serializer::new(String::new())
                .append_pair("tool", tool)
                .finish();
            format!("{path}?{query}")
        }
    }
}
