//! A client's `notifications/roots/list_changed`, forwarded to the upstream
//! sessions acting for that client: its own (and its principal's) sessions
//! of `client`- and `principal`-scoped sources, and the shared session of
//! each source that asked this client for its roots. A shared session asks
//! whichever client's call is in flight, so the sources that asked this one
//! are the ones that may hold its roots; the others never saw them.

use std::collections::BTreeSet;
use std::sync::{Mutex, PoisonError};

use crate::app::App;
use crate::config::SessionScope;
use crate::sources::sessions::SessionCaller;

/// The sources that asked one client for its roots (`roots/list`).
#[derive(Default)]
pub struct RootsAskers(Mutex<BTreeSet<String>>);

impl RootsAskers {
    pub fn asked(&self, source: &str) {
        self.0
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .insert(source.to_string());
    }

    fn contains(&self, source: &str) -> bool {
        self.0
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .contains(source)
    }
}

/// Tells each upstream session acting for `caller` that its roots changed.
pub async fn list_changed(app: &App, caller: &SessionCaller, askers: &RootsAskers) {
    for entry in app.sources.list() {
        let Some(handle) = entry.handle.clone() else {
            continue;
        };
        let policy = app.sessions.policy(&handle.name, caller.http);
        let leases: Vec<Option<String>> = match policy.scope {
            SessionScope::Shared if askers.contains(&entry.name) => vec![None],
            SessionScope::Shared => Vec::new(),
            _ => app
                .sessions
                .leases_acting_for(caller, &entry.name)
                .into_iter()
                .map(Some)
                .collect(),
        };
        for lease in leases {
            match handle.roots_list_changed(lease.as_deref()).await {
                Ok(()) => {
                    tracing::debug!(source = %entry.name, lease = ?lease, "roots list change forwarded")
                }
                Err(e) => {
                    tracing::info!(source = %entry.name, lease = ?lease, "cannot forward a roots list change: {e}")
                }
            }
        }
    }
}
