//! What starting a plugin's child needs and how it stands: shared by the
//! Unix supervisor and the stand-in that refuses process isolation
//! elsewhere (`unsupported`).

use std::path::PathBuf;

use super::protocol::Start;

/// What starting a child needs.
#[derive(Debug, Clone)]
pub struct Launch {
    pub file: PathBuf,
    pub state_dir: Option<PathBuf>,
    /// The `PluginInit` JSON.
    pub init: String,
    /// The plugin's name and settings, once known (restarts).
    pub known: Option<Known>,
    /// The configured sources, for the child's sandbox.
    pub sources: Vec<super::protocol::SandboxSource>,
}

/// The plugin's name and settings, once a start has read its manifest.
#[derive(Debug, Clone)]
pub struct Known {
    pub name: String,
    pub start: Start,
}

/// A plugin child's health, for sources and `wf plugins`.
#[derive(Debug, Clone, PartialEq)]
pub enum Health {
    Running,
    /// It exited (why) and is being restarted.
    Restarting(String),
    /// It kept crashing: not restarted any more.
    Failed(String),
    /// A reload stopped it (why): the plugin has no source left. A source
    /// created later starts it again.
    Stopped(String),
}
