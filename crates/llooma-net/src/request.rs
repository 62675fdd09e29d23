//! [`NetRequest`]: what [`NetClient::send`](crate::NetClient::send) sends, built on `http`'s
//! types (hyper's own), so the one client needs no second HTTP library for its requests.

use std::fmt;
use std::time::Duration;

use bytes::Bytes;
use http::Method;
use http::header::{self, HeaderMap, HeaderName, HeaderValue};
use url::Url;

/// A request for [`NetClient::send`](crate::NetClient::send), started with
/// [`NetClient::request`](crate::NetClient::request) (which decided on its URL already).
///
/// Headers that cannot be headers (a newline in a value, a space in a name) are not an error
/// here, to keep the builder chain short: the first one is kept and `send` fails with it.
#[derive(Clone)]
pub struct NetRequest {
    pub(crate) method: Method,
    pub(crate) url: Url,
    pub(crate) headers: HeaderMap,
    pub(crate) body: Bytes,
    pub(crate) timeout: Option<Duration>,
    pub(crate) invalid: Option<InvalidHeader>,
}

/// A header given to a [`NetRequest`] that is not a valid header.
#[derive(Debug, Clone, thiserror::Error)]
#[error("the request header {name:?} is not a valid header name and value: {problem}")]
pub struct InvalidHeader {
    name: String,
    problem: String,
}

impl fmt::Debug for NetRequest {
    /// Without headers or body: they carry credentials.
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("NetRequest")
            .field("method", &self.method)
            .field("url", &crate::error::redact(&self.url))
            .field("body_bytes", &self.body.len())
            .finish_non_exhaustive()
    }
}

impl NetRequest {
    pub(crate) fn new(method: Method, url: Url) -> Self {
        NetRequest {
            method,
            url,
            headers: HeaderMap::new(),
            body: Bytes::new(),
            timeout: None,
            invalid: None,
        }
    }

    /// Adds a header (a second value for a name already present is added beside the first).
    pub fn header<K, V>(mut self, name: K, value: V) -> Self
    where
        K: TryInto<HeaderName>,
        K::Error: fmt::Display,
        V: TryInto<HeaderValue>,
        V::Error: fmt::Display,
    {
        let name = match name.try_into() {
            Ok(name) => name,
            Err(err) => {
                self.note_invalid("(unreadable name)", err.to_string());
                return self;
            }
        };
        match value.try_into() {
            Ok(value) => {
                self.headers.append(name, value);
            }
            Err(err) => self.note_invalid(name.as_str(), err.to_string()),
        }
        self
    }

    /// Sets every header of `headers`, replacing the values of names already set.
    pub fn headers(mut self, headers: HeaderMap) -> Self {
        self.headers.extend(headers);
        self
    }

    /// `Authorization: Bearer <token>`, marked sensitive (never logged by the HTTP stack).
    pub fn bearer_auth(self, token: &str) -> Self {
        match HeaderValue::try_from(format!("Bearer {token}")) {
            Ok(mut value) => {
                value.set_sensitive(true);
                self.header(header::AUTHORIZATION, value)
            }
            Err(_) => {
                let mut this = self;
                // The token itself is not repeated: it is a secret.
                this.note_invalid(
                    "authorization",
                    "the token holds characters a header cannot".into(),
                );
                this
            }
        }
    }

    /// The body, sent whole with its `Content-Length`.
    pub fn body(mut self, body: impl Into<Bytes>) -> Self {
        self.body = body.into();
        self
    }

    /// A deadline for this request alone, under the client's own total timeout.
    pub fn timeout(mut self, timeout: Duration) -> Self {
        self.timeout = Some(timeout);
        self
    }

    /// The method.
    pub fn method(&self) -> &Method {
        &self.method
    }

    /// The URL (decided on by the policy when the request was started).
    pub fn url(&self) -> &Url {
        &self.url
    }

    /// The headers set so far.
    pub fn headers_ref(&self) -> &HeaderMap {
        &self.headers
    }

    fn note_invalid(&mut self, name: &str, problem: String) {
        if self.invalid.is_none() {
            self.invalid = Some(InvalidHeader { name: name.to_owned(), problem });
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn request() -> NetRequest {
        NetRequest::new(Method::POST, Url::parse("https://a.example/x?token=secret").unwrap())
    }

    #[test]
    fn headers_are_added_and_replaced_as_a_map_says() {
        let mut set = HeaderMap::new();
        set.insert(header::ACCEPT, HeaderValue::from_static("application/json"));
        let built = request()
            .header(header::ACCEPT, "text/plain")
            .header("x-one", "1")
            .header("x-one", "2")
            .headers(set);
        assert_eq!(built.headers[header::ACCEPT], "application/json");
        assert_eq!(built.headers.get_all("x-one").iter().count(), 2);
        assert!(built.invalid.is_none());
    }

    #[test]
    fn the_first_invalid_header_is_kept_and_a_token_is_never_repeated() {
        let built =
            request().header("x-ok", "fine").header("x-bad", "a\nb").header("bad name", "v");
        let invalid = built.invalid.unwrap();
        assert_eq!(invalid.name, "x-bad");
        let built = request().bearer_auth("se\ncret");
        let message = built.invalid.unwrap().to_string();
        assert!(!message.contains("se\ncret") && !message.contains("cret"), "{message}");
    }

    #[test]
    fn a_bearer_token_is_sensitive_and_debug_shows_no_query() {
        let built = request().bearer_auth("secret-token").body("{}");
        assert!(built.headers[header::AUTHORIZATION].is_sensitive());
        let shown = format!("{built:?}");
        assert!(!shown.contains("secret"), "{shown}");
        assert!(shown.contains("body_bytes: 2"), "{shown}");
    }
}
