//! The stable ABI. Keep it tiny: rich data crosses as JSON in `RString`.
//!
//! Evolution rules (docs/abi-evolution.md): fields of `WfPluginMod` and
//! methods of the `#[sabi_trait]`s are only ever appended after their
//! `last_prefix_field`, and new source operations are new
//! [`crate::SourceRequest`] variants, not new methods.

// `#[sabi_trait]` expansions trip this lint on rustc >= 1.80.
#![allow(non_local_definitions)]

use abi_stable::{
    StableAbi, declare_root_module_statics,
    library::RootModule,
    package_version_strings, sabi_trait,
    sabi_types::VersionStrings,
    std_types::{RArc, RBox, ROption, RResult, RStr, RString},
};
use async_ffi::FfiFuture;

/// Services the host offers a plugin. Cloneable and callable from any thread.
#[sabi_trait]
pub trait HostContextFfi: Send + Sync + Clone {
    /// `level`: 1 error, 2 warn, 3 info, 4 debug, 5 trace.
    fn log(&self, level: u8, target: RStr<'_>, message: RStr<'_>);
    /// `event_json`: a JSON-encoded [`crate::Event`].
    #[sabi(last_prefix_field)]
    fn emit(&self, event_json: RString);
}

pub type HostContextBox = HostContextFfi_TO<'static, RArc<()>>;

/// The per-call context the host hands to a source operation.
#[sabi_trait]
pub trait CallContextFfi: Send + Sync {
    /// Report progress of this call (forwarded to the MCP client when it asked for it).
    fn progress(&self, progress: f64, total: ROption<f64>, message: ROption<RString>);
    /// JSON object with call details (e.g. the client's request `_meta`).
    #[sabi(last_prefix_field)]
    fn info(&self) -> RString;
}

pub type CallContextBox = CallContextFfi_TO<'static, RBox<()>>;

/// A configured source, created by a plugin.
#[sabi_trait]
pub trait SourceFfi: Send + Sync {
    /// Runs one JSON-encoded [`crate::SourceRequest`]. Ok is the operation's
    /// JSON result; Err a JSON-encoded [`crate::PluginError`]. Dropping the
    /// future cancels the plugin-side work.
    fn request(
        &self,
        request: RString,
        ctx: CallContextBox,
    ) -> FfiFuture<RResult<RString, RString>>;
    /// Closes upstream sessions and child processes; the source is not used afterwards.
    #[sabi(last_prefix_field)]
    fn shutdown(&self) -> FfiFuture<()>;
}

pub type SourceBox = SourceFfi_TO<'static, RBox<()>>;

/// An instantiated plugin.
#[sabi_trait]
pub trait PluginFfi: Send + Sync {
    /// `spec_json`: a JSON-encoded [`crate::SourceSpec`]. Err: a JSON-encoded [`crate::PluginError`].
    #[sabi(last_prefix_field)]
    fn create_source(&self, spec_json: RString) -> RResult<SourceBox, RString>;
}

pub type PluginBox = PluginFfi_TO<'static, RBox<()>>;

/// The root module every plugin library exports.
#[repr(C)]
#[derive(StableAbi)]
#[sabi(kind(Prefix(prefix_ref = WfPluginModRef)))]
#[sabi(missing_field(panic))]
pub struct WfPluginMod {
    /// JSON-encoded [`crate::Manifest`].
    pub manifest: extern "C" fn() -> RString,
    /// `init_json`: a JSON-encoded [`crate::PluginInit`]. Err: a JSON-encoded [`crate::PluginError`].
    #[sabi(last_prefix_field)]
    pub instantiate:
        extern "C" fn(host: HostContextBox, init_json: RString) -> RResult<PluginBox, RString>,
}

impl RootModule for WfPluginModRef {
    declare_root_module_statics! {WfPluginModRef}
    const BASE_NAME: &'static str = "wf_plugin";
    const NAME: &'static str = "wf_plugin";
    const VERSION_STRINGS: VersionStrings = package_version_strings!();
}
