//! wf's MCP client handler: routes upstream progress notifications to the
//! call that asked for them, turns `list_changed` into a wf event, and sends
//! the upstream's requests for input (elicitation, sampling, roots) and its
//! log messages to the caller of the call they belong to (`Callers`).

#![allow(deprecated)] // rmcp marks sampling, roots and logging deprecated (SEP-2577); 2025-11-25 has them.

use std::sync::{Arc, PoisonError};

use rmcp::model::{
    ClientCapabilities, ClientConfig, CreateMessageRequestParams, CreateMessageResult,
    ElicitRequestParams, ElicitResult, ErrorCode as McpCode, Implementation, ListRootsResult,
    LoggingMessageNotificationParam, ProgressNotificationParam, ResourceUpdatedNotificationParam,
    Root,
};
use rmcp::service::{NotificationContext, RequestContext};
use rmcp::{ClientHandler, ErrorData as McpError, RoleClient};
use serde::de::DeserializeOwned;
use serde_json::{Value, json};
use wf_plugin_api::{CallerRequest, ErrorCode, PluginError};

use crate::session::callers::{self, Callers};
use crate::session::task_inputs::{self, TaskInputs};

/// Called when the upstream says its tools, prompts or resources changed.
pub type OnListChanged = Arc<dyn Fn() + Send + Sync>;

/// Called with the URI of a subscribed resource the upstream says changed.
pub type OnResourceUpdated = Arc<dyn Fn(String) + Send + Sync>;
/// Called with an upstream log message that belongs to no call (level, logger, data).
pub type OnLog = Arc<dyn Fn(String, Option<String>, Value) + Send + Sync>;

/// The roots wf was last given with a client's roots change
/// (`roots_list_changed`): the answer to an upstream's `roots/list` that no
/// call can take. None: no roots known, and such a `roots/list` gets none.
#[derive(Clone, Default)]
pub struct KnownRoots(Arc<std::sync::Mutex<Option<Vec<Root>>>>);

impl KnownRoots {
    pub fn set(&self, roots: Option<Vec<Root>>) {
        *self.0.lock().unwrap_or_else(PoisonError::into_inner) = roots;
    }

    fn get(&self) -> Vec<Root> {
        self.0
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .clone()
            .unwrap_or_default()
    }
}

#[derive(Clone)]
pub struct McpClient {
    pub progress: crate::session::progress::Progress,
    on_list_changed: Option<OnListChanged>,
    on_log: Option<OnLog>,
    /// Set when wf ended this session itself (an unattributable oversized
    /// message): why, for the calls that were waiting.
    pub broken: crate::transport::frames::Broken,
    /// HTTP: the requests whose reply stream was cut for size.
    pub cut: crate::transport::http::CutForSize,
    /// Each listed tool's `execution`, noted from the raw `tools/list` reply.
    pub executions: crate::transport::executions::Executions,
    /// stdio: wf's direct requests on the session's process (`transport::direct`).
    pub direct: crate::transport::direct::Slot,
    /// Log messages off the wire not yet delivered (`pending_logs`).
    pub logs: crate::session::pending_logs::PendingLogs,
    on_resource_updated: Option<OnResourceUpdated>,
    /// The calls in flight on this session, for requests the upstream sends back.
    pub callers: Callers,
    /// 2025-11-25 tasks whose requests wait for `tasks/update` (`task_inputs`).
    task_inputs: TaskInputs,
    /// For log lines.
    source: String,
    /// A one-shot discovery session: no call ever runs on it (see [`Self::one_shot`]).
    one_shot: bool,
    /// The answer to a `roots/list` outside any call.
    known_roots: KnownRoots,
    /// stdio: where the child's stdout is offered to the host's reactor.
    pub io_watch: Option<wf_plugin_api::io_watch::IoWatch>,
}

impl McpClient {
    pub fn new(on_list_changed: Option<OnListChanged>) -> Self {
        Self {
            progress: Default::default(),
            on_list_changed,
            on_log: None,
            broken: Default::default(),
            cut: Default::default(),
            executions: Default::default(),
            direct: Default::default(),
            logs: Default::default(),
            on_resource_updated: None,
            callers: Callers::default(),
            task_inputs: TaskInputs::default(),
            source: String::new(),
            one_shot: false,
            known_roots: KnownRoots::default(),
            io_watch: None,
        }
    }

