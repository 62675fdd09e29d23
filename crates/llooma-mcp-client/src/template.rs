//! Expansion of the URI templates that MCP servers publish for resources (RFC 6570), done by us
//! rather than the server so every value can be checked before it becomes part of an address.
//!
//! Supported: every operator of levels 1 to 3 (`{var}`, `{+var}`, `{#var}`, `{.var}`,
//! `{/var}`, `{;var}`, `{?a,b}`, `{&a}`) and the level 4 prefix modifier `{var:3}`; the explode
//! modifier `{var*}` is accepted and means nothing for the string values we expand. Values are
//! strings; lists and maps are not supported (MCP templates fill blanks with single values).
//!
//! What is refused, and why:
//! - a control character in a value (it has no business in an address and hides things in
//!   logs);
//! - a value longer than [`MAX_VALUE_LEN`] bytes, and an expansion longer than
//!   [`MAX_URI_LEN`];
//! - for expressions that make a path segment (`{var}`, `{.var}`, `{/var}`, `{;var}`): a `/` or
//!   `\`, and a value that is `.` or `..`, or contains `..`. Percent-encoding `/` as `%2F` would
//!   be correct by the RFC, but many servers decode it before routing, which turns a value into
//!   extra path segments;
//! - for the reserved expansions (`{+var}`, `{#var}`), which may carry `/` on purpose: a
//!   segment (split on `/` and `\\`) that is `.` or `..`, or is one of them before a `;`
//!   (`..;`), checked after percent-decoding: URL parsers resolve `.%2e`, `%2e.` and `%2E%2E`
//!   as `..`, and `..%2f` is `../` to a server that decodes before routing (`../` climbing out
//!   of the template's path);
//! - a missing value for an expression that shapes the path (everything but `?`, `&` and `#`,
//!   which the RFC lets disappear), and a value for a variable the template does not have.

use std::collections::BTreeMap;

/// The longest value accepted for one variable, in bytes.
pub const MAX_VALUE_LEN: usize = 1024;
/// The longest expanded URI, in bytes.
pub const MAX_URI_LEN: usize = 8 * 1024;

/// Why a template could not be expanded.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[non_exhaustive]
pub enum TemplateError {
    /// The template itself is malformed.
    #[error("the template is malformed: {0}")]
    Syntax(String),
    /// A value is not acceptable for its variable.
    #[error("the value for `{var}` {problem}")]
    Value {
        /// The variable.
        var: String,
        /// What is wrong with its value.
        problem: &'static str,
    },
    /// A variable that shapes the path has no value.
    #[error("no value given for `{0}`")]
    Missing(String),
    /// A value was given for a variable the template does not have.
    #[error("the template has no variable `{0}`")]
    Unknown(String),
    /// The expansion is too long.
    #[error("the expanded address is longer than {MAX_URI_LEN} bytes")]
    TooLong,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Op {
    Simple,
    Reserved,
    Fragment,
    Label,
    Path,
    PathParam,
    Query,
    QueryCont,
}

impl Op {
    fn parse(c: char) -> Option<Op> {
        Some(match c {
            '+' => Op::Reserved,
            '#' => Op::Fragment,
            '.' => Op::Label,
            '/' => Op::Path,
            ';' => Op::PathParam,
            '?' => Op::Query,
            '&' => Op::QueryCont,
            _ => return None,
        })
    }
    fn first(self) -> &'static str {
        match self {
            Op::Simple | Op::Reserved => "",
            Op::Fragment => "#",
            Op::Label => ".",
            Op::Path => "/",
            Op::PathParam => ";",
            Op::Query => "?",
            Op::QueryCont => "&",
        }
    }
    fn sep(self) -> &'static str {
        match self {
            Op::Simple | Op::Reserved | Op::Fragment => ",",
            Op::Label => ".",
            Op::Path => "/",
            Op::PathParam => ";",
            Op::Query | Op::QueryCont => "&",
        }
    }
    fn named(self) -> bool {
        matches!(self, Op::PathParam | Op::Query | Op::QueryCont)
    }
    fn if_empty(self) -> &'static str {
        if matches!(self, Op::Query | Op::QueryCont) { "=" } else { "" }
    }
    fn allows_reserved(self) -> bool {
        matches!(self, Op::Reserved | Op::Fragment)
    }
    /// Whether the value becomes (part of) a path segment, so it must not add segments.
    fn is_segment(self) -> bool {
        matches!(self, Op::Simple | Op::Label | Op::Path | Op::PathParam)
    }
    fn optional(self) -> bool {
        matches!(self, Op::Query | Op::QueryCont | Op::Fragment)
    }
}

