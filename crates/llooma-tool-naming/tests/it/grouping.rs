//! The grouping table (gateway-like catalogues) and the group switches.

use llooma_tool_naming::{GroupSwitches, Separator, detect_separator, group_tools, switched_on};

/// `(catalogue, separator read, groups as "key: tool tool ...", unnamed group written with key "")`.
#[rustfmt::skip]
const GROUPS: &[(&[&str], Option<Separator>, &[&str])] = &[
    // MCPHub: `<server>-<tool>`; server names hold `-` and `_`, tool names hold `_`.
    (&["Chatto-send_message", "Chatto-list_rooms", "home-assistant-turn_on", "home-assistant-get_state", "Infomaniak_Mail-send", "Infomaniak_Mail-list_folders", "fetch-fetch"], Some(Separator::Dash), &["Chatto: Chatto-list_rooms Chatto-send_message", "Infomaniak_Mail: Infomaniak_Mail-list_folders Infomaniak_Mail-send", "home-assistant: home-assistant-get_state home-assistant-turn_on", ": fetch-fetch"]),
    // MCPHub, two servers sharing a word: still split at `-`, not gathered under `Infomaniak`.
    (&["Infomaniak_Mail-send", "Infomaniak_Mail-list", "Infomaniak_Calendar-list_events"], Some(Separator::Dash), &["Infomaniak_Mail: Infomaniak_Mail-list Infomaniak_Mail-send", ": Infomaniak_Calendar-list_events"]),
    // MCPHub, kebab-case tool names: the group stays the server.
    (&["Chatto-send-message", "Chatto-list-rooms"], Some(Separator::Dash), &["Chatto: Chatto-list-rooms Chatto-send-message"]),
    // MCPHub, a server's tools sharing a verb after the server name: the verb is not absorbed.
    (&["home-assistant-get-state", "home-assistant-get-history"], Some(Separator::Dash), &["home-assistant: home-assistant-get-history home-assistant-get-state"]),
    // Two servers sharing a first word: the prefix stops where they differ.
    (&["home-assistant-x", "home-assistant-y", "home-kitchen-z"], Some(Separator::Dash), &["home: home-assistant-x home-assistant-y home-kitchen-z"]),
    // MCPJungle: `<server>__<tool>`.
    (&["github__create_issue", "github__list_prs", "slack__send_message", "slack__list_channels", "time__get_current_time"], Some(Separator::DoubleUnderscore), &["github: github__create_issue github__list_prs", "slack: slack__list_channels slack__send_message", ": time__get_current_time"]),
    // MCPJungle with a dashed server name: `__` wins the tie against `-`.
    (&["home-assistant__turn_on", "home-assistant__get_state"], Some(Separator::DoubleUnderscore), &["home-assistant: home-assistant__get_state home-assistant__turn_on"]),
    // Mixed conventions: the one grouping more tools wins, the rest is unnamed.
    (&["a__x", "a__y", "b-x", "b-y", "b-z"], Some(Separator::Dash), &["b: b-x b-y b-z", ": a__x a__y"]),
    // Gateway groups beside flat tools.
    (&["Chatto-a_b", "Chatto-c", "search", "get_time", "get_date"], Some(Separator::Dash), &["Chatto: Chatto-a_b Chatto-c", ": get_date get_time search"]),
    // Flat snake-case server (GitHub's own): verbs are not groups.
    (&["create_issue", "get_issue", "list_issues", "search_code", "get_me"], None, &[": create_issue get_issue get_me list_issues search_code"]),
    // Flat kebab-case server.
    (&["get-file", "get-dir", "write-file"], None, &[": get-dir get-file write-file"]),
    // One prefix on every tool (Playwright): one named group.
    (&["browser_click", "browser_close", "browser_navigate"], Some(Separator::Underscore), &["browser: browser_click browser_close browser_navigate"]),
    // `_` as the gateway separator, used only because nothing else groups.
    (&["github_create_issue", "github_list_prs", "jira_get_ticket", "jira_search"], Some(Separator::Underscore), &["github: github_create_issue github_list_prs", "jira: jira_get_ticket jira_search"]),
    (&["home_assistant_turn_on", "home_assistant_get_state"], Some(Separator::Underscore), &["home_assistant: home_assistant_get_state home_assistant_turn_on"]),
    // Dots and slashes.
    (&["mail.send", "mail.list", "cal.create", "cal.delete"], Some(Separator::Dot), &["cal: cal.create cal.delete", "mail: mail.list mail.send"]),
    (&["fs/read", "fs/write", "echo"], Some(Separator::Slash), &["fs: fs/read fs/write", ": echo"]),
    // A tool equal to the prefix of others: the group does not swallow it whole.
    (&["a-b", "a-b-c", "a-b-d"], Some(Separator::Dash), &["a: a-b a-b-c a-b-d"]),
    // Leading separators, duplicates, single tools, nothing.
    (&["-x", "-y"], None, &[": -x -y"]),
    (&["s-a", "s-a", "s-b"], Some(Separator::Dash), &["s: s-a s-b"]),
    (&["only-one"], None, &[": only-one"]),
    (&[], None, &[]),
];

