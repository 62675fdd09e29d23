//! Conversations brought into an account from a file: a conversation Llooma exported as JSON
//! (`llooma.conversation`), or ChatGPT's `conversations.json` (its data export). Each becomes a
//! conversation of the account with its messages and their times; the person and the model's
//! words only (a tool's output, a system message, an image are left out and counted). What was
//! brought in and what was not is reported.
//!
//! ChatGPT keeps a conversation as a tree of messages (`mapping`, each node naming its
//! `parent`), every edit and regeneration a branch; the branch brought in is the one it shows,
//! from `current_node` up to the root.

use std::collections::HashMap;

use llooma_store::{ImportedConversation, ImportedMessage};
use llooma_types::{ImportReport, ImportSkipped};
use serde::Deserialize;
use serde_json::Value;

use crate::app::App;
use crate::error::AppError;

/// The largest file taken, in bytes.
pub const MAX_IMPORT_BYTES: u64 = 64 * 1024 * 1024;

/// The most conversations one file brings in.
pub const MAX_IMPORTED_CONVERSATIONS: usize = 20_000;

/// A message longer than this is cut (and says so).
pub const MAX_IMPORTED_MESSAGE_BYTES: usize = 1024 * 1024;

/// The longest title kept, in characters.
const MAX_TITLE_CHARS: usize = 200;

/// What a file holds, read: the conversations to store, and what was left out.
#[derive(Debug, Default)]
pub struct Parsed {
    pub conversations: Vec<ImportedConversation>,
    pub skipped: Vec<ImportSkipped>,
    /// Messages left out of conversations that were brought in.
    pub skipped_messages: usize,
    /// What the file was: `llooma` (a conversation), `llooma-account` (an account's archive)
    /// or `chatgpt`.
    pub source: &'static str,
    /// An archive's personas: name, prompt, whether memory is on.
    pub personas: Vec<(String, String, bool)>,
}

/// Reads a file of conversations; an error says what the file should be.
pub fn parse(bytes: &[u8]) -> Result<Parsed, AppError> {
    let not_ours = || {
        AppError::invalid(
            "invalid_import",
            "This file is neither a conversation exported from Llooma as JSON nor ChatGPT's \
             conversations.json (in the zip ChatGPT's data export sends): choose one of those.",
        )
    };
    let first = bytes.iter().find(|b| !b.is_ascii_whitespace()).ok_or_else(not_ours)?;
    match first {
        b'[' => {
            let all: Vec<ChatGptConversation> =
                serde_json::from_slice(bytes).map_err(|e| broken("ChatGPT export", &e))?;
            Ok(from_chatgpt(all))
        }
        b'{' => {
            let kind: Kind =
                serde_json::from_slice(bytes).map_err(|e| broken("Llooma export", &e))?;
            if kind.version > crate::export::JSON_EXPORT_VERSION {
                return Err(AppError::invalid(
                    "invalid_import",
                    format!(
                        "This export was written by a newer Llooma (format version {}); \
                         update this instance to bring it in.",
                        kind.version
                    ),
                ));
            }
            match kind.format.as_str() {
                "llooma.conversation" => {
                    let export: LloomaExport =
                        serde_json::from_slice(bytes).map_err(|e| broken("Llooma export", &e))?;
                    let mut parsed = Parsed { source: "llooma", ..Parsed::default() };
                    from_llooma(&mut parsed, export);
                    Ok(parsed)
                }
                "llooma.account" => {
                    let archive: LloomaArchive = serde_json::from_slice(bytes)
                        .map_err(|e| broken("Llooma account archive", &e))?;
                    let mut parsed = Parsed { source: "llooma-account", ..Parsed::default() };
                    for export in archive.conversations {
                        from_llooma(&mut parsed, export);
                    }
                    parsed.personas = archive
                        .personas
                        .into_iter()
                        .map(|p| (p.name, p.prompt, p.memory_enabled))
                        .collect();
                    Ok(parsed)
                }
                _ => Err(not_ours()),
            }
        }
        _ => Err(not_ours()),
    }
}

fn broken(what: &str, error: &serde_json::Error) -> AppError {
    AppError::invalid(
        "invalid_import",
        format!(
            "This file looks like a {what} but cannot be read (line {}, column {}: {error}); \
             export it again.",
            error.line(),
            error.column()
        ),
    )
}

/// What a Llooma file is, read first.
#[derive(Deserialize)]
struct Kind {
    #[serde(default)]
    format: String,
    #[serde(default)]
    version: u32,
}

#[derive(Deserialize)]
struct LloomaArchive {
    #[serde(default)]
    conversations: Vec<LloomaExport>,
    #[serde(default)]
    personas: Vec<LloomaPersona>,
}

