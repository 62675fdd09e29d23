//! A `multipart/form-data` body (RFC 7578), written by hand: the audio transcription API takes
//! one, and one small writer is less than a second HTTP library.

use bytes::Bytes;
use memchr::memmem;

/// A form being written: text fields and files, in order.
#[derive(Debug, Default)]
pub(crate) struct Form {
    parts: Vec<Part>,
}

#[derive(Debug)]
struct Part {
    name: String,
    file: Option<(String, String)>,
    data: Bytes,
}

/// A written form: its `Content-Type` (with the boundary) and its body.
#[derive(Debug)]
pub(crate) struct Written {
    pub content_type: String,
    pub body: Bytes,
}

impl Form {
    /// Adds a text field.
    pub fn text(mut self, name: &str, value: &str) -> Self {
        self.parts.push(Part {
            name: header_safe(name),
            file: None,
            data: Bytes::copy_from_slice(value.as_bytes()),
        });
        self
    }

    /// Adds a file: its field name, the name it is given and its content type.
    pub fn file(mut self, name: &str, file_name: &str, content_type: &str, data: Bytes) -> Self {
        self.parts.push(Part {
            name: header_safe(name),
            file: Some((header_safe(file_name), header_safe(content_type))),
            data,
        });
        self
    }

    /// Writes the body with a boundary that occurs in none of the parts.
    pub fn write(self) -> Written {
        let boundary = (0u32..)
            .map(|n| format!("llooma-form-{n:08x}-boundary"))
            .find(|b| self.parts.iter().all(|p| memmem::find(&p.data, b.as_bytes()).is_none()))
            .unwrap_or_default();
        let size: usize = self.parts.iter().map(|p| p.data.len() + 200).sum();
        let mut body = Vec::with_capacity(size + boundary.len() + 8);
        for part in &self.parts {
            body.extend_from_slice(format!("--{boundary}\r\n").as_bytes());
            match &part.file {
                None => body.extend_from_slice(
                    format!("Content-Disposition: form-data; name=\"{}\"\r\n\r\n", part.name)
                        .as_bytes(),
                ),
                Some((file_name, content_type)) => body.extend_from_slice(
                    format!(
                        "Content-Disposition: form-data; name=\"{}\"; filename=\"{file_name}\"\r\n\
                         Content-Type: {content_type}\r\n\r\n",
                        part.name
                    )
                    .as_bytes(),
                ),
            }
            body.extend_from_slice(&part.data);
            body.extend_from_slice(b"\r\n");
        }
        body.extend_from_slice(format!("--{boundary}--\r\n").as_bytes());
        Written {
            content_type: format!("multipart/form-data; boundary={boundary}"),
            body: body.into(),
        }
    }
}

/// A name or type as it may stand in a part's header: no quote, backslash or control
/// character (each becomes `_`), so nothing can end the header or the quoted string early.
fn header_safe(text: &str) -> String {
    text.chars().map(|c| if c == '"' || c == '\\' || c.is_control() { '_' } else { c }).collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_form_is_written_as_rfc_7578_says() {
        let written = Form::default()
            .file("file", "recording.webm", "audio/webm", Bytes::from_static(b"\x1aE\xdf\xa3abc"))
            .text("model", "whisper-1")
            .write();
        assert_eq!(
            written.content_type,
            "multipart/form-data; boundary=llooma-form-00000000-boundary"
        );
        let expected = b"--llooma-form-00000000-boundary\r\n\
Content-Disposition: form-data; name=\"file\"; filename=\"recording.webm\"\r\n\
Content-Type: audio/webm\r\n\r\n\x1aE\xdf\xa3abc\r\n\
--llooma-form-00000000-boundary\r\n\
Content-Disposition: form-data; name=\"model\"\r\n\r\nwhisper-1\r\n\
--llooma-form-00000000-boundary--\r\n";
        assert_eq!(&written.body[..], &expected[..]);
    }

    #[test]
    fn the_boundary_never_occurs_in_a_part() {
        let sly =
            Bytes::from_static(b"..--llooma-form-00000000-boundary..llooma-form-00000001-boundary");
        let written = Form::default().file("file", "a.wav", "audio/wav", sly).write();
        assert!(written.content_type.ends_with("llooma-form-00000002-boundary"));
    }

    #[test]
    fn names_cannot_break_out_of_their_header() {
        let written = Form::default()
            .file("file", "a\"; name=\"model\r\nX: y.webm", "audio/webm\r\nX: y", Bytes::new())
            .write();
        let text = String::from_utf8_lossy(&written.body);
        assert!(text.contains("filename=\"a_; name=_model__X: y.webm\""), "{text}");
        assert!(text.contains("Content-Type: audio/webm__X: y\r\n"), "{text}");
    }
}
