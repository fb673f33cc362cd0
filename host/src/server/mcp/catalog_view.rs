//! What of the tool catalog each principal's `tools/list` shows: its
//! catalog mode (`full`, `search`, `auto`), its budgets (`max_tools`,
//! `max_schema_bytes`) and its tool usage, which decides what fits a budget.

use std::collections::{HashMap, HashSet};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex, PoisonError};
use std::time::Duration;

use globset::{Glob, GlobSet, GlobSetBuilder};
use wf_plugin_api::Tool;

use super::meta_tools;
use crate::config::{CatalogConfig, CatalogMode, ServerConfig};
use crate::projection::Projected;
use crate::server::identity::limits::Principal;
use crate::store::Store;
use crate::surfaces::endpoints::Endpoint;

/// One principal's resolved catalog settings.
#[derive(Debug, Default)]
pub struct Policy {
    pub config: CatalogConfig,
    pinned: Option<GlobSet>,
}

impl Policy {
    fn new(config: CatalogConfig, key: &str) -> anyhow::Result<Self> {
        let pinned = match &config.pinned {
            None => None,
            Some(globs) => {
                let mut b = GlobSetBuilder::new();
                for g in globs {
                    b.add(Glob::new(g).map_err(|e| anyhow::anyhow!("{key}.pinned: {g:?}: {e}"))?);
                }
                Some(b.build()?)
            }
        };
        Ok(Self { config, pinned })
    }

    fn pinned(&self, name: &str) -> bool {
        self.pinned.as_ref().is_some_and(|p| p.is_match(name))
    }

    /// Whether a principal that may use `visible` tools is in search mode.
    pub fn searching(&self, visible: usize) -> bool {
        match self.config.mode() {
            CatalogMode::Full => false,
            CatalogMode::Search => true,
            CatalogMode::Auto => visible > self.config.auto_threshold(),
        }
    }
}

/// Every principal's policy, and tool usage.
#[derive(Default)]
pub struct CatalogView {
    base: Policy,
    by_principal: HashMap<String, Policy>,
    /// `[[server.oauth.groups]]` that set a `catalog`, in file order.
    by_group: Vec<(String, Policy)>,
    pub usage: Usage,
    /// Endpoints' policies, made on first use; a reload's new endpoint
    /// (another `Arc`) gets a new one.
    by_endpoint: Mutex<HashMap<String, EndpointPolicy>>,
}

/// An endpoint (the `Arc` its policy was made for) and its policy.
type EndpointPolicy = (Arc<Endpoint>, Arc<Policy>);

/// What one `tools/list` shows.
pub struct Listing<'a> {
    pub tools: Vec<&'a Tool>,
    /// Some tools the principal may use are not listed (search mode or a
    /// budget): the meta-tools are listed to reach them.
    pub partial: bool,
}

impl CatalogView {
    /// Fails on a `pinned` pattern that is not a glob.
    pub fn from_config(server: &ServerConfig) -> anyhow::Result<Self> {
        let base = Policy::new(server.catalog.clone(), "server.catalog")?;
        let mut by_principal = HashMap::new();
        for (i, t) in server.tokens.iter().enumerate() {
            if let Some(c) = &t.catalog {
                let key = format!("server.tokens[{i}].catalog");
                by_principal.insert(t.name.clone(), Policy::new(c.over(&server.catalog), &key)?);
            }
        }
        let mut by_group = Vec::new();
        for (i, g) in server
            .oauth
            .iter()
            .flat_map(|o| o.groups.iter())
            .enumerate()
        {
            if let Some(c) = &g.catalog {
                let key = format!("server.oauth.groups[{i}].catalog");
                by_group.push((g.name.clone(), Policy::new(c.over(&server.catalog), &key)?));
            }
        }
        Ok(Self {
            base,
            by_principal,
            by_group,
            usage: Usage::default(),
            by_endpoint: Mutex::default(),
        })
    }

    pub fn policy(&self, principal: &Principal) -> &Policy {
        if let Some(theirs) = principal.groups() {
            // An OAuth principal: its first group (in file order) with one.
            return self
                .by_group
                .iter()
                .find(|(g, _)| theirs.iter().any(|t| **t == **g))
                .map_or(&self.base, |(_, p)| p);
        }
        self.by_principal
            .get(principal.name())
            .unwrap_or(&self.base)
    }

