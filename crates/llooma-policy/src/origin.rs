//! Origins (`scheme://host[:port]`) and the allow-lists made of them.

use std::fmt;

use url::{Host, Url};

use crate::{PolicyError, Purpose};

/// The two schemes outbound connections may use.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum Scheme {
    /// Plain HTTP.
    Http,
    /// HTTP over TLS.
    Https,
}

impl Scheme {
    /// `http` or `https`.
    pub fn as_str(self) -> &'static str {
        match self {
            Scheme::Http => "http",
            Scheme::Https => "https",
        }
    }

    /// 80 or 443.
    pub fn default_port(self) -> u16 {
        match self {
            Scheme::Http => 80,
            Scheme::Https => 443,
        }
    }

    /// Parses a scheme as the URL parser leaves it (lower case); anything else is `None`.
    pub fn parse(scheme: &str) -> Option<Scheme> {
        match scheme {
            "http" => Some(Scheme::Http),
            "https" => Some(Scheme::Https),
            _ => None,
        }
    }
}

/// A normalised origin: scheme, host as the URL parser serialises it, and an explicit port
/// (the scheme's default when none was written), so `https://a.example` and
/// `https://a.example:443` are the same origin.
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
pub struct Origin {
    scheme: Scheme,
    host: Host<String>,
    port: u16,
}

impl Origin {
    /// Builds an origin from parts.
    pub fn new(scheme: Scheme, host: Host<String>, port: u16) -> Self {
        Self { scheme, host, port }
    }

    /// The origin of an http(s) URL, or `None` for other schemes and host-less URLs.
    pub fn of_url(url: &Url) -> Option<Self> {
        let scheme = Scheme::parse(url.scheme())?;
        let host = url.host()?.to_owned();
        Some(Self { scheme, host, port: url.port().unwrap_or(scheme.default_port()) })
    }

    /// The scheme.
    pub fn scheme(&self) -> Scheme {
        self.scheme
    }

    /// The host.
    pub fn host(&self) -> &Host<String> {
        &self.host
    }

    /// The port, explicit or the scheme's default.
    pub fn port(&self) -> u16 {
        self.port
    }

    pub(crate) fn matches(&self, scheme: Scheme, host: &Host<&str>, port: u16) -> bool {
        self.scheme == scheme
            && self.port == port
            && match (&self.host, host) {
                (Host::Domain(a), Host::Domain(b)) => a == b,
                (Host::Ipv4(a), Host::Ipv4(b)) => a == b,
                (Host::Ipv6(a), Host::Ipv6(b)) => a == b,
                _ => false,
            }
    }

    /// Parses one allow-list entry, naming `variable` in the error.
    fn parse_entry(variable: &'static str, entry: &str) -> Result<Self, PolicyError> {
        let malformed = |problem: &str| PolicyError::MalformedOrigin {
            variable,
            entry: entry.to_owned(),
            problem: problem.to_owned(),
        };
        if entry.contains('*') {
            return Err(malformed("wildcards are not supported; list each origin"));
        }
        let url = Url::parse(entry).map_err(|err| malformed(&err.to_string()))?;
        let scheme = Scheme::parse(url.scheme())
            .ok_or_else(|| malformed("the scheme must be http or https"))?;
        if !url.username().is_empty() || url.password().is_some() {
            return Err(malformed("an origin has no user name or password"));
        }
        // `Url` turns "http://h:8080" into path "/", so "/" is the only path an origin can have.
        if url.path() != "/" || url.query().is_some() || url.fragment().is_some() {
            return Err(malformed("an origin has no path, query or fragment"));
        }
        let host = url.host().ok_or_else(|| malformed("there is no host"))?.to_owned();
        Ok(Self { scheme, host, port: url.port().unwrap_or(scheme.default_port()) })
    }
}

impl fmt::Display for Origin {
    /// `scheme://host` with `:port` only when it is not the scheme's default, IPv6 in brackets.
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{}://{}", self.scheme.as_str(), self.host)?;
        if self.port != self.scheme.default_port() {
            write!(f, ":{}", self.port)?;
        }
        Ok(())
    }
}

/// The origins one purpose may reach. Matching is exact on scheme, host and port.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct AllowList {
    origins: Vec<Origin>,
}

impl AllowList {
    /// Parses a comma-separated list of origins for `purpose`. Empty items (a trailing comma)
    /// are skipped; any other malformed entry is an error naming it.
    pub fn parse(purpose: Purpose, value: &str) -> Result<Self, PolicyError> {
        let origins = value
            .split(',')
            .map(str::trim)
            .filter(|entry| !entry.is_empty())
            .map(|entry| Origin::parse_entry(purpose.env_var(), entry))
            .collect::<Result<Vec<_>, _>>()?;
        Ok(Self { origins })
    }

    pub(crate) fn parse_optional(
        purpose: Purpose,
        value: Option<&str>,
    ) -> Result<Option<Self>, PolicyError> {
        match value {
            Some(value) if !value.trim().is_empty() => Self::parse(purpose, value).map(Some),
            // An empty variable is treated as unset: an empty allow-list would make the purpose
            // reach nothing at all, which is never what someone writing `VAR=` means.
            _ => Ok(None),
        }
    }

    /// The origins, in the order written.
    pub fn origins(&self) -> &[Origin] {
        &self.origins
    }

    /// Whether the origin given in parts is listed.
    pub fn contains(&self, scheme: Scheme, host: &Host<&str>, port: u16) -> bool {
        self.origins.iter().any(|o| o.matches(scheme, host, port))
    }

    /// Whether some listed origin has this host name (as a resolver sees it).
    pub fn has_host_name(&self, name: &str) -> bool {
        self.origins.iter().any(|o| matches!(&o.host, Host::Domain(d) if d == name))
    }
}
