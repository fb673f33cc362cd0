//! `--log-format text|json`: how stderr log lines are written. JSON lines
//! (one object per line) carry the current span and its parents (`span`,
//! `spans`: e.g. the call's principal), for log shippers. Messages are the
//! same in both: secrets are redacted before they are logged. When traces
//! are exported, spans carry `trace_id` and `span_id`.

use tracing_subscriber::EnvFilter;
use tracing_subscriber::layer::SubscriberExt;
use tracing_subscriber::util::SubscriberInitExt;

#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, clap::ValueEnum)]
pub enum LogFormat {
    /// One human-readable line per event.
    #[default]
    Text,
    /// One JSON object per line.
    Json,
}

/// Installs the stderr subscriber (stdout is the MCP stdio channel), with
/// an empty slot for the OpenTelemetry layer (`telemetry::traces`).
pub fn init(filter: &str, format: LogFormat) {
    let filter = match EnvFilter::try_new(filter) {
        Ok(_) => filter,
        Err(_) => crate::app::DEFAULT_LOG_FILTER,
    };
    crate::telemetry::set_stderr_json(format == LogFormat::Json);
    let (filter, slot) = crate::telemetry::traces::layers(filter);
    let base = tracing_subscriber::registry().with(filter).with(slot);
    let fmt = tracing_subscriber::fmt::layer()
        .with_writer(std::io::stderr)
        .with_ansi(false);
    let _ = match format {
        LogFormat::Text => base.with(fmt).try_init(),
        LogFormat::Json => base
            .with(fmt.json().with_current_span(true).with_span_list(true))
            .try_init(),
    };
}
