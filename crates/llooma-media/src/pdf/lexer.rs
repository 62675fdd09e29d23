//! The tokens of a PDF content stream, one at a time. Written here rather than taken from
//! lopdf's content parser because that one builds a whole operation (every operand, every array
//! element) as objects before it returns it: a 64 MiB stream of numbers before one operator
//! would become gigabytes of objects. This lexer holds nothing but the token it returns, never
//! recurses (nesting is the caller's counter), and moves forward by at least one byte on every
//! call, so a stream of any shape ends in time linear in its length.

#[derive(Debug, PartialEq)]
pub(super) enum Token<'a> {
    Number(f64),
    /// A name, `#xx` escapes decoded.
    Name(Vec<u8>),
    /// A literal or hexadecimal string, escapes decoded.
    Str(Vec<u8>),
    ArrayStart,
    ArrayEnd,
    DictStart,
    DictEnd,
    /// Any other run of regular characters: operators, and `true`, `false`, `null`.
    Keyword(&'a [u8]),
}

pub(super) struct Lexer<'a> {
    data: &'a [u8],
    pos: usize,
}

fn is_whitespace(byte: u8) -> bool {
    matches!(byte, b'\0' | b'\t' | b'\n' | b'\x0C' | b'\r' | b' ')
}

fn is_delimiter(byte: u8) -> bool {
    matches!(byte, b'(' | b')' | b'<' | b'>' | b'[' | b']' | b'{' | b'}' | b'/' | b'%')
}

fn is_regular(byte: u8) -> bool {
    !is_whitespace(byte) && !is_delimiter(byte)
}

fn hex_value(byte: u8) -> Option<u8> {
    match byte {
        b'0'..=b'9' => Some(byte - b'0'),
        b'a'..=b'f' => Some(byte - b'a' + 10),
        b'A'..=b'F' => Some(byte - b'A' + 10),
        _ => None,
    }
}

impl<'a> Lexer<'a> {
    pub(super) fn new(data: &'a [u8]) -> Self {
        Self { data, pos: 0 }
    }

    fn peek(&self) -> Option<u8> {
        self.data.get(self.pos).copied()
    }

    /// After an `ID` operator: skips an inline image's bytes up to its `EI`, which must stand
    /// between whitespace (or at the end), as readers require; the data itself is binary.
    pub(super) fn skip_inline_image(&mut self) {
        let data = self.data;
        let mut at = self.pos + 1;
        while at + 1 < data.len() {
            let is_ei = data[at] == b'E'
                && data[at + 1] == b'I'
                && is_whitespace(data[at - 1])
                && data.get(at + 2).is_none_or(|&next| is_whitespace(next));
            if is_ei {
                self.pos = at + 2;
                return;
            }
            at += 1;
        }
        self.pos = data.len();
    }

    fn skip_whitespace_and_comments(&mut self) {
        while let Some(byte) = self.peek() {
            if is_whitespace(byte) {
                self.pos += 1;
            } else if byte == b'%' {
                while self.peek().is_some_and(|b| b != b'\n' && b != b'\r') {
                    self.pos += 1;
                }
            } else {
                break;
            }
        }
    }

    fn regular_run(&mut self) -> &'a [u8] {
        let start = self.pos;
        while self.peek().is_some_and(is_regular) {
            self.pos += 1;
        }
        &self.data[start..self.pos]
    }

    fn name(&mut self) -> Token<'a> {
        self.pos += 1;
        let raw = self.regular_run();
        let mut name = Vec::with_capacity(raw.len());
        let mut i = 0;
        while i < raw.len() {
            match (raw[i], raw.get(i + 1).and_then(|&b| hex_value(b)), raw.get(i + 2)) {
                (b'#', Some(high), Some(&low)) if hex_value(low).is_some() => {
                    name.push(high << 4 | hex_value(low).unwrap_or(0));
                    i += 3;
                }
                (byte, ..) => {
                    name.push(byte);
                    i += 1;
                }
            }
        }
        Token::Name(name)
    }

    fn literal_string(&mut self) -> Token<'a> {
        self.pos += 1;
        let mut out = Vec::new();
        let mut depth = 1usize;
        while let Some(byte) = self.peek() {
            self.pos += 1;
            match byte {
                b'(' => {
                    depth += 1;
                    out.push(byte);
                }
                b')' => {
                    depth -= 1;
                    if depth == 0 {
                        break;
                    }
                    out.push(byte);
                }
                b'\\' => self.escape(&mut out),
                _ => out.push(byte),
            }
        }
        Token::Str(out)
    }

    fn escape(&mut self, out: &mut Vec<u8>) {
        let Some(byte) = self.peek() else { return };
        self.pos += 1;
        match byte {
            b'n' => out.push(b'\n'),
            b'r' => out.push(b'\r'),
            b't' => out.push(b'\t'),
            b'b' => out.push(0x08),
            b'f' => out.push(0x0C),
            b'0'..=b'7' => {
                let mut value = u32::from(byte - b'0');
                for _ in 0..2 {
                    match self.peek() {
                        Some(digit @ b'0'..=b'7') => {
                            value = value * 8 + u32::from(digit - b'0');
                            self.pos += 1;
                        }
                        _ => break,
                    }
                }
                out.push((value & 0xFF) as u8);
            }
            // A backslash before an end of line continues the string on the next line.
            b'\r' => {
                if self.peek() == Some(b'\n') {
                    self.pos += 1;
                }
            }
            b'\n' => {}
            other => out.push(other),
        }
    }

    fn hex_string(&mut self) -> Token<'a> {
        self.pos += 1;
        let mut out = Vec::new();
        let mut high: Option<u8> = None;
        while let Some(byte) = self.peek() {
            self.pos += 1;
            if byte == b'>' {
                break;
            }
            let Some(value) = hex_value(byte) else { continue };
            match high.take() {
                Some(h) => out.push(h << 4 | value),
                None => high = Some(value),
            }
        }
        if let Some(h) = high {
            out.push(h << 4);
        }
        Token::Str(out)
    }
}

