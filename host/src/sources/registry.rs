//! The set of sources, their status and their last discovered catalog.
//! Discovery runs for all sources in parallel, each bounded in time; a slow or
//! dead source delays no other. The set can be re-applied from a new config
//! (reload): unchanged sources keep their instance — and so their upstream
//! sessions — changed ones are replaced, removed ones closed.

use std::collections::BTreeMap;
use std::path::Path;
use std::sync::PoisonError;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex, RwLock};
use std::time::{Duration, Instant};

use abi_stable::std_types::RString;
use serde::Serialize;
use serde_json::{Value, json};
use tokio::sync::watch;
use wf_plugin_api::{Catalog, PluginError, SourceSpec};

use super::handle::SourceHandle;
use super::node_schemas;
use super::poison::{Finding, Others};
use super::screen::{Rejected, screen};
use super::tool_pins::{self, Guard, Held, Judged};
use crate::clock::now_ms;
use crate::config::{LoadedConfig, SourceConfig};
use crate::file_watch::{FileWatch, Watch};
use crate::plugins::PluginSet;
use crate::store::{Store, content_hash};

#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
#[serde(rename_all = "snake_case")]
pub enum SourceState {
    /// Created; first discovery not finished.
    Pending,
    Ready,
    /// Could not be created, or its last discovery failed.
    Failed,
    /// An OAuth upstream without usable tokens: its error says why and
    /// which `wf auth login` to run. Other sources are unaffected.
    NeedsLogin,
    Disabled,
    /// Its plugin's child process exited and is being restarted (process
    /// isolation): calls fail at once until it is back.
    Restarting,
}

#[derive(Debug, Clone, Serialize)]
pub struct SourceStatus {
    pub state: SourceState,
    pub error: Option<String>,
    #[serde(skip)]
    pub catalog: Option<Arc<Catalog>>,
    /// When the catalog now served was discovered (ms since the epoch).
    pub discovered_at: Option<i64>,
    pub discovery_ms: Option<u64>,
    /// The catalog served comes from a snapshot of an earlier run.
    pub from_snapshot: bool,
    /// Capabilities the source offers that fail the checks: left out of
    /// every surface (see `catalog::screen`).
    pub rejected: Vec<Rejected>,
    /// Tools the hold stage keeps out (a pinned tool that changed or is new,
    /// or one screening flagged under `screen = "hold"`): in no list, and
    /// their calls are refused (see `tool_pins`).
    pub held: Vec<Held>,
    /// Screening findings, and changes let through by `on_change = "warn"`.
    pub warnings: Vec<Finding>,
    /// The catalog before the hold stage: judged again when the pins change.
    #[serde(skip)]
    raw: Option<Arc<Catalog>>,
    /// The discovery whose result is applied (see `SourceEntry::discoveries`).
    #[serde(skip)]
    applied: u64,
}

pub struct SourceEntry {
    pub name: String,
    pub kind: String,
    pub plugin: Option<String>,
    pub enabled: bool,
    /// Identity of the source's effective config: same fingerprint, same instance.
    pub fingerprint: String,
    pub handle: Option<Arc<SourceHandle>>,
    status: Mutex<SourceStatus>,
    /// Discoveries started so far; a result older than the last one applied
    /// is dropped (a slow early discovery must not undo a later refresh).
    discoveries: std::sync::atomic::AtomicU64,
    /// True once this instance's first discovery has finished (either way),
    /// or at once when there is nothing to discover. A catalog snapshot does
    /// not count: it may predate a capability the upstream has now.
    first_discovery: watch::Sender<bool>,
}

