//! Since 1.2: a call asking whoever made it. The plugin sends
//! `Event::AskCaller` with an ask id and waits here; the host's
//! `SourceRequest::CallerAnswer` for that id completes it.

use std::sync::atomic::Ordering;
use std::sync::{OnceLock, PoisonError};

use futures::channel::oneshot;

use crate::error::PluginError;

pub(crate) type Answer = Result<serde_json::Value, PluginError>;

/// Since 1.2: the asks waiting for their `SourceRequest::CallerAnswer`.
fn pending() -> &'static std::sync::Mutex<std::collections::HashMap<u64, oneshot::Sender<Answer>>> {
    static PENDING: OnceLock<
        std::sync::Mutex<std::collections::HashMap<u64, oneshot::Sender<Answer>>>,
    > = OnceLock::new();
    PENDING.get_or_init(Default::default)
}

/// Removes a pending ask when its caller stops waiting.
pub(crate) struct PendingAsk(pub(crate) u64);

impl Drop for PendingAsk {
    fn drop(&mut self) {
        pending()
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .remove(&self.0);
    }
}

/// Registers an ask, has `send` send it (given its id) to the host, and
/// waits for the answer.
pub(crate) async fn ask(send: impl FnOnce(u64)) -> Answer {
    static NEXT: std::sync::atomic::AtomicU64 = std::sync::atomic::AtomicU64::new(1);
    let ask = NEXT.fetch_add(1, Ordering::Relaxed);
    let (tx, rx) = oneshot::channel();
    pending()
        .lock()
        .unwrap_or_else(PoisonError::into_inner)
        .insert(ask, tx);
    let _pending = PendingAsk(ask);
    send(ask);
    rx.await
        .unwrap_or_else(|_| Err(PluginError::internal("the host dropped the request")))
}

/// Completes a pending ask (the host's `SourceRequest::CallerAnswer`).
pub(crate) fn complete_ask(ask: u64, answer: Answer) {
    if let Some(tx) = pending()
        .lock()
        .unwrap_or_else(PoisonError::into_inner)
        .remove(&ask)
    {
        let _ = tx.send(answer);
    }
}
