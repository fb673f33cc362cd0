//! The workflow engine: order, concurrency, one-at-a-time stateful sources,
//! failure, `on_error`, retries, timeouts, lost state, skips and cancel.

use std::sync::Arc;

use serde_json::{Value, json};
use wf_host::workflow::engine::StartError;
use wf_host::workflow::{NodeEvent, RunOrigin, Workflow};
use wf_plugin_api::ErrorCode;

use crate::fake::journal;
use crate::support::block_on;
use crate::support::{PATIENCE, TestHost, node, text};

/// A host with one fake source named `source`.
async fn host(source: &str) -> TestHost {
    TestHost::new(&format!("[sources.{source}]\nkind = \"fake\"\n")).await
}

fn position(events: &[String], event: &str) -> usize {
    events
        .iter()
        .position(|e| e == event)
        .unwrap_or_else(|| panic!("{event:?} not in {events:?}"))
}

#[test]
fn a_node_runs_after_the_nodes_it_uses_and_gets_their_output() {
    block_on(async {
        let h = host("order").await;
        let (run, nodes) = h
        .run(json!({"nodes": [
            {"id": "c", "use": "order.echo", "args": {"label": "c", "value": {"$ref": "nodes.b.output.value"}}},
            {"id": "b", "use": "order.echo", "args": {"label": "b", "value": {"$ref": "nodes.a.output.label"}}, "after": []},
            {"id": "a", "use": "order.echo", "args": {"label": "a"}}
        ], "outputs": {"last": {"$ref": "nodes.c.output.value"}}}))
        .await;
        assert_eq!(text(&run.status), "succeeded", "{run:?}");
        assert_eq!(run.outputs, Some(json!({"last": "a"})));
        let j = journal("order");
        assert!(position(&j, "end:a") < position(&j, "start:b"), "{j:?}");
        assert!(position(&j, "end:b") < position(&j, "start:c"), "{j:?}");
        assert!(nodes.iter().all(|n| text(&n.status) == "succeeded"));
    })
}

#[test]
fn independent_nodes_run_at_the_same_time() {
    block_on(async {
        let h = host("branches").await;
        let (run, _) = h
            .run(json!({"nodes": [
                {"id": "a", "use": "branches.echo", "args": {"label": "a", "delay_ms": 300}},
                {"id": "b", "use": "branches.echo", "args": {"label": "b", "delay_ms": 300}}
            ]}))
            .await;
        assert_eq!(text(&run.status), "succeeded");
        let j = journal("branches");
        // Both started before either ended.
        assert!(position(&j, "start:b") < position(&j, "end:a"), "{j:?}");
        assert!(position(&j, "start:a") < position(&j, "end:b"), "{j:?}");
    })
}

#[test]
fn nodes_of_a_stateful_source_run_one_at_a_time_in_document_order() {
    block_on(async {
        let h = host("stateful").await;
        let (run, _) = h
            .run(json!({"nodes": [
                {"id": "one", "use": "stateful.step", "args": {"label": "one", "delay_ms": 100}},
                {"id": "two", "use": "stateful.step", "args": {"label": "two", "delay_ms": 100}},
                {"id": "three", "use": "stateful.step", "args": {"label": "three"}}
            ]}))
            .await;
        assert_eq!(text(&run.status), "succeeded");
        assert_eq!(
            journal("stateful"),
            [
                "start:one",
                "end:one",
                "start:two",
                "end:two",
                "start:three",
                "end:three"
            ]
        );
    })
}

