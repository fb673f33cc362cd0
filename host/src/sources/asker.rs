//! Whoever can answer a call's requests for input: what a call's context
//! holds, and what the table of asked-about calls (`asks`) hands a source's
//! request to.

use std::future::Future;
use std::pin::Pin;

use serde_json::Value;
use wf_plugin_api::{CallerRequest, PluginError};

/// The answer to a plugin's [`CallerRequest`]: the MCP result's JSON.
pub type AskFuture = Pin<Box<dyn Future<Output = Result<Value, PluginError>> + Send>>;

/// Whoever can answer a call's requests for input (the MCP client that made
/// it). Lives in the server layer; sources only see this.
pub trait Asker: Send + Sync {
    fn ask(&self, request: CallerRequest) -> AskFuture;
}
