//! The 2025-11-25 flavour of MCP Tasks, served beside SEP-2663's: a
//! task-augmented `tools/call` (`params.task`), `tasks/get`, `tasks/result`,
//! `tasks/list`, `tasks/cancel` and `notifications/tasks/status`, for clients
//! that negotiated 2025-11-25. rmcp speaks only SEP-2663, so these requests
//! reach wf renamed (`jsonrpc::TASKS_2025_PREFIX`) and are answered here from
//! the same task table, in 2025-11-25's shapes (a flat `Task` with `ttl` and
//! `pollInterval`; `tasks/result` waits for the end and gives the tool's
//! result). 2026-07-28 has no `tasks/list` or `tasks/result`: the extension
//! inlines the result in `tasks/get`.

use std::sync::Arc;

use rmcp::ErrorData as McpError;
use rmcp::model::{
    CustomNotification, ErrorCode, GetTaskResult, ServerNotification, Task, TaskPayload, TaskStatus,
};
use rmcp::{Peer, RoleServer};
use serde_json::{Map, Value, json};
use tokio_util::sync::CancellationToken;

use super::state::{self as task_state, terminal};
use crate::app::App;
use crate::server::jsonrpc::TASKS_2025_PREFIX;
use crate::server::mcp::Surfaces;

/// The `_meta` key that ties a message to its task.
pub const RELATED_TASK_META: &str = "io.modelcontextprotocol/related-task";
/// The status notification's method.
pub const STATUS_NOTIFICATION: &str = "notifications/tasks/status";

/// A `tools/call` a 2025-11-25 client augmented with `task` (in the request
/// context's extensions): the call path serves it as a task.
#[derive(Debug, Clone, Copy)]
pub(in crate::server::mcp) struct Augmented;

/// The 2025-11-25 task methods.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(in crate::server::mcp) enum Method {
    Call,
    Get,
    Result,
    List,
    Cancel,
}

impl Method {
    /// The method a renamed custom request stands for.
    pub(in crate::server::mcp) fn of(custom: &str) -> Option<Self> {
        Some(match custom.strip_prefix(TASKS_2025_PREFIX)? {
            "tools/call" => Self::Call,
            "tasks/get" => Self::Get,
            "tasks/result" => Self::Result,
            "tasks/list" => Self::List,
            "tasks/cancel" => Self::Cancel,
            _ => return None,
        })
    }

    /// Its name (for metrics).
    pub(in crate::server::mcp) fn name(self) -> &'static str {
        match self {
            Self::Call => "tools/call",
            Self::Get => "tasks/get",
            Self::Result => "tasks/result",
            Self::List => "tasks/list",
            Self::Cancel => "tasks/cancel",
        }
    }
}

/// A task in 2025-11-25's shape.
pub(in crate::server::mcp) fn flat(task: &Task) -> Value {
    let mut v = json!({
        "taskId": task.task_id,
        "status": task.status,
        "createdAt": task.created_at,
        "lastUpdatedAt": task.last_updated_at,
        "ttl": task.ttl_ms,
    });
    if let Some(m) = &task.status_message {
        v["statusMessage"] = json!(m);
    }
    if let Some(p) = task.poll_interval_ms {
        v["pollInterval"] = json!(p);
    }
    v
}

/// The `taskId` of a request's params.
pub(in crate::server::mcp) fn task_id(params: Option<&Value>) -> Result<String, McpError> {
    params
        .and_then(|p| p.get("taskId"))
        .and_then(Value::as_str)
        .map(str::to_string)
        .ok_or_else(|| McpError::invalid_params("taskId is required", None))
}

/// `tasks/get`: the task, without its payload.
pub(in crate::server::mcp) async fn get(
    app: &App,
    surfaces: &Surfaces,
    principal: &str,
    id: &str,
) -> Result<Value, McpError> {
    let state = task_state::of(app, surfaces, principal, id).await?;
    Ok(flat(&state.task.task))
}

