//! The process-wide metrics registry and its recording functions. Recording
//! is a label lookup and an atomic add; nothing here blocks or allocates
//! beyond the label strings.

use std::sync::LazyLock;
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::Duration;

use prometheus_client::encoding::EncodeLabelSet;
use prometheus_client::metrics::counter::Counter;
use prometheus_client::metrics::family::Family;
use prometheus_client::metrics::gauge::Gauge;
use prometheus_client::metrics::histogram::{Histogram, exponential_buckets};
use prometheus_client::registry::Registry;

use super::otlp_metrics::{attrs, instruments};

#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
struct CallLabels {
    source: String,
    method: String,
    name: String,
    outcome: String,
}

#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
struct TimingLabels {
    source: String,
    method: String,
    name: String,
}

#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
struct SourceLabel {
    source: String,
}

#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
struct OutcomeLabel {
    outcome: String,
}

#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
struct SourceOutcome {
    source: String,
    outcome: String,
}

#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
struct MethodOutcome {
    method: String,
    outcome: String,
}

#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
struct StatusLabel {
    status: String,
}

#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
struct PrincipalLabel {
    principal: String,
}

#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
struct PrincipalLimit {
    principal: String,
    limit: String,
}

#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
struct NodeLabels {
    capability: String,
    status: String,
}

type Histograms<L> = Family<L, Histogram, fn() -> Histogram>;

/// Seconds, 1 ms to ~33 s.
fn latency() -> Histogram {
    Histogram::new(exponential_buckets(0.001, 2.0, 16))
}

struct Metrics {
    registry: Registry,
    calls: Family<CallLabels, Counter>,
    call_seconds: Histograms<TimingLabels>,
    panics: Family<SourceLabel, Counter>,
    in_flight: Family<SourceLabel, Gauge>,
    sessions_open: Family<SourceLabel, Gauge>,
    tools_held: Family<SourceLabel, Gauge>,
    epoch_changes: Family<SourceLabel, Counter>,
    discoveries: Family<SourceOutcome, Counter>,
    discovery_seconds: Histograms<SourceLabel>,
    reloads: Family<OutcomeLabel, Counter>,
    runs: Family<StatusLabel, Counter>,
    node_seconds: Histograms<NodeLabels>,
    requests: Family<MethodOutcome, Counter>,
    http_queued: Family<PrincipalLabel, Gauge>,
    http_refused: Family<PrincipalLimit, Counter>,
    http_principal: Family<PrincipalVia, Counter>,
    pipeline_calls: Family<EntryOutcome, Counter>,
    policy_decisions: Family<PolicyOutcome, Counter>,
    quota_calls: Family<QuotaOutcome, Counter>,
    audit_records: Family<OutcomeLabel, Counter>,
}

#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
struct QuotaOutcome {
    rule: String,
    outcome: &'static str,
}

#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
struct EntryOutcome {
    entry: &'static str,
    outcome: &'static str,
}

#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
struct PolicyOutcome {
    policy: String,
    outcome: &'static str,
}

#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
struct PrincipalVia {
    principal: String,
    via: String,
}

