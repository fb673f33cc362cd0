//! The projection of a catalog snapshot onto client-visible names, and the
//! routes back from those names to `(source, original name)`.

use std::collections::{BTreeMap, HashMap};
use std::sync::{Arc, OnceLock};

use serde_json::{Map, Value};

use wf_plugin_api::{Catalog, Prompt, Resource, ResourceTemplate, Tool};

use super::names::{NameRules, hash6};
use super::prefixes::{Naming, Wanted, prefixed};
use crate::catalog::Snapshot;
use crate::config::PrefixMode;

/// A tool's input schema, shared.
pub type Schema = Arc<Map<String, Value>>;

/// A capability under its client-visible name.
#[derive(Debug, Clone)]
pub struct Projected<T> {
    /// The name (or URI) clients see.
    pub name: String,
    pub source: String,
    /// The name (or URI) the source knows.
    pub original: String,
    pub item: T,
}

#[derive(Debug, Clone)]
pub struct ResourceRoute {
    pub source: String,
    pub uri: String,
}

#[derive(Debug, Default)]
pub struct Projection {
    pub tools: Vec<Projected<Tool>>,
    pub prompts: Vec<Projected<Prompt>>,
    pub resources: Vec<Projected<Resource>>,
    pub templates: Vec<Projected<ResourceTemplate>>,
    tool_index: HashMap<String, usize>,
    /// Each tool's input schema as an object, made on first use, and
    /// whether it declares `Mcp-Param-*` headers: both are asked on every
    /// 2026-07-28 `tools/call`, and a copy per request showed in the profile.
    tool_schemas: Vec<OnceLock<Option<(Schema, bool)>>>,
    prompt_index: HashMap<String, usize>,
    resource_index: HashMap<String, usize>,
    /// Collisions that were resolved, for status output and logs.
    pub collisions: Vec<String>,
}

/// The name each `(source, name, item)` wants, with or without its source's
/// prefix per `mode`; names several sources share under `on_collision` are
/// reported.
fn wanted_names<T>(
    items: Vec<(String, String, T)>,
    mode: PrefixMode,
    rules: &NameRules,
    name_prefix: &dyn Fn(&str) -> String,
    what: &str,
    collisions: &mut Vec<String>,
) -> Vec<(String, String, String, T)> {
    let wanted: Vec<Wanted<'_>> = items
        .iter()
        .map(|(source, name, _)| Wanted {
            source,
            plain: rules.project("", name, &format!("{source}.{name}")),
        })
        .collect();
    let (flags, shared) = prefixed(mode, &wanted);
    for s in shared {
        collisions.push(format!("{what} name {s}: shown with source prefixes"));
    }
    let plain: Vec<String> = wanted.into_iter().map(|w| w.plain).collect();
    items
        .into_iter()
        .zip(flags.into_iter().zip(plain))
        .map(|((source, name, item), (prefixed, plain))| {
            let shown = if prefixed {
                rules.project(&name_prefix(&source), &name, &format!("{source}.{name}"))
            } else {
                plain
            };
            (shown, source, name, item)
        })
        .collect()
}

/// Assigns unique names: `wanted` per item in sorted ref order; an item whose
/// wanted name is taken gets a hashed one and the collision is reported.
fn assign<T>(
    items: Vec<(String, String, String, T)>,
    rules: &NameRules,
    what: &str,
    collisions: &mut Vec<String>,
) -> (Vec<Projected<T>>, HashMap<String, usize>) {
    let mut out: Vec<Projected<T>> = Vec::with_capacity(items.len());
    let mut index = HashMap::new();
    for (wanted, source, original, item) in items {
        let mut name = wanted.clone();
        let mut n = 0;
        while index.contains_key(&name) {
            n += 1;
            name = rules.hashed(&wanted, &format!("{source}.{original}#{n}"));
        }
        if n > 0 {
            let holder: &Projected<T> = &out[index[&wanted]];
            collisions.push(format!(
                "{what} {source}.{original} wanted name {wanted:?}, already used by {}.{}; shown as {name:?}",
                holder.source, holder.original
            ));
        }
        index.insert(name.clone(), out.len());
        out.push(Projected {
            name,
            source,
            original,
            item,
        });
    }
    (out, index)
}

