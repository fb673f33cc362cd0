//! The workflow document (docs/workflows.md).

use std::collections::BTreeMap;

use serde::{Deserialize, Serialize};
use serde_json::{Map, Value, json};

fn object_schema() -> Value {
    json!({"type": "object", "properties": {}})
}

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Workflow {
    #[serde(default)]
    pub name: String,
    #[serde(default)]
    pub description: String,
    /// JSON Schema of the run's inputs (an object schema).
    #[serde(default = "object_schema")]
    pub inputs: Value,
    /// Sources whose calls in a run get a session of their own (`"run"`) instead
    /// of the shared persistent one (`"shared"`, the default).
    #[serde(default, skip_serializing_if = "BTreeMap::is_empty")]
    pub sessions: BTreeMap<String, SessionMode>,
    pub nodes: Vec<Node>,
    /// The run's outputs: name → value expression.
    #[serde(default)]
    pub outputs: Map<String, Value>,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum SessionMode {
    Shared,
    Run,
}

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Node {
    pub id: String,
    /// Capability ref `source.name`, e.g. `wf.std.template`.
    #[serde(rename = "use")]
    pub uses: String,
    /// Arguments: literals mixed with `{"$ref": "..."}` expressions.
    #[serde(default)]
    pub args: Map<String, Value>,
    /// Nodes that must finish first (besides those referenced in `args`/`when`).
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub after: Vec<String>,
    /// Run only when this expression is truthy; otherwise the node is skipped.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub when: Option<Value>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub timeout_ms: Option<u64>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub retry: Option<Retry>,
    #[serde(default)]
    pub on_error: OnError,
}

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Retry {
    /// Total attempts, including the first.
    pub attempts: u32,
    #[serde(default)]
    pub backoff_ms: u64,
}

#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum OnError {
    /// The run fails (default).
    #[default]
    Fail,
    /// The node is recorded as failed, its output is `{"error": ...}`, and the run goes on.
    Continue,
}

impl Workflow {
    pub fn from_value(v: &Value) -> Result<Self, String> {
        serde_json::from_value(v.clone()).map_err(|e| format!("not a workflow document: {e}"))
    }

    pub fn node(&self, id: &str) -> Option<&Node> {
        self.nodes.iter().find(|n| n.id == id)
    }
}
