//! Where the progress reports of a 2026-07-28 call in input rounds go.
//!
//! Such a call answers several client requests in turn: its first
//! `tools/call`, then each retry with `inputResponses` (see `mrtr`). Every
//! request is answered on its own stream (a stateless HTTP request's own
//! service), with its own progress token, and the earlier ones are closed by
//! then. So a report goes to the request the call answers now, with that
//! request's token; between rounds (no request open) it is dropped.

use std::sync::{Arc, Mutex, PoisonError};

use rmcp::model::{ProgressNotificationParam, ProgressToken};
use rmcp::service::RequestContext;
use rmcp::{Peer, RoleServer};

use crate::sources::Progress;

/// A request that takes progress reports: its client and its token.
type Target = (Peer<RoleServer>, ProgressToken);

/// The request a call reports progress to now, shared by the call (which
/// finds it in its context's extensions) and its rounds (which re-point it).
#[derive(Clone, Default)]
pub struct ProgressRoute(Arc<Mutex<Option<Target>>>);

impl ProgressRoute {
    /// A route to `context`'s request.
    pub fn to(context: &RequestContext<RoleServer>) -> Self {
        let route = Self::default();
        route.point_at(context);
        route
    }

    /// Reports go to `context`'s request from now on (nowhere if it sent no
    /// progress token).
    pub fn point_at(&self, context: &RequestContext<RoleServer>) {
        let target = context
            .meta
            .get_progress_token()
            .map(|token| (context.peer.clone(), token));
        *self.0.lock().unwrap_or_else(PoisonError::into_inner) = target;
    }

    /// No request is open: reports are dropped until the next round.
    pub fn clear(&self) {
        *self.0.lock().unwrap_or_else(PoisonError::into_inner) = None;
    }

    /// Sends `p` to the current request, if there is one.
    pub async fn send(&self, p: Progress) {
        let target = self
            .0
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .clone();
        if let Some((peer, token)) = target {
            let _ = peer.notify_progress(notification(token, p)).await;
        }
    }
}

/// `p` as the notification for the request with `token`.
pub fn notification(token: ProgressToken, p: Progress) -> ProgressNotificationParam {
    let mut n = ProgressNotificationParam::new(token, p.progress);
    n.total = p.total;
    n.message = p.message;
    n
}