    /// The client of a one-shot discovery session. It declares the same
    /// capabilities as the persistent session — some upstreams list tools
    /// only to a client that has them (server-everything's four
    /// elicitation, sampling and roots tools), so the discovered catalog
    /// must be listed with them — but no call ever runs on it, so nobody can
    /// be asked. A `roots/list` gets the empty list: a valid answer
    /// ("this client exposes no roots") that grants the upstream nothing and
    /// lives only as long as this session, where an error would be logged
    /// as a failure or retried. Elicitation and sampling are still refused:
    /// no answer could stand for a person's or a model's.
    pub fn one_shot() -> Self {
        Self {
            one_shot: true,
            ..Self::new(None)
        }
    }
    pub fn with_resource_updates(mut self, f: Option<OnResourceUpdated>) -> Self {
        self.on_resource_updated = f;
        self
    }
    /// Requests tied to these tasks wait for their answer in `inputs`.
    pub fn with_task_inputs(mut self, inputs: TaskInputs) -> Self {
        self.task_inputs = inputs;
        self
    }
    /// A stdio child's stdout is read by the host's reactor when it watches
    /// `watch`'s descriptors.
    pub fn with_io_watch(mut self, watch: Option<wf_plugin_api::io_watch::IoWatch>) -> Self {
        self.io_watch = watch;
        self
    }
    /// A `roots/list` outside any call is answered with `roots`.
    pub fn with_known_roots(mut self, roots: KnownRoots) -> Self {
        self.known_roots = roots;
        self
    }
    /// Log messages outside calls go to `on_log`; `source` names them in wf's log.
    pub fn with_log(mut self, source: &str, on_log: Option<OnLog>) -> Self {
        self.source = source.to_string();
        self.on_log = on_log;
        self
    }
    fn list_changed(&self) {
        if let Some(f) = &self.on_list_changed {
            f();
        }
    }

    /// Sends an upstream's request to the caller of the call it belongs to
    /// and returns the caller's answer (or the error the upstream gets).
    async fn ask<T: DeserializeOwned>(
        &self,
        method: &str,
        request: CallerRequest,
        context: &RequestContext<RoleClient>,
    ) -> Result<T, McpError> {
        let params = match &request {
            CallerRequest::Elicit { params } | CallerRequest::Sample { params } => params.clone(),
            _ => json!({}),
        };
        let meta = serde_json::to_value(&context.meta).unwrap_or(Value::Null);
        if let Some(task) = task_inputs::related_task(&meta, &params)
            && let Some(answer) = self.task_inputs.ask(&task, method, params).await
        {
            let answer = answer.map_err(|why| {
                McpError::internal_error(format!("{method} of a task: {why}"), None)
            })?;
            return serde_json::from_value(answer).map_err(|e| {
                McpError::internal_error(format!("the client's answer to {method}: {e}"), None)
            });
        }
        let origin = callers::origin(&context.extensions);
        let ctx = self.callers.route(origin.as_ref()).map_err(|why| {
            if self.callers.is_empty() {
                tracing::info!(source = %self.source, method, "upstream request refused: {why}");
            } else {
                tracing::warn!(source = %self.source, method, "upstream request refused: {why}");
            }
            McpError::internal_error(format!("wf cannot route {method} to a client: {why}"), None)
        })?;
        let answer = ctx
            .ask(&request)
            .await
            .map_err(|e| upstream_error(method, e))?;
        serde_json::from_value(answer).map_err(|e| {
            McpError::internal_error(format!("the client's answer to {method}: {e}"), None)
        })
    }
}

/// The JSON-RPC error an upstream gets when its request could not be
/// answered: the client's own error as it was, `method not found` when the
/// client cannot be asked that (the error a direct client without the
/// capability gives).
fn upstream_error(method: &str, e: PluginError) -> McpError {
    if let Some(mcp) = e
        .data
        .as_ref()
        .and_then(|d| d.get("mcp_error"))
        .and_then(|m| serde_json::from_value::<McpError>(m.clone()).ok())
    {
        return mcp;
    }
    match e.code {
        ErrorCode::Unsupported => McpError::new(McpCode::METHOD_NOT_FOUND, e.message, None),
        _ => McpError::internal_error(format!("{method}: {}", e.message), None),
    }
}

/// What wf can route to its clients: the capabilities it declares upstream.
/// Whether a particular client has them is checked per request.
pub(crate) fn routed_capabilities() -> ClientCapabilities {
    serde_json::from_value(json!({
        "elicitation": {"form": {}, "url": {}},
        "sampling": {"tools": {}},
        "roots": {},
    }))
    .unwrap_or_default()
}

impl ClientHandler for McpClient {
    fn get_info(&self) -> ClientConfig {
        let mut info = ClientConfig::default();
        info.capabilities = routed_capabilities();
        info.client_info = Implementation::new("wf", env!("CARGO_PKG_VERSION"));
        info
    }

    async fn create_elicitation(
        &self,
        request: ElicitRequestParams,
        context: RequestContext<RoleClient>,
    ) -> Result<ElicitResult, McpError> {
        let params = serde_json::to_value(request).unwrap_or(Value::Null);
        self.ask(
            "elicitation/create",
            CallerRequest::Elicit { params },
            &context,
        )
        .await
    }

    async fn create_message(
        &self,
        params: CreateMessageRequestParams,
        context: RequestContext<RoleClient>,
    ) -> Result<CreateMessageResult, McpError> {
        let params = serde_json::to_value(params).unwrap_or(Value::Null);
        self.ask(
            "sampling/createMessage",
            CallerRequest::Sample { params },
            &context,
        )
        .await
    }

