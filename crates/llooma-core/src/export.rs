//! One conversation taken out of Llooma: as Markdown to read or keep, or as JSON holding all of
//! it (messages, each reply's timeline, and what files were attached).
//!
//! Both are built from what `GET /api/v1/conversations/{id}` shows, so an export never holds
//! more or less than the person sees. Files are listed (name, kind, size, id), not embedded:
//! each downloads from the instance on its own.

use std::collections::HashMap;
use std::fmt::Write as _;

use llooma_types::{ConversationDetail, EndState, Reply, ReplyPart, Step, StepState};
use serde_json::{Value, json};

use crate::app::App;
use crate::engine::html::one_line;
use crate::error::AppError;

/// What a conversation is exported as.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum ExportFormat {
    Markdown,
    Json,
}

impl ExportFormat {
    /// `markdown` (or `md`) and `json`, as a query names them.
    pub fn parse(name: &str) -> Result<Self, AppError> {
        match name {
            "markdown" | "md" => Ok(ExportFormat::Markdown),
            "json" => Ok(ExportFormat::Json),
            other => Err(AppError::invalid(
                "invalid_format",
                format!("A conversation exports as markdown or json, not {other:?}."),
            )),
        }
    }
}

/// An export ready to download.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Exported {
    /// A file name made of the title (letters, digits, `-` and `_` only).
    pub file_name: String,
    pub content_type: &'static str,
    pub body: String,
}

/// The format's version in a JSON export: raised when its shape changes incompatibly.
pub const JSON_EXPORT_VERSION: u32 = 1;

/// Conversations read per page while an account is archived.
const ARCHIVE_PAGE: u64 = 200;

impl App {
    /// The account's conversation `id` as `format`. `NotFound` when it is not the account's.
    pub async fn export_conversation(
        &self,
        account_id: &str,
        id: &str,
        format: ExportFormat,
    ) -> Result<Exported, AppError> {
        let detail = self.conversation_detail(account_id, id).await?;
        let exported_at = llooma_store::ms_to_rfc3339(llooma_store::now_ms());
        let exported_at = exported_at.as_str();
        let stem = file_stem(&detail.conversation.title);
        Ok(match format {
            ExportFormat::Markdown => Exported {
                file_name: format!("{stem}.md"),
                content_type: "text/markdown; charset=utf-8",
                body: markdown(&detail, exported_at),
            },
            ExportFormat::Json => Exported {
                file_name: format!("{stem}.json"),
                content_type: "application/json",
                body: serde_json::to_string_pretty(&json_export(&detail, exported_at))
                    .map_err(|e| AppError::Internal(format!("writing an export: {e}")))?,
            },
        })
    }
}

impl App {
    /// Everything of the account as one JSON file: its conversations (each as a conversation's
    /// JSON export), personas with their memory, prompts, MCP servers (never their tokens),
    /// tool settings and preferences. Files are listed in their messages, not embedded.
    pub async fn export_account(&self, account_id: &str) -> Result<Exported, AppError> {
        let account = self.store.account(account_id).await?.ok_or(AppError::NotFound)?;
        let exported_at = llooma_store::ms_to_rfc3339(llooma_store::now_ms());
        let mut conversations = Vec::new();
        let mut before: Option<(i64, String)> = None;
        loop {
            let cursor = before.as_ref().map(|(at, id)| (*at, id.as_str()));
            let page = self.store.list_conversations(account_id, cursor, ARCHIVE_PAGE).await?;
            for conversation in &page {
                let detail = self.conversation_detail(account_id, &conversation.id).await?;
                conversations.push(json_export(&detail, &exported_at));
            }
            match page.last() {
                Some(last) if page.len() as u64 == ARCHIVE_PAGE => {
                    before = Some((last.updated_at_ms, last.id.clone()));
                }
                _ => break,
            }
        }
        let mut personas = Vec::new();
        for persona in self.store.personas(account_id).await? {
            let memory: Vec<Value> = self
                .store
                .memory_notes(&persona.id)
                .await?
                .into_iter()
                .map(|note| {
                    json!({"content": note.content, "createdAt": llooma_store::ms_to_rfc3339(note.created_at_ms)})
                })
                .collect();
            personas.push(json!({
                "name": persona.name, "prompt": persona.prompt,
                "memoryEnabled": persona.memory_enabled, "memory": memory,
            }));
        }
        let prompts: Vec<Value> = self
            .store
            .tool_wordings(account_id)
            .await?
            .into_iter()
            .map(|(tool, description)| json!({"tool": tool, "description": description}))
            .collect();
        // Addresses and switches only: a token is a secret of the instance's, never written out.
        let servers: Vec<Value> = self
            .store
            .list_mcp_servers(account_id)
            .await?
            .into_iter()
            .map(|server| {
                json!({
                    "label": server.label, "url": server.address, "enabled": server.enabled,
                    "hadToken": server.token_ciphertext.is_some(),
                })
            })
            .collect();
        let tools = self.store.tool_settings(account_id).await?;
        let preferences = self.store.preferences(account_id).await?;
        let archive = json!({
            "format": "llooma.account",
            "version": JSON_EXPORT_VERSION,
            "exportedAt": exported_at,
            "account": {"username": account.username, "displayName": account.display_name},
            "conversations": conversations,
            "personas": personas,
            "prompts": prompts,
            "mcpServers": servers,
            "settings": {
                "toolBudget": tools.tool_budget, "mcpEverywhere": tools.mcp_everywhere,
                "announceMode": tools.announce_mode,
                "titlesFromModel": preferences.titles_from_model,
            },
        });
        Ok(Exported {
            file_name: format!("llooma-{}.json", file_stem(&account.username)),
            content_type: "application/json",
            body: serde_json::to_string(&archive)
                .map_err(|e| AppError::Internal(format!("writing an archive: {e}")))?,
        })
    }
}