#[derive(Debug, Clone)]
struct VarSpec {
    name: String,
    prefix: Option<usize>,
}

#[derive(Debug, Clone)]
enum Part {
    Literal(String),
    Expr(Op, Vec<VarSpec>),
}

fn parse(template: &str) -> Result<Vec<Part>, TemplateError> {
    let mut parts = Vec::new();
    let mut rest = template;
    while !rest.is_empty() {
        match rest.find('{') {
            None => {
                if rest.contains('}') {
                    return Err(TemplateError::Syntax("a `}` without its `{`".to_owned()));
                }
                parts.push(Part::Literal(rest.to_owned()));
                break;
            }
            Some(open) => {
                let literal = &rest[..open];
                if literal.contains('}') {
                    return Err(TemplateError::Syntax("a `}` without its `{`".to_owned()));
                }
                if !literal.is_empty() {
                    parts.push(Part::Literal(literal.to_owned()));
                }
                let after = &rest[open + 1..];
                let close = after
                    .find('}')
                    .ok_or_else(|| TemplateError::Syntax("a `{` without its `}`".to_owned()))?;
                parts.push(parse_expr(&after[..close])?);
                rest = &after[close + 1..];
            }
        }
    }
    Ok(parts)
}

fn parse_expr(body: &str) -> Result<Part, TemplateError> {
    let mut chars = body.chars();
    let (op, list) = match chars.next().and_then(Op::parse) {
        Some(op) => (op, chars.as_str()),
        None => (Op::Simple, body),
    };
    if list.is_empty() {
        return Err(TemplateError::Syntax("an empty expression `{}`".to_owned()));
    }
    let mut vars = Vec::new();
    for spec in list.split(',') {
        let (name, prefix) = if let Some(name) = spec.strip_suffix('*') {
            (name, None)
        } else if let Some((name, len)) = spec.split_once(':') {
            let len: usize =
                len.parse().ok().filter(|n| (1..10_000).contains(n)).ok_or_else(|| {
                    TemplateError::Syntax(format!("bad prefix length in `{spec}`"))
                })?;
            (name, Some(len))
        } else {
            (spec, None)
        };
        let valid = !name.is_empty()
            && name.split('.').all(|piece| {
                !piece.is_empty()
                    && piece.bytes().all(|b| b.is_ascii_alphanumeric() || b == b'_' || b == b'%')
            });
        if !valid {
            return Err(TemplateError::Syntax(format!("bad variable name `{name}`")));
        }
        vars.push(VarSpec { name: name.to_owned(), prefix });
    }
    Ok(Part::Expr(op, vars))
}

/// The variable names of a template, in order of first appearance.
pub fn variables(template: &str) -> Result<Vec<String>, TemplateError> {
    let mut names: Vec<String> = Vec::new();
    for part in parse(template)? {
        if let Part::Expr(_, vars) = part {
            for var in vars {
                if !names.contains(&var.name) {
                    names.push(var.name);
                }
            }
        }
    }
    Ok(names)
}

