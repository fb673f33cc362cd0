//! `[telemetry]`: what wf exposes about itself (docs/operator-manual.md,
//! Observability).

use serde::{Deserialize, Serialize};

impl TelemetryConfig {
    /// The trace exporter's settings.
    pub fn traces(&self) -> crate::telemetry::traces::Settings {
        crate::telemetry::traces::Settings {
            otlp_endpoint: self.otlp_endpoint.clone(),
            otlp_protocol: self.otlp_protocol.clone(),
            service_name: self.service_name.clone(),
            capture_payloads: self.capture_payloads,
            otlp_metrics: self.otlp_metrics,
            otlp_metrics_interval_ms: self.otlp_metrics_interval_ms,
        }
    }
}

#[derive(Debug, Clone, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct TelemetryConfig {
    /// The bearer token `/metrics` asks for (`${VAR}` allowed). Unset:
    /// `/metrics` is not served.
    #[serde(default)]
    pub metrics_token: Option<String>,
    /// Serve `/metrics` to non-loopback peers too (the token is still needed).
    #[serde(default)]
    pub metrics_remote: bool,
    /// OTLP collector base URL (e.g. `http://127.0.0.1:4318`, gRPC
    /// `http://127.0.0.1:4317`). Unset (and no `OTEL_EXPORTER_OTLP_ENDPOINT`):
    /// no traces.
    #[serde(default)]
    pub otlp_endpoint: Option<String>,
    /// `"http"` (protobuf, default) or `"grpc"`.
    #[serde(default)]
    pub otlp_protocol: Option<String>,
    /// `service.name` of the traces (default `wf`, or `OTEL_SERVICE_NAME`).
    #[serde(default)]
    pub service_name: Option<String>,
    /// Put argument values in spans. Off: spans carry names and ids only.
    #[serde(default)]
    pub capture_payloads: bool,
    /// Push the metrics over OTLP too, to the traces' collector. Default on
    /// (when an OTLP endpoint is set); `OTEL_METRICS_EXPORTER=none` also turns it off.
    #[serde(default = "default_true")]
    pub otlp_metrics: bool,
    /// How often metrics are pushed over OTLP (default
    /// `OTEL_METRIC_EXPORT_INTERVAL`, else 60 s).
    #[serde(default)]
    pub otlp_metrics_interval_ms: Option<u64>,
}

fn default_true() -> bool {
    true
}

impl Default for TelemetryConfig {
    fn default() -> Self {
        Self {
            metrics_token: None,
            metrics_remote: false,
            otlp_endpoint: None,
            otlp_protocol: None,
            service_name: None,
            capture_payloads: false,
            otlp_metrics: true,
            otlp_metrics_interval_ms: None,
        }
    }
}
