//! Client→server requests besides calls, forwarded on the persistent
//! session: argument completion and resource subscriptions. Subscriptions
//! are remembered so a reconnected session subscribes again.

use rmcp::model::*;
use std::sync::PoisonError;
use wf_plugin_api::{CompleteParams, Completion, PluginError};

use super::{Runtime, convert, unexpected};

impl Runtime {
    pub async fn complete(
        &self,
        params: CompleteParams,
        ctx: &wf_plugin_api::CallContext,
    ) -> Result<Completion, PluginError> {
        let params: CompleteRequestParams = convert(params)?;
        let req = ClientRequest::CompleteRequest(Request::new(params));
        match self.request(req, Some(ctx)).await? {
            (ServerResult::CompleteResult(r), _) => convert(r.completion),
            (other, _) => Err(unexpected("completion/complete", &other)),
        }
    }

    pub async fn subscribe(&self, uri: &str) -> Result<(), PluginError> {
        if let Some(peer) = self.modern_peer().await {
            let new = self
                .subscribed
                .lock()
                .unwrap_or_else(PoisonError::into_inner)
                .insert(uri.to_string());
            let listening = self.listen_upstream(&peer).await;
            if listening.is_err() && new {
                self.subscribed
                    .lock()
                    .unwrap_or_else(PoisonError::into_inner)
                    .remove(uri);
            }
            return listening;
        }
        let req = ClientRequest::SubscribeRequest(Request::new(SubscribeRequestParams::new(uri)));
        self.request(req, None).await?;
        self.subscribed
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .insert(uri.to_string());
        Ok(())
    }

    pub async fn unsubscribe(&self, uri: &str) -> Result<(), PluginError> {
        if !self
            .subscribed
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .remove(uri)
        {
            return Ok(());
        }
        if let Some(peer) = self.modern_peer().await {
            return self.listen_upstream(&peer).await;
        }
        let req =
            ClientRequest::UnsubscribeRequest(Request::new(UnsubscribeRequestParams::new(uri)));
        self.request(req, None).await.map(|_| ())
    }

    /// The live session's peer when it speaks 2026-07-28 (opened if needed).
    async fn modern_peer(&self) -> Option<rmcp::Peer<rmcp::RoleClient>> {
        let (peer, _, _) = self.peer(None).await.ok()?;
        super::listen::is_modern(&peer).then_some(peer)
    }

    /// Tells the upstream its client's roots changed, if its session is open
    /// (a session not open yet asks for roots afresh anyway). `roots` (the
    /// client's new roots, when the host could ask it; None forgets the old
    /// ones) answer the upstream's `roots/list` outside any call from now on:
    /// kept first, as the upstream may ask as soon as it is told.
    #[allow(deprecated)] // rmcp marks roots deprecated (SEP-2577); 2025-11-25 has them.
    pub async fn roots_list_changed(&self, roots: Option<Vec<Root>>) -> Result<(), PluginError> {
        self.known_roots.set(roots);
        let peer = {
            let live = self.live.lock().await;
            live.as_ref()
                .filter(|l| !l.session.is_transport_closed())
                .map(|l| l.session.peer().clone())
        };
        let Some(peer) = peer else {
            return Ok(());
        };
        peer.notify_roots_list_changed()
            .await
            .map_err(|e| PluginError::upstream(format!("cannot tell the upstream: {e}")))
    }

    /// A new session knows none of the old one's subscriptions: renews them.
    /// A 2025-11-25 session's renewal of its resource subscriptions (a
    /// 2026-07-28 one listens instead: [`Runtime::listen_upstream`]).
    pub(super) fn resubscribe(&self, peer: &rmcp::Peer<rmcp::RoleClient>) {
        let uris: Vec<String> = self
            .subscribed
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .iter()
            .cloned()
            .collect();
        if uris.is_empty() {
            return;
        }
        let (peer, source) = (peer.clone(), self.source.clone());
        tokio::spawn(async move {
            for uri in uris {
                let req = ClientRequest::SubscribeRequest(Request::new(
                    SubscribeRequestParams::new(&uri),
                ));
                if let Err(e) = peer.send_request(req).await {
                    tracing::warn!(source = %source, uri = %uri, "cannot renew a resource subscription: {e}");
                }
            }
        });
    }
}