/// Expands `template` with `values`, checking every value as described in the module docs.
pub fn expand(template: &str, values: &BTreeMap<String, String>) -> Result<String, TemplateError> {
    let parts = parse(template)?;
    let known = variables(template)?;
    if let Some(unknown) = values.keys().find(|k| !known.contains(k)) {
        return Err(TemplateError::Unknown(unknown.clone()));
    }
    let mut out = String::new();
    for part in parts {
        match part {
            Part::Literal(text) => out.push_str(&text),
            Part::Expr(op, vars) => expand_expr(&mut out, op, &vars, values)?,
        }
        if out.len() > MAX_URI_LEN {
            return Err(TemplateError::TooLong);
        }
    }
    Ok(out)
}

fn expand_expr(
    out: &mut String,
    op: Op,
    vars: &[VarSpec],
    values: &BTreeMap<String, String>,
) -> Result<(), TemplateError> {
    let mut first = true;
    for var in vars {
        let Some(value) = values.get(&var.name) else {
            if op.optional() {
                continue;
            }
            return Err(TemplateError::Missing(var.name.clone()));
        };
        check_value(op, &var.name, value)?;
        let value: String = match var.prefix {
            Some(n) => value.chars().take(n).collect(),
            None => value.clone(),
        };
        out.push_str(if first { op.first() } else { op.sep() });
        first = false;
        if op.named() {
            out.push_str(&var.name);
            if value.is_empty() {
                out.push_str(op.if_empty());
                continue;
            }
            out.push('=');
        }
        encode_into(out, &value, op.allows_reserved());
    }
    Ok(())
}

/// The refusal of a reserved value with a dot segment.
const DOT_SEGMENT: &str =
    "contains a `.` or `..` path segment (written plainly or percent-encoded)";

fn check_value(op: Op, var: &str, value: &str) -> Result<(), TemplateError> {
    let bad = |problem| Err(TemplateError::Value { var: var.to_owned(), problem });
    if value.len() > MAX_VALUE_LEN {
        return bad("is too long (more than 1024 bytes)");
    }
    if value.chars().any(char::is_control) {
        return bad("contains a control character");
    }
    if op.is_segment() {
        if value.contains('/') || value.contains('\\') {
            return bad("contains a slash, which would change the address's path");
        }
        if value == "." || value.contains("..") {
            return bad("contains `..` or is `.`, which would change the address's path");
        }
    }
    if op.allows_reserved() {
        if has_dot_segment(value) {
            return bad(DOT_SEGMENT);
        }
        if value.contains('{') || value.contains('}') {
            return bad("contains a brace");
        }
    }
    Ok(())
}

/// Whether a value, once percent-decoded, has a segment (between `/` or `\\`) that is `.` or
/// `..`, or that is one of them before a `;` (`..;`, which some servers cut at the `;`). The
/// decoding comes first because URL parsers resolve `.%2e`, `%2e.` and `%2E%2E` as `..`, and
/// a server that decodes `%2F` before routing sees `..%2f` as `../`.
fn has_dot_segment(value: &str) -> bool {
    percent_decode(value).split(|b| matches!(b, b'/' | b'\\')).any(|segment| {
        let before_params = segment.split(|b| *b == b';').next().unwrap_or_default();
        matches!(before_params, b"." | b"..")
    })
}

/// `%XX` triplets (either case) decoded to their byte; anything else, a stray `%` included,
/// kept as it is.
fn percent_decode(value: &str) -> Vec<u8> {
    let bytes = value.as_bytes();
    let mut out = Vec::with_capacity(bytes.len());
    let mut i = 0;
    while i < bytes.len() {
        let hex = |at: usize| bytes.get(at).and_then(|b| char::from(*b).to_digit(16));
        match (bytes[i], hex(i + 1), hex(i + 2)) {
            (b'%', Some(high), Some(low)) => {
                // Two hex digits make at most 0xFF.
                out.push(u8::try_from(high * 16 + low).unwrap_or(u8::MAX));
                i += 3;
            }
            (b, _, _) => {
                out.push(b);
                i += 1;
            }
        }
    }
    out
}

fn is_unreserved(b: u8) -> bool {
    b.is_ascii_alphanumeric() || matches!(b, b'-' | b'.' | b'_' | b'~')
}