impl Metrics {
    fn new() -> Self {
        let mut m = Self {
            registry: Registry::with_prefix("wf"),
            calls: Family::default(),
            call_seconds: Family::new_with_constructor(latency),
            panics: Family::default(),
            in_flight: Family::default(),
            sessions_open: Family::default(),
            tools_held: Family::default(),
            epoch_changes: Family::default(),
            discoveries: Family::default(),
            discovery_seconds: Family::new_with_constructor(latency),
            reloads: Family::default(),
            runs: Family::default(),
            node_seconds: Family::new_with_constructor(latency),
            requests: Family::default(),
            http_queued: Family::default(),
            http_refused: Family::default(),
            http_principal: Family::default(),
            pipeline_calls: Family::default(),
            policy_decisions: Family::default(),
            quota_calls: Family::default(),
            audit_records: Family::default(),
        };
        let r = &mut m.registry;
        r.register(
            "source_calls",
            "Calls into sources (tools/call, nodes/run, resources/read, prompts/get) by source, method, name and outcome (ok or the error code)",
            m.calls.clone(),
        );
        r.register(
            "source_call_duration_seconds",
            "Time from a source call's start to its answer, by source, method and name",
            m.call_seconds.clone(),
        );
        r.register(
            "plugin_panics",
            "Plugin panics contained (the call failed, wf kept serving)",
            m.panics.clone(),
        );
        r.register(
            "calls_in_flight",
            "Source calls wf is waiting on now",
            m.in_flight.clone(),
        );
        r.register(
            "upstream_sessions_open",
            "Per-principal and per-client upstream sessions open now",
            m.sessions_open.clone(),
        );
        r.register(
            "tools_held",
            "Tools held by the hold stage (changed since pinned, new, or flagged under screen = hold)",
            m.tools_held.clone(),
        );
        r.register(
            "session_epoch_changes",
            "Upstream session restarts (epoch changes) reported to clients",
            m.epoch_changes.clone(),
        );
        r.register(
            "discoveries",
            "Catalog discoveries by source and outcome (ok or failed)",
            m.discoveries.clone(),
        );
        r.register(
            "discovery_duration_seconds",
            "Time a catalog discovery took, by source",
            m.discovery_seconds.clone(),
        );
        r.register(
            "config_reloads",
            "Config reloads by outcome (applied or refused)",
            m.reloads.clone(),
        );
        r.register(
            "workflow_runs",
            "Workflow runs finished, by status",
            m.runs.clone(),
        );
        r.register(
            "workflow_node_duration_seconds",
            "Time a workflow node took (all its attempts), by capability and status",
            m.node_seconds.clone(),
        );
        r.register(
            "requests",
            "MCP requests from clients, by method and outcome (ok, tool_error, or the JSON-RPC error code)",
            m.requests.clone(),
        );
        r.register(
            "http_queued_requests",
            "HTTP requests waiting for one of their principal's in-progress slots now (server.max_requests_per_principal), by principal",
            m.http_queued.clone(),
        );
        r.register(
            "http_refused_requests",
            "HTTP requests refused with 429 at a per-principal bound, by principal and limit (queue_timeout, queue_full or streams)",
            m.http_refused.clone(),
        );
        r.register(
            "http_principal_requests",
            "HTTP requests let in at /mcp, by principal (a name, never a token) and how it was identified (token, oauth or local)",
            m.http_principal.clone(),
        );
        r.register(
            "pipeline_calls",
            "Uses of a capability admitted or refused by the call pipeline, by entry (tools_call, wf_call, resources_read, prompts_get, completion, subscribe, workflow_node, publish, planner, console) and outcome",
            m.pipeline_calls.clone(),
        );
        r.register(
            "policy_decisions",
            "Policy decisions by deciding policy id (`default` when none applied) and outcome (allow or deny)",
            m.policy_decisions.clone(),
        );
        r.register(
            "audit_records",
            "Audit records by outcome: written to the store, or dropped (a full buffer, or a batch the store refused for 30 s)",
            m.audit_records.clone(),
        );
        r.register(
            "quota_calls",
            "Calls counted against a [[quotas]] rule, by rule and outcome (used or refused)",
            m.quota_calls.clone(),
        );
        m
    }
}

static METRICS: LazyLock<Metrics> = LazyLock::new(Metrics::new);

/// The label a request method gets: the MCP method it serves.
pub fn method_label(request: &wf_plugin_api::SourceRequest) -> Option<&'static str> {
    use wf_plugin_api::SourceRequest as R;
    Some(match request {
        R::CallTool { .. } => "tools/call",
        R::RunNode { .. } => "nodes/run",
        R::ReadResource { .. } => "resources/read",
        R::GetPrompt { .. } => "prompts/get",
        _ => return None,
    })
}