#[derive(Deserialize)]
#[serde(rename_all = "camelCase")]
struct LloomaPersona {
    name: String,
    prompt: String,
    #[serde(default)]
    memory_enabled: bool,
}

#[derive(Deserialize)]
struct LloomaExport {
    conversation: LloomaConversation,
    #[serde(default)]
    messages: Vec<LloomaMessage>,
}

#[derive(Deserialize)]
#[serde(rename_all = "camelCase")]
struct LloomaConversation {
    title: String,
    created_at: Option<String>,
}

#[derive(Deserialize)]
#[serde(rename_all = "camelCase")]
struct LloomaMessage {
    role: String,
    content: String,
    created_at: Option<String>,
}

fn ms_of(rfc3339: Option<&str>) -> Option<i64> {
    chrono::DateTime::parse_from_rfc3339(rfc3339?).ok().map(|t| t.timestamp_millis())
}

fn from_llooma(parsed: &mut Parsed, export: LloomaExport) {
    let now = llooma_store::now_ms();
    let created = ms_of(export.conversation.created_at.as_deref()).unwrap_or(now);
    let mut messages = Vec::with_capacity(export.messages.len());
    for m in export.messages {
        let role = match m.role.as_str() {
            "user" => "user",
            "assistant" => "assistant",
            _ => {
                parsed.skipped_messages += 1;
                continue;
            }
        };
        let at = ms_of(m.created_at.as_deref()).unwrap_or(created);
        messages.push(ImportedMessage { role, content: bounded(m.content), created_at_ms: at });
    }
    let name = title(&export.conversation.title);
    if parsed.conversations.len() >= MAX_IMPORTED_CONVERSATIONS {
        let reason = format!("a file brings at most {MAX_IMPORTED_CONVERSATIONS} conversations");
        parsed.skipped.push(ImportSkipped { title: name, reason });
        return;
    }
    add(parsed, name, created, messages);
}

#[derive(Deserialize)]
struct ChatGptConversation {
    #[serde(default)]
    title: Option<String>,
    #[serde(default)]
    create_time: Option<f64>,
    #[serde(default)]
    mapping: HashMap<String, ChatGptNode>,
    #[serde(default)]
    current_node: Option<String>,
}

#[derive(Deserialize)]
struct ChatGptNode {
    #[serde(default)]
    message: Option<ChatGptMessage>,
    #[serde(default)]
    parent: Option<String>,
}

#[derive(Deserialize)]
struct ChatGptMessage {
    author: ChatGptAuthor,
    #[serde(default)]
    create_time: Option<f64>,
    #[serde(default)]
    content: Option<ChatGptContent>,
    #[serde(default)]
    metadata: Option<ChatGptMetadata>,
}

/// Of a message's metadata (often large: search results, citations) only what is read.
#[derive(Deserialize)]
struct ChatGptMetadata {
    #[serde(default)]
    is_visually_hidden_from_conversation: Option<bool>,
}

#[derive(Deserialize)]
struct ChatGptAuthor {
    role: String,
}

#[derive(Deserialize)]
struct ChatGptContent {
    #[serde(default)]
    content_type: String,
    #[serde(default)]
    parts: Vec<Value>,
    #[serde(default)]
    text: Option<String>,
    #[serde(default)]
    language: Option<String>,
}

fn seconds_to_ms(seconds: Option<f64>) -> Option<i64> {
    seconds.filter(|s| s.is_finite() && *s > 0.0).map(|s| (s * 1000.0) as i64)
}

fn from_chatgpt(all: Vec<ChatGptConversation>) -> Parsed {
    let mut parsed = Parsed { source: "chatgpt", ..Parsed::default() };
    let now = llooma_store::now_ms();
    for conversation in all {
        let name = title(conversation.title.as_deref().unwrap_or_default());
        if parsed.conversations.len() >= MAX_IMPORTED_CONVERSATIONS {
            let reason =
                format!("a file brings at most {MAX_IMPORTED_CONVERSATIONS} conversations");
            parsed.skipped.push(ImportSkipped { title: name, reason });
            continue;
        }
        let created = seconds_to_ms(conversation.create_time).unwrap_or(now);
        // The branch shown: from the current node up to the root (a cycle ends the walk).
        let mut branch = Vec::new();
        let mut at = conversation.current_node.clone();
        while let Some(id) = at {
            let Some(node) = conversation.mapping.get(&id) else { break };
            if branch.len() > conversation.mapping.len() {
                break;
            }
            branch.push(node);
            at = node.parent.clone();
        }
        branch.reverse();
        let mut messages: Vec<ImportedMessage> = Vec::new();
        for message in branch.into_iter().filter_map(|n| n.message.as_ref()) {
            let hidden = message
                .metadata
                .as_ref()
                .is_some_and(|m| m.is_visually_hidden_from_conversation == Some(true));
            let role = match message.author.role.as_str() {
                "user" => "user",
                "assistant" => "assistant",
                // The system prompt and tools' output: not the conversation's words.
                _ => {
                    parsed.skipped_messages += usize::from(!hidden);
                    continue;
                }
            };
            let Some(text) = message.content.as_ref().and_then(chatgpt_text) else {
                parsed.skipped_messages += usize::from(!hidden);
                continue;
            };
            if hidden || text.trim().is_empty() {
                continue;
            }
            let at = seconds_to_ms(message.create_time).unwrap_or(created);
            match messages.last_mut() {
                // An answer in several parts (around a tool's use) is one answer here.
                Some(last) if last.role == role => {
                    last.content.push_str("\n\n");
                    last.content.push_str(&text);
                    last.content = bounded(std::mem::take(&mut last.content));
                }
                _ => messages.push(ImportedMessage {
                    role,
                    content: bounded(text),
                    created_at_ms: at,
                }),
            }
        }
        if messages.is_empty() {
            parsed
                .skipped
                .push(ImportSkipped { title: name, reason: "it holds no message".into() });
            continue;
        }
        add(&mut parsed, name, created, messages);
    }
    parsed
}

