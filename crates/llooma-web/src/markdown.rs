//! A reply's Markdown as a view: the same function on the server (stored messages) and in the
//! browser (the streaming reply, rendered again as text arrives), so hydration finds the same tree.
//!
//! `pulldown-cmark` (no default features: no HTML writer) parses; the events become our own small
//! tree and then Leptos elements, so every text and attribute goes through Leptos's escaping and
//! nothing is ever set as HTML. Raw HTML in the reply is shown as text. Links keep only `http`,
//! `https` and `mailto` addresses (anything else is shown as its text) and open in a new tab with
//! `rel="noopener noreferrer nofollow"`; images become links to the image, never `<img>`. Code
//! blocks are highlighted by [`highlight`], a small tokenizer of ours (keywords, strings, comments,
//! numbers) for a few common languages, and carry a Copy button.

use leptos::html::custom;
use leptos::prelude::*;
use pulldown_cmark::{Alignment, CodeBlockKind, Event, HeadingLevel, Options, Parser, Tag, TagEnd};

/// One node of the parsed reply.
enum Node {
    Text(String),
    /// An element with at most one attribute.
    Element {
        tag: &'static str,
        attr: Option<(&'static str, String)>,
        children: Vec<Node>,
    },
    Link {
        href: String,
        title: Option<String>,
        children: Vec<Node>,
    },
    Code {
        language: String,
        code: String,
    },
}

impl Node {
    fn element(tag: &'static str) -> Node {
        Node::Element { tag, attr: None, children: Vec::new() }
    }

    fn with(tag: &'static str, name: &'static str, value: &str) -> Node {
        Node::Element { tag, attr: Some((name, value.to_owned())), children: Vec::new() }
    }
}

/// The tree being built: the open elements, innermost last.
struct Builder {
    stack: Vec<Node>,
    alignments: Vec<Alignment>,
    column: usize,
    in_head: bool,
}

impl Builder {
    fn push(&mut self, node: Node) {
        self.stack.push(node);
    }

    /// Closes the innermost open node into its parent.
    fn pop(&mut self) {
        if self.stack.len() < 2 {
            return;
        }
        if let Some(node) = self.stack.pop() {
            self.append(node);
        }
    }

    fn append(&mut self, node: Node) {
        match self.stack.last_mut() {
            Some(Node::Element { children, .. } | Node::Link { children, .. }) => {
                match (children.last_mut(), node) {
                    // Adjacent texts are one text node (the same on both sides of hydration).
                    (Some(Node::Text(last)), Node::Text(more)) => last.push_str(&more),
                    (_, node) => children.push(node),
                }
            }
            Some(Node::Code { code, .. }) => {
                if let Node::Text(text) = node {
                    code.push_str(&text);
                }
            }
            _ => {}
        }
    }

    fn text(&mut self, text: &str) {
        self.append(Node::Text(text.to_owned()));
    }

    fn start(&mut self, tag: Tag<'_>) {
        let node = match tag {
            Tag::Paragraph => Node::element("p"),
            Tag::Heading { level, .. } => Node::element(match level {
                HeadingLevel::H1 => "h1",
                HeadingLevel::H2 => "h2",
                HeadingLevel::H3 => "h3",
                HeadingLevel::H4 => "h4",
                HeadingLevel::H5 => "h5",
                HeadingLevel::H6 => "h6",
            }),
            Tag::BlockQuote(_) => Node::element("blockquote"),
            Tag::CodeBlock(kind) => {
                let language = match kind {
                    CodeBlockKind::Fenced(info) => info
                        .split(|c: char| c.is_whitespace() || c == ',')
                        .next()
                        .map_or_else(String::new, |word| {
                            word.chars()
                                .filter(|c| c.is_ascii_alphanumeric() || *c == '-' || *c == '+')
                                .collect::<String>()
                                .to_ascii_lowercase()
                        }),
                    CodeBlockKind::Indented => String::new(),
                };
                Node::Code { language, code: String::new() }
            }
            Tag::List(Some(first)) if first != 1 => Node::with("ol", "start", &first.to_string()),
            Tag::List(Some(_)) => Node::element("ol"),
            Tag::List(None) => Node::element("ul"),
            Tag::Item => Node::element("li"),
            Tag::Table(alignments) => {
                self.alignments = alignments;
                Node::element("table")
            }
            Tag::TableHead => {
                self.in_head = true;
                self.column = 0;
                self.push(Node::element("thead"));
                Node::element("tr")
            }
            Tag::TableRow => {
                self.column = 0;
                Node::element("tr")
            }
            Tag::TableCell => {
                let tag = if self.in_head { "th" } else { "td" };
                let class = match self.alignments.get(self.column) {
                    Some(Alignment::Left) => "align-left",
                    Some(Alignment::Center) => "align-center",
                    Some(Alignment::Right) => "align-right",
                    _ => "",
                };
                self.column += 1;
                if class.is_empty() { Node::element(tag) } else { Node::with(tag, "class", class) }
            }
            Tag::Emphasis => Node::element("em"),
            Tag::Strong => Node::element("strong"),
            Tag::Strikethrough => Node::element("del"),
            Tag::Link { dest_url, title, .. } | Tag::Image { dest_url, title, .. } => {
                match safe_url(&dest_url) {
                    Some(href) => Node::Link {
                        href,
                        title: (!title.is_empty()).then(|| title.into_string()),
                        children: Vec::new(),
                    },
                    None => Node::element("span"),
                }
            }
            // HTML blocks: their lines are shown as text.
            Tag::HtmlBlock => Node::with("p", "class", "raw"),
            Tag::FootnoteDefinition(_) | Tag::DefinitionList | Tag::DefinitionListTitle => {
                Node::element("div")
            }
            Tag::DefinitionListDefinition => Node::element("div"),
            Tag::MetadataBlock(_) | Tag::Superscript | Tag::Subscript => Node::element("span"),
        };
        self.push(node);
    }

