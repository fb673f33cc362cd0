//! The glue `export_plugin!` expands to: the plugin's own tokio runtime, the
//! adapters from the author traits to the ABI objects, and panic catching at
//! every entry point (a panic must never unwind into the host).

use std::future::Future;
use std::panic::{AssertUnwindSafe, catch_unwind};
use std::sync::{Arc, Weak};

use abi_stable::prefix_type::PrefixTypeTrait;
use abi_stable::sabi_trait::TD_Opaque;
use abi_stable::std_types::{RErr, ROk, RResult, RString};
use async_ffi::{FfiFuture, FutureExt as _};
use futures::FutureExt as _;
use futures::channel::oneshot;

use crate::author::{CallContext, Host, Plugin, Source};
use crate::error::PluginError;
use crate::ffi::*;
use crate::types::{PluginInit, SourceRequest, SourceSpec};

pub use crate::runtime::{CANCEL_GRACE, MAX_RUNTIME_THREADS, runtime};
use crate::runtime::{err_json, panicked, start_call};

/// The name of the symbol abi_stable looks up (checked against abi_stable's
/// own constant in a test).
pub const ROOT_MODULE_SYMBOL: &str = "_1as_0lib_1header_0root_bmodule_bloader";

/// Exports `$plugin` (a type implementing [`crate::Plugin`]) as a wf plugin library.
#[macro_export]
macro_rules! export_plugin {
    ($plugin:ty) => {
        #[doc(hidden)]
        // SAFETY: `export_name` is unsafe because a symbol name can clash. This
        // is the one symbol abi_stable's loader looks up (checked against
        // abi_stable's constant in a test), and a library exports it once: a
        // second `export_plugin!` in the same library fails to link.
        #[unsafe(export_name = "_1as_0lib_1header_0root_bmodule_bloader")]
        pub static __WF_PLUGIN_LIB_HEADER: $crate::__private::abi_stable::library::LibHeader = {
            extern "C" fn __wf_plugin_root_module()
            -> $crate::__private::abi_stable::library::RootModuleResult {
                $crate::__private::abi_stable::library::__call_root_module_loader(
                    $crate::export::module::<$plugin>,
                )
            }
            // SAFETY: `from_constructor` requires that the constructor returns
            // the root module of the type named here, `WfPluginModRef`, and
            // that the header is only read by abi_stable's loader, which checks
            // the layout of that type before use (`CheckTypeLayout::Yes`).
            // `__wf_plugin_root_module` returns `module::<$plugin>()`, a
            // `WfPluginModRef`, through abi_stable's own panic-catching shim.
            unsafe {
                $crate::__private::abi_stable::library::LibHeader::from_constructor::<
                    $crate::ffi::WfPluginModRef,
                >(
                    __wf_plugin_root_module,
                    $crate::__private::abi_stable::library::CheckTypeLayout::Yes,
                )
            }
        };
    };
}

/// The root module of plugin `P`.
pub fn module<P: Plugin>() -> WfPluginModRef {
    WfPluginMod {
        manifest: manifest::<P>,
        instantiate: instantiate::<P>,
    }
    .leak_into_prefix()
}

extern "C" fn manifest<P: Plugin>() -> RString {
    match catch_unwind(|| serde_json::to_string(&P::manifest())) {
        Ok(Ok(json)) => RString::from(json),
        // The host refuses a plugin whose manifest is not JSON.
        _ => RString::from("manifest panicked or failed to serialize"),
    }
}

extern "C" fn instantiate<P: Plugin>(
    host: HostContextBox,
    init_json: RString,
) -> RResult<PluginBox, RString> {
    let result = catch_unwind(AssertUnwindSafe(move || {
        let init: PluginInit = serde_json::from_str(init_json.as_str()).unwrap_or_default();
        if let Some(n) = init.runtime_threads {
            crate::runtime::set_threads(n);
        }
        crate::logging::install(host.clone(), &init.log_level);
        let host = Host {
            inner: host,
            init: Arc::new(init),
        };
        P::new(host.clone())
            .map(|plugin| PluginFfi_TO::from_value(PluginAdapter { plugin, host }, TD_Opaque))
    }));
    match result {
        Ok(Ok(plugin)) => ROk(plugin),
        Ok(Err(e)) => RErr(err_json(e)),
        Err(payload) => RErr(err_json(panicked(payload))),
    }
}

