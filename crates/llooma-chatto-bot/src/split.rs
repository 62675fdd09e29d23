//! Splitting a long answer into posts: on paragraph boundaries, never inside a code block when
//! that can be avoided, and on line then character boundaries only for what cannot fit.

/// Chatto refuses a `body` longer than this many bytes.
pub const BODY_LIMIT_BYTES: usize = 10_000;
/// Each part stays strictly under the server's limit.
pub const MAX_PART_BYTES: usize = BODY_LIMIT_BYTES - 1;

const FENCE: &str = "```";
/// Closes a code block that had to be cut, so each part renders on its own.
const CLOSE: &str = "\n```";

/// Splits `text` into parts of at most `max_bytes` bytes each.
///
/// Paragraphs (separated by blank lines outside code blocks) are packed greedily; a fenced code
/// block is one paragraph, blank lines and all. A paragraph that cannot fit alone is cut on
/// lines, then a line on character boundaries; a code block cut that way is closed at the end
/// of each part and reopened (same fence line, language kept) at the start of the next.
pub fn split_answer(text: &str, max_bytes: usize) -> Vec<String> {
    let mut parts = Vec::new();
    let mut current = String::new();
    for block in blocks(text) {
        let joined = if current.is_empty() { block.len() } else { current.len() + 2 + block.len() };
        if joined <= max_bytes {
            if !current.is_empty() {
                current.push_str("\n\n");
            }
            current.push_str(&block);
            continue;
        }
        if !current.is_empty() {
            parts.push(std::mem::take(&mut current));
        }
        if block.len() <= max_bytes {
            current = block;
            continue;
        }
        let mut pieces = split_block(&block, max_bytes);
        // The last piece may still share a part with the paragraphs that follow.
        if let Some(last) = pieces.pop() {
            parts.extend(pieces);
            current = last;
        }
    }
    if !current.trim().is_empty() {
        parts.push(current);
    }
    // The guarantee the server needs, whatever the text looked like (tiny limits included).
    parts.into_iter().flat_map(|part| hard_cut(part, max_bytes)).collect()
}

fn is_fence(line: &str) -> bool {
    line.trim_start().starts_with(FENCE)
}

/// Paragraphs: runs of lines separated by blank lines that are not inside a code block.
fn blocks(text: &str) -> Vec<String> {
    let mut blocks = Vec::new();
    let mut lines: Vec<&str> = Vec::new();
    let mut in_fence = false;
    for line in text.lines() {
        if is_fence(line) {
            in_fence = !in_fence;
        } else if !in_fence && line.trim().is_empty() {
            if !lines.is_empty() {
                blocks.push(lines.join("\n"));
                lines.clear();
            }
            continue;
        }
        lines.push(line);
    }
    if !lines.is_empty() {
        blocks.push(lines.join("\n"));
    }
    blocks
}

/// Cuts one paragraph that is larger than a part.
fn split_block(block: &str, max: usize) -> Vec<String> {
    let mut splitter = Splitter {
        max,
        pieces: Vec::new(),
        current: String::new(),
        has_content: false,
        fence: None,
    };
    for line in block.split('\n') {
        splitter.add_line(line);
    }
    // An unclosed block in the source stays unclosed in the last piece: that is what the model
    // wrote.
    if splitter.has_content {
        splitter.pieces.push(splitter.current);
    }
    splitter.pieces
}

struct Splitter {
    max: usize,
    pieces: Vec<String>,
    current: String,
    /// False while `current` is empty or holds only a reopened fence line.
    has_content: bool,
    /// The opening fence line while inside a code block.
    fence: Option<String>,
}

impl Splitter {
    fn reserve(fence: Option<&String>) -> usize {
        if fence.is_some() { CLOSE.len() } else { 0 }
    }

    fn room_for(&self, fence_after: Option<&String>) -> usize {
        let separator = usize::from(!self.current.is_empty());
        self.max.saturating_sub(self.current.len() + separator + Self::reserve(fence_after))
    }

    fn push(&mut self, text: &str) {
        if !self.current.is_empty() {
            self.current.push('\n');
        }
        self.current.push_str(text);
        self.has_content = true;
    }