#[test]
fn a_failed_node_fails_the_run_and_its_dependents_never_start() {
    block_on(async {
        let h = host("failing").await;
        let (run, nodes) = h
        .run(json!({"nodes": [
            {"id": "a", "use": "failing.fail", "args": {"label": "a"}},
            {"id": "b", "use": "failing.echo", "args": {"label": "b", "value": {"$ref": "nodes.a.output.value"}}}
        ]}))
        .await;
        assert_eq!(text(&run.status), "failed");
        let error = run.error.unwrap_or_default();
        assert!(
            error.contains("\"a\"") && error.contains("a failed"),
            "{error}"
        );
        let a = node(&nodes, "a");
        assert_eq!(text(&a.status), "failed");
        assert_eq!(a.error_code, Some(ErrorCode::Failed));
        // b never started: it has no record.
        assert!(nodes.iter().all(|n| n.node_id != "b"), "{nodes:?}");
        assert!(!journal("failing").contains(&"start:b".to_string()));
    })
}

#[test]
fn a_failure_stops_the_nodes_still_running() {
    block_on(async {
        let h = host("stopping").await;
        let (run, nodes) = h
            .run(json!({"nodes": [
                {"id": "slow", "use": "stopping.hang", "args": {"label": "slow"}},
                {"id": "bad", "use": "stopping.fail", "args": {"label": "bad", "delay_ms": 50}}
            ]}))
            .await;
        assert_eq!(text(&run.status), "failed");
        let slow = node(&nodes, "slow");
        assert_eq!(text(&slow.status), "cancelled");
        assert_eq!(slow.error_code, Some(ErrorCode::Cancelled));
        assert_eq!(slow.error.as_deref(), Some("another node failed"));
    })
}

#[test]
fn on_error_continue_records_the_failure_and_goes_on() {
    block_on(async {
        let h = host("tolerant").await;
        let (run, nodes) = h
            .run(json!({"nodes": [
            {"id": "a", "use": "tolerant.fail", "args": {"label": "a"}, "on_error": "continue"},
            {"id": "b", "use": "tolerant.echo", "args": {"label": "b", "value": {"$ref": "nodes.a.output"}}}
        ], "outputs": {"seen": {"$ref": "nodes.b.output.value"}}}))
            .await;
        assert_eq!(text(&run.status), "succeeded", "{run:?}");
        assert_eq!(text(&node(&nodes, "a").status), "failed");
        assert_eq!(
            run.outputs,
            Some(json!({"seen": {"error": "source \"tolerant\": failed: a failed"}}))
        );
    })
}

#[test]
fn a_node_is_retried_until_it_succeeds() {
    block_on(async {
        let h = host("retrying").await;
        let (run, nodes) = h
            .run(json!({"nodes": [
                {"id": "a", "use": "retrying.flaky", "args": {"fails": 2}, "retry": {"attempts": 3}}
            ]}))
            .await;
        assert_eq!(text(&run.status), "succeeded", "{run:?}");
        assert_eq!(node(&nodes, "a").attempts, 3);
    })
}

#[test]
fn retries_end_after_the_last_attempt() {
    block_on(async {
        let h = host("exhausted").await;
        let (run, nodes) = h
        .run(json!({"nodes": [
            {"id": "a", "use": "exhausted.flaky", "args": {"fails": 5}, "retry": {"attempts": 2, "backoff_ms": 10}}
        ]}))
        .await;
        assert_eq!(text(&run.status), "failed");
        let a = node(&nodes, "a");
        assert_eq!(a.attempts, 2);
        let error = a.error.as_deref().unwrap_or("");
        assert!(
            error.ends_with("attempt 2 failed"),
            "the last attempt's error: {error}"
        );
    })
}

#[test]
fn lost_state_is_never_retried() {
    block_on(async {
        let h = host("losing").await;
        let (run, nodes) = h
            .run(json!({"nodes": [
                {"id": "a", "use": "losing.lost", "retry": {"attempts": 3}}
            ]}))
            .await;
        assert_eq!(text(&run.status), "failed");
        let a = node(&nodes, "a");
        assert_eq!(a.attempts, 1);
        assert_eq!(a.error_code, Some(ErrorCode::StateLost));
        assert_eq!(journal("losing").len(), 2, "one call only");
    })
}