/// The words of a ChatGPT message: its text parts (an image, a file or audio is named, not
/// brought), or its code; `None` for what is not words (a browsing display, thoughts).
fn chatgpt_text(content: &ChatGptContent) -> Option<String> {
    match content.content_type.as_str() {
        "text" | "multimodal_text" => {
            let words: Vec<String> = content
                .parts
                .iter()
                .map(|part| match part {
                    Value::String(text) => text.clone(),
                    other => {
                        let kind = other["content_type"].as_str().unwrap_or("attachment");
                        format!("[{} not imported]", kind.replace('_', " "))
                    }
                })
                .filter(|t| !t.is_empty())
                .collect();
            Some(words.join("\n"))
        }
        "code" => {
            let language = content.language.as_deref().filter(|l| *l != "unknown").unwrap_or("");
            Some(format!("```{language}\n{}\n```", content.text.as_deref().unwrap_or_default()))
        }
        _ => None,
    }
}

/// Adds a conversation whose messages' times only move forward (the order they are shown in).
fn add(parsed: &mut Parsed, title: String, created: i64, mut messages: Vec<ImportedMessage>) {
    let mut last = created - 1;
    for m in &mut messages {
        m.created_at_ms = m.created_at_ms.max(last + 1);
        last = m.created_at_ms;
    }
    parsed.conversations.push(ImportedConversation { title, created_at_ms: created, messages });
}

fn title(text: &str) -> String {
    let text = text.trim();
    if text.is_empty() {
        return "Imported conversation".to_owned();
    }
    text.chars().take(MAX_TITLE_CHARS).collect()
}

fn bounded(text: String) -> String {
    if text.len() <= MAX_IMPORTED_MESSAGE_BYTES {
        return text;
    }
    crate::context_window::cut_to(&text, MAX_IMPORTED_MESSAGE_BYTES)
}