impl SourceEntry {
    pub fn status(&self) -> SourceStatus {
        let mut st = self
            .status
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .clone();
        // A token refused mid-session: the catalog stays, the state says
        // what to run (cleared by the next success).
        if let Some(why) = self.handle.as_ref().and_then(|h| h.login_needed()) {
            st.state = SourceState::NeedsLogin;
            st.error = Some(why);
        }
        // A plugin in a child process that exited: the source waits for it.
        if self.handle.is_some()
            && let Some(plugin) = &self.plugin
        {
            match crate::plugins::process::health(plugin) {
                Some(crate::plugins::process::Health::Restarting(why)) => {
                    st.state = SourceState::Restarting;
                    st.error = Some(why);
                }
                Some(crate::plugins::process::Health::Failed(why)) => {
                    st.state = SourceState::Failed;
                    st.error = Some(why);
                }
                _ => {}
            }
        }
        st
    }
    pub fn catalog(&self) -> Option<Arc<Catalog>> {
        self.status
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .catalog
            .clone()
    }
}

/// What applying a source set changed.
#[derive(Debug, Default, Clone, Serialize)]
pub struct ApplyReport {
    pub added: Vec<String>,
    pub changed: Vec<String>,
    pub removed: Vec<String>,
    pub unchanged: Vec<String>,
}

impl ApplyReport {
    pub fn is_empty(&self) -> bool {
        self.added.is_empty() && self.changed.is_empty() && self.removed.is_empty()
    }
}

/// All sources. `changes()` ticks whenever the set or a catalog changes.
pub struct Sources {
    entries: RwLock<BTreeMap<String, Arc<SourceEntry>>>,
    version: watch::Sender<u64>,
    /// Sources with no catalog yet whose first discovery has not finished.
    pending: watch::Sender<usize>,
    /// Where catalog snapshots are kept (None: not persisted).
    store: Option<Arc<Store>>,
    /// Held through one `apply`: appliers take turns, while readers of
    /// `entries` never wait for a plugin or the store.
    applying: Mutex<()>,
    /// The tool pins and each source's `on_change`/`screen` (the hold stage).
    guard: RwLock<Arc<Guard>>,
    /// Set by `shutdown`: a discovery its closing cuts short is not a fault
    /// (`wf run` ends while a source it never called is still listing).
    closing: AtomicBool,
}

/// Every source to run: the configured ones plus each plugin's default
/// sources that the config does not name.
pub fn desired_sources(
    configured: BTreeMap<String, SourceConfig>,
    plugins: &PluginSet,
) -> BTreeMap<String, SourceConfig> {
    let mut all = configured;
    for plugin in &plugins.loaded {
        for d in &plugin.manifest.default_sources {
            all.entry(d.name.clone()).or_insert_with(|| {
                SourceConfig::new(&d.kind, d.config.as_object().cloned().unwrap_or_default())
            });
        }
    }
    // A dropped-in WebAssembly component: a `wasm` source named for its
    // file, granted nothing (a configured source of that name wins).
    if plugins.for_kind("wasm").is_some() {
        for c in &plugins.components {
            let mut config = serde_json::Map::new();
            config.insert("path".into(), c.file.display().to_string().into());
            all.entry(c.source_name())
                .or_insert_with(|| SourceConfig::new("wasm", config));
        }
    }
    all
}

impl Sources {
    pub fn new(store: Option<Arc<Store>>) -> Self {
        // Sources answer their calls' requests for input (see `answers`).
        crate::plugins::set_ask_handler(super::answers::answer);
        Self {
            entries: RwLock::new(BTreeMap::new()),
            version: watch::channel(0).0,
            pending: watch::channel(0).0,
            store,
            applying: Mutex::new(()),
            guard: RwLock::default(),
            closing: Default::default(),
        }
    }

    pub fn get(&self, name: &str) -> Option<Arc<SourceEntry>> {
        self.entries
            .read()
            .unwrap_or_else(PoisonError::into_inner)
            .get(name)
            .cloned()
    }

    /// The live handle of source `name`: None when there is no such source or
    /// it is disabled or failed (the one lookup every caller of a source uses).
    pub fn handle(&self, name: &str) -> Option<Arc<SourceHandle>> {
        self.get(name).and_then(|e| e.handle.clone())
    }

