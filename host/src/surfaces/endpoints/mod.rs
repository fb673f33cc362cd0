//! Endpoints (`[endpoints.NAME]`): virtual servers over the live
//! projection. An endpoint is a [`View`] of the current projection (indices
//! into it, and a copy of only the tools it transforms), rebuilt when the
//! projection changes; it has no catalog or upstream sessions of its own.
//! It narrows, never widens: what a caller may use on it is what it selects
//! and what the caller's tool lists, policies and quotas allow.

mod transform;

use std::collections::{BTreeMap, HashMap, HashSet};
use std::hash::{Hash, Hasher};
use std::sync::{Arc, Mutex, OnceLock, PoisonError, RwLock};

use globset::{Glob, GlobSet, GlobSetBuilder};
use serde_json::Value;
use wf_plugin_api::Tool;

pub use self::transform::{call_arguments, shown};
use crate::catalog::search::{DocText, Index, Segment};
use crate::config::{
    CatalogConfig, Config, EndpointConfig, Principal, SessionScope, ToolTransform,
};
use crate::projection::{Projected, Projection};

/// Names an endpoint cannot give a tool: wf's meta-tools.
const RESERVED: [&str; 3] = ["wf_find", "wf_describe", "wf_call"];

/// Every configured endpoint, replaced as a whole on reload.
pub struct Endpoints {
    by_name: RwLock<Arc<BTreeMap<String, Arc<Endpoint>>>>,
    /// Counts replacements: an endpoint's clients' list follower wakes on it
    /// (a reload may change an endpoint and no source).
    replaced: tokio::sync::watch::Sender<u64>,
}

impl Default for Endpoints {
    fn default() -> Self {
        Self {
            by_name: RwLock::default(),
            replaced: tokio::sync::watch::Sender::new(0),
        }
    }
}

impl Endpoints {
    /// The endpoints of `config` (already validated by the config's parse).
    pub fn from_config(config: &Config) -> Result<Self, String> {
        let this = Self::default();
        this.replace(compile(config)?);
        Ok(this)
    }

    pub fn replace(&self, endpoints: BTreeMap<String, Arc<Endpoint>>) {
        *self.by_name.write().unwrap_or_else(PoisonError::into_inner) = Arc::new(endpoints);
        self.replaced.send_modify(|n| *n += 1);
    }

    /// Changes each time the endpoints are replaced (a reload).
    pub fn replacements(&self) -> tokio::sync::watch::Receiver<u64> {
        self.replaced.subscribe()
    }

    pub fn get(&self, name: &str) -> Option<Arc<Endpoint>> {
        self.by_name
            .read()
            .unwrap_or_else(PoisonError::into_inner)
            .get(name)
            .cloned()
    }

    pub fn all(&self) -> Arc<BTreeMap<String, Arc<Endpoint>>> {
        self.by_name
            .read()
            .unwrap_or_else(PoisonError::into_inner)
            .clone()
    }

    pub fn is_empty(&self) -> bool {
        self.all().is_empty()
    }
}

/// The endpoints a config declares, compiled.
pub fn compile(config: &Config) -> Result<BTreeMap<String, Arc<Endpoint>>, String> {
    let max_len = config.server.max_name_len;
    config
        .endpoints
        .iter()
        .map(|(name, e)| {
            let catalog = e.catalog.as_ref().map_or_else(
                || config.server.catalog.clone(),
                |c| c.over(&config.server.catalog),
            );
            Endpoint::new(name, e.clone(), catalog, max_len).map(|e| (name.clone(), Arc::new(e)))
        })
        .collect()
}

