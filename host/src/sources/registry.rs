//! The set of configured sources, their status and their last discovered
//! catalog. Discovery runs for all sources in parallel, each bounded in time;
//! a slow or dead source delays no other.

use std::collections::BTreeMap;
use std::path::Path;
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant, SystemTime};

use abi_stable::std_types::RString;
use serde::Serialize;
use serde_json::Value;
use tokio::sync::watch;
use wf_plugin_api::{Catalog, PluginError, SourceSpec};

use super::handle::SourceHandle;
use crate::config::{LoadedConfig, SourceConfig, expand_env};
use crate::plugins::PluginSet;

#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
#[serde(rename_all = "snake_case")]
pub enum SourceState {
    /// Created; first discovery not finished.
    Pending,
    Ready,
    /// Could not be created, or its last discovery failed.
    Failed,
    Disabled,
}

#[derive(Debug, Clone, Serialize)]
pub struct SourceStatus {
    pub state: SourceState,
    pub error: Option<String>,
    #[serde(skip)]
    pub catalog: Option<Arc<Catalog>>,
    pub discovered_at: Option<SystemTime>,
    pub discovery_ms: Option<u64>,
}

pub struct SourceEntry {
    pub name: String,
    pub kind: String,
    pub plugin: Option<String>,
    pub handle: Option<Arc<SourceHandle>>,
    status: Mutex<SourceStatus>,
}

impl SourceEntry {
    fn new(
        name: &str,
        kind: &str,
        plugin: Option<String>,
        handle: Option<SourceHandle>,
        state: SourceState,
        error: Option<String>,
    ) -> Self {
        Self {
            name: name.into(),
            kind: kind.into(),
            plugin,
            handle: handle.map(Arc::new),
            status: Mutex::new(SourceStatus {
                state,
                error,
                catalog: None,
                discovered_at: None,
                discovery_ms: None,
            }),
        }
    }
    pub fn status(&self) -> SourceStatus {
        self.status.lock().unwrap().clone()
    }
    pub fn catalog(&self) -> Option<Arc<Catalog>> {
        self.status.lock().unwrap().catalog.clone()
    }
}

/// All sources. Cheap to share; `changes()` ticks whenever a catalog changes.
pub struct Sources {
    entries: BTreeMap<String, Arc<SourceEntry>>,
    version: watch::Sender<u64>,
    /// Sources whose first discovery has not finished.
    pending: watch::Sender<usize>,
}

impl Sources {
    /// Creates every configured source plus the plugins' default sources.
    /// Problems (unknown kind, bad settings, failing constructor) are kept
    /// in the source's status; they never stop the others.
    pub fn create(
        config: &LoadedConfig,
        configured: BTreeMap<String, SourceConfig>,
        plugins: &PluginSet,
        state_dir: &Path,
    ) -> Self {
        let mut all = configured;
        for plugin in &plugins.loaded {
            for d in &plugin.manifest.default_sources {
                all.entry(d.name.clone()).or_insert_with(|| SourceConfig {
                    kind: d.kind.clone(),
                    enabled: true,
                    settings: d.config.as_object().cloned().unwrap_or_default(),
                });
            }
        }
        let mut entries = BTreeMap::new();
        for (name, sc) in all {
            let entry = create_one(config, &name, &sc, plugins, state_dir);
            if let Some(e) = &entry.status().error {
                tracing::warn!(source = %name, "{e}");
            }
            entries.insert(name, Arc::new(entry));
        }
        let pending = entries
            .values()
            .filter(|e| e.status().state == SourceState::Pending)
            .count();
        Self {
            entries,
            version: watch::channel(0).0,
            pending: watch::channel(pending).0,
        }
    }

    pub fn get(&self, name: &str) -> Option<&Arc<SourceEntry>> {
        self.entries.get(name)
    }

    pub fn iter(&self) -> impl Iterator<Item = &Arc<SourceEntry>> {
        self.entries.values()
    }

    /// Marks the catalog as changed (e.g. a host-local capability was added).
    pub fn touch(&self) {
        self.version.send_modify(|v| *v += 1);
    }

    /// Ticks each time some source's catalog changes.
    pub fn changes(&self) -> watch::Receiver<u64> {
        self.version.subscribe()
    }