fn is_reserved(b: u8) -> bool {
    matches!(
        b,
        b':' | b'/'
            | b'?'
            | b'#'
            | b'['
            | b']'
            | b'@'
            | b'!'
            | b'$'
            | b'&'
            | b'\''
            | b'('
            | b')'
            | b'*'
            | b'+'
            | b','
            | b';'
            | b'='
    )
}

fn encode_into(out: &mut String, value: &str, allow_reserved: bool) {
    let bytes = value.as_bytes();
    let mut i = 0;
    while i < bytes.len() {
        let b = bytes[i];
        let keep = is_unreserved(b) || (allow_reserved && is_reserved(b));
        // Reserved expansion keeps existing %XX triplets as they are (RFC 6570 §3.2.3).
        let triplet = allow_reserved
            && b == b'%'
            && bytes.get(i + 1).is_some_and(u8::is_ascii_hexdigit)
            && bytes.get(i + 2).is_some_and(u8::is_ascii_hexdigit);
        if keep || triplet {
            out.push(char::from(b));
        } else {
            out.push_str(&format!("%{b:02X}"));
        }
        i += 1;
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn vals(pairs: &[(&str, &str)]) -> BTreeMap<String, String> {
        pairs.iter().map(|(k, v)| ((*k).to_owned(), (*v).to_owned())).collect()
    }

    #[test]
    fn expands_each_operator() {
        let v = vals(&[
            ("var", "value"),
            ("hello", "Hello World!"),
            ("path", "/foo/bar"),
            ("x", "1024"),
            ("y", "768"),
        ]);
        let table = [
            ("{var}", "value"),
            ("{hello}", "Hello%20World%21"),
            ("{+hello}", "Hello%20World!"),
            ("{+path}/here", "/foo/bar/here"),
            ("{#path}", "#/foo/bar"),
            ("X{.var}", "X.value"),
            ("{/var,x}/here", "/value/1024/here"),
            ("{;x,y}", ";x=1024;y=768"),
            ("{?x,y}", "?x=1024&y=768"),
            ("?fixed=yes{&x}", "?fixed=yes&x=1024"),
            ("{var:3}", "val"),
            ("{var*}", "value"),
            ("file:///logs/{var}.txt", "file:///logs/value.txt"),
        ];
        for (template, want) in table {
            let names = variables(template).unwrap();
            let mine = v
                .iter()
                .filter(|(k, _)| names.contains(k))
                .map(|(k, x)| (k.clone(), x.clone()))
                .collect();
            assert_eq!(expand(template, &mine).as_deref(), Ok(want), "{template}");
        }
    }

    #[test]
    fn query_variables_may_be_missing_and_path_ones_may_not() {
        let v = vals(&[("a", "1")]);
        assert_eq!(expand("x://r{?a,b}", &v).as_deref(), Ok("x://r?a=1"));
        assert_eq!(
            expand("x://r{?b}", &v.clone().into_iter().filter(|_| false).collect()).as_deref(),
            Ok("x://r")
        );
        assert_eq!(expand("x://r/{a}/{b}", &v), Err(TemplateError::Missing("b".to_owned())));
        assert_eq!(
            expand("x://r/{a}", &vals(&[("a", "1"), ("zz", "2")])),
            Err(TemplateError::Unknown("zz".to_owned()))
        );
    }

    #[test]
    fn values_that_change_the_path_are_refused() {
        for (template, value) in [
            ("x://r/{id}", "../secret"),
            ("x://r/{id}", ".."),
            ("x://r/{id}", "."),
            ("x://r/{id}", "a/b"),
            ("x://r/{id}", "a\\b"),
            ("x://r{/id}", "a/b"),
            ("x://r{+rest}", "a/../../etc/passwd"),
            ("x://r{+rest}", "a/%2e%2e/x"),
            ("x://r/{id}", "line\nbreak"),
            ("x://r/{id}", "nul\0"),
        ] {
            let got = expand(template, &vals(&[(template_var(template), value)]));
            assert!(
                matches!(got, Err(TemplateError::Value { .. })),
                "{template} with {value:?}: {got:?}"
            );
        }
        let long = "a".repeat(MAX_VALUE_LEN + 1);
        assert!(matches!(
            expand("x://{id}", &vals(&[("id", &long)])),
            Err(TemplateError::Value { .. })
        ));
    }

    /// Reserved expansion may carry `/`, but no segment may be `.` or `..` however it is
    /// written: URL parsers (WHATWG) resolve `.%2e`, `%2e.` and `%2E%2E` as `..`, and some
    /// servers cut a segment at `;` (`..;`). `None` means refused.
    #[test]
    fn reserved_values_may_not_hold_dot_segments_however_encoded() {
        let table: &[(&str, Option<&str>)] = &[
            ("..", None),
            (".%2e", None),
            ("%2e.", None),
            ("%2E%2E", None),
            ("..;", None),
            ("..;jsessionid=1", None),
            ("%2e%2e%3b", None),
            (".", None),
            ("%2e", None),
            ("a/../b", None),
            ("a/.%2E/b", None),
            ("a/./b", None),
            ("a/%2E/b", None),
            ("..%2f", None),
            ("..%2Fetc", None),
            ("a\\..\\b", None),
            ("a%5c..%5cb", None),
            ("a/.%2e/.%2e/etc/passwd", None),
            ("a..b", Some("docs://tree/a..b")),
            (".hidden", Some("docs://tree/.hidden")),
            ("v1.2", Some("docs://tree/v1.2")),
            ("..hidden", Some("docs://tree/..hidden")),
            ("a/b/c.txt", Some("docs://tree/a/b/c.txt")),
            ("%2e%2e%2e", Some("docs://tree/%2e%2e%2e")),
            ("a;b=..", Some("docs://tree/a;b=..")),
        ];
        for (value, want) in table {
            for template in ["docs://tree/{+path}", "docs://tree/x{#path}"] {
                let got = expand(template, &vals(&[("path", value)]));
                match want {
                    Some(want) if template.contains('+') => {
                        assert_eq!(got.as_deref(), Ok(*want), "{template} with {value:?}");
                    }
                    Some(_) => assert!(got.is_ok(), "{template} with {value:?}: {got:?}"),
                    None => assert_eq!(
                        got,
                        Err(TemplateError::Value { var: "path".to_owned(), problem: DOT_SEGMENT }),
                        "{template} with {value:?}"
                    ),
                }
            }
        }
    }

    #[test]
    fn slashes_are_fine_in_reserved_and_query_expansion() {
        assert_eq!(expand("x://r{+p}", &vals(&[("p", "/a/b")])).as_deref(), Ok("x://r/a/b"));
        assert_eq!(
            expand("x://r{?q}", &vals(&[("q", "a/b c")])).as_deref(),
            Ok("x://r?q=a%2Fb%20c")
        );
        assert_eq!(expand("x://r/{q}", &vals(&[("q", "é%")])).as_deref(), Ok("x://r/%C3%A9%25"));
    }

    #[test]
    fn malformed_templates_are_reported() {
        for bad in ["x://{", "x://}", "x://{}", "x://{a b}", "x://{a:0}", "x://{a:x}"] {
            assert!(
                matches!(expand(bad, &BTreeMap::new()), Err(TemplateError::Syntax(_))),
                "{bad}"
            );
        }
        assert_eq!(
            variables("x://{a}/{+b}{?c,a}").ok(),
            Some(vec!["a".into(), "b".into(), "c".into()])
        );
    }

    fn template_var(template: &str) -> &str {
        let start = template.find('{').map(|i| i + 1).unwrap_or(0);
        let body = &template[start..template.find('}').unwrap_or(template.len())];
        body.trim_start_matches(['+', '/', '#', '?', '.', ';', '&'])
    }
}
