//! The naming table: one line per case.

use llooma_tool_naming::{
    BUILTIN_TOOL_NAMES, MCP_PREFIX, NameTable, NamingError, RESERVED_MCP_NAMES,
    is_valid_model_name, server_slug, slugify,
};

/// `(existing slugs, new label, slug to store)`.
#[rustfmt::skip]
const SLUGS: &[(&[&str], &str, &str)] = &[
    (&[], "home", "home"),
    (&[], "Home Assistant", "home_assistant"),
    (&["home"], "home", "home_2"),
    (&["home", "home_2"], "Home", "home_3"),
    (&["home", "home_3"], "home", "home_2"),
    (&["HOME"], "home", "home_2"),
    (&["home", "home_2"], "home 2", "home_2_2"),
    (&[], "", "server"),
    (&[], "!!!", "server"),
    (&["server"], "   ", "server_2"),
    (&[], "家のサーバー", "server"),
    (&[], "Maison 🏠", "maison"),
    (&[], "mail.infomaniak.com", "mail_infomaniak_com"),
    (&[], "--edge__", "edge"),
    (&[], "a-very-long-label-for-a-gateway-server", "a-very-long-label-fo"),
    (&["abcdefghijklmnopqrst"], "abcdefghijklmnopqrstuvwxyz", "abcdefghijklmnopqr_2"),
];

#[test]
fn slug_table() {
    for (existing, label, want) in SLUGS {
        let got = server_slug(existing.iter().copied(), label);
        assert_eq!(&got, want, "existing {existing:?}, label {label:?}");
        assert!(is_valid_model_name(&got), "{got}");
        assert_eq!(slugify(&got), got, "a stored slug must survive re-slugifying");
    }
}

const L70: &str = "abcdefghij_abcdefghij_abcdefghij_abcdefghij_abcdefghij_abcdefghij_1234";
const L70B: &str = "abcdefghij_abcdefghij_abcdefghij_abcdefghij_abcdefghij_abcdefghij_1235";

/// `(slug, tools, model names in the same order)` for one server. The hashes are pinned on
/// purpose: stored conversations carry these names, so they must not drift.
#[rustfmt::skip]
const NAMES: &[(&str, &[&str], &[&str])] = &[
    ("home", &["turn_on"], &["mcp_home_turn_on"]),
    ("gw", &["Infomaniak_Mail-send"], &["mcp_gw_Infomaniak_Mail-send"]),
    ("gw", &["mail.send"], &["mcp_gw_mail_send"]),
    ("gw", &["a..b  c"], &["mcp_gw_a_b_c"]),
    ("gw", &["créer_note"], &["mcp_gw_cr_er_note"]),
    ("gw", &["🏠 lights"], &["mcp_gw__lights"]),
    ("gw", &["fs/read"], &["mcp_gw_fs_read"]),
    ("gw", &[""], &["mcp_gw_"]),
    ("Stored Slug!", &["x"], &["mcp_stored_slug_x"]),
    ("", &["x"], &["mcp_server_x"]),
    ("gw", &[L70], &["mcp_gw_abcdefghij_abcdefghij_abcdefghij_abcdefghij_abcd_6384b1e4"]),
    ("gw", &[L70, L70B], &["mcp_gw_abcdefghij_abcdefghij_abcdefghij_abcdefghij_abcd_6384b1e4", "mcp_gw_abcdefghij_abcdefghij_abcdefghij_abcdefghij_abcd_9c763bd4"]),
    // Collisions: the verbatim name keeps the plain form, whatever the input order.
    ("s", &["a.b", "a_b"], &["mcp_s_a_b_2f93282a", "mcp_s_a_b"]),
    ("s", &["a_b", "a.b"], &["mcp_s_a_b", "mcp_s_a_b_2f93282a"]),
    // None verbatim: the smallest original (`a b`) keeps the plain name.
    ("s", &["a.b", "a/b", "a b"], &["mcp_s_a_b_2f93282a", "mcp_s_a_b_27f67204", "mcp_s_a_b"]),
    // Names differing only in case collide too; both verbatim, the smaller original (`S` < `s`) keeps it.
    ("s", &["search", "Search"], &["mcp_s_search_4d6a41b7", "mcp_s_Search"]),
    // A tool literally named like a suffixed one does not steal it.
    ("s", &["a.b", "a_b", "a_b_2f93282a"], &["mcp_s_a_b_20b7c08d", "mcp_s_a_b", "mcp_s_a_b_2f93282a"]),
    // Built-ins in the mcp_ namespace are never produced.
    ("resource", &["read", "list", "templates"], &["mcp_resource_read_15f28ff2", "mcp_resource_list_af34f1e1", "mcp_resource_templates"]),
    // A tool listed twice is one tool.
    ("s", &["x", "x"], &["mcp_s_x", "mcp_s_x"]),
];

