//! The meta-tools a client in `search` mode (or past a budget) is listed:
//! `wf_find` searches the catalog the principal may use, `wf_describe` gives
//! full definitions, `wf_call` calls a tool by name through the same path
//! as a direct call (the handler routes it).

use std::sync::OnceLock;

use serde_json::{Value, json};
use wf_plugin_api::Tool;

use crate::catalog::search::{Blend, Hit, Index};
use crate::projection::Projection;

pub const FIND: &str = "wf_find";
pub const DESCRIBE: &str = "wf_describe";
pub const CALL: &str = "wf_call";

/// Default and most hits `wf_find` returns.
const FIND_DEFAULT: usize = 8;
const FIND_MAX: usize = 50;

pub fn is_meta(name: &str) -> bool {
    matches!(name, FIND | DESCRIBE | CALL)
}

/// The three definitions, made once.
pub fn definitions() -> &'static [Tool] {
    static DEFS: OnceLock<Vec<Tool>> = OnceLock::new();
    DEFS.get_or_init(|| {
        vec![
            Tool::new(
                FIND,
                "Find tools for a task among every tool this server can call (more than are listed). \
                 Returns the best matches: name, one-line description, source, signature and a \
                 confidence (0-1); when nothing matches well it says so and lists the sources. \
                 Call one with wf_call; wf_describe gives its full input schema.",
                json!({"type": "object", "properties": {
                    "query": {"type": "string", "description": "What you want to do, in a few words"},
                    "source": {"type": "string", "description": "Only tools of this source"},
                    "tags": {"type": "array", "items": {"type": "string", "enum": ["read_only", "destructive", "idempotent", "open_world"]}, "description": "Only tools whose annotations say all of these"},
                    "limit": {"type": "integer", "minimum": 1, "maximum": FIND_MAX, "description": "Most matches (default 8)"}
                }, "required": ["query"]}),
            ),
            Tool::new(
                DESCRIBE,
                "Full definitions (description, input and output schemas) of tools named by wf_find.",
                json!({"type": "object", "properties": {
                    "names": {"type": "array", "items": {"type": "string"}, "description": "Tool names as wf_find returned them"}
                }, "required": ["names"]}),
            ),
            Tool::new(
                CALL,
                "Call a tool by the name wf_find returned, with its arguments; the result is the tool's own.",
                json!({"type": "object", "properties": {
                    "name": {"type": "string", "description": "Tool name as wf_find returned it"},
                    "arguments": {"type": "object", "description": "The tool's arguments (see wf_describe)"}
                }, "required": ["name"]}),
            ),
        ]
    })
}

/// Tags a tool's annotations can give it (`wf_find`'s `tags` filter), and
/// the MCP hint each stands for.
const TAGS: &[(&str, &str)] = &[
    ("read_only", "readOnlyHint"),
    ("destructive", "destructiveHint"),
    ("idempotent", "idempotentHint"),
    ("open_world", "openWorldHint"),
];

/// The tags whose hint `tool`'s annotations set to true.
fn tags(tool: &Tool) -> Vec<&'static str> {
    let Some(a) = tool.extra.get("annotations") else {
        return Vec::new();
    };
    TAGS.iter()
        .filter(|(_, hint)| a.get(*hint).and_then(Value::as_bool) == Some(true))
        .map(|(tag, _)| *tag)
        .collect()
}

/// The first sentence or line of `text`, at most 160 characters.
fn one_line(text: &str) -> String {
    let line = text
        .lines()
        .find(|l| !l.trim().is_empty())
        .unwrap_or("")
        .trim();
    let line = match line.find(". ") {
        Some(i) => &line[..=i],
        None => line,
    };
    if line.chars().count() > 160 {
        let cut: String = line.chars().take(159).collect();
        format!("{cut}…")
    } else {
        line.to_string()
    }
}

/// `name(a: string, b?: integer)` from a tool's input schema.
pub fn signature(name: &str, schema: &Value) -> String {
    let required: Vec<&str> = schema
        .get("required")
        .and_then(Value::as_array)
        .map(|r| r.iter().filter_map(Value::as_str).collect())
        .unwrap_or_default();
    let params: Vec<String> = schema
        .get("properties")
        .and_then(Value::as_object)
        .map(|props| {
            props
                .iter()
                .map(|(k, v)| {
                    let ty = match v.get("type") {
                        Some(Value::String(t)) => t.clone(),
                        Some(Value::Array(ts)) => ts
                            .iter()
                            .filter_map(Value::as_str)
                            .collect::<Vec<_>>()
                            .join("|"),
                        _ if v.get("enum").is_some() => "enum".into(),
                        _ => "any".into(),
                    };
                    let opt = if required.contains(&k.as_str()) {
                        ""
                    } else {
                        "?"
                    };
                    format!("{k}{opt}: {ty}")
                })
                .collect()
        })
        .unwrap_or_default();
    format!("{name}({})", params.join(", "))
}

