//! Admin → Providers and instance: the model providers (address, key, declared models) and the
//! instance's settings (registration, web search, default model, default system prompt). A change is sent to
//! the API and the page is reloaded from the server.

use leptos::prelude::*;
use llooma_types::{AdminMcpServerView, InstanceSettingsView, ProviderView};
use serde_json::{Value, json};

use crate::forms::{RemoveAfterAsking, change, input_value};
use crate::layout::{AdminNav, TopBar};
use crate::model::Me;
use crate::model_choices::{ModelChoices, ModelDatalist};

const HERE: &str = "/admin/instance";

/// Model names typed as a comma-separated list.
fn model_list(text: &str) -> Vec<String> {
    text.split(',').map(str::trim).filter(|m| !m.is_empty()).map(str::to_owned).collect()
}

/// Context windows typed as `model = tokens, …`; the first entry that is not is named.
fn window_list(text: &str) -> Result<serde_json::Map<String, Value>, String> {
    let mut windows = serde_json::Map::new();
    for entry in text.split(',').map(str::trim).filter(|e| !e.is_empty()) {
        let parsed = entry.rsplit_once('=').and_then(|(model, tokens)| {
            let tokens = tokens.trim().replace(['_', ' '], "").parse::<u32>().ok()?;
            Some((model.trim().to_owned(), tokens))
        });
        match parsed {
            Some((model, tokens)) if !model.is_empty() => {
                windows.insert(model, json!(tokens));
            }
            _ => {
                return Err(format!(
                    "\"{entry}\" is not a model and its window: write them as model = tokens, \
                     such as llama3.1:8b = 131072."
                ));
            }
        }
    }
    Ok(windows)
}

/// One thing an administrator should look at, most pressing first.
#[derive(Clone, Debug, PartialEq, Eq)]
pub(crate) struct Todo {
    /// `needed` (nobody can chat without it), `advised` or `note`.
    pub weight: &'static str,
    pub title: &'static str,
    pub detail: String,
    pub href: &'static str,
    pub action: &'static str,
}

/// What needs doing on this instance, most pressing first: without a provider nobody can chat;
/// without a default model every new conversation waits for a choice; then what is worth a look.
pub(crate) fn needs_doing(
    providers: &[ProviderView],
    settings: &InstanceSettingsView,
    servers: &[AdminMcpServerView],
) -> Vec<Todo> {
    let mut todo = Vec::new();
    if providers.is_empty() {
        todo.push(Todo {
            weight: "needed",
            title: "Add a model provider",
            detail: "Nobody can chat until this instance has one: OpenAI, OpenRouter, or an Ollama, llama.cpp, vLLM or LM Studio on this machine.".to_owned(),
            href: "/admin/instance",
            action: "Add a provider",
        });
    } else if settings.default_model.is_none() {
        todo.push(Todo {
            weight: "advised",
            title: "Choose a default model",
            detail: "A person's first conversation starts without a model until they pick one; with a default, their first message just works.".to_owned(),
            href: "/admin/instance",
            action: "Choose it",
        });
    }
    let suspended = servers.iter().filter(|s| s.server.suspended.is_some()).count();
    if suspended > 0 {
        todo.push(Todo {
            weight: "note",
            title: "Suspended MCP servers",
            detail: format!(
                "{suspended} server{} suspended: lift or remove {}.",
                if suspended == 1 { " is" } else { "s are" },
                if suspended == 1 { "it" } else { "them" },
            ),
            href: "/admin/mcp",
            action: "Review servers",
        });
    }
    if settings.registration_open {
        todo.push(Todo {
            weight: "note",
            title: "Registration is open",
            detail: "Anyone who reaches this instance can create an account. Close it once everyone is in.".to_owned(),
            href: "/admin/instance",
            action: "Review",
        });
    }
    if settings.web_search_url.is_none() && !providers.is_empty() {
        todo.push(Todo {
            weight: "note",
            title: "No web search",
            detail: "Models cannot search the web until a SearXNG address is set.".to_owned(),
            href: "/admin/instance",
            action: "Set it",
        });
    }
    todo
}

