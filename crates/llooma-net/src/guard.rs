//! The connector layer that sees every connection's destination before a socket is opened.
//!
//! reqwest hands a custom resolver only host *names*; an IP-literal host (`http://10.0.0.5/`)
//! goes straight to `connect()`. The connector layer is the one hook that sees every
//! destination, including those of a `reqwest::Client` used directly by a library such as rmcp,
//! so the IP-literal check lives here rather than in a wrapper around the client.
//!
//! reqwest passes the destination as a sealed type whose only public view is its `Debug`
//! output (`Unnameable(http://host:port/)`), so we read it from there. If that ever stops
//! parsing (a reqwest upgrade), every connection is refused with an error saying so: the layer
//! fails closed, and the integration tests fail loudly.

use std::fmt;
use std::future::Future;
use std::pin::Pin;
use std::sync::Arc;
use std::task::{Context, Poll};

use hyper_util::client::legacy::connect::{Connection, HttpInfo};
use llooma_policy::{Decision, OutboundPolicy, Purpose};
use tower::{Layer, Service};
use url::Url;

use crate::error::{PolicyRefusal, UnreadableDestination};

type BoxError = Box<dyn std::error::Error + Send + Sync>;

/// Adds the destination check to reqwest's connector.
#[derive(Debug, Clone)]
pub(crate) struct GuardLayer {
    pub(crate) policy: Arc<OutboundPolicy>,
    pub(crate) purpose: Purpose,
}

impl<S> Layer<S> for GuardLayer {
    type Service = Guard<S>;

    fn layer(&self, inner: S) -> Guard<S> {
        Guard { inner, policy: Arc::clone(&self.policy), purpose: self.purpose }
    }
}

#[derive(Clone)]
pub(crate) struct Guard<S> {
    inner: S,
    policy: Arc<OutboundPolicy>,
    purpose: Purpose,
}

impl<S> fmt::Debug for Guard<S> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("Guard").field("purpose", &self.purpose).finish_non_exhaustive()
    }
}

impl<S, R> Service<R> for Guard<S>
where
    R: fmt::Debug,
    S: Service<R, Error = BoxError>,
    S::Response: Connection + Send + 'static,
    S::Future: Send + 'static,
{
    type Response = S::Response;
    type Error = BoxError;
    type Future = Pin<Box<dyn Future<Output = Result<S::Response, BoxError>> + Send>>;

    fn poll_ready(&mut self, cx: &mut Context<'_>) -> Poll<Result<(), Self::Error>> {
        self.inner.poll_ready(cx)
    }

    fn call(&mut self, destination: R) -> Self::Future {
        if let Err(err) = self.check_destination(&format!("{destination:?}")) {
            return Box::pin(std::future::ready(Err(err)));
        }
        let connecting = self.inner.call(destination);
        let policy = Arc::clone(&self.policy);
        let purpose = self.purpose;
        Box::pin(async move {
            let conn = connecting.await?;
            check_peer(&policy, purpose, &conn)?;
            Ok(conn)
        })
    }
}

impl<S> Guard<S> {
    fn check_destination(&self, debug: &str) -> Result<(), BoxError> {
        // Errors are converted with `.into()` on the bare value: `Box::new(e)` followed by `?`
        // would box the box, and callers could no longer find the refusal by downcasting.
        let Some(url) = destination_url(debug) else {
            return Err(UnreadableDestination(debug.to_owned()).into());
        };
        match self.policy.decide(self.purpose, &url) {
            Decision::Allowed(_) => Ok(()),
            Decision::Refused { reason } => {
                tracing::warn!(
                    purpose = %self.purpose,
                    destination = %url,
                    "outbound connection refused: {reason}"
                );
                Err(PolicyRefusal { reason }.into())
            }
        }
    }
}

/// `Unnameable(http://10.0.0.5:8080/)` → the URL inside.
fn destination_url(debug: &str) -> Option<Url> {
    let inner = debug.strip_prefix("Unnameable(")?.strip_suffix(')')?;
    Url::parse(inner).ok()
}

/// Defence in depth: after connecting, the peer must still be an address the policy allows
/// ([`OutboundPolicy::allows_peer`]). The pre-connect checks make a refusal here unreachable
/// today; it is here so a future change in how reqwest connects cannot silently open a hole.
fn check_peer<C: Connection>(
    policy: &OutboundPolicy,
    purpose: Purpose,
    conn: &C,
) -> Result<(), BoxError> {
    if policy.allow_list(purpose).is_some() {
        return Ok(());
    }
    let mut extensions = http::Extensions::new();
    conn.connected().get_extras(&mut extensions);
    let Some(info) = extensions.get::<HttpInfo>() else {
        return Err(UnreadableDestination(
            "the connection does not report its peer address".to_owned(),
        )
        .into());
    };
    policy
        .allows_peer(purpose, info.remote_addr().ip())
        .map_err(|reason| PolicyRefusal { reason }.into())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn reads_the_destination_reqwest_prints() {
        let url = destination_url("Unnameable(http://10.0.0.5:8080/)").unwrap();
        assert_eq!(url.host_str(), Some("10.0.0.5"));
        assert_eq!(url.port(), Some(8080));
        let url = destination_url("Unnameable(https://[::1]/)").unwrap();
        assert_eq!(url.host_str(), Some("[::1]"));
        assert!(destination_url("Something(http://10.0.0.5/)").is_none());
        assert!(destination_url("Unnameable(not a url)").is_none());
    }
}
