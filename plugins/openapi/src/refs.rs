//! `$ref` resolution and OpenAPI Schema Objects → plain JSON Schema.
//!
//! Hand-written: `openapiv3` reads only 3.0 and `oas3` only 3.1. References
//! are resolved within the document only (`#/...`; external.rs bundles the
//! documents others point at into it first); an external one is refused with
//! its place.
//!
//! A schema a tool lists keeps its references: each becomes
//! `{"$ref": "#/$defs/<Name>"}` and the tool's schema carries, in its own
//! `$defs`, only the components it reaches (JSON Schema 2020-12 §8.2.4). A
//! component used by a thousand operations is converted once per document
//! ([`Defs`]) and each tool holds the few it needs, instead of every use
//! inlined into every tool (issue #55: GitHub's tools/list was 8.2 MiB, one
//! tool 319 KB). Cycles need no cut: a `$ref` may point at its own
//! definition. A tool whose schemas reach past [`SCHEMA_BUDGET`] nodes lists
//! the nearest components within it and describes the rest as not listed.

use std::collections::{HashMap, HashSet, VecDeque};
use std::rc::Rc;

use serde_json::{Map, Value, json};
use thiserror::Error;

/// The most schema nodes one tool schema (its `$defs` included) may hold.
pub const SCHEMA_BUDGET: usize = 10_000;

#[derive(Debug, Error, Clone, PartialEq)]
pub enum RefError {
    #[error(
        "{at}: external $ref {target:?} refused: only references within the document (\"#/...\") are resolved"
    )]
    External { at: String, target: String },
    #[error("{at}: $ref {target:?} points at nothing in the document")]
    Dangling { at: String, target: String },
}

/// Escapes a key for a JSON pointer (RFC 6901).
pub fn escape(key: &str) -> String {
    key.replace('~', "~0").replace('/', "~1")
}

/// The value a local `$ref` points at.
fn target<'a>(doc: &'a Value, reference: &str) -> Option<&'a Value> {
    let fragment = reference.strip_prefix('#')?;
    let decoded = percent_encoding::percent_decode_str(fragment).decode_utf8_lossy();
    doc.pointer(&decoded)
}

/// Follows `$ref`s of a non-schema object (a parameter, a request body, a
/// response) to the object itself, with the pointer it was found at.
pub fn deref<'a>(doc: &'a Value, value: &'a Value, at: &str) -> Result<&'a Value, RefError> {
    let mut current = value;
    let mut place = at.to_string();
    for _ in 0..32 {
        let Some(reference) = current.get("$ref").and_then(Value::as_str) else {
            return Ok(current);
        };
        if !reference.starts_with('#') {
            return Err(RefError::External {
                at: place,
                target: reference.into(),
            });
        }
        current = target(doc, reference).ok_or_else(|| RefError::Dangling {
            at: place.clone(),
            target: reference.into(),
        })?;
        place = reference.trim_start_matches('#').to_string();
    }
    Ok(&Value::Null)
}

/// How many JSON values `v` holds, itself included: the unit of the
/// schema budgets.
pub fn nodes(v: &Value) -> usize {
    match v {
        Value::Array(a) => 1 + a.iter().map(nodes).sum::<usize>(),
        Value::Object(o) => 1 + o.values().map(nodes).sum::<usize>(),
        _ => 1,
    }
}

/// One referenced schema, converted once per document.
struct Component {
    /// Its name in a tool's `$defs`.
    key: String,
    schema: Value,
    /// The references it holds (their `$ref` strings).
    deps: Vec<String>,
    nodes: usize,
}

/// The referenced schemas of one document, converted once and shared by
/// every tool's [`Resolver`].
pub struct Defs<'a> {
    doc: &'a Value,
    /// 3.0 documents: `nullable`, boolean `exclusiveMinimum`/`Maximum`.
    v30: bool,
    /// `$ref` string → its `$defs` key (unique in the document).
    keys: HashMap<String, String>,
    taken: HashSet<String>,
    done: HashMap<String, Rc<Component>>,
}

