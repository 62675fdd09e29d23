//! Admin → Providers and instance: the model providers (address, key, declared models) and the
//! instance's settings (registration, web search, default model, default system prompt). A change is sent to
//! the API and the page is reloaded from the server.

use leptos::prelude::*;
use llooma_types::{InstanceSettingsView, ProviderView};
use serde_json::{Value, json};

use crate::app::TopBar;
use crate::forms::{change, input_value};
use crate::model::Me;
use crate::model_choices::{ModelChoices, ModelDatalist};

const HERE: &str = "/admin/instance";

/// Model names typed as a comma-separated list.
fn model_list(text: &str) -> Vec<String> {
    text.split(',').map(str::trim).filter(|m| !m.is_empty()).map(str::to_owned).collect()
}

/// The links between the administrator's pages.
#[component]
pub(crate) fn AdminNav() -> impl IntoView {
    view! {
        <nav class="row admin-nav">
            <a href="/admin/mcp">"MCP servers"</a>
            <a href="/admin/catalogue">"Catalogue"</a>
            <a href="/admin/instance">"Providers and instance"</a>
        </nav>
    }
}

#[component]
pub fn AdminInstance(
    me: Me,
    providers: Vec<ProviderView>,
    settings: InstanceSettingsView,
) -> impl IntoView {
    let csrf = me.csrf_token.clone();
    let error = RwSignal::new(None::<String>);
    let name = NodeRef::<leptos::html::Input>::new();
    let base_url = NodeRef::<leptos::html::Input>::new();
    let key = NodeRef::<leptos::html::Input>::new();
    let models = NodeRef::<leptos::html::Input>::new();
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
    let remove = move |_| change("DELETE", path.clone(), json!({}), csrf.clone(), error, HERE);
    view! {
        <article class="card provider" data-provider=provider.name.clone()>
            <header class="row">
                <b class="label">{provider.name.clone()}</b>
                <span class="meta">{if provider.has_key { "key set" } else { "no key" }}</span>
            </header>
            <p class="address">{provider.base_url.clone()}</p>
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
                <button class="remove" type="button" on:click=remove>"Remove"</button>
            </div>
        </article>
    }
}
