//! Review before consent: a server's tool list as the person sees it before it joins their
//! tools, when adding a server and when "Update tools" finds tools added or changed.
//!
//! A tool's annotations are shown as what they are, the server's own claims: "read-only" is what
//! the server says, not something Llooma checked, and a claim left out is "unknown".

use leptos::either::Either;
use leptos::prelude::*;
use llooma_types::{ADD_SERVERS_REFUSED, McpGroupView, McpTestReport, McpToolView, ToolHints};
use serde_json::{Value, json};

use crate::api;
use crate::forms::input_value;

/// What a server says about one property of a tool.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Claim {
    Yes,
    No,
    Unknown,
}

impl Claim {
    fn of(annotations: Option<&Value>, key: &str) -> Claim {
        match annotations.and_then(|a| a.get(key)).and_then(Value::as_bool) {
            Some(true) => Claim::Yes,
            Some(false) => Claim::No,
            None => Claim::Unknown,
        }
    }

    fn word(self) -> &'static str {
        match self {
            Claim::Yes => "yes",
            Claim::No => "no",
            Claim::Unknown => "unknown",
        }
    }
}

/// The four claims a review shows: (what, css class, claim).
pub fn claims(annotations: Option<&Value>) -> [(&'static str, &'static str, Claim); 4] {
    [
        ("read-only", "read-only", Claim::of(annotations, "readOnlyHint")),
        ("destructive", "destructive", Claim::of(annotations, "destructiveHint")),
        ("repeatable", "idempotent", Claim::of(annotations, "idempotentHint")),
        ("open world", "open-world", Claim::of(annotations, "openWorldHint")),
    ]
}

/// What a server says of a tool, in a person's words, for an approval card: (css class,
/// sentence). Only what the server said; a tool that says it only reads is not also said to
/// delete.
pub fn said_of_tool(hints: &ToolHints) -> Vec<(&'static str, &'static str)> {
    let mut said = Vec::new();
    match (hints.read_only, hints.destructive) {
        (Some(true), _) => said.push(("read-only", "It says it only reads: it changes nothing.")),
        (_, Some(true)) => {
            said.push(("destructive", "It says it may delete or overwrite things."));
        }
        (_, Some(false)) => said.push(("additive", "It says it only adds: it deletes nothing.")),
        _ => {}
    }
    if hints.idempotent == Some(true) && hints.read_only != Some(true) {
        said.push(("idempotent", "It says running it twice does no more than running it once."));
    }
    match hints.open_world {
        Some(true) => said.push((
            "open-world",
            "It says it reaches beyond its server: the web, other services or people.",
        )),
        Some(false) => said.push(("closed-world", "It says it stays within its own server.")),
        None => {}
    }
    said
}

/// One argument of a tool, from its input schema.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Argument {
    pub name: String,
    /// The JSON type as the schema says it ("any" when it does not).
    pub kind: String,
    pub required: bool,
    pub description: String,
}

/// The arguments a tool takes, required ones first, each group in the schema's order.
pub fn arguments(schema: &Value) -> Vec<Argument> {
    let required: Vec<&str> = schema["required"]
        .as_array()
        .map(|r| r.iter().filter_map(Value::as_str).collect())
        .unwrap_or_default();
    let mut found: Vec<Argument> = schema["properties"]
        .as_object()
        .map(|properties| {
            properties
                .iter()
                .map(|(name, property)| Argument {
                    name: name.clone(),
                    kind: match &property["type"] {
                        Value::String(kind) => kind.clone(),
                        Value::Array(kinds) => {
                            kinds.iter().filter_map(Value::as_str).collect::<Vec<_>>().join(" or ")
                        }
                        _ if property["enum"].is_array() => "one of a list".to_owned(),
                        _ => "any".to_owned(),
                    },
                    required: required.contains(&name.as_str()),
                    description: property["description"].as_str().unwrap_or_default().to_owned(),
                })
                .collect()
        })
        .unwrap_or_default();
    found.sort_by_key(|a| !a.required);
    found
}