    fn flush(&mut self) {
        if !self.has_content {
            return;
        }
        if self.fence.is_some() {
            self.current.push_str(CLOSE);
        }
        self.pieces.push(std::mem::take(&mut self.current));
        self.has_content = false;
        if let Some(open) = &self.fence {
            self.current = open.clone();
        }
    }

    fn add_line(&mut self, line: &str) {
        let fence_after = if is_fence(line) {
            if self.fence.is_some() { None } else { Some(line.to_owned()) }
        } else {
            self.fence.clone()
        };
        if line.len() <= self.room_for(fence_after.as_ref()) {
            self.push(line);
            self.fence = fence_after;
            return;
        }
        self.flush();
        if line.len() <= self.room_for(fence_after.as_ref()) {
            self.push(line);
            self.fence = fence_after;
            return;
        }
        // A single line longer than a part: cut it on character boundaries.
        let mut rest = line;
        while !rest.is_empty() {
            let room = self.room_for(self.fence.as_ref());
            let mut cut = floor_char_boundary(rest, room);
            if cut == 0 {
                if self.has_content {
                    self.flush();
                    continue;
                }
                // Not even one character fits beside the fence: take one anyway; the final
                // hard cut keeps the limit.
                cut = rest.chars().next().map_or(rest.len(), char::len_utf8);
            }
            self.push(&rest[..cut]);
            rest = &rest[cut..];
            if !rest.is_empty() {
                self.flush();
            }
        }
        self.fence = fence_after;
    }
}

/// The largest index `<= index` that is a character boundary of `text`.
fn floor_char_boundary(text: &str, index: usize) -> usize {
    if index >= text.len() {
        return text.len();
    }
    (0..=index).rev().find(|&i| text.is_char_boundary(i)).unwrap_or(0)
}

fn hard_cut(part: String, max: usize) -> Vec<String> {
    if part.len() <= max || max == 0 {
        return vec![part];
    }
    let mut out = Vec::new();
    let mut rest = part.as_str();
    while !rest.is_empty() {
        let mut cut = floor_char_boundary(rest, max);
        if cut == 0 {
            cut = rest.chars().next().map_or(rest.len(), char::len_utf8);
        }
        out.push(rest[..cut].to_owned());
        rest = &rest[cut..];
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    fn fences_balanced(part: &str) -> bool {
        part.lines().filter(|l| is_fence(l)).count() % 2 == 0
    }

    #[test]
    fn short_text_is_one_part() {
        assert_eq!(split_answer("a\n\nb", 100), ["a\n\nb"]);
    }

    #[test]
    fn paragraphs_are_not_cut() {
        let text = "aaaa\n\nbbbb\n\ncccc";
        assert_eq!(split_answer(text, 10), ["aaaa\n\nbbbb", "cccc"]);
    }

    #[test]
    fn code_block_with_blank_lines_stays_whole() {
        let text = "intro\n\n```rust\nfn a() {}\n\nfn b() {}\n```\n\nend";
        let parts = split_answer(text, 40);
        assert!(parts.iter().all(|p| fences_balanced(p)), "{parts:?}");
        assert!(parts.iter().any(|p| p.contains("fn a() {}\n\nfn b() {}")), "{parts:?}");
    }

    #[test]
    fn oversize_code_block_is_closed_and_reopened() {
        let body: String = (0..50).map(|i| format!("let x{i} = {i};\n")).collect();
        let text = format!("```rust\n{body}```");
        let parts = split_answer(&text, 120);
        assert!(parts.len() > 1);
        for part in &parts {
            assert!(part.len() <= 120, "{}", part.len());
            assert!(fences_balanced(part), "{part}");
            assert!(part.starts_with("```rust"), "{part}");
        }
    }

    #[test]
    fn long_line_is_cut_on_char_boundaries() {
        let text = "é".repeat(100);
        let parts = split_answer(&text, 15);
        assert!(parts.iter().all(|p| p.len() <= 15));
        assert_eq!(parts.concat(), text);
    }
}
