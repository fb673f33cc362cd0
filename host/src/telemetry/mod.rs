//! What wf tells an operator about itself beyond its logs: Prometheus
//! metrics (`/metrics` on `wf serve --http`, served by the server layer) and
//! OpenTelemetry traces over OTLP (and the same metrics over OTLP).
//! The bottom layer: every other module records with one-line calls.

pub mod metrics;
pub mod otlp_logs;
pub mod otlp_metrics;
pub mod traces;

use std::sync::atomic::{AtomicBool, Ordering};

/// Whether stderr carries JSON lines (`--log-format json`).
static STDERR_JSON: AtomicBool = AtomicBool::new(false);

/// Says that stderr carries JSON lines (set once by the log setup).
pub fn set_stderr_json(on: bool) {
    STDERR_JSON.store(on, Ordering::Relaxed);
}

/// Writes one line on stderr for the operator's eyes, in the stderr log
/// format but never through `tracing`, so no log layer, span or exported
/// record carries it (the console's sign-in link). With JSON logs it is an
/// object shaped like the log lines (`timestamp`, `level`, `fields.message`,
/// `target`), so a log shipper that reads every line as JSON still can.
pub fn operator_line(target: &str, message: &str) {
    if !STDERR_JSON.load(Ordering::Relaxed) {
        eprintln!("{message}");
        return;
    }
    use tracing_subscriber::fmt::time::FormatTime;
    let mut timestamp = String::new();
    let _ = tracing_subscriber::fmt::time::SystemTime.format_time(
        &mut tracing_subscriber::fmt::format::Writer::new(&mut timestamp),
    );
    let line = serde_json::json!({
        "timestamp": timestamp,
        "level": "INFO",
        "fields": {"message": message},
        "target": target,
    });
    eprintln!("{line}");
}