/// One line on the whole list: how many tools say what.
pub fn summary(tools: &[McpToolView]) -> String {
    let count = |key: &str, want: Claim| {
        tools.iter().filter(|t| Claim::of(t.annotations.as_ref(), key) == want).count()
    };
    let read_only = count("readOnlyHint", Claim::Yes);
    let destructive = count("destructiveHint", Claim::Yes);
    let silent = tools.iter().filter(|t| t.annotations.is_none()).count();
    format!(
        "{} tools. By the server's own account: {read_only} only read, {destructive} may destroy \
         or overwrite something, {silent} say nothing about themselves. Every call is still put \
         to you first.",
        tools.len()
    )
}

/// The tool list, grouped as the settings will group it. `highlight` names tools that are new or
/// changed since the list in use.
#[component]
pub fn ToolReview(
    tools: Vec<McpToolView>,
    groups: Vec<McpGroupView>,
    #[prop(optional)] highlight: Vec<String>,
) -> impl IntoView {
    let line = summary(&tools);
    let sections = groups
        .into_iter()
        .map(|group| {
            let title = if group.key.is_empty() {
                "(other tools)".to_owned()
            } else {
                format!("Group {}", group.key)
            };
            let items = tools
                .iter()
                .filter(|t| t.group == group.key && !t.view_only)
                .map(|tool| review_item(tool, &highlight))
                .collect_view();
            view! {
                <section class="review-group">
                    <h4>{format!("{title} ({} tools)", group.tool_count)}</h4>
                    <ul class="review-tools">{items}</ul>
                </section>
            }
        })
        .collect_view();
    // Tools the model is never offered: only their view calls them, each call through a card.
    let view_only: Vec<&McpToolView> = tools.iter().filter(|t| t.view_only).collect();
    let view_only_section = (!view_only.is_empty()).then(|| {
        let count = view_only.len();
        let items = view_only.into_iter().map(|tool| review_item(tool, &highlight)).collect_view();
        view! {
            <section class="review-group view-only">
                <h4>{format!("Called only from a view ({count} tools)")}</h4>
                <ul class="review-tools">{items}</ul>
            </section>
        }
    });
    view! {
        <div class="review">
            <p class="review-summary">{line}</p>
            {sections}
            {view_only_section}
        </div>
    }
}

/// One tool in the review: its name, what it says it does and claims, and its arguments.
fn review_item(tool: &McpToolView, highlight: &[String]) -> impl IntoView + use<> {
    let marked = highlight.contains(&tool.name);
    let claims = claims(tool.annotations.as_ref())
        .into_iter()
        .map(|(what, class, claim)| {
            view! {
                <span class=format!("claim {class} {}", claim.word())>
                    {format!("{what}: {}", claim.word())}
                </span>
            }
        })
        .collect_view();
    let arguments = arguments(&tool.input_schema);
    let no_arguments = arguments.is_empty();
    let arguments = arguments
        .into_iter()
        .map(|a| {
            view! {
                <li>
                    <code>{a.name}</code>
                    {format!(
                        " {}{}",
                        a.kind,
                        if a.required { ", required" } else { ", optional" },
                    )}
                    {(!a.description.is_empty()).then(|| format!(" — {}", a.description))}
                </li>
            }
        })
        .collect_view();
    // A view-only tool has no model-facing name: it is shown by the server's.
    let name = if tool.view_only { tool.name.clone() } else { tool.model_name.clone() };
    view! {
        <li class="review-tool" data-tool=tool.name.clone()>
            <code class="model-name">{name}</code>
            {marked.then(|| view! { <span class="badge">"new or changed"</span> })}
            {tool
                .view
                .then(|| {
                    view! {
                        <span
                            class="badge view-badge"
                            title="The server shows this tool's result in an interactive view, \
                                   sandboxed in the conversation; every call it makes goes through your consent."
                        >
                            "has a view"
                        </span>
                    }
                })}
            <p class="description">
                {tool
                    .description
                    .clone()
                    .unwrap_or_else(|| "The server gives no description.".to_owned())}
            </p>
            <p class="claims">"The server says: " {claims}</p>
            {if no_arguments {
                Either::Left(view! { <p class="hint">"No arguments."</p> })
            } else {
                Either::Right(view! { <ul class="arguments">{arguments}</ul> })
            }}
        </li>
    }
}