/// One endpoint: its settings, compiled selection, and its current view.
pub struct Endpoint {
    pub name: Arc<str>,
    pub config: EndpointConfig,
    /// Its catalog settings over `[server.catalog]`.
    pub catalog: CatalogConfig,
    tools: Option<GlobSet>,
    sources: Option<GlobSet>,
    exclude: GlobSet,
    prompts: Option<GlobSet>,
    resources: Option<GlobSet>,
    nodes: Option<GlobSet>,
    transforms: HashMap<String, Arc<ToolTransform>>,
    allow: Option<(HashSet<String>, HashSet<String>)>,
    /// `sessions`, shared with each call's session caller.
    scopes: Option<Arc<BTreeMap<String, SessionScope>>>,
    max_len: usize,
    view: Mutex<Option<Arc<View>>>,
}

fn globs(key: &str, list: &[String]) -> Result<GlobSet, String> {
    let mut b = GlobSetBuilder::new();
    for g in list {
        b.add(Glob::new(g).map_err(|e| format!("{key}: {g:?}: {e}"))?);
    }
    b.build().map_err(|e| format!("{key}: {e}"))
}

impl Endpoint {
    pub fn new(
        name: &str,
        config: EndpointConfig,
        catalog: CatalogConfig,
        max_len: usize,
    ) -> Result<Self, String> {
        let key = |f: &str| format!("endpoints.{name}.{f}");
        let opt =
            |f: &str, l: &Option<Vec<String>>| l.as_ref().map(|l| globs(&key(f), l)).transpose();
        let allow = config.allow.as_ref().map(|list| {
            let (groups, names): (Vec<&String>, Vec<&String>) =
                list.iter().partition(|a| a.starts_with("group:"));
            (
                names.into_iter().cloned().collect(),
                groups
                    .into_iter()
                    .map(|g| g.trim_start_matches("group:").to_string())
                    .collect(),
            )
        });
        Ok(Self {
            name: name.into(),
            tools: opt("tools", &config.tools)?,
            sources: opt("sources", &config.sources)?,
            exclude: globs(&key("exclude"), &config.exclude)?,
            prompts: opt("prompts", &config.prompts)?,
            resources: opt("resources", &config.resources)?,
            nodes: opt("nodes", &config.nodes)?,
            transforms: config
                .transform
                .iter()
                .map(|(k, t)| (k.clone(), Arc::new(t.clone())))
                .collect(),
            allow,
            scopes: (!config.sessions.is_empty()).then(|| Arc::new(config.sessions.clone())),
            max_len,
            catalog,
            config,
            view: Mutex::default(),
        })
    }

    /// The session scopes it pins per source, if any.
    pub fn session_scopes(&self) -> Option<Arc<BTreeMap<String, SessionScope>>> {
        self.scopes.clone()
    }

    /// The `serverInfo.name` its clients see.
    pub fn server_name(&self) -> String {
        self.config
            .server_name
            .clone()
            .unwrap_or_else(|| format!("wf-{}", self.name))
    }

    /// Whether `principal` may use this endpoint: named, or in a named group
    /// (OAuth), or no `allow` list.
    pub fn allows(&self, principal: &Principal) -> bool {
        let Some((names, groups)) = &self.allow else {
            return true;
        };
        names.contains(principal.name())
            || principal
                .groups()
                .is_some_and(|gs| gs.iter().any(|g| groups.contains(&**g)))
    }

    fn source_ok(&self, source: &str) -> bool {
        self.sources.as_ref().is_none_or(|s| s.is_match(source))
    }

    /// Whether the tool clients of `/mcp` call `tool.name` is on this
    /// endpoint: named by a transform, or matched by every selector set
    /// (`tools`, `sources`, `tags`; at least one), and not excluded.
    pub fn selects_tool(&self, tool: &Projected<Tool>) -> bool {
        if self.transforms.contains_key(&tool.name) {
            return true;
        }
        if self.tools.is_none() && self.sources.is_none() && self.config.tags.is_empty() {
            return false;
        }
        self.tools.as_ref().is_none_or(|g| g.is_match(&tool.name))
            && self.source_ok(&tool.source)
            && self.config.tags.iter().all(|t| has_tag(&tool.item, t))
            && !self.exclude.is_match(&tool.name)
    }