/// Admin's first page: what needs doing, then the sections.
#[component]
pub fn AdminHome(
    me: Me,
    providers: Vec<ProviderView>,
    settings: InstanceSettingsView,
    servers: Vec<AdminMcpServerView>,
) -> impl IntoView {
    let todo = needs_doing(&providers, &settings, &servers);
    let nothing = todo.is_empty();
    view! {
        <div class="page">
            <TopBar me=me.clone() />
            <main class="narrow settings">
                <h1>"Admin"</h1>
                <AdminNav />
                <h2>"What needs doing"</h2>
                {nothing.then(|| view! { <p class="hint nothing-to-do">"Nothing: this instance is ready."</p> })}
                <ul class="todo">
                    {todo
                        .into_iter()
                        .map(|t| {
                            view! {
                                <li class=format!("card todo-item {}", t.weight)>
                                    <b class="title">{t.title}</b>
                                    <p>{t.detail}</p>
                                    <a
                                        class=if t.weight == "needed" { "button primary" } else { "button" }
                                        href=t.href
                                    >
                                        {t.action}
                                    </a>
                                </li>
                            }
                        })
                        .collect_view()}
                </ul>
                <h2>"Sections"</h2>
                <ul class="sections">
                    <li>
                        <a href="/admin/instance">"Providers and instance"</a>
                        {format!(
                            " — {} provider{}, registration {}, the default model and prompt.",
                            providers.len(),
                            if providers.len() == 1 { "" } else { "s" },
                            if settings.registration_open { "open" } else { "closed" },
                        )}
                    </li>
                    <li>
                        <a href="/admin/mcp">"MCP servers"</a>
                        {format!(
                            " — {} server{} of every account; who may add them; suspend or remove.",
                            servers.len(),
                            if servers.len() == 1 { "" } else { "s" },
                        )}
                    </li>
                    <li>
                        <a href="/admin/catalogue">"Catalogue"</a>
                        " — the servers offered to everyone under Settings → Tools → Discover."
                    </li>
                </ul>
            </main>
        </div>
    }
}

