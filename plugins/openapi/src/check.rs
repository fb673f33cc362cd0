//! A value checked against a tool schema that keeps its references in its
//! own `$defs` (refs.rs): the focused check of
//! `wf_plugin_api::schema::instance_problems` (type, enum, const, required,
//! properties, additionalProperties, items, allOf/anyOf/oneOf), following
//! `#/$defs/...` references, which that one does not. Used for a call's
//! arguments and for an answer's drift from its document.

use serde_json::{Map, Value};

use crate::refs::local_in;

/// How deep references are followed before a part is taken as matching
/// (a schema that refers to itself, met by a deep value).
const DEPTH: usize = 64;

/// Where `value` departs from `schema` (`at` names the root, `$`), its
/// references followed in its own `$defs`.
pub fn problems(schema: &Value, value: &Value, at: &str) -> Vec<String> {
    let empty = Map::new();
    let defs = schema
        .get("$defs")
        .and_then(Value::as_object)
        .unwrap_or(&empty);
    problems_in(schema, defs, value, at)
}

/// Like [`problems`], the references followed in `defs` (the document's
/// shared components, refs.rs).
pub fn problems_in(
    schema: &Value,
    defs: &Map<String, Value>,
    value: &Value,
    at: &str,
) -> Vec<String> {
    let mut out = Vec::new();
    check(defs, schema, value, at, 0, &mut out);
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

fn check(
    root: &Map<String, Value>,
    schema: &Value,
    value: &Value,
    at: &str,
    depth: usize,
    out: &mut Vec<String>,
) {
    if depth > DEPTH {
        return;
    }
    let schema = local_in(root, schema);
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
            let here = format!("{at}.{k}");
            match props.and_then(|p| p.get(k)) {
                Some(s) => check(root, s, v, &here, depth + 1, out),
                None => match obj.get("additionalProperties") {
                    Some(Value::Bool(false)) => {
                        out.push(format!("{at}: property {k:?} is not allowed"))
                    }
                    Some(s @ Value::Object(_)) => check(root, s, v, &here, depth + 1, out),
                    _ => {}
                },
            }
        }
    }
    if let (Value::Array(list), Some(items @ Value::Object(_))) = (value, obj.get("items")) {
        for (i, v) in list.iter().enumerate() {
            check(root, items, v, &format!("{at}[{i}]"), depth + 1, out);
        }
    }
    if let Some(Value::Array(all)) = obj.get("allOf") {
        for s in all {
            check(root, s, value, at, depth + 1, out);
        }
    }
    for key in ["anyOf", "oneOf"] {
        if let Some(Value::Array(any)) = obj.get(key)
            && !any.is_empty()
            && !any.iter().any(|s| {
                let mut o = Vec::new();
                check(root, s, value, at, depth + 1, &mut o);
                o.is_empty()
            })
        {
            out.push(format!("{at}: matches none of the {key} alternatives"));
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn references_into_defs_are_followed() {
        let schema = json!({
            "type": "object",
            "properties": {"owner": {"$ref": "#/$defs/User"}, "n": {"type": "integer"}},
            "$defs": {"User": {"type": "object", "required": ["login"],
                "properties": {"login": {"type": "string"}, "boss": {"$ref": "#/$defs/User"}}}},
        });
        assert!(
            problems(
                &schema,
                &json!({"owner": {"login": "a", "boss": {"login": "b"}}}),
                "$"
            )
            .is_empty()
        );
        assert_eq!(
            problems(
                &schema,
                &json!({"owner": {"login": "a", "boss": {"login": 3}}, "n": "x"}),
                "$"
            ),
            vec![
                "$.owner.boss.login: expected string, got integer".to_string(),
                "$.n: expected integer, got string".to_string(),
            ]
        );
        assert_eq!(
            problems(&schema, &json!({"owner": {}}), "$"),
            vec!["$.owner: missing required property \"login\"".to_string()]
        );
    }
}
