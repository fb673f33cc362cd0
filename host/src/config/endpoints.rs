//! `[endpoints.NAME]`: virtual servers. Each is its own MCP server at
//! `/mcp/NAME` (and `wf serve --endpoint NAME`), a view over the live
//! catalog: what it selects, transformed per tool, for the principals it
//! allows. It narrows, never widens: a caller's own tool lists, policies and
//! quotas still apply inside.

use std::collections::BTreeMap;

use serde::{Deserialize, Serialize};
use serde_json::{Map, Value};

/// One endpoint.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct EndpointConfig {
    /// `serverInfo.name` its clients see (default `wf-NAME`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub server_name: Option<String>,
    /// The `instructions` its clients get at `initialize`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub instructions: Option<String>,
    /// Principals (`alice`) and OAuth groups (`group:support`) allowed on it;
    /// unset: every principal the front admits. Others get HTTP 403.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub allow: Option<Vec<String>>,
    /// Globs on client-visible tool names (as `/mcp` lists them).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub tools: Option<Vec<String>>,
    /// Globs on source names; they narrow tools, prompts and resources.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub sources: Option<Vec<String>>,
    /// Tags every selected tool has (`read_only`, `destructive`,
    /// `idempotent`, `open_world`: from its annotations).
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub tags: Vec<String>,
    /// Globs on tool names taken out of the selection.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub exclude: Vec<String>,
    /// Globs on client-visible prompt names.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub prompts: Option<Vec<String>>,
    /// Globs on resource URIs and template names.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub resources: Option<Vec<String>>,
    /// Session scopes pinned per source for calls through this endpoint
    /// (`playwright = "client"`), over the sources' own `session`.
    #[serde(default, skip_serializing_if = "BTreeMap::is_empty")]
    pub sessions: BTreeMap<String, super::SessionScope>,
    /// Globs on workflow node specs' refs (`source.name`): what the
    /// planner's tools list, describe, call and run on this endpoint.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub nodes: Option<Vec<String>>,
    /// Its catalog mode and budgets, over `[server.catalog]`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub catalog: Option<super::CatalogConfig>,
    /// Transforms, by the tool's client-visible name on `/mcp`. A tool
    /// named here is selected whatever the globs say.
    #[serde(default, skip_serializing_if = "BTreeMap::is_empty")]
    pub transform: BTreeMap<String, ToolTransform>,
}

/// How one tool is shown and called on an endpoint.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct ToolTransform {
    /// Its name on the endpoint (the naming rules' charset and length).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub name: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub title: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub description: Option<String>,
    /// Merged over the tool's own annotations (`readOnlyHint`…).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub annotations: Option<Map<String, Value>>,
    /// Hidden arguments and their values: left out of the input schema,
    /// merged into every call; a client that sends another value is refused.
    #[serde(default, skip_serializing_if = "Map::is_empty")]
    pub fixed: Map<String, Value>,
    /// Values used when the client leaves an argument out (shown as `default`).
    #[serde(default, skip_serializing_if = "Map::is_empty")]
    pub defaults: Map<String, Value>,
    /// Narrowed enums: the only values a client may send.
    #[serde(default, skip_serializing_if = "BTreeMap::is_empty")]
    pub enums: BTreeMap<String, Vec<Value>>,
    /// `false` leaves the output schema out; an object replaces it.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub output_schema: Option<Value>,
}

/// The tags a tool can be selected by.
pub const TAGS: [&str; 4] = ["read_only", "destructive", "idempotent", "open_world"];

/// Endpoint names are path segments: lowercase letters, digits, `_`, `-`.
pub fn check_endpoint_name(name: &str) -> Result<(), String> {
    let ok = !name.is_empty()
        && name.len() <= 64
        && name.starts_with(|c: char| c.is_ascii_lowercase() || c.is_ascii_digit())
        && name
            .chars()
            .all(|c| c.is_ascii_lowercase() || c.is_ascii_digit() || matches!(c, '_' | '-'));
    if ok {
        Ok(())
    } else {
        Err(format!(
            "invalid endpoint name {name:?}: use 1-64 lowercase letters, digits, '_' and '-', \
             starting with a letter or digit"
        ))
    }
}

