//! Each source's wasmtime engine, its pool of instances, and the clock of
//! the CPU deadlines.
//!
//! Guest code is interrupted at each epoch tick (every [`TICK`]): the
//! store's callback then yields to the async executor (so a component that
//! computes for seconds holds no thread for more than a tick) or, once the
//! call's budget of ticks is spent, stops it with a trap the call's error
//! names (`timeout_ms`). One [`Ticker`] thread ticks every source's engine.
//!
//! A source's engine allocates instances from a pool sized for its
//! `max_instances`: a call's instance takes a slot whose linear memories,
//! tables and fiber stack were mapped once and are reset (copy-on-write
//! memory image) when the call ends, instead of mapping and unmapping them
//! on every call. Up to [`MEMORY_KEEP_RESIDENT`] bytes of each linear
//! memory (and [`TABLE_KEEP_RESIDENT`] of each table) stay resident and are
//! reset in place (with `PAGEMAP_SCAN`, only the pages the call wrote)
//! rather than `madvise`d away and faulted back in by the next call; the
//! rest is `madvise`d. Isolation is unchanged: a slot is
//! reset to the component's initial image before it is reused.

use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::{Arc, Condvar, Mutex};
use std::time::Duration;

use wasmtime::{
    Config, Enabled, Engine, EngineWeak, InstanceAllocationStrategy, PoolingAllocationConfig,
};

use crate::settings::Settings;

/// How often guest code is interrupted.
pub const TICK: Duration = Duration::from_millis(10);

/// Linear memories one instance of a component may hold (a componentize-py
/// or componentize-js component holds a few).
pub const MEMORIES_PER_INSTANCE: u32 = 8;
/// Tables one instance of a component may hold (adapter shims add many).
pub const TABLES_PER_INSTANCE: u32 = 64;
/// Core instances one instance of a component may hold.
const CORE_INSTANCES_PER_INSTANCE: u32 = 1000;
/// Elements of any one table (an interpreter's function table is large).
pub const TABLE_ELEMENTS: usize = 100_000;
/// Bytes of each pooled linear memory kept resident between calls: 1 MiB
/// covers what a small guest touches in a call (the top of its stack, a
/// small heap), so a warm call takes no page faults for it; a bigger
/// guest's excess is still returned with `madvise`.
pub const MEMORY_KEEP_RESIDENT: usize = 1 << 20;
/// Bytes of each pooled table kept resident: 64 KiB is 8,192 function
/// references, more than a small guest's table. With the memories', a slot
/// keeps at most 8 × 1 MiB + 64 × 64 KiB = 12 MiB resident (60 MiB for a
/// source at the default `max_instances` = 4).
pub const TABLE_KEEP_RESIDENT: usize = 64 << 10;

/// Ticks the epoch of every live engine of the plugin (stopped when the
/// plugin is dropped), but only while guest code may run: with no store
/// alive (no call, no discovery) the thread sleeps until one is made, so an
/// idle wf — and every wf with the plugin loaded but no wasm source — is not
/// woken a hundred times a second.
pub struct Ticker {
    shared: Arc<Shared>,
}

/// What the ticker's thread and the stores share.
struct Shared {
    engines: Mutex<Vec<EngineWeak>>,
    /// Stores alive (see [`Busy`]).
    busy: Mutex<usize>,
    /// Signalled when `busy` leaves zero, and at stop.
    wake: Condvar,
    stop: AtomicBool,
    /// Ticks so far (for tests).
    ticks: AtomicU64,
}

impl Ticker {
    pub fn new() -> Result<Self, String> {
        let shared = Arc::new(Shared {
            engines: Mutex::default(),
            busy: Mutex::new(0),
            wake: Condvar::new(),
            stop: AtomicBool::new(false),
            ticks: AtomicU64::new(0),
        });
        let ticked = shared.clone();
        std::thread::Builder::new()
            .name("wf-wasm-epoch".into())
            .spawn(move || ticked.run())
            .map_err(|e| format!("cannot start the epoch ticker: {e}"))?;
        Ok(Ticker { shared })
    }
}

impl Shared {
    fn run(&self) {
        loop {
            {
                let mut busy = self.busy.lock().unwrap_or_else(|e| e.into_inner());
                while *busy == 0 && !self.stop.load(Ordering::Relaxed) {
                    busy = self.wake.wait(busy).unwrap_or_else(|e| e.into_inner());
                }
            }
            if self.stop.load(Ordering::Relaxed) {
                return;
            }
            std::thread::sleep(TICK);
            self.ticks.fetch_add(1, Ordering::Relaxed);
            let mut engines = self.engines.lock().unwrap_or_else(|e| e.into_inner());
            engines.retain(|weak| match weak.upgrade() {
                Some(engine) => {
                    engine.increment_epoch();
                    true
                }
                None => false,
            });
        }
    }
}

