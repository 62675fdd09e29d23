//! The sessions [`crate::McpClient::call_tool`] keeps between calls: one handshake serves the
//! calls of a turn and of the turns that follow for a while, instead of one per call.
//!
//! - A session is only ever reused for the same key: the caller's name for the server (Llooma
//!   passes the server's id, which belongs to one account, so two people never share one), its
//!   address, and the SHA-256 of the token (or none). A changed token or address never finds
//!   the old session.
//! - A call holds its session alone ([`Lease`]) and gives it back only if the call ended
//!   cleanly (an answer, or a JSON-RPC error from the server). A session whose call failed
//!   otherwise, was abandoned (the future dropped) or timed out is closed, never reused.
//! - At most [`McpConfig::max_idle_sessions`] wait in the pool, at most
//!   [`McpConfig::max_idle_sessions_per_server`] per key; one idle for
//!   [`McpConfig::session_idle_timeout`] is closed (by a task that lives while the pool holds
//!   sessions).
//! - [`Pool::forget`] closes a server's idle sessions, and those in use when it was called are
//!   closed when their call ends instead of being given back.
//! - Only the MCP session (its id, the handshake) is kept: the HTTP client does not keep idle
//!   connections (see `McpClient::new`), so every request still connects and is checked against
//!   the outbound policy afresh.
//!
//! [`McpConfig::max_idle_sessions`]: crate::McpConfig::max_idle_sessions
//! [`McpConfig::max_idle_sessions_per_server`]: crate::McpConfig::max_idle_sessions_per_server
//! [`McpConfig::session_idle_timeout`]: crate::McpConfig::session_idle_timeout

use std::collections::HashMap;
use std::sync::{Arc, Mutex, MutexGuard, PoisonError, Weak};
use std::time::Duration;

use llooma_vault::Secret;
use sha2::{Digest, Sha256};
use tokio::time::Instant;

use crate::config::McpConfig;
use crate::session::McpSession;

/// Which sessions a call may reuse.
#[derive(Clone, PartialEq, Eq, Hash)]
pub(crate) struct Key {
    /// The caller's name for the server ("" for [`crate::McpClient::call_tool`]).
    scope: String,
    url: String,
    token: Option<[u8; 32]>,
}

impl std::fmt::Debug for Key {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        // The address may carry a credential in its query; the token is only a digest.
        f.debug_struct("Key")
            .field("scope", &self.scope)
            .field("url", &crate::session::redact(&self.url))
            .field("token", &self.token.map(|_| "[sha-256]"))
            .finish()
    }
}

impl Key {
    pub(crate) fn new(scope: &str, url: &str, token: Option<&Secret>) -> Self {
        Self {
            scope: scope.to_owned(),
            url: url.to_owned(),
            token: token.map(|t| Sha256::digest(t.expose().as_bytes()).into()),
        }
    }

    fn named(&self, server: &str) -> bool {
        self.url == server || (!self.scope.is_empty() && self.scope == server)
    }
}

struct Idle {
    session: McpSession,
    since: Instant,
}

#[derive(Default)]
struct State {
    idle: HashMap<Key, Vec<Idle>>,
    /// Sessions in `idle`, all keys together.
    count: usize,
    /// Goes up with each `forget`.
    epoch: u64,
    /// The epoch of the last `forget` of each name, so a session leased before it is not
    /// given back. Cleared when it grows large; `floor` then stands for every entry.
    forgotten: HashMap<String, u64>,
    floor: u64,
    /// Whether the task that closes expired sessions is running.
    reaper: bool,
}

impl State {
    fn forgotten_since(&self, key: &Key, epoch: u64) -> bool {
        let after = |name: &str| self.forgotten.get(name).is_some_and(|at| *at > epoch);
        epoch < self.floor || after(&key.url) || (!key.scope.is_empty() && after(&key.scope))
    }

    /// Takes out every session idle for `timeout` or longer.
    fn expire(&mut self, now: Instant, timeout: Duration, out: &mut Vec<McpSession>) {
        let before = out.len();
        self.idle.retain(|_, sessions| {
            let expired = |i: &mut Idle| now.duration_since(i.since) >= timeout;
            out.extend(sessions.extract_if(.., expired).map(|i| i.session));
            !sessions.is_empty()
        });
        self.count -= out.len() - before;
    }

    fn oldest(&self) -> Option<(Key, Instant)> {
        self.idle
            .iter()
            .filter_map(|(key, sessions)| sessions.first().map(|i| (key, i.since)))
            .min_by_key(|(_, since)| *since)
            .map(|(key, since)| (key.clone(), since))
    }
}

