//! The messages between wf and a plugin's child (`wf-plugin-host`), one per
//! frame (see `frame`). Source requests, replies and events are the same
//! JSON the in-process ABI carries, passed through as text (requests and
//! replies as raw bytes in a binary frame: `wire`).

use serde::{Deserialize, Serialize};

/// Bumped when a message changes incompatibly; the child refuses a hello of
/// another version (wf and wf-plugin-host ship together).
pub const PROTOCOL_VERSION: u32 = 4;

/// The first frame wf sends.
#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct Hello {
    pub protocol: u32,
    /// The plugin library to load.
    pub file: std::path::PathBuf,
    /// `sandbox`: "strict" or "off": what applies before the library is
    /// loaded (the plugin's own setting when wf knows its name from an
    /// earlier start, else the default, strict).
    pub sandbox: String,
    /// Where the plugin's sources keep their data (`<state>/sources`).
    pub data_dir: std::path::PathBuf,
    /// The `PluginInit` JSON handed to the plugin's constructor.
    pub init: String,
    /// Every configured source, for the sandbox: stage one allows them all,
    /// stage two only those of the plugin's kinds.
    #[serde(default)]
    pub sources: Vec<SandboxSource>,
}

/// A configured source as the sandbox sees it.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
pub struct SandboxSource {
    pub kind: String,
    /// `<state>/sources/<name>` (made before the child starts).
    pub data_dir: std::path::PathBuf,
    /// What its `command` and `args` name (`sandbox::program_paths`).
    #[serde(default)]
    pub programs: Vec<std::path::PathBuf>,
}

/// The plugin's own settings, sent once its name is known.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
pub struct Start {
    pub sandbox: String,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub memory_mb: Option<u64>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub cpu_seconds: Option<u64>,
    /// Processes and threads together (its pids cgroup, else RLIMIT_NPROC
    /// in a user namespace of its own).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub max_processes: Option<u64>,
}

impl Start {
    /// A plugin table's settings, with the bounded defaults every child
    /// gets for what the table leaves out.
    pub fn from_settings(settings: &crate::config::PluginSettings) -> Start {
        Start {
            sandbox: settings.sandbox.unwrap_or_default().as_str().into(),
            memory_mb: Some(
                settings
                    .memory_mb
                    .unwrap_or(super::limits::DEFAULT_MEMORY_MB),
            ),
            cpu_seconds: settings.cpu_seconds,
            max_processes: Some(
                settings
                    .max_processes
                    .unwrap_or(super::limits::DEFAULT_MAX_PROCESSES),
            ),
        }
    }
}

#[derive(Debug, Serialize, Deserialize)]
#[serde(tag = "t", rename_all = "snake_case")]
pub enum ToChild {
    Hello(Hello),
    /// After the manifest: the plugin's own settings; the child applies its
    /// limits and instantiates the plugin, then answers `Ready`.
    Start(Start),
    /// Create source `source` from a `SourceSpec` JSON.
    Create {
        id: u64,
        source: u64,
        spec: String,
    },
    /// One `SourceRequest` JSON on `source`, with the call's info JSON.
    Request {
        id: u64,
        source: u64,
        request: String,
        info: String,
    },
    /// The host let go of call `id`: drop its future.
    Cancel {
        id: u64,
    },
    /// `SourceFfi::shutdown` of `source`; answered `Done`.
    Shutdown {
        id: u64,
        source: u64,
    },
    /// The host dropped `source`.
    Forget {
        source: u64,
    },
}

#[derive(Debug, Serialize, Deserialize)]
#[serde(tag = "t", rename_all = "snake_case")]
pub enum ToHost {
    /// The library loaded and passed the checks: its manifest JSON.
    Manifest {
        protocol: u32,
        manifest: String,
    },
    /// The plugin was instantiated; `sandbox`: what the child may do.
    Ready {
        #[serde(default, skip_serializing_if = "Option::is_none")]
        sandbox: Option<String>,
    },
    /// The plugin was refused, with the loader's one-line reason.
    Refused {
        reason: String,
    },
    /// Answer to `Create` (err: a `PluginError` JSON).
    Created {
        id: u64,
        #[serde(default, skip_serializing_if = "Option::is_none")]
        err: Option<String>,
    },
    /// Answer to `Request`: exactly one of `ok` (result JSON) and `err`
    /// (`PluginError` JSON).
    Reply {
        id: u64,
        #[serde(default, skip_serializing_if = "Option::is_none")]
        ok: Option<String>,
        #[serde(default, skip_serializing_if = "Option::is_none")]
        err: Option<String>,
    },
    Progress {
        id: u64,
        progress: f64,
        #[serde(default, skip_serializing_if = "Option::is_none")]
        total: Option<f64>,
        #[serde(default, skip_serializing_if = "Option::is_none")]
        message: Option<String>,
    },
    Done {
        id: u64,
    },
    /// `HostContextFfi::log`; `call`: logged while the child polled that
    /// call (wf logs it inside the call's span, as in process).
    Log {
        level: u8,
        target: String,
        message: String,
        #[serde(default, skip_serializing_if = "Option::is_none")]
        call: Option<u64>,
    },
    /// `HostContextFfi::emit`: an `Event` JSON.
    Emit {
        event: String,
    },
}
