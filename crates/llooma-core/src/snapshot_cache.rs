//! Stored MCP snapshots, parsed once and kept while their text stays the same.
//!
//! Every turn offering MCP tools reads the account's servers, and every call checks its tool is
//! still in use; each parsed the server's stored snapshot, a JSON document of every tool with its
//! schema (tens of KB for a server with many tools), the same document every time until the
//! server's tools change. The text is still read from the database each time, so what is kept
//! is never stale: an entry is used only when the stored text equals the text it was parsed
//! from, byte for byte, whoever wrote the row and however.
//!
//! Bounded: at most [`MAX_ENTRIES`] servers and [`MAX_BYTES`] of text; when either is passed,
//! everything kept is dropped (a re-parse per server is the whole cost of that).

use std::collections::HashMap;
use std::sync::{Arc, Mutex, MutexGuard, PoisonError};

use llooma_mcp_client::Snapshot;

/// Servers whose parsed snapshots are kept.
pub(crate) const MAX_ENTRIES: usize = 512;
/// Snapshot text kept in all, in bytes.
pub(crate) const MAX_BYTES: usize = 16 * 1024 * 1024;

/// The parsed snapshots of this process; cheap to clone (shared).
#[derive(Clone, Debug, Default)]
pub(crate) struct SnapshotCache(Arc<Mutex<Kept>>);

#[derive(Debug, Default)]
struct Kept {
    /// By server id: the text a snapshot was parsed from, and the snapshot.
    entries: HashMap<String, (String, Arc<Snapshot>)>,
    bytes: usize,
}

impl SnapshotCache {
    fn kept(&self) -> MutexGuard<'_, Kept> {
        self.0.lock().unwrap_or_else(PoisonError::into_inner)
    }

    /// The snapshot stored for `server_id` as `json`: the one kept when it was parsed from
    /// exactly this text, else parsed now (and kept).
    pub(crate) fn parse(
        &self,
        server_id: &str,
        json: &str,
    ) -> Result<Arc<Snapshot>, serde_json::Error> {
        if let Some((text, snapshot)) = self.kept().entries.get(server_id)
            && text == json
        {
            return Ok(snapshot.clone());
        }
        // Parsed outside the lock: another task's lookups do not wait behind it.
        let snapshot = Arc::new(serde_json::from_str::<Snapshot>(json)?);
        let mut kept = self.kept();
        if let Some((old, _)) = kept.entries.remove(server_id) {
            kept.bytes -= old.len();
        }
        if json.len() > MAX_BYTES {
            return Ok(snapshot); // never kept: dropping the others would not make room
        }
        if kept.entries.len() >= MAX_ENTRIES || kept.bytes + json.len() > MAX_BYTES {
            kept.entries.clear();
            kept.bytes = 0;
        }
        kept.bytes += json.len();
        kept.entries.insert(server_id.to_owned(), (json.to_owned(), snapshot.clone()));
        Ok(snapshot)
    }

    #[cfg(test)]
    fn len(&self) -> (usize, usize) {
        let kept = self.kept();
        (kept.entries.len(), kept.bytes)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A stored snapshot's text: a server with one tool.
    fn snapshot_json(tool: &str) -> String {
        serde_json::json!({
            "server": {"protocolVersion": "2025-11-25", "serverName": null, "serverVersion": null,
                       "serverTitle": null, "instructions": null, "toolsListChanged": false},
            "tools": [{"name": tool, "title": null, "description": null,
                       "inputSchema": {"type": "object"}, "outputSchema": null,
                       "annotations": null, "hash": "h"}],
            "resources": [], "resourceTemplates": [], "prompts": [], "notes": [],
            "toolsHash": "t",
        })
        .to_string()
    }

    #[test]
    fn the_same_text_gives_the_kept_snapshot() {
        let cache = SnapshotCache::default();
        let json = snapshot_json("echo");
        let first = cache.parse("s1", &json).unwrap();
        let second = cache.parse("s1", &json.clone()).unwrap();
        assert!(Arc::ptr_eq(&first, &second));
        assert_eq!(second.tools[0].name, "echo");
    }

    #[test]
    fn changed_text_is_parsed_again_and_replaces_the_entry() {
        let cache = SnapshotCache::default();
        let old = cache.parse("s1", &snapshot_json("echo")).unwrap();
        let changed = snapshot_json("add");
        let new = cache.parse("s1", &changed).unwrap();
        assert!(!Arc::ptr_eq(&old, &new));
        assert_eq!(new.tools[0].name, "add");
        assert_eq!(cache.len(), (1, changed.len()));
    }

    #[test]
    fn servers_are_kept_apart() {
        let cache = SnapshotCache::default();
        cache.parse("s1", &snapshot_json("echo")).unwrap();
        let other = cache.parse("s2", &snapshot_json("add")).unwrap();
        assert_eq!(other.tools[0].name, "add");
        assert_eq!(cache.parse("s1", &snapshot_json("echo")).unwrap().tools[0].name, "echo");
        assert_eq!(cache.len().0, 2);
    }

    #[test]
    fn unreadable_text_is_an_error_and_keeps_nothing() {
        let cache = SnapshotCache::default();
        assert!(cache.parse("s1", "{not json").is_err());
        assert_eq!(cache.len(), (0, 0));
    }

    #[test]
    fn a_text_past_the_bound_is_parsed_but_not_kept_and_drops_nothing() {
        let cache = SnapshotCache::default();
        let small = snapshot_json("echo");
        cache.parse("s1", &small).unwrap();
        let huge = snapshot_json(&"x".repeat(MAX_BYTES));
        assert_eq!(cache.parse("s2", &huge).unwrap().tools[0].name.len(), MAX_BYTES);
        assert_eq!(cache.len(), (1, small.len()));
    }

    #[test]
    fn passing_the_bound_starts_again() {
        let cache = SnapshotCache::default();
        let json = snapshot_json("echo");
        for i in 0..MAX_ENTRIES {
            cache.parse(&format!("s{i}"), &json).unwrap();
        }
        assert_eq!(cache.len().0, MAX_ENTRIES);
        cache.parse("one more", &json).unwrap();
        assert_eq!(cache.len(), (1, json.len()));
    }
}
