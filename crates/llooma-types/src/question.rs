//! A server's question to the person during a call (an MCP form, "elicitation"), as a card
//! shows it and as the answer is checked.
//!
//! The server sends a JSON Schema; the card never renders that schema. It is read once, here,
//! into a [`QuestionForm`]: a bounded list of typed fields of the kinds the protocol allows (text
//! with a format, number, integer, yes/no, one choice, several choices). A schema asking for
//! anything else is refused as a whole, so what the person sees is exactly what can be sent.
//! The same form checks the answer on both sides: the page before sending, the instance before
//! anything reaches the server.

use serde::{Deserialize, Serialize};
use serde_json::{Map, Number, Value};

/// The most fields one form may have.
pub const MAX_FIELDS: usize = 50;
/// The most options one choice may offer.
pub const MAX_OPTIONS: usize = 200;
/// The longest title kept, in characters.
const MAX_TITLE_CHARS: usize = 200;
/// The longest description kept, in characters.
const MAX_DESCRIPTION_CHARS: usize = 1000;
/// The longest text a field may receive when the server sets no length, in characters.
pub const MAX_TEXT_CHARS: usize = 10_000;

/// The question: the server's message and the form it asks the person to fill, or the page it
/// asks them to open (a form of no fields, with a [`QuestionLink`]).
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct QuestionForm {
    /// The server's words (its claim, shown as the server's).
    pub message: String,
    pub fields: Vec<FormField>,
    /// Set when the server asks the person to open a page (URL mode) rather than fill a form.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub link: Option<QuestionLink>,
    /// Set when the server asks for the person's model to answer its messages (sampling): the
    /// request as the server wrote it, and at the second step the model's answer.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub sampling: Option<SamplingView>,
}

/// A server's request for a completion, as a card shows it. Every word is the server's.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct SamplingView {
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub system_prompt: Option<String>,
    pub messages: Vec<SamplingLine>,
    /// The longest answer it asked for, in tokens.
    pub max_tokens: u32,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub temperature: Option<Number>,
    /// The model that runs it (the conversation's).
    pub model: String,
    /// At the second step: the model's answer, to be let go back (or not).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub answer: Option<String>,
}

/// One message of a completion request.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct SamplingLine {
    /// `user` or `assistant`.
    pub role: String,
    pub text: String,
}

/// The longest message or answer a person may send through a completion card, in characters.
pub const MAX_SAMPLING_TEXT_CHARS: u64 = 32_000;

impl QuestionForm {
    /// The first card of a completion request: the request, and its last message in a field
    /// the person may change before the model reads it.
    pub fn for_sampling(view: SamplingView) -> QuestionForm {
        let last = view.messages.last().map(|m| m.text.clone()).unwrap_or_default();
        let field = sampling_field("message", "The last message, as your model will read it", last);
        QuestionForm {
            message: String::new(),
            fields: vec![field],
            link: None,
            sampling: Some(view),
        }
    }

    /// The second card: the model's `answer`, in a field the person may change before it goes
    /// back to the server.
    pub fn for_sampled_answer(mut view: SamplingView, answer: String) -> QuestionForm {
        view.answer = Some(answer.clone());
        let field = sampling_field("answer", "What goes back to the server", answer);
        QuestionForm {
            message: String::new(),
            fields: vec![field],
            link: None,
            sampling: Some(view),
        }
    }
}

/// The longest address a card shows as a link, in bytes; a longer one is shown refused.
pub const MAX_LINK_BYTES: usize = 2048;

/// A page a server asks the person to open (an MCP URL-mode question): to sign in somewhere,
/// pay, or enter what must not pass through the chat. Only the person's click opens it.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct QuestionLink {
    /// The full address, exactly as the server sent it (at most [`MAX_LINK_BYTES`]).
    pub url: String,
    /// The host, as the browser will read it (empty when the address does not parse): the
    /// card puts it first, so a long address cannot hide where it leads.
    pub host: String,
    /// Why this instance will not offer the address as a link (not http or https, a private
    /// or loopback address, too long), in words for the person. The card then shows the
    /// address as text only.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub refused: Option<String>,
    /// The second step of a question the call cannot go on without (the server refused the
    /// call until the page is done): the page was opened; the card waits for the server's
    /// notice or the person's "done", and the call is sent again after.
    #[serde(default)]
    pub waiting: bool,
}