#[test]
fn naming_table() {
    for (slug, tools, want) in NAMES {
        let table = NameTable::build([("srv", *slug, tools.iter().copied())]).unwrap();
        let got: Vec<&str> = tools.iter().map(|t| table.model_name(&"srv", t).unwrap()).collect();
        assert_eq!(&got, want, "slug {slug:?}, tools {tools:?}");
        for (tool, name) in tools.iter().zip(&got) {
            assert!(is_valid_model_name(name), "{name}");
            assert_eq!(table.resolve(name), Some((&"srv", *tool)), "{name}");
        }
    }
}

#[test]
fn two_servers_with_the_same_tool_are_two_tools() {
    let table =
        NameTable::build([("a", "home", vec!["search"]), ("b", "home_2", vec!["search"])]).unwrap();
    assert_eq!(table.model_name(&"a", "search"), Some("mcp_home_search"));
    assert_eq!(table.model_name(&"b", "search"), Some("mcp_home_2_search"));
    assert_eq!(table.resolve("mcp_home_2_search"), Some((&"b", "search")));
}

#[test]
fn servers_with_the_same_stored_slug_still_get_unique_names() {
    let table = NameTable::build([("a", "home", ["x"]), ("b", "home", ["x"])]).unwrap();
    assert_eq!(table.model_name(&"a", "x"), Some("mcp_home_x"));
    let other = table.model_name(&"b", "x").unwrap();
    assert_ne!(other, "mcp_home_x");
    assert_eq!(table.resolve(other), Some((&"b", "x")));
}

#[test]
fn the_way_back_is_a_lookup_not_a_parse() {
    let table = NameTable::build([("a", "home", ["turn_on"])]).unwrap();
    assert_eq!(table.resolve("mcp_home_turn_on"), Some((&"a", "turn_on")));
    assert_eq!(table.resolve("mcp_home_turn_off"), None);
    assert_eq!(table.resolve("MCP_HOME_TURN_ON"), None);
    assert_eq!(table.resolve("web_search"), None);
    assert_eq!(table.model_name(&"a", "turn_off"), None);
    assert_eq!(table.model_name(&"b", "turn_on"), None);
}

#[test]
fn a_server_listed_twice_is_refused() {
    let err = NameTable::build([("a", "x", ["t"]), ("a", "y", ["u"])]).unwrap_err();
    assert_eq!(err, NamingError::DuplicateServer { position: 1 });
}

#[test]
fn extra_reserved_names_are_avoided() {
    let table =
        NameTable::build_reserving([("a", "servers", ["describe"])], &["mcp_servers_describe"])
            .unwrap();
    let name = table.model_name(&"a", "describe").unwrap();
    assert_ne!(name, "mcp_servers_describe");
    assert!(name.starts_with("mcp_servers_describe_"), "{name}");
}

#[test]
fn builtin_names_can_never_be_produced() {
    // Outside the mcp_ namespace the prefix alone guarantees it; inside, the reserved list does.
    for builtin in BUILTIN_TOOL_NAMES {
        assert!(
            !builtin.starts_with(MCP_PREFIX) || RESERVED_MCP_NAMES.contains(builtin),
            "{builtin} is in the mcp_ namespace but not reserved"
        );
    }
    let table = NameTable::build([
        ("a", "resource", vec!["list", "read", "LIST"]),
        ("b", "web", vec!["search"]),
    ])
    .unwrap();
    for named in table.iter() {
        assert!(named.model_name.starts_with(MCP_PREFIX));
        for builtin in BUILTIN_TOOL_NAMES {
            assert!(!named.model_name.eq_ignore_ascii_case(builtin), "{}", named.model_name);
        }
    }
}

#[test]
fn five_thousand_tools_on_one_server_are_valid_and_unique() {
    // Worst case on purpose: long names differing only at the end, and sanitising collisions.
    let tools: Vec<String> = (0..5_000)
        .map(|i| match i % 3 {
            0 => format!("{}{i}", "x".repeat(70)),
            1 => format!("tool.{}", i / 3),
            _ => format!("tool_{}", i / 3),
        })
        .collect();
    let table = NameTable::build([("s", "gateway", &tools)]).unwrap();
    assert_eq!(table.len(), 5_000);
    let mut seen = std::collections::HashSet::new();
    for named in table.iter() {
        assert!(is_valid_model_name(&named.model_name), "{}", named.model_name);
        assert!(seen.insert(named.model_name.to_ascii_lowercase()), "{}", named.model_name);
        assert_eq!(table.resolve(&named.model_name), Some((&"s", named.tool.as_str())));
    }
}