/// The first thing wrong with the endpoints, as (key, reason): a bad name,
/// a glob that does not parse, an unknown tag, a transform at odds with
/// itself.
pub fn problems(endpoints: &BTreeMap<String, EndpointConfig>) -> Vec<(String, String)> {
    let mut out = Vec::new();
    for (name, e) in endpoints {
        let key = format!("endpoints.{name}");
        if let Err(reason) = check_endpoint_name(name) {
            out.push((key.clone(), reason));
        }
        let lists = [
            ("tools", e.tools.as_deref().unwrap_or_default()),
            ("sources", e.sources.as_deref().unwrap_or_default()),
            ("exclude", e.exclude.as_slice()),
            ("prompts", e.prompts.as_deref().unwrap_or_default()),
            ("resources", e.resources.as_deref().unwrap_or_default()),
            ("nodes", e.nodes.as_deref().unwrap_or_default()),
        ];
        for (field, globs) in lists {
            for g in globs {
                if let Err(err) = globset::Glob::new(g) {
                    out.push((format!("{key}.{field}"), format!("{g:?}: {err}")));
                }
            }
        }
        for t in &e.tags {
            if !TAGS.contains(&t.as_str()) {
                out.push((
                    format!("{key}.tags"),
                    format!("unknown tag {t:?}; use one of {}", TAGS.join(", ")),
                ));
            }
        }
        for a in e.allow.iter().flatten() {
            if a.is_empty() || a == "group:" {
                out.push((format!("{key}.allow"), "an empty principal or group".into()));
            }
        }
        for (tool, t) in &e.transform {
            let key = format!("{key}.transform.{tool}");
            if let Some(n) = &t.name
                && !n.is_empty()
                && let Err(reason) = check_tool_name(n)
            {
                out.push((format!("{key}.name"), reason));
            }
            for arg in t.fixed.keys() {
                if t.defaults.contains_key(arg) || t.enums.contains_key(arg) {
                    out.push((
                        format!("{key}.fixed"),
                        format!("{arg:?} is fixed: it takes no default or enum"),
                    ));
                }
            }
            for (arg, values) in &t.enums {
                if values.is_empty() {
                    out.push((format!("{key}.enums"), format!("{arg:?}: an empty enum")));
                }
                if let Some(d) = t.defaults.get(arg)
                    && !values.contains(d)
                {
                    out.push((
                        format!("{key}.defaults"),
                        format!("{arg:?}: the default is not one of its enum's values"),
                    ));
                }
            }
            if let Some(s) = &t.output_schema
                && !matches!(s, Value::Bool(false) | Value::Object(_))
            {
                out.push((
                    format!("{key}.output_schema"),
                    "use false (left out) or a JSON Schema object".into(),
                ));
            }
        }
    }
    out
}

/// A tool name as clients accept it: `^[a-zA-Z0-9_-]{1,64}$`.
pub fn check_tool_name(name: &str) -> Result<(), String> {
    if name.is_empty()
        || name.len() > 64
        || !name
            .chars()
            .all(|c| c.is_ascii_alphanumeric() || matches!(c, '_' | '-'))
    {
        return Err(format!(
            "invalid tool name {name:?}: use 1-64 letters, digits, '_' and '-'"
        ));
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn names_are_path_segments() {
        assert!(check_endpoint_name("support").is_ok());
        assert!(check_endpoint_name("release-bot_2").is_ok());
        for bad in ["", "Support", "a/b", "-x", "a b", &"x".repeat(65)] {
            assert!(check_endpoint_name(bad).is_err(), "{bad}");
        }
    }

    #[test]
    fn problems_name_their_key() {
        let mut e = EndpointConfig {
            tags: vec!["readonly".into()],
            tools: Some(vec!["a[".into()]),
            ..Default::default()
        };
        e.transform.insert(
            "x__y".into(),
            ToolTransform {
                name: Some("bad name".into()),
                fixed: Map::from_iter([("repo".into(), Value::from("a"))]),
                defaults: Map::from_iter([("repo".into(), Value::from("b"))]),
                ..Default::default()
            },
        );
        let all = problems(&BTreeMap::from([("Bad".to_string(), e)]));
        let keys: Vec<&str> = all.iter().map(|(k, _)| k.as_str()).collect();
        assert_eq!(
            keys,
            [
                "endpoints.Bad",
                "endpoints.Bad.tools",
                "endpoints.Bad.tags",
                "endpoints.Bad.transform.x__y.name",
                "endpoints.Bad.transform.x__y.fixed"
            ]
        );
    }
}
