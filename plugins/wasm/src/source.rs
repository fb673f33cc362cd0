//! A `wasm` source: one component, compiled once (or mapped from the
//! compiled-code cache) on first use, then one fresh instance per call,
//! at most `max_instances` at once.

use std::sync::Arc;
use std::sync::atomic::{AtomicU64, AtomicUsize, Ordering};
use std::time::{Duration, Instant};

use serde_json::{Map, Value, json};
use tokio::sync::{OnceCell, Semaphore};
use wasmtime::Store;
use wf_plugin_api::prelude::*;

use crate::bindings;
use crate::cache::{self, Origin};
use crate::convert;
use crate::engine::Runtime;
use crate::exports::Exports;
use crate::runtime::{self, Ctx};
use crate::settings::Settings;

/// The interface every component of this plugin exports (its version is
/// the WIT world's; `wf plugins` shows what each component was built for).
pub const GUEST_INTERFACE: &str = "wf:source/guest";

/// Calls that may wait for an instance, per allowed instance.
const QUEUE_PER_INSTANCE: usize = 8;

/// Extra time past `timeout_ms` for a call stuck in a host call (an HTTP
/// request) rather than in guest code, which the epoch deadline stops.
const HOST_GRACE: Duration = Duration::from_millis(500);

/// A component ready to instantiate.
struct Loaded {
    pre: bindings::SourcePre<Ctx>,
    exports: Exports,
    sha256: String,
    origin: Origin,
    load_ms: u64,
    interface: String,
    metadata: bindings::wf::source::types::Metadata,
    /// It imports WASI: each call's store gets a WASI context.
    wasi: bool,
}

#[derive(Default)]
struct Counts {
    calls: AtomicU64,
    traps: AtomicU64,
    deadlines: AtomicU64,
    memory: AtomicU64,
    busy: AtomicU64,
}

pub struct WasmSource {
    name: String,
    settings: Arc<Settings>,
    runtime: Arc<Runtime>,
    linker: Arc<wasmtime::component::Linker<Ctx>>,
    cache_dir: Option<std::path::PathBuf>,
    loaded: OnceCell<Result<Arc<Loaded>, String>>,
    slots: Semaphore,
    waiting: AtomicUsize,
    counts: Counts,
}

/// One operation of the guest interface.
enum Op {
    Catalog,
    CallTool(String, String),
    RunNode(String, String),
    ReadResource(String),
    GetPrompt(String, Vec<(String, String)>),
}

enum Out {
    Catalog(Catalog),
    Tool(CallResult),
    Node(Value),
    Resource(ReadResourceResult),
    Prompt(GetPromptResult),
}

impl WasmSource {
    pub fn new(
        name: String,
        settings: Settings,
        runtime: Arc<Runtime>,
        linker: Arc<wasmtime::component::Linker<Ctx>>,
        data_dir: &std::path::Path,
    ) -> Self {
        let cache_dir = settings.compiled_cache.then(|| data_dir.join("compiled"));
        let slots = Semaphore::new(settings.max_instances);
        WasmSource {
            name,
            settings: Arc::new(settings),
            runtime,
            linker,
            cache_dir,
            loaded: OnceCell::new(),
            slots,
            waiting: AtomicUsize::new(0),
            counts: Counts::default(),
        }
    }

