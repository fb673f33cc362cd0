//! A 2025-11-25 session's `tools/call` answered in the request's own task.
//!
//! rmcp serves a session's request through the session's worker: the POST
//! asks the worker for a response channel, hands it the message, the worker
//! passes it to the session's serve loop, which spawns the handler, whose
//! answer goes back through the worker to the channel and out as a one-event
//! stream (docs/benchmarks.md, "The HTTP front": ≈ 185 µs of a call). Here the
//! message `check_messages` already parsed goes to the session's own handler
//! with the session's own peer, and the answer is the JSON body.
//!
//! What the session's peer would carry during the call is unchanged: log
//! messages and list changes go to the session's standalone stream either way
//! (rmcp routes no other notification to a request's stream). A request wf
//! would send the client mid-call (sampling, elicitation, roots) does ride the
//! request's stream, so a session whose client declared any of those is never
//! answered here, nor is a call with a progress token.
//!
//! A call answered here runs in a task of its own, as rmcp's do: a client
//! that hangs up does not cancel it (the protocol says a disconnection is not
//! a cancellation); `notifications/cancelled` and the session's end do. And
//! since the session's worker sees nothing of such a call, it is told of the
//! session's use often enough that its idle timeout still measures the
//! client's silence.

use std::collections::HashMap;
use std::sync::Mutex;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Weak};
use std::time::{Duration, Instant};

use axum::http::{HeaderMap, StatusCode, request::Parts};
use axum::response::Response;
use rmcp::model::{
    ClientCapabilities, ClientRequest, GetExtensions, GetMeta, JsonRpcRequest, ProtocolVersion,
    RequestId, ServerJsonRpcMessage,
};
use rmcp::service::{NotificationContext, RequestContext};
use rmcp::transport::streamable_http_server::SessionId;
use rmcp::{ErrorData, Peer, RoleServer, Service};
use tokio_util::sync::CancellationToken;

use super::direct::json_reply;
use super::headers::{SESSION_HEADER, accepts_json_and_sse, sole};
use super::late::message_in_time;
use crate::server::mcp::handler::{InPlaceCalls, WfServer};

/// The sessions whose calls can be answered in place, by session id.
pub struct SessionCalls {
    sessions: Mutex<HashMap<SessionId, Arc<Served>>>,
    /// The session idle timeout; the worker is told of use at a quarter of it.
    touch_every: Duration,
}

/// One session served in place: its handler, its peer, its calls.
pub struct Served {
    id: SessionId,
    server: WfServer,
    peer: Peer<RoleServer>,
    /// Cancelled when the session ends: every call of it is then cancelled,
    /// as rmcp's serve loop cancels its own.
    ended: CancellationToken,
    calls: Mutex<HashMap<RequestId, (u64, CancellationToken)>>,
    next_call: AtomicU64,
    /// When the session's worker was last told of a call (ms since `born`).
    touched_ms: AtomicU64,
    born: Instant,
    touch_every_ms: u64,
}

impl SessionCalls {
    pub fn new(idle_timeout: Duration) -> Self {
        Self {
            sessions: Mutex::default(),
            touch_every: idle_timeout / 4,
        }
    }

    /// Takes the session `id` names once its client has initialised, unless
    /// the client can be asked something mid-call (see the module's comment).
    pub fn register(&self, id: SessionId, server: WfServer, peer: Peer<RoleServer>) {
        let Some(info) = peer.peer_info() else {
            return;
        };
        if info.protocol_version >= ProtocolVersion::V_2026_07_28
            || can_be_asked(&info.capabilities)
        {
            return;
        }
        let served = Arc::new(Served {
            id: id.clone(),
            server,
            peer,
            ended: CancellationToken::new(),
            calls: Mutex::default(),
            next_call: AtomicU64::new(0),
            touched_ms: AtomicU64::new(0),
            born: Instant::now(),
            // Never 0: a touch per call would be the worker hop this saves.
            touch_every_ms: (self.touch_every.as_millis() as u64).max(1),
        });
        let old = self.lock().insert(id, served);
        if let Some(old) = old {
            old.ended.cancel();
        }
    }

