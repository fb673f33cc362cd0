//! `{{path}}` templates, the engine of `wf.std.template`.

use serde_json::Value;

/// Renders `template`, replacing each `{{path}}` with the value at `path` in
/// `values`. Strings are inserted as they are, other values as compact JSON.
/// Errors are messages for the node's caller.
pub(crate) fn render(template: &str, values: &Value) -> Result<String, String> {
    let mut out = String::with_capacity(template.len());
    let mut rest = template;
    while let Some(start) = rest.find("{{") {
        out.push_str(&rest[..start]);
        let inside = &rest[start + 2..];
        let end = inside
            .find("}}")
            .ok_or_else(|| format!("unclosed placeholder at `{}`", &rest[start..]))?;
        let path = inside[..end].trim();
        if path.is_empty() {
            return Err("empty placeholder `{{}}`".to_string());
        }
        match lookup(values, path) {
            Some(Value::String(s)) => out.push_str(s),
            Some(other) => out.push_str(&other.to_string()),
            None => return Err(format!("template path `{path}` not found in values")),
        }
        rest = &inside[end + 2..];
    }
    out.push_str(rest);
    Ok(out)
}

/// Follows a dotted path: object keys, or decimal indexes into arrays.
fn lookup<'a>(values: &'a Value, path: &str) -> Option<&'a Value> {
    path.split('.')
        .try_fold(values, |value, segment| match value {
            Value::Object(map) => map.get(segment),
            Value::Array(items) => segment.parse::<usize>().ok().and_then(|i| items.get(i)),
            _ => None,
        })
}

#[cfg(test)]
mod tests {
    use super::render;
    use serde_json::json;

    #[test]
    fn inserts_strings_raw_and_other_values_as_compact_json() {
        let values =
            json!({"user": {"name": "Ada", "tags": ["x", "y"]}, "n": 3, "ok": true, "none": null});
        let out = render(
            "{{user.name}} {{ user.tags }} {{user.tags.1}} {{n}} {{ok}} {{none}}",
            &values,
        );
        assert_eq!(out.unwrap(), r#"Ada ["x","y"] y 3 true null"#);
    }

    #[test]
    fn text_without_placeholders_is_unchanged() {
        assert_eq!(
            render("plain } { text", &json!({})).unwrap(),
            "plain } { text"
        );
        assert_eq!(render("", &json!({})).unwrap(), "");
    }

    #[test]
    fn reports_missing_paths_and_malformed_placeholders() {
        let values = json!({"items": [1], "s": "str"});
        for (template, error) in [
            (
                "{{ items.1 }}",
                "template path `items.1` not found in values",
            ),
            ("{{items.x}}", "template path `items.x` not found in values"),
            ("{{s.len}}", "template path `s.len` not found in values"),
            ("a {{ }} b", "empty placeholder `{{}}`"),
            ("a {{items.0", "unclosed placeholder at `{{items.0`"),
        ] {
            assert_eq!(render(template, &values).unwrap_err(), error, "{template}");
        }
    }
}
