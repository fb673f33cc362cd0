//! The scheduler of one run: starts every node whose dependencies have
//! settled (in document order; a stateful source runs one node at a time),
//! records each outcome, and stops the run on failure or cancellation.

use std::collections::{BTreeMap, BTreeSet, HashMap};
use std::time::{Duration, Instant};

use futures::StreamExt;
use futures::future::BoxFuture;
use futures::stream::FuturesUnordered;
use serde_json::{Map, Value, json};
use wf_plugin_api::{CallScope, ErrorCode};

use super::{AttemptTraces, NodeError, NodeOutcome, Run, no_one_to_ask, run_node};
use crate::clock::now_ms;
use crate::status::{NodeStatus, RunStatus};
use crate::store::NodeRecord;
use crate::workflow::catalog::CapabilityEntry;
use crate::workflow::graph;
use crate::workflow::model::OnError;
use crate::workflow::refs::{self, Scope};

/// How a run ended.
#[derive(Debug)]
pub(super) enum RunEnd {
    Succeeded(Value),
    Failed(String),
    Cancelled,
}

impl RunEnd {
    /// The run record's status, outputs and error.
    pub(super) fn into_record(self) -> (RunStatus, Option<Value>, Option<String>) {
        match self {
            Self::Succeeded(out) => (RunStatus::Succeeded, Some(out), None),
            Self::Failed(e) => (RunStatus::Failed, None, Some(e)),
            Self::Cancelled => (
                RunStatus::Cancelled,
                None,
                Some(RunStatus::Cancelled.to_string()),
            ),
        }
    }
}

#[derive(Clone, Copy, PartialEq, Eq, Debug)]
enum State {
    Pending,
    Running,
    Done,
    Skipped,
    Failed,
}

pub(super) struct Scheduler<'r> {
    run: &'r Run,
    scopes: &'r BTreeMap<String, CallScope>,
    /// Each node's catalog entry, looked up once (not per start and outcome).
    entries: Vec<&'r CapabilityEntry>,
    /// Each node's dependencies, and the nodes depending on it.
    deps: Vec<BTreeSet<usize>>,
    dependents: Vec<Vec<usize>>,
    /// Dependencies not settled yet, per node.
    waiting: Vec<usize>,
    /// Nodes whose dependencies have all settled, in document order.
    ready: BTreeSet<usize>,
    state: Vec<State>,
    outputs: HashMap<String, Value>,
    /// Stateful sources with a node running.
    busy: BTreeSet<String>,
    /// When each node started.
    clock: Vec<Instant>,
    recs: Vec<NodeRecord>,
    failure: Option<String>,
    /// Polled by the run's task itself (no spawn): a node's completion needs
    /// no extra thread hand-off. Dropping a future cancels its call.
    tasks: FuturesUnordered<BoxFuture<'static, NodeOutcome>>,
    /// Each running node's audit record (the call pipeline's record stage),
    /// ended with its outcome; one dropped unfinished is recorded cancelled.
    audit: Vec<Option<crate::pipeline::record::Pending>>,
}

impl<'r> Scheduler<'r> {
    pub(super) fn new(run: &'r Run, scopes: &'r BTreeMap<String, CallScope>) -> Self {
        let n = run.wf.nodes.len();
        let deps = graph::dependencies(&run.wf);
        let mut dependents: Vec<Vec<usize>> = vec![Vec::new(); n];
        for (i, ds) in deps.iter().enumerate() {
            for &d in ds {
                dependents[d].push(i);
            }
        }
        let waiting: Vec<usize> = deps.iter().map(BTreeSet::len).collect();
        let entries = (0..n).map(|i| run.entry(i)).collect();
        let ready = (0..n).filter(|&i| waiting[i] == 0).collect();
        let recs = run
            .wf
            .nodes
            .iter()
            .map(|node| NodeRecord {
                node_id: node.id.clone(),
                capability: node.uses.clone(),
                status: NodeStatus::Pending,
                args: None,
                output: None,
                error: None,
                error_code: None,
                attempts: 0,
                epoch: None,
                started_at: None,
                finished_at: None,
            })
            .collect();
        Self {
            run,
            scopes,
            entries,
            deps,
            dependents,
            waiting,
            ready,
            state: vec![State::Pending; n],
            outputs: HashMap::with_capacity(n),
            busy: BTreeSet::new(),
            clock: vec![Instant::now(); n],
            recs,
            failure: None,
            tasks: FuturesUnordered::new(),
            audit: (0..n).map(|_| None).collect(),
        }
    }

