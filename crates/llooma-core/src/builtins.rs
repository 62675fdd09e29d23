//! The app's own tools reaching the world: the engine's ports implemented with the outbound
//! client and the store.
//!
//! - [`NetPageReader`]: `read_page` under the `fetch` purpose (public addresses only unless
//!   `FETCH_ALLOWED_ORIGINS` says otherwise; redirects re-checked hop by hop; size and time caps).
//! - [`SearxSearch`]: `web_search` against the administrator's SearXNG-compatible service, under
//!   the `search` purpose, whose origin may reach this machine and local networks as a local
//!   provider's does ([`search_policy`]): the administrator chose it, so it may be on the LAN;
//!   link-local addresses (cloud metadata) stay refused, and it opens nothing for page reading.
//! - [`StoreMemory`]: a persona's memory in the database.
//!
//! Bots reuse these with their own choice of tools. The clients are built once and reused: one
//! [`NetPageReader`] per instance, one [`SearxSearch`] per configured address
//! ([`SearchClients`]).

use std::sync::{Arc, Mutex, PoisonError};
use std::time::Duration;

use crate::{
    App, AppError, FetchedPage, MemoryEntry, MemoryPort, PageReader, PortFuture, SearchHit,
    ToolError, WebSearch,
};
use llooma_net::{
    Decision, NetClient, NetClientBuilder, NetError, Origin, OutboundPolicy, Purpose, Url,
};
use llooma_store::Store;
use serde::Deserialize;

/// Most bytes of a page read; the rest is not downloaded.
pub const MAX_PAGE_BYTES: usize = 2 * 1024 * 1024;
/// Most bytes of a search answer.
const MAX_SEARCH_BYTES: u64 = 2 * 1024 * 1024;
const PAGE_TIMEOUT: Duration = Duration::from_secs(20);
const SEARCH_TIMEOUT: Duration = Duration::from_secs(15);

/// Reads pages through the outbound policy's `fetch` purpose.
#[derive(Clone, Debug)]
pub struct NetPageReader {
    net: NetClient,
}

impl NetPageReader {
    /// A reader on `net`, a client of the `fetch` purpose.
    pub fn new(net: NetClientBuilder) -> Result<Self, NetError> {
        let net = net
            .total_timeout(Some(PAGE_TIMEOUT))
            // The reader stops at MAX_PAGE_BYTES itself; the client's cap is the backstop.
            .max_response_bytes(MAX_PAGE_BYTES as u64 + 64 * 1024)
            .build()?;
        Ok(NetPageReader { net })
    }

    async fn read(&self, url: &str) -> Result<FetchedPage, ToolError> {
        let request = self
            .net
            .get(url)
            .map_err(|e| ToolError(e.to_string()))?
            .header("accept", "text/html,application/xhtml+xml,text/plain;q=0.9,*/*;q=0.5");
        let mut response = self.net.send(request).await.map_err(|e| ToolError(e.to_string()))?;
        let status = response.status();
        if !status.is_success() {
            return Err(ToolError(format!("the site answered {status}")));
        }
        let content_type = response
            .headers()
            .get("content-type")
            .and_then(|v| v.to_str().ok())
            .unwrap_or_default()
            .to_ascii_lowercase();
        let media_type =
            content_type.split(';').next().map(|v| v.trim().to_owned()).unwrap_or_default();
        let latin1 = ["iso-8859-1", "latin1", "windows-1252", "us-ascii"]
            .iter()
            .any(|c| content_type.contains(&format!("charset={c}")));
        let final_url = response.url().to_string();
        let mut body = Vec::new();
        while body.len() < MAX_PAGE_BYTES {
            match response.chunk().await {
                Ok(Some(chunk)) => body.extend_from_slice(&chunk),
                Ok(None) => break,
                Err(e) => return Err(ToolError(e.to_string())),
            }
        }
        body.truncate(MAX_PAGE_BYTES);
        // Pages declare UTF-8 or, among the old ones, Latin-1 (whose bytes are its code points);
        // anything else is read as UTF-8 with replacement characters.
        let body = if latin1 {
            body.iter().map(|b| char::from(*b)).collect()
        } else {
            String::from_utf8_lossy(&body).into_owned()
        };
        Ok(FetchedPage { url: final_url, media_type, body })
    }
}

