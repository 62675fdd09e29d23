//! Settings → Bot integrations: each Chatto bot of the account as a card with its state, and
//! every setting of it. A change is sent to the API and the page is reloaded from the server.

use leptos::prelude::*;
use llooma_types::{BOT_MCP_WARNING, BOT_TICKABLE_TOOLS, BotCardView, PersonaView, ProviderChoice};
use serde_json::json;

use crate::api;
use crate::forms::{RemoveAfterAsking, change, input_value};
use crate::layout::TopBar;
use crate::model::Me;

const HERE: &str = "/settings/bots";

fn tool_title(tool: &str) -> &'static str {
    match tool {
        "web_search" => "Web search",
        "read_page" => "Page reading",
        "current_date" => "Current date",
        "reasoning" => "Reasoning",
        _ => "Other",
    }
}

#[component]
pub fn SettingsBots(
    me: Me,
    bots: Vec<BotCardView>,
    providers: Vec<ProviderChoice>,
    personas: Vec<PersonaView>,
) -> impl IntoView {
    let csrf = me.csrf_token.clone();
    let error = RwSignal::new(None::<String>);
    let found = RwSignal::new(None::<String>);
    let label = NodeRef::<leptos::html::Input>::new();
    let address = NodeRef::<leptos::html::Input>::new();
    let key = NodeRef::<leptos::html::Input>::new();
    let test = {
        let csrf = csrf.clone();
        move |_| {
            let csrf = csrf.clone();
            found.set(None);
            error.set(None);
            let body = json!({"address": input_value(address), "apiKey": input_value(key)});
            api::spawn(async move {
                match api::call("POST", "/api/v1/bots/test", Some(body), Some(&csrf)).await {
                    Ok(answer) => found.set(Some(format!(
                        "Connected as {} (@{}), a bot account.",
                        answer["bot"]["displayName"].as_str().unwrap_or("?"),
                        answer["bot"]["login"].as_str().unwrap_or("?"),
                    ))),
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
            let mut body = json!({"address": input_value(address), "apiKey": input_value(key)});
            let label = input_value(label);
            if !label.trim().is_empty() {
                body["label"] = json!(label);
            }
            change("POST", "/api/v1/bots".into(), body, csrf.clone(), error, HERE);
        }
    };
    let empty = bots.is_empty();
    view! {
        <div class="page">
            <TopBar me=me.clone() />
            <main class="narrow settings">
                <h1>"Settings → Bot integrations"</h1>
                <p class="hint">
                    "A bot answers in your Chatto rooms with your model. See the Bots page of the documentation for setting up its account."
                </p>
                <p class="error" role="alert">{move || error.get()}</p>
                <section class="card">
                    <h2>"Add a bot"</h2>
                    <form class="stack add-bot" on:submit=add>
                        <label>"Label" <input node_ref=label name="label" placeholder="Helper" /></label>
                        <label>
                            "Chat server address"
                            <input
                                node_ref=address
                                name="address"
                                placeholder="https://chat.example.org"
                                required
                            />
                        </label>
                        <label>
                            "The bot's API key (never shown again)"
                            <input
                                node_ref=key
                                name="key"
                                type="password"
                                autocomplete="off"
                                required
                            />
                        </label>
                        <div class="row">
                            <button class="test" type="button" on:click=test>"Test"</button>
                            <button class="primary add" type="submit">"Add"</button>
                        </div>
                    </form>
                    <p class="test-result">{move || found.get()}</p>
                </section>
                <h2>"Your bots"</h2>
                {empty.then(|| view! { <p class="hint">"None yet."</p> })}
                {bots
                    .into_iter()
                    .map(|bot| {
                        view! {
                            <BotCard
                                bot
                                providers=providers.clone()
                                personas=personas.clone()
                                csrf=csrf.clone()
                                error
                            />
                        }
                    })
                    .collect_view()}
            </main>
        </div>
    }
}

#[component]
fn BotCard(
    bot: BotCardView,
    providers: Vec<ProviderChoice>,
    personas: Vec<PersonaView>,
    csrf: String,
    error: RwSignal<Option<String>>,
) -> impl IntoView {
    let path = format!("/api/v1/bots/{}", bot.id);
    let provider_id = RwSignal::new(bot.provider_id.clone().unwrap_or_default());
    let model = RwSignal::new(bot.model.clone().unwrap_or_default());
    let context_mode = RwSignal::new(bot.context.mode.clone());
    let context_count = RwSignal::new(bot.context.count.unwrap_or(6).to_string());
    let placement = RwSignal::new(bot.placement.clone());
    let identity = RwSignal::new(bot.identity.source.clone());
    let persona_id = RwSignal::new(bot.identity.persona_id.clone().unwrap_or_default());
    let instructions = RwSignal::new(bot.identity.instructions.clone().unwrap_or_default());
    let tools = RwSignal::new(bot.tools.ticked.clone());
    let mcp = RwSignal::new(bot.mcp);
    let save = {
        let (csrf, path) = (csrf.clone(), path.clone());
        move |_| {
            error.set(None);
            let provider = provider_id.get_untracked();
            let model = model.get_untracked();
            let mode = context_mode.get_untracked();
            let mut context = json!({"mode": mode});
            if mode == "messages_before" {
                context["count"] =
                    json!(context_count.get_untracked().trim().parse::<i64>().unwrap_or(6));
            }
            let source = identity.get_untracked();
            let mut who = json!({"source": source});
            match source.as_str() {
                "persona" => who["personaId"] = json!(persona_id.get_untracked()),
                "instructions" => who["instructions"] = json!(instructions.get_untracked()),
                _ => {}
            }
            let body = json!({
                "providerId": (!provider.is_empty()).then_some(provider),
                "model": (!model.trim().is_empty()).then_some(model),
                "context": context,
                "placement": placement.get_untracked(),
                "identity": who,
                "tools": tools.get_untracked(),
                "mcp": mcp.get_untracked(),
            });
            change("PATCH", path.clone(), body, csrf.clone(), error, HERE);
        }
    };
    let toggle = {
        let (csrf, path) = (csrf.clone(), path.clone());
        move |ev| {
            let body = json!({"enabled": event_target_checked(&ev)});
            change("PATCH", path.clone(), body, csrf.clone(), error, HERE);
        }
    };
    let remove = Callback::new(move |()| {
        change("DELETE", path.clone(), json!({}), csrf.clone(), error, HERE)
    });
    let option = |value: &'static str, text: &'static str, current: RwSignal<String>| {
        view! { <option value=value selected=current.get_untracked() == value>{text}</option> }
    };
    let unavailable = bot.tools.unavailable.clone();
    view! {
        <article class="card bot" data-bot=bot.id.clone() data-state=bot.state.clone()>
            <header class="row">
                <b class="label">{bot.label.clone()}</b>
                <span class=format!("status {}", bot.state)>{bot.state.replace('_', " ")}</span>
            </header>
            <p class="status-line">{bot.status.clone()}</p>
            <p class="meta">
                {format!("{} (@{}) on {}", bot.bot.display_name, bot.bot.login, bot.address)}
            </p>
            {bot
                .missing_permission
                .clone()
                .map(|p| {
                    view! {
                        <p class="warning missing-permission">
                            {format!("The bot account lacks the permission {p}: grant it in the chat server.")}
                        </p>
                    }
                })}
            {bot.last_error.clone().map(|e| view! { <p class="warning last-error">{e}</p> })}
            <label class="switch">
                <input type="checkbox" name="enabled" checked=bot.enabled on:change=toggle />
                "On"
            </label>
            <div class="stack bot-settings">
                <label>
                    "Model"
                    <span class="row">
                        <select name="provider" on:change=move |ev| provider_id.set(event_target_value(&ev))>
                            <option value="" selected=provider_id.get_untracked().is_empty()>
                                "Provider…"
                            </option>
                            {providers
                                .into_iter()
                                .map(|p| {
                                    let selected = p.id == provider_id.get_untracked();
                                    view! { <option value=p.id.clone() selected=selected>{p.name}</option> }
                                })
                                .collect_view()}
                        </select>
                        <input
                            class="model"
                            name="model"
                            placeholder="model"
                            value=model.get_untracked()
                            on:change=move |ev| model.set(event_target_value(&ev))
                        />
                    </span>
                </label>
                <label>
                    "What the model is shown"
                    <span class="row">
                        <select name="context" on:change=move |ev| context_mode.set(event_target_value(&ev))>
                            {option("calling_message", "Only the calling message", context_mode)}
                            {option("messages_before", "The messages just before", context_mode)}
                            {option("whole_thread", "The whole thread", context_mode)}
                        </select>
                        <input
                            name="count"
                            type="number"
                            min="1"
                            max="40"
                            value=context_count.get_untracked()
                            hidden=move || context_mode.get() != "messages_before"
                            on:change=move |ev| context_count.set(event_target_value(&ev))
                        />
                    </span>
                </label>
                <label>
                    "Where the answer lands"
                    <select name="placement" on:change=move |ev| placement.set(event_target_value(&ev))>
                        {option("where_asked", "Where it was asked", placement)}
                        {option("always_thread", "Always in a thread", placement)}
                        {option("always_room", "Always in the room", placement)}
                    </select>
                </label>
                <label>
                    "Who the bot is"
                    <select name="identity" on:change=move |ev| identity.set(event_target_value(&ev))>
                        {option("system_prompt", "The usual system prompt", identity)}
                        {option("persona", "A persona", identity)}
                        {option("instructions", "Instructions for this bot", identity)}
                    </select>
                </label>
                <select
                    name="persona"
                    hidden=move || identity.get() != "persona"
                    on:change=move |ev| persona_id.set(event_target_value(&ev))
                >
                    <option value="" selected=persona_id.get_untracked().is_empty()>"Persona…"</option>
                    {personas
                        .into_iter()
                        .map(|p| {
                            let selected = p.id == persona_id.get_untracked();
                            view! { <option value=p.id.clone() selected=selected>{p.name}</option> }
                        })
                        .collect_view()}
                </select>
                <textarea
                    name="instructions"
                    rows="3"
                    hidden=move || identity.get() != "instructions"
                    prop:value=instructions.get_untracked()
                    on:change=move |ev| instructions.set(event_target_value(&ev))
                ></textarea>
                <fieldset class="tools">
                    <legend>"Tools"</legend>
                    {BOT_TICKABLE_TOOLS
                        .into_iter()
                        .map(|tool| {
                            let off_here = unavailable.iter().any(|t| t == tool);
                            view! {
                                <label class="switch">
                                    <input
                                        type="checkbox"
                                        name=format!("tool-{tool}")
                                        checked=tools.get_untracked().iter().any(|t| t == tool)
                                        on:change=move |ev| {
                                            let on = event_target_checked(&ev);
                                            tools.update(|ticked| {
                                                ticked.retain(|t| t != tool);
                                                if on {
                                                    ticked.push(tool.to_owned());
                                                }
                                            });
                                        }
                                    />
                                    {tool_title(tool)}
                                    {off_here.then(|| view! { <span class="hint">" (not provided here: stays off)"</span> })}
                                </label>
                            }
                        })
                        .collect_view()}
                    <label class="switch">
                        <input
                            type="checkbox"
                            name="mcp"
                            checked=bot.mcp
                            on:change=move |ev| mcp.set(event_target_checked(&ev))
                        />
                        "My MCP tools"
                    </label>
                    <p class="warning mcp-warning" hidden=move || !mcp.get()>
                        {BOT_MCP_WARNING}
                    </p>
                </fieldset>
            </div>
            <div class="row">
                <button class="primary save" type="button" on:click=save>"Save"</button>
                <RemoveAfterAsking
                    question="Remove this bot? It stops answering in its rooms."
                    remove
                />
            </div>
        </article>
    }
}
