//! MCP Apps (the `io.modelcontextprotocol/ui` extension): a tool may come with an interactive
//! view, an HTML document the server serves as a `ui://` resource. This module reads what a
//! tool's definition says of its view and what the view's document says of itself; it never
//! decides what a view may reach (that is the instance's policy, built from [`ViewDomains`]).

use base64::Engine as _;
use serde::{Deserialize, Serialize};
use serde_json::Value;
use sha2::{Digest, Sha256};

/// The extension's identifier, declared in the client's capabilities.
pub const UI_EXTENSION_ID: &str = "io.modelcontextprotocol/ui";

/// The MIME type of a view's document.
pub const VIEW_MIME_TYPE: &str = "text/html;profile=mcp-app";

/// The largest view document kept, in bytes. Views are whole single-file web apps: the
/// extension's own examples weigh from 200 KiB (a clock) to 4.2 MiB (a PDF viewer).
pub const MAX_VIEW_BYTES: usize = 8 * 1024 * 1024;

/// Distinct views read per snapshot; tools naming more share none.
pub const MAX_VIEWS: usize = 32;

/// The longest `ui://` address accepted.
const MAX_VIEW_URI_BYTES: usize = 1024;

/// A domain list's longest length kept.
const MAX_DOMAINS: usize = 32;

/// What a tool's definition says of its view (`_meta.ui`).
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct ToolView {
    /// The `ui://` resource holding the view's document.
    pub resource_uri: String,
    /// Whether the model is offered the tool (`visibility` names `model`, or is absent).
    pub for_model: bool,
    /// Whether the view may call the tool (`visibility` names `app`, or is absent).
    pub for_view: bool,
    /// Hex SHA-256 of the view's document as read with the snapshot; `None` when it could not
    /// be read (the tool works, without its view).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub document_hash: Option<String>,
}

impl ToolView {
    /// Reads `_meta.ui` of a tool's JSON (and the older flat `_meta["ui/resourceUri"]`).
    /// `None` when the tool has no view or names an address that is not `ui://`.
    pub(crate) fn from_tool_json(raw: &Value) -> Option<ToolView> {
        let meta = raw.get("_meta")?;
        let ui = meta.get("ui");
        let uri = ui
            .and_then(|ui| ui.get("resourceUri"))
            .or_else(|| meta.get("ui/resourceUri"))
            .and_then(Value::as_str)?;
        if !uri.starts_with("ui://") || uri.len() > MAX_VIEW_URI_BYTES {
            return None;
        }
        let visibility: Option<Vec<&str>> = ui
            .and_then(|ui| ui.get("visibility"))
            .and_then(Value::as_array)
            .map(|list| list.iter().filter_map(Value::as_str).collect());
        let (for_model, for_view) = match visibility {
            None => (true, true),
            Some(list) => (list.contains(&"model"), list.contains(&"app")),
        };
        Some(ToolView { resource_uri: uri.to_owned(), for_model, for_view, document_hash: None })
    }
}

/// The outside addresses a view's document declares it needs (`_meta.ui.csp`), as declared:
/// untrusted, unfiltered. The instance keeps only what its policy allows.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct ViewDomains {
    /// Origins the view may connect to (`fetch`, WebSocket).
    #[serde(default)]
    pub connect: Vec<String>,
    /// Origins the view may load scripts, styles, images, fonts and media from.
    #[serde(default)]
    pub resource: Vec<String>,
    /// Origins the view may frame.
    #[serde(default)]
    pub frame: Vec<String>,
}

/// A view's document as read from its server.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct ViewDocument {
    /// Its `ui://` address.
    pub uri: String,
    /// The HTML.
    pub html: String,
    /// Hex SHA-256 of the HTML and its declarations: what ties a call's view to this document.
    pub hash: String,
    /// What it declares it needs.
    pub domains: ViewDomains,
    /// Whether it asks to be drawn with a border (`prefersBorder`), if it says.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub prefers_border: Option<bool>,
}

/// Why a view's document was not kept.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) enum ViewProblem {
    Missing,
    NotHtml(String),
    TooLarge(usize),
    Undecodable,
}

impl std::fmt::Display for ViewProblem {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            ViewProblem::Missing => {
                write!(f, "the server's answer holds no document at that address")
            }
            ViewProblem::NotHtml(mime) => {
                write!(f, "the document is {mime}, not {VIEW_MIME_TYPE}")
            }
            ViewProblem::TooLarge(bytes) => write!(
                f,
                "the document is {bytes} bytes, more than the {} MiB a view may be",
                MAX_VIEW_BYTES / (1024 * 1024)
            ),
            ViewProblem::Undecodable => write!(f, "the document is not valid UTF-8 text"),
        }
    }
}

