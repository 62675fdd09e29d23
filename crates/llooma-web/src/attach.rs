//! `@` and `/` in the composer: the resources, resource templates and prompts of the person's MCP
//! servers, chosen for the next message. A template's blanks and a prompt's arguments are filled
//! in a small form; the server builds the address from them (never the page).

use leptos::prelude::*;
use serde::{Deserialize, Serialize};
use serde_json::{Value, json};

/// What the person's active servers publish, as the composer offers it.
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct Attachables {
    pub resources: Vec<Offered>,
    pub prompts: Vec<Offered>,
}

/// One resource, template or prompt of one server.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct Offered {
    pub server_id: String,
    pub server_label: String,
    /// What the menu shows.
    pub title: String,
    pub what: OfferedKind,
    /// The blanks to fill: a template's variables or a prompt's arguments (name, required).
    pub fields: Vec<(String, bool)>,
}

#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(tag = "kind", rename_all = "camelCase")]
pub enum OfferedKind {
    Resource { uri: String },
    Template { uri_template: String },
    Prompt { name: String },
}

/// Builds the offer from each active server's catalogue (the `resources`, `resourceTemplates`
/// and `prompts` of `GET /api/v1/mcp/servers/{id}`).
pub fn offer(servers: &[llooma_types::McpServerDetail]) -> Attachables {
    let text = |v: &Value, key: &str| v[key].as_str().map(str::to_owned);
    let mut offer = Attachables::default();
    for detail in servers {
        let server = &detail.server;
        if !server.enabled || server.suspended.is_some() {
            continue;
        }
        let entry = |title: String, what: OfferedKind, fields: Vec<(String, bool)>| Offered {
            server_id: server.id.clone(),
            server_label: server.label.clone(),
            title,
            what,
            fields,
        };
        for r in detail.resources.as_array().into_iter().flatten() {
            let Some(uri) = text(r, "uri") else { continue };
            let title = text(r, "title").or_else(|| text(r, "name")).unwrap_or_else(|| uri.clone());
            offer.resources.push(entry(title, OfferedKind::Resource { uri }, Vec::new()));
        }
        for t in detail.resource_templates.as_array().into_iter().flatten() {
            let Some(uri_template) = text(t, "uriTemplate") else { continue };
            let title = text(t, "title")
                .or_else(|| text(t, "name"))
                .unwrap_or_else(|| uri_template.clone());
            let fields = t["variables"]
                .as_array()
                .into_iter()
                .flatten()
                .filter_map(|v| v.as_str().map(|v| (v.to_owned(), true)))
                .collect();
            offer.resources.push(entry(title, OfferedKind::Template { uri_template }, fields));
        }
        for p in detail.prompts.as_array().into_iter().flatten() {
            let Some(name) = text(p, "name") else { continue };
            let title = text(p, "title").unwrap_or_else(|| name.clone());
            let fields = p["arguments"]
                .as_array()
                .into_iter()
                .flatten()
                .filter_map(|a| {
                    let name = a["name"].as_str()?;
                    Some((name.to_owned(), a["required"].as_bool().unwrap_or(false)))
                })
                .collect();
            offer.prompts.push(entry(title, OfferedKind::Prompt { name }, fields));
        }
    }
    offer
}

/// The chat page's list of what is chosen for the next message, for what outside the composer
/// adds to it (a resource a call's result links to).
#[derive(Clone, Copy, Debug)]
pub struct NextMessage(pub RwSignal<Vec<Chosen>>);

impl NextMessage {
    /// Adds a resource of a server to the next message, once.
    pub fn add_resource(self, server_id: String, server_label: String, title: String, uri: String) {
        let what = OfferedKind::Resource { uri };
        self.0.update(|chosen| {
            let known =
                chosen.iter().any(|c| c.offered.server_id == server_id && c.offered.what == what);
            if !known {
                let offered = Offered { server_id, server_label, title, what, fields: Vec::new() };
                chosen.push(Chosen { offered, values: Vec::new() });
            }
        });
    }
}

/// One thing chosen for the next message, with its blanks filled.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Chosen {
    pub offered: Offered,
    pub values: Vec<(String, String)>,
}

impl Chosen {
    /// Its label on the chip above the message box.
    pub fn label(&self) -> String {
        let filled: Vec<String> = self
            .values
            .iter()
            .filter(|(_, v)| !v.is_empty())
            .map(|(k, v)| format!("{k}={v}"))
            .collect();
        let sign = match self.offered.what {
            OfferedKind::Prompt { .. } => "/",
            _ => "@",
        };
        if filled.is_empty() {
            format!("{sign}{} · {}", self.offered.server_label, self.offered.title)
        } else {
            format!(
                "{sign}{} · {} ({})",
                self.offered.server_label,
                self.offered.title,
                filled.join(", ")
            )
        }
    }

    fn arguments(&self) -> serde_json::Map<String, Value> {
        self.values
            .iter()
            .filter(|(_, v)| !v.is_empty())
            .map(|(k, v)| (k.clone(), json!(v)))
            .collect()
    }
}

