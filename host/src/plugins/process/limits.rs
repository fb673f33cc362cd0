//! What a child may use: its memory, CPU time and task bounds, applied
//! before its program runs (`spawn`) and by its cgroups (`cgroup`).

/// A third-party child's memory bound when its table sets none (MiB of
/// RLIMIT_DATA, per process): room for the mcp plugin's node and chromium
/// upstreams, far from a shared machine's whole memory.
pub const DEFAULT_MEMORY_MB: u64 = 2048;

/// A child's task bound (processes and threads, its pids cgroup) when its
/// table sets none: chromium with its renderers stays under 300.
pub const DEFAULT_MAX_PROCESSES: u64 = 512;

/// Limits applied before the child program runs (the defaults until the
/// plugin's own are known; its own again at restarts).
#[derive(Debug, Clone, Copy)]
pub struct Limits {
    pub memory_mb: Option<u64>,
    pub cpu_seconds: Option<u64>,
    pub max_processes: Option<u64>,
}

impl Default for Limits {
    fn default() -> Self {
        Limits {
            memory_mb: Some(DEFAULT_MEMORY_MB),
            cpu_seconds: None,
            max_processes: Some(DEFAULT_MAX_PROCESSES),
        }
    }
}
