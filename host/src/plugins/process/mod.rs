//! Process mode: a plugin loaded by `wf-plugin-host`, a supervised child of
//! its own, instead of into wf. wf never loads such a plugin's library: the
//! child does (with the same checks and refusals), and the two speak
//! length-prefixed JSON frames over a socketpair (`frame`, `protocol`).
//!
//! The child and its supervision are Unix's (a socketpair inherited as fds
//! 3 and 4, fork, rlimits; Linux adds namespaces, Landlock and seccomp).
//! Elsewhere `unsupported` stands in for them: a plugin whose isolation is
//! `process` is refused at load with a line that says what to do instead.

#[cfg(unix)]
mod cgroup;
#[cfg(unix)]
pub mod child;
#[cfg(unix)]
mod contain;
#[cfg(unix)]
mod epochs;
pub mod frame;
#[cfg(unix)]
mod io;
mod launch;
pub mod limits;
pub mod protocol;
#[cfg(unix)]
mod proxy;
#[cfg(unix)]
mod running;
#[cfg(unix)]
pub mod spawn;
#[cfg(unix)]
mod supervisor;
#[cfg(not(unix))]
mod unsupported;
pub mod wire;

use std::sync::{Arc, Mutex, PoisonError, Weak};

pub use launch::{Health, Known, Launch};
#[cfg(unix)]
pub use proxy::plugin_box;
#[cfg(unix)]
pub use supervisor::{MAX_CRASHES_IN_A_ROW, Probe, Supervisor, backoff};
#[cfg(not(unix))]
pub use unsupported::{Probe, Supervisor, plugin_box, spawn};

fn registry() -> &'static Mutex<Vec<Weak<Supervisor>>> {
    static ALL: Mutex<Vec<Weak<Supervisor>>> = Mutex::new(Vec::new());
    &ALL
}

#[cfg_attr(not(unix), allow(dead_code))]
fn register(sup: &Arc<Supervisor>) {
    let mut all = registry().lock().unwrap_or_else(PoisonError::into_inner);
    all.retain(|w| w.strong_count() > 0);
    all.push(Arc::downgrade(sup));
}

fn find(plugin: &str) -> Option<Arc<Supervisor>> {
    registry()
        .lock()
        .unwrap_or_else(PoisonError::into_inner)
        .iter()
        .filter_map(Weak::upgrade)
        .find(|s| s.name == plugin)
}

/// The health of plugin `plugin`'s child; None for a plugin in process.
pub fn health(plugin: &str) -> Option<Health> {
    find(plugin).map(|s| s.health())
}

/// Source `source`'s calls that its plugin's child has said nothing of for
/// a while (`Supervisor::stalled_calls`); None for a plugin in process.
pub fn stalled_calls(plugin: &str, source: &str) -> Option<Vec<serde_json::Value>> {
    find(plugin).map(|s| s.stalled_calls(source))
}

/// Stops every plugin child (wf is exiting).
pub fn stop_all() {
    let all: Vec<Arc<Supervisor>> = registry()
        .lock()
        .unwrap_or_else(PoisonError::into_inner)
        .iter()
        .filter_map(Weak::upgrade)
        .collect();
    for s in all {
        s.stop();
    }
}

/// What `wf plugins` and the admin listing show of a plugin's child.
pub fn describe(sup: &Supervisor) -> serde_json::Value {
    let (state, error) = match sup.health() {
        Health::Running => ("running", None),
        Health::Restarting(why) => ("restarting", Some(why)),
        Health::Failed(why) => ("failed", Some(why)),
        Health::Stopped(why) => ("stopped", Some(why)),
    };
    let start = sup.start_settings();
    serde_json::json!({
        "pid": sup.pid(),
        "restarts": sup.restarts(),
        "state": state,
        "error": error,
        "sandbox": sup.sandbox(),
        // What bounds it (the defaults fill what its table leaves out).
        "limits": {
            "memory_mb": start.memory_mb,
            "cpu_seconds": start.cpu_seconds,
            "max_processes": start.max_processes,
            // All its processes together (its memory cgroup); null where wf
            // may make none: then memory_mb bounds each process only.
            "memory_total_mb": sup.memory_total_mb(),
            "nice": spawn::CHILD_NICE,
        },
    })
}
