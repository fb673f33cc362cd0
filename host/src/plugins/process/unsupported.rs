//! Process isolation where it cannot run (not Unix: Windows). wf-plugin-host
//! needs a socketpair inherited as fds 3 and 4, `fork` and rlimits, so a
//! plugin whose isolation resolves to `process` is refused at load with a
//! line that names the ways out: pin it (a pinned plugin runs in process)
//! or ship it as a WebAssembly component, which wasmtime sandboxes on every
//! OS. No supervisor can exist here: [`Supervisor`] holds an uninhabited
//! field, so every method that would need one is unreachable by type.

use std::convert::Infallible;
use std::sync::Arc;

use serde_json::Value;
use wf_plugin_api::Manifest;
use wf_plugin_api::ffi::PluginBox;

use super::launch::{Health, Launch};
use super::protocol::{SandboxSource, Start};
use crate::config::PluginSettings;
use crate::plugins::host_context::HostEvents;

/// What the Unix build's `spawn` module exports that the rest of wf reads.
pub mod spawn {
    /// The `PATH` a child would get (a source's programs resolve against it).
    pub const CHILD_PATH: &str = "";
    /// The niceness a child would run at.
    pub const CHILD_NICE: i32 = 0;
}

/// A plugin's child: never made on this OS.
pub struct Supervisor {
    pub name: String,
    never: Infallible,
}

/// A started child awaiting wf's decision: never made on this OS.
pub struct Probe {
    never: Infallible,
}

impl Supervisor {
    pub fn probe(launch: Launch) -> Result<(Probe, Manifest), String> {
        Err(format!(
            "{}: this plugin would run isolated in a process of its own, which wf supports on \
             Linux and macOS only; if you trust it, pin it (`wf plugins --pin FILE`) to run it \
             in process; an untrusted source belongs in a WebAssembly component (kind \"wasm\"), \
             which is sandboxed on every OS",
            launch.file.display()
        ))
    }

    pub fn health(&self) -> Health {
        match self.never {}
    }

    pub fn stalled_calls(&self, _source: &str) -> Vec<Value> {
        match self.never {}
    }

    pub fn pid(&self) -> Option<u32> {
        match self.never {}
    }

    pub fn restarts(&self) -> u64 {
        match self.never {}
    }

    pub fn sandbox(&self) -> Option<String> {
        match self.never {}
    }

    pub fn memory_total_mb(&self) -> Option<u64> {
        match self.never {}
    }

    pub fn start_settings(&self) -> Start {
        match self.never {}
    }

    pub fn stop(&self) {
        match self.never {}
    }

    pub fn park(&self, _why: &str) {
        match self.never {}
    }

    pub fn restart_with(
        self: &Arc<Self>,
        _start: Start,
        _sources: Vec<SandboxSource>,
    ) -> Result<(), String> {
        match self.never {}
    }
}

impl Probe {
    pub fn stop(self) {
        match self.never {}
    }

    pub fn start(
        self,
        _manifest: &Manifest,
        _settings: &PluginSettings,
        _events: &HostEvents,
    ) -> Result<Arc<Supervisor>, String> {
        match self.never {}
    }
}

pub fn plugin_box(sup: &Arc<Supervisor>) -> PluginBox {
    match sup.never {}
}
