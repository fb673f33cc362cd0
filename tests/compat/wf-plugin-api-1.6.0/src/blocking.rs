//! Blocking work off the async workers (docs/plugin-authoring.md, "Async
//! work and cancellation").

use crate::error::{ErrorCode, PluginError};

/// Runs `work` (a synchronous library, a file read, a long computation: code
/// that does not `.await`) on this plugin's blocking pool instead of on one
/// of its runtime's few async workers, and waits for its value.
///
/// Code that never yields keeps the worker it runs on until it returns: the
/// plugin's other calls, timers and I/O wait for the workers left (in a wf
/// plugin child, two). `blocking` moves it to a thread of its own, so they
/// do not.
///
/// Cancellation: when the call's future is dropped (its caller cancelled, a
/// deadline passed), the caller gets its answer at once but `work` runs to
/// its end on its thread (a thread cannot be stopped safely); check a flag
/// of your own inside long work if it should stop early.
///
/// ```no_run
/// # async fn example() -> Result<u64, wf_plugin_api::PluginError> {
/// let sum = wf_plugin_api::blocking(|| (0..50_000_000u64).sum::<u64>()).await?;
/// # Ok(sum) }
/// ```
///
/// A panic in `work` comes back as a `panicked` error.
pub async fn blocking<T, F>(work: F) -> Result<T, PluginError>
where
    F: FnOnce() -> T + Send + 'static,
    T: Send + 'static,
{
    // This dylib's own runtime: its blocking pool, whichever thread polls
    // the call (a host polls in-process calls on its own threads).
    crate::runtime::runtime()
        .spawn_blocking(work)
        .await
        .map_err(|e| match e.try_into_panic() {
            Ok(payload) => PluginError::new(
                ErrorCode::Panicked,
                format!(
                    "plugin panicked in blocking work: {}",
                    crate::runtime::panic_message(&*payload)
                ),
            ),
            Err(_) => PluginError::internal("the blocking work was cancelled"),
        })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn runs_the_work_and_reports_a_panic() {
        let rt = tokio::runtime::Builder::new_current_thread()
            .enable_all()
            .build()
            .unwrap();
        rt.block_on(async {
            assert_eq!(blocking(|| 6 * 7).await.unwrap(), 42);
            let e = blocking(|| -> u8 { panic!("boom") }).await.unwrap_err();
            assert_eq!(e.code, ErrorCode::Panicked);
            assert!(e.message.contains("boom"), "{}", e.message);
        });
    }

    #[test]
    fn the_work_runs_on_another_thread() {
        let rt = tokio::runtime::Builder::new_current_thread()
            .enable_all()
            .build()
            .unwrap();
        let here = std::thread::current().id();
        let there = rt
            .block_on(blocking(|| std::thread::current().id()))
            .unwrap();
        assert_ne!(here, there);
    }
}
