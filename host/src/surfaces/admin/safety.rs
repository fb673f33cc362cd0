//! What an admin tool call may write without the operator's say-so. A source
//! table written through the admin tools must not start a program or carry
//! credentials unless `[admin] allow_process_sources = true`: the caller may
//! be an LLM steered by a page it read.

use serde_json::{Map, Value};

/// Keys whose value makes wf start (or shape) a program.
const PROCESS_KEYS: &[&str] = &["command", "args", "cwd", "env", "inherit_env"];
/// Keys whose value is sent to an upstream as a credential.
const CREDENTIAL_KEYS: &[&str] = &["headers", "auth", "bearer_token", "token", "api_key"];

/// Why writing `table` needs the operator's permission; empty when it does not.
pub fn reasons(table: &Map<String, Value>) -> Vec<String> {
    let mut out = Vec::new();
    for (k, v) in table {
        if PROCESS_KEYS.contains(&k.as_str()) {
            out.push(format!("`{k}` starts a program"));
        } else if CREDENTIAL_KEYS.contains(&k.as_str()) {
            out.push(format!("`{k}` carries credentials"));
        } else if k == "url" && v.as_str().is_some_and(has_userinfo) {
            out.push("`url` carries credentials (user:password@)".into());
        }
        if mentions_env(v) {
            out.push(format!(
                "`{k}` uses ${{VAR}}: it would send wf's environment to the source"
            ));
        }
    }
    out
}

/// A `${` anywhere in a string of `v` (expanded from wf's environment).
fn mentions_env(v: &Value) -> bool {
    match v {
        Value::String(s) => s.contains("${"),
        Value::Array(a) => a.iter().any(mentions_env),
        Value::Object(o) => o.values().any(mentions_env),
        _ => false,
    }
}

fn has_userinfo(url: &str) -> bool {
    url.parse::<http::Uri>()
        .ok()
        .and_then(|u| u.authority().map(|a| a.as_str().contains('@')))
        // Not a URI we can read: only a plain '@' before any path says so.
        .unwrap_or_else(|| {
            let rest = url.split_once("://").map_or(url, |(_, r)| r);
            rest.split('/').next().is_some_and(|a| a.contains('@'))
        })
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn table(v: Value) -> Map<String, Value> {
        v.as_object().unwrap().clone()
    }

    #[test]
    fn process_and_credentials_need_permission() {
        assert!(
            reasons(&table(
                json!({"url": "http://127.0.0.1:9/mcp", "kind": "mcp", "deny_tools": ["x"]})
            ))
            .is_empty()
        );
        let r = reasons(&table(json!({"command": "sh", "args": ["-c", "id"]})));
        assert_eq!(r.len(), 2, "{r:?}");
        assert!(r[0].contains("`command` starts a program"));
        for bad in [
            json!({"url": "http://h/mcp", "headers": {"Authorization": "x"}}),
            json!({"url": "http://h/mcp", "auth": {"bearer_token": "x"}}),
            json!({"url": "http://user:pw@h/mcp"}),
            json!({"url": "http://h/mcp?k=${OPENAI_API_KEY}"}),
            json!({"url": "http://h/mcp", "deny_tools": ["${HOME}"]}),
            json!({"env": {}}),
        ] {
            assert!(!reasons(&table(bad.clone())).is_empty(), "{bad}");
        }
    }
}