#[component]
pub fn AdminInstance(
    me: Me,
    providers: Vec<ProviderView>,
    settings: InstanceSettingsView,
    files: llooma_types::FileUsage,
    speech: llooma_types::AdminSpeechView,
) -> impl IntoView {
    let speech_providers = providers.clone();
    let csrf = me.csrf_token.clone();
    let error = RwSignal::new(None::<String>);
    let name = NodeRef::<leptos::html::Input>::new();
    let base_url = NodeRef::<leptos::html::Input>::new();
    let key = NodeRef::<leptos::html::Input>::new();
    let models = NodeRef::<leptos::html::Input>::new();
    let local_network = NodeRef::<leptos::html::Input>::new();
    let search = NodeRef::<leptos::html::Input>::new();
    let prompt = NodeRef::<leptos::html::Textarea>::new();
    let add = {
        let csrf = csrf.clone();
        move |ev: leptos::ev::SubmitEvent| {
            ev.prevent_default();
            error.set(None);
            let mut body = json!({
                "name": input_value(name),
                "baseUrl": input_value(base_url),
                "models": model_list(&input_value(models)),
                "localNetwork": local_network.get().is_some_and(|i| i.checked()),
            });
            let key = input_value(key);
            if !key.is_empty() {
                body["apiKey"] = json!(key);
            }
            change("POST", "/api/v1/admin/providers".into(), body, csrf.clone(), error, HERE);
        }
    };
    let settings_change = move |body: Value, csrf: String| {
        error.set(None);
        change("PATCH", "/api/v1/admin/settings".into(), body, csrf, error, HERE);
    };
    let registration = {
        let csrf = csrf.clone();
        move |ev| {
            settings_change(json!({"registrationOpen": event_target_checked(&ev)}), csrf.clone())
        }
    };
    let save_search = {
        let csrf = csrf.clone();
        move |_| settings_change(json!({"webSearchUrl": input_value(search)}), csrf.clone())
    };
    let save_prompt = {
        let csrf = csrf.clone();
        move |_| {
            let text = prompt.get().map(|t| t.value()).unwrap_or_default();
            settings_change(json!({"systemPrompt": text}), csrf.clone());
        }
    };
    let window = NodeRef::<leptos::html::Input>::new();
    let save_window = {
        let csrf = csrf.clone();
        move |_| match input_value(window).trim().replace(['_', ' ', ','], "").parse::<u32>() {
            Ok(tokens) => settings_change(json!({"contextTokens": tokens}), csrf.clone()),
            Err(_) => {
                error.set(Some("Write the window as a number of tokens, such as 8192.".into()))
            }
        }
    };
    // The default model: a provider and one of its models (listed once the field is focused).
    let default_provider = RwSignal::new(settings.default_provider_id.clone().unwrap_or_default());
    let default_model = NodeRef::<leptos::html::Input>::new();
    let choices = ModelChoices::new();
    let save_default_model = {
        let csrf = csrf.clone();
        move |_| {
            let provider = default_provider.get_untracked();
            let model =
                if provider.is_empty() { String::new() } else { input_value(default_model) };
            let body = json!({"defaultProviderId": provider, "defaultModel": model});
            settings_change(body, csrf.clone());
        }
    };
    let provider_options = providers
        .iter()
        .map(|p| {
            let selected = settings.default_provider_id.as_deref() == Some(p.id.as_str());
            view! { <option value=p.id.clone() selected=selected>{p.name.clone()}</option> }
        })
        .collect_view();
    let empty = providers.is_empty();
    view! {
        <div class="page">
            <TopBar me=me.clone() />
            <main class="narrow settings">
                <h1>"Admin → Providers and instance"</h1>
                <AdminNav />
                <p class="error" role="alert">{move || error.get()}</p>
                <h2>"Model providers"</h2>
                <p class="hint">
                    "Any service speaking the OpenAI chat completions API: OpenAI, Ollama, vLLM, llama.cpp, LM Studio, OpenRouter. Everyone on this instance chooses among them."
                </p>
                {empty
                    .then(|| {
                        view! {
                            <p class="hint no-providers">"None yet: nobody can chat until you add one."</p>
                        }
                    })}
                {providers
                    .into_iter()
                    .map(|provider| view! { <ProviderCard provider csrf=csrf.clone() error /> })
                    .collect_view()}
                <section class="card">
                    <h2>"Add a provider"</h2>
                    <form class="stack add-provider" on:submit=add>
                        <label>"Name" <input node_ref=name name="name" placeholder="Ollama" required /></label>
                        <label>
                            "Base address"
                            <input
                                node_ref=base_url
                                name="base-url"
                                placeholder="http://127.0.0.1:11434/v1"
                                required
                            />
                        </label>
                        <label>
                            "API key (optional; never shown again)"
                            <input node_ref=key name="key" type="password" autocomplete="off" />
                        </label>
                        <label>
                            "Models to offer besides those it lists (comma-separated)"
                            <input node_ref=models name="models" placeholder="llama3.1:8b" />
                        </label>
                        <label class="switch">
                            <input node_ref=local_network type="checkbox" name="local-network" />
                            "It runs on this machine or my local network (Ollama, llama.cpp, vLLM, LM Studio)"
                        </label>
                        <p class="hint">
                            "Ticked, Llooma may reach this provider's own address on this machine or a private network (never a cloud metadata address); nothing else is opened, for anyone."
                        </p>
                        <div class="row">
                            <button class="primary add" type="submit">"Add"</button>
                        </div>
                    </form>
                </section>
                <h2>"Instance"</h2>
                <section class="card stack">
                    <label class="switch">
                        <input
                            type="checkbox"
                            name="registration"
                            checked=settings.registration_open
                            on:change=registration
                        />
                        "Anyone who reaches this page may create an account"
                    </label>
                    <label>
                        "Web search service (SearXNG JSON address; empty: no web search)"
                        <span class="row">
                            <input
                                node_ref=search
                                name="web-search"
                                placeholder="http://127.0.0.1:8888"
                                value=settings.web_search_url.clone().unwrap_or_default()
                            />
                            <button class="save-search" type="button" on:click=save_search>
                                "Save"
                            </button>
                        </span>
                    </label>
                    <label>
                        "Default model of a new conversation (until its person has used one)"
                        <span class="row">
                            <select
                                name="default-provider"
                                title="Provider"
                                on:change=move |ev| {
                                    default_provider.set(event_target_value(&ev));
                                    choices.load();
                                }
                            >
                                <option value="" selected=settings.default_provider_id.is_none()>
                                    "None"
                                </option>
                                {provider_options}
                            </select>
                            <input
                                node_ref=default_model
                                name="default-model"
                                placeholder="model"
                                list="default-model-choices"
                                autocomplete="off"
                                value=settings.default_model.clone().unwrap_or_default()
                                on:focus=move |_| choices.load()
                            />
                            <ModelDatalist
                                id="default-model-choices"
                                choices
                                provider=default_provider
                            />
                            <button
                                class="save-default-model"
                                type="button"
                                on:click=save_default_model
                            >
                                "Save"
                            </button>
                        </span>
                    </label>
                    <label>
                        "Context window of a model that has none written or reported (tokens)"
                        <span class="row">
                            <input
                                node_ref=window
                                name="context-tokens"
                                inputmode="numeric"
                                value=settings.context_tokens.to_string()
                            />
                            <button class="save-context" type="button" on:click=save_window>
                                "Save"
                            </button>
                        </span>
                    </label>
                    <label>
                        "Default system prompt (empty: the built-in one)"
                        <textarea
                            node_ref=prompt
                            name="system-prompt"
                            rows="5"
                            prop:value=settings.system_prompt.clone().unwrap_or_default()
                        ></textarea>
                    </label>
                    <div class="row">
                        <button class="save-prompt" type="button" on:click=save_prompt>
                            "Save the prompt"
                        </button>
                    </div>
                </section>
                <SpeechSettings speech providers=speech_providers csrf=csrf.clone() error />
                <FileUsageTable usage=files />
            </main>
        </div>
    }
}