/// Whether the per-call series (requests, source calls, node durations) go
/// into the `/metrics` registry. Only `/metrics` reads it, so `wf serve`
/// turns this off when no `[telemetry] metrics_token` serves it: each call
/// then skips its label lookups (about 1% of wf's instructions per proxied
/// call, docs/benchmarks.md). OTLP metrics have their own instruments.
static RECORD_CALLS: AtomicBool = AtomicBool::new(true);

/// Turns the per-call `/metrics` series on or off (default on).
pub fn record_calls(on: bool) {
    RECORD_CALLS.store(on, Ordering::Relaxed);
}

fn recording_calls() -> bool {
    RECORD_CALLS.load(Ordering::Relaxed)
}

/// One MCP request from a client answered (`outcome`: `ok`, `tool_error`,
/// or the JSON-RPC error code).
pub fn request(method: &str, outcome: &str) {
    if let Some(o) = instruments() {
        o.requests
            .add(1, &attrs([("method", method), ("outcome", outcome)]));
    }
    if !recording_calls() {
        return;
    }
    METRICS
        .requests
        .get_or_create(&MethodOutcome {
            method: method.into(),
            outcome: outcome.into(),
        })
        .inc();
}

/// Most principals with series of their own in the per-principal metrics
/// (`http_principal_requests`, `http_queued_requests`,
/// `http_refused_requests`): with OAuth,
/// every person is a principal, and a series lives as long as wf. The
/// first principals seen keep theirs; later ones share [`OTHER_PRINCIPALS`].
pub const MAX_PRINCIPAL_SERIES: usize = 256;
/// The `principal` label of those past [`MAX_PRINCIPAL_SERIES`] (no static
/// principal name can contain parentheses).
pub const OTHER_PRINCIPALS: &str = "(other)";

static PRINCIPAL_SERIES: LazyLock<std::sync::RwLock<std::collections::HashSet<Box<str>>>> =
    LazyLock::new(Default::default);

/// The `principal` label `name` gets: its own while it is one of the first
/// [`MAX_PRINCIPAL_SERIES`] principals seen, else [`OTHER_PRINCIPALS`]
/// (stable: a principal never moves from one series to the other).
fn principal_label(name: &str) -> &str {
    label_among(&PRINCIPAL_SERIES, MAX_PRINCIPAL_SERIES, name)
}

fn label_among<'a>(
    series: &std::sync::RwLock<std::collections::HashSet<Box<str>>>,
    max: usize,
    name: &'a str,
) -> &'a str {
    use std::sync::PoisonError;
    if series
        .read()
        .unwrap_or_else(PoisonError::into_inner)
        .contains(name)
    {
        return name;
    }
    let mut seen = series.write().unwrap_or_else(PoisonError::into_inner);
    if seen.contains(name) {
        return name;
    }
    if seen.len() < max {
        seen.insert(name.into());
        return name;
    }
    OTHER_PRINCIPALS
}

/// `delta` HTTP requests joined (+1) or left (-1) `principal`'s queue.
pub fn http_queued(principal: &str, delta: i64) {
    let principal = principal_label(principal);
    if let Some(o) = instruments() {
        o.http_queued.add(delta, &attrs([("principal", principal)]));
    }
    METRICS
        .http_queued
        .get_or_create(&PrincipalLabel {
            principal: principal.into(),
        })
        .inc_by(delta);
}

/// An HTTP request of `principal` refused at a per-principal bound.
pub fn http_refused(principal: &str, limit: &str) {
    let principal = principal_label(principal);
    if let Some(o) = instruments() {
        o.http_refused
            .add(1, &attrs([("principal", principal), ("limit", limit)]));
    }
    METRICS
        .http_refused
        .get_or_create(&PrincipalLimit {
            principal: principal.into(),
            limit: limit.into(),
        })
        .inc();
}

