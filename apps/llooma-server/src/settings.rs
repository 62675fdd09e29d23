//! The one typed `Settings`: defaults, then an optional TOML file, then environment variables.
//!
//! Environment names are `LLOOMA_<FIELD>` in upper case, plus the names the product documents:
//! `DATABASE_URL`, `MCP_ALLOWED_ORIGINS`, `FETCH_ALLOWED_ORIGINS`, `BOT_ALLOWED_ORIGINS`. The
//! instance secret comes only from the environment (`LLOOMA_SECRET`) or a file, never from the
//! TOML file, so a config kept in git cannot carry it.

use std::net::SocketAddr;
use std::path::{Path, PathBuf};
use std::time::Duration;

use anyhow::{Context, bail};
use llooma_vault::Secret;
use serde::{Deserialize, Serialize};

#[derive(Clone, Copy, Debug, PartialEq, Eq, Deserialize, Serialize)]
#[serde(rename_all = "lowercase")]
pub enum LogFormat {
    Text,
    Json,
}

#[derive(Clone, Debug, Deserialize, Serialize)]
#[serde(default, deny_unknown_fields)]
pub struct Settings {
    /// Address and port to listen on.
    pub listen: SocketAddr,
    /// Where the SQLite database and the generated instance secret live.
    pub data_dir: PathBuf,
    /// `postgres://...` to use Postgres; unset means SQLite in the data directory.
    pub database_url: Option<String>,
    /// The address people use to reach the instance, e.g. `https://chat.example.org`.
    pub public_url: Option<String>,
    /// File holding the instance secret; defaults to `<data_dir>/instance-secret`.
    pub secret_file: Option<PathBuf>,
    pub log_format: LogFormat,
    /// A tracing filter such as `info` or `llooma=debug,info`.
    pub log_filter: String,
    pub session_idle_secs: u64,
    pub session_absolute_secs: u64,
    pub login_window_secs: u64,
    pub login_max_failures_per_account: u64,
    pub login_max_failures_per_address: u64,
    /// Take the client address from `X-Forwarded-For`: only behind a proxy you run.
    pub trust_forwarded_for: bool,
    /// Password hashes computed at once (each takes ~19 MiB for tens of milliseconds).
    pub password_hash_concurrency: usize,
    pub mcp_allowed_origins: Option<String>,
    pub fetch_allowed_origins: Option<String>,
    pub bot_allowed_origins: Option<String>,
    pub provider_allowed_origins: Option<String>,
    pub shutdown_grace_secs: u64,
    /// A connection that has not sent a complete request head this long after it opened (or
    /// after its first byte, on a kept-alive connection) is closed.
    pub header_read_timeout_secs: u64,
    /// A kept-alive connection with no new request this long is closed. Responses being written,
    /// such as event streams, are never cut by either timeout.
    pub keep_alive_timeout_secs: u64,
    /// A request body must arrive within this many seconds, plus one second for every
    /// `request_body_min_rate` bytes received: a client trickling its body cannot hold a
    /// connection for ever.
    pub request_body_timeout_secs: u64,
    /// Bytes per second a request body must keep up, after its first `request_body_timeout_secs`.
    pub request_body_min_rate: u64,
    /// A response the client stops reading is closed once nothing could be written for this
    /// many seconds (an event stream whose reader reads is never stuck this long).
    pub response_write_timeout_secs: u64,
    /// How long an outbound connection (to a model provider, an MCP server, a chat server) kept
    /// for reuse may sit unused before it is closed.
    pub outbound_idle_secs: u64,
    /// The largest file a person may attach, in MiB (a photo is scaled down after).
    pub max_upload_mb: u64,
    /// What one account's stored files may take in all, in MiB.
    pub account_files_mb: u64,
    /// How long one exchange with the speech provider (a recording written down, a text read
    /// aloud) may take, in seconds.
    pub speech_timeout_secs: u64,
    /// Connections served at once; 0 means the open-files limit less a reserve (a tenth, at least
    /// 64). At the cap the longest-idle connection makes room, or a new one is closed at once.
    pub max_connections: u64,
    /// How long one MCP tool call may run without news from the server (progress reports extend
    /// it, up to ten minutes).
    pub mcp_call_timeout_secs: u64,
    /// How long an MCP call the server runs as a long-running task may take in all before it
    /// is cancelled.
    pub mcp_task_max_secs: u64,
    /// How often MCP servers that report tool-list changes are (re)watched; 0 turns watching off.
    pub mcp_watch_secs: u64,
    /// How long an approval card waits for an answer before the call counts as refused.
    pub approval_window_secs: u64,
    /// The shortest freshness a server's tool list is given (`ttlMs` below it is raised).
    pub tool_list_min_fresh_secs: u64,
    /// How often each bot integration asks its chat server what happened; 0 turns bots off.
    pub bot_poll_secs: u64,
    /// The folder holding the web interface's browser part (what `cargo xtask build-web`
    /// writes); unset means `<target>/web/pkg` beside the binary's own folder.
    pub web_dir: Option<PathBuf>,
    /// A TOML file of MCP servers for Settings → Tools → Discover, beside the administrators'
    /// entries; read at start, so a change takes a restart.
    pub mcp_catalogue_file: Option<PathBuf>,
    /// From `LLOOMA_SECRET` only.
    #[serde(skip)]
    pub secret: Option<Secret>,
}

