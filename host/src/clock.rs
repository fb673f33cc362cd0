//! Wall-clock time as the host records it: milliseconds since the Unix epoch.
//! The bottom of the layering: store, sources and plugins all use it.

use std::time::{SystemTime, UNIX_EPOCH};

/// Now, in ms since the Unix epoch (0 if the clock is before 1970).
pub fn now_ms() -> i64 {
    SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .map(|d| d.as_millis() as i64)
        .unwrap_or(0)
}
