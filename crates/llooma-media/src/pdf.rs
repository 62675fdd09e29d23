//! The text of a PDF, with lopdf as the parser and a text walker of our own.
//!
//! Why lopdf directly rather than `pdf-extract` (which is built on an older lopdf): lopdf 0.47
//! bounds what it decodes (per-stream decompression limits, nesting depth, page-tree depth and
//! reference cycles, object counts when it rebuilds a broken cross-reference table), returns
//! errors rather than panicking on malformed input, and is actively maintained. `pdf-extract`
//! lays text out better (it follows glyph positions and widths) but pins lopdf 0.42, loads a
//! document with no bound on what its streams inflate to, and panics on many malformed
//! inputs (`unwrap` and `panic!` throughout); a hostile upload must not take down the thread
//! that reads it. lopdf's own `extract_text` bounds each page but not the document, ignores
//! Form XObjects and builds every operation of a content stream in memory, so the walking is
//! ours: `lexer` reads tokens one at a time, and this module charges everything it inflates
//! to one budget.
//!
//! The bounds, in the order they apply:
//! 1. an encryption dictionary is refused before anything is parsed;
//! 2. `scan::check_streams` measures, on the raw bytes, what the streams a reader could decode
//!    inflate to, all together, before lopdf sees the file (lopdf inflates object streams while
//!    loading, bounded only one by one);
//! 3. lopdf loads with a per-stream bound as a second line;
//! 4. pages are counted (the page tree as it is, never its claimed `/Count`) and refused past
//!    the limit;
//! 5. while walking, every content stream, Form XObject and ToUnicode map decoded is charged to
//!    a second budget of the same size; Form XObjects nest at most `MAX_FORM_DEPTH` deep and
//!    are entered at most `MAX_FORMS` times in a document; the walk stops once enough
//!    characters are read.
//!
//! Time is linear in the file's size plus twice the inflation budget.

mod lexer;
mod scan;

use std::collections::{HashMap, HashSet};

use lopdf::{Dictionary, Document, Encoding, LoadOptions, Object, ObjectId};

use crate::error::MediaError;
use crate::sniff::find;
use lexer::{Lexer, Token};

/// How deep Form XObjects may draw each other. Real documents nest two or three deep.
const MAX_FORM_DEPTH: usize = 12;
/// How many times Form XObjects may be entered in one document: forms that draw each other ten
/// times at each level would otherwise cost ten to the depth.
const MAX_FORMS: usize = 20_000;
/// A `TJ` adjustment further left than this (thousandths of an em) is a gap between words.
const WORD_GAP: f64 = 200.0;

/// Bytes inflated so far against a limit.
pub(crate) struct Budget {
    left: u64,
    max: u64,
}

impl Budget {
    pub(crate) fn new(max: u64) -> Self {
        Self { left: max, max }
    }

    fn spend(&mut self, bytes: usize) -> Result<(), MediaError> {
        let bytes = u64::try_from(bytes).unwrap_or(u64::MAX);
        self.left = self.left.checked_sub(bytes).ok_or_else(|| self.exceeded())?;
        Ok(())
    }

    fn left_usize(&self) -> usize {
        usize::try_from(self.left).unwrap_or(usize::MAX)
    }

    fn exceeded(&self) -> MediaError {
        MediaError::Inflates { max_mib: self.max.div_ceil(1024 * 1024) }
    }
}

/// What was read from a PDF.
pub(crate) struct PdfText {
    pub(crate) text: String,
    /// Whether reading stopped at `max_chars` with text left.
    pub(crate) cut: bool,
    pub(crate) pages: u32,
}

