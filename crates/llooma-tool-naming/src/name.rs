//! The pieces a model-facing name is made of: sanitising, server slugs, length and hash suffixes.

use sha2::{Digest, Sha256};

/// Longest model-facing name providers accept (`^[a-zA-Z0-9_-]{1,64}$`).
pub const MAX_NAME_LEN: usize = 64;

/// Every MCP tool name starts with this; the app's own tools never do (except the ones listed in
/// [`RESERVED_MCP_NAMES`], which generated names step around).
pub const MCP_PREFIX: &str = "mcp_";

/// Longest server slug [`server_slug`] produces, so that `mcp_<slug>_` leaves at least 39
/// characters for the tool half.
pub const MAX_SLUG_LEN: usize = 20;

/// The slug of a server whose label has nothing usable in it (empty, only symbols, only
/// non-Latin script).
pub const FALLBACK_SLUG: &str = "server";

/// The app's own tools. None of them starts with [`MCP_PREFIX`] except those also listed in
/// [`RESERVED_MCP_NAMES`]; a generated name never equals any of them. The memory tools are named
/// by the app, not here: whatever their names, they do not start with `mcp_`, which is the point.
pub const BUILTIN_TOOL_NAMES: &[&str] = &[
    "web_search",
    "read_page",
    "current_date",
    "mcp_resource_list",
    "mcp_resource_read",
    "mcp_server_tools",
];

/// Built-in tools that live inside the `mcp_` namespace. A server labelled `resource` offering a
/// tool `read` would otherwise become `mcp_resource_read`; the table gives it a hash suffix instead.
/// `mcp_server_tools` is the one tool a turn declares in announce mode.
pub const RESERVED_MCP_NAMES: &[&str] =
    &["mcp_resource_list", "mcp_resource_read", "mcp_server_tools"];

/// Length of the hex hash suffix (`_` plus this many hex digits) on shortened or colliding names.
pub(crate) const HASH_HEX_LEN: usize = 8;

/// Whether `c` may appear in a model-facing name.
pub(crate) fn is_name_char(c: char) -> bool {
    c.is_ascii_alphanumeric() || c == '_' || c == '-'
}

/// Whether `name` matches `^[a-zA-Z0-9_-]{1,64}$`, the rule every produced name obeys.
pub fn is_valid_model_name(name: &str) -> bool {
    !name.is_empty() && name.len() <= MAX_NAME_LEN && name.chars().all(is_name_char)
}

/// Replaces every maximal run of characters outside `[a-zA-Z0-9_-]` (dots, spaces, slashes,
/// any non-ASCII character) with a single `_`. A name already made of allowed characters comes out
/// unchanged, so most tools keep their exact name.
pub fn sanitize(s: &str) -> String {
    let mut out = String::with_capacity(s.len());
    push_sanitized(&mut out, s);
    out
}

/// Appends `s` sanitised to `out`; returns whether anything had to be replaced.
fn push_sanitized(out: &mut String, s: &str) -> bool {
    if s.bytes().all(|b| b.is_ascii_alphanumeric() || b == b'_' || b == b'-') {
        out.push_str(s);
        return false;
    }
    let mut in_run = false;
    for c in s.chars() {
        if is_name_char(c) {
            out.push(c);
            in_run = false;
        } else if !in_run {
            out.push('_');
            in_run = true;
        }
    }
    true
}

/// The slug a label turns into before any numeric suffix: sanitised, lower-cased, stripped of
/// leading and trailing `_`/`-`, at most [`MAX_SLUG_LEN`] characters; [`FALLBACK_SLUG`] when
/// nothing is left. Idempotent: a stored slug fed back in comes out unchanged.
pub fn slugify(label: &str) -> String {
    let mut s = sanitize(label);
    s.make_ascii_lowercase();
    let trimmed = trim_separators(&s);
    let cut = trim_separators(truncate_ascii(trimmed, MAX_SLUG_LEN));
    if cut.is_empty() { FALLBACK_SLUG.to_owned() } else { cut.to_owned() }
}

