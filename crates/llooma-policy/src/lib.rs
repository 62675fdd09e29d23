#![doc = include_str!("../README.md")]
//!
//! ## The rules in detail
//!
//! - only `http` and `https`, never with userinfo (`user:pass@`);
//! - the host is taken from the same parsed [`Url`] that is used to connect, so every spelling
//!   of an IPv4 address (decimal, octal, hex, short forms, percent-encoded, full-width digits)
//!   has already been normalised by the URL parser before we look at it;
//! - without an allow-list, an IP address in any [blocked range](BLOCKED_RANGES) is refused, and
//!   a host name is allowed only if every address it resolves to is public
//!   ([`OutboundPolicy::decide_resolved`]);
//! - with an allow-list for the purpose, its origins are the only ones reachable for that
//!   purpose, private or not;
//! - without one, a [local origin](OutboundPolicy::with_local_origin) (a model provider an
//!   administrator marked as running on this machine or the local network) may also reach
//!   loopback and private addresses, and no other blocked range.
//!
//! Refusals are values ([`Decision::Refused`]) whose [`Refusal`] says what an operator can do.

mod canonical;
mod origin;
mod ranges;

use std::fmt;
use std::net::IpAddr;
use std::str::FromStr;

pub use url::{Host, Url};

pub use canonical::{canonical_json, sha256_hex};
pub use origin::{AllowList, Origin, Scheme};
pub use ranges::{BLOCKED_RANGES, BlockedRange, classify_ip};

/// What an outbound connection is for. Each purpose has its own allow-list.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum Purpose {
    /// MCP servers that accounts add (`MCP_ALLOWED_ORIGINS`).
    Mcp,
    /// Page reading on behalf of a model (`FETCH_ALLOWED_ORIGINS`).
    Fetch,
    /// Chat servers that bots talk to (`BOT_ALLOWED_ORIGINS`).
    Bot,
    /// Model providers administrators configure (`PROVIDER_ALLOWED_ORIGINS`): a model served on
    /// the same machine or LAN (Ollama, vLLM, llama.cpp) is reached only once its origin is listed.
    Provider,
    /// The web search service an administrator sets (a SearXNG instance). Its allow-list is that
    /// one origin, set by whoever builds the client: the administrator chose the address, so it
    /// may be on the LAN, and it opens nothing else (page reading keeps its own list).
    Search,
}

impl Purpose {
    /// Every purpose, in the order the documentation lists them.
    pub const ALL: [Purpose; 5] =
        [Purpose::Mcp, Purpose::Fetch, Purpose::Bot, Purpose::Provider, Purpose::Search];

    /// The environment variable that holds this purpose's allow-list (for web search, the
    /// administrator's setting that names the one reachable origin).
    pub fn env_var(self) -> &'static str {
        match self {
            Purpose::Search => "the web search address (Settings → Admin)",
            Purpose::Mcp => "MCP_ALLOWED_ORIGINS",
            Purpose::Fetch => "FETCH_ALLOWED_ORIGINS",
            Purpose::Bot => "BOT_ALLOWED_ORIGINS",
            Purpose::Provider => "PROVIDER_ALLOWED_ORIGINS",
        }
    }

    /// The name used on the command line (`--purpose mcp`).
    pub fn as_str(self) -> &'static str {
        match self {
            Purpose::Mcp => "mcp",
            Purpose::Fetch => "fetch",
            Purpose::Bot => "bot",
            Purpose::Provider => "provider",
            Purpose::Search => "search",
        }
    }

    /// What the connections of this purpose reach, in words for messages.
    pub fn what(self) -> &'static str {
        match self {
            Purpose::Mcp => "MCP servers",
            Purpose::Fetch => "page reading",
            Purpose::Bot => "chat servers",
            Purpose::Provider => "model providers",
            Purpose::Search => "web search",
        }
    }
}

impl fmt::Display for Purpose {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.as_str())
    }
}

impl FromStr for Purpose {
    type Err = PolicyError;

    fn from_str(s: &str) -> Result<Self, Self::Err> {
        match s.trim().to_ascii_lowercase().as_str() {
            "mcp" => Ok(Purpose::Mcp),
            "fetch" => Ok(Purpose::Fetch),
            "bot" => Ok(Purpose::Bot),
            "provider" => Ok(Purpose::Provider),
            "search" => Ok(Purpose::Search),
            _ => Err(PolicyError::UnknownPurpose { given: s.to_owned() }),
        }
    }
}

