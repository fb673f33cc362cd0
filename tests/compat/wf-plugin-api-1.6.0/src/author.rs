//! The plugin author's side: implement [`Plugin`] and [`Source`], then call
//! [`crate::export_plugin!`].

use std::collections::BTreeMap;
use std::future::Future;
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};

use abi_stable::std_types::{ROption, RString};
use serde_json::{Map, Value};
use tokio_util::sync::CancellationToken;

use crate::caller::{CallerRequest, ElicitAnswer, Root};
use crate::error::PluginError;
use crate::ffi::{CallContextBox, HostContextBox};
use crate::forwarding::{CompleteParams, Completion};
use crate::tasks::TaskStart;
use crate::types::*;

/// The host, as seen by a plugin: events and logs. Logging normally goes
/// through `tracing`; the export macro forwards a plugin's events to the host.
#[derive(Clone)]
pub struct Host {
    pub(crate) inner: HostContextBox,
    pub(crate) init: Arc<PluginInit>,
}

impl Host {
    /// Tells the host something changed (e.g. a source's capabilities).
    pub fn emit(&self, event: &Event) {
        if let Ok(json) = serde_json::to_string(event) {
            self.inner.emit(RString::from(json));
        }
    }
    /// The host's version string.
    pub fn host_version(&self) -> &str {
        &self.init.host_version
    }
}

/// Context of one call: progress reporting, cancellation and request details.
#[derive(Clone)]
pub struct CallContext {
    pub(crate) inner: Arc<CallContextBox>,
    /// Since 1.2: where [`Self::ask`] sends its requests.
    pub(crate) host: Option<Host>,
    pub(crate) cancel: CancellationToken,
    /// Set once the call asked about cancellation: such a call gets a grace
    /// period to clean up after the signal before it is dropped.
    pub(crate) watching: Arc<AtomicBool>,
    /// The info, read across the ABI and parsed once per call (a call asks
    /// for its scope, trace and id several times).
    pub(crate) parsed: Arc<std::sync::OnceLock<Value>>,
}

