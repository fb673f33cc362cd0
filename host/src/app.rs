//! The running host: config → plugins → sources → catalog → projection,
//! built once at start and handed out as parts ([`App`]). Surfaces and the
//! server read from here; nothing here knows about MCP or the surfaces.

mod live_config;

pub use live_config::{LiveConfig, ReloadOutcome, ReloadTargets};

use std::path::PathBuf;
use std::sync::PoisonError;
use std::sync::{Arc, RwLock};
use std::time::{Duration, Instant};

use wf_plugin_api::Catalog;

use crate::config::LoadedConfig;
use crate::plugins::{HostEvents, LoadPolicy, PluginSet, plugin_dirs};
use crate::projection::{NameRules, Naming, Projection, Projector, ResourceRoute, Timing};
use crate::sources::{Sources, desired_sources};
use crate::store::Store;
use crate::workflow::NodeSources;

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
    /// Plugin files whose pins are ignored for this start (`wf plugins
    /// --pin FILE` loads a changed, pinned file to pin it again).
    pub repin: Vec<PathBuf>,
    /// This replica's id, recorded with its runs and leases (`wf serve
    /// --replica-id`); default `hostname:pid:start`.
    pub replica_id: Option<String>,
}

/// The running host: the aggregate that builds its parts and hands them out.
/// Each part is owned by its own module with a narrow interface.
pub struct App {
    /// The config the host started with (server settings need a restart).
    pub config: LoadedConfig,
    /// The config now in force for sources and plugin folders, and reloads.
    pub live_config: Arc<LiveConfig>,
    pub plugins: Arc<RwLock<PluginSet>>,
    pub sources: Arc<Sources>,
    /// Every catalog under client-safe names, plus the host-local catalogs.
    pub projector: Arc<Projector>,
    /// Drafts, artifacts, deployments, runs.
    pub store: Arc<Store>,
    pub state_dir: PathBuf,
    pub started: Instant,
    /// What the MCP front holds open right now.
    pub front: Arc<FrontStats>,
    /// Resource subscriptions of downstream clients.
    pub subscriptions: Arc<crate::sources::Subscriptions>,
    /// Log messages of sources that belong to no call, for the MCP front.
    pub source_logs: Arc<crate::sources::SourceLogs>,
    /// Per-principal and per-client upstream sessions, and session handles.
    pub sessions: Arc<crate::sources::sessions::SessionTable>,
    /// The audit trail's writer (`[audit]`), fed by the call pipeline.
    pub audit: Arc<crate::audit::AuditLog>,
    /// The one call pipeline every use of a capability passes.
    pub pipeline: Arc<crate::pipeline::Pipeline>,
    /// The one poll of the files `wf serve` watches (config, policies, tools lock).
    pub file_watch: crate::file_watch::FileWatch,
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
    let level = log_level(opts);
    let threads = config.config.server.plugin_threads;
    if !(1..=wf_plugin_api::export::MAX_RUNTIME_THREADS).contains(&threads) {
        anyhow::bail!(
            "{}: server.plugin_threads = {threads}: must be between 1 and {}",
            config.file_label(),
            wf_plugin_api::export::MAX_RUNTIME_THREADS
        );
    }
    if let Some(n) = config.config.server.workers
        && !(1..=crate::config::MAX_WORKERS).contains(&n)
    {
        anyhow::bail!(
            "{}: server.workers = {n}: must be between 1 and {}",
            config.file_label(),
            crate::config::MAX_WORKERS
        );
    }
    if config.config.server.max_calls_per_client == 0 {
        anyhow::bail!(
            "{}: server.max_calls_per_client must be greater than 0",
            config.file_label()
        );
    }
    if let Some(first) =
        crate::config::plugin_table_problems(&config.file_label(), &config.config.plugins.plugin)
            .into_iter()
            .next()
    {
        anyhow::bail!(first);
    }
    let policy = LoadPolicy {
        allow_insecure: opts.allow_insecure_plugin_dir,
        runtime_threads: Some(threads),
        isolation: crate::plugins::isolation::IsolationPolicy::from_config(&config.config),
        state_dir: Some(state_dir(opts, &config)),
    };
    let lock = crate::plugins::pins::lock_path(&config.base_dir());
    let mut pins = crate::plugins::pins::Pins::load(&lock)?;
    for file in &opts.repin {
        pins.unpin(file);
    }
    let plugins = crate::plugins::load_plugins_pinned(&dirs, &events, level, policy, pins);
    Ok((config, plugins, events, rx))
}