/// `tasks/result`: waits until the task ends, then its result (the tool's
/// result, tied to the task in `_meta`), or the error it failed with. A task
/// that needs input meanwhile (a source's task in `input_required`) asks the
/// client here, as 2025-11-25 has it: each request goes to the client tied to
/// the task, and its answer goes back to the task as a `tasks/update` would.
pub(in crate::server::mcp) async fn result(
    app: &App,
    surfaces: &Surfaces,
    (principal, id): (&str, &str),
    peer: &Peer<RoleServer>,
    gone: &CancellationToken,
) -> Result<Value, McpError> {
    let mut asked = std::collections::HashSet::new();
    loop {
        let state = task_state::of(app, surfaces, principal, id).await?;
        let mut again = task_state::next_look(&state);
        match state.task.payload {
            TaskPayload::InputRequired { input_requests } => {
                for (key, request) in input_requests {
                    if !asked.insert(key.clone()) {
                        continue;
                    }
                    let answer = tokio::select! {
                        a = ask_for_task(peer, id, request) => a?,
                        () = gone.cancelled() => {
                            return Err(McpError::internal_error("cancelled by the client", None));
                        }
                    };
                    let answers = json!({ key: answer });
                    task_state::update(app, surfaces, principal, id, answers).await?;
                    again = std::time::Duration::ZERO;
                }
            }
            TaskPayload::Completed { mut result } => {
                let meta = result
                    .entry("_meta")
                    .or_insert_with(|| Value::Object(Map::new()));
                if let Some(meta) = meta.as_object_mut() {
                    meta.insert(RELATED_TASK_META.into(), json!({"taskId": id}));
                }
                return Ok(Value::Object(result));
            }
            TaskPayload::Failed { error } => return Err(error_of(&error)),
            TaskPayload::Cancelled => {
                return Err(McpError::new(
                    ErrorCode::INTERNAL_ERROR,
                    format!("task {id} was cancelled"),
                    Some(json!({"taskId": id, "status": "cancelled"})),
                ));
            }
            _ => {}
        }
        tokio::select! {
            () = tokio::time::sleep(again) => {}
            () = gone.cancelled() => {
                return Err(McpError::internal_error("cancelled by the client", None));
            }
        }
    }
}

/// One of a task's input requests, sent to the client tied to the task (by
/// wf's id); the client's answer.
async fn ask_for_task(
    peer: &Peer<RoleServer>,
    id: &str,
    request: rmcp::model::InputRequest,
) -> Result<Value, McpError> {
    let mut msg = serde_json::to_value(&request)
        .map_err(|e| McpError::internal_error(e.to_string(), None))?;
    let method = msg
        .get("method")
        .and_then(Value::as_str)
        .unwrap_or_default()
        .to_owned();
    let params = msg.get("params").cloned().unwrap_or(Value::Null);
    let asking = match method.as_str() {
        "elicitation/create" => wf_plugin_api::CallerRequest::Elicit { params },
        "sampling/createMessage" => wf_plugin_api::CallerRequest::Sample { params },
        _ => wf_plugin_api::CallerRequest::ListRoots,
    };
    let info = peer.peer_info();
    if let Some(why) = crate::server::mcp::caller::missing_capability(
        info.as_ref().map(|i| &i.capabilities),
        &asking,
    ) {
        return Err(McpError::invalid_request(
            format!("task {id} asks for {method}, but {why}"),
            Some(json!({"taskId": id, "status": "input_required"})),
        ));
    }
    if let Some(params) = msg.get_mut("params").and_then(Value::as_object_mut) {
        let meta = params.entry("_meta").or_insert_with(|| json!({}));
        if let Some(meta) = meta.as_object_mut() {
            meta.insert(RELATED_TASK_META.into(), json!({"taskId": id}));
        }
    } else {
        msg["params"] = json!({"_meta": {RELATED_TASK_META: {"taskId": id}}});
    }
    let request: rmcp::model::ServerRequest = serde_json::from_value(msg).map_err(|e| {
        McpError::internal_error(format!("task {id}'s {method} request: {e}"), None)
    })?;
    match peer.send_request(request).await {
        Ok(answer) => {
            serde_json::to_value(answer).map_err(|e| McpError::internal_error(e.to_string(), None))
        }
        Err(rmcp::service::ServiceError::McpError(e)) => Err(e),
        Err(e) => Err(McpError::internal_error(
            format!("asking the client for task {id}'s input failed: {e}"),
            None,
        )),
    }
}

