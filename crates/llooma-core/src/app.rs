//! [`App`]: the application as one value, built once at start and shared by every request and
//! background task (cheap to clone: every part is shared).

use std::sync::Arc;
use std::time::Duration;

use llooma_approval_broker::Broker;
use llooma_mcp_client::McpClient;
use llooma_net::{NetClient, NetClientBuilder, NetError, OutboundPolicy, Purpose};
use llooma_store::Store;
use llooma_vault::Vault;
use tokio::sync::watch;

use crate::builtins::{NetPageReader, SearchClients};
use crate::files::FileLimits;
use crate::providers::ProviderClients;
use crate::snapshot_cache::SnapshotCache;
use crate::speech::{SpeechLimits, SpeechState};
use crate::turns::Turns;

/// Everything the application reaches: the database, the approval broker, the MCP client, the
/// instance secret, the outbound policy and the clients built under it, and the turns running
/// in this process.
#[derive(Clone, Debug)]
pub struct App {
    pub store: Store,
    /// Every external call is put to the person through it.
    pub broker: Broker<Store>,
    /// Talks to MCP servers under the outbound policy.
    pub mcp: McpClient,
    pub vault: Arc<Vault>,
    pub(crate) outbound: Arc<OutboundPolicy>,
    /// How long an outbound connection kept for reuse may sit unused.
    pub(crate) connection_idle: Duration,
    /// How large a file may be, and how much an account's files may take.
    pub(crate) file_limits: FileLimits,
    /// Turns running in this process and news of conversations' event logs.
    pub(crate) turns: Turns,
    /// Reads pages for `read_page` (the `fetch` purpose); one per instance.
    pub(crate) pages: NetPageReader,
    /// Model provider clients, built once per provider and reused while its settings last.
    pub(crate) providers: ProviderClients,
    /// The web search client of the configured address, reused across turns and bots.
    pub(crate) searches: SearchClients,
    /// Stored MCP snapshots, parsed once while their text lasts.
    pub(crate) snapshots: SnapshotCache,
    /// MCP server and tool icons fetched by this process.
    pub(crate) icons: crate::icon_cache::IconCache,
    /// When tool lists past their server's freshness were last retaken.
    pub(crate) freshness: crate::tool_freshness::Freshness,
    /// How long a speech exchange may take, and the speech models last detected.
    pub(crate) speech: SpeechState,
    /// Files are prepared (decoded, scaled, read) one at a time.
    pub(crate) file_work: Arc<tokio::sync::Semaphore>,
    /// Where uploads wait for their turn: memory up to a bound, then disk.
    pub(crate) upload_room: crate::uploads::UploadRoom,
    /// What local providers said about their models seeing images.
    pub(crate) reported_models: crate::providers::ReportedModels,
    /// Turns true when the server is shutting down: streams and background tasks end.
    pub stopping: watch::Receiver<bool>,
}

/// What [`App::new`] is built from.
#[derive(Debug)]
pub struct AppParts {
    pub store: Store,
    pub broker: Broker<Store>,
    pub mcp: McpClient,
    pub vault: Arc<Vault>,
    pub outbound: Arc<OutboundPolicy>,
    /// How long an outbound connection kept for reuse may sit unused before it is closed.
    pub connection_idle: Duration,
    /// How large a file may be, and how much an account's files may take.
    pub file_limits: FileLimits,
    /// How long one exchange with a speech provider may take.
    pub speech_limits: SpeechLimits,
    /// Where uploads wait on disk when many arrive at once (`<data_dir>/uploads`).
    pub upload_spill_dir: std::path::PathBuf,
    /// This process's id (the approval broker's replica id): the owner of the turns it runs.
    pub replica_id: String,
    /// The shortest freshness a server's tool list is given, whatever the server says
    /// ([`crate::tool_freshness::DEFAULT_MIN_FRESH`] unless an operator sets another).
    pub tool_list_min_fresh: Duration,
    pub stopping: watch::Receiver<bool>,
}

impl App {
    /// Builds the clients the application keeps (page reading; providers and search are built
    /// on first use).
    pub fn new(parts: AppParts) -> Result<App, NetError> {
        Ok(App {
            pages: NetPageReader::new(
                NetClient::builder(parts.outbound.clone(), Purpose::Fetch)
                    .idle_timeout(parts.connection_idle),
            )?,
            searches: SearchClients::new(parts.outbound.clone(), parts.connection_idle),
            providers: ProviderClients::default(),
            snapshots: SnapshotCache::default(),
            icons: crate::icon_cache::IconCache::default(),
            freshness: crate::tool_freshness::Freshness::new(parts.tool_list_min_fresh),
            speech: SpeechState::new(parts.speech_limits),
            reported_models: crate::providers::ReportedModels::default(),
            file_work: Arc::new(tokio::sync::Semaphore::new(1)),
            upload_room: crate::uploads::UploadRoom::new(parts.upload_spill_dir),
            turns: Turns::new(parts.replica_id),
            store: parts.store,
            broker: parts.broker,
            mcp: parts.mcp,
            vault: parts.vault,
            outbound: parts.outbound,
            connection_idle: parts.connection_idle,
            file_limits: parts.file_limits,
            stopping: parts.stopping,
        })
    }

    /// The outbound network policy every client is built under.
    pub fn outbound(&self) -> &OutboundPolicy {
        &self.outbound
    }

    /// A client of `purpose` under `policy`, keeping its connections as the instance says.
    pub(crate) fn net(&self, policy: Arc<OutboundPolicy>, purpose: Purpose) -> NetClientBuilder {
        NetClient::builder(policy, purpose).idle_timeout(self.connection_idle)
    }
}