    /// Whether a prompt is on this endpoint: `prompts` or `sources` set, and
    /// every one set matches.
    pub fn selects_prompt(&self, source: &str, name: &str) -> bool {
        (self.prompts.is_some() || self.sources.is_some())
            && self.prompts.as_ref().is_none_or(|g| g.is_match(name))
            && self.source_ok(source)
    }

    /// Like [`Self::selects_prompt`], for a resource URI or template name.
    pub fn selects_resource(&self, source: &str, uri: &str) -> bool {
        (self.resources.is_some() || self.sources.is_some())
            && self.resources.as_ref().is_none_or(|g| g.is_match(uri))
            && self.source_ok(source)
    }

    /// Whether workflow node spec `source.name` is on this endpoint: `nodes`
    /// or `sources` set, every one set matching, and it does not mirror a
    /// tool whose arguments this endpoint fixes or narrows (a node call
    /// would reach the tool without them).
    pub fn selects_node(&self, view: &View, source: &str, name: &str) -> bool {
        (self.nodes.is_some() || self.sources.is_some())
            && self
                .nodes
                .as_ref()
                .is_none_or(|g| g.is_match(format!("{source}.{name}")))
            && self.source_ok(source)
            && !view.locked.iter().any(|(s, n)| s == source && n == name)
    }

    /// This endpoint's view of `proj`, built once per projection.
    pub fn view(&self, proj: &Arc<Projection>) -> Arc<View> {
        let mut cached = self.view.lock().unwrap_or_else(PoisonError::into_inner);
        if let Some(v) = cached.as_ref()
            && Arc::ptr_eq(&v.proj, proj)
        {
            return v.clone();
        }
        let v = Arc::new(View::build(self, proj.clone()));
        for p in &v.problems {
            tracing::warn!(endpoint = %self.name, "{p}");
        }
        *cached = Some(v.clone());
        v
    }

    /// The transform of the tool `/mcp` calls `name`, if any.
    pub fn transform(&self, name: &str) -> Option<&ToolTransform> {
        self.transforms.get(name).map(|t| &**t)
    }
}

tokio::task_local! {
    /// The endpoint the call being served came through (the planner's tools
    /// narrow what they show and reach to it).
    static CURRENT: Arc<Endpoint>;
}

/// The endpoint the current call came through, if any.
pub fn current() -> Option<Arc<Endpoint>> {
    CURRENT.try_with(Arc::clone).ok()
}

/// Runs `f` as a call that came through endpoint `e` (none: `/mcp`).
pub async fn within<F: Future>(e: Option<Arc<Endpoint>>, f: F) -> F::Output {
    match e {
        Some(e) => CURRENT.scope(e, f).await,
        None => f.await,
    }
}

/// Whether `tool`'s annotations give it `tag`.
pub fn has_tag(tool: &Tool, tag: &str) -> bool {
    let hint = match tag {
        "read_only" => "readOnlyHint",
        "destructive" => "destructiveHint",
        "idempotent" => "idempotentHint",
        "open_world" => "openWorldHint",
        _ => return false,
    };
    tool.extra
        .get("annotations")
        .and_then(|a| a.get(hint))
        .and_then(Value::as_bool)
        == Some(true)
}

/// One tool as an endpoint shows it.
struct Shown {
    /// Its place in the projection's tools.
    index: usize,
    /// Its transformed definition (under its endpoint name), when it has one.
    transformed: Option<(Box<Projected<Tool>>, Arc<ToolTransform>)>,
}

