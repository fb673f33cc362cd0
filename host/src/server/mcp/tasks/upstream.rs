//! A source's own MCP Tasks, forwarded (plugin API 1.3,
//! `SourceRequest::CallToolAsTask` / `GetTask` / `CancelTask`): a proxied
//! call from a client that declared the tasks extension is asked of the
//! source as a task (its input-required rounds before it answers reach the
//! client as a plain call's do); when the source answers with one, wf keeps a task entry
//! (in [`RunTasks`], so its bounds apply) that points to the source and the
//! source's task id. The client sees only wf's opaque id, bound to its
//! principal. A source that was recreated since (reload) or whose upstream
//! session restarted has lost the task: it reads `failed`, state lost.

use std::sync::Arc;

use rmcp::ErrorData as McpError;
use rmcp::model::{
    CallToolResponse, CallToolResult, CreateTaskResult, DetailedTask, GetTaskResult, JsonObject,
    TaskPayload, TaskStatus,
};
use serde::{Deserialize, Serialize};
use serde_json::{Value, json};
use wf_plugin_api::{ErrorCode, TaskStart};

use super::{RunTask, RunTasks, TooManyTasks, UpstreamTask};
use crate::server::mcp::source_error::source_error;
use crate::sources::{SourceError, SourceHandle};

/// What a call asked of a source as a task came to. It crosses a call
/// parked in an input-required round (`mrtr`) as JSON, hence serde.
#[derive(Debug, Serialize, Deserialize)]
pub enum Start {
    /// The source answered at once.
    Complete(CallToolResult),
    /// wf's task handle for the source's task.
    Task(CreateTaskResult),
    /// The source serves no tasks: make the plain call instead.
    Declined,
}

impl Start {
    /// The client's answer; `None`: make the plain call.
    pub fn response(self) -> Option<CallToolResponse> {
        match self {
            Start::Complete(r) => Some(CallToolResponse::Complete(r)),
            Start::Task(t) => Some(CallToolResponse::Task(t)),
            Start::Declined => None,
        }
    }
}

/// Whether `principal` may start one more task (else: the plain call).
pub fn room(tasks: &RunTasks, principal: &str) -> bool {
    !tasks.at_bound(principal, crate::clock::now_ms())
}

/// Takes the source's answer to `call_tool_as_task` (on `handle`, for
/// `source`): a task becomes wf's task of `principal`.
pub async fn adopt(
    tasks: &RunTasks,
    handle: Arc<SourceHandle>,
    source: &str,
    answer: Result<TaskStart, SourceError>,
    principal: &str,
) -> Result<Start, McpError> {
    let started = match answer {
        Err(e) if e.code() == ErrorCode::Unsupported => return Ok(Start::Declined),
        Err(e) => return Err(source_error(e)),
        Ok(TaskStart::Complete(r)) => {
            return crate::server::mcp::tool_result::to_mcp(r).map(Start::Complete);
        }
        Ok(TaskStart::Task(task)) => task,
    };
    let Some(theirs) = started.get("taskId").and_then(Value::as_str) else {
        return Err(McpError::internal_error(
            format!("source {source:?} started a task without a taskId"),
            None,
        ));
    };
    let upstream = UpstreamTask {
        source: source.to_string(),
        task_id: theirs.to_string(),
        handle: Arc::downgrade(&handle),
    };
    let id = match tasks.create_upstream(principal, upstream, crate::clock::now_ms()) {
        Ok(id) => id,
        Err(TooManyTasks(n)) => {
            // Lost a race for the last slot: the source's task runs on, untracked.
            let _ = handle.cancel_task(theirs).await;
            return Err(McpError::internal_error(
                format!("too many tasks (server.max_tasks_per_principal = {n})"),
                None,
            ));
        }
    };
    tracing::info!(principal, task = %id, source, upstream_task = theirs, "source started a task");
    let mut v = ours(started, &id, tasks)?;
    // The plugin API asks for MCP's `Task`; the reply's `resultType` is
    // the host's to add (an upstream's CreateTaskResult already has it).
    if let Some(o) = v.as_object_mut() {
        o.entry("resultType").or_insert_with(|| json!("task"));
    }
    serde_json::from_value::<CreateTaskResult>(v)
        .map(Start::Task)
        .map_err(|e| malformed(source, &e))
}

/// The source's task JSON with wf's id, and a TTL no longer than wf keeps it.
fn ours(mut task: Value, id: &str, tasks: &RunTasks) -> Result<Value, McpError> {
    let Some(o) = task.as_object_mut() else {
        return Err(McpError::internal_error(
            "a task that is not an object",
            None,
        ));
    };
    o.insert("taskId".into(), json!(id));
    let bound = u64::try_from(tasks.ttl().as_millis()).unwrap_or(u64::MAX);
    let ttl = o
        .get("ttlMs")
        .and_then(Value::as_u64)
        .map_or(bound, |t| t.min(bound));
    o.insert("ttlMs".into(), json!(ttl));
    Ok(task)
}

fn malformed(source: &str, e: &serde_json::Error) -> McpError {
    McpError::internal_error(
        format!("source {source:?} sent a malformed task: {e}"),
        None,
    )
}

/// A task whose source lost it: `failed`, with the state-lost error.
fn lost(tasks: &RunTasks, id: &str, t: &RunTask, up: &UpstreamTask) -> GetTaskResult {
    let now = crate::clock::now_ms();
    let error: JsonObject = json!({
        "code": McpError::internal_error("", None).code.0,
        "message": wf_plugin_api::STATE_LOST,
        "data": {"source": up.source, "code": ErrorCode::StateLost.as_str()},
    })
    .as_object()
    .cloned()
    .unwrap_or_default();
    let task = tasks.task(id, t, TaskStatus::Failed, now);
    GetTaskResult::new(DetailedTask::new(task, TaskPayload::Failed { error }))
}