/// A task's JSON-RPC error object as an error reply.
fn error_of(error: &Map<String, Value>) -> McpError {
    let code = error
        .get("code")
        .and_then(Value::as_i64)
        .and_then(|c| i32::try_from(c).ok())
        .unwrap_or(ErrorCode::INTERNAL_ERROR.0);
    let message = error
        .get("message")
        .and_then(Value::as_str)
        .unwrap_or("the task failed")
        .to_string();
    McpError::new(ErrorCode(code), message, error.get("data").cloned())
}

/// `tasks/list`: `principal`'s tasks, oldest first, a page at a time (the
/// cursor is the offset of the next page).
pub(in crate::server::mcp) async fn list(
    app: &App,
    surfaces: &Surfaces,
    principal: &str,
    (cursor, size): (Option<&str>, usize),
) -> Result<Value, McpError> {
    let ids = surfaces.tasks.ids_of(principal, crate::clock::now_ms());
    let from = match cursor {
        None => 0,
        Some(c) => c
            .parse::<usize>()
            .ok()
            .filter(|&n| n <= ids.len())
            .ok_or_else(|| McpError::invalid_params(format!("invalid cursor {c:?}"), None))?,
    };
    let size = size.max(1);
    let mut tasks = Vec::new();
    for id in ids.iter().skip(from).take(size) {
        // One that expired meanwhile is simply not listed.
        if let Ok(state) = task_state::of(app, surfaces, principal, id).await {
            tasks.push(flat(&state.task.task));
        }
    }
    let mut page = json!({"tasks": tasks});
    if from + size < ids.len() {
        page["nextCursor"] = json!((from + size).to_string());
    }
    Ok(page)
}

/// `tasks/cancel`: cancels a task that has not ended (one that has is an
/// invalid request, as 2025-11-25 says) and answers it `cancelled`.
pub(in crate::server::mcp) async fn cancel(
    app: &App,
    surfaces: &Surfaces,
    principal: &str,
    id: &str,
) -> Result<Value, McpError> {
    let state = task_state::of(app, surfaces, principal, id).await?;
    let status = state.task.status();
    if terminal(status) {
        return Err(McpError::invalid_params(
            format!("cannot cancel task {id}: it is already {}", json!(status)),
            Some(json!({"taskId": id})),
        ));
    }
    task_state::cancel(app, surfaces, principal, id).await?;
    let mut task = state.task.task;
    task.status = TaskStatus::Cancelled;
    task.last_updated_at = super::iso8601(crate::clock::now_ms());
    Ok(flat(&task))
}

/// The reply to a task-augmented call: 2025-11-25's `CreateTaskResult`.
pub(in crate::server::mcp) fn created(task: &Task, meta: Option<Value>) -> Value {
    let mut v = json!({"task": flat(task)});
    if let Some(meta) = meta {
        v["_meta"] = meta;
    }
    v
}

/// Sends `notifications/tasks/status` to `peer` whenever task `id` changes
/// status, until it ends, expires, or the client is gone.
pub(in crate::server::mcp) fn notify_status(
    room: (Arc<App>, Surfaces),
    principal: String,
    id: String,
    peer: Peer<RoleServer>,
) {
    let send = move |state: GetTaskResult| {
        let peer = peer.clone();
        async move {
            let n = CustomNotification::new(STATUS_NOTIFICATION, Some(flat(&state.task.task)));
            let sent = peer
                .send_notification(ServerNotification::CustomNotification(n))
                .await;
            sent.is_ok() && !peer.is_transport_closed()
        }
    };
    // Nothing ends it but the task or the client.
    task_state::watch(room, (principal, id), false, CancellationToken::new(), send);
}