/// An HTTP request let in as `principal`, identified `via` a static token,
/// an OAuth access token or (no token configured) as `local`.
pub fn http_request(principal: &str, via: &str) {
    if !recording_calls() {
        return;
    }
    let principal = principal_label(principal);
    METRICS
        .http_principal
        .get_or_create(&PrincipalVia {
            principal: principal.into(),
            via: via.into(),
        })
        .inc();
}

/// One source call answered: `outcome` is `ok` or the error code.
pub fn source_call(source: &str, method: &str, name: &str, outcome: &str, took: Duration) {
    if let Some(o) = instruments() {
        let labels = [("source", source), ("method", method), ("name", name)];
        o.call_seconds.record(took.as_secs_f64(), &attrs(labels));
        let [s, m, n] = labels;
        o.calls.add(1, &attrs([s, m, n, ("outcome", outcome)]));
    }
    if !recording_calls() {
        return;
    }
    let m = &*METRICS;
    m.calls
        .get_or_create(&CallLabels {
            source: source.into(),
            method: method.into(),
            name: name.into(),
            outcome: outcome.into(),
        })
        .inc();
    m.call_seconds
        .get_or_create(&TimingLabels {
            source: source.into(),
            method: method.into(),
            name: name.into(),
        })
        .observe(took.as_secs_f64());
}

/// A plugin panicked in a call and wf contained it.
pub fn plugin_panic(source: &str) {
    if let Some(o) = instruments() {
        o.panics.add(1, &attrs([("source", source)]));
    }
    METRICS
        .panics
        .get_or_create(&SourceLabel {
            source: source.into(),
        })
        .inc();
}

/// A client was told its upstream session on `source` restarted.
pub fn epoch_change(source: &str) {
    if let Some(o) = instruments() {
        o.epoch_changes.add(1, &attrs([("source", source)]));
    }
    METRICS
        .epoch_changes
        .get_or_create(&SourceLabel {
            source: source.into(),
        })
        .inc();
}

/// Tools of `source` the hold stage keeps out now (issue 54).
pub fn tools_held<T>(source: &str, held: &[T]) {
    METRICS
        .tools_held
        .get_or_create(&SourceLabel {
            source: source.into(),
        })
        .set(i64::try_from(held.len()).unwrap_or(i64::MAX));
}

pub fn discovery(source: &str, ok: bool, took: Duration) {
    let m = &*METRICS;
    let outcome = if ok { "ok" } else { "failed" };
    if let Some(o) = instruments() {
        o.discoveries
            .add(1, &attrs([("source", source), ("outcome", outcome)]));
        o.discovery_seconds
            .record(took.as_secs_f64(), &attrs([("source", source)]));
    }
    m.discoveries
        .get_or_create(&SourceOutcome {
            source: source.into(),
            outcome: outcome.into(),
        })
        .inc();
    m.discovery_seconds
        .get_or_create(&SourceLabel {
            source: source.into(),
        })
        .observe(took.as_secs_f64());
}

/// A use of a capability the call pipeline admitted (or refused) at `entry`.
pub fn pipeline_call(entry: &'static str, admitted: bool) {
    let outcome = if admitted { "admitted" } else { "refused" };
    METRICS
        .pipeline_calls
        .get_or_create(&EntryOutcome { entry, outcome })
        .inc();
}

/// `n` audit records `written` to the store or `dropped`.
pub fn audit_records(outcome: &'static str, n: u64) {
    METRICS
        .audit_records
        .get_or_create(&OutcomeLabel {
            outcome: outcome.into(),
        })
        .inc_by(n);
}

/// A policy decision: `policy` decided it (`default` when no policy applied).
pub fn policy_decision(policy: &str, allowed: bool) {
    let outcome = if allowed { "allow" } else { "deny" };
    METRICS
        .policy_decisions
        .get_or_create(&PolicyOutcome {
            policy: policy.into(),
            outcome,
        })
        .inc();
}