impl Default for Settings {
    fn default() -> Self {
        Settings {
            listen: SocketAddr::from(([127, 0, 0, 1], 8080)),
            data_dir: PathBuf::from("data"),
            database_url: None,
            public_url: None,
            secret_file: None,
            log_format: LogFormat::Text,
            log_filter: "info".into(),
            session_idle_secs: 7 * 24 * 3600,
            session_absolute_secs: 30 * 24 * 3600,
            login_window_secs: 15 * 60,
            login_max_failures_per_account: 5,
            login_max_failures_per_address: 20,
            trust_forwarded_for: false,
            password_hash_concurrency: std::thread::available_parallelism().map_or(2, |n| n.get()),
            mcp_allowed_origins: None,
            fetch_allowed_origins: None,
            bot_allowed_origins: None,
            provider_allowed_origins: None,
            shutdown_grace_secs: 10,
            header_read_timeout_secs: 10,
            keep_alive_timeout_secs: 75,
            request_body_timeout_secs: 20,
            request_body_min_rate: 500,
            response_write_timeout_secs: 30,
            outbound_idle_secs: 90,
            max_upload_mb: 25,
            account_files_mb: 1024,
            speech_timeout_secs: 60,
            max_connections: 0,
            mcp_watch_secs: 30,
            web_dir: None,
            mcp_catalogue_file: None,
            mcp_call_timeout_secs: 60,
            mcp_task_max_secs: 600,
            approval_window_secs: 120,
            tool_list_min_fresh_secs: 60,
            bot_poll_secs: 5,
            secret: None,
        }
    }
}

fn parse<T: std::str::FromStr>(name: &str, value: &str) -> anyhow::Result<T>
where
    T::Err: std::fmt::Display,
{
    value.trim().parse().map_err(|e| anyhow::anyhow!("{name}={value:?} is not valid: {e}"))
}

fn parse_bool(name: &str, value: &str) -> anyhow::Result<bool> {
    match value.trim().to_ascii_lowercase().as_str() {
        "1" | "true" | "yes" | "on" => Ok(true),
        "0" | "false" | "no" | "off" => Ok(false),
        _ => bail!("{name}={value:?} is not valid: use true or false"),
    }
}

