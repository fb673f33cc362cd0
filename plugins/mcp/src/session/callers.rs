//! The calls in flight on one upstream session, so that a request the
//! upstream sends back (elicitation, sampling, roots) or a log message goes
//! to the caller of the call it belongs to — and never to another one.
//!
//! Over streamable HTTP rmcp tells which of our requests' reply stream a
//! server request arrived on ([`InboundStreamOrigin`]); over stdio nothing
//! relates it to a call, so it can only be routed when exactly one call is
//! in flight on the session.

use std::sync::PoisonError;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex};

use rmcp::model::{Extensions, RequestId};
use rmcp::service::InboundStreamOrigin;
use wf_plugin_api::CallContext;

struct Slot {
    key: u64,
    id: Option<RequestId>,
    ctx: CallContext,
}

#[derive(Clone, Default)]
pub struct Callers {
    slots: Arc<Mutex<Vec<Slot>>>,
    next: Arc<AtomicU64>,
}

/// A call's registration; removed when dropped (the call ended).
pub struct Registered {
    callers: Callers,
    key: u64,
}

impl Registered {
    /// The upstream request id of the call, once sent.
    pub fn set_id(&self, id: RequestId) {
        let mut slots = self
            .callers
            .slots
            .lock()
            .unwrap_or_else(PoisonError::into_inner);
        if let Some(s) = slots.iter_mut().find(|s| s.key == self.key) {
            s.id = Some(id);
        }
    }
}

impl Drop for Registered {
    fn drop(&mut self) {
        self.callers
            .slots
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .retain(|s| s.key != self.key);
    }
}

/// The upstream request id whose reply stream carried a message, if the
/// transport knows it.
pub fn origin(extensions: &Extensions) -> Option<RequestId> {
    match extensions.get::<InboundStreamOrigin>() {
        Some(InboundStreamOrigin::OutboundRequest(id)) => Some(id.clone()),
        _ => None,
    }
}

impl Callers {
    /// Registers a call before its request is sent (an upstream may ask
    /// back before the send returns).
    pub fn register(&self, ctx: &CallContext) -> Registered {
        let key = self.next.fetch_add(1, Ordering::Relaxed);
        self.slots
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .push(Slot {
                key,
                id: None,
                ctx: ctx.clone(),
            });
        Registered {
            callers: self.clone(),
            key,
        }
    }

    /// The caller a message belongs to, or why it cannot be told.
    pub fn route(&self, origin: Option<&RequestId>) -> Result<CallContext, String> {
        let slots = self.slots.lock().unwrap_or_else(PoisonError::into_inner);
        if let Some(id) = origin
            && let Some(s) = slots.iter().find(|s| s.id.as_ref() == Some(id))
        {
            return Ok(s.ctx.clone());
        }
        match slots.as_slice() {
            [one] => Ok(one.ctx.clone()),
            [] => Err("no call is in flight on this upstream session".into()),
            many => Err(format!(
                "{} calls are in flight on this shared upstream session and nothing relates the request to one of them",
                many.len()
            )),
        }
    }

    /// Whether no call is in flight.
    pub fn is_empty(&self) -> bool {
        self.slots
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .is_empty()
    }
}