/// What an endpoint shows of one projection.
pub struct View {
    pub proj: Arc<Projection>,
    tools: Vec<Shown>,
    /// Indices into `tools`, sorted by the name shown.
    by_name: Vec<u32>,
    /// Indices into `tools`, sorted by the tool's `/mcp` name.
    by_original: Vec<u32>,
    prompts: Vec<u32>,
    resources: Vec<u32>,
    templates: Vec<u32>,
    /// Why a selected tool was left out (an alias collision, a bad name).
    pub problems: Vec<String>,
    /// (source, own name) of the tools whose arguments it fixes or narrows:
    /// their node specs are not on the endpoint.
    locked: Vec<(String, String)>,
    shape: OnceLock<[u64; 3]>,
    /// Its own search index, when it transforms a tool (built on first use).
    index: OnceLock<Option<Arc<Index>>>,
}

/// A tool on an endpoint: as shown, as the projection has it, and its transform.
#[derive(Clone, Copy)]
pub struct ViewTool<'a> {
    pub shown: &'a Projected<Tool>,
    pub original: &'a Projected<Tool>,
    pub transform: Option<&'a ToolTransform>,
}

impl<'a> ViewTool<'a> {
    /// Its name without the source's prefix: the endpoint's name for a
    /// renamed tool, else the source's own.
    pub fn own_name(&self) -> &'a str {
        if self.shown.name == self.original.name {
            &self.original.original
        } else {
            &self.shown.name
        }
    }
}

impl View {
    fn build(e: &Endpoint, proj: Arc<Projection>) -> Self {
        let mut problems = Vec::new();
        let mut tools: Vec<Shown> = Vec::new();
        // Names taken: every selected tool's own name, then aliases claim theirs.
        let selected: Vec<usize> = (0..proj.tools.len())
            .filter(|i| e.selects_tool(&proj.tools[*i]))
            .collect();
        let mut aliases: HashMap<String, usize> = HashMap::new();
        for &i in &selected {
            let t = &proj.tools[i];
            let Some(alias) = e.transform(&t.name).and_then(|x| x.name.as_deref()) else {
                continue;
            };
            if alias == t.name {
                continue;
            }
            if let Err(why) = check_alias(alias, e.max_len) {
                problems.push(format!("{}: {why}; shown under its own name", t.name));
                continue;
            }
            match aliases.get(alias) {
                Some(first) => problems.push(format!(
                    "{} and {} are both renamed {alias:?}; only {} is shown",
                    proj.tools[*first].name, t.name, proj.tools[*first].name
                )),
                None => {
                    aliases.insert(alias.to_string(), i);
                }
            }
        }
        let renamed: HashSet<usize> = aliases.values().copied().collect();
        let locked = selected
            .iter()
            .map(|i| &proj.tools[*i])
            .filter(|t| {
                e.transform(&t.name)
                    .is_some_and(|x| !x.fixed.is_empty() || !x.enums.is_empty())
            })
            .map(|t| (t.source.clone(), t.original.clone()))
            .collect();
        for i in selected {
            let t = &proj.tools[i];
            let transform = e.transforms.get(&t.name);
            let alias = transform.and_then(|x| x.name.as_deref());
            let is_alias = renamed.contains(&i);
            if !is_alias && alias.is_some_and(|a| a != t.name && aliases.contains_key(a)) {
                // Lost its alias to another tool: left out rather than shown
                // under a name its transform did not ask for.
                continue;
            }
            if !is_alias && let Some(&owner) = aliases.get(&t.name) {
                problems.push(format!(
                    "{} is renamed {:?}, the name of a selected tool: {} is left out",
                    proj.tools[owner].name, t.name, t.name
                ));
                continue;
            }
            let transformed = transform.map(|x| {
                let name = if is_alias {
                    alias.unwrap_or(&t.name).to_string()
                } else {
                    t.name.clone()
                };
                let mut item = shown(&t.item, x);
                item.name = name.clone();
                let p = Projected {
                    name,
                    source: t.source.clone(),
                    original: t.original.clone(),
                    item,
                };
                (Box::new(p), x.clone())
            });
            tools.push(Shown {
                index: i,
                transformed,
            });
        }
        let name_of = |s: &Shown| -> String {
            s.transformed
                .as_ref()
                .map_or_else(|| proj.tools[s.index].name.clone(), |(p, _)| p.name.clone())
        };
        let mut by_name: Vec<u32> = (0..tools.len() as u32).collect();
        by_name.sort_by_cached_key(|i| name_of(&tools[*i as usize]));
        let mut by_original: Vec<u32> = (0..tools.len() as u32).collect();
        by_original.sort_by(|a, b| {
            let n = |i: &u32| proj.tools[tools[*i as usize].index].name.as_str();
            n(a).cmp(n(b))
        });
        let pick = |n: usize, f: &dyn Fn(usize) -> bool| -> Vec<u32> {
            (0..n).filter(|i| f(*i)).map(|i| i as u32).collect()
        };
        let prompts = pick(proj.prompts.len(), &|i| {
            e.selects_prompt(&proj.prompts[i].source, &proj.prompts[i].name)
        });
        let resources = pick(proj.resources.len(), &|i| {
            e.selects_resource(&proj.resources[i].source, &proj.resources[i].name)
        });
        let templates = pick(proj.templates.len(), &|i| {
            e.selects_resource(&proj.templates[i].source, &proj.templates[i].name)
        });
        Self {
            tools,
            by_name,
            by_original,
            prompts,
            resources,
            templates,
            problems,
            locked,
            shape: OnceLock::new(),
            index: OnceLock::new(),
            proj,
        }
    }

