//! Budget cases: one line per case.

use llooma_tool_naming::{
    BUDGET_WARNING, DEFAULT_TOOL_BUDGET, GroupSwitches, LimitedBy, Limits, OPENAI_MAX_TOOLS,
    ServerTools, budget_warning, select_tools,
};

/// Server `s` with `groups` gateway groups `g0..` of `per_group` tools each (`g0-t000`, ...).
fn server(s: usize, groups: usize, per_group: usize, off: &[&str]) -> ServerTools<usize> {
    ServerTools {
        server: s,
        tools: (0..groups)
            .flat_map(|g| (0..per_group).map(move |t| format!("g{g}-t{t:03}")))
            .collect(),
        switches: off.iter().map(|k| (*k, false)).collect::<GroupSwitches>(),
    }
}

/// `(servers as (groups, per group, groups off), limits, offered, left out, limited by,
/// first left out as (server, tool))`.
#[rustfmt::skip]
#[expect(clippy::type_complexity, reason = "a table, read one line at a time")]
const CASES: &[(&[(usize, usize, &[&str])], Limits, usize, usize, LimitedBy, Option<(usize, &str)>)] = &[
    // Under the default budget: everything goes.
    (&[(2, 25, &[]), (1, 50, &[]), (5, 10, &[])], DEFAULT, 150, 0, LimitedBy::Budget, None),
    // Over: the last server added loses its last groups first.
    (&[(2, 50, &[]), (1, 100, &[]), (4, 25, &[])], DEFAULT, 200, 100, LimitedBy::Budget, Some((2, "g0-t000"))),
    (&[(4, 60, &[])], DEFAULT, 200, 40, LimitedBy::Budget, Some((0, "g3-t020"))),
    // Switched-off groups do not count against the budget.
    (&[(2, 50, &[]), (1, 100, &[]), (4, 25, &["g0", "g1", "g2", "g3"])], DEFAULT, 200, 0, LimitedBy::Budget, None),
    (&[(2, 150, &["g0"]), (1, 100, &[])], DEFAULT, 200, 50, LimitedBy::Budget, Some((1, "g0-t050"))),
    // Provider cap: 128 minus 5 built-ins leaves 123.
    (&[(3, 50, &[])], Limits { budget: 200, provider_cap: Some(OPENAI_MAX_TOOLS), builtin_tools: 5 }, 123, 27, LimitedBy::ProviderCap, Some((0, "g2-t023"))),
    (&[(3, 50, &[])], Limits { budget: 100, provider_cap: Some(OPENAI_MAX_TOOLS), builtin_tools: 5 }, 100, 50, LimitedBy::Budget, Some((0, "g2-t000"))),
    // A tie names the budget, the limit the person set.
    (&[(3, 50, &[])], Limits { budget: 123, provider_cap: Some(OPENAI_MAX_TOOLS), builtin_tools: 5 }, 123, 27, LimitedBy::Budget, Some((0, "g2-t023"))),
    // Built-ins filling the cap leave no room at all.
    (&[(1, 2, &[])], Limits { budget: 200, provider_cap: Some(3), builtin_tools: 5 }, 0, 2, LimitedBy::ProviderCap, Some((0, "g0-t000"))),
    // A budget of zero offers nothing and says so.
    (&[(1, 2, &[])], Limits { budget: 0, provider_cap: None, builtin_tools: 5 }, 0, 2, LimitedBy::Budget, Some((0, "g0-t000"))),
    (&[], DEFAULT, 0, 0, LimitedBy::Budget, None),
];

const DEFAULT: Limits =
    Limits { budget: DEFAULT_TOOL_BUDGET, provider_cap: None, builtin_tools: 0 };

#[test]
fn budget_table() {
    assert_eq!(Limits::default(), DEFAULT);
    for (i, (spec, limits, offered, left_out, by, first_out)) in CASES.iter().enumerate() {
        let servers: Vec<_> =
            spec.iter().enumerate().map(|(s, (g, n, off))| server(s, *g, *n, off)).collect();
        let out = select_tools(&servers, limits);
        assert_eq!(out.offered.len(), *offered, "case {i}: offered");
        assert_eq!(out.left_out.len(), *left_out, "case {i}: left out");
        assert_eq!(out.limited_by, *by, "case {i}: limited by");
        assert_eq!(out.is_over(), *left_out > 0, "case {i}");
        let first = out.left_out.first().map(|c| (c.server, c.tool.as_str()));
        assert_eq!(first, *first_out, "case {i}: first left out");
        // The left-out list is the exact continuation of the offered one, and stable.
        assert_eq!(select_tools(&servers, limits), out, "case {i}: not deterministic");
    }
}

#[test]
fn over_budget_order_is_server_then_group_then_tool() {
    let servers = vec![
        ServerTools {
            server: "first",
            tools: vec!["z-b".into(), "flat".into(), "a-b".into(), "z-a".into(), "a-a".into()],
            switches: GroupSwitches::new(),
        },
        ServerTools { server: "second", tools: vec!["x".into()], switches: GroupSwitches::new() },
    ];
    let limits = Limits { budget: 3, ..Limits::default() };
    let out = select_tools(&servers, &limits);
    let order: Vec<_> = out
        .offered
        .iter()
        .chain(&out.left_out)
        .map(|c| (c.server, c.group.as_str(), c.tool.as_str()))
        .collect();
    assert_eq!(
        order,
        [
            ("first", "a", "a-a"),
            ("first", "a", "a-b"),
            ("first", "z", "z-a"),
            ("first", "z", "z-b"),
            ("first", "", "flat"),
            ("second", "", "x")
        ]
    );
    assert_eq!(out.offered.len(), 3);
}

/// `(budget setting, warns)`.
const WARNINGS: &[(usize, bool)] =
    &[(0, false), (64, false), (100, false), (101, true), (200, true)];

#[test]
fn warning_table() {
    for (budget, warns) in WARNINGS {
        assert_eq!(budget_warning(*budget).is_some(), *warns, "budget {budget}");
    }
    assert!(BUDGET_WARNING.contains("rides along in every request of every turn"));
    assert_eq!(budget_warning(DEFAULT_TOOL_BUDGET), Some(BUDGET_WARNING));
}
