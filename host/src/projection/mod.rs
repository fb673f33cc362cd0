//! The projection: every source's catalog (plugins' sources plus the host's
//! own local ones) under client-safe names, with the routes back. It owns
//! the host-local catalogs, the cached projection (rebuilt when a catalog
//! changes) and the last live one (session-scoped listings). Surfaces and
//! the server read it; it reads only sources and the catalog below it.

mod names;
mod prefixes;
mod search;
mod table;

pub use names::{NameRules, hash6, is_client_safe};
pub use prefixes::Naming;
pub use search::ToolSearch;
pub use table::{Projected, Projection, ResourceRoute};

use std::sync::PoisonError;
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use wf_plugin_api::Catalog;

use crate::catalog::Snapshot;
use crate::sources::Sources;

/// How long the projector waits for the sources.
#[derive(Debug, Clone, Copy)]
pub struct Timing {
    /// Until then, a client's first list waits for first discovery.
    pub ready_by: Instant,
    /// Bound on a live listing of one source.
    pub live_list: Duration,
}

/// The projection of the current catalogs, kept up to date.
pub struct Projector {
    sources: Arc<Sources>,
    rules: NameRules,
    timing: Timing,
    /// Capabilities the host itself serves (the planner's tools, deployments),
    /// by source name; projected beside the plugins' sources.
    locals: Mutex<Vec<(String, Arc<Catalog>)>>,
    cached: Mutex<(u64, Arc<Projection>)>,
    /// The last projection that included session-scoped listings.
    live: Mutex<Option<Arc<Projection>>>,
    versions: tokio::sync::watch::Receiver<u64>,
    /// How names are prefixed, per the config in force.
    naming: Mutex<Naming>,
    /// The search index over the projected tools.
    search: ToolSearch,
}

impl Projector {
    pub fn new(sources: Arc<Sources>, rules: NameRules, timing: Timing) -> Self {
        let versions = sources.changes();
        Self {
            sources,
            rules,
            timing,
            locals: Mutex::new(Vec::new()),
            cached: Mutex::new((u64::MAX, Arc::new(Projection::default()))),
            live: Mutex::new(None),
            versions,
            naming: Mutex::new(Naming::default()),
            search: ToolSearch::default(),
        }
    }

    pub fn rules(&self) -> NameRules {
        self.rules
    }

    pub fn timing(&self) -> Timing {
        self.timing
    }

    /// Sets (replaces) a host-local source's capabilities.
    pub fn set_local(&self, name: &str, catalog: Catalog) {
        {
            let mut locals = self.locals.lock().unwrap_or_else(PoisonError::into_inner);
            locals.retain(|(n, _)| n != name);
            locals.push((name.to_string(), Arc::new(catalog)));
            locals.sort_by(|a, b| a.0.cmp(&b.0));
        }
        self.sources.touch();
    }

    /// Sets how names are prefixed (from the config in force); a change
    /// rebuilds the projection.
    pub fn set_naming(&self, naming: Naming) {
        let changed = {
            let mut current = self.naming.lock().unwrap_or_else(PoisonError::into_inner);
            let changed = *current != naming;
            *current = naming;
            changed
        };
        if changed {
            self.sources.touch();
        }
    }

    fn build(&self, snapshot: &Snapshot) -> Projection {
        let naming = self
            .naming
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .clone();
        Projection::build_with(snapshot, self.rules, &naming)
    }

    pub fn is_local(&self, name: &str) -> bool {
        self.locals
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .iter()
            .any(|(n, _)| n == name)
    }

    /// The plugin sources' catalogs plus the host-local ones.
    pub fn snapshot(&self) -> Snapshot {
        let mut s = Snapshot::take(&self.sources);
        s.sources.extend(
            self.locals
                .lock()
                .unwrap_or_else(PoisonError::into_inner)
                .iter()
                .cloned(),
        );
        s.sources.sort_by(|a, b| a.0.cmp(&b.0));
        s
    }

    /// Why a name no projection holds is refused, when it is a held tool's
    /// (`sources::tool_pins`): the name it had, under its source's prefix
    /// or without one, or its dotted ref.
    pub fn held_refusal(&self, name: &str) -> Option<String> {
        let naming = self
            .naming
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .clone();
        let rules = &self.rules;
        self.sources
            .all_held()
            .into_iter()
            .find_map(|(source, held)| {
                let prefix = match naming.configured.get(&source) {
                    Some(p) => rules.clean_prefix(p),
                    None => format!("{}__", rules.source_prefix(&source)),
                };
                held.into_iter().find_map(|h| {
                    let dotted = format!("{source}.{}", h.name);
                    let names = [
                        rules.project(&prefix, &h.name, &dotted),
                        rules.project("", &h.name, &dotted),
                        dotted.clone(),
                    ];
                    names.contains(&name.to_string()).then_some(h.message)
                })
            })
    }