/// One `wf_find` match: name, one-line description, source, tags, signature.
pub fn hit(name: &str, source: &str, tool: &Tool) -> Value {
    let mut hit = json!({
        "name": name,
        "description": one_line(tool.description.as_deref().unwrap_or("")),
        "source": source,
        "signature": signature(name, &tool.input_schema),
    });
    let tags = tags(tool);
    if !tags.is_empty() {
        hit["tags"] = json!(tags);
    }
    hit
}

/// A tool as the meta-tools show it to one client.
#[derive(Clone, Copy)]
pub struct Shown<'a> {
    /// Its `/mcp` name: the search index's key, and what tool lists and
    /// policies know it by.
    pub key: &'a str,
    /// The name this client calls it by.
    pub name: &'a str,
    pub source: &'a str,
    /// Its name without the source's prefix (the sources overview).
    pub own: &'a str,
    pub item: &'a Tool,
}

/// The tools a client's meta-tools answer from: `/mcp`'s (the projection)
/// or an endpoint's (its names and definitions).
pub trait Surface {
    /// The tool a search hit's key (its `/mcp` name) names, if shown here.
    fn by_key(&self, key: &str) -> Option<Shown<'_>>;
    /// The tool this client calls `name`.
    fn by_name(&self, name: &str) -> Option<Shown<'_>>;
    /// Every tool shown, in order.
    fn each(&self, f: &mut dyn FnMut(Shown<'_>));
}

impl Surface for Projection {
    fn by_key(&self, key: &str) -> Option<Shown<'_>> {
        self.tool(key).map(|t| Shown {
            key: &t.name,
            name: &t.name,
            source: &t.source,
            own: &t.original,
            item: &t.item,
        })
    }

    fn by_name(&self, name: &str) -> Option<Shown<'_>> {
        self.by_key(name)
    }

