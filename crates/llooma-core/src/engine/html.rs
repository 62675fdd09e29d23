//! HTML to readable text, for `read_page`. Pure: no IO, no allocation beyond the output.
//!
//! Not a browser: it drops what is never prose (scripts, styles, the head, SVG, forms' hidden
//! parts), turns block elements into line breaks and list items into `- ` lines, decodes the
//! character references pages actually use, and collapses whitespace. The title is kept apart.

/// Elements whose content is never read.
const SKIPPED: &[&str] =
    &["script", "style", "noscript", "template", "svg", "head", "iframe", "object", "canvas"];

/// Elements that start and end a line of their own.
const BLOCKS: &[&str] = &[
    "address",
    "article",
    "aside",
    "blockquote",
    "br",
    "dd",
    "details",
    "div",
    "dl",
    "dt",
    "figcaption",
    "figure",
    "footer",
    "form",
    "h1",
    "h2",
    "h3",
    "h4",
    "h5",
    "h6",
    "header",
    "hr",
    "li",
    "main",
    "nav",
    "ol",
    "p",
    "pre",
    "section",
    "summary",
    "table",
    "tr",
    "ul",
];

/// A page's title and its text.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct PageText {
    pub title: Option<String>,
    pub text: String,
}

/// Converts an HTML document (or fragment) to its readable text.
pub fn html_to_text(html: &str) -> PageText {
    let mut out = String::with_capacity(html.len() / 3);
    let mut title = String::new();
    let mut in_title = false;
    let mut skipping: Option<String> = None;
    let mut rest = html;
    while !rest.is_empty() {
        let Some(lt) = rest.find('<') else {
            push_text(&mut out, &mut title, in_title, skipping.is_some(), rest);
            break;
        };
        push_text(&mut out, &mut title, in_title, skipping.is_some(), &rest[..lt]);
        rest = &rest[lt..];
        if let Some(after) = rest.strip_prefix("<!--") {
            rest = after.find("-->").map_or("", |end| &after[end + 3..]);
            continue;
        }
        let Some(gt) = tag_end(rest) else {
            // A lone `<` that starts no tag is text.
            push_text(&mut out, &mut title, in_title, skipping.is_some(), "<");
            rest = &rest[1..];
            continue;
        };
        let inside = &rest[1..gt];
        rest = &rest[gt + 1..];
        let closing = inside.starts_with('/');
        let name: String = inside
            .trim_start_matches('/')
            .chars()
            .take_while(|c| c.is_ascii_alphanumeric())
            .map(|c| c.to_ascii_lowercase())
            .collect();
        if name.is_empty() {
            // `<!DOCTYPE ...>`, `<?xml ...?>`, or `< ` written as text.
            if !(inside.starts_with('!') || inside.starts_with('?')) {
                push_text(&mut out, &mut title, in_title, skipping.is_some(), "<");
                push_text(&mut out, &mut title, in_title, skipping.is_some(), inside);
                push_text(&mut out, &mut title, in_title, skipping.is_some(), ">");
            }
            continue;
        }
        if name == "title" {
            in_title = !closing;
            continue;
        }
        if let Some(skipped) = &skipping {
            if closing && *skipped == name {
                skipping = None;
            }
            continue;
        }
        if !closing && SKIPPED.contains(&name.as_str()) && !inside.trim_end().ends_with('/') {
            skipping = Some(name);
            continue;
        }
        if matches!(name.as_str(), "td" | "th") {
            // Cells of a row stay on the row's line.
            out.push(' ');
        } else if BLOCKS.contains(&name.as_str()) {
            out.push('\n');
            if !closing && name == "li" {
                out.push_str("- ");
            }
        }
    }
    let title = one_line(&decode_entities(&title));
    PageText { title: (!title.is_empty()).then_some(title), text: tidy(&out) }
}

/// The index of the `>` closing the tag that starts `s` (`s` starts with `<`), honouring quoted
/// attribute values. `None` when `<` does not start a tag.
fn tag_end(s: &str) -> Option<usize> {
    let next = s[1..].chars().next()?;
    if !(next.is_ascii_alphabetic() || matches!(next, '/' | '!' | '?')) {
        return None;
    }
    let mut quote: Option<char> = None;
    for (i, c) in s.char_indices().skip(1) {
        match (quote, c) {
            (Some(q), c) if c == q => quote = None,
            (Some(_), _) => {}
            (None, '"' | '\'') => quote = Some(c),
            (None, '>') => return Some(i),
            _ => {}
        }
    }
    None
}

fn push_text(out: &mut String, title: &mut String, in_title: bool, skipping: bool, text: &str) {
    // The title sits in the head, which is otherwise skipped.
    if in_title {
        title.push_str(text);
    } else if !skipping {
        // Line breaks in the source are spaces; only elements break lines.
        out.extend(decode_entities(text).chars().map(|c| if c.is_whitespace() { ' ' } else { c }));
    }
}

/// Spaces within lines collapsed, lines trimmed, no blank lines.
fn tidy(raw: &str) -> String {
    let mut text = String::with_capacity(raw.len());
    for line in raw.lines() {
        let line = collapse(line);
        let line = line.trim();
        if line.is_empty() || line == "-" {
            continue;
        }
        if !text.is_empty() {
            text.push('\n');
        }
        text.push_str(line);
    }
    text
}

/// Text on one line: every run of whitespace (line breaks included) becomes one space, none at
/// either end.
pub fn one_line(s: &str) -> String {
    collapse(s).trim().to_owned()
}

