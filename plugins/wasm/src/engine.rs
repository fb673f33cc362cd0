//! The plugin's one wasmtime engine and the clock of its CPU deadlines.
//!
//! Guest code is interrupted at each epoch tick (every [`TICK`]): the
//! store's callback then yields to the async executor (so a component that
//! computes for seconds holds no thread for more than a tick) or, once the
//! call's budget of ticks is spent, stops it with a trap the call's error
//! names (`timeout_ms`).

use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::Duration;

use wasmtime::{Config, Engine};

/// How often guest code is interrupted.
pub const TICK: Duration = Duration::from_millis(10);

/// The engine and its ticker thread (stopped when the plugin is dropped).
pub struct Runtime {
    pub engine: Engine,
    stop: Arc<AtomicBool>,
}

impl Runtime {
    pub fn new() -> Result<Self, String> {
        let mut config = Config::new();
        config.epoch_interruption(true);
        // Guest stacks: bounded, far below the fiber stack wasmtime runs them on.
        config.max_wasm_stack(1 << 20);
        let engine = Engine::new(&config).map_err(|e| format!("wasmtime engine: {e}"))?;
        let stop = Arc::new(AtomicBool::new(false));
        let ticker = engine.weak();
        let stopped = stop.clone();
        std::thread::Builder::new()
            .name("wf-wasm-epoch".into())
            .spawn(move || {
                while !stopped.load(Ordering::Relaxed) {
                    std::thread::sleep(TICK);
                    match ticker.upgrade() {
                        Some(engine) => engine.increment_epoch(),
                        None => break,
                    }
                }
            })
            .map_err(|e| format!("cannot start the epoch ticker: {e}"))?;
        Ok(Runtime { engine, stop })
    }

    /// Ticks in `timeout_ms` (at least one).
    pub fn ticks(timeout_ms: u64) -> u64 {
        (timeout_ms / TICK.as_millis() as u64).max(1)
    }
}

impl Drop for Runtime {
    fn drop(&mut self) {
        self.stop.store(true, Ordering::Relaxed);
    }
}