/// 2025-11-25's `tasks` server capability: `tasks/list`, `tasks/cancel`,
/// and task-augmented `tools/call`.
fn capability() -> Value {
    json!({"list": {}, "cancel": {}, "requests": {"tools": {"call": {}}}})
}

/// Where a listed tool's 2025-11-25 `execution` travels from the handler to
/// [`declare`] (rmcp's `Tool` has no `execution` member).
const EXECUTION_META: &str = "wf/execution";

/// Puts a tool's `execution` (`taskSupport`: may it be called as a task)
/// into its `_meta`, for [`declare`] to move where 2025-11-25 clients read it.
pub fn carry_execution(tool: &mut rmcp::model::Tool, extra: &serde_json::Map<String, Value>) {
    let Some(execution) = extra.get("execution").filter(|e| e.is_object()) else {
        return;
    };
    tool.meta
        .get_or_insert_with(Default::default)
        .0
        .insert(EXECUTION_META.into(), execution.clone());
}

/// A `tools/list` reply's tools with their `execution` where it was carried
/// (see [`carry_execution`]); whether any was.
fn place_execution(result: &mut Value) -> bool {
    let Some(tools) = result.get_mut("tools").and_then(Value::as_array_mut) else {
        return false;
    };
    let mut placed = false;
    for tool in tools.iter_mut().filter_map(Value::as_object_mut) {
        let Some(meta) = tool.get_mut("_meta").and_then(Value::as_object_mut) else {
            continue;
        };
        let Some(execution) = meta.remove(EXECUTION_META) else {
            continue;
        };
        if meta.is_empty() {
            tool.remove("_meta");
        }
        tool.insert("execution".into(), execution);
        placed = true;
    }
    placed
}

/// [`declare`] for a session's reply stream: only a `tools/list` reply is
/// looked at (and copied).
pub fn declare_sse(
    mut m: rmcp::transport::streamable_http_server::session::ServerSseMessage,
) -> rmcp::transport::streamable_http_server::session::ServerSseMessage {
    use rmcp::model::{JsonRpcMessage, ServerResult};
    if let Some(message) = &m.message
        && let JsonRpcMessage::Response(r) = &**message
        && matches!(r.result, ServerResult::ListToolsResult(_))
    {
        m.message = Some(std::sync::Arc::new(declare((**message).clone())));
    }
    m
}

