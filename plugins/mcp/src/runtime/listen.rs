//! A 2026-07-28 upstream has no session to push changes on: wf opens one
//! `subscriptions/listen` stream on the runtime's connection for its list
//! changes and the resources wf's clients subscribed to (`resources/subscribe`
//! is gone in that generation). The stream is reopened whenever the set of
//! subscribed URIs changes, and with each new session.

use std::sync::PoisonError;
use std::time::Duration;

use rmcp::model::{ProtocolVersion, ServerNotification, SubscriptionFilter};
use rmcp::{Peer, RoleClient};
use tokio::sync::oneshot;

use wf_plugin_api::PluginError;

use super::Runtime;

/// Longest a client's exchange (the call that opens the session, a
/// `resources/subscribe`) waits for the upstream to acknowledge the stream.
const ACK_WAIT: Duration = Duration::from_secs(5);

/// Whether the session speaks 2026-07-28 or later.
pub(super) fn is_modern(peer: &Peer<RoleClient>) -> bool {
    peer.peer_info()
        .is_some_and(|i| i.protocol_version >= ProtocolVersion::V_2026_07_28)
}

impl Runtime {
    /// (Re)opens the upstream listen stream for what wf wants to hear now,
    /// and waits for the upstream's acknowledgment (so nothing sent after
    /// this returns is missed), at most [`ACK_WAIT`] (or the connect timeout
    /// if shorter): a client's exchange never hangs on an upstream that takes
    /// the request but never acknowledges it. The stream keeps waiting for a
    /// late acknowledgment in the background, up to the connect timeout.
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
        let source = self.source.clone();
        let (on_list_changed, on_updated) = (
            self.on_list_changed.clone(),
            self.on_resource_updated.clone(),
        );
        let (connect_timeout, peer) = (self.config.connect_timeout, peer.clone());
        let (acked, ack) = oneshot::channel::<Result<(), String>>();
        let task = tokio::spawn(async move {
            let mut sub = match tokio::time::timeout(connect_timeout, peer.listen(filter)).await {
                Ok(Ok(sub)) => {
                    if acked.send(Ok(())).is_err() {
                        tracing::info!(source = %source, "the upstream acknowledged subscriptions/listen late; listening now");
                    }
                    sub
                }
                Ok(Err(e)) => {
                    let _ = acked.send(Err(format!(
                        "the upstream refused subscriptions/listen: {e}"
                    )));
                    return;
                }
                Err(_) => {
                    tracing::warn!(source = %source, "the upstream never acknowledged subscriptions/listen (waited {connect_timeout:?}): its list changes and resource updates are not heard");
                    return;
                }
            };
            tracing::debug!(source = %source, accepted = ?sub.acknowledged(), "listening upstream");
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
        let wait = connect_timeout.min(ACK_WAIT);
        match tokio::time::timeout(wait, ack).await {
            Ok(Ok(Ok(()))) => Ok(()),
            Ok(Ok(Err(e))) => Err(PluginError::upstream(e)),
            Ok(Err(_)) => Err(PluginError::upstream(
                "the upstream listen stream ended before it was acknowledged",
            )),
            Err(_) => Err(PluginError::upstream(format!(
                "the upstream did not acknowledge subscriptions/listen within {} ms",
                wait.as_millis()
            ))),
        }
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
