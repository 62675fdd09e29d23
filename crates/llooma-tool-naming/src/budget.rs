//! The tool budget: how many MCP tools reach the model, across every server and group switched on.

use serde::{Deserialize, Serialize};

use crate::group::{GroupSwitches, group_tools, switched_on};

/// The budget an account starts with.
pub const DEFAULT_TOOL_BUDGET: usize = 200;

/// A budget above this carries [`BUDGET_WARNING`].
pub const BUDGET_WARNING_ABOVE: usize = 100;

/// OpenAI's limit on tools in one request, the usual provider cap.
pub const OPENAI_MAX_TOOLS: usize = 128;

/// What the setting says past a hundred.
pub const BUDGET_WARNING: &str = "Every tool definition rides along in every request of every \
turn, all of it, whether the model uses it or not. Past a hundred, switching off a gateway's \
groups is the cheaper answer.";

/// The warning to show beside a budget setting of `budget`, if it is past a hundred.
pub fn budget_warning(budget: usize) -> Option<&'static str> {
    (budget > BUDGET_WARNING_ABOVE).then_some(BUDGET_WARNING)
}

/// The limits one request is under.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct Limits {
    /// The account's budget for MCP tools.
    pub budget: usize,
    /// The most tools the provider takes in one request (built-in ones included), if it has a cap.
    pub provider_cap: Option<usize>,
    /// How many of the app's own tools the request carries besides the MCP ones.
    pub builtin_tools: usize,
}

impl Default for Limits {
    fn default() -> Self {
        Self { budget: DEFAULT_TOOL_BUDGET, provider_cap: None, builtin_tools: 0 }
    }
}

impl Limits {
    /// How many MCP tools may go, and which limit says so: `min(budget, cap - built-ins)`. On a
    /// tie the budget is named, since it is the one the person set.
    pub fn effective(&self) -> (usize, LimitedBy) {
        match self.provider_cap {
            Some(cap) => {
                let room = cap.saturating_sub(self.builtin_tools);
                if room < self.budget {
                    (room, LimitedBy::ProviderCap)
                } else {
                    (self.budget, LimitedBy::Budget)
                }
            }
            None => (self.budget, LimitedBy::Budget),
        }
    }
}

/// Which limit decided how many tools were offered.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum LimitedBy {
    /// The account's tool budget.
    Budget,
    /// The provider's cap on tools per request, minus the app's own tools.
    ProviderCap,
}

/// One server's stored catalogue and group switches, as input to [`select_tools`].
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct ServerTools<S> {
    /// The server's id.
    pub server: S,
    /// Its stored tool names.
    pub tools: Vec<String>,
    /// Its group switches.
    pub switches: GroupSwitches,
}

/// A switched-on tool, offered or left out.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct Candidate<S> {
    /// The server it belongs to.
    pub server: S,
    /// Its group's key.
    pub group: String,
    /// Its original name.
    pub tool: String,
}

/// Which switched-on tools go to the model and which the limit left out.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct BudgetOutcome<S> {
    /// Offered, in order.
    pub offered: Vec<Candidate<S>>,
    /// Switched on but past the limit, in the same order.
    pub left_out: Vec<Candidate<S>>,
    /// How many tools could go.
    pub limit: usize,
    /// Which limit that was.
    pub limited_by: LimitedBy,
}

impl<S> BudgetOutcome<S> {
    /// Whether anything switched on was left out.
    pub fn is_over(&self) -> bool {
        !self.left_out.is_empty()
    }
}

/// Applies the limits to the tools switched on across `servers`, given **in the order the account
/// added them**.
///
/// The order that decides who is left out: servers in input order, then each server's groups in
/// [`group_tools`] order (named groups by key, the unnamed group last), then tool name. The first
/// `limit` are offered, the rest reported in `left_out`. Switched-off tools are in neither list.
pub fn select_tools<S: Clone>(servers: &[ServerTools<S>], limits: &Limits) -> BudgetOutcome<S> {
    let (limit, limited_by) = limits.effective();
    let mut offered = Vec::new();
    let mut left_out = Vec::new();
    for server in servers {
        let groups = group_tools(&server.tools);
        for t in switched_on(&groups, &server.switches) {
            let candidate = Candidate {
                server: server.server.clone(),
                group: t.group.to_owned(),
                tool: t.tool.to_owned(),
            };
            if offered.len() < limit {
                offered.push(candidate);
            } else {
                left_out.push(candidate);
            }
        }
    }
    BudgetOutcome { offered, left_out, limit, limited_by }
}
