//! Client→server requests besides calls: `completion/complete` and resource
//! subscriptions (`resources/subscribe`, `subscriptions/listen` filters),
//! routed to the source that owns the prompt, template or URI.

use std::sync::Arc;

use rmcp::model::*;
use rmcp::service::SubscriptionSink;
use rmcp::{ErrorData as McpError, Peer, RoleServer};
use wf_plugin_api::{CompleteParams, CompletionRef};

use crate::app::App;
use crate::sources::sessions::SessionCaller;
use crate::sources::{CallCtx, Notifier, Subscriptions};

/// One downstream client (an MCP session, or one `subscriptions/listen`
/// stream). Dropping it is the "client gone" signal: its subscriptions end
/// (and the sources stop watching what nobody else wants).
pub struct Downstream {
    pub id: u64,
    subscriptions: Arc<Subscriptions>,
}

impl Downstream {
    pub fn new(app: &App) -> Self {
        Self {
            id: app.subscriptions.client_id(),
            subscriptions: app.subscriptions.clone(),
        }
    }
}

impl Drop for Downstream {
    fn drop(&mut self) {
        let unwanted = self.subscriptions.forget(self.id);
        if unwanted.is_empty() {
            return;
        }
        let subs = self.subscriptions.clone();
        if let Ok(rt) = tokio::runtime::Handle::try_current() {
            rt.spawn(async move { subs.release(unwanted).await });
        }
    }
}

/// Where a completion goes: the source and its own name or URI for `r`.
async fn completion_route(app: &App, r: &CompletionRef) -> Option<(String, CompletionRef)> {
    match r {
        CompletionRef::Prompt { name } => {
            let mut proj = app.projection_for_prompt(name).await;
            if proj.prompt(name).is_none() {
                proj = app.live_projection().await;
            }
            let p = proj.prompt(name)?;
            let name = p.original.clone();
            Some((p.source.clone(), CompletionRef::Prompt { name }))
        }
        CompletionRef::Resource { uri } => {
            let proj = app.projection_ready().await;
            if let Some(t) = proj.templates.iter().find(|t| &t.name == uri) {
                let uri = t.original.clone();
                return Some((t.source.clone(), CompletionRef::Resource { uri }));
            }
            let route = app.resource_route(uri).await?;
            Some((route.source, CompletionRef::Resource { uri: route.uri }))
        }
    }
}

/// `completion/complete`: the owning source's suggestions; none when no
/// source owns the reference or the source has no completions.
pub async fn complete(
    app: &App,
    request: CompleteRequestParams,
    ctx: CallCtx,
) -> Result<CompleteResult, McpError> {
    let mut params: CompleteParams = serde_json::to_value(&request)
        .and_then(serde_json::from_value)
        .map_err(|e| McpError::invalid_params(format!("invalid completion request: {e}"), None))?;
    let Some((source, reference)) = completion_route(app, &params.reference).await else {
        return Err(McpError::invalid_params(
            format!("no prompt or resource template {:?}", request.r#ref),
            None,
        ));
    };
    let Some(handle) = app.sources.get(&source).and_then(|e| e.handle.clone()) else {
        return Ok(CompleteResult::default()); // a host-local source: nothing to suggest
    };
    params.reference = reference;
    let completion = handle
        .complete(params, ctx)
        .await
        .map_err(super::source_error::source_error)?;
    let info: CompletionInfo = serde_json::to_value(completion)
        .and_then(serde_json::from_value)
        .map_err(|e| McpError::internal_error(format!("invalid completion: {e}"), None))?;
    Ok(CompleteResult::new(info))
}

/// `resources/subscribe` of a 2025-11-25 client (`caller`, for sources
/// with per-client sessions).
pub async fn subscribe(
    app: &App,
    client: &Downstream,
    caller: &SessionCaller,
    peer: Peer<RoleServer>,
    uri: &str,
) -> Result<(), McpError> {
    let notify: Notifier = Arc::new(move |uri| {
        let peer = peer.clone();
        tokio::spawn(async move {
            let _ = peer
                .notify_resource_updated(ResourceUpdatedNotificationParam::new(uri))
                .await;
        });
    });
    subscribe_with(app, client.id, caller, notify, uri).await
}

/// The resource subscriptions of one `subscriptions/listen` stream (2026-07-28).
pub async fn listen_resources(
    app: &App,
    client: &Downstream,
    caller: &SessionCaller,
    sink: SubscriptionSink,
    uris: &[String],
) {
    for uri in uris {
        let sink = sink.clone();
        let notify: Notifier = Arc::new(move |uri| {
            let sink = sink.clone();
            tokio::spawn(async move {
                let _ = sink.notify_resource_updated(uri).await;
            });
        });
        if let Err(e) = subscribe_with(app, client.id, caller, notify, uri).await {
            tracing::warn!(uri = %uri, "subscriptions/listen: cannot watch resource: {}", e.message);
        }
    }
}

async fn subscribe_with(
    app: &App,
    client: u64,
    caller: &SessionCaller,
    notify: Notifier,
    uri: &str,
) -> Result<(), McpError> {
    let Some(route) = app.resource_route(uri).await else {
        return Err(McpError::resource_not_found(
            format!("no source serves resource {uri:?}"),
            Some(serde_json::json!({"uri": uri})),
        ));
    };
    // On the caller's own session when the source has per-client sessions:
    // that is where its changes happen.
    let lease = match app
        .sources
        .get(&route.source)
        .and_then(|e| e.handle.clone())
    {
        Some(h) => super::session_route::session_for(app, caller, &h)
            .await?
            .map(|s| s.lease().to_string()),
        None => None,
    };
    let at = (route.source.as_str(), route.uri.as_str(), lease.as_deref());
    app.subscriptions
        .subscribe(client, notify, uri, at)
        .await
        .map_err(super::source_error::source_error)
}