    /// The component, compiled (or read from the cache) on first use, off
    /// the async threads; a failure is kept and reported by every call.
    async fn loaded(&self) -> Result<Arc<Loaded>, PluginError> {
        let result = self
            .loaded
            .get_or_init(|| async {
                let path = self.settings.path.clone();
                let pin = self.settings.sha256.clone();
                let engine = self.runtime.engine.clone();
                let linker = self.linker.clone();
                let dir = self.cache_dir.clone();
                let source = self.name.clone();
                let made = tokio::task::spawn_blocking(move || {
                    prepare(
                        &source,
                        &path,
                        pin.as_deref(),
                        &engine,
                        &linker,
                        dir.as_deref(),
                    )
                })
                .await
                .map_err(|e| format!("loading the component failed: {e}"))
                .and_then(|r| r);
                let Prepared {
                    pre,
                    sha256,
                    origin,
                    load_ms,
                    interface,
                    wasi,
                } = made?;
                // Who the component says it is (one instance, no caller),
                // and its exports checked once for every later instance.
                let mut store =
                    runtime::store(&self.runtime, &self.name, &self.settings, None, wasi)?;
                let described = async {
                    let inst = pre.instance_pre().instantiate_async(&mut store).await?;
                    let exports = Exports::checked(
                        pre.instance_pre().component(),
                        &interface,
                        &mut store,
                        &inst,
                    )?;
                    let (metadata,) = exports
                        .describe(&mut store, &inst)?
                        .call_async(&mut store, ())
                        .await?;
                    wasmtime::Result::<_>::Ok((exports, metadata))
                };
                let (exports, metadata) = tokio::time::timeout(
                    Duration::from_millis(self.settings.timeout_ms) + HOST_GRACE,
                    described,
                )
                .await
                .map_err(|_| "describe did not finish within timeout_ms".to_string())?
                .map_err(|e| self.trap_message(store.data(), &e))?;
                tracing::info!(
                    source = %self.name,
                    component = %self.settings.path.display(),
                    sha256 = %sha256,
                    compiled = origin == Origin::Compiled,
                    load_ms,
                    "wasm component ready"
                );
                Ok(Arc::new(Loaded {
                    pre,
                    exports,
                    sha256,
                    origin,
                    load_ms,
                    interface,
                    metadata,
                    wasi,
                }))
            })
            .await;
        result.clone().map_err(|e| {
            PluginError::invalid_config(format!(
                "sources.{}: {}: {e}",
                self.name,
                self.settings.path.display()
            ))
        })
    }

    /// Waits for an instance slot; refuses at once past the bounded queue.
    async fn admit(&self) -> Result<tokio::sync::SemaphorePermit<'_>, PluginError> {
        if let Ok(p) = self.slots.try_acquire() {
            return Ok(p);
        }
        let limit = self.settings.max_instances * QUEUE_PER_INSTANCE;
        if self.waiting.fetch_add(1, Ordering::AcqRel) >= limit {
            self.waiting.fetch_sub(1, Ordering::AcqRel);
            self.counts.busy.fetch_add(1, Ordering::Relaxed);
            return Err(PluginError::new(
                ErrorCode::Upstream,
                format!(
                    "source {} is busy: {} calls wait for one of its max_instances = {} instances",
                    self.name, limit, self.settings.max_instances
                ),
            ));
        }
        let permit = self.slots.acquire().await;
        self.waiting.fetch_sub(1, Ordering::AcqRel);
        permit.map_err(|_| PluginError::internal("the source is shutting down"))
    }

    /// Runs `op` in a fresh instance under the source's limits.
    async fn run(&self, op: Op, call: Option<CallContext>) -> Result<Out, PluginError> {
        let loaded = self.loaded().await?;
        let _slot = self.admit().await?;
        self.counts.calls.fetch_add(1, Ordering::Relaxed);
        let mut store =
            runtime::store(&self.runtime, &self.name, &self.settings, call, loaded.wasi)
                .map_err(PluginError::invalid_config)?;
        let limit = Duration::from_millis(self.settings.timeout_ms) + HOST_GRACE;
        let work = invoke(&loaded, &mut store, op);
        let outcome = tokio::time::timeout(limit, work).await;
        let data = store.data();
        data.flush_stdio();
        let outcome = match outcome {
            Ok(Ok(out)) => out,
            Ok(Err(trap)) => Err(self.trap_error(data, &trap)),
            Err(_) => {
                self.counts.deadlines.fetch_add(1, Ordering::Relaxed);
                Err(PluginError::new(
                    ErrorCode::Timeout,
                    format!(
                        "the component was stopped at its deadline (timeout_ms = {}) while waiting on the host",
                        self.settings.timeout_ms
                    ),
                )
                .with_data(stopped("deadline")))
            }
        };
        let out = outcome?;
        self.check_size(&out)?;
        Ok(out)
    }

    fn trap_message(&self, data: &Ctx, trap: &wasmtime::Error) -> String {
        if data.deadline_hit {
            format!(
                "the component was stopped at its CPU deadline (timeout_ms = {})",
                self.settings.timeout_ms
            )
        } else if data.limits.memory_hit {
            format!(
                "the component was stopped at its memory limit (memory_mb = {})",
                self.settings.memory_mb()
            )
        } else {
            format!("the component trapped: {}", trap_line(trap))
        }
    }

    fn trap_error(&self, data: &Ctx, trap: &wasmtime::Error) -> PluginError {
        let message = self.trap_message(data, trap);
        tracing::warn!(source = %self.name, "{message}");
        if data.deadline_hit {
            self.counts.deadlines.fetch_add(1, Ordering::Relaxed);
            PluginError::new(ErrorCode::Timeout, message).with_data(stopped("deadline"))
        } else if data.limits.memory_hit {
            self.counts.memory.fetch_add(1, Ordering::Relaxed);
            PluginError::failed(message).with_data(stopped("memory"))
        } else {
            self.counts.traps.fetch_add(1, Ordering::Relaxed);
            PluginError::failed(message).with_data(stopped("trap"))
        }
    }

    /// Refuses a result larger than `max_result_bytes` (as JSON).
    fn check_size(&self, out: &Out) -> Result<(), PluginError> {
        let size = match out {
            Out::Catalog(c) => json_len(c),
            Out::Tool(r) => json_len(r),
            Out::Node(v) => json_len(v),
            Out::Resource(r) => json_len(r),
            Out::Prompt(p) => json_len(p),
        };
        if size > self.settings.max_result_bytes {
            return Err(PluginError::failed(format!(
                "the component's result is {size} bytes, over max_result_bytes = {}",
                self.settings.max_result_bytes
            )));
        }
        Ok(())
    }
}

