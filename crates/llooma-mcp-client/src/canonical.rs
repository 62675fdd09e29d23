//! Canonical JSON (object keys sorted by their UTF-8 bytes, no
//! insignificant whitespace) and the SHA-256 of a tool definition over it.
//!
//! Written out by hand rather than relying on `serde_json::Value`'s map order: that order is
//! sorted only while no crate in the build turns on serde_json's `preserve_order` feature, and
//! a hash that changes when someone adds a dependency would mark every snapshot stale.

use serde_json::Value;
use sha2::{Digest, Sha256};

/// The canonical text of a JSON value.
pub fn canonical_json(value: &Value) -> String {
    let mut out = String::new();
    write_value(&mut out, value);
    out
}

/// Hex SHA-256 of the canonical JSON of `value`.
pub fn definition_hash(value: &Value) -> String {
    hex::encode(Sha256::digest(canonical_json(value).as_bytes()))
}

fn write_value(out: &mut String, value: &Value) {
    match value {
        Value::Object(map) => {
            let mut keys: Vec<&String> = map.keys().collect();
            keys.sort();
            out.push('{');
            for (i, key) in keys.into_iter().enumerate() {
                if i > 0 {
                    out.push(',');
                }
                write_string(out, key);
                out.push(':');
                if let Some(v) = map.get(key) {
                    write_value(out, v);
                }
            }
            out.push('}');
        }
        Value::Array(items) => {
            out.push('[');
            for (i, item) in items.iter().enumerate() {
                if i > 0 {
                    out.push(',');
                }
                write_value(out, item);
            }
            out.push(']');
        }
        Value::String(s) => write_string(out, s),
        // Numbers, booleans and null print the same whatever the map order.
        other => out.push_str(&other.to_string()),
    }
}

fn write_string(out: &mut String, s: &str) {
    // serde_json's string escaping is deterministic and standard.
    out.push_str(&Value::String(s.to_owned()).to_string());
}

/// `text` cut to at most `max` bytes at a character boundary, with `marker` appended when cut
/// (the marker counts towards `max` when it fits).
pub(crate) fn truncate(text: &str, max: usize, marker: &str) -> (String, bool) {
    if text.len() <= max {
        return (text.to_owned(), false);
    }
    let mut end = max.saturating_sub(marker.len());
    while end > 0 && !text.is_char_boundary(end) {
        end -= 1;
    }
    (format!("{}{marker}", &text[..end]), true)
}

#[cfg(test)]
mod tests {
    use serde_json::json;

    use super::*;

    #[test]
    fn keys_are_sorted_at_every_level_and_spacing_is_gone() {
        let value = json!({"b": 1, "a": {"d": [1, {"z": 0, "y": "é\n"}], "c": null}});
        assert_eq!(canonical_json(&value), r#"{"a":{"c":null,"d":[1,{"y":"é\n","z":0}]},"b":1}"#);
    }

    #[test]
    fn the_hash_sees_a_changed_description_and_not_a_reordering() {
        let one = json!({"name": "t", "description": "adds", "inputSchema": {"type": "object"}});
        let reordered =
            json!({"inputSchema": {"type": "object"}, "description": "adds", "name": "t"});
        let changed =
            json!({"name": "t", "description": "adds!", "inputSchema": {"type": "object"}});
        assert_eq!(definition_hash(&one), definition_hash(&reordered));
        assert_ne!(definition_hash(&one), definition_hash(&changed));
        assert_eq!(definition_hash(&one).len(), 64);
    }

    #[test]
    fn truncation_respects_characters_and_the_budget() {
        let (cut, was) = truncate("ééééé", 7, "…");
        assert!(was);
        assert!(cut.len() <= 7, "{cut}");
        assert!(cut.ends_with('…'));
        assert_eq!(truncate("short", 10, "…"), ("short".to_owned(), false));
    }
}
