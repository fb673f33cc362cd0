//! One call: a fresh store and instance, what the component is granted, its
//! limits, and the host imports of the WIT world.
//!
//! Each call gets a new `Store` and instance from the component's
//! `InstancePre` (imports resolved once, at source creation), in a slot of
//! the source's instance pool (engine.rs): instantiating is cheap, and
//! a fresh instance means no call sees another's memory, a trap poisons
//! nothing later calls use, and each call's limits start from zero.
//! Component state across calls belongs in a granted directory.

use std::sync::Arc;

use wasmtime::component::{HasSelf, Linker, ResourceTable};
use wasmtime::{ResourceLimiter, Store, StoreContextMut, UpdateDeadline};
use wasmtime_wasi::p2::pipe::MemoryOutputPipe;
use wasmtime_wasi::{FsPerms, WasiCtx, WasiCtxBuilder, WasiCtxView, WasiView};
use wasmtime_wasi_http::{WasiHttpCtx, WasiHttpCtxView, WasiHttpView};
use wf_plugin_api::{CallContext, ElicitAction};

use crate::bindings::wf::source::host;
use crate::bindings::wf::source::types as wit;
use crate::engine::{Busy, Runtime};
use crate::http::Hooks;
use crate::settings::Settings;

/// How much of a component's stdout and stderr one call keeps (for wf's log).
const STDIO_BYTES: usize = 16 * 1024;

/// A store's data: the call, the grants and the limits.
pub struct Ctx {
    /// Built only for a component that imports WASI (see [`store`]).
    wasi: Option<Wasi>,
    table: ResourceTable,
    pub limits: Limits,
    call: Option<CallContext>,
    settings: Arc<Settings>,
    source: String,
    /// Ticks of the call's budget still left.
    ticks_left: u64,
    /// When the budget ends by the clock: under load a yielded call waits
    /// for its thread past ticks it never sees, so ticks alone run slow.
    deadline: std::time::Instant,
    /// Set when the budget ran out (the trap then names `timeout_ms`).
    pub deadline_hit: bool,
    /// Keeps the epoch ticking while this store lives.
    _busy: Busy,
}

/// Memory and table limits of one instance; remembers a refusal so the
/// call's error can name `memory_mb`.
pub struct Limits {
    memory_bytes: usize,
    pub memory_hit: bool,
}

impl ResourceLimiter for Limits {
    fn memory_growing(
        &mut self,
        _current: usize,
        desired: usize,
        _maximum: Option<usize>,
    ) -> wasmtime::Result<bool> {
        if desired > self.memory_bytes {
            self.memory_hit = true;
            return Ok(false);
        }
        Ok(true)
    }
    fn table_growing(
        &mut self,
        _current: usize,
        desired: usize,
        _maximum: Option<usize>,
    ) -> wasmtime::Result<bool> {
        // A table entry is a pointer or two: bound them like memory.
        Ok(desired.saturating_mul(16) <= self.memory_bytes)
    }
    fn instances(&self) -> usize {
        // A componentize-py component holds a few dozen core instances.
        1000
    }
    fn tables(&self) -> usize {
        1000
    }
    fn memories(&self) -> usize {
        100
    }
}

/// What WASI and `wasi:http` see of a call: the grants, the allowlist and
/// the captured stdio.
struct Wasi {
    ctx: WasiCtx,
    http: WasiHttpCtx,
    hooks: Hooks,
    stdout: MemoryOutputPipe,
    stderr: MemoryOutputPipe,
}

impl Wasi {
    /// `settings`' grants: the named environment values and directories.
    fn granted(source: &str, settings: &Arc<Settings>) -> Result<Self, String> {
        let (mut wasi, stdout, stderr) = Self::builder();
        for name in &settings.env {
            if let Ok(value) = std::env::var(name) {
                wasi.env(name, value);
            }
        }
        for d in &settings.dirs {
            let perms = if d.writable {
                FsPerms::ReadWrite
            } else {
                FsPerms::ReadOnly
            };
            wasi.preopened_dir(&d.host, &d.guest, perms)
                .map_err(|e| format!("sources.{source}.dirs: {}: {e}", d.host.display()))?;
        }
        Ok(Self::build(wasi, stdout, stderr, source, settings))
    }

