//! The plugin's own tokio runtime, and a call's work run on it: polled
//! inline by whoever waits for the call (the host across the ABI, or a call
//! lane), with panics caught and a cancelled call's cleanup bounded.

use std::any::Any;
use std::future::Future;
use std::panic::{AssertUnwindSafe, catch_unwind};
use std::pin::Pin;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, OnceLock};
use std::task::{Context, Poll};
use std::time::Duration;

use abi_stable::std_types::{RErr, ROk, RResult, RString};
use futures::FutureExt as _;
use tokio_util::sync::CancellationToken;

use crate::author::{CallContext, Host};
use crate::error::{ErrorCode, PluginError};
use crate::ffi::CallContextBox;

/// Worker threads of [`runtime`]: the host's [`PluginInit::runtime_threads`],
/// set before the runtime starts. One by default: the plugin's work per
/// call is small (its call futures are polled on the host's threads, see
/// [`InlineCall`]), and a second worker mostly wakes up to find nothing to
/// steal, which costs every call a thread hand-off (docs/benchmarks.md).
static RUNTIME_THREADS: std::sync::atomic::AtomicUsize = std::sync::atomic::AtomicUsize::new(1);

/// The most worker threads a host may ask for.
pub const MAX_RUNTIME_THREADS: usize = 64;

/// This dylib's runtime. Each plugin library links its own copy of tokio, so
/// the host's runtime is invisible here; every plugin future runs on this one.
pub fn runtime() -> &'static tokio::runtime::Runtime {
    static RT: OnceLock<tokio::runtime::Runtime> = OnceLock::new();
    RT.get_or_init(|| {
        tokio::runtime::Builder::new_multi_thread()
            .worker_threads(RUNTIME_THREADS.load(Ordering::Relaxed).max(1))
            .thread_name("wf-plugin")
            .enable_all()
            .build()
            .expect("plugin runtime")
    })
}

/// Sets the worker threads of [`runtime`] (the host's
/// `PluginInit::runtime_threads`), before it starts.
pub(crate) fn set_threads(n: usize) {
    RUNTIME_THREADS.store(n.clamp(1, MAX_RUNTIME_THREADS), Ordering::Relaxed);
}

pub(crate) fn panic_message(payload: &(dyn Any + Send)) -> String {
    if let Some(s) = payload.downcast_ref::<&str>() {
        (*s).to_string()
    } else if let Some(s) = payload.downcast_ref::<String>() {
        s.clone()
    } else {
        "panic with a non-string payload".to_string()
    }
}

pub(crate) fn panicked(payload: Box<dyn Any + Send>) -> PluginError {
    PluginError::new(
        ErrorCode::Panicked,
        format!("plugin panicked: {}", panic_message(&*payload)),
    )
}

pub(crate) fn err_json(e: PluginError) -> RString {
    RString::from(e.to_json())
}

/// How long a cancelled call that watches [`CallContext::cancelled`] may
/// still run to finish its cleanup before its future is dropped.
pub const CANCEL_GRACE: Duration = Duration::from_secs(5);

/// A plugin call's work, boxed so that [`InlineCall`] has one type.
pub(crate) type Work = Pin<Box<dyn Future<Output = Result<String, PluginError>> + Send>>;

/// Starts a call: its context and a future that polls `work` itself on
/// whichever thread polls it (the host's across the ABI, this runtime's on a
/// call lane), inside this plugin's runtime context: no spawn and no thread
/// hand-off each way (the plugin's tokio resources register with the
/// plugin's drivers, whose workers wake the polling task directly). Dropping it
/// cancels `work`: the call's token fires first, then `work` is dropped, or,
/// if it watches [`CallContext::cancelled`], moved onto the plugin runtime to
/// finish its cleanup within [`CANCEL_GRACE`].
pub(crate) fn start_call<F>(
    host: &Host,
    ctx: CallContextBox,
    work: impl FnOnce(CallContext) -> F,
) -> InlineCall
where
    F: Future<Output = Result<String, PluginError>> + Send + 'static,
{
    let cancel = CancellationToken::new();
    let watching = Arc::new(AtomicBool::new(false));
    let call = CallContext {
        host: Some(host.clone()),
        inner: Arc::new(ctx),
        cancel: cancel.clone(),
        watching: watching.clone(),
        parsed: Arc::default(),
    };
    // The call's token also fires when its work ends, so whatever still
    // waits on this call (an ask its upstream sent back late) stops too.
    let over = cancel.clone();
    let work = work(call);
    InlineCall {
        work: Some(Box::pin(async move {
            let _over = over.drop_guard();
            work.await
        })),
        cancel,
        watching,
    }
}

pub(crate) struct InlineCall {
    /// `None` once finished (or panicked).
    work: Option<Work>,
    cancel: CancellationToken,
    watching: Arc<AtomicBool>,
}

impl Future for InlineCall {
    type Output = RResult<RString, RString>;

    fn poll(mut self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<Self::Output> {
        let Some(work) = self.work.as_mut() else {
            return Poll::Ready(RErr(err_json(PluginError::internal(
                "plugin call polled after it finished",
            ))));
        };
        // Tokio's context is per dylib: entering ours lets the work create
        // timers, I/O and tasks on this plugin's runtime from the host's thread.
        let _enter = runtime().enter();
        let out = match catch_unwind(AssertUnwindSafe(|| work.as_mut().poll(cx))) {
            Ok(Poll::Pending) => return Poll::Pending,
            Ok(Poll::Ready(r)) => r,
            Err(p) => Err(panicked(p)),
        };
        // Dropped here, in our context, and never again polled.
        let finished = self.work.take();
        let _ = catch_unwind(AssertUnwindSafe(move || drop(finished)));
        Poll::Ready(match out {
            Ok(v) => ROk(RString::from(v)),
            Err(e) => RErr(err_json(e)),
        })
    }
}

impl Drop for InlineCall {
    fn drop(&mut self) {
        // As before this type existed: the token fires whenever the host lets
        // go of the call, finished or not.
        self.cancel.cancel();
        let Some(work) = self.work.take() else {
            return;
        };
        let watching = self.watching.load(Ordering::Acquire);
        let _ = catch_unwind(AssertUnwindSafe(move || {
            let _enter = runtime().enter();
            if watching {
                // The host no longer waits; the cleanup the call awaits in its
                // `ctx.cancelled()` branch runs on this plugin's runtime, bounded.
                runtime().spawn(async move {
                    let work = AssertUnwindSafe(work).catch_unwind();
                    let _ = tokio::time::timeout(CANCEL_GRACE, work).await;
                });
            } else {
                drop(work);
            }
        }));
    }
}
