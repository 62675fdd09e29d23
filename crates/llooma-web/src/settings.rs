//! Settings → Tools (the account's MCP servers, budget, permission mode, and how conversations
//! are named) and Admin → MCP servers.
//! A change is sent to the API and the page is reloaded from the server, so what is shown is
//! always what is stored.

use leptos::prelude::*;
use llooma_types::{
    AdminMcpServerView, AnnounceCostView, ConsentView, McpRefreshReport, McpServerDetail,
    McpServerView, McpToolSettingsView, PreferencesView, ToolCostView,
};
use serde_json::{Value, json};

use crate::api;
use crate::card::McpIcon;
use crate::forms::{RemoveAfterAsking, change, input_value};
use crate::layout::{AdminNav, ToolsNav, TopBar};
use crate::model::Me;

fn status(server: &McpServerView) -> &'static str {
    if server.suspended.is_some() {
        "suspended"
    } else if !server.enabled {
        "off"
    } else {
        "on"
    }
}

/// Where a change on Settings → Tools reloads to.
const TOOLS_PAGE: &str = "/settings/tools";

/// Settings → Tools: adding a server, the account's servers, then its tool budget, its
/// permissions and how its conversations are named, each section a component of its own.
#[component]
pub fn SettingsTools(
    me: Me,
    servers: Vec<McpServerDetail>,
    settings: McpToolSettingsView,
    cost: AnnounceCostView,
    consent: ConsentView,
    preferences: PreferencesView,
) -> impl IntoView {
    let csrf = me.csrf_token.clone();
    let error = RwSignal::new(None::<String>);
    let rule_choices = rule_choices(&servers);
    let empty = servers.is_empty();
    view! {
        <div class="page">
            <TopBar me=me.clone() />
            <main class="narrow settings">
                <h1>"Settings → Tools"</h1>
                <p class="error" role="alert">{move || error.get()}</p>
                <ToolsNav />
                <section class="card">
                    <h2>"Add an MCP server"</h2>
                    <crate::review::AddServerForm csrf=csrf.clone() can_add=settings.can_add_servers token_help=None />
                </section>
                <h2>"Your MCP servers"</h2>
                {empty.then(|| view! { <p class="hint">"None yet."</p> })}
                {servers
                    .into_iter()
                    .map(|detail| view! { <ServerCard detail csrf=csrf.clone() error /> })
                    .collect_view()}
                <ToolBudget settings cost csrf=csrf.clone() error />
                <Permissions consent rule_choices csrf=csrf.clone() error />
                <ConversationNaming preferences csrf error />
            </main>
        </div>
    }
}

/// A PATCH of the account's MCP settings from a checkbox: `field` set to whether it is ticked.
fn mcp_switch(
    field: &'static str,
    csrf: String,
    error: RwSignal<Option<String>>,
) -> impl Fn(leptos::ev::Event) + 'static {
    move |ev| {
        let body = json!({ field: event_target_checked(&ev) });
        change("PATCH", "/api/v1/mcp/settings".into(), body, csrf.clone(), error, TOOLS_PAGE);
    }
}

/// The tool budget (how many MCP tools reach the model in one request), MCP everywhere, and
/// announce mode with what it would cost and save.
#[component]
fn ToolBudget(
    settings: McpToolSettingsView,
    cost: AnnounceCostView,
    csrf: String,
    error: RwSignal<Option<String>>,
) -> impl IntoView {
    let budget = NodeRef::<leptos::html::Input>::new();
    let save_budget = {
        let csrf = csrf.clone();
        move |_| {
            let value: u32 = input_value(budget).trim().parse().unwrap_or(0);
            let body = json!({"toolBudget": value});
            change("PATCH", "/api/v1/mcp/settings".into(), body, csrf.clone(), error, TOOLS_PAGE);
        }
    };
    let everywhere = mcp_switch("mcpEverywhere", csrf.clone(), error);
    let announce = mcp_switch("announceMode", csrf, error);
    view! {
        <section class="card">
            <h2>"Tool budget"</h2>
            <p>
                {format!(
                    "{} tools switched on; {} reach the model in a request.",
                    settings.switched_on,
                    settings.offered,
                )}
            </p>
            {budget_note(&settings)
                .map(|(warns, text)| {
                    view! {
                        <p class=if warns { "warning" } else { "hint budget-note" }>{text}</p>
                    }
                })}
            <div class="row">
                <label for="budget">"The most MCP tools in one request"</label>
                <input
                    node_ref=budget
                    id="budget"
                    name="budget"
                    type="number"
                    min="1"
                    max="1000"
                    value=settings.tool_budget.to_string()
                />
                <button class="save-budget" type="button" on:click=save_budget>
                    "Save"
                </button>
            </div>
            <label class="switch">
                <input
                    type="checkbox"
                    name="everywhere"
                    checked=settings.mcp_everywhere
                    on:change=everywhere
                />
                "MCP tools on everywhere"
            </label>
            <label class="switch">
                <input
                    type="checkbox"
                    name="announce"
                    checked=settings.announce_mode
                    on:change=announce
                />
                "Announce servers instead of their tools (experimental)"
            </label>
            <AnnounceCost cost />
        </section>
    }
}

