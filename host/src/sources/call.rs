//! The host side of a call's context: progress goes back to whoever made the
//! call (e.g. an MCP client that sent a progress token), and the call counts
//! as in flight until the host lets go of it.

use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::{Arc, Mutex};

use abi_stable::sabi_trait::TD_Opaque;
use abi_stable::std_types::{ROption, RString};
use serde_json::Value;
use tokio::sync::mpsc;
use wf_plugin_api::ffi::{CallContextBox, CallContextFfi, CallContextFfi_TO, SourceBox};

use super::asker::Asker;
use super::asks;

/// Why a call without an [`Asker`] cannot ask anyone.
const NOBODY: &str = "nobody can answer: this call was not made by an MCP client";

/// One progress report from a plugin.
#[derive(Debug, Clone, PartialEq)]
pub struct Progress {
    pub progress: f64,
    pub total: Option<f64>,
    pub message: Option<String>,
}

type ProgressSlot = Arc<Mutex<Option<mpsc::UnboundedSender<Progress>>>>;

/// Call context builder.
#[derive(Default)]
pub struct CallCtx {
    progress: Option<mpsc::UnboundedSender<Progress>>,
    info: Value,
    asker: Option<Arc<dyn Asker>>,
    nobody: Option<String>,
}

impl CallCtx {
    pub fn new() -> Self {
        Self::default()
    }
    /// Progress reports of the call arrive on the returned receiver, which
    /// ends when the host lets go of the call (answered or cancelled), even
    /// if the plugin still holds the call's context.
    pub fn with_progress(mut self) -> (Self, mpsc::UnboundedReceiver<Progress>) {
        let (tx, rx) = mpsc::unbounded_channel();
        self.progress = Some(tx);
        (self, rx)
    }
    pub fn with_info(mut self, info: Value) -> Self {
        self.info = info;
        self
    }
    /// The call's W3C trace context, for the plugin (info key `"trace"`).
    pub fn with_trace(mut self, trace: Option<Value>) -> Self {
        if let Some(t) = trace {
            if !self.info.is_object() {
                self.info = Value::Object(Default::default());
            }
            self.info["trace"] = t;
        }
        self
    }
    /// Requests for input go to `asker` (the calling client).
    pub fn with_asker(mut self, asker: Arc<dyn Asker>) -> Self {
        self.asker = Some(asker);
        self
    }
    /// Without an asker, requests for input fail with `why`.
    pub fn with_nobody_to_ask(mut self, why: impl Into<String>) -> Self {
        self.nobody = Some(why.into());
        self
    }
    /// The context to hand the plugin, and the guard that ends the call on
    /// the host's side when dropped. `in_flight` counts the call meanwhile.
    pub(crate) fn into_ffi(
        self,
        in_flight: Option<&Arc<AtomicUsize>>,
        source: Option<&Arc<SourceBox>>,
    ) -> (CallContextBox, CallGuard) {
        // A call the source may ask about gets an id in its info (`call`).
        let mut info = self.info;
        let asks = source.map(|source| {
            let id = asks::register(asks::Entry {
                asker: self.asker,
                nobody: self.nobody.unwrap_or_else(|| NOBODY.to_string()),
                source: Arc::downgrade(source),
                runtime: tokio::runtime::Handle::try_current().ok(),
            });
            if !info.is_object() {
                info = Value::Object(Default::default());
            }
            info["call"] = Value::from(id);
            asks::Registered(id)
        });
        let slot: ProgressSlot = Arc::new(Mutex::new(self.progress));
        if let Some(n) = in_flight {
            n.fetch_add(1, Ordering::Relaxed);
        }
        let guard = CallGuard {
            progress: slot.clone(),
            in_flight: in_flight.cloned(),
            _asks: asks,
        };
        let ffi = CallContextFfi_TO::from_value(
            FfiCall {
                progress: slot,
                info: info.to_string(),
            },
            TD_Opaque,
        );
        (ffi, guard)
    }
}

/// Ends a call on the host's side when dropped: it no longer counts as in
/// flight, and its progress channel closes. A plugin stuck in blocking code
/// keeps its context (and its thread) as long as it likes; the host's
/// answer to the client never waits for it.
pub(crate) struct CallGuard {
    progress: ProgressSlot,
    in_flight: Option<Arc<AtomicUsize>>,
    /// While it lives, the source's requests for input reach this call's asker.
    _asks: Option<asks::Registered>,
}

impl Drop for CallGuard {
    fn drop(&mut self) {
        if let Ok(mut tx) = self.progress.lock() {
            tx.take();
        }
        if let Some(n) = &self.in_flight {
            n.fetch_sub(1, Ordering::Relaxed);
        }
    }
}

struct FfiCall {
    progress: ProgressSlot,
    info: String,
}

impl CallContextFfi for FfiCall {
    fn progress(&self, progress: f64, total: ROption<f64>, message: ROption<RString>) {
        if let Ok(slot) = self.progress.lock()
            && let Some(tx) = slot.as_ref()
        {
            let _ = tx.send(Progress {
                progress,
                total: total.into_option(),
                message: message.into_option().map(Into::into),
            });
        }
    }
    fn info(&self) -> RString {
        RString::from(self.info.as_str())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[tokio::test]
    async fn dropping_the_guard_ends_progress_and_the_count() {
        let n = Arc::new(AtomicUsize::new(0));
        let (ctx, mut rx) = CallCtx::new().with_progress();
        let (ffi, guard) = ctx.into_ffi(Some(&n), None);
        assert_eq!(n.load(Ordering::Relaxed), 1);
        ffi.progress(1.0, ROption::RNone, ROption::RNone);
        assert_eq!(rx.recv().await.map(|p| p.progress), Some(1.0));
        drop(guard);
        // The plugin still holds its context, yet the host's side is done.
        assert_eq!(n.load(Ordering::Relaxed), 0);
        ffi.progress(2.0, ROption::RNone, ROption::RNone);
        assert_eq!(rx.recv().await, None);
    }
}