impl CallContext {
    /// Reports progress; the host forwards it to the MCP client if it asked.
    pub fn progress(&self, progress: f64, total: Option<f64>, message: Option<&str>) {
        self.inner.progress(
            progress,
            total.map(ROption::RSome).unwrap_or(ROption::RNone),
            message
                .map(|m| ROption::RSome(RString::from(m)))
                .unwrap_or(ROption::RNone),
        );
    }
    /// Resolves when the host cancelled this call (the client cancelled, or
    /// a timeout fired). The contract: the signal comes first, then the
    /// call's future is dropped. A call that has called `cancelled()` (or
    /// [`Self::is_cancelled`]) is polled on once the signal fired, so its
    /// `select!` branch runs, and may await its cleanup for up to
    /// 5 s before the future is dropped; a
    /// call that never asked is dropped at once. Either way the host has
    /// already answered the client: nothing here delays it.
    pub fn cancelled(&self) -> impl Future<Output = ()> + Send + 'static {
        self.watching.store(true, Ordering::Release);
        self.cancel.clone().cancelled_owned()
    }
    /// Whether the host cancelled this call (see [`Self::cancelled`]).
    pub fn is_cancelled(&self) -> bool {
        self.watching.store(true, Ordering::Release);
        self.cancel.is_cancelled()
    }
    /// The call's details as the host sent them (e.g. `{"meta": {...}}`).
    pub fn info(&self) -> Value {
        self.info_ref().clone()
    }
    /// The info without a copy.
    fn info_ref(&self) -> &Value {
        self.parsed
            .get_or_init(|| serde_json::from_str(self.inner.info().as_str()).unwrap_or(Value::Null))
    }
    /// Since 1.2: the call's W3C trace context (info key `"trace"`), when the
    /// host exports traces. Pass [`crate::trace::TraceContext::child`] on to
    /// what the call calls and report it with [`crate::Event::Span`].
    pub fn trace_context(&self) -> Option<crate::trace::TraceContext> {
        crate::trace::TraceContext::from_info(self.info_ref())
    }
    /// Since 1.2: reports a span this call measured (e.g. one outgoing
    /// request) for the host to export ([`crate::Event::Span`]). A no-op on
    /// hosts older than 1.2.
    pub fn report_span(&self, source: &str, span: crate::trace::ReportedSpan) {
        if let Some(host) = &self.host {
            host.emit(&crate::Event::Span {
                source: source.to_string(),
                span,
            });
        }
    }
    /// Since 1.2: sends `request` to whoever made this call and returns the
    /// answer's MCP JSON. `unsupported` when the caller cannot be asked (a
    /// client that did not declare the capability, a workflow run, a host
    /// older than 1.2); a client's own JSON-RPC error comes back as `failed`
    /// with it in `data.mcp_error`.
    pub async fn ask(&self, request: &CallerRequest) -> Result<Value, PluginError> {
        // The host gives each call it can route an id; a host older than 1.2 does not.
        let Some(call) = self.info_ref().get("call").and_then(Value::as_u64) else {
            return Err(PluginError::unsupported(format!(
                "cannot {} the caller: this host predates wf-plugin-api 1.2",
                request.kind()
            )));
        };
        let Some(host) = &self.host else {
            return Err(PluginError::unsupported(
                "no host to ask the caller through",
            ));
        };
        // Asked after the call ended (an upstream's late request): nobody waits
        // for the answer, so do not wait for it either.
        let ended = self.cancel.clone().cancelled_owned();
        let asked = crate::asks::ask(|ask| {
            let request = request.clone();
            host.emit(&crate::Event::AskCaller { call, ask, request });
        });
        match futures::future::select(Box::pin(asked), Box::pin(ended)).await {
            futures::future::Either::Left((answer, _)) => answer,
            futures::future::Either::Right(_) => Err(PluginError::new(
                crate::ErrorCode::Cancelled,
                format!("cannot {} the caller: the call has ended", request.kind()),
            )),
        }
    }
    /// Since 1.6: asks several requests for input as one round
    /// ([`CallerRequest::Round`]) and returns each key's answer. Where the
    /// host cannot take the round (one that predates 1.6, or a caller that
    /// cannot answer one of the requests) it asks them one at a time, in key
    /// order, as before.
    pub async fn ask_round(
        &self,
        requests: BTreeMap<String, CallerRequest>,
    ) -> Result<BTreeMap<String, Value>, PluginError> {
        let round = CallerRequest::Round {
            requests: requests.clone(),
        };
        match self.ask(&round).await {
            Ok(Value::Object(mut answers)) => requests
                .into_keys()
                .map(|key| match answers.remove(&key) {
                    Some(answer) => Ok((key, answer)),
                    None => Err(PluginError::failed(format!(
                        "the caller's round brought no answer to {key}"
                    ))),
                })
                .collect(),
            Ok(other) => Err(PluginError::failed(format!(
                "the caller answered a round with {other} instead of an object"
            ))),
            Err(e) if e.code == crate::ErrorCode::Unsupported => {
                tracing::debug!("asking one request at a time: {}", e.message);
                let mut out = BTreeMap::new();
                for (key, request) in requests {
                    let answer = self.ask(&request).await?;
                    out.insert(key, answer);
                }
                Ok(out)
            }
            Err(e) => Err(e),
        }
    }
    /// Since 1.2: asks the user to fill in a form (`schema`: a flat JSON
    /// Schema object of primitive properties, as MCP elicitation allows).
    pub async fn elicit(&self, message: &str, schema: Value) -> Result<ElicitAnswer, PluginError> {
        let params =
            serde_json::json!({"mode": "form", "message": message, "requestedSchema": schema});
        let v = self.ask(&CallerRequest::Elicit { params }).await?;
        Ok(serde_json::from_value(v)?)
    }
    /// Since 1.2: asks the user to visit `url` (URL-mode elicitation).
    pub async fn elicit_url(
        &self,
        message: &str,
        url: &str,
        elicitation_id: &str,
    ) -> Result<ElicitAnswer, PluginError> {
        let params = serde_json::json!({
            "mode": "url", "message": message, "url": url, "elicitationId": elicitation_id,
        });
        let v = self.ask(&CallerRequest::Elicit { params }).await?;
        Ok(serde_json::from_value(v)?)
    }
    /// Since 1.2: asks the caller's model (`params`: MCP
    /// `sampling/createMessage` params); returns the MCP `CreateMessageResult`.
    pub async fn sample(&self, params: Value) -> Result<Value, PluginError> {
        self.ask(&CallerRequest::Sample { params }).await
    }
    /// Since 1.2: the caller's roots.
    pub async fn list_roots(&self) -> Result<Vec<Root>, PluginError> {
        let v = self.ask(&CallerRequest::ListRoots).await?;
        Ok(serde_json::from_value(
            v.get("roots").cloned().unwrap_or(Value::Array(vec![])),
        )?)
    }
    /// Since 1.2: a log message for the caller (MCP `level`; the host names
    /// the source as the logger, and drops it below the client's level).
    pub async fn log(
        &self,
        level: &str,
        logger: Option<&str>,
        data: Value,
    ) -> Result<(), PluginError> {
        let request = CallerRequest::Log {
            level: level.to_string(),
            logger: logger.map(str::to_string),
            data,
        };
        self.ask(&request).await.map(|_| ())
    }
    /// Since 1.1: the session this call must run on (default: the shared one, any epoch).
    pub fn scope(&self) -> CallScope {
        self.info_ref()
            .get("scope")
            .and_then(|s| <CallScope as serde::Deserialize>::deserialize(s).ok())
            .unwrap_or_default()
    }
}

