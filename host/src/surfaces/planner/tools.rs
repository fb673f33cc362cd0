//! The planner's tool definitions: names, descriptions and input schemas.

use serde_json::{Value, json};
use wf_plugin_api::{Catalog, Tool};

use crate::status::RunStatus;

fn tool(name: &str, description: &str, properties: Value, required: &[&str]) -> Tool {
    Tool::new(
        name,
        description,
        json!({"type": "object", "properties": properties, "required": required, "additionalProperties": false}),
    )
}

/// A tool a client may call as a task (2025-11-25's `execution.taskSupport`;
/// wf runs it as a task when asked, and as a plain call otherwise).
pub(crate) fn task_optional(mut tool: Tool) -> Tool {
    tool.extra
        .insert("execution".into(), json!({"taskSupport": "optional"}));
    tool
}

fn workflow_schema() -> Value {
    json!({"type": "object", "description": "A workflow document: {name, description, inputs (JSON Schema), sessions, nodes: [{id, use, args, after, when, timeout_ms, retry, on_error}], outputs}. See the wf_std__author_workflow prompt."})
}

fn inputs_schema() -> Value {
    json!({"type": "object", "description": "The run's inputs, matching the workflow's input schema"})
}

pub fn catalog() -> Catalog {
    let c = Catalog::default();
    let c = c.tool(tool(
        "list_capabilities",
        "Search what workflows can use: node specs (default), tools, prompts or resources of every source. Returns refs (`source.name`) to put in a node's `use`.",
        json!({
            "query": {"type": "string", "description": "What you look for, in a few words: matches come best first (BM25 over names, descriptions and parameters)"},
            "source": {"type": "string", "description": "Only this source (e.g. `wf.std`)"},
            "kind": {"type": "string", "enum": ["node", "tool", "prompt", "resource"], "description": "Default `node`"},
            "cursor": {"type": "string", "description": "`next_cursor` of the previous page"},
            "limit": {"type": "integer", "minimum": 1, "maximum": 200, "description": "Items per page (default 50)"}
        }),
        &[],
    ));
    let c = c.tool(tool(
        "describe_capability",
        "The full definition of one node spec: input and output JSON Schemas, whether it is stateful or has side effects, and an example node.",
        json!({"ref": {"type": "string", "description": "Capability ref, e.g. `wf.std.template`"}}),
        &["ref"],
    ));
    let c = c.tool(tool(
        "validate_workflow",
        "Checks a workflow against the live catalog without running it. Lists every problem with its node and path.",
        json!({"workflow": workflow_schema()}),
        &["workflow"],
    ));
    let c = c.tool(tool(
        "save_draft",
        "Saves a workflow as an editable draft (new, or replacing `draft_id`). Returns the draft id and any validation problems.",
        json!({"workflow": workflow_schema(), "draft_id": {"type": "string"}, "name": {"type": "string", "description": "Defaults to the workflow's name"}}),
        &["workflow"],
    ));
    let c = c.tool(tool(
        "get_draft",
        "One draft with its document.",
        json!({"draft_id": {"type": "string"}}),
        &["draft_id"],
    ));
    let c = c.tool(tool(
        "list_drafts",
        "All drafts, newest first.",
        json!({}),
        &[],
    ));
    let c = c.tool(tool(
        "publish_artifact",
        "Publishes a valid draft as an immutable, versioned, content-hashed artifact `name@version` (publishing unchanged content returns the existing version).",
        json!({"draft_id": {"type": "string"}, "name": {"type": "string", "description": "Artifact name; defaults to the draft's name"}}),
        &["draft_id"],
    ));
    let c = c.tool(tool(
        "deploy",
        "Points a named deployment at an artifact version. Each deployment is also served as its own MCP tool taking the workflow's inputs.",
        json!({"name": {"type": "string", "description": "Deployment name: letters, digits, '_' and '-'"}, "artifact": {"type": "string", "description": "`name@version`, or `name` for the latest version"}}),
        &["name", "artifact"],
    ));
    let c = c.tool(task_optional(tool(
        "run_deployment",
        "Runs a deployment. Waits for the result unless `wait` is false.",
        json!({"name": {"type": "string"}, "inputs": inputs_schema(), "wait": {"type": "boolean"}, "timeout_ms": {"type": "integer", "minimum": 1}}),
        &["name"],
    )));
    let c = c.tool(task_optional(tool(
        "run_workflow",
        "Runs a draft (`draft_id`) or an inline `workflow` directly, without publishing. Waits for the result unless `wait` is false.",
        json!({"draft_id": {"type": "string"}, "workflow": workflow_schema(), "inputs": inputs_schema(), "wait": {"type": "boolean"}, "timeout_ms": {"type": "integer", "minimum": 1}}),
        &[],
    )));
    let c = c.tool(tool(
        "get_run",
        "A run's record: status, per-node status, timings, arguments, outputs, errors and session epochs.",
        json!({"run_id": {"type": "string"}}),
        &["run_id"],
    ));
    let c = c.tool(tool(
        "list_runs",
        "Recent runs, newest first.",
        json!({"limit": {"type": "integer", "minimum": 1, "maximum": 500}, "status": {"type": "string", "enum": RunStatus::ALL.iter().filter(|s| **s != RunStatus::Pending).collect::<Vec<_>>()}}),
        &[],
    ));
    let c = c.tool(tool(
        "cancel_run",
        "Cancels a running run; its in-flight nodes stop.",
        json!({"run_id": {"type": "string"}}),
        &["run_id"],
    ));
    c.tool(tool(
        "call_capability",
        "Runs one node spec on its source's persistent session (the same session workflows and proxied calls use) and returns its output.",
        json!({"ref": {"type": "string"}, "arguments": {"type": "object"}}),
        &["ref"],
    ))
}