/// Each source's prefix: `a.b` and `a_b` would share one, so the later (in
/// name order) gets a hash. `wf://` URIs always use these.
fn source_prefixes(
    snapshot: &Snapshot,
    rules: &NameRules,
    collisions: &mut Vec<String>,
) -> BTreeMap<String, String> {
    let mut prefixes = BTreeMap::new();
    let mut taken: HashMap<String, String> = HashMap::new();
    for (source, _) in &snapshot.sources {
        let mut p = rules.source_prefix(source);
        if let Some(other) = taken.get(&p) {
            let np = format!("{p}_{}", &hash6(source)[..4]);
            collisions.push(format!(
                "source {source} would share prefix {p:?} with {other}; uses {np:?}"
            ));
            p = np;
        }
        taken.insert(p.clone(), source.clone());
        prefixes.insert(source.clone(), p);
    }
    prefixes
}

/// Every source's items of one kind as `(source, name, item)`, in source order.
fn listed<T: Clone>(
    snapshot: &Snapshot,
    items: impl Fn(&Catalog) -> &Vec<T>,
    name: impl Fn(&T) -> &String,
) -> Vec<(String, String, T)> {
    snapshot
        .sources
        .iter()
        .flat_map(|(source, cat)| {
            items(cat)
                .iter()
                .map(|i| (source.clone(), name(i).clone(), i.clone()))
        })
        .collect()
}

/// Resource URIs pass through unless two sources use the same one; the later
/// is shown as `wf://<source>/<uri>` (then `~2`, `~3`… while that is taken
/// too). A source listing one URI twice shows it once.
fn place_resources(
    snapshot: &Snapshot,
    prefixes: &BTreeMap<String, String>,
    collisions: &mut Vec<String>,
) -> (Vec<Projected<Resource>>, HashMap<String, usize>) {
    let mut out: Vec<Projected<Resource>> = Vec::new();
    let mut index = HashMap::new();
    let mut seen = std::collections::HashSet::new();
    for (source, uri, mut item) in listed(snapshot, |c| &c.resources, |r| &r.uri) {
        if !seen.insert((source.clone(), uri.clone())) {
            continue;
        }
        let mut shown = uri.clone();
        let mut n = 0;
        while index.contains_key(&shown) {
            n += 1;
            let base = format!("wf://{}/{}", prefixes[&source], encode_uri_component(&uri));
            shown = if n == 1 { base } else { format!("{base}~{n}") };
        }
        if n > 0 {
            collisions.push(format!(
                "resource {uri} of {source} is also served by another source; shown as {shown}"
            ));
        }
        item.uri = shown.clone();
        index.insert(shown.clone(), out.len());
        out.push(Projected {
            name: shown,
            source,
            original: uri,
            item,
        });
    }
    (out, index)
}

impl Projection {
    /// Every name with its source's default prefix (`<source>__`).
    pub fn build(snapshot: &Snapshot, rules: NameRules) -> Self {
        Self::build_with(snapshot, rules, &Naming::default())
    }

