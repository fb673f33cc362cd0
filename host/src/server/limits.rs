//! Who is calling over HTTP, how much of the front each caller may hold, and
//! warnings that stay readable when a limit is hit thousands of times.

use std::collections::HashMap;
use std::sync::PoisonError;
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use axum::body::Body;
use axum::extract::{Request, State};
use axum::http::StatusCode;
use axum::middleware::Next;
use axum::response::{IntoResponse, Response};
use futures::StreamExt;
use tokio::sync::{OwnedSemaphorePermit, Semaphore};

use super::jsonrpc::{SERVER_BUSY, error_reply};

pub use crate::config::Principal;

/// The principal an HTTP request was checked as (set by the guard in the
/// request's extensions); `local` when there is none (stdio).
pub fn principal_of_request(parts: Option<&http::request::Parts>) -> Principal {
    parts
        .and_then(|p| p.extensions.get::<Principal>())
        .cloned()
        .unwrap_or_else(Principal::local)
}

/// Logs at most one warning per interval and counts the ones it held back.
pub struct RateLimitedWarn {
    every: Duration,
    state: Mutex<(Option<Instant>, u64)>,
}

impl RateLimitedWarn {
    pub fn new(every: Duration) -> Self {
        Self {
            every,
            state: Mutex::new((None, 0)),
        }
    }

    /// Calls `log(suppressed_since_last)` unless a warning went out within the
    /// interval.
    pub fn warn(&self, log: impl FnOnce(u64)) {
        let mut s = self.state.lock().unwrap_or_else(PoisonError::into_inner);
        let now = Instant::now();
        if s.0
            .is_some_and(|last| now.duration_since(last) < self.every)
        {
            s.1 += 1;
            return;
        }
        let suppressed = std::mem::take(&mut s.1);
        s.0 = Some(now);
        drop(s);
        log(suppressed);
    }
}

/// At most `max` requests in progress per principal. A request holds its
/// slot until its response body is done, so open SSE streams count.
pub struct PrincipalLimits {
    max: usize,
    slots: Mutex<HashMap<Principal, Arc<Semaphore>>>,
    warn: RateLimitedWarn,
}

impl PrincipalLimits {
    pub fn new(max: usize) -> Self {
        Self {
            max,
            slots: Mutex::new(HashMap::new()),
            warn: RateLimitedWarn::new(Duration::from_secs(10)),
        }
    }

    fn try_acquire(&self, p: &Principal) -> Option<OwnedSemaphorePermit> {
        let sem = self
            .slots
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .entry(p.clone())
            .or_insert_with(|| Arc::new(Semaphore::new(self.max)))
            .clone();
        sem.try_acquire_owned().ok()
    }
}

/// Busy: 503 with a JSON-RPC error body and `Retry-After`.
pub fn busy(message: &str) -> Response {
    (
        StatusCode::SERVICE_UNAVAILABLE,
        [("retry-after", "1")],
        axum::Json(error_reply(None, SERVER_BUSY, message)),
    )
        .into_response()
}

pub async fn limit_per_principal(
    State(limits): State<Arc<PrincipalLimits>>,
    request: Request,
    next: Next,
) -> Response {
    let principal = request
        .extensions()
        .get::<Principal>()
        .cloned()
        .unwrap_or_else(Principal::local);
    let Some(permit) = limits.try_acquire(&principal) else {
        limits.warn.warn(|suppressed| {
            tracing::warn!(
                principal = principal.name(),
                max = limits.max,
                suppressed,
                "HTTP request refused (503): too many requests in progress for this principal \
                 (server.max_requests_per_principal)"
            )
        });
        return busy(&format!(
            "too many requests in progress for principal {:?} (limit {}); retry later",
            principal.name(),
            limits.max
        ));
    };
    let response = next.run(request).await;
    let (parts, body) = response.into_parts();
    // The slot is released when the body is finished or dropped.
    let body = body.into_data_stream().map(move |chunk| {
        let _held = &permit;
        chunk
    });
    Response::from_parts(parts, Body::from_stream(body))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn warnings_are_rate_limited() {
        let w = RateLimitedWarn::new(Duration::from_secs(3600));
        let mut logged = Vec::new();
        for _ in 0..5 {
            w.warn(|n| logged.push(n));
        }
        assert_eq!(logged, vec![0]);
        assert_eq!(w.state.lock().unwrap().1, 4);
    }

    #[test]
    fn slots_per_principal() {
        let l = PrincipalLimits::new(2);
        let a = (
            l.try_acquire(&Principal::local()),
            l.try_acquire(&Principal::local()),
        );
        assert!(a.0.is_some() && a.1.is_some());
        assert!(l.try_acquire(&Principal::local()).is_none());
        assert!(
            l.try_acquire(&Principal::bearer()).is_some(),
            "another principal has its own slots"
        );
        drop(a);
        assert!(l.try_acquire(&Principal::local()).is_some());
    }
}