/// Configuration mistakes. A refusal of a URL is not an error: see [`Decision`].
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum PolicyError {
    /// An entry of an allow-list variable is not a usable origin.
    #[error(
        "{variable} entry `{entry}` is not an origin ({problem}); write each entry as \
         scheme://host[:port] with scheme http or https, e.g. http://127.0.0.1:8080, \
         and separate entries with commas"
    )]
    MalformedOrigin {
        /// The environment variable the entry came from.
        variable: &'static str,
        /// The entry as written.
        entry: String,
        /// What is wrong with it.
        problem: String,
    },
    /// A purpose name that is not `mcp`, `fetch` or `bot`.
    #[error("unknown purpose `{given}`; use one of mcp, fetch, bot, provider, search")]
    UnknownPurpose {
        /// The name as given.
        given: String,
    },
}

/// The outcome of a policy decision.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Decision {
    /// The connection may go ahead, on the terms described.
    Allowed(Allowance),
    /// The connection must not be made.
    Refused {
        /// Why, in terms an operator can act on (see its `Display`).
        reason: Refusal,
    },
}

impl Decision {
    /// Whether the decision lets the connection go ahead (possibly subject to resolution, see
    /// [`Allowance::NameToCheck`]).
    pub fn is_allowed(&self) -> bool {
        matches!(self, Decision::Allowed(_))
    }
}

/// On what terms a URL is allowed.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Allowance {
    /// The origin is on the purpose's allow-list: whatever it resolves to is reachable.
    AllowListed,
    /// The host is an IP literal outside every blocked range.
    PublicAddress(IpAddr),
    /// The host is a name: connect only if every address it resolves to is allowed by
    /// [`OutboundPolicy::decide_resolved`], and connect to exactly those addresses.
    NameToCheck,
    /// The origin is a local origin and the host an address on this machine or a local network.
    LocalNetwork(IpAddr),
}

/// Why a URL or an address was refused. `Display` gives the message for people.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Refusal {
    /// The text is not a URL at all.
    Unparseable {
        /// The parser's complaint.
        problem: String,
    },
    /// A scheme other than `http` or `https`.
    UnsupportedScheme {
        /// The scheme as parsed (lower case).
        scheme: String,
    },
    /// The URL carries `user[:password]@`; credentials in URLs leak into logs and are a
    /// classic way to disguise the real host.
    Userinfo,
    /// The URL has no host.
    MissingHost,
    /// A name that always means this machine (`localhost`, `*.localhost`).
    LoopbackName {
        /// The name.
        host: String,
        /// Whose allow-list could allow it.
        purpose: Purpose,
    },
    /// An address inside a blocked range.
    BlockedAddress {
        /// The address.
        ip: IpAddr,
        /// The host name that resolved to it, if the URL named a host rather than an address.
        host: Option<String>,
        /// The range it falls in.
        range: &'static BlockedRange,
        /// Whose allow-list could allow it.
        purpose: Purpose,
    },
    /// The purpose has an allow-list and the origin is not on it.
    NotOnAllowList {
        /// The origin that was asked for.
        origin: String,
        /// Whose allow-list it is.
        purpose: Purpose,
    },
}

impl fmt::Display for Refusal {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Refusal::Unparseable { problem } => write!(f, "not a valid URL ({problem})"),
            Refusal::UnsupportedScheme { scheme } => write!(
                f,
                "scheme `{scheme}` is not allowed; only http and https URLs can be reached"
            ),
            Refusal::Userinfo => f.write_str(
                "the URL contains a user name or password before the host (user:pass@host); \
                 remove it and pass credentials as a header instead",
            ),
            Refusal::MissingHost => f.write_str("the URL has no host"),
            Refusal::LoopbackName { host, purpose } => write!(
                f,
                "host {host} always means this machine; an administrator can allow it by \
                 adding its origin (scheme://host:port) to {}",
                purpose.env_var()
            ),
            Refusal::BlockedAddress { ip, host, range, purpose } => {
                match host {
                    Some(host) => write!(f, "host {host} resolves to address {ip}, which is ")?,
                    None => write!(f, "address {ip} is ")?,
                }
                write!(
                    f,
                    "{} ({}); an administrator can allow it by adding its origin \
                     (scheme://host:port) to {}",
                    range.description,
                    range.cidr,
                    purpose.env_var()
                )
            }
            Refusal::NotOnAllowList { origin, purpose } => write!(
                f,
                "origin {origin} is not in {var}; while {var} is set, only the origins it lists \
                 are reachable for {what}; an administrator can add it there",
                var = purpose.env_var(),
                what = purpose.what()
            ),
        }
    }
}