/// What every request carries with announce mode and without, and each group's definitions once
/// the model asks for them.
#[component]
fn AnnounceCost(cost: AnnounceCostView) -> impl IntoView {
    view! {
        <div class="announce-cost">
            <p>{cost_line("Without announcing, every request carries", &cost.every_request_without)}</p>
            <p>{cost_line("Announcing, every request carries", &cost.every_request_with)}</p>
            <p class="hint">
                "…plus, once the model asks for one, each group's definitions on the following requests:"
            </p>
            <ul class="group-costs">
                {cost
                    .per_group
                    .into_iter()
                    .map(|g| {
                        let group = if g.group.is_empty() { "(other tools)".to_owned() } else { g.group };
                        view! {
                            <li>{format!("{} · {}: {}", g.server_label, group, cost_words(&g.cost))}</li>
                        }
                    })
                    .collect_view()}
            </ul>
        </div>
    }
}

/// A tool an allow rule can be added for: (server id, server label, tool, argument names).
type RuleChoice = (String, String, String, Vec<String>);

/// Every tool of every server, to add an allow rule for (any value of each argument).
fn rule_choices(servers: &[McpServerDetail]) -> Vec<RuleChoice> {
    servers
        .iter()
        .flat_map(|detail| {
            detail.tools.iter().map(|tool| {
                let arguments = tool.input_schema["properties"]
                    .as_object()
                    .map(|p| p.keys().cloned().collect())
                    .unwrap_or_default();
                (
                    detail.server.id.clone(),
                    detail.server.label.clone(),
                    tool.name.clone(),
                    arguments,
                )
            })
        })
        .collect()
}

/// The permission mode, the allow rules (and adding one), and what a card always allowed.
#[component]
fn Permissions(
    consent: ConsentView,
    rule_choices: Vec<RuleChoice>,
    csrf: String,
    error: RwSignal<Option<String>>,
) -> impl IntoView {
    let mode = consent.mode.clone();
    let set_mode = {
        let csrf = csrf.clone();
        move |ev| {
            let body = json!({"mode": event_target_value(&ev)});
            change("PATCH", "/api/v1/consent".into(), body, csrf.clone(), error, TOOLS_PAGE);
        }
    };
    let modes = [
        ("ask", "Ask every time"),
        ("rules", "Ask, except what I always allow"),
        ("allow_all", "Allow everything without asking (not recommended)"),
    ];
    view! {
        <section class="card">
            <h2>"Permissions"</h2>
            <select name="mode" on:change=set_mode>
                {modes
                    .into_iter()
                    .map(|(value, text)| {
                        view! {
                            <option value=value selected=mode == value>
                                {text}
                            </option>
                        }
                    })
                    .collect_view()}
            </select>
            {(mode == "allow_all")
                .then(|| view! { <p class="warning">{consent.allow_all_warning.clone()}</p> })}
            <h3>"Allow rules"</h3>
            {consent
                .rules
                .is_empty()
                .then(|| view! { <p class="hint">"No rule: every call is put to you."</p> })}
            <ul class="rules">
                {consent
                    .rules
                    .into_iter()
                    .map(|rule| {
                        let path = format!("/api/v1/consent/rules/{}", rule.id);
                        let arguments = serde_json::to_string(&rule.arguments).unwrap_or_default();
                        let what = format!(" on {} with {arguments}", rule.server_address);
                        let undo = remover(path, csrf.clone(), error);
                        consent_item("rule", rule.tool_name, what, ("remove-rule", "Remove"), undo)
                    })
                    .collect_view()}
            </ul>
            {(!rule_choices.is_empty())
                .then(|| view! { <AddRule choices=rule_choices csrf=csrf.clone() error /> })}
            <h3>"Always allowed from a card"</h3>
            {consent
                .grants
                .is_empty()
                .then(|| view! { <p class="hint">"Nothing yet."</p> })}
            <ul class="grants">
                {consent
                    .grants
                    .into_iter()
                    .map(|grant| {
                        let path = format!("/api/v1/consent/grants/{}", grant.id);
                        let what = format!(" on {} with {}", grant.server_address, grant.arguments);
                        let undo = remover(path, csrf.clone(), error);
                        consent_item("grant", grant.tool_name, what, ("revoke", "Revoke"), undo)
                    })
                    .collect_view()}
            </ul>
        </section>
    }
}