impl App {
    /// Brings the file's conversations into the account, each whole or not at all, with the
    /// model a new conversation of the account starts with; reports what came in and what did
    /// not.
    pub async fn import_conversations(
        &self,
        account_id: &str,
        bytes: Vec<u8>,
    ) -> Result<ImportReport, AppError> {
        let parsed = parse(&bytes)?;
        // The file is not needed any more: not held beside what is stored from it.
        drop(bytes);
        let (provider_id, model) = self.starting_model(account_id).await?.unzip();
        let mut report = ImportReport {
            source: parsed.source.to_owned(),
            skipped: parsed.skipped,
            skipped_messages: parsed.skipped_messages,
            ..ImportReport::default()
        };
        for (name, prompt, memory) in &parsed.personas {
            match self.store.create_persona(account_id, name, prompt, *memory).await {
                Ok(_) => report.personas += 1,
                Err(err) => {
                    let reason = match err {
                        llooma_store::StoreError::NameTaken => "you have a persona of that name",
                        _ => "it could not be stored; try the file again",
                    };
                    let title = format!("persona {name}");
                    report.skipped.push(ImportSkipped { title, reason: reason.to_owned() });
                }
            }
        }
        for conversation in &parsed.conversations {
            let stored = self
                .store
                .import_conversation(account_id, provider_id.clone(), model.clone(), conversation)
                .await;
            match stored {
                Ok(_) => {
                    report.conversations += 1;
                    report.messages += conversation.messages.len();
                }
                Err(err) => {
                    tracing::warn!(account = %account_id, error = %err, "importing a conversation failed");
                    report.skipped.push(ImportSkipped {
                        title: conversation.title.clone(),
                        reason: "it could not be stored; try the file again".into(),
                    });
                }
            }
        }
        tracing::info!(
            account = %account_id,
            source = parsed.source,
            conversations = report.conversations,
            messages = report.messages,
            skipped = report.skipped.len(),
            "conversations imported"
        );
        Ok(report)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn chatgpt(json: Value) -> Parsed {
        parse(json.to_string().as_bytes()).unwrap()
    }

    fn node(id: &str, parent: Option<&str>, role: &str, content: Value, t: f64) -> (String, Value) {
        (
            id.to_owned(),
            serde_json::json!({
                "id": id, "parent": parent,
                "message": {"author": {"role": role}, "create_time": t, "content": content}
            }),
        )
    }

    #[test]
    fn chatgpt_s_branch_shown_is_brought_in_with_words_only() {
        let text = |s: &str| serde_json::json!({"content_type": "text", "parts": [s]});
        let mapping: serde_json::Map<String, Value> = [
            ("root".to_owned(), serde_json::json!({"id": "root", "parent": null, "message": null})),
            node("sys", Some("root"), "system", text(""), 1.0),
            node("q1", Some("sys"), "user", text("What is a kite?"), 10.0),
            node("a1-old", Some("q1"), "assistant", text("An old answer."), 11.0),
            node("a1", Some("q1"), "assistant", text("A bird, or a toy."), 12.0),
            node("tool", Some("a1"), "tool", text("search results"), 12.5),
            node(
                "q2",
                Some("tool"),
                "user",
                serde_json::json!({"content_type": "multimodal_text", "parts": [
                    {"content_type": "image_asset_pointer", "asset_pointer": "file-service://x"},
                    "And this one?"
                ]}),
                13.0,
            ),
            node("a2a", Some("q2"), "assistant", serde_json::json!({"content_type": "code", "language": "python", "text": "print(1)"}), 14.0),
            node("a2b", Some("a2a"), "assistant", text("That prints 1."), 15.0),
        ]
        .into_iter()
        .collect();
        let parsed = chatgpt(serde_json::json!([
            {"title": "Kites", "create_time": 9.0, "mapping": mapping, "current_node": "a2b"},
            {"title": "", "create_time": 1.0, "mapping": {}, "current_node": null},
        ]));
        assert_eq!(parsed.source, "chatgpt");
        assert_eq!(parsed.conversations.len(), 1);
        let kites = &parsed.conversations[0];
        assert_eq!((kites.title.as_str(), kites.created_at_ms), ("Kites", 9_000));
        let said: Vec<(&str, &str)> =
            kites.messages.iter().map(|m| (m.role, m.content.as_str())).collect();
        assert_eq!(
            said,
            [
                ("user", "What is a kite?"),
                ("assistant", "A bird, or a toy."),
                ("user", "[image asset pointer not imported]\nAnd this one?"),
                ("assistant", "```python\nprint(1)\n```\n\nThat prints 1."),
            ]
        );
        assert!(kites.messages.windows(2).all(|w| w[0].created_at_ms < w[1].created_at_ms));
        // The system message and the tool's output; the empty conversation, by name.
        assert_eq!(parsed.skipped_messages, 2);
        assert_eq!(parsed.skipped.len(), 1);
        assert_eq!(parsed.skipped[0].title, "Imported conversation");
    }

    #[test]
    fn a_llooma_export_comes_back_and_anything_else_is_refused_with_what_to_choose() {
        let export = serde_json::json!({
            "format": "llooma.conversation", "version": 1, "exportedAt": "2026-12-01T10:00:00Z",
            "conversation": {"title": "Tides", "createdAt": "2026-11-30T08:00:00Z"},
            "messages": [
                {"id": "m1", "role": "user", "content": "High tide?", "createdAt": "2026-11-30T08:00:01Z"},
                {"id": "m2", "role": "assistant", "content": "At noon.", "createdAt": "2026-11-30T08:00:02Z"}
            ],
            "replies": []
        });
        let parsed = parse(export.to_string().as_bytes()).unwrap();
        assert_eq!(parsed.source, "llooma");
        assert_eq!(parsed.conversations[0].messages.len(), 2);
        assert_eq!(parsed.conversations[0].title, "Tides");
        for bad in [
            &b"hello"[..],
            b"{\"format\": \"other\", \"version\": 1, \"conversation\": {\"title\": \"x\"}}",
            b"[{\"mapping\": 3}]",
            b"",
        ] {
            let err = parse(bad).unwrap_err().to_string();
            assert!(err.contains("export"), "{err}");
        }
        let newer = export.to_string().replace("\"version\":1", "\"version\":9");
        assert!(parse(newer.as_bytes()).unwrap_err().to_string().contains("newer Llooma"));
    }
}