#[component]
fn ProviderCard(
    provider: ProviderView,
    csrf: String,
    error: RwSignal<Option<String>>,
) -> impl IntoView {
    let path = format!("/api/v1/admin/providers/{}", provider.id);
    let models = NodeRef::<leptos::html::Input>::new();
    let save_models = {
        let (csrf, path) = (csrf.clone(), path.clone());
        move |_| {
            error.set(None);
            let body = json!({"models": model_list(&input_value(models))});
            change("PUT", format!("{path}/models"), body, csrf.clone(), error, HERE);
        }
    };
    let vision = NodeRef::<leptos::html::Input>::new();
    let save_vision = {
        let (csrf, path) = (csrf.clone(), path.clone());
        move |_| {
            error.set(None);
            let body = json!({"models": model_list(&input_value(vision))});
            change("PUT", format!("{path}/vision-models"), body, csrf.clone(), error, HERE);
        }
    };
    let windows = NodeRef::<leptos::html::Input>::new();
    let save_windows = {
        let (csrf, path) = (csrf.clone(), path.clone());
        move |_| {
            error.set(None);
            match window_list(&input_value(windows)) {
                Ok(list) => {
                    let body = json!({"windows": list});
                    change(
                        "PUT",
                        format!("{path}/context-windows"),
                        body,
                        csrf.clone(),
                        error,
                        HERE,
                    );
                }
                Err(said) => error.set(Some(said)),
            }
        }
    };
    let written = provider
        .context_windows
        .iter()
        .map(|(model, tokens)| format!("{model} = {tokens}"))
        .collect::<Vec<_>>()
        .join(", ");
    let remove = Callback::new(move |()| {
        change("DELETE", path.clone(), json!({}), csrf.clone(), error, HERE)
    });
    view! {
        <article class="card provider" data-provider=provider.name.clone()>
            <header class="row">
                <b class="label">{provider.name.clone()}</b>
                <span class="meta">{if provider.has_key { "key set" } else { "no key" }}</span>
                {provider
                    .local_network
                    .then(|| view! { <span class="status local">"this machine or local network"</span> })}
            </header>
            <p class="address">{provider.base_url.clone()}</p>
            <label class="stack">
                "Models that see images (comma-separated): a person's photos are sent to these only"
                <span class="row">
                    <input
                        node_ref=vision
                        name="vision-models"
                        value=provider.vision_models.join(", ")
                    />
                    <button class="save-vision" type="button" on:click=save_vision>
                        "Save"
                    </button>
                </span>
            </label>
            <label class="stack">
                "Context windows in tokens (model = tokens, comma-separated); a model not written \
                 here has what its server says (Ollama), else the instance's default"
                <span class="row">
                    <input
                        node_ref=windows
                        name="context-windows"
                        placeholder="llama3.1:8b = 131072"
                        value=written
                    />
                    <button class="save-windows" type="button" on:click=save_windows>
                        "Save"
                    </button>
                </span>
            </label>
            <label class="stack">
                "Declared models (comma-separated)"
                <span class="row">
                    <input
                        node_ref=models
                        name="models"
                        value=provider.declared_models.join(", ")
                    />
                    <button class="save-models" type="button" on:click=save_models>
                        "Save"
                    </button>
                </span>
            </label>
            <div class="row">
                <RemoveAfterAsking
                    question="Remove this provider? Conversations using it stop until they choose another."
                    remove
                />
            </div>
        </article>
    }
}

