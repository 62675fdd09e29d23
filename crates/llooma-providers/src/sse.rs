//! A server-sent events decoder: bytes in, the `data` of each event out.
//!
//! Lines may end in `\n`, `\r\n` or `\r`; several `data:` lines of one event are joined with
//! `\n`; comments (`: keep-alive`, which OpenRouter sends while a model thinks) and the other
//! fields (`event:`, `id:`, `retry:`) are skipped.

use crate::error::one_line;

/// A line of the stream that is not text.
#[derive(Debug, thiserror::Error)]
#[error("a line is not UTF-8: {excerpt}")]
pub(crate) struct NotUtf8 {
    excerpt: String,
}

/// Decodes an SSE byte stream.
#[derive(Debug, Default)]
pub(crate) struct SseDecoder {
    /// Bytes of a line not yet ended (it may stop in the middle of a UTF-8 sequence).
    partial: Vec<u8>,
    /// `data` lines of the event being read.
    data: Option<String>,
    /// The previous chunk ended in `\r`, so a `\n` starting this one belongs to it.
    after_cr: bool,
}

impl SseDecoder {
    /// Feeds bytes; pushes the data of every event they complete. A line that arrived whole
    /// is read where it lies; only the piece of a line a chunk ends in is copied (to
    /// `partial`), and lines are found with `memchr` (a byte-at-a-time search and a copy of
    /// every line are paid per byte and per line of every answer a model streams).
    pub(crate) fn feed(&mut self, bytes: &[u8], out: &mut Vec<String>) -> Result<(), NotUtf8> {
        let mut rest = bytes;
        if self.after_cr && rest.first() == Some(&b'\n') {
            rest = &rest[1..];
        }
        self.after_cr = false;
        while let Some(end) = memchr::memchr2(b'\n', b'\r', rest) {
            if self.partial.is_empty() {
                line(&mut self.data, &rest[..end], out)?;
            } else {
                self.partial.extend_from_slice(&rest[..end]);
                let read = line(&mut self.data, &self.partial, out);
                self.partial.clear();
                read?;
            }
            if rest[end] == b'\r' {
                if rest.get(end + 1) == Some(&b'\n') {
                    rest = &rest[end + 2..];
                } else {
                    self.after_cr = end + 1 == rest.len();
                    rest = &rest[end + 1..];
                }
            } else {
                rest = &rest[end + 1..];
            }
        }
        self.partial.extend_from_slice(rest);
        Ok(())
    }

    /// The end of the body: an event without its closing blank line still counts (servers
    /// that close right after the last `data:` line exist).
    pub(crate) fn finish(&mut self, out: &mut Vec<String>) -> Result<(), NotUtf8> {
        if !self.partial.is_empty() {
            let partial = std::mem::take(&mut self.partial);
            line(&mut self.data, &partial, out)?;
        }
        if let Some(data) = self.data.take() {
            out.push(data);
        }
        Ok(())
    }
}

/// One line of the stream: a blank line ends the event (its `data`, if any, goes to `out`); a
/// `data:` line adds to it; anything else is skipped.
fn line(data: &mut Option<String>, line: &[u8], out: &mut Vec<String>) -> Result<(), NotUtf8> {
    if line.is_empty() {
        if let Some(data) = data.take() {
            out.push(data);
        }
        return Ok(());
    }
    let line = std::str::from_utf8(line)
        .map_err(|_| NotUtf8 { excerpt: one_line(&String::from_utf8_lossy(line), 80) })?;
    if line.starts_with(':') {
        return Ok(());
    }
    let (field, value) = match line.split_once(':') {
        Some((field, value)) => (field, value.strip_prefix(' ').unwrap_or(value)),
        None => (line, ""),
    };
    if field == "data" {
        match data {
            Some(data) => {
                data.push('\n');
                data.push_str(value);
            }
            None => *data = Some(value.to_owned()),
        }
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    fn decode(pieces: &[&[u8]]) -> Vec<String> {
        let mut decoder = SseDecoder::default();
        let mut out = Vec::new();
        for piece in pieces {
            decoder.feed(piece, &mut out).unwrap();
        }
        decoder.finish(&mut out).unwrap();
        out
    }

    #[test]
    fn events_split_anywhere_decode_the_same() {
        let body = "data: {\"a\":1}\n\n: keep-alive\n\nevent: x\ndata: é\ndata: two\r\n\r\ndata:[DONE]\r\r";
        let expected = vec!["{\"a\":1}".to_owned(), "é\ntwo".to_owned(), "[DONE]".to_owned()];
        let bytes = body.as_bytes();
        for cut in 0..bytes.len() {
            assert_eq!(decode(&[&bytes[..cut], &bytes[cut..]]), expected, "cut at {cut}");
        }
        let singles: Vec<&[u8]> = bytes.chunks(1).collect();
        assert_eq!(decode(&singles), expected);
    }

    #[test]
    fn last_event_without_blank_line_counts() {
        assert_eq!(decode(&[b"data: last"]), vec!["last".to_owned()]);
    }

    #[test]
    fn invalid_utf8_is_an_error() {
        let mut decoder = SseDecoder::default();
        assert!(decoder.feed(b"data: \xff\xfe\n", &mut Vec::new()).is_err());
    }
}