    pub fn list(&self) -> Vec<Arc<SourceEntry>> {
        self.entries
            .read()
            .unwrap_or_else(PoisonError::into_inner)
            .values()
            .cloned()
            .collect()
    }

    /// Marks the catalog as changed (e.g. a host-local capability was added).
    pub fn touch(&self) {
        self.version.send_modify(|v| *v += 1);
    }

    /// Ticks each time the set or some catalog changes.
    pub fn changes(&self) -> watch::Receiver<u64> {
        self.version.subscribe()
    }

    /// Waits until every source has a catalog or finished its first discovery, or `deadline`.
    pub async fn wait_first_discovery(&self, deadline: Instant) {
        // Every proxied call asks: once discovery is done, answer at once.
        if *self.pending.borrow() == 0 {
            return;
        }
        let mut rx = self.pending.subscribe();
        let _ = tokio::time::timeout_at(deadline.into(), rx.wait_for(|n| *n == 0)).await;
    }

    /// Waits until every source `could_own` picks has finished its first
    /// discovery, or `deadline`: what a call of a name no catalog holds yet
    /// waits for (a snapshot-served source counts as not yet discovered).
    pub async fn wait_first_discovery_of(
        &self,
        could_own: impl Fn(&str) -> bool,
        deadline: Instant,
    ) {
        let waiting: Vec<watch::Receiver<bool>> = self
            .entries
            .read()
            .unwrap_or_else(PoisonError::into_inner)
            .values()
            .filter(|e| !*e.first_discovery.borrow() && could_own(&e.name))
            .map(|e| e.first_discovery.subscribe())
            .collect();
        if waiting.is_empty() {
            return;
        }
        let all = futures::future::join_all(waiting.into_iter().map(|mut rx| async move {
            let _ = rx.wait_for(|done| *done).await;
        }));
        let _ = tokio::time::timeout_at(deadline.into(), all).await;
    }

    /// Makes the set match `desired`: unchanged sources (same fingerprint)
    /// are kept as they are; changed ones are replaced and new ones created.
    /// Returns the report and the replaced or removed entries, which the
    /// caller closes (after the new set is in place).
    pub fn apply(
        &self,
        desired: BTreeMap<String, SourceConfig>,
        config: &LoadedConfig,
        plugins: &PluginSet,
        state_dir: &Path,
    ) -> (ApplyReport, Vec<Arc<SourceEntry>>) {
        let mut report = ApplyReport::default();
        let mut retired = Vec::new();
        let mut fresh = 0usize;
        let _turn = self.applying.lock().unwrap_or_else(PoisonError::into_inner);
        let policies = desired
            .iter()
            .map(|(name, sc)| (name.clone(), sc.pin_policy()))
            .collect();
        self.set_guard(Guard::load(config.file.as_deref(), policies));
        // Built with no lock on `entries`: creating a source may start a
        // child process, and restoring its snapshot reads the store.
        let mut current = self
            .entries
            .read()
            .unwrap_or_else(PoisonError::into_inner)
            .clone();
        let mut next = BTreeMap::new();
        for (name, sc) in desired {
            let (fingerprint, prepared) = prepare(config, &name, &sc, plugins);
            match current.remove(&name) {
                Some(old) if old.fingerprint == fingerprint => {
                    report.unchanged.push(name.clone());
                    next.insert(name, old);
                    continue;
                }
                Some(old) => {
                    report.changed.push(name.clone());
                    retired.push(old);
                }
                None => report.added.push(name.clone()),
            }
            let entry = self.create(&name, &sc, fingerprint, prepared, plugins, state_dir);
            if let Some(e) = &entry.status().error {
                tracing::warn!(source = %name, "{e}");
            }
            if entry.handle.is_some() && entry.catalog().is_none() {
                fresh += 1;
            }
            next.insert(name, Arc::new(entry));
        }
        for (name, old) in current {
            report.removed.push(name);
            retired.push(old);
        }
        *self.entries.write().unwrap_or_else(PoisonError::into_inner) = next;
        if fresh > 0 {
            self.pending.send_modify(|n| *n += fresh);
        }
        // Kept sources under the pins and policies of this config.
        self.rejudge();
        self.touch();
        (report, retired)
    }

