//! Per-principal and per-client upstream sessions. A source whose session
//! scope is `principal` or `client` gives each principal (or each downstream
//! client) its own upstream session: a run-scoped lease of the source's
//! plugin (wf-plugin-api 1.1 `open_lease`), opened on first use, closed after
//! `session_idle_ms` without calls, when its client goes away, or when its
//! handle is closed. `max_sessions` bounds how many a source holds at once.
//! `shared` sources never come here: every call uses the source's one
//! persistent session, as before.
//!
//! Handles serve stateless (2026-07-28) clients, which have no protocol
//! session: a handle is an unguessable string bound to the principal that
//! opened it; calls that carry it in `_meta` share one session per source.

use std::collections::{BTreeMap, HashMap};
use std::sync::PoisonError;
use std::sync::atomic::{AtomicBool, AtomicU64, AtomicUsize, Ordering};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use serde_json::{Value, json};
use tokio_util::sync::CancellationToken;
use wf_plugin_api::{SessionInfo, SourceRequest};

use super::call::CallCtx;
use super::handle::SourceHandle;
use crate::config::{SessionScope, SourceConfig};

/// Who a call is for, as far as sessions care. Set by the MCP front for the
/// duration of a call ([`with_caller`]), so host-local tools (the planner's
/// `call_capability`, workflow runs) use the caller's sessions too.
#[derive(Debug, Clone)]
pub struct SessionCaller {
    pub principal: String,
    /// The downstream client (a connection's id or a handle's label); None:
    /// a stateless client without a handle, which uses its principal's session.
    pub client: Option<String>,
    /// Cancelled when a connection client goes away (None for handles).
    pub gone: Option<CancellationToken>,
    /// Served over HTTP (decides the default scope of a stateful-looking source).
    pub http: bool,
    /// Scopes pinned per source by the endpoint the call came through.
    pub scopes: Option<Arc<BTreeMap<String, SessionScope>>>,
}

tokio::task_local! {
    static CALLER: SessionCaller;
}

/// Runs `fut` with `caller` as the current caller.
pub async fn with_caller<F: std::future::Future>(caller: SessionCaller, fut: F) -> F::Output {
    CALLER.scope(caller, fut).await
}

/// The caller of the call being served, if any.
pub fn current_caller() -> Option<SessionCaller> {
    CALLER.try_with(SessionCaller::clone).ok()
}

/// The session keys of one source, as configured.
#[derive(Debug, Clone, Copy, Default)]
struct Configured {
    scope: Option<SessionScope>,
    idle_ms: Option<u64>,
    max: Option<usize>,
    /// The source names a server that keeps state per client (a browser).
    looks_stateful: bool,
}

/// Unused sessions are closed after this long unless the source says otherwise.
pub const DEFAULT_IDLE_MS: u64 = 10 * 60 * 1000;
/// Per-principal or per-client sessions a source holds at once by default.
pub const DEFAULT_MAX_SESSIONS: usize = 64;
/// Open handles per principal.
pub const MAX_HANDLES_PER_PRINCIPAL: usize = 256;
/// The `_meta` key a call carries its handle in.
pub const HANDLE_META_KEY: &str = "wf/session";

/// How one source's calls are given sessions.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Policy {
    pub scope: SessionScope,
    pub idle: Duration,
    pub max: usize,
}

impl Policy {
    /// The source's configured policy. An unset scope is `shared`, over
    /// stdio and HTTP alike, except over HTTP for a source that names a
    /// browser automation server (`config::sizing::looks_stateful`), which
    /// is `client`. wf cannot tell whether an upstream keeps state per
    /// client, and one upstream process per client costs tens of MB per
    /// connected client for every stateless server; so isolation is the
    /// default only where the source says what it is, and the operator sets
    /// `session` for any other stateful upstream.
    fn resolve(config: Configured, http: bool) -> Self {
        let default = if http && config.looks_stateful {
            SessionScope::Client
        } else {
            SessionScope::Shared
        };
        Self {
            scope: config.scope.unwrap_or(default),
            idle: Duration::from_millis(config.idle_ms.unwrap_or(DEFAULT_IDLE_MS)),
            max: config.max.unwrap_or(DEFAULT_MAX_SESSIONS),
        }
    }
}

/// Whose session a call uses: `client` None is the principal's own.
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
pub struct SessionKey {
    pub source: String,
    pub principal: String,
    pub client: Option<String>,
}

