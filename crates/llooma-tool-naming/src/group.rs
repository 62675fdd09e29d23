//! Groups read off a server's tool names, and the switches that carry them.
//!
//! # The heuristic
//!
//! A gateway (MCPHub, MCPJungle, ...) keeps the servers behind it apart by prefixing their tools
//! with the server's name and **one** separator of its own: MCPHub writes `Chatto-send_message`,
//! MCPJungle writes `github__create_issue`. The tool half often contains `_` (snake case) and
//! sometimes `-`, and the server half may contain either (`home-assistant`, `Infomaniak_Mail`).
//!
//! 1. **Pick the separator.** For each of `__`, `-`, `.`, `/` (in that order of preference)
//!    split every name at its *first* occurrence and count the tools whose prefix at least one
//!    other tool shares. The separator grouping the most tools wins; a tie goes to the earlier
//!    one. `_`, the ordinary word separator inside tool names, is tried only when none of those
//!    groups anything: in an MCPHub catalogue `Infomaniak_Mail-send`, `Infomaniak_Calendar-list`
//!    must split at `-` even if `Infomaniak` would gather more tools. No separator grouping
//!    anything means no groups.
//! 2. **Verbs are not servers.** For `-`, `.` and `_` a first segment that is a common verb
//!    (`get`, `list`, `create`, `search`, ...; see [`is_verb`]) does not make a group: a flat
//!    server's `get_issue`, `get_pr`, `list_issues` is one unnamed group, not `get` and `list`.
//!    `__` and `/` are never a word separator inside a tool name, so they are trusted as is.
//! 3. **Longest prefix that loses nothing.** Within a group, the prefix is extended one segment
//!    at a time while every tool of the group shares the next segment, that segment is not a
//!    verb, and every tool still has something after it. `home-assistant-turn_on` and
//!    `home-assistant-get_state` give `home-assistant`, not `home`; `Chatto-send-message` and
//!    `Chatto-list-rooms` stay `Chatto`.
//! 4. Tools whose prefix no other tool shares (or that have no separator at all) go to the one
//!    unnamed group, key `""`.
//!
//! # Limits
//!
//! It is a reading habit, not a fact; it arranges the list and carries the switch, nothing else.
//! One separator per server: a catalogue mixing `-` and `__` prefixes groups only by the dominant
//! one, and a gateway using `_` is read as such only if no other separator groups anything. A gateway server whose tools all share a further non-verb word (`Chatto-room-join`,
//! `Chatto-room-leave` and nothing else) is grouped as `Chatto-room`. A flat server whose tools
//! share a noun (`issue_create`, `issue_list`) gets a group `issue`, which is harmless. A
//! one-tool server behind a gateway is in the unnamed group. Group keys can move when a
//! catalogue changes (a `home-kitchen-*` tool arriving turns `home-assistant` into `home`);
//! [`switched_on`] keeps a stored *off* switch effective across such a move.

use std::collections::{BTreeMap, HashSet};

use serde::{Deserialize, Serialize};

/// Key of the unnamed group: tools following no prefix pattern.
pub const UNNAMED_GROUP: &str = "";

/// A separator a gateway may put between a server's name and its tools.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum Separator {
    /// `__`, MCPJungle's.
    DoubleUnderscore,
    /// `-`, MCPHub's.
    Dash,
    /// `.`
    Dot,
    /// `/`
    Slash,
    /// `_`, tried only when no other separator groups anything: it is also the word separator
    /// inside most tool names.
    Underscore,
}

impl Separator {
    /// Order of preference when two separators group as many tools (`_` is a fallback).
    pub const PREFERENCE: [Self; 5] =
        [Self::DoubleUnderscore, Self::Dash, Self::Dot, Self::Slash, Self::Underscore];

    /// The separator as written in tool names.
    pub fn as_str(self) -> &'static str {
        match self {
            Self::DoubleUnderscore => "__",
            Self::Dash => "-",
            Self::Dot => ".",
            Self::Slash => "/",
            Self::Underscore => "_",
        }
    }

    /// Whether a verb may not be a group's first segment with this separator.
    fn is_word_separator(self) -> bool {
        matches!(self, Self::Dash | Self::Dot | Self::Underscore)
    }
}

