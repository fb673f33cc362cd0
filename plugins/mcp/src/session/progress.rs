//! Routes an upstream's progress notifications to the call that asked for
//! them. rmcp assigns a request's progress token when it sends the request,
//! so a call can subscribe only after sending, and an upstream that reports
//! at once (its first step) can be faster than that: a notification that
//! finds no subscriber is kept for a moment, bounded, and handed to the call
//! that subscribes for its token. rmcp's own dispatcher drops it, which lost
//! first steps under load.

use std::collections::{HashMap, VecDeque};
use std::sync::{Arc, Mutex, PoisonError};
use std::time::{Duration, Instant};

use rmcp::model::{ProgressNotificationParam, ProgressToken};
use tokio::sync::mpsc;

/// Notifications kept for a call that has not subscribed yet: at most this
/// many, for at most this long (an upstream cannot grow it by reporting on
/// tokens nobody asked for).
const UNCLAIMED_MAX: usize = 64;
const UNCLAIMED_TTL: Duration = Duration::from_secs(5);
/// Notifications queued for one subscriber before the upstream's notification
/// task waits for the call to take them.
const CHANNEL_SIZE: usize = 64;

#[derive(Default)]
struct Inner {
    subscribers: HashMap<ProgressToken, mpsc::Sender<ProgressNotificationParam>>,
    unclaimed: VecDeque<(Instant, ProgressNotificationParam)>,
}

/// The progress subscriptions of one upstream session.
#[derive(Clone, Default)]
pub struct Progress {
    inner: Arc<Mutex<Inner>>,
}

impl Progress {
    fn lock(&self) -> std::sync::MutexGuard<'_, Inner> {
        self.inner.lock().unwrap_or_else(PoisonError::into_inner)
    }

    /// Hands `n` to the call subscribed for its token, or keeps it for one
    /// that subscribes soon.
    pub async fn handle_notification(&self, n: ProgressNotificationParam) {
        let sender = {
            let mut inner = self.lock();
            match inner.subscribers.get(&n.progress_token) {
                Some(s) => s.clone(),
                None => {
                    let now = Instant::now();
                    inner
                        .unclaimed
                        .retain(|(at, _)| now.duration_since(*at) < UNCLAIMED_TTL);
                    if inner.unclaimed.len() >= UNCLAIMED_MAX {
                        inner.unclaimed.pop_front();
                    }
                    inner.unclaimed.push_back((now, n));
                    return;
                }
            }
        };
        // The call may have ended meanwhile: nothing left to tell.
        let _ = sender.send(n).await;
    }

    /// The notifications for `token`, those already here first.
    pub fn subscribe(&self, token: ProgressToken) -> Subscriber {
        let (tx, rx) = mpsc::channel(CHANNEL_SIZE);
        let mut inner = self.lock();
        let now = Instant::now();
        let unclaimed = std::mem::take(&mut inner.unclaimed);
        for (at, n) in unclaimed {
            if now.duration_since(at) >= UNCLAIMED_TTL {
                continue;
            }
            if n.progress_token == token {
                // At most UNCLAIMED_MAX of them, and the channel holds as many.
                let _ = tx.try_send(n);
            } else {
                inner.unclaimed.push_back((at, n));
            }
        }
        inner.subscribers.insert(token.clone(), tx);
        Subscriber {
            token,
            rx,
            progress: self.clone(),
        }
    }
}

/// One call's progress notifications; unsubscribes when dropped.
pub struct Subscriber {
    token: ProgressToken,
    rx: mpsc::Receiver<ProgressNotificationParam>,
    progress: Progress,
}

impl Subscriber {
    pub async fn next(&mut self) -> Option<ProgressNotificationParam> {
        self.rx.recv().await
    }

    /// A notification already here, without waiting.
    pub fn try_next(&mut self) -> Option<ProgressNotificationParam> {
        self.rx.try_recv().ok()
    }
}

impl Drop for Subscriber {
    fn drop(&mut self) {
        self.progress.lock().subscribers.remove(&self.token);
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use rmcp::model::NumberOrString;

    fn note(token: i64, step: f64) -> ProgressNotificationParam {
        ProgressNotificationParam::new(ProgressToken(NumberOrString::Number(token)), step)
    }

    #[tokio::test]
    async fn a_report_before_the_subscription_is_not_lost() {
        let p = Progress::default();
        p.handle_notification(note(1, 1.0)).await;
        p.handle_notification(note(2, 9.0)).await;
        let mut sub = p.subscribe(ProgressToken(NumberOrString::Number(1)));
        p.handle_notification(note(1, 2.0)).await;
        assert_eq!(sub.next().await.map(|n| n.progress), Some(1.0));
        assert_eq!(sub.next().await.map(|n| n.progress), Some(2.0));
        // Another token's report waits for its own subscriber.
        assert_eq!(p.lock().unclaimed.len(), 1);
        drop(sub);
        assert!(p.lock().subscribers.is_empty());
    }

    #[tokio::test]
    async fn unclaimed_reports_are_bounded() {
        let p = Progress::default();
        for i in 0..(UNCLAIMED_MAX as i64 * 3) {
            p.handle_notification(note(i, 1.0)).await;
        }
        assert_eq!(p.lock().unclaimed.len(), UNCLAIMED_MAX);
    }
}