/// The outbound policy of a running server: one optional allow-list per purpose.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct OutboundPolicy {
    mcp: Option<AllowList>,
    fetch: Option<AllowList>,
    bot: Option<AllowList>,
    provider: Option<AllowList>,
    search: Option<AllowList>,
    /// Origins that may also reach this machine and the local network, each for one purpose,
    /// while that purpose has no allow-list (see [`OutboundPolicy::with_local_origin`]).
    local: Vec<(Purpose, Origin)>,
}

impl OutboundPolicy {
    /// The policy with no allow-lists: public addresses only, for every purpose.
    pub fn public_only() -> Self {
        Self::default()
    }

    /// Builds the policy from the raw values of `MCP_ALLOWED_ORIGINS`, `FETCH_ALLOWED_ORIGINS`
    /// and `BOT_ALLOWED_ORIGINS`. `None`, or a value that is empty or only spaces, means the
    /// variable is unset (public addresses only).
    pub fn from_allow_lists(
        mcp: Option<&str>,
        fetch: Option<&str>,
        bot: Option<&str>,
    ) -> Result<Self, PolicyError> {
        Ok(Self {
            mcp: AllowList::parse_optional(Purpose::Mcp, mcp)?,
            fetch: AllowList::parse_optional(Purpose::Fetch, fetch)?,
            bot: AllowList::parse_optional(Purpose::Bot, bot)?,
            provider: None,
            search: None,
            local: Vec::new(),
        })
    }

    /// Lets `origin` reach addresses of this machine and of a local network (loopback, private,
    /// carrier-grade NAT, unique local IPv6) for `purpose`, besides public ones, while the purpose
    /// has no allow-list. Link-local (cloud metadata), multicast and reserved ranges stay
    /// refused. It opens nothing for other origins or purposes.
    ///
    /// This is how a model provider an administrator entered and marked "on this machine or my
    /// local network" is reached without `PROVIDER_ALLOWED_ORIGINS`: the administrator chose the
    /// address, as for web search. When the purpose's allow-list is set, it alone decides.
    pub fn with_local_origin(mut self, purpose: Purpose, origin: Origin) -> Self {
        self.local.push((purpose, origin));
        self
    }

    fn is_local_origin(
        &self,
        purpose: Purpose,
        scheme: Scheme,
        host: &Host<&str>,
        port: u16,
    ) -> bool {
        self.local.iter().any(|(p, o)| *p == purpose && o.matches(scheme, host, port))
    }

    fn is_local_host_name(&self, purpose: Purpose, name: &str) -> bool {
        self.local
            .iter()
            .any(|(p, o)| *p == purpose && matches!(o.host(), Host::Domain(d) if d == name))
    }

    /// Whether a connection for `purpose` may have `ip` as its peer: the last check, made after
    /// connecting. With an allow-list any peer is fine (its origin was matched before);
    /// otherwise a public address, or a local-network one when the purpose has a local origin.
    pub fn allows_peer(&self, purpose: Purpose, ip: IpAddr) -> Result<(), Refusal> {
        if self.allow_list(purpose).is_some() {
            return Ok(());
        }
        match classify_ip(ip) {
            None => Ok(()),
            Some(range)
                if range.is_local_network() && self.local.iter().any(|(p, _)| *p == purpose) =>
            {
                Ok(())
            }
            Some(range) => Err(Refusal::BlockedAddress { ip, host: None, range, purpose }),
        }
    }

    /// Sets (or with `None`, clears) one purpose's allow-list from its variable's raw value.
    pub fn with_allow_list(
        mut self,
        purpose: Purpose,
        value: Option<&str>,
    ) -> Result<Self, PolicyError> {
        let list = AllowList::parse_optional(purpose, value)?;
        match purpose {
            Purpose::Mcp => self.mcp = list,
            Purpose::Fetch => self.fetch = list,
            Purpose::Bot => self.bot = list,
            Purpose::Provider => self.provider = list,
            Purpose::Search => self.search = list,
        }
        Ok(self)
    }

    /// The allow-list of a purpose, if one is set.
    pub fn allow_list(&self, purpose: Purpose) -> Option<&AllowList> {
        match purpose {
            Purpose::Mcp => self.mcp.as_ref(),
            Purpose::Fetch => self.fetch.as_ref(),
            Purpose::Bot => self.bot.as_ref(),
            Purpose::Provider => self.provider.as_ref(),
            Purpose::Search => self.search.as_ref(),
        }
    }

