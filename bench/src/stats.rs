//! Percentiles, medians and number formatting for the tables.

use std::time::Duration;

/// Nearest-rank percentile (`q` in 0..=1) of unsorted samples.
pub fn percentile(samples: &[Duration], q: f64) -> Duration {
    if samples.is_empty() {
        return Duration::ZERO;
    }
    let mut v = samples.to_vec();
    v.sort_unstable();
    let rank = ((q * v.len() as f64).ceil() as usize).clamp(1, v.len());
    v[rank - 1]
}

pub fn median(samples: &[Duration]) -> Duration {
    percentile(samples, 0.5)
}

pub fn median_f64(samples: &[f64]) -> f64 {
    if samples.is_empty() {
        return 0.0;
    }
    let mut v = samples.to_vec();
    v.sort_unstable_by(f64::total_cmp);
    v[(v.len() - 1) / 2]
}

pub fn us(d: Duration) -> f64 {
    d.as_secs_f64() * 1e6
}

pub fn ms(d: Duration) -> f64 {
    d.as_secs_f64() * 1e3
}

/// A signed difference in microseconds, e.g. `+42` or `-3`.
pub fn delta_us(a: Duration, b: Duration) -> String {
    format!("{:+.0}", us(a) - us(b))
}

pub fn mib(kib: u64) -> String {
    format!("{:.1} MiB", kib as f64 / 1024.0)
}

pub fn verdict(ok: bool) -> &'static str {
    if ok { "met" } else { "**missed**" }
}
