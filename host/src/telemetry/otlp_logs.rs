//! Audit records as OTLP logs (docs/operator-manual.md, "Audit trail"), to
//! the collector traces go to (`[telemetry] otlp_endpoint` or
//! `OTEL_EXPORTER_OTLP_(LOGS_)ENDPOINT`), unless `[audit] otlp_logs = false`
//! or `OTEL_LOGS_EXPORTER=none`. A batch processor on a thread of its own
//! exports them; the audit writer hands each record over ([`emit`]).

use std::sync::OnceLock;
use std::time::SystemTime;

use opentelemetry::logs::{AnyValue, LogRecord as _, Logger as _, LoggerProvider as _, Severity};
use opentelemetry_otlp::{Protocol, WithExportConfig};
use opentelemetry_sdk::logs::{SdkLogger, SdkLoggerProvider};

use super::traces::{Settings, TraceError};

static LOGGER: OnceLock<SdkLogger> = OnceLock::new();

/// Exporting logs; [`OtlpLogs::shutdown`] pushes what is queued.
pub struct OtlpLogs(SdkLoggerProvider);

impl OtlpLogs {
    pub fn shutdown(self) {
        if let Err(e) = self.0.shutdown() {
            tracing::warn!("flushing OTLP logs at shutdown: {e}");
        }
    }
}

/// Whether records go over OTLP now.
pub fn enabled() -> bool {
    LOGGER.get().is_some()
}

/// Starts the OTLP log export when `wanted` and a collector is configured.
pub fn start(config: &Settings, wanted: bool) -> Result<Option<OtlpLogs>, TraceError> {
    let env = |k: &str| std::env::var(k).ok().filter(|v| !v.is_empty());
    let wanted = wanted && env("OTEL_LOGS_EXPORTER").as_deref() != Some("none");
    let Some(protocol) = config.collector_protocol("LOGS").filter(|_| wanted) else {
        return Ok(None);
    };
    let builder = opentelemetry_otlp::LogExporter::builder();
    let exporter = match protocol.as_str() {
        "http" | "http/protobuf" => {
            let mut b = builder.with_http().with_protocol(Protocol::HttpBinary);
            if let Some(base) = &config.otlp_endpoint {
                b = b.with_endpoint(super::traces::signal_url(base, "/v1/logs"));
            }
            b.build()
        }
        "grpc" => {
            let mut b = builder.with_tonic();
            if let Some(base) = &config.otlp_endpoint {
                b = b.with_endpoint(base.clone());
            }
            b.build()
        }
        other => return Err(TraceError::Protocol(other.into())),
    }
    .map_err(|e| TraceError::Exporter(e.to_string()))?;
    let service = config
        .service_name
        .clone()
        .or_else(|| env("OTEL_SERVICE_NAME"))
        .unwrap_or_else(|| "wf".into());
    let provider = SdkLoggerProvider::builder()
        .with_batch_exporter(exporter)
        .with_resource(
            opentelemetry_sdk::Resource::builder()
                .with_service_name(service)
                .build(),
        )
        .build();
    let _ = LOGGER.set(provider.logger("wf.audit"));
    tracing::info!(protocol, "exporting audit records as OTLP logs");
    Ok(Some(OtlpLogs(provider)))
}

/// One log record named `event`, its body `body` (a JSON text) and its
/// attributes; nothing while the export is off.
pub fn emit(
    event: &'static str,
    at: SystemTime,
    body: String,
    attributes: Vec<(&'static str, String)>,
) {
    let Some(logger) = LOGGER.get() else { return };
    let mut r = logger.create_log_record();
    r.set_event_name(event);
    r.set_timestamp(at);
    r.set_severity_number(Severity::Info);
    r.set_severity_text("INFO");
    r.set_body(AnyValue::String(body.into()));
    r.add_attributes(attributes);
    logger.emit(r);
}
