//! Workflow runs as traces: one span per run, a child per node (fed by the
//! run/node events of [`super::events`]), and under each node a child per
//! attempt ([`RunTraces::attempt`], opened by the engine around each try),
//! which parents the node's source call. Nothing is kept while traces are
//! off (one atomic load per event).

use std::collections::HashMap;
use std::sync::{Mutex, PoisonError};

use opentelemetry::trace::{Span as _, SpanKind, Status, TraceContextExt, Tracer as _};
use opentelemetry::{Context, KeyValue};
use opentelemetry_sdk::trace::Span;
use tracing_opentelemetry::OpenTelemetrySpanExt;

use crate::status::{NodeStatus, RunStatus};
use crate::store::NodeRecord;
use crate::telemetry::traces;

/// Runs still going: the run's span and its nodes' open attempts.
#[derive(Default)]
pub(super) struct RunTraces {
    runs: Mutex<HashMap<String, RunSpans>>,
}

struct RunSpans {
    run: Context,
    /// node id → its open span
    nodes: HashMap<String, Span>,
}

impl RunTraces {
    pub fn run_started(&self, run_id: &str, workflow: &str) {
        let Some(tracer) = traces::tracer() else {
            return;
        };
        let span = tracer
            .span_builder(format!("workflow.run {workflow}"))
            .with_kind(SpanKind::Internal)
            .with_attributes([
                KeyValue::new("wf.run.id", run_id.to_string()),
                KeyValue::new("wf.workflow.name", workflow.to_string()),
            ])
            .start_with_context(&tracer, &parent_of_run());
        let run = Context::new().with_span(span);
        self.lock().insert(
            run_id.to_string(),
            RunSpans {
                run,
                nodes: HashMap::new(),
            },
        );
    }

    pub fn node(&self, run_id: &str, node: &NodeRecord) {
        if !traces::enabled() {
            return;
        }
        let Some(tracer) = traces::tracer() else {
            return;
        };
        let mut runs = self.lock();
        let Some(spans) = runs.get_mut(run_id) else {
            return;
        };
        let open = spans.nodes.remove(&node.node_id);
        match (node.status, open) {
            // Still going (the engine publishes one `running` per node; its
            // attempts are counted in the record it finishes with).
            (NodeStatus::Pending | NodeStatus::Running, Some(open)) => {
                spans.nodes.insert(node.node_id.clone(), open);
            }
            (NodeStatus::Running, None) => {
                let span = tracer
                    .span_builder(format!("workflow.node {}", node.node_id))
                    .with_kind(SpanKind::Internal)
                    .with_attributes([
                        KeyValue::new("wf.run.id", run_id.to_string()),
                        KeyValue::new("wf.node.id", node.node_id.clone()),
                        KeyValue::new("wf.node.capability", node.capability.clone()),
                    ])
                    .start_with_context(&tracer, &spans.run);
                spans.nodes.insert(node.node_id.clone(), span);
            }
            (NodeStatus::Pending, None) => {}
            (status, open) => {
                if let Some(mut span) = open {
                    span.set_attribute(KeyValue::new("wf.node.status", status.as_str()));
                    span.set_attribute(KeyValue::new("wf.node.attempts", node.attempts));
                    if status != NodeStatus::Succeeded {
                        span.set_status(Status::error(status.as_str()));
                    }
                    span.end();
                }
            }
        }
    }

    /// The span of `node_id`'s attempt `attempt` (none while traces are off
    /// or the node has no open span).
    pub fn attempt(&self, run_id: &str, node_id: &str, attempt: u32) -> tracing::Span {
        if !traces::enabled() {
            return tracing::Span::none();
        }
        let node = self
            .lock()
            .get(run_id)
            .and_then(|spans| spans.nodes.get(node_id))
            .map(|span| span.span_context().clone());
        match node {
            Some(node) => traces::attempt_span(node, run_id, node_id, attempt),
            None => tracing::Span::none(),
        }
    }

    pub fn run_finished(&self, run_id: &str, status: RunStatus) {
        if !traces::enabled() {
            return;
        }
        let Some(spans) = self.lock().remove(run_id) else {
            return;
        };
        for (_, mut span) in spans.nodes {
            span.set_status(Status::error(status.as_str()));
            span.end();
        }
        let run = spans.run.span();
        run.set_attribute(KeyValue::new("wf.run.status", status.as_str()));
        if status != RunStatus::Succeeded {
            run.set_status(Status::error(status.as_str()));
        }
        run.end();
    }

    fn lock(&self) -> std::sync::MutexGuard<'_, HashMap<String, RunSpans>> {
        self.runs.lock().unwrap_or_else(PoisonError::into_inner)
    }
}

/// A run started inside a traced request (e.g. `wf_planner__run_workflow`)
/// is that request's child, in its trace; any other run is a new root.
fn parent_of_run() -> Context {
    let current = tracing::Span::current().context();
    if current.span().span_context().is_valid() {
        current
    } else {
        Context::new()
    }
}