    fn create(
        &self,
        name: &str,
        sc: &SourceConfig,
        fingerprint: String,
        prepared: Result<Value, String>,
        plugins: &PluginSet,
        state_dir: &Path,
    ) -> SourceEntry {
        let plugin = plugins.for_kind(&sc.kind);
        let entry = |handle: Option<SourceHandle>, state, error| SourceEntry {
            first_discovery: watch::channel(handle.is_none()).0,
            name: name.into(),
            kind: sc.kind.clone(),
            plugin: plugin.map(|p| p.manifest.name.clone()),
            enabled: sc.enabled,
            fingerprint: fingerprint.clone(),
            handle: handle.map(Arc::new),
            status: Mutex::new(SourceStatus {
                state,
                error,
                catalog: None,
                discovered_at: None,
                discovery_ms: None,
                from_snapshot: false,
                rejected: Vec::new(),
                held: Vec::new(),
                warnings: Vec::new(),
                raw: None,
                applied: 0,
            }),
            discoveries: std::sync::atomic::AtomicU64::new(0),
        };
        if !sc.enabled {
            return entry(None, SourceState::Disabled, None);
        }
        let (Some(plugin), Ok(settings)) = (plugin, prepared.clone()) else {
            return entry(None, SourceState::Failed, prepared.err());
        };
        let data_dir = state_dir.join("sources").join(name);
        if let Err(e) = std::fs::create_dir_all(&data_dir) {
            return entry(
                None,
                SourceState::Failed,
                Some(format!(
                    "cannot create data dir {}: {e}",
                    data_dir.display()
                )),
            );
        }
        let spec = SourceSpec {
            name: name.into(),
            kind: sc.kind.clone(),
            config: settings,
            data_dir,
        };
        let spec = serde_json::to_string(&spec).unwrap_or_default();
        match plugin
            .plugin
            .create_source(RString::from(spec))
            .into_result()
        {
            Ok(obj) => {
                let handle = SourceHandle::new(
                    name.into(),
                    sc.kind.clone(),
                    plugin.manifest.name.clone(),
                    obj,
                );
                // A plugin child's descriptors are not this process's.
                let handle = if plugin.child.is_none() {
                    handle.with_io_watch()
                } else {
                    handle
                };
                let e = entry(Some(handle), SourceState::Pending, None);
                self.restore_snapshot(&e);
                e
            }
            Err(err) => entry(
                None,
                SourceState::Failed,
                Some(format!(
                    "could not be created: {}",
                    PluginError::from_json(err.as_str())
                )),
            ),
        }
    }

    /// Serves the last catalog an earlier run discovered for this exact
    /// config until discovery finishes, so clients see the tools at once.
    fn restore_snapshot(&self, entry: &SourceEntry) {
        let Some(store) = &self.store else { return };
        match store.blocking(store.snapshot(&entry.name, &entry.fingerprint)) {
            Ok(Some((catalog, at))) => match serde_json::from_value::<Catalog>(catalog) {
                Ok(c) => {
                    let (mut c, rejected) = screen(c);
                    node_schemas::fold(&mut c);
                    for r in &rejected {
                        tracing::warn!(source = %entry.name, plugin = ?entry.plugin, "{r}");
                    }
                    let c = Arc::new(c);
                    let judged = self.judge(&entry.name, &c);
                    let mut st = entry.status.lock().unwrap_or_else(PoisonError::into_inner);
                    publish(entry, &mut st, c, judged);
                    st.rejected = rejected;
                    st.discovered_at = Some(at);
                    st.from_snapshot = true;
                    tracing::info!(source = %entry.name, age_ms = now_ms() - at, "serving the catalog snapshot until discovery finishes");
                }
                Err(e) => {
                    tracing::warn!(source = %entry.name, "ignoring an unreadable catalog snapshot: {e}")
                }
            },
            Ok(None) => {}
            Err(e) => tracing::warn!(source = %entry.name, "cannot read the catalog snapshot: {e}"),
        }
    }