impl QuestionForm {
    /// A question asking the person to open `url`, whose host is `host` (as the instance's
    /// URL parser reads it; empty if it does not parse). `refused` is the instance's reason not
    /// to offer it (its outbound policy's word on the address), if any; an address too long to
    /// show whole is refused here.
    pub fn for_link(
        message: &str,
        url: &str,
        host: String,
        refused: Option<String>,
    ) -> QuestionForm {
        let (url, refused) = if url.len() > MAX_LINK_BYTES {
            let why = format!(
                "the address is {} bytes long; at most {MAX_LINK_BYTES} are offered",
                url.len()
            );
            (excerpt_bytes(url, MAX_LINK_BYTES), Some(why))
        } else {
            (url.to_owned(), refused)
        };
        QuestionForm {
            message: message.to_owned(),
            fields: Vec::new(),
            link: Some(QuestionLink { url, host, refused, waiting: false }),
            sampling: None,
        }
    }

    /// The same link question at its second step: opened, waiting to be done.
    pub fn waiting(mut self) -> QuestionForm {
        if let Some(link) = self.link.as_mut() {
            link.waiting = true;
        }
        self
    }
}

/// The one field of a completion card: several lines the person may change, `text` to start.
fn sampling_field(name: &str, title: &str, text: String) -> FormField {
    FormField {
        name: name.to_owned(),
        title: Some(title.to_owned()),
        description: None,
        required: true,
        kind: FieldKind::Text {
            format: None,
            min_length: Some(1),
            max_length: Some(MAX_SAMPLING_TEXT_CHARS),
            default: Some(text),
            multiline: true,
        },
    }
}

/// `text` cut to at most `max` bytes, on a character boundary.
fn excerpt_bytes(text: &str, max: usize) -> String {
    let mut end = max.min(text.len());
    while !text.is_char_boundary(end) {
        end -= 1;
    }
    text[..end].to_owned()
}

/// One field of a form.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct FormField {
    /// The property name the answer carries.
    pub name: String,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub title: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub description: Option<String>,
    #[serde(default)]
    pub required: bool,
    pub kind: FieldKind,
}

impl FormField {
    /// What the person reads as the field's name.
    pub fn label(&self) -> &str {
        self.title.as_deref().unwrap_or(&self.name)
    }
}

/// What a field asks for, with its bounds and default.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(tag = "type", rename_all = "snake_case")]
pub enum FieldKind {
    Text {
        #[serde(default, skip_serializing_if = "Option::is_none")]
        format: Option<TextFormat>,
        #[serde(default, skip_serializing_if = "Option::is_none", rename = "minLength")]
        min_length: Option<u64>,
        #[serde(default, skip_serializing_if = "Option::is_none", rename = "maxLength")]
        max_length: Option<u64>,
        #[serde(default, skip_serializing_if = "Option::is_none")]
        default: Option<String>,
        /// Several lines of text (a message to a model), not a single line.
        #[serde(default, skip_serializing_if = "std::ops::Not::not")]
        multiline: bool,
    },
    Number {
        /// Whole numbers only.
        #[serde(default)]
        integer: bool,
        #[serde(default, skip_serializing_if = "Option::is_none")]
        minimum: Option<Number>,
        #[serde(default, skip_serializing_if = "Option::is_none")]
        maximum: Option<Number>,
        #[serde(default, skip_serializing_if = "Option::is_none")]
        default: Option<Number>,
    },
    Boolean {
        #[serde(default, skip_serializing_if = "Option::is_none")]
        default: Option<bool>,
    },
    /// One of the options.
    Choice {
        options: Vec<ChoiceOption>,
        #[serde(default, skip_serializing_if = "Option::is_none")]
        default: Option<String>,
    },
    /// Any number of the options, within the bounds.
    Choices {
        options: Vec<ChoiceOption>,
        #[serde(default, skip_serializing_if = "Option::is_none", rename = "minItems")]
        min_items: Option<u64>,
        #[serde(default, skip_serializing_if = "Option::is_none", rename = "maxItems")]
        max_items: Option<u64>,
        #[serde(default, skip_serializing_if = "Vec::is_empty")]
        default: Vec<String>,
    },
}

