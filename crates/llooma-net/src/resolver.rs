//! Name resolution: the injectable [`Resolver`] and the policy-checking adapter reqwest uses.

use std::fmt;
use std::future::Future;
use std::io;
use std::net::{IpAddr, SocketAddr};
use std::pin::Pin;
use std::sync::Arc;

use llooma_policy::{Decision, OutboundPolicy, Purpose};
use reqwest::dns::{Addrs, Name, Resolve, Resolving};

use crate::error::PolicyRefusal;

/// The future a [`Resolver`] returns.
pub type Lookup<'a> = Pin<Box<dyn Future<Output = io::Result<Vec<IpAddr>>> + Send + 'a>>;

/// Turns a host name into addresses. The system's resolver in production; tests script it
/// ("first lookup public, second private") to prove a name cannot be rebound between check
/// and connect.
pub trait Resolver: Send + Sync + fmt::Debug {
    /// All addresses of `host` (a name, never an IP literal).
    fn lookup<'a>(&'a self, host: &'a str) -> Lookup<'a>;
}

/// The operating system's resolver (`getaddrinfo`, through tokio).
#[derive(Debug, Clone, Copy, Default)]
pub struct SystemResolver;

impl Resolver for SystemResolver {
    fn lookup<'a>(&'a self, host: &'a str) -> Lookup<'a> {
        Box::pin(async move {
            let addrs = tokio::net::lookup_host((host, 0)).await?;
            Ok(addrs.map(|addr| addr.ip()).collect())
        })
    }
}

/// No addresses came back for a name.
#[derive(Debug, thiserror::Error)]
#[error("host {host} resolved to no addresses")]
pub(crate) struct NoAddresses {
    pub(crate) host: String,
}

/// What reqwest calls for every host name: resolve once, check every address against the
/// policy, and hand back exactly the checked addresses. The connector connects to those and
/// nothing else, so what was checked is what is reached.
#[derive(Debug, Clone)]
pub(crate) struct PolicyResolver {
    pub(crate) resolver: Arc<dyn Resolver>,
    pub(crate) policy: Arc<OutboundPolicy>,
    pub(crate) purpose: Purpose,
}

impl Resolve for PolicyResolver {
    fn resolve(&self, name: Name) -> Resolving {
        let this = self.clone();
        let host = name.as_str().to_owned();
        Box::pin(async move {
            let ips = this.checked_addresses(&host).await.map_err(Unresolved::into_boxed)?;
            // Port 0 tells reqwest to use the URL's port (or the scheme's default).
            let addrs: Addrs = Box::new(ips.into_iter().map(|ip| SocketAddr::new(ip, 0)));
            Ok(addrs)
        })
    }
}

/// Why a name gave no address to connect to.
#[derive(Debug, thiserror::Error)]
pub(crate) enum Unresolved {
    /// The lookup failed.
    #[error(transparent)]
    Lookup(#[from] io::Error),
    /// It answered nothing.
    #[error(transparent)]
    NoAddresses(#[from] NoAddresses),
    /// An address it answered is one the policy refuses.
    #[error(transparent)]
    Refused(#[from] PolicyRefusal),
}

impl Unresolved {
    /// The error itself, boxed: the refusal stays findable by downcasting in reqwest's chain
    /// (a transparent wrapper would hide it).
    fn into_boxed(self) -> Box<dyn std::error::Error + Send + Sync> {
        match self {
            Unresolved::Lookup(err) => err.into(),
            Unresolved::NoAddresses(err) => err.into(),
            Unresolved::Refused(err) => err.into(),
        }
    }
}

impl PolicyResolver {
    /// Resolves `host` once and checks every address: exactly these may be connected to.
    pub(crate) async fn checked_addresses(&self, host: &str) -> Result<Vec<IpAddr>, Unresolved> {
        let ips = self.resolver.lookup(host).await?;
        if ips.is_empty() {
            return Err(NoAddresses { host: host.to_owned() }.into());
        }
        // One blocked address refuses the whole name: a name that mixes public and private
        // addresses is either misconfigured or an attack, and connecting to "the public one"
        // would depend on the order the connector tries them in.
        for ip in &ips {
            if let Decision::Refused { reason } =
                self.policy.decide_resolved(self.purpose, host, *ip)
            {
                tracing::warn!(
                    purpose = %self.purpose,
                    %host,
                    %ip,
                    "outbound connection refused: {reason}"
                );
                return Err(PolicyRefusal { reason }.into());
            }
        }
        Ok(ips)
    }
}
