//! References inside a workflow: `{"$ref": "inputs.url"}` and
//! `{"$ref": "nodes.snap.output.items.0"}`. Paths are dotted; numbers index arrays.

use std::collections::HashMap;

use serde_json::{Map, Value};

#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Ref {
    /// `inputs[.path]`
    Input(Vec<String>),
    /// `nodes.<id>.output[.path]`
    Node { id: String, path: Vec<String> },
}

/// `Some(path text)` when `v` is a reference object.
pub fn as_ref_text(v: &Value) -> Option<&str> {
    match v {
        Value::Object(m) if m.len() == 1 => m.get("$ref").and_then(Value::as_str),
        _ => None,
    }
}

pub fn parse(text: &str) -> Result<Ref, String> {
    let parts: Vec<&str> = text.split('.').collect();
    if parts.iter().any(|p| p.is_empty()) {
        return Err(format!("malformed reference {text:?}"));
    }
    let rest = |from: usize| parts[from..].iter().map(|s| s.to_string()).collect();
    match parts.as_slice() {
        ["inputs", ..] => Ok(Ref::Input(rest(1))),
        ["nodes", id, "output", ..] => Ok(Ref::Node {
            id: id.to_string(),
            path: rest(3),
        }),
        ["nodes", ..] => Err(format!(
            "reference {text:?} must be nodes.<id>.output[.path]"
        )),
        _ => Err(format!(
            "reference {text:?} must start with inputs. or nodes."
        )),
    }
}

/// Every reference in an expression, with the JSON path where it sits.
pub fn collect(v: &Value, at: &str, out: &mut Vec<(String, Result<Ref, String>)>) {
    if let Some(text) = as_ref_text(v) {
        out.push((at.to_string(), parse(text)));
        return;
    }
    match v {
        Value::Object(m) => {
            for (k, x) in m {
                collect(x, &format!("{at}.{k}"), out);
            }
        }
        Value::Array(a) => {
            for (i, x) in a.iter().enumerate() {
                collect(x, &format!("{at}[{i}]"), out);
            }
        }
        _ => {}
    }
}

/// The value at `path` inside `v`.
pub fn select<'a>(v: &'a Value, path: &[String]) -> Option<&'a Value> {
    path.iter().try_fold(v, |cur, seg| match cur {
        Value::Object(m) => m.get(seg),
        Value::Array(a) => seg.parse::<usize>().ok().and_then(|i| a.get(i)),
        _ => None,
    })
}

/// What references resolve against during a run.
pub struct Scope<'a> {
    pub inputs: &'a Value,
    pub outputs: &'a HashMap<String, Value>,
}

/// Replaces every reference in `v` by its value. A missing value is an error
/// naming the reference.
pub fn resolve(v: &Value, scope: &Scope<'_>) -> Result<Value, String> {
    if let Some(text) = as_ref_text(v) {
        let found = match parse(text)? {
            Ref::Input(path) => select(scope.inputs, &path),
            Ref::Node { id, path } => scope.outputs.get(&id).and_then(|o| select(o, &path)),
        };
        return found
            .cloned()
            .ok_or_else(|| format!("reference {text:?} has no value"));
    }
    Ok(match v {
        Value::Object(m) => resolve_map(m, scope)?,
        Value::Array(a) => Value::Array(
            a.iter()
                .map(|x| resolve(x, scope))
                .collect::<Result<_, _>>()?,
        ),
        other => other.clone(),
    })
}

/// [`resolve`] of an object's entries, without copying the object first.
pub fn resolve_map(m: &Map<String, Value>, scope: &Scope<'_>) -> Result<Value, String> {
    m.iter()
        .map(|(k, x)| Ok((k.clone(), resolve(x, scope)?)))
        .collect::<Result<Map<_, _>, String>>()
        .map(Value::Object)
}

/// JavaScript-like truthiness for `when`.
pub fn truthy(v: &Value) -> bool {
    match v {
        Value::Null => false,
        Value::Bool(b) => *b,
        Value::Number(n) => n.as_f64().is_some_and(|f| f != 0.0),
        Value::String(s) => !s.is_empty(),
        Value::Array(a) => !a.is_empty(),
        Value::Object(_) => true,
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn parse_and_resolve() {
        assert_eq!(parse("inputs.url").unwrap(), Ref::Input(vec!["url".into()]));
        assert_eq!(
            parse("nodes.a.output.items.0").unwrap(),
            Ref::Node {
                id: "a".into(),
                path: vec!["items".into(), "0".into()]
            }
        );
        assert!(parse("nodes.a").is_err());
        assert!(parse("outputs.x").is_err());
        assert!(parse("inputs..x").is_err());
        let inputs = json!({"url": "http://x", "n": 2});
        let outputs = HashMap::from([("a".to_string(), json!({"items": ["first", "second"]}))]);
        let scope = Scope {
            inputs: &inputs,
            outputs: &outputs,
        };
        let v = json!({"u": {"$ref": "inputs.url"}, "list": [{"$ref": "nodes.a.output.items.1"}, 3], "lit": {"k": true}});
        assert_eq!(
            resolve(&v, &scope).unwrap(),
            json!({"u": "http://x", "list": ["second", 3], "lit": {"k": true}})
        );
        assert!(
            resolve(&json!({"$ref": "inputs.missing"}), &scope)
                .unwrap_err()
                .contains("inputs.missing")
        );
        let mut found = Vec::new();
        collect(&v, "args", &mut found);
        assert_eq!(found.len(), 2);
        assert_eq!(found[1].0, "args.list[0]");
    }
}