fn render(names: &[&str]) -> Vec<String> {
    group_tools(names).iter().map(|g| format!("{}: {}", g.key, g.tools.join(" "))).collect()
}

#[test]
fn grouping_table() {
    for (names, sep, want) in GROUPS {
        assert_eq!(detect_separator(names), *sep, "separator of {names:?}");
        assert_eq!(render(names), *want, "groups of {names:?}");
        let mut reversed = names.to_vec();
        reversed.reverse();
        assert_eq!(render(&reversed), *want, "input order changed the groups of {names:?}");
    }
}

const HUB: &[&str] = &[
    "Chatto-send_message",
    "Chatto-list_rooms",
    "home-assistant-turn_on",
    "home-assistant-get_state",
    "Infomaniak_Mail-send",
    "Infomaniak_Mail-list_folders",
    "fetch-fetch",
];

fn on(names: &[&str], switches: &GroupSwitches) -> Vec<String> {
    switched_on(&group_tools(names), switches).iter().map(|t| t.tool.to_owned()).collect()
}

#[test]
fn every_group_is_on_by_default() {
    assert_eq!(on(HUB, &GroupSwitches::new()).len(), HUB.len());
}

#[test]
fn all_of_the_house_none_of_the_mail() {
    let switches: GroupSwitches =
        [("Infomaniak_Mail", false), ("home-assistant", true)].into_iter().collect();
    let got = on(HUB, &switches);
    assert!(got.iter().all(|t| !t.starts_with("Infomaniak_Mail-")), "{got:?}");
    assert_eq!(got.len(), HUB.len() - 2);
}

#[test]
fn a_tool_added_to_a_group_later_follows_its_switch() {
    let mut switches = GroupSwitches::new();
    switches.set("Infomaniak_Mail", false);
    switches.set("Chatto", true);
    let mut later = HUB.to_vec();
    later.extend(["Infomaniak_Mail-delete", "Chatto-create_room"]);
    let got = on(&later, &switches);
    assert!(!got.contains(&"Infomaniak_Mail-delete".to_owned()), "{got:?}");
    assert!(got.contains(&"Chatto-create_room".to_owned()), "{got:?}");
}

#[test]
fn the_unnamed_group_has_a_switch_too() {
    let mut switches = GroupSwitches::new();
    switches.set("", false);
    let got = on(&["fetch-fetch", "Chatto-a", "Chatto-b", "echo"], &switches);
    assert_eq!(got, ["Chatto-a", "Chatto-b"]);
}

#[test]
fn an_off_switch_survives_its_group_moving() {
    // `home-assistant` was switched off; then a `home-kitchen-*` tool turns the group into `home`.
    let mut switches = GroupSwitches::new();
    switches.set("home-assistant", false);
    let got = on(&["home-assistant-x", "home-assistant-y", "home-kitchen-z"], &switches);
    assert_eq!(got, ["home-kitchen-z"]);
    // An explicit state on the new group wins over the stale one.
    switches.set("home", true);
    let got = on(&["home-assistant-x", "home-assistant-y", "home-kitchen-z"], &switches);
    assert_eq!(got.len(), 3);
}

#[test]
fn switches_round_trip_through_serde_as_a_plain_map() {
    let switches: GroupSwitches = [("Chatto", false), ("", true)].into_iter().collect();
    let json = serde_json::to_string(&switches).unwrap();
    assert_eq!(json, r#"{"":true,"Chatto":false}"#);
    let back: GroupSwitches = serde_json::from_str(&json).unwrap();
    assert_eq!(back, switches);
}