/// A rule or a grant: the tool, where and with what, and the button (class, label) that undoes
/// it.
fn consent_item(
    class: &'static str,
    tool: String,
    what: String,
    (button_class, label): (&'static str, &'static str),
    undo: impl Fn(leptos::ev::MouseEvent) + 'static,
) -> impl IntoView {
    view! {
        <li class=class>
            <span>
                <b>{tool}</b>
                {what}
            </span>
            <button class=button_class type="button" on:click=undo>
                {label}
            </button>
        </li>
    }
}

/// A click that deletes what `path` names, then reloads the page.
fn remover(
    path: String,
    csrf: String,
    error: RwSignal<Option<String>>,
) -> impl Fn(leptos::ev::MouseEvent) + 'static {
    move |_| change("DELETE", path.clone(), json!({}), csrf.clone(), error, TOOLS_PAGE)
}

/// Picking a tool to always allow (whatever its arguments).
#[component]
fn AddRule(
    choices: Vec<RuleChoice>,
    csrf: String,
    error: RwSignal<Option<String>>,
) -> impl IntoView {
    let pick = RwSignal::new(0usize);
    let options = choices
        .iter()
        .enumerate()
        .map(|(i, (_, label, tool, _))| {
            view! { <option value=i.to_string()>{format!("{label} · {tool}")}</option> }
        })
        .collect_view();
    let add = move |_| {
        let Some((server_id, _, tool, arguments)) = choices.get(pick.get_untracked()) else {
            return;
        };
        let arguments: serde_json::Map<String, Value> =
            arguments.iter().map(|a| (a.clone(), json!("any"))).collect();
        let body = json!({"serverId": server_id, "tool": tool, "arguments": arguments});
        change("POST", "/api/v1/consent/rules".into(), body, csrf.clone(), error, TOOLS_PAGE);
    };
    view! {
        <div class="row add-rule">
            <select
                name="rule-tool"
                on:change=move |ev| pick.set(event_target_value(&ev).parse().unwrap_or(0))
            >
                {options}
            </select>
            <button class="add-rule" type="button" on:click=add>
                "Always allow this tool"
            </button>
        </div>
        <p class="hint">
            "A rule applies in the \"Ask, except what I always allow\" mode, whatever the arguments."
        </p>
    }
}

/// Whether the model names a new conversation after its first reply.
#[component]
fn ConversationNaming(
    preferences: PreferencesView,
    csrf: String,
    error: RwSignal<Option<String>>,
) -> impl IntoView {
    let titles_from_model = move |ev| {
        let body = json!({"titlesFromModel": event_target_checked(&ev)});
        change("PATCH", "/api/v1/me/preferences".into(), body, csrf.clone(), error, TOOLS_PAGE);
    };
    view! {
        <section class="card">
            <h2>"Conversations"</h2>
            <label class="switch">
                <input
                    type="checkbox"
                    name="titles-from-model"
                    checked=preferences.titles_from_model
                    on:change=titles_from_model
                />
                "Name a new conversation with the model after its first reply (one more \
                 short request to the model; otherwise its first message names it)"
            </label>
        </section>
    }
}

