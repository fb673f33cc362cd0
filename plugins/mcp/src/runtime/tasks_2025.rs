//! An upstream's tasks in the 2025-11-25 flavour (a session negotiated with
//! `initialize` at 2025-11-25): the call goes with `params.task`, and the
//! task's state is read with that revision's `tasks/get` and, once it ended,
//! `tasks/result`; both are turned into SEP-2663's shapes, which is what wf
//! speaks to its clients (and turns into 2025-11-25's again for its own
//! 2025-11-25 clients). rmcp's client types know only SEP-2663, so these go as
//! custom requests. Whether the upstream serves tasks at all is asked once
//! per session: rmcp's capability type drops 2025-11-25's `tasks` member, so
//! a `tasks/get` of an id nobody has tells (-32601: no tasks).

use rmcp::model::*;
use serde_json::{Map, Value, json};
use wf_plugin_api::{CallContext, PluginError};

use super::{Runtime, convert};

/// Whether a session of this protocol version speaks 2025-11-25's tasks.
pub(super) fn legacy(version: &str) -> bool {
    version < "2026-07-28"
}

/// A 2025-11-25 task as SEP-2663's (its `ttl` and `pollInterval` renamed).
pub(super) fn modern(task: &Value) -> Map<String, Value> {
    let mut out = Map::new();
    for (from, to) in [
        ("taskId", "taskId"),
        ("status", "status"),
        ("statusMessage", "statusMessage"),
        ("createdAt", "createdAt"),
        ("lastUpdatedAt", "lastUpdatedAt"),
        ("ttl", "ttlMs"),
        ("pollInterval", "pollIntervalMs"),
    ] {
        if let Some(v) = task.get(from) {
            out.insert(to.into(), v.clone());
        }
    }
    out.entry("ttlMs").or_insert(Value::Null);
    out
}

/// A reply of any shape, as JSON (rmcp's untagged result type picked a
/// variant for it; serialized back, the members are the upstream's).
fn json_of(r: &ServerResult) -> Result<Value, PluginError> {
    convert(r)
}

/// The JSON-RPC error code of the upstream's error reply, if it was one.
fn mcp_code(e: &PluginError) -> Option<i64> {
    e.data.as_ref()?.get("mcp_error")?.get("code")?.as_i64()
}

impl Runtime {
    async fn custom(
        &self,
        method: &str,
        params: Value,
        ctx: Option<&CallContext>,
        epoch: Option<u64>,
    ) -> Result<(Value, u64), PluginError> {
        let req = ClientRequest::CustomRequest(CustomRequest::new(method, Some(params)));
        let (r, epoch) = self.request_with(req, ctx, None, epoch).await?;
        Ok((json_of(&r)?, epoch))
    }

    /// Whether the upstream (this session) serves 2025-11-25 tasks: asked once.
    pub(super) async fn serves_legacy_tasks(&self, epoch: u64) -> bool {
        if let Some((e, serves)) = *self
            .legacy_tasks_probe
            .lock()
            .unwrap_or_else(|p| p.into_inner())
            && e == epoch
        {
            return serves;
        }
        // The probe's expected refusal is no error of the source's (status).
        let noted = self
            .last_error
            .lock()
            .unwrap_or_else(|p| p.into_inner())
            .clone();
        let probe = self
            .custom(
                "tasks/get",
                json!({"taskId": "wf-probe"}),
                None,
                Some(epoch),
            )
            .await;
        if probe.is_err() {
            *self.last_error.lock().unwrap_or_else(|p| p.into_inner()) = noted;
        }
        let serves = match &probe {
            Ok(_) => true,
            Err(e) => mcp_code(e) != Some(-32601),
        };
        tracing::debug!(source = %self.source, serves, "asked the upstream whether it serves 2025-11-25 tasks");
        *self
            .legacy_tasks_probe
            .lock()
            .unwrap_or_else(|p| p.into_inner()) = Some((epoch, serves));
        serves
    }

    /// A call with `params.task`: the upstream's task (SEP-2663's shape, with
    /// its epoch), or its plain result.
    pub(super) async fn call_as_legacy_task(
        &self,
        name: &str,
        arguments: Map<String, Value>,
        ctx: &CallContext,
    ) -> Result<(Result<Value, CallToolResult>, u64), PluginError> {
        let params = json!({"name": name, "arguments": arguments, "task": {}});
        let (v, epoch) = self.custom("tools/call", params, Some(ctx), None).await?;
        match v.get("task") {
            Some(task) => {
                let mut t = modern(task);
                t.insert("resultType".into(), json!("task"));
                Ok((Ok(Value::Object(t)), epoch))
            }
            None => Ok((Err(convert(&v)?), epoch)),
        }
    }

