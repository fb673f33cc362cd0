//! A typed handle on one source's ABI object.

use std::sync::Arc;
use std::sync::atomic::{AtomicUsize, Ordering};

use abi_stable::std_types::RString;
use serde::de::DeserializeOwned;
use serde_json::{Map, Value};
use wf_plugin_api::ffi::SourceBox;
use wf_plugin_api::{
    CallResult, Catalog, ErrorCode, GetPromptResult, PluginError, ReadResourceResult, SourceRequest,
};

use super::call::CallCtx;
use crate::telemetry::{metrics, traces};
use tracing::Instrument;

/// A source operation failed; the message always names the source.
#[derive(Debug, Clone, thiserror::Error)]
#[error("source {source_name:?}: {error}")]
pub struct SourceError {
    pub source_name: String,
    pub error: PluginError,
}

impl SourceError {
    pub fn code(&self) -> ErrorCode {
        self.error.code
    }
}

pub struct SourceHandle {
    pub name: String,
    pub kind: String,
    pub plugin: String,
    obj: Arc<SourceBox>,
    /// Calls (tools, nodes, resource reads, prompts) the host is waiting on.
    in_flight: Arc<AtomicUsize>,
}

impl SourceHandle {
    pub fn new(name: String, kind: String, plugin: String, obj: SourceBox) -> Self {
        Self {
            name,
            kind,
            plugin,
            obj: Arc::new(obj),
            in_flight: Arc::default(),
        }
    }

    /// Calls the host is waiting on now (a cancelled call stops counting at
    /// once, whatever the plugin's thread is doing).
    pub fn calls_in_flight(&self) -> usize {
        self.in_flight.load(Ordering::Relaxed)
    }

    fn err(&self, error: PluginError) -> SourceError {
        SourceError {
            source_name: self.name.clone(),
            error,
        }
    }

    /// Sends one request. Dropping the returned future cancels the call in the plugin.
    pub async fn request<T: DeserializeOwned>(
        &self,
        request: &SourceRequest,
        ctx: CallCtx,
    ) -> Result<T, SourceError> {
        let started = std::time::Instant::now();
        let result = self.send(request, ctx).await;
        self.record(request, outcome(&result), started.elapsed());
        result
    }

    async fn send<T: DeserializeOwned>(
        &self,
        request: &SourceRequest,
        ctx: CallCtx,
    ) -> Result<T, SourceError> {
        let text = serde_json::to_string(request)
            .map_err(|e| self.err(PluginError::internal(e.to_string())))?;
        let is_call = matches!(
            request,
            SourceRequest::CallTool { .. }
                | SourceRequest::RunNode { .. }
                | SourceRequest::ReadResource { .. }
                | SourceRequest::GetPrompt { .. }
        );
        // A call is traced as a child of the request; the plugin gets its context.
        let span = match (is_call, metrics::method_label(request)) {
            (true, Some(method)) => traces::source_span(&self.name, method, traced_name(request)),
            _ => tracing::Span::none(),
        };
        if let SourceRequest::CallTool { arguments, .. }
        | SourceRequest::RunNode {
            input: arguments, ..
        } = request
        {
            traces::record_arguments(&span, || crate::secrets::redact(&arguments.to_string()));
        }
        let ctx = ctx.with_trace(traces::info_of(&span));
        // Dropped when this future ends or is dropped (cancelled).
        let (ffi, _call) = ctx.into_ffi(
            is_call.then_some(&self.in_flight),
            is_call.then_some(&self.obj),
        );
        match self
            .obj
            .request(RString::from(text), ffi)
            .instrument(span)
            .await
            .into_result()
        {
            Ok(json) => serde_json::from_str(json.as_str()).map_err(|e| {
                self.err(PluginError::internal(format!(
                    "malformed plugin reply: {e}"
                )))
            }),
            Err(e) => {
                let mut error = PluginError::from_json(e.as_str());
                error.message = crate::secrets::redact(&error.message);
                Err(self.err(error))
            }
        }
    }

    /// Counts a call (not catalog or session requests) in the metrics.
    fn record(&self, request: &SourceRequest, outcome: &str, took: std::time::Duration) {
        let Some(method) = metrics::method_label(request) else {
            return;
        };
        let name = match request {
            SourceRequest::CallTool { name, .. }
            | SourceRequest::RunNode { name, .. }
            | SourceRequest::GetPrompt { name, .. } => name.as_str(),
            // URIs are unbounded; the source and method say enough.
            _ => "",
        };
        if outcome == ErrorCode::Panicked.as_str() {
            metrics::plugin_panic(&self.name);
        }
        metrics::source_call(&self.name, method, name, outcome, took);
    }