/// The log filter when none is given: info, rmcp (which logs whole messages) at warn.
pub const DEFAULT_LOG_FILTER: &str = "info,rmcp=warn";

/// The most verbose level plugins should forward.
fn log_level(opts: &StartOptions) -> &str {
    if opts.log_level.is_empty() {
        DEFAULT_LOG_FILTER
    } else {
        &opts.log_level
    }
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

/// A server on PostgreSQL needs the key its replicas seal handles with
/// (server/handles.rs); `wf store migrate` and `wf run` do not.
fn require_handle_secret(config: &LoadedConfig) -> anyhow::Result<()> {
    let sc = &config.config.store;
    if sc.url.is_none() {
        return Ok(());
    }
    // Replicas seal their handles with one shared key (server/handles.rs).
    if sc.handle_secret.is_none() {
        anyhow::bail!(
            "{}: [store] url needs [store] handle_secret = \"${{VAR}}\": the key every replica seals task and session handles with (the same on every replica)",
            config.file_label()
        );
    }
    if sc.handle_secret().is_none_or(|s| s.len() < 16) {
        anyhow::bail!(
            "{}: [store] handle_secret is empty, unset in the environment or shorter than 16 characters",
            config.file_label()
        );
    }
    Ok(())
}

/// The store `[store]` names: PostgreSQL at `url` (`${VAR}` expanded), or
/// SQLite in the state directory. Migrated to this build's schema.
pub async fn open_store(
    config: &LoadedConfig,
    state_dir: &std::path::Path,
    replica_id: Option<&str>,
) -> anyhow::Result<Store> {
    let sc = &config.config.store;
    let leases = crate::store::LeaseTimes::new(
        Duration::from_millis(sc.lease_ttl_ms),
        Duration::from_millis(sc.heartbeat_ms),
    );
    let store = match &sc.url {
        Some(url) => {
            let lookup = |k: &str| std::env::var(k).ok();
            let url = crate::config::expand_env(
                &serde_json::Value::String(url.clone()),
                "store.url",
                &lookup,
            )
            .map_err(|e| anyhow::anyhow!("{}: {e}", config.file_label()))?;
            let url = url.as_str().unwrap_or_default();
            let ca_file = sc.ca_file.as_ref().map(|f| config.base_dir().join(f));
            Store::connect(
                url,
                sc.max_connections,
                sc.schema.as_deref(),
                ca_file.as_deref(),
            )
            .await
            .map_err(|e| anyhow::anyhow!("{}: [store] url: {e}", config.file_label()))?
        }
        None => Store::open(state_dir).map_err(|e| {
            anyhow::anyhow!("cannot open the database in {}: {e}", state_dir.display())
        })?,
    };
    let store = store.with_replica(replica_id, leases);
    tracing::info!(backend = store.backend(), at = %store.location(), replica = store.replica(), "store open");
    Ok(store)
}

/// The heartbeat: renews this replica's run leases, and ends the runs of
/// replicas whose leases expired. Runs this replica lost (its lease expired
/// while it was stalled) are announced on [`Store::stopped_runs`].
fn keep_leases(store: &Arc<Store>) {
    let store = Arc::downgrade(store);
    let beat = store
        .upgrade()
        .map(|s| s.lease_times().heartbeat)
        .unwrap_or(Duration::from_secs(5));
    tokio::spawn(async move {
        let mut tick = tokio::time::interval(beat);
        tick.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
        loop {
            tick.tick().await;
            let Some(store) = store.upgrade() else { return };
            if let Err(e) = store.heartbeat().await {
                tracing::warn!("run leases: {e}");
            }
        }
    });
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
        require_handle_secret(&config)?;
        let store = Arc::new(open_store(&config, &state_dir, opts.replica_id.as_deref()).await?);
        for id in store.mark_interrupted().await? {
            tracing::warn!(run = %id, "run was interrupted when the host stopped");
        }
        keep_leases(&store);
        let sources = Arc::new(Sources::new(Some(store.clone())));
        let desired = desired_sources(configured, &plugins);
        let sessions = crate::sources::sessions::SessionTable::new();
        sessions.configure(&desired);
        sources.apply(desired, &config, &plugins, &state_dir);
        let server = &config.config.server;
        let started = Instant::now();
        let projector = Arc::new(Projector::new(
            sources.clone(),
            NameRules {
                max_len: server.max_name_len.clamp(16, 64),
            },
            Timing {
                ready_by: started + Duration::from_millis(server.startup_grace_ms),
                live_list: Duration::from_millis(server.live_list_timeout_ms),
            },
        ));
        projector.set_naming(Naming::from_config(&config));
        let timeout = Duration::from_millis(server.discovery_timeout_ms);
        let subscriptions = Arc::new(crate::sources::Subscriptions::new(sources.clone()));
        let plugins = Arc::new(RwLock::new(plugins));
        let live_config = Arc::new(LiveConfig::new(
            config.clone(),
            ReloadTargets {
                file: opts.config.clone(),
                extra_plugin_dirs: opts.plugin_dirs.clone(),
                log_level: log_level(opts).to_string(),
                events,
                plugins: plugins.clone(),
                sources: sources.clone(),
                projector: projector.clone(),
                sessions: sessions.clone(),
                state_dir: state_dir.clone(),
                discovery_timeout: timeout,
            },
        ));
        let audit = crate::audit::AuditLog::start(
            &config.config.audit,
            store.clone(),
            &config.base_dir(),
            Some(store.replica().to_string()),
        );
        let app = Arc::new(Self {
            audit,
            config,
            live_config,
            plugins,
            sources,
            projector,
            store,
            state_dir,
            started,
            front: Arc::default(),
            subscriptions,
            source_logs: Arc::default(),
            sessions,
            pipeline: Arc::default(),
            file_watch: crate::file_watch::FileWatch::start(crate::file_watch::TICK),
        });
        // Workflow nodes and the planner name tools by source and original
        // name; the pipeline decides on the names clients know.
        let projector = app.projector.clone();
        app.pipeline.set_audit(app.audit.clone());
        app.pipeline
            .set_namer(Arc::new(move |source: &str, original: &str| {
                let proj = projector.projection();
                let t = proj
                    .tools
                    .iter()
                    .find(|t| t.source == source && t.original == original)?;
                Some(crate::pipeline::ToolFacts {
                    name: t.name.clone(),
                    annotations: t.item.extra.get("annotations").cloned(),
                })
            }));

        let sources = app.sources.clone();
        tokio::spawn(async move {
            sources.discover_all(sources.list(), timeout).await;
            crate::plugins::resident::after_start();
        });

        // A plugin saying its capabilities changed triggers a fresh discovery
        // of that source: one for all the changes already queued (a server
        // registering tools one by one says so once per tool; server-everything
        // sends five at once), since that discovery sees them all.
        let sources = app.sources.clone();
        let subscriptions = app.subscriptions.clone();
        let logs = app.source_logs.clone();
        tokio::spawn(async move {
            while let Some(first) = events_rx.recv().await {
                let mut changed: Vec<String> = Vec::new();
                let mut next = Some(first);
                while let Some(ev) = next {
                    tracing::debug!(plugin = %ev.plugin, event = ?ev.event, "plugin event");
                    if let wf_plugin_api::Event::ResourceUpdated { source, uri, lease } = &ev.event
                    {
                        subscriptions.updated(source, uri, lease.as_deref());
                    }
                    if let wf_plugin_api::Event::Log { .. } = ev.event {
                        crate::sources::SourceLog::forward(ev.event, &logs);
                    } else if let wf_plugin_api::Event::CapabilitiesChanged { source } = ev.event
                        && !changed.contains(&source)
                    {
                        changed.push(source);
                    }
                    next = events_rx.try_recv().ok();
                }
                for source in changed {
                    if let Some(entry) = sources.get(&source) {
                        sources.discover(&entry, timeout).await;
                    }
                }
            }
        });
        Ok(app)
    }

    /// Sets (replaces) a host-local source's capabilities.
    pub fn set_local(&self, name: &str, catalog: Catalog) {
        self.projector.set_local(name, catalog)
    }

    pub fn is_local(&self, name: &str) -> bool {
        self.projector.is_local(name)
    }

    /// The current projection (see [`Projector::projection`]).
    pub fn projection(&self) -> Arc<Projection> {
        self.projector.projection()
    }

    /// The projection once first discovery is done or the start grace is over.
    pub async fn projection_ready(&self) -> Arc<Projection> {
        self.projector.projection_ready().await
    }

    /// The projection to look tool `name` up in (see [`Projector::projection_for_tool`]).
    pub async fn projection_for_tool(&self, name: &str) -> Arc<Projection> {
        self.projector.projection_for_tool(name).await
    }

    /// The projection to look prompt `name` up in (see [`Projector::projection_for_prompt`]).
    pub async fn projection_for_prompt(&self, name: &str) -> Arc<Projection> {
        self.projector.projection_for_prompt(name).await
    }

    /// The projection with each source's live listings (see [`Projector::live_projection`]).
    pub async fn live_projection(&self) -> Arc<Projection> {
        self.projector.live_projection().await
    }

    /// Routes a resource read (see [`Projector::resource_route`]).
    pub async fn resource_route(&self, uri: &str) -> Option<ResourceRoute> {
        self.projector.resource_route(uri).await
    }

    /// What the workflow engine needs: the sources and the start grace.
    pub fn node_sources(&self) -> NodeSources {
        NodeSources {
            sources: self.sources.clone(),
            sessions: self.sessions.clone(),
            ready_by: self.projector.timing().ready_by,
            pipeline: self.pipeline.clone(),
        }
    }

    pub fn discovery_timeout(&self) -> Duration {
        Duration::from_millis(self.config.config.server.discovery_timeout_ms)
    }

    /// Re-reads the config file and applies it (see [`LiveConfig::reload`]).
    pub async fn reload(&self) -> ReloadOutcome {
        self.live_config.reload().await
    }

    /// Reloads whenever the config file changes (see [`LiveConfig::watch`]).
    pub fn watch_config(&self, debounce: Duration) {
        self.live_config.watch(&self.file_watch, debounce)
    }

    /// Re-reads the config file and applies it, then tells the other
    /// replicas to do the same with theirs (an operator's `reload`; the file
    /// watcher does not announce: each replica watches its own file).
    pub async fn reload_everywhere(&self) -> ReloadOutcome {
        let mut outcome = self.live_config.reload().await;
        if outcome.error.is_none() {
            outcome.replicas_told = self.store.announce_reload().await;
        }
        outcome
    }

    /// With several replicas, a reload announced by another one reloads this
    /// replica's own copy of the file (see [`Self::reload_everywhere`]).
    pub fn follow_replica_reloads(&self) {
        let Some(mut heard) = self.store.reload_requests() else {
            return;
        };
        let live = Arc::downgrade(&self.live_config);
        let me = self.store.replica().to_string();
        tokio::spawn(async move {
            loop {
                let by = match heard.recv().await {
                    Ok(by) => by,
                    Err(tokio::sync::broadcast::error::RecvError::Lagged(_)) => String::new(),
                    Err(tokio::sync::broadcast::error::RecvError::Closed) => return,
                };
                if by == me {
                    continue;
                }
                let Some(live) = live.upgrade() else { return };
                if by.is_empty() {
                    tracing::info!(
                        "reloading the config: a replica's announcement may have been missed"
                    );
                } else {
                    tracing::info!(by = %by, "reloading the config: replica {by} reloaded its own");
                }
                live.reload().await;
            }
        });
    }

    pub async fn shutdown(&self) {
        match self.store.interrupt_own().await {
            Ok(ids) if !ids.is_empty() => {
                tracing::warn!(runs = ?ids, "runs in progress were interrupted by the shutdown")
            }
            Err(e) => tracing::error!("cannot record interrupted runs: {e}"),
            _ => {}
        }
        self.pipeline.release_quotas().await;
        self.sources.shutdown(Duration::from_secs(5)).await;
        if !self.audit.flush(Duration::from_secs(2)).await {
            tracing::warn!("audit: records still unwritten at shutdown were lost");
        }
        crate::plugins::process::stop_all();
        self.plugins
            .write()
            .unwrap_or_else(PoisonError::into_inner)
            .remove_copies();
    }
}
