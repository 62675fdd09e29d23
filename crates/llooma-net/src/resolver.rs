//! Name resolution: the injectable [`Resolver`] and the policy check of every address.

use std::fmt;
use std::future::Future;
use std::io;
use std::net::IpAddr;
use std::pin::Pin;
use std::sync::Arc;

use llooma_policy::{Decision, OutboundPolicy, Purpose, Refusal};

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

/// Every host name goes through it: resolved once, every address checked against the policy,
/// and exactly the checked addresses handed back. The connector connects to those and nothing
/// else, so what was checked is what is reached.
#[derive(Debug, Clone)]
pub(crate) struct PolicyResolver {
    pub(crate) resolver: Arc<dyn Resolver>,
    pub(crate) policy: Arc<OutboundPolicy>,
    pub(crate) purpose: Purpose,
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
    #[error("blocked by the outbound network policy: {0}")]
    Refused(Refusal),
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
                return Err(Unresolved::Refused(reason));
            }
        }
        Ok(ips)
    }
}