impl Settings {
    /// Defaults, then the TOML file (if any), then the environment.
    pub fn load(
        file: Option<&Path>,
        env: impl Fn(&str) -> Option<String>,
    ) -> anyhow::Result<Settings> {
        let file = file.map(Path::to_path_buf).or_else(|| env("LLOOMA_CONFIG").map(PathBuf::from));
        let mut settings = match file {
            Some(path) => {
                let text = std::fs::read_to_string(&path)
                    .with_context(|| format!("reading the settings file {}", path.display()))?;
                toml::from_str(&text)
                    .with_context(|| format!("the settings file {} is not valid", path.display()))?
            }
            None => Settings::default(),
        };
        settings.apply_env(env)?;
        settings.validate()?;
        Ok(settings)
    }

    fn apply_env(&mut self, env: impl Fn(&str) -> Option<String>) -> anyhow::Result<()> {
        let get = |name: &str| env(name).filter(|v| !v.trim().is_empty());
        if let Some(v) = get("LLOOMA_LISTEN") {
            self.listen = parse("LLOOMA_LISTEN", &v)?;
        }
        if let Some(v) = get("LLOOMA_DATA_DIR") {
            self.data_dir = PathBuf::from(v);
        }
        if let Some(v) = get("DATABASE_URL").or_else(|| get("LLOOMA_DATABASE_URL")) {
            self.database_url = Some(v);
        }
        if let Some(v) = get("LLOOMA_PUBLIC_URL") {
            self.public_url = Some(v);
        }
        if let Some(v) = get("LLOOMA_WEB_DIR") {
            self.web_dir = Some(PathBuf::from(v));
        }
        if let Some(v) = get("LLOOMA_MCP_CATALOGUE_FILE") {
            self.mcp_catalogue_file = Some(PathBuf::from(v));
        }
        if let Some(v) = get("LLOOMA_SECRET_FILE") {
            self.secret_file = Some(PathBuf::from(v));
        }
        if let Some(v) = get("LLOOMA_LOG_FORMAT") {
            self.log_format = match v.trim() {
                "text" => LogFormat::Text,
                "json" => LogFormat::Json,
                other => bail!("LLOOMA_LOG_FORMAT={other:?} is not valid: use text or json"),
            };
        }
        if let Some(v) = get("LLOOMA_LOG").or_else(|| get("RUST_LOG")) {
            self.log_filter = v;
        }
        let numbers: [(&str, &mut u64); 22] = [
            ("LLOOMA_TOOL_LIST_MIN_FRESH_SECS", &mut self.tool_list_min_fresh_secs),
            ("LLOOMA_BOT_POLL_SECS", &mut self.bot_poll_secs),
            ("LLOOMA_MCP_CALL_TIMEOUT_SECS", &mut self.mcp_call_timeout_secs),
            ("LLOOMA_MCP_TASK_MAX_SECS", &mut self.mcp_task_max_secs),
            ("LLOOMA_APPROVAL_WINDOW_SECS", &mut self.approval_window_secs),
            ("LLOOMA_MCP_WATCH_SECS", &mut self.mcp_watch_secs),
            ("LLOOMA_SESSION_IDLE_SECS", &mut self.session_idle_secs),
            ("LLOOMA_SESSION_ABSOLUTE_SECS", &mut self.session_absolute_secs),
            ("LLOOMA_LOGIN_WINDOW_SECS", &mut self.login_window_secs),
            ("LLOOMA_LOGIN_MAX_FAILURES_PER_ACCOUNT", &mut self.login_max_failures_per_account),
            ("LLOOMA_LOGIN_MAX_FAILURES_PER_ADDRESS", &mut self.login_max_failures_per_address),
            ("LLOOMA_SHUTDOWN_GRACE_SECS", &mut self.shutdown_grace_secs),
            ("LLOOMA_HEADER_READ_TIMEOUT_SECS", &mut self.header_read_timeout_secs),
            ("LLOOMA_KEEP_ALIVE_TIMEOUT_SECS", &mut self.keep_alive_timeout_secs),
            ("LLOOMA_MAX_CONNECTIONS", &mut self.max_connections),
            ("LLOOMA_REQUEST_BODY_TIMEOUT_SECS", &mut self.request_body_timeout_secs),
            ("LLOOMA_REQUEST_BODY_MIN_RATE", &mut self.request_body_min_rate),
            ("LLOOMA_RESPONSE_WRITE_TIMEOUT_SECS", &mut self.response_write_timeout_secs),
            ("LLOOMA_OUTBOUND_IDLE_SECS", &mut self.outbound_idle_secs),
            ("LLOOMA_MAX_UPLOAD_MB", &mut self.max_upload_mb),
            ("LLOOMA_ACCOUNT_FILES_MB", &mut self.account_files_mb),
            ("LLOOMA_SPEECH_TIMEOUT_SECS", &mut self.speech_timeout_secs),
        ];
        for (name, field) in numbers {
            if let Some(v) = get(name) {
                *field = parse(name, &v)?;
            }
        }
        if let Some(v) = get("LLOOMA_PASSWORD_HASH_CONCURRENCY") {
            self.password_hash_concurrency = parse("LLOOMA_PASSWORD_HASH_CONCURRENCY", &v)?;
        }
        if let Some(v) = get("LLOOMA_TRUST_FORWARDED_FOR") {
            self.trust_forwarded_for = parse_bool("LLOOMA_TRUST_FORWARDED_FOR", &v)?;
        }
        if let Some(v) = get("MCP_ALLOWED_ORIGINS") {
            self.mcp_allowed_origins = Some(v);
        }
        if let Some(v) = get("FETCH_ALLOWED_ORIGINS") {
            self.fetch_allowed_origins = Some(v);
        }
        if let Some(v) = get("BOT_ALLOWED_ORIGINS") {
            self.bot_allowed_origins = Some(v);
        }
        if let Some(v) = get("PROVIDER_ALLOWED_ORIGINS") {
            self.provider_allowed_origins = Some(v);
        }
        if let Some(v) = env("LLOOMA_SECRET").filter(|v| !v.is_empty()) {
            self.secret = Some(Secret::new(v));
        }
        Ok(())
    }