impl<'a> Defs<'a> {
    pub fn new(doc: &'a Value, v30: bool) -> Self {
        Self {
            doc,
            v30,
            keys: HashMap::new(),
            taken: HashSet::new(),
            done: HashMap::new(),
        }
    }

    /// The `$defs` key of a reference: its last segment, in characters a
    /// JSON pointer and every client take, made unique in the document.
    fn key(&mut self, reference: &str) -> String {
        if let Some(k) = self.keys.get(reference) {
            return k.clone();
        }
        let decoded = percent_encoding::percent_decode_str(reference).decode_utf8_lossy();
        let last = decoded
            .rsplit('/')
            .next()
            .unwrap_or("")
            .replace("~1", "/")
            .replace("~0", "~");
        let mut base: String = last
            .chars()
            .map(|c| {
                if c.is_ascii_alphanumeric() || matches!(c, '_' | '-' | '.') {
                    c
                } else {
                    '_'
                }
            })
            .take(100)
            .collect();
        if base.is_empty() {
            base = "def".into();
        }
        let mut key = base.clone();
        let mut n = 2;
        while !self.taken.insert(key.clone()) {
            key = format!("{base}_{n}");
            n += 1;
        }
        self.keys.insert(reference.to_string(), key.clone());
        key
    }

    fn component(&mut self, reference: &str, at: &str) -> Result<Rc<Component>, RefError> {
        if let Some(c) = self.done.get(reference) {
            return Ok(c.clone());
        }
        let doc = self.doc;
        let found = target(doc, reference).ok_or_else(|| RefError::Dangling {
            at: format!("{at}/$ref"),
            target: reference.into(),
        })?;
        let mut refs = Refs::default();
        let schema = convert(self, &mut refs, found, reference.trim_start_matches('#'))?;
        let key = self.key(reference);
        let c = Rc::new(Component {
            key,
            nodes: nodes(&schema),
            schema,
            deps: refs.list,
        });
        self.done.insert(reference.to_string(), c.clone());
        Ok(c)
    }
}

/// The references one schema holds, in the order met, each once.
#[derive(Default)]
struct Refs {
    list: Vec<String>,
    seen: HashSet<String>,
}

impl Refs {
    fn add(&mut self, reference: &str) {
        if self.seen.insert(reference.to_string()) {
            self.list.push(reference.to_string());
        }
    }
}

/// Turns the OpenAPI schemas of one tool schema (its input, or its output)
/// into JSON Schema whose references point into its own `$defs`.
pub struct Resolver<'d, 'a> {
    defs: &'d mut Defs<'a>,
    refs: Refs,
    budget: usize,
    /// What was cut, for the operation's description.
    pub notes: Vec<String>,
}

impl<'d, 'a> Resolver<'d, 'a> {
    pub fn new(defs: &'d mut Defs<'a>) -> Self {
        Self {
            defs,
            refs: Refs::default(),
            budget: SCHEMA_BUDGET,
            notes: Vec::new(),
        }
    }

    /// The schema at `at`, its references pointing into `$defs`.
    pub fn schema(&mut self, schema: &Value, at: &str) -> Result<Value, RefError> {
        convert(self.defs, &mut self.refs, schema, at)
    }

    /// Like [`schema`](Self::schema), but a reference at the top is
    /// followed (so its `type` and `properties` show): what a request
    /// body's or a response's shape is read from.
    pub fn schema_top(&mut self, schema: &Value, at: &str) -> Result<Value, RefError> {
        let mut current = schema;
        let mut reference = None;
        for _ in 0..32 {
            match current.get("$ref").and_then(Value::as_str) {
                Some(r) if r.starts_with('#') => {
                    reference = Some(r);
                    current = target(self.defs.doc, r).ok_or_else(|| RefError::Dangling {
                        at: format!("{at}/$ref"),
                        target: r.into(),
                    })?;
                }
                _ => break,
            }
        }
        let Some(reference) = reference else {
            return self.schema(schema, at);
        };
        let c = self.defs.component(reference, at)?;
        for d in &c.deps {
            self.refs.add(d);
        }
        let mut out = c.schema.clone();
        siblings(schema, &mut out);
        Ok(out)
    }