/// Add a server: test it, review what it offers, then consent. Used on Settings → Tools and on
/// the registration page (pre-filled from the catalogue or a deeplink). Nothing is stored until
/// "Consent and add", and that stores only the tool list the person saw.
#[component]
pub fn AddServerForm(
    csrf: String,
    #[prop(optional)] label: String,
    #[prop(optional)] address: String,
    can_add: bool,
    token_help: Option<String>,
) -> impl IntoView {
    if !can_add {
        return Either::Left(view! {
            <div class="add-server">
                <p class="refusal" role="alert">{ADD_SERVERS_REFUSED}</p>
                {(!address.is_empty())
                    .then(|| view! { <p class="address">{format!("Address: {address}")}</p> })}
            </div>
        });
    }
    let error = RwSignal::new(None::<String>);
    let report = RwSignal::new(None::<McpTestReport>);
    let busy = RwSignal::new(false);
    let label_field = NodeRef::<leptos::html::Input>::new();
    let address_field = NodeRef::<leptos::html::Input>::new();
    let token_field = NodeRef::<leptos::html::Input>::new();
    let form = move || {
        let mut body =
            json!({"label": input_value(label_field), "address": input_value(address_field)});
        let token = input_value(token_field);
        if !token.is_empty() {
            body["token"] = json!(token);
        }
        body
    };
    // What was reviewed is for these exact fields: any edit asks for a new test.
    let edited = move |_| report.set(None);
    let test = {
        let csrf = csrf.clone();
        move |ev: leptos::ev::SubmitEvent| {
            ev.prevent_default();
            let csrf = csrf.clone();
            report.set(None);
            error.set(None);
            busy.set(true);
            api::spawn(async move {
                match api::call("POST", "/api/v1/mcp/servers/test", Some(form()), Some(&csrf)).await
                {
                    Ok(found) => match serde_json::from_value::<McpTestReport>(found) {
                        Ok(found) => report.set(Some(found)),
                        Err(e) => error.set(Some(format!("Unexpected answer: {e}"))),
                    },
                    Err(failure) => error.set(Some(failure.message)),
                }
                busy.set(false);
            });
        }
    };
    let consent = move |_| {
        let Some(reviewed) = report.get_untracked() else { return };
        let mut body = form();
        body["reviewedTools"] = json!(reviewed.tools_digest);
        let csrf = csrf.clone();
        busy.set(true);
        api::spawn(async move {
            match api::call("POST", "/api/v1/mcp/servers", Some(body), Some(&csrf)).await {
                Ok(_) => api::go("/settings/tools"),
                Err(failure) => {
                    report.set(None);
                    error.set(Some(failure.message));
                }
            }
            busy.set(false);
        });
    };
    Either::Right(view! {
        <div class="add-server">
            <form class="stack" on:submit=test>
                <label>
                    "Label"
                    <input node_ref=label_field name="label" placeholder="Home" value=label on:input=edited />
                </label>
                <label>
                    "Address"
                    <input
                        node_ref=address_field
                        name="address"
                        placeholder="https://mcp.example.org/mcp"
                        required
                        value=address
                        on:input=edited
                    />
                </label>
                <label>
                    "Token (optional; never shown again)"
                    <input
                        node_ref=token_field
                        name="token"
                        type="password"
                        autocomplete="off"
                        on:input=edited
                    />
                </label>
                {token_help.map(|help| view! { <p class="hint token-help">{help}</p> })}
                <div class="row">
                    <button class="test primary" type="submit" disabled=move || busy.get()>
                        "Test and review tools"
                    </button>
                </div>
            </form>
            <p class="error" role="alert">{move || error.get()}</p>
            {move || {
                report
                    .get()
                    .map(|found| {
                        let name = found
                            .server_name
                            .clone()
                            .unwrap_or_else(|| "The server".to_owned());
                        view! {
                            <div class="test-result">
                                <h3>{format!("{name} offers {} tools", found.tools.len())}</h3>
                                {found
                                    .instructions
                                    .clone()
                                    .map(|text| {
                                        view! {
                                            <details class="instructions">
                                                <summary>
                                                    "The server's instructions (given to the model as reference, never as orders)"
                                                </summary>
                                                <p>{text}</p>
                                            </details>
                                        }
                                    })}
                                <ul class="notes">
                                    {found.notes.iter().map(|n| view! { <li>{n.clone()}</li> }).collect_view()}
                                </ul>
                                <ToolReview tools=found.tools.clone() groups=found.groups.clone() />
                                <div class="row">
                                    <button
                                        class="consent primary"
                                        type="button"
                                        disabled=move || busy.get()
                                        on:click=consent.clone()
                                    >
                                        "Consent and add"
                                    </button>
                                    <button class="cancel" type="button" on:click=move |_| report.set(None)>
                                        "Cancel"
                                    </button>
                                </div>
                            </div>
                        }
                    })
            }}
        </div>
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn missing_claims_are_unknown_not_safe() {
        let said = json!({"readOnlyHint": true, "destructiveHint": false});
        let claims = claims(Some(&said));
        assert_eq!(claims[0].2, Claim::Yes);
        assert_eq!(claims[1].2, Claim::No);
        assert_eq!(claims[2].2, Claim::Unknown);
        assert_eq!(claims[3].2, Claim::Unknown);
        assert!(super::claims(None).iter().all(|c| c.2 == Claim::Unknown));
    }

    #[test]
    fn a_card_says_only_what_the_server_said_in_words() {
        let hints = |read_only, destructive, idempotent, open_world| ToolHints {
            title: None,
            read_only,
            destructive,
            idempotent,
            open_world,
        };
        let classes = |h: ToolHints| said_of_tool(&h).into_iter().map(|s| s.0).collect::<Vec<_>>();
        assert!(classes(hints(None, None, None, None)).is_empty());
        // A read-only tool is not also said to delete (the protocol's default for
        // destructiveHint is true, which means nothing for a tool that only reads).
        assert_eq!(classes(hints(Some(true), Some(true), Some(true), None)), ["read-only"]);
        assert_eq!(
            classes(hints(Some(false), Some(true), Some(true), Some(true))),
            ["destructive", "idempotent", "open-world"]
        );
        assert_eq!(
            classes(hints(None, Some(false), None, Some(false))),
            ["additive", "closed-world"]
        );
        let said = said_of_tool(&hints(None, Some(true), None, None));
        assert_eq!(said[0].1, "It says it may delete or overwrite things.");
    }

    #[test]
    fn arguments_list_required_first_with_their_types() {
        let schema = json!({
            "type": "object",
            "properties": {
                "note": {"type": "string", "description": "Shown to no one"},
                "a": {"type": "number"},
                "mode": {"enum": ["x", "y"]},
                "either": {"type": ["string", "null"]}
            },
            "required": ["a"]
        });
        let found = arguments(&schema);
        assert_eq!(found[0].name, "a");
        assert!(found[0].required);
        let kinds: Vec<(&str, &str)> =
            found.iter().map(|a| (a.name.as_str(), a.kind.as_str())).collect();
        assert!(kinds.contains(&("mode", "one of a list")), "{kinds:?}");
        assert!(kinds.contains(&("either", "string or null")), "{kinds:?}");
        assert!(arguments(&json!({"type": "object"})).is_empty());
    }
}
