//! The config in force for sources and plugin folders, and how it changes:
//! a reload re-reads the file and applies it to the plugin set and the
//! sources; a watcher reloads when the file changed. Server settings are
//! read once at start (`App::config`) and need a restart, except what a
//! [`ReloadHook`] applies (static tokens, tool lists, OAuth groups).

use std::path::PathBuf;
use std::sync::PoisonError;
use std::sync::{Arc, Mutex, RwLock};
use std::time::Duration;

use crate::clock::now_ms;
use crate::config::LoadedConfig;
use crate::file_watch::{self, FileWatch, Watch};
use crate::plugins::{HostEvents, PluginSet, plugin_dirs};
use crate::projection::{Naming, Projector};
use crate::sources::{ApplyReport, Sources, desired_sources};

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
    /// Loaded plugin files that changed on disk, and plugins whose isolation
    /// changed: they take effect after a restart.
    pub restart_needed: Vec<String>,
    /// Plugin children stopped or restarted by this reload.
    pub plugin_children: crate::plugins::children::Outcome,
    /// The other replicas were told to reload too (an admin `reload` with
    /// several replicas on PostgreSQL).
    #[serde(skip_serializing_if = "std::ops::Not::not")]
    pub replicas_told: bool,
}

/// What a reload needs besides the file: where to find it and its plugins,
/// and the parts it applies the result to.
pub struct ReloadTargets {
    /// The config file (None: the embedded default, nothing to reload).
    pub file: Option<PathBuf>,
    /// `--plugin-dir` folders given on the command line.
    pub extra_plugin_dirs: Vec<PathBuf>,
    /// The most verbose level plugins should forward.
    pub log_level: String,
    pub events: HostEvents,
    pub plugins: Arc<RwLock<PluginSet>>,
    pub sources: Arc<Sources>,
    /// Told how names are prefixed by the config in force.
    pub projector: Arc<Projector>,
    /// Told the session settings of the sources in force.
    pub sessions: Arc<crate::sources::sessions::SessionTable>,
    pub state_dir: PathBuf,
    pub discovery_timeout: Duration,
}

/// Something else a reload puts in force (the HTTP front's tokens, the
/// tool lists): checks the new config and returns what applies it, or why
/// the file is refused (then nothing of it applies).
pub type ReloadHook =
    Box<dyn Fn(&LoadedConfig) -> Result<Box<dyn FnOnce() + Send>, String> + Send + Sync>;

/// The config now in force, the last reload's outcome, and the reload itself.
pub struct LiveConfig {
    current: Mutex<LoadedConfig>,
    last_reload: Mutex<Option<ReloadOutcome>>,
    /// One reload at a time: the watcher and the admin tool must not
    /// interleave reading and applying the file.
    reloading: tokio::sync::Mutex<()>,
    targets: ReloadTargets,
    hooks: Mutex<Vec<ReloadHook>>,
}

impl LiveConfig {
    pub fn new(config: LoadedConfig, targets: ReloadTargets) -> Self {
        Self {
            current: Mutex::new(config),
            last_reload: Mutex::new(None),
            reloading: tokio::sync::Mutex::new(()),
            targets,
            hooks: Mutex::new(Vec::new()),
        }
    }

    /// The config now in force, a copy of it whole.
    pub fn current(&self) -> LoadedConfig {
        self.with(LoadedConfig::clone)
    }

    /// `f` of the config now in force, without copying it: for what asks
    /// often (the policy files' watch, at every tick of the host's poll).
    pub fn with<R>(&self, f: impl FnOnce(&LoadedConfig) -> R) -> R {
        f(&self.current.lock().unwrap_or_else(PoisonError::into_inner))
    }

    /// Runs `hook` at every reload from now on (see `ReloadHook`).
    pub fn on_reload(&self, hook: ReloadHook) {
        self.hooks
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .push(hook);
    }

    /// The outcome of the last reload, if any.
    pub fn last_reload(&self) -> Option<ReloadOutcome> {
        self.last_reload
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .clone()
    }

