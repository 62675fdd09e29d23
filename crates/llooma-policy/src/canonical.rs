//! Canonical JSON and its SHA-256: the one spelling of a JSON value that hashes are taken over.
//!
//! Llooma hashes JSON in three places, all through [`canonical_json`]: the arguments shown on an
//! approval card and kept by an "Always allow" grant (`consent::canonical_arguments`), a tool's
//! definition as consent sees it (`consent::tool_definition_hash`), and a tool's whole
//! definition as the MCP client snapshots it (`llooma_mcp_client::definition_hash`). Those
//! hashes are stored, so the text this module writes for a given value must never change.

use serde_json::Value;
use sha2::{Digest, Sha256};

/// JSON text with object keys sorted (by their UTF-8 bytes) at every depth and no
/// insignificant whitespace. Two values that differ only in key order or spacing give the same
/// text, so the same hash.
///
/// Numbers and strings are written as `serde_json` writes them (shortest round-trip floats,
/// minimal escapes). That is deterministic for a given value, which is all a hash of "what was
/// shown" needs; it is not claimed to be RFC 8785.
///
/// ```
/// use llooma_policy::canonical_json;
///
/// let value = serde_json::json!({"b": [1, {"z": null, "a": "é"}], "a": true});
/// assert_eq!(canonical_json(&value), r#"{"a":true,"b":[1,{"a":"é","z":null}]}"#);
/// ```
pub fn canonical_json(value: &Value) -> String {
    let mut out = String::new();
    write_canonical(value, &mut out);
    out
}

fn write_canonical(value: &Value, out: &mut String) {
    match value {
        Value::Object(map) => {
            // Sorted here rather than relying on serde_json's map type, which turns into an
            // insertion-ordered map if any crate in the build enables `preserve_order`: a hash
            // that changed when someone added a dependency would void every stored grant and
            // mark every snapshot stale.
            let mut entries: Vec<(&String, &Value)> = map.iter().collect();
            entries.sort_by(|a, b| a.0.as_bytes().cmp(b.0.as_bytes()));
            out.push('{');
            for (index, (key, item)) in entries.into_iter().enumerate() {
                if index > 0 {
                    out.push(',');
                }
                out.push_str(&Value::String(key.clone()).to_string());
                out.push(':');
                write_canonical(item, out);
            }
            out.push('}');
        }
        Value::Array(items) => {
            out.push('[');
            for (index, item) in items.iter().enumerate() {
                if index > 0 {
                    out.push(',');
                }
                write_canonical(item, out);
            }
            out.push(']');
        }
        // Strings, numbers, booleans and null: serde_json's writing is deterministic.
        scalar => out.push_str(&scalar.to_string()),
    }
}

/// Lower-case hex SHA-256 of `bytes`.
pub fn sha256_hex(bytes: &[u8]) -> String {
    hex::encode(Sha256::digest(bytes))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn keys_are_sorted_by_bytes_at_every_depth_and_spacing_is_gone() {
        let value: Value = serde_json::from_str(
            r#"{ "b" : [ 1 , {"z":null, "a": "é\n"} ], "a": true, "A": 1.5, "é": 0, "_": {} }"#,
        )
        .unwrap_or(Value::Null);
        assert_eq!(
            canonical_json(&value),
            r#"{"A":1.5,"_":{},"a":true,"b":[1,{"a":"é\n","z":null}],"é":0}"#
        );
    }

    #[test]
    fn sha256_is_lower_case_hex() {
        assert_eq!(
            sha256_hex(b""),
            "e3b0c44298fc1c149afbf4c8996fb92427ae41e4649b934ca495991b7852b855"
        );
    }
}
