//! Settings → Personas (a name, a prompt, memory on or off, and what each remembers) and
//! Settings → Prompts (the person's wording of the app's own tools), each its own page. A change
//! is sent to the API and the page is reloaded from the server.

use leptos::prelude::*;
use llooma_types::{MemoryNoteView, PersonaView, ToolWordingView};
use serde_json::json;

use crate::forms::{RemoveAfterAsking, change, input_value, text_value};
use crate::layout::TopBar;
use crate::model::Me;

const HERE: &str = "/settings/personas";

#[component]
pub fn SettingsPersonas(
    me: Me,
    personas: Vec<(PersonaView, Vec<MemoryNoteView>)>,
) -> impl IntoView {
    let csrf = me.csrf_token.clone();
    let error = RwSignal::new(None::<String>);
    let name = NodeRef::<leptos::html::Input>::new();
    let prompt = NodeRef::<leptos::html::Textarea>::new();
    let memory = NodeRef::<leptos::html::Input>::new();
    let create = {
        let csrf = csrf.clone();
        move |ev: leptos::ev::SubmitEvent| {
            ev.prevent_default();
            error.set(None);
            let body = json!({
                "name": input_value(name),
                "prompt": text_value(prompt),
                "memoryEnabled": memory.get().is_some_and(|m| m.checked()),
            });
            change("POST", "/api/v1/personas".into(), body, csrf.clone(), error, HERE);
        }
    };
    let empty = personas.is_empty();
    view! {
        <div class="page">
            <TopBar me=me.clone() />
            <main class="narrow settings">
                <h1>"Settings → Personas"</h1>
                <p class="hint">
                    "A persona answers a conversation with its own prompt, and, if you let it, keeps notes between conversations. Choose one in a conversation's composer."
                </p>
                <p class="error" role="alert">{move || error.get()}</p>
                <section class="card">
                    <h2>"New persona"</h2>
                    <form class="stack add-persona" on:submit=create>
                        <label>"Name" <input node_ref=name name="name" required /></label>
                        <label>
                            "Prompt"
                            <textarea node_ref=prompt name="prompt" rows="4"></textarea>
                        </label>
                        <label class="switch">
                            <input node_ref=memory type="checkbox" name="memory" />
                            "Memory: it may keep notes"
                        </label>
                        <div class="row">
                            <button class="primary create" type="submit">"Create"</button>
                        </div>
                    </form>
                </section>
                {empty.then(|| view! { <p class="hint">"No persona yet."</p> })}
                {personas
                    .into_iter()
                    .map(|(persona, notes)| {
                        view! { <PersonaCard persona notes csrf=csrf.clone() error /> }
                    })
                    .collect_view()}
            </main>
        </div>
    }
}

#[component]
pub fn SettingsPrompts(me: Me, wordings: Vec<ToolWordingView>) -> impl IntoView {
    let csrf = me.csrf_token.clone();
    let error = RwSignal::new(None::<String>);
    view! {
        <div class="page">
            <TopBar me=me.clone() />
            <main class="narrow settings">
                <h1>"Settings → Prompts"</h1>
                <p class="hint">
                    "How the app's own tools are described to the model. An MCP server's tools are described by their server and are not rewritten here. Empty goes back to the app's wording."
                </p>
                <p class="error" role="alert">{move || error.get()}</p>
                {wordings
                    .into_iter()
                    .map(|wording| view! { <WordingCard wording csrf=csrf.clone() error /> })
                    .collect_view()}
            </main>
        </div>
    }
}

#[component]
fn PersonaCard(
    persona: PersonaView,
    notes: Vec<MemoryNoteView>,
    csrf: String,
    error: RwSignal<Option<String>>,
) -> impl IntoView {
    let path = format!("/api/v1/personas/{}", persona.id);
    let name = NodeRef::<leptos::html::Input>::new();
    let prompt = NodeRef::<leptos::html::Textarea>::new();
    let memory = NodeRef::<leptos::html::Input>::new();
    let save = {
        let (csrf, path) = (csrf.clone(), path.clone());
        move |_| {
            error.set(None);
            let body = json!({
                "name": input_value(name),
                "prompt": text_value(prompt),
                "memoryEnabled": memory.get().is_some_and(|m| m.checked()),
            });
            change("PATCH", path.clone(), body, csrf.clone(), error, HERE);
        }
    };
    let delete = {
        let (csrf, path) = (csrf.clone(), path.clone());
        Callback::new(move |()| {
            change("DELETE", path.clone(), json!({}), csrf.clone(), error, HERE)
        })
    };
    let no_notes = notes.is_empty();
    view! {
        <article class="card persona" data-persona=persona.name.clone()>
            <div class="stack">
                <label>"Name" <input node_ref=name name="name" value=persona.name.clone() /></label>
                <label>
                    "Prompt"
                    <textarea
                        node_ref=prompt
                        name="prompt"
                        rows="4"
                        prop:value=persona.prompt.clone()
                    ></textarea>
                </label>
                <label class="switch">
                    <input
                        node_ref=memory
                        type="checkbox"
                        name="memory"
                        checked=persona.memory_enabled
                    />
                    "Memory: it may keep notes"
                </label>
            </div>
            <h3>"What it remembers"</h3>
            {no_notes.then(|| view! { <p class="hint">"Nothing yet."</p> })}
            <ul class="notes">
                {notes
                    .into_iter()
                    .map(|note| {
                        let forget_path = format!("{path}/memory/{}", note.id);
                        let csrf = csrf.clone();
                        view! {
                            <li class="note">
                                <span class="content">{note.content}</span>
                                <button
                                    class="forget"
                                    type="button"
                                    on:click=move |_| {
                                        change(
                                            "DELETE",
                                            forget_path.clone(),
                                            json!({}),
                                            csrf.clone(),
                                            error,
                                            HERE,
                                        )
                                    }
                                >
                                    "Forget"
                                </button>
                            </li>
                        }
                    })
                    .collect_view()}
            </ul>
            <div class="row">
                <button class="primary save" type="button" on:click=save>"Save"</button>
                <RemoveAfterAsking
                    question="Delete this persona and everything it remembers?"
                    label="Delete"
                    remove=delete
                />
            </div>
        </article>
    }
}

#[component]
fn WordingCard(
    wording: ToolWordingView,
    csrf: String,
    error: RwSignal<Option<String>>,
) -> impl IntoView {
    let path = format!("/api/v1/prompts/tools/{}", wording.tool);
    let text = NodeRef::<leptos::html::Textarea>::new();
    let save = move |_| {
        error.set(None);
        let body = json!({"description": text_value(text)});
        change("PUT", path.clone(), body, csrf.clone(), error, "/settings/prompts");
    };
    let own = wording.description.clone().unwrap_or_default();
    view! {
        <article class="card wording" data-tool=wording.tool.clone()>
            <header class="row">
                <b class="label">{wording.tool.clone()}</b>
                {wording.description.is_some().then(|| view! { <span class="status">"yours"</span> })}
            </header>
            <textarea
                node_ref=text
                name="description"
                rows="3"
                placeholder=wording.default_description.clone()
                prop:value=own
            ></textarea>
            <div class="row">
                <button class="save" type="button" on:click=save>"Save"</button>
            </div>
        </article>
    }
}
