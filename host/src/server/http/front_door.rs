//! The `/mcp` route's one middleware: the guard (`Host`, `Origin`, who is
//! calling), then the endpoint gate (`/mcp/NAME`), then the message checks,
//! in that order, each able to answer instead of rmcp's service.
//!
//! One layer, not three: axum boxes each layer's future and wraps the next
//! layer in a boxed, cloned service on every request, so three layers made
//! a call copy three futures (3.8 KB besides the checks' own 5.9 KB) and
//! clone and box the service chain three times over
//! (docs/performance/http-front.md, "One middleware for `/mcp`").

use std::sync::Arc;

use axum::extract::{Request, State};
use axum::middleware::Next;
use axum::response::Response;

use super::endpoint_gate;
use super::messages::{Messages, check_messages};
use crate::server::identity::guard::{self, HttpGuard};
use crate::surfaces::endpoints::Endpoints;

/// What the three steps read.
pub struct FrontDoor {
    pub guard: Arc<HttpGuard>,
    pub endpoints: Arc<Endpoints>,
    pub messages: Arc<Messages>,
}

pub async fn front_door(
    State(door): State<Arc<FrontDoor>>,
    mut request: Request,
    next: Next,
) -> Response {
    if let Some(refused) = guard::admit(&door.guard, &mut request).await {
        return refused;
    }
    if let Some(refused) = endpoint_gate::admit(&door.endpoints, &mut request) {
        return refused;
    }
    check_messages(&door.messages, request, next).await
}