    /// Discovers `entries` in parallel, each bounded by `timeout`. Returns
    /// when all have finished; each catalog is published as it arrives.
    pub async fn discover_all(self: &Arc<Self>, entries: Vec<Arc<SourceEntry>>, timeout: Duration) {
        let tasks: Vec<_> = entries
            .into_iter()
            .filter(|e| e.handle.is_some())
            .map(|e| {
                let this = self.clone();
                tokio::spawn(async move { this.discover(&e, timeout).await })
            })
            .collect();
        for t in tasks {
            let _ = t.await;
        }
    }

    /// One-shot discovery of one source; true when its catalog changed.
    pub async fn discover(self: &Arc<Self>, entry: &SourceEntry, timeout: Duration) -> bool {
        let Some(handle) = &entry.handle else {
            return false;
        };
        let generation = entry
            .discoveries
            .fetch_add(1, std::sync::atomic::Ordering::AcqRel)
            + 1;
        let started = Instant::now();
        let result = match tokio::time::timeout(timeout, handle.catalog()).await {
            Ok(r) => r.map_err(|e| e.error.to_string()),
            Err(_) => Err(format!(
                "discovery timed out after {} ms",
                timeout.as_millis()
            )),
        };
        let elapsed = started.elapsed().as_millis() as u64;
        crate::telemetry::metrics::discovery(&entry.name, result.is_ok(), started.elapsed());
        // Screened and judged before the status lock: judging reads the
        // other sources' catalogs (their locks, never two at once). On a
        // blocking thread: a catalog of thousands of tools takes a while to
        // check, and the runtime's workers (one, over stdio) keep answering
        // `list_sources` and calls meanwhile (issue #55).
        let result = match result {
            Ok(catalog) => {
                let (guard, others) = (self.guard(), self.others(&entry.name));
                let name = entry.name.clone();
                let before = entry.catalog();
                // The snapshot keeps what the source said (only when saved),
                // as text: a tree of it was as large as the catalog (issue
                // #55). Made here, on the thread that saves and frees it:
                // mimalloc keeps a page another thread freed until its own
                // collects.
                let raw = self
                    .store
                    .as_ref()
                    .and_then(|_| serde_json::to_string(&catalog).ok());
                tokio::task::spawn_blocking(move || {
                    let (mut catalog, rejected) = screen(catalog);
                    node_schemas::fold(&mut catalog);
                    let catalog = Arc::new(catalog);
                    let judged = tool_pins::judge(&guard, &name, &catalog, &others);
                    let same = same_catalog(before.as_ref(), &judged.served);
                    release_freed();
                    (raw, catalog, rejected, judged, (before, same))
                })
                .await
                .map_err(|e| format!("screening its catalog failed: {e}"))
            }
            Err(e) => Err(e),
        };
        let (was_waiting, changed);
        // Saved after the status lock is released: a store call (PostgreSQL
        // over the network) must never hold up `list_sources` or `/readyz`.
        let mut snapshot = None;
        {
            let mut st = entry.status.lock().unwrap_or_else(PoisonError::into_inner);
            if st.applied > generation {
                tracing::debug!(source = %entry.name, "dropping a discovery result older than the one applied");
                // A later discovery finished first: the first is over too.
                entry.first_discovery.send_replace(true);
                return false;
            }
            st.applied = generation;
            // Only sources that had no catalog (no snapshot) were waited for.
            was_waiting = st.state == SourceState::Pending && st.catalog.is_none();
            st.discovery_ms = Some(elapsed);
            match result {
                Ok((raw, catalog, rejected, judged, (before, same))) => {
                    // The snapshot keeps what the source said; it is screened again on restore.
                    snapshot = raw;
                    // Said once per change, not at every rediscovery.
                    if st.rejected != rejected {
                        for r in &rejected {
                            tracing::warn!(source = %entry.name, plugin = ?entry.plugin, "{r}");
                        }
                    }
                    tracing::info!(source = %entry.name, tools = catalog.tools.len(), left_out = rejected.len(), held = judged.held.len(), ms = elapsed, "discovered");
                    // Compared off the lock, against the catalog served
                    // then; again here only if another result came between.
                    changed = !match (&st.catalog, &before) {
                        (Some(now), Some(then)) if Arc::ptr_eq(now, then) => same,
                        (None, None) => same,
                        (now, _) => same_catalog(now.as_ref(), &judged.served),
                    };
                    st.rejected = rejected;
                    st.state = SourceState::Ready;
                    st.error = None;
                    publish(entry, &mut st, catalog, judged);
                    st.discovered_at = Some(now_ms());
                    st.from_snapshot = false;
                }
                Err(e) if self.closing.load(Ordering::Relaxed) => {
                    tracing::debug!(source = %entry.name, "discovery ended by the shutdown: {e}");
                    changed = false;
                    st.error = Some(format!("discovery ended by the shutdown: {e}"));
                }
                Err(e) => {
                    tracing::warn!(source = %entry.name, "discovery failed: {e}");
                    changed = false;
                    // The mcp plugin's word for "a person must log in" (plugins/mcp/src/oauth.rs).
                    st.state = if e.contains("needs_login:") {
                        SourceState::NeedsLogin
                    } else {
                        SourceState::Failed
                    };
                    st.error = Some(format!("discovery failed: {e}"));
                }
            }
        }
        // Before any await: a client that sees the source ready (list_sources)
        // lists its tools.
        self.touch();
        // Screening of the other sources names this one's tools: they are
        // judged again (this one was just judged), off the runtime's workers;
        // `rejudge_except` ticks `changes()` again if that changed any.
        if changed {
            let (this, name) = (self.clone(), entry.name.clone());
            let _ = tokio::task::spawn_blocking(move || {
                this.rejudge_except(Some(&name));
                release_freed();
            })
            .await;
        }
        entry.first_discovery.send_replace(true);
        if let (Some(store), Some(catalog)) = (&self.store, snapshot) {
            if let Err(e) = store
                .save_snapshot(&entry.name, &entry.fingerprint, &catalog)
                .await
            {
                tracing::warn!(source = %entry.name, "cannot save the catalog snapshot: {e}");
            }
            // The snapshot's JSON was made and freed on this thread: its pages
            // go back to the system now, not at some later allocation.
            drop(catalog);
            release_freed();
            release_c_heap();
        }
        if was_waiting
            && self
                .entries
                .read()
                .unwrap_or_else(PoisonError::into_inner)
                .get(&entry.name)
                .is_some_and(|e| std::ptr::eq(&**e, entry))
        {
            self.pending.send_modify(|n| *n = n.saturating_sub(1));
        }
        changed
    }