    /// `tasks/get`, and `tasks/result` once the task ended: SEP-2663's
    /// detailed task (with `result` or `error`).
    pub(super) async fn get_legacy_task(
        &self,
        task_id: &str,
        ctx: &CallContext,
        epoch: u64,
    ) -> Result<Value, PluginError> {
        let params = json!({"taskId": task_id});
        let (task, _) = self
            .custom("tasks/get", params.clone(), Some(ctx), Some(epoch))
            .await?;
        let mut out = modern(&task);
        match task.get("status").and_then(Value::as_str) {
            Some("completed") => {
                let (result, _) = self
                    .custom("tasks/result", params, Some(ctx), Some(epoch))
                    .await?;
                out.insert("result".into(), result);
            }
            Some("failed") => {
                // `tasks/result` of a failed task is the error the call failed with.
                let error = match self
                    .custom("tasks/result", params, Some(ctx), Some(epoch))
                    .await
                {
                    Err(e) => e
                        .data
                        .as_ref()
                        .and_then(|d| d.get("mcp_error"))
                        .cloned()
                        .unwrap_or_else(|| json!({"code": -32603, "message": e.message})),
                    Ok((v, _)) => json!({"code": -32603, "message": "the task failed", "data": v}),
                };
                out.insert("error".into(), error);
            }
            Some("input_required") => {
                self.wait_for_legacy_input(task_id, epoch).await?;
                let asked = self.task_inputs.requests(task_id);
                if asked.is_empty() {
                    // Its requests reach wf only once `tasks/result` waits;
                    // until they have, there is nothing to answer.
                    out.insert("status".into(), json!("working"));
                } else {
                    out.insert("inputRequests".into(), Value::Object(asked));
                }
            }
            _ => {}
        }
        if matches!(
            task.get("status").and_then(Value::as_str),
            Some("completed" | "failed" | "cancelled")
        ) {
            self.task_inputs.close(task_id);
        }
        Ok(Value::Object(out))
    }

    /// A task in `input_required` sends its requests while the client waits
    /// on `tasks/result` (2025-11-25): wf waits there for the client, once
    /// per task, so that the client handler can park them (`task_inputs`)
    /// for `tasks/get` to show and `tasks/update` to answer.
    async fn wait_for_legacy_input(&self, task_id: &str, epoch: u64) -> Result<(), PluginError> {
        if !self.task_inputs.open(task_id) {
            return Ok(());
        }
        let (peer, _, _) = match self.peer(Some(epoch)).await {
            Ok(p) => p,
            Err(e) => {
                self.task_inputs.close(task_id);
                return Err(e);
            }
        };
        let (inputs, id, source) = (
            self.task_inputs.clone(),
            task_id.to_owned(),
            self.source.clone(),
        );
        tokio::spawn(async move {
            let params = json!({"taskId": id});
            let req =
                ClientRequest::CustomRequest(CustomRequest::new("tasks/result", Some(params)));
            let outcome = peer.send_request(req).await;
            tracing::debug!(source, task = %id, ok = outcome.is_ok(), "waited on tasks/result for a task's input");
            inputs.close(&id);
        });
        Ok(())
    }

    /// `tasks/update` for a 2025-11-25 task: the answers go to the requests
    /// it parked (`wait_for_legacy_input`).
    pub(super) fn update_legacy_task(
        &self,
        task_id: &str,
        input_responses: Value,
    ) -> Result<(), PluginError> {
        let Value::Object(responses) = input_responses else {
            return Err(PluginError::invalid_arguments(
                "inputResponses must be an object",
            ));
        };
        self.task_inputs
            .answer(task_id, responses)
            .map_err(PluginError::invalid_arguments)
    }

    pub(super) async fn cancel_legacy_task(
        &self,
        task_id: &str,
        ctx: &CallContext,
        epoch: u64,
    ) -> Result<(), PluginError> {
        self.task_inputs.close(task_id);
        self.custom(
            "tasks/cancel",
            json!({"taskId": task_id}),
            Some(ctx),
            Some(epoch),
        )
        .await
        .map(|_| ())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_2025_task_in_sep_2663s_shape() {
        let t = modern(
            &json!({"taskId": "t", "status": "working", "createdAt": "a",
            "lastUpdatedAt": "b", "ttl": 60000, "pollInterval": 1000}),
        );
        assert_eq!(
            Value::Object(t),
            json!({"taskId": "t", "status": "working", "createdAt": "a",
                   "lastUpdatedAt": "b", "ttlMs": 60000, "pollIntervalMs": 1000})
        );
        assert!(legacy("2025-11-25") && legacy("2025-06-18") && !legacy("2026-07-28"));
    }
}