struct PluginAdapter<P> {
    plugin: P,
    host: Host,
}

impl<P: Plugin> PluginFfi for PluginAdapter<P> {
    fn create_source(&self, spec_json: RString) -> RResult<SourceBox, RString> {
        let result = catch_unwind(AssertUnwindSafe(|| {
            let spec: SourceSpec = serde_json::from_str(spec_json.as_str())
                .map_err(|e| PluginError::invalid_config(format!("bad source spec: {e}")))?;
            // Sources may spawn tasks while being created.
            let _enter = runtime().enter();
            self.plugin.create_source(spec)
        }));
        match result {
            Ok(Ok(source)) => {
                let source = Arc::new(source);
                let s = source.clone();
                let lane = Arc::new(crate::lane::LaneSource {
                    start: Box::new(move |request, ctx| {
                        let s = s.clone();
                        Box::pin(async move { dispatch(&*s, &request, ctx, None).await })
                    }),
                    host: self.host.clone(),
                });
                ROk(SourceFfi_TO::from_value(
                    SourceAdapter { source, lane },
                    TD_Opaque,
                ))
            }
            Ok(Err(e)) => RErr(err_json(e)),
            Err(payload) => RErr(err_json(panicked(payload))),
        }
    }
}

struct SourceAdapter<S> {
    source: Arc<S>,
    /// How a call lane starts this source's calls, and the plugin's host
    /// (held here: the lane only holds it weakly, so a dropped source leaves
    /// the lane).
    lane: Arc<crate::lane::LaneSource>,
}

impl<S: Source> SourceAdapter<S> {
    /// `readable`, the host's reactor reading for this source (1.7): done
    /// now, on the host's thread, without a call's context (no token, no
    /// asks, nothing to cancel), for it comes with every reply an upstream
    /// writes.
    fn readable(&self, watch: u64, ctx: CallContextBox) -> FfiFuture<RResult<RString, RString>> {
        drop(ctx);
        let read = catch_unwind(AssertUnwindSafe(|| {
            // The pump may spawn and send on this plugin's runtime.
            let _enter = runtime().enter();
            match self.source.io_watch() {
                Some(w) => w.readable(watch),
                None => crate::io_watch::Readiness::Closed,
            }
        }));
        let out = match read {
            Ok(readiness) => ROk(RString::from(readiness.as_json())),
            Err(p) => RErr(err_json(panicked(p))),
        };
        std::future::ready(out).into_ffi()
    }
}

impl<S: Source> SourceFfi for SourceAdapter<S> {
    fn request(
        &self,
        request: RString,
        ctx: CallContextBox,
    ) -> FfiFuture<RResult<RString, RString>> {
        if let Some(watch) = SourceRequest::readable_watch(request.as_str()) {
            return self.readable(watch, ctx);
        }
        let source = self.source.clone();
        let lane = Arc::downgrade(&self.lane);
        let started = catch_unwind(AssertUnwindSafe(|| {
            start_call(&self.lane.host, ctx, move |call| async move {
                dispatch(&*source, request.as_str(), call, Some(lane)).await
            })
            .into_ffi()
        }));
        started.unwrap_or_else(|p| {
            let e = err_json(panicked(p));
            async move { RErr(e) }.into_ffi()
        })
    }

    fn shutdown(&self) -> FfiFuture<()> {
        let source = self.source.clone();
        let (tx, rx) = oneshot::channel::<()>();
        let spawned = catch_unwind(AssertUnwindSafe(|| {
            runtime().spawn(async move {
                let _ = AssertUnwindSafe(source.shutdown()).catch_unwind().await;
                let _ = tx.send(());
            });
        }));
        let _ = spawned;
        async move {
            let _ = rx.await;
        }
        .into_ffi()
    }
}

