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
    /// Why the source needs a login, from the last call or discovery that
    /// failed for it (see `login_needed`).
    login: std::sync::Mutex<Option<String>>,
    /// The source answered `call_tool_as_task` `unsupported` once: it serves
    /// no tasks (this instance; a reload makes a new one), so a task-declaring
    /// client's calls skip the question and make the plain call at once.
    no_tasks: std::sync::atomic::AtomicBool,
    /// Tools the hold stage keeps out, with what their calls are told
    /// (`tool_pins`): every caller (proxy, planner, workflow nodes) meets it here.
    held: std::sync::RwLock<Arc<std::collections::HashMap<String, String>>>,
    /// `subscriptions/listen` set-ups under way on this source: its tool
    /// calls wait for them (see `listen_gate`).
    pub listens: super::listen_gate::ListenGate,
    /// The watch of the descriptors the source offers this host's reactor
    /// (`io_watch`), stopped with the source.
    #[cfg(unix)]
    _io_watch: Option<super::io_watch::Stop>,
}

/// The mcp plugin's word for "a person must log in" (plugins/mcp/src/oauth.rs).
const NEEDS_LOGIN: &str = "needs_login:";

impl SourceHandle {
    pub fn new(name: String, kind: String, plugin: String, obj: SourceBox) -> Self {
        Self {
            name,
            kind,
            plugin,
            obj: Arc::new(obj),
            in_flight: Arc::default(),
            login: Default::default(),
            no_tasks: Default::default(),
            held: Default::default(),
            listens: Default::default(),
            #[cfg(unix)]
            _io_watch: None,
        }
    }

    /// Lets this host's reactor watch the descriptors the source offers
    /// (`io_watch`): only for a source in this process, whose descriptors
    /// are this process's.
    pub fn with_io_watch(mut self) -> Self {
        #[cfg(unix)]
        {
            self._io_watch = super::io_watch::start(self.name.clone(), self.obj.clone());
        }
        self
    }

    /// Sets the tools whose calls are refused (see `tool_pins`).
    pub fn set_held(&self, held: std::collections::HashMap<String, String>) {
        *self
            .held
            .write()
            .unwrap_or_else(std::sync::PoisonError::into_inner) = Arc::new(held);
    }

    /// The hold stage: a held tool (or its node) is refused before the call.
    /// No allocation when nothing is held: one lookup.
    fn hold(&self, name: &str) -> Option<SourceError> {
        let held = self
            .held
            .read()
            .unwrap_or_else(std::sync::PoisonError::into_inner);
        held.get(name)
            .map(|why| self.err(PluginError::failed(why.clone())))
    }

