//! Which `Host` a request may name: the defence against DNS rebinding.
//!
//! A page on `rebind.attacker.example` whose name is made to point at 127.0.0.1 talks to this
//! server as if it were its own site: the browser sends `Host` and `Origin` with the attacker's
//! name, so comparing one with the other proves nothing. What the attacker cannot choose is
//! a name that is not theirs. So a request must name the instance: its public URL's host when
//! the operator set one, or the address it listens on (its IP literal; `localhost` when it
//! listens on loopback or on every address). IP literals and `localhost` cannot be rebound.

use std::net::IpAddr;

use axum::extract::{Request, State};
use axum::http::header;
use axum::middleware::Next;
use axum::response::{IntoResponse, Response};

use crate::error::ApiError;

/// The host names a request may use.
#[derive(Clone, Debug)]
pub struct HostRule {
    /// The public URL's host, lower case, if the operator set one.
    public_host: Option<String>,
    listen: IpAddr,
}

impl HostRule {
    /// `public_origin` is `scheme://host[:port]` (as [`crate::ApiConfig::public_origin`]).
    pub fn new(public_origin: Option<&str>, listen: IpAddr) -> HostRule {
        let public_host = public_origin
            .and_then(|origin| url::Url::parse(origin).ok())
            .and_then(|url| url.host_str().map(str::to_ascii_lowercase));
        HostRule { public_host, listen }
    }

    /// Whether `host` (a `Host` header's value, port included or not) names this instance.
    pub fn allows(&self, host: &str) -> bool {
        let Some(name) = host_name(host) else { return false };
        if self.public_host.as_deref() == Some(name.as_str()) {
            return true;
        }
        let every_address = self.listen.is_unspecified();
        if name == "localhost" {
            return every_address || self.listen.is_loopback();
        }
        match name.trim_start_matches('[').trim_end_matches(']').parse::<IpAddr>() {
            Ok(ip) => every_address || ip == self.listen,
            Err(_) => false,
        }
    }
}

/// The host part of a `Host` value, lower case, without the port; `None` when malformed.
fn host_name(host: &str) -> Option<String> {
    let host = host.trim();
    let name = if let Some(rest) = host.strip_prefix('[') {
        // [v6]:port
        let end = rest.find(']')?;
        let after = &rest[end + 1..];
        if !(after.is_empty() || after.strip_prefix(':').is_some_and(is_port)) {
            return None;
        }
        &host[..end + 2]
    } else {
        match host.rsplit_once(':') {
            Some((name, port)) if is_port(port) => name,
            Some(_) => return None,
            None => host,
        }
    };
    let name = name.strip_suffix('.').unwrap_or(name);
    (!name.is_empty()).then(|| name.to_ascii_lowercase())
}

fn is_port(port: &str) -> bool {
    !port.is_empty() && port.len() <= 5 && port.bytes().all(|b| b.is_ascii_digit())
}

/// Refuses a request whose `Host` does not name this instance (`/healthz` aside: it says
/// nothing, and health checkers often use a service name).
pub async fn check_host(State(rule): State<HostRule>, request: Request, next: Next) -> Response {
    if request.uri().path() == "/healthz" {
        return next.run(request).await;
    }
    let host = request
        .headers()
        .get(header::HOST)
        .and_then(|v| v.to_str().ok())
        .map(str::to_owned)
        .or_else(|| request.uri().authority().map(|a| a.as_str().to_owned()));
    match host {
        Some(host) if rule.allows(&host) => next.run(request).await,
        host => {
            let named = host.as_deref().unwrap_or("(none)");
            tracing::warn!(host = %named, "refused a request for another host name");
            ApiError::UnknownHost(format!(
                "This server does not answer to the host name {named}. If people reach it by \
                 that name, set LLOOMA_PUBLIC_URL to the address they use (for example \
                 https://{named}); a reverse proxy must pass that host on."
            ))
            .into_response()
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn only_names_of_the_instance_are_allowed() {
        let loopback: IpAddr = "127.0.0.1".parse().unwrap_or(IpAddr::from([0, 0, 0, 0]));
        let every: IpAddr = "0.0.0.0".parse().unwrap_or(loopback);
        let lan: IpAddr = "192.168.1.20".parse().unwrap_or(loopback);
        let public = Some("https://chat.example.org");
        // (public origin, listen address, Host, allowed)
        let cases = [
            (None, loopback, "127.0.0.1:8080", true),
            (None, loopback, "127.0.0.1", true),
            (None, loopback, "localhost:8080", true),
            (None, loopback, "LOCALHOST:8080", true),
            (None, loopback, "rebind.attacker.example:8080", false),
            (None, loopback, "127.0.0.2:8080", false),
            (None, loopback, "localhost.attacker.example", false),
            (None, loopback, "", false),
            (None, loopback, "127.0.0.1:80:80", false),
            (None, loopback, "127.0.0.1:http", false),
            (None, every, "10.1.2.3:8080", true),
            (None, every, "[::1]:8080", true),
            (None, every, "localhost", true),
            (None, every, "nas.local:8080", false),
            (None, lan, "192.168.1.20:8080", true),
            (None, lan, "localhost:8080", false),
            (None, lan, "192.168.1.21:8080", false),
            (public, loopback, "chat.example.org", true),
            (public, loopback, "Chat.Example.Org:443", true),
            (public, loopback, "chat.example.org.", true),
            (public, loopback, "127.0.0.1:8080", true),
            (public, loopback, "rebind.attacker.example", false),
            (public, loopback, "chat.example.org.attacker.example", false),
        ];
        for (origin, listen, host, allowed) in cases {
            let rule = HostRule::new(origin, listen);
            assert_eq!(rule.allows(host), allowed, "{origin:?} {listen} {host:?}");
        }
    }
}
