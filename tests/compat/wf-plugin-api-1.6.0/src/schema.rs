//! The checks a host applies to what a plugin serves, shared by the host
//! (which leaves out a capability that fails them) and by plugin authors'
//! tests ([`crate::testing::schema_problems`]): one implementation, so a
//! catalog that passes the harness is served whole.
//!
//! - [`json_schema_problems`]: JSON Schema keyword shapes, recursively.
//! - [`capability_problems`]: per capability of a catalog — valid names,
//!   object input schemas (MCP requires them), valid output schemas, no
//!   duplicates.
//! - [`instance_problems`]: whether a value (a tool's `structuredContent`)
//!   matches a schema, for the keywords that decide a value's shape.

use std::collections::HashSet;

use serde::{Deserialize, Serialize};
use serde_json::{Map, Value};

use crate::types::{Catalog, Manifest, NodeSpec, Tool};

/// The JSON Schema type names.
const TYPES: [&str; 7] = [
    "null", "boolean", "object", "array", "number", "integer", "string",
];

/// The longest capability name accepted (MCP's tool name limit).
pub const MAX_NAME_LEN: usize = 128;

/// The problems of one JSON Schema (draft 2020-12 / draft-07 keyword shapes),
/// checked recursively: `type` names real types, `properties` and `$defs` hold
/// schemas, `required` lists strings naming properties, `items`,
/// `additionalProperties`, `not` and the combinators hold schemas, `enum` is an
/// array, numeric and length bounds are numbers. `at` names the place in messages.
pub fn json_schema_problems(schema: &Value, at: &str) -> Vec<String> {
    let mut out = Vec::new();
    check_schema(schema, at, &mut out);
    out
}

fn check_schema(schema: &Value, at: &str, out: &mut Vec<String>) {
    let obj = match schema {
        Value::Bool(_) => return,
        Value::Object(o) => o,
        _ => return out.push(format!("{at}: a schema must be an object or a boolean")),
    };
    let mut check = SchemaCheck { obj, at, out };
    check.types();
    check.schema_maps();
    check.required();
    check.subschemas();
    check.combinators();
    check.enum_is_array();
    check.bounds_are_numbers();
}

/// One schema object being checked, keyword group by keyword group.
struct SchemaCheck<'a> {
    obj: &'a Map<String, Value>,
    at: &'a str,
    out: &'a mut Vec<String>,
}

impl SchemaCheck<'_> {
    /// `type` names a JSON Schema type, or is a list of them.
    fn types(&mut self) {
        match self.obj.get("type") {
            None => {}
            Some(Value::String(t)) if TYPES.contains(&t.as_str()) => {}
            Some(Value::Array(ts))
                if ts
                    .iter()
                    .all(|t| t.as_str().is_some_and(|t| TYPES.contains(&t))) => {}
            Some(t) => self
                .out
                .push(format!("{}.type: {t} is not a JSON Schema type", self.at)),
        }
    }

    /// `properties`, `$defs` and the like are objects of schemas.
    fn schema_maps(&mut self) {
        let at = self.at;
        for key in ["properties", "patternProperties", "$defs", "definitions"] {
            match self.obj.get(key) {
                None => {}
                Some(Value::Object(m)) => m
                    .iter()
                    .for_each(|(k, v)| check_schema(v, &format!("{at}.{key}.{k}"), self.out)),
                Some(_) => self
                    .out
                    .push(format!("{at}.{key}: must be an object of schemas")),
            }
        }
    }

    /// `required` lists strings, each a property when `properties` is given.
    fn required(&mut self) {
        let at = self.at;
        let props = self.obj.get("properties").and_then(Value::as_object);
        match self.obj.get("required") {
            None => {}
            Some(Value::Array(names)) => {
                for n in names {
                    match n.as_str() {
                        None => self.out.push(format!("{at}.required: {n} is not a string")),
                        Some(name) if props.is_some_and(|p| !p.contains_key(name)) => self
                            .out
                            .push(format!("{at}.required: {name:?} is not a property")),
                        Some(_) => {}
                    }
                }
            }
            Some(_) => self.out.push(format!("{at}.required: must be an array")),
        }
    }

    /// Keywords that hold one schema (draft-07 `items` may hold a list).
    fn subschemas(&mut self) {
        let at = self.at;
        for key in [
            "items",
            "additionalProperties",
            "not",
            "contains",
            "propertyNames",
            "if",
            "then",
            "else",
            "additionalItems",
            "unevaluatedProperties",
        ] {
            if let Some(v) = self.obj.get(key) {
                match (key, v) {
                    ("items", Value::Array(list)) => list
                        .iter()
                        .enumerate()
                        .for_each(|(i, s)| check_schema(s, &format!("{at}.items[{i}]"), self.out)),
                    _ => check_schema(v, &format!("{at}.{key}"), self.out),
                }
            }
        }
    }

    /// `allOf`, `anyOf`, `oneOf` and `prefixItems` are non-empty lists of schemas.
    fn combinators(&mut self) {
        let at = self.at;
        for key in ["allOf", "anyOf", "oneOf", "prefixItems"] {
            match self.obj.get(key) {
                None => {}
                Some(Value::Array(list)) if !list.is_empty() => list
                    .iter()
                    .enumerate()
                    .for_each(|(i, s)| check_schema(s, &format!("{at}.{key}[{i}]"), self.out)),
                Some(_) => self
                    .out
                    .push(format!("{at}.{key}: must be a non-empty array of schemas")),
            }
        }
    }

    fn enum_is_array(&mut self) {
        if let Some(e) = self.obj.get("enum")
            && !e.is_array()
        {
            self.out.push(format!("{}.enum: must be an array", self.at));
        }
    }

    /// Numeric and length bounds are numbers.
    fn bounds_are_numbers(&mut self) {
        for key in [
            "minimum",
            "maximum",
            "exclusiveMinimum",
            "exclusiveMaximum",
            "multipleOf",
            "minLength",
            "maxLength",
            "minItems",
            "maxItems",
            "minProperties",
            "maxProperties",
        ] {
            if let Some(v) = self.obj.get(key)
                && !v.is_number()
            {
                self.out
                    .push(format!("{}.{key}: must be a number", self.at));
            }
        }
    }
}