    /// The current projection, rebuilt when a catalog changed since the last call.
    pub fn projection(&self) -> Arc<Projection> {
        let version = *self.versions.borrow();
        let mut cached = self.cached.lock().unwrap_or_else(PoisonError::into_inner);
        if cached.0 != version {
            let snapshot = self.snapshot();
            *cached = (version, Arc::new(self.build(&snapshot)));
        }
        cached.1.clone()
    }

    /// The search index over the current projection's tools, and that
    /// projection (re-indexed per source when a catalog changed).
    pub fn tool_index(&self) -> (Arc<Projection>, Arc<crate::catalog::search::Index>) {
        let proj = self.projection();
        let index = self.search.index(&proj);
        (proj, index)
    }

    /// Like [`Self::projection`], but right after start waits (until
    /// `ready_by`) for first discovery, so a client's first list is complete
    /// whenever the upstreams are quick.
    pub async fn projection_ready(&self) -> Arc<Projection> {
        self.sources
            .wait_first_discovery(self.timing.ready_by)
            .await;
        self.projection()
    }

    /// The projection in which tool `name` is looked up. A name it lacks,
    /// right after start (until `ready_by`), waits for the first discovery
    /// of the sources that could own it; after that it is unknown at once.
    pub async fn projection_for_tool(&self, name: &str) -> Arc<Projection> {
        self.projection_knowing(Some(name), |p| p.tool(name).is_some())
            .await
    }

    /// [`Self::projection_for_tool`] for a prompt name.
    pub async fn projection_for_prompt(&self, name: &str) -> Arc<Projection> {
        self.projection_knowing(Some(name), |p| p.prompt(name).is_some())
            .await
    }

    /// The projection once `known` holds, or, right after start, once every
    /// source that could serve `name` (any source for `None`, e.g. a resource
    /// URI) has finished its first discovery. A name already known does not
    /// wait for any other source's discovery.
    async fn projection_knowing(
        &self,
        name: Option<&str>,
        known: impl Fn(&Projection) -> bool,
    ) -> Arc<Projection> {
        let now = self.projection();
        if known(&now) || Instant::now() >= self.timing.ready_by {
            return now;
        }
        let naming = self
            .naming
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .clone();
        let could_own =
            |source: &str| name.is_none_or(|n| naming.could_name(&self.rules, source, n));
        self.sources
            .wait_first_discovery_of(could_own, self.timing.ready_by)
            .await;
        self.projection()
    }

    /// A projection whose resources, templates and prompts are what each
    /// source's live session lists now (they can be session-scoped, e.g. a
    /// resource a tool call just created). Tools stay as discovered. A
    /// source that does not answer in time keeps its discovered listings.
    pub async fn live_projection(&self) -> Arc<Projection> {
        self.projection_ready().await;
        let mut snapshot = self.snapshot();
        let timeout = self.timing.live_list;
        let lists = snapshot.sources.iter().map(|(name, _)| {
            let handle = self.sources.get(name).and_then(|e| e.handle.clone());
            async move {
                let handle = handle?;
                let (r, t, p) = tokio::time::timeout(timeout, async {
                    tokio::join!(
                        handle.list_resources(),
                        handle.list_resource_templates(),
                        handle.list_prompts()
                    )
                })
                .await
                .ok()?;
                Some((r.ok(), t.ok(), p.ok()))
            }
        });
        let lists = futures::future::join_all(lists).await;
        for ((_, catalog), live) in snapshot.sources.iter_mut().zip(lists) {
            let Some((resources, templates, prompts)) = live else {
                continue;
            };
            let c = Arc::make_mut(catalog);
            if let Some(r) = resources {
                c.resources = r;
            }
            if let Some(t) = templates {
                c.resource_templates = t;
            }
            if let Some(p) = prompts {
                c.prompts = p;
            }
            // Live listings are screened like discovered ones.
            let (listed, _) = crate::catalog::screen(Catalog {
                prompts: std::mem::take(&mut c.prompts),
                resources: std::mem::take(&mut c.resources),
                resource_templates: std::mem::take(&mut c.resource_templates),
                ..Catalog::default()
            });
            (c.prompts, c.resources, c.resource_templates) =
                (listed.prompts, listed.resources, listed.resource_templates);
        }
        let p = Arc::new(self.build(&snapshot));
        *self.live.lock().unwrap_or_else(PoisonError::into_inner) = Some(p.clone());
        p
    }

    /// Routes a resource read: the discovered projection, else the last live
    /// one, else a fresh live listing.
    pub async fn resource_route(&self, uri: &str) -> Option<ResourceRoute> {
        let known = |p: &Projection| p.resource_route(uri).is_some();
        if let Some(r) = self
            .projection_knowing(None, known)
            .await
            .resource_route(uri)
        {
            return Some(r);
        }
        let last = self
            .live
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .clone();
        if let Some(r) = last.and_then(|p| p.resource_route(uri)) {
            return Some(r);
        }
        self.live_projection().await.resource_route(uri)
    }
}