/// An `initialize` reply with 2025-11-25's `tasks` capability added (rmcp's
/// `ServerCapabilities` has no such member), and a `tools/list` reply with
/// each tool's `execution` in place; any other message unchanged.
pub fn declare(message: rmcp::model::ServerJsonRpcMessage) -> rmcp::model::ServerJsonRpcMessage {
    use rmcp::model::{JsonRpcMessage, ServerResult};
    match message {
        JsonRpcMessage::Response(mut r) if matches!(r.result, ServerResult::ListToolsResult(_)) => {
            if let Ok(mut v) = serde_json::to_value(&r.result)
                && place_execution(&mut v)
            {
                r.result = ServerResult::CustomResult(rmcp::model::CustomResult(v));
            }
            JsonRpcMessage::Response(r)
        }
        JsonRpcMessage::Response(mut r)
            if matches!(r.result, ServerResult::InitializeResult(_)) =>
        {
            if let Ok(mut v) = serde_json::to_value(&r.result) {
                if let Some(caps) = v.get_mut("capabilities").and_then(Value::as_object_mut) {
                    caps.insert("tasks".into(), capability());
                }
                r.result = ServerResult::CustomResult(rmcp::model::CustomResult(v));
            }
            JsonRpcMessage::Response(r)
        }
        other => other,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn methods_come_renamed() {
        assert_eq!(Method::of("wf/2025-11-25/tasks/list"), Some(Method::List));
        assert_eq!(Method::of("wf/2025-11-25/tools/call"), Some(Method::Call));
        assert_eq!(Method::of("tasks/list"), None);
        assert_eq!(Method::of("wf/2025-11-25/tasks/update"), None);
    }

    #[test]
    fn a_task_in_2025_11_25s_shape() {
        let t = Task::new("wft-1", TaskStatus::InputRequired, "a", "b")
            .with_ttl_ms(60_000)
            .with_poll_interval_ms(500);
        assert_eq!(
            flat(&t),
            json!({"taskId": "wft-1", "status": "input_required", "createdAt": "a",
                   "lastUpdatedAt": "b", "ttl": 60_000, "pollInterval": 500})
        );
    }

    #[test]
    fn initialize_declares_2025s_tasks_capability() {
        use rmcp::model::{
            InitializeResult, JsonRpcMessage, RequestId, ServerCapabilities, ServerResult,
        };
        let init = ServerResult::InitializeResult(InitializeResult::new(
            ServerCapabilities::builder().enable_tools().build(),
        ));
        let m = declare(JsonRpcMessage::response(init, RequestId::Number(1)));
        let v = serde_json::to_value(&m).unwrap();
        assert_eq!(
            v["result"]["capabilities"]["tasks"]["requests"]["tools"]["call"],
            json!({})
        );
        assert!(v["result"]["capabilities"]["tools"].is_object(), "{v}");
        let other = JsonRpcMessage::response(ServerResult::empty(()), RequestId::Number(2));
        let v = serde_json::to_value(declare(other)).unwrap();
        assert!(v["result"].get("capabilities").is_none(), "{v}");
    }

    #[test]
    fn a_listed_tools_execution_is_put_where_2025_clients_read_it() {
        use rmcp::model::{JsonRpcMessage, ListToolsResult, RequestId, ServerResult, Tool};
        let schema = std::sync::Arc::new(serde_json::Map::new());
        let mut runs = Tool::new_with_raw("run", None, schema.clone());
        let extra = json!({"execution": {"taskSupport": "optional"}});
        carry_execution(&mut runs, extra.as_object().unwrap());
        let mut tagged = Tool::new_with_raw("tagged", None, schema.clone());
        tagged.meta = Some(rmcp::model::MetaObject(
            json!({"k": 1}).as_object().unwrap().clone(),
        ));
        carry_execution(&mut tagged, extra.as_object().unwrap());
        let plain = Tool::new_with_raw("plain", None, schema);
        let list = ListToolsResult::with_all_items(vec![runs, tagged, plain]);
        let m = declare(JsonRpcMessage::response(
            ServerResult::ListToolsResult(list),
            RequestId::Number(1),
        ));
        let v = serde_json::to_value(&m).unwrap();
        let tools = v["result"]["tools"].as_array().unwrap();
        assert_eq!(tools[0]["execution"], json!({"taskSupport": "optional"}));
        assert!(tools[0].get("_meta").is_none(), "{v}");
        assert_eq!(tools[1]["execution"]["taskSupport"], "optional");
        assert_eq!(tools[1]["_meta"], json!({"k": 1}), "other _meta stays");
        assert!(tools[2].get("execution").is_none(), "{v}");
        // A list with nothing carried is passed on as it was.
        let list = ListToolsResult::with_all_items(vec![]);
        let m = declare(JsonRpcMessage::response(
            ServerResult::ListToolsResult(list),
            RequestId::Number(2),
        ));
        assert!(matches!(
            m,
            JsonRpcMessage::Response(r) if matches!(r.result, ServerResult::ListToolsResult(_))
        ));
    }

    #[test]
    fn a_tasks_error_becomes_the_reply() {
        let e = error_of(
            json!({"code": -32602, "message": "bad", "data": {"x": 1}})
                .as_object()
                .unwrap(),
        );
        assert_eq!((e.code.0, e.message.as_ref()), (-32602, "bad"));
        assert_eq!(e.data, Some(json!({"x": 1})));
    }
}
