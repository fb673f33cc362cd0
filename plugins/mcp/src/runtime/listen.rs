//! A 2026-07-28 upstream has no session to push changes on: wf opens one
//! `subscriptions/listen` stream on the runtime's connection for its list
//! changes and the resources wf's clients subscribed to (`resources/subscribe`
//! is gone in that generation). The stream is reopened whenever the set of
//! subscribed URIs changes, and with each new session.

use std::sync::PoisonError;

use rmcp::model::{ProtocolVersion, ServerNotification, SubscriptionFilter};
use rmcp::{Peer, RoleClient};

use wf_plugin_api::PluginError;

use super::Runtime;

/// Whether the session speaks 2026-07-28 or later.
pub(super) fn is_modern(peer: &Peer<RoleClient>) -> bool {
    peer.peer_info()
        .is_some_and(|i| i.protocol_version >= ProtocolVersion::V_2026_07_28)
}

impl Runtime {
    /// (Re)opens the upstream listen stream for what wf wants to hear now,
    /// and waits for the upstream's acknowledgment (so nothing sent after
    /// this returns is missed), within the connect timeout.
    pub(super) async fn listen_upstream(&self, peer: &Peer<RoleClient>) -> Result<(), PluginError> {
        let uris: Vec<String> = self
            .subscribed
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .iter()
            .cloned()
            .collect();
        let mut filter = SubscriptionFilter::new();
        filter.tools_list_changed = Some(true);
        filter.prompts_list_changed = Some(true);
        filter.resources_list_changed = Some(true);
        filter.resource_subscriptions = (!uris.is_empty()).then_some(uris);
        let mut sub =
            match tokio::time::timeout(self.config.connect_timeout, peer.listen(filter)).await {
                Ok(Ok(sub)) => sub,
                Ok(Err(e)) => {
                    return Err(PluginError::upstream(format!(
                        "the upstream refused subscriptions/listen: {e}"
                    )));
                }
                Err(_) => {
                    return Err(PluginError::upstream(
                        "the upstream did not acknowledge subscriptions/listen in time",
                    ));
                }
            };
        let source = self.source.clone();
        let (on_list_changed, on_updated) = (
            self.on_list_changed.clone(),
            self.on_resource_updated.clone(),
        );
        tracing::debug!(source = %source, accepted = ?sub.acknowledged(), "listening upstream");
        let task = tokio::spawn(async move {
            loop {
                let note = match sub.next().await {
                    Ok(Some(note)) => note,
                    Ok(None) => break,
                    Err(e) => {
                        tracing::debug!(source = %source, "the upstream listen stream ended: {e}");
                        break;
                    }
                };
                match note {
                    ServerNotification::ToolListChangedNotification(_)
                    | ServerNotification::PromptListChangedNotification(_)
                    | ServerNotification::ResourceListChangedNotification(_) => {
                        if let Some(f) = &on_list_changed {
                            f();
                        }
                    }
                    ServerNotification::ResourceUpdatedNotification(n) => {
                        if let Some(f) = &on_updated {
                            f(n.params.uri);
                        }
                    }
                    _ => {}
                }
            }
        });
        // The stream it replaces ends (its handle dropped with its task).
        if let Some(old) = self
            .listener
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .replace(task.abort_handle())
        {
            old.abort();
        }
        Ok(())
    }

    /// Ends the listen stream (the runtime closes).
    pub(super) fn stop_listening(&self) {
        if let Some(old) = self
            .listener
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .take()
        {
            old.abort();
        }
    }
}