/// A group of one server's tools.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct Group {
    /// The prefix the tools share (`home-assistant`), or [`UNNAMED_GROUP`]. Stable as long as
    /// the catalogue's pattern is; this is what a switch is stored under.
    pub key: String,
    /// The group's tools, sorted, without duplicates.
    pub tools: Vec<String>,
}

impl Group {
    /// Whether this is the unnamed group.
    pub fn is_unnamed(&self) -> bool {
        self.key == UNNAMED_GROUP
    }
}

/// Common verbs that start tool names on flat servers and are not servers. Compared ignoring
/// ASCII case.
const VERBS: &[&str] = &[
    "add",
    "analyze",
    "append",
    "apply",
    "archive",
    "browse",
    "call",
    "cancel",
    "check",
    "clear",
    "click",
    "close",
    "compare",
    "connect",
    "convert",
    "copy",
    "count",
    "create",
    "delete",
    "describe",
    "download",
    "edit",
    "execute",
    "exec",
    "export",
    "fetch",
    "find",
    "generate",
    "get",
    "import",
    "insert",
    "install",
    "invoke",
    "list",
    "load",
    "lookup",
    "make",
    "mark",
    "merge",
    "move",
    "new",
    "open",
    "parse",
    "patch",
    "post",
    "put",
    "query",
    "read",
    "remove",
    "rename",
    "reply",
    "reset",
    "resolve",
    "restart",
    "retrieve",
    "run",
    "save",
    "schedule",
    "search",
    "select",
    "send",
    "set",
    "show",
    "start",
    "stop",
    "submit",
    "summarize",
    "sync",
    "toggle",
    "translate",
    "trigger",
    "turn",
    "update",
    "upload",
    "upsert",
    "validate",
    "view",
    "watch",
    "write",
];

/// Whether `word` is one of the common verbs that never make a group with `-`, `.` or `_`.
pub fn is_verb(word: &str) -> bool {
    word.len() <= 9 && VERBS.iter().any(|v| v.eq_ignore_ascii_case(word))
}

/// Byte offset of the first `sep` in `name`, without building a substring searcher per call.
fn find_sep(name: &str, sep: Separator) -> Option<usize> {
    let bytes = name.as_bytes();
    match sep {
        Separator::DoubleUnderscore => {
            let mut from = 0;
            loop {
                let i = from + bytes.get(from..)?.iter().position(|&b| b == b'_')?;
                if bytes.get(i + 1) == Some(&b'_') {
                    return Some(i);
                }
                from = i + 1;
            }
        }
        Separator::Dash => bytes.iter().position(|&b| b == b'-'),
        Separator::Dot => bytes.iter().position(|&b| b == b'.'),
        Separator::Slash => bytes.iter().position(|&b| b == b'/'),
        Separator::Underscore => bytes.iter().position(|&b| b == b'_'),
    }
}

/// The prefix before the first `sep`, if both it and what follows are non-empty.
fn first_prefix(name: &str, sep: Separator) -> Option<&str> {
    let i = find_sep(name, sep)?;
    let prefix = name.get(..i)?;
    let rest = name.get(i + sep.as_str().len()..)?;
    (!prefix.is_empty() && !rest.is_empty()).then_some(prefix)
}

/// Whether a run of tools sharing `prefix` may be a group with `sep`.
fn may_group(prefix: &str, run_len: usize, sep: Separator) -> bool {
    run_len >= 2 && !(sep.is_word_separator() && is_verb(prefix))
}

/// Runs of `names` (sorted, deduplicated) sharing a first prefix, as `(prefix, range)`, in order.
/// Names sharing a prefix `P` all start with `P<sep>`, and `P` holds no `sep`, so in sorted order
/// they are contiguous: one linear pass finds every run.
fn prefix_runs<'a>(
    names: &[&'a str],
    sep: Separator,
) -> impl Iterator<Item = (Option<&'a str>, std::ops::Range<usize>)> {
    let mut i = 0;
    let mut next_prefix = names.first().and_then(|n| first_prefix(n, sep));
    std::iter::from_fn(move || {
        names.get(i)?;
        let prefix = next_prefix;
        let start = i;
        i += 1;
        next_prefix = names.get(i).and_then(|n| first_prefix(n, sep));
        if prefix.is_some() {
            while i < names.len() && next_prefix == prefix {
                i += 1;
                next_prefix = names.get(i).and_then(|n| first_prefix(n, sep));
            }
        }
        Some((prefix, start..i))
    })
}

