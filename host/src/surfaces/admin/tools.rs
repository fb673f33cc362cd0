//! The admin tools' definitions.

use serde_json::{Value, json};
use wf_plugin_api::{Catalog, Tool};

fn tool(name: &str, description: &str, properties: Value, required: &[&str]) -> Tool {
    Tool::new(
        name,
        description,
        json!({"type": "object", "properties": properties, "required": required, "additionalProperties": false}),
    )
}

pub fn catalog() -> Catalog {
    let name = json!({"type": "string", "description": "Source name"});
    let config = json!({"type": "object", "description": "The source's table, as in the config file (e.g. {\"command\": \"npx\", \"args\": [..]} or {\"url\": ..})"});
    Catalog::default()
        .tool(tool("list_plugins", "Loaded plugins (name, version, api version, file, kinds) and refused plugin files with their reasons.", json!({}), &[]))
        .tool(tool(
            "list_sources",
            "Every source: kind, plugin, enabled, status, last discovery time and error, catalog age, session epoch, calls in flight, capability counts, and the open per-principal / per-client sessions (scope, principal, client, age, idle time, epoch, calls in flight).",
            json!({}),
            &[],
        ))
        .tool(tool(
            "pin_tools",
            "Pins the tool definitions every source (or each of `sources`) serves now in tools.lock beside the config; from then on a changed or new tool of a pinned source is held until approved.",
            json!({"sources": {"type": "array", "items": {"type": "string"}, "description": "Source names (default: all)"}}),
            &[],
        ))
        .tool(tool("diff_tools", "Per pinned tool that changed, is new or is gone: the description's line diff and every other field that differs.", json!({}), &[]))
        .tool(tool(
            "approve_tools",
            "Accepts changed, new or flagged tools: each name a `source.tool` ref, or a source for all of its changes. Held tools are served again at once.",
            json!({"names": {"type": "array", "items": {"type": "string"}, "minItems": 1}}),
            &["names"],
        ))
        .tool(tool(
            "query_audit",
            "The audit trail, newest first: who called what, when, with what decision and outcome. Every filter is optional.",
            json!({
                "since": {"type": ["string", "integer"], "description": "2026-12-01, 2026-12-01T09:00:00Z, Unix ms, or an age (15m, 2h, 7d)"},
                "until": {"type": ["string", "integer"], "description": "Same forms as since"},
                "principal": {"type": "string"},
                "group": {"type": "string"},
                "capability": {"type": "string", "description": "A glob over the capability's name"},
                "source": {"type": "string"},
                "outcome": {"type": "string", "enum": ["ok", "tool_error", "protocol_error", "cancelled", "timed_out", "denied", "limited"]},
                "decision": {"type": "string", "enum": ["allow", "deny", "held", "limited"]},
                "run": {"type": "string", "description": "A workflow run's id"},
                "kind": {"type": "string", "enum": ["tool", "resource", "prompt", "completion", "subscription", "node", "admin", "console"]},
                "limit": {"type": "integer", "minimum": 1, "maximum": 10000}
            }),
            &[],
        ))
        .tool(tool("refresh_catalog", "Rediscovers one source (or all) with a one-shot session.", json!({"source": name}), &[]))
        .tool(tool(
            "add_source",
            "Adds a source to the config file (staged: answered with requires_reload).",
            json!({"name": name, "kind": {"type": "string", "description": "Default mcp"}, "config": config}),
            &["name", "config"],
        ))
        .tool(tool("update_source", "Replaces a source's table in the config file (staged).", json!({"name": name, "kind": {"type": "string"}, "config": config}), &["name", "config"]))
        .tool(tool("remove_source", "Removes a source from the config file (staged).", json!({"name": name}), &["name"]))
        .tool(tool("enable_source", "Enables a source in the config file (staged).", json!({"name": name}), &["name"]))
        .tool(tool("disable_source", "Disables a source in the config file (staged).", json!({"name": name}), &["name"]))
        .tool(tool("reload", "Applies the config file now: unchanged sources keep their sessions, changed ones restart, removed ones close.", json!({}), &[]))
        .tool(tool("status", "Uptime, versions, counts, the last reload's result, plugin files that need a restart.", json!({}), &[]))
}