    /// Parses `url` and decides on it. Text that is not a URL is refused, not an error.
    pub fn decide_str(&self, purpose: Purpose, url: &str) -> Decision {
        match Url::parse(url) {
            Ok(url) => self.decide(purpose, &url),
            Err(err) => {
                Decision::Refused { reason: Refusal::Unparseable { problem: err.to_string() } }
            }
        }
    }

    /// Decides on a parsed URL: the one that will be used to connect.
    pub fn decide(&self, purpose: Purpose, url: &Url) -> Decision {
        let scheme = match url.scheme() {
            "http" => Scheme::Http,
            "https" => Scheme::Https,
            other => {
                return refused(Refusal::UnsupportedScheme { scheme: other.to_owned() });
            }
        };
        if !url.username().is_empty() || url.password().is_some() {
            return refused(Refusal::Userinfo);
        }
        let Some(host) = url.host() else {
            return refused(Refusal::MissingHost);
        };
        let port = url.port().unwrap_or(scheme.default_port());
        self.decide_origin(purpose, scheme, host, port)
    }

    /// Decides on an origin given in parts (what a connector sees: scheme, host and port).
    pub fn decide_origin(
        &self,
        purpose: Purpose,
        scheme: Scheme,
        host: Host<&str>,
        port: u16,
    ) -> Decision {
        if let Some(list) = self.allow_list(purpose) {
            if list.contains(scheme, &host, port) {
                return Decision::Allowed(Allowance::AllowListed);
            }
            return refused(Refusal::NotOnAllowList {
                origin: Origin::new(scheme, host.to_owned(), port).to_string(),
                purpose,
            });
        }
        let local = self.is_local_origin(purpose, scheme, &host, port);
        match host {
            Host::Ipv4(ip) => decide_ip(purpose, IpAddr::V4(ip), None, local),
            Host::Ipv6(ip) => decide_ip(purpose, IpAddr::V6(ip), None, local),
            Host::Domain(_) if local => Decision::Allowed(Allowance::NameToCheck),
            Host::Domain(name) if is_loopback_name(name) => {
                refused(Refusal::LoopbackName { host: name.to_owned(), purpose })
            }
            Host::Domain(_) => Decision::Allowed(Allowance::NameToCheck),
        }
    }

    /// Decides on one address that `host` resolved to, for a URL whose decision was
    /// [`Allowance::NameToCheck`] or [`Allowance::AllowListed`].
    ///
    /// With an allow-list set, the name must be the host of a listed origin (the origin itself
    /// was checked by [`OutboundPolicy::decide`]); any address is then fine. Without one, the
    /// address must be outside every blocked range, or, for the host of a local origin, inside
    /// this machine's or a local network's.
    pub fn decide_resolved(&self, purpose: Purpose, host: &str, ip: IpAddr) -> Decision {
        if let Some(list) = self.allow_list(purpose) {
            if list.has_host_name(host) {
                return Decision::Allowed(Allowance::AllowListed);
            }
            return refused(Refusal::NotOnAllowList { origin: host.to_owned(), purpose });
        }
        decide_ip(purpose, ip, Some(host), self.is_local_host_name(purpose, host))
    }
}

fn refused(reason: Refusal) -> Decision {
    Decision::Refused { reason }
}

fn decide_ip(purpose: Purpose, ip: IpAddr, host: Option<&str>, local: bool) -> Decision {
    match classify_ip(ip) {
        None => Decision::Allowed(Allowance::PublicAddress(ip)),
        Some(range) if local && range.is_local_network() => {
            Decision::Allowed(Allowance::LocalNetwork(ip))
        }
        Some(range) => {
            refused(Refusal::BlockedAddress { ip, host: host.map(str::to_owned), range, purpose })
        }
    }
}

/// `localhost` and its subdomains always mean this machine (RFC 6761), whatever DNS says.
/// A trailing dot (`localhost.`) is the same name written fully qualified.
fn is_loopback_name(name: &str) -> bool {
    let name = name.trim_end_matches('.');
    name.eq_ignore_ascii_case("localhost")
        || name
            .len()
            .checked_sub(".localhost".len())
            .and_then(|start| name.get(start..))
            .is_some_and(|tail| tail.eq_ignore_ascii_case(".localhost"))
}

#[cfg(test)]
mod tests;
