//! Settings → Tools (the account's MCP servers, budget, permission mode) and Admin → MCP servers.
//! A change is sent to the API and the page is reloaded from the server, so what is shown is
//! always what is stored.

use leptos::prelude::*;
use llooma_types::{AdminMcpServerView, McpServerView, McpTestReport, McpToolSettingsView};
use serde_json::{Value, json};

use crate::api;
use crate::app::TopBar;
use crate::model::Me;

/// Sends one change; reloads the page when it worked, shows why when it did not.
fn change(
    method: &'static str,
    path: String,
    body: Value,
    csrf: String,
    error: RwSignal<Option<String>>,
    reload: &'static str,
) {
    api::spawn(async move {
        match api::call(method, &path, Some(body), Some(&csrf)).await {
            Ok(_) => api::go(reload),
            Err(failure) => error.set(Some(failure.message)),
        }
    });
}

fn input_value(node: NodeRef<leptos::html::Input>) -> String {
    node.get().map(|i| i.value()).unwrap_or_default()
}

fn status(server: &McpServerView) -> &'static str {
    if server.suspended.is_some() {
        "suspended"
    } else if !server.enabled {
        "off"
    } else {
        "on"
    }
}

#[component]
pub fn SettingsTools(
    me: Me,
    servers: Vec<McpServerView>,
    settings: McpToolSettingsView,
    mode: String,
) -> impl IntoView {
    const HERE: &str = "/settings/tools";
    let csrf = me.csrf_token.clone();
    let error = RwSignal::new(None::<String>);
    let report = RwSignal::new(None::<McpTestReport>);
    let label = NodeRef::<leptos::html::Input>::new();
    let address = NodeRef::<leptos::html::Input>::new();
    let token = NodeRef::<leptos::html::Input>::new();
    let budget = NodeRef::<leptos::html::Input>::new();
    let form = move || {
        let mut body = json!({"label": input_value(label), "address": input_value(address)});
        let token = input_value(token);
        if !token.is_empty() {
            body["token"] = json!(token);
        }
        body
    };
    let test = {
        let csrf = csrf.clone();
        move |_| {
            let csrf = csrf.clone();
            report.set(None);
            error.set(None);
            api::spawn(async move {
                match api::call("POST", "/api/v1/mcp/servers/test", Some(form()), Some(&csrf)).await
                {
                    Ok(found) => match serde_json::from_value::<McpTestReport>(found) {
                        Ok(found) => report.set(Some(found)),
                        Err(e) => error.set(Some(format!("Unexpected answer: {e}"))),
                    },
                    Err(failure) => error.set(Some(failure.message)),
                }
            });
        }
    };
    let add = {
        let csrf = csrf.clone();
        move |ev: leptos::ev::SubmitEvent| {
            ev.prevent_default();
            error.set(None);
            change("POST", "/api/v1/mcp/servers".into(), form(), csrf.clone(), error, HERE);
        }
    };
    let save_budget = {
        let csrf = csrf.clone();
        move |_| {
            let value: u32 = input_value(budget).trim().parse().unwrap_or(0);
            let body = json!({"toolBudget": value});
            change("PATCH", "/api/v1/mcp/settings".into(), body, csrf.clone(), error, HERE);
        }
    };
    let everywhere = {
        let csrf = csrf.clone();
        move |ev| {
            let body = json!({"mcpEverywhere": event_target_checked(&ev)});
            change("PATCH", "/api/v1/mcp/settings".into(), body, csrf.clone(), error, HERE);
        }
    };
    let set_mode = {
        let csrf = csrf.clone();
        move |ev| {
            let body = json!({"mode": event_target_value(&ev)});
            change("PATCH", "/api/v1/consent".into(), body, csrf.clone(), error, HERE);
        }
    };
    let modes = [
        ("ask", "Ask every time"),
        ("rules", "Ask, except what I always allow"),
        ("allow_all", "Allow everything without asking (not recommended)"),
    ];
    let empty = servers.is_empty();
    view! {
        <div class="page">
            <TopBar me=me.clone() />
            <main class="narrow settings">
                <h1>"Settings → Tools"</h1>
                <p class="error" role="alert">{move || error.get()}</p>
                <section class="card">
                    <h2>"Add an MCP server"</h2>
                    <form class="stack add-server" on:submit=add>
                        <label>"Label" <input node_ref=label name="label" placeholder="Home" /></label>
                        <label>
                            "Address"
                            <input
                                node_ref=address
                                name="address"
                                placeholder="https://mcp.example.org/mcp"
                                required
                            />
                        </label>
                        <label>
                            "Token (optional; never shown again)"
                            <input node_ref=token name="token" type="password" autocomplete="off" />
                        </label>
                        <div class="row">
                            <button class="test" type="button" on:click=test>"Test"</button>
                            <button class="primary add" type="submit">"Add"</button>
                        </div>
                    </form>
                    {move || {
                        report
                            .get()
                            .map(|found| {
                                view! {
                                    <div class="test-result">
                                        <p>
                                            {found
                                                .server_name
                                                .clone()
                                                .unwrap_or_else(|| "The server".to_owned())}
                                            {format!(" answers with {} tools:", found.tools.len())}
                                        </p>
                                        <ul class="tool-names">
                                            {found
                                                .tools
                                                .into_iter()
                                                .map(|t| view! { <li>{t.name}</li> })
                                                .collect_view()}
                                        </ul>
                                    </div>
                                }
                            })
                    }}
                </section>
                <h2>"Your MCP servers"</h2>
                {empty.then(|| view! { <p class="hint">"None yet."</p> })}
                {servers
                    .into_iter()
                    .map(|server| view! { <ServerCard server csrf=csrf.clone() error /> })
                    .collect_view()}
                <section class="card">
                    <h2>"Tool budget"</h2>
                    <p>
                        {format!(
                            "{} tools switched on; {} reach the model in a request.",
                            settings.switched_on,
                            settings.offered,
                        )}
                    </p>
                    {settings
                        .budget_warning
                        .clone()
                        .map(|warning| view! { <p class="warning">{warning}</p> })}
                    <div class="row">
                        <input
                            node_ref=budget
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
                </section>
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
                </section>
            </main>
        </div>
    }
}

