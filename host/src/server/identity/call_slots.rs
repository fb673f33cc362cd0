//! How many calls one client may have in progress at once.
//!
//! rmcp runs each request in a task of its own, and a client that stops
//! waiting does not end it: a stdio client may send requests faster than
//! they finish, and a 2025-11-25 session's call outlives the POST that
//! carried it when its client hangs up (a disconnection is not a
//! cancellation). Request slots per principal (`limits`) count requests only
//! while their response is open, so without this a client could keep
//! starting calls without limit. Counted per client, that is per
//! `WfServer` and its clones (a stdio connection, a 2025-11-25 session, a
//! stateless request), over the requests that reach a source and may take
//! long: tool calls, prompt gets and resource reads.

use std::sync::Arc;
use std::time::Duration;

use rmcp::ErrorData as McpError;
use rmcp::model::ErrorCode;
use tokio::sync::{OwnedSemaphorePermit, Semaphore};

use super::limits::RateLimitedWarn;
use crate::server::jsonrpc::SERVER_BUSY;

/// One client's call slots: `[server] max_calls_per_client` of them.
pub struct CallSlots {
    free: Arc<Semaphore>,
    max: usize,
    warn: RateLimitedWarn,
}

impl CallSlots {
    pub fn new(max: usize) -> Self {
        Self {
            free: Arc::new(Semaphore::new(max)),
            max,
            warn: RateLimitedWarn::new(Duration::from_secs(10)),
        }
    }

    /// A slot for one call, held until the call's future is dropped; or the
    /// error the client gets when all are taken (`what`: the request).
    pub fn take(&self, what: &str) -> Result<OwnedSemaphorePermit, McpError> {
        self.free.clone().try_acquire_owned().map_err(|_| {
            self.warn.warn(|suppressed| {
                tracing::warn!(
                    max = self.max,
                    suppressed,
                    "{what} refused: too many calls in progress for one client \
                     (server.max_calls_per_client)"
                )
            });
            McpError::new(
                ErrorCode(SERVER_BUSY as i32),
                format!(
                    "too many calls in progress for this client (server.max_calls_per_client = {}); \
                     wait for one to finish or cancel one",
                    self.max
                ),
                None,
            )
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_slot_frees_when_its_call_ends() {
        let slots = CallSlots::new(2);
        let a = slots.take("tools/call a").unwrap();
        let _b = slots.take("tools/call b").unwrap();
        let refused = slots.take("tools/call c").unwrap_err();
        assert_eq!(refused.code, ErrorCode(SERVER_BUSY as i32));
        assert!(
            refused.message.contains("max_calls_per_client = 2"),
            "{}",
            refused.message
        );
        drop(a);
        assert!(slots.take("tools/call d").is_ok());
    }
}