    /// The projection in named steps: source prefixes, wanted names,
    /// unique names, resource URIs, templates; every collision resolved on
    /// the way is logged and kept.
    pub fn build_with(snapshot: &Snapshot, rules: NameRules, naming: &Naming) -> Self {
        let mut collisions = Vec::new();
        let prefixes = source_prefixes(snapshot, &rules, &mut collisions);
        // What names start with: the configured prefix, else `<prefix>__`.
        let name_prefix = |source: &str| match naming.configured.get(source) {
            Some(p) => rules.clean_prefix(p),
            None => format!("{}__", prefixes[source]),
        };
        let tools = wanted_names(
            listed(snapshot, |c| &c.tools, |t| &t.name),
            naming.mode,
            &rules,
            &name_prefix,
            "tool",
            &mut collisions,
        );
        let prompts = wanted_names(
            listed(snapshot, |c| &c.prompts, |p| &p.name),
            naming.mode,
            &rules,
            &name_prefix,
            "prompt",
            &mut collisions,
        );
        let (mut tools, tool_index) = assign(tools, &rules, "tool", &mut collisions);
        let (mut prompts, prompt_index) = assign(prompts, &rules, "prompt", &mut collisions);
        let (resources, resource_index) = place_resources(snapshot, &prefixes, &mut collisions);
        let templates = listed(snapshot, |c| &c.resource_templates, |t| &t.uri_template)
            .into_iter()
            .map(|(source, name, item)| Projected {
                name: name.clone(),
                source,
                original: name,
                item,
            })
            .collect();

        for c in &collisions {
            tracing::warn!("name collision resolved: {c}");
        }
        for t in &mut tools {
            t.item.name = t.name.clone();
        }
        for p in &mut prompts {
            p.item.name = p.name.clone();
        }
        Self {
            tool_schemas: tools.iter().map(|_| OnceLock::new()).collect(),
            tools,
            prompts,
            resources,
            templates,
            tool_index,
            prompt_index,
            resource_index,
            collisions,
        }
    }

    pub fn tool(&self, name: &str) -> Option<&Projected<Tool>> {
        self.tool_index.get(name).map(|i| &self.tools[*i])
    }

    /// The input schema of the tool clients call `name`, when it is an object.
    pub fn tool_schema(&self, name: &str) -> Option<Schema> {
        self.schema_entry(name).map(|(s, _)| s.clone())
    }

    /// Whether the schema of tool `name` (an object) declares a SEP-2243
    /// parameter header (`x-mcp-header`) anywhere.
    pub fn tool_has_param_headers(&self, name: &str) -> Option<bool> {
        self.schema_entry(name).map(|(_, h)| *h)
    }

    fn schema_entry(&self, name: &str) -> Option<&(Schema, bool)> {
        let i = *self.tool_index.get(name)?;
        self.tool_schemas[i]
            .get_or_init(|| {
                let schema = self.tools[i].item.input_schema.as_object()?;
                Some((Arc::new(schema.clone()), mentions_param_header(schema)))
            })
            .as_ref()
    }

    pub fn prompt(&self, name: &str) -> Option<&Projected<Prompt>> {
        self.prompt_index.get(name).map(|i| &self.prompts[*i])
    }

    /// Where a `resources/read` of `uri` goes: a listed resource, else the
    /// source whose template's literal prefix matches (longest wins).
    pub fn resource_route(&self, uri: &str) -> Option<ResourceRoute> {
        if let Some(i) = self.resource_index.get(uri) {
            let r = &self.resources[*i];
            return Some(ResourceRoute {
                source: r.source.clone(),
                uri: r.original.clone(),
            });
        }
        self.templates
            .iter()
            .filter_map(|t| {
                let lit = t.original.split('{').next().unwrap_or("");
                (!lit.is_empty() && uri.starts_with(lit)).then_some((lit.len(), t))
            })
            .max_by_key(|(len, _)| *len)
            .map(|(_, t)| ResourceRoute {
                source: t.source.clone(),
                uri: uri.to_string(),
            })
    }
}

fn encode_uri_component(s: &str) -> String {
    let mut out = String::with_capacity(s.len());
    for b in s.bytes() {
        if b.is_ascii_alphanumeric() || b"-_.~".contains(&b) {
            out.push(b as char);
        } else {
            out.push_str(&format!("%{b:02X}"));
        }
    }
    out
}