fn collapse(s: &str) -> String {
    let mut out = String::with_capacity(s.len());
    let mut space = false;
    for c in s.chars() {
        if c.is_whitespace() {
            space = true;
        } else {
            if space && !out.is_empty() {
                out.push(' ');
            }
            space = false;
            out.push(c);
        }
    }
    if space {
        out.push(' ');
    }
    out
}

/// Decodes `&name;`, `&#123;` and `&#x7b;`. Unknown references stay as written.
pub fn decode_entities(s: &str) -> String {
    if !s.contains('&') {
        return s.to_owned();
    }
    let mut out = String::with_capacity(s.len());
    let mut rest = s;
    while let Some(amp) = rest.find('&') {
        out.push_str(&rest[..amp]);
        rest = &rest[amp..];
        let end = rest.char_indices().take(12).find(|(_, c)| *c == ';').map(|(i, _)| i);
        let decoded = end.and_then(|end| entity(&rest[1..end]).map(|c| (c, end)));
        match decoded {
            Some((c, end)) => {
                out.push(c);
                rest = &rest[end + 1..];
            }
            None => {
                out.push('&');
                rest = &rest[1..];
            }
        }
    }
    out.push_str(rest);
    out
}

fn entity(name: &str) -> Option<char> {
    if let Some(number) = name.strip_prefix('#') {
        let code = match number.strip_prefix(['x', 'X']) {
            Some(hex) => u32::from_str_radix(hex, 16).ok()?,
            None => number.parse().ok()?,
        };
        return char::from_u32(code).filter(|c| *c != '\0');
    }
    Some(match name {
        "amp" => '&',
        "lt" => '<',
        "gt" => '>',
        "quot" => '"',
        "apos" => '\'',
        "nbsp" => ' ',
        "ndash" => '–',
        "mdash" => '—',
        "hellip" => '…',
        "lsquo" => '‘',
        "rsquo" => '’',
        "ldquo" => '“',
        "rdquo" => '”',
        "laquo" => '«',
        "raquo" => '»',
        "copy" => '©',
        "reg" => '®',
        "trade" => '™',
        "euro" => '€',
        "middot" => '·',
        "bull" => '•',
        "times" => '×',
        "deg" => '°',
        _ => return None,
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_page_becomes_its_title_and_readable_lines() {
        let page = html_to_text(
            "<!DOCTYPE html><html><head><title>Tides &amp; Moons</title>\
             <style>body { color: red }</style><script>var x = '<p>no</p>';</script></head>\
             <body><nav><a href='/'>Home</a></nav><h1>Tides</h1>\
             <p>The moon pulls the   sea.\n  Twice a day.</p><!-- a comment <p>hidden</p> -->\
             <ul><li>High tide</li><li>Low&nbsp;tide</li></ul>\
             <p>3 &lt; 4 &#8212; &#x2014; caf&eacute;</p></body></html>",
        );
        assert_eq!(page.title.as_deref(), Some("Tides & Moons"));
        assert_eq!(
            page.text,
            "Home\nTides\nThe moon pulls the sea. Twice a day.\n- High tide\n- Low tide\n\
             3 < 4 — — caf&eacute;"
        );
    }

    #[test]
    fn script_text_and_attributes_never_leak_into_the_text() {
        let page = html_to_text(
            "<p data-x=\"a > b\">kept</p><script type=\"text/javascript\">if (a < b) {}</script>\
             <svg><text>drawing</text></svg><noscript>enable js</noscript><p>end</p>",
        );
        assert_eq!(page.text, "kept\nend");
        assert_eq!(page.title, None);
    }

    #[test]
    fn stray_angle_brackets_are_text() {
        assert_eq!(html_to_text("a < b and c <= d").text, "a < b and c <= d");
        assert_eq!(html_to_text("x <3 y").text, "x <3 y");
    }

    #[test]
    fn tables_read_as_rows() {
        let page = html_to_text(
            "<table><tr><th>Name</th><th>Age</th></tr><tr><td>Ada</td><td>36</td></tr></table>",
        );
        assert_eq!(page.text, "Name Age\nAda 36");
    }

    #[test]
    fn an_unclosed_comment_or_tag_ends_the_text_without_panicking() {
        assert_eq!(html_to_text("before<!-- never closed <p>x").text, "before");
        assert_eq!(html_to_text("before <p class=\"x").text, "before <p class=\"x");
        assert_eq!(html_to_text("").text, "");
        assert_eq!(html_to_text("&#0; &#xD800; &#99999999;").text, "&#0; &#xD800; &#99999999;");
    }

    #[test]
    fn unicode_text_is_kept_whole() {
        let page = html_to_text("<p>Ünïcödé — 日本語 🙂</p>");
        assert_eq!(page.text, "Ünïcödé — 日本語 🙂");
    }

    mod properties {
        use proptest::prelude::*;

        use super::super::html_to_text;

        proptest! {
            #[test]
            fn any_text_converts_without_panicking(s in "\\PC*") {
                let _ = html_to_text(&s);
            }

            #[test]
            fn markup_like_text_never_leaks_script_bodies(
                before in "[a-z <>&;#/=\"']{0,40}",
                after in "[a-z <>&;#/=\"']{0,40}",
            ) {
                let page = html_to_text(&format!("{before}<script>SECRET()</script>{after}"));
                // Unless the text before opened a tag that swallows the script element whole.
                prop_assert!(!page.text.contains("SECRET") || before.contains('<'));
            }
        }
    }
}
