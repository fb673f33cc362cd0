//! Who is calling over HTTP, how much of the front each caller may hold, and
//! warnings that stay readable when a limit is hit thousands of times.
//!
//! Two bounds per principal, each counting only what costs while it is held:
//! requests in progress (a call's POST until its response ends), which wait
//! in a fair, bounded queue before they are refused; and long-lived streams
//! (a 2025-11-25 session's GET stream, a 2026-07-28 `subscriptions/listen`),
//! which are refused at once at their bound. Session set-up and tear-down
//! (`initialize`, `DELETE`), notifications and a client's answers to wf's
//! own requests take neither: they are cheap, bounded elsewhere
//! (`max_sessions`, the body size), and an answer may be what lets a call in
//! progress finish.

use std::collections::HashMap;
use std::pin::Pin;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::{Arc, Mutex, PoisonError};
use std::task::{Context, Poll};
use std::time::{Duration, Instant};

use axum::body::{Body, Bytes, HttpBody};
use axum::http::StatusCode;
use axum::response::{IntoResponse, Response};
use hyper::body::{Frame, SizeHint};
use serde_json::Value;
use tokio::sync::{OwnedSemaphorePermit, Semaphore};

use crate::server::jsonrpc::{SERVER_BUSY, error_reply};
use crate::telemetry::metrics;

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

/// The per-principal bounds, as configured (`[server]`).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct LimitConfig {
    /// `max_requests_per_principal`: calls in progress.
    pub max_in_progress: usize,
    /// `max_queued_per_principal`: calls waiting for one of those slots.
    pub max_queued: usize,
    /// `queue_wait_ms`: how long a call waits before it is refused.
    pub queue_wait: Duration,
    /// `max_streams_per_principal`: long-lived streams open.
    pub max_streams: usize,
}

/// What a request holds while it is served.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Cost {
    /// A request that is answered when its work is done: a call slot.
    Call,
    /// A stream that stays open as long as its client wants: a stream slot.
    Stream,
}

/// Why a request was refused: which bound, and how it was met.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Refusal {
    /// Every call slot stayed taken for the whole queue wait.
    Waited,
    /// The queue itself was full: refused without waiting.
    QueueFull,
    /// Every stream slot is taken.
    Streams,
}

impl Refusal {
    fn label(self) -> &'static str {
        match self {
            Refusal::Waited => "queue_timeout",
            Refusal::QueueFull => "queue_full",
            Refusal::Streams => "streams",
        }
    }
}

/// One principal's slots and queue.
struct Slots {
    calls: Arc<Semaphore>,
    streams: Arc<Semaphore>,
    queued: AtomicUsize,
}

/// The per-principal bounds of the HTTP front.
pub struct PrincipalLimits {
    config: LimitConfig,
    slots: Mutex<HashMap<Principal, Arc<Slots>>>,
    warn: RateLimitedWarn,
}

/// A place in a principal's queue, left when the wait ends however it ends
/// (a client that hangs up while it waits drops the waiting future).
struct InQueue<'a> {
    queued: &'a AtomicUsize,
    principal: &'a str,
}

impl<'a> InQueue<'a> {
    /// Joins the queue; the number that were in it before.
    fn join(queued: &'a AtomicUsize, principal: &'a str) -> (Self, usize) {
        metrics::http_queued(principal, 1);
        let ahead = queued.fetch_add(1, Ordering::Relaxed);
        (Self { queued, principal }, ahead)
    }
}

impl Drop for InQueue<'_> {
    fn drop(&mut self) {
        self.queued.fetch_sub(1, Ordering::Relaxed);
        metrics::http_queued(self.principal, -1);
    }
}

impl PrincipalLimits {
    pub fn new(config: LimitConfig) -> Self {
        Self {
            config,
            slots: Mutex::new(HashMap::new()),
            warn: RateLimitedWarn::new(Duration::from_secs(10)),
        }
    }

    fn slots(&self, p: &Principal) -> Arc<Slots> {
        self.slots
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .entry(p.clone())
            .or_insert_with(|| {
                Arc::new(Slots {
                    calls: Arc::new(Semaphore::new(self.config.max_in_progress)),
                    streams: Arc::new(Semaphore::new(self.config.max_streams)),
                    queued: AtomicUsize::new(0),
                })
            })
            .clone()
    }