/// `tasks/get` of a forwarded task: the source's answer, under wf's id.
pub async fn get(
    tasks: &RunTasks,
    (id, t, up): (&str, &RunTask, &UpstreamTask),
    current: Option<Arc<SourceHandle>>,
) -> Result<GetTaskResult, McpError> {
    let Some(handle) = up.live(current) else {
        return Ok(lost(tasks, id, t, up));
    };
    match handle.get_task(&up.task_id).await {
        Ok(v) => serde_json::from_value(ours(v, id, tasks)?).map_err(|e| malformed(&up.source, &e)),
        Err(e) if e.code() == ErrorCode::StateLost => Ok(lost(tasks, id, t, up)),
        Err(e) => Err(source_error(e)),
    }
}

/// The answer to input for a task that asks for none.
pub(in crate::server::mcp) fn takes_no_input(id: &str) -> McpError {
    McpError::invalid_params(
        format!("task {id} takes no input (it has no input requests)"),
        Some(json!({"taskId": id})),
    )
}

/// `tasks/update` of a forwarded task: the client's `inputResponses`,
/// passed on to its source. A source whose plugin predates input for tasks
/// (plugin API < 1.4) or whose task asks for none: "takes no input".
pub async fn update(
    up: &UpstreamTask,
    id: &str,
    current: Option<Arc<SourceHandle>>,
    input_responses: Value,
) -> Result<(), McpError> {
    let Some(handle) = up.live(current) else {
        return Err(McpError::invalid_params(
            format!("task {id} was lost: {}", wf_plugin_api::STATE_LOST),
            Some(json!({"taskId": id, "source": up.source})),
        ));
    };
    match handle.update_task(&up.task_id, input_responses).await {
        Err(e) if e.code() == ErrorCode::Unsupported => Err(takes_no_input(id)),
        r => r.map_err(source_error),
    }
}

/// `tasks/cancel` of a forwarded task, passed on to its source.
pub async fn cancel(up: &UpstreamTask, current: Option<Arc<SourceHandle>>) -> Result<(), McpError> {
    // A lost task is already over: nothing to cancel.
    let Some(handle) = up.live(current) else {
        return Ok(());
    };
    match handle.cancel_task(&up.task_id).await {
        Err(e) if e.code() == ErrorCode::StateLost => Ok(()),
        r => r.map_err(source_error),
    }
}

#[cfg(test)]
mod tests {
    use std::sync::Weak;
    use std::time::Duration;

    use super::*;

    fn up(source: &str, id: &str) -> UpstreamTask {
        UpstreamTask {
            source: source.into(),
            task_id: id.into(),
            handle: Weak::new(),
        }
    }

    #[test]
    fn two_sources_same_upstream_id_never_collide_and_stay_their_principals() {
        let t = RunTasks::new(10, Duration::from_secs(60));
        let a = t.create_upstream("alice", up("one", "1"), 0).unwrap();
        let b = t.create_upstream("alice", up("two", "1"), 0).unwrap();
        assert_ne!(a, b);
        assert_eq!(
            t.get("alice", &a, 1).unwrap().upstream.unwrap().source,
            "one"
        );
        assert_eq!(
            t.get("alice", &b, 1).unwrap().upstream.unwrap().source,
            "two"
        );
        assert_eq!(t.get("bob", &a, 1), None);
        // The upstream's own id is no task of wf's.
        assert_eq!(t.get("alice", "1", 1), None);
        // Source tasks are not runs (the console lists runs).
        assert!(t.run_ids(1).is_empty());
    }

    #[test]
    fn source_tasks_count_against_the_principals_bound() {
        let t = RunTasks::new(1, Duration::from_secs(60));
        t.create_upstream("alice", up("one", "1"), 0).unwrap();
        assert_eq!(t.create("alice", "run-1", 0), Err(TooManyTasks(1)));
    }

    #[test]
    fn a_task_of_a_gone_source_instance_is_lost() {
        assert!(up("one", "1").live(None).is_none());
    }

    #[test]
    fn a_start_crosses_a_parked_round_as_json_unchanged() {
        // A start that asked for input first ends in a task of its own, and
        // its outcome reaches the request that resumed it as JSON (`mrtr`).
        let task: CreateTaskResult = serde_json::from_value(json!({
            "resultType": "task", "taskId": "wft-x", "status": "working",
            "createdAt": "2026-01-01T00:00:00Z", "lastUpdatedAt": "2026-01-01T00:00:00Z", "ttlMs": 5
        }))
        .unwrap();
        let back = |s: Start| -> Start {
            serde_json::from_value(serde_json::to_value(s).unwrap()).unwrap()
        };
        let Some(CallToolResponse::Task(t)) = back(Start::Task(task)).response() else {
            panic!("not a task");
        };
        assert_eq!(serde_json::to_value(t).unwrap()["taskId"], "wft-x");
        let done = CallToolResult::success(vec![]);
        assert!(matches!(
            back(Start::Complete(done)).response(),
            Some(CallToolResponse::Complete(_))
        ));
        assert!(back(Start::Declined).response().is_none());
    }

    #[test]
    fn the_client_sees_wfs_id_and_at_most_wfs_ttl() {
        let t = RunTasks::new(1, Duration::from_secs(60));
        let v = ours(
            json!({"taskId": "up-1", "status": "working", "ttlMs": 999_999_999}),
            "wft-x",
            &t,
        )
        .unwrap();
        assert_eq!(v["taskId"], "wft-x");
        assert_eq!(v["ttlMs"], 60_000);
        let v = ours(json!({"taskId": "up-1", "ttlMs": 5}), "wft-x", &t).unwrap();
        assert_eq!(v["ttlMs"], 5);
    }
}