    /// Waits until every source finished its first discovery, or `deadline`.
    pub async fn wait_first_discovery(&self, deadline: Instant) {
        let mut rx = self.pending.subscribe();
        let _ = tokio::time::timeout_at(deadline.into(), rx.wait_for(|n| *n == 0)).await;
    }

    /// Discovers every source in parallel, each bounded by `timeout`. Returns
    /// when all have finished; the catalog of each is published as it arrives.
    pub async fn discover_all(self: &Arc<Self>, timeout: Duration) {
        let tasks: Vec<_> = self
            .entries
            .values()
            .filter(|e| e.handle.is_some())
            .map(|e| {
                let (this, e) = (self.clone(), e.clone());
                tokio::spawn(async move { this.discover(&e, timeout).await })
            })
            .collect();
        for t in tasks {
            let _ = t.await;
        }
    }

    /// One-shot discovery of one source.
    pub async fn discover(&self, entry: &SourceEntry, timeout: Duration) {
        let Some(handle) = &entry.handle else { return };
        let started = Instant::now();
        let result = match tokio::time::timeout(timeout, handle.catalog()).await {
            Ok(r) => r.map_err(|e| e.error.to_string()),
            Err(_) => Err(format!(
                "discovery timed out after {} ms",
                timeout.as_millis()
            )),
        };
        let elapsed = started.elapsed().as_millis() as u64;
        let was_pending;
        {
            let mut st = entry.status.lock().unwrap();
            was_pending = st.state == SourceState::Pending;
            st.discovery_ms = Some(elapsed);
            match result {
                Ok(catalog) => {
                    tracing::info!(source = %entry.name, tools = catalog.tools.len(), ms = elapsed, "discovered");
                    st.state = SourceState::Ready;
                    st.error = None;
                    st.catalog = Some(Arc::new(catalog));
                    st.discovered_at = Some(SystemTime::now());
                }
                Err(e) => {
                    tracing::warn!(source = %entry.name, "discovery failed: {e}");
                    st.state = SourceState::Failed;
                    st.error = Some(format!("discovery failed: {e}"));
                }
            }
        }
        self.version.send_modify(|v| *v += 1);
        if was_pending {
            self.pending.send_modify(|n| *n = n.saturating_sub(1));
        }
    }

    /// Closes every source (child processes, sessions), each bounded in time.
    pub async fn shutdown(&self, timeout: Duration) {
        let closing = self
            .entries
            .values()
            .filter_map(|e| e.handle.clone())
            .map(|h| async move {
                if tokio::time::timeout(timeout, h.shutdown()).await.is_err() {
                    tracing::warn!(source = %h.name, "shutdown timed out");
                }
            });
        futures::future::join_all(closing).await;
    }
}

fn create_one(
    config: &LoadedConfig,
    name: &str,
    sc: &SourceConfig,
    plugins: &PluginSet,
    state_dir: &Path,
) -> SourceEntry {
    let failed = |plugin: Option<String>, msg: String| {
        SourceEntry::new(name, &sc.kind, plugin, None, SourceState::Failed, Some(msg))
    };
    if !sc.enabled {
        return SourceEntry::new(name, &sc.kind, None, None, SourceState::Disabled, None);
    }
    let Some(plugin) = plugins.for_kind(&sc.kind) else {
        return failed(
            None,
            format!(
                "no loaded plugin serves kind {:?} (loaded kinds: {})",
                sc.kind,
                plugins.kinds().join(", ")
            ),
        );
    };
    let pname = Some(plugin.manifest.name.clone());
    let lookup = |k: &str| std::env::var(k).ok();
    let settings = match expand_env(
        &Value::Object(sc.settings.clone()),
        &format!("sources.{name}"),
        &lookup,
    ) {
        Ok(v) => v,
        Err(e) => return failed(pname, format!("{}: {e}", config.file_label())),
    };
    let data_dir = state_dir.join("sources").join(name);
    if let Err(e) = std::fs::create_dir_all(&data_dir) {
        return failed(
            pname,
            format!("cannot create data dir {}: {e}", data_dir.display()),
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
            SourceEntry::new(
                name,
                &sc.kind,
                pname,
                Some(handle),
                SourceState::Pending,
                None,
            )
        }
        Err(e) => failed(
            pname,
            format!(
                "could not be created: {}",
                PluginError::from_json(e.as_str())
            ),
        ),
    }
}