impl Drop for Ticker {
    fn drop(&mut self) {
        self.shared.stop.store(true, Ordering::Relaxed);
        // Taken so the thread is either before its check or waiting.
        let _busy = self.shared.busy.lock().unwrap_or_else(|e| e.into_inner());
        self.shared.wake.notify_all();
    }
}

/// Held by each store for its life: the ticker runs while any is held.
pub struct Busy(Arc<Shared>);

impl Busy {
    fn new(shared: &Arc<Shared>) -> Self {
        let mut busy = shared.busy.lock().unwrap_or_else(|e| e.into_inner());
        *busy += 1;
        if *busy == 1 {
            shared.wake.notify_all();
        }
        Busy(shared.clone())
    }
}

impl Drop for Busy {
    fn drop(&mut self) {
        let mut busy = self.0.busy.lock().unwrap_or_else(|e| e.into_inner());
        *busy = busy.saturating_sub(1);
    }
}

/// One source's engine, ticked by the plugin's [`Ticker`].
pub struct Runtime {
    pub engine: Engine,
    ticker: Arc<Shared>,
}

impl Runtime {
    /// An engine whose instance pool holds `max_instances` instances of the
    /// source's component (one more for discovery's).
    pub fn new(ticker: &Ticker, settings: &Settings) -> Result<Self, String> {
        let slots = u32::try_from(settings.max_instances.saturating_add(1)).unwrap_or(u32::MAX);
        let mut pool = PoolingAllocationConfig::new();
        pool.total_component_instances(slots)
            .total_core_instances(slots.saturating_mul(CORE_INSTANCES_PER_INSTANCE))
            .total_memories(slots.saturating_mul(MEMORIES_PER_INSTANCE))
            .total_tables(slots.saturating_mul(TABLES_PER_INSTANCE))
            .total_stacks(slots)
            .max_core_instances_per_component(CORE_INSTANCES_PER_INSTANCE)
            .max_memories_per_component(MEMORIES_PER_INSTANCE)
            .max_tables_per_component(TABLES_PER_INSTANCE)
            .max_memories_per_module(MEMORIES_PER_INSTANCE)
            .max_tables_per_module(TABLES_PER_INSTANCE)
            .table_elements(TABLE_ELEMENTS)
            .linear_memory_keep_resident(MEMORY_KEEP_RESIDENT)
            .table_keep_resident(TABLE_KEEP_RESIDENT)
            // Where the kernel has PAGEMAP_SCAN (Linux 6.7+), reset only the
            // written pages; elsewhere wasmtime memsets the kept bytes.
            .pagemap_scan(Enabled::Auto);
        let mut config = Config::new();
        config.epoch_interruption(true);
        // Guest stacks: bounded, far below the fiber stack wasmtime runs them on.
        config.max_wasm_stack(1 << 20);
        config.allocation_strategy(InstanceAllocationStrategy::Pooling(pool));
        let engine = Engine::new(&config).map_err(|e| format!("wasmtime engine: {e:#}"))?;
        ticker
            .shared
            .engines
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .push(engine.weak());
        Ok(Runtime {
            engine,
            ticker: ticker.shared.clone(),
        })
    }

    /// Keeps the epoch ticking while the returned guard lives (one per store).
    pub fn busy(&self) -> Busy {
        Busy::new(&self.ticker)
    }

    /// Ticks in `timeout_ms` (at least one).
    pub fn ticks(timeout_ms: u64) -> u64 {
        (timeout_ms / TICK.as_millis() as u64).max(1)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::time::Instant;

    fn ticks(t: &Ticker) -> u64 {
        t.shared.ticks.load(Ordering::Relaxed)
    }

    /// Waits (up to 10 s) for the tick count to hold still for 100 ms.
    fn settles(t: &Ticker) -> bool {
        let end = Instant::now() + Duration::from_secs(10);
        let mut last = ticks(t);
        while Instant::now() < end {
            std::thread::sleep(Duration::from_millis(100));
            let now = ticks(t);
            if now == last {
                return true;
            }
            last = now;
        }
        false
    }

    #[test]
    fn the_ticker_runs_only_while_a_store_lives() {
        let t = Ticker::new().unwrap();
        // Idle: ten ticks' time passes without one.
        std::thread::sleep(TICK * 10);
        assert_eq!(ticks(&t), 0, "ticked with no store alive");
        let busy = Busy::new(&t.shared);
        let end = Instant::now() + Duration::from_secs(10);
        while ticks(&t) < 3 && Instant::now() < end {
            std::thread::sleep(TICK);
        }
        assert!(ticks(&t) >= 3, "did not tick while a store lived");
        drop(busy);
        assert!(settles(&t), "kept ticking after the last store");
        let parked = ticks(&t);
        // A second store wakes it again.
        let _again = Busy::new(&t.shared);
        let end = Instant::now() + Duration::from_secs(10);
        while ticks(&t) <= parked && Instant::now() < end {
            std::thread::sleep(TICK);
        }
        assert!(ticks(&t) > parked, "a new store did not wake the ticker");
    }
}