    /// The `$defs` `root` lists: the components its references reach,
    /// nearest first, while the whole stays within the budget (a reference
    /// past it is described as not listed; see [`materialize`]).
    pub fn finish(&mut self, root: &Value) -> Result<Listing, RefError> {
        let mut total = nodes(root);
        let mut queue: VecDeque<String> = self.refs.list.iter().cloned().collect();
        let mut queued: HashSet<String> = self.refs.seen.clone();
        let mut keys = Vec::new();
        let mut dropped: Vec<String> = Vec::new();
        while let Some(reference) = queue.pop_front() {
            let c = self.defs.component(&reference, "")?;
            if total + c.nodes > self.budget {
                dropped.push(c.key.clone());
                continue;
            }
            total += c.nodes;
            for d in &c.deps {
                if queued.insert(d.clone()) {
                    queue.push_back(d.clone());
                }
            }
            keys.push(c.key.clone());
        }
        if !dropped.is_empty() {
            let mut names: Vec<&String> = dropped.iter().collect();
            names.sort();
            let shown: Vec<&str> = names.iter().take(5).map(|s| s.as_str()).collect();
            let more = names.len().saturating_sub(shown.len());
            self.notes.push(format!(
                "schema cut: it reaches past the {} nodes wf lists per schema; {}{} not listed (any value accepted there)",
                self.budget,
                shown.join(", "),
                if more > 0 { format!(" and {more} more") } else { String::new() }
            ));
        }
        Ok(Listing {
            keys,
            dropped,
            nodes: total,
        })
    }
}

/// What one tool schema lists in its `$defs`.
#[derive(Debug, Clone, Default)]
pub struct Listing {
    /// The components listed, nearest first.
    pub keys: Vec<String>,
    /// Components reached past the budget: not listed.
    pub dropped: Vec<String>,
    /// The nodes of the schema with its `$defs`.
    pub nodes: usize,
}

impl Defs<'_> {
    /// Every component converted, by key: one copy per document, which the
    /// operations' checks share and their listings are cut from.
    pub fn into_shared(self) -> Map<String, Value> {
        let mut out = Map::new();
        for (_, c) in self.done {
            let c = Rc::try_unwrap(c).unwrap_or_else(|c| Component {
                key: c.key.clone(),
                schema: c.schema.clone(),
                deps: vec![],
                nodes: c.nodes,
            });
            out.insert(c.key, c.schema);
        }
        out
    }
}

/// `root` as a tool lists it: with the `$defs` of `listing` (from the
/// document's shared components), references past the budget described
/// as not listed.
pub fn materialize(root: &Value, listing: &Listing, shared: &Map<String, Value>) -> Value {
    let dropped: HashSet<String> = listing.dropped.iter().cloned().collect();
    let mut out = root.clone();
    let mut defs = Map::new();
    for key in &listing.keys {
        if let Some(schema) = shared.get(key) {
            let mut schema = schema.clone();
            if !dropped.is_empty() {
                cut(&mut schema, &dropped);
            }
            defs.insert(key.clone(), schema);
        }
    }
    if !dropped.is_empty() {
        cut(&mut out, &dropped);
    }
    if !defs.is_empty()
        && let Value::Object(o) = &mut out
    {
        o.insert("$defs".into(), Value::Object(defs));
    }
    out
}

/// Keywords 3.1 allows beside `$ref` that describe rather than constrain:
/// they are kept (they win over the target's).
fn siblings(from: &Value, out: &mut Value) {
    if let (Value::Object(from), Value::Object(out)) = (from, out) {
        for (k, v) in from {
            if matches!(
                k.as_str(),
                "description" | "title" | "default" | "deprecated"
            ) {
                out.insert(k.clone(), v.clone());
            }
        }
    }
}