async fn dispatch<S: Source>(
    source: &S,
    request: &str,
    ctx: CallContext,
    lane: Option<Weak<crate::lane::LaneSource>>,
) -> Result<String, PluginError> {
    // A known operation with bad fields is the caller's mistake; one this
    // plugin predates decodes to `Unknown` and is `unsupported`.
    let text = request;
    let request = SourceRequest::parse(text)
        .map_err(|e| PluginError::invalid_arguments(format!("malformed request: {e}")))?;
    match request {
        SourceRequest::Unknown => {
            let op = SourceRequest::op_name(text).unwrap_or_default();
            Err(PluginError::unsupported(format!(
                "unsupported operation {op:?}"
            )))
        }
        SourceRequest::CallLane { fd, source: id } => match lane {
            Some(lane) => {
                crate::lane::join(fd, id, lane)?;
                Ok("null".to_string())
            }
            None => Err(PluginError::unsupported(
                "call_lane is sent across the ABI only",
            )),
        },
        SourceRequest::CallerAnswer { ask, ok, error } => {
            let answer = match (ok, error) {
                (_, Some(e)) => Err(e),
                (Some(v), None) => Ok(v),
                (None, None) => Ok(serde_json::Value::Null),
            };
            crate::asks::complete_ask(ask, answer);
            Ok("null".to_string())
        }
        SourceRequest::Catalog => reply(source.catalog()).await,
        SourceRequest::CallTool { name, arguments } => {
            reply(source.call_tool(&name, arguments, ctx)).await
        }
        SourceRequest::RunNode { name, input } => reply(source.run_node(&name, input, ctx)).await,
        SourceRequest::ListResources => reply(source.list_resources()).await,
        SourceRequest::ListResourceTemplates => reply(source.list_resource_templates()).await,
        SourceRequest::ReadResource { uri } => reply(source.read_resource(&uri, ctx)).await,
        SourceRequest::ListPrompts => reply(source.list_prompts()).await,
        SourceRequest::GetPrompt { name, arguments } => {
            reply(source.get_prompt(&name, arguments, ctx)).await
        }
        SourceRequest::Complete(params) => reply(source.complete(params, ctx)).await,
        SourceRequest::Subscribe { uri } => reply(source.subscribe(&uri, ctx)).await,
        SourceRequest::Unsubscribe { uri } => reply(source.unsubscribe(&uri, ctx)).await,
        SourceRequest::RootsListChanged => reply(source.roots_list_changed(ctx)).await,
        SourceRequest::CallToolAsTask { name, arguments } => {
            reply(source.call_tool_as_task(&name, arguments, ctx)).await
        }
        SourceRequest::GetTask { task_id } => reply(source.get_task(&task_id, ctx)).await,
        SourceRequest::CancelTask { task_id } => reply(source.cancel_task(&task_id, ctx)).await,
        SourceRequest::UpdateTask {
            task_id,
            input_responses,
        } => reply(source.update_task(&task_id, input_responses, ctx)).await,
        SourceRequest::Status => reply(async { Ok(source.status().await) }).await,
        SourceRequest::OpenSession { lease } => reply(source.open_session(lease.as_deref())).await,
        SourceRequest::OpenLease => reply(source.open_lease()).await,
        SourceRequest::CloseLease { lease } => reply(source.close_lease(&lease)).await,
        // Through `reply`, which boxes it: the long poll's future would
        // otherwise size every call's.
        SourceRequest::NextWatch => match source.io_watch() {
            Some(watch) => {
                reply(async move {
                    watch
                        .next()
                        .await
                        .ok_or_else(|| PluginError::unsupported("no descriptors to watch here"))
                })
                .await
            }
            None => Err(PluginError::unsupported(
                "this source offers no descriptors",
            )),
        },
        SourceRequest::Readable { watch } => match source.io_watch() {
            Some(w) => to_json(&w.readable(watch)),
            None => to_json(&crate::io_watch::Readiness::Closed),
        },
    }
}

fn to_json<T: serde::Serialize>(value: &T) -> Result<String, PluginError> {
    serde_json::to_string(value)
        .map_err(|e| PluginError::internal(format!("result is not serializable: {e}")))
}

/// Runs one operation and serialises its result. The operation's future is
/// boxed before anything holds it: inline, the largest of them would size
/// `dispatch`'s future, which every call then copied whole into its box.
fn reply<'a, T: serde::Serialize>(
    operation: impl Future<Output = Result<T, PluginError>> + 'a,
) -> impl Future<Output = Result<String, PluginError>> + 'a {
    let operation = Box::pin(operation);
    async move {
        let result = operation.await?;
        serde_json::to_string(&result)
            .map_err(|e| PluginError::internal(format!("result is not serializable: {e}")))
    }
}

