//! Watching MCP servers for `tools/list_changed`, so a card can say "this server reports new
//! tools" without anyone pressing Update tools.
//!
//! A sweep (every `every`) looks at every active server whose snapshot says it reports tool-list
//! changes and whose snapshot is not already marked stale, and keeps one session open to each.
//! When a server announces a change, its snapshot is marked stale and that watch ends; Update
//! tools clears the mark and the next sweep watches again. A server that cannot be reached is left
//! alone for a while instead of being retried every sweep. Watches of servers that were removed,
//! switched off or suspended are dropped (which closes their session).
//!
//! Every replica watches; marking stale is idempotent, so two replicas only cost a connection.

use std::collections::HashMap;
use std::time::{Duration, Instant};

use llooma_vault::SecretContext;
use tokio::task::JoinHandle;

use crate::App;

/// How long a server that could not be watched is left alone.
const BACKOFF: Duration = Duration::from_secs(300);

struct Watch {
    task: JoinHandle<bool>,
}

/// Runs until the server stops.
pub async fn watch_list_changes(state: App, every: Duration) {
    let mut watches: HashMap<String, Watch> = HashMap::new();
    let mut resting: HashMap<String, Instant> = HashMap::new();
    let mut stopping = state.stopping.clone();
    loop {
        sweep(&state, &mut watches, &mut resting).await;
        tokio::select! {
            () = tokio::time::sleep(every) => {}
            _ = stopping.wait_for(|stop| *stop) => break,
        }
    }
    for (_, watch) in watches.drain() {
        watch.task.abort();
    }
}

async fn sweep(
    state: &App,
    watches: &mut HashMap<String, Watch>,
    resting: &mut HashMap<String, Instant>,
) {
    let servers = match state.store.admin_list_mcp_servers().await {
        Ok(servers) => servers,
        Err(err) => {
            tracing::warn!(error = %err, "listing MCP servers to watch failed");
            return;
        }
    };
    // Finished watches: a change was seen (nothing to do) or the connection failed (rest).
    let finished: Vec<String> =
        watches.iter().filter(|(_, w)| w.task.is_finished()).map(|(id, _)| id.clone()).collect();
    for id in finished {
        if let Some(watch) = watches.remove(&id)
            && let Ok(false) = watch.task.await
        {
            resting.insert(id, Instant::now() + BACKOFF);
        }
    }
    let now = Instant::now();
    resting.retain(|_, until| *until > now);

    let mut eligible = std::collections::HashSet::new();
    for (server, _) in servers {
        let reports_changes = crate::mcp_servers::parse_snapshot(state, &server)
            .is_ok_and(|s| s.server.tools_list_changed);
        if !server.is_active() || server.snapshot_stale || !reports_changes {
            continue;
        }
        eligible.insert(server.id.clone());
        if watches.contains_key(&server.id) || resting.contains_key(&server.id) {
            continue;
        }
        let token = match server.token_ciphertext.as_deref() {
            Some(stored) => match state
                .vault
                .decrypt(SecretContext::new("mcp_servers", "token_ciphertext", &server.id), stored)
            {
                Ok(token) => Some(token),
                Err(err) => {
                    tracing::warn!(server = %server.id, error = %err, "cannot decrypt an MCP token to watch its server");
                    continue;
                }
            },
            None => None,
        };
        let (mcp, store, id, address) =
            (state.mcp.clone(), state.store.clone(), server.id.clone(), server.address.clone());
        let task = tokio::spawn(async move {
            let session = match mcp.connect(&address, token.as_ref()).await {
                Ok(session) => session,
                Err(err) => {
                    tracing::debug!(server = %id, error = %err, "watching an MCP server failed");
                    return false;
                }
            };
            let mut changes = session.tool_list_changes().await;
            changes.borrow_and_update();
            let changed = changes.changed().await.is_ok();
            session.close().await;
            if changed {
                tracing::info!(server = %id, "MCP server reports new tools; its snapshot is marked stale");
                if let Err(err) = store.mark_mcp_snapshot_stale(&id).await {
                    tracing::warn!(server = %id, error = %err, "marking a snapshot stale failed");
                }
                true
            } else {
                false
            }
        });
        watches.insert(server.id.clone(), Watch { task });
    }
    // Removed, switched off, suspended or already stale: stop watching.
    watches.retain(|id, watch| {
        let keep = eligible.contains(id);
        if !keep {
            watch.task.abort();
        }
        keep
    });
}