    /// The session has ended: its calls are cancelled and its handler let go.
    pub fn forget(&self, id: &SessionId) {
        if let Some(served) = self.lock().remove(id) {
            served.ended.cancel();
        }
    }

    /// The session this request is a plain `tools/call` of, when it may be
    /// answered here.
    pub fn takes(
        &self,
        headers: &HeaderMap,
        request: &JsonRpcRequest<ClientRequest>,
    ) -> Option<Arc<Served>> {
        let ClientRequest::CallToolRequest(_) = &request.request else {
            return None;
        };
        let meta = request.request.get_meta();
        if meta.protocol_version().is_some()
            || meta.get_progress_token().is_some()
            || !legacy_version_header(headers)
            || !accepts_json_and_sse(headers)
        {
            return None;
        }
        let id = sole(headers, SESSION_HEADER)?;
        self.lock().get(id).cloned()
    }

    /// A client's `notifications/cancelled` for a call answered here.
    pub fn cancel(&self, session: &str, request: &RequestId) {
        let served = self.lock().get(session).cloned();
        if let Some((_, ct)) = served.and_then(|s| s.lock_calls().remove(request)) {
            tracing::debug!(id = %request, "cancelled a call answered in place");
            ct.cancel();
        }
    }

    fn lock(&self) -> std::sync::MutexGuard<'_, HashMap<SessionId, Arc<Served>>> {
        self.sessions.lock().unwrap_or_else(|e| e.into_inner())
    }
}

impl InPlaceCalls for SessionCalls {
    fn session_of(&self, context: &NotificationContext<RoleServer>) -> Option<SessionId> {
        let parts = context.extensions.get::<Parts>()?;
        Some(parts.headers.get(SESSION_HEADER)?.to_str().ok()?.into())
    }

    fn register(&self, id: SessionId, server: WfServer, peer: Peer<RoleServer>) {
        SessionCalls::register(self, id, server, peer);
    }
}

impl Served {
    /// Answers the call as the session's serve loop would: as JSON, or as
    /// an event stream once it has taken `patience` ([`message_in_time`]).
    /// `touch` tells the session's worker of the use, when it is due.
    pub async fn serve<F>(
        self: Arc<Self>,
        parts: Parts,
        mut request: JsonRpcRequest<ClientRequest>,
        touch: impl FnOnce(SessionId) -> F,
        patience: Duration,
    ) -> Response
    where
        F: Future<Output = ()> + Send + 'static,
    {
        let now = self.born.elapsed().as_millis() as u64;
        let last = self.touched_ms.load(Ordering::Relaxed);
        let every = self.touch_every_ms;
        if now.saturating_sub(last) >= every
            && self
                .touched_ms
                .compare_exchange(last, now.max(1), Ordering::Relaxed, Ordering::Relaxed)
                .is_ok()
        {
            tokio::spawn(touch(self.id.clone()));
        }
        let id = request.id.clone();
        let mut context = RequestContext::new(id.clone(), self.peer.clone());
        context.ct = self.ended.child_token();
        std::mem::swap(&mut context.meta, request.request.get_meta_mut());
        std::mem::swap(&mut context.extensions, request.request.extensions_mut());
        context.extensions.insert(parts);
        let tracked = self.track(id.clone(), context.ct.clone());
        let server = self.server.clone();
        // rmcp's request future is as large as its largest handler's: boxed
        // once here, the task holds a pointer, not a copy of it (each copy
        // a call moved it through wrote kilobytes of cold memory).
        let call = tokio::spawn(Box::pin(async move {
            let _untrack = tracked;
            Service::handle_request(&server, request.request, context).await
        }));
        let answer = Box::pin(async move {
            match call.await {
                Ok(Ok(result)) => ServerJsonRpcMessage::response(result, id),
                Ok(Err(error)) => ServerJsonRpcMessage::error(error, Some(id)),
                Err(e) => {
                    tracing::error!("a call answered in place failed: {e}");
                    let error = ErrorData::internal_error("the call failed inside wf", None);
                    ServerJsonRpcMessage::error(error, Some(id))
                }
            }
        });
        let response = message_in_time(answer, patience, ok_json).await;
        tracing::debug!("session tools/call answered in place");
        response
    }