pub(crate) fn extract(
    bytes: &[u8],
    max_chars: usize,
    max_pages: u32,
    max_inflated: u64,
) -> Result<PdfText, MediaError> {
    if declares_encryption(bytes) {
        return Err(MediaError::Encrypted);
    }
    scan::check_streams(bytes, &mut Budget::new(max_inflated))?;

    let options = LoadOptions {
        max_decompressed_size: Some(usize::try_from(max_inflated).unwrap_or(usize::MAX)),
        ..LoadOptions::default()
    };
    let document =
        Document::load_mem_with_options(bytes, options).map_err(|error| match error {
            lopdf::Error::Decompress(lopdf::DecompressError::MemoryLimitExceeded { .. }) => {
                Budget::new(max_inflated).exceeded()
            }
            lopdf::Error::Decryption(_)
            | lopdf::Error::InvalidPassword
            | lopdf::Error::UnsupportedSecurityHandler(_) => MediaError::Encrypted,
            _ => MediaError::Corrupt { what: "PDF" },
        })?;
    if document.trailer.has(b"Encrypt") || document.is_encrypted() || document.was_encrypted() {
        return Err(MediaError::Encrypted);
    }

    // The tree as it is: lopdf walks it with a depth bound and at most one step per object.
    // A page listed twice (a tree that contains itself) is read once.
    let mut seen = HashSet::new();
    let pages: Vec<ObjectId> = document.page_iter().filter(|page| seen.insert(*page)).collect();
    let page_count = u32::try_from(pages.len()).unwrap_or(u32::MAX);
    if page_count > max_pages {
        return Err(MediaError::TooManyPages { pages: pages.len() as u64, max: max_pages });
    }
    if pages.is_empty() {
        return Err(MediaError::Corrupt { what: "PDF" });
    }

    let mut walker = Walker {
        document: &document,
        budget: Budget::new(max_inflated),
        encodings: HashMap::new(),
        forms_entered: 0,
        out: Output::new(max_chars),
    };
    for page in pages {
        if walker.out.full() {
            break;
        }
        walker.page(page)?;
        walker.out.end_page();
    }
    let Output { text, cut, .. } = walker.out;
    if text.trim().is_empty() {
        return Err(MediaError::NoText);
    }
    Ok(PdfText { text: text.trim_end().to_owned(), cut, pages: page_count })
}

/// A `/Encrypt` key holding a dictionary or a reference: how a trailer (or a cross-reference
/// stream's dictionary) says the strings and streams are encrypted. Checked on the raw bytes
/// so no decryption or decoding is attempted at all.
fn declares_encryption(bytes: &[u8]) -> bool {
    let mut from = 0;
    while let Some(at) = find(&bytes[from..], b"/Encrypt") {
        let after = &bytes[from + at + b"/Encrypt".len()..];
        from += at + 1;
        let value = after.iter().position(|b| !b" \t\r\n\x0C\0".contains(b)).map(|i| &after[i..]);
        let Some(value) = value else { continue };
        let is_reference = || {
            let digits = value.iter().take_while(|b| b.is_ascii_digit()).count();
            digits > 0
                && value[digits..]
                    .iter()
                    .skip_while(|b| b.is_ascii_whitespace())
                    .take_while(|b| b.is_ascii_digit())
                    .count()
                    > 0
        };
        if value.starts_with(b"<<") || is_reference() {
            return true;
        }
    }
    false
}

/// The text read so far, which knows when it has enough.
struct Output {
    text: String,
    chars: usize,
    max_chars: usize,
    cut: bool,
}

impl Output {
    fn new(max_chars: usize) -> Self {
        Self { text: String::new(), chars: 0, max_chars, cut: false }
    }

    fn full(&self) -> bool {
        self.cut
    }

    fn push_str(&mut self, text: &str) {
        for ch in text.chars() {
            self.push(ch);
        }
    }

    fn push(&mut self, ch: char) {
        if self.cut {
            return;
        }
        // Control characters other than line breaks and tabs are glyph codes no font mapped.
        let ch = match ch {
            '\n' | '\t' => ch,
            '\r' => '\n',
            c if c.is_control() => return,
            c => c,
        };
        if self.chars == self.max_chars {
            // Only more text makes the reading cut; the line break after the last page does not.
            if !ch.is_whitespace() {
                self.cut = true;
            }
            return;
        }
        self.text.push(ch);
        self.chars += 1;
    }

    fn ends_with_space(&self) -> bool {
        self.text.is_empty() || self.text.ends_with(char::is_whitespace)
    }

