//! The plugin author's side: implement [`Plugin`] and [`Source`], then call
//! [`crate::export_plugin!`].

use std::future::Future;
use std::sync::Arc;

use abi_stable::std_types::{ROption, RString};
use serde_json::{Map, Value};
use tokio_util::sync::CancellationToken;

use crate::error::PluginError;
use crate::ffi::{CallContextBox, HostContextBox};
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
    pub(crate) cancel: CancellationToken,
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
    /// Resolves when the host has dropped (cancelled) this call. Work that is
    /// a plain future is dropped at that point anyway; this is for work that
    /// must clean up (child processes, upstream requests).
    pub async fn cancelled(&self) {
        self.cancel.cancelled().await
    }
    pub fn is_cancelled(&self) -> bool {
        self.cancel.is_cancelled()
    }
    /// The call's details as the host sent them (e.g. `{"meta": {...}}`).
    pub fn info(&self) -> Value {
        serde_json::from_str(self.inner.info().as_str()).unwrap_or(Value::Null)
    }
    /// Since 1.1: the session this call must run on (default: the shared one, any epoch).
    pub fn scope(&self) -> CallScope {
        self.info()
            .get("scope")
            .cloned()
            .and_then(|s| serde_json::from_value(s).ok())
            .unwrap_or_default()
    }
}

/// A plugin: a factory of sources of one or more kinds.
pub trait Plugin: Sized + Send + Sync + 'static {
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
    fn run_node(
        &self,
        name: &str,
        input: Value,
        ctx: CallContext,
    ) -> impl Future<Output = Result<Value, PluginError>> + Send {
        async move { self.call_tool(name, input, ctx).await?.into_node_output() }
    }

    fn list_resources(&self) -> impl Future<Output = Result<Vec<Resource>, PluginError>> + Send {
        async move { Ok(self.catalog().await?.resources) }
    }

    fn list_resource_templates(
        &self,
    ) -> impl Future<Output = Result<Vec<ResourceTemplate>, PluginError>> + Send {
        async move { Ok(self.catalog().await?.resource_templates) }
    }

    fn read_resource(
        &self,
        uri: &str,
        _ctx: CallContext,
    ) -> impl Future<Output = Result<ReadResourceResult, PluginError>> + Send {
        async move { Err(PluginError::not_found(format!("no resource {uri}"))) }
    }

    fn list_prompts(&self) -> impl Future<Output = Result<Vec<Prompt>, PluginError>> + Send {
        async move { Ok(self.catalog().await?.prompts) }
    }

    fn get_prompt(
        &self,
        name: &str,
        _arguments: Map<String, Value>,
        _ctx: CallContext,
    ) -> impl Future<Output = Result<GetPromptResult, PluginError>> + Send {
        async move { Err(PluginError::not_found(format!("no prompt {name}"))) }
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
}
