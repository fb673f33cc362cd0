//! A plugin built against wf-plugin-api 1.3.0, using what 1.3 added: a call
//! served as a task. Its default source `compat13` has a tool `job` that,
//! asked as a task, answers a task handle at once (`Source::call_tool_as_task`)
//! whose `tasks/get` (`Source::get_task`) reads `completed` with the result,
//! and which `Source::cancel_task` cancels. It predates 1.4's `UpdateTask`
//! (input for a task), which its export glue answers `unsupported`.

use std::collections::HashMap;
use std::sync::Mutex;
use std::sync::atomic::{AtomicU64, Ordering};

use wf_plugin_api::prelude::*;

pub struct Compat;

#[derive(Default)]
pub struct CompatSource {
    next: AtomicU64,
    /// Task id → the `text` it returns (`None`: cancelled).
    tasks: Mutex<HashMap<String, Option<String>>>,
}

impl Plugin for Compat {
    type Source = CompatSource;
    fn manifest() -> Manifest {
        Manifest::new("compat-v1-3", env!("CARGO_PKG_VERSION"))
            .kind("compat13")
            .description("Built against wf-plugin-api 1.3.0 (calls served as tasks)")
            .default_source("compat13", "compat13")
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

fn text_of(args: &Value) -> String {
    args.get("text").and_then(Value::as_str).unwrap_or("done").to_string()
}

impl Source for CompatSource {
    async fn catalog(&self) -> Result<Catalog, PluginError> {
        let schema = json!({"type": "object", "properties": {"text": {"type": "string"}}});
        Ok(Catalog::default().tool(Tool::new("job", "Returns `text`; a task when asked as one (api 1.3)", schema)))
    }
    async fn call_tool(&self, name: &str, args: Value, _ctx: CallContext) -> Result<CallResult, PluginError> {
        match name {
            "job" => Ok(CallResult::text(format!("plain: {}", text_of(&args)))),
            _ => Err(PluginError::not_found(format!("no tool {name}"))),
        }
    }
    async fn call_tool_as_task(&self, name: &str, args: Value, _ctx: CallContext) -> Result<TaskStart, PluginError> {
        if name != "job" {
            return Err(PluginError::not_found(format!("no tool {name}")));
        }
        let id = format!("c13-{}", self.next.fetch_add(1, Ordering::Relaxed));
        self.tasks.lock().unwrap().insert(id.clone(), Some(text_of(&args)));
        Ok(TaskStart::Task(task(&id, "working")))
    }
    async fn get_task(&self, task_id: &str, _ctx: CallContext) -> Result<Value, PluginError> {
        match self.tasks.lock().unwrap().get(task_id) {
            None => Err(PluginError::state_lost()),
            Some(None) => Ok(task(task_id, "cancelled")),
            Some(Some(text)) => {
                let mut t = task(task_id, "completed");
                t["result"] = json!({"content": [{"type": "text", "text": format!("task: {text}, from api 1.3")}]});
                Ok(t)
            }
        }
    }
    async fn cancel_task(&self, task_id: &str, _ctx: CallContext) -> Result<(), PluginError> {
        match self.tasks.lock().unwrap().get_mut(task_id) {
            None => Err(PluginError::state_lost()),
            Some(t) => {
                *t = None;
                Ok(())
            }
        }
    }
}

wf_plugin_api::export_plugin!(Compat);