    /// Endpoint `e`'s policy: its `catalog` over `[server.catalog]`.
    pub fn endpoint_policy(&self, e: &Arc<Endpoint>) -> Arc<Policy> {
        let mut all = self
            .by_endpoint
            .lock()
            .unwrap_or_else(PoisonError::into_inner);
        if let Some((had, p)) = all.get(&*e.name)
            && Arc::ptr_eq(had, e)
        {
            return p.clone();
        }
        let key = format!("endpoints.{}.catalog", e.name);
        let p = Arc::new(Policy::new(e.catalog.clone(), &key).unwrap_or_else(|err| {
            tracing::warn!("{err}");
            Policy::default()
        }));
        all.insert(e.name.to_string(), (e.clone(), p.clone()));
        p
    }

    /// Whether calls are counted: only while some principal has a budget
    /// (the default call path does no bookkeeping it would never use).
    pub fn counts_usage(&self) -> bool {
        let budget =
            |p: &Policy| p.config.max_tools.is_some() || p.config.max_schema_bytes.is_some();
        budget(&self.base)
            || self.by_principal.values().any(budget)
            || self.by_group.iter().any(|(_, p)| budget(p))
    }

    /// Whether any principal may be shown less than its whole catalog.
    pub fn any_restricts(&self) -> bool {
        self.base.config.restricts()
            || self.by_principal.values().any(|p| p.config.restricts())
            || self.by_group.iter().any(|(_, p)| p.config.restricts())
    }

    /// The tools `principal` is listed, of the `visible` ones it may use;
    /// `found` are the tools its session found (`keep_found`).
    pub fn listing<'a>(
        &self,
        store: &Store,
        principal: &Principal,
        visible: Vec<&'a Projected<Tool>>,
        found: &HashSet<String>,
    ) -> Listing<'a> {
        self.listing_by(self.policy(principal), store, principal, visible, found)
    }

    /// [`Self::listing`] under `policy` (an endpoint's).
    pub fn listing_by<'a>(
        &self,
        policy: &Policy,
        store: &Store,
        principal: &Principal,
        visible: Vec<&'a Projected<Tool>>,
        found: &HashSet<String>,
    ) -> Listing<'a> {
        let searching = policy.searching(visible.len());
        let total = visible.len();
        let keep_found = policy.config.keep_found.unwrap_or(false);
        let shown: Vec<&'a Projected<Tool>> = if searching {
            visible
                .into_iter()
                .filter(|t| policy.pinned(&t.name) || (keep_found && found.contains(&t.name)))
                .collect()
        } else {
            visible
        };
        let (max_tools, max_bytes) = (policy.config.max_tools, policy.config.max_schema_bytes);
        let over = |tools: &[&Projected<Tool>]| {
            max_tools.is_some_and(|m| tools.len() > m)
                || max_bytes.is_some_and(|m| tools.iter().map(|t| size(&t.item)).sum::<usize>() > m)
        };
        if !searching && !over(&shown) {
            return Listing {
                tools: shown.into_iter().map(|t| &t.item).collect(),
                partial: false,
            };
        }
        // Partial: the meta-tools first (they reach the rest), then the
        // most-used tools that fit what is left of the budgets.
        let meta = meta_tools::definitions();
        let mut tools: Vec<&'a Tool> = meta.iter().collect();
        let mut bytes: usize = meta.iter().map(size).sum();
        let mut order: Vec<(usize, &'a Projected<Tool>)> = shown.into_iter().enumerate().collect();
        if over(&order.iter().map(|(_, t)| *t).collect::<Vec<_>>()) {
            let used = self.usage.counts(store, principal);
            order.sort_by_key(|(i, t)| {
                (
                    std::cmp::Reverse(used.get(&t.name).copied().unwrap_or(0)),
                    *i,
                )
            });
        }
        for (_, t) in order {
            if max_tools.is_some_and(|m| tools.len() >= m) {
                break;
            }
            let b = size(&t.item);
            if max_bytes.is_some_and(|m| bytes + b > m) {
                continue;
            }
            bytes += b;
            tools.push(&t.item);
        }
        Listing {
            partial: searching || tools.len() - meta.len() < total,
            tools,
        }
    }
}