/// Replaces each `{"$ref": "#/$defs/<key>"}` whose key is in `dropped`.
fn cut(v: &mut Value, dropped: &HashSet<String>) {
    match v {
        Value::Object(o) => {
            if let Some(Value::String(r)) = o.get("$ref")
                && let Some(key) = r.strip_prefix("#/$defs/")
                && dropped.contains(key)
            {
                let note = format!("({key}: not listed; the schema is over the size wf lists)");
                o.remove("$ref");
                o.entry("description").or_insert(Value::String(note));
                return;
            }
            for x in o.values_mut() {
                cut(x, dropped);
            }
        }
        Value::Array(a) => a.iter_mut().for_each(|x| cut(x, dropped)),
        _ => {}
    }
}

/// One OpenAPI schema as JSON Schema; its references become `$defs` ones
/// and are recorded in `refs`.
fn convert(
    defs: &mut Defs<'_>,
    refs: &mut Refs,
    schema: &Value,
    at: &str,
) -> Result<Value, RefError> {
    let Value::Object(obj) = schema else {
        // `true`/`false` schemas (3.1) stay; anything else is not a schema.
        return Ok(if schema.is_boolean() {
            schema.clone()
        } else {
            json!({})
        });
    };
    if let Some(reference) = obj.get("$ref").and_then(Value::as_str) {
        if !reference.starts_with('#') {
            return Err(RefError::External {
                at: format!("{at}/$ref"),
                target: reference.into(),
            });
        }
        if target(defs.doc, reference).is_none() {
            return Err(RefError::Dangling {
                at: format!("{at}/$ref"),
                target: reference.into(),
            });
        }
        let key = defs.key(reference);
        refs.add(reference);
        let mut out = json!({"$ref": format!("#/$defs/{key}")});
        siblings(schema, &mut out);
        return Ok(out);
    }
    let mut out = Map::new();
    for (key, value) in obj {
        match key.as_str() {
            // Subschema maps.
            "properties" | "patternProperties" | "$defs" | "definitions" => {
                let mut map = Map::new();
                if let Value::Object(props) = value {
                    for (name, sub) in props {
                        let here = format!("{at}/{key}/{}", escape(name));
                        map.insert(name.clone(), convert(defs, refs, sub, &here)?);
                    }
                }
                // A schema's own `$defs` would collide with the tool's.
                if matches!(key.as_str(), "$defs" | "definitions") {
                    continue;
                }
                out.insert(key.clone(), Value::Object(map));
            }
            // One subschema (or, for `items`, a draft-04 list).
            "items"
            | "additionalProperties"
            | "not"
            | "contains"
            | "propertyNames"
            | "if"
            | "then"
            | "else"
            | "additionalItems"
            | "unevaluatedProperties" => {
                let here = format!("{at}/{key}");
                let v = match value {
                    Value::Array(list) => Value::Array(
                        list.iter()
                            .enumerate()
                            .map(|(i, s)| convert(defs, refs, s, &format!("{here}/{i}")))
                            .collect::<Result<_, _>>()?,
                    ),
                    other => convert(defs, refs, other, &here)?,
                };
                out.insert(key.clone(), v);
            }
            "allOf" | "anyOf" | "oneOf" | "prefixItems" => {
                let list = value.as_array().map(Vec::as_slice).unwrap_or_default();
                if list.is_empty() {
                    continue;
                }
                let here = format!("{at}/{key}");
                let v = list
                    .iter()
                    .enumerate()
                    .map(|(i, s)| convert(defs, refs, s, &format!("{here}/{i}")))
                    .collect::<Result<Vec<_>, _>>()?;
                out.insert(key.clone(), Value::Array(v));
            }
            // OpenAPI-only keywords and examples: not JSON Schema, or not needed.
            "nullable" | "discriminator" | "xml" | "externalDocs" | "example" | "examples"
            | "$schema" | "$id" | "$anchor" | "$dynamicAnchor" => {}
            k if k.starts_with("x-") => {}
            "exclusiveMinimum" | "exclusiveMaximum" if value.is_boolean() => {}
            "required" if !value.is_array() => {}
            "enum" if !value.is_array() => {}
            _ => {
                out.insert(key.clone(), value.clone());
            }
        }
    }
    fix_bounds(obj, &mut out);
    if defs.v30 && obj.get("nullable").and_then(Value::as_bool) == Some(true) {
        nullable(&mut out);
    }
    // `required` may only name declared properties (the host's check).
    if let (Some(Value::Array(req)), Some(Value::Object(props))) =
        (out.get("required"), out.get("properties"))
    {
        let kept: Vec<Value> = req
            .iter()
            .filter(|n| n.as_str().is_some_and(|n| props.contains_key(n)))
            .cloned()
            .collect();
        out.insert("required".into(), Value::Array(kept));
    }
    Ok(Value::Object(out))
}

