//! A server's question during a call (an MCP form) as a card: the server's message, the form the
//! instance read from its request, and Accept, Decline, Cancel. The values are checked against
//! the same form before they are sent (the instance checks them again).

use leptos::either::EitherOf4;
use leptos::prelude::*;
use llooma_types::ApprovalCardView;
use llooma_types::question::{FieldKind, FormField, QuestionForm, SamplingView, TextFormat};
use serde_json::{Map, Number, Value, json};

use crate::card::{answer_button, countdown, elsewhere_note, send_answer};

/// The card of a question.
#[component]
pub fn QuestionCard(
    card: ApprovalCardView,
    form: QuestionForm,
    csrf: String,
    elsewhere: bool,
    now: RwSignal<i64>,
    cards: RwSignal<Vec<ApprovalCardView>>,
) -> impl IntoView {
    let error = RwSignal::new(None::<String>);
    let busy = RwSignal::new(false);
    // Starts from the defaults the server gave: they show in the fields and are sent unless
    // changed (SEP-1034).
    // A yes/no box says yes or no either way: what it shows is what is sent.
    let start = |field: &FormField| match &field.kind {
        FieldKind::Boolean { default } => Some(Value::Bool(default.unwrap_or(false))),
        kind => kind.default_value(),
    };
    let values: RwSignal<Map<String, Value>> = RwSignal::new(
        form.fields.iter().filter_map(|f| start(f).map(|v| (f.name.clone(), v))).collect(),
    );
    let id = card.id.clone();
    let checked_form = StoredValue::new(form.clone());
    let answer = move |choice: &'static str| {
        let mut body = json!({"choice": choice});
        if choice == "accept" {
            match checked_form.with_value(|form| form.check(&values.get_untracked())) {
                Ok(content) => body["content"] = Value::Object(content),
                Err(why) => {
                    error.set(Some(format!("{why}.")));
                    return;
                }
            }
        }
        send_answer(&id, body, &csrf, cards, busy, error);
    };
    let countdown =
        countdown(card.deadline_ms, now, "Time is up: the server will be told you did not answer.");
    let fields = form
        .fields
        .into_iter()
        .map(|field| field_view(field, values, card.id.clone()))
        .collect_view();
    let (accept, decline, cancel) = (answer.clone(), answer.clone(), answer);
    let server = card.server_label.clone();
    let sampling = form.sampling.clone();
    let asks = match &sampling {
        None => " asks you, while running ".to_owned(),
        Some(view) if view.answer.is_some() => {
            format!(" asked your model ({}) for this answer, while running ", view.model)
        }
        Some(view) => format!(" asks your model ({}) to answer it, while running ", view.model),
    };
    let hint = match &sampling {
        None => format!(
            "Accept sends what is in the form to {server}, as it is; nothing is remembered. Decline tells it no.",
        ),
        Some(view) if view.answer.is_some() => format!(
            "Accept sends the text above to {server}, as it stands. Decline: nothing goes back.",
        ),
        Some(view) => format!(
            "Accept lets {} answer these messages (the last as you leave it), with nothing else \
             of this conversation; you see the answer before it goes back. Decline tells {server} no.",
            view.model
        ),
    };
    let is_sampling = sampling.is_some();
    let message = (!form.message.is_empty()).then(|| {
        view! { <blockquote class="question-message">{form.message.clone()}</blockquote> }
    });
    view! {
        <article class="card approval question" class:sampling=is_sampling data-call=card.id.clone()>
            <header>
                <span class="server">{card.server_label.clone()}</span>
                {asks}
                <b class="tool">{card.tool_name.clone()}</b>
            </header>
            {elsewhere_note(elsewhere, &card.conversation_id)}
            {message}
            {sampling.map(sampling_view)}
            <form class="question-form" on:submit=|ev| ev.prevent_default()>
                {fields}
            </form>
            <p class="hint-note">{hint}</p>
            <p class="countdown">{countdown}</p>
            <div class="actions">
                {answer_button("primary accept", "Accept", busy, move || accept("accept"))}
                {answer_button("decline", "Decline", busy, move || decline("decline"))}
                {answer_button("cancel", "Cancel", busy, move || cancel("cancel"))}
            </div>
            <p class="error" role="alert">{move || error.get()}</p>
        </article>
    }
}