impl PageReader for NetPageReader {
    fn fetch<'a>(&'a self, url: &'a str) -> PortFuture<'a, FetchedPage> {
        Box::pin(self.read(url))
    }
}

/// Asks a SearXNG-compatible service: `GET {address}/search?q=..&format=json`.
#[derive(Clone, Debug)]
pub struct SearxSearch {
    net: NetClient,
    endpoint: url::Url,
}

/// Why a web search address cannot be used; the message says what to write instead.
#[derive(Debug, thiserror::Error)]
pub enum SearchSetupError {
    #[error(
        "the web search address must be an http or https URL such as http://127.0.0.1:8888 \
         (the SearXNG instance's address): {0}"
    )]
    Address(String),
    #[error("the web search client could not be built: {0}")]
    Client(#[from] NetError),
}

/// The search endpoint for an administrator's address (`.../search` is added unless given).
pub fn search_endpoint(address: &str) -> Result<url::Url, SearchSetupError> {
    let mut url =
        url::Url::parse(address.trim()).map_err(|e| SearchSetupError::Address(e.to_string()))?;
    if !matches!(url.scheme(), "http" | "https") || url.host().is_none() {
        return Err(SearchSetupError::Address(format!("`{address}` is not http(s) with a host")));
    }
    if !url.username().is_empty() || url.password().is_some() {
        return Err(SearchSetupError::Address("it must not carry a user name or password".into()));
    }
    url.set_query(None);
    url.set_fragment(None);
    if !url.path().trim_end_matches('/').ends_with("/search") {
        let path = format!("{}/search", url.path().trim_end_matches('/'));
        url.set_path(&path);
    }
    Ok(url)
}

#[derive(Deserialize)]
struct SearxAnswer {
    #[serde(default)]
    results: Vec<SearxResult>,
}

#[derive(Deserialize)]
struct SearxResult {
    #[serde(default)]
    title: String,
    #[serde(default)]
    url: String,
    #[serde(default)]
    content: String,
}

/// The policy web search at `endpoint` runs under: the instance's, with the service's origin
/// allowed to reach this machine and local networks (loopback, private, CGNAT, unique local
/// IPv6) besides public addresses, as a provider marked local is; never link-local, where
/// cloud metadata answers (docs/network-policy.md).
pub fn search_policy(policy: &OutboundPolicy, endpoint: &Url) -> OutboundPolicy {
    match Origin::of_url(endpoint) {
        Some(origin) => policy.clone().with_local_origin(Purpose::Search, origin),
        None => policy.clone(),
    }
}

impl SearxSearch {
    /// A client for the service at `address`, under [`search_policy`].
    pub fn new(
        policy: &OutboundPolicy,
        address: &str,
        connection_idle: Duration,
    ) -> Result<Self, SearchSetupError> {
        let endpoint = search_endpoint(address)?;
        let policy = search_policy(policy, &endpoint);
        let net = NetClient::builder(Arc::new(policy), Purpose::Search)
            .idle_timeout(connection_idle)
            .total_timeout(Some(SEARCH_TIMEOUT))
            .max_response_bytes(MAX_SEARCH_BYTES)
            .build()?;
        Ok(SearxSearch { net, endpoint })
    }