    fn end(&mut self, tag: TagEnd) {
        match tag {
            TagEnd::TableHead => {
                self.pop();
                self.pop();
                self.in_head = false;
                self.push(Node::element("tbody"));
            }
            TagEnd::Table => {
                self.pop();
                self.pop();
            }
            _ => self.pop(),
        }
    }
}

/// Keeps an address only when it is `http`, `https` or `mailto`.
fn safe_url(url: &str) -> Option<String> {
    let url = url.trim();
    let scheme = url.split_once(':')?.0.to_ascii_lowercase();
    matches!(scheme.as_str(), "http" | "https" | "mailto").then(|| url.to_owned())
}

fn parse(text: &str) -> Vec<Node> {
    let options =
        Options::ENABLE_TABLES | Options::ENABLE_STRIKETHROUGH | Options::ENABLE_TASKLISTS;
    let mut builder = Builder {
        stack: vec![Node::element("div")],
        alignments: Vec::new(),
        column: 0,
        in_head: false,
    };
    for event in Parser::new_ext(text, options) {
        match event {
            Event::Start(tag) => builder.start(tag),
            Event::End(tag) => builder.end(tag),
            Event::Text(text)
            | Event::Html(text)
            | Event::InlineHtml(text)
            | Event::InlineMath(text)
            | Event::DisplayMath(text)
            | Event::FootnoteReference(text) => builder.text(&text),
            Event::Code(code) => {
                builder.push(Node::element("code"));
                builder.text(&code);
                builder.pop();
            }
            Event::SoftBreak => builder.text("\n"),
            Event::HardBreak => builder.append(Node::element("br")),
            Event::Rule => builder.append(Node::element("hr")),
            Event::TaskListMarker(done) => builder.text(if done { "☑ " } else { "☐ " }),
        }
    }
    // A reply cut off mid-stream may leave elements open: close them.
    while builder.stack.len() > 1 {
        builder.pop();
    }
    match builder.stack.pop() {
        Some(Node::Element { children, .. }) => children,
        _ => Vec::new(),
    }
}

/// The reply's Markdown as elements.
pub(crate) fn markdown(text: &str) -> impl IntoView + use<> {
    let children: Vec<AnyView> = parse(text).into_iter().map(node_view).collect();
    view! { <div class="text md">{children}</div> }
}

fn node_view(node: Node) -> AnyView {
    match node {
        Node::Text(text) => text.into_any(),
        Node::Element { tag, attr, children } => {
            let children: Vec<AnyView> = children.into_iter().map(node_view).collect();
            match attr {
                None => custom(tag).child(children).into_any(),
                Some((name, value)) => custom(tag).attr(name, value).child(children).into_any(),
            }
        }
        Node::Link { href, title, children } => {
            let children: Vec<AnyView> = children.into_iter().map(node_view).collect();
            view! {
                <a href=href title=title rel="noopener noreferrer nofollow" target="_blank">
                    {children}
                </a>
            }
            .into_any()
        }
        Node::Code { language, code } => code_view(language, code),
    }
}

fn code_view(language: String, code: String) -> AnyView {
    let label = RwSignal::new("Copy");
    let copied = code.clone();
    let spans: Vec<AnyView> = highlight(&language, &code)
        .into_iter()
        .map(|(class, text)| match class {
            Some(class) => custom("span").attr("class", class).child(text).into_any(),
            None => text.into_any(),
        })
        .collect();
    let class = if language.is_empty() { String::new() } else { format!("language-{language}") };
    view! {
        <div class="code">
            <button
                type="button"
                class="copy"
                on:click=move |_| {
                    let text = copied.clone();
                    crate::api::spawn(async move {
                        let done = crate::api::copy_text(&text).await;
                        label.set(if done { "Copied" } else { "Copy failed" });
                    });
                }
            >
                {move || label.get()}
            </button>
            <pre>
                <code class=class>{spans}</code>
            </pre>
        </div>
    }
    .into_any()
}

/// The languages [`highlight`] knows.
#[derive(Clone, Copy, PartialEq)]
enum Language {
    Rust,
    Script,
    Python,
    Json,
    Shell,
    Sql,
}

fn language(name: &str) -> Option<Language> {
    Some(match name {
        "rust" | "rs" => Language::Rust,
        "js" | "javascript" | "jsx" | "ts" | "typescript" | "tsx" | "mjs" => Language::Script,
        "python" | "py" => Language::Python,
        "json" | "jsonc" => Language::Json,
        "bash" | "sh" | "shell" | "zsh" | "console" => Language::Shell,
        "sql" => Language::Sql,
        _ => return None,
    })
}

fn keywords(language: Language) -> &'static [&'static str] {
    match language {
        Language::Rust => &[
            "as", "async", "await", "break", "const", "continue", "crate", "dyn", "else", "enum",
            "extern", "false", "fn", "for", "if", "impl", "in", "let", "loop", "match", "mod",
            "move", "mut", "pub", "ref", "return", "self", "Self", "static", "struct", "super",
            "trait", "true", "type", "unsafe", "use", "where", "while",
        ],
        Language::Script => &[
            "async",
            "await",
            "break",
            "case",
            "catch",
            "class",
            "const",
            "continue",
            "default",
            "delete",
            "do",
            "else",
            "export",
            "extends",
            "false",
            "finally",
            "for",
            "from",
            "function",
            "if",
            "import",
            "in",
            "instanceof",
            "interface",
            "let",
            "new",
            "null",
            "of",
            "return",
            "static",
            "switch",
            "this",
            "throw",
            "true",
            "try",
            "type",
            "typeof",
            "undefined",
            "var",
            "void",
            "while",
            "yield",
        ],
        Language::Python => &[
            "False", "None", "True", "and", "as", "assert", "async", "await", "break", "class",
            "continue", "def", "del", "elif", "else", "except", "finally", "for", "from", "global",
            "if", "import", "in", "is", "lambda", "nonlocal", "not", "or", "pass", "raise",
            "return", "try", "while", "with", "yield",
        ],
        Language::Json => &["true", "false", "null"],
        Language::Shell => &[
            "case", "do", "done", "elif", "else", "esac", "export", "fi", "for", "function", "if",
            "in", "local", "return", "then", "until", "while",
        ],
        Language::Sql => &[
            "and", "as", "asc", "by", "create", "delete", "desc", "distinct", "drop", "from",
            "group", "having", "in", "index", "insert", "into", "is", "join", "left", "limit",
            "not", "null", "on", "or", "order", "primary", "key", "select", "set", "table",
            "update", "values", "where", "with",
        ],
    }
}

