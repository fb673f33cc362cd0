//! The running host: config → plugins → sources → catalog → projection.
//! Every surface and server reads from here; nothing here knows about MCP.

use std::path::PathBuf;
use std::sync::{Arc, Mutex, RwLock};
use std::time::{Duration, Instant};

use wf_plugin_api::Catalog;

use crate::catalog::Snapshot;
use crate::config::LoadedConfig;
use crate::plugins::{HostEvents, LoadPolicy, PluginSet, load_plugins, plugin_dirs};
use crate::sources::{ApplyReport, Sources, desired_sources};
use crate::store::Store;
use crate::surfaces::proxy::{NameRules, Projection};

/// The outcome of a reload (also shown by the admin status).
#[derive(Debug, Clone, Default, serde::Serialize)]
pub struct ReloadOutcome {
    /// When (ms since the epoch).
    pub at: i64,
    /// Why the file was refused; the running configuration stayed in force.
    pub error: Option<String>,
    pub sources: ApplyReport,
    /// Plugin files loaded by this reload.
    pub plugins_loaded: Vec<String>,
    /// Loaded plugin files that changed on disk: they take effect after a restart.
    pub restart_needed: Vec<String>,
}

/// What the CLI hands to [`App::start`].
#[derive(Debug, Clone, Default)]
pub struct StartOptions {
    pub config: Option<PathBuf>,
    pub plugin_dirs: Vec<PathBuf>,
    pub state_dir: Option<PathBuf>,
    /// The most verbose level plugins should forward.
    pub log_level: String,
    /// Load from plugin folders and files other users can write (warned).
    pub allow_insecure_plugin_dir: bool,
}

pub struct App {
    /// The config the host started with (server settings need a restart).
    pub config: LoadedConfig,
    /// The config now in force for sources and plugin folders (changes on reload).
    pub live_config: Mutex<LoadedConfig>,
    pub plugins: RwLock<PluginSet>,
    options: StartOptions,
    events: HostEvents,
    /// The outcome of the last reload.
    pub last_reload: Mutex<Option<ReloadOutcome>>,
    reloading: tokio::sync::Mutex<()>,
    pub sources: Arc<Sources>,
    pub state_dir: PathBuf,
    pub rules: NameRules,
    pub started: Instant,
    /// Drafts, artifacts, deployments, runs.
    pub store: Arc<Store>,
    /// Capabilities the host itself serves (the planner's tools, deployments),
    /// by source name; projected beside the plugins' sources.
    locals: Mutex<Vec<(String, Arc<Catalog>)>>,
    projection: Mutex<(u64, Arc<Projection>)>,
    /// The last projection that included session-scoped listings.
    live: Mutex<Option<Arc<Projection>>>,
    versions: tokio::sync::watch::Receiver<u64>,
    /// What the MCP front holds open right now.
    pub front: Arc<FrontStats>,
    /// Per-principal and per-client upstream sessions, and session handles.
    pub sessions: Arc<crate::sources::sessions::SessionTable>,
}

/// Live counts of what the MCP front holds open, for the admin `status` tool.
#[derive(Debug, Default)]
pub struct FrontStats {
    pub http_connections: std::sync::atomic::AtomicUsize,
    pub http_sessions: std::sync::atomic::AtomicUsize,
    /// Tasks following list changes for a connected client.
    pub list_followers: std::sync::atomic::AtomicUsize,
}

/// Loads the config (or the embedded default) and the plugins: what `wf
/// plugins` and `wf check` need, without creating sources.
pub fn load_config_and_plugins(
    opts: &StartOptions,
) -> anyhow::Result<(
    LoadedConfig,
    PluginSet,
    HostEvents,
    tokio::sync::mpsc::UnboundedReceiver<crate::plugins::HostEvent>,
)> {
    let config = LoadedConfig::open(opts.config.as_deref())?;
    let dirs = plugin_dirs(&config, &opts.plugin_dirs);
    let (events, rx) = HostEvents::channel();
    let level = if opts.log_level.is_empty() {
        "info"
    } else {
        &opts.log_level
    };
    let policy = LoadPolicy {
        allow_insecure: opts.allow_insecure_plugin_dir,
    };
    let plugins = load_plugins(&dirs, &events, level, policy);
    Ok((config, plugins, events, rx))
}