/// The slug to store for a server the account is adding with `label`, given the slugs its other
/// servers already have. The first `home` is `home`, the next `home_2`, then `home_3`; a slug
/// already stored is never recomputed, so a server keeps its name when others come and go.
///
/// Comparison with `existing` ignores ASCII case. A freed slug (its server deleted) may be handed
/// out again; pass retired slugs in `existing` too if old conversations must never resolve to a
/// newcomer.
pub fn server_slug<'a, I>(existing: I, label: &str) -> String
where
    I: IntoIterator<Item = &'a str>,
{
    let taken: std::collections::HashSet<String> =
        existing.into_iter().map(str::to_ascii_lowercase).collect();
    let base = slugify(label);
    if !taken.contains(&base) {
        return base;
    }
    // At most `taken.len()` suffixes can be taken, so this finds one within `taken.len() + 1`
    // tries; the range bound only keeps the loop visibly finite.
    for n in 2..=taken.len() + 2 {
        let suffix = format!("_{n}");
        let head = trim_separators(truncate_ascii(&base, MAX_SLUG_LEN - suffix.len()));
        let head = if head.is_empty() { FALLBACK_SLUG } else { head };
        let candidate = format!("{head}{suffix}");
        if !taken.contains(&candidate) {
            return candidate;
        }
    }
    // Unreachable by the pigeonhole argument above; still a valid, distinct-looking answer.
    format!("{FALLBACK_SLUG}_{}", taken.len() + 2)
}

/// `mcp_<slug>_<tool>`, shortened to [`MAX_NAME_LEN`] with a hash of the full original when it
/// does not fit. Not yet checked for collisions; that is the table's job.
pub(crate) fn candidate_name(slug: &str, tool: &str) -> (String, bool) {
    let mut name = String::with_capacity(MCP_PREFIX.len() + slug.len() + 1 + tool.len());
    name.push_str(MCP_PREFIX);
    name.push_str(slug);
    name.push('_');
    let replaced = push_sanitized(&mut name, tool);
    if name.len() > MAX_NAME_LEN {
        name = with_hash_suffix(&name, &hash_hex(b"len", slug, tool, 0));
    }
    (name, !replaced)
}

/// `base` cut so that `_<hash>` fits in [`MAX_NAME_LEN`], then `_<hash>` appended.
pub(crate) fn with_hash_suffix(base: &str, hash: &str) -> String {
    let head = truncate_ascii(base, MAX_NAME_LEN - 1 - hash.len());
    let mut out = String::with_capacity(MAX_NAME_LEN);
    out.push_str(head);
    out.push('_');
    out.push_str(hash);
    out
}

/// Eight hex digits of SHA-256 over a domain tag, the slug, the original tool name and a salt.
/// Stable across runs and platforms; depends on nothing but its inputs.
pub(crate) fn hash_hex(domain: &[u8], slug: &str, tool: &str, salt: u32) -> String {
    let mut h = Sha256::new();
    h.update(domain);
    h.update([0]);
    h.update(slug.as_bytes());
    h.update([0]);
    h.update(tool.as_bytes());
    h.update([0]);
    h.update(salt.to_le_bytes());
    let digest = h.finalize();
    let mut hex = hex::encode(&digest[..HASH_HEX_LEN / 2]);
    hex.truncate(HASH_HEX_LEN);
    hex
}

fn trim_separators(s: &str) -> &str {
    s.trim_matches(|c| c == '_' || c == '-')
}

/// The first `max` bytes of `s`, backed off to a character boundary (our inputs are ASCII after
/// sanitising, so this only matters defensively).
fn truncate_ascii(s: &str, max: usize) -> &str {
    if s.len() <= max {
        return s;
    }
    let mut end = max;
    while !s.is_char_boundary(end) {
        end -= 1;
    }
    s.get(..end).unwrap_or_default()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn sanitize_keeps_valid_names_verbatim() {
        assert_eq!(sanitize("Infomaniak_Mail-send"), "Infomaniak_Mail-send");
        assert_eq!(sanitize("a..b  c"), "a_b_c");
        assert_eq!(sanitize("Ünïcödé"), "_n_c_d_");
    }

    #[test]
    fn slugify_is_idempotent_on_its_output() {
        for label in ["Home Assistant", "", "!!!", "家", "a".repeat(50).as_str(), "x-_"] {
            let once = slugify(label);
            assert_eq!(slugify(&once), once, "label {label:?}");
        }
    }

    #[test]
    fn hash_is_stable() {
        // Pinned: stored conversations refer to these names, so the hash must never drift.
        assert_eq!(hash_hex(b"col", "s", "a.b", 0), "2f93282a");
        assert_eq!(hash_hex(b"col", "s", "a.b", 1), "20b7c08d");
        assert_ne!(hash_hex(b"len", "s", "a.b", 0), hash_hex(b"col", "s", "a.b", 0));
    }
}