/// The idle sessions of one [`crate::McpClient`] and its clones.
pub(crate) struct Pool {
    state: Mutex<State>,
    idle_timeout: Duration,
    max_idle: usize,
    max_per_key: usize,
}

impl std::fmt::Debug for Pool {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Pool")
            .field("idle", &self.lock().count)
            .field("idle_timeout", &self.idle_timeout)
            .finish_non_exhaustive()
    }
}

/// The right to lease a session the caller connects itself (nothing idle was found).
pub(crate) struct Ticket {
    pool: Arc<Pool>,
    key: Key,
    epoch: u64,
}

impl Ticket {
    pub(crate) fn lease(self, session: McpSession) -> Lease {
        Lease { ticket: self, session: Some(session), reused: false }
    }
}

/// A session taken from the pool or newly connected, held by one call. Dropped without
/// [`Lease::give_back`] (a failed or abandoned call), its session is closed.
pub(crate) struct Lease {
    ticket: Ticket,
    /// Present until given back or dropped.
    session: Option<McpSession>,
    /// Whether the session served an earlier call (a failure may then be its staleness).
    pub(crate) reused: bool,
}

impl Pool {
    pub(crate) fn new(config: &McpConfig) -> Self {
        Self {
            state: Mutex::new(State::default()),
            idle_timeout: config.session_idle_timeout,
            max_idle: config.max_idle_sessions,
            max_per_key: config.max_idle_sessions_per_server,
        }
    }

    fn lock(&self) -> MutexGuard<'_, State> {
        self.state.lock().unwrap_or_else(PoisonError::into_inner)
    }

    /// An idle session for `key`, the most recently used first, or a [`Ticket`] to make a
    /// lease of a session the caller connects (the lease then counts from now: a `forget`
    /// while it connects is not missed).
    pub(crate) fn take(self: &Arc<Self>, key: Key) -> Result<Lease, Ticket> {
        let mut stale = Vec::new();
        let now = Instant::now();
        let (found, epoch) = {
            let mut state = self.lock();
            let mut found = None;
            if let Some(sessions) = state.idle.get_mut(&key) {
                while let Some(idle) = sessions.pop() {
                    if now.duration_since(idle.since) < self.idle_timeout && idle.session.is_alive()
                    {
                        found = Some(idle.session);
                        break;
                    }
                    stale.push(idle.session);
                }
                let taken = stale.len() + usize::from(found.is_some());
                if sessions.is_empty() {
                    state.idle.remove(&key);
                }
                state.count -= taken;
            }
            (found, state.epoch)
        };
        close_all(stale);
        let ticket = Ticket { pool: Arc::clone(self), key, epoch };
        match found {
            Some(session) => Ok(Lease { ticket, session: Some(session), reused: true }),
            None => Err(ticket),
        }
    }

    /// A ticket for a session the caller connects, leaving idle ones where they are.
    pub(crate) fn ticket(self: &Arc<Self>, key: Key) -> Ticket {
        Ticket { pool: Arc::clone(self), key, epoch: self.lock().epoch }
    }

    /// Closes the idle sessions opened for `server` (a name given to `call_tool_for`, or an
    /// address), and marks those in use now so they are closed when their call ends.
    pub(crate) fn forget(&self, server: &str) {
        let mut closing = Vec::new();
        {
            let mut state = self.lock();
            state.epoch += 1;
            let epoch = state.epoch;
            if state.forgotten.len() >= 1024 {
                state.forgotten.clear();
                state.floor = epoch;
            }
            state.forgotten.insert(server.to_owned(), epoch);
            state.idle.retain(|key, sessions| {
                if key.named(server) {
                    closing.extend(sessions.drain(..).map(|i| i.session));
                    false
                } else {
                    true
                }
            });
            state.count -= closing.len();
        }
        close_all(closing);
    }

    fn give_back(self: &Arc<Self>, key: Key, epoch: u64, session: McpSession) {
        if !session.is_alive() || self.max_idle == 0 || self.max_per_key == 0 {
            close_all(vec![session]);
            return;
        }
        let mut closing = Vec::new();
        let start_reaper = {
            let mut state = self.lock();
            let now = Instant::now();
            if state.forgotten_since(&key, epoch) {
                closing.push(session);
            } else {
                state.expire(now, self.idle_timeout, &mut closing);
                let per_key = state.idle.get(&key).map_or(0, Vec::len);
                if per_key >= self.max_per_key {
                    // The key's oldest makes room.
                    if let Some(sessions) = state.idle.get_mut(&key) {
                        closing.push(sessions.remove(0).session);
                        state.count -= 1;
                    }
                } else if state.count >= self.max_idle
                    && let Some((oldest, _)) = state.oldest()
                    && let Some(sessions) = state.idle.get_mut(&oldest)
                {
                    // The pool's oldest makes room.
                    closing.push(sessions.remove(0).session);
                    if sessions.is_empty() {
                        state.idle.remove(&oldest);
                    }
                    state.count -= 1;
                }
                state.idle.entry(key).or_default().push(Idle { session, since: now });
                state.count += 1;
            }
            let start = state.count > 0 && !state.reaper;
            if start {
                state.reaper = true;
            }
            start
        };
        close_all(closing);
        if start_reaper {
            self.start_reaper();
        }
    }

    /// Closes idle sessions as they expire; ends once the pool is empty (the next one given
    /// back starts it again) or the client is gone.
    fn start_reaper(self: &Arc<Self>) {
        let Ok(runtime) = tokio::runtime::Handle::try_current() else {
            // Without a runtime nothing can be closed in the background; `take` and
            // `give_back` still skip and close expired sessions.
            self.lock().reaper = false;
            return;
        };
        let pool: Weak<Self> = Arc::downgrade(self);
        runtime.spawn(async move {
            loop {
                let wake = {
                    let Some(pool) = pool.upgrade() else { return };
                    let mut closing = Vec::new();
                    let next = {
                        let mut state = pool.lock();
                        state.expire(Instant::now(), pool.idle_timeout, &mut closing);
                        match state.oldest() {
                            Some((_, since)) => Some(since + pool.idle_timeout),
                            None => {
                                state.reaper = false;
                                None
                            }
                        }
                    };
                    close_all(closing);
                    next
                };
                let Some(wake) = wake else { return };
                tokio::time::sleep_until(wake).await;
            }
        });
    }

    #[cfg(test)]
    fn idle_count(&self) -> usize {
        self.lock().count
    }
}