/// Splits code into (class, text) pieces: `tok-kw`, `tok-str`, `tok-com`, `tok-num`, or plain.
/// Unknown languages come back as one plain piece.
fn highlight(name: &str, code: &str) -> Vec<(Option<&'static str>, String)> {
    let Some(language) = language(name) else {
        return vec![(None, code.to_owned())];
    };
    let chars: Vec<char> = code.chars().collect();
    let mut pieces: Vec<(Option<&'static str>, String)> = Vec::new();
    let mut add = |class: Option<&'static str>, text: &[char]| {
        let text: String = text.iter().collect();
        match pieces.last_mut() {
            Some((None, last)) if class.is_none() => last.push_str(&text),
            _ => pieces.push((class, text)),
        }
    };
    let line_comment = |at: usize| -> bool {
        let next = chars.get(at + 1).copied();
        match language {
            Language::Rust | Language::Script => chars[at] == '/' && next == Some('/'),
            Language::Python | Language::Shell => chars[at] == '#',
            Language::Sql => chars[at] == '-' && next == Some('-'),
            Language::Json => false,
        }
    };
    let block_comment = |at: usize| -> bool {
        matches!(language, Language::Rust | Language::Script | Language::Sql)
            && chars[at] == '/'
            && chars.get(at + 1) == Some(&'*')
    };
    let mut i = 0;
    while i < chars.len() {
        let c = chars[i];
        let start = i;
        if line_comment(i) {
            while i < chars.len() && chars[i] != '\n' {
                i += 1;
            }
            add(Some("tok-com"), &chars[start..i]);
        } else if block_comment(i) {
            i += 2;
            while i < chars.len() && !(chars[i - 1] == '*' && chars[i] == '/' && i > start + 2) {
                i += 1;
            }
            i = (i + 1).min(chars.len());
            add(Some("tok-com"), &chars[start..i]);
        } else if c == '"'
            || (c == '\'' && language != Language::Rust && language != Language::Json)
            || (c == '`' && language == Language::Script)
        {
            i += 1;
            while i < chars.len() && chars[i] != c {
                if chars[i] == '\\' && !(c == '\'' && language == Language::Shell) {
                    i += 1;
                }
                i += 1;
            }
            i = (i + 1).min(chars.len());
            add(Some("tok-str"), &chars[start..i]);
        } else if c.is_ascii_digit() {
            while i < chars.len()
                && (chars[i].is_ascii_alphanumeric() || matches!(chars[i], '_' | '.'))
            {
                i += 1;
            }
            add(Some("tok-num"), &chars[start..i]);
        } else if c.is_alphabetic() || c == '_' {
            while i < chars.len() && (chars[i].is_alphanumeric() || chars[i] == '_') {
                i += 1;
            }
            let word: String = chars[start..i].iter().collect();
            let keyword = if language == Language::Sql {
                keywords(language).contains(&word.to_ascii_lowercase().as_str())
            } else {
                keywords(language).contains(&word.as_str())
            };
            add(keyword.then_some("tok-kw"), &chars[start..i]);
        } else {
            i += 1;
            add(None, &chars[start..i]);
        }
    }
    pieces
}