    fn validate(&self) -> anyhow::Result<()> {
        if let Some(url) = &self.public_url {
            let parsed = url::Url::parse(url)
                .with_context(|| format!("LLOOMA_PUBLIC_URL={url:?} is not a URL"))?;
            if !matches!(parsed.scheme(), "http" | "https") {
                bail!("LLOOMA_PUBLIC_URL must start with http:// or https://");
            }
        }
        if self.session_idle_secs == 0 || self.session_absolute_secs == 0 {
            bail!("session lifetimes must be at least one second");
        }
        if !(1..=86_400).contains(&self.tool_list_min_fresh_secs) {
            bail!("LLOOMA_TOOL_LIST_MIN_FRESH_SECS must be between 1 and 86400 (a minute is 60)");
        }
        if !(1..=3600).contains(&self.approval_window_secs) {
            bail!("approval_window_secs must be between 1 and 3600 (two minutes is 120)");
        }
        if !(1..=600).contains(&self.mcp_call_timeout_secs) {
            bail!("mcp_call_timeout_secs must be between 1 and 600");
        }
        if !(1..=86_400).contains(&self.mcp_task_max_secs) {
            bail!("mcp_task_max_secs must be between 1 and 86400 (ten minutes is 600)");
        }
        if self.login_max_failures_per_account == 0 || self.login_max_failures_per_address == 0 {
            bail!("login failure limits must be at least 1");
        }
        if !(1..=3600).contains(&self.header_read_timeout_secs) {
            bail!("header_read_timeout_secs must be between 1 and 3600 (the default is 10)");
        }
        if !(1..=86_400).contains(&self.keep_alive_timeout_secs) {
            bail!("keep_alive_timeout_secs must be between 1 and 86400 (the default is 75)");
        }
        if !(1..=3600).contains(&self.request_body_timeout_secs) {
            bail!("request_body_timeout_secs must be between 1 and 3600 (the default is 20)");
        }
        if self.request_body_min_rate == 0 {
            bail!("request_body_min_rate must be at least 1 byte per second (the default is 500)");
        }
        if !(1..=3600).contains(&self.response_write_timeout_secs) {
            bail!("response_write_timeout_secs must be between 1 and 3600 (the default is 30)");
        }
        if !(1..=3600).contains(&self.outbound_idle_secs) {
            bail!("outbound_idle_secs must be between 1 and 3600 (the default is 90)");
        }
        if !(1..=1024).contains(&self.max_upload_mb) {
            bail!("max_upload_mb must be between 1 and 1024 (the default is 25)");
        }
        if !(1..=600).contains(&self.speech_timeout_secs) {
            bail!("speech_timeout_secs must be between 1 and 600 (the default is 60)");
        }
        if self.account_files_mb == 0 {
            bail!("account_files_mb must be at least 1 (the default is 1024)");
        }
        Ok(())
    }