/// The error data of a call the host stopped: `{"stopped": why}` with why
/// `trap`, `memory` or `deadline` (`wf check --call` tells a crash from a
/// tool's own error by it).
fn stopped(why: &str) -> Value {
    json!({ "stopped": why })
}

/// The length of `v` as JSON, counted as it is written (nothing kept).
fn json_len<T: serde::Serialize>(v: &T) -> usize {
    struct Count(usize);
    impl std::io::Write for Count {
        fn write(&mut self, b: &[u8]) -> std::io::Result<usize> {
            self.0 = self.0.saturating_add(b.len());
            Ok(b.len())
        }
        fn flush(&mut self) -> std::io::Result<()> {
            Ok(())
        }
    }
    let mut n = Count(0);
    match serde_json::to_writer(&mut n, v) {
        Ok(()) => n.0,
        Err(_) => usize::MAX,
    }
}

/// What a trap was (wasmtime's own text puts a backtrace first).
fn trap_line(e: &wasmtime::Error) -> String {
    match e.downcast_ref::<wasmtime::Trap>() {
        Some(t) => t.to_string(),
        None => first_line(e),
    }
}

/// Compiles (or maps) the component and resolves its imports.
fn prepare(
    source: &str,
    path: &std::path::Path,
    pin: Option<&str>,
    engine: &wasmtime::Engine,
    linker: &wasmtime::component::Linker<Ctx>,
    cache_dir: Option<&std::path::Path>,
) -> Result<Prepared, String> {
    let started = Instant::now();
    let bytes = std::fs::read(path).map_err(|e| format!("cannot read it: {e}"))?;
    let sha256 = cache::sha256(&bytes);
    if let Some(pin) = pin
        && pin != sha256
    {
        return Err(format!(
            "sha256 mismatch: sources.{source}.sha256 pins {pin}, the file has {sha256}; refused"
        ));
    }
    let (component, origin) = cache::load(engine, &bytes, &sha256, cache_dir)?;
    let interface = component
        .component_type()
        .exports(engine)
        .map(|(name, _)| name.to_string())
        .find(|n| n.starts_with(GUEST_INTERFACE))
        .ok_or_else(|| {
            format!("not a wf source component: it exports no {GUEST_INTERFACE} (build it for the WIT world wf:source/source)")
        })?;
    fits_pool(&component)?;
    // Any WASI 0.2 interface, `wasi:http` among them (a WASI-free
    // component's calls skip building a WASI context).
    let wasi = component
        .component_type()
        .imports(engine)
        .any(|(name, _)| name.starts_with("wasi:"));
    let pre = linker
        .instantiate_pre(&component)
        .map_err(|e| format!("it imports what wf does not offer: {}", first_line(&e)))?;
    let pre = bindings::SourcePre::new(pre).map_err(|e| {
        format!(
            "it does not match the WIT world wf:source/source: {}",
            first_line(&e)
        )
    })?;
    Ok(Prepared {
        pre,
        sha256,
        origin,
        load_ms: started.elapsed().as_millis() as u64,
        interface,
        wasi,
    })
}

