//! The one call pipeline: every use of a capability — a proxied
//! `tools/call`, `wf_call`, `resources/read`, `prompts/get`, a completion,
//! a subscription, a workflow node, the planner's `call_capability`, a
//! console action — is admitted by [`Pipeline::admit`] before it is routed,
//! and every list (`tools/list`, `wf_find`, `wf_describe`, prompts and
//! resources) asks [`Pipeline::may_list`] so nothing is listed that every
//! call would refuse.
//!
//! The stages, in order, are [`STAGES`]. The caller has done `identify`
//! (the principal), `view` and `hold` (the capability it resolved) before it
//! calls `admit`; `admit` runs `authorize`, `limit` and `record`; the
//! caller then does `route` and `check`. A new concern is a new
//! [`Authorize`] (or, later, limit) registered here, never a special case
//! in a handler.
//!
//! With nothing registered, `admit` is a read lock, an empty loop and a
//! counter: no allocation on the call path.

mod json_len;
pub mod policy;
pub mod quota;
pub mod record;

use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, RwLock};

use serde_json::Value;

pub use crate::config::Principal;

/// A named stage of the pipeline.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum Stage {
    /// Principal and groups (token, OAuth claims, stdio's `local`).
    Identify,
    /// The endpoint's selection and transforms: the original capability.
    View,
    /// A pinned tool whose definition changed is refused.
    Hold,
    /// Tool lists and policies over (principal, action, capability, context).
    Authorize,
    /// Quotas, rates and in-flight bounds.
    Limit,
    /// Counts (and, later, the audit record) of what was decided.
    Record,
    /// The source call, sessions, tasks, input rounds.
    Route,
    /// The output against the listed schema.
    Check,
}

/// The stages in the order every call passes them.
pub const STAGES: [Stage; 8] = [
    Stage::Identify,
    Stage::View,
    Stage::Hold,
    Stage::Authorize,
    Stage::Limit,
    Stage::Record,
    Stage::Route,
    Stage::Check,
];

impl Stage {
    pub fn name(self) -> &'static str {
        match self {
            Stage::Identify => "identify",
            Stage::View => "view",
            Stage::Hold => "hold",
            Stage::Authorize => "authorize",
            Stage::Limit => "limit",
            Stage::Record => "record",
            Stage::Route => "route",
            Stage::Check => "check",
        }
    }
}

/// How a capability is being used: each way into a capability has its own
/// entry, counted apart (`wf_pipeline_calls`), so a test can prove each one
/// passes the pipeline.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum Entry {
    ToolsCall,
    WfCall,
    ResourcesRead,
    PromptsGet,
    Completion,
    Subscribe,
    WorkflowNode,
    /// A workflow's nodes checked when it is published (deployed).
    Publish,
    Planner,
    Console,
}

/// Every entry, in the order of its index (its counters' slot).
pub const ENTRIES: [Entry; 10] = [
    Entry::ToolsCall,
    Entry::WfCall,
    Entry::ResourcesRead,
    Entry::PromptsGet,
    Entry::Completion,
    Entry::Subscribe,
    Entry::WorkflowNode,
    Entry::Publish,
    Entry::Planner,
    Entry::Console,
];

impl Entry {
    pub fn name(self) -> &'static str {
        match self {
            Entry::ToolsCall => "tools_call",
            Entry::WfCall => "wf_call",
            Entry::ResourcesRead => "resources_read",
            Entry::PromptsGet => "prompts_get",
            Entry::Completion => "completion",
            Entry::Subscribe => "subscribe",
            Entry::WorkflowNode => "workflow_node",
            Entry::Publish => "publish",
            Entry::Planner => "planner",
            Entry::Console => "console",
        }
    }

    fn index(self) -> usize {
        self as usize
    }
}

/// What sort of capability a call uses.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum Kind {
    Tool,
    Prompt,
    Resource,
}

impl Kind {
    pub fn name(self) -> &'static str {
        match self {
            Kind::Tool => "tool",
            Kind::Prompt => "prompt",
            Kind::Resource => "resource",
        }
    }
}

/// How the call reached wf.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum Transport {
    Stdio,
    Http,
    /// Made by wf itself on someone's behalf (a workflow node, the console).
    Internal,
}

impl Transport {
    pub fn name(self) -> &'static str {
        match self {
            Transport::Stdio => "stdio",
            Transport::Http => "http",
            Transport::Internal => "internal",
        }
    }
}

/// The capability a call uses, as resolved by `view` and `hold`.
#[derive(Debug, Clone, Copy)]
pub struct Capability<'a> {
    pub kind: Kind,
    pub source: &'a str,
    /// The name clients know it by (`<source>__<name>`, or a resource's URI).
    pub name: &'a str,
    /// Its MCP annotations (`readOnlyHint`, `destructiveHint`…), if any.
    pub annotations: Option<&'a Value>,
}

