//! The record stage: one audit record per decision and call (the audit
//! trail, [`crate::audit`]). A refusal is recorded when it is made. An
//! admitted call's record is started when it is admitted ([`Pending`]: who,
//! what, the arguments' shape) and written when it ends, with its outcome,
//! duration and sizes; one dropped unfinished (the client went away) is
//! recorded `cancelled`.

use std::sync::Arc;
use std::time::Instant;

use serde::Serialize;
use serde_json::{Value, json};

pub use super::json_len::json_len;
use super::{Call, Entry, Refusal, Stage};
use crate::audit::{AuditLog, Keep};
use crate::store::AuditRecord;

/// Results up to this size are shaped (content types, structured shape);
/// a larger one is recorded by its size alone, so a record never copies a
/// large result.
const SHAPE_LIMIT: usize = 64 * 1024;

/// How an admitted call ended.
#[derive(Debug, Clone)]
pub enum Outcome {
    Ok,
    /// A tool result with `isError`.
    ToolError,
    /// The upstream asked for input (MRTR): the call goes on in a retry.
    InputRequired,
    /// A JSON-RPC error.
    ProtocolError {
        code: i64,
        message: String,
    },
    Cancelled,
    TimedOut,
}

impl Outcome {
    fn name(&self) -> &'static str {
        match self {
            Outcome::Ok => "ok",
            Outcome::ToolError => "tool_error",
            Outcome::InputRequired => "input_required",
            Outcome::ProtocolError { .. } => "protocol_error",
            Outcome::Cancelled => "cancelled",
            Outcome::TimedOut => "timed_out",
        }
    }
}

/// A workflow node's place, for records of node calls.
#[derive(Debug, Clone, Copy)]
pub struct RunNode<'a> {
    pub run_id: &'a str,
    pub node_id: &'a str,
}

fn kind(call: &Call<'_>) -> &'static str {
    match call.entry {
        Entry::WorkflowNode => "node",
        Entry::Completion => "completion",
        Entry::Subscribe => "subscription",
        Entry::Console => "console",
        _ => call.capability.kind.name(),
    }
}

fn base(audit: &AuditLog, call: &Call<'_>, keep: Keep, node: Option<RunNode<'_>>) -> AuditRecord {
    let cap = &call.capability;
    let arguments = (!call.arguments.is_null()).then(|| audit.arguments(keep, call.arguments));
    AuditRecord {
        principal: call.principal.name().to_string(),
        // As policies and quotas see them: a static token's groups too.
        groups: call
            .principal
            .member_groups()
            .iter()
            .map(|s| s.to_string())
            .collect(),
        client: call.client.map(|name| match call.client_version {
            Some(v) if !v.is_empty() => format!("{name}/{v}"),
            _ => name.to_string(),
        }),
        transport: call.transport.name().to_string(),
        endpoint: call.endpoint.map(str::to_string),
        kind: kind(call).to_string(),
        capability: cap.name.to_string(),
        source: Some(cap.source.to_string()),
        bytes_in: if call.arguments.is_null() {
            0
        } else {
            json_len(call.arguments) as i64
        },
        arguments,
        trace_id: crate::telemetry::traces::current_trace_id(),
        run_id: node.map(|n| n.run_id.to_string()),
        node_id: node.map(|n| n.node_id.to_string()),
        ..AuditRecord::default()
    }
}

/// Records a refused call.
pub fn refused(audit: &AuditLog, call: &Call<'_>, refusal: &Refusal, node: Option<RunNode<'_>>) {
    if !audit.enabled() {
        return;
    }
    let (decision, outcome) = match refusal.stage {
        Stage::Limit => ("limited", "limited"),
        Stage::Hold => ("held", "denied"),
        _ => ("deny", "denied"),
    };
    let keep = audit.keep(call.capability.source, call.capability.name);
    audit.record(AuditRecord {
        decision: decision.into(),
        outcome: outcome.into(),
        policies: refusal.policy.iter().cloned().collect(),
        quota: (refusal.stage == Stage::Limit).then(|| refusal.message.clone()),
        error: Some(refusal.message.clone()),
        ..base(audit, call, keep, node)
    });
}

/// An admitted call's record, finished when the call ends.
pub struct Pending {
    audit: Arc<AuditLog>,
    record: Option<AuditRecord>,
    keep: Keep,
    started: Instant,
}

impl std::fmt::Debug for Pending {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Pending").finish_non_exhaustive()
    }
}

/// Starts the record of an admitted call (`None` with the audit off).
/// `policies` are the ones that permitted it, when a policy stage says.
pub fn admitted(
    audit: &Arc<AuditLog>,
    call: &Call<'_>,
    policies: Vec<String>,
    node: Option<RunNode<'_>>,
) -> Option<Pending> {
    if !audit.enabled() {
        return None;
    }
    let keep = audit.keep(call.capability.source, call.capability.name);
    let mut record = base(audit, call, keep, node);
    record.decision = "allow".into();
    record.policies = policies;
    Some(Pending {
        audit: audit.clone(),
        record: Some(record),
        keep,
        started: Instant::now(),
    })
}

impl Pending {
    /// Writes the record: `outcome`, and what is kept of `result`.
    pub fn finish<T: Serialize + ?Sized>(self, outcome: Outcome, result: Option<&T>) {
        self.finish_shaped(outcome, result, |_| None);
    }