/// The state directory: `--state-dir`, else the config's `server.state_dir`,
/// else `$XDG_STATE_HOME/wf` or `~/.local/state/wf`.
pub fn state_dir(opts: &StartOptions, config: &LoadedConfig) -> PathBuf {
    if let Some(d) = &opts.state_dir {
        return d.clone();
    }
    if let Some(d) = &config.config.server.state_dir {
        return config.base_dir().join(d);
    }
    if let Some(x) = std::env::var_os("XDG_STATE_HOME") {
        return PathBuf::from(x).join("wf");
    }
    match std::env::var_os("HOME") {
        Some(h) => PathBuf::from(h).join(".local/state/wf"),
        None => std::env::temp_dir().join("wf-state"),
    }
}

impl App {
    /// Loads everything and starts discovery in the background; returns at
    /// once (a slow upstream never delays start).
    pub async fn start(opts: &StartOptions) -> anyhow::Result<Arc<Self>> {
        let (config, mut plugins, events, mut events_rx) = load_config_and_plugins(opts)?;
        let configured = config.sources()?;
        let state_dir = state_dir(opts, &config);
        plugins.set_state_dir(&state_dir);
        std::fs::create_dir_all(&state_dir)
            .map_err(|e| anyhow::anyhow!("cannot create state dir {}: {e}", state_dir.display()))?;
        let store = Arc::new(Store::open(&state_dir).map_err(|e| {
            anyhow::anyhow!("cannot open the database in {}: {e}", state_dir.display())
        })?);
        for id in store.mark_interrupted()? {
            tracing::warn!(run = %id, "run was interrupted when the host stopped");
        }
        let sources = Arc::new(Sources::new(Some(store.clone())));
        let desired = desired_sources(configured, &plugins);
        let sessions = crate::sources::sessions::SessionTable::new();
        sessions.configure(&desired);
        sources.apply(desired, &config, &plugins, &state_dir);
        let rules = NameRules {
            max_len: config.config.server.max_name_len.clamp(16, 64),
        };
        let versions = sources.changes();
        let app = Arc::new(Self {
            live_config: Mutex::new(config.clone()),
            config,
            plugins: RwLock::new(plugins),
            options: opts.clone(),
            events,
            last_reload: Mutex::new(None),
            reloading: tokio::sync::Mutex::new(()),
            sources,
            state_dir,
            rules,
            started: Instant::now(),
            store,
            locals: Mutex::new(Vec::new()),
            projection: Mutex::new((u64::MAX, Arc::new(Projection::default()))),
            live: Mutex::new(None),
            versions,
            front: Arc::default(),
            sessions,
        });

        let timeout = Duration::from_millis(app.config.config.server.discovery_timeout_ms);
        let sources = app.sources.clone();
        tokio::spawn(async move { sources.discover_all(sources.list(), timeout).await });

        // A plugin saying its capabilities changed triggers a fresh discovery of that source.
        let sources = app.sources.clone();
        tokio::spawn(async move {
            while let Some(ev) = events_rx.recv().await {
                tracing::debug!(plugin = %ev.plugin, event = ?ev.event, "plugin event");
                if let wf_plugin_api::Event::CapabilitiesChanged { source } = ev.event
                    && let Some(entry) = sources.get(&source)
                {
                    sources.discover(&entry, timeout).await;
                }
            }
        });
        Ok(app)
    }

    /// Sets (replaces) a host-local source's capabilities.
    pub fn set_local(&self, name: &str, catalog: Catalog) {
        {
            let mut locals = self.locals.lock().unwrap();
            locals.retain(|(n, _)| n != name);
            locals.push((name.to_string(), Arc::new(catalog)));
            locals.sort_by(|a, b| a.0.cmp(&b.0));
        }
        self.sources.touch();
    }

    pub fn is_local(&self, name: &str) -> bool {
        self.locals.lock().unwrap().iter().any(|(n, _)| n == name)
    }

