//! The text of an attachment, as a model will read it.

use crate::error::MediaError;
use crate::pdf;
use crate::sniff::{Kind, Sniffed, UTF8_BOM, is_text};

/// How much text is read, and how much work a PDF may cost.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct TextLimits {
    /// Text beyond this many characters is cut off (`ExtractedText::cut`).
    pub max_chars: usize,
    /// A PDF of more pages is refused before its text is read.
    pub max_pdf_pages: u32,
    /// What a PDF's compressed streams may expand to, all together; a PDF whose streams expand
    /// to more is refused.
    pub max_pdf_bytes_inflated: u64,
}

impl Default for TextLimits {
    /// 100,000 characters is about 25,000 tokens: a long document that still leaves a model
    /// room for the conversation. 500 pages covers books and reports; 64 MiB of inflated
    /// streams is many times what the text of 500 pages needs.
    fn default() -> Self {
        Self { max_chars: 100_000, max_pdf_pages: 500, max_pdf_bytes_inflated: 64 * 1024 * 1024 }
    }
}

/// Text read from a file.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ExtractedText {
    pub text: String,
    /// The file had more than `max_chars` characters; `text` stops there.
    pub cut: bool,
    /// A PDF's number of pages; None for a text file.
    pub pages: Option<u32>,
}

/// The text of a text file or a PDF. `sniffed` says which (from [`crate::sniff`] on the same
/// bytes); the bytes are checked again all the same.
pub fn extract_text(
    bytes: &[u8],
    sniffed: &Sniffed,
    limits: &TextLimits,
) -> Result<ExtractedText, MediaError> {
    match sniffed.kind {
        Kind::Text(_) => text_file(bytes, limits.max_chars),
        Kind::Pdf => {
            let pdf = pdf::extract(
                bytes,
                limits.max_chars,
                limits.max_pdf_pages,
                limits.max_pdf_bytes_inflated,
            )?;
            Ok(ExtractedText { text: pdf.text, cut: pdf.cut, pages: Some(pdf.pages) })
        }
        Kind::Image(_) | Kind::Audio(_) | Kind::Unknown => {
            Err(MediaError::Unsupported { content_type: sniffed.content_type })
        }
    }
}

fn text_file(bytes: &[u8], max_chars: usize) -> Result<ExtractedText, MediaError> {
    if !is_text(bytes) {
        return Err(MediaError::Corrupt { what: "text file" });
    }
    let bytes = bytes.strip_prefix(UTF8_BOM).unwrap_or(bytes);
    let text = std::str::from_utf8(bytes).map_err(|_| MediaError::Corrupt { what: "text file" })?;
    let (text, cut) = match text.char_indices().nth(max_chars) {
        Some((end, _)) => (&text[..end], true),
        None => (text, false),
    };
    Ok(ExtractedText { text: text.to_owned(), cut, pages: None })
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::sniff;

    fn read(bytes: &[u8], name: &str, max_chars: usize) -> Result<ExtractedText, MediaError> {
        let limits = TextLimits { max_chars, ..TextLimits::default() };
        extract_text(bytes, &sniff(bytes, name), &limits)
    }

    #[test]
    fn a_text_file_is_read_without_its_byte_order_mark() {
        let got = read(b"\xEF\xBB\xBFcaf\xC3\xA9\n", "a.md", 100);
        assert_eq!(got, Ok(ExtractedText { text: "café\n".into(), cut: false, pages: None }));
    }

    #[test]
    fn a_long_text_is_cut_on_a_character_boundary() {
        let got = read("ééééé".as_bytes(), "a.txt", 3);
        assert_eq!(got, Ok(ExtractedText { text: "ééé".into(), cut: true, pages: None }));
        let exact = read("ééé".as_bytes(), "a.txt", 3);
        assert_eq!(exact, Ok(ExtractedText { text: "ééé".into(), cut: false, pages: None }));
    }

    #[test]
    fn images_and_sounds_have_no_text_to_read() {
        let jpeg = [0xFF, 0xD8, 0xFF, 0xE0];
        let got = read(&jpeg, "a.jpg", 10);
        assert_eq!(got, Err(MediaError::Unsupported { content_type: "image/jpeg" }));
        assert!(got.is_err_and(|e| e.to_string().contains("image/jpeg")));
    }

    #[test]
    fn bytes_that_are_not_what_the_caller_said_are_refused() {
        let text = sniff(b"hello", "a.txt");
        let got = extract_text(b"\xFF\xFE\0h", &text, &TextLimits::default());
        assert_eq!(got, Err(MediaError::Corrupt { what: "text file" }));
    }
}