/// A compiled component, its imports resolved.
struct Prepared {
    pre: bindings::SourcePre<Ctx>,
    sha256: String,
    origin: Origin,
    load_ms: u64,
    interface: String,
    wasi: bool,
}

/// Refuses, when it is loaded, a component whose instance would not fit a
/// slot of its source's instance pool (rather than at every call).
fn fits_pool(component: &wasmtime::component::Component) -> Result<(), String> {
    use crate::engine::{MEMORIES_PER_INSTANCE, TABLE_ELEMENTS, TABLES_PER_INSTANCE};
    let Some(needs) = component.resources_required() else {
        return Ok(());
    };
    tracing::debug!(
        memories = needs.num_memories,
        tables = needs.num_tables,
        table_elements = ?needs.max_initial_table_size,
        "component resources"
    );
    let too_many = |what: &str, n: u32, max: u32| {
        format!("an instance of it holds {n} {what}, over the {max} wf's instance pool allows")
    };
    if needs.num_memories > MEMORIES_PER_INSTANCE {
        return Err(too_many(
            "linear memories",
            needs.num_memories,
            MEMORIES_PER_INSTANCE,
        ));
    }
    if needs.num_tables > TABLES_PER_INSTANCE {
        return Err(too_many("tables", needs.num_tables, TABLES_PER_INSTANCE));
    }
    if let Some(n) = needs.max_initial_table_size
        && n > TABLE_ELEMENTS as u64
    {
        return Err(format!(
            "a table of it starts with {n} elements, over the {TABLE_ELEMENTS} wf's instance pool allows"
        ));
    }
    Ok(())
}

fn first_line(e: &wasmtime::Error) -> String {
    format!("{e:#}")
        .lines()
        .next()
        .unwrap_or_default()
        .to_string()
}

/// Instantiates the component in `store` and runs `op`: the outer error is
/// a trap (or an instantiation failure), the inner one the component's own.
async fn invoke(
    loaded: &Loaded,
    store: &mut Store<Ctx>,
    op: Op,
) -> wasmtime::Result<Result<Out, PluginError>> {
    let inst = loaded
        .pre
        .instance_pre()
        .instantiate_async(&mut *store)
        .await?;
    let g = &loaded.exports;
    let wrap = convert::error_from_wit;
    Ok(match op {
        Op::Catalog => {
            let f = g.catalog(store, &inst)?;
            match f.call_async(&mut *store, ()).await?.0 {
                Ok(c) => convert::catalog(c).map(Out::Catalog),
                Err(e) => Err(wrap(e)),
            }
        }
        Op::CallTool(name, args) => {
            let f = g.call_tool(store, &inst)?;
            match f.call_async(&mut *store, (&name, &args)).await?.0 {
                Ok(r) => convert::tool_result(r).map(Out::Tool),
                Err(e) => Err(wrap(e)),
            }
        }
        Op::RunNode(name, input) => {
            let f = g.run_node(store, &inst)?;
            match f.call_async(&mut *store, (&name, &input)).await?.0 {
                Ok(text) => convert::node_output(&text).map(Out::Node),
                Err(e) => Err(wrap(e)),
            }
        }
        Op::ReadResource(uri) => {
            let f = g.read_resource(store, &inst)?;
            match f.call_async(&mut *store, (&uri,)).await?.0 {
                Ok(c) => Ok(Out::Resource(convert::resource(c))),
                Err(e) => Err(wrap(e)),
            }
        }
        Op::GetPrompt(name, args) => {
            let f = g.get_prompt(store, &inst)?;
            match f.call_async(&mut *store, (&name, &args)).await?.0 {
                Ok(p) => convert::prompt(p).map(Out::Prompt),
                Err(e) => Err(wrap(e)),
            }
        }
    })
}