    fn space(&mut self) {
        if !self.ends_with_space() {
            self.push(' ');
        }
    }

    fn newline(&mut self) {
        while self.text.ends_with(' ') {
            self.text.pop();
            self.chars -= 1;
        }
        if !self.text.is_empty() && !self.text.ends_with('\n') {
            self.push('\n');
        }
    }

    fn end_page(&mut self) {
        self.newline();
        if !self.text.is_empty() && !self.text.ends_with("\n\n") {
            self.push('\n');
        }
    }
}

/// The operands kept while walking: enough for any text operator (`Tm` takes six). Older ones
/// are dropped, so a stream of numbers with no operator holds no memory.
const MAX_OPERANDS: usize = 8;

#[derive(Debug)]
enum Operand {
    Number(f64),
    Name(Vec<u8>),
    Str(Vec<u8>),
    /// A `TJ` array: its strings run together, with a word gap where an adjustment says so.
    Array(Vec<Piece>),
    Other,
}

#[derive(Debug)]
enum Piece {
    Str(Vec<u8>),
    Gap,
}

/// The names a content stream's resources give to fonts and XObjects.
#[derive(Default)]
struct Resources<'a> {
    fonts: Vec<(&'a [u8], &'a Dictionary)>,
    xobjects: Vec<(&'a [u8], ObjectId)>,
}

impl<'a> Resources<'a> {
    /// Reads `dicts` in order; the first one naming a resource wins (a page's own resources
    /// before those it inherits).
    fn from_dicts(document: &'a Document, dicts: &[&'a Dictionary]) -> Self {
        let mut resources = Resources::default();
        for dict in dicts {
            if let Ok(fonts) = dict.get_deref(b"Font", document).and_then(Object::as_dict) {
                for (name, font) in fonts.iter() {
                    let font = document.dereference(font).and_then(|(_, f)| f.as_dict());
                    if let Ok(font) = font
                        && !resources.fonts.iter().any(|(known, _)| *known == name.as_slice())
                    {
                        resources.fonts.push((name, font));
                    }
                }
            }
            if let Ok(xobjects) = dict.get_deref(b"XObject", document).and_then(Object::as_dict) {
                for (name, xobject) in xobjects.iter() {
                    if let Ok(id) = xobject.as_reference()
                        && !resources.xobjects.iter().any(|(known, _)| *known == name.as_slice())
                    {
                        resources.xobjects.push((name, id));
                    }
                }
            }
        }
        resources
    }

    fn font(&self, name: &[u8]) -> Option<&'a Dictionary> {
        self.fonts.iter().find(|(known, _)| *known == name).map(|(_, font)| *font)
    }

    fn xobject(&self, name: &[u8]) -> Option<ObjectId> {
        self.xobjects.iter().find(|(known, _)| *known == name).map(|(_, id)| *id)
    }
}

struct Walker<'a> {
    document: &'a Document,
    budget: Budget,
    /// Each font's encoding, read once per document (keyed by the font dictionary's address:
    /// the same dictionary, however many pages name it).
    encodings: HashMap<usize, Option<Encoding<'a>>>,
    forms_entered: usize,
    out: Output,
}

impl<'a> Walker<'a> {
    fn charge_error(&self, error: lopdf::Error) -> Option<MediaError> {
        match error {
            lopdf::Error::Decompress(lopdf::DecompressError::MemoryLimitExceeded { .. }) => {
                Some(self.budget.exceeded())
            }
            _ => None,
        }
    }

    fn page(&mut self, page: ObjectId) -> Result<(), MediaError> {
        let document = self.document;
        let content = match document.get_page_content_with_limit(page, self.budget.left_usize()) {
            Ok(content) => content,
            Err(error) => return self.charge_error(error).map_or(Ok(()), Err),
        };
        self.budget.spend(content.len())?;
        let mut dicts = Vec::new();
        if let Ok((own, inherited)) = document.get_page_resources(page) {
            dicts.extend(own);
            dicts.extend(inherited.into_iter().filter_map(|id| document.get_dictionary(id).ok()));
        }
        let resources = Resources::from_dicts(document, &dicts);
        self.content(&content, &resources, 0)
    }

