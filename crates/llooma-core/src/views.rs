//! MCP Apps views as the instance serves them: the document a tool's view is drawn from, with a
//! Content-Security-Policy of its own.
//!
//! Isolation, in three layers (see docs/mcp-servers.md):
//! - the document is served with the CSP `sandbox` directive (and the page frames it with the
//!   `sandbox` attribute), never `allow-same-origin`: it runs in an origin of its own, with no
//!   cookies, no storage and no reach into the page;
//! - its CSP allows no outside address but those it declared (`_meta.ui.csp`), and of those only
//!   public `https:`/`wss:` origins: never a private or loopback address, never plain HTTP;
//! - everything beyond drawing goes through the page, which puts it to the person.

use llooma_mcp_client::ViewDomains;

use crate::app::App;
use crate::error::AppError;

/// A view's document, ready to serve.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct ServedView {
    pub html: String,
    /// Its `Content-Security-Policy`.
    pub policy: String,
}

impl App {
    /// The document of a view (one version, by its hash) of one of the account's servers.
    /// `NotFound` when the server is not the account's, is suspended, or never had that view.
    pub async fn mcp_view(
        &self,
        account_id: &str,
        server_id: &str,
        hash: &str,
    ) -> Result<ServedView, AppError> {
        let server =
            self.store.mcp_server(account_id, server_id).await?.ok_or(AppError::NotFound)?;
        if server.suspension.is_some() {
            return Err(AppError::NotFound);
        }
        let view =
            self.store.mcp_view(account_id, server_id, hash).await?.ok_or(AppError::NotFound)?;
        let domains: ViewDomains = serde_json::from_str(&view.domains_json).unwrap_or_default();
        Ok(ServedView { html: view.html, policy: view_policy(&domains) })
    }
}

/// The Content-Security-Policy of a view's document: its own opaque origin, inline script and
/// style, `data:` and `blob:` media, and only the declared origins that pass [`public_origin`].
pub fn view_policy(domains: &ViewDomains) -> String {
    let kept = |list: &[String]| -> String {
        let mut out: Vec<String> = list.iter().filter_map(|d| public_origin(d)).collect();
        out.dedup();
        out.join(" ")
    };
    let resource = kept(&domains.resource);
    let with = |base: &str| {
        if resource.is_empty() { base.to_owned() } else { format!("{base} {resource}") }
    };
    let or_none = |list: String| if list.is_empty() { "'none'".to_owned() } else { list };
    format!(
        "sandbox allow-scripts allow-forms; default-src 'none'; script-src {}; style-src {}; \
         img-src {}; font-src {}; media-src {}; connect-src {}; frame-src {}; \
         base-uri 'none'; form-action 'none'; object-src 'none'; frame-ancestors 'self'",
        with("'unsafe-inline'"),
        with("'unsafe-inline'"),
        with("data: blob:"),
        with("data:"),
        with("data: blob:"),
        or_none(kept(&domains.connect)),
        or_none(kept(&domains.frame)),
    )
}

/// Host suffixes that name machines on a private network, never the public web.
const PRIVATE_SUFFIXES: &[&str] =
    &["localhost", "local", "internal", "intranet", "lan", "home", "corp", "home.arpa"];

/// A declared origin as a CSP source, when it is a public `https:` or `wss:` origin
/// (`https://host`, `https://host:port`, `https://*.host`). Anything else is dropped: plain
/// HTTP, IP addresses (loopback and private ones included), single-label and private names,
/// paths, user names, CSP keywords, and anything a CSP would read as more than one source.
pub fn public_origin(declared: &str) -> Option<String> {
    let entry = declared.trim();
    let entry = entry.strip_suffix('/').unwrap_or(entry);
    let (scheme, rest) = entry.split_once("://")?;
    let scheme = scheme.to_ascii_lowercase();
    if scheme != "https" && scheme != "wss" {
        return None;
    }
    let (host, port) = match rest.rsplit_once(':') {
        Some((host, port))
            if (1..=5).contains(&port.len()) && port.bytes().all(|b| b.is_ascii_digit()) =>
        {
            (host, Some(port))
        }
        Some(_) => return None,
        None => (rest, None),
    };
    let host = host.to_ascii_lowercase();
    let bare = host.strip_prefix("*.").unwrap_or(&host);
    let well_formed = bare.contains('.')
        && bare.bytes().all(|b| b.is_ascii_alphanumeric() || b == b'.' || b == b'-')
        && bare.split('.').all(|label| !label.is_empty() && !label.starts_with('-'));
    // A last label a browser reads as a number makes the whole host an IPv4 address (the URL
    // standard's "ends in a number"): all digits, or hexadecimal after `0x` (`1.0x7f`).
    let numeric = bare.rsplit('.').next().is_some_and(|tld| {
        let hex = tld.strip_prefix("0x").map(|h| h.bytes().all(|b| b.is_ascii_hexdigit()));
        hex.unwrap_or_else(|| tld.bytes().all(|b| b.is_ascii_digit()))
    });
    let private = PRIVATE_SUFFIXES.iter().any(|s| bare == *s || bare.ends_with(&format!(".{s}")));
    if !well_formed || numeric || private {
        return None;
    }
    Some(match port {
        Some(port) => format!("{scheme}://{host}:{port}"),
        None => format!("{scheme}://{host}"),
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn only_public_secure_origins_pass() {
        for good in [
            "https://api.example.com",
            "https://api.example.com/",
            "wss://live.example.com:8443",
            "https://*.tiles.example.org",
        ] {
            assert!(public_origin(good).is_some(), "{good}");
        }
        assert_eq!(
            public_origin("HTTPS://Api.Example.com").as_deref(),
            Some("https://api.example.com")
        );
        for bad in [
            "http://api.example.com",
            "https://127.0.0.1",
            "https://127.0.0.1:8080",
            "https://0x7f.0.0.0x1",
            "https://127.0.0.0x1",
            "https://1.0x",
            "https://0177.0.0.01",
            "https://10.0.0.7",
            "https://[::1]",
            "https://localhost",
            "https://printer.local",
            "https://db.internal",
            "https://intranet",
            "https://api.example.com/path",
            "https://user@api.example.com",
            "https://a.example.com https://b.example.com",
            "'unsafe-eval'",
            "*",
            "https://*",
            "data:",
            "https://exa;mple.com",
            "https://-x.example.com",
        ] {
            assert_eq!(public_origin(bad), None, "{bad}");
        }
    }

    #[test]
    fn a_view_that_declares_nothing_reaches_nothing() {
        let policy = view_policy(&ViewDomains::default());
        assert!(policy.starts_with("sandbox allow-scripts allow-forms;"), "{policy}");
        assert!(!policy.contains("allow-same-origin"));
        assert!(policy.contains("connect-src 'none'"), "{policy}");
        assert!(policy.contains("frame-src 'none'"), "{policy}");
        assert!(policy.contains("default-src 'none'"), "{policy}");
        assert!(!policy.contains("http"), "{policy}");
    }

    #[test]
    fn declared_origins_are_kept_only_where_they_pass() {
        let domains = ViewDomains {
            connect: vec!["https://api.example.com".into(), "http://169.254.169.254".into()],
            resource: vec!["https://cdn.example.com".into(), "https://localhost:3000".into()],
            frame: vec![],
        };
        let policy = view_policy(&domains);
        assert!(policy.contains("connect-src https://api.example.com;"), "{policy}");
        assert!(policy.contains("script-src 'unsafe-inline' https://cdn.example.com;"), "{policy}");
        assert!(!policy.contains("169.254"), "{policy}");
        assert!(!policy.contains("localhost"), "{policy}");
    }
}
