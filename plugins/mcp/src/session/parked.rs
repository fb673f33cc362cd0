//! A discovery session kept for the persistent runtime.
//!
//! Discovery used to list on a one-shot session and close it; the first call
//! then started a second upstream process, and the rediscovery that the
//! upstream's start-up `list_changed` triggers a third. Now discovery opens
//! its session the way the runtime does (same client, same callbacks) and,
//! once the listing is done, parks it here: the runtime's next open adopts
//! it instead of starting a process, and a session nobody adopts within
//! [`GRACE`] is closed. A session that only listed holds no client's state,
//! so adopting it disturbs nothing; the seeds' reason for one-shot discovery
//! (a listing must not disturb a stateful session) is kept by the other
//! side: only the `shared` runtime adopts, never a lease (`client` and
//! `principal` scopes, run leases), whose sessions are their own from their
//! first request.

use std::sync::{Arc, Mutex, PoisonError};
use std::time::Duration;

use crate::session::client::McpClient;
use crate::session::opener::Session;

/// How long a parked session waits for the runtime's first call.
pub const GRACE: Duration = Duration::from_secs(60);

#[derive(Default)]
struct Slot {
    parked: Option<(Session, McpClient)>,
    /// Bumped at every park, so a timer closes only the session it was set for.
    generation: u64,
}

#[derive(Clone, Default)]
pub struct Parked(Arc<Mutex<Slot>>);

impl Parked {
    fn slot(&self) -> std::sync::MutexGuard<'_, Slot> {
        self.0.lock().unwrap_or_else(PoisonError::into_inner)
    }

    /// Keeps `session` for up to `grace`; one parked already is closed.
    pub fn park(&self, session: Session, client: McpClient, grace: Duration) {
        let (old, generation) = {
            let mut slot = self.slot();
            slot.generation += 1;
            (slot.parked.replace((session, client)), slot.generation)
        };
        close_in_background(old);
        let this = self.clone();
        tokio::spawn(async move {
            tokio::time::sleep(grace).await;
            let expired = {
                let mut slot = this.slot();
                if slot.generation == generation {
                    slot.parked.take()
                } else {
                    None
                }
            };
            if expired.is_some() {
                tracing::debug!("discovery session not adopted within its grace: closed");
            }
            close_in_background(expired);
        });
    }

    /// The parked session, handed over (None when there is none or it died).
    pub fn take(&self) -> Option<(Session, McpClient)> {
        let taken = self.slot().parked.take();
        match taken {
            Some((s, c)) if !s.is_transport_closed() => Some((s, c)),
            dead => {
                close_in_background(dead);
                None
            }
        }
    }

    /// The parked session's peer and client, left parked (for a listing).
    pub fn peek(&self) -> Option<(rmcp::Peer<rmcp::RoleClient>, McpClient)> {
        let slot = self.slot();
        slot.parked
            .as_ref()
            .filter(|(s, _)| !s.is_transport_closed())
            .map(|(s, c)| (s.peer().clone(), c.clone()))
    }

    /// Closes the parked session, if any, now.
    pub async fn close(&self) {
        let taken = self.slot().parked.take();
        if let Some((session, _)) = taken {
            let _ = session.cancel().await;
        }
    }
}

/// The MCP shutdown of a session nobody waits for (see `discovery`).
fn close_in_background(session: Option<(Session, McpClient)>) {
    if let Some((session, _)) = session {
        tokio::spawn(async move {
            let _ = session.cancel().await;
        });
    }
}