    /// The pins and policies in force.
    pub fn guard(&self) -> Arc<Guard> {
        self.guard
            .read()
            .unwrap_or_else(PoisonError::into_inner)
            .clone()
    }

    fn set_guard(&self, guard: Guard) {
        *self.guard.write().unwrap_or_else(PoisonError::into_inner) = Arc::new(guard);
    }

    /// What the other sources serve (for screening's cross-source rules).
    fn others(&self, name: &str) -> Others {
        let mut others = Others::default();
        for e in self.list() {
            if e.name == name {
                continue;
            }
            others.sources.insert(e.name.clone());
            let raw = e
                .status
                .lock()
                .unwrap_or_else(PoisonError::into_inner)
                .raw
                .clone();
            if let Some(c) = raw {
                others.tools.extend(c.tools.iter().map(|t| t.name.clone()));
            }
        }
        others
    }

    /// The hold stage over source `name`'s screened catalog.
    fn judge(&self, name: &str, catalog: &Arc<Catalog>) -> Judged {
        tool_pins::judge(&self.guard(), name, catalog, &self.others(name))
    }

    /// Judges every source's last catalog again (the pins or policies
    /// changed); ticks `changes()` when something served changed.
    pub fn rejudge(&self) {
        self.rejudge_except(None);
    }