    fn each(&self, f: &mut dyn FnMut(Shown<'_>)) {
        for t in &self.tools {
            f(Shown {
                key: &t.name,
                name: &t.name,
                source: &t.source,
                own: &t.original,
                item: &t.item,
            });
        }
    }
}

/// `wf_find`: the best matches for `args.query` among the tools of
/// `surface` that `usable` accepts (the caller's allow and deny lists, by
/// source and `/mcp` name), ranked by `index` (keyed by `/mcp` names), as a
/// JSON result, and their names as the client calls them. `nearest`: the
/// tools nearest the query's vector, when a semantic ranker answered
/// (blended with the lexical ranking as `blend` says).
pub fn find(
    surface: &dyn Surface,
    index: &Index,
    nearest: Option<(&[(&str, f32)], &Blend)>,
    args: &Value,
    usable: impl Fn(&str, &str) -> bool,
) -> Result<(Value, Vec<String>), String> {
    let query = args
        .get("query")
        .and_then(Value::as_str)
        .filter(|q| !q.trim().is_empty())
        .ok_or("wf_find needs a `query`: what you want to do, in a few words")?;
    let only = args.get("source").and_then(Value::as_str);
    let wanted: Vec<&str> = args
        .get("tags")
        .and_then(Value::as_array)
        .map(|t| t.iter().filter_map(Value::as_str).collect())
        .unwrap_or_default();
    if let Some(bad) = wanted.iter().find(|t| !TAGS.iter().any(|(k, _)| k == *t)) {
        return Err(format!(
            "wf_find: unknown tag {bad:?}; use read_only, destructive, idempotent or open_world"
        ));
    }
    // Shown here, usable by the caller, and tagged as asked (by the
    // annotations this surface shows).
    let on_surface = |key: &str| {
        surface.by_key(key).is_some_and(|t| {
            let have = tags(t.item);
            wanted.iter().all(|w| have.contains(w))
        })
    };
    let limit = args
        .get("limit")
        .and_then(Value::as_u64)
        .map_or(FIND_DEFAULT, |l| (l as usize).clamp(1, FIND_MAX));
    let keep = |h: &Hit| {
        only.is_none_or(|s| s == h.source) && usable(h.source, h.key) && on_surface(h.key)
    };
    let hits = match nearest {
        Some((n, blend)) => index.search_blended_with(blend, query, n, limit, keep),
        None => index.search(query, limit, keep),
    };
    let good = hits.first().is_some_and(|h| h.is_good());
    let mut names = Vec::new();
    let tools: Vec<Value> = hits
        .iter()
        // Without a good match, a few weak ones, then the sources.
        .take(if good { limit } else { WEAK_SHOWN })
        .filter_map(|h| surface.by_key(h.key).map(|t| (t, h)))
        .map(|(t, h)| {
            names.push(t.name.to_string());
            let mut v = hit(t.name, t.source, t.item);
            v["confidence"] = json!((h.confidence * 100.0).round() / 100.0);
            v
        })
        .collect();
    if good {
        let hint =
            "call one with wf_call {name, arguments}; wf_describe {names} gives full schemas";
        return Ok((json!({"tools": tools, "hint": hint}), names));
    }
    let hint = if tools.is_empty() {
        "no tool matches; narrow by `source` (one of `sources`) or try other words"
    } else {
        "no tool matches well (low confidence); narrow by `source` (one of `sources`) or try other words"
    };
    let sources = sources_overview(surface, only, &usable);
    Ok((
        json!({"tools": tools, "good_match": false, "hint": hint, "sources": sources}),
        names,
    ))
}

/// How many weak matches `wf_find` shows when none is good.
const WEAK_SHOWN: usize = 3;
/// Tool names a source's line gives as examples.
const SOURCE_EXAMPLES: usize = 5;

/// One line per source the caller may use: its name, how many tools, and
/// the first few tools' own names.
fn sources_overview(
    surface: &dyn Surface,
    only: Option<&str>,
    usable: &impl Fn(&str, &str) -> bool,
) -> Vec<String> {
    let mut by_source: std::collections::BTreeMap<String, Vec<String>> = Default::default();
    surface.each(&mut |t| {
        if only.is_none_or(|s| s == t.source) && usable(t.source, t.key) {
            let tools = by_source.entry(t.source.to_string()).or_default();
            tools.push(t.own.to_string());
        }
    });
    by_source
        .into_iter()
        .map(|(source, tools)| {
            let more = if tools.len() > SOURCE_EXAMPLES {
                ", …"
            } else {
                ""
            };
            let shown: Vec<&str> = tools
                .iter()
                .take(SOURCE_EXAMPLES)
                .map(String::as_str)
                .collect();
            format!(
                "{source} ({} tool{}): {}{more}",
                tools.len(),
                if tools.len() == 1 { "" } else { "s" },
                shown.join(", ")
            )
        })
        .collect()
}

/// `wf_describe`: the full definitions of the tools `args.names` names (as
/// `surface` shows them) that `usable` accepts.
pub fn describe(
    surface: &dyn Surface,
    args: &Value,
    usable: impl Fn(&str, &str) -> bool,
) -> Result<Value, String> {
    let names: Vec<&str> = args
        .get("names")
        .and_then(Value::as_array)
        .map(|n| n.iter().filter_map(Value::as_str).collect())
        .filter(|n: &Vec<&str>| !n.is_empty())
        .ok_or("wf_describe needs `names`: tool names as wf_find returned them")?;
    let mut tools = Vec::new();
    let mut unknown = Vec::new();
    for n in names {
        match surface.by_name(n).filter(|t| usable(t.source, t.key)) {
            Some(t) => tools.push(serde_json::to_value(t.item).unwrap_or(Value::Null)),
            None => unknown.push(n),
        }
    }
    Ok(json!({"tools": tools, "unknown": unknown}))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn signatures_mark_optional_parameters() {
        let schema = json!({"properties": {"a": {"type": "string"}, "b": {"type": ["integer", "null"]}, "c": {"enum": [1]}}, "required": ["a"]});
        assert_eq!(
            signature("t", &schema),
            "t(a: string, b?: integer|null, c?: enum)"
        );
    }

    #[test]
    fn tags_come_from_annotations() {
        let mut t = Tool::new("t", "d", json!({}));
        assert!(tags(&t).is_empty());
        t.extra.insert(
            "annotations".into(),
            json!({"readOnlyHint": true, "destructiveHint": false, "openWorldHint": true}),
        );
        assert_eq!(tags(&t), ["read_only", "open_world"]);
    }

    #[test]
    fn one_line_keeps_the_first_sentence() {
        assert_eq!(one_line("Echoes back. And more.\nSecond"), "Echoes back.");
        assert_eq!(one_line(""), "");
    }
}