/// Reads the view at `uri` out of a `resources/read` result.
pub(crate) fn document_from_read(uri: &str, result: &Value) -> Result<ViewDocument, ViewProblem> {
    let contents = result.get("contents").and_then(Value::as_array).ok_or(ViewProblem::Missing)?;
    let item = contents
        .iter()
        .find(|c| c.get("uri").and_then(Value::as_str) == Some(uri))
        .or_else(|| contents.first())
        .ok_or(ViewProblem::Missing)?;
    let mime = item.get("mimeType").and_then(Value::as_str).unwrap_or("");
    // The profile marks a view; a plain text/html document is taken as one too.
    let essence = mime.split(';').next().unwrap_or("").trim().to_ascii_lowercase();
    if essence != "text/html" {
        return Err(ViewProblem::NotHtml(if mime.is_empty() {
            "untyped".into()
        } else {
            mime.into()
        }));
    }
    let html = match (
        item.get("text").and_then(Value::as_str),
        item.get("blob").and_then(Value::as_str),
    ) {
        (Some(text), _) => {
            if text.len() > MAX_VIEW_BYTES {
                return Err(ViewProblem::TooLarge(text.len()));
            }
            text.to_owned()
        }
        (None, Some(blob)) => {
            if blob.len() / 4 * 3 > MAX_VIEW_BYTES {
                return Err(ViewProblem::TooLarge(blob.len() / 4 * 3));
            }
            let bytes = base64::engine::general_purpose::STANDARD
                .decode(blob)
                .map_err(|_| ViewProblem::Undecodable)?;
            String::from_utf8(bytes).map_err(|_| ViewProblem::Undecodable)?
        }
        (None, None) => return Err(ViewProblem::Missing),
    };
    let ui = item.pointer("/_meta/ui");
    let csp = ui.and_then(|ui| ui.get("csp"));
    let domains = ViewDomains {
        connect: domain_list(csp, "connectDomains"),
        resource: domain_list(csp, "resourceDomains"),
        frame: domain_list(csp, "frameDomains"),
    };
    let prefers_border = ui.and_then(|ui| ui.get("prefersBorder")).and_then(Value::as_bool);
    let mut hasher = Sha256::new();
    hasher.update(html.as_bytes());
    hasher.update(b"\n");
    hasher.update(serde_json::to_string(&domains).unwrap_or_default().as_bytes());
    Ok(ViewDocument {
        uri: uri.to_owned(),
        html,
        hash: hex::encode(hasher.finalize()),
        domains,
        prefers_border,
    })
}

fn domain_list(csp: Option<&Value>, key: &str) -> Vec<String> {
    csp.and_then(|csp| csp.get(key))
        .and_then(Value::as_array)
        .map(|list| {
            list.iter()
                .filter_map(Value::as_str)
                .filter(|d| d.len() <= 256)
                .take(MAX_DOMAINS)
                .map(str::to_owned)
                .collect()
        })
        .unwrap_or_default()
}

/// A tool's definition hash with its view's document folded in: a changed view is a changed
/// definition, so what the person consented to is reviewed again.
pub(crate) fn fold_view_hash(definition_hash: &str, document_hash: &str) -> String {
    let mut hasher = Sha256::new();
    hasher.update(definition_hash.as_bytes());
    hasher.update(b"\nview:");
    hasher.update(document_hash.as_bytes());
    hex::encode(hasher.finalize())
}

#[cfg(test)]
mod tests {
    use serde_json::json;

    use super::*;

    #[test]
    fn a_tools_view_and_who_sees_the_tool_are_read_from_its_meta() {
        let tool = json!({"name": "t", "_meta": {"ui": {"resourceUri": "ui://t/app.html"}}});
        let view = ToolView::from_tool_json(&tool).unwrap();
        assert_eq!(view.resource_uri, "ui://t/app.html");
        assert!(view.for_model && view.for_view);
        let only_view = json!({"name": "t", "_meta": {"ui": {"resourceUri": "ui://t/a", "visibility": ["app"]}}});
        let view = ToolView::from_tool_json(&only_view).unwrap();
        assert!(!view.for_model && view.for_view);
        let legacy = json!({"name": "t", "_meta": {"ui/resourceUri": "ui://t/old"}});
        assert_eq!(ToolView::from_tool_json(&legacy).unwrap().resource_uri, "ui://t/old");
        // Only ui:// addresses are views: a web page is not read as one.
        let web = json!({"name": "t", "_meta": {"ui": {"resourceUri": "https://example.com/"}}});
        assert_eq!(ToolView::from_tool_json(&web), None);
        assert_eq!(ToolView::from_tool_json(&json!({"name": "t"})), None);
    }

    #[test]
    fn a_document_is_html_within_the_bound_and_its_declarations_are_kept_as_declared() {
        let read = json!({"contents": [{
            "uri": "ui://t/a", "mimeType": VIEW_MIME_TYPE, "text": "<p>hi</p>",
            "_meta": {"ui": {"csp": {"connectDomains": ["https://api.example.com"],
                                      "resourceDomains": ["https://cdn.example.com"]},
                             "prefersBorder": true}}
        }]});
        let doc = document_from_read("ui://t/a", &read).unwrap();
        assert_eq!(doc.html, "<p>hi</p>");
        assert_eq!(doc.domains.connect, ["https://api.example.com"]);
        assert_eq!(doc.domains.resource, ["https://cdn.example.com"]);
        assert_eq!(doc.prefers_border, Some(true));
        // The declarations are part of what the hash ties a view to.
        let mut other = read.clone();
        other["contents"][0]["_meta"]["ui"]["csp"]["connectDomains"] =
            json!(["https://evil.example"]);
        assert_ne!(document_from_read("ui://t/a", &other).unwrap().hash, doc.hash);

        let blob = json!({"contents": [{"uri": "ui://t/a", "mimeType": "text/html",
            "blob": base64::engine::general_purpose::STANDARD.encode("<b>x</b>")}]});
        assert_eq!(document_from_read("ui://t/a", &blob).unwrap().html, "<b>x</b>");
        let png =
            json!({"contents": [{"uri": "ui://t/a", "mimeType": "image/png", "blob": "AAAA"}]});
        assert!(matches!(document_from_read("ui://t/a", &png), Err(ViewProblem::NotHtml(_))));
        let huge = json!({"contents": [{"uri": "ui://t/a", "mimeType": "text/html",
            "text": "x".repeat(MAX_VIEW_BYTES + 1)}]});
        assert!(matches!(document_from_read("ui://t/a", &huge), Err(ViewProblem::TooLarge(_))));
        assert_eq!(document_from_read("ui://t/a", &json!({})), Err(ViewProblem::Missing));
    }
}
