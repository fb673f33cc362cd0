//! Forwarding an upstream's MCP Tasks (SEP-2663): a call asked for as a task
//! declares the tasks extension upstream for that request only (and its
//! input-required rounds before the task go to the caller, as a plain call's
//! do), and an upstream that answers with a task handle gets its `tasks/get` and
//! `tasks/cancel` on the same session. A task outlives no session: once the
//! session it was started in is gone (the upstream restarted), the task is
//! `state_lost`.

use std::sync::PoisonError;

use rmcp::model::*;
use serde_json::{Map, Value};
use wf_plugin_api::{CallContext, ErrorCode, PluginError, TaskStart};

use super::{Runtime, convert, unexpected, with_epoch};
use crate::session::rounds::{self, Round};

/// The `_meta` of a request wf sends for a task (the call and the task's
/// methods): the capabilities wf always routes, plus the tasks extension.
fn task_meta() -> RequestMetaObject {
    let mut caps = crate::session::client::routed_capabilities();
    caps.extensions
        .get_or_insert_with(Default::default)
        .insert(TASKS_EXTENSION_ID.to_string(), Map::new());
    let mut meta = RequestMetaObject::new();
    meta.set_client_capabilities(caps);
    meta
}

impl Runtime {
    pub async fn call_tool_as_task(
        &self,
        name: &str,
        arguments: Map<String, Value>,
        ctx: &CallContext,
    ) -> Result<TaskStart, PluginError> {
        // An upstream that serves no tasks gets the plain call, which carries
        // the client's progress, cancellation and asks.
        let (peer, _, epoch) = self.peer(None).await?;
        if peer
            .peer_info()
            .is_some_and(|i| super::tasks_2025::legacy(i.protocol_version.as_str()))
        {
            return self
                .call_tool_as_legacy_task(name, arguments, ctx, epoch)
                .await;
        }
        if !peer
            .peer_info()
            .is_some_and(|i| i.capabilities.supports_tasks())
        {
            return Err(PluginError::unsupported("the upstream serves no tasks"));
        }
        let params = CallToolRequestParams::new(name.to_string()).with_arguments(arguments);
        // The upstream may ask in input-required rounds before it answers
        // with a task (or a result): the caller answers them, as in a plain call.
        rounds::drive(ctx, |responses, state| {
            let mut params = params.clone();
            (params.input_responses, params.request_state) = (responses, state);
            let req = ClientRequest::CallToolRequest(Request::new(params));
            async move {
                match self
                    .request_with(req, Some(ctx), Some(task_meta()), None)
                    .await?
                {
                    (ServerResult::CreateTaskResult(r), epoch) => {
                        self.started(&r, epoch).map(Round::Done)
                    }
                    (ServerResult::CallToolResult(r), epoch) => {
                        crate::runtime::tool_result::from_mcp(r)
                            .map(|r| Round::Done(TaskStart::Complete(with_epoch(r, epoch))))
                    }
                    (ServerResult::InputRequiredResult(r), _) => Ok(Round::Input(r)),
                    (other, _) => Err(unexpected("tools/call", &other)),
                }
            }
        })
        .await
        .map_err(|mut e| {
            // A caller that cannot answer a round is this call's failure:
            // `unsupported` would tell the host the source serves no tasks.
            if e.code == ErrorCode::Unsupported {
                e.code = ErrorCode::Failed;
            }
            e
        })
    }

    /// Notes the upstream's new task (in the session of `epoch`).
    fn started(&self, r: &CreateTaskResult, epoch: u64) -> Result<TaskStart, PluginError> {
        let task: Value = convert(r)?;
        let id = task
            .get("taskId")
            .and_then(Value::as_str)
            .ok_or_else(|| PluginError::upstream("a task without a taskId"))?;
        self.tasks
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .insert(id.to_string(), epoch);
        tracing::info!(source = %self.source, task = id, epoch, "upstream started a task");
        Ok(TaskStart::Task(task))
    }