#[cfg(test)]
mod tests {
    use std::sync::Mutex;
    use std::time::Duration;

    use crate::prelude::*;
    use crate::testing::Harness;

    /// What the calls of [`Trail`] did, in order.
    static EVENTS: Mutex<Vec<&'static str>> = Mutex::new(Vec::new());
    /// Held by each test that reads [`EVENTS`]: one at a time.
    static SERIAL: tokio::sync::Mutex<()> = tokio::sync::Mutex::const_new(());

    fn note(e: &'static str) {
        EVENTS.lock().unwrap().push(e);
    }

    struct Dropped(&'static str);
    impl Drop for Dropped {
        fn drop(&mut self) {
            note(self.0);
        }
    }

    struct Trail;
    impl Plugin for Trail {
        type Source = Trail;
        fn manifest() -> Manifest {
            Manifest::new("trail", "0.0.0").kind("trail")
        }
        fn new(_host: Host) -> Result<Self, PluginError> {
            Ok(Trail)
        }
        fn create_source(&self, _spec: SourceSpec) -> Result<Trail, PluginError> {
            Ok(Trail)
        }
    }
    impl Source for Trail {
        async fn catalog(&self) -> Result<Catalog, PluginError> {
            Ok(Catalog::default())
        }
        async fn call_tool(
            &self,
            name: &str,
            _arguments: Value,
            ctx: CallContext,
        ) -> Result<CallResult, PluginError> {
            if name == "quick" {
                ctx.progress(0.5, Some(1.0), Some("half"));
                return Ok(CallResult::text("quick"));
            }
            if name == "watching" {
                let _d = Dropped("watching dropped");
                note("watching started");
                tokio::select! {
                    _ = tokio::time::sleep(Duration::from_secs(60)) => {}
                    _ = ctx.cancelled() => {
                        // Cleanup that awaits runs to its end.
                        tokio::time::sleep(Duration::from_millis(20)).await;
                        note("watching cleaned up");
                    }
                }
            } else {
                let _d = Dropped("plain dropped");
                note("plain started");
                tokio::time::sleep(Duration::from_secs(60)).await;
                note("plain finished");
            }
            Ok(CallResult::text("done"))
        }
    }

    async fn wait_for(event: &str) -> Vec<&'static str> {
        for _ in 0..2000 {
            let seen = EVENTS.lock().unwrap().clone();
            if seen.contains(&event) {
                return seen;
            }
            tokio::time::sleep(Duration::from_millis(5)).await;
        }
        panic!("{event:?} never happened: {:?}", EVENTS.lock().unwrap());
    }