    /// The plugin sources' catalogs plus the host-local ones.
    fn snapshot(&self) -> Snapshot {
        let mut s = Snapshot::take(&self.sources);
        s.sources
            .extend(self.locals.lock().unwrap().iter().cloned());
        s.sources.sort_by(|a, b| a.0.cmp(&b.0));
        s
    }

    /// The current projection, rebuilt when a catalog changed since the last call.
    pub fn projection(&self) -> Arc<Projection> {
        let version = *self.versions.borrow();
        let mut cached = self.projection.lock().unwrap();
        if cached.0 != version {
            let snapshot = self.snapshot();
            *cached = (version, Arc::new(Projection::build(&snapshot, self.rules)));
        }
        cached.1.clone()
    }

    /// Like [`Self::projection`], but right after start waits (bounded by
    /// `server.startup_grace_ms`) for first discovery, so a client's first
    /// list is complete whenever the upstreams are quick.
    pub async fn projection_ready(&self) -> Arc<Projection> {
        let grace = Duration::from_millis(self.config.config.server.startup_grace_ms);
        self.sources
            .wait_first_discovery(self.started + grace)
            .await;
        self.projection()
    }

    /// A projection whose resources, templates and prompts are what each
    /// source's live session lists now (they can be session-scoped, e.g. a
    /// resource a tool call just created). Tools stay as discovered. A
    /// source that does not answer in time keeps its discovered listings.
    pub async fn live_projection(&self) -> Arc<Projection> {
        self.projection_ready().await;
        let mut snapshot = self.snapshot();
        let timeout = Duration::from_millis(self.config.config.server.live_list_timeout_ms);
        let lists = snapshot.sources.iter().map(|(name, _)| {
            let handle = self.sources.get(name).and_then(|e| e.handle.clone());
            async move {
                let handle = handle?;
                let (r, t, p) = tokio::time::timeout(timeout, async {
                    tokio::join!(
                        handle.list_resources(),
                        handle.list_resource_templates(),
                        handle.list_prompts()
                    )
                })
                .await
                .ok()?;
                Some((r.ok(), t.ok(), p.ok()))
            }
        });
        let lists = futures::future::join_all(lists).await;
        for ((_, catalog), live) in snapshot.sources.iter_mut().zip(lists) {
            let Some((resources, templates, prompts)) = live else {
                continue;
            };
            let c = Arc::make_mut(catalog);
            if let Some(r) = resources {
                c.resources = r;
            }
            if let Some(t) = templates {
                c.resource_templates = t;
            }
            if let Some(p) = prompts {
                c.prompts = p;
            }
            // Live listings are screened like discovered ones.
            let (listed, _) = crate::catalog::screen(Catalog {
                prompts: std::mem::take(&mut c.prompts),
                resources: std::mem::take(&mut c.resources),
                resource_templates: std::mem::take(&mut c.resource_templates),
                ..Catalog::default()
            });
            (c.prompts, c.resources, c.resource_templates) =
                (listed.prompts, listed.resources, listed.resource_templates);
        }
        let p = Arc::new(Projection::build(&snapshot, self.rules));
        *self.live.lock().unwrap() = Some(p.clone());
        p
    }

    /// Routes a resource read: the discovered projection, else the last live
    /// one, else a fresh live listing.
    pub async fn resource_route(&self, uri: &str) -> Option<crate::surfaces::proxy::ResourceRoute> {
        if let Some(r) = self.projection_ready().await.resource_route(uri) {
            return Some(r);
        }
        let last = self.live.lock().unwrap().clone();
        if let Some(r) = last.and_then(|p| p.resource_route(uri)) {
            return Some(r);
        }
        self.live_projection().await.resource_route(uri)
    }

    pub fn discovery_timeout(&self) -> Duration {
        Duration::from_millis(self.config.config.server.discovery_timeout_ms)
    }

