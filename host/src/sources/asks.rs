//! A source asking whoever made a call (wf-plugin-api 1.2): the plugin emits
//! `Event::AskCaller { call, ask, request }` and the host answers with
//! `SourceRequest::CallerAnswer { ask, .. }`. Both are JSON, so the ABI layout
//! — which a 1.0/1.1 plugin's build must still match — is unchanged.
//!
//! Each call a source may ask about is registered here under the id its info
//! JSON carries (`call`) for as long as the host waits on it.

use std::collections::HashMap;
use std::sync::PoisonError;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex, OnceLock, Weak};

use abi_stable::std_types::RString;
use wf_plugin_api::ffi::SourceBox;
use wf_plugin_api::{CallerRequest, PluginError, SourceRequest};

use super::call::{Asker, CallCtx};

pub(crate) struct Entry {
    pub asker: Option<Arc<dyn Asker>>,
    /// Why nobody can be asked, without an asker.
    pub nobody: String,
    /// Where the answer goes.
    pub source: Weak<SourceBox>,
    /// The host's runtime (events arrive on plugin threads).
    pub runtime: Option<tokio::runtime::Handle>,
}

fn calls() -> &'static Mutex<HashMap<u64, Entry>> {
    static CALLS: OnceLock<Mutex<HashMap<u64, Entry>>> = OnceLock::new();
    CALLS.get_or_init(Default::default)
}

pub(crate) fn register(entry: Entry) -> u64 {
    static NEXT: AtomicU64 = AtomicU64::new(1);
    let id = NEXT.fetch_add(1, Ordering::Relaxed);
    calls()
        .lock()
        .unwrap_or_else(PoisonError::into_inner)
        .insert(id, entry);
    id
}

/// Unregisters its call when dropped (the host no longer waits on it).
pub(crate) struct Registered(pub u64);

impl Drop for Registered {
    fn drop(&mut self) {
        calls()
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .remove(&self.0);
    }
}

/// Handles a plugin's `AskCaller` event: asks the call's asker (or refuses)
/// and sends the answer back to the source. A call that already ended is
/// ignored: its plugin-side future was dropped with it.
pub(crate) fn answer(call: u64, ask: u64, request: CallerRequest) {
    let (asker, nobody, source, runtime) = {
        let calls = calls().lock().unwrap_or_else(PoisonError::into_inner);
        let Some(e) = calls.get(&call) else {
            tracing::debug!(call, ask, "a source asked about a call that already ended");
            return;
        };
        (
            e.asker.clone(),
            e.nobody.clone(),
            e.source.clone(),
            e.runtime.clone(),
        )
    };
    let Some(runtime) = runtime else { return };
    runtime.spawn(async move {
        let answer = match asker {
            Some(asker) => asker.ask(request).await,
            None => Err(PluginError::unsupported(format!(
                "cannot {} the caller: {nobody}",
                request.kind()
            ))),
        };
        let (ok, error) = match answer {
            Ok(v) => (Some(v), None),
            Err(e) => (None, Some(e)),
        };
        let Some(source) = source.upgrade() else {
            return;
        };
        let reply = SourceRequest::CallerAnswer { ask, ok, error };
        let Ok(text) = serde_json::to_string(&reply) else {
            return;
        };
        let (ffi, _guard) = CallCtx::new().into_ffi(None, None);
        if let Err(e) = source.request(RString::from(text), ffi).await.into_result() {
            tracing::warn!(
                call,
                ask,
                "the source did not take the caller's answer: {e}"
            );
        }
    });
}