/// The message's `resources` and `prompts`.
pub fn message_parts(chosen: &[Chosen]) -> (Vec<Value>, Vec<Value>) {
    let mut resources = Vec::new();
    let mut prompts = Vec::new();
    for c in chosen {
        let server_id = c.offered.server_id.clone();
        match &c.offered.what {
            OfferedKind::Resource { uri } => {
                resources.push(json!({"serverId": server_id, "uri": uri}))
            }
            OfferedKind::Template { uri_template } => resources.push(json!({
                "serverId": server_id, "uriTemplate": uri_template, "arguments": c.arguments()
            })),
            OfferedKind::Prompt { name } => prompts.push(json!({
                "serverId": server_id, "name": name, "arguments": c.arguments()
            })),
        }
    }
    (resources, prompts)
}

/// Which menu is open.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Menu {
    Resources,
    Prompts,
}

/// The open menu, the form for the blanks of the item picked, and the chips of what is chosen.
#[component]
pub fn AttachPanel(
    offer: Attachables,
    open: RwSignal<Option<Menu>>,
    chosen: RwSignal<Vec<Chosen>>,
) -> impl IntoView {
    let filling = RwSignal::new(None::<Offered>);
    let values = RwSignal::new(Vec::<(String, String)>::new());
    let pick = move |item: Offered| {
        open.set(None);
        if item.fields.is_empty() {
            chosen.update(|c| c.push(Chosen { offered: item, values: Vec::new() }));
        } else {
            values.set(item.fields.iter().map(|(name, _)| (name.clone(), String::new())).collect());
            filling.set(Some(item));
        }
    };
    let menu = move |items: Vec<Offered>, class: &'static str, empty: &'static str| {
        let none = items.is_empty();
        view! {
            <div class=format!("attach-menu {class}") role="menu">
                {none.then(|| view! { <p class="hint">{empty}</p> })}
                {items
                    .into_iter()
                    .map(|item| {
                        let shown = format!("{} · {}", item.server_label, item.title);
                        let blanks = if item.fields.is_empty() { "" } else { " …" };
                        view! {
                            <button
                                class="attach-item"
                                type="button"
                                role="menuitem"
                                on:click=move |_| pick(item.clone())
                            >
                                {format!("{shown}{blanks}")}
                            </button>
                        }
                    })
                    .collect_view()}
                <button class="attach-close" type="button" on:click=move |_| open.set(None)>
                    "Close"
                </button>
            </div>
        }
    };
    let resources = offer.resources.clone();
    let prompts = offer.prompts.clone();
    let add_filled = move |_| {
        let Some(item) = filling.get_untracked() else { return };
        chosen.update(|c| c.push(Chosen { offered: item, values: values.get_untracked() }));
        filling.set(None);
    };
    view! {
        <div class="attach">
            {move || match open.get() {
                Some(Menu::Resources) => {
                    Some(menu(resources.clone(), "resources", "Your servers publish no resources."))
                }
                Some(Menu::Prompts) => {
                    Some(menu(prompts.clone(), "prompts", "Your servers publish no prompts."))
                }
                None => None,
            }}
            {move || {
                filling
                    .get()
                    .map(|item| {
                        view! {
                            <div class="card attach-form" role="dialog">
                                <b>{format!("{} · {}", item.server_label, item.title)}</b>
                                {item
                                    .fields
                                    .iter()
                                    .enumerate()
                                    .map(|(i, (name, required))| {
                                        let label = if *required { format!("{name} (required)") } else { name.clone() };
                                        view! {
                                            <label>
                                                {label}
                                                <input
                                                    name=format!("blank-{name}")
                                                    on:input=move |ev| {
                                                        let value = event_target_value(&ev);
                                                        values.update(|v| {
                                                            if let Some(slot) = v.get_mut(i) {
                                                                slot.1 = value;
                                                            }
                                                        });
                                                    }
                                                />
                                            </label>
                                        }
                                    })
                                    .collect_view()}
                                <div class="row">
                                    <button class="primary attach-add" type="button" on:click=add_filled>
                                        "Attach"
                                    </button>
                                    <button type="button" on:click=move |_| filling.set(None)>
                                        "Cancel"
                                    </button>
                                </div>
                            </div>
                        }
                    })
            }}
            <ul class="chips">
                {move || {
                    chosen
                        .get()
                        .into_iter()
                        .enumerate()
                        .map(|(i, c)| {
                            view! {
                                <li class="chip">
                                    {c.label()}
                                    <button
                                        class="chip-remove"
                                        type="button"
                                        title="Remove"
                                        on:click=move |_| {
                                            chosen.update(|all| {
                                                if i < all.len() {
                                                    all.remove(i);
                                                }
                                            })
                                        }
                                    >
                                        "×"
                                    </button>
                                </li>
                            }
                        })
                        .collect_view()
                }}
            </ul>
        </div>
    }
}