/// Tools in use past which the budget box warns: every one rides along in every request.
const TOOLS_IN_USE_WARNING: usize = 100;

/// What the budget box says about its size: a warning (`true`, the API's `budgetWarning`) once
/// more than a hundred tools are in use, before that only a quiet note that the budget allows
/// more; nothing for a budget of a hundred or less.
fn budget_note(settings: &McpToolSettingsView) -> Option<(bool, String)> {
    let warning = settings.budget_warning.clone()?;
    Some(if settings.offered > TOOLS_IN_USE_WARNING {
        (true, warning)
    } else {
        (
            false,
            format!(
                "Your budget lets more than {TOOLS_IN_USE_WARNING} tools through; {} are in use \
                 today. Past {TOOLS_IN_USE_WARNING} this box warns: each one rides along in every \
                 request.",
                settings.offered,
            ),
        )
    })
}

/// What "Update tools" found, in a sentence.
fn refresh_words(found: &McpRefreshReport) -> String {
    let list = |names: Vec<String>| {
        if names.is_empty() { "none".to_owned() } else { names.join(", ") }
    };
    format!(
        "Added: {}. Removed: {}. Changed: {}.",
        list(found.added.clone()),
        list(found.removed.clone()),
        list(found.changed.iter().map(|c| c.name.clone()).collect()),
    )
}

fn cost_words(cost: &ToolCostView) -> String {
    format!(
        "{} tool definitions, {} bytes (about {} tokens)",
        cost.tools, cost.bytes, cost.estimated_tokens
    )
}

fn cost_line(lead: &str, cost: &ToolCostView) -> String {
    format!("{lead} {}.", cost_words(cost))
}