    /// The entries of the MCP catalogue file, if one is named; an error names the file and line.
    pub fn mcp_catalogue(&self) -> anyhow::Result<Vec<llooma_api::CatalogueFileEntry>> {
        let Some(path) = &self.mcp_catalogue_file else {
            return Ok(Vec::new());
        };
        let text = std::fs::read_to_string(path)
            .with_context(|| format!("reading the MCP catalogue file {}", path.display()))?;
        llooma_api::parse_catalogue_file(&text)
            .with_context(|| format!("the MCP catalogue file {} is not valid", path.display()))
    }

    /// The outbound policy from the three allow-lists; a malformed entry is an error naming it.
    pub fn outbound_policy(&self) -> anyhow::Result<llooma_net::OutboundPolicy> {
        Ok(llooma_net::OutboundPolicy::from_allow_lists(
            self.mcp_allowed_origins.as_deref(),
            self.fetch_allowed_origins.as_deref(),
            self.bot_allowed_origins.as_deref(),
        )?
        .with_allow_list(llooma_net::Purpose::Provider, self.provider_allowed_origins.as_deref())?)
    }

    /// The database address: the configured one, or SQLite in the data directory.
    pub fn database_url(&self) -> String {
        match &self.database_url {
            Some(url) => url.clone(),
            None => format!("sqlite://{}?mode=rwc", self.data_dir.join("llooma.db").display()),
        }
    }

    pub fn uses_sqlite(&self) -> bool {
        self.database_url.is_none()
            || self.database_url.as_deref().is_some_and(|u| u.starts_with("sqlite:"))
    }

    pub fn secret_file(&self) -> PathBuf {
        self.secret_file.clone().unwrap_or_else(|| self.data_dir.join("instance-secret"))
    }

    /// `scheme://host[:port]` of the public address, if one is set.
    pub fn public_origin(&self) -> Option<String> {
        let url = url::Url::parse(self.public_url.as_deref()?).ok()?;
        Some(url.origin().ascii_serialization())
    }

    pub fn secure_cookies(&self) -> bool {
        self.public_url.as_deref().is_some_and(|u| u.starts_with("https://"))
    }

    pub fn session_idle(&self) -> Duration {
        Duration::from_secs(self.session_idle_secs)
    }

    pub fn session_absolute(&self) -> Duration {
        Duration::from_secs(self.session_absolute_secs)
    }

    pub fn header_read_timeout(&self) -> Duration {
        Duration::from_secs(self.header_read_timeout_secs)
    }

    pub fn keep_alive_timeout(&self) -> Duration {
        Duration::from_secs(self.keep_alive_timeout_secs)
    }

    /// The settings as TOML, with every secret replaced by whether it is set.
    pub fn to_redacted_toml(&self) -> anyhow::Result<String> {
        let mut shown = self.clone();
        shown.database_url = Some(llooma_store::redact_url(&self.database_url()));
        let mut text = toml::to_string_pretty(&shown).context("rendering the settings")?;
        text.push_str(&format!(
            "# instance secret: {}\n",
            if self.secret.is_some() {
                "from LLOOMA_SECRET [redacted]".to_owned()
            } else {
                format!("from the file {}", self.secret_file().display())
            }
        ));
        Ok(text)
    }
}