    async fn list_roots(
        &self,
        context: RequestContext<RoleClient>,
    ) -> Result<ListRootsResult, McpError> {
        if self.one_shot {
            tracing::debug!(source = %self.source, "roots/list on a discovery session: answered with no roots");
            return Ok(ListRootsResult::new(Vec::new()));
        }
        // Asked with no call in flight (server-everything asks right after
        // `initialized`, and right after a client's roots change): no
        // client can be asked, and an error is logged upstream as a failure.
        // The answer is the roots the host passed with the last roots change
        // on this session (`roots_list_changed`), or, before any, the empty
        // list discovery gives: valid, granting nothing.
        let meta = serde_json::to_value(&context.meta).unwrap_or(Value::Null);
        if self.callers.is_empty() && task_inputs::related_task(&meta, &Value::Null).is_none() {
            tracing::debug!(source = %self.source, "roots/list with no call in flight: answered with the known roots");
            return Ok(ListRootsResult::new(self.known_roots.get()));
        }
        match self
            .ask("roots/list", CallerRequest::ListRoots, &context)
            .await
        {
            // Sent to a call that ended before its client answered (a late
            // request): it belonged to no call after all.
            Err(e) if e.message.contains("the call has ended") => {
                tracing::debug!(source = %self.source, "roots/list after its call ended: answered with the known roots");
                Ok(ListRootsResult::new(self.known_roots.get()))
            }
            r => r,
        }
    }

    async fn on_logging_message(
        &self,
        params: LoggingMessageNotificationParam,
        context: NotificationContext<RoleClient>,
    ) {
        let level = serde_json::to_value(params.level)
            .ok()
            .and_then(|v| v.as_str().map(str::to_string))
            .unwrap_or_else(|| "info".into());
        // Counted as delivered however it ends (`pending_logs`).
        struct Delivered<'a>(&'a crate::session::pending_logs::PendingLogs);
        impl Drop for Delivered<'_> {
            fn drop(&mut self) {
                self.0.delivered();
            }
        }
        let _delivered = Delivered(&self.logs);
        let origin = callers::origin(&context.extensions);
        match self.callers.route(origin.as_ref()) {
            Ok(ctx) => {
                let _ = ctx.log(&level, params.logger.as_deref(), params.data).await;
            }
            Err(_) if self.callers.is_empty() => {
                if let Some(f) = &self.on_log {
                    f(level, params.logger, params.data);
                }
            }
            // Several callers and nothing says whose it is: sending it to
            // any of them could leak another client's data.
            Err(why) => {
                tracing::debug!(source = %self.source, "upstream log message not forwarded: {why}")
            }
        }
    }

    async fn on_progress(
        &self,
        params: ProgressNotificationParam,
        _: NotificationContext<RoleClient>,
    ) {
        self.progress.handle_notification(params).await;
        // Counted off the wire like log messages (`pending_logs`).
        self.logs.delivered();
    }

    async fn on_tool_list_changed(&self, _: NotificationContext<RoleClient>) {
        self.list_changed();
    }

    async fn on_prompt_list_changed(&self, _: NotificationContext<RoleClient>) {
        self.list_changed();
    }

    async fn on_resource_list_changed(&self, _: NotificationContext<RoleClient>) {
        self.list_changed();
    }

    async fn on_resource_updated(
        &self,
        params: ResourceUpdatedNotificationParam,
        _: NotificationContext<RoleClient>,
    ) {
        if let Some(f) = &self.on_resource_updated {
            f(params.uri);
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn wf_declares_what_it_routes() {
        let caps = routed_capabilities();
        let e = caps.elicitation.expect("elicitation");
        assert!(e.form.is_some() && e.url.is_some());
        assert!(caps.sampling.and_then(|s| s.tools).is_some());
        assert!(caps.roots.is_some());
    }

    #[test]
    fn the_known_roots_are_the_last_given_and_none_forgets_them() {
        let known = KnownRoots::default();
        assert!(known.get().is_empty());
        let roots: Vec<Root> = serde_json::from_value(json!([{"uri": "file:///a"}])).unwrap();
        known.set(Some(roots));
        assert_eq!(known.get()[0].uri, "file:///a");
        known.set(None);
        assert!(known.get().is_empty());
    }

    #[test]
    fn a_client_without_the_capability_means_method_not_found_upstream() {
        let e = upstream_error("roots/list", PluginError::unsupported("no roots"));
        assert_eq!(e.code, McpCode::METHOD_NOT_FOUND);
        let own = McpError::invalid_params("bad form", None);
        let e = upstream_error(
            "elicitation/create",
            PluginError::failed("x").with_data(json!({"mcp_error": own})),
        );
        assert_eq!(e.code, McpCode::INVALID_PARAMS);
        assert_eq!(e.message, "bad form");
    }
}
