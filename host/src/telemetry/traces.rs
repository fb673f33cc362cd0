//! OpenTelemetry traces over OTLP (docs/operator-manual.md, Observability).
//!
//! Off unless `[telemetry] otlp_endpoint` or `OTEL_EXPORTER_OTLP_(TRACES_)ENDPOINT`
//! is set. The log subscriber always holds an empty `slot`; [`start`] fills it.
//! While off, span helpers return [`Span::none`] after one atomic load.
//!
//! Spans: one per downstream MCP request (`mcp.request`), a child per source
//! call crossing the plugin boundary (`source.call`), and whatever the plugin
//! reports back ([`wf_plugin_api::Event::Span`], e.g. the mcp plugin's upstream
//! requests), exported here with the plugin's own span id so that the id the
//! upstream saw in `traceparent` is the exported span's.

use std::cell::Cell;
use std::str::FromStr;
use std::sync::OnceLock;
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::{Duration, SystemTime};

use opentelemetry::trace::{
    Span as _, SpanBuilder, SpanContext, SpanId, SpanKind, Status, TraceContextExt, TraceFlags,
    TraceId, TraceState, Tracer as _, TracerProvider as _,
};
use opentelemetry::{Context, KeyValue};
use opentelemetry_otlp::{Protocol, WithExportConfig};
use opentelemetry_sdk::trace::{IdGenerator, RandomIdGenerator, SdkTracer, SdkTracerProvider};
use serde_json::{Value, json};
use tracing::Span;
use tracing::field::Empty;
use tracing_opentelemetry::OpenTelemetrySpanExt;
use tracing_subscriber::Layer as _;
use tracing_subscriber::filter::{Filtered, Targets};
use tracing_subscriber::layer::Layered;
use tracing_subscriber::{EnvFilter, Registry, reload};
use wf_plugin_api::trace::ReportedSpan;

/// `[telemetry]`'s trace keys (see `config::TelemetryConfig`).
#[derive(Debug, Clone, Default)]
pub struct Settings {
    pub otlp_endpoint: Option<String>,
    pub otlp_protocol: Option<String>,
    pub service_name: Option<String>,
    pub capture_payloads: bool,
    /// Metrics over OTLP too, where traces go (`otlp_metrics`, default on).
    pub otlp_metrics: bool,
    /// How often metrics are pushed (`otlp_metrics_interval_ms`).
    pub otlp_metrics_interval_ms: Option<u64>,
}

/// The log filter, reloadable: with traces on, `wf::trace` spans pass it
/// whatever the log level.
pub type Filter = reload::Layer<EnvFilter, Registry>;
type Base = Layered<Filter, Registry>;
/// The OTel layer, always installed: only wf's trace spans (target
/// `wf::trace`, never created while traces are off) reach it. Its tracer is
/// bound late, by [`start`] (a reloadable layer would hide it from
/// `OpenTelemetrySpanExt`, which finds the layer by downcasting).
pub type Slot =
    Filtered<tracing_opentelemetry::OpenTelemetryLayer<Base, LateTracer>, Targets, Base>;

static ACTIVE: OnceLock<SdkTracer> = OnceLock::new();
static FILTER: OnceLock<(String, reload::Handle<EnvFilter, Registry>)> = OnceLock::new();
static PROVIDER: OnceLock<SdkTracerProvider> = OnceLock::new();
static ON: AtomicBool = AtomicBool::new(false);
static CAPTURE: AtomicBool = AtomicBool::new(false);

#[derive(Debug, thiserror::Error)]
pub enum TraceError {
    #[error("telemetry.otlp_protocol: {0:?} is neither \"http\" nor \"grpc\"")]
    Protocol(String),
    #[error("cannot start the OTLP trace exporter: {0}")]
    Exporter(String),
}

/// The log subscriber's filter (from `filter`, a valid `EnvFilter` text)
/// and an empty slot for the OTel layer; [`start`] fills it.
pub fn layers(filter: &str) -> (Filter, Slot) {
    let (f, filter_handle) =
        reload::Layer::new(EnvFilter::try_new(filter).unwrap_or_else(|_| EnvFilter::new("info")));
    let _ = FILTER.set((filter.to_string(), filter_handle));
    let layer = tracing_opentelemetry::layer()
        .with_tracer(LateTracer::default())
        .with_tracked_inactivity(false);
    let only_traces = Targets::new().with_target("wf::trace", tracing::Level::TRACE);
    (f, layer.with_filter(only_traces))
}

/// Whether traces are exported (the one check on the hot path when off).
#[inline]
pub fn enabled() -> bool {
    ON.load(Ordering::Relaxed)
}