#[cfg(test)]
mod tests {
    use std::collections::HashMap;

    use super::*;

    fn env_of(pairs: &[(&str, &str)]) -> impl Fn(&str) -> Option<String> {
        let map: HashMap<String, String> =
            pairs.iter().map(|(k, v)| ((*k).to_owned(), (*v).to_owned())).collect();
        move |name| map.get(name).cloned()
    }

    #[test]
    fn environment_overrides_the_file_which_overrides_defaults() {
        let dir = tempfile::tempdir().unwrap();
        let file = dir.path().join("llooma.toml");
        std::fs::write(&file, "listen = \"127.0.0.1:9000\"\nlog_filter = \"debug\"\n").unwrap();
        let settings =
            Settings::load(Some(&file), env_of(&[("LLOOMA_LISTEN", "0.0.0.0:7000")])).unwrap();
        assert_eq!(settings.listen.port(), 7000);
        assert_eq!(settings.log_filter, "debug");
        assert_eq!(settings.session_idle_secs, 7 * 24 * 3600);
    }

    #[test]
    fn unknown_keys_and_bad_values_are_refused_with_their_name() {
        let dir = tempfile::tempdir().unwrap();
        let file = dir.path().join("llooma.toml");
        std::fs::write(&file, "lisen = \"127.0.0.1:9000\"\n").unwrap();
        let err = Settings::load(Some(&file), env_of(&[])).unwrap_err();
        assert!(format!("{err:#}").contains("lisen"), "{err:#}");
        let err =
            Settings::load(None, env_of(&[("LLOOMA_SESSION_IDLE_SECS", "soon")])).unwrap_err();
        assert!(err.to_string().contains("LLOOMA_SESSION_IDLE_SECS"), "{err}");
    }

    #[test]
    fn the_printed_config_never_shows_a_password_or_the_secret() {
        let settings = Settings::load(
            None,
            env_of(&[
                ("DATABASE_URL", "postgres://app:hunter2hunter2@db/llooma"),
                ("LLOOMA_SECRET", "s3cr3t-s3cr3t-s3cr3t-s3cr3t-s3cr3t-42"),
            ]),
        )
        .unwrap();
        let text = settings.to_redacted_toml().unwrap();
        assert!(!text.contains("hunter2"), "{text}");
        assert!(!text.contains("s3cr3t"), "{text}");
        assert!(text.contains("postgres://app:[redacted]@db/llooma"), "{text}");
    }

    #[test]
    fn connection_timeouts_and_the_cap_come_from_the_environment() {
        let settings = Settings::load(None, env_of(&[])).unwrap();
        assert_eq!((settings.header_read_timeout_secs, settings.keep_alive_timeout_secs), (10, 75));
        assert_eq!(settings.max_connections, 0);
        let settings = Settings::load(
            None,
            env_of(&[
                ("LLOOMA_HEADER_READ_TIMEOUT_SECS", "1"),
                ("LLOOMA_KEEP_ALIVE_TIMEOUT_SECS", "3"),
                ("LLOOMA_MAX_CONNECTIONS", "500"),
            ]),
        )
        .unwrap();
        assert_eq!(settings.header_read_timeout(), Duration::from_secs(1));
        assert_eq!(settings.keep_alive_timeout(), Duration::from_secs(3));
        assert_eq!(settings.max_connections, 500);
        let err =
            Settings::load(None, env_of(&[("LLOOMA_HEADER_READ_TIMEOUT_SECS", "0")])).unwrap_err();
        assert!(err.to_string().contains("header_read_timeout_secs"), "{err}");
        let err =
            Settings::load(None, env_of(&[("LLOOMA_KEEP_ALIVE_TIMEOUT_SECS", "0")])).unwrap_err();
        assert!(err.to_string().contains("keep_alive_timeout_secs"), "{err}");
    }
}