    /// A slot for one request of `cost`, waiting for a call slot in the
    /// principal's queue (first come, first served: tokio's semaphore is
    /// fair, and a free slot goes to the longest waiter before any newcomer).
    /// Each principal has its own slots and queue, so one principal's load
    /// never delays another's requests here.
    pub async fn acquire(
        &self,
        p: &Principal,
        cost: Cost,
    ) -> Result<OwnedSemaphorePermit, Refusal> {
        let slots = self.slots(p);
        let refused = match cost {
            Cost::Stream => match slots.streams.clone().try_acquire_owned() {
                Ok(permit) => return Ok(permit),
                Err(_) => Refusal::Streams,
            },
            Cost::Call => {
                if let Ok(permit) = slots.calls.clone().try_acquire_owned() {
                    return Ok(permit);
                }
                match self.wait(&slots, p.name()).await {
                    Ok(permit) => return Ok(permit),
                    Err(r) => r,
                }
            }
        };
        Err(self.refused(p, refused))
    }

    async fn wait(&self, slots: &Slots, principal: &str) -> Result<OwnedSemaphorePermit, Refusal> {
        let (_in_queue, ahead) = InQueue::join(&slots.queued, principal);
        if ahead >= self.config.max_queued {
            return Err(Refusal::QueueFull);
        }
        match tokio::time::timeout(self.config.queue_wait, slots.calls.clone().acquire_owned())
            .await
        {
            Ok(Ok(permit)) => Ok(permit),
            // The semaphore is never closed; time is what ran out.
            _ => Err(Refusal::Waited),
        }
    }

    fn refused(&self, p: &Principal, r: Refusal) -> Refusal {
        metrics::http_refused(p.name(), r.label());
        self.warn.warn(|suppressed| {
            tracing::warn!(
                principal = p.name(),
                limit = r.label(),
                suppressed,
                "HTTP request refused (429): {}",
                self.describe(p, r)
            )
        });
        r
    }

    /// Calls waiting now, per principal.
    #[cfg(test)]
    fn queued(&self) -> Vec<(String, usize)> {
        self.slots
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .iter()
            .map(|(p, s)| (p.name().to_owned(), s.queued.load(Ordering::Relaxed)))
            .collect()
    }

    fn describe(&self, p: &Principal, r: Refusal) -> String {
        let c = &self.config;
        match r {
            Refusal::Waited => format!(
                "too many requests in progress for principal {:?} \
                 (server.max_requests_per_principal = {}); waited {} ms in its queue \
                 (server.queue_wait_ms); retry later",
                p.name(),
                c.max_in_progress,
                c.queue_wait.as_millis()
            ),
            Refusal::QueueFull => format!(
                "too many requests in progress for principal {:?} \
                 (server.max_requests_per_principal = {}) and its queue is full \
                 (server.max_queued_per_principal = {}); retry later",
                p.name(),
                c.max_in_progress,
                c.max_queued
            ),
            Refusal::Streams => format!(
                "too many open streams for principal {:?} \
                 (server.max_streams_per_principal = {}); close one, or retry later",
                p.name(),
                c.max_streams
            ),
        }
    }

    /// The answer to a refused request: **429** with `Retry-After` and a
    /// JSON-RPC error (`id`: the request's) that names the limit.
    pub fn refusal(&self, p: &Principal, r: Refusal, id: Option<Value>) -> Response {
        (
            StatusCode::TOO_MANY_REQUESTS,
            [("retry-after", "1")],
            axum::Json(error_reply(id, SERVER_BUSY, &self.describe(p, r))),
        )
            .into_response()
    }
}

/// `response`, holding `permit` until its body is finished or dropped.
pub fn hold(response: Response, permit: OwnedSemaphorePermit) -> Response {
    let (parts, body) = response.into_parts();
    Response::from_parts(
        parts,
        Body::new(Held {
            body,
            permit: Some(permit),
        }),
    )
}

/// A response body that holds its request's slot until it ends. It says the
/// body's size and end as the body does: a JSON answer still goes out with
/// `Content-Length`, in one write, not chunked (a stream in between hides
/// both, and every call's answer paid chunked framing on both sides).
struct Held {
    body: Body,
    permit: Option<OwnedSemaphorePermit>,
}

impl HttpBody for Held {
    type Data = Bytes;
    type Error = axum::Error;

    fn poll_frame(
        mut self: Pin<&mut Self>,
        cx: &mut Context<'_>,
    ) -> Poll<Option<Result<Frame<Bytes>, axum::Error>>> {
        let frame = Pin::new(&mut self.body).poll_frame(cx);
        if matches!(frame, Poll::Ready(None | Some(Err(_)))) || self.body.is_end_stream() {
            self.permit = None;
        }
        frame
    }

    fn is_end_stream(&self) -> bool {
        self.body.is_end_stream()
    }