/// A plugin: a factory of sources of one or more kinds.
pub trait Plugin: Sized + Send + Sync + 'static {
    /// The sources this plugin creates.
    type Source: Source;

    /// Name, version, kinds, description, default sources.
    fn manifest() -> Manifest;

    /// Called once when the host loads the library. A failure here refuses the
    /// plugin with this error's message.
    fn new(host: Host) -> Result<Self, PluginError>;

    /// Creates a configured source. Must be quick: connect lazily.
    fn create_source(&self, spec: SourceSpec) -> Result<Self::Source, PluginError>;
}

/// A configured source: discovery and execution of its capabilities.
///
/// Futures run on the plugin's own tokio runtime; a future is dropped when the
/// host cancels the call.
pub trait Source: Send + Sync + 'static {
    /// Discovery: everything the source offers.
    fn catalog(&self) -> impl Future<Output = Result<Catalog, PluginError>> + Send;

    /// Calls a tool. Return `Ok(CallResult { is_error: true, .. })` for a
    /// failure the caller should read, `Err` when the call could not be made.
    fn call_tool(
        &self,
        name: &str,
        arguments: Value,
        ctx: CallContext,
    ) -> impl Future<Output = Result<CallResult, PluginError>> + Send;

    /// Runs a workflow node. The default calls the tool of the same name and
    /// returns its structured content (or its text, parsed as JSON when it is JSON).
    ///
    /// The default runs tool → node, right for a source whose capabilities
    /// are tools (an MCP upstream). A node-first source (its capabilities are
    /// nodes; errors keep their code) overrides `run_node` and writes
    /// `call_tool` as [`CallResult::from_node_output`] of it. Never make each
    /// call the other's default: neither would end.
    fn run_node(
        &self,
        name: &str,
        input: Value,
        ctx: CallContext,
    ) -> impl Future<Output = Result<Value, PluginError>> + Send {
        async move { self.call_tool(name, input, ctx).await?.into_node_output() }
    }

    /// Resources; by default those of [`Source::catalog`].
    fn list_resources(&self) -> impl Future<Output = Result<Vec<Resource>, PluginError>> + Send {
        async move { Ok(self.catalog().await?.resources) }
    }

    /// Resource templates; by default those of [`Source::catalog`].
    fn list_resource_templates(
        &self,
    ) -> impl Future<Output = Result<Vec<ResourceTemplate>, PluginError>> + Send {
        async move { Ok(self.catalog().await?.resource_templates) }
    }

    /// Reads a resource; by default `not_found`.
    fn read_resource(
        &self,
        uri: &str,
        _ctx: CallContext,
    ) -> impl Future<Output = Result<ReadResourceResult, PluginError>> + Send {
        async move { Err(PluginError::not_found(format!("no resource {uri}"))) }
    }

    /// Prompts; by default those of [`Source::catalog`].
    fn list_prompts(&self) -> impl Future<Output = Result<Vec<Prompt>, PluginError>> + Send {
        async move { Ok(self.catalog().await?.prompts) }
    }

    /// Renders a prompt; by default `not_found`.
    fn get_prompt(
        &self,
        name: &str,
        _arguments: Map<String, Value>,
        _ctx: CallContext,
    ) -> impl Future<Output = Result<GetPromptResult, PluginError>> + Send {
        async move { Err(PluginError::not_found(format!("no prompt {name}"))) }
    }

    /// Since 1.2: suggests values for a prompt's or resource template's
    /// argument (MCP `completion/complete`); by default `unsupported`, which
    /// the host answers as no suggestions.
    fn complete(
        &self,
        _params: CompleteParams,
        _ctx: CallContext,
    ) -> impl Future<Output = Result<Completion, PluginError>> + Send {
        async {
            Err(PluginError::unsupported(
                "this source offers no completions",
            ))
        }
    }

    /// Since 1.2: starts telling the host ([`Host::emit`] of
    /// [`Event::ResourceUpdated`]) when resource `uri` changes. The host calls
    /// it once per URI and session however many clients subscribe; `ctx`'s
    /// [`CallContext::scope`] names the session (a lease's, or none: the shared
    /// one), and [`Event::ResourceUpdated`] names it back. By default `unsupported`.
    fn subscribe(
        &self,
        _uri: &str,
        _ctx: CallContext,
    ) -> impl Future<Output = Result<(), PluginError>> + Send {
        async {
            Err(PluginError::unsupported(
                "this source has no resource subscriptions",
            ))
        }
    }

    /// Since 1.2: stops what [`Source::subscribe`] started (the last
    /// subscribed client left).
    fn unsubscribe(
        &self,
        _uri: &str,
        _ctx: CallContext,
    ) -> impl Future<Output = Result<(), PluginError>> + Send {
        async { Ok(()) }
    }

    /// Since 1.2: the client that `ctx`'s session acts for changed its roots
    /// (`notifications/roots/list_changed`). By default `unsupported`.
    fn roots_list_changed(
        &self,
        _ctx: CallContext,
    ) -> impl Future<Output = Result<(), PluginError>> + Send {
        async { Err(PluginError::unsupported("this source does not watch roots")) }
    }

    /// Since 1.3: calls a tool as a task (the host's client declared MCP
    /// Tasks). A source that can run the call on answers [`TaskStart::Task`]
    /// and serves [`Source::get_task`] and [`Source::cancel_task`] for it; one
    /// that ran it at once answers [`TaskStart::Complete`]. By default
    /// `unsupported`: the host then makes the plain call (with the client's
    /// progress, cancellation and asks).
    fn call_tool_as_task(
        &self,
        _name: &str,
        _arguments: Value,
        _ctx: CallContext,
    ) -> impl Future<Output = Result<TaskStart, PluginError>> + Send {
        async { Err(PluginError::unsupported("this source serves no tasks")) }
    }

    /// Since 1.3: a task's state, MCP `tasks/get`'s result JSON. A task the
    /// source lost (its upstream restarted) is `state_lost`.
    fn get_task(
        &self,
        _task_id: &str,
        _ctx: CallContext,
    ) -> impl Future<Output = Result<Value, PluginError>> + Send {
        async { Err(PluginError::unsupported("this source serves no tasks")) }
    }

    /// Since 1.3: asks for a task's cancellation (MCP `tasks/cancel`).
    fn cancel_task(
        &self,
        _task_id: &str,
        _ctx: CallContext,
    ) -> impl Future<Output = Result<(), PluginError>> + Send {
        async { Err(PluginError::unsupported("this source serves no tasks")) }
    }

    /// Since 1.4: the client's answers to the input a task of this source
    /// asks for (MCP `tasks/update`'s `inputResponses`, keyed as the
    /// `inputRequests` of the task's `tasks/get`). By default `unsupported`.
    fn update_task(
        &self,
        _task_id: &str,
        _input_responses: Value,
        _ctx: CallContext,
    ) -> impl Future<Output = Result<(), PluginError>> + Send {
        async {
            Err(PluginError::unsupported(
                "this source's tasks take no input",
            ))
        }
    }

    /// Health and runtime details for `wf` status output. Never include secrets.
    fn status(&self) -> impl Future<Output = Value> + Send {
        async { Value::Object(Map::new()) }
    }

    /// Since 1.1: opens the session calls run on (the shared one, or a
    /// lease's) and tells its epoch. Sources without sessions keep the default.
    fn open_session(
        &self,
        _lease: Option<&str>,
    ) -> impl Future<Output = Result<SessionInfo, PluginError>> + Send {
        async { Err(PluginError::unsupported("this source has no sessions")) }
    }

    /// Since 1.1: opens a run-scoped session of its own.
    fn open_lease(&self) -> impl Future<Output = Result<SessionInfo, PluginError>> + Send {
        async { Err(PluginError::unsupported("this source has no sessions")) }
    }

    /// Since 1.1: closes a lease's session.
    fn close_lease(&self, _lease: &str) -> impl Future<Output = Result<(), PluginError>> + Send {
        async { Ok(()) }
    }

    /// Closes sessions and child processes. Called once, at shutdown or when
    /// the source is removed or reconfigured.
    fn shutdown(&self) -> impl Future<Output = ()> + Send {
        async {}
    }
}