    /// Starts `tool`, drops the call once it started, returns the events.
    async fn cancel(
        src: &crate::testing::TestSource,
        tool: &str,
        until: &str,
    ) -> Vec<&'static str> {
        EVENTS.lock().unwrap().clear();
        let started: &'static str = if tool == "watching" {
            "watching started"
        } else {
            "plain started"
        };
        tokio::select! {
            _ = src.call_tool(tool, json!({})) => panic!("{tool} finished"),
            _ = wait_for(started) => {}
        }
        wait_for(until).await
    }

    /// A source whose one offered descriptor's pump counts its calls, and
    /// panics from the third on.
    #[cfg(unix)]
    struct Watching {
        watch: crate::io_watch::IoWatch,
        _watched: crate::io_watch::Watched,
        _pipe: std::io::PipeWriter,
    }
    #[cfg(unix)]
    struct Pumped(std::sync::atomic::AtomicUsize);
    #[cfg(unix)]
    impl crate::io_watch::Pump for Pumped {
        fn readable(&self) -> crate::io_watch::Readiness {
            let n = self.0.fetch_add(1, std::sync::atomic::Ordering::SeqCst);
            assert!(n < 2, "the pump fails on its third call");
            [
                crate::io_watch::Readiness::Drained,
                crate::io_watch::Readiness::More,
            ][n]
        }
    }
    #[cfg(unix)]
    impl Plugin for Watching {
        type Source = Watching;
        fn manifest() -> Manifest {
            Manifest::new("watching", "0.0.0").kind("watching")
        }
        fn new(_host: Host) -> Result<Self, PluginError> {
            Watching::new()
        }
        fn create_source(&self, _spec: SourceSpec) -> Result<Watching, PluginError> {
            Watching::new()
        }
    }
    #[cfg(unix)]
    impl Watching {
        fn new() -> Result<Self, PluginError> {
            use std::os::fd::AsFd;
            let watch = crate::io_watch::IoWatch::new();
            let (r, w) = std::io::pipe().map_err(|e| PluginError::internal(e.to_string()))?;
            let pump = std::sync::Arc::new(Pumped(Default::default()));
            let watched = watch
                .offer(r.as_fd(), pump)
                .map_err(|e| PluginError::internal(e.to_string()))?;
            Ok(Self {
                watch,
                _watched: watched,
                _pipe: w,
            })
        }
    }
    #[cfg(unix)]
    impl Source for Watching {
        async fn catalog(&self) -> Result<Catalog, PluginError> {
            Ok(Catalog::default())
        }
        async fn call_tool(
            &self,
            _name: &str,
            _arguments: Value,
            _ctx: CallContext,
        ) -> Result<CallResult, PluginError> {
            Ok(CallResult::text("none"))
        }
        fn io_watch(&self) -> Option<&crate::io_watch::IoWatch> {
            Some(&self.watch)
        }
    }

    /// `readable`, as a host sends it, reaches the watch's pump through the
    /// export glue and answers what the pump said; an unknown watch, or a
    /// source that offers none, answers `closed`; a pump that panics is an
    /// error, and the source goes on answering.
    #[cfg(unix)]
    #[tokio::test]
    async fn readable_reaches_the_pump_through_the_glue() {
        use crate::io_watch::Readiness;
        use crate::types::SourceRequest;
        let h = Harness::start::<Watching>().unwrap();
        let src = h.source("w", "watching", json!({})).unwrap();
        let offer: crate::io_watch::WatchOffer =
            src.request(&SourceRequest::NextWatch).await.unwrap();
        // SAFETY: the offer's descriptor is a duplicate made for the host (us).
        drop(unsafe { <std::os::fd::OwnedFd as std::os::fd::FromRawFd>::from_raw_fd(offer.fd) });
        let readable = |watch| SourceRequest::Readable { watch };
        let r: Readiness = src.request(&readable(offer.watch)).await.unwrap();
        assert_eq!(r, Readiness::Drained);
        let r: Readiness = src.request(&readable(offer.watch)).await.unwrap();
        assert_eq!(r, Readiness::More);
        let e = src
            .request::<Readiness>(&readable(offer.watch))
            .await
            .unwrap_err();
        assert!(e.message.contains("panicked"), "{e:?}");
        let r: Readiness = src.request(&readable(offer.watch + 1)).await.unwrap();
        assert_eq!(r, Readiness::Closed);
        let trail = Harness::start::<Trail>().unwrap();
        let t = trail.source("t", "trail", json!({})).unwrap();
        let r: Readiness = t.request(&readable(1)).await.unwrap();
        assert_eq!(r, Readiness::Closed);
    }

    #[tokio::test]
    async fn cancellation_signals_then_drops() {
        let _one = SERIAL.lock().await;
        let h = Harness::start::<Trail>().unwrap();
        let src = h.source("t", "trail", json!({})).unwrap();
        // Every time, including the first: the signal's branch runs, its
        // awaited cleanup completes, then the future is dropped.
        for _ in 0..5 {
            let seen = cancel(&src, "watching", "watching dropped").await;
            assert_eq!(
                seen,
                [
                    "watching started",
                    "watching cleaned up",
                    "watching dropped"
                ]
            );
        }
        // A call that never asked is dropped at once, not after the 5 s grace.
        let t = std::time::Instant::now();
        let seen = cancel(&src, "plain", "plain dropped").await;
        assert_eq!(seen, ["plain started", "plain dropped"]);
        assert!(t.elapsed() < super::CANCEL_GRACE / 2, "{:?}", t.elapsed());
    }

    /// Reads one frame off a blocking socket: its payload.
    #[cfg(unix)]
    fn read_frame(s: &mut std::os::unix::net::UnixStream) -> Vec<u8> {
        use std::io::Read;
        let mut len = [0u8; 4];
        s.read_exact(&mut len).unwrap();
        let mut buf = vec![0u8; u32::from_be_bytes(len) as usize];
        s.read_exact(&mut buf).unwrap();
        buf
    }

    /// The 1.5 call lane, end to end in this process: a source joins it, then
    /// its calls arrive as frames and their progress and replies leave as
    /// frames, in order; a cancel frame cancels as dropping the call's future
    /// does; a call for a source the lane does not know gets an error reply.
    #[cfg(unix)]
    #[tokio::test]
    async fn a_call_lane_serves_calls_cancels_and_refuses_unknown_sources() {
        let _one = SERIAL.lock().await;
        use std::io::Write;
        use std::os::fd::IntoRawFd;

        use crate::lane::{self, REPLY_ERR, REPLY_OK};

        let h = Harness::start::<Trail>().unwrap();
        let src = h.source("t", "trail", json!({})).unwrap();
        let (mut ours, theirs) = std::os::unix::net::UnixStream::pair().unwrap();
        let fd = theirs.into_raw_fd();
        let joined: Value = src
            .request(&crate::SourceRequest::CallLane { fd, source: 7 })
            .await
            .unwrap();
        assert_eq!(joined, Value::Null);
        // A second lane is refused; the first keeps serving.
        let (_, other) = std::os::unix::net::UnixStream::pair().unwrap();
        let refused = src
            .request::<Value>(&crate::SourceRequest::CallLane {
                fd: other.into_raw_fd(),
                source: 8,
            })
            .await
            .unwrap_err();
        assert!(
            refused.message.contains("already serves calls"),
            "{refused:?}"
        );

        let call = r#"{"op":"call_tool","name":"quick","arguments":{}}"#;
        let mut frames = lane::encode_request(1, 7, call, "{}").unwrap();
        frames.extend(lane::encode_request(2, 99, call, "{}").unwrap());
        ours.write_all(&frames).unwrap();
        let got = tokio::task::spawn_blocking(move || {
            let got: Vec<Vec<u8>> = (0..3).map(|_| read_frame(&mut ours)).collect();
            (got, ours)
        });
        let (got, mut ours) = got.await.unwrap();
        let mut replies = std::collections::HashMap::new();
        let mut progress_seen_before_reply_1 = false;
        for f in &got {
            match f[0] {
                REPLY_OK | REPLY_ERR => {
                    let (id, text) = lane::decode_reply(&f[1..]).unwrap();
                    replies.insert(id, (f[0], text));
                }
                _ => {
                    let v: Value = serde_json::from_slice(f).unwrap();
                    assert_eq!(v["t"], "progress", "{v}");
                    assert_eq!(
                        (v["id"].as_u64(), v["message"].as_str()),
                        (Some(1), Some("half"))
                    );
                    progress_seen_before_reply_1 = !replies.contains_key(&1);
                }
            }
        }
        assert!(
            progress_seen_before_reply_1,
            "progress must precede its reply"
        );
        let (tag, text) = &replies[&1];
        assert_eq!(*tag, REPLY_OK);
        assert!(text.contains("quick"), "{text}");
        let (tag, text) = &replies[&2];
        assert_eq!(*tag, REPLY_ERR);
        assert!(text.contains("no source 99"), "{text}");

        // A cancel frame: the call's signal fires, its cleanup runs, then it
        // is dropped, and no reply comes.
        EVENTS.lock().unwrap().clear();
        let watching = r#"{"op":"call_tool","name":"watching","arguments":{}}"#;
        ours.write_all(&lane::encode_request(3, 7, watching, "{}").unwrap())
            .unwrap();
        wait_for("watching started").await;
        ours.write_all(&lane::finish(b"\0\0\0\0{\"t\":\"cancel\",\"id\":3}".to_vec()).unwrap())
            .unwrap();
        let seen = wait_for("watching dropped").await;
        assert_eq!(
            seen,
            [
                "watching started",
                "watching cleaned up",
                "watching dropped"
            ]
        );
        ours.set_nonblocking(true).unwrap();
        let mut rest = [0u8; 1];
        assert!(
            std::io::Read::read(&mut ours, &mut rest).is_err(),
            "a cancelled call sends no reply"
        );
    }

    #[test]
    fn root_module_symbol_matches_abi_stable() {
        assert_eq!(
            super::ROOT_MODULE_SYMBOL,
            abi_stable::library::ROOT_MODULE_LOADER_NAME
        );
    }
}