    /// Runs the workflow to its end.
    pub(super) async fn run(mut self) -> RunEnd {
        loop {
            // A node whose source answers at once (wf.std, polled inline)
            // never makes this task wait, and tasks it wakes (the record
            // writer, event listeners) sit in this worker's LIFO slot, which
            // no other worker steals: without this, a chain of such nodes
            // would starve them until the run ends.
            tokio::task::consume_budget().await;
            self.start_ready();
            if self.tasks.is_empty() {
                break;
            }
            let outcome = tokio::select! {
                r = self.tasks.next() => r,
                _ = self.run.cancel.cancelled() => None,
            };
            match outcome {
                Some(outcome) => self.on_outcome(outcome),
                None => return self.cancel_running(),
            }
        }
        match self.failure.take() {
            Some(e) => RunEnd::Failed(e),
            None => RunEnd::Succeeded(self.outputs()),
        }
    }

    /// Starts every ready node, in document order; a stateful source runs
    /// one node at a time. Skipping a node can make others ready.
    fn start_ready(&mut self) {
        let mut progressed = true;
        while progressed && self.failure.is_none() && !self.run.cancel.is_cancelled() {
            progressed = false;
            let candidates: Vec<usize> = self.ready.iter().copied().collect();
            for i in candidates {
                let entry = self.entries[i];
                if entry.spec.stateful && self.busy.contains(&entry.source) {
                    continue;
                }
                self.ready.remove(&i);
                progressed = true;
                if !self.start(i) {
                    break;
                }
            }
        }
    }

    /// Starts (or skips) node `i`; false when it could not be prepared and
    /// the run has failed.
    fn start(&mut self, i: usize) -> bool {
        let run = self.run;
        let node = &run.wf.nodes[i];
        let entry = self.entries[i];
        self.clock[i] = Instant::now();
        self.recs[i].started_at = Some(now_ms());
        if let Some(why) = self.skip_reason(i) {
            self.state[i] = State::Skipped;
            run.finish(
                &mut self.recs[i],
                NodeStatus::Skipped,
                None,
                Some(NodeError::uncoded(why)),
            );
            run.emit(i, NodeStatus::Skipped, self.clock[i], None);
            self.settle(i);
            return true;
        }
        let values = Scope {
            inputs: &run.inputs,
            outputs: &self.outputs,
        };
        let prepared = node
            .when
            .as_ref()
            .map(|w| refs::resolve(w, &values))
            .transpose()
            .and_then(|_| refs::resolve_map(&node.args, &values))
            .and_then(|args| Ok((args, run.handle(&entry.source)?)));
        // The call pipeline, as the run's principal, with the node's real arguments.
        let prepared = prepared.and_then(|(args, handle)| {
            let recorded = run.admit(entry, &node.id, &args)?;
            Ok((args, handle, recorded))
        });
        let (args, handle) = match prepared {
            Ok((args, handle, recorded)) => {
                self.audit[i] = recorded;
                (args, handle)
            }
            Err(e) => {
                self.state[i] = State::Failed;
                self.failure = Some(format!("node {:?}: {e}", node.id));
                run.emit(i, NodeStatus::Failed, self.clock[i], Some(e.clone()));
                run.finish(
                    &mut self.recs[i],
                    NodeStatus::Failed,
                    None,
                    Some(NodeError::uncoded(e)),
                );
                return false;
            }
        };
        let scope = self.scopes.get(&entry.source).cloned().unwrap_or_default();
        self.state[i] = State::Running;
        if entry.spec.stateful {
            self.busy.insert(entry.source.clone());
        }
        let rec = &mut self.recs[i];
        rec.status = NodeStatus::Running;
        rec.args = Some(args.clone());
        rec.epoch = scope.expect_epoch.map(|e| e as i64);
        run.save(rec);
        run.emit(i, NodeStatus::Running, self.clock[i], None);
        let (name, timeout, retry) = (
            entry.name.clone(),
            node.timeout_ms.map(Duration::from_millis),
            node.retry.clone(),
        );
        let asks = no_one_to_ask(&node.id);
        let traces = crate::telemetry::traces::enabled().then(|| AttemptTraces {
            engine: run.engine.clone(),
            run_id: run.id.clone(),
            node_id: node.id.clone(),
        });
        self.tasks.push(Box::pin(run_node(
            i, handle, name, args, scope, timeout, retry, asks, traces,
        )));
        true
    }