fn unexpected() -> PluginError {
    PluginError::internal("the component answered another operation")
}

impl Source for WasmSource {
    async fn catalog(&self) -> Result<Catalog, PluginError> {
        match self.run(Op::Catalog, None).await? {
            Out::Catalog(c) => Ok(c),
            _ => Err(unexpected()),
        }
    }

    async fn call_tool(
        &self,
        name: &str,
        arguments: Value,
        ctx: CallContext,
    ) -> Result<CallResult, PluginError> {
        match self
            .run(Op::CallTool(name.into(), arguments.to_string()), Some(ctx))
            .await?
        {
            Out::Tool(r) => Ok(r),
            _ => Err(unexpected()),
        }
    }

    async fn run_node(
        &self,
        name: &str,
        input: Value,
        ctx: CallContext,
    ) -> Result<Value, PluginError> {
        match self
            .run(Op::RunNode(name.into(), input.to_string()), Some(ctx))
            .await?
        {
            Out::Node(v) => Ok(v),
            _ => Err(unexpected()),
        }
    }

    async fn read_resource(
        &self,
        uri: &str,
        ctx: CallContext,
    ) -> Result<ReadResourceResult, PluginError> {
        match self.run(Op::ReadResource(uri.into()), Some(ctx)).await? {
            Out::Resource(r) => Ok(r),
            _ => Err(unexpected()),
        }
    }

    async fn get_prompt(
        &self,
        name: &str,
        arguments: Map<String, Value>,
        ctx: CallContext,
    ) -> Result<GetPromptResult, PluginError> {
        let args = arguments
            .into_iter()
            .map(|(k, v)| {
                let v = match v {
                    Value::String(s) => s,
                    other => other.to_string(),
                };
                (k, v)
            })
            .collect();
        match self
            .run(Op::GetPrompt(name.into(), args), Some(ctx))
            .await?
        {
            Out::Prompt(p) => Ok(p),
            _ => Err(unexpected()),
        }
    }

    async fn status(&self) -> Value {
        let c = &self.counts;
        let mut s = json!({
            "component": self.settings.path.display().to_string(),
            "calls": c.calls.load(Ordering::Relaxed),
            "traps": c.traps.load(Ordering::Relaxed),
            "deadlines": c.deadlines.load(Ordering::Relaxed),
            "memory_limits": c.memory.load(Ordering::Relaxed),
            "busy": c.busy.load(Ordering::Relaxed),
            "instances_in_use": self.settings.max_instances - self.slots.available_permits(),
            "max_instances": self.settings.max_instances,
        });
        if let Some(Ok(l)) = self.loaded.get() {
            s["interface"] = json!(l.interface);
            s["sha256"] = json!(l.sha256);
            s["compiled"] = json!(if l.origin == Origin::Cached {
                "cache"
            } else {
                "now"
            });
            s["load_ms"] = json!(l.load_ms);
            s["name"] = json!(l.metadata.name);
            s["version"] = json!(l.metadata.version);
            s["description"] = json!(l.metadata.description);
        }
        s
    }
}
