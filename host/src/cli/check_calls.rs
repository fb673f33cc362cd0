//! `wf check --call`: every tool of every `wasm` source called once, with
//! arguments made from its input schema, to find the tools that crash.
//!
//! Calling a tool can change things, so only WebAssembly components are
//! called: they reach nothing the operator did not grant (a source granted
//! `rw` directories or hosts can still act on those). Native plugins and
//! upstream servers can do anything their process can, and are never called.
//!
//! A call that traps, or is stopped at a limit (memory, CPU deadline, the
//! check's own bound), and a result that does not match the tool's
//! `outputSchema`, are problems. A tool's own error (an `isError` result or
//! an error it returns) is how a tool refuses arguments it does not like,
//! and is no problem.

use std::time::Duration;

use serde_json::{Map, Value, json};
use wf_plugin_api::ErrorCode;
use wf_plugin_api::schema::instance_problems;

use crate::sources::{CallCtx, Sources};

/// The kind whose sources `--call` calls.
pub const CALLED_KIND: &str = "wasm";

/// How deep [`sample`] follows nested schemas.
const MAX_DEPTH: usize = 8;

/// What calling one tool found.
#[derive(Debug)]
pub struct Called {
    pub source: String,
    pub tool: String,
    pub arguments: Value,
    pub outcome: Outcome,
}

#[derive(Debug, PartialEq)]
pub enum Outcome {
    /// A result that matches its output schema (or the tool declares none).
    Answered,
    /// The tool failed in its own words (`isError`, or an error it returned).
    ToolError(String),
    /// The component trapped (or a native plugin panicked).
    Trapped(String),
    /// Stopped at a limit: memory, the CPU deadline, or the check's bound.
    Limit(String),
    /// A result that departs from the tool's `outputSchema`.
    Mismatch(Vec<String>),
}

impl Called {
    /// The `reason` of a `file: key: reason` line, when the call found a problem.
    pub fn problem(&self) -> Option<String> {
        let what = match &self.outcome {
            Outcome::Answered | Outcome::ToolError(_) => return None,
            Outcome::Trapped(m) => format!("trapped: {m}"),
            Outcome::Limit(m) => format!("stopped at a limit: {m}"),
            Outcome::Mismatch(p) => format!(
                "its result does not match its outputSchema: {}",
                p.join("; ")
            ),
        };
        Some(format!(
            "tool {:?} called with {}: {what}",
            self.tool, self.arguments
        ))
    }
}

/// Calls each tool of each of `names` (discovered sources of `set`) once,
/// in turn, each bounded by `bound`.
pub async fn call_tools(set: &Sources, names: &[String], bound: Duration) -> Vec<Called> {
    let mut out = Vec::new();
    for name in names {
        let Some(entry) = set.get(name) else { continue };
        let (Some(handle), Some(catalog)) = (entry.handle.clone(), entry.catalog()) else {
            continue; // failed discovery: the trial already says why
        };
        for tool in &catalog.tools {
            let arguments = sample(&tool.input_schema, &tool.input_schema, 0);
            let ctx = CallCtx::new().with_nobody_to_ask("wf check calls tools with nobody to ask");
            let call = handle.call_tool(&tool.name, arguments.clone(), ctx);
            let outcome = match tokio::time::timeout(bound, call).await {
                Err(_) => Outcome::Limit(format!(
                    "no answer within {} ms (server.discovery_timeout_ms bounds each call)",
                    bound.as_millis()
                )),
                Ok(Err(e)) => {
                    let stopped = e
                        .error
                        .data
                        .as_ref()
                        .and_then(|d| d.get("stopped"))
                        .and_then(Value::as_str);
                    match (stopped, e.code()) {
                        (Some("trap"), _) | (_, ErrorCode::Panicked) => {
                            Outcome::Trapped(e.error.message)
                        }
                        (Some(_), _) => Outcome::Limit(e.error.message),
                        _ => Outcome::ToolError(e.error.message),
                    }
                }
                Ok(Ok(r)) if r.is_error => Outcome::ToolError(text_of(&r.content)),
                Ok(Ok(r)) => match &tool.output_schema {
                    None => Outcome::Answered,
                    Some(schema) => {
                        let problems = match &r.structured_content {
                            None => vec!["it has no structuredContent".to_string()],
                            Some(v) => instance_problems(schema, v, "structuredContent"),
                        };
                        if problems.is_empty() {
                            Outcome::Answered
                        } else {
                            Outcome::Mismatch(problems)
                        }
                    }
                },
            };
            out.push(Called {
                source: name.clone(),
                tool: tool.name.clone(),
                arguments,
                outcome,
            });
        }
    }
    out
}