/// A call counted against quota `rule` (`used`), or refused by it.
pub fn quota(rule: &str, used: bool) {
    let outcome = if used { "used" } else { "refused" };
    METRICS
        .quota_calls
        .get_or_create(&QuotaOutcome {
            rule: rule.into(),
            outcome,
        })
        .inc();
}

pub fn reload(applied: bool) {
    let outcome = if applied { "applied" } else { "refused" };
    if let Some(o) = instruments() {
        o.reloads.add(1, &attrs([("outcome", outcome)]));
    }
    METRICS
        .reloads
        .get_or_create(&OutcomeLabel {
            outcome: outcome.into(),
        })
        .inc();
}

pub fn run_finished(status: &str) {
    if let Some(o) = instruments() {
        o.runs.add(1, &attrs([("status", status)]));
    }
    METRICS
        .runs
        .get_or_create(&StatusLabel {
            status: status.into(),
        })
        .inc();
}

/// A node finished after `ms` milliseconds (from its first attempt's start).
pub fn node_finished(capability: &str, status: &str, ms: i64) {
    if let Some(o) = instruments() {
        o.node_seconds.record(
            ms.max(0) as f64 / 1000.0,
            &attrs([("capability", capability), ("status", status)]),
        );
    }
    if !recording_calls() {
        return;
    }
    METRICS
        .node_seconds
        .get_or_create(&NodeLabels {
            capability: capability.into(),
            status: status.into(),
        })
        .observe(ms.max(0) as f64 / 1000.0);
}

/// The gauges read from live state at scrape time: calls in flight and
/// upstream sessions open, per source. Sources gone since the last scrape
/// drop out.
pub fn set_source_gauges(
    in_flight: impl IntoIterator<Item = (String, usize)>,
    sessions_open: impl IntoIterator<Item = (String, usize)>,
) {
    let m = &*METRICS;
    for (family, values) in [
        (&m.in_flight, in_flight.into_iter().collect::<Vec<_>>()),
        (&m.sessions_open, sessions_open.into_iter().collect()),
    ] {
        family.clear();
        for (source, n) in values {
            family
                .get_or_create(&SourceLabel { source })
                .set(i64::try_from(n).unwrap_or(i64::MAX));
        }
    }
}

/// Everything recorded, in the Prometheus text format (OpenMetrics).
pub fn render() -> String {
    let mut out = String::new();
    // Writing into a String cannot fail.
    let _ = prometheus_client::encoding::text::encode(&mut out, &METRICS.registry);
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn recorded_calls_appear_in_the_text() {
        source_call("s1", "tools/call", "echo", "ok", Duration::from_millis(3));
        source_call("s1", "tools/call", "echo", "ok", Duration::from_millis(5));
        set_source_gauges([("s1".to_string(), 2)], [("s1".to_string(), 1)]);
        let text = render();
        assert!(
            text.contains(
                r#"wf_source_calls_total{source="s1",method="tools/call",name="echo",outcome="ok"} 2"#
            ),
            "{text}"
        );
        assert!(
            text.contains(r#"wf_calls_in_flight{source="s1"} 2"#),
            "{text}"
        );
        assert!(text.ends_with("# EOF\n"), "{text}");
    }

    #[test]
    fn principal_series_are_capped_and_stable() {
        let series = std::sync::RwLock::default();
        assert_eq!(label_among(&series, 2, "alice"), "alice");
        assert_eq!(label_among(&series, 2, "bob"), "bob");
        assert_eq!(label_among(&series, 2, "carol"), OTHER_PRINCIPALS);
        assert_eq!(label_among(&series, 2, "alice"), "alice", "kept");
        assert_eq!(label_among(&series, 2, "carol"), OTHER_PRINCIPALS, "stays");
        assert_eq!(series.read().unwrap().len(), 2);
    }
}