#[component]
fn ServerCard(
    detail: McpServerDetail,
    csrf: String,
    error: RwSignal<Option<String>>,
) -> impl IntoView {
    let server = detail.server.clone();
    let path = format!("/api/v1/mcp/servers/{}", server.id);
    let news = RwSignal::new(None::<String>);
    let toggle = {
        let (csrf, path) = (csrf.clone(), path.clone());
        move |ev| {
            let body = json!({"enabled": event_target_checked(&ev)});
            change("PATCH", path.clone(), body, csrf.clone(), error, TOOLS_PAGE);
        }
    };
    // "Update tools": removals apply at once; new or changed tools wait for this review.
    let review = RwSignal::new(None::<McpRefreshReport>);
    let refresh = {
        let (csrf, path) = (csrf.clone(), path.clone());
        move |reviewed: Option<String>| {
            let (csrf, path) = (csrf.clone(), format!("{path}/refresh"));
            let accepting = reviewed.is_some();
            let body = reviewed.map_or_else(|| json!({}), |d| json!({"reviewedTools": d}));
            review.set(None);
            api::spawn(async move {
                match api::call("POST", &path, Some(body), Some(&csrf)).await {
                    Ok(found) => match serde_json::from_value::<McpRefreshReport>(found) {
                        Ok(found) if found.applied && accepting => api::go(TOOLS_PAGE),
                        Ok(found) if found.applied => news.set(Some(refresh_words(&found))),
                        Ok(found) => review.set(Some(found)),
                        Err(e) => error.set(Some(format!("Unexpected answer: {e}"))),
                    },
                    Err(failure) => error.set(Some(failure.message)),
                }
            });
        }
    };
    let update = {
        let refresh = refresh.clone();
        move |_| refresh(None)
    };
    let groups = detail
        .groups
        .iter()
        .map(|group| {
            let (csrf, path) = (csrf.clone(), format!("{path}/groups"));
            let key = group.key.clone();
            let on_change = move |ev| {
                let body = json!({"group": key, "enabled": event_target_checked(&ev)});
                change("PUT", path.clone(), body, csrf.clone(), error, TOOLS_PAGE);
            };
            let title =
                if group.key.is_empty() { "(other tools)".to_owned() } else { group.key.clone() };
            view! {
                <label class="switch group">
                    <input
                        type="checkbox"
                        name=format!("group-{}", group.key)
                        checked=group.enabled
                        on:change=on_change
                    />
                    {format!("{title} ({} tools)", group.tool_count)}
                </label>
            }
        })
        .collect_view();
    let tools = detail
        .tools
        .iter()
        .map(|tool| {
            view! {
                <li class=if tool.enabled { "tool on" } else { "tool off" }>
                    {tool.icon.clone().map(|src| view! { <McpIcon src /> })}
                    <code>{tool.model_name.clone()}</code>
                    {(!tool.enabled).then(|| view! { <span class="hint">" (off)"</span> })}
                    <span class="description">
                        {tool.description.clone().map(|d| format!(" — {d}")).unwrap_or_default()}
                    </span>
                </li>
            }
        })
        .collect_view();
    let tool_total = detail.tools.len();
    let remove = Callback::new(move |()| {
        change("DELETE", path.clone(), json!({}), csrf.clone(), error, TOOLS_PAGE)
    });
    let state = status(&server);
    view! {
        <article class="card server" data-server=server.id.clone()>
            <header class="row">
                {server.icon.clone().map(|src| view! { <McpIcon src /> })}
                <b class="label">{server.label.clone()}</b>
                <span class=format!("status {state}")>{state}</span>
            </header>
            <p class="address">{server.address.clone()}</p>
            <p class="meta">
                {format!(
                    "{} tools · {}",
                    server.tool_count,
                    if server.has_token { "token set" } else { "no token" },
                )}
            </p>
            {server
                .suspended
                .clone()
                .map(|s| {
                    view! {
                        <p class="suspension">
                            {format!("Suspended by an administrator: {}", s.reason)}
                        </p>
                    }
                })}
            {server
                .snapshot_stale
                .then(|| view! { <p class="hint">"This server reports new tools: Update tools."</p> })}
            <div class="row">
                <label class="switch">
                    <input type="checkbox" name="enabled" checked=server.enabled on:change=toggle />
                    "On"
                </label>
                <button class="refresh" type="button" on:click=update>"Update tools"</button>
                <RemoveAfterAsking
                    question="Remove this server? Its tools leave your conversations and what you always allow of it is forgotten."
                    remove
                />
            </div>
            <p class="news">{move || news.get()}</p>
            {move || {
                review
                    .get()
                    .map(|found| {
                        let refresh = refresh.clone();
                        let digest = found.tools_digest.clone();
                        let mut highlight = found.added.clone();
                        highlight.extend(found.changed.iter().map(|c| c.name.clone()));
                        view! {
                            <div class="tools-review">
                                <p class="warning">
                                    {format!(
                                        "{} Review the new list: until you accept it, only the tools you already consented to that the server still offers unchanged stay in use.",
                                        refresh_words(&found),
                                    )}
                                </p>
                                {found
                                    .instructions_changed
                                    .then(|| {
                                        view! {
                                            <div class="instructions-changed">
                                                <p class="warning">
                                                    "The server's instructions changed (given to the model as reference, never as orders):"
                                                </p>
                                                <blockquote>
                                                    {found.instructions.clone().unwrap_or_else(|| "(none now)".to_owned())}
                                                </blockquote>
                                            </div>
                                        }
                                    })}
                                <crate::review::ToolReview
                                    tools=found.tools.clone()
                                    groups=found.groups.clone()
                                    highlight
                                />
                                <div class="row">
                                    <button
                                        class="accept-tools primary"
                                        type="button"
                                        on:click=move |_| refresh(Some(digest.clone()))
                                    >
                                        "Accept the new tools"
                                    </button>
                                    <button class="cancel" type="button" on:click=move |_| review.set(None)>
                                        "Not now"
                                    </button>
                                </div>
                            </div>
                        }
                    })
            }}
            <details class="tool-list">
                <summary>{format!("All {tool_total} tools")}</summary>
                <ul>{tools}</ul>
            </details>
            <details class="advanced">
                <summary>"Advanced settings: groups"</summary>
                <p class="hint">
                    "Tools whose names share a prefix form a group; a group switched off is never offered."
                </p>
                <div class="stack groups">{groups}</div>
            </details>
        </article>
    }
}