/// A tool definition's size as a client receives it (compact JSON).
pub fn size(tool: &Tool) -> usize {
    serde_json::to_vec(tool).map_or(0, |v| v.len())
}

/// Calls per principal and tool: counted in memory, loaded from the store
/// on first use, written back in batches (at most a second behind) so the
/// call path never waits for SQLite.
#[derive(Default)]
pub struct Usage {
    counts: Mutex<HashMap<String, HashMap<String, u64>>>,
    /// Counts not yet written: principal → tool → calls.
    pending: Arc<Mutex<HashMap<String, HashMap<String, u64>>>>,
    flushing: Arc<AtomicBool>,
}

impl Usage {
    /// The counts of `principal`'s tools.
    pub fn counts(&self, store: &Store, principal: &Principal) -> HashMap<String, u64> {
        self.ensure_loaded(store, principal);
        let all = self.counts.lock().unwrap_or_else(PoisonError::into_inner);
        all.get(principal.name()).cloned().unwrap_or_default()
    }

    /// Loads `principal`'s counts from the store on first use. The store is
    /// read with no lock held (a slow database must not hold up every other
    /// principal's listing); a concurrent first load keeps the first answer.
    fn ensure_loaded(&self, store: &Store, principal: &Principal) {
        let present = self
            .counts
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .contains_key(principal.name());
        if present {
            return;
        }
        let loaded = store
            .blocking(store.tool_usage(principal.name()))
            .unwrap_or_else(|e| {
                tracing::warn!(error = %e, "cannot read tool usage");
                HashMap::new()
            });
        self.counts
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .entry(principal.name().to_string())
            .or_insert(loaded);
    }

    /// Adds one to `tool`, allocating only for a tool not seen before.
    fn bump(map: &mut HashMap<String, u64>, tool: &str) {
        match map.get_mut(tool) {
            Some(n) => *n += 1,
            None => {
                map.insert(tool.to_string(), 1);
            }
        }
    }

    /// Counts one call of `tool` by `principal`.
    pub fn record(&self, store: &Arc<Store>, principal: &Principal, tool: &str) {
        {
            let mut all = self.counts.lock().unwrap_or_else(PoisonError::into_inner);
            if !all.contains_key(principal.name()) {
                drop(all);
                self.ensure_loaded(store, principal);
                all = self.counts.lock().unwrap_or_else(PoisonError::into_inner);
            }
            if let Some(mine) = all.get_mut(principal.name()) {
                Self::bump(mine, tool);
            }
        }
        {
            let mut pending = self.pending.lock().unwrap_or_else(PoisonError::into_inner);
            let mine = match pending.get_mut(principal.name()) {
                Some(m) => m,
                None => pending.entry(principal.name().to_string()).or_default(),
            };
            Self::bump(mine, tool);
        }
        if self.flushing.swap(true, Ordering::AcqRel) {
            return;
        }
        let (pending, flushing, store) =
            (self.pending.clone(), self.flushing.clone(), store.clone());
        tokio::spawn(async move {
            tokio::time::sleep(Duration::from_secs(1)).await;
            flushing.store(false, Ordering::Release);
            let batch: Vec<(String, String, u64)> =
                std::mem::take(&mut *pending.lock().unwrap_or_else(PoisonError::into_inner))
                    .into_iter()
                    .flat_map(|(p, tools)| tools.into_iter().map(move |(t, n)| (p.clone(), t, n)))
                    .collect();
            if let Err(e) = store.add_tool_usage(&batch).await {
                tracing::warn!(error = %e, "cannot save tool usage");
            }
        });
    }
}

#[cfg(test)]
mod tests {
    use serde_json::json;

    use super::*;
    use crate::config::TokenConfig;

    fn tools(n: usize) -> Vec<Projected<Tool>> {
        (0..n)
            .map(|i| Projected {
                name: format!("s__t{i}"),
                source: "s".into(),
                original: format!("t{i}"),
                item: Tool::new(format!("s__t{i}"), "d", json!({"type": "object"})),
            })
            .collect()
    }

    fn names(l: &Listing) -> Vec<String> {
        l.tools.iter().map(|t| t.name.clone()).collect()
    }

