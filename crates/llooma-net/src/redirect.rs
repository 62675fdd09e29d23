//! Redirects: every hop is checked like a first request, plus rules of its own.

use llooma_policy::{Decision, OutboundPolicy, Purpose};
use url::Url;

use crate::error::{RedirectProblem, RedirectRefused, redact};

/// Whether two URLs have the same origin (scheme, host, port with defaults filled in).
pub(crate) fn same_origin(a: &Url, b: &Url) -> bool {
    a.scheme() == b.scheme()
        && a.host() == b.host()
        && a.port_or_known_default() == b.port_or_known_default()
}

/// Checks hop number `hop` (1 for the first redirect) from `from` to `to`.
pub(crate) fn check_hop(
    policy: &OutboundPolicy,
    purpose: Purpose,
    from: &Url,
    to: &Url,
    hop: usize,
    max: usize,
) -> Result<(), RedirectRefused> {
    let refuse = |problem| RedirectRefused { from: redact(from), to: redact(to), problem };
    if hop > max {
        return Err(refuse(RedirectProblem::TooMany { max }));
    }
    if from.scheme() == "https" && to.scheme() == "http" {
        return Err(refuse(RedirectProblem::Downgrade));
    }
    // The connector would refuse a blocked target anyway; checking here too gives the caller a
    // message about the redirect instead of about a connection it never asked for.
    if let Decision::Refused { reason } = policy.decide(purpose, to) {
        return Err(refuse(RedirectProblem::Policy(reason)));
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    fn hop(policy: &OutboundPolicy, from: &str, to: &str, n: usize) -> Result<(), RedirectProblem> {
        check_hop(
            policy,
            Purpose::Fetch,
            &Url::parse(from).unwrap(),
            &Url::parse(to).unwrap(),
            n,
            5,
        )
        .map_err(|refused| refused.problem)
    }

    #[test]
    fn each_hop_is_checked() {
        let public = OutboundPolicy::public_only();
        assert_eq!(hop(&public, "https://a.example/", "https://b.example/x", 1), Ok(()));
        assert_eq!(hop(&public, "http://a.example/", "https://b.example/", 5), Ok(()));
        assert_eq!(
            hop(&public, "https://a.example/", "https://b.example/", 6),
            Err(RedirectProblem::TooMany { max: 5 })
        );
        assert_eq!(
            hop(&public, "https://a.example/", "http://a.example/", 1),
            Err(RedirectProblem::Downgrade)
        );
        for private in [
            "http://169.254.169.254/latest/meta-data/",
            "http://10.0.0.5/",
            "http://[::1]/",
            "http://0x7f.1/",
            "http://localhost./",
        ] {
            assert!(
                matches!(
                    hop(&public, "http://a.example/", private, 1),
                    Err(RedirectProblem::Policy(_))
                ),
                "{private}"
            );
        }
        assert!(matches!(
            hop(&public, "http://a.example/", "ftp://a.example/", 1),
            Err(RedirectProblem::Policy(_))
        ));
    }

    #[test]
    fn same_origin_fills_in_default_ports() {
        let a = Url::parse("https://a.example/x").unwrap();
        assert!(same_origin(&a, &Url::parse("https://a.example:443/y").unwrap()));
        assert!(!same_origin(&a, &Url::parse("http://a.example/x").unwrap()));
        assert!(!same_origin(&a, &Url::parse("https://a.example:8443/x").unwrap()));
        assert!(!same_origin(&a, &Url::parse("https://b.example/x").unwrap()));
    }
}