    fn encoding(&mut self, font: &'a Dictionary) -> Result<Option<&Encoding<'a>>, MediaError> {
        let key = std::ptr::from_ref(font) as usize;
        if !self.encodings.contains_key(&key) {
            // A ToUnicode map is a stream: what it inflates to is charged like any other.
            let to_unicode =
                font.get_deref(b"ToUnicode", self.document).and_then(Object::as_stream);
            if let Ok(stream) = to_unicode {
                match stream.decompressed_content_with_limit(self.budget.left_usize()) {
                    Ok(map) => self.budget.spend(map.len())?,
                    Err(error) => {
                        if let Some(error) = self.charge_error(error) {
                            return Err(error);
                        }
                    }
                }
            }
            let encoding =
                match font.get_font_encoding_with_limit(self.document, self.budget.left_usize()) {
                    Ok(encoding) => Some(encoding),
                    Err(error) => match self.charge_error(error) {
                        Some(error) => return Err(error),
                        None => None,
                    },
                };
            self.encodings.insert(key, encoding);
        }
        Ok(self.encodings.get(&key).and_then(Option::as_ref))
    }

    fn show(&mut self, font: Option<&'a Dictionary>, bytes: &[u8]) -> Result<(), MediaError> {
        let encoding = match font {
            Some(font) => self.encoding(font)?,
            None => None,
        };
        let mut text = String::new();
        match encoding {
            Some(encoding) if encoding.write_to_string(bytes, &mut text).is_ok() => {}
            // No font, or one whose encoding cannot be read: printable ASCII is still likely
            // to be what it looks like (simple fonts map it to itself).
            _ => {
                text.clear();
                text.extend(
                    bytes
                        .iter()
                        .filter(|b| b.is_ascii_graphic() || **b == b' ')
                        .map(|&b| char::from(b)),
                );
            }
        }
        self.out.push_str(&text);
        Ok(())
    }

    fn form(&mut self, id: ObjectId, depth: usize) -> Result<(), MediaError> {
        let Ok(stream) = self.document.get_object(id).and_then(Object::as_stream) else {
            return Ok(());
        };
        if stream.dict.get(b"Subtype").and_then(Object::as_name).ok() != Some(b"Form") {
            return Ok(());
        }
        if depth >= MAX_FORM_DEPTH {
            return Err(MediaError::TooComplex { what: "forms drawn inside forms too deeply" });
        }
        self.forms_entered += 1;
        if self.forms_entered > MAX_FORMS {
            return Err(MediaError::TooComplex { what: "too many forms drawn" });
        }
        let content = match stream.decompressed_content_with_limit(self.budget.left_usize()) {
            Ok(content) => content,
            Err(error) => return self.charge_error(error).map_or(Ok(()), Err),
        };
        self.budget.spend(content.len())?;
        let dicts: Vec<&Dictionary> = stream
            .dict
            .get_deref(b"Resources", self.document)
            .and_then(Object::as_dict)
            .into_iter()
            .collect();
        let resources = Resources::from_dicts(self.document, &dicts);
        self.content(&content, &resources, depth + 1)
    }

    /// Walks one content stream: text showing operators write, positioning operators decide
    /// between nothing, a space and a line break, `Do` enters Form XObjects.
    fn content(
        &mut self,
        content: &[u8],
        resources: &Resources<'a>,
        depth: usize,
    ) -> Result<(), MediaError> {
        let mut lexer = Lexer::new(content);
        let mut operands: Vec<Operand> = Vec::with_capacity(MAX_OPERANDS);
        // Arrays: only the outermost one is kept (a `TJ` array); nested ones are skipped.
        let mut array: Option<Vec<Piece>> = None;
        let mut array_depth = 0usize;
        let mut dict_depth = 0usize;
        let mut font: Option<&'a Dictionary> = None;
        let mut line_y: Option<f64> = None;

        while let Some(token) = lexer.next() {
            if self.out.full() {
                return Ok(());
            }
            if dict_depth > 0 {
                match token {
                    Token::DictStart => dict_depth += 1,
                    Token::DictEnd => dict_depth -= 1,
                    _ => {}
                }
                if dict_depth == 0 {
                    push_operand(&mut operands, Operand::Other);
                }
                continue;
            }
            if let Some(pieces) = array.as_mut() {
                match token {
                    Token::ArrayStart => array_depth += 1,
                    Token::ArrayEnd if array_depth > 0 => array_depth -= 1,
                    Token::ArrayEnd => {
                        let pieces = array.take().unwrap_or_default();
                        push_operand(&mut operands, Operand::Array(pieces));
                    }
                    Token::Str(bytes) if array_depth == 0 => match pieces.last_mut() {
                        Some(Piece::Str(last)) => last.extend_from_slice(&bytes),
                        _ => pieces.push(Piece::Str(bytes)),
                    },
                    // A gap counts between two strings only, once.
                    Token::Number(n)
                        if array_depth == 0
                            && n < -WORD_GAP
                            && matches!(pieces.last(), Some(Piece::Str(_))) =>
                    {
                        pieces.push(Piece::Gap);
                    }
                    _ => {}
                }
                continue;
            }
            let operator = match token {
                Token::Number(n) => {
                    push_operand(&mut operands, Operand::Number(n));
                    continue;
                }
                Token::Name(name) => {
                    push_operand(&mut operands, Operand::Name(name));
                    continue;
                }
                Token::Str(bytes) => {
                    push_operand(&mut operands, Operand::Str(bytes));
                    continue;
                }
                Token::ArrayStart => {
                    array = Some(Vec::new());
                    continue;
                }
                Token::DictStart => {
                    dict_depth = 1;
                    continue;
                }
                Token::ArrayEnd | Token::DictEnd => continue,
                Token::Keyword(b"true" | b"false" | b"null") => {
                    push_operand(&mut operands, Operand::Other);
                    continue;
                }
                Token::Keyword(keyword) => keyword,
            };
            let last = |n: usize| operands.len().checked_sub(n).and_then(|i| operands.get(i));
            let number = |n: usize| match last(n) {
                Some(Operand::Number(value)) => Some(*value),
                _ => None,
            };
            match operator {
                b"Tf" => {
                    if let Some(Operand::Name(name)) = last(2) {
                        font = resources.font(name);
                    }
                }
                b"Tj" => {
                    if let Some(Operand::Str(bytes)) = last(1) {
                        self.show(font, bytes)?;
                    }
                }
                b"'" | b"\"" => {
                    self.out.newline();
                    if let Some(Operand::Str(bytes)) = last(1) {
                        self.show(font, bytes)?;
                    }
                }
                b"TJ" => {
                    if let Some(Operand::Array(pieces)) = last(1) {
                        for piece in pieces {
                            match piece {
                                Piece::Str(bytes) => self.show(font, bytes)?,
                                Piece::Gap => self.out.space(),
                            }
                        }
                    }
                }
                b"Td" | b"TD" => match (number(2), number(1)) {
                    (Some(_), Some(ty)) if ty.abs() > f64::EPSILON => self.out.newline(),
                    (Some(tx), Some(_)) if tx.abs() > f64::EPSILON => self.out.space(),
                    _ => {}
                },
                b"T*" => self.out.newline(),
                b"Tm" => {
                    if let Some(y) = number(1) {
                        match line_y {
                            Some(previous) if (previous - y).abs() < 0.5 => self.out.space(),
                            _ => self.out.newline(),
                        }
                        line_y = Some(y);
                    }
                }
                b"BT" => line_y = None,
                b"Do" => {
                    if let Some(Operand::Name(name)) = last(1)
                        && let Some(id) = resources.xobject(name)
                    {
                        self.form(id, depth)?;
                    }
                }
                b"ID" => lexer.skip_inline_image(),
                _ => {}
            }
            operands.clear();
        }
        Ok(())
    }
}

fn push_operand(operands: &mut Vec<Operand>, operand: Operand) {
    if operands.len() == MAX_OPERANDS {
        operands.remove(0);
    }
    operands.push(operand);
}

#[cfg(test)]
mod tests;