    /// Re-reads the config file and applies it: new plugin files are loaded,
    /// unchanged sources keep their instance (and upstream sessions), changed
    /// ones are replaced, removed ones closed, new and changed ones discovered.
    /// An invalid file changes nothing; the error is kept in `last_reload`.
    pub async fn reload(&self) -> ReloadOutcome {
        // One reload at a time: the watcher and the admin tool must not
        // interleave reading and applying the file.
        let _one = self.reloading.lock().await;
        let outcome = self.try_reload().await;
        match &outcome.error {
            None => {
                tracing::info!(added = ?outcome.sources.added, changed = ?outcome.sources.changed, removed = ?outcome.sources.removed, "config reloaded")
            }
            Some(e) => tracing::error!(
                "config reload refused; the running configuration stays in force: {e}"
            ),
        }
        *self.last_reload.lock().unwrap() = Some(outcome.clone());
        outcome
    }

    async fn try_reload(&self) -> ReloadOutcome {
        let mut outcome = ReloadOutcome {
            at: crate::store::now_ms(),
            ..Default::default()
        };
        let config = match LoadedConfig::open(self.options.config.as_deref()) {
            Ok(c) => c,
            Err(e) => {
                outcome.error = Some(e.to_string());
                return outcome;
            }
        };
        let configured = match config.sources() {
            Ok(s) => s,
            Err(e) => {
                outcome.error = Some(e.to_string());
                return outcome;
            }
        };
        // New plugin files are loaded; loaded ones are never unloaded.
        let dirs = plugin_dirs(&config, &self.options.plugin_dirs);
        let level = if self.options.log_level.is_empty() {
            "info"
        } else {
            &self.options.log_level
        };
        {
            let mut plugins = self.plugins.write().unwrap();
            outcome.plugins_loaded = plugins.load_new(&dirs, &self.events, level);
            outcome.restart_needed = plugins.changed_files();
        }
        let desired = {
            let plugins = self.plugins.read().unwrap();
            desired_sources(configured, &plugins)
        };
        self.sessions.configure(&desired);
        let (report, retired) = {
            let plugins = self.plugins.read().unwrap();
            self.sources
                .apply(desired, &config, &plugins, &self.state_dir)
        };
        *self.live_config.lock().unwrap() = config;
        crate::sources::close(retired, Duration::from_secs(5)).await;
        let fresh: Vec<_> = report
            .added
            .iter()
            .chain(&report.changed)
            .filter_map(|n| self.sources.get(n))
            .collect();
        let sources = self.sources.clone();
        let timeout = self.discovery_timeout();
        tokio::spawn(async move { sources.discover_all(fresh, timeout).await });
        outcome.sources = report;
        outcome
    }

    /// Watches the config file and reloads after it changed and then stayed
    /// the same for `debounce` (editors write in several steps).
    pub fn watch_config(self: &Arc<Self>, debounce: Duration) {
        let Some(path) = self.config.file.clone() else {
            return;
        };
        let app = Arc::downgrade(self);
        tokio::spawn(async move {
            let stamp = |p: &std::path::Path| {
                std::fs::metadata(p)
                    .ok()
                    .map(|m| (m.len(), m.modified().ok()))
            };
            let mut seen = stamp(&path);
            loop {
                tokio::time::sleep(Duration::from_millis(200)).await;
                let now = stamp(&path);
                if now == seen {
                    continue;
                }
                // Changed: wait until it holds still.
                let mut settled = now;
                loop {
                    tokio::time::sleep(debounce).await;
                    let again = stamp(&path);
                    if again == settled {
                        break;
                    }
                    settled = again;
                }
                seen = settled;
                let Some(app) = app.upgrade() else { return };
                tracing::info!(file = %path.display(), "config file changed; reloading");
                app.reload().await;
            }
        });
    }

    pub async fn shutdown(&self) {
        match self.store.interrupt_own() {
            Ok(ids) if !ids.is_empty() => {
                tracing::warn!(runs = ?ids, "runs in progress were interrupted by the shutdown")
            }
            Err(e) => tracing::error!("cannot record interrupted runs: {e}"),
            _ => {}
        }
        self.sources.shutdown(Duration::from_secs(5)).await;
        self.plugins.write().unwrap().remove_copies();
    }
}