    /// [`Self::finish`] for a result that can tell its own shape
    /// (`shape(bytes)`, as `audit::shape::result_shape` would read it from
    /// the result's JSON; `None` when it cannot): where the record keeps only
    /// the shape, the result is serialised once, to count its bytes, and not
    /// copied into a JSON value too.
    pub fn finish_shaped<T: Serialize + ?Sized>(
        mut self,
        outcome: Outcome,
        result: Option<&T>,
        shape: impl FnOnce(usize) -> Option<Value>,
    ) {
        let Some(mut record) = self.record.take() else {
            return;
        };
        if let Some(r) = result {
            let bytes = json_len(r);
            record.bytes_out = bytes as i64;
            let shaped = (self.keep.results.is_none() && bytes <= SHAPE_LIMIT)
                .then(|| shape(bytes))
                .flatten();
            record.result = Some(match shaped {
                Some(shaped) => shaped,
                None => match (self.keep.results.is_some() || bytes <= SHAPE_LIMIT)
                    .then(|| serde_json::to_value(r).ok())
                    .flatten()
                {
                    Some(v) => self.audit.result(self.keep, &v, bytes),
                    None => json!({"bytes": bytes}),
                },
            });
        }
        record.outcome = outcome.name().into();
        if let Outcome::ProtocolError { code, message } = &outcome {
            record.error = Some(format!("{code}: {message}"));
        }
        record.duration_us = self.started.elapsed().as_micros() as i64;
        self.audit.record(record);
    }

    /// Ends the record with an error of the call's own (a tool error told as
    /// text by a surface that has no typed result).
    pub fn fail(self, outcome: Outcome, message: &str) {
        let mut this = self;
        if let Some(r) = this.record.as_mut() {
            r.error = Some(message.chars().take(500).collect());
        }
        this.finish::<Value>(outcome, None);
    }
}

impl Drop for Pending {
    fn drop(&mut self) {
        // Dropped unfinished: the caller went away mid-call.
        if let Some(mut record) = self.record.take() {
            record.outcome = Outcome::Cancelled.name().into();
            record.duration_us = self.started.elapsed().as_micros() as i64;
            self.audit.record(record);
        }
    }
}

#[cfg(test)]
mod tests {
    use std::time::Duration;

    use super::*;
    use crate::config::{AuditConfig, Principal};
    use crate::pipeline::{Capability, Kind, Transport};
    use crate::store::{AuditFilter, Store};

    fn call<'a>(who: &'a Principal, args: &'a Value, entry: Entry) -> Call<'a> {
        Call {
            entry,
            principal: who,
            capability: Capability {
                kind: Kind::Tool,
                source: "github",
                name: "github__create_issue",
                annotations: None,
            },
            arguments: args,
            client: Some("claude"),
            client_version: Some("1.0"),
            endpoint: None,
            transport: Transport::Http,
        }
    }

    #[tokio::test(flavor = "current_thread")]
    async fn one_record_per_decision_and_call() {
        let store = Arc::new(Store::in_memory().unwrap());
        let log = AuditLog::start(
            &AuditConfig::default(),
            store.clone(),
            std::path::Path::new("."),
            None,
        );
        let who = Principal::with_groups("alice", vec!["support".into()]);
        let args = json!({"repo": "acme/tools", "title": "x"});
        let result = json!({"content": [{"type": "text", "text": "#42"}], "isError": false});

        let p = admitted(
            &log,
            &call(&who, &args, Entry::ToolsCall),
            vec!["p1".into()],
            None,
        )
        .unwrap();
        p.finish(Outcome::Ok, Some(&result));
        let p = admitted(
            &log,
            &call(&who, &args, Entry::WorkflowNode),
            vec![],
            Some(RunNode {
                run_id: "run-1",
                node_id: "n1",
            }),
        )
        .unwrap();
        drop(p); // the run was cancelled mid-call
        let mut refusal = Refusal::new(
            Stage::Authorize,
            "support may not create issues in acme/tools",
        );
        refusal.policy = Some("support-repos".into());
        refused(&log, &call(&who, &args, Entry::WfCall), &refusal, None);
        assert!(log.flush(Duration::from_secs(5)).await);

        let rows = store.audit(&AuditFilter::default()).await.unwrap();
        assert_eq!(rows.len(), 3);
        let ok = rows.iter().find(|r| r.outcome == "ok").unwrap();
        assert_eq!(
            (ok.decision.as_str(), ok.kind.as_str(), ok.policies.clone()),
            ("allow", "tool", vec!["p1".to_string()])
        );
        assert_eq!(ok.groups, ["support"]);
        assert_eq!(ok.client.as_deref(), Some("claude/1.0"));
        assert_eq!(
            ok.arguments,
            Some(json!({"repo": "string(10)", "title": "string(1)"}))
        );
        assert_eq!(ok.bytes_out, json_len(&result) as i64);
        assert_eq!(ok.result.as_ref().unwrap()["content"], json!(["text"]));
        let cancelled = rows.iter().find(|r| r.outcome == "cancelled").unwrap();
        assert_eq!(
            (
                cancelled.kind.as_str(),
                cancelled.run_id.as_deref(),
                cancelled.node_id.as_deref()
            ),
            ("node", Some("run-1"), Some("n1"))
        );
        let denied = rows.iter().find(|r| r.outcome == "denied").unwrap();
        assert_eq!(denied.decision, "deny");
        assert_eq!(denied.policies, ["support-repos"]);
        assert!(denied.error.as_deref().unwrap().contains("acme/tools"));
    }

    #[test]
    fn nothing_is_started_with_the_audit_off() {
        let who = Principal::local();
        let log = AuditLog::disabled();
        assert!(
            admitted(
                &log,
                &call(&who, &Value::Null, Entry::ToolsCall),
                vec![],
                None
            )
            .is_none()
        );
    }
}
