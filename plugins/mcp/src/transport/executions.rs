//! Each upstream tool's `execution` (may it run as a task?), which rmcp's
//! `Tool` drops while parsing `tools/list`. The transports note it from the
//! raw reply (the stdio line, the HTTP body or SSE event), and discovery puts
//! it back into the tool's `extra`, so that a 2025-11-25 client sees through
//! wf which tools it may task-augment, as it does at the upstream.

use std::collections::HashMap;
use std::sync::{Arc, Mutex, PoisonError};

use serde::Deserialize;
use serde_json::{Value, json};

/// Tool name → its `execution`, as the upstream listed it.
pub type Executions = Arc<Mutex<HashMap<String, Value>>>;

/// The values MCP defines for `execution.taskSupport`. Anything else is
/// dropped: clients validate it, and one bad tool would fail their whole list.
const TASK_SUPPORT: [&str; 3] = ["forbidden", "optional", "required"];

/// Notes the tools' `execution` from one raw JSON-RPC message, if it is a
/// `tools/list` reply that has any; anything else leaves `seen` as it was.
pub fn note(seen: &Executions, message: &[u8]) {
    #[derive(Deserialize)]
    struct Reply {
        result: Listed,
    }
    #[derive(Deserialize)]
    struct Listed {
        tools: Vec<Listing>,
    }
    #[derive(Deserialize)]
    struct Listing {
        name: String,
        #[serde(default)]
        execution: Option<Execution>,
    }
    #[derive(Deserialize)]
    struct Execution {
        #[serde(rename = "taskSupport", default)]
        task_support: Option<String>,
    }
    let Ok(reply) = serde_json::from_slice::<Reply>(message) else {
        return;
    };
    let mut seen = seen.lock().unwrap_or_else(PoisonError::into_inner);
    for tool in reply.result.tools {
        let support = tool.execution.and_then(|e| e.task_support);
        match support {
            Some(s) if TASK_SUPPORT.contains(&s.as_str()) => {
                seen.insert(tool.name, json!({ "taskSupport": s }));
            }
            _ => {
                seen.remove(&tool.name);
            }
        }
    }
}

/// Puts each noted `execution` back into its tool.
pub fn restore(seen: &Executions, tools: &mut [wf_plugin_api::Tool]) {
    let seen = seen.lock().unwrap_or_else(PoisonError::into_inner);
    for tool in tools {
        if let Some(execution) = seen.get(&tool.name) {
            tool.extra.insert("execution".into(), execution.clone());
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn tool(name: &str) -> wf_plugin_api::Tool {
        wf_plugin_api::Tool::new(name, "", json!({"type": "object"}))
    }

    #[test]
    fn a_tools_list_reply_gives_each_tool_its_execution() {
        let seen = Executions::default();
        note(
            &seen,
            br#"{"jsonrpc":"2.0","id":3,"result":{"tools":[
                {"name":"job","inputSchema":{"type":"object"},"execution":{"taskSupport":"optional"}},
                {"name":"must","inputSchema":{"type":"object"},"execution":{"taskSupport":"required","x":1}},
                {"name":"odd","inputSchema":{"type":"object"},"execution":{"taskSupport":"sometimes"}},
                {"name":"plain","inputSchema":{"type":"object"}}]}}"#,
        );
        let mut tools = vec![tool("job"), tool("must"), tool("odd"), tool("plain")];
        restore(&seen, &mut tools);
        let execution = |i: usize| tools[i].extra.get("execution").cloned();
        assert_eq!(execution(0), Some(json!({"taskSupport": "optional"})));
        assert_eq!(execution(1), Some(json!({"taskSupport": "required"})));
        assert_eq!(execution(2), None, "an unknown value is dropped");
        assert_eq!(execution(3), None);
    }

    #[test]
    fn other_messages_change_nothing() {
        let seen = Executions::default();
        note(
            &seen,
            br#"{"jsonrpc":"2.0","id":1,"result":{"tools":[{"name":"a","inputSchema":{},"execution":{"taskSupport":"optional"}}]}}"#,
        );
        for other in [
            &br#"{"jsonrpc":"2.0","id":2,"result":{"content":[{"type":"text","text":"execution"}]}}"#[..],
            br#"{"jsonrpc":"2.0","method":"notifications/tools/list_changed"}"#,
            b"not json",
        ] {
            note(&seen, other);
        }
        assert_eq!(seen.lock().unwrap().len(), 1);
        // A later listing without it takes it away.
        note(
            &seen,
            br#"{"jsonrpc":"2.0","id":3,"result":{"tools":[{"name":"a","inputSchema":{}}]}}"#,
        );
        assert!(seen.lock().unwrap().is_empty());
    }
}