/// A text field's format, as the protocol names them.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub enum TextFormat {
    #[serde(rename = "email")]
    Email,
    #[serde(rename = "uri")]
    Uri,
    #[serde(rename = "date")]
    Date,
    #[serde(rename = "date-time")]
    DateTime,
}

/// One option of a choice: the value sent, and what the person reads.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct ChoiceOption {
    pub value: String,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub title: Option<String>,
}

impl ChoiceOption {
    pub fn label(&self) -> &str {
        self.title.as_deref().unwrap_or(&self.value)
    }
}

fn text(value: Option<&Value>, max_chars: usize) -> Option<String> {
    let text = value?.as_str()?.trim();
    (!text.is_empty()).then(|| text.chars().take(max_chars).collect())
}

fn count(value: Option<&Value>) -> Option<u64> {
    value?.as_u64()
}

impl QuestionForm {
    /// Reads a server's `requestedSchema` into a form, or says why it cannot be shown.
    pub fn from_request(message: &str, schema: &Value) -> Result<QuestionForm, String> {
        let schema = schema.as_object().ok_or("the requested schema is not a JSON object")?;
        if let Some(kind) = schema.get("type")
            && kind != "object"
        {
            return Err(format!("the requested schema is of type {kind}, not an object"));
        }
        let properties = match schema.get("properties") {
            None | Some(Value::Null) => Map::new(),
            Some(Value::Object(properties)) => properties.clone(),
            Some(_) => return Err("the requested schema's properties are not an object".into()),
        };
        if properties.len() > MAX_FIELDS {
            return Err(format!(
                "the form has {} fields; at most {MAX_FIELDS} are shown",
                properties.len()
            ));
        }
        let required: Vec<&str> = schema
            .get("required")
            .and_then(Value::as_array)
            .map(|names| names.iter().filter_map(Value::as_str).collect())
            .unwrap_or_default();
        let mut fields = Vec::with_capacity(properties.len());
        for (name, property) in &properties {
            let kind = field_kind(property)
                .map_err(|why| format!("the field {:?} {why}", excerpt(name)))?;
            fields.push(FormField {
                name: name.clone(),
                title: text(property.get("title"), MAX_TITLE_CHARS),
                description: text(property.get("description"), MAX_DESCRIPTION_CHARS),
                required: required.contains(&name.as_str()),
                kind,
            });
        }
        // The server's own order does not survive the trip (its properties arrive as a map);
        // the fields it requires come first, the rest after, each group by name.
        fields.sort_by_key(|field| !field.required);
        Ok(QuestionForm { message: message.to_owned(), fields, link: None, sampling: None })
    }

    /// Checks a person's answer against the form: every name a field of it, every value of the
    /// field's kind and within its bounds, every required field given (a field left out that
    /// has a default takes it). The answer as it will be sent, or what is wrong, in words for
    /// the person.
    pub fn check(&self, answer: &Map<String, Value>) -> Result<Map<String, Value>, String> {
        if let Some(QuestionLink { refused: Some(why), .. }) = &self.link {
            return Err(format!("this address is not opened from here ({why}); decline or cancel"));
        }
        if let Some(unknown) = answer.keys().find(|k| !self.fields.iter().any(|f| &f.name == *k)) {
            return Err(format!("the form has no field {:?}", excerpt(unknown)));
        }
        let mut checked = Map::new();
        for field in &self.fields {
            let value = match answer.get(&field.name).filter(|v| !v.is_null()) {
                Some(value) => value.clone(),
                None => match field.kind.default_value() {
                    Some(default) => default,
                    None if field.required => {
                        return Err(format!("{} is required", field.label()));
                    }
                    None => continue,
                },
            };
            field.kind.check(&value).map_err(|why| format!("{}: {why}", field.label()))?;
            checked.insert(field.name.clone(), value);
        }
        Ok(checked)
    }
}

