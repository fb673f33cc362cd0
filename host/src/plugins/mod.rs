//! Plugin loading: every library file in every plugin folder is tried on its
//! own; a refused file gets one line (path and reason) and loading goes on.
//! A folder or file other users can write is refused before anything in it
//! is loaded (loading runs a library's constructors).

pub mod children;
mod host_context;
mod inspect;
pub mod isolation;
mod loader;
pub mod pins;
pub mod process;
pub mod resident;
mod safety;
pub mod sandbox;

pub use host_context::{AskHandler, HostEvent, HostEvents, set_ask_handler};
pub use loader::{
    LoadPolicy, LoadedPlugin, ManifestCheck, Note, PluginSet, Refusal, load_file, load_plugins,
    load_plugins_pinned, supported_api_range,
};

use std::path::{Path, PathBuf};

/// The plugin folders in order: the `wf` executable's own directory (so the
/// output of `cargo build` works as it is), `plugins/` beside the executable
/// (an unpacked dist archive), `plugins/` beside the config file,
/// the config's `plugins.dirs`, then each `--plugins DIR`. Duplicates are dropped.
pub fn plugin_dirs(config: &crate::config::LoadedConfig, extra: &[PathBuf]) -> Vec<PathBuf> {
    let mut dirs = Vec::new();
    if let Ok(exe) = std::env::current_exe()
        && let Some(dir) = exe.parent()
    {
        dirs.push(dir.to_path_buf());
        // An unpacked dist archive: the bundled plugins in plugins/ beside wf.
        let bundled = dir.join("plugins");
        if bundled.is_dir() {
            dirs.push(bundled);
        }
    }
    let base = config.base_dir();
    if config.file.is_some() {
        let beside = base.join("plugins");
        if beside.is_dir() {
            dirs.push(beside);
        }
    }
    dirs.extend(config.config.plugins.dirs.iter().map(|d| base.join(d)));
    dirs.extend(extra.iter().cloned());
    let mut seen = std::collections::HashSet::new();
    dirs.retain(|d| seen.insert(canonical(d)));
    dirs
}

fn canonical(p: &Path) -> PathBuf {
    std::fs::canonicalize(p).unwrap_or_else(|_| p.to_path_buf())
}
