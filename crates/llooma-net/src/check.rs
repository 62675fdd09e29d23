//! `llooma check-address`: what the policy would do with a URL, and why, without connecting.

use std::fmt;
use std::net::IpAddr;
use std::time::Duration;

use llooma_policy::{Allowance, Decision, OutboundPolicy, Purpose, Refusal, Url};

use crate::resolver::Resolver;

/// A lookup that takes longer than this is reported as a failure rather than waited on.
const LOOKUP_TIMEOUT: Duration = Duration::from_secs(10);

/// One address a host name resolved to, and the policy's verdict on it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ResolvedAddress {
    /// The address.
    pub ip: IpAddr,
    /// The verdict on it alone.
    pub decision: Decision,
}

/// The answer to "may Llooma reach this URL for this purpose?".
///
/// `Display` prints `allowed` or `refused: <reason>` on the first line, then details: the
/// purpose and its allow-list, and for a host name each address it resolved to with its
/// verdict.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct AddressCheck {
    purpose: Purpose,
    allow_list_set: bool,
    url: String,
    refusal: Option<String>,
    host: Option<String>,
    addresses: Vec<ResolvedAddress>,
}

impl AddressCheck {
    /// Whether a connection would be allowed.
    pub fn allowed(&self) -> bool {
        self.refusal.is_none()
    }

    /// Why not, when refused.
    pub fn reason(&self) -> Option<&str> {
        self.refusal.as_deref()
    }

    /// The addresses the host name resolved to (empty for IP literals and refused URLs).
    pub fn addresses(&self) -> &[ResolvedAddress] {
        &self.addresses
    }
}

impl fmt::Display for AddressCheck {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match &self.refusal {
            None => writeln!(f, "allowed")?,
            Some(reason) => writeln!(f, "refused: {reason}")?,
        }
        writeln!(f, "url: {}", self.url)?;
        let var = self.purpose.env_var();
        if self.allow_list_set {
            writeln!(
                f,
                "purpose: {} ({var} is set: only its origins are reachable)",
                self.purpose
            )?;
        } else {
            writeln!(f, "purpose: {} ({var} is not set: public addresses only)", self.purpose)?;
        }
        if let Some(host) = &self.host {
            if self.addresses.is_empty() {
                writeln!(f, "host {host} resolved to no addresses")?;
            } else {
                writeln!(f, "host {host} resolved to:")?;
            }
            for address in &self.addresses {
                writeln!(f, "  {}  {}", address.ip, verdict(&address.decision))?;
            }
        }
        Ok(())
    }
}

fn verdict(decision: &Decision) -> String {
    match decision {
        Decision::Allowed(Allowance::AllowListed) => "allowed (its origin is listed)".to_owned(),
        Decision::Allowed(Allowance::LocalNetwork(_)) => {
            "allowed (a local origin, on this machine or the local network)".to_owned()
        }
        Decision::Allowed(_) => "allowed (public)".to_owned(),
        Decision::Refused { reason: Refusal::BlockedAddress { range, .. } } => {
            format!("refused ({}, {})", range.description, range.cidr)
        }
        Decision::Refused { reason } => format!("refused ({reason})"),
    }
}

/// Decides on `url` for `purpose` as the outbound client would, resolving a host name with
/// `resolver`, without connecting to anything.
pub async fn check_address(
    policy: &OutboundPolicy,
    purpose: Purpose,
    url: &str,
    resolver: &dyn Resolver,
) -> AddressCheck {
    let mut check = AddressCheck {
        purpose,
        allow_list_set: policy.allow_list(purpose).is_some(),
        url: url.to_owned(),
        refusal: None,
        host: None,
        addresses: Vec::new(),
    };
    let parsed = match Url::parse(url) {
        Ok(parsed) => parsed,
        Err(_) => {
            if let Decision::Refused { reason } = policy.decide_str(purpose, url) {
                check.refusal = Some(reason.to_string());
            }
            return check;
        }
    };
    check.url = parsed.to_string();
    let decision = policy.decide(purpose, &parsed);
    if let Decision::Refused { reason } = decision {
        check.refusal = Some(reason.to_string());
        return check;
    }
    let Some(llooma_policy::Host::Domain(name)) = parsed.host() else {
        // An IP literal: the decision above is the whole story.
        return check;
    };
    check.host = Some(name.to_owned());
    let ips = match tokio::time::timeout(LOOKUP_TIMEOUT, resolver.lookup(name)).await {
        Ok(Ok(ips)) => ips,
        Ok(Err(err)) => {
            check.refusal = Some(format!("could not resolve host {name}: {err}"));
            return check;
        }
        Err(_) => {
            check.refusal = Some(format!(
                "could not resolve host {name}: no answer within {} s",
                LOOKUP_TIMEOUT.as_secs()
            ));
            return check;
        }
    };
    if ips.is_empty() {
        check.refusal = Some(format!("host {name} resolved to no addresses"));
        return check;
    }
    for ip in ips {
        let decision = policy.decide_resolved(purpose, name, ip);
        if check.refusal.is_none()
            && let Decision::Refused { reason } = &decision
        {
            check.refusal = Some(reason.to_string());
        }
        check.addresses.push(ResolvedAddress { ip, decision });
    }
    check
}
