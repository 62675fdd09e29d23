//! `llooma serve`: open the database and the vault, start background upkeep, serve HTTP until
//! SIGINT or SIGTERM, then let requests in flight finish.

use std::sync::Arc;
use std::time::Duration;

use anyhow::Context;
use llooma_api::{ApiConfig, AppState, Passwords, ThrottleConfig};
use llooma_core::{App, AppParts};
use llooma_store::Store;
use tokio::net::TcpListener;
use tower_http::trace::TraceLayer;

use crate::http::{BodyPace, ConnectionLimits, connection_cap, raise_open_files_limit, serve_http};
use crate::settings::Settings;

/// The span of one request: tower-http's default (same name, level, fields and target, so
/// `LLOOMA_LOG=tower_http=debug` still shows it), except that `uri` never holds a credential
/// someone put in an address (`?token=…`, `?api_key=…`, a registration link's `address` with a
/// key or a password in it): those values are written `[redacted]`, the path stays.
fn request_span<B>(request: &axum::http::Request<B>) -> tracing::Span {
    let uri = request.uri();
    tracing::debug_span!(
        target: "tower_http::trace::make_span",
        "request",
        method = %request.method(),
        uri = %llooma_web::server::loggable_target(uri.path(), uri.query()),
        version = ?request.version(),
    )
}

/// How often expired sessions and old login failures are cleared.
const UPKEEP_EVERY: Duration = Duration::from_secs(600);

/// How often new messages are moved into SQLite's full-text index (a search does it first
/// anyway; this keeps the batch a search waits for small).
const SEARCH_INDEX_EVERY: Duration = Duration::from_secs(10);