#[derive(Debug, thiserror::Error)]
pub enum SessionError {
    #[error(
        "source {name:?} has {max} sessions open (max_sessions = {max}); close one \
         (wf_session__close, or disconnect a client) or wait until an idle one is closed"
    )]
    Full { name: String, max: usize },
    #[error("cannot open a session on source {name:?}: {message}")]
    Open { name: String, message: String },
    #[error("unknown session handle: open one with wf_session__open")]
    UnknownHandle,
    #[error("this session handle belongs to another principal")]
    OtherPrincipal,
    #[error(
        "principal {0:?} has {MAX_HANDLES_PER_PRINCIPAL} session handles open; close one with wf_session__close"
    )]
    TooManyHandles(String),
}

struct Opened {
    lease: String,
    epoch: u64,
    at: Instant,
}

/// One per-principal or per-client session of a source.
struct Slot {
    key: SessionKey,
    scope: SessionScope,
    /// The source instance the lease lives on (a reload may replace it).
    handle: Arc<SourceHandle>,
    opened: tokio::sync::OnceCell<Opened>,
    last_used: Mutex<Instant>,
    in_flight: AtomicUsize,
    closed: AtomicBool,
    /// Ends the slot's watcher (handle closed, source replaced).
    stop: CancellationToken,
}

impl Slot {
    fn touch(&self) {
        *self
            .last_used
            .lock()
            .unwrap_or_else(PoisonError::into_inner) = Instant::now();
    }
    fn idle_for(&self) -> Duration {
        self.last_used
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .elapsed()
    }
}

/// A call's use of a session: the lease to name in the call's scope. The
/// session counts the call as in flight until this is dropped.
pub struct SessionUse {
    slot: Arc<Slot>,
    lease: String,
}

impl SessionUse {
    pub fn lease(&self) -> &str {
        &self.lease
    }
    /// The call info keys for this session: `scope.lease`, and `client`.
    pub fn annotate(&self, info: &mut Value) {
        if let Some(o) = info.as_object_mut() {
            o.insert("scope".into(), json!({"lease": self.lease}));
            if let Some(c) = &self.slot.key.client {
                o.insert("client".into(), json!(c));
            }
        }
    }
}

impl Drop for SessionUse {
    fn drop(&mut self) {
        self.slot.touch();
        self.slot.in_flight.fetch_sub(1, Ordering::AcqRel);
    }
}

struct HandleEntry {
    principal: String,
    /// What admin output and the session key call it (never the secret).
    label: String,
}

/// Every per-principal and per-client session, and the open handles.
#[derive(Default)]
pub struct SessionTable {
    configured: std::sync::RwLock<HashMap<String, Configured>>,
    slots: Mutex<HashMap<SessionKey, Arc<Slot>>>,
    handles: Mutex<HashMap<String, HandleEntry>>,
    next_handle: AtomicU64,
}

impl SessionTable {
    pub fn new() -> Arc<Self> {
        Arc::default()
    }

    /// Takes the sources' session keys (at start and on each reload).
    pub fn configure(&self, sources: &std::collections::BTreeMap<String, SourceConfig>) {
        *self
            .configured
            .write()
            .unwrap_or_else(PoisonError::into_inner) = sources
            .iter()
            .map(|(name, sc)| {
                let c = Configured {
                    scope: sc.session,
                    idle_ms: sc.session_idle_ms,
                    max: sc.max_sessions,
                    looks_stateful: crate::config::sizing::looks_stateful(sc),
                };
                (name.clone(), c)
            })
            .collect();
    }

    /// The session policy of a source, for a caller over HTTP or stdio.
    pub fn policy(&self, source: &str, http: bool) -> Policy {
        let c = self
            .configured
            .read()
            .unwrap_or_else(PoisonError::into_inner)
            .get(source)
            .copied()
            .unwrap_or_default();
        Policy::resolve(c, http)
    }

    /// The session `caller`'s call on `handle`'s source uses: None when the
    /// source is `shared`.
    pub async fn session_for(
        self: &Arc<Self>,
        caller: &SessionCaller,
        handle: &Arc<SourceHandle>,
    ) -> Result<Option<SessionUse>, SessionError> {
        let mut policy = self.policy(&handle.name, caller.http);
        if let Some(pinned) = caller.scopes.as_ref().and_then(|s| s.get(&handle.name)) {
            policy.scope = *pinned;
        }
        let (client, gone) = match policy.scope {
            SessionScope::Shared => return Ok(None),
            SessionScope::Principal => (None, None),
            SessionScope::Client => (caller.client.clone(), caller.gone.clone()),
        };
        let key = SessionKey {
            source: handle.name.clone(),
            principal: caller.principal.clone(),
            client,
        };
        self.acquire(key, policy, handle.clone(), gone)
            .await
            .map(Some)
    }