    fn track(self: &Arc<Self>, id: RequestId, ct: CancellationToken) -> Untrack {
        let n = self.next_call.fetch_add(1, Ordering::Relaxed);
        self.lock_calls().insert(id.clone(), (n, ct));
        Untrack {
            served: Arc::downgrade(self),
            id,
            n,
        }
    }

    fn lock_calls(
        &self,
    ) -> std::sync::MutexGuard<'_, HashMap<RequestId, (u64, CancellationToken)>> {
        self.calls.lock().unwrap_or_else(|e| e.into_inner())
    }
}

/// Every answer on a session's request stream is a 200, errors included:
/// they are JSON-RPC errors, as rmcp sends them.
fn ok_json(message: &ServerJsonRpcMessage) -> Response {
    json_reply(StatusCode::OK, message)
}

/// Takes a finished call out of its session's list (only itself: a client
/// may reuse a request id).
struct Untrack {
    served: Weak<Served>,
    id: RequestId,
    n: u64,
}

impl Drop for Untrack {
    fn drop(&mut self) {
        if let Some(served) = self.served.upgrade() {
            let mut calls = served.lock_calls();
            if calls.get(&self.id).is_some_and(|(n, _)| *n == self.n) {
                calls.remove(&self.id);
            }
        }
    }
}

/// Whether wf could send this client a request during a call.
fn can_be_asked(caps: &ClientCapabilities) -> bool {
    caps.sampling.is_some() || caps.elicitation.is_some() || caps.roots.is_some()
}

/// `MCP-Protocol-Version` is absent, or one version rmcp knows from before
/// 2026-07-28 (rmcp refuses an unknown one, and a later one needs `_meta`).
fn legacy_version_header(headers: &HeaderMap) -> bool {
    if !headers.contains_key("mcp-protocol-version") {
        return true;
    }
    sole(headers, "mcp-protocol-version").is_some_and(|v| {
        v < ProtocolVersion::V_2026_07_28.as_str()
            && ProtocolVersion::KNOWN_VERSIONS
                .iter()
                .any(|k| k.as_str() == v)
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use axum::http::HeaderValue;

    fn with_version(values: &[&'static str]) -> HeaderMap {
        let mut h = HeaderMap::new();
        for v in values {
            h.append("mcp-protocol-version", HeaderValue::from_static(v));
        }
        h
    }

    #[test]
    fn only_one_known_version_from_before_2026_is_taken() {
        assert!(legacy_version_header(&HeaderMap::new()));
        assert!(legacy_version_header(&with_version(&["2025-11-25"])));
        assert!(legacy_version_header(&with_version(&["2025-03-26"])));
        // rmcp refuses an unknown version; 2026-07-28 needs the request's _meta.
        assert!(!legacy_version_header(&with_version(&["2025-01-01"])));
        assert!(!legacy_version_header(&with_version(&["2026-07-28"])));
        assert!(!legacy_version_header(&with_version(&[
            "2025-11-25",
            "2025-11-25"
        ])));
    }

    #[test]
    fn a_client_that_can_be_asked_anything_is_not_served_here() {
        let caps =
            |v: serde_json::Value| -> ClientCapabilities { serde_json::from_value(v).unwrap() };
        assert!(!can_be_asked(&caps(serde_json::json!({}))));
        assert!(!can_be_asked(&caps(
            serde_json::json!({"experimental": {}})
        )));
        for kind in ["sampling", "elicitation", "roots"] {
            assert!(can_be_asked(&caps(serde_json::json!({kind: {}}))), "{kind}");
        }
    }
}