pub async fn serve(settings: Settings) -> anyhow::Result<()> {
    // First, so the database pool and everything after it may use the raised limit too.
    let open_files = raise_open_files_limit();
    // A malformed allow-list stops start-up rather than silently reaching less (or more).
    let outbound = Arc::new(settings.outbound_policy().context("the outbound network settings")?);
    // A catalogue file with a mistake stops start-up with its line rather than hiding entries.
    let catalogue_file = settings.mcp_catalogue()?;
    let store = crate::open_store(&settings).await?;
    let vault = crate::secret::open_vault(&settings, &store).await?;
    for (address, label) in llooma_api::catalogue_overlaps(&store, &catalogue_file).await? {
        tracing::warn!(
            %address,
            admin_entry = %label,
            "the MCP catalogue file and an administrator's entry list the same server: Discover \
             shows both; remove the administrator's entry (Admin → Catalogue) or the file's"
        );
    }
    let config = ApiConfig {
        public_origin: settings.public_origin(),
        secure_cookies: settings.secure_cookies(),
        session_idle: settings.session_idle(),
        session_absolute: settings.session_absolute(),
        throttle: ThrottleConfig {
            window: Duration::from_secs(settings.login_window_secs),
            max_failures_per_account: settings.login_max_failures_per_account,
            max_failures_per_address: settings.login_max_failures_per_address,
        },
        trust_forwarded_for: settings.trust_forwarded_for,
        catalogue_file: Arc::from(catalogue_file),
        ..ApiConfig::default()
    };
    let connection_idle = Duration::from_secs(settings.outbound_idle_secs);
    let mcp_config = llooma_mcp_client::McpConfig {
        call_timeout: Duration::from_secs(settings.mcp_call_timeout_secs),
        max_task_duration: Duration::from_secs(settings.mcp_task_max_secs),
        connection_idle_timeout: connection_idle,
        ..llooma_mcp_client::McpConfig::default()
    };
    let mcp = llooma_mcp_client::McpClient::new(outbound.clone(), mcp_config)
        .context("setting up the MCP client")?;
    let (stop_tx, stop_rx) = tokio::sync::watch::channel(false);
    let replica_id = uuid::Uuid::new_v4().to_string();
    let broker_config = llooma_approval_broker::BrokerConfig {
        // One process owns an SQLite file, so anything left pending belongs to a dead past life.
        sole_replica: store.engine() == llooma_store::Engine::Sqlite,
        answer_window: Duration::from_secs(settings.approval_window_secs),
        ..llooma_approval_broker::BrokerConfig::new(replica_id.clone())
    };
    let broker = llooma_approval_broker::Broker::start(
        store.clone(),
        Arc::new(llooma_approval_broker::SystemClock),
        broker_config,
    )
    .await
    .context("starting the approval broker")?;
    tracing::info!(%replica_id, "approval broker started");
    let app = App::new(AppParts {
        store: store.clone(),
        broker: broker.clone(),
        mcp,
        vault: Arc::new(vault),
        outbound,
        connection_idle,
        file_limits: llooma_core::files::FileLimits {
            max_upload_bytes: settings.max_upload_mb * 1024 * 1024,
            account_quota_bytes: settings.account_files_mb.saturating_mul(1024 * 1024),
        },
        speech_limits: llooma_core::speech::SpeechLimits {
            timeout: Duration::from_secs(settings.speech_timeout_secs),
        },
        upload_spill_dir: settings.data_dir.join("uploads"),
        replica_id,
        tool_list_min_fresh: Duration::from_secs(settings.tool_list_min_fresh_secs),
        stopping: stop_rx,
    })
    .context("setting up page reading")?;
    if store.engine() == llooma_store::Engine::Sqlite {
        // The only process of an SQLite instance: turns it was running died with it.
        let failed = app.fail_turns_of_previous_run().await?;
        if failed > 0 {
            tracing::warn!(failed, "marked turns of the previous run as failed");
        }
    }
    let upkeep = tokio::spawn(upkeep(store.clone(), settings.clone()));
    // Only SQLite indexes new messages behind the turn; Postgres indexes as it writes.
    let search_index = (store.engine() == llooma_store::Engine::Sqlite)
        .then(|| tokio::spawn(index_messages(store.clone())));
    // With Postgres other replicas may crash while running a turn; SQLite's were ended above.
    let orphans = (store.engine() == llooma_store::Engine::Postgres)
        .then(|| tokio::spawn(app.clone().end_orphaned_turns()));
    let watcher = (settings.mcp_watch_secs > 0).then(|| {
        tokio::spawn(llooma_core::mcp_watch::watch_list_changes(
            app.clone(),
            Duration::from_secs(settings.mcp_watch_secs),
        ))
    });
    let bots = (settings.bot_poll_secs > 0)
        .then(|| app.start_bots(Duration::from_secs(settings.bot_poll_secs)));
    let state = AppState {
        app: Arc::new(app),
        passwords: Passwords::new(settings.password_hash_concurrency),
        config: Arc::new(config),
        live_sessions: llooma_api::LiveSessions::default(),
    };
    let api = llooma_api::router(state);
    let client = web_client(&settings);
    let app = api
        .clone()
        .merge(llooma_web::server::router(api, client))
        // Requests must name this instance, whatever page or endpoint (DNS rebinding).
        .layer(axum::middleware::from_fn_with_state(
            llooma_api::HostRule::new(settings.public_origin().as_deref(), settings.listen.ip()),
            llooma_api::check_host,
        ))
        .layer(TraceLayer::new_for_http().make_span_with(request_span));

    let limits = ConnectionLimits {
        header_read: settings.header_read_timeout(),
        keep_alive: settings.keep_alive_timeout(),
        body: BodyPace {
            grace: Duration::from_secs(settings.request_body_timeout_secs),
            min_rate: settings.request_body_min_rate,
        },
        write: Duration::from_secs(settings.response_write_timeout_secs),
        cap: connection_cap(open_files, settings.max_connections),
    };
    tracing::info!(
        max_connections = limits.cap,
        header_read_timeout_secs = settings.header_read_timeout_secs,
        keep_alive_timeout_secs = settings.keep_alive_timeout_secs,
        "connection limits"
    );
    let listener = TcpListener::bind(settings.listen)
        .await
        .with_context(|| format!("listening on {}", settings.listen))?;
    let address = listener.local_addr().context("reading the bound address")?;
    tracing::info!(database = ?store.engine(), "listening on http://{address}");

    let grace = Duration::from_secs(settings.shutdown_grace_secs);
    serve_http(listener, app, limits, async move {
        shutdown_signal().await;
        // Event streams end now; requests in flight are let finish.
        let _ = stop_tx.send(true);
    })
    .await;
    upkeep.abort();
    if let Some(search_index) = search_index {
        search_index.abort();
    }
    if let Some(orphans) = orphans {
        orphans.abort();
    }
    if let Some(watcher) = watcher {
        watcher.abort();
    }
    // Pollers end and give their leases back, so another replica takes over at once.
    if let Some(bots) = bots {
        let _ = tokio::time::timeout(grace, bots).await;
    }
    // Questions this process was waiting on can no longer be answered here: say so to every tab.
    if let Err(err) = broker.shutdown().await {
        tracing::warn!(error = %err, "closing the approval broker failed");
    }
    tracing::info!("stopped accepting connections; closing the database");
    let _ = tokio::time::timeout(grace, store.close()).await;
    tracing::info!("shut down");
    Ok(())
}

