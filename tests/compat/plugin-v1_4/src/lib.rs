//! A plugin built against wf-plugin-api 1.4.0, using what 1.4 added: input
//! for a task. Its default source `compat14` has a tool `job` that, asked as a
//! task, answers a task handle at once; the task reads `input_required` (it
//! asks the client's name) until `tasks/update` (`Source::update_task`)
//! brings the answer, then `completed` with a result that holds it. It
//! predates 1.5's call lane (`CallLane`), which its export glue answers
//! `unsupported`: isolated, its calls are served by wf-plugin-host itself.

use std::collections::HashMap;
use std::sync::Mutex;
use std::sync::atomic::{AtomicU64, Ordering};

use wf_plugin_api::prelude::*;

pub struct Compat;

#[derive(Default)]
pub struct CompatSource {
    next: AtomicU64,
    /// Task id → (its `text`, the client's answer once given).
    tasks: Mutex<HashMap<String, (String, Option<Value>)>>,
}

impl Plugin for Compat {
    type Source = CompatSource;
    fn manifest() -> Manifest {
        Manifest::new("compat-v1-4", env!("CARGO_PKG_VERSION"))
            .kind("compat14")
            .description("Built against wf-plugin-api 1.4.0 (tasks that take input)")
            .default_source("compat14", "compat14")
    }
    fn new(_host: Host) -> Result<Self, PluginError> {
        Ok(Compat)
    }
    fn create_source(&self, _spec: SourceSpec) -> Result<CompatSource, PluginError> {
        Ok(CompatSource::default())
    }
}

const AT: &str = "2026-01-01T00:00:00Z";

fn task(id: &str, status: &str) -> Value {
    json!({"taskId": id, "status": status, "createdAt": AT, "lastUpdatedAt": AT, "ttlMs": 60000, "pollIntervalMs": 100})
}

impl Source for CompatSource {
    async fn catalog(&self) -> Result<Catalog, PluginError> {
        let schema = json!({"type": "object", "properties": {"text": {"type": "string"}}});
        Ok(Catalog::default().tool(Tool::new("job", "Returns `text`; as a task, asks your name first (api 1.4)", schema)))
    }
    async fn call_tool(&self, name: &str, args: Value, _ctx: CallContext) -> Result<CallResult, PluginError> {
        match name {
            "job" => Ok(CallResult::text(format!("plain: {}", args["text"].as_str().unwrap_or("done")))),
            _ => Err(PluginError::not_found(format!("no tool {name}"))),
        }
    }
    async fn call_tool_as_task(&self, name: &str, args: Value, _ctx: CallContext) -> Result<TaskStart, PluginError> {
        if name != "job" {
            return Err(PluginError::not_found(format!("no tool {name}")));
        }
        let id = format!("c14-{}", self.next.fetch_add(1, Ordering::Relaxed));
        let text = args["text"].as_str().unwrap_or("done").to_string();
        self.tasks.lock().unwrap().insert(id.clone(), (text, None));
        Ok(TaskStart::Task(task(&id, "working")))
    }
    async fn get_task(&self, task_id: &str, _ctx: CallContext) -> Result<Value, PluginError> {
        match self.tasks.lock().unwrap().get(task_id) {
            None => Err(PluginError::state_lost()),
            Some((_, None)) => {
                let mut t = task(task_id, "input_required");
                t["inputRequests"] = json!({"name": {"method": "elicitation/create", "params": {
                    "message": "compat 1.4 asks your name",
                    "requestedSchema": {"type": "object", "properties": {"name": {"type": "string"}}}
                }}});
                Ok(t)
            }
            Some((text, Some(answer))) => {
                let name = answer["content"]["name"].as_str().unwrap_or("?");
                let mut t = task(task_id, "completed");
                t["result"] = json!({"content": [{"type": "text", "text": format!("task: {text}, for {name}, from api 1.4")}]});
                Ok(t)
            }
        }
    }
    async fn update_task(&self, task_id: &str, input_responses: Value, _ctx: CallContext) -> Result<(), PluginError> {
        match self.tasks.lock().unwrap().get_mut(task_id) {
            None => Err(PluginError::state_lost()),
            Some((_, answer)) => {
                *answer = Some(input_responses["name"].clone());
                Ok(())
            }
        }
    }
}

wf_plugin_api::export_plugin!(Compat);
