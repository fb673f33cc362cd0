//! Resource subscriptions, kept per downstream client. A source is asked
//! to subscribe when the first client subscribes to one of its URIs and to
//! unsubscribe when the last one leaves (unsubscribes or goes away); its
//! `ResourceUpdated` events reach only the clients subscribed to that URI,
//! under the URI each of them used. A source with per-client (or
//! per-principal) sessions is asked on the session of the client that
//! subscribes (its lease), and only that session's updates reach it.

use std::collections::{HashMap, HashSet};
use std::sync::PoisonError;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex};

use wf_plugin_api::PluginError;

use super::{SourceError, Sources};

/// Sends `notifications/resources/updated` for a URI (as the client knows it).
pub type Notifier = Arc<dyn Fn(String) + Send + Sync>;

/// A resource of a source on one of its sessions: `(source, uri as the
/// source knows it, lease)`; no lease: the source's shared session.
type Route = (String, String, Option<String>);

struct Client {
    notify: Notifier,
    /// Shown URI → route.
    uris: HashMap<String, Route>,
}

#[derive(Default)]
struct Inner {
    clients: HashMap<u64, Client>,
    /// How many clients want each route.
    counts: HashMap<Route, usize>,
}

pub struct Subscriptions {
    sources: Arc<Sources>,
    inner: Mutex<Inner>,
    next_client: AtomicU64,
}

impl Subscriptions {
    pub fn new(sources: Arc<Sources>) -> Self {
        Self {
            sources,
            inner: Mutex::default(),
            next_client: AtomicU64::new(1),
        }
    }

    /// A fresh id for a downstream client (an MCP session, or one
    /// `subscriptions/listen` stream).
    pub fn client_id(&self) -> u64 {
        self.next_client.fetch_add(1, Ordering::Relaxed)
    }

    /// Subscribes `client` to `shown` (which routes to `source`'s `uri` on
    /// the session `lease` names, none: the shared one). Asks the source only
    /// when nobody wanted that resource on that session yet; if the source
    /// refuses, nothing is kept.
    pub async fn subscribe(
        &self,
        client: u64,
        notify: Notifier,
        shown: &str,
        (source, uri, lease): (&str, &str, Option<&str>),
    ) -> Result<(), SourceError> {
        let route = (
            source.to_string(),
            uri.to_string(),
            lease.map(str::to_string),
        );
        let first = {
            let mut inner = self.inner.lock().unwrap_or_else(PoisonError::into_inner);
            let c = inner.clients.entry(client).or_insert_with(|| Client {
                notify,
                uris: HashMap::new(),
            });
            if c.uris.insert(shown.to_string(), route.clone()).is_some() {
                return Ok(()); // already subscribed: subscribing is idempotent
            }
            let n = inner.counts.entry(route.clone()).or_default();
            *n += 1;
            *n == 1
        };
        if !first {
            return Ok(());
        }
        let result = match self.sources.get(source).and_then(|e| e.handle.clone()) {
            Some(h) => h.subscribe(uri, lease).await,
            None => Err(SourceError {
                source_name: source.to_string(),
                error: PluginError::not_found("the source is not available"),
            }),
        };
        if result.is_err() {
            let mut inner = self.inner.lock().unwrap_or_else(PoisonError::into_inner);
            if let Some(c) = inner.clients.get_mut(&client) {
                c.uris.remove(shown);
            }
            release(&mut inner, &route);
        }
        result
    }

    /// Ends `client`'s subscription to `shown` (nothing if it had none).
    pub async fn unsubscribe(&self, client: u64, shown: &str) {
        let last = {
            let mut inner = self.inner.lock().unwrap_or_else(PoisonError::into_inner);
            let route = inner
                .clients
                .get_mut(&client)
                .and_then(|c| c.uris.remove(shown));
            route.filter(|r| release(&mut inner, r))
        };
        if let Some(route) = last {
            self.release_upstream(vec![route]).await;
        }
    }

    /// The client went away: drops its subscriptions at once; returns the resources nobody
    /// wants any more, for [`Self::release`].
    pub fn forget(&self, client: u64) -> Vec<Route> {
        let mut inner = self.inner.lock().unwrap_or_else(PoisonError::into_inner);
        let routes: Vec<Route> = inner
            .clients
            .remove(&client)
            .map(|c| c.uris.into_values().collect())
            .unwrap_or_default();
        routes
            .into_iter()
            .filter(|r| release(&mut inner, r))
            .collect()
    }

    /// Tells the sources of `routes` (from [`Self::forget`]) to stop watching them.
    pub async fn release(&self, routes: Vec<Route>) {
        self.release_upstream(routes).await;
    }

    /// A source says `uri` changed on the session `lease` names (none: its
    /// shared one): tells each client subscribed there once.
    pub fn updated(&self, source: &str, uri: &str, lease: Option<&str>) {
        let targets: Vec<(Notifier, String)> = {
            let inner = self.inner.lock().unwrap_or_else(PoisonError::into_inner);
            inner
                .clients
                .values()
                .flat_map(|c| {
                    let mut seen = HashSet::new();
                    c.uris
                        .iter()
                        .filter(|(_, (s, u, l))| s == source && u == uri && l.as_deref() == lease)
                        .filter(move |(shown, _)| seen.insert((*shown).clone()))
                        .map(|(shown, _)| (c.notify.clone(), shown.clone()))
                        .collect::<Vec<_>>()
                })
                .collect()
        };
        for (notify, shown) in targets {
            notify(shown);
        }
    }

    async fn release_upstream(&self, routes: Vec<Route>) {
        for (source, uri, lease) in routes {
            if let Some(h) = self.sources.get(&source).and_then(|e| e.handle.clone())
                && let Err(e) = h.unsubscribe(&uri, lease.as_deref()).await
            {
                tracing::debug!(source = %source, uri = %uri, "unsubscribe: {e}");
            }
        }
    }
}

/// One client fewer wants `route`; true when it was the last.
fn release(inner: &mut Inner, route: &Route) -> bool {
    match inner.counts.get_mut(route) {
        Some(n) if *n > 1 => {
            *n -= 1;
            false
        }
        Some(_) => {
            inner.counts.remove(route);
            true
        }
        None => false,
    }
}