    /// The search index `wf_find` ranks this endpoint's tools by: its own,
    /// over the definitions it shows (keys are the tools' `/mcp` names), when
    /// it transforms a tool; `None`: the projection's index (filtered) ranks
    /// them as this endpoint shows them already.
    pub fn search_index(&self) -> Option<Arc<Index>> {
        self.index
            .get_or_init(|| {
                if self.tools.iter().all(|s| s.transformed.is_none()) {
                    return None;
                }
                let docs: Vec<DocText> = self
                    .tools()
                    .map(|t| {
                        DocText::tool(
                            &t.original.name,
                            &t.shown.source,
                            t.own_name(),
                            t.shown.item.description.as_deref().unwrap_or(""),
                            &t.shown.item.input_schema,
                        )
                    })
                    .collect();
                Some(Arc::new(Index::new(vec![Arc::new(Segment::build(&docs))])))
            })
            .clone()
    }

    fn at(&self, i: usize) -> ViewTool<'_> {
        let s = &self.tools[i];
        let original = &self.proj.tools[s.index];
        match &s.transformed {
            Some((p, t)) => ViewTool {
                shown: p,
                original,
                transform: Some(t),
            },
            None => ViewTool {
                shown: original,
                original,
                transform: None,
            },
        }
    }

    /// The tools shown, in the projection's order.
    pub fn tools(&self) -> impl Iterator<Item = ViewTool<'_>> {
        (0..self.tools.len()).map(|i| self.at(i))
    }

    pub fn len(&self) -> usize {
        self.tools.len()
    }

    pub fn is_empty(&self) -> bool {
        self.tools.is_empty()
    }

    /// The tool this endpoint's clients call `name`.
    pub fn tool(&self, name: &str) -> Option<ViewTool<'_>> {
        let i = self
            .by_name
            .binary_search_by(|i| self.at(*i as usize).shown.name.as_str().cmp(name))
            .ok()?;
        Some(self.at(self.by_name[i] as usize))
    }

    /// The tool `/mcp` calls `name`, when this endpoint shows it.
    pub fn by_original(&self, name: &str) -> Option<ViewTool<'_>> {
        let i = self
            .by_original
            .binary_search_by(|i| self.at(*i as usize).original.name.as_str().cmp(name))
            .ok()?;
        Some(self.at(self.by_original[i] as usize))
    }

    pub fn prompts(&self) -> impl Iterator<Item = &Projected<wf_plugin_api::Prompt>> {
        self.prompts.iter().map(|i| &self.proj.prompts[*i as usize])
    }

    pub fn resources(&self) -> impl Iterator<Item = &Projected<wf_plugin_api::Resource>> {
        self.resources
            .iter()
            .map(|i| &self.proj.resources[*i as usize])
    }

    pub fn templates(&self) -> impl Iterator<Item = &Projected<wf_plugin_api::ResourceTemplate>> {
        self.templates
            .iter()
            .map(|i| &self.proj.templates[*i as usize])
    }

    /// A fingerprint of its tools, prompts and resources (for `list_changed`).
    pub fn shape(&self) -> [u64; 3] {
        *self.shape.get_or_init(|| {
            let digest = |items: &mut dyn Iterator<Item = (&str, String)>| {
                let mut h = std::collections::hash_map::DefaultHasher::new();
                for (n, item) in items {
                    n.hash(&mut h);
                    item.hash(&mut h);
                }
                h.finish()
            };
            [
                digest(
                    &mut self
                        .tools()
                        .map(|t| (t.shown.name.as_str(), to_json(&t.shown.item))),
                ),
                digest(&mut self.prompts().map(|p| (p.name.as_str(), to_json(&p.item)))),
                digest(
                    &mut self
                        .resources()
                        .map(|r| (r.name.as_str(), to_json(&r.item))),
                ) ^ digest(
                    &mut self
                        .templates()
                        .map(|r| (r.name.as_str(), to_json(&r.item))),
                ),
            ]
        })
    }
}

