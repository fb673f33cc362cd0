//! What a record keeps of arguments and results: their shape by default
//! (keys, types and sizes, never values), or their values, redacted and cut,
//! where `[[audit.values]]` asks for them.

use regex::Regex;
use serde_json::{Map, Value, json};

/// Deepest object nesting a shape describes; below it, `"object(N)"`.
const MAX_DEPTH: usize = 4;
/// Most keys of one object a shape lists; the rest are counted.
const MAX_KEYS: usize = 64;

/// The shape of `v`: `"string(12)"`, `"integer"`, `"array(3)"`, and objects
/// as maps of their keys' shapes.
pub fn shape(v: &Value) -> Value {
    shape_at(v, 0)
}

fn shape_at(v: &Value, depth: usize) -> Value {
    match v {
        Value::Null => "null".into(),
        Value::Bool(_) => "boolean".into(),
        Value::Number(n) if n.is_i64() || n.is_u64() => "integer".into(),
        Value::Number(_) => "number".into(),
        Value::String(s) => format!("string({})", s.chars().count()).into(),
        Value::Array(a) => format!("array({})", a.len()).into(),
        Value::Object(o) if depth >= MAX_DEPTH => format!("object({})", o.len()).into(),
        Value::Object(o) => {
            let mut out = Map::new();
            for (k, v) in o.iter().take(MAX_KEYS) {
                out.insert(k.clone(), shape_at(v, depth + 1));
            }
            if o.len() > MAX_KEYS {
                out.insert(
                    "…".into(),
                    format!("{} more keys", o.len() - MAX_KEYS).into(),
                );
            }
            Value::Object(out)
        }
    }
}

/// The shape of a call's result: its size, whether it is an error, and the
/// types of its content blocks (never their text).
pub fn result_shape(result: &Value, bytes: usize) -> Value {
    let mut out = json!({"bytes": bytes});
    if let Some(is_error) = result.get("isError").and_then(Value::as_bool) {
        out["isError"] = is_error.into();
    }
    if let Some(content) = result.get("content").and_then(Value::as_array) {
        let kinds: Vec<Value> = content
            .iter()
            .take(MAX_KEYS)
            .map(|c| c.get("type").cloned().unwrap_or_else(|| "?".into()))
            .collect();
        out["content"] = Value::Array(kinds);
    }
    if let Some(s) = result.get("structuredContent") {
        out["structuredContent"] = shape(s);
    }
    if let Some(contents) = result.get("contents").and_then(Value::as_array) {
        out["contents"] = contents.len().into();
    }
    if let Some(messages) = result.get("messages").and_then(Value::as_array) {
        out["messages"] = messages.len().into();
    }
    out
}

/// [`result_shape`] of a tool call's result, read from its parts rather
/// than its JSON: `isError` when set, the content blocks' `type`s, and the
/// structured content (a tool result has no `contents` or `messages`).
pub fn tool_result_shape<'a>(
    is_error: Option<bool>,
    kinds: impl Iterator<Item = &'a str>,
    structured: Option<&Value>,
    bytes: usize,
) -> Value {
    let mut out = json!({"bytes": bytes});
    if let Some(is_error) = is_error {
        out["isError"] = is_error.into();
    }
    out["content"] = Value::Array(kinds.take(MAX_KEYS).map(Value::from).collect());
    if let Some(s) = structured {
        out["structuredContent"] = shape(s);
    }
    out
}

/// `v` with every string's secrets blanked (the config's `${VAR}` values,
/// then each pattern), cut to `max_bytes` of JSON: a longer value becomes
/// `{"truncated": true, "bytes": N, "json": "<its first max_bytes>"}`.
pub fn values(v: &Value, patterns: &[Regex], max_bytes: usize) -> Value {
    let redacted = redact(v, patterns);
    let text = serde_json::to_string(&redacted).unwrap_or_default();
    if text.len() <= max_bytes {
        return redacted;
    }
    let mut cut = max_bytes;
    while !text.is_char_boundary(cut) {
        cut -= 1;
    }
    json!({"truncated": true, "bytes": text.len(), "json": &text[..cut]})
}

fn redact(v: &Value, patterns: &[Regex]) -> Value {
    match v {
        Value::String(s) => {
            let mut out = crate::secrets::redact(s);
            for p in patterns {
                if p.is_match(&out) {
                    out = p.replace_all(&out, crate::secrets::REDACTED).into_owned();
                }
            }
            Value::String(out)
        }
        Value::Array(a) => Value::Array(a.iter().map(|x| redact(x, patterns)).collect()),
        Value::Object(o) => Value::Object(
            o.iter()
                .map(|(k, x)| (k.clone(), redact(x, patterns)))
                .collect(),
        ),
        other => other.clone(),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_shape_keeps_keys_types_and_sizes_never_values() {
        let args = json!({
            "repo": "acme/tools",
            "count": 3,
            "ratio": 0.5,
            "draft": false,
            "labels": ["a", "b"],
            "body": {"text": "the secret plan", "meta": null}
        });
        let s = shape(&args);
        assert_eq!(
            s,
            json!({
                "repo": "string(10)",
                "count": "integer",
                "ratio": "number",
                "draft": "boolean",
                "labels": "array(2)",
                "body": {"text": "string(15)", "meta": "null"}
            })
        );
        let text = s.to_string();
        assert!(!text.contains("acme") && !text.contains("secret"), "{text}");
    }

    #[test]
    fn a_shape_is_bounded_in_depth_and_keys() {
        let deep = json!({"a": {"b": {"c": {"d": {"e": 1}}}}});
        assert_eq!(shape(&deep), json!({"a": {"b": {"c": {"d": "object(1)"}}}}));
        let wide: Map<String, Value> = (0..100).map(|i| (format!("k{i:03}"), json!(i))).collect();
        let s = shape(&Value::Object(wide));
        assert_eq!(s.as_object().unwrap().len(), MAX_KEYS + 1);
        assert_eq!(s["…"], json!("36 more keys"));
    }

    #[test]
    fn a_result_shape_has_sizes_and_content_types() {
        let r = json!({"content": [{"type": "text", "text": "hello"}, {"type": "image", "data": "…"}],
                       "structuredContent": {"n": 2}, "isError": false});
        assert_eq!(
            result_shape(&r, 120),
            json!({"bytes": 120, "isError": false, "content": ["text", "image"],
                   "structuredContent": {"n": "integer"}})
        );
    }

    #[test]
    fn kept_values_are_redacted_and_cut() {
        crate::secrets::remember("s3cr3t-config-value");
        let patterns = [Regex::new(r"ghp_[A-Za-z0-9]{8,}").unwrap()];
        let v =
            json!({"token": "ghp_abcdefgh1234", "note": ["key s3cr3t-config-value here"], "n": 1});
        let kept = values(&v, &patterns, 4096);
        assert_eq!(
            kept,
            json!({"token": "[redacted]", "note": ["key [redacted] here"], "n": 1})
        );
        let long = json!({"text": "é".repeat(100)});
        let cut = values(&long, &[], 21);
        assert_eq!(cut["truncated"], json!(true));
        assert_eq!(
            cut["bytes"],
            json!(serde_json::to_string(&long).unwrap().len())
        );
        // Cut on a character boundary: `{"text":"` is 9 bytes, then 2-byte é's.
        assert_eq!(cut["json"].as_str().unwrap().len(), 21);
    }
}