impl<'a> Iterator for Lexer<'a> {
    type Item = Token<'a>;

    fn next(&mut self) -> Option<Token<'a>> {
        loop {
            self.skip_whitespace_and_comments();
            let byte = self.peek()?;
            let next = self.data.get(self.pos + 1).copied();
            return Some(match byte {
                b'/' => self.name(),
                b'(' => self.literal_string(),
                b'<' if next == Some(b'<') => {
                    self.pos += 2;
                    Token::DictStart
                }
                b'<' => self.hex_string(),
                b'>' if next == Some(b'>') => {
                    self.pos += 2;
                    Token::DictEnd
                }
                b'[' => {
                    self.pos += 1;
                    Token::ArrayStart
                }
                b']' => {
                    self.pos += 1;
                    Token::ArrayEnd
                }
                // Stray delimiters (`)`, a lone `>`, PostScript braces) carry nothing: skip them.
                b')' | b'>' | b'{' | b'}' => {
                    self.pos += 1;
                    continue;
                }
                _ => {
                    let run = self.regular_run();
                    match parse_number(run) {
                        Some(number) => Token::Number(number),
                        None => Token::Keyword(run),
                    }
                }
            });
        }
    }
}

/// `12`, `-3.5`, `.5`, `+7.`: what PDF writes as numbers. Anything else is a keyword.
fn parse_number(run: &[u8]) -> Option<f64> {
    let first = *run.first()?;
    if !(first.is_ascii_digit() || matches!(first, b'+' | b'-' | b'.')) {
        return None;
    }
    std::str::from_utf8(run).ok()?.parse::<f64>().ok().filter(|n| n.is_finite())
}

#[cfg(test)]
mod tests {
    use super::*;

    fn tokens(data: &[u8]) -> Vec<Token<'_>> {
        Lexer::new(data).collect()
    }

    #[test]
    fn reads_the_tokens_of_a_text_object() {
        let got = tokens(
            b"BT /F#31 12 Tf 72 -7.5 Td (a\\(b\\) \\101\\\nc) Tj [(x) -250 <4142 4>] TJ ET % done",
        );
        assert_eq!(
            got,
            vec![
                Token::Keyword(b"BT"),
                Token::Name(b"F1".to_vec()),
                Token::Number(12.0),
                Token::Keyword(b"Tf"),
                Token::Number(72.0),
                Token::Number(-7.5),
                Token::Keyword(b"Td"),
                Token::Str(b"a(b) Ac".to_vec()),
                Token::Keyword(b"Tj"),
                Token::ArrayStart,
                Token::Str(b"x".to_vec()),
                Token::Number(-250.0),
                Token::Str(b"AB@".to_vec()),
                Token::ArrayEnd,
                Token::Keyword(b"TJ"),
                Token::Keyword(b"ET"),
            ]
        );
    }

    #[test]
    fn skips_an_inline_image_s_binary_data() {
        let mut lexer = Lexer::new(b"BI /W 2 /H 1 ID \x00EI\xFF) EI Q");
        let mut seen = Vec::new();
        while let Some(token) = lexer.next() {
            if token == Token::Keyword(b"ID") {
                lexer.skip_inline_image();
            }
            seen.push(token);
        }
        assert_eq!(seen.last(), Some(&Token::Keyword(b"Q")));
    }

    #[test]
    fn ends_on_any_bytes() {
        for data in [&b"(((((("[..], b"<<<<", b")))>>>]]]", b"\\", b"(\\", b"<a", b"/", b"%", b"}{"]
        {
            assert!(tokens(data).len() <= data.len());
        }
    }
}
