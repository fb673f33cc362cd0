//! The metrics of [`super::metrics`] pushed over OTLP as well
//! (docs/operator-manual.md, Observability): the same names (without
//! Prometheus' `_total`, which OTLP-to-Prometheus adds back) and labels,
//! recorded into OpenTelemetry instruments beside the prometheus-client ones
//! and exported by a periodic reader. On when traces go over OTLP
//! (`[telemetry] otlp_endpoint` or `OTEL_EXPORTER_OTLP_(METRICS_)ENDPOINT`),
//! unless `otlp_metrics = false` or `OTEL_METRICS_EXPORTER=none`. While off,
//! recording pays one `OnceLock` check.

use std::sync::OnceLock;
use std::time::Duration;

use opentelemetry::KeyValue;
use opentelemetry::metrics::{
    Counter, Histogram, Meter, MeterProvider as _, ObservableGauge, UpDownCounter,
};
use opentelemetry_otlp::{Protocol, WithExportConfig};
use opentelemetry_sdk::metrics::{PeriodicReader, SdkMeterProvider};

use super::traces::{Settings, TraceError};

/// The OTel twins of the prometheus-client families; the two live gauges are
/// observed at each export through [`observe_gauges_with`].
pub(super) struct Instruments {
    pub requests: Counter<u64>,
    pub calls: Counter<u64>,
    pub call_seconds: Histogram<f64>,
    pub panics: Counter<u64>,
    pub epoch_changes: Counter<u64>,
    pub discoveries: Counter<u64>,
    pub discovery_seconds: Histogram<f64>,
    pub reloads: Counter<u64>,
    pub runs: Counter<u64>,
    pub node_seconds: Histogram<f64>,
    pub http_queued: UpDownCounter<i64>,
    pub http_refused: Counter<u64>,
    _gauges: [ObservableGauge<u64>; 2],
}

/// Per source: calls in flight and upstream sessions open, read from live state.
pub type SourceGauges = (Vec<(String, usize)>, Vec<(String, usize)>);
type GaugeReader = Box<dyn Fn() -> SourceGauges + Send + Sync>;

static GAUGES: OnceLock<GaugeReader> = OnceLock::new();

/// How the live gauges are read at each export (set once by `wf serve`, which
/// holds the sources); without it they are not exported.
pub fn observe_gauges_with(read: impl Fn() -> SourceGauges + Send + Sync + 'static) {
    let _ = GAUGES.set(Box::new(read));
}

static INSTRUMENTS: OnceLock<Instruments> = OnceLock::new();

/// The instruments, while metrics go over OTLP.
#[inline]
pub(super) fn instruments() -> Option<&'static Instruments> {
    INSTRUMENTS.get()
}

