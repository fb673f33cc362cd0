//! `--log-format text|json`: how stderr log lines are written. JSON lines
//! (one object per line) carry the current span and its parents (`span`,
//! `spans`: e.g. the call's principal), for log shippers. Messages are the
//! same in both: secrets are redacted before they are logged.

use tracing_subscriber::EnvFilter;

#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, clap::ValueEnum)]
pub enum LogFormat {
    /// One human-readable line per event.
    #[default]
    Text,
    /// One JSON object per line.
    Json,
}

/// Installs the stderr subscriber (stdout is the MCP stdio channel).
pub fn init(filter: &str, format: LogFormat) {
    let filter = EnvFilter::try_new(filter)
        .unwrap_or_else(|_| EnvFilter::new(crate::app::DEFAULT_LOG_FILTER));
    let builder = tracing_subscriber::fmt()
        .with_env_filter(filter)
        .with_writer(std::io::stderr)
        .with_ansi(false);
    let _ = match format {
        LogFormat::Text => builder.try_init(),
        LogFormat::Json => builder
            .json()
            .with_current_span(true)
            .with_span_list(true)
            .try_init(),
    };
}
