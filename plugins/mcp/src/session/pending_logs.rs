//! Log messages (and progress notifications) the upstream sent before a
//! reply, delivered before the call returns. rmcp hands each notification to a task of its own but the reply
//! to the waiting call at once, so a log line sent just before the reply can
//! still be on its way when the call ends; once the call's caller is gone,
//! the line has nobody to go to. The transports count each log message as it
//! arrives (in the order of the wire), the client handler counts it once it
//! is delivered, and a call whose reply came waits until every message that
//! arrived before it has been delivered, for a short while at most. Progress
//! notifications are counted the same way ([`counted`]): one sent right before
//! the reply would otherwise reach the call's progress channel after the call
//! stopped reading it.

use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering};
use std::time::Duration;

use tokio::sync::Notify;

#[derive(Clone, Default)]
pub struct PendingLogs(Arc<Counts>);

#[derive(Default)]
struct Counts {
    arrived: AtomicU64,
    delivered: AtomicU64,
    changed: Notify,
}

impl PendingLogs {
    /// A log message came off the wire.
    pub fn arrived(&self) {
        self.0.arrived.fetch_add(1, Ordering::SeqCst);
    }

    /// A log message was delivered (or dropped on purpose).
    pub fn delivered(&self) {
        self.0.delivered.fetch_add(1, Ordering::SeqCst);
        self.0.changed.notify_waiters();
    }

    /// Waits until as many messages were delivered as had arrived when it
    /// was called, for at most `grace`. Free when none is on its way. One
    /// that never came through (rmcp dropped it) is written off when the
    /// grace ends, so it delays one call, not every call after it.
    pub async fn settle(&self, grace: Duration) {
        let target = self.0.arrived.load(Ordering::SeqCst);
        if self.0.delivered.load(Ordering::SeqCst) >= target {
            return;
        }
        let caught_up = async {
            loop {
                let changed = self.0.changed.notified();
                if self.0.delivered.load(Ordering::SeqCst) >= target {
                    return;
                }
                changed.await;
            }
        };
        if tokio::time::timeout(grace, caught_up).await.is_err() {
            self.0.delivered.fetch_max(target, Ordering::SeqCst);
        }
    }
}

/// The `_meta` key of a message sent on a 2026-07-28 listen stream, which
/// rmcp hands to the subscription, not to the client handler.
const SUBSCRIPTION: &[u8] = b"io.modelcontextprotocol/subscriptionId";

/// Whether a raw JSON-RPC message is a log message that rmcp hands to the
/// client handler: a well-formed `notifications/message` that is no listen
/// stream's.
pub fn is_log(message: &[u8]) -> bool {
    const METHOD: &[u8] = b"notifications/message";
    // A tool result over SSE may be megabytes: memchr's search, not a byte loop.
    let has = |needle: &[u8]| memchr::memmem::find(message, needle).is_some();
    has(METHOD)
        && !has(SUBSCRIPTION)
        && serde_json::from_slice::<rmcp::model::ServerJsonRpcMessage>(message).is_ok_and(|m| {
            matches!(
                m,
                rmcp::model::JsonRpcMessage::Notification(n)
                    if matches!(n.notification, rmcp::model::ServerNotification::LoggingMessageNotification(_))
            )
        })
}

/// Whether a raw JSON-RPC message is a progress notification.
pub fn is_progress(message: &[u8]) -> bool {
    memchr::memmem::find(message, b"notifications/progress").is_some()
        && serde_json::from_slice::<rmcp::model::ServerJsonRpcMessage>(message).is_ok_and(|m| {
            matches!(
                m,
                rmcp::model::JsonRpcMessage::Notification(n)
                    if matches!(n.notification, rmcp::model::ServerNotification::ProgressNotification(_))
            )
        })
}

/// Whether a raw JSON-RPC message is one the transports count as arrived
/// (a log message or a progress notification).
pub fn counted(message: &[u8]) -> bool {
    is_log(message) || is_progress(message)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[tokio::test]
    async fn a_call_waits_for_the_lines_that_came_before_its_reply() {
        let logs = PendingLogs::default();
        logs.settle(Duration::from_secs(60)).await; // nothing on its way: at once
        logs.arrived();
        let later = {
            let logs = logs.clone();
            tokio::spawn(async move {
                tokio::time::sleep(Duration::from_millis(20)).await;
                logs.delivered();
            })
        };
        let started = std::time::Instant::now();
        logs.settle(Duration::from_secs(60)).await;
        assert!(started.elapsed() >= Duration::from_millis(15));
        later.await.unwrap();
        // One that never comes costs the grace once, then is written off.
        logs.arrived();
        let started = std::time::Instant::now();
        logs.settle(Duration::from_millis(30)).await;
        assert!(started.elapsed() < Duration::from_secs(5));
        let started = std::time::Instant::now();
        logs.settle(Duration::from_secs(60)).await;
        assert!(started.elapsed() < Duration::from_secs(5));
    }

    #[test]
    fn only_log_messages_count() {
        assert!(is_log(br#"{"jsonrpc":"2.0","method":"notifications/message","params":{"level":"info","data":"x"}}"#));
        assert!(!is_log(br#"{"jsonrpc":"2.0","id":1,"result":{"content":[{"type":"text","text":"notifications/message"}]}}"#));
        assert!(!is_log(
            br#"{"jsonrpc":"2.0","method":"notifications/progress","params":{}}"#
        ));
        assert!(!is_log(br#"{"jsonrpc":"2.0","method":"notifications/message","params":{"level":"info","data":"x","_meta":{"io.modelcontextprotocol/subscriptionId":"s"}}}"#));
        assert!(!is_log(
            br#"{"jsonrpc":"2.0","method":"notifications/message","params":{"level":"nonsense"}}"#
        ));
    }

    #[test]
    fn progress_notifications_count_too() {
        let progress = br#"{"jsonrpc":"2.0","method":"notifications/progress","params":{"progressToken":1,"progress":1}}"#;
        assert!(is_progress(progress) && counted(progress));
        assert!(!is_progress(br#"{"jsonrpc":"2.0","id":1,"result":{"content":[{"type":"text","text":"notifications/progress"}]}}"#));
        assert!(counted(br#"{"jsonrpc":"2.0","method":"notifications/message","params":{"level":"info","data":"x"}}"#));
    }
}
