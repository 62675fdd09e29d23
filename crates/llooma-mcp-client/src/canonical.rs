//! The SHA-256 of a tool definition, over the canonical JSON of `llooma-policy` (the one
//! [`canonical_json`] of the workspace: object keys sorted by their UTF-8 bytes, no
//! insignificant whitespace), and the cutting of text: to a byte budget, or to a one-line
//! excerpt for messages.
//!
//! The canonical text is written by hand there rather than relying on `serde_json::Value`'s
//! map order: that order is sorted only while no crate in the build turns on serde_json's
//! `preserve_order` feature, and a hash that changed when someone added a dependency would mark
//! every snapshot stale.

pub use llooma_policy::canonical_json;
use serde_json::Value;

/// Hex SHA-256 of the canonical JSON of `value`: how a tool definition is identified in a
/// snapshot ([`crate::ToolDef::hash`]) and, through it, in remembered consent.
pub fn definition_hash(value: &Value) -> String {
    llooma_policy::sha256_hex(canonical_json(value).as_bytes())
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

/// One line, at most `max` characters: server-supplied text goes into error messages, and a
/// multi-kilobyte HTML page there helps nobody.
pub(crate) fn excerpt(text: &str, max: usize) -> String {
    let one_line: String =
        text.chars().map(|c| if c.is_control() { ' ' } else { c }).take(max + 1).collect();
    let trimmed = one_line.trim();
    if trimmed.chars().count() > max {
        let cut: String = trimmed.chars().take(max).collect();
        format!("{cut}…")
    } else {
        trimmed.to_owned()
    }
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

    /// Stored snapshots hold these hashes: a tool definition hashed before must hash the same
    /// after, or every snapshot turns stale and every grant made on it stops applying. Computed
    /// with the code as it stood before `canonical_json` became one function.
    #[test]
    fn stored_definition_hashes_stay_byte_identical() {
        let tool: Value = serde_json::from_str(
            r#"{"name": "send_mail", "title": "Send mail ✉",
                "description": "Sends a mail.\nQuote: \"hi\" \\ \u0007 😀",
                "inputSchema": {"type": "object", "required": ["to"],
                    "properties": {"to": {"type": "string"}, "n": {"type": "integer",
                        "maximum": 1.5e3, "minimum": -2, "default": 18446744073709551615}}},
                "annotations": {"readOnlyHint": false, "destructiveHint": true, "Z": null},
                "_meta": {"é": [], "e": {}}}"#,
        )
        .unwrap_or(Value::Null);
        assert_eq!(
            canonical_json(&tool),
            r#"{"_meta":{"e":{},"é":[]},"annotations":{"Z":null,"destructiveHint":true,"readOnlyHint":false},"description":"Sends a mail.\nQuote: \"hi\" \\ \u0007 😀","inputSchema":{"properties":{"n":{"default":18446744073709551615,"maximum":1500.0,"minimum":-2,"type":"integer"},"to":{"type":"string"}},"required":["to"],"type":"object"},"name":"send_mail","title":"Send mail ✉"}"#
        );
        assert_eq!(
            definition_hash(&tool),
            "9886fdcea42b7cd934b8d21ace33de6b29a52b166663e45651169d05f33d2ace"
        );
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