/// Labels as OTel attributes.
pub(super) fn attrs<const N: usize>(pairs: [(&'static str, &str); N]) -> [KeyValue; N] {
    pairs.map(|(k, v)| KeyValue::new(k, v.to_string()))
}

/// Exporting metrics; [`OtlpMetrics::shutdown`] pushes the last values.
pub struct OtlpMetrics(SdkMeterProvider);

impl OtlpMetrics {
    pub fn shutdown(self) {
        if let Err(e) = self.0.shutdown() {
            tracing::warn!("flushing metrics at shutdown: {e}");
        }
    }
}

/// Starts the periodic OTLP export when configured; `None` when off.
pub fn start(config: &Settings) -> Result<Option<OtlpMetrics>, TraceError> {
    let env = |k: &str| std::env::var(k).ok().filter(|v| !v.is_empty());
    let wanted = config.otlp_metrics && env("OTEL_METRICS_EXPORTER").as_deref() != Some("none");
    let Some(protocol) = config.collector_protocol("METRICS").filter(|_| wanted) else {
        return Ok(None);
    };
    let builder = opentelemetry_otlp::MetricExporter::builder();
    let exporter = match protocol.as_str() {
        "http" | "http/protobuf" => {
            let mut b = builder.with_http().with_protocol(Protocol::HttpBinary);
            if let Some(base) = &config.otlp_endpoint {
                b = b.with_endpoint(super::traces::signal_url(base, "/v1/metrics"));
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
    // Without a configured interval the SDK reads OTEL_METRIC_EXPORT_INTERVAL (default 60 s).
    let mut reader = PeriodicReader::builder(exporter);
    if let Some(ms) = config.otlp_metrics_interval_ms {
        reader = reader.with_interval(Duration::from_millis(ms.max(1)));
    }
    let service = config
        .service_name
        .clone()
        .or_else(|| env("OTEL_SERVICE_NAME"))
        .unwrap_or_else(|| "wf".into());
    let provider = SdkMeterProvider::builder()
        .with_reader(reader.build())
        .with_resource(
            opentelemetry_sdk::Resource::builder()
                .with_service_name(service)
                .build(),
        )
        .build();
    let _ = INSTRUMENTS.set(Instruments::new(&provider.meter("wf")));
    tracing::info!(protocol, "exporting metrics over OTLP");
    Ok(Some(OtlpMetrics(provider)))
}

/// Seconds, 1 ms to ~33 s: the buckets of the Prometheus histograms.
fn latency_bounds() -> Vec<f64> {
    (0..16).map(|i| 0.001 * 2f64.powi(i)).collect()
}

impl Instruments {
    fn new(m: &Meter) -> Self {
        let counter = |name: &'static str, what: &'static str| {
            m.u64_counter(name).with_description(what).build()
        };
        let histogram = |name: &'static str, what: &'static str| {
            m.f64_histogram(name)
                .with_description(what)
                .with_unit("s")
                .with_boundaries(latency_bounds())
                .build()
        };
        let gauge = |name: &'static str,
                     what: &'static str,
                     pick: fn(SourceGauges) -> Vec<(String, usize)>| {
            m.u64_observable_gauge(name)
                .with_description(what)
                .with_callback(move |o| {
                    if let Some(read) = GAUGES.get() {
                        for (source, n) in pick(read()) {
                            o.observe(n as u64, &[KeyValue::new("source", source)]);
                        }
                    }
                })
                .build()
        };
        Self {
            _gauges: [
                gauge(
                    "wf_calls_in_flight",
                    "Source calls wf is waiting on now",
                    |g| g.0,
                ),
                gauge(
                    "wf_upstream_sessions_open",
                    "Per-principal and per-client upstream sessions open now",
                    |g| g.1,
                ),
            ],
            requests: counter(
                "wf_requests",
                "MCP requests from clients, by method and outcome",
            ),
            calls: counter(
                "wf_source_calls",
                "Calls into sources by source, method, name and outcome",
            ),
            call_seconds: histogram(
                "wf_source_call_duration_seconds",
                "Time from a source call's start to its answer",
            ),
            panics: counter("wf_plugin_panics", "Plugin panics contained"),
            epoch_changes: counter(
                "wf_session_epoch_changes",
                "Upstream session restarts reported to clients",
            ),
            discoveries: counter(
                "wf_discoveries",
                "Catalog discoveries by source and outcome",
            ),
            discovery_seconds: histogram(
                "wf_discovery_duration_seconds",
                "Time a catalog discovery took",
            ),
            reloads: counter("wf_config_reloads", "Config reloads by outcome"),
            runs: counter("wf_workflow_runs", "Workflow runs finished, by status"),
            http_queued: m
                .i64_up_down_counter("wf_http_queued_requests")
                .with_description("HTTP requests waiting for a per-principal slot now")
                .build(),
            http_refused: counter(
                "wf_http_refused_requests",
                "HTTP requests refused at a per-principal bound, by principal and limit",
            ),
            node_seconds: histogram(
                "wf_workflow_node_duration_seconds",
                "Time a workflow node took, by capability and status",
            ),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_buckets_are_the_prometheus_ones() {
        let b = latency_bounds();
        assert_eq!((b.len(), b[0]), (16, 0.001));
        assert!((b[15] - 32.768).abs() < 1e-9, "{b:?}");
        assert_eq!(
            super::super::traces::signal_url("http://c:4318/", "/v1/metrics"),
            "http://c:4318/v1/metrics"
        );
    }

    #[test]
    fn off_without_an_endpoint_or_when_switched_off() {
        let s = Settings {
            otlp_metrics: false,
            otlp_endpoint: Some("http://127.0.0.1:9".into()),
            ..Settings::default()
        };
        assert!(start(&s).expect("off is no error").is_none());
        assert!(instruments().is_none());
    }
}
