//! Headers of a response the browser saves or shows as a file: one way to name it.

use axum::http::HeaderValue;

/// How the browser is to treat a served file.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum Disposition {
    /// Shown in the page (an image).
    Inline,
    /// Saved under its name.
    Attachment,
}

/// `Content-Disposition` for a file named `name`: a plain ASCII name for every browser and the
/// exact one (RFC 6266 `filename*`) for those that read it. A name cannot break out of the
/// header: quotes, backslashes and control characters never reach the plain form, and the exact
/// form is percent-encoded.
pub(crate) fn content_disposition(disposition: Disposition, name: &str) -> HeaderValue {
    let kind = match disposition {
        Disposition::Inline => "inline",
        Disposition::Attachment => "attachment",
    };
    let plain: String = name
        .chars()
        .map(|c| if c.is_ascii_alphanumeric() || ".-_ ".contains(c) { c } else { '_' })
        .collect();
    let exact = llooma_types::encode_query_value(name);
    HeaderValue::from_str(&format!("{kind}; filename=\"{plain}\"; filename*=UTF-8''{exact}"))
        .unwrap_or(HeaderValue::from_static("attachment"))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_hostile_name_stays_inside_the_header() {
        let value = content_disposition(Disposition::Attachment, "a\"; evil=1\r\n.txt");
        let text = value.to_str().unwrap();
        assert_eq!(
            text,
            "attachment; filename=\"a__ evil_1__.txt\"; filename*=UTF-8''a%22%3B%20evil%3D1%0D%0A.txt"
        );
    }

    #[test]
    fn a_name_beyond_ascii_is_kept_exactly_in_the_second_form() {
        let value = content_disposition(Disposition::Inline, "Résumé.png");
        assert_eq!(
            value.to_str().unwrap(),
            "inline; filename=\"R_sum_.png\"; filename*=UTF-8''R%C3%A9sum%C3%A9.png"
        );
    }
}
