//! Errors of the outbound client.

use std::error::Error as StdError;

use llooma_policy::Refusal;
use url::Url;

/// Everything that can go wrong with an outbound request.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum NetError {
    /// The outbound network policy does not allow the destination.
    #[error("request to {url} blocked by the outbound network policy: {reason}")]
    Refused {
        /// The URL (without query or fragment, which may carry secrets).
        url: String,
        /// Why, with what an administrator can do about it.
        reason: Refusal,
    },
    /// A redirect was not followed.
    #[error(transparent)]
    Redirect(#[from] RedirectRefused),
    /// The response body is larger than the client's cap.
    #[error(
        "response from {url} is larger than the limit of {limit} bytes; reading stopped there \
         (the limit is set by whoever built this client)"
    )]
    BodyTooLarge {
        /// The URL (without query or fragment).
        url: String,
        /// The cap, in bytes.
        limit: u64,
    },
    /// The request did not finish in time (connecting, or the whole exchange).
    #[error("request to {url} timed out; the server is slow or unreachable")]
    Timeout {
        /// The URL (without query or fragment).
        url: String,
    },
    /// No connection could be made: the name did not resolve, or TCP or TLS failed.
    #[error("could not connect to {url}: {source}")]
    Connect {
        /// The URL (without query or fragment).
        url: String,
        /// Why, as the resolver, the socket or TLS reported it.
        #[source]
        source: Box<dyn StdError + Send + Sync>,
    },
    /// The request could not be sent or the response could not be read.
    #[error("request to {url} failed: {source}")]
    Request {
        /// The URL (without query or fragment).
        url: String,
        /// What the HTTP library reported.
        #[source]
        source: Box<dyn StdError + Send + Sync>,
    },
    /// The TLS configuration shared by every client could not be set up: usually no CA
    /// certificate could be read from the system.
    #[error(
        "could not set up TLS for outbound connections: {0}. Install the system's CA \
         certificates (the ca-certificates package) or point SSL_CERT_FILE at a PEM bundle"
    )]
    Tls(String),
}

/// A redirect that was not followed, and why.
#[derive(Debug, thiserror::Error)]
#[error("redirect from {from} to {to} not followed: {problem}")]
pub struct RedirectRefused {
    /// Where the redirect came from (without query or fragment).
    pub from: String,
    /// Where it pointed (without query or fragment).
    pub to: String,
    /// Why it was not followed.
    pub problem: RedirectProblem,
}

/// Why a redirect was not followed.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[non_exhaustive]
pub enum RedirectProblem {
    /// More hops than allowed.
    #[error("more than {max} redirects; the server is probably misconfigured")]
    TooMany {
        /// The limit.
        max: usize,
    },
    /// From https to http: the rest of the exchange would be readable on the wire.
    #[error("it goes from https to plain http; use an https address on the server side")]
    Downgrade,
    /// The outbound network policy does not allow the target.
    #[error("{0}")]
    Policy(Refusal),
    /// The `Location` header is not a usable URL.
    #[error("the Location header is not a valid URL")]
    BadLocation,
}

/// A URL fit for error messages and logs: no userinfo, query or fragment, which is where
/// tokens tend to hide.
pub(crate) fn redact(url: &Url) -> String {
    let mut url = url.clone();
    url.set_query(None);
    url.set_fragment(None);
    let _ = url.set_username("");
    let _ = url.set_password(None);
    url.to_string()
}
