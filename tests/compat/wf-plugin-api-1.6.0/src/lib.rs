//! `wf-plugin-api`: the only crate a wf source plugin depends on.
//!
//! - Implement [`Plugin`] (a factory of sources) and [`Source`]: its
//!   [`Catalog`] (the tools, prompts and resources it serves) and its calls,
//!   each given a [`CallContext`] (progress, cancellation, asking the
//!   caller). Then call [`export_plugin!`]: the result is a library a wf host
//!   loads from its plugins folder.
//! - [`prelude`] has everything an implementation usually names: the
//!   descriptors ([`Tool`], [`NodeSpec`], [`Prompt`], [`Resource`]…), results
//!   ([`CallResult`]…) and errors ([`PluginError`], [`ErrorCode`]).
//! - [`testing`] is the harness: it runs a plugin in-process through the real
//!   ABI objects, for the plugin's own tests.
//! - [`schema`] holds the checks the host applies to what a plugin serves
//!   (the harness's `schema_problems` uses the same ones).
//!
//! The ABI itself (the abi_stable root module and `#[sabi_trait]` objects in
//! `ffi`, the glue in `export` and `lane`, and the JSON operations that cross
//! it) is the host's business and hidden here; its paths stay for the
//! plugins already built against them. docs/abi-evolution.md in the wf
//! repository says how it may change.
//!
//! A minimal plugin:
//!
//! ```no_run
//! use wf_plugin_api::prelude::*;
//!
//! pub struct Hello;
//! pub struct HelloSource;
//!
//! impl Plugin for Hello {
//!     type Source = HelloSource;
//!     fn manifest() -> Manifest {
//!         Manifest::new(env!("CARGO_PKG_NAME"), env!("CARGO_PKG_VERSION")).kind("hello")
//!     }
//!     fn new(_host: Host) -> Result<Self, PluginError> { Ok(Hello) }
//!     fn create_source(&self, _spec: SourceSpec) -> Result<HelloSource, PluginError> { Ok(HelloSource) }
//! }
//!
//! impl Source for HelloSource {
//!     async fn catalog(&self) -> Result<Catalog, PluginError> {
//!         Ok(Catalog::default().tool(Tool::new("hello", "Say hello", serde_json::json!({"type": "object"}))))
//!     }
//!     async fn call_tool(&self, _name: &str, _args: Value, _ctx: CallContext) -> Result<CallResult, PluginError> {
//!         Ok(CallResult::text("hello"))
//!     }
//! }
//!
//! wf_plugin_api::export_plugin!(Hello);
//! ```

#![warn(missing_docs)]
#![cfg_attr(test, allow(clippy::unwrap_used))]

pub mod args;
mod asks;
mod author;
mod blocking;
mod caller;
mod error;
#[doc(hidden)]
pub mod export;
/// The stable ABI: the root module and `#[sabi_trait]` objects. Hosts and the
/// export macro use it; plugin code never needs to.
#[doc(hidden)]
pub mod ffi;
mod forwarding;
/// Since 1.5: the call lane a child host hands a plugin (its frames are
/// shared with the host, which encodes and decodes the other end).
#[doc(hidden)]
pub mod lane;
mod logging;
mod runtime;
pub mod schema;
mod tasks;
pub mod testing;
pub mod trace;
mod types;

pub use author::{CallContext, Host, Plugin, Source};
pub use blocking::blocking;
pub use caller::{CallerRequest, ElicitAction, ElicitAnswer, Root};
pub use error::{ErrorCode, PluginError, STATE_LOST};
pub use forwarding::{CompleteParams, Completion, CompletionArgument, CompletionRef};
pub use logging::redact_in_logs;
pub use tasks::TaskStart;
pub use types::{
    CallResult, CallScope, Catalog, DefaultSource, Event, GetPromptResult, Manifest, NodeSpec,
    Prompt, PromptArgument, ReadResourceResult, Resource, ResourceTemplate, SESSION_EPOCH_META,
    SessionInfo, SourceSpec, Tool,
};
/// The source protocol: what crosses the ABI as JSON. Hosts and the test
/// harness send these; a plugin only implements [`Source`].
#[doc(hidden)]
pub use types::{PluginInit, SourceRequest};

/// The wf-plugin-api version a plugin is compiled against. Because this is a
/// `const`, it is baked into the plugin at its build time.
pub const API_VERSION: &str = env!("CARGO_PKG_VERSION");

/// Re-exports for the export macro; not part of the public API.
#[doc(hidden)]
pub mod __private {
    pub use abi_stable;
}

/// Everything a plugin author usually needs: `use wf_plugin_api::prelude::*;`.
pub mod prelude {
    pub use crate::author::{CallContext, Host, Plugin, Source};
    pub use crate::blocking::blocking;
    pub use crate::caller::{ElicitAction, ElicitAnswer, Root};
    pub use crate::error::{ErrorCode, PluginError};
    pub use crate::forwarding::{CompleteParams, Completion, CompletionArgument, CompletionRef};
    pub use crate::tasks::TaskStart;
    pub use crate::types::{
        CallResult, CallScope, Catalog, Event, GetPromptResult, Manifest, NodeSpec, Prompt,
        ReadResourceResult, Resource, ResourceTemplate, SessionInfo, SourceSpec, Tool,
    };
    pub use serde_json::{Map, Value, json};
}
