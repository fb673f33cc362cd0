//! Where the log messages of a 2026-07-28 call in input rounds go.
//!
//! As with progress (`progress_route`): each round of such a call is its own
//! client request, answered on its own stream, and the earlier ones are closed
//! by then. A log message goes to the request the call answers now, at the
//! level that request opted in to; between rounds (no request open) it is
//! dropped.

use std::sync::{Arc, Mutex, PoisonError};

use serde_json::Value;
use wf_plugin_api::CallerRequest;

use crate::sources::{AskFuture, Asker};

/// The log asker of the request a call answers now, shared by the call's
/// asker and its rounds (which re-point it).
#[derive(Clone)]
pub struct LogRoute(Arc<Mutex<Option<Arc<dyn Asker>>>>);

impl LogRoute {
    /// A route to `logs` (the first request's).
    pub fn to(logs: Arc<dyn Asker>) -> Self {
        Self(Arc::new(Mutex::new(Some(logs))))
    }

    /// Log messages go through `logs` (a later round's request) from now on.
    pub fn point_at(&self, logs: Arc<dyn Asker>) {
        *self.0.lock().unwrap_or_else(PoisonError::into_inner) = Some(logs);
    }

    /// No request is open: log messages are dropped until the next round.
    pub fn clear(&self) {
        *self.0.lock().unwrap_or_else(PoisonError::into_inner) = None;
    }

    /// Sends a log message to the current request, if there is one.
    pub fn log(&self, request: CallerRequest) -> AskFuture {
        let current = self
            .0
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .clone();
        match current {
            Some(logs) => logs.ask(request),
            None => Box::pin(async { Ok(Value::Null) }),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Counts the log messages it was handed.
    #[derive(Default)]
    struct Counting(std::sync::atomic::AtomicUsize);
    impl Asker for Counting {
        fn ask(&self, _: CallerRequest) -> AskFuture {
            self.0.fetch_add(1, std::sync::atomic::Ordering::SeqCst);
            Box::pin(async { Ok(Value::Null) })
        }
    }

    fn line() -> CallerRequest {
        CallerRequest::Log {
            level: "info".into(),
            logger: None,
            data: Value::Null,
        }
    }

    #[tokio::test]
    async fn log_messages_follow_the_current_round() {
        let (first, retry) = (Arc::new(Counting::default()), Arc::new(Counting::default()));
        let route = LogRoute::to(first.clone());
        route.log(line()).await.unwrap();
        // Between rounds: dropped.
        route.clear();
        route.log(line()).await.unwrap();
        route.point_at(retry.clone());
        route.log(line()).await.unwrap();
        let count = |c: &Counting| c.0.load(std::sync::atomic::Ordering::SeqCst);
        assert_eq!((count(&first), count(&retry)), (1, 1));
    }
}