fn excerpt(text: &str) -> String {
    text.chars().take(60).collect()
}

/// The kind of one property of a requested schema.
fn field_kind(property: &Value) -> Result<FieldKind, String> {
    let property = property.as_object().ok_or("is not described by an object")?;
    let default = property.get("default");
    let kind = property.get("type").and_then(Value::as_str).unwrap_or("");
    match kind {
        "string" => {
            if let Some(options) = single_options(property)? {
                let default = default
                    .and_then(Value::as_str)
                    .filter(|d| options.iter().any(|o| o.value == *d));
                return Ok(FieldKind::Choice { options, default: default.map(str::to_owned) });
            }
            let format = match property.get("format").and_then(Value::as_str) {
                Some("email") => Some(TextFormat::Email),
                Some("uri") => Some(TextFormat::Uri),
                Some("date") => Some(TextFormat::Date),
                Some("date-time") => Some(TextFormat::DateTime),
                // An unknown format is shown as plain text: the server checks its own.
                _ => None,
            };
            Ok(FieldKind::Text {
                format,
                min_length: count(property.get("minLength")),
                max_length: count(property.get("maxLength")),
                default: default.and_then(Value::as_str).map(str::to_owned),
                multiline: false,
            })
        }
        "number" | "integer" => {
            let number = |key: &str| property.get(key).and_then(Value::as_number).cloned();
            let integer = kind == "integer";
            let default = default
                .and_then(Value::as_number)
                .filter(|d| !integer || d.is_i64() || d.is_u64())
                .cloned();
            Ok(FieldKind::Number {
                integer,
                minimum: number("minimum"),
                maximum: number("maximum"),
                default,
            })
        }
        "boolean" => Ok(FieldKind::Boolean { default: default.and_then(Value::as_bool) }),
        "array" => {
            let items = property.get("items").and_then(Value::as_object).ok_or(
                "asks for a list without saying of what (only lists of given options can be asked)",
            )?;
            let options = match items.get("anyOf").or_else(|| items.get("oneOf")) {
                Some(titled) => titled_options(titled)?,
                None => plain_options(items.get("enum"), None)?.ok_or(
                    "asks for a list of free values (only lists of given options can be asked)",
                )?,
            };
            let default = default
                .and_then(Value::as_array)
                .map(|d| {
                    d.iter()
                        .filter_map(Value::as_str)
                        .filter(|v| options.iter().any(|o| o.value == *v))
                        .map(str::to_owned)
                        .collect()
                })
                .unwrap_or_default();
            Ok(FieldKind::Choices {
                options,
                min_items: count(property.get("minItems")),
                max_items: count(property.get("maxItems")),
                default,
            })
        }
        "" => Err("has no type".to_owned()),
        other => Err(format!("is of type {other:?}, which a form cannot ask for")),
    }
}

/// A single choice's options: `oneOf`/`anyOf` of titled constants, or `enum` (with the legacy
/// `enumNames` as titles); `None` when the property is free text.
fn single_options(property: &Map<String, Value>) -> Result<Option<Vec<ChoiceOption>>, String> {
    if let Some(titled) = property.get("oneOf").or_else(|| property.get("anyOf")) {
        return titled_options(titled).map(Some);
    }
    plain_options(property.get("enum"), property.get("enumNames"))
}

fn titled_options(titled: &Value) -> Result<Vec<ChoiceOption>, String> {
    let titled = titled.as_array().ok_or("lists its options in something other than a list")?;
    let options = titled
        .iter()
        .map(|option| {
            let value = option
                .get("const")
                .and_then(Value::as_str)
                .ok_or("has an option without a text value")?;
            Ok(ChoiceOption {
                value: value.to_owned(),
                title: text(option.get("title"), MAX_TITLE_CHARS),
            })
        })
        .collect::<Result<Vec<_>, String>>()?;
    bounded(options)
}