#[test]
fn a_node_over_its_timeout_fails_with_the_timeout_code() {
    block_on(async {
        let h = host("timing").await;
        let (run, nodes) = h
            .run(json!({"nodes": [
                {"id": "a", "use": "timing.hang", "timeout_ms": 100}
            ]}))
            .await;
        assert_eq!(text(&run.status), "failed");
        let a = node(&nodes, "a");
        assert_eq!(a.error_code, Some(ErrorCode::Timeout));
        assert!(a.error.as_deref().unwrap_or("").contains("100 ms"), "{a:?}");
    })
}

#[test]
fn a_false_when_skips_the_node_and_what_depends_on_it() {
    block_on(async {
        let h = host("skipping").await;
        let (run, nodes) = h
            .run(json!({"nodes": [
            {"id": "a", "use": "skipping.echo", "when": false},
            {"id": "b", "use": "skipping.echo", "args": {"value": {"$ref": "nodes.a.output.value"}}},
            {"id": "c", "use": "skipping.echo", "args": {"label": "c"}}
        ], "outputs": {"b": {"$ref": "nodes.b.output.value"}, "c": {"$ref": "nodes.c.output.label"}}}))
            .await;
        assert_eq!(text(&run.status), "succeeded", "{run:?}");
        assert_eq!(text(&node(&nodes, "a").status), "skipped");
        assert_eq!(text(&node(&nodes, "b").status), "skipped");
        assert_eq!(run.outputs, Some(json!({"b": null, "c": "c"})));
    })
}

#[test]
fn cancel_stops_a_run_and_records_its_running_nodes_as_cancelled() {
    block_on(async {
        let h = host("cancelling").await;
        let engine = h.engine();
        let (tx, mut rx) = tokio::sync::mpsc::unbounded_channel::<NodeEvent>();
        let on_event = Arc::new(move |e: &NodeEvent| {
            let _ = tx.send(e.clone());
        });
        let wf = Workflow::from_value(&json!({"nodes": [
            {"id": "a", "use": "cancelling.hang"}
        ]}))
        .unwrap();
        let id = engine
            .start(wf, Value::Null, RunOrigin::Inline, "local", Some(on_event))
            .await
            .unwrap();
        // Cancel once the node is running.
        tokio::time::timeout(PATIENCE, async {
            while let Some(e) = rx.recv().await {
                if text(&e.status) == "running" {
                    return;
                }
            }
        })
        .await
        .expect("the node starts");
        assert!(engine.cancel(&id));
        let (run, nodes) = engine.wait(&id, PATIENCE).await.unwrap();
        assert_eq!(text(&run.status), "cancelled");
        let a = node(&nodes, "a");
        assert_eq!(text(&a.status), "cancelled");
        assert_eq!(a.error_code, Some(ErrorCode::Cancelled));
    })
}

#[test]
fn an_invalid_workflow_is_refused_before_it_runs() {
    block_on(async {
        let h = host("refusing").await;
        let wf = Workflow::from_value(&json!({"nodes": [
            {"id": "a", "use": "refusing.ech"}
        ]}))
        .unwrap();
        match h
            .engine()
            .start(wf, Value::Null, RunOrigin::Inline, "local", None)
            .await
        {
            Err(StartError::Invalid(problems)) => {
                assert_eq!(problems.len(), 1);
                assert_eq!(text(&problems[0].kind), "unknown_capability");
                assert!(
                    problems[0].message.contains("refusing.echo"),
                    "{problems:?}"
                );
            }
            other => panic!("expected Invalid, got {other:?}"),
        }
        assert!(journal("refusing").is_empty());
    })
}

