//! Resource subscriptions of a `subscriptions/listen` stream being set up on
//! a source. rmcp acknowledges a stream before wf's handler runs, and the
//! acknowledgment promises the client every matching update from then on; a
//! client may send the call that changes the resource before the source
//! watches it. So a tool call to a source waits while a stream's set-up on
//! that source is under way, at most [`SETUP_BOUND`] (an upstream that never
//! acknowledges its own listen is given up on by then, and a set-up whose
//! stream never ran expires).

use std::sync::Mutex;
use std::sync::PoisonError;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::time::Duration;

use tokio::sync::Notify;
use tokio::time::Instant;

/// Longest a call waits for a set-up, and how long a set-up is counted at
/// most: the mcp plugin waits up to 5 s for an upstream's acknowledgment.
pub const SETUP_BOUND: Duration = Duration::from_secs(6);

#[derive(Default)]
pub struct ListenGate {
    /// Set-ups under way (a fast check for the call path: almost always 0).
    pending: AtomicUsize,
    /// When each set-up under way stops counting.
    until: Mutex<Vec<Instant>>,
    done: Notify,
}

impl ListenGate {
    /// A stream's set-up on this source starts (before it is acknowledged).
    pub fn begin(&self) {
        self.begin_until(Instant::now() + SETUP_BOUND);
    }

    fn begin_until(&self, end: Instant) {
        let mut until = self.until.lock().unwrap_or_else(PoisonError::into_inner);
        until.push(end);
        self.pending.store(until.len(), Ordering::Release);
    }

    /// A set-up that began ended (done or failed).
    pub fn end(&self) {
        let mut until = self.until.lock().unwrap_or_else(PoisonError::into_inner);
        // Which one does not matter; the earliest expires first anyway.
        if !until.is_empty() {
            until.remove(0);
        }
        self.pending.store(until.len(), Ordering::Release);
        drop(until);
        self.done.notify_waiters();
    }

    /// Returns once no set-up is under way, or the last one under way expired.
    pub async fn passed(&self) {
        if self.pending.load(Ordering::Acquire) == 0 {
            return;
        }
        loop {
            let notified = self.done.notified();
            let latest = {
                let mut until = self.until.lock().unwrap_or_else(PoisonError::into_inner);
                let now = Instant::now();
                until.retain(|t| *t > now);
                self.pending.store(until.len(), Ordering::Release);
                match until.iter().max() {
                    Some(latest) => *latest,
                    None => return,
                }
            };
            // Ended or expired: look again (what expired is dropped above).
            let _ = tokio::time::timeout_at(latest, notified).await;
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[tokio::test]
    async fn a_call_waits_for_a_set_up_under_way_and_not_otherwise() {
        let gate = std::sync::Arc::new(ListenGate::default());
        gate.passed().await;
        gate.begin();
        let waiting = tokio::spawn({
            let gate = gate.clone();
            async move { gate.passed().await }
        });
        tokio::task::yield_now().await;
        assert!(!waiting.is_finished(), "a call went ahead of the set-up");
        gate.end();
        tokio::time::timeout(Duration::from_secs(5), waiting)
            .await
            .expect("the call still waits after the set-up ended")
            .unwrap();
    }

    #[tokio::test]
    async fn a_set_up_that_never_ends_stops_counting() {
        let gate = ListenGate::default();
        let started = Instant::now();
        gate.begin_until(started + Duration::from_millis(50));
        gate.passed().await;
        assert!(started.elapsed() >= Duration::from_millis(50));
        // Expired: later calls do not wait.
        assert_eq!(gate.pending.load(Ordering::Acquire), 0);
        gate.passed().await;
    }
}