    pub async fn catalog(&self) -> Result<Catalog, SourceError> {
        self.request(&SourceRequest::Catalog, CallCtx::new()).await
    }

    pub async fn call_tool(
        &self,
        name: &str,
        arguments: Value,
        ctx: CallCtx,
    ) -> Result<CallResult, SourceError> {
        let request = SourceRequest::CallTool {
            name: name.into(),
            arguments,
        };
        let started = std::time::Instant::now();
        let result = self.send::<CallResult>(&request, ctx).await;
        // A tool that answered with an error result failed, for the operator.
        let outcome = match &result {
            Ok(r) if r.is_error => "tool_error",
            r => outcome(r),
        };
        self.record(&request, outcome, started.elapsed());
        result
    }

    pub async fn run_node(
        &self,
        name: &str,
        input: Value,
        ctx: CallCtx,
    ) -> Result<Value, SourceError> {
        self.request(
            &SourceRequest::RunNode {
                name: name.into(),
                input,
            },
            ctx,
        )
        .await
    }

    pub async fn read_resource(
        &self,
        uri: &str,
        ctx: CallCtx,
    ) -> Result<ReadResourceResult, SourceError> {
        self.request(&SourceRequest::ReadResource { uri: uri.into() }, ctx)
            .await
    }

    pub async fn get_prompt(
        &self,
        name: &str,
        arguments: Map<String, Value>,
        ctx: CallCtx,
    ) -> Result<GetPromptResult, SourceError> {
        self.request(
            &SourceRequest::GetPrompt {
                name: name.into(),
                arguments,
            },
            ctx,
        )
        .await
    }

    pub async fn list_resources(&self) -> Result<Vec<wf_plugin_api::Resource>, SourceError> {
        self.request(&SourceRequest::ListResources, CallCtx::new())
            .await
    }

    pub async fn list_resource_templates(
        &self,
    ) -> Result<Vec<wf_plugin_api::ResourceTemplate>, SourceError> {
        self.request(&SourceRequest::ListResourceTemplates, CallCtx::new())
            .await
    }

    pub async fn list_prompts(&self) -> Result<Vec<wf_plugin_api::Prompt>, SourceError> {
        self.request(&SourceRequest::ListPrompts, CallCtx::new())
            .await
    }

    /// Suggestions for a prompt's or template's argument; a source without
    /// completions (or predating them) suggests nothing.
    pub async fn complete(
        &self,
        params: wf_plugin_api::CompleteParams,
        ctx: CallCtx,
    ) -> Result<wf_plugin_api::Completion, SourceError> {
        match self.request(&SourceRequest::Complete(params), ctx).await {
            Err(e) if e.code() == wf_plugin_api::ErrorCode::Unsupported => Ok(Default::default()),
            r => r,
        }
    }

    pub async fn subscribe(&self, uri: &str) -> Result<(), SourceError> {
        self.request(
            &SourceRequest::Subscribe { uri: uri.into() },
            CallCtx::new(),
        )
        .await
    }

    pub async fn unsubscribe(&self, uri: &str) -> Result<(), SourceError> {
        self.request(
            &SourceRequest::Unsubscribe { uri: uri.into() },
            CallCtx::new(),
        )
        .await
    }

    pub async fn status(&self) -> Value {
        self.request(&SourceRequest::Status, CallCtx::new())
            .await
            .unwrap_or(Value::Null)
    }

    pub async fn shutdown(&self) {
        self.obj.shutdown().await
    }
}

/// A call's outcome label: `ok` or the error code.
fn outcome<T>(result: &Result<T, SourceError>) -> &'static str {
    match result {
        Ok(_) => "ok",
        Err(e) => e.code().as_str(),
    }
}

/// The name a call's span carries: the tool, node or prompt (URIs can hold
/// anything and are left out).
fn traced_name(request: &SourceRequest) -> &str {
    match request {
        SourceRequest::CallTool { name, .. }
        | SourceRequest::RunNode { name, .. }
        | SourceRequest::GetPrompt { name, .. } => name.as_str(),
        _ => "",
    }
}
