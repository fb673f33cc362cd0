//! `wf-plugin-api`: the only crate a wf source plugin depends on.
//!
//! - [`ffi`] is the stable ABI (abi_stable prefix module + `#[sabi_trait]`
//!   objects); everything rich crosses it as JSON in `RString`.
//! - [`types`] and [`error`] are the serde shapes of that JSON.
//! - [`Plugin`] and [`Source`] are the author side; [`export_plugin!`] turns an
//!   implementation into a loadable library.
//! - [`testing`] runs a plugin in-process through the real ABI objects.
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

pub mod author;
pub mod error;
#[doc(hidden)]
pub mod export;
pub mod ffi;
mod logging;
pub mod testing;
pub mod types;

pub use author::{CallContext, Host, Plugin, Source};
pub use error::{ErrorCode, PluginError};
pub use types::*;

/// The wf-plugin-api version a plugin is compiled against. Because this is a
/// `const`, it is baked into the plugin at its build time.
pub const API_VERSION: &str = env!("CARGO_PKG_VERSION");

/// Re-exports for the export macro; not part of the public API.
#[doc(hidden)]
pub mod __private {
    pub use abi_stable;
}

/// Everything a plugin author usually needs.
pub mod prelude {
    pub use crate::author::{CallContext, Host, Plugin, Source};
    pub use crate::error::{ErrorCode, PluginError};
    pub use crate::types::*;
    pub use serde_json::{Map, Value, json};
}