/// One use of a capability, as the admitting stages see it.
#[derive(Debug, Clone, Copy)]
pub struct Call<'a> {
    pub entry: Entry,
    pub principal: &'a Principal,
    pub capability: Capability<'a>,
    /// The call's arguments (a JSON object; `Null` when it has none).
    pub arguments: &'a Value,
    /// The client's name, when it gave one.
    pub client: Option<&'a str>,
    /// The client's version, when it gave one (recorded; policies see the name).
    pub client_version: Option<&'a str>,
    pub transport: Transport,
    /// The endpoint (`[endpoints.NAME]`) it came through; `None` on `/mcp`.
    pub endpoint: Option<&'a str>,
}

/// Why a stage refused a call.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("{message}")]
pub struct Refusal {
    pub stage: Stage,
    pub message: String,
    /// The policy that decided, when one did.
    pub policy: Option<String>,
    /// When a limit frees, for `Retry-After`.
    pub retry_after: Option<std::time::Duration>,
}

impl Refusal {
    pub fn new(stage: Stage, message: impl Into<String>) -> Self {
        Self {
            stage,
            message: message.into(),
            policy: None,
            retry_after: None,
        }
    }
}

/// An `authorize` stage: decides a call, and whether some call to a
/// capability could be permitted (for lists).
pub trait Authorize: Send + Sync {
    /// `Ok` with the ids of the policies that permitted the call (empty for
    /// a stage without named policies), for its audit record.
    fn authorize(&self, call: &Call<'_>) -> Result<Vec<String>, Refusal>;
    /// Whether any call by `principal` to `capability` could be permitted,
    /// whatever its arguments and context.
    fn may_list(&self, principal: &Principal, capability: &Capability<'_>) -> bool;
}

/// What a tool known by its source's own name is to clients: the name they
/// call it by and its annotations (for workflow nodes and the planner, which
/// name capabilities by source and original name).
#[derive(Debug, Clone)]
pub struct ToolFacts {
    pub name: String,
    pub annotations: Option<Value>,
}

/// Finds a tool's [`ToolFacts`] by `(source, original name)`.
pub type Namer = Arc<dyn Fn(&str, &str) -> Option<ToolFacts> + Send + Sync>;

tokio::task_local! {
    static PRINCIPAL: Principal;
}

/// Runs `fut` as `principal`: what a run it starts, or a call it makes on
/// someone's behalf (`call_capability`), is authorized as.
pub async fn as_principal<F: std::future::Future>(principal: Principal, fut: F) -> F::Output {
    PRINCIPAL.scope(principal, fut).await
}

/// The principal [`as_principal`] set for this task, if any.
pub fn current_principal() -> Option<Principal> {
    PRINCIPAL.try_with(Principal::clone).ok()
}

/// An admitted call: what it holds while it runs (its concurrency slots)
/// and the policies that permitted it (for its record).
#[derive(Debug, Default)]
pub struct Admission {
    pub held: quota::Held,
    pub policies: Vec<String>,
}

/// The pipeline's configured stages and its counts.
#[derive(Default)]
pub struct Pipeline {
    /// `authorize` stages by name, in registration order.
    authorize: RwLock<Vec<(&'static str, Arc<dyn Authorize>)>>,
    namer: RwLock<Option<Namer>>,
    /// The `limit` stage's quotas (`[[quotas]]`).
    quotas: RwLock<Option<Arc<quota::Quotas>>>,
    /// The `record` stage's audit trail (off until [`Pipeline::set_audit`]).
    audit: RwLock<Option<Arc<crate::audit::AuditLog>>>,
    admitted: [AtomicU64; ENTRIES.len()],
    refused: [AtomicU64; ENTRIES.len()],
}

impl std::fmt::Debug for Pipeline {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        let names: Vec<&str> = self.read().iter().map(|(n, _)| *n).collect();
        f.debug_struct("Pipeline")
            .field("authorize", &names)
            .finish()
    }
}

impl Pipeline {
    fn read(&self) -> std::sync::RwLockReadGuard<'_, Vec<(&'static str, Arc<dyn Authorize>)>> {
        self.authorize
            .read()
            .unwrap_or_else(std::sync::PoisonError::into_inner)
    }

    /// Puts `stage` in the `authorize` stage under `name`, replacing one of
    /// that name (a reload), else after the others.
    pub fn set_authorizer(&self, name: &'static str, stage: Arc<dyn Authorize>) {
        let mut stages = self
            .authorize
            .write()
            .unwrap_or_else(std::sync::PoisonError::into_inner);
        match stages.iter_mut().find(|(n, _)| *n == name) {
            Some(slot) => slot.1 = stage,
            None => stages.push((name, stage)),
        }
    }

    /// Takes the stage `name` out (a reload that removed its config).
    pub fn remove_authorizer(&self, name: &str) {
        self.authorize
            .write()
            .unwrap_or_else(std::sync::PoisonError::into_inner)
            .retain(|(n, _)| *n != name);
    }

    /// Puts `[[quotas]]` in force (`None`: no limit stage). Budgets shared
    /// by replicas give back grants left idle for [`quota::GRANT_IDLE`].
    pub fn set_quotas(&self, quotas: Option<quota::Quotas>) {
        let quotas = quotas.filter(|q| !q.is_empty()).map(Arc::new);
        if let Some(q) = quotas.as_ref().filter(|q| q.shares()) {
            quota::return_idle_grants(Arc::downgrade(q));
        }
        *self
            .quotas
            .write()
            .unwrap_or_else(std::sync::PoisonError::into_inner) = quotas;
    }

    /// At shutdown: every unused grant of a shared budget goes back.
    pub async fn release_quotas(&self) {
        let quotas = self
            .quotas
            .read()
            .unwrap_or_else(std::sync::PoisonError::into_inner)
            .clone();
        if let Some(q) = quotas {
            q.give_back_idle(std::time::Duration::ZERO).await;
        }
    }

    /// The `limit` stage: what the call holds while it runs.
    fn limit(&self, call: &Call<'_>) -> Result<quota::Held, Refusal> {
        let quotas = self
            .quotas
            .read()
            .unwrap_or_else(std::sync::PoisonError::into_inner)
            .clone();
        match quotas {
            Some(q) => q.take(call),
            None => Ok(quota::Held::default()),
        }
    }

    /// The entry function every use of a capability calls after resolving
    /// it: runs `authorize`, `limit` and `record`; the first refusal wins.
    /// What it returns is held for the call's length (its concurrency slots).
    pub fn admit(&self, call: &Call<'_>) -> Result<Admission, Refusal> {
        self.admit_at(call, None)
    }

    /// [`Pipeline::admit`] for a workflow node: a refusal's record names
    /// the run and the node.
    pub fn admit_at(
        &self,
        call: &Call<'_>,
        node: Option<record::RunNode<'_>>,
    ) -> Result<Admission, Refusal> {
        let decided = self
            .read()
            .iter()
            .try_fold(Vec::new(), |mut permitted, (_, s)| -> Result<_, Refusal> {
                permitted.extend(s.authorize(call)?);
                Ok(permitted)
            })
            .and_then(|policies| {
                let held = self.limit(call)?;
                Ok(Admission { held, policies })
            });
        let counts = if decided.is_ok() {
            &self.admitted
        } else {
            &self.refused
        };
        counts[call.entry.index()].fetch_add(1, Ordering::Relaxed);
        crate::telemetry::metrics::pipeline_call(call.entry.name(), decided.is_ok());
        if let Err(r) = &decided {
            tracing::debug!(
                entry = call.entry.name(),
                principal = call.principal.name(),
                capability = call.capability.name,
                stage = r.stage.name(),
                policy = r.policy.as_deref().unwrap_or(""),
                "call refused: {}",
                r.message
            );
            // The record stage: a refusal is recorded where it is made.
            if let Some(audit) = self.audit() {
                record::refused(&audit, call, r, node);
            }
        }
        decided
    }

    /// Sets the audit trail the `record` stage writes to.
    pub fn set_audit(&self, audit: Arc<crate::audit::AuditLog>) {
        *self
            .audit
            .write()
            .unwrap_or_else(std::sync::PoisonError::into_inner) = Some(audit);
    }

    fn audit(&self) -> Option<Arc<crate::audit::AuditLog>> {
        self.audit
            .read()
            .unwrap_or_else(std::sync::PoisonError::into_inner)
            .clone()
            .filter(|a| a.enabled())
    }

    /// The `record` stage of an admitted call: its audit record, which the
    /// caller ends with the call's outcome ([`record::Pending::finish`];
    /// dropped unfinished, it is recorded `cancelled`). `None` with the
    /// audit off. A refusal needs no call here: [`Pipeline::admit`] records it.
    pub fn record(
        &self,
        call: &Call<'_>,
        admission: &Admission,
        node: Option<record::RunNode<'_>>,
    ) -> Option<record::Pending> {
        let audit = self.audit()?;
        record::admitted(&audit, call, admission.policies.clone(), node)
    }

    /// Whether `capability` is listed to `principal`: some call to it could
    /// be permitted by every `authorize` stage.
    pub fn may_list(&self, principal: &Principal, capability: &Capability<'_>) -> bool {
        self.read()
            .iter()
            .all(|(_, s)| s.may_list(principal, capability))
    }

    /// Sets how tools named by source and original name are found.
    pub fn set_namer(&self, namer: Namer) {
        *self
            .namer
            .write()
            .unwrap_or_else(std::sync::PoisonError::into_inner) = Some(namer);
    }

    /// The client name and annotations of `source`'s tool `original`; its
    /// default projected name when no namer knows it.
    pub fn tool_facts(&self, source: &str, original: &str) -> ToolFacts {
        let namer = self
            .namer
            .read()
            .unwrap_or_else(std::sync::PoisonError::into_inner)
            .clone();
        namer
            .and_then(|n| n(source, original))
            .unwrap_or_else(|| ToolFacts {
                name: format!("{}__{original}", source.replace('.', "_")),
                annotations: None,
            })
    }

    /// The check at publish: every capability a workflow uses must be one
    /// that some call by `principal` could be permitted (the arguments are
    /// known only at run time, where [`Pipeline::admit`] checks each node).
    pub fn check_publish(
        &self,
        principal: &Principal,
        capability: &Capability<'_>,
    ) -> Result<(), Refusal> {
        let ok = self.may_list(principal, capability);
        let counts = if ok { &self.admitted } else { &self.refused };
        counts[Entry::Publish.index()].fetch_add(1, Ordering::Relaxed);
        crate::telemetry::metrics::pipeline_call(Entry::Publish.name(), ok);
        if ok {
            return Ok(());
        }
        Err(Refusal::new(
            Stage::Authorize,
            format!(
                "{} {:?} can never be used by principal {:?} (tool lists or policies)",
                capability.kind.name(),
                capability.name,
                principal.name()
            ),
        ))
    }

    /// Calls admitted and refused through `entry` since start.
    pub fn counts(&self, entry: Entry) -> (u64, u64) {
        (
            self.admitted[entry.index()].load(Ordering::Relaxed),
            self.refused[entry.index()].load(Ordering::Relaxed),
        )
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    struct DenyNamed(&'static str);

    impl Authorize for DenyNamed {
        fn authorize(&self, call: &Call<'_>) -> Result<Vec<String>, Refusal> {
            if call.capability.name == self.0 {
                return Err(Refusal::new(Stage::Authorize, "no"));
            }
            Ok(Vec::new())
        }
        fn may_list(&self, _: &Principal, c: &Capability<'_>) -> bool {
            c.name != self.0
        }
    }

    fn call<'a>(p: &'a Principal, name: &'a str, entry: Entry) -> Call<'a> {
        Call {
            entry,
            principal: p,
            capability: Capability {
                kind: Kind::Tool,
                source: "s",
                name,
                annotations: None,
            },
            arguments: &Value::Null,
            client: None,
            client_version: None,
            transport: Transport::Stdio,
            endpoint: None,
        }
    }

    #[test]
    fn stages_are_in_the_documented_order() {
        let names: Vec<&str> = STAGES.iter().map(|s| s.name()).collect();
        assert_eq!(
            names,
            [
                "identify",
                "view",
                "hold",
                "authorize",
                "limit",
                "record",
                "route",
                "check"
            ]
        );
        for (i, e) in ENTRIES.iter().enumerate() {
            assert_eq!(e.index(), i);
        }
    }

    #[test]
    fn admits_without_stages_and_counts_per_entry() {
        let p = Pipeline::default();
        let who = Principal::local();
        assert!(p.admit(&call(&who, "s__a", Entry::WfCall)).is_ok());
        assert_eq!(p.counts(Entry::WfCall), (1, 0));
        assert_eq!(p.counts(Entry::ToolsCall), (0, 0));
    }

    #[test]
    fn a_registered_stage_refuses_and_hides_and_is_replaced_by_name() {
        let p = Pipeline::default();
        let who = Principal::local();
        p.set_authorizer("t", Arc::new(DenyNamed("s__a")));
        let refused = p.admit(&call(&who, "s__a", Entry::Console)).unwrap_err();
        assert_eq!(refused.stage, Stage::Authorize);
        assert_eq!(p.counts(Entry::Console), (0, 1));
        let cap = call(&who, "s__a", Entry::Console).capability;
        assert!(!p.may_list(&who, &cap));
        p.set_authorizer("t", Arc::new(DenyNamed("s__b")));
        assert!(p.admit(&call(&who, "s__a", Entry::Console)).is_ok());
        p.remove_authorizer("t");
        assert!(p.admit(&call(&who, "s__b", Entry::Console)).is_ok());
    }
}