fn plain_options(
    values: Option<&Value>,
    names: Option<&Value>,
) -> Result<Option<Vec<ChoiceOption>>, String> {
    let Some(values) = values else {
        return Ok(None);
    };
    let values = values.as_array().ok_or("lists its options in something other than a list")?;
    let names = names.and_then(Value::as_array);
    let options = values
        .iter()
        .enumerate()
        .map(|(i, value)| {
            let value = value.as_str().ok_or("has an option that is not text")?;
            let title = names.and_then(|n| text(n.get(i), MAX_TITLE_CHARS));
            Ok(ChoiceOption { value: value.to_owned(), title })
        })
        .collect::<Result<Vec<_>, String>>()?;
    bounded(options).map(Some)
}

fn bounded(options: Vec<ChoiceOption>) -> Result<Vec<ChoiceOption>, String> {
    match options.len() {
        0 => Err("offers no options".to_owned()),
        n if n > MAX_OPTIONS => Err(format!("offers {n} options; at most {MAX_OPTIONS} are shown")),
        _ => Ok(options),
    }
}

impl FieldKind {
    /// The default as the answer would carry it.
    pub fn default_value(&self) -> Option<Value> {
        match self {
            FieldKind::Text { default, .. } => default.clone().map(Value::String),
            FieldKind::Number { default, .. } => default.clone().map(Value::Number),
            FieldKind::Boolean { default } => default.map(Value::Bool),
            FieldKind::Choice { default, .. } => default.clone().map(Value::String),
            FieldKind::Choices { default, .. } => (!default.is_empty())
                .then(|| Value::Array(default.iter().cloned().map(Value::String).collect())),
        }
    }

    /// Whether `value` is an answer this field takes; why not, in words for the person.
    pub fn check(&self, value: &Value) -> Result<(), String> {
        match self {
            FieldKind::Text { format, min_length, max_length, .. } => {
                let text = value.as_str().ok_or("give text")?;
                let chars = text.chars().count() as u64;
                if let Some(min) = min_length
                    && chars < *min
                {
                    return Err(format!("give at least {min} characters"));
                }
                let max = max_length.unwrap_or(MAX_TEXT_CHARS as u64).min(MAX_TEXT_CHARS as u64);
                if chars > max {
                    return Err(format!("give at most {max} characters"));
                }
                match format {
                    Some(format) if !text.is_empty() => format.check(text),
                    _ => Ok(()),
                }
            }
            FieldKind::Number { integer, minimum, maximum, .. } => {
                let number = value.as_number().ok_or("give a number")?;
                if *integer && !(number.is_i64() || number.is_u64()) {
                    return Err("give a whole number".to_owned());
                }
                let given = number.as_f64().unwrap_or(f64::NAN);
                if let Some(min) = minimum.as_ref().and_then(Number::as_f64)
                    && given < min
                {
                    return Err(format!("give {min} or more"));
                }
                if let Some(max) = maximum.as_ref().and_then(Number::as_f64)
                    && given > max
                {
                    return Err(format!("give {max} or less"));
                }
                Ok(())
            }
            FieldKind::Boolean { .. } => {
                value.as_bool().map(|_| ()).ok_or_else(|| "answer yes or no".to_owned())
            }
            FieldKind::Choice { options, .. } => {
                let chosen = value.as_str().ok_or("choose one of the options")?;
                if options.iter().any(|o| o.value == chosen) {
                    Ok(())
                } else {
                    Err("choose one of the options".to_owned())
                }
            }
            FieldKind::Choices { options, min_items, max_items, .. } => {
                let chosen = value.as_array().ok_or("choose from the options")?;
                let mut seen = Vec::with_capacity(chosen.len());
                for item in chosen {
                    let item = item.as_str().ok_or("choose from the options")?;
                    if !options.iter().any(|o| o.value == item) || seen.contains(&item) {
                        return Err("choose from the options, each once".to_owned());
                    }
                    seen.push(item);
                }
                let n = seen.len() as u64;
                if let Some(min) = min_items
                    && n < *min
                {
                    return Err(format!("choose at least {min}"));
                }
                if let Some(max) = max_items
                    && n > *max
                {
                    return Err(format!("choose at most {max}"));
                }
                Ok(())
            }
        }
    }
}