    /// The session for `key` on `handle`'s source, opened if there is none.
    /// `client_gone` ends a client's session with its client.
    pub async fn acquire(
        self: &Arc<Self>,
        key: SessionKey,
        policy: Policy,
        handle: Arc<SourceHandle>,
        client_gone: Option<CancellationToken>,
    ) -> Result<SessionUse, SessionError> {
        let slot = self.slot(&key, policy, &handle)?;
        // Counted before it opens, so the watcher never closes it mid-call.
        slot.in_flight.fetch_add(1, Ordering::AcqRel);
        let mut fresh = false;
        let opened = slot
            .opened
            .get_or_try_init(|| async {
                fresh = true;
                open_lease(&handle).await
            })
            .await;
        let lease = match opened {
            Ok(o) => o.lease.clone(),
            Err(message) => {
                slot.in_flight.fetch_sub(1, Ordering::AcqRel);
                self.forget(&slot);
                return Err(SessionError::Open {
                    name: key.source,
                    message,
                });
            }
        };
        if fresh {
            tracing::info!(source = %key.source, principal = %key.principal, client = ?key.client, %lease, "session opened");
            tokio::spawn(self.clone().watch(slot.clone(), policy.idle, client_gone));
        }
        Ok(SessionUse { slot, lease })
    }

    /// The open sessions acting for `caller` on `source`, as leases: its own
    /// (`client` scope) and its principal's (`principal` scope). Opens none.
    pub fn leases_acting_for(&self, caller: &SessionCaller, source: &str) -> Vec<String> {
        let slots = self.slots.lock().unwrap_or_else(PoisonError::into_inner);
        slots
            .values()
            .filter(|s| s.key.source == source && s.key.principal == caller.principal)
            .filter(|s| s.key.client.is_none() || s.key.client == caller.client)
            .filter(|s| !s.closed.load(Ordering::Acquire))
            .filter_map(|s| s.opened.get().map(|o| o.lease.clone()))
            .collect()
    }

    /// The key's slot, new if needed, within `max_sessions`.
    fn slot(
        &self,
        key: &SessionKey,
        policy: Policy,
        handle: &Arc<SourceHandle>,
    ) -> Result<Arc<Slot>, SessionError> {
        let mut slots = self.slots.lock().unwrap_or_else(PoisonError::into_inner);
        if let Some(s) = slots.get(key)
            && Arc::ptr_eq(&s.handle, handle)
            && !s.closed.load(Ordering::Acquire)
        {
            return Ok(s.clone());
        }
        // Sessions of a replaced instance of this source died with it.
        slots.retain(|k, s| {
            let stale = k.source == key.source && !Arc::ptr_eq(&s.handle, handle);
            if stale {
                s.stop.cancel();
            }
            !stale
        });
        let open = slots.keys().filter(|k| k.source == key.source).count();
        if open >= policy.max {
            return Err(SessionError::Full {
                name: key.source.clone(),
                max: policy.max,
            });
        }
        let slot = Arc::new(Slot {
            key: key.clone(),
            scope: policy.scope,
            handle: handle.clone(),
            opened: tokio::sync::OnceCell::new(),
            last_used: Mutex::new(Instant::now()),
            in_flight: AtomicUsize::new(0),
            closed: AtomicBool::new(false),
            stop: CancellationToken::new(),
        });
        slots.insert(key.clone(), slot.clone());
        Ok(slot)
    }

    /// Removes `slot` from the table if it is still the one there.
    fn forget(&self, slot: &Arc<Slot>) {
        let mut slots = self.slots.lock().unwrap_or_else(PoisonError::into_inner);
        if slots.get(&slot.key).is_some_and(|s| Arc::ptr_eq(s, slot)) {
            slots.remove(&slot.key);
        }
    }