/// What is wrong with a capability name: empty, longer than
/// [`MAX_NAME_LEN`], or holding whitespace or control characters.
pub fn name_problems(name: &str) -> Option<String> {
    if name.is_empty() {
        Some("the name is empty".into())
    } else if name.chars().count() > MAX_NAME_LEN {
        Some(format!("the name is longer than {MAX_NAME_LEN} characters"))
    } else if name.chars().any(|c| c.is_whitespace() || c.is_control()) {
        Some(format!(
            "the name {name:?} holds whitespace or control characters"
        ))
    } else {
        None
    }
}

fn object_schema_problem(schema: &Value, what: &str) -> Option<String> {
    (schema.get("type").and_then(Value::as_str) != Some("object"))
        .then(|| format!("{what} must have \"type\": \"object\" (MCP requires it)"))
}

/// The problems of one tool: its name, its input schema (valid and an object
/// schema) and its output schema if any (valid and an object schema, as MCP
/// requires of `outputSchema`). Messages start with `at`.
pub fn tool_problems(tool: &Tool) -> Vec<String> {
    let mut out: Vec<String> = name_problems(&tool.name).into_iter().collect();
    out.extend(json_schema_problems(&tool.input_schema, "inputSchema"));
    out.extend(object_schema_problem(&tool.input_schema, "inputSchema"));
    if let Some(o) = &tool.output_schema {
        out.extend(json_schema_problems(o, "outputSchema"));
        out.extend(object_schema_problem(o, "outputSchema"));
    }
    out
}

/// The problems of one node spec: its name, its input schema (valid and an
/// object schema: a node's arguments are an object) and its output schema
/// (valid; any type).
pub fn node_spec_problems(spec: &NodeSpec) -> Vec<String> {
    let mut out: Vec<String> = name_problems(&spec.name).into_iter().collect();
    out.extend(json_schema_problems(&spec.input_schema, "inputSchema"));
    out.extend(object_schema_problem(&spec.input_schema, "inputSchema"));
    out.extend(json_schema_problems(&spec.output_schema, "outputSchema"));
    out
}

/// The kind of a capability, as named in problem reports.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum CapabilityKind {
    /// A tool.
    Tool,
    /// A workflow node spec.
    Node,
    /// A prompt.
    Prompt,
    /// A resource.
    Resource,
    /// A resource template.
    ResourceTemplate,
}

impl CapabilityKind {
    /// Its name in problem reports (`tool`, `node`, …).
    pub fn as_str(self) -> &'static str {
        match self {
            Self::Tool => "tool",
            Self::Node => "node",
            Self::Prompt => "prompt",
            Self::Resource => "resource",
            Self::ResourceTemplate => "resource_template",
        }
    }
}

impl std::fmt::Display for CapabilityKind {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(self.as_str())
    }
}

