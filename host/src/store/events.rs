//! Events every replica must see, through PostgreSQL `NOTIFY`: a deployment
//! changed (so each replica refreshes its deployment tools and tells its
//! clients their tool list changed). The listening connection is the cancel
//! signal's (`PgPool::listen`). On SQLite there is one process: the replica
//! that deploys refreshes itself.

use super::{Store, args};

/// The channel deployment changes are announced on; the payload is the
/// deployment's name (for the log).
pub(super) const DEPLOYMENTS: &str = "wf_deployments";

impl Store {
    /// Tells every replica (this one too) that deployment `name` changed.
    /// A failed notify is logged, not returned: the deployment is saved, and
    /// other replicas see it at their next refresh.
    pub(super) async fn announce_deployments(&self, name: &str) {
        if self.backend() != "postgres" {
            return;
        }
        if let Err(e) = self
            .db
            .execute("SELECT pg_notify('wf_deployments', ?1)", args![name])
            .await
        {
            tracing::warn!(
                deployment = name,
                "announcing the deployment to other replicas: {e}"
            );
        }
    }

    /// Deployment changes announced by any replica (PostgreSQL only).
    pub fn deployment_changes(&self) -> Option<tokio::sync::broadcast::Receiver<()>> {
        if self.backend() != "postgres" {
            return None;
        }
        self.signals.deployments.as_ref().map(|s| s.subscribe())
    }
}

impl super::Signals {
    /// The listening connection is back after a drop: refresh what
    /// announcements may have been missed meanwhile.
    pub(crate) fn resync(&self) {
        tracing::info!("replica event listener reconnected: refreshing deployments");
        if let Some(tx) = &self.deployments {
            let _ = tx.send(());
        }
    }

    /// A notification that reached this replica's listening connection.
    pub(crate) fn heard(&self, channel: &str, payload: &str) {
        match channel {
            DEPLOYMENTS => {
                tracing::info!(
                    deployment = payload,
                    "deployments changed (announced by a replica)"
                );
                if let Some(tx) = &self.deployments {
                    let _ = tx.send(());
                }
            }
            _ => {
                if self.stop(payload) {
                    tracing::info!(run = %payload, "cancel received from another replica");
                }
            }
        }
    }
}
