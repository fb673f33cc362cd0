//! Events every replica must see, through PostgreSQL `NOTIFY`: a deployment
//! changed (so each replica refreshes its deployment tools and tells its
//! clients their tool list changed), and an operator reloaded the config on
//! one replica (so each reloads its own copy of the file). The listening
//! connection is the cancel signal's (`PgPool::listen`). On SQLite there is
//! one process: the replica that deploys or reloads is the only one.

use super::{Store, args};

/// The channel deployment changes are announced on; the payload is the
/// deployment's name (for the log).
pub(super) const DEPLOYMENTS: &str = "wf_deployments";

/// The channel config reloads are announced on; the payload is the replica
/// that reloaded (which does not reload again when it hears itself).
pub(super) const CONFIG: &str = "wf_config";

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

    /// Tells the other replicas to reload their config file, after an
    /// operator's `reload` here applied it; whether the announcement was
    /// sent (PostgreSQL only; a failure is logged).
    pub async fn announce_reload(&self) -> bool {
        if self.backend() != "postgres" {
            return false;
        }
        match self
            .db
            .execute(
                "SELECT pg_notify('wf_config', ?1)",
                args![self.host.clone()],
            )
            .await
        {
            Ok(_) => true,
            Err(e) => {
                tracing::warn!("announcing the reload to other replicas: {e}");
                false
            }
        }
    }

    /// Config reloads announced by replicas (PostgreSQL only): each item names
    /// the replica that reloaded (this one's own are heard too; empty after
    /// the listener reconnected, when an announcement may have been missed).
    pub fn reload_requests(&self) -> Option<tokio::sync::broadcast::Receiver<String>> {
        if self.backend() != "postgres" {
            return None;
        }
        self.signals.reloads.as_ref().map(|s| s.subscribe())
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
        tracing::info!(
            "replica event listener reconnected: refreshing deployments and reloading the config"
        );
        if let Some(tx) = &self.deployments {
            let _ = tx.send(());
        }
        if let Some(tx) = &self.reloads {
            let _ = tx.send(String::new());
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
            CONFIG => {
                if let Some(tx) = &self.reloads {
                    let _ = tx.send(payload.to_string());
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
