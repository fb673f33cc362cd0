//! A client's `notifications/roots/list_changed`, forwarded to the upstream
//! sessions acting for that client: its own (and its principal's) sessions
//! of `client`- and `principal`-scoped sources, and the shared session of
//! each source that asked this client for its roots. A shared session asks
//! whichever client's call is in flight, so the sources that asked this one
//! are the ones that may hold its roots; the others never saw them.
//!
//! wf asks the client for its new roots first and passes them along: an
//! upstream that asks `roots/list` right after the notification asks outside
//! any call, where no client can be asked (server-everything does).

use std::collections::BTreeSet;
use std::sync::{Mutex, PoisonError};
use std::time::Duration;

use rmcp::{Peer, RoleServer};
use serde_json::Value;

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

/// How long a client may take to list its roots after saying they changed.
const ASK_TIMEOUT: Duration = Duration::from_secs(5);
/// At most this many roots, in at most this many bytes of JSON, are passed on.
const MAX_ROOTS: usize = 256;
const MAX_ROOTS_BYTES: usize = 64 * 1024;

/// The client's roots (its `roots` array), asked right after it said they
/// changed. None when it did not declare roots, did not answer in time,
/// answered an error or too many: the upstream is told the change without
/// them, and its `roots/list` outside a call gets no roots.
#[allow(deprecated)] // rmcp marks roots deprecated (SEP-2577); 2025-11-25 has them.
pub async fn ask_client(peer: &Peer<RoleServer>) -> Option<Value> {
    let declared = peer
        .peer_info()
        .is_some_and(|i| i.capabilities.roots.is_some());
    if !declared {
        return None;
    }
    let roots = match tokio::time::timeout(ASK_TIMEOUT, peer.list_roots()).await {
        Ok(Ok(listed)) => listed.roots,
        Ok(Err(e)) => {
            tracing::info!("cannot list the client's changed roots: {e}");
            return None;
        }
        Err(_) => {
            tracing::info!("the client did not list its changed roots within {ASK_TIMEOUT:?}");
            return None;
        }
    };
    let roots = serde_json::to_value(roots).ok()?;
    within_bounds(roots)
}

/// `roots` if within [`MAX_ROOTS`] and [`MAX_ROOTS_BYTES`].
fn within_bounds(roots: Value) -> Option<Value> {
    let count = roots.as_array().map_or(0, Vec::len);
    let bytes = serde_json::to_vec(&roots).map_or(usize::MAX, |b| b.len());
    if count > MAX_ROOTS || bytes > MAX_ROOTS_BYTES {
        tracing::warn!(
            count,
            bytes,
            "the client's changed roots are over {MAX_ROOTS} roots or {MAX_ROOTS_BYTES} bytes: not passed on"
        );
        return None;
    }
    Some(roots)
}

/// Tells each upstream session acting for `caller` that its roots changed,
/// with `roots` (the client's new ones) when wf has them.
pub async fn list_changed(
    app: &App,
    caller: &SessionCaller,
    askers: &RootsAskers,
    roots: Option<&Value>,
) {
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
            match handle.roots_list_changed(lease.as_deref(), roots).await {
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

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn roots_over_the_bounds_are_not_passed_on() {
        let one = json!([{"uri": "file:///a", "name": "a"}]);
        assert_eq!(within_bounds(one.clone()), Some(one));
        let many: Vec<Value> = (0..=MAX_ROOTS)
            .map(|i| json!({"uri": format!("file:///{i}")}))
            .collect();
        assert_eq!(within_bounds(Value::Array(many)), None);
        let long = json!([{"uri": format!("file:///{}", "x".repeat(MAX_ROOTS_BYTES))}]);
        assert_eq!(within_bounds(long), None);
    }
}
