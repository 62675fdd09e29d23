//! Properties over random catalogues: every name valid, unique, and the way back exact.

use std::collections::HashSet;

use llooma_tool_naming::{NameTable, group_tools, server_slug};
use proptest::prelude::*;
use regex::Regex;

/// Tool names as servers and gateways write them, plus the awkward ones.
fn tool_name() -> impl Strategy<Value = String> {
    prop_oneof![
        "[a-z]{1,8}([_.-][a-z]{1,8}){0,3}",
        "[A-Za-z_][A-Za-z0-9_]{0,6}(__|-|/)[a-z_]{1,10}",
        "[a-z]{60,80}",
        "\\PC{0,20}",
        "[a._ /-]{0,4}",
    ]
}

/// `(label, tools)` per server.
fn catalogue() -> impl Strategy<Value = Vec<(String, Vec<String>)>> {
    prop::collection::vec(
        (
            prop_oneof!["[a-z]{1,6}", "\\PC{0,30}", Just("home".to_owned())],
            prop::collection::vec(tool_name(), 0..25),
        ),
        0..6,
    )
}

/// Slugs as the app would store them: each computed against the ones before it.
fn with_slugs(servers: &[(String, Vec<String>)]) -> Vec<(usize, String, Vec<String>)> {
    let mut slugs: Vec<String> = Vec::new();
    let mut out = Vec::new();
    for (i, (label, tools)) in servers.iter().enumerate() {
        let slug = server_slug(slugs.iter().map(String::as_str), label);
        slugs.push(slug.clone());
        out.push((i, slug, tools.clone()));
    }
    out
}

proptest! {
    #[test]
    fn names_are_valid_unique_and_resolve_back(servers in catalogue()) {
        let re = Regex::new("^[a-zA-Z0-9_-]{1,64}$").unwrap();
        let servers = with_slugs(&servers);
        let slugs: HashSet<&str> = servers.iter().map(|(_, s, _)| s.as_str()).collect();
        prop_assert_eq!(slugs.len(), servers.len(), "slugs must be distinct");

        let table = NameTable::build(servers.clone()).unwrap();
        let mut seen = HashSet::new();
        for (id, _, tools) in &servers {
            for tool in tools {
                let name = table.model_name(id, tool).unwrap();
                prop_assert!(re.is_match(name), "{:?}", name);
                prop_assert!(name.starts_with("mcp_"));
                prop_assert_eq!(table.resolve(name), Some((id, tool.as_str())));
            }
        }
        for named in table.iter() {
            prop_assert!(seen.insert(named.model_name.to_ascii_lowercase()), "duplicate {}", named.model_name);
        }
    }

    #[test]
    fn names_do_not_depend_on_input_order(servers in catalogue()) {
        let servers = with_slugs(&servers);
        let reversed: Vec<_> = servers
            .iter()
            .rev()
            .map(|(id, slug, tools)| (*id, slug.clone(), tools.iter().rev().cloned().collect::<Vec<_>>()))
            .collect();
        let a = NameTable::build(servers.clone()).unwrap();
        let b = NameTable::build(reversed).unwrap();
        for named in a.iter() {
            prop_assert_eq!(b.model_name(&named.server, &named.tool), Some(named.model_name.as_str()));
        }
    }

    #[test]
    fn grouping_partitions_the_catalogue(tools in prop::collection::vec(tool_name(), 0..40)) {
        let groups = group_tools(&tools);
        let mut all: Vec<&str> = groups.iter().flat_map(|g| g.tools.iter().map(String::as_str)).collect();
        all.sort_unstable();
        let mut want: Vec<&str> = tools.iter().map(String::as_str).collect();
        want.sort_unstable();
        want.dedup();
        prop_assert_eq!(all, want);
        let keys: HashSet<&str> = groups.iter().map(|g| g.key.as_str()).collect();
        prop_assert_eq!(keys.len(), groups.len(), "group keys must be distinct");
        for g in &groups {
            if !g.is_unnamed() {
                prop_assert!(g.tools.len() >= 2);
                prop_assert!(g.tools.iter().all(|t| t.starts_with(g.key.as_str()) && t.len() > g.key.len()));
            }
        }
    }
}