fn text_of(content: &[Value]) -> String {
    content
        .iter()
        .filter_map(|c| c.get("text").and_then(Value::as_str))
        .collect::<Vec<_>>()
        .join(" ")
}

/// A value `schema` accepts, as small as can be: its `const`, `default`,
/// first example or first `enum` value when it has one, else the least value
/// of its type, with an object's required properties only and an array's
/// `minItems` items. `root` resolves local `$ref`s (`#/$defs/…`).
pub fn sample(schema: &Value, root: &Value, depth: usize) -> Value {
    let Some(s) = schema.as_object() else {
        return Value::Null;
    };
    if depth > MAX_DEPTH {
        return Value::Null;
    }
    for key in ["const", "default"] {
        if let Some(v) = s.get(key) {
            return v.clone();
        }
    }
    for key in ["examples", "enum"] {
        if let Some(v) = s.get(key).and_then(Value::as_array).and_then(|a| a.first()) {
            return v.clone();
        }
    }
    if let Some(target) = s
        .get("$ref")
        .and_then(Value::as_str)
        .and_then(|r| r.strip_prefix('#'))
        .and_then(|p| root.pointer(p))
    {
        return sample(target, root, depth + 1);
    }
    for key in ["anyOf", "oneOf", "allOf"] {
        if let Some(first) = s.get(key).and_then(Value::as_array).and_then(|a| {
            // The first alternative that is not `null`, if any.
            a.iter()
                .find(|v| v.get("type").and_then(Value::as_str) != Some("null"))
                .or(a.first())
        }) {
            return sample(first, root, depth + 1);
        }
    }
    let ty = match s.get("type") {
        Some(Value::String(t)) => t.as_str(),
        Some(Value::Array(ts)) => ts
            .iter()
            .filter_map(Value::as_str)
            .find(|t| *t != "null")
            .unwrap_or("null"),
        _ if s.contains_key("properties") => "object",
        _ if s.contains_key("items") => "array",
        _ => "null",
    };
    let number = |integer: bool| {
        let min = s.get("minimum").and_then(Value::as_f64).or_else(|| {
            s.get("exclusiveMinimum")
                .and_then(Value::as_f64)
                .map(|m| m + 1.0)
        });
        let max = s.get("maximum").and_then(Value::as_f64);
        let v = min.unwrap_or(0.0).min(max.unwrap_or(f64::MAX));
        if integer {
            json!(v.ceil() as i64)
        } else {
            json!(v)
        }
    };
    match ty {
        "object" => {
            let props = s.get("properties").and_then(Value::as_object);
            let mut out = Map::new();
            for name in s
                .get("required")
                .and_then(Value::as_array)
                .into_iter()
                .flatten()
                .filter_map(Value::as_str)
            {
                let prop = props.and_then(|p| p.get(name)).unwrap_or(&Value::Null);
                out.insert(name.to_string(), sample(prop, root, depth + 1));
            }
            Value::Object(out)
        }
        "array" => {
            let n = s
                .get("minItems")
                .and_then(Value::as_u64)
                .unwrap_or(0)
                .min(8);
            let item = s.get("items").unwrap_or(&Value::Null);
            Value::Array((0..n).map(|_| sample(item, root, depth + 1)).collect())
        }
        "string" => {
            let n = s
                .get("minLength")
                .and_then(Value::as_u64)
                .unwrap_or(0)
                .min(64) as usize;
            let formatted = match s.get("format").and_then(Value::as_str) {
                Some("date-time") => "1970-01-01T00:00:00Z",
                Some("date") => "1970-01-01",
                Some("time") => "00:00:00Z",
                Some("uri" | "url") => "https://example.com/",
                Some("email") => "a@example.com",
                Some("uuid") => "00000000-0000-0000-0000-000000000000",
                _ => "",
            };
            if formatted.is_empty() {
                json!("a".repeat(n))
            } else {
                json!(formatted)
            }
        }
        "integer" => number(true),
        "number" => number(false),
        "boolean" => json!(false),
        _ => Value::Null,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn of(schema: Value) -> Value {
        sample(&schema, &schema, 0)
    }

    #[test]
    fn arguments_are_the_least_the_schema_accepts() {
        let schema = json!({
            "type": "object",
            "properties": {
                "text": {"type": "string"},
                "unit": {"type": "string", "enum": ["C", "F"]},
                "n": {"type": "integer", "minimum": 3},
                "ratio": {"type": "number", "exclusiveMinimum": 0},
                "when": {"type": "string", "format": "date-time"},
                "tags": {"type": "array", "items": {"type": "string", "minLength": 2}, "minItems": 1},
                "mode": {"const": "fast"},
                "limit": {"type": "integer", "default": 10},
                "name": {"type": "string", "examples": ["ada"]},
                "opt": {"anyOf": [{"type": "null"}, {"type": "boolean"}]},
                "point": {"$ref": "#/$defs/point"},
                "skipped": {"type": "string"}
            },
            "required": ["text", "unit", "n", "ratio", "when", "tags", "mode", "limit", "name", "opt", "point"],
            "$defs": {"point": {"type": "object", "properties": {"x": {"type": "number"}}, "required": ["x"]}}
        });
        let v = of(schema.clone());
        assert_eq!(
            v,
            json!({
                "text": "", "unit": "C", "n": 3, "ratio": 1.0, "when": "1970-01-01T00:00:00Z",
                "tags": ["aa"], "mode": "fast", "limit": 10, "name": "ada", "opt": false,
                "point": {"x": 0.0}
            })
        );
        // What it makes, the schema accepts.
        assert!(instance_problems(&schema, &v, "$").is_empty());
    }

    #[test]
    fn odd_schemas_still_give_an_answer() {
        assert_eq!(of(json!({"type": "object"})), json!({}));
        assert_eq!(of(json!(true)), Value::Null);
        assert_eq!(of(json!({"type": ["null", "integer"]})), json!(0));
        assert_eq!(of(json!({"$ref": "#/nowhere"})), Value::Null);
        // A schema that refers to itself stops at the depth bound.
        let looped =
            json!({"type": "object", "properties": {"next": {"$ref": "#"}}, "required": ["next"]});
        assert!(of(looped).is_object());
    }

    #[test]
    fn only_traps_limits_and_mismatches_are_problems() {
        let called = |outcome| Called {
            source: "s".into(),
            tool: "t".into(),
            arguments: json!({}),
            outcome,
        };
        assert_eq!(called(Outcome::Answered).problem(), None);
        assert_eq!(called(Outcome::ToolError("no".into())).problem(), None);
        assert_eq!(
            called(Outcome::Trapped(
                "the component trapped: unreachable".into()
            ))
            .problem(),
            Some(r#"tool "t" called with {}: trapped: the component trapped: unreachable"#.into())
        );
        assert!(
            called(Outcome::Mismatch(vec![
                "structuredContent: expected object, got string".into()
            ]))
            .problem()
            .unwrap()
            .contains("does not match its outputSchema: structuredContent: expected object")
        );
    }
}