/// wf's tracer, while traces are exported (for spans that are not `tracing`
/// spans, e.g. workflow runs).
pub fn tracer() -> Option<SdkTracer> {
    PROVIDER.get().filter(|_| enabled()).map(|p| p.tracer("wf"))
}

/// Whether spans may carry argument values (`capture_payloads`).
pub fn capture_payloads() -> bool {
    CAPTURE.load(Ordering::Relaxed)
}

/// Exporting traces; [`Traces::shutdown`] flushes what is still queued.
pub struct Traces(SdkTracerProvider);

impl Traces {
    pub fn shutdown(self) {
        if let Err(e) = self.0.shutdown() {
            tracing::warn!("flushing traces at shutdown: {e}");
        }
    }
}

/// Starts exporting when configured (config first, then the standard
/// `OTEL_*` variables); `None` when traces are off.
pub fn start(config: &Settings) -> Result<Option<Traces>, TraceError> {
    let Some(protocol) = config.collector_protocol("TRACES") else {
        return Ok(None);
    };
    let builder = opentelemetry_otlp::SpanExporter::builder();
    let exporter = match protocol.as_str() {
        "http" | "http/protobuf" => {
            let mut b = builder.with_http().with_protocol(Protocol::HttpBinary);
            if let Some(base) = &config.otlp_endpoint {
                b = b.with_endpoint(signal_url(base, "/v1/traces"));
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
    let mut resource = opentelemetry_sdk::Resource::builder();
    if let Some(name) = config.service_name.clone().or_else(|| {
        std::env::var("OTEL_SERVICE_NAME")
            .ok()
            .filter(|v| !v.is_empty())
    }) {
        resource = resource.with_service_name(name);
    } else {
        resource = resource.with_service_name("wf");
    }
    let provider = SdkTracerProvider::builder()
        .with_batch_exporter(exporter)
        .with_id_generator(ReportedIds::default())
        .with_resource(resource.build())
        .build();
    let _ = ACTIVE.set(provider.tracer("wf"));
    if let Some((text, handle)) = FILTER.get() {
        // wf's trace spans are wanted whatever the log level.
        if let Ok(f) = EnvFilter::try_new(format!("{text},wf::trace=info")) {
            let _ = handle.reload(f);
        }
    }
    let _ = PROVIDER.set(provider.clone());
    CAPTURE.store(config.capture_payloads, Ordering::Relaxed);
    ON.store(true, Ordering::Relaxed);
    tracing::info!(protocol, "exporting traces over OTLP");
    Ok(Some(Traces(provider)))
}

/// `[telemetry] otlp_endpoint` is the collector's base URL, as
/// `OTEL_EXPORTER_OTLP_ENDPOINT`: `base` with a signal's OTLP/HTTP path
/// (`/v1/traces`, `/v1/metrics`, `/v1/logs`) added once.
pub(super) fn signal_url(base: &str, path: &str) -> String {
    let base = base.trim_end_matches('/');
    if base.ends_with(path) {
        base.to_string()
    } else {
        format!("{base}{path}")
    }
}

impl Settings {
    /// The OTLP protocol of `signal` (`TRACES`, `METRICS`, `LOGS`) when a
    /// collector is configured for it (`otlp_endpoint`, or the
    /// `OTEL_EXPORTER_OTLP_[SIGNAL_]ENDPOINT` environment); `None` otherwise.
    pub(super) fn collector_protocol(&self, signal: &str) -> Option<String> {
        let env = |k: &str| std::env::var(k).ok().filter(|v| !v.is_empty());
        let from_env = env(&format!("OTEL_EXPORTER_OTLP_{signal}_ENDPOINT"))
            .or_else(|| env("OTEL_EXPORTER_OTLP_ENDPOINT"))
            .is_some();
        if self.otlp_endpoint.is_none() && !from_env {
            return None;
        }
        Some(
            self.otlp_protocol
                .clone()
                .or_else(|| env(&format!("OTEL_EXPORTER_OTLP_{signal}_PROTOCOL")))
                .or_else(|| env("OTEL_EXPORTER_OTLP_PROTOCOL"))
                .unwrap_or_else(|| "http".into()),
        )
    }
}

/// The span of one downstream MCP request. `target` is the tool, prompt or
/// resource; `parent` the client's W3C context (`_meta` or HTTP header).
pub fn request_span(
    method: &str,
    target: Option<&str>,
    session: Option<&str>,
    parent: Option<(&str, Option<&str>)>,
) -> Span {
    if !enabled() {
        return Span::none();
    }
    let name = match target {
        Some(t) => format!("{method} {t}"),
        None => method.to_string(),
    };
    let span = tracing::info_span!(target: "wf::trace", "mcp.request",
        otel.name = %name, otel.kind = "server", mcp.method.name = method,
        gen_ai.tool.name = Empty, mcp.session.id = Empty,
        trace_id = Empty, span_id = Empty);
    if method == "tools/call" {
        span.record("gen_ai.tool.name", target);
    }
    if let Some(s) = session {
        span.record("mcp.session.id", s);
    }
    if let Some(sc) = parent.and_then(|(tp, ts)| remote_context(tp, ts)) {
        let _ = span.set_parent(Context::new().with_remote_span_context(sc));
    }
    record_ids(&span);
    span.in_scope(|| tracing::debug!(method, "request traced"));
    span
}

/// The span of one call crossing the plugin boundary.
pub fn source_span(source: &str, method: &str, name: &str) -> Span {
    if !enabled() {
        return Span::none();
    }
    let span = tracing::info_span!(target: "wf::trace", "source.call",
        otel.name = %format!("{source} {method}"), otel.kind = "internal",
        wf.source.id = source, mcp.method.name = method, gen_ai.tool.name = Empty,
        gen_ai.tool.call.arguments = Empty, trace_id = Empty, span_id = Empty);
    if method == "tools/call" {
        span.record("gen_ai.tool.name", name);
    }
    record_ids(&span);
    span
}

/// The span of attempt `attempt` of a workflow node, a child of the node's
/// span (`node`); the node's source call runs inside it, so it parents that.
pub fn attempt_span(node: SpanContext, run_id: &str, node_id: &str, attempt: u32) -> Span {
    let span = tracing::info_span!(target: "wf::trace", "workflow.attempt",
        otel.name = %format!("workflow.attempt {node_id} #{attempt}"), otel.kind = "internal",
        // i64: tracing-opentelemetry records a u64 field as its Debug string.
        wf.run.id = run_id, wf.node.id = node_id, wf.node.attempt = i64::from(attempt),
        otel.status_code = Empty, otel.status_message = Empty,
        trace_id = Empty, span_id = Empty);
    let _ = span.set_parent(Context::new().with_remote_span_context(node));
    record_ids(&span);
    span
}

/// Marks an attempt's span failed with `message`.
pub fn attempt_failed(span: &Span, message: &str) {
    if !span.is_none() {
        span.record("otel.status_code", "ERROR");
        span.record("otel.status_message", message);
    }
}

/// With `capture_payloads`, a source call's span also carries its arguments
/// (`redacted`: secrets already taken out by the caller); otherwise nothing.
pub fn record_arguments(span: &Span, redacted: impl FnOnce() -> String) {
    if enabled() && capture_payloads() && !span.is_none() {
        span.record("gen_ai.tool.call.arguments", redacted());
    }
}

/// JSON log lines name the span's trace and span ids.
pub fn record_ids(span: &Span) {
    let cx = span.context();
    let sc = cx.span().span_context().clone();
    if sc.is_valid() {
        span.record("trace_id", sc.trace_id().to_string());
        span.record("span_id", sc.span_id().to_string());
    }
}

/// The current span's trace id (hex), when traces are on: what an audit
/// record carries to find the call's trace.
pub fn current_trace_id() -> Option<String> {
    if !enabled() {
        return None;
    }
    let cx = Span::current().context();
    let sc = cx.span().span_context().clone();
    sc.is_valid().then(|| sc.trace_id().to_string())
}

/// `span`'s W3C context as the per-call info key `"trace"` (`None` when off).
pub fn info_of(span: &Span) -> Option<Value> {
    if !enabled() {
        return None;
    }
    let cx = span.context();
    let sc = cx.span().span_context().clone();
    sc.is_valid().then(|| {
        let mut v = json!({"traceparent": format!(
            "00-{}-{}-{:02x}", sc.trace_id(), sc.span_id(), sc.trace_flags().to_u8())});
        let state = sc.trace_state().header();
        if !state.is_empty() {
            v["tracestate"] = Value::String(state);
        }
        v
    })
}

/// A client's `traceparent` (and `tracestate`), when valid W3C.
fn remote_context(traceparent: &str, tracestate: Option<&str>) -> Option<SpanContext> {
    let t = wf_plugin_api::trace::TraceContext {
        traceparent: traceparent.trim().to_string(),
        tracestate: None,
    };
    let ctx = wf_plugin_api::trace::TraceContext::from_info(&json!({"trace": t}))?;
    let flags = u8::from_str_radix(ctx.traceparent.get(53..55)?, 16).ok()?;
    let state = tracestate
        .and_then(|s| TraceState::from_str(s).ok())
        .unwrap_or_default();
    Some(SpanContext::new(
        TraceId::from_hex(ctx.trace_id()).ok()?,
        SpanId::from_hex(ctx.span_id()).ok()?,
        TraceFlags::new(flags),
        true,
        state,
    ))
}

/// The OTel layer's tracer: wf's once [`start`] ran, before that one that
/// records nothing (no `wf::trace` span exists then anyway).
pub struct LateTracer(SdkTracer);

impl Default for LateTracer {
    fn default() -> Self {
        let off = SdkTracerProvider::builder()
            .with_sampler(opentelemetry_sdk::trace::Sampler::AlwaysOff)
            .build();
        Self(off.tracer("wf-off"))
    }
}

impl opentelemetry::trace::Tracer for LateTracer {
    type Span = opentelemetry_sdk::trace::Span;

    fn build_with_context(&self, builder: SpanBuilder, parent_cx: &Context) -> Self::Span {
        ACTIVE
            .get()
            .unwrap_or(&self.0)
            .build_with_context(builder, parent_cx)
    }
}

thread_local! {
    /// The span id the next span built on this thread gets (a reported span's).
    static PRESET_SPAN_ID: Cell<Option<SpanId>> = const { Cell::new(None) };
}

/// Random ids, except for a span a plugin reported: it keeps the id it sent on.
#[derive(Debug, Default)]
struct ReportedIds(RandomIdGenerator);

impl IdGenerator for ReportedIds {
    fn new_trace_id(&self) -> TraceId {
        self.0.new_trace_id()
    }
    fn new_span_id(&self) -> SpanId {
        PRESET_SPAN_ID
            .with(Cell::take)
            .unwrap_or_else(|| self.0.new_span_id())
    }
}

/// Exports a span a plugin measured (e.g. an upstream request) as a child of
/// the call it belongs to. Ignored while traces are off or when malformed.
/// The caller redacts secrets from `s.error`.
pub fn export_reported(source: &str, s: &ReportedSpan) {
    let Some(provider) = PROVIDER.get().filter(|_| enabled()) else {
        return;
    };
    let Some(own) = remote_context(&s.traceparent, None) else {
        tracing::debug!(
            source,
            "ignoring a reported span without a valid traceparent"
        );
        return;
    };
    let Ok(parent_id) = SpanId::from_hex(&s.parent_span_id) else {
        return;
    };
    let parent = SpanContext::new(
        own.trace_id(),
        parent_id,
        own.trace_flags(),
        true,
        TraceState::default(),
    );
    let at = |ns: u64| SystemTime::UNIX_EPOCH + Duration::from_nanos(ns);
    let mut attributes = vec![KeyValue::new("wf.source.id", source.to_string())];
    for (k, v) in &s.attributes {
        let kv = match v {
            Value::String(s) => KeyValue::new(k.clone(), s.clone()),
            Value::Bool(b) => KeyValue::new(k.clone(), *b),
            Value::Number(n) if n.is_i64() => KeyValue::new(k.clone(), n.as_i64().unwrap_or(0)),
            Value::Number(n) => KeyValue::new(k.clone(), n.as_f64().unwrap_or(0.0)),
            _ => continue,
        };
        attributes.push(kv);
    }
    let builder = SpanBuilder::from_name(s.name.clone())
        .with_kind(SpanKind::Client)
        .with_start_time(at(s.start_unix_nano))
        .with_attributes(attributes);
    PRESET_SPAN_ID.with(|c| c.set(Some(own.span_id())));
    let tracer = provider.tracer("wf");
    let mut span =
        tracer.build_with_context(builder, &Context::new().with_remote_span_context(parent));
    PRESET_SPAN_ID.with(|c| c.set(None));
    if let Some(e) = &s.error {
        span.set_status(Status::error(e.clone()));
    }
    span.end_with_timestamp(at(s.end_unix_nano));
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn http_endpoint_is_a_base_url() {
        assert_eq!(
            signal_url("http://c:4318", "/v1/traces"),
            "http://c:4318/v1/traces"
        );
        assert_eq!(
            signal_url("http://c:4318/", "/v1/traces"),
            "http://c:4318/v1/traces"
        );
        assert_eq!(
            signal_url("http://c:4318/v1/traces", "/v1/traces"),
            "http://c:4318/v1/traces"
        );
    }

    #[test]
    fn a_client_context_is_read_only_when_valid() {
        let sc = remote_context(
            "00-0af7651916cd43dd8448eb211c80319c-b7ad6b7169203331-01",
            Some("k=v"),
        )
        .unwrap();
        assert_eq!(
            sc.trace_id().to_string(),
            "0af7651916cd43dd8448eb211c80319c"
        );
        assert!(sc.is_sampled() && sc.is_remote());
        assert_eq!(sc.trace_state().header(), "k=v");
        assert!(remote_context("00-xyz-b7ad6b7169203331-01", None).is_none());
    }

    #[test]
    fn off_by_default_spans_are_none() {
        assert!(request_span("tools/call", Some("t"), None, None).is_none());
        assert!(info_of(&Span::none()).is_none());
    }
}