    async fn ask(&self, query: &str) -> Result<Vec<SearchHit>, ToolError> {
        let mut url = self.endpoint.clone();
        url.query_pairs_mut().append_pair("q", query).append_pair("format", "json");
        let request = self
            .net
            .get(url.as_str())
            .map_err(|e| ToolError(e.to_string()))?
            .header("accept", "application/json");
        let response = self.net.send(request).await.map_err(|e| ToolError(e.to_string()))?;
        let status = response.status();
        if status.as_u16() == 403 {
            return Err(ToolError(
                "the search service refused to answer in JSON (an administrator enables the \
                 json format in its settings)"
                    .into(),
            ));
        }
        if !status.is_success() {
            return Err(ToolError(format!("the search service answered {status}")));
        }
        let body = response.bytes().await.map_err(|e| ToolError(e.to_string()))?;
        let answer: SearxAnswer = serde_json::from_slice(&body)
            .map_err(|_| ToolError("the search service's answer was not SearXNG's JSON".into()))?;
        Ok(answer
            .results
            .into_iter()
            .filter(|r| !r.url.is_empty())
            .map(|r| SearchHit { title: r.title, url: r.url, snippet: r.content })
            .collect())
    }
}

impl WebSearch for SearxSearch {
    fn search<'a>(&'a self, query: &'a str) -> PortFuture<'a, Vec<SearchHit>> {
        Box::pin(self.ask(query))
    }
}

/// The web search client of the configured address, built once and reused across turns and
/// bots until the administrator changes the address. Cheap to clone (shared).
#[derive(Clone, Debug)]
pub struct SearchClients {
    policy: Arc<OutboundPolicy>,
    connection_idle: Duration,
    /// The instance has one address at a time, so one slot: the last address and its client.
    current: Arc<Mutex<Option<(String, SearxSearch)>>>,
}

impl SearchClients {
    /// Clients under the instance's outbound `policy` (each opens its service's origin to local
    /// networks, as [`SearxSearch::new`] does).
    pub fn new(policy: Arc<OutboundPolicy>, connection_idle: Duration) -> Self {
        SearchClients { policy, connection_idle, current: Arc::new(Mutex::new(None)) }
    }

    /// The client for `address`, built on first use and whenever the address changed.
    pub fn get(&self, address: &str) -> Result<SearxSearch, SearchSetupError> {
        let mut current = self.current.lock().unwrap_or_else(PoisonError::into_inner);
        if let Some((built_for, client)) = current.as_ref()
            && built_for == address
        {
            return Ok(client.clone());
        }
        let client = SearxSearch::new(&self.policy, address, self.connection_idle)?;
        *current = Some((address.to_owned(), client.clone()));
        Ok(client)
    }
}

/// A persona's memory in the database.
#[derive(Clone, Debug)]
pub struct StoreMemory {
    pub store: Store,
}

fn entry(note: llooma_store::MemoryNote) -> MemoryEntry {
    MemoryEntry {
        id: note.id,
        content: note.content,
        created_at: llooma_store::ms_to_rfc3339(note.created_at_ms),
    }
}

fn store_error(err: llooma_store::StoreError) -> ToolError {
    tracing::warn!(error = %err, "a memory tool could not reach the database");
    ToolError("the database did not answer; try again later".into())
}

impl MemoryPort for StoreMemory {
    fn entries<'a>(&'a self, persona_id: &'a str) -> PortFuture<'a, Vec<MemoryEntry>> {
        Box::pin(async move {
            let notes = self.store.memory_notes(persona_id).await.map_err(store_error)?;
            Ok(notes.into_iter().map(entry).collect())
        })
    }

    fn remember<'a>(
        &'a self,
        persona_id: &'a str,
        content: &'a str,
        max_entries: usize,
    ) -> PortFuture<'a, Option<MemoryEntry>> {
        Box::pin(async move {
            let note = self
                .store
                .add_memory_note(persona_id, content, max_entries)
                .await
                .map_err(store_error)?;
            Ok(note.map(entry))
        })
    }

    fn forget<'a>(&'a self, persona_id: &'a str, entry_id: &'a str) -> PortFuture<'a, bool> {
        Box::pin(async move {
            self.store.forget_memory_note(persona_id, entry_id).await.map_err(store_error)
        })
    }
}