    /// Re-reads the config file and applies it: new plugin files are loaded,
    /// unchanged sources keep their instance (and upstream sessions), changed
    /// ones are replaced, removed ones closed, new and changed ones discovered.
    /// An invalid file changes nothing; the error is kept in `last_reload`.
    pub async fn reload(&self) -> ReloadOutcome {
        let _one = self.reloading.lock().await;
        let outcome = self.try_reload().await;
        crate::telemetry::metrics::reload(outcome.error.is_none());
        match &outcome.error {
            None => {
                tracing::info!(added = ?outcome.sources.added, changed = ?outcome.sources.changed, removed = ?outcome.sources.removed, "config reloaded")
            }
            Some(e) => tracing::error!(
                "config reload refused; the running configuration stays in force: {e}"
            ),
        }
        *self
            .last_reload
            .lock()
            .unwrap_or_else(PoisonError::into_inner) = Some(outcome.clone());
        outcome
    }

    async fn try_reload(&self) -> ReloadOutcome {
        let t = &self.targets;
        let mut outcome = ReloadOutcome {
            at: now_ms(),
            ..Default::default()
        };
        let config = match LoadedConfig::open(t.file.as_deref()) {
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
        if let Some(first) = crate::config::plugin_table_problems(
            &config.file_label(),
            &config.config.plugins.plugin,
        )
        .into_iter()
        .next()
        {
            outcome.error = Some(first);
            return outcome;
        }
        let applies = {
            let hooks = self.hooks.lock().unwrap_or_else(PoisonError::into_inner);
            let mut applies = Vec::with_capacity(hooks.len());
            for hook in hooks.iter() {
                match hook(&config) {
                    Ok(apply) => applies.push(apply),
                    Err(e) => {
                        outcome.error = Some(format!("{}: {e}", config.file_label()));
                        return outcome;
                    }
                }
            }
            applies
        };
        // New plugin files are loaded with the new `[plugins.<name>]` tables;
        // plugins in process are never unloaded, children of plugins whose
        // file is gone are stopped (`plugins::children`).
        let dirs = plugin_dirs(&config, &t.extra_plugin_dirs);
        let children = {
            let mut plugins = t.plugins.write().unwrap_or_else(PoisonError::into_inner);
            let policy = crate::plugins::isolation::IsolationPolicy::from_config(&config.config);
            let children = crate::plugins::children::adopt_policy(&mut plugins, policy);
            outcome.plugins_loaded = plugins.load_new(&dirs, &t.events, &t.log_level);
            outcome.restart_needed = plugins.changed_files();
            children
        };
        let (report, retired) = {
            let plugins = t.plugins.read().unwrap_or_else(PoisonError::into_inner);
            let desired = desired_sources(configured, &plugins);
            t.sessions.configure(&desired);
            t.sources.apply(desired, &config, &plugins, &t.state_dir)
        };
        self.targets
            .projector
            .set_naming(Naming::from_config(&config));
        *self.current.lock().unwrap_or_else(PoisonError::into_inner) = config;
        for apply in applies {
            apply();
        }
        crate::sources::close(retired, Duration::from_secs(5)).await;
        // Children: stop those left with no source, restart those whose
        // settings changed (their sources come back with a bumped epoch).
        let children = {
            let plugins = t.plugins.read().unwrap_or_else(PoisonError::into_inner);
            let running = t.sources.list();
            crate::plugins::children::plan(&plugins, children, |plugin| {
                running
                    .iter()
                    .any(|e| e.handle.is_some() && e.plugin.as_deref() == Some(plugin))
            })
        };
        outcome
            .restart_needed
            .extend(children.restart_needed.iter().cloned());
        outcome.plugin_children = children.carry_out().await;
        let fresh: Vec<_> = report
            .added
            .iter()
            .chain(&report.changed)
            .filter_map(|n| t.sources.get(n))
            .collect();
        let sources = t.sources.clone();
        let timeout = t.discovery_timeout;
        tokio::spawn(async move { sources.discover_all(fresh, timeout).await });
        outcome.sources = report;
        outcome
    }

    /// Watches the config file (on `watch`, the host's one poll) and
    /// reloads after it changed and then stayed the same for `debounce`
    /// (editors write in several steps).
    pub fn watch(self: &Arc<Self>, watch: &FileWatch, debounce: Duration) {
        let Some(path) = self.current().file else {
            return;
        };
        let (alive, this) = (Arc::downgrade(self), Arc::downgrade(self));
        let baseline = file_watch::seen(vec![path.clone()]);
        let file = path.clone();
        watch.add(Watch::new(
            Some(baseline),
            debounce,
            move || (alive.strong_count() > 0).then(|| vec![path.clone()]),
            move || {
                let this = this.upgrade()?;
                tracing::info!(file = %file.display(), "config file changed; reloading");
                Some(Box::pin(async move {
                    this.reload().await;
                }))
            },
        ));
    }
}