/// The web interface's browser part: from `web_dir`, else beside the binary's target folder.
/// Missing, the server still runs (the API, and pages that say how to build it).
fn web_client(settings: &Settings) -> Option<llooma_web::server::ClientFiles> {
    let dir = settings.web_dir.clone().or_else(llooma_web::server::ClientFiles::default_dir)?;
    match llooma_web::server::ClientFiles::load(&dir) {
        Ok(files) => {
            tracing::info!(dir = %dir.display(), "serving the web interface");
            Some(files)
        }
        Err(why) => {
            tracing::warn!("{why}");
            None
        }
    }
}

async fn upkeep(store: Store, settings: Settings) {
    let idle_ms = i64::try_from(settings.session_idle().as_millis()).unwrap_or(i64::MAX);
    let window_ms =
        i64::try_from(settings.login_window_secs.saturating_mul(1000)).unwrap_or(i64::MAX);
    let mut tick = tokio::time::interval(UPKEEP_EVERY);
    loop {
        tick.tick().await;
        let now = llooma_store::now_ms();
        if let Err(err) = store.purge_expired_sessions(now, idle_ms).await {
            tracing::warn!(error = %err, "clearing expired sessions failed");
        }
        if let Err(err) = store.purge_login_failures(now - window_ms).await {
            tracing::warn!(error = %err, "clearing old login failures failed");
        }
        // The bot guard rails look back one hour; two keep a margin.
        if let Err(err) = store.purge_bot_activations(now - 2 * 3_600_000).await {
            tracing::warn!(error = %err, "clearing old bot activations failed");
        }
        // Attached in a composer and never sent: gone after a day.
        if let Err(err) = store.purge_unsent_files(now - llooma_store::UNSENT_FILES_KEPT_MS).await {
            tracing::warn!(error = %err, "clearing files never sent failed");
        }
    }
}

async fn index_messages(store: Store) {
    let mut tick = tokio::time::interval(SEARCH_INDEX_EVERY);
    loop {
        tick.tick().await;
        if let Err(err) = store.index_pending_messages().await {
            tracing::warn!(error = %err, "indexing new messages for search failed");
        }
    }
}

async fn shutdown_signal() {
    let interrupt = async {
        let _ = tokio::signal::ctrl_c().await;
    };
    #[cfg(unix)]
    let terminate = async {
        match tokio::signal::unix::signal(tokio::signal::unix::SignalKind::terminate()) {
            Ok(mut signal) => {
                signal.recv().await;
            }
            Err(err) => {
                tracing::warn!(error = %err, "cannot listen for SIGTERM");
                std::future::pending::<()>().await;
            }
        }
    };
    #[cfg(not(unix))]
    let terminate = std::future::pending::<()>();
    tokio::select! {
        () = interrupt => tracing::info!("SIGINT received; shutting down"),
        () = terminate => tracing::info!("SIGTERM received; shutting down"),
    }
}