#[component]
fn ServerCard(
    server: McpServerView,
    csrf: String,
    error: RwSignal<Option<String>>,
) -> impl IntoView {
    const HERE: &str = "/settings/tools";
    let path = format!("/api/v1/mcp/servers/{}", server.id);
    let news = RwSignal::new(None::<String>);
    let toggle = {
        let (csrf, path) = (csrf.clone(), path.clone());
        move |ev| {
            let body = json!({"enabled": event_target_checked(&ev)});
            change("PATCH", path.clone(), body, csrf.clone(), error, HERE);
        }
    };
    let refresh = {
        let (csrf, path) = (csrf.clone(), path.clone());
        move |_| {
            let (csrf, path) = (csrf.clone(), format!("{path}/refresh"));
            api::spawn(async move {
                match api::call("POST", &path, Some(json!({})), Some(&csrf)).await {
                    Ok(found) => {
                        let list = |key: &str| {
                            found[key]
                                .as_array()
                                .map(|a| {
                                    a.iter()
                                        .filter_map(|v| v.as_str().or_else(|| v["name"].as_str()))
                                        .collect::<Vec<_>>()
                                        .join(", ")
                                })
                                .filter(|s| !s.is_empty())
                                .unwrap_or_else(|| "none".to_owned())
                        };
                        news.set(Some(format!(
                            "Added: {}. Removed: {}. Changed: {}.",
                            list("added"),
                            list("removed"),
                            list("changed")
                        )));
                    }
                    Err(failure) => error.set(Some(failure.message)),
                }
            });
        }
    };
    let remove = move |_| change("DELETE", path.clone(), json!({}), csrf.clone(), error, HERE);
    let state = status(&server);
    view! {
        <article class="card server" data-server=server.id.clone()>
            <header class="row">
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
                <button class="refresh" type="button" on:click=refresh>"Update tools"</button>
                <button class="remove" type="button" on:click=remove>"Remove"</button>
            </div>
            <p class="news">{move || news.get()}</p>
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
                <crate::admin::AdminNav />
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
                            move |_| {
                                change("DELETE", path.clone(), json!({}), csrf.clone(), error, HERE)
                            }
                        };
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
                                    <button class="remove" type="button" on:click=remove>
                                        "Remove"
                                    </button>
                                </div>
                            </article>
                        }
                    })
                    .collect_view()}
            </main>
        </div>
    }
}
