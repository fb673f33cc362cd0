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

use wf_plugin_api::ffi::SourceBox;

use super::asker::Asker;

#[derive(Clone)]
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

/// The call `call`'s entry, while the host waits on it.
pub(crate) fn entry(call: u64) -> Option<Entry> {
    calls()
        .lock()
        .unwrap_or_else(PoisonError::into_inner)
        .get(&call)
        .cloned()
}