/// How many of `names` (sorted, deduplicated) land in a group of at least two with `sep`.
fn coverage(names: &[&str], sep: Separator) -> usize {
    prefix_runs(names, sep)
        .filter_map(|(p, r)| p.filter(|p| may_group(p, r.len(), sep)).map(|_| r.len()))
        .sum()
}

fn sorted_unique<S: AsRef<str>>(names: &[S]) -> Vec<&str> {
    let mut v: Vec<&str> = names.iter().map(AsRef::as_ref).collect();
    v.sort_unstable();
    v.dedup();
    v
}

/// The separator this catalogue's groups are read with, if any groups at all (step 1 and 2 of the
/// heuristic in the module docs).
pub fn detect_separator<S: AsRef<str>>(names: &[S]) -> Option<Separator> {
    best_separator(&sorted_unique(names))
}

fn best_separator(names: &[&str]) -> Option<Separator> {
    let mut best: Option<(Separator, usize)> = None;
    for sep in Separator::PREFERENCE {
        if sep == Separator::Underscore && best.is_some() {
            break;
        }
        let n = coverage(names, sep);
        if n > 0 && best.is_none_or(|(_, b)| n > b) {
            best = Some((sep, n));
        }
    }
    best.map(|(sep, _)| sep)
}

/// Extends `prefix` (shared by all of `tools`, at least two) one segment at a time while nothing
/// is lost (step 3 of the heuristic).
fn extend_prefix<'a>(first: &'a str, prefix_len: usize, tools: &[&str], sep: Separator) -> &'a str {
    let s = sep.as_str();
    let mut len = prefix_len;
    'outer: loop {
        let mut next: Option<&str> = None;
        for tool in tools {
            let Some(rest) = tool.get(len + s.len()..) else {
                break 'outer;
            };
            let Some(i) = find_sep(rest, sep) else {
                break 'outer;
            };
            let (Some(segment), Some(after)) = (rest.get(..i), rest.get(i + s.len()..)) else {
                break 'outer;
            };
            if segment.is_empty() || after.is_empty() || is_verb(segment) {
                break 'outer;
            }
            match next {
                None => next = Some(segment),
                Some(n) if n == segment => {}
                Some(_) => break 'outer,
            }
        }
        match next {
            Some(segment) => len += s.len() + segment.len(),
            None => break,
        }
    }
    first.get(..len).unwrap_or(first)
}

/// Reads the groups off one server's tool names (see the module docs for the heuristic).
///
/// Deterministic and independent of input order: named groups sorted by key, then the unnamed
/// group (if any tool is in it); tools sorted within each group; duplicates dropped. No names, no
/// groups.
pub fn group_tools<S: AsRef<str>>(names: &[S]) -> Vec<Group> {
    let names = sorted_unique(names);
    let Some(sep) = best_separator(&names) else {
        return if names.is_empty() {
            Vec::new()
        } else {
            vec![Group {
                key: UNNAMED_GROUP.to_owned(),
                tools: names.iter().map(|n| (*n).to_owned()).collect(),
            }]
        };
    };

    let mut groups: Vec<Group> = Vec::new();
    let mut unnamed: Vec<&str> = Vec::new();
    for (prefix, range) in prefix_runs(&names, sep) {
        let tools = names.get(range).unwrap_or_default();
        match (prefix, tools) {
            (Some(p), [first, ..]) if may_group(p, tools.len(), sep) => groups.push(Group {
                key: extend_prefix(first, p.len(), tools, sep).to_owned(),
                tools: tools.iter().map(|t| (*t).to_owned()).collect(),
            }),
            _ => unnamed.extend(tools),
        }
    }
    groups.sort_by(|a, b| a.key.cmp(&b.key));
    if !unnamed.is_empty() {
        unnamed.sort_unstable();
        groups.push(Group {
            key: UNNAMED_GROUP.to_owned(),
            tools: unnamed.into_iter().map(str::to_owned).collect(),
        });
    }
    groups
}