    /// `call_tool_as_task` for an upstream spoken to at 2025-11-25.
    async fn call_tool_as_legacy_task(
        &self,
        name: &str,
        arguments: Map<String, Value>,
        ctx: &CallContext,
        epoch: u64,
    ) -> Result<TaskStart, PluginError> {
        if !self.serves_legacy_tasks(epoch).await {
            return Err(PluginError::unsupported("the upstream serves no tasks"));
        }
        match self.call_as_legacy_task(name, arguments, ctx).await? {
            (Ok(task), epoch) => {
                let id = task
                    .get("taskId")
                    .and_then(Value::as_str)
                    .ok_or_else(|| PluginError::upstream("a task without a taskId"))?
                    .to_string();
                self.tasks
                    .lock()
                    .unwrap_or_else(PoisonError::into_inner)
                    .insert(id.clone(), epoch);
                tracing::info!(source = %self.source, task = %id, epoch, "upstream started a 2025-11-25 task");
                self.legacy_tasks
                    .lock()
                    .unwrap_or_else(PoisonError::into_inner)
                    .insert(id);
                Ok(TaskStart::Task(task))
            }
            (Err(plain), epoch) => crate::runtime::tool_result::from_mcp(plain)
                .map(|r| TaskStart::Complete(with_epoch(r, epoch))),
        }
    }

    fn is_legacy_task(&self, task_id: &str) -> bool {
        self.legacy_tasks
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .contains(task_id)
    }

    /// The session epoch `task_id` lives in; `state_lost` if it is not ours.
    fn task_epoch(&self, task_id: &str) -> Result<u64, PluginError> {
        self.tasks
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .get(task_id)
            .copied()
            .ok_or_else(|| {
                PluginError::state_lost().with_data(serde_json::json!({"taskId": task_id}))
            })
    }

    pub async fn get_task(&self, task_id: &str, ctx: &CallContext) -> Result<Value, PluginError> {
        let epoch = self.task_epoch(task_id)?;
        if self.is_legacy_task(task_id) {
            return self.get_legacy_task(task_id, ctx, epoch).await;
        }
        let req = ClientRequest::GetTaskRequest(Request::new(GetTaskParams::new(task_id)));
        match self
            .request_with(req, Some(ctx), Some(task_meta()), Some(epoch))
            .await?
        {
            (ServerResult::GetTaskResult(r), _) => convert(&r),
            (other, _) => Err(unexpected("tasks/get", &other)),
        }
    }

    /// `tasks/update` (SEP-2663): the client's answers to the input the
    /// upstream's task asks for. A 2025-11-25 task asks within the session
    /// instead; its requests wait in `task_inputs` for these answers.
    pub async fn update_task(
        &self,
        task_id: &str,
        input_responses: Value,
        ctx: &CallContext,
    ) -> Result<(), PluginError> {
        let epoch = self.task_epoch(task_id)?;
        if self.is_legacy_task(task_id) {
            return self.update_legacy_task(task_id, input_responses);
        }
        let responses: InputResponses = serde_json::from_value(input_responses)
            .map_err(|e| PluginError::invalid_arguments(format!("inputResponses: {e}")))?;
        let req = ClientRequest::UpdateTaskRequest(Request::new(UpdateTaskParams::new(
            task_id, responses,
        )));
        self.request_with(req, Some(ctx), Some(task_meta()), Some(epoch))
            .await
            .map(|_| ())
    }

    pub async fn cancel_task(&self, task_id: &str, ctx: &CallContext) -> Result<(), PluginError> {
        let epoch = self.task_epoch(task_id)?;
        if self.is_legacy_task(task_id) {
            return self.cancel_legacy_task(task_id, ctx, epoch).await;
        }
        let req = ClientRequest::CancelTaskRequest(Request::new(CancelTaskParams::new(task_id)));
        self.request_with(req, Some(ctx), Some(task_meta()), Some(epoch))
            .await
            .map(|_| ())
    }
}