    fn size_hint(&self) -> SizeHint {
        self.body.size_hint()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[tokio::test]
    async fn a_held_answer_keeps_its_length_and_its_slot_until_it_ends() {
        use futures::StreamExt;

        let slots = Arc::new(Semaphore::new(1));
        let permit = slots.clone().acquire_owned().await.unwrap();
        let r = hold((StatusCode::OK, "hello").into_response(), permit);
        // hyper answers with Content-Length only for an exact size.
        assert_eq!(r.body().size_hint().exact(), Some(5));
        assert!(!r.body().is_end_stream());
        assert_eq!(slots.available_permits(), 0);
        let body = axum::body::to_bytes(r.into_body(), 64).await.unwrap();
        assert_eq!(&body[..], b"hello");
        assert_eq!(slots.available_permits(), 1);

        // A stream (a session's GET) holds its slot while it is open.
        let (tx, rx) = futures::channel::mpsc::unbounded::<Result<Bytes, std::io::Error>>();
        let stream = Body::from_stream(rx);
        let permit = slots.clone().acquire_owned().await.unwrap();
        let r = hold(Response::new(stream), permit);
        assert_eq!(r.body().size_hint().exact(), None);
        let mut body = r.into_body().into_data_stream();
        tx.unbounded_send(Ok(Bytes::from_static(b"event"))).unwrap();
        assert_eq!(&body.next().await.unwrap().unwrap()[..], b"event");
        assert_eq!(slots.available_permits(), 0);
        drop(tx);
        assert!(body.next().await.is_none());
        assert_eq!(slots.available_permits(), 1);
    }

    fn limits(max_in_progress: usize, max_queued: usize, wait_ms: u64) -> PrincipalLimits {
        PrincipalLimits::new(LimitConfig {
            max_in_progress,
            max_queued,
            queue_wait: Duration::from_millis(wait_ms),
            max_streams: 1,
        })
    }

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

    #[tokio::test]
    async fn slots_per_principal() {
        let l = limits(2, 0, 10);
        let local = Principal::local();
        let a = l.acquire(&local, Cost::Call).await.unwrap();
        let b = l.acquire(&local, Cost::Call).await.unwrap();
        assert_eq!(
            l.acquire(&local, Cost::Call).await.unwrap_err(),
            Refusal::QueueFull,
            "no queue: refused at once"
        );
        assert!(
            l.acquire(&Principal::bearer(), Cost::Call).await.is_ok(),
            "another principal has its own slots"
        );
        drop((a, b));
        assert!(l.acquire(&local, Cost::Call).await.is_ok());
    }

    #[tokio::test]
    async fn a_queued_call_gets_the_next_free_slot() {
        let l = Arc::new(limits(1, 4, 5_000));
        let local = Principal::local();
        let first = l.acquire(&local, Cost::Call).await.unwrap();
        let waiter = {
            let l = l.clone();
            tokio::spawn(async move { l.acquire(&Principal::local(), Cost::Call).await.is_ok() })
        };
        while l.queued() != vec![("local".to_owned(), 1)] {
            tokio::task::yield_now().await;
        }
        drop(first);
        assert!(waiter.await.unwrap(), "the waiter got the freed slot");
        assert_eq!(l.queued(), vec![("local".to_owned(), 0)]);
    }

    #[tokio::test]
    async fn a_queued_call_is_refused_when_its_wait_is_over() {
        let l = limits(1, 4, 20);
        let local = Principal::local();
        let _held = l.acquire(&local, Cost::Call).await.unwrap();
        assert_eq!(
            l.acquire(&local, Cost::Call).await.unwrap_err(),
            Refusal::Waited
        );
        assert_eq!(
            l.queued(),
            vec![("local".to_owned(), 0)],
            "it left the queue"
        );
    }

    #[tokio::test]
    async fn streams_have_their_own_bound_and_no_queue() {
        let l = limits(1, 4, 5_000);
        let local = Principal::local();
        let _call = l.acquire(&local, Cost::Call).await.unwrap();
        let stream = l.acquire(&local, Cost::Stream).await.unwrap();
        assert_eq!(
            l.acquire(&local, Cost::Stream).await.unwrap_err(),
            Refusal::Streams
        );
        drop(stream);
        assert!(l.acquire(&local, Cost::Stream).await.is_ok());
    }

    #[tokio::test]
    async fn a_refusal_is_429_with_retry_after_and_names_the_limit() {
        let l = limits(1, 0, 10);
        let r = l.refusal(&Principal::local(), Refusal::Waited, Some(7.into()));
        assert_eq!(r.status(), StatusCode::TOO_MANY_REQUESTS);
        assert_eq!(r.headers()["retry-after"], "1");
        let body = axum::body::to_bytes(r.into_body(), 1 << 16).await.unwrap();
        let v: Value = serde_json::from_slice(&body).unwrap();
        assert_eq!(v["id"], 7);
        assert_eq!(v["error"]["code"], SERVER_BUSY);
        let message = v["error"]["message"].as_str().unwrap();
        assert!(
            message.contains("server.max_requests_per_principal = 1")
                && message.contains("server.queue_wait_ms"),
            "{message}"
        );
    }
}