    /// Nothing granted.
    fn denied(source: &str, settings: &Arc<Settings>) -> Self {
        let (wasi, stdout, stderr) = Self::builder();
        Self::build(wasi, stdout, stderr, source, settings)
    }

    /// No network sockets; stdio captured, bounded.
    fn builder() -> (WasiCtxBuilder, MemoryOutputPipe, MemoryOutputPipe) {
        let stdout = MemoryOutputPipe::new(STDIO_BYTES);
        let stderr = MemoryOutputPipe::new(STDIO_BYTES);
        let mut wasi = WasiCtxBuilder::new();
        wasi.stdout(stdout.clone())
            .stderr(stderr.clone())
            .allow_tcp(false)
            .allow_udp(false)
            .allow_ip_name_lookup(false);
        (wasi, stdout, stderr)
    }

    fn build(
        mut wasi: WasiCtxBuilder,
        stdout: MemoryOutputPipe,
        stderr: MemoryOutputPipe,
        source: &str,
        settings: &Arc<Settings>,
    ) -> Self {
        Wasi {
            ctx: wasi.build(),
            http: WasiHttpCtx::new(),
            hooks: Hooks::new(source, settings.clone()),
            stdout,
            stderr,
        }
    }
}

impl Ctx {
    /// The call's WASI parts and resource table. A component that imports
    /// no WASI has none (its instances never call here); should one be
    /// asked for, it grants nothing.
    fn wasi(&mut self) -> (&mut Wasi, &mut ResourceTable) {
        let Ctx {
            wasi,
            table,
            source,
            settings,
            ..
        } = self;
        let wasi = wasi.get_or_insert_with(|| Wasi::denied(source, settings));
        (wasi, table)
    }
}

impl WasiView for Ctx {
    fn ctx(&mut self) -> WasiCtxView<'_> {
        let (wasi, table) = self.wasi();
        WasiCtxView {
            ctx: &mut wasi.ctx,
            table,
        }
    }
}

impl WasiHttpView for Ctx {
    fn http(&mut self) -> WasiHttpCtxView<'_> {
        let (wasi, table) = self.wasi();
        WasiHttpCtxView {
            ctx: &mut wasi.http,
            table,
            hooks: &mut wasi.hooks,
        }
    }
}

/// The linker every component of this plugin is instantiated against:
/// WASI 0.2 (with nothing granted but what each store's `WasiCtx` holds),
/// `wasi:http` (through the allowlist hook) and wf's host interface.
pub fn linker(runtime: &Runtime) -> wasmtime::Result<Linker<Ctx>> {
    let mut linker = Linker::new(&runtime.engine);
    wasmtime_wasi::p2::add_to_linker_async(&mut linker)?;
    wasmtime_wasi_http::p2::add_only_http_to_linker_async(&mut linker)?;
    host::add_to_linker::<Ctx, HasSelf<Ctx>>(&mut linker, |c| c)?;
    Ok(linker)
}

/// A store for one call of `source`'s component, with its grants and limits.
/// `wasi`: the component imports WASI (or `wasi:http`). A component that
/// does not gets no WASI context at all: building one (its random source,
/// stdio pipes, tables) is a few thousand instructions a call.
pub fn store(
    runtime: &Runtime,
    source: &str,
    settings: &Arc<Settings>,
    call: Option<CallContext>,
    wasi: bool,
) -> Result<Store<Ctx>, String> {
    let wasi = match wasi {
        true => Some(Wasi::granted(source, settings)?),
        false => None,
    };
    let ctx = Ctx {
        wasi,
        table: ResourceTable::new(),
        limits: Limits {
            memory_bytes: settings.memory_bytes,
            memory_hit: false,
        },
        call,
        settings: settings.clone(),
        source: source.to_string(),
        ticks_left: Runtime::ticks(settings.timeout_ms),
        deadline: std::time::Instant::now() + std::time::Duration::from_millis(settings.timeout_ms),
        deadline_hit: false,
        _busy: runtime.busy(),
    };
    let mut store = Store::new(&runtime.engine, ctx);
    store.limiter(|c| &mut c.limits);
    store.set_epoch_deadline(1);
    store.epoch_deadline_callback(|mut cx: StoreContextMut<'_, Ctx>| {
        let data = cx.data_mut();
        data.ticks_left = data.ticks_left.saturating_sub(1);
        if data.ticks_left == 0 || std::time::Instant::now() >= data.deadline {
            data.deadline_hit = true;
            return Ok(UpdateDeadline::Interrupt);
        }
        // Give the thread back each tick: a busy component never holds it.
        Ok(UpdateDeadline::Yield(1))
    });
    Ok(store)
}