/// One capability of a catalog that fails the checks, with every reason.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct CapabilityProblem {
    /// What kind of capability it is.
    pub kind: CapabilityKind,
    /// Its name (a URI or URI template for resources and templates).
    pub name: String,
    /// Its position among the catalog's capabilities of that kind.
    pub index: usize,
    /// Every reason it fails, one line each.
    pub problems: Vec<String>,
}

impl std::fmt::Display for CapabilityProblem {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(
            f,
            "{} {:?}: {}",
            self.kind,
            self.name,
            self.problems.join("; ")
        )
    }
}

/// Every capability of `catalog` that fails the checks ([`tool_problems`],
/// [`node_spec_problems`], [`name_problems`] for prompts and their
/// arguments, non-empty URIs), and every repeated name: the first of a name
/// passes, later ones are reported. Empty when the whole catalog is valid.
pub fn capability_problems(catalog: &Catalog) -> Vec<CapabilityProblem> {
    let mut out = Vec::new();
    let mut push = |kind, name: &str, index, problems: Vec<String>| {
        if !problems.is_empty() {
            out.push(CapabilityProblem {
                kind,
                name: name.to_string(),
                index,
                problems,
            });
        }
    };
    let dup = |seen: &mut HashSet<String>, name: &str, kind: CapabilityKind| {
        (!name.is_empty() && !seen.insert(name.to_string()))
            .then(|| format!("another {kind} of this source has the same name"))
    };

    let mut seen = HashSet::new();
    for (i, t) in catalog.tools.iter().enumerate() {
        let mut p = tool_problems(t);
        p.extend(dup(&mut seen, &t.name, CapabilityKind::Tool));
        push(CapabilityKind::Tool, &t.name, i, p);
    }
    let mut seen = HashSet::new();
    for (i, n) in catalog.node_specs.iter().enumerate() {
        let mut p = node_spec_problems(n);
        p.extend(dup(&mut seen, &n.name, CapabilityKind::Node));
        push(CapabilityKind::Node, &n.name, i, p);
    }
    let mut seen = HashSet::new();
    for (i, pr) in catalog.prompts.iter().enumerate() {
        let mut p: Vec<String> = name_problems(&pr.name).into_iter().collect();
        for a in &pr.arguments {
            if let Some(e) = name_problems(&a.name) {
                p.push(format!("argument: {e}"));
            }
        }
        p.extend(dup(&mut seen, &pr.name, CapabilityKind::Prompt));
        push(CapabilityKind::Prompt, &pr.name, i, p);
    }
    let mut seen = HashSet::new();
    for (i, r) in catalog.resources.iter().enumerate() {
        let mut p = Vec::new();
        if r.uri.trim().is_empty() {
            p.push("the URI is empty".to_string());
        }
        p.extend(dup(&mut seen, &r.uri, CapabilityKind::Resource));
        push(CapabilityKind::Resource, &r.uri, i, p);
    }
    let mut seen = HashSet::new();
    for (i, t) in catalog.resource_templates.iter().enumerate() {
        let mut p = Vec::new();
        if t.uri_template.trim().is_empty() {
            p.push("the URI template is empty".to_string());
        }
        p.extend(dup(
            &mut seen,
            &t.uri_template,
            CapabilityKind::ResourceTemplate,
        ));
        push(CapabilityKind::ResourceTemplate, &t.uri_template, i, p);
    }
    out
}

/// What is wrong with the settings schemas a manifest declares
/// ([`Manifest::settings_schema`]): each must be a valid object schema for
/// one of the plugin's own kinds. A host refuses a plugin with any.
pub fn settings_schema_problems(manifest: &Manifest) -> Vec<String> {
    let mut out = Vec::new();
    for (kind, schema) in &manifest.settings_schemas {
        let at = format!("settings_schemas.{kind}");
        if !manifest.kinds.contains(kind) {
            out.push(format!("{at}: {kind:?} is not one of the plugin's kinds"));
        }
        out.extend(json_schema_problems(schema, &at));
        if schema.get("type").and_then(Value::as_str) != Some("object") {
            out.push(format!(
                "{at} must have \"type\": \"object\" (settings are a table)"
            ));
        }
    }
    out
}

/// Where `value` does not match `schema`, for the keywords that decide a
/// value's shape: `type`, `enum`, `const`, `properties`, `required`,
/// `additionalProperties`, `items` and `anyOf`/`oneOf`/`allOf` (a focused
/// check, not a full validator: `oneOf` passes when any alternative matches;
/// `$ref`, formats, patterns and bounds are not checked). `at` names the
/// place in messages (`$` for the root).
pub fn instance_problems(schema: &Value, value: &Value, at: &str) -> Vec<String> {
    let mut out = Vec::new();
    check_instance(schema, value, at, &mut out);
    out
}