/// Whether a schema declares a SEP-2243 parameter header anywhere.
fn mentions_param_header(schema: &Map<String, Value>) -> bool {
    fn within(v: &Value) -> bool {
        match v {
            Value::Object(o) => mentions_param_header(o),
            Value::Array(a) => a.iter().any(within),
            _ => false,
        }
    }
    schema.contains_key("x-mcp-header") || schema.values().any(within)
}

#[cfg(test)]
mod tests {
    use serde_json::json;
    use wf_plugin_api::Catalog;

    use super::*;
    use crate::projection::names::is_client_safe;

    fn cat(tools: &[&str], resources: &[&str]) -> Arc<Catalog> {
        let mut c = Catalog::default();
        for t in tools {
            c = c.tool(Tool::new(*t, "d", json!({"type": "object"})));
        }
        for r in resources {
            c = c.resource(Resource::new(*r, "r", "d", "text/plain"));
        }
        Arc::new(c)
    }

    #[test]
    fn a_tools_input_schema_is_served_by_its_projected_name_and_kept() {
        let c = Catalog::default()
            .tool(Tool::new(
                "obj",
                "d",
                json!({"type": "object", "properties": {"q": {"type": "string"}}}),
            ))
            .tool(Tool::new("odd", "d", json!(true)));
        let snap = Snapshot {
            sources: vec![("s".into(), Arc::new(c))],
        };
        let p = Projection::build(&snap, NameRules { max_len: 48 });
        let first = p.tool_schema("s__obj").expect("an object schema");
        assert_eq!(first["properties"]["q"]["type"], "string");
        // Made once: the same allocation every time after.
        assert!(Arc::ptr_eq(
            &first,
            &p.tool_schema("s__obj").expect("again")
        ));
        assert!(p.tool_schema("s__odd").is_none(), "not an object schema");
        assert!(p.tool_schema("obj").is_none(), "only projected names");
    }

    #[test]
    fn projects_routes_and_resolves_collisions() {
        let snap = Snapshot {
            sources: vec![
                (
                    "a.b".into(),
                    cat(&["x", "y.z"], &["file:///same", "file:///a"]),
                ),
                ("a_b".into(), cat(&["x"], &["file:///same"])),
                ("wf.std".into(), cat(&["passthrough"], &[])),
            ],
        };
        let p = Projection::build(&snap, NameRules { max_len: 48 });
        let names: Vec<&str> = p.tools.iter().map(|t| t.name.as_str()).collect();
        assert!(names.contains(&"a_b__x"));
        assert!(names.contains(&"wf_std__passthrough"));
        assert!(names.iter().all(|n| is_client_safe(n)));
        let unique: std::collections::HashSet<_> = names.iter().collect();
        assert_eq!(unique.len(), names.len());
        // Both `x` tools route back to their own source.
        let routes: Vec<(String, String)> = p
            .tools
            .iter()
            .filter(|t| t.original == "x")
            .map(|t| (t.source.clone(), t.name.clone()))
            .collect();
        assert_eq!(routes.len(), 2);
        for (source, name) in routes {
            assert_eq!(p.tool(&name).unwrap().source, source);
        }
        assert!(!p.collisions.is_empty());
        // The duplicated resource URI is mapped for the second source, reversibly.
        let mapped = p.resources.iter().find(|r| r.source == "a_b").unwrap();
        assert_ne!(mapped.name, "file:///same");
        let route = p.resource_route(&mapped.name).unwrap();
        assert_eq!(
            (route.source.as_str(), route.uri.as_str()),
            ("a_b", "file:///same")
        );
        assert_eq!(p.resource_route("file:///same").unwrap().source, "a.b");
        // Stable: the same snapshot gives the same names.
        let again = Projection::build(&snap, NameRules { max_len: 48 });
        let again: Vec<&str> = again.tools.iter().map(|t| t.name.as_str()).collect();
        assert_eq!(names, again);
    }

