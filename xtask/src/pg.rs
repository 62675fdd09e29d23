//! The Postgres that the storage tests use: where it is and what to say when it does not
//! answer. Shared by `ci` (which checks it) and `setup` (which starts it), below both.

pub const DEFAULT_PG_URL: &str = "postgres://postgres@127.0.0.1:5432";

/// `LLOOMA_TEST_PG_URL`, else [`DEFAULT_PG_URL`].
pub fn pg_url() -> String {
    std::env::var("LLOOMA_TEST_PG_URL").unwrap_or_else(|_| DEFAULT_PG_URL.to_owned())
}

/// The error for a Postgres that does not answer, with what to do about it.
pub fn pg_unreachable(hostport: &str, url: &str) -> String {
    format!(
        "Postgres is not reachable at {hostport} (LLOOMA_TEST_PG_URL={url}); start it (as root \
         on a Debian machine with a cluster in /etc/postgresql, `cargo xtask ci` starts the \
         default 127.0.0.1:5432 one itself: `pg_ctlcluster --skip-systemctl-redirect <version> \
         main start`), or point LLOOMA_TEST_PG_URL at a running server"
    )
}

/// `postgres://user@host:port/db?x` -> `host:port` (port defaults to 5432).
pub fn host_port(url: &str) -> Option<String> {
    let rest = url.strip_prefix("postgres://").or_else(|| url.strip_prefix("postgresql://"))?;
    let authority = rest.split(['/', '?']).next()?;
    let hostport = authority.rsplit_once('@').map_or(authority, |(_, hp)| hp);
    if hostport.is_empty() {
        return None;
    }
    let has_port =
        if hostport.starts_with('[') { hostport.contains("]:") } else { hostport.contains(':') };
    Some(if has_port { hostport.to_owned() } else { format!("{hostport}:5432") })
}

#[cfg(test)]
mod tests {
    use super::host_port;

    #[test]
    fn host_port_from_urls() {
        let cases = [
            ("postgres://postgres@127.0.0.1:5432", Some("127.0.0.1:5432")),
            ("postgres://u:p@db.example:6000/llooma?sslmode=disable", Some("db.example:6000")),
            ("postgresql://localhost", Some("localhost:5432")),
            ("postgres://[::1]:5433/x", Some("[::1]:5433")),
            ("postgres://[::1]/x", Some("[::1]:5432")),
            ("mysql://127.0.0.1", None),
            ("postgres://", None),
        ];
        for (url, want) in cases {
            assert_eq!(host_port(url).as_deref(), want, "{url}");
        }
    }
}