/// 3.0's boolean `exclusiveMinimum: true` qualifies `minimum`; JSON
/// Schema's is the bound itself.
fn fix_bounds(obj: &Map<String, Value>, out: &mut Map<String, Value>) {
    for (flag, bound) in [
        ("exclusiveMinimum", "minimum"),
        ("exclusiveMaximum", "maximum"),
    ] {
        if obj.get(flag) == Some(&Value::Bool(true))
            && let Some(b) = out.remove(bound)
        {
            out.insert(flag.into(), b);
        }
    }
}

/// 3.0's `nullable: true` → a `null` type (and enum member).
fn nullable(out: &mut Map<String, Value>) {
    match out.get_mut("type") {
        Some(Value::String(t)) => {
            let t = std::mem::take(t);
            out.insert("type".into(), json!([t, "null"]));
        }
        Some(Value::Array(ts)) if !ts.contains(&json!("null")) => ts.push(json!("null")),
        _ => {}
    }
    if let Some(Value::Array(e)) = out.get_mut("enum")
        && !e.contains(&Value::Null)
    {
        e.push(Value::Null);
    }
}

/// Follows a `{"$ref": "#/$defs/<key>"}` within `root`'s own `$defs`.
pub fn local<'v>(root: &'v Value, schema: &'v Value) -> &'v Value {
    match root.get("$defs").and_then(Value::as_object) {
        Some(defs) => local_in(defs, schema),
        None => schema,
    }
}

/// Follows a `{"$ref": "#/$defs/<key>"}` within `defs`.
pub fn local_in<'v>(defs: &'v Map<String, Value>, schema: &'v Value) -> &'v Value {
    let mut s = schema;
    for _ in 0..32 {
        match s
            .get("$ref")
            .and_then(Value::as_str)
            .and_then(|r| r.strip_prefix("#/$defs/"))
            .and_then(|k| defs.get(k))
        {
            Some(next) => s = next,
            None => break,
        }
    }
    s
}

#[cfg(test)]
mod tests {
    use super::*;

    fn resolve(doc: &Value, v30: bool, schema: Value) -> (Value, Vec<String>) {
        let mut defs = Defs::new(doc, v30);
        let mut r = Resolver::new(&mut defs);
        let s = r.schema(&schema, "/x").unwrap();
        let listing = r.finish(&s).unwrap();
        let notes = std::mem::take(&mut r.notes);
        (materialize(&s, &listing, &defs.into_shared()), notes)
    }

    #[test]
    fn cycles_are_kept_as_references_into_defs_and_the_result_is_valid() {
        let doc = json!({"components": {"schemas": {
            "Node": {"type": "object", "properties": {
                "name": {"type": "string", "nullable": true},
                "children": {"type": "array", "items": {"$ref": "#/components/schemas/Node"}},
                "n": {"type": "integer", "minimum": 0, "exclusiveMinimum": true},
            }, "required": ["name", "ghost"]},
        }}});
        let (s, notes) = resolve(&doc, true, json!({"$ref": "#/components/schemas/Node"}));
        assert!(notes.is_empty(), "{notes:?}");
        assert!(
            wf_plugin_api::schema::json_schema_problems(&s, "s").is_empty(),
            "{s}"
        );
        assert_eq!(s["$ref"], "#/$defs/Node");
        let node = &s["$defs"]["Node"];
        assert_eq!(
            node["properties"]["name"]["type"],
            json!(["string", "null"])
        );
        assert_eq!(
            node["properties"]["n"],
            json!({"type": "integer", "exclusiveMinimum": 0})
        );
        assert_eq!(node["required"], json!(["name"]));
        assert_eq!(
            node["properties"]["children"]["items"],
            json!({"$ref": "#/$defs/Node"})
        );
    }