    fn view(server: CatalogConfig, token: Option<CatalogConfig>) -> CatalogView {
        let mut config = ServerConfig {
            catalog: server,
            ..ServerConfig::default()
        };
        config.tokens.push(TokenConfig {
            name: "alice".into(),
            token: "t".into(),
            allow_tools: None,
            deny_tools: Vec::new(),
            groups: Vec::new(),
            catalog: token,
        });
        CatalogView::from_config(&config).unwrap()
    }

    #[test]
    fn an_oauth_principal_gets_its_first_groups_catalog() {
        let store = Store::in_memory().unwrap();
        let oauth: crate::config::OAuthConfig = serde_json::from_value(json!({
            "issuer": "https://idp.example", "resource": "https://wf.example/mcp",
            "groups": [
                {"name": "plain"},
                {"name": "lean", "catalog": {"mode": "search"}},
                {"name": "big", "catalog": {"max_tools": 1}},
            ]
        }))
        .unwrap();
        let v = CatalogView::from_config(&ServerConfig {
            oauth: Some(oauth),
            ..ServerConfig::default()
        })
        .unwrap();
        let all = tools(3);
        let listed = |groups: &[&str]| {
            let p = Principal::with_groups("p", groups.iter().map(|g| g.to_string()).collect());
            names(&v.listing(&store, &p, all.iter().collect(), &HashSet::new()))
        };
        assert_eq!(listed(&["plain"]).len(), 3);
        assert_eq!(
            listed(&["big", "lean"]),
            ["wf_find", "wf_describe", "wf_call"]
        );
        let big = listed(&["big"]);
        assert!(
            big.contains(&"wf_find".to_string()) && big.len() < 3 + 3,
            "{big:?}"
        );
        assert!(v.any_restricts() && v.counts_usage());
        // A static principal named like a group is not in it.
        assert_eq!(
            names(&v.listing(
                &store,
                &Principal::named("lean"),
                all.iter().collect(),
                &HashSet::new()
            ))
            .len(),
            3
        );
    }

    #[test]
    fn auto_is_full_up_to_the_threshold_then_search_with_pins() {
        let store = Store::in_memory().unwrap();
        let v = view(
            CatalogConfig {
                mode: Some(CatalogMode::Auto),
                auto_threshold: Some(3),
                pinned: Some(vec!["s__t1".into()]),
                ..Default::default()
            },
            None,
        );
        let few = tools(3);
        let l = v.listing(
            &store,
            &Principal::local(),
            few.iter().collect(),
            &HashSet::new(),
        );
        assert_eq!((names(&l).len(), l.partial), (3, false));
        let many = tools(4);
        let l = v.listing(
            &store,
            &Principal::local(),
            many.iter().collect(),
            &HashSet::new(),
        );
        assert_eq!(names(&l), ["wf_find", "wf_describe", "wf_call", "s__t1"]);
        assert!(l.partial);
        assert!(v.any_restricts());
    }

    #[tokio::test]
    async fn a_budget_keeps_the_most_used_and_a_token_overrides_the_server() {
        let store = Store::in_memory().unwrap();
        let v = view(
            CatalogConfig {
                max_tools: Some(5),
                ..Default::default()
            },
            Some(CatalogConfig {
                mode: Some(CatalogMode::Search),
                keep_found: Some(true),
                ..Default::default()
            }),
        );
        let all = tools(10);
        let local = Principal::local();
        store
            .add_tool_usage(&[
                ("local".into(), "s__t7".into(), 2),
                ("local".into(), "s__t4".into(), 5),
            ])
            .await
            .unwrap();
        let l = v.listing(&store, &local, all.iter().collect(), &HashSet::new());
        assert_eq!(
            names(&l),
            ["wf_find", "wf_describe", "wf_call", "s__t4", "s__t7"]
        );
        // alice: search mode (her token) under the server's budget; found tools join.
        let alice = Principal::named("alice");
        let found: HashSet<String> = ["s__t2".to_string()].into();
        let l = v.listing(&store, &alice, all.iter().collect(), &found);
        assert_eq!(names(&l), ["wf_find", "wf_describe", "wf_call", "s__t2"]);
        // Within its budget nothing is hidden and no meta-tool is added.
        let l = v.listing(&store, &local, all[..5].iter().collect(), &HashSet::new());
        assert_eq!((names(&l).len(), l.partial), (5, false));
    }
}