/// A server's request for a completion, as it wrote it: its instructions, its messages (the
/// last one is in the form, to be changed), and the limits it asked for.
fn sampling_view(view: SamplingView) -> impl IntoView {
    let shown = view.messages.len().saturating_sub(1);
    let earlier = view
        .messages
        .into_iter()
        .take(if view.answer.is_some() { usize::MAX } else { shown })
        .map(|line| {
            let who = if line.role == "assistant" { "Model:" } else { "Server:" };
            view! {
                <li class=format!("sampled {}", line.role)>
                    <b>{who}</b>
                    " "
                    <span class="text">{line.text}</span>
                </li>
            }
        })
        .collect_view();
    let limits = match view.temperature {
        Some(t) => format!("At most {} tokens, temperature {t}.", view.max_tokens),
        None => format!("At most {} tokens.", view.max_tokens),
    };
    view! {
        <div class="sampling-request">
            {view
                .system_prompt
                .map(|prompt| {
                    view! {
                        <p class="sampling-system">
                            <b>"Its instructions to the model: "</b>
                            <span class="text">{prompt}</span>
                        </p>
                    }
                })}
            <ol class="sampling-messages">{earlier}</ol>
            <p class="sampling-limits">{limits}</p>
        </div>
    }
}

/// Sets or clears one value of the form.
fn set(values: RwSignal<Map<String, Value>>, name: &str, value: Option<Value>) {
    values.update(|map| match value {
        Some(value) => {
            map.insert(name.to_owned(), value);
        }
        None => {
            map.remove(name);
        }
    });
}

/// One field: its label (the server's title, else its name), description, and input. Text,
/// numbers and yes/no share one `<input>` (its type and bounds as attributes): each distinct
/// view is code in the browser part, so fewer kinds of view keep it small.
fn field_view(
    field: FormField,
    values: RwSignal<Map<String, Value>>,
    card: String,
) -> impl IntoView + use<> {
    let input_id = format!("q-{card}-{}", field.name);
    let label = field.label().to_owned();
    let required = field.required;
    let description = field.description.clone();
    let name = field.name;
    let input = match field.kind {
        FieldKind::Choice { options, default } => {
            let options = options
                .into_iter()
                .map(|option| {
                    let selected = default.as_deref() == Some(option.value.as_str());
                    let label = option.label().to_owned();
                    view! { <option value=option.value selected=selected>{label}</option> }
                })
                .collect_view();
            EitherOf4::A(view! {
                <select
                    id=input_id.clone()
                    name=name.clone()
                    required=required
                    on:change=move |ev| {
                        let chosen = event_target_value(&ev);
                        set(values, &name, (!chosen.is_empty()).then_some(Value::String(chosen)));
                    }
                >
                    <option value="" selected=default.is_none()>"—"</option>
                    {options}
                </select>
            })
        }
        FieldKind::Choices { options, default, .. } => {
            let boxes = options
                .into_iter()
                .map(|option| {
                    let name = name.clone();
                    let value = option.value.clone();
                    let checked = default.contains(&option.value);
                    let label = option.label().to_owned();
                    view! {
                        <label class="choice">
                            <input
                                type="checkbox"
                                checked=checked
                                on:change=move |ev| {
                                    let on = event_target_checked(&ev);
                                    toggle(values, &name, &value, on);
                                }
                            />
                            {label}
                        </label>
                    }
                })
                .collect_view();
            EitherOf4::B(view! { <span class="choices" id=input_id.clone()>{boxes}</span> })
        }
        FieldKind::Text { multiline: true, max_length, default, .. } => EitherOf4::C(view! {
            <textarea
                id=input_id.clone()
                name=name.clone()
                rows="3"
                maxlength=max_length.map(|m| m.to_string())
                required=required
                on:input=move |ev| {
                    let text = event_target_value(&ev);
                    set(values, &name, (!text.is_empty()).then_some(Value::String(text)));
                }
            >
                {default.unwrap_or_default()}
            </textarea>
        }),
        kind => {
            let shape = InputShape::of(&kind);
            EitherOf4::D(view! {
                <input
                    id=input_id.clone()
                    type=shape.kind
                    name=name.clone()
                    value=shape.value
                    checked=shape.checked
                    step=shape.step
                    min=shape.min
                    max=shape.max
                    maxlength=shape.max_length
                    placeholder=shape.placeholder
                    required=required && shape.kind != "checkbox"
                    on:input=move |ev| {
                        let typed = match &kind {
                            FieldKind::Boolean { .. } => {
                                Some(Value::Bool(event_target_checked(&ev)))
                            }
                            FieldKind::Number { integer, .. } => {
                                number(&event_target_value(&ev), *integer)
                            }
                            _ => {
                                let text = event_target_value(&ev);
                                (!text.is_empty()).then_some(Value::String(text))
                            }
                        };
                        set(values, &name, typed);
                    }
                />
            })
        }
    };
    view! {
        <div class="field">
            <label for=input_id>{label} {required.then_some(" (required)")}</label>
            {description.map(|d| view! { <span class="field-description">{d}</span> })}
            {input}
        </div>
    }
}