/// The title as a file name: what a file system takes everywhere, never empty.
fn file_stem(title: &str) -> String {
    let mut stem = String::new();
    for c in title.chars() {
        if c.is_alphanumeric() || c == '-' || c == '_' {
            stem.push(c);
        } else if !stem.ends_with('-') {
            stem.push('-');
        }
        if stem.chars().count() >= 60 {
            break;
        }
    }
    let stem = stem.trim_matches('-');
    if stem.is_empty() { "conversation".to_owned() } else { stem.to_owned() }
}

/// The whole conversation as data: what `GET /api/v1/conversations/{id}` gives, finished
/// replies only, under a name and version of its own.
pub fn json_export(detail: &ConversationDetail, exported_at: &str) -> Value {
    json!({
        "format": "llooma.conversation",
        "version": JSON_EXPORT_VERSION,
        "exportedAt": exported_at,
        "conversation": detail.conversation,
        "messages": detail.messages,
        "replies": detail.replies,
    })
}

/// The conversation to read: each message under who wrote it and when, each reply with the
/// steps its timeline shows (tools called, cards answered), its thinking left out.
pub fn markdown(detail: &ConversationDetail, exported_at: &str) -> String {
    let conversation = &detail.conversation;
    let replies: HashMap<&str, &Reply> =
        detail.replies.iter().map(|r| (r.turn_id.as_str(), r)).collect();
    let mut out = String::new();
    let _ = writeln!(out, "# {}\n", one_line(&conversation.title));
    let model = conversation.model.as_deref().unwrap_or("no model chosen");
    let _ = writeln!(
        out,
        "_Exported from Llooma on {exported_at}. Model: {model}. Started {}._\n",
        conversation.created_at
    );
    for message in &detail.messages {
        let reply = message.turn_id.as_deref().and_then(|t| replies.get(t)).copied();
        if message.role == "user" {
            let _ = writeln!(out, "## You · {}\n", message.created_at);
            let _ = writeln!(out, "{}\n", message.content.trim_end());
            for file in &message.files {
                let _ =
                    writeln!(out, "- Attached: {} ({}, {} bytes)", file.name, file.kind, file.size);
            }
            if !message.files.is_empty() {
                out.push('\n');
            }
            continue;
        }
        let who = reply.and_then(|r| r.model.as_deref()).unwrap_or(model);
        let _ = writeln!(out, "## {who} · {}\n", message.created_at);
        match reply {
            Some(reply) => reply_markdown(&mut out, reply),
            None => {
                let _ = writeln!(out, "{}\n", message.content.trim_end());
            }
        }
    }
    out
}

fn reply_markdown(out: &mut String, reply: &Reply) {
    for part in &reply.parts {
        match part {
            ReplyPart::Text { text } if !text.trim().is_empty() => {
                let _ = writeln!(out, "{}\n", text.trim_end());
            }
            ReplyPart::Step { step } => {
                let _ = writeln!(out, "> {}\n", step_line(step));
            }
            _ => {}
        }
    }
    match reply.state {
        Some(EndState::Stopped) => out.push_str("_(stopped)_\n\n"),
        Some(EndState::Failed) => {
            let why = reply.error.as_deref().unwrap_or("no reason given");
            let _ = writeln!(out, "_(failed: {})_\n", one_line(why));
        }
        _ => {}
    }
}

/// A step as one line: what was used, and what became of it.
fn step_line(step: &Step) -> String {
    let tool = step.server_tool.as_deref().or(step.tool.as_deref()).unwrap_or("a tool");
    let what = match &step.server {
        Some(server) => format!("{server} · {tool}"),
        None => tool.to_owned(),
    };
    let state = match step.state {
        StepState::Done | StepState::Allowed => "done",
        StepState::Refused => "refused",
        StepState::Expired => "not answered in time",
        StepState::Interrupted => "interrupted",
        StepState::Failed | StepState::Invalid => "failed",
        StepState::Opened => "its tools offered",
        _ => "unfinished",
    };
    let mut line = format!("Tool: {what} — {state}");
    if let Some(question) = step.question.as_deref().filter(|q| !q.trim().is_empty()) {
        let _ = write!(line, " (asked: \"{}\")", one_line(question));
    }
    if let Some(error) = step.error.as_deref() {
        let _ = write!(line, ": {}", one_line(error));
    }
    line
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_title_becomes_a_file_name_any_system_takes() {
        assert_eq!(file_stem("Trip to Zürich: plans/ideas?"), "Trip-to-Zürich-plans-ideas");
        assert_eq!(file_stem("../../etc/passwd"), "etc-passwd");
        assert_eq!(file_stem("   "), "conversation");
        assert_eq!(file_stem(&"a".repeat(200)).len(), 60);
    }

    #[test]
    fn unknown_formats_are_refused_with_the_ones_there_are() {
        assert_eq!(ExportFormat::parse("md").unwrap(), ExportFormat::Markdown);
        let err = ExportFormat::parse("pdf").unwrap_err().to_string();
        assert!(err.contains("markdown or json"), "{err}");
    }
}