/// What each account's photos and documents take, the largest first, and the limits.
#[component]
fn FileUsageTable(usage: llooma_types::FileUsage) -> impl IntoView {
    use crate::files::human_size;
    let rows = usage
        .accounts
        .iter()
        .filter(|a| a.files > 0)
        .map(|a| {
            view! {
                <tr>
                    <td>{a.username.clone()}</td>
                    <td class="num">{a.files}</td>
                    <td class="num">{human_size(a.bytes)}</td>
                </tr>
            }
        })
        .collect_view();
    let nobody = usage.accounts.iter().all(|a| a.files == 0);
    view! {
        <section class="card file-usage">
            <h2>"Files"</h2>
            <p class="hint">
                {format!(
                    "At most {} per upload and {} per account (LLOOMA_MAX_UPLOAD_MB, LLOOMA_ACCOUNT_FILES_MB).",
                    human_size(usage.max_upload_bytes),
                    human_size(usage.account_quota_bytes),
                )}
            </p>
            {if nobody {
                leptos::either::Either::Left(view! { <p class="hint">"Nobody has attached a file yet."</p> })
            } else {
                leptos::either::Either::Right(view! {
                    <table class="usage">
                        <thead>
                            <tr>
                                <th>"Account"</th>
                                <th class="num">"Files"</th>
                                <th class="num">"Size"</th>
                            </tr>
                        </thead>
                        <tbody>{rows}</tbody>
                    </table>
                })
            }}
        </section>
    }
}

/// One direction of speech: its provider (or "Found automatically") and its model, named
/// `<name>-provider` and `<name>-model`.
#[component]
fn SpeechChoice(
    what: &'static str,
    name: &'static str,
    providers: Vec<ProviderView>,
    chosen: Option<String>,
    model: Option<String>,
    provider_ref: NodeRef<leptos::html::Select>,
    model_ref: NodeRef<leptos::html::Input>,
) -> impl IntoView {
    let options = providers
        .into_iter()
        .map(|p| {
            let selected = chosen.as_deref() == Some(p.id.as_str());
            view! { <option value=p.id selected=selected>{p.name}</option> }
        })
        .collect_view();
    view! {
        <label>
            {format!("{what} provider")}
            <select node_ref=provider_ref name=format!("{name}-provider")>
                <option value="" selected=chosen.is_none()>"Found automatically"</option>
                {options}
            </select>
        </label>
        <label>
            {format!("{what} model")}
            <input
                node_ref=model_ref
                name=format!("{name}-model")
                placeholder="found automatically"
                value=model.unwrap_or_default()
            />
        </label>
    }
}