    /// Found by the `projection` fuzz target: a URI listed twice by one source
    /// (or a mapped `wf://` name another source lists literally) gave two
    /// resources the same shown URI. Shown URIs are unique and route back.
    #[test]
    fn shown_resource_uris_stay_unique() {
        let snap = Snapshot {
            sources: vec![
                ("a".into(), cat(&[], &["wf://y/notes%3A%2F%2F1"])),
                ("x".into(), cat(&[], &["notes://1"])),
                (
                    "y".into(),
                    cat(&[], &["notes://1", "notes://1", "notes://1"]),
                ),
            ],
        };
        let p = Projection::build(&snap, NameRules { max_len: 48 });
        let shown: Vec<&str> = p.resources.iter().map(|r| r.name.as_str()).collect();
        let unique: std::collections::HashSet<_> = shown.iter().collect();
        assert_eq!(unique.len(), shown.len(), "{shown:?}");
        assert_eq!(shown.len(), 3, "y's repeats are shown once: {shown:?}");
        for r in &p.resources {
            let route = p.resource_route(&r.name).unwrap();
            assert_eq!(
                (route.source.as_str(), route.uri.as_str()),
                (r.source.as_str(), r.original.as_str())
            );
        }
    }

    #[test]
    fn configured_prefixes_and_on_collision() {
        let snap = Snapshot {
            sources: vec![
                ("a".into(), cat(&["x", "y"], &[])),
                ("b".into(), cat(&["x", "z.z"], &[])),
            ],
        };
        let rules = NameRules { max_len: 48 };
        let names = |p: &Projection| -> Vec<(String, String)> {
            p.tools
                .iter()
                .map(|t| (t.source.clone(), t.name.clone()))
                .collect()
        };
        // `prefix = ""` on both: own names; the shared `x` is still resolved
        // (the later source gets a hash) and reported.
        let mut naming = Naming::default();
        naming.configured.insert("a".into(), "".into());
        naming.configured.insert("b".into(), "".into());
        let p = Projection::build_with(&snap, rules, &naming);
        let n = names(&p);
        assert_eq!(n[0], ("a".into(), "x".into()));
        assert_eq!(n[1], ("a".into(), "y".into()));
        assert!(n[2].1.starts_with("x_") && is_client_safe(&n[2].1), "{n:?}");
        assert_eq!(p.tool(&n[2].1).unwrap().source, "b");
        assert!(is_client_safe(&n[3].1), "z.z is still made client-safe");
        assert!(
            p.collisions.iter().any(|c| c.contains("b.x")),
            "{:?}",
            p.collisions
        );
        // A configured prefix is used as it is (made client-safe).
        let mut naming = Naming::default();
        naming.configured.insert("a".into(), "A.".into());
        let p = Projection::build_with(&snap, rules, &naming);
        assert_eq!(p.tools[0].name, "A_x");
        assert_eq!(p.tools[2].name, "b__x");
        // on_collision: only the shared name carries prefixes.
        let naming = Naming {
            mode: PrefixMode::OnCollision,
            ..Naming::default()
        };
        let p = Projection::build_with(&snap, rules, &naming);
        let n: Vec<String> = p.tools.iter().map(|t| t.name.clone()).collect();
        assert_eq!(&n[..3], ["a__x", "y", "b__x"]);
        assert!(
            p.collisions
                .iter()
                .any(|c| c.contains("\"x\" (served by a, b)")),
            "{:?}",
            p.collisions
        );
    }

    #[test]
    fn a_parameter_header_anywhere_in_a_schema_is_found() {
        let find = |v: Value| mentions_param_header(v.as_object().unwrap());
        assert!(!find(
            json!({"type": "object", "properties": {"m": {"type": "string"}}})
        ));
        assert!(find(
            json!({"properties": {"m": {"type": "string", "x-mcp-header": "M"}}})
        ));
        assert!(find(
            json!({"anyOf": [{"properties": {"a": {"properties": {"b": {"x-mcp-header": "B"}}}}}]})
        ));
    }
}