    /// Why node `i` is skipped: a dependency was skipped, or its `when` is false.
    fn skip_reason(&self, i: usize) -> Option<&'static str> {
        if self.deps[i]
            .iter()
            .any(|&d| self.state[d] == State::Skipped)
        {
            return Some("a node it depends on was skipped");
        }
        let values = Scope {
            inputs: &self.run.inputs,
            outputs: &self.outputs,
        };
        match self.run.wf.nodes[i]
            .when
            .as_ref()
            .map(|w| refs::resolve(w, &values))
        {
            Some(Ok(v)) if !refs::truthy(&v) => Some("`when` was false"),
            _ => None,
        }
    }

    /// Node `i` has settled: its dependents wait for one fewer.
    fn settle(&mut self, i: usize) {
        for &d in &self.dependents[i] {
            self.waiting[d] -= 1;
            if self.waiting[d] == 0 {
                self.ready.insert(d);
            }
        }
    }

    /// Records a node's result; a failure (unless the node continues on
    /// error) fails the run and stops the nodes still running.
    fn on_outcome(&mut self, outcome: NodeOutcome) {
        let run = self.run;
        let NodeOutcome {
            index: i,
            result,
            attempts,
        } = outcome;
        let entry = self.entries[i];
        self.busy.remove(&entry.source);
        let node = &run.wf.nodes[i];
        self.recs[i].attempts = attempts as i64;
        if let Some(recorded) = self.audit[i].take() {
            use crate::pipeline::record::Outcome;
            match &result {
                Ok(out) => recorded.finish(Outcome::Ok, Some(out)),
                Err(err) => {
                    let outcome = match err.code {
                        Some(ErrorCode::Cancelled) => Outcome::Cancelled,
                        Some(ErrorCode::Timeout) => Outcome::TimedOut,
                        _ => Outcome::ToolError,
                    };
                    recorded.fail(outcome, &err.message);
                }
            }
        }
        match result {
            Ok(out) => {
                self.state[i] = State::Done;
                run.finish(
                    &mut self.recs[i],
                    NodeStatus::Succeeded,
                    Some(out.clone()),
                    None,
                );
                self.outputs.insert(node.id.clone(), out);
                run.emit(i, NodeStatus::Succeeded, self.clock[i], None);
                self.settle(i);
            }
            Err(err) => {
                let e = err.message.clone();
                run.finish(&mut self.recs[i], NodeStatus::Failed, None, Some(err));
                run.emit(i, NodeStatus::Failed, self.clock[i], Some(e.clone()));
                if node.on_error == OnError::Continue {
                    self.state[i] = State::Done;
                    self.outputs.insert(node.id.clone(), json!({"error": e}));
                    self.settle(i);
                } else {
                    self.state[i] = State::Failed;
                    self.failure.get_or_insert_with(|| {
                        format!("node {:?} ({}) failed: {e}", node.id, node.uses)
                    });
                }
            }
        }
        if self.failure.is_some() && !self.tasks.is_empty() {
            self.stop_running();
        }
    }

    /// The run has failed: stops the nodes still running.
    fn stop_running(&mut self) {
        self.tasks.clear();
        for i in 0..self.state.len() {
            if self.state[i] == State::Running {
                self.state[i] = State::Failed;
                self.run.finish(
                    &mut self.recs[i],
                    NodeStatus::Cancelled,
                    None,
                    Some(NodeError::new(ErrorCode::Cancelled, "another node failed")),
                );
            }
        }
    }

    /// The run was cancelled: dropping the tasks cancels the calls in the
    /// plugins; every running node is recorded as cancelled.
    fn cancel_running(mut self) -> RunEnd {
        self.tasks.clear();
        for i in 0..self.state.len() {
            if self.state[i] == State::Running {
                self.run.finish(
                    &mut self.recs[i],
                    NodeStatus::Cancelled,
                    None,
                    Some(NodeError::new(
                        ErrorCode::Cancelled,
                        "the run was cancelled",
                    )),
                );
                self.run.emit(i, NodeStatus::Cancelled, self.clock[i], None);
            }
        }
        RunEnd::Cancelled
    }

    /// The workflow's outputs; an output of a skipped branch is null.
    fn outputs(&self) -> Value {
        let values = Scope {
            inputs: &self.run.inputs,
            outputs: &self.outputs,
        };
        let mut out = Map::new();
        for (k, expr) in &self.run.wf.outputs {
            out.insert(
                k.clone(),
                refs::resolve(expr, &values).unwrap_or(Value::Null),
            );
        }
        Value::Object(out)
    }
}