/// The attributes of the one `<input>` for a text, number or yes/no field.
struct InputShape {
    kind: &'static str,
    value: String,
    checked: bool,
    step: Option<&'static str>,
    min: Option<String>,
    max: Option<String>,
    max_length: Option<String>,
    placeholder: Option<&'static str>,
}

impl InputShape {
    fn of(kind: &FieldKind) -> InputShape {
        let mut shape = InputShape {
            kind: "text",
            value: String::new(),
            checked: false,
            step: None,
            min: None,
            max: None,
            max_length: None,
            placeholder: None,
        };
        match kind {
            FieldKind::Text { format, max_length, default, .. } => {
                shape.kind = match format {
                    Some(TextFormat::Email) => "email",
                    Some(TextFormat::Uri) => "url",
                    Some(TextFormat::Date) => "date",
                    _ => "text",
                };
                if *format == Some(TextFormat::DateTime) {
                    shape.placeholder = Some("2026-12-07T14:30:00Z");
                }
                shape.max_length = max_length.map(|m| m.to_string());
                shape.value = default.clone().unwrap_or_default();
            }
            FieldKind::Number { integer, minimum, maximum, default } => {
                shape.kind = "number";
                shape.step = Some(if *integer { "1" } else { "any" });
                shape.min = minimum.as_ref().map(ToString::to_string);
                shape.max = maximum.as_ref().map(ToString::to_string);
                shape.value = default.as_ref().map(ToString::to_string).unwrap_or_default();
            }
            FieldKind::Boolean { default } => {
                shape.kind = "checkbox";
                shape.checked = default.unwrap_or(false);
            }
            FieldKind::Choice { .. } | FieldKind::Choices { .. } => {}
        }
        shape
    }
}

/// A number typed into a field: as the JSON number it reads as, text that does not (so the
/// form's check says what is wrong), or nothing for an empty field.
fn number(text: &str, integer: bool) -> Option<Value> {
    let text = text.trim();
    if text.is_empty() {
        return None;
    }
    let parsed = if integer {
        text.parse::<i64>().ok().map(Number::from)
    } else {
        text.parse::<f64>().ok().and_then(Number::from_f64)
    };
    Some(parsed.map(Value::Number).unwrap_or_else(|| Value::String(text.to_owned())))
}

/// Adds `value` to, or takes it from, a several-choice field's list.
fn toggle(values: RwSignal<Map<String, Value>>, name: &str, value: &str, on: bool) {
    values.update(|map| {
        let mut chosen: Vec<Value> =
            map.get(name).and_then(Value::as_array).cloned().unwrap_or_default();
        chosen.retain(|v| v != value);
        if on {
            chosen.push(Value::String(value.to_owned()));
        }
        if chosen.is_empty() {
            map.remove(name);
        } else {
            map.insert(name.to_owned(), Value::Array(chosen));
        }
    });
}

#[cfg(test)]
mod tests {
    use super::number;
    use serde_json::json;

    #[test]
    fn typed_numbers_are_sent_as_numbers_and_slips_as_they_are() {
        assert_eq!(number("42", true), Some(json!(42)));
        assert_eq!(number("3.5", false), Some(json!(3.5)));
        assert_eq!(number("3.5", true), Some(json!("3.5")));
        assert_eq!(number("  ", false), None);
    }
}
