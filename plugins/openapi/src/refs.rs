//! `$ref` resolution and OpenAPI Schema Objects → plain JSON Schema.
//!
//! Hand-written: `openapiv3` reads only 3.0 and `oas3` only 3.1, and neither
//! inlines references. References are resolved within the document only
//! (`#/...`); an external one is refused with its place. A reference met
//! again while it is being expanded (a cycle) is cut there with a note, and
//! an expansion that grows past a budget is cut too, so a document whose
//! schemas reference each other in a dense graph cannot blow up.

use serde_json::{Map, Value, json};
use thiserror::Error;

/// The most schema nodes one operation's schemas may expand to.
pub const SCHEMA_BUDGET: usize = 20_000;

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

/// Turns OpenAPI schemas into self-contained JSON Schema.
pub struct Resolver<'a> {
    doc: &'a Value,
    /// 3.0 documents: `nullable`, boolean `exclusiveMinimum`/`Maximum`.
    v30: bool,
    stack: Vec<String>,
    budget: usize,
    /// What was cut, for the operation's description.
    pub notes: Vec<String>,
}

impl<'a> Resolver<'a> {
    pub fn new(doc: &'a Value, v30: bool) -> Self {
        Self {
            doc,
            v30,
            stack: Vec::new(),
            budget: SCHEMA_BUDGET,
            notes: Vec::new(),
        }
    }

    /// The schema at `at` with every reference inlined.
    pub fn schema(&mut self, schema: &Value, at: &str) -> Result<Value, RefError> {
        if self.budget == 0 {
            let note = "schema cut: it expands past the size wf inlines".to_string();
            if !self.notes.contains(&note) {
                self.notes.push(note.clone());
            }
            return Ok(json!({"description": note}));
        }
        self.budget -= 1;
        let Value::Object(obj) = schema else {
            // `true`/`false` schemas (3.1) stay; anything else is not a schema.
            return Ok(if schema.is_boolean() {
                schema.clone()
            } else {
                json!({})
            });
        };
        if let Some(reference) = obj.get("$ref").and_then(Value::as_str) {
            return self.reference(obj, reference, at);
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
                            map.insert(name.clone(), self.schema(sub, &here)?);
                        }
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
                                .map(|(i, s)| self.schema(s, &format!("{here}/{i}")))
                                .collect::<Result<_, _>>()?,
                        ),
                        other => self.schema(other, &here)?,
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
                        .map(|(i, s)| self.schema(s, &format!("{here}/{i}")))
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
        self.fix_bounds(obj, &mut out);
        if self.v30 && obj.get("nullable").and_then(Value::as_bool) == Some(true) {
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

    fn reference(
        &mut self,
        obj: &Map<String, Value>,
        reference: &str,
        at: &str,
    ) -> Result<Value, RefError> {
        if !reference.starts_with('#') {
            return Err(RefError::External {
                at: format!("{at}/$ref"),
                target: reference.into(),
            });
        }
        if self.stack.iter().any(|r| r == reference) {
            let name = reference.rsplit('/').next().unwrap_or(reference);
            let note = format!("recursive reference to {name} cut: any value accepted there");
            if !self.notes.contains(&note) {
                self.notes.push(note.clone());
            }
            return Ok(json!({"description": format!("(recursive {name}; not expanded)")}));
        }
        let found = target(self.doc, reference).ok_or_else(|| RefError::Dangling {
            at: format!("{at}/$ref"),
            target: reference.into(),
        })?;
        self.stack.push(reference.to_string());
        let resolved = self.schema(found, reference.trim_start_matches('#'));
        self.stack.pop();
        let mut resolved = resolved?;
        // 3.1 allows keywords beside `$ref` (a description, mostly): they win.
        if let Value::Object(out) = &mut resolved {
            for (k, v) in obj {
                if matches!(
                    k.as_str(),
                    "description" | "title" | "default" | "deprecated"
                ) {
                    out.insert(k.clone(), v.clone());
                }
            }
        }
        Ok(resolved)
    }

    /// 3.0's boolean `exclusiveMinimum: true` qualifies `minimum`; JSON
    /// Schema's is the bound itself.
    fn fix_bounds(&self, obj: &Map<String, Value>, out: &mut Map<String, Value>) {
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

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn cycles_are_cut_with_a_note_and_the_result_is_valid() {
        let doc = json!({"components": {"schemas": {
            "Node": {"type": "object", "properties": {
                "name": {"type": "string", "nullable": true},
                "children": {"type": "array", "items": {"$ref": "#/components/schemas/Node"}},
                "n": {"type": "integer", "minimum": 0, "exclusiveMinimum": true},
            }, "required": ["name", "ghost"]},
        }}});
        let mut r = Resolver::new(&doc, true);
        let s = r
            .schema(&json!({"$ref": "#/components/schemas/Node"}), "/x")
            .unwrap();
        assert!(
            wf_plugin_api::schema::json_schema_problems(&s, "s").is_empty(),
            "{s}"
        );
        assert_eq!(s["properties"]["name"]["type"], json!(["string", "null"]));
        assert_eq!(
            s["properties"]["n"],
            json!({"type": "integer", "exclusiveMinimum": 0})
        );
        assert_eq!(s["required"], json!(["name"]));
        // Node inside Node is cut: any value is accepted there.
        let inner = &s["properties"]["children"]["items"];
        assert_eq!(
            inner,
            &json!({"description": "(recursive Node; not expanded)"})
        );
        assert_eq!(r.notes.len(), 1, "{:?}", r.notes);
        assert!(r.notes[0].contains("recursive reference to Node"));
    }

    #[test]
    fn external_and_dangling_refs_are_refused_with_their_place() {
        let doc = json!({});
        let e = Resolver::new(&doc, false)
            .schema(&json!({"$ref": "other.yaml#/Pet"}), "/paths/~1a/get")
            .unwrap_err();
        assert_eq!(
            e,
            RefError::External {
                at: "/paths/~1a/get/$ref".into(),
                target: "other.yaml#/Pet".into()
            }
        );
        let e = Resolver::new(&doc, false)
            .schema(&json!({"$ref": "#/components/schemas/Nope"}), "/p")
            .unwrap_err();
        assert!(e.to_string().contains("points at nothing"), "{e}");
    }

    #[test]
    fn a_dense_graph_stops_at_the_budget() {
        // Each level references the next one twice: 2^30 nodes if fully inlined.
        let mut schemas = Map::new();
        for i in 0..30 {
            let next = format!("#/components/schemas/S{}", i + 1);
            schemas.insert(
                format!("S{i}"),
                json!({"type": "object", "properties": {"a": {"$ref": next}, "b": {"$ref": next}}}),
            );
        }
        schemas.insert("S30".into(), json!({"type": "string"}));
        let doc = json!({"components": {"schemas": schemas}});
        let mut r = Resolver::new(&doc, false);
        let s = r
            .schema(&json!({"$ref": "#/components/schemas/S0"}), "/x")
            .unwrap();
        assert!(wf_plugin_api::schema::json_schema_problems(&s, "s").is_empty());
        assert!(
            r.notes.iter().any(|n| n.contains("schema cut")),
            "{:?}",
            r.notes
        );
    }
}
