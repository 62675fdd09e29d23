//! Reads a `multipart/form-data` body (RFC 7578) as the audio transcription endpoint receives
//! one: enough of the format to check what a client sent, strictly, so a malformed form fails.

/// One part of a form.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct FormPart {
    /// The field's name.
    pub name: String,
    /// The file name, for a file.
    pub file_name: Option<String>,
    /// The part's `Content-Type`, if it has one.
    pub content_type: Option<String>,
    /// The part's bytes.
    pub data: Vec<u8>,
}

/// The boundary named by a `Content-Type: multipart/form-data; boundary=...` value.
pub fn boundary(content_type: &str) -> Option<String> {
    let mut pieces = content_type.split(';');
    if !pieces.next()?.trim().eq_ignore_ascii_case("multipart/form-data") {
        return None;
    }
    pieces.find_map(|p| {
        let (key, value) = p.split_once('=')?;
        key.trim()
            .eq_ignore_ascii_case("boundary")
            .then(|| value.trim().trim_matches('"').to_owned())
    })
}

/// The parts of a form body written with `boundary`, or what is wrong with it.
pub fn parse(body: &[u8], boundary: &str) -> Result<Vec<FormPart>, String> {
    let delimiter = format!("--{boundary}").into_bytes();
    let mut rest = body
        .strip_prefix(delimiter.as_slice())
        .ok_or("the body does not start with the boundary")?;
    let mut parts = Vec::new();
    loop {
        if rest.starts_with(b"--") {
            return Ok(parts);
        }
        rest = rest.strip_prefix(b"\r\n").ok_or("a boundary is not followed by CRLF")?;
        let header_end = find(rest, b"\r\n\r\n").ok_or("a part's headers do not end")?;
        let headers = std::str::from_utf8(&rest[..header_end])
            .map_err(|_| "a part's headers are not UTF-8")?;
        rest = &rest[header_end + 4..];
        let mut closing = b"\r\n".to_vec();
        closing.extend_from_slice(&delimiter);
        let data_end = find(rest, &closing).ok_or("a part does not end with the boundary")?;
        let data = rest[..data_end].to_vec();
        rest = &rest[data_end + closing.len()..];
        let mut part = FormPart { name: String::new(), file_name: None, content_type: None, data };
        for line in headers.split("\r\n") {
            let (name, value) = line.split_once(':').ok_or("a part's header has no colon")?;
            match name.trim().to_ascii_lowercase().as_str() {
                "content-disposition" => {
                    let mut params = value.split(';');
                    if params.next().map(str::trim) != Some("form-data") {
                        return Err("a part is not form-data".into());
                    }
                    for param in params {
                        let Some((key, value)) = param.split_once('=') else { continue };
                        let value = value.trim().trim_matches('"').to_owned();
                        match key.trim() {
                            "name" => part.name = value,
                            "filename" => part.file_name = Some(value),
                            _ => {}
                        }
                    }
                }
                "content-type" => part.content_type = Some(value.trim().to_owned()),
                _ => {}
            }
        }
        if part.name.is_empty() {
            return Err("a part has no name".into());
        }
        parts.push(part);
    }
}

fn find(haystack: &[u8], needle: &[u8]) -> Option<usize> {
    haystack.windows(needle.len()).position(|w| w == needle)
}

#[cfg(test)]
mod tests {
    use super::*;

    const FORM: &[u8] = b"--xyz\r\n\
Content-Disposition: form-data; name=\"file\"; filename=\"recording.webm\"\r\n\
Content-Type: audio/webm\r\n\r\n\x1aE\r\n--xy\r\n\
--xyz\r\n\
Content-Disposition: form-data; name=\"model\"\r\n\r\nwhisper-1\r\n\
--xyz--\r\n";

    #[test]
    fn a_form_reads_back_part_by_part() {
        assert_eq!(boundary("multipart/form-data; boundary=xyz").as_deref(), Some("xyz"));
        assert_eq!(
            boundary("Multipart/Form-Data; charset=x; boundary=\"xyz\"").as_deref(),
            Some("xyz")
        );
        assert_eq!(boundary("application/json"), None);
        let parts = parse(FORM, "xyz").unwrap();
        assert_eq!(parts.len(), 2);
        assert_eq!(parts[0].name, "file");
        assert_eq!(parts[0].file_name.as_deref(), Some("recording.webm"));
        assert_eq!(parts[0].content_type.as_deref(), Some("audio/webm"));
        assert_eq!(parts[0].data, b"\x1aE\r\n--xy");
        assert_eq!(parts[1].name, "model");
        assert_eq!(parts[1].data, b"whisper-1");
    }

    #[test]
    fn a_malformed_form_is_refused() {
        assert!(parse(b"no boundary here", "xyz").is_err());
        assert!(
            parse(b"--xyz\r\nContent-Disposition: form-data; name=\"a\"\r\n\r\nunended", "xyz")
                .is_err()
        );
        assert!(parse(b"--xyz\r\nContent-Type: text/plain\r\n\r\nx\r\n--xyz--", "xyz").is_err());
    }
}