    /// [`Self::rejudge`] but for source `skip`.
    fn rejudge_except(&self, skip: Option<&str>) {
        let mut changed = false;
        for e in self.list() {
            if skip == Some(e.name.as_str()) {
                continue;
            }
            let raw = e
                .status
                .lock()
                .unwrap_or_else(PoisonError::into_inner)
                .raw
                .clone();
            let Some(raw) = raw else { continue };
            let judged = self.judge(&e.name, &raw);
            let mut st = e.status.lock().unwrap_or_else(PoisonError::into_inner);
            if st.raw.as_ref().is_some_and(|r| Arc::ptr_eq(r, &raw)) {
                changed |= !same_catalog(st.catalog.as_ref(), &judged.served);
                publish(&e, &mut st, raw.clone(), judged);
            }
        }
        if changed {
            self.touch();
        }
    }

    /// Reads the tools lock file again (`wf tools approve` wrote it, or an
    /// operator edited it) and judges again when it changed.
    pub fn reload_pins(&self) {
        let mut guard = (*self.guard()).clone();
        if guard.reread() {
            tracing::info!("tool pins changed; judging every source again");
            self.set_guard(guard);
            self.rejudge();
        }
    }

    /// Watches the tools lock file (on `watch`, the host's one poll) and
    /// reloads the pins when it changes.
    pub fn watch_pins(self: &Arc<Self>, poll: &FileWatch) {
        let (alive, this) = (Arc::downgrade(self), Arc::downgrade(self));
        poll.add(Watch::new(
            None,
            Duration::ZERO,
            move || Some(alive.upgrade()?.guard().path.clone().into_iter().collect()),
            move || {
                this.upgrade()?.reload_pins();
                None
            },
        ));
    }

    /// Every source's catalog before the hold stage (what `wf tools pin`
    /// records and `diff` compares), by name.
    pub fn unheld_catalogs(&self) -> Vec<(String, Arc<Catalog>)> {
        self.list()
            .into_iter()
            .filter_map(|e| {
                let raw = e
                    .status
                    .lock()
                    .unwrap_or_else(PoisonError::into_inner)
                    .raw
                    .clone();
                Some((e.name.clone(), raw?))
            })
            .collect()
    }

    /// Every held tool, by source.
    pub fn all_held(&self) -> Vec<(String, Vec<Held>)> {
        self.list()
            .into_iter()
            .map(|e| (e.name.clone(), e.status().held))
            .filter(|(_, h)| !h.is_empty())
            .collect()
    }

    /// The message a call of held tool `source`.`tool` is refused with.
    pub fn held(&self, source: &str, tool: &str) -> Option<String> {
        let e = self.get(source)?;
        let st = e.status.lock().unwrap_or_else(PoisonError::into_inner);
        st.held
            .iter()
            .find(|h| h.name == tool)
            .map(|h| h.message.clone())
    }

    /// Closes every source (child processes, sessions), each bounded in time.
    pub async fn shutdown(&self, timeout: Duration) {
        self.closing.store(true, Ordering::Relaxed);
        close(self.list(), timeout).await;
    }
}

