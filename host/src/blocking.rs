//! Blocking work on the runtime's threads. The bottom of the layering, like
//! `clock`: the store and the plugin hosts both use it.

use tokio::runtime::{Handle, RuntimeFlavor};

/// Runs `f`, which can block, with the calling worker's other tasks moved to
/// another thread meanwhile (`block_in_place`), so one worker — `wf serve`'s
/// default over stdio and on two CPUs — keeps serving. Elsewhere (a
/// current-thread runtime, a blocking thread, no runtime) `f` just runs.
pub fn off_worker<R>(f: impl FnOnce() -> R) -> R {
    match Handle::try_current() {
        Ok(h) if h.runtime_flavor() == RuntimeFlavor::MultiThread => tokio::task::block_in_place(f),
        _ => f(),
    }
}