    #[test]
    fn a_shared_component_is_kept_once_per_tool() {
        let doc = json!({"components": {"schemas": {
            "User": {"type": "object", "properties": {"login": {"type": "string"}}},
            "Issue": {"type": "object", "properties": {
                "user": {"$ref": "#/components/schemas/User"},
                "assignee": {"$ref": "#/components/schemas/User"},
                "closed_by": {"$ref": "#/components/schemas/User"},
            }},
        }}});
        let mut defs = Defs::new(&doc, false);
        let mut r = Resolver::new(&mut defs);
        let s = r
            .schema_top(&json!({"$ref": "#/components/schemas/Issue"}), "/x")
            .unwrap();
        let listing = r.finish(&s).unwrap();
        let s = materialize(&s, &listing, &defs.into_shared());
        // The top is followed: its shape shows.
        assert_eq!(s["type"], "object");
        assert_eq!(s["properties"]["user"], json!({"$ref": "#/$defs/User"}));
        assert_eq!(s["$defs"].as_object().unwrap().len(), 1, "{s}");
        assert_eq!(s.to_string().matches("login").count(), 1);
    }

    #[test]
    fn external_and_dangling_refs_are_refused_with_their_place() {
        let doc = json!({});
        let mut defs = Defs::new(&doc, false);
        let e = Resolver::new(&mut defs)
            .schema(&json!({"$ref": "other.yaml#/Pet"}), "/paths/~1a/get")
            .unwrap_err();
        assert_eq!(
            e,
            RefError::External {
                at: "/paths/~1a/get/$ref".into(),
                target: "other.yaml#/Pet".into()
            }
        );
        let e = Resolver::new(&mut defs)
            .schema(&json!({"$ref": "#/components/schemas/Nope"}), "/p")
            .unwrap_err();
        assert!(e.to_string().contains("points at nothing"), "{e}");
    }

    #[test]
    fn a_schema_past_the_budget_keeps_the_nearest_definitions() {
        // A chain of 60 components of ~600 nodes each: 36,000 nodes in all.
        let mut schemas = Map::new();
        let big: Map<String, Value> = (0..300)
            .map(|i| (format!("f{i}"), json!({"type": "string"})))
            .collect();
        for i in 0..60 {
            let mut props = big.clone();
            props.insert(
                "next".into(),
                json!({"$ref": format!("#/components/schemas/S{}", i + 1)}),
            );
            schemas.insert(
                format!("S{i}"),
                json!({"type": "object", "properties": props}),
            );
        }
        schemas.insert("S60".into(), json!({"type": "string"}));
        let doc = json!({"components": {"schemas": schemas}});
        let mut defs = Defs::new(&doc, false);
        let mut r = Resolver::new(&mut defs);
        let s = r
            .schema(&json!({"$ref": "#/components/schemas/S0"}), "/x")
            .unwrap();
        let listing = r.finish(&s).unwrap();
        let total = listing.nodes;
        let s = materialize(&s, &listing, &defs.into_shared());
        assert!(total <= SCHEMA_BUDGET, "{total}");
        assert!(wf_plugin_api::schema::json_schema_problems(&s, "s").is_empty());
        let kept = s["$defs"].as_object().unwrap();
        assert!(
            kept.contains_key("S0") && !kept.contains_key("S59"),
            "{:?}",
            kept.keys()
        );
        // No reference is left pointing at a definition that is not there.
        let text = s.to_string();
        for key in (0..=60).map(|i| format!("S{i}")) {
            if text.contains(&format!("\"#/$defs/{key}\"")) {
                assert!(kept.contains_key(&key), "{key} dangles");
            }
        }
    }
}
