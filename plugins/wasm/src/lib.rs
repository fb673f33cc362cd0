//! wf-source-wasm: WebAssembly components as wf sources (kind `wasm`).
//!
//! A component implements the WIT world `wf:source/source@1.0.0`
//! (`wit/source.wit`): its catalog, tool calls, nodes, resources and
//! prompts, with wf's imports for logging, progress, cancellation and
//! asking the caller. It runs in wasmtime with nothing granted but what its
//! source's settings list (`allow_hosts`, `dirs`, `env`), within
//! `memory_mb` per instance, `timeout_ms` per call and `max_instances` at
//! once. A trap fails its call only.
#![cfg_attr(test, allow(clippy::unwrap_used))]

mod bindings;
pub mod cache;
mod convert;
mod engine;
mod exports;
mod http;
mod runtime;
pub mod settings;
mod source;

use std::sync::Arc;

use wf_plugin_api::prelude::*;

pub use source::{GUEST_INTERFACE, WasmSource};

/// The WIT package version this build serves (and every older 1.x).
pub const WIT_VERSION: &str = "1.0.0";

pub struct WasmPlugin {
    ticker: engine::Ticker,
}

impl Plugin for WasmPlugin {
    type Source = WasmSource;

    fn manifest() -> Manifest {
        Manifest::new(env!("CARGO_PKG_NAME"), env!("CARGO_PKG_VERSION"))
            .kind("wasm")
            .description("WebAssembly components (WIT wf:source@1.0.0) as sources, sandboxed: nothing granted unless listed")
            .settings_schema("wasm", settings::settings_schema())
    }

    fn new(_host: Host) -> Result<Self, PluginError> {
        let ticker = engine::Ticker::new().map_err(PluginError::internal)?;
        Ok(WasmPlugin { ticker })
    }

    fn create_source(&self, spec: SourceSpec) -> Result<WasmSource, PluginError> {
        let settings = settings::Settings::parse(&spec.name, &spec.config)?;
        if !settings.path.is_file() {
            return Err(PluginError::invalid_config(format!(
                "sources.{}.path: {}: no such file",
                spec.name,
                settings.path.display()
            )));
        }
        // An engine per source: its instance pool is sized by the source's
        // own `max_instances`.
        let runtime =
            engine::Runtime::new(&self.ticker, &settings).map_err(PluginError::internal)?;
        let linker = runtime::linker(&runtime)
            .map_err(|e| PluginError::internal(format!("wasm linker: {e:#}")))?;
        Ok(WasmSource::new(
            spec.name,
            settings,
            Arc::new(runtime),
            Arc::new(linker),
            &spec.data_dir,
        ))
    }
}

wf_plugin_api::export_plugin!(WasmPlugin);