impl App {
    /// The endpoint of the web search service an administrator is setting at `address`, or why
    /// it can never be reached, with what to do. Only an address written as such is judged
    /// here; a name is judged on every request, by what it then resolves to.
    pub fn web_search_endpoint(&self, address: &str) -> Result<Url, AppError> {
        let endpoint = search_endpoint(address)
            .map_err(|e| AppError::invalid("invalid_web_search_url", e.to_string()))?;
        let policy = search_policy(&self.outbound, &endpoint);
        let Decision::Refused { reason } = policy.decide_str(Purpose::Search, endpoint.as_str())
        else {
            return Ok(endpoint);
        };
        Err(crate::providers::local_address_refused("web search service", reason))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_search_endpoint_is_the_address_with_search_added_once() {
        let cases = [
            ("http://127.0.0.1:8888", "http://127.0.0.1:8888/search"),
            ("http://127.0.0.1:8888/", "http://127.0.0.1:8888/search"),
            ("https://searx.lan/searxng/", "https://searx.lan/searxng/search"),
            ("https://searx.lan/search?q=x&format=json", "https://searx.lan/search"),
        ];
        for (given, expected) in cases {
            assert_eq!(search_endpoint(given).unwrap().as_str(), expected, "{given}");
        }
        for bad in ["searx.lan", "ftp://searx.lan", "http://user:pw@searx.lan", ""] {
            let err = search_endpoint(bad).unwrap_err().to_string();
            assert!(err.contains("http://127.0.0.1:8888"), "{bad}: {err}");
        }
    }

    #[test]
    fn the_search_client_follows_the_configured_address() {
        let clients = SearchClients::new(
            Arc::new(OutboundPolicy::public_only()),
            llooma_net::DEFAULT_IDLE_TIMEOUT,
        );
        let first = clients.get("http://127.0.0.1:8888").unwrap();
        assert_eq!(first.endpoint.as_str(), "http://127.0.0.1:8888/search");
        let again = clients.get("http://127.0.0.1:8888").unwrap();
        assert_eq!(again.endpoint, first.endpoint);
        // The loopback service is allowed for search only, as SearxSearch::new allows it.
        assert!(
            again.net.policy().decide_str(Purpose::Search, "http://127.0.0.1:8888/").is_allowed()
        );
        assert!(
            !again.net.policy().decide_str(Purpose::Fetch, "http://127.0.0.1:8888/").is_allowed()
        );

        // Its origin only: another port of this machine stays closed.
        assert!(
            !again.net.policy().decide_str(Purpose::Search, "http://127.0.0.1:9999/").is_allowed()
        );

        let moved = clients.get("https://searx.lan/").unwrap();
        assert_eq!(moved.endpoint.as_str(), "https://searx.lan/search");
        assert!(
            !moved.net.policy().decide_str(Purpose::Search, "http://127.0.0.1:8888/").is_allowed()
        );
        assert!(clients.get("ftp://searx.lan").is_err());
    }

    #[test]
    fn a_search_service_reaches_the_local_network_but_never_cloud_metadata() {
        let policy = OutboundPolicy::public_only();
        for local in ["http://192.168.1.20:8888", "http://10.0.0.5", "http://[::1]:8080"] {
            let endpoint = search_endpoint(local).unwrap();
            let decided = search_policy(&policy, &endpoint).decide_str(Purpose::Search, local);
            assert!(decided.is_allowed(), "{local}: {decided:?}");
        }
        for metadata in ["http://169.254.169.254", "http://[fe80::1]:8888", "http://0.0.0.0:8888"] {
            let endpoint = search_endpoint(metadata).unwrap();
            let decided = search_policy(&policy, &endpoint).decide_str(Purpose::Search, metadata);
            assert!(!decided.is_allowed(), "{metadata} must stay refused");
        }
        // Nothing opens for reading pages.
        let endpoint = search_endpoint("http://192.168.1.20:8888").unwrap();
        let opened = search_policy(&policy, &endpoint);
        assert!(!opened.decide_str(Purpose::Fetch, "http://192.168.1.20:8888/").is_allowed());
    }
}
