//! A source's settings as its plugin receives them: `${VAR}`s expanded, then
//! checked against the JSON Schema the plugin declared for the kind
//! (`Manifest::settings_schemas`), so a misspelt key is refused with a hint
//! before the plugin sees it. A kind without a schema (every 1.0/1.1 plugin)
//! is not checked. One function for start, reload, admin edits and `wf check`.

use serde_json::Value;
use wf_plugin_api::Manifest;
use wf_plugin_api::schema::instance_problems;

use crate::config::{SourceConfig, expand_env, unknown_key};

/// The settings `manifest`'s plugin gets for `sc`, or one line saying what is
/// wrong. `key` names the source's table in messages (`sources.NAME`).
pub fn effective(sc: &SourceConfig, key: &str, manifest: &Manifest) -> Result<Value, String> {
    let lookup = |k: &str| std::env::var(k).ok();
    let settings =
        expand_env(&Value::Object(sc.settings.clone()), key, &lookup).map_err(|e| e.to_string())?;
    match manifest.settings_schemas.get(&sc.kind) {
        Some(schema) => {
            let problems = problems(schema, &settings, key);
            if problems.is_empty() {
                Ok(settings)
            } else {
                Err(problems.join("; "))
            }
        }
        None => Ok(settings),
    }
}

/// Where `settings` do not match `schema`. A key the schema does not allow
/// (`"additionalProperties": false`) is named with the nearest key it does
/// allow, wf's own per-source keys included (`enabeld` → `enabled`).
pub fn problems(schema: &Value, settings: &Value, key: &str) -> Vec<String> {
    let Value::Object(map) = settings else {
        return instance_problems(schema, settings, key);
    };
    let props = schema.get("properties").and_then(Value::as_object);
    let closed = schema.get("additionalProperties") == Some(&Value::Bool(false));
    let mut out = Vec::new();
    let mut rest = map.clone();
    if closed {
        // Sorted: the same order whatever the file's format kept.
        let mut keys: Vec<&String> = map.keys().collect();
        keys.sort();
        for k in keys {
            if props.is_none_or(|p| !p.contains_key(k)) {
                rest.remove(k);
                let known = props
                    .into_iter()
                    .flat_map(|p| p.keys().map(String::as_str))
                    .chain(SourceConfig::HOST_KEYS.iter().copied());
                out.push(format!("{key}: {}", unknown_key(k, known)));
            }
        }
    }
    out.extend(instance_problems(schema, &Value::Object(rest), key));
    out
}

/// Checks a `[sources.NAME]` table an admin edit is about to write against
/// the schema of its kind's plugin (`${VAR}`s are expanded only when the
/// source is created, so only the keys and literal values are checked here).
/// A table wf itself cannot read is left to the config check that follows.
pub fn check_table(
    plugins: &crate::plugins::PluginSet,
    table: &serde_json::Map<String, Value>,
    key: &str,
) -> Result<(), String> {
    let Ok(sc) = serde_json::from_value::<SourceConfig>(Value::Object(table.clone())) else {
        return Ok(());
    };
    let Some(schema) = plugins
        .for_kind(&sc.kind)
        .and_then(|p| p.manifest.settings_schemas.get(&sc.kind))
    else {
        return Ok(());
    };
    let problems = problems(schema, &Value::Object(sc.settings), key);
    match problems.is_empty() {
        true => Ok(()),
        false => Err(problems.join("; ")),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn schema() -> Value {
        json!({"type": "object", "additionalProperties": false,
               "properties": {"command": {"type": "string"}, "args": {"type": "array", "items": {"type": "string"}}}})
    }

    #[test]
    fn unknown_keys_are_named_with_a_hint() {
        let p = problems(
            &schema(),
            &json!({"comand": "x", "argz": ["y"], "enabeld": true, "zzzzzzzz": 1}),
            "sources.fs",
        );
        assert_eq!(
            p,
            vec![
                r#"sources.fs: unknown key "argz" (did you mean "args"?)"#,
                r#"sources.fs: unknown key "comand" (did you mean "command"?)"#,
                r#"sources.fs: unknown key "enabeld" (did you mean "enabled"?)"#,
                r#"sources.fs: unknown key "zzzzzzzz""#,
            ]
        );
    }

    #[test]
    fn wrong_types_are_named_by_key() {
        let p = problems(&schema(), &json!({"command": 1, "args": "x"}), "sources.fs");
        assert_eq!(
            p,
            vec![
                "sources.fs.command: expected string, got integer",
                "sources.fs.args: expected array, got string",
            ]
        );
        assert!(problems(&schema(), &json!({"command": "npx", "args": ["a"]}), "s").is_empty());
    }

    #[test]
    fn effective_checks_only_kinds_with_a_schema() {
        let bad = SourceConfig::new(
            "mcp",
            json!({"comand": "x"})
                .as_object()
                .cloned()
                .unwrap_or_default(),
        );
        let old = Manifest::new("old", "1").kind("mcp");
        assert!(
            effective(&bad, "sources.fs", &old).is_ok(),
            "no schema, no check"
        );
        let new = old.settings_schema("mcp", schema());
        assert_eq!(
            effective(&bad, "sources.fs", &new).unwrap_err(),
            r#"sources.fs: unknown key "comand" (did you mean "command"?)"#
        );
    }
}