/// Voice: which provider and model write down recordings and read replies aloud (each left to
/// detection unless chosen), the voice, and what is in effect now.
#[component]
fn SpeechSettings(
    speech: llooma_types::AdminSpeechView,
    providers: Vec<ProviderView>,
    csrf: String,
    error: RwSignal<Option<String>>,
) -> impl IntoView {
    use llooma_types::SpeechChoiceView;
    let in_effect = |what: &'static str, choice: &Option<SpeechChoiceView>| match choice {
        Some(c) => format!(
            "{what}: {} · {}{}",
            c.provider_name,
            c.model,
            if c.auto_detected { " (found automatically)" } else { "" }
        ),
        None => format!("{what}: unavailable (no provider lists a model for it)"),
    };
    let dictation = in_effect("Dictation", &speech.transcription);
    let reading = in_effect("Reading aloud", &speech.speech);
    let settings = speech.settings.clone();
    let stt_provider = NodeRef::<leptos::html::Select>::new();
    let stt_model = NodeRef::<leptos::html::Input>::new();
    let tts_provider = NodeRef::<leptos::html::Select>::new();
    let tts_model = NodeRef::<leptos::html::Input>::new();
    let tts_voice = NodeRef::<leptos::html::Input>::new();
    let save = move |_| {
        error.set(None);
        let picked = |node: NodeRef<leptos::html::Select>| {
            node.get().map(|s| s.value()).filter(|v| !v.is_empty())
        };
        let typed = |node: NodeRef<leptos::html::Input>| {
            Some(input_value(node).trim().to_owned()).filter(|v| !v.is_empty())
        };
        let body = json!({
            "sttProviderId": picked(stt_provider),
            "sttModel": typed(stt_model),
            "ttsProviderId": picked(tts_provider),
            "ttsModel": typed(tts_model),
            "ttsVoice": typed(tts_voice),
        });
        change("PUT", "/api/v1/admin/speech".into(), body, csrf.clone(), error, HERE);
    };
    view! {
        <section class="card speech-settings">
            <h2>"Voice"</h2>
            <p class="meta speech-in-effect">{dictation}</p>
            <p class="meta speech-in-effect">{reading}</p>
            <p class="meta">{format!("Voice: {}", speech.voice)}</p>
            {speech
                .notes
                .iter()
                .map(|note| view! { <p class="warning">{note.clone()}</p> })
                .collect_view()}
            <p class="hint">
                "Left empty, the first provider whose models include a speech model (whisper-1, gpt-4o-transcribe, tts-1, gpt-4o-mini-tts…) is used. Any OpenAI-compatible audio API works: OpenAI, speaches, LocalAI, vLLM."
            </p>
            <div class="stack">
                <SpeechChoice
                    what="Dictation"
                    name="stt"
                    providers=providers.clone()
                    chosen=settings.stt_provider_id.clone()
                    model=settings.stt_model.clone()
                    provider_ref=stt_provider
                    model_ref=stt_model
                />
                <SpeechChoice
                    what="Reading-aloud"
                    name="tts"
                    providers=providers
                    chosen=settings.tts_provider_id.clone()
                    model=settings.tts_model.clone()
                    provider_ref=tts_provider
                    model_ref=tts_model
                />
                <label>
                    "Voice (people may choose their own)"
                    <input
                        node_ref=tts_voice
                        name="tts-voice"
                        placeholder="alloy"
                        value=settings.tts_voice.clone().unwrap_or_default()
                    />
                </label>
                <div class="row">
                    <button class="save-speech" type="button" on:click=save>
                        "Save voice settings"
                    </button>
                </div>
            </div>
        </section>
    }
}

#[cfg(test)]
mod tests {
    use super::window_list;

    #[test]
    fn windows_are_read_as_model_and_tokens_and_a_mistake_is_named() {
        let read = window_list("llama3.1:8b = 131072, qwen=32_768,").unwrap();
        assert_eq!(read["llama3.1:8b"], 131072);
        assert_eq!(read["qwen"], 32768);
        assert!(window_list("").unwrap().is_empty());
        let said = window_list("llama3.1:8b 131072").unwrap_err();
        assert!(said.contains("\"llama3.1:8b 131072\""), "{said}");
        assert!(window_list("= 5").is_err());
    }
}