impl Ctx {
    /// Writes what the component printed to wf's log (bounded).
    pub fn flush_stdio(&self) {
        let Some(wasi) = &self.wasi else { return };
        for (stream, pipe) in [("stdout", &wasi.stdout), ("stderr", &wasi.stderr)] {
            let bytes = pipe.contents();
            if !bytes.is_empty() {
                let text = String::from_utf8_lossy(&bytes);
                tracing::info!(source = %self.source, stream, "{}", text.trim_end());
            }
        }
    }
}

/// Whether a call was cancelled: shared with the host import.
fn cancelled(call: &Option<CallContext>) -> bool {
    call.as_ref().is_some_and(|c| c.is_cancelled())
}

impl host::Host for Ctx {
    async fn settings(&mut self) -> String {
        self.settings.guest_settings.clone()
    }

    async fn log(&mut self, level: wit::LogLevel, message: String) {
        let message = bounded(message, 8 * 1024);
        let source = &self.source;
        match level {
            wit::LogLevel::Trace => tracing::trace!(source = %source, "{message}"),
            wit::LogLevel::Debug => tracing::debug!(source = %source, "{message}"),
            wit::LogLevel::Info => tracing::info!(source = %source, "{message}"),
            wit::LogLevel::Warn => tracing::warn!(source = %source, "{message}"),
            wit::LogLevel::Error => tracing::error!(source = %source, "{message}"),
        }
    }

    async fn progress(&mut self, done: f64, total: Option<f64>, message: Option<String>) {
        if let Some(call) = &self.call {
            let message = message.map(|m| bounded(m, 1024));
            call.progress(done, total, message.as_deref());
        }
    }

    async fn cancelled(&mut self) -> bool {
        cancelled(&self.call)
    }

    async fn call_info(&mut self) -> String {
        let info = self.call.as_ref().map(|c| c.info()).unwrap_or_default();
        let mut out = serde_json::Map::new();
        for key in ["principal", "meta"] {
            if let Some(v) = info.get(key) {
                out.insert(key.into(), v.clone());
            }
        }
        serde_json::Value::Object(out).to_string()
    }

    async fn elicit(
        &mut self,
        message: String,
        schema: String,
    ) -> Result<wit::ElicitAnswer, wit::Error> {
        let Some(call) = self.call.clone() else {
            return Err(werr(
                wit::ErrorCode::Unsupported,
                "no caller to ask during discovery",
            ));
        };
        let schema: serde_json::Value = serde_json::from_str(&schema).map_err(|e| {
            werr(
                wit::ErrorCode::InvalidArguments,
                &format!("elicit schema: {e}"),
            )
        })?;
        match call.elicit(&message, schema).await {
            Ok(a) => Ok(wit::ElicitAnswer {
                action: match a.action {
                    ElicitAction::Accept => wit::ElicitAction::Accept,
                    ElicitAction::Decline => wit::ElicitAction::Decline,
                    ElicitAction::Cancel => wit::ElicitAction::Cancel,
                },
                content: a.content.map(|c| serde_json::Value::Object(c).to_string()),
            }),
            Err(e) => Err(crate::convert::error_to_wit(&e)),
        }
    }
}

impl wit::Host for Ctx {}

fn werr(code: wit::ErrorCode, message: &str) -> wit::Error {
    wit::Error {
        code,
        message: message.to_string(),
        data: None,
    }
}

/// `s` cut to at most `max` bytes (at a character boundary).
fn bounded(mut s: String, max: usize) -> String {
    if s.len() > max {
        s.truncate(s.floor_char_boundary(max));
        s.push('…');
    }
    s
}