#[cfg(test)]
mod tests {
    use super::*;

    fn html(text: &str) -> String {
        markdown(text).to_html()
    }

    #[test]
    fn raw_html_is_text_and_links_are_safe() {
        let out = html(
            "<script>alert(1)</script>\n\nhi <img src=x onerror=alert(2)> [a](javascript:alert(3)) [b](https://x.test/)",
        );
        assert!(!out.contains("<script") && !out.contains("<img"), "{out}");
        assert!(out.contains("&lt;script&gt;") && out.contains("&lt;img"), "{out}");
        assert!(!out.contains("javascript:"), "{out}");
        assert!(out.contains(r#"href="https://x.test/""#), "{out}");
        assert!(out.contains(r#"rel="noopener noreferrer nofollow""#), "{out}");
    }

    #[test]
    fn tables_lists_and_code() {
        let out = html(
            "# T\n\n- a\n- **b**\n\n| x | y |\n|---|--:|\n| 1 | 2 |\n\n```rust\nfn main() { let s = \"q\"; } // c\n```\n",
        );
        for wanted in [
            "<h1",
            "<li",
            "<strong",
            "<th",
            "<td",
            "align-right",
            "tok-kw",
            "tok-str",
            "tok-com",
            "language-rust",
            "Copy",
        ] {
            assert!(out.contains(wanted), "{wanted}: {out}");
        }
    }

    #[test]
    fn highlight_splits_tokens() {
        let pieces = highlight("python", "def f(x): return 'a' # c\n12");
        let classes: Vec<_> =
            pieces.iter().filter_map(|(c, t)| c.map(|c| (c, t.as_str()))).collect();
        assert_eq!(
            classes,
            vec![
                ("tok-kw", "def"),
                ("tok-kw", "return"),
                ("tok-str", "'a'"),
                ("tok-com", "# c"),
                ("tok-num", "12")
            ]
        );
        assert_eq!(highlight("unknown", "a 'b'"), vec![(None, "a 'b'".to_owned())]);
    }
}