    /// Why the source needs a login, when its last call or discovery failed
    /// with the plugin's `needs_login` (an OAuth token refused mid-session).
    /// A later success (after `wf auth login`) clears it.
    pub fn login_needed(&self) -> Option<String> {
        self.login
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner)
            .clone()
    }

    /// Notes the outcome of a request that reached the upstream.
    fn note_login(&self, request: &SourceRequest, error: Option<&PluginError>) {
        // Only requests that reach the upstream tell whether its token works.
        if !matches!(
            request,
            SourceRequest::Catalog
                | SourceRequest::CallTool { .. }
                | SourceRequest::RunNode { .. }
                | SourceRequest::ReadResource { .. }
                | SourceRequest::GetPrompt { .. }
                | SourceRequest::ListResources
                | SourceRequest::ListResourceTemplates
                | SourceRequest::ListPrompts
                | SourceRequest::OpenSession { .. }
        ) {
            return;
        }
        let mut login = self
            .login
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner);
        match error {
            None => *login = None,
            Some(e) if e.message.contains(NEEDS_LOGIN) => {
                if login.is_none() {
                    tracing::warn!(source = %self.name, "the source needs a login: {}", e.message);
                }
                *login = Some(e.message.clone());
            }
            Some(_) => {}
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
        // A task's start may ask its caller too (rounds before the task).
        let asks = is_call || matches!(request, SourceRequest::CallToolAsTask { .. });
        // Dropped when this future ends or is dropped (cancelled).
        let (ffi, _call) = ctx.into_ffi(
            is_call.then_some(&self.in_flight),
            asks.then_some(&self.obj),
        );
        let reply = self
            .obj
            .request(RString::from(text), ffi)
            .instrument(span)
            .await
            .into_result();
        match reply {
            Ok(json) => {
                self.note_login(request, None);
                serde_json::from_str(json.as_str()).map_err(|e| {
                    self.err(PluginError::internal(format!(
                        "malformed plugin reply: {e}"
                    )))
                })
            }
            Err(e) => {
                let mut error = PluginError::from_json(e.as_str());
                error.message = crate::secrets::redact(&error.message);
                self.note_login(request, Some(&error));
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
        if let Some(held) = self.hold(name) {
            return Err(held);
        }
        self.listens.passed().await;
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

    /// Since plugin API 1.3: `name` called as a task (MCP Tasks). A plugin
    /// that predates it answers `unsupported`.
    pub async fn call_tool_as_task(
        &self,
        name: &str,
        arguments: Value,
        ctx: CallCtx,
    ) -> Result<wf_plugin_api::TaskStart, SourceError> {
        use std::sync::atomic::Ordering::Relaxed;
        if let Some(held) = self.hold(name) {
            return Err(held);
        }
        if self.no_tasks.load(Relaxed) {
            return Err(self.err(PluginError::unsupported("this source serves no tasks")));
        }
        self.listens.passed().await;
        let request = SourceRequest::CallToolAsTask {
            name: name.into(),
            arguments,
        };
        let r = self.request(&request, ctx).await;
        if matches!(&r, Err(e) if e.code() == ErrorCode::Unsupported) {
            self.no_tasks.store(true, Relaxed);
        }
        r
    }

    /// A task's state (MCP `tasks/get` result JSON), by the source's task id.
    pub async fn get_task(&self, task_id: &str) -> Result<Value, SourceError> {
        let request = SourceRequest::GetTask {
            task_id: task_id.into(),
        };
        self.request(&request, CallCtx::new()).await
    }

    /// Gives one of the source's tasks the client's answers to its input
    /// requests (MCP `tasks/update`'s `inputResponses`).
    pub async fn update_task(
        &self,
        task_id: &str,
        input_responses: Value,
    ) -> Result<(), SourceError> {
        let request = SourceRequest::UpdateTask {
            task_id: task_id.into(),
            input_responses,
        };
        self.request::<Value>(&request, CallCtx::new())
            .await
            .map(|_| ())
    }

    /// Asks the source to cancel one of its tasks.
    pub async fn cancel_task(&self, task_id: &str) -> Result<(), SourceError> {
        let request = SourceRequest::CancelTask {
            task_id: task_id.into(),
        };
        self.request::<Value>(&request, CallCtx::new())
            .await
            .map(|_| ())
    }

    pub async fn run_node(
        &self,
        name: &str,
        input: Value,
        ctx: CallCtx,
    ) -> Result<Value, SourceError> {
        if let Some(held) = self.hold(name) {
            return Err(held);
        }
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

    /// Asks for updates of `uri` on `lease`'s session (none: the shared one).
    pub async fn subscribe(&self, uri: &str, lease: Option<&str>) -> Result<(), SourceError> {
        let request = SourceRequest::Subscribe { uri: uri.into() };
        self.request(&request, on_session(lease)).await
    }

    pub async fn unsubscribe(&self, uri: &str, lease: Option<&str>) -> Result<(), SourceError> {
        let request = SourceRequest::Unsubscribe { uri: uri.into() };
        self.request(&request, on_session(lease)).await
    }

    /// Tells `lease`'s session (none: the shared one) that the client it acts
    /// for changed its roots; `roots` (the client's new `roots` array, when
    /// wf could ask it) go along in the info JSON (key `roots`), for the
    /// upstream's `roots/list` outside any call. A source that does not care
    /// is fine.
    pub async fn roots_list_changed(
        &self,
        lease: Option<&str>,
        roots: Option<&Value>,
    ) -> Result<(), SourceError> {
        let mut info = Map::new();
        if let Some(lease) = lease {
            info.insert("scope".into(), serde_json::json!({"lease": lease}));
        }
        if let Some(roots) = roots {
            info.insert("roots".into(), roots.clone());
        }
        let ctx = match info.is_empty() {
            true => CallCtx::new(),
            false => CallCtx::new().with_info(Value::Object(info)),
        };
        match self.request(&SourceRequest::RootsListChanged, ctx).await {
            Err(e) if e.code() == wf_plugin_api::ErrorCode::Unsupported => Ok(()),
            r => r,
        }
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

/// A context naming `lease`'s session in its info's `scope`, as for calls.
fn on_session(lease: Option<&str>) -> CallCtx {
    match lease {
        Some(lease) => CallCtx::new().with_info(serde_json::json!({"scope": {"lease": lease}})),
        None => CallCtx::new(),
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