    /// Closes the slot's session once it has been idle for `idle`, its client
    /// is gone, or it is stopped.
    async fn watch(
        self: Arc<Self>,
        slot: Arc<Slot>,
        idle: Duration,
        client_gone: Option<CancellationToken>,
    ) {
        let gone = async {
            match &client_gone {
                Some(t) => t.cancelled().await,
                None => std::future::pending().await,
            }
        };
        tokio::pin!(gone);
        let reason = loop {
            // A busy session is looked at again one idle period later.
            let wait = match slot.in_flight.load(Ordering::Acquire) {
                0 => idle.saturating_sub(slot.idle_for()),
                _ => idle,
            };
            tokio::select! {
                () = tokio::time::sleep(wait) => {
                    if slot.in_flight.load(Ordering::Acquire) == 0 && slot.idle_for() >= idle {
                        break "idle";
                    }
                }
                () = &mut gone => break "client gone",
                () = slot.stop.cancelled() => break "closed",
            }
        };
        self.close_slot(&slot, reason).await;
    }

    async fn close_slot(&self, slot: &Arc<Slot>, reason: &str) {
        if slot.closed.swap(true, Ordering::AcqRel) {
            return;
        }
        self.forget(slot);
        let Some(opened) = slot.opened.get() else {
            return;
        };
        let k = &slot.key;
        tracing::info!(source = %k.source, principal = %k.principal, client = ?k.client, lease = %opened.lease, reason, "closing session");
        let close = SourceRequest::CloseLease {
            lease: opened.lease.clone(),
        };
        if let Err(e) = slot.handle.request::<Value>(&close, CallCtx::new()).await {
            // A replaced source closed its leases itself.
            tracing::debug!(source = %k.source, "closing lease: {e}");
        }
    }

    /// Opens a handle for `principal`.
    pub fn open_handle(&self, principal: &str) -> Result<(String, String), SessionError> {
        let mut handles = self.handles.lock().unwrap_or_else(PoisonError::into_inner);
        let held = handles
            .values()
            .filter(|h| h.principal == principal)
            .count();
        if held >= MAX_HANDLES_PER_PRINCIPAL {
            return Err(SessionError::TooManyHandles(principal.into()));
        }
        let secret = format!("wfs_{}", uuid::Uuid::new_v4().simple());
        let label = format!(
            "handle-{}",
            self.next_handle.fetch_add(1, Ordering::Relaxed) + 1
        );
        handles.insert(
            secret.clone(),
            HandleEntry {
                principal: principal.into(),
                label: label.clone(),
            },
        );
        tracing::info!(principal, handle = %label, "session handle opened");
        Ok((secret, label))
    }

    /// The client label of a handle, if `principal` may use it.
    pub fn check_handle(&self, principal: &str, secret: &str) -> Result<String, SessionError> {
        let handles = self.handles.lock().unwrap_or_else(PoisonError::into_inner);
        let h = handles.get(secret).ok_or(SessionError::UnknownHandle)?;
        if h.principal != principal {
            tracing::warn!(principal, handle = %h.label, "refused a session handle of another principal");
            return Err(SessionError::OtherPrincipal);
        }
        Ok(h.label.clone())
    }

    /// Closes a handle and every session opened with it; returns how many.
    pub async fn close_handle(&self, principal: &str, secret: &str) -> Result<usize, SessionError> {
        let label = self.check_handle(principal, secret)?;
        self.handles
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .remove(secret);
        Ok(self.close_client(&label, "handle closed").await)
    }

    /// Closes every session of `client`; returns how many.
    pub async fn close_client(&self, client: &str, reason: &str) -> usize {
        let slots: Vec<Arc<Slot>> = self
            .slots
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .values()
            .filter(|s| s.key.client.as_deref() == Some(client))
            .cloned()
            .collect();
        for s in &slots {
            s.stop.cancel();
            self.close_slot(s, reason).await;
        }
        slots.len()
    }

    /// The open sessions of `source`, for admin output. `runtime` is the
    /// source's status; its `lease_sessions` (mcp) give each lease's current
    /// epoch, else the epoch it opened with is shown.
    pub fn describe(&self, source: &str, runtime: &Value) -> Vec<Value> {
        let mut rows: Vec<(Instant, Value)> = self
            .slots
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .values()
            .filter(|s| s.key.source == source)
            .filter_map(|s| {
                let o = s.opened.get()?;
                let live = runtime.pointer(&format!("/lease_sessions/{}", o.lease));
                let epoch = live
                    .and_then(|l| l.get("epoch"))
                    .cloned()
                    .unwrap_or(json!(o.epoch));
                let row = json!({
                    "scope": s.scope,
                    "principal": s.key.principal,
                    "client": s.key.client,
                    "lease": o.lease,
                    "epoch": epoch,
                    "connected": live.and_then(|l| l.get("connected")),
                    "age_ms": o.at.elapsed().as_millis() as u64,
                    "idle_ms": s.idle_for().as_millis() as u64,
                    "calls_in_flight": s.in_flight.load(Ordering::Acquire),
                });
                Some((o.at, row))
            })
            .collect();
        rows.sort_by_key(|r| r.0);
        rows.into_iter().map(|r| r.1).collect()
    }