impl TextFormat {
    /// A light check, enough to catch a slip before it is sent; the server checks its own.
    fn check(self, text: &str) -> Result<(), String> {
        let ok = match self {
            TextFormat::Email => {
                text.split_once('@').is_some_and(|(local, domain)| {
                    !local.is_empty() && domain.contains('.') && !domain.contains('@')
                }) && !text.contains(char::is_whitespace)
            }
            TextFormat::Uri => {
                text.split_once(':').is_some_and(|(scheme, rest)| {
                    !rest.is_empty()
                        && scheme.chars().next().is_some_and(|c| c.is_ascii_alphabetic())
                        && scheme.chars().all(|c| c.is_ascii_alphanumeric() || "+-.".contains(c))
                }) && !text.contains(char::is_whitespace)
            }
            TextFormat::Date => is_date(text),
            TextFormat::DateTime => text
                .split_once(['T', 't', ' '])
                .is_some_and(|(date, time)| is_date(date) && is_time(time)),
        };
        if ok {
            Ok(())
        } else {
            Err(match self {
                TextFormat::Email => "give an email address, like name@example.org",
                TextFormat::Uri => "give an address, like https://example.org",
                TextFormat::Date => "give a date as YYYY-MM-DD",
                TextFormat::DateTime => "give a date and time, like 2026-12-07T14:30:00Z",
            }
            .to_owned())
        }
    }
}

fn digits(text: &str, n: usize) -> Option<u32> {
    (text.len() == n && text.bytes().all(|b| b.is_ascii_digit())).then(|| text.parse().ok())?
}

fn is_date(text: &str) -> bool {
    let mut parts = text.split('-');
    let (Some(y), Some(m), Some(d), None) =
        (parts.next(), parts.next(), parts.next(), parts.next())
    else {
        return false;
    };
    digits(y, 4).is_some()
        && digits(m, 2).is_some_and(|m| (1..=12).contains(&m))
        && digits(d, 2).is_some_and(|d| (1..=31).contains(&d))
}

/// `HH:MM[:SS[.frac]]` with a `Z` or `±HH:MM` offset (RFC 3339).
fn is_time(text: &str) -> bool {
    let (clock, offset_ok) = if let Some(clock) = text.strip_suffix(['Z', 'z']) {
        (clock, true)
    } else if let Some(at) = text.rfind(['+', '-']) {
        let offset = &text[at + 1..];
        let ok = offset.split_once(':').is_some_and(|(h, m)| {
            digits(h, 2).is_some_and(|h| h < 24) && digits(m, 2).is_some_and(|m| m < 60)
        });
        (&text[..at], ok)
    } else {
        (text, false)
    };
    let clock = clock.split('.').next().unwrap_or("");
    let mut parts = clock.split(':');
    let hour = parts.next().and_then(|h| digits(h, 2)).is_some_and(|h| h < 24);
    let minute = parts.next().and_then(|m| digits(m, 2)).is_some_and(|m| m < 60);
    let second = parts.next().is_none_or(|s| digits(s, 2).is_some_and(|s| s < 61));
    offset_ok && hour && minute && second && parts.next().is_none()
}

#[cfg(test)]
mod tests {
    use serde_json::json;

    use super::*;

    fn form(schema: Value) -> QuestionForm {
        QuestionForm::from_request("Tell me", &schema).unwrap()
    }

    fn answer(value: Value) -> Map<String, Value> {
        value.as_object().unwrap().clone()
    }