fn to_json<T: serde::Serialize>(v: &T) -> String {
    serde_json::to_string(v).unwrap_or_default()
}

/// An alias must be a client-safe name within the naming rules' length and
/// not one of wf's meta-tools.
fn check_alias(alias: &str, max_len: usize) -> Result<(), String> {
    crate::config::check_tool_name(alias)?;
    if alias.len() > max_len {
        return Err(format!(
            "alias {alias:?} is longer than server.max_name_len ({max_len})"
        ));
    }
    if RESERVED.contains(&alias) {
        return Err(format!("alias {alias:?} is a wf meta-tool's name"));
    }
    Ok(())
}

/// What `wf check` says of an endpoint over a projection: it selects
/// nothing, a transform names a tool that does not exist or an argument its
/// tool lacks, an alias collides.
pub fn findings(e: &Endpoint, proj: &Arc<Projection>) -> Vec<String> {
    let view = e.view(proj);
    let mut out = view.problems.clone();
    if view.is_empty() && view.prompts.is_empty() && view.resources.is_empty() && e.nodes.is_none()
    {
        out.push("selects nothing".into());
    }
    for source in e.config.sessions.keys() {
        if !proj.tools.iter().any(|t| t.source == *source) {
            out.push(format!(
                "sessions.{source}: no source {source:?} serves a tool"
            ));
        }
    }
    for (name, t) in &e.config.transform {
        let Some(tool) = proj.tool(name) else {
            out.push(format!("transform.{name}: no tool {name:?} on /mcp"));
            continue;
        };
        let props = tool
            .item
            .input_schema
            .get("properties")
            .and_then(Value::as_object);
        let has = |k: &str| props.is_some_and(|p| p.contains_key(k));
        let keys = t
            .fixed
            .keys()
            .chain(t.defaults.keys())
            .chain(t.enums.keys());
        for k in keys {
            if !has(k) {
                out.push(format!("transform.{name}: {name} has no argument {k:?}"));
            }
        }
        for (k, values) in &t.enums {
            let own = props
                .and_then(|p| p.get(k))
                .and_then(|p| p.get("enum"))
                .and_then(Value::as_array);
            if let Some(own) = own
                && let Some(v) = values.iter().find(|v| !own.contains(v))
            {
                out.push(format!(
                    "transform.{name}: {v} is not one of {k:?}'s own values: an enum only narrows"
                ));
            }
        }
    }
    out
}

#[cfg(test)]
mod tests;