impl Lease {
    /// The session.
    pub(crate) fn session(&self) -> Option<&McpSession> {
        self.session.as_ref()
    }

    /// The call ended cleanly: the session may serve another.
    pub(crate) fn give_back(mut self) {
        if let Some(session) = self.session.take() {
            let Ticket { pool, key, epoch } = &self.ticket;
            pool.give_back(key.clone(), *epoch, session);
        }
    }
}

impl Drop for Lease {
    fn drop(&mut self) {
        if let Some(session) = self.session.take() {
            close_all(vec![session]);
        }
    }
}

/// Closes sessions in the background (after any cancellation they still have to send), each
/// within 10 s; without a runtime they are just dropped, which ends them too.
fn close_all(sessions: Vec<McpSession>) {
    if sessions.is_empty() {
        return;
    }
    match tokio::runtime::Handle::try_current() {
        Ok(runtime) => {
            for session in sessions {
                runtime.spawn(async move {
                    let _ = tokio::time::timeout(Duration::from_secs(10), session.close()).await;
                });
            }
        }
        Err(_) => drop(sessions),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_changed_token_scope_or_address_is_another_key() {
        let a = Secret::new("a");
        let base = Key::new("server-1", "http://h/mcp", Some(&a));
        assert_eq!(base, Key::new("server-1", "http://h/mcp", Some(&Secret::new("a"))));
        for other in [
            Key::new("server-1", "http://h/mcp", Some(&Secret::new("b"))),
            Key::new("server-1", "http://h/mcp", None),
            Key::new("server-2", "http://h/mcp", Some(&a)),
            Key::new("server-1", "http://h/other", Some(&a)),
        ] {
            assert_ne!(base, other);
        }
        // Neither the token nor a key in the address's query is shown.
        let shown = format!("{:?}", Key::new("s", "http://h/mcp?key=sekrit", Some(&a)));
        assert!(!shown.contains("sekrit") && shown.contains("[sha-256]"), "{shown}");
    }

    #[test]
    fn a_key_is_named_by_its_scope_or_its_address() {
        let key = Key::new("server-1", "http://h/mcp", None);
        assert!(key.named("server-1"));
        assert!(key.named("http://h/mcp"));
        assert!(!key.named("server-2"));
        // An unnamed key is never forgotten by the empty name.
        assert!(!Key::new("", "http://h/mcp", None).named(""));
    }

    #[test]
    fn a_lease_taken_before_a_forget_is_not_given_back() {
        let pool = Arc::new(Pool::new(&McpConfig::default()));
        let key = Key::new("s", "http://h/mcp", None);
        let Err(ticket) = pool.take(key.clone()) else { panic!("the pool is empty") };
        pool.forget("s");
        let state = pool.lock();
        assert!(state.forgotten_since(&key, ticket.epoch));
        assert!(!state.forgotten_since(&key, state.epoch));
        assert!(!state.forgotten_since(&Key::new("t", "http://h/other", None), ticket.epoch));
        drop(state);
        assert_eq!(pool.idle_count(), 0);
    }
}
