//! Call timeouts without a timer per call.
//!
//! A call's future is polled on the host's thread (wf-plugin-api's inline
//! calls), but its timers live in this plugin's runtime. Registering a
//! `tokio::time::timeout` there from the host's thread, with a deadline
//! earlier than the one the plugin's parked worker sleeps towards, makes
//! tokio wake that worker to re-arm its timer: half a thread wake-up per
//! call, measured (docs/benchmarks.md, "The call path"). Here every call
//! only records its deadline in a shared table; one reaper task per plugin
//! sleeps until the earliest deadline (at most [`TICK`]), cancels the calls
//! that are past theirs, and stops after [`IDLE_TICKS`] ticks without calls.
//! A new deadline wakes the reaper only when it is earlier than the one it
//! sleeps towards, which calls of one source, sharing a timeout, never are.

use std::collections::BTreeMap;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex, OnceLock, PoisonError};
use std::time::Duration;

use tokio::sync::Notify;
use tokio::time::Instant;
use tokio_util::sync::CancellationToken;

/// The longest the reaper sleeps without looking.
const TICK: Duration = Duration::from_secs(1);
/// Ticks without a call before the reaper stops (the next call starts it).
const IDLE_TICKS: u32 = 10;

#[derive(Default)]
struct Table {
    calls: BTreeMap<(Instant, u64), CancellationToken>,
    /// When the reaper wakes next; `None` while no reaper runs.
    planned: Option<Instant>,
}

#[derive(Default)]
struct Deadlines {
    table: Mutex<Table>,
    wake: Notify,
    next: AtomicU64,
}

fn deadlines() -> &'static Arc<Deadlines> {
    static D: OnceLock<Arc<Deadlines>> = OnceLock::new();
    D.get_or_init(Default::default)
}

/// A call's deadline; dropping it forgets the call.
pub struct Deadline {
    key: (Instant, u64),
    token: CancellationToken,
}

impl Deadline {
    /// Records a call that must end within `timeout` from now. Must be
    /// called inside this plugin's runtime context (it may start the reaper).
    pub fn after(timeout: Duration) -> Self {
        let d = deadlines();
        let now = Instant::now();
        let key = (now + timeout, d.next.fetch_add(1, Ordering::Relaxed));
        let token = CancellationToken::new();
        let mut t = d.table.lock().unwrap_or_else(PoisonError::into_inner);
        t.calls.insert(key, token.clone());
        match t.planned {
            None => {
                t.planned = Some(key.0.min(now + TICK));
                tokio::spawn(reap(d.clone()));
            }
            Some(planned) if key.0 < planned => d.wake.notify_one(),
            Some(_) => {}
        }
        Self { key, token }
    }

    /// Resolves once the deadline has passed.
    pub async fn expired(&self) {
        self.token.cancelled().await
    }
}

impl Drop for Deadline {
    fn drop(&mut self) {
        deadlines()
            .table
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .calls
            .remove(&self.key);
    }
}

async fn reap(d: Arc<Deadlines>) {
    let mut idle = 0;
    loop {
        let next = {
            let mut t = d.table.lock().unwrap_or_else(PoisonError::into_inner);
            let now = Instant::now();
            while let Some(entry) = t.calls.first_entry() {
                if entry.key().0 > now {
                    break;
                }
                entry.remove().cancel();
            }
            idle = if t.calls.is_empty() { idle + 1 } else { 0 };
            if idle > IDLE_TICKS {
                t.planned = None;
                return;
            }
            let earliest = t.calls.keys().next().map(|k| k.0);
            let next = earliest.map_or(now + TICK, |e| e.min(now + TICK));
            t.planned = Some(next);
            next
        };
        tokio::select! {
            () = tokio::time::sleep_until(next) => {}
            () = d.wake.notified() => {}
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[tokio::test]
    async fn a_call_past_its_deadline_is_told_and_others_are_not() {
        let short = Deadline::after(Duration::from_millis(50));
        let long = Deadline::after(Duration::from_secs(30));
        let started = std::time::Instant::now();
        tokio::time::timeout(Duration::from_secs(5), short.expired())
            .await
            .expect("the short deadline fires");
        let took = started.elapsed();
        assert!(took >= Duration::from_millis(50), "{took:?}");
        assert!(!long.token.is_cancelled());
        // An earlier deadline registered after a later one still fires on time.
        let sooner = Deadline::after(Duration::from_millis(30));
        tokio::time::timeout(Duration::from_secs(5), sooner.expired())
            .await
            .expect("an earlier deadline wakes the reaper");
        assert!(!long.token.is_cancelled());
        let key = long.key;
        drop(long);
        assert!(
            !deadlines().table.lock().unwrap().calls.contains_key(&key),
            "a dropped deadline is forgotten"
        );
    }
}