    #[test]
    fn every_kind_the_protocol_allows_becomes_a_field() {
        let form = form(json!({"type": "object", "required": ["name"], "properties": {
            "name": {"type": "string", "title": "Name", "maxLength": 5},
            "email": {"type": "string", "format": "email"},
            "age": {"type": "integer", "minimum": 1, "maximum": 100, "default": 42},
            "ok": {"type": "boolean", "default": true},
            "pet": {"type": "string", "enum": ["p1", "p2"], "enumNames": ["Cats", "Dogs"]},
            "hero": {"type": "string", "oneOf": [{"const": "h1", "title": "Superman"}]},
            "fish": {"type": "array", "maxItems": 2,
                     "items": {"anyOf": [{"const": "f1", "title": "Tuna"}, {"const": "f2"}]}},
        }}));
        assert_eq!(form.fields.len(), 7);
        assert_eq!(form.fields[0].name, "name", "a required field comes first");
        let field = |name: &str| form.fields.iter().find(|f| f.name == name).unwrap();
        assert!(field("name").required);
        assert_eq!(field("name").label(), "Name");
        let FieldKind::Choice { options, .. } = &field("pet").kind else { panic!() };
        assert_eq!(options[1].label(), "Dogs");
        let FieldKind::Choices { options, .. } = &field("fish").kind else { panic!() };
        assert_eq!(options[0].label(), "Tuna");
        assert_eq!(options[1].label(), "f2");
    }

    #[test]
    fn an_answer_gets_its_defaults_and_is_refused_when_it_does_not_fit() {
        let form = form(json!({"type": "object", "required": ["name"], "properties": {
            "name": {"type": "string", "maxLength": 5},
            "email": {"type": "string", "format": "email"},
            "age": {"type": "integer", "minimum": 1, "maximum": 100, "default": 42},
            "fish": {"type": "array", "maxItems": 1, "items": {"enum": ["f1", "f2"]}},
        }}));
        let sent = form.check(&answer(json!({"name": "Ada"}))).unwrap();
        assert_eq!(Value::Object(sent), json!({"name": "Ada", "age": 42}));

        let refused = |value: Value| form.check(&answer(value)).unwrap_err();
        assert_eq!(refused(json!({})), "name is required");
        assert!(refused(json!({"name": "Adalbert"})).contains("at most 5"));
        assert!(refused(json!({"name": "A", "email": "no"})).contains("email address"));
        assert!(refused(json!({"name": "A", "age": 4.5})).contains("whole number"));
        assert!(refused(json!({"name": "A", "age": 101})).contains("100 or less"));
        assert!(refused(json!({"name": "A", "fish": ["f1", "f2"]})).contains("at most 1"));
        assert!(refused(json!({"name": "A", "fish": ["f9"]})).contains("from the options"));
        assert!(refused(json!({"name": "A", "extra": 1})).contains("no field"));
    }

    #[test]
    fn a_schema_asking_for_what_a_form_cannot_show_is_refused_whole() {
        let bad = |schema: Value| QuestionForm::from_request("m", &schema).unwrap_err();
        assert!(
            bad(json!({"type": "object", "properties": {"o": {"type": "object"}}}))
                .contains("\"o\" is of type \"object\"")
        );
        assert!(
            bad(json!({"type": "object", "properties": {"l": {"type": "array",
            "items": {"type": "string"}}}}))
            .contains("free values")
        );
        assert!(bad(json!([1])).contains("not a JSON object"));
        let many: Map<String, Value> =
            (0..=MAX_FIELDS).map(|i| (format!("f{i}"), json!({"type": "string"}))).collect();
        assert!(bad(json!({"type": "object", "properties": many})).contains("at most 50"));
    }

    #[test]
    fn dates_and_times_are_read_as_rfc_3339() {
        assert!(TextFormat::Date.check("2026-12-07").is_ok());
        assert!(TextFormat::Date.check("2026-13-07").is_err());
        assert!(TextFormat::DateTime.check("2026-12-07T14:30:00Z").is_ok());
        assert!(TextFormat::DateTime.check("2026-12-07T14:30:00.5+01:00").is_ok());
        assert!(TextFormat::DateTime.check("2026-12-07T14:30").is_err());
        assert!(TextFormat::Uri.check("https://example.org/x").is_ok());
        assert!(TextFormat::Uri.check("not an address").is_err());
    }
}
