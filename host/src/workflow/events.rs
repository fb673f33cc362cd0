//! Run and node state changes, broadcast as they happen (the console's live
//! run view listens; metrics may). A bounded channel: a listener that falls
//! behind is told it lagged and reloads from the store; the engine never
//! waits for anyone. With no listener, publishing costs a counter check.
//! The same events feed the runs' traces (`run_traces`).

use std::collections::VecDeque;
use std::sync::{Mutex, PoisonError};

use serde::Serialize;
use serde_json::Value;
use tokio::sync::broadcast;

use super::model::Workflow;
use super::run_traces::RunTraces;
use crate::status::RunStatus;
use crate::store::NodeRecord;

/// Events kept for a listener that is slower than the runs.
const CAPACITY: usize = 1024;
/// Graphs of the most recent runs kept in memory (older runs' graphs are
/// rebuilt from their stored document, where there is one).
const GRAPHS: usize = 256;

#[derive(Debug, Clone, Serialize)]
#[serde(tag = "type", rename_all = "snake_case")]
pub enum RunEvent {
    RunStarted {
        run_id: String,
        workflow: String,
    },
    /// A node's record changed (running, succeeded, failed, skipped, ...).
    Node {
        run_id: String,
        node: Box<NodeRecord>,
    },
    RunFinished {
        run_id: String,
        status: RunStatus,
        error: Option<String>,
    },
}

impl RunEvent {
    pub fn run_id(&self) -> &str {
        match self {
            RunEvent::RunStarted { run_id, .. }
            | RunEvent::Node { run_id, .. }
            | RunEvent::RunFinished { run_id, .. } => run_id,
        }
    }
}

pub struct RunEvents {
    tx: broadcast::Sender<RunEvent>,
    /// `(run id, graph)` of recent runs, newest last.
    graphs: Mutex<VecDeque<(String, Value)>>,
    traces: RunTraces,
}

impl Default for RunEvents {
    fn default() -> Self {
        Self {
            tx: broadcast::channel(CAPACITY).0,
            graphs: Mutex::default(),
            traces: RunTraces::default(),
        }
    }
}

impl RunEvents {
    pub fn subscribe(&self) -> broadcast::Receiver<RunEvent> {
        self.tx.subscribe()
    }

    fn send(&self, event: impl FnOnce() -> RunEvent) {
        if self.tx.receiver_count() > 0 {
            // Err only when every listener left meanwhile: nothing to do.
            let _ = self.tx.send(event());
        }
    }

    pub fn run_started(&self, run_id: &str, wf: &Workflow) {
        self.traces.run_started(run_id, &wf.name);
        {
            let mut graphs = self.graphs.lock().unwrap_or_else(PoisonError::into_inner);
            if graphs.len() == GRAPHS {
                graphs.pop_front();
            }
            graphs.push_back((run_id.to_string(), super::graph::to_json(wf)));
        }
        self.send(|| RunEvent::RunStarted {
            run_id: run_id.into(),
            workflow: wf.name.clone(),
        });
    }

    pub fn node(&self, run_id: &str, node: &NodeRecord) {
        self.traces.node(run_id, node);
        self.send(|| RunEvent::Node {
            run_id: run_id.into(),
            node: Box::new(node.clone()),
        });
    }

    /// The trace span of a node's attempt (none while traces are off).
    pub fn attempt_span(&self, run_id: &str, node_id: &str, attempt: u32) -> tracing::Span {
        self.traces.attempt(run_id, node_id, attempt)
    }

    pub fn run_finished(&self, run_id: &str, status: RunStatus, error: Option<&str>) {
        self.traces.run_finished(run_id, status);
        self.send(|| RunEvent::RunFinished {
            run_id: run_id.into(),
            status,
            error: error.map(str::to_string),
        });
    }

    /// The graph of a recent run started in this process.
    pub fn graph(&self, run_id: &str) -> Option<Value> {
        let graphs = self.graphs.lock().unwrap_or_else(PoisonError::into_inner);
        graphs
            .iter()
            .rev()
            .find(|(id, _)| id == run_id)
            .map(|(_, g)| g.clone())
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn wf() -> Workflow {
        Workflow::from_value(
            &json!({"name": "w", "nodes": [{"id": "a", "use": "wf.std.sleep", "args": {"ms": 1}}]}),
        )
        .unwrap()
    }

    #[tokio::test]
    async fn listeners_get_events_in_order_and_graphs_are_bounded() {
        let events = RunEvents::default();
        // No listener yet: nothing is queued, the graph is still kept.
        events.run_started("r0", &wf());
        let mut rx = events.subscribe();
        events.run_started("r1", &wf());
        events.run_finished("r1", RunStatus::Succeeded, None);
        assert!(
            matches!(rx.recv().await.unwrap(), RunEvent::RunStarted { run_id, .. } if run_id == "r1")
        );
        let finished = rx.recv().await.unwrap();
        assert_eq!(finished.run_id(), "r1");
        assert_eq!(
            serde_json::to_value(&finished).unwrap(),
            json!({"type": "run_finished", "run_id": "r1", "status": "succeeded", "error": null})
        );
        assert!(events.graph("r0").is_some());
        for i in 0..GRAPHS {
            events.run_started(&format!("x{i}"), &wf());
        }
        assert!(events.graph("r0").is_none());
        assert_eq!(events.graph("x0").unwrap()["nodes"][0]["id"], "a");
    }
}
