//! A host built in-process: the fake and std plugins linked in, an
//! in-memory store, sources from a config text, discovery done.

use std::path::Path;
use std::sync::Arc;
use std::time::{Duration, Instant};

use serde::Serialize;
use serde_json::{Value, json};
use wf_host::app::{App, StartOptions};
use wf_host::config::LoadedConfig;
use wf_host::plugins::{HostEvent, HostEvents, PluginSet};
use wf_host::sources::{ApplyReport, Sources, desired_sources};
use wf_host::store::{NodeRecord, RunRecord, Store};
use wf_host::workflow::{Engine, NodeSources, RunOrigin, Workflow};
use wf_plugin_api::export::module;
use wf_source_std::StdPlugin;

use crate::fake::FakePlugin;

/// How long a test waits for something that should take milliseconds.
pub const PATIENCE: Duration = Duration::from_secs(30);

/// Runs a test's future on a thread and runtime with roomy stacks: the
/// host's futures, composed into one test, outgrow a test thread's 2 MB in
/// a debug build.
pub fn block_on<F: std::future::Future<Output = ()> + Send + 'static>(f: F) {
    let done = std::thread::Builder::new()
        .stack_size(64 << 20)
        .spawn(move || {
            tokio::runtime::Builder::new_multi_thread()
                .worker_threads(2)
                .thread_stack_size(16 << 20)
                .enable_all()
                .build()
                .expect("runtime")
                .block_on(f)
        })
        .expect("test thread")
        .join();
    if let Err(panic) = done {
        std::panic::resume_unwind(panic);
    }
}

/// A status (string or enum) as the JSON and the database spell it.
pub fn text<T: Serialize>(status: &T) -> String {
    serde_json::to_value(status)
        .ok()
        .and_then(|v| v.as_str().map(str::to_string))
        .unwrap_or_default()
}

/// The fake and std plugins, as the loader would hold them.
pub fn plugins(events: &HostEvents) -> PluginSet {
    // In one process the plugins share the host's `tracing`: a subscriber
    // set first keeps them from installing their forwarder, which would
    // send the host's own events back to the host, forever.
    let _ = tracing_subscriber::fmt()
        .with_test_writer()
        .with_env_filter("warn")
        .try_init();
    let mut set = PluginSet::default();
    set.add_in_process(module::<FakePlugin>(), "in-process:fake", events, "warn")
        .expect("fake plugin");
    set.add_in_process(module::<StdPlugin>(), "in-process:std", events, "warn")
        .expect("std plugin");
    set
}

pub fn write_config(dir: &Path, toml: &str) -> LoadedConfig {
    let file = dir.join("wf.toml");
    std::fs::write(&file, toml).expect("config written");
    LoadedConfig::load(&file).expect("config parses")
}

pub struct TestHost {
    pub dir: tempfile::TempDir,
    pub plugins: PluginSet,
    pub sources: Arc<Sources>,
    pub store: Arc<Store>,
    /// The call pipeline the engine's nodes pass.
    pub pipeline: Arc<wf_host::pipeline::Pipeline>,
    _events: tokio::sync::mpsc::UnboundedReceiver<HostEvent>,
}

impl TestHost {
    /// Sources from `toml` (plus the plugins' default ones), discovered.
    pub async fn new(toml: &str) -> Self {
        let dir = tempfile::tempdir().expect("temp dir");
        let (events, rx) = HostEvents::channel();
        let plugins = plugins(&events);
        let store = Arc::new(Store::in_memory().expect("store"));
        let sources = Arc::new(Sources::new(Some(store.clone())));
        let host = Self {
            dir,
            plugins,
            sources,
            store,
            pipeline: Arc::default(),
            _events: rx,
        };
        host.apply(toml).await;
        host
    }

    /// Applies a new config text; discovers what was added or changed.
    pub async fn apply(&self, toml: &str) -> ApplyReport {
        let config = write_config(self.dir.path(), toml);
        let desired = desired_sources(config.sources().expect("sources"), &self.plugins);
        let (report, retired) =
            self.sources
                .apply(desired, &config, &self.plugins, self.dir.path());
        wf_host::sources::close(retired, Duration::from_secs(5)).await;
        let fresh = report
            .added
            .iter()
            .chain(&report.changed)
            .filter_map(|n| self.sources.get(n))
            .collect();
        self.sources.discover_all(fresh, PATIENCE).await;
        report
    }

    pub fn engine(&self) -> Arc<Engine> {
        let sources = NodeSources {
            sources: self.sources.clone(),
            sessions: wf_host::sources::sessions::SessionTable::new(),
            ready_by: Instant::now(),
            pipeline: self.pipeline.clone(),
        };
        Engine::new(sources, self.store.clone())
    }

    /// Runs `doc` to its end.
    pub async fn run(&self, doc: Value) -> (RunRecord, Vec<NodeRecord>) {
        let engine = self.engine();
        let wf = Workflow::from_value(&doc).expect("a workflow document");
        let id = engine
            .start(wf, json!({}), RunOrigin::Inline, "local", None)
            .await
            .expect("the run starts");
        let (run, nodes) = engine.wait(&id, PATIENCE).await.expect("run record");
        assert_ne!(text(&run.status), "running", "the run did not end in time");
        (run, nodes)
    }
}

/// The record of node `id`.
pub fn node<'a>(nodes: &'a [NodeRecord], id: &str) -> &'a NodeRecord {
    nodes
        .iter()
        .find(|n| n.node_id == id)
        .unwrap_or_else(|| panic!("no record of node {id:?}"))
}

/// A whole host started from `toml` (state in a temp dir), with the fake and
/// std plugins added in-process and applied by a reload.
pub async fn app(toml: &str) -> (Arc<App>, tempfile::TempDir) {
    let dir = tempfile::tempdir().expect("temp dir");
    write_config(dir.path(), toml);
    let opts = StartOptions {
        config: Some(dir.path().join("wf.toml")),
        state_dir: Some(dir.path().join("state")),
        log_level: "warn".into(),
        ..Default::default()
    };
    let app = App::start(&opts).await.expect("the host starts");
    {
        let (events, _) = HostEvents::channel();
        let mut set = app.plugins.write().unwrap();
        let fresh = plugins(&events);
        for p in fresh.loaded {
            set.loaded.push(p);
        }
    }
    let outcome = app.reload().await;
    assert_eq!(outcome.error, None);
    let all = app.sources.list();
    app.sources.discover_all(all, PATIENCE).await;
    (app, dir)
}