/// Serves a judged catalog: the served part, the held tools (told to the
/// source's handle, which refuses their calls), the warnings. A newly held
/// tool is logged once and counted.
fn publish(entry: &SourceEntry, st: &mut SourceStatus, raw: Arc<Catalog>, judged: Judged) {
    for h in &judged.held {
        if !st.held.iter().any(|o| o.name == h.name && o.why == h.why) {
            tracing::warn!(source = %entry.name, tool = %h.name, why = ?h.why, "tool held: {}", h.message);
            // The audit trail (not built yet) records this hold here too.
        }
    }
    for w in &judged.warnings {
        if !st.warnings.contains(w) {
            tracing::warn!(source = %entry.name, "{w}");
        }
    }
    if st.held != judged.held {
        crate::telemetry::metrics::tools_held(&entry.name, &judged.held);
        if let Some(h) = &entry.handle {
            h.set_held(
                judged
                    .held
                    .iter()
                    .map(|h| (h.name.clone(), h.message.clone()))
                    .collect(),
            );
        }
    }
    st.raw = Some(raw);
    st.catalog = Some(judged.served);
    st.held = judged.held;
    st.warnings = judged.warnings;
}

/// Hands the pages this thread's heap freed back to the system: screening
/// a large catalog is many small allocations, freed on a blocking thread
/// that may not allocate again for a long time (issue #55: a fifth of
/// GitHub's RSS added was memory already freed). wf's allocator is mimalloc
/// (main.rs); elsewhere (tests) this only tidies mimalloc's own empty heap.
pub(crate) fn release_freed() {
    use mimalloc as _;
    unsafe extern "C" {
        // mimalloc's own (libmimalloc-sys builds all of mimalloc; its Rust
        // declaration is behind the `extended` feature).
        fn mi_collect(force: bool);
    }
    // SAFETY: mi_collect takes no pointers; it only returns this thread's
    // free pages to the system.
    unsafe { mi_collect(true) }
}

/// Hands back the pages the C heap freed: SQLite (the store) copies a saved
/// snapshot with glibc's malloc, whose thread arenas keep what it freed (9
/// MiB after GitHub's, issue #55).
fn release_c_heap() {
    #[cfg(all(target_os = "linux", target_env = "gnu"))]
    // SAFETY: malloc_trim takes no pointers; it only returns free memory.
    unsafe {
        libc::malloc_trim(0);
    }
}

/// Whether `served` is what `was` served: the same catalog, or an equal one
/// (compared in full only when they are not one and the same).
fn same_catalog(was: Option<&Arc<Catalog>>, served: &Arc<Catalog>) -> bool {
    was.is_some_and(|w| Arc::ptr_eq(w, served) || **w == **served)
}

/// Closes retired or all sources, each bounded in time.
pub async fn close(entries: Vec<Arc<SourceEntry>>, timeout: Duration) {
    let closing = entries
        .into_iter()
        .filter_map(|e| e.handle.clone())
        .map(|h| async move {
            if tokio::time::timeout(timeout, h.shutdown()).await.is_err() {
                tracing::warn!(source = %h.name, "shutdown timed out");
            }
        });
    futures::future::join_all(closing).await;
}

/// The source's effective settings (env expanded) and its fingerprint.
fn prepare(
    config: &LoadedConfig,
    name: &str,
    sc: &SourceConfig,
    plugins: &PluginSet,
) -> (String, Result<Value, String>) {
    let plugin = plugins.for_kind(&sc.kind);
    let settings = match plugin {
        None => Err(format!(
            "no loaded plugin serves kind {:?} (loaded kinds: {})",
            sc.kind,
            plugins.kinds().join(", ")
        )),
        Some(p) => super::settings::effective(sc, &format!("sources.{name}"), &p.manifest)
            .map_err(|e| format!("{}: {e}", config.file_label())),
    };
    let identity = json!({
        "kind": sc.kind,
        "enabled": sc.enabled,
        "plugin": plugin.map(|p| &p.manifest.name),
        "settings": settings.as_ref().ok(),
        "error": settings.as_ref().err(),
    });
    (content_hash(&identity), settings)
}