/// The stored group switches of one server: group key to on/off. A group with no stored state is
/// on.
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(transparent)]
pub struct GroupSwitches(BTreeMap<String, bool>);

impl GroupSwitches {
    /// No stored state: every group on.
    pub fn new() -> Self {
        Self::default()
    }

    /// Stores the switch of group `key`.
    pub fn set(&mut self, key: impl Into<String>, on: bool) {
        self.0.insert(key.into(), on);
    }

    /// The stored state of group `key`, if any.
    pub fn state(&self, key: &str) -> Option<bool> {
        self.0.get(key).copied()
    }

    /// Whether group `key` is on by its own switch (absent means on).
    pub fn is_on(&self, key: &str) -> bool {
        self.state(key).unwrap_or(true)
    }

    /// Stored states, by key.
    pub fn iter(&self) -> impl Iterator<Item = (&str, bool)> {
        self.0.iter().map(|(k, v)| (k.as_str(), *v))
    }
}

impl<K: Into<String>> FromIterator<(K, bool)> for GroupSwitches {
    fn from_iter<I: IntoIterator<Item = (K, bool)>>(iter: I) -> Self {
        Self(iter.into_iter().map(|(k, v)| (k.into(), v)).collect())
    }
}

/// A tool and the group it was read into.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct GroupedTool<'a> {
    /// Key of its group ([`UNNAMED_GROUP`] for the unnamed one).
    pub group: &'a str,
    /// The tool's original name.
    pub tool: &'a str,
}

/// The tools of `groups` (one server's, from [`group_tools`]) that are switched on, in group order
/// then tool order.
///
/// A tool follows its group's stored switch, so a tool that joins a group later follows it too;
/// a group with no stored state is on. One exception keeps an *off* switch from quietly turning
/// back on when the grouping moves: a stored off switch whose key is no longer a group turns off
/// every tool named `<key><separator>...` whose current group has no stored state of its own.
pub fn switched_on<'g>(groups: &'g [Group], switches: &GroupSwitches) -> Vec<GroupedTool<'g>> {
    let current: HashSet<&str> = groups.iter().map(|g| g.key.as_str()).collect();
    let stale_off: Vec<&str> = switches
        .iter()
        .filter(|(k, on)| !on && *k != UNNAMED_GROUP && !current.contains(k))
        .map(|(k, _)| k)
        .collect();
    let under_stale_off = |tool: &str| {
        stale_off.iter().any(|k| {
            tool.strip_prefix(k).is_some_and(|rest| {
                Separator::PREFERENCE
                    .iter()
                    .any(|s| rest.len() > s.as_str().len() && rest.starts_with(s.as_str()))
            })
        })
    };

    let mut out = Vec::new();
    for group in groups {
        let state = switches.state(&group.key);
        for tool in &group.tools {
            let on = match state {
                Some(on) => on,
                None => !under_stale_off(tool),
            };
            if on {
                out.push(GroupedTool { group: &group.key, tool });
            }
        }
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn prefix_extension_stops_before_a_tool_would_be_left_with_nothing() {
        let g = group_tools(&["a-b", "a-b-c"]);
        assert_eq!(g.len(), 1);
        assert_eq!(g[0].key, "a");
    }

    #[test]
    fn no_verb_is_longer_than_the_quick_length_check() {
        assert!(VERBS.iter().all(|v| v.len() <= 9));
        assert!(is_verb("Summarize") && !is_verb("summarizer"));
    }

    #[test]
    fn verbs_do_not_start_groups_with_underscore() {
        assert_eq!(detect_separator(&["get_a", "get_b", "list_a"]), None);
        assert_eq!(
            detect_separator(&["github__get_a", "github__list_b"]),
            Some(Separator::DoubleUnderscore)
        );
    }
}