    /// Sessions open now, by source (for the metrics).
    pub fn open_by_source(&self) -> HashMap<String, usize> {
        let slots = self
            .slots
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner);
        let mut per_source = HashMap::new();
        for s in slots.values().filter(|s| s.opened.get().is_some()) {
            *per_source.entry(s.key.source.clone()).or_default() += 1;
        }
        per_source
    }

    /// Totals for the admin status.
    pub fn totals(&self) -> Value {
        let slots = self.slots.lock().unwrap_or_else(PoisonError::into_inner);
        let open = slots.values().filter(|s| s.opened.get().is_some()).count();
        let in_flight: usize = slots
            .values()
            .map(|s| s.in_flight.load(Ordering::Acquire))
            .sum();
        let mut per_source: HashMap<&str, usize> = HashMap::new();
        for s in slots.values().filter(|s| s.opened.get().is_some()) {
            *per_source.entry(s.key.source.as_str()).or_default() += 1;
        }
        json!({
            "open": open,
            "calls_in_flight": in_flight,
            "by_source": per_source,
            "handles": self.handles.lock().unwrap_or_else(PoisonError::into_inner).len(),
        })
    }
}

async fn open_lease(handle: &SourceHandle) -> Result<Opened, String> {
    let info: SessionInfo = handle
        .request(&SourceRequest::OpenLease, CallCtx::new())
        .await
        .map_err(|e| e.error.message)?;
    let lease = info
        .lease
        .ok_or_else(|| "the plugin opened no lease".to_string())?;
    Ok(Opened {
        lease,
        epoch: info.epoch,
        at: Instant::now(),
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_default_scope_is_shared_but_client_for_a_browser_over_http() {
        let unset = Configured::default();
        let browser = Configured {
            looks_stateful: true,
            ..unset
        };
        let scope = |c, http| Policy::resolve(c, http).scope;
        assert_eq!(scope(unset, true), SessionScope::Shared);
        assert_eq!(scope(unset, false), SessionScope::Shared);
        assert_eq!(scope(browser, true), SessionScope::Client);
        assert_eq!(scope(browser, false), SessionScope::Shared);
        let set = Configured {
            scope: Some(SessionScope::Principal),
            idle_ms: Some(5),
            max: Some(2),
            looks_stateful: true,
        };
        let p = Policy::resolve(set, false);
        assert_eq!(
            (p.scope, p.idle, p.max),
            (SessionScope::Principal, Duration::from_millis(5), 2)
        );
    }

    #[test]
    fn a_handle_is_bound_to_its_principal() {
        let t = SessionTable::new();
        let (secret, label) = t.open_handle("alice").unwrap();
        assert!(secret.starts_with("wfs_") && secret.len() > 30);
        assert_eq!(t.check_handle("alice", &secret).unwrap(), label);
        assert!(matches!(
            t.check_handle("bob", &secret),
            Err(SessionError::OtherPrincipal)
        ));
        assert!(matches!(
            t.check_handle("alice", "wfs_guess"),
            Err(SessionError::UnknownHandle)
        ));
    }

    #[test]
    fn session_keys_parse_from_a_source_table() {
        let sc: SourceConfig = toml::from_str(
            "command = \"x\"\nsession = \"principal\"\nsession_idle_ms = 1000\nmax_sessions = 3\n",
        )
        .unwrap();
        assert_eq!(sc.session, Some(SessionScope::Principal));
        assert_eq!((sc.session_idle_ms, sc.max_sessions), (Some(1000), Some(3)));
        // Host-owned: never passed to the plugin as settings.
        assert_eq!(sc.settings.keys().collect::<Vec<_>>(), ["command"]);
        assert!(toml::from_str::<SourceConfig>("session = \"everyone\"").is_err());
    }
}