impl CallResult {
    /// The value a workflow node produces from a tool result: an `isError`
    /// result becomes a `failed` error.
    pub fn into_node_output(self) -> Result<Value, PluginError> {
        let text = || {
            self.content
                .iter()
                .filter_map(|c| c.get("text").and_then(Value::as_str))
                .collect::<Vec<_>>()
                .join("\n")
        };
        if self.is_error {
            return Err(PluginError::failed(text()));
        }
        if let Some(v) = self.structured_content {
            return Ok(v);
        }
        let t = text();
        Ok(serde_json::from_str(&t).unwrap_or(Value::String(t)))
    }

    /// The tool result of a node's outcome (since 1.2), the inverse of
    /// [`CallResult::into_node_output`]: what a node-first source's
    /// `call_tool` returns, in one line:
    /// `CallResult::from_node_output(self.run_node(name, arguments, ctx).await)`.
    /// Output becomes structured content; a `failed` or `invalid_arguments`
    /// error becomes an `isError` result the calling model reads and corrects
    /// itself from; any other error (unknown tool, cancelled…) stays an error.
    pub fn from_node_output(outcome: Result<Value, PluginError>) -> Result<Self, PluginError> {
        match outcome {
            Ok(output) => Ok(Self::structured(output)),
            Err(e)
                if matches!(
                    e.code,
                    crate::ErrorCode::Failed | crate::ErrorCode::InvalidArguments
                ) =>
            {
                Ok(Self::error(e.message))
            }
            Err(e) => Err(e),
        }
    }
}
