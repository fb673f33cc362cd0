//! list_changed notifications: after a reload or refresh changes what a
//! client would list, connected clients are told. 2025-11-25 clients (after
//! `initialize`) get plain notifications; 2026-07-28 clients get them on a
//! `subscriptions/listen` stream.

use std::hash::{Hash, Hasher};
use std::sync::Arc;
use std::sync::atomic::Ordering;
use std::time::Duration;

use crate::app::App;
use crate::surfaces::endpoints::Endpoints;
use crate::surfaces::proxy::Projection;

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum ListKind {
    Tools,
    Prompts,
    Resources,
}

/// A fingerprint of each list a client sees.
#[derive(PartialEq, Eq, Clone, Copy)]
struct Shape([u64; 3]);

fn digest<T: serde::Serialize>(items: impl Iterator<Item = (String, T)>) -> u64 {
    let mut h = std::collections::hash_map::DefaultHasher::new();
    for (name, item) in items {
        name.hash(&mut h);
        serde_json::to_string(&item)
            .unwrap_or_default()
            .hash(&mut h);
    }
    h.finish()
}

fn shape(p: &Projection) -> Shape {
    Shape([
        digest(p.tools.iter().map(|t| (t.name.clone(), &t.item))),
        digest(p.prompts.iter().map(|t| (t.name.clone(), &t.item))),
        digest(p.resources.iter().map(|t| (t.name.clone(), &t.item)))
            ^ digest(p.templates.iter().map(|t| (t.name.clone(), &t.item))),
    ])
}

/// Counts a live follower in [`crate::app::FrontStats`] while it exists.
pub struct Follower(Arc<crate::app::FrontStats>);

impl Follower {
    pub fn new(app: &App) -> Self {
        app.front.list_followers.fetch_add(1, Ordering::Relaxed);
        Self(app.front.clone())
    }
}

impl Drop for Follower {
    fn drop(&mut self) {
        self.0.list_followers.fetch_sub(1, Ordering::Relaxed);
    }
}

/// The lists of endpoint `name` (`[endpoints.NAME]`), looked up anew each
/// time (a reload may replace it).
pub type Followed = (Arc<Endpoints>, Arc<str>);

/// What a client of `/mcp` or of an endpoint lists, fingerprinted.
fn shape_of(app: &App, endpoint: Option<&Followed>) -> Shape {
    let proj = app.projection();
    match endpoint {
        None => shape(&proj),
        Some((all, name)) => Shape(all.get(name).map_or([0; 3], |e| e.view(&proj).shape())),
    }
}

/// [`shape_of`] off the runtime's workers: a large catalog's projection and
/// its digest take a while, and `list_sources` must not wait (issue #55).
async fn shaped_off_runtime(app: &Arc<App>, endpoint: &Option<Arc<Followed>>) -> Option<Shape> {
    let (app, endpoint) = (app.clone(), endpoint.clone());
    tokio::task::spawn_blocking(move || {
        let now = shape_of(&app, endpoint.as_deref());
        crate::sources::release_freed();
        now
    })
    .await
    .ok()
}

/// Calls `send` for each list that changed (on `endpoint`'s view, when
/// given), until `send` says the client is gone. Bursts of changes (a
/// reload discovering several sources) are coalesced.
pub async fn follow<F, Fut>(app: Arc<App>, endpoint: Option<Followed>, mut send: F)
where
    F: FnMut(ListKind) -> Fut,
    Fut: Future<Output = bool>,
{
    let mut changes = app.sources.changes();
    // An endpoint's clients also hear a reload that replaced the endpoints.
    let mut replaced = endpoint.as_ref().map(|(all, _)| all.replacements());
    let endpoint = endpoint.map(Arc::new);
    let mut last = shape_of(&app, endpoint.as_deref());
    loop {
        let reloaded = async {
            match replaced.as_mut() {
                Some(r) => r.changed().await.is_ok(),
                None => std::future::pending().await,
            }
        };
        tokio::select! {
            changed = changes.changed() => if changed.is_err() {
                return;
            },
            alive = reloaded => if !alive {
                return;
            },
        }
        // What a client listing now sees, then the end of the burst: a list
        // that changed and changed back within the burst (a tool held, then
        // released) still differs from what a client may have listed
        // meanwhile, so it is announced too.
        let Some(first) = shaped_off_runtime(&app, &endpoint).await else {
            return;
        };
        tokio::time::sleep(Duration::from_millis(100)).await;
        changes.borrow_and_update();
        if let Some(r) = replaced.as_mut() {
            r.borrow_and_update();
        }
        let Some(now) = shaped_off_runtime(&app, &endpoint).await else {
            return;
        };
        for (i, kind) in [ListKind::Tools, ListKind::Prompts, ListKind::Resources]
            .into_iter()
            .enumerate()
        {
            let changed = now.0[i] != last.0[i] || first.0[i] != last.0[i];
            if changed && !send(kind).await {
                return;
            }
        }
        last = now;
    }
}