#[component]
pub fn AdminMcp(me: Me, users_can_add: bool, servers: Vec<AdminMcpServerView>) -> impl IntoView {
    const HERE: &str = "/admin/mcp";
    let csrf = me.csrf_token.clone();
    let error = RwSignal::new(None::<String>);
    let allow_users = {
        let csrf = csrf.clone();
        move |ev| {
            let body = json!({"usersCanAddMcpServers": event_target_checked(&ev)});
            change("PATCH", "/api/v1/admin/settings".into(), body, csrf.clone(), error, HERE);
        }
    };
    let empty = servers.is_empty();
    view! {
        <div class="page">
            <TopBar me=me.clone() />
            <main class="narrow settings">
                <h1>"Admin → MCP servers"</h1>
                <AdminNav />
                <p class="error" role="alert">{move || error.get()}</p>
                <label class="switch">
                    <input
                        type="checkbox"
                        name="users-can-add"
                        checked=users_can_add
                        on:change=allow_users
                    />
                    "Users can add their own MCP servers"
                </label>
                {empty.then(|| view! { <p class="hint">"No MCP server on this instance."</p> })}
                {servers
                    .into_iter()
                    .map(|entry| {
                        let server = entry.server;
                        let path = format!("/api/v1/admin/mcp/servers/{}", server.id);
                        let reason = NodeRef::<leptos::html::Input>::new();
                        let suspended = server.suspended.clone();
                        let toggle = {
                            let (csrf, path) = (csrf.clone(), path.clone());
                            let lift = suspended.is_some();
                            move |_| {
                                let path = format!("{path}/suspend");
                                if lift {
                                    change("DELETE", path, json!({}), csrf.clone(), error, HERE);
                                } else {
                                    let body = json!({"reason": input_value(reason)});
                                    change("POST", path, body, csrf.clone(), error, HERE);
                                }
                            }
                        };
                        let remove = {
                            let csrf = csrf.clone();
                            Callback::new(move |()| {
                                change("DELETE", path.clone(), json!({}), csrf.clone(), error, HERE)
                            })
                        };
                        let question = format!(
                            "Remove {}'s server for good? Suspending keeps it and can be lifted.",
                            entry.owner_username
                        );
                        view! {
                            <article
                                class="card admin-server"
                                data-server=server.id.clone()
                                data-owner=entry.owner_username.clone()
                            >
                                <header class="row">
                                    <b class="label">{server.label.clone()}</b>
                                    <span class="owner">{format!("of {}", entry.owner_username)}</span>
                                    <span class="status">{status(&server)}</span>
                                </header>
                                <p class="address">{server.address.clone()}</p>
                                {suspended
                                    .clone()
                                    .map(|s| {
                                        view! {
                                            <p class="suspension">{format!("Suspended: {}", s.reason)}</p>
                                        }
                                    })}
                                <div class="row">
                                    {suspended
                                        .is_none()
                                        .then(|| {
                                            view! {
                                                <input
                                                    node_ref=reason
                                                    name="reason"
                                                    placeholder="Reason the owner will see"
                                                />
                                            }
                                        })}
                                    <button class="suspend" type="button" on:click=toggle>
                                        {if suspended.is_some() { "Lift suspension" } else { "Suspend" }}
                                    </button>
                                    <RemoveAfterAsking question remove />
                                </div>
                            </article>
                        }
                    })
                    .collect_view()}
            </main>
        </div>
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn settings(budget: u32, offered: usize) -> McpToolSettingsView {
        McpToolSettingsView {
            tool_budget: budget,
            mcp_everywhere: false,
            announce_mode: false,
            budget_warning: (budget > 100).then(|| "rides along in every request".to_owned()),
            switched_on: offered,
            offered,
            left_out: Vec::new(),
            can_add_servers: true,
        }
    }

    #[test]
    fn the_budget_box_warns_only_past_a_hundred_tools_in_use() {
        assert_eq!(budget_note(&settings(100, 100)), None, "a budget of 100 or less says nothing");
        let (warns, few) = budget_note(&settings(200, 12)).unwrap();
        assert!(!warns && few.contains("12 are in use"), "{few}");
        let (warns, many) = budget_note(&settings(200, 101)).unwrap();
        assert!(warns && many.contains("rides along in every request"), "{many}");
    }
}