fn type_of(v: &Value) -> &'static str {
    match v {
        Value::Null => "null",
        Value::Bool(_) => "boolean",
        Value::Number(n) if n.is_i64() || n.is_u64() => "integer",
        Value::Number(n) if n.as_f64().is_some_and(|f| f.fract() == 0.0) => "integer",
        Value::Number(_) => "number",
        Value::String(_) => "string",
        Value::Array(_) => "array",
        Value::Object(_) => "object",
    }
}

fn has_type(value: &Value, t: &str) -> bool {
    let actual = type_of(value);
    actual == t || (t == "number" && actual == "integer")
}

fn check_instance(schema: &Value, value: &Value, at: &str, out: &mut Vec<String>) {
    let obj = match schema {
        Value::Bool(false) => return out.push(format!("{at}: no value is allowed here")),
        Value::Object(o) => o,
        _ => return,
    };
    match obj.get("type") {
        Some(Value::String(t)) if !has_type(value, t) => {
            return out.push(format!("{at}: expected {t}, got {}", type_of(value)));
        }
        Some(Value::Array(ts))
            if !ts
                .iter()
                .filter_map(Value::as_str)
                .any(|t| has_type(value, t)) =>
        {
            let names: Vec<&str> = ts.iter().filter_map(Value::as_str).collect();
            return out.push(format!(
                "{at}: expected {}, got {}",
                names.join(" or "),
                type_of(value)
            ));
        }
        _ => {}
    }
    if let Some(Value::Array(allowed)) = obj.get("enum")
        && !allowed.contains(value)
    {
        out.push(format!("{at}: {value} is not one of the allowed values"));
    }
    if let Some(c) = obj.get("const")
        && c != value
    {
        out.push(format!("{at}: must be {c}"));
    }
    if let Value::Object(map) = value {
        let props = obj.get("properties").and_then(Value::as_object);
        for name in obj
            .get("required")
            .and_then(Value::as_array)
            .into_iter()
            .flatten()
            .filter_map(Value::as_str)
        {
            if !map.contains_key(name) {
                out.push(format!("{at}: missing required property {name:?}"));
            }
        }
        for (k, v) in map {
            match props.and_then(|p| p.get(k)) {
                Some(s) => check_instance(s, v, &format!("{at}.{k}"), out),
                None => match obj.get("additionalProperties") {
                    Some(Value::Bool(false)) => {
                        out.push(format!("{at}: property {k:?} is not allowed"))
                    }
                    Some(s @ Value::Object(_)) => check_instance(s, v, &format!("{at}.{k}"), out),
                    _ => {}
                },
            }
        }
    }
    if let (Value::Array(list), Some(items @ Value::Object(_))) = (value, obj.get("items")) {
        for (i, v) in list.iter().enumerate() {
            check_instance(items, v, &format!("{at}[{i}]"), out);
        }
    }
    if let Some(Value::Array(all)) = obj.get("allOf") {
        for s in all {
            check_instance(s, value, at, out);
        }
    }
    for key in ["anyOf", "oneOf"] {
        if let Some(Value::Array(any)) = obj.get(key)
            && !any.is_empty()
            && !any
                .iter()
                .any(|s| instance_problems(s, value, at).is_empty())
        {
            out.push(format!("{at}: matches none of the {key} alternatives"));
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::types::{Prompt, Resource};
    use serde_json::json;

    #[test]
    fn json_schema_shapes() {
        let good = json!({"type": "object", "properties": {"a": {"type": ["string", "null"]}, "b": {"type": "array", "items": {"type": "integer", "minimum": 0}}},
                          "required": ["a"], "additionalProperties": false, "$defs": {"x": {"anyOf": [{"type": "string"}, true]}}});
        assert!(
            json_schema_problems(&good, "s").is_empty(),
            "{:?}",
            json_schema_problems(&good, "s")
        );
        let bad = json!({"type": "object", "properties": {"a": {"type": "text"}, "b": 3}, "required": ["c", 1], "items": "x", "anyOf": [], "minimum": "0"});
        let p = json_schema_problems(&bad, "s");
        for needle in [
            "s.properties.a.type",
            "s.properties.b",
            "\"c\" is not a property",
            "1 is not a string",
            "s.items",
            "s.anyOf",
            "s.minimum",
        ] {
            assert!(
                p.iter().any(|m| m.contains(needle)),
                "missing {needle}: {p:?}"
            );
        }
    }

    #[test]
    fn capability_problems_name_each_bad_capability() {
        let obj = json!({"type": "object"});
        let catalog = Catalog::default()
            .tool(Tool::new("ok", "fine", obj.clone()))
            .tool(Tool::new(
                "typo",
                "misspelt type, malformed required",
                json!({"type": "object", "properties": {"n": {"type": "integr"}}, "required": "n"}),
            ))
            .tool(Tool::new("ok", "duplicate", obj.clone()))
            .tool(
                Tool::new("out", "non-object output", obj.clone())
                    .output_schema(json!({"type": "string"})),
            )
            .tool(Tool::new("has space", "bad name", obj.clone()))
            .node(NodeSpec::new(
                "str",
                "string input",
                json!({"type": "string"}),
                json!({"type": "string"}),
            ))
            .node(NodeSpec::new(
                "fine",
                "ok",
                obj.clone(),
                json!({"type": "string"}),
            ))
            .prompt(Prompt::new("", "empty name"))
            .resource(Resource::new("", "empty", "no uri", "text/plain"));
        let p = capability_problems(&catalog);
        let find = |kind, name: &str| {
            p.iter()
                .find(|c| c.kind == kind && c.name == name)
                .unwrap_or_else(|| panic!("{kind} {name:?} not reported: {p:?}"))
        };
        let typo = find(CapabilityKind::Tool, "typo").problems.join("; ");
        assert!(typo.contains("properties.n.type"), "{typo}");
        assert!(typo.contains("required: must be an array"), "{typo}");
        assert_eq!(
            find(CapabilityKind::Tool, "ok").index,
            2,
            "the first `ok` passes"
        );
        assert!(find(CapabilityKind::Tool, "out").problems[0].contains("outputSchema"));
        find(CapabilityKind::Tool, "has space");
        assert!(
            find(CapabilityKind::Node, "str")
                .problems
                .join(" ")
                .contains("\"type\": \"object\"")
        );
        find(CapabilityKind::Prompt, "");
        find(CapabilityKind::Resource, "");
        // `Catalog::node` serves the spec as a tool too: both are reported.
        find(CapabilityKind::Tool, "str");
        assert_eq!(p.len(), 8, "{p:?}");
    }

    #[test]
    fn settings_schemas_must_be_object_schemas_of_own_kinds() {
        let obj = json!({"type": "object", "properties": {"x": {"type": "string"}}, "additionalProperties": false});
        let m = Manifest::new("p", "1").kind("a");
        assert!(settings_schema_problems(&m.clone().settings_schema("a", obj.clone())).is_empty());
        let p = settings_schema_problems(&m.clone().settings_schema("b", obj));
        assert!(
            p[0].contains("\"b\" is not one of the plugin's kinds"),
            "{p:?}"
        );
        let p =
            settings_schema_problems(&m.clone().settings_schema("a", json!({"type": "string"})));
        assert!(
            p.iter()
                .any(|m| m.contains("settings_schemas.a") && m.contains("\"type\": \"object\"")),
            "{p:?}"
        );
        let p = settings_schema_problems(&m.settings_schema(
            "a",
            json!({"type": "object", "properties": {"x": {"type": "strng"}}}),
        ));
        assert!(
            p.iter()
                .any(|m| m.contains("settings_schemas.a.properties.x.type")),
            "{p:?}"
        );
    }

    #[test]
    fn instance_matches_schema() {
        let schema = json!({"type": "object", "properties": {"count": {"type": "integer"}, "tags": {"type": "array", "items": {"type": "string"}},
                            "mode": {"enum": ["a", "b"]}}, "required": ["count"], "additionalProperties": false});
        assert!(
            instance_problems(
                &schema,
                &json!({"count": 3, "tags": ["x"], "mode": "a"}),
                "$"
            )
            .is_empty()
        );
        assert!(instance_problems(&schema, &json!({"count": 3.0}), "$").is_empty());
        let p = instance_problems(
            &schema,
            &json!({"count": "3", "tags": [1], "mode": "c", "extra": 1}),
            "$",
        );
        for needle in [
            "$.count: expected integer, got string",
            "$.tags[0]: expected string, got integer",
            "$.mode: \"c\" is not one of",
            "property \"extra\" is not allowed",
        ] {
            assert!(
                p.iter().any(|m| m.contains(needle)),
                "missing {needle}: {p:?}"
            );
        }
        assert_eq!(
            instance_problems(&schema, &json!({}), "$"),
            vec!["$: missing required property \"count\"".to_string()]
        );
        let any = json!({"anyOf": [{"type": "string"}, {"type": "null"}]});
        assert!(instance_problems(&any, &json!(null), "$").is_empty());
        assert_eq!(instance_problems(&any, &json!(1), "$").len(), 1);
        assert!(instance_problems(&json!({"type": "number"}), &json!(2), "$").is_empty());
    }
}