#[test]
fn a_burst_of_fast_nodes_is_recorded_in_full_when_the_run_ends() {
    block_on(async {
        let h = host("burst").await;
        // The node log coalesces records: the run's end must flush all of them.
        let mut nodes = vec![json!({"id": "n0", "use": "burst.echo", "args": {"label": "n0"}})];
        for i in 1..300 {
            nodes.push(json!({"id": format!("n{i}"), "use": "burst.echo",
                "args": {"label": format!("n{i}"), "value": {"$ref": format!("nodes.n{}.output.label", i - 1)}}}));
        }
        let (run, recs) = h.run(json!({"nodes": nodes})).await;
        assert_eq!(text(&run.status), "succeeded", "{run:?}");
        assert_eq!(recs.len(), 300);
        for r in &recs {
            assert_eq!(text(&r.status), "succeeded", "{r:?}");
            assert!(r.output.is_some() && r.finished_at.is_some(), "{r:?}");
        }
        assert_eq!(
            node(&recs, "n299").args,
            Some(json!({"label": "n299", "value": "n298"}))
        );
    })
}

#[test]
fn a_running_node_is_recorded_while_it_runs() {
    block_on(async {
        let h = host("visible").await;
        let engine = h.engine();
        let wf =
            Workflow::from_value(&json!({"nodes": [{"id": "a", "use": "visible.hang"}]})).unwrap();
        let id = engine
            .start(wf, Value::Null, RunOrigin::Inline, "local", None)
            .await
            .unwrap();
        // Coalesced writes still reach the store while the node hangs.
        tokio::time::timeout(PATIENCE, async {
            loop {
                let (_, nodes) = engine.store.run(&id).await.unwrap();
                if nodes
                    .iter()
                    .any(|n| n.node_id == "a" && text(&n.status) == "running")
                {
                    return;
                }
                tokio::time::sleep(std::time::Duration::from_millis(10)).await;
            }
        })
        .await
        .expect("the running node's record is written");
        assert!(engine.cancel(&id));
        let (run, _) = engine.wait(&id, PATIENCE).await.unwrap();
        assert_eq!(text(&run.status), "cancelled");
    })
}

/// Refuses every call to a capability of one source (a stand-in `authorize` stage).
struct RefuseSource(&'static str);

impl wf_host::pipeline::Authorize for RefuseSource {
    fn authorize(
        &self,
        call: &wf_host::pipeline::Call<'_>,
    ) -> Result<Vec<String>, wf_host::pipeline::Refusal> {
        if call.capability.source == self.0 {
            return Err(wf_host::pipeline::Refusal::new(
                wf_host::pipeline::Stage::Authorize,
                format!("{} is refused to {}", call.capability.name, call.principal),
            ));
        }
        Ok(Vec::new())
    }
    fn may_list(
        &self,
        _: &wf_host::pipeline::Principal,
        c: &wf_host::pipeline::Capability<'_>,
    ) -> bool {
        c.source != self.0
    }
}

#[test]
fn a_workflow_node_passes_the_call_pipeline_as_the_runs_principal() {
    use wf_host::pipeline::Entry;
    block_on(async {
        let h = host("guarded").await;
        let (run, _) = h
            .run(json!({"nodes": [{"id": "a", "use": "guarded.echo", "args": {"label": "a"}}]}))
            .await;
        assert_eq!(text(&run.status), "succeeded", "{run:?}");
        assert_eq!(h.pipeline.counts(Entry::WorkflowNode), (1, 0));
        h.pipeline
            .set_authorizer("test", Arc::new(RefuseSource("guarded")));
        let (run, nodes) = h
            .run(json!({"nodes": [{"id": "a", "use": "guarded.echo", "args": {"label": "a"}}]}))
            .await;
        assert_eq!(text(&run.status), "failed", "{run:?}");
        let error = node(&nodes, "a").error.clone().unwrap_or_default();
        assert!(error.contains("guarded__echo is refused to"), "{error:?}");
        assert_eq!(h.pipeline.counts(Entry::WorkflowNode), (1, 1));
        // Only the first run's node reached the source.
        let starts = journal("guarded")
            .iter()
            .filter(|e| *e == "start:a")
            .count();
        assert_eq!(starts, 1);
    })
}
