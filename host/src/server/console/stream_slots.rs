//! At most `max` console event streams open at once per principal
//! (`[server] max_console_streams_per_principal`): a stream holds its slot
//! until it ends (its client went away, or wf shuts down), so one token
//! cannot hold every connection wf allows with idle streams.

use std::collections::HashMap;
use std::sync::{Arc, Mutex, PoisonError};

use tokio::sync::{OwnedSemaphorePermit, Semaphore};

use crate::server::Principal;

pub struct StreamSlots {
    max: usize,
    /// One semaphore per principal; the principals are the configured tokens.
    slots: Mutex<HashMap<Principal, Arc<Semaphore>>>,
}

impl StreamSlots {
    pub fn new(max: usize) -> Self {
        Self {
            max,
            slots: Mutex::new(HashMap::new()),
        }
    }

    pub fn max(&self) -> usize {
        self.max
    }

    /// A slot for one more stream of `p`, or `None` at the limit.
    pub fn try_acquire(&self, p: &Principal) -> Option<OwnedSemaphorePermit> {
        let sem = self
            .slots
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .entry(p.clone())
            .or_insert_with(|| Arc::new(Semaphore::new(self.max)))
            .clone();
        sem.try_acquire_owned().ok()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn each_principal_has_its_own_slots_and_a_dropped_one_frees() {
        let slots = StreamSlots::new(2);
        let (a, b) = (Principal::local(), Principal::bearer());
        let first = slots.try_acquire(&a).expect("first");
        let _second = slots.try_acquire(&a).expect("second");
        assert!(slots.try_acquire(&a).is_none());
        assert!(slots.try_acquire(&b).is_some());
        drop(first);
        assert!(slots.try_acquire(&a).is_some());
    }
}
