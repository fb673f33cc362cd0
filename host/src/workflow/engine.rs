//! The engine: runs a validated workflow in dependency order, independent
//! branches concurrently, nodes of one stateful source one at a time in the
//! graph's order, every node through the same source API the proxy uses, and
//! records every step in the store as it happens.

use std::collections::{BTreeMap, HashMap};
use std::sync::PoisonError;
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use serde::Serialize;
use serde_json::{Value, json};
use tokio::sync::watch;
use tokio_util::sync::CancellationToken;
use tracing::Instrument;
use wf_plugin_api::{CallScope, ErrorCode, STATE_LOST, SessionInfo, SourceRequest};

use super::catalog::{CapabilityEntry, PlannerCatalog};
use super::model::{SessionMode, Workflow};
use super::validate::{self, Problem, validate};
use crate::sources::sessions::{SessionCaller, SessionUse, current_caller};
use crate::sources::{CallCtx, SourceHandle, Sources};
use crate::store::{NodeRecord, NodeStatus, RunRecord, Store, new_id, now_ms};
use scheduler::{RunEnd, Scheduler};

mod scheduler;

/// Where a run's workflow came from (recorded with the run).
#[derive(Debug, Clone, Serialize)]
#[serde(tag = "kind", rename_all = "snake_case")]
pub enum RunOrigin {
    Draft { id: String },
    Artifact { artifact: String },
    Deployment { name: String, artifact: String },
    File { path: String },
    Inline,
}

/// A node changed state (for live progress output).
#[derive(Debug, Clone, Serialize)]
pub struct NodeEvent {
    pub run_id: String,
    pub node_id: String,
    pub capability: String,
    pub status: NodeStatus,
    pub elapsed_ms: u64,
    pub error: Option<String>,
}

pub type OnEvent = Arc<dyn Fn(&NodeEvent) + Send + Sync>;

#[derive(Debug, thiserror::Error)]
pub enum StartError {
    #[error("the workflow has {} problem(s)", .0.len())]
    Invalid(Vec<Problem>),
    #[error("{0}")]
    BadInputs(String),
    #[error("{0}")]
    Store(#[from] crate::store::StoreError),
}

struct Control {
    cancel: CancellationToken,
    done: watch::Receiver<bool>,
}

/// What the engine needs of the running host: the sources whose nodes it
/// runs, and until when a run waits for their first discovery.
#[derive(Clone)]
pub struct NodeSources {
    pub sources: Arc<Sources>,
    /// Per-principal and per-client sessions a client's run uses.
    pub sessions: Arc<crate::sources::sessions::SessionTable>,
    pub ready_by: Instant,
    /// The call pipeline each node passes, as the run's principal.
    pub pipeline: Arc<crate::pipeline::Pipeline>,
}

impl NodeSources {
    /// The planner catalog once first discovery is done (or `ready_by`).
    pub async fn catalog(&self) -> PlannerCatalog {
        self.sources.wait_first_discovery(self.ready_by).await;
        PlannerCatalog::from_snapshot(&crate::catalog::Snapshot::take(&self.sources))
            .with_held(&self.sources)
    }

    /// A node's capability as the pipeline sees it, with its client name.
    pub fn node_capability(&self, entry: &CapabilityEntry) -> crate::pipeline::ToolFacts {
        self.pipeline.tool_facts(&entry.source, &entry.name)
    }

    /// The check at publish: every node's capability is one `principal`
    /// could be permitted to call; the first that is not, as an error.
    pub fn check_publish(
        &self,
        wf: &Workflow,
        catalog: &PlannerCatalog,
        principal: &crate::pipeline::Principal,
    ) -> Result<(), String> {
        for node in &wf.nodes {
            let Some(entry) = catalog.get(&node.uses) else {
                continue; // validation names unknown refs
            };
            let facts = self.node_capability(entry);
            let capability = crate::pipeline::Capability {
                kind: crate::pipeline::Kind::Tool,
                source: &entry.source,
                name: &facts.name,
                annotations: facts.annotations.as_ref(),
            };
            self.pipeline
                .check_publish(principal, &capability)
                .map_err(|r| format!("node {:?}: {r}", node.id))?;
        }
        Ok(())
    }

    /// The live handle of `source`.
    pub fn handle(&self, source: &str) -> Result<Arc<SourceHandle>, String> {
        self.sources
            .get(source)
            .and_then(|e| e.handle.clone())
            .ok_or_else(|| format!("source {source:?} is not available"))
    }
}

pub struct Engine {
    sources: NodeSources,
    pub store: Arc<Store>,
    runs: Mutex<HashMap<String, Control>>,
    /// Run and node state changes, for live listeners.
    pub events: super::events::RunEvents,
}

/// Checks the run's inputs against the workflow's input schema: required
/// fields and top-level types.
fn check_inputs(schema: &Value, inputs: &Value) -> Result<(), String> {
    let Some(obj) = inputs.as_object() else {
        return Err("inputs must be a JSON object".into());
    };
    for r in validate::required(schema) {
        if !obj.contains_key(r) {
            return Err(format!("missing required input {r:?}"));
        }
    }
    if let Some(props) = schema.get("properties").and_then(Value::as_object) {
        for (k, v) in obj {
            let Some(t) = props
                .get(k)
                .and_then(|p| p.get("type"))
                .and_then(Value::as_str)
            else {
                continue;
            };
            let ok = match t {
                "string" => v.is_string(),
                "integer" => v.is_i64() || v.is_u64(),
                "number" => v.is_number(),
                "boolean" => v.is_boolean(),
                "object" => v.is_object(),
                "array" => v.is_array(),
                "null" => v.is_null(),
                _ => true,
            };
            if !ok {
                return Err(format!("input {k:?} must be {t}, got {v}"));
            }
        }
    }
    Ok(())
}

impl Engine {
    pub fn new(sources: NodeSources, store: Arc<Store>) -> Arc<Self> {
        let stopped = store.stopped_runs();
        let engine = Arc::new(Self {
            sources,
            store,
            runs: Mutex::new(HashMap::new()),
            events: Default::default(),
        });
        // A run whose lease this replica lost is another's to end: stop it here.
        let weak = Arc::downgrade(&engine);
        let (Ok(rt), Some(mut stopped)) = (tokio::runtime::Handle::try_current(), stopped) else {
            return engine;
        };
        rt.spawn(async move {
            loop {
                match stopped.recv().await {
                    Ok(id) => match weak.upgrade() {
                        Some(engine) => {
                            engine.cancel(&id);
                        }
                        None => return,
                    },
                    Err(tokio::sync::broadcast::error::RecvError::Lagged(_)) => continue,
                    Err(_) => return,
                }
            }
        });
        engine
    }

    /// The planner catalog as discovered now.
    pub async fn catalog(&self) -> PlannerCatalog {
        self.sources.catalog().await
    }

    /// Validates and starts a run; returns its id at once.
    pub async fn start(
        self: &Arc<Self>,
        wf: Workflow,
        inputs: Value,
        origin: RunOrigin,
        principal: &str,
        on_event: Option<OnEvent>,
    ) -> Result<String, StartError> {
        let catalog = self.catalog().await;
        let problems = validate(&wf, &catalog);
        if !problems.is_empty() {
            return Err(StartError::Invalid(problems));
        }
        let inputs = if inputs.is_null() { json!({}) } else { inputs };
        check_inputs(&wf.inputs, &inputs).map_err(StartError::BadInputs)?;
        let run_id = new_id("run");
        let origin = serde_json::to_value(&origin).unwrap_or(Value::Null);
        let name = if wf.name.is_empty() {
            "workflow".to_string()
        } else {
            wf.name.clone()
        };
        self.store
            .create_run(&run_id, &name, &origin, &inputs, principal)
            .await?;
        self.events.run_started(&run_id, &wf);
        let cancel = CancellationToken::new();
        let (done_tx, done_rx) = watch::channel(false);
        self.runs
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .insert(
                run_id.clone(),
                Control {
                    cancel: cancel.clone(),
                    done: done_rx,
                },
            );
        let this = self.clone();
        let id = run_id.clone();
        let caller = current_caller();
        // The run's nodes are authorized as the principal who started it
        // (with its groups, when the caller set it).
        let who = crate::pipeline::current_principal()
            .filter(|p| p.name() == principal)
            .unwrap_or_else(|| crate::pipeline::Principal::named(principal));
        tokio::spawn(async move {
            let log = NodeLog::start(this.store.clone(), id.clone());
            let run = Run {
                engine: this.clone(),
                log,
                id: id.clone(),
                wf,
                inputs,
                catalog,
                cancel,
                on_event,
                caller,
                principal: who,
                held: Mutex::default(),
            };
            run.execute().await;
            let _ = done_tx.send(true);
            this.runs
                .lock()
                .unwrap_or_else(PoisonError::into_inner)
                .remove(&id);
        });
        Ok(run_id)
    }

    /// Waits for a run to end (or `timeout`), then returns its record.
    pub async fn wait(
        &self,
        run_id: &str,
        timeout: Duration,
    ) -> Result<(RunRecord, Vec<NodeRecord>), crate::store::StoreError> {
        let done = self
            .runs
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .get(run_id)
            .map(|c| c.done.clone());
        match done {
            Some(mut done) => {
                let _ = tokio::time::timeout(timeout, done.wait_for(|d| *d)).await;
            }
            // Another replica's run (its lease is held elsewhere): its end
            // shows in the store.
            None if self.store.lease_holder(run_id).await?.is_some() => {
                let until = tokio::time::Instant::now() + timeout;
                while tokio::time::Instant::now() < until
                    && self.store.lease_holder(run_id).await?.is_some()
                {
                    tokio::time::sleep(Duration::from_millis(100)).await;
                }
            }
            None => {}
        }
        self.store.run(run_id).await
    }

    /// Cancels a running run, here or, through the store, on the replica
    /// that executes it; false when it runs nowhere.
    pub async fn cancel_anywhere(&self, run_id: &str) -> Result<bool, crate::store::StoreError> {
        if self.cancel(run_id) {
            return Ok(true);
        }
        self.store.request_cancel(run_id).await
    }

    /// Cancels a running run; false when it is not running here.
    pub fn cancel(&self, run_id: &str) -> bool {
        match self
            .runs
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .get(run_id)
        {
            Some(c) => {
                c.cancel.cancel();
                true
            }
            None => false,
        }
    }
}

/// Writes a run's node records in the background, each batch (whatever piled
/// up while the last one was written) in one transaction, so the store's
/// latency stays off the scheduling path.
struct NodeLog {
    tx: tokio::sync::mpsc::UnboundedSender<NodeRecord>,
    writer: tokio::task::JoinHandle<()>,
}

/// How long a node's `running` record waits before it is written. A node that
/// ends sooner gets one row, its final record, instead of two: on a chain of
/// fast nodes that halves the writer's work, which would otherwise fall behind
/// the scheduler and hold the run's end (every record is written before the
/// run is marked finished). Slower nodes show as running in the store after
/// this long; live listeners (the console) get every change at once anyway.
const RUNNING_GRACE: Duration = Duration::from_millis(5);

/// The records of one writer round: what the store gets now, and the
/// `running` records still inside their grace period.
#[derive(Default)]
struct Pending {
    running: HashMap<String, (Instant, NodeRecord)>,
    batch: Vec<NodeRecord>,
}

impl Pending {
    fn add(&mut self, rec: NodeRecord, now: Instant) {
        if rec.status == NodeStatus::Running {
            self.running.insert(rec.node_id.clone(), (now, rec));
        } else {
            // Its running record, unwritten, is superseded.
            self.running.remove(&rec.node_id);
            self.batch.push(rec);
        }
    }

    /// When the oldest unwritten `running` record is due.
    fn due(&self) -> Option<Instant> {
        self.running.values().map(|(t, _)| *t + RUNNING_GRACE).min()
    }

    /// This round's records: the finished ones and the `running` ones due by
    /// `now` (all of them once the run is over), one per node, the latest.
    fn take(&mut self, now: Instant, all: bool) -> Vec<NodeRecord> {
        let batch = &mut self.batch;
        self.running.retain(|_, (t, rec)| {
            let due = all || *t + RUNNING_GRACE <= now;
            if due {
                batch.push(std::mem::take(rec));
            }
            !due
        });
        let mut seen = std::collections::HashSet::new();
        let mut last: Vec<NodeRecord> = self
            .batch
            .drain(..)
            .rev()
            .filter(|r| seen.insert(r.node_id.clone()))
            .collect();
        last.reverse();
        last
    }
}

impl NodeLog {
    fn start(store: Arc<Store>, run_id: String) -> Self {
        let (tx, mut rx) = tokio::sync::mpsc::unbounded_channel::<NodeRecord>();
        let writer = tokio::spawn(async move {
            let mut pending = Pending::default();
            let mut incoming = Vec::new();
            let mut lost = false;
            loop {
                let due = pending.due();
                let running_due = async move {
                    match due {
                        Some(t) => tokio::time::sleep_until(t.into()).await,
                        None => std::future::pending().await,
                    }
                };
                // Closed (0 records): the run is over; write everything left.
                let open = tokio::select! {
                    n = rx.recv_many(&mut incoming, 512) => n > 0,
                    () = running_due => true,
                };
                let now = Instant::now();
                for rec in incoming.drain(..) {
                    pending.add(rec, now);
                }
                while let Ok(rec) = rx.try_recv() {
                    pending.add(rec, now);
                }
                let batch = pending.take(now, !open);
                if !batch.is_empty() && !lost {
                    lost = !Self::write(&store, &run_id, batch).await;
                }
                if !open {
                    break;
                }
            }
        });
        Self { tx, writer }
    }

    /// Writes one batch in one transaction, retried until the store takes
    /// it or says this replica lost the run (then the run is stopped here and
    /// nothing more is written for it). Whether the run is still this
    /// replica's.
    async fn write(store: &Arc<Store>, run_id: &str, batch: Vec<NodeRecord>) -> bool {
        // The store commits a batch off the runtime's workers (SQLite) or
        // over the network (PostgreSQL): the run's scheduler never waits.
        match with_retries(store, run_id, "record nodes", || {
            store.put_nodes(run_id, &batch)
        })
        .await
        {
            Ok(()) => true,
            Err(_) => {
                store.lost_run(run_id);
                false
            }
        }
    }

    fn save(&self, rec: NodeRecord) {
        let _ = self.tx.send(rec);
    }

    /// Waits until everything sent is written.
    async fn close(self) {
        drop(self.tx);
        let _ = self.writer.await;
    }
}

struct Run {
    engine: Arc<Engine>,
    log: NodeLog,
    id: String,
    wf: Workflow,
    inputs: Value,
    catalog: PlannerCatalog,
    cancel: CancellationToken,
    on_event: Option<OnEvent>,
    /// The client that started the run: where a source gives each client (or
    /// principal) its own session, the run's "shared" nodes use that one.
    caller: Option<SessionCaller>,
    /// Who started the run: each node is authorized as them.
    principal: crate::pipeline::Principal,
    /// Those sessions, held (never reaped as idle) until the run ends.
    held: Mutex<Vec<SessionUse>>,
}

struct NodeOutcome {
    index: usize,
    result: Result<Value, NodeError>,
    attempts: u32,
}

/// Why a node did not succeed: its message and, where there is one, the
/// [`ErrorCode`] the run record keeps (a source's own code; `timeout` or
/// `cancelled` when the engine stopped the call).
#[derive(Debug, Clone)]
struct NodeError {
    message: String,
    code: Option<ErrorCode>,
}

impl NodeError {
    fn new(code: ErrorCode, message: impl Into<String>) -> Self {
        Self {
            message: message.into(),
            code: Some(code),
        }
    }
    /// A reason the host found itself, with no code (a skip, a bad reference).
    fn uncoded(message: impl Into<String>) -> Self {
        Self {
            message: message.into(),
            code: None,
        }
    }
}

impl From<crate::sources::SourceError> for NodeError {
    fn from(e: crate::sources::SourceError) -> Self {
        Self::new(e.code(), e.to_string())
    }
}

impl Run {
    fn emit(&self, node: usize, status: NodeStatus, started: Instant, error: Option<String>) {
        if let Some(f) = &self.on_event {
            let n = &self.wf.nodes[node];
            f(&NodeEvent {
                run_id: self.id.clone(),
                node_id: n.id.clone(),
                capability: n.uses.clone(),
                status,
                elapsed_ms: started.elapsed().as_millis() as u64,
                error,
            });
        }
    }

    /// Saves a node's record (written in the background, batched).
    fn save(&self, rec: &NodeRecord) {
        self.engine.events.node(&self.id, rec);
        self.log.save(rec.clone());
    }

    /// Marks a node finished with `status` and saves it. Its record is not
    /// needed after: it moves to the writer (no copy of args and output).
    fn finish(
        &self,
        rec: &mut NodeRecord,
        status: NodeStatus,
        output: Option<Value>,
        error: Option<NodeError>,
    ) {
        rec.status = status;
        rec.output = output;
        rec.error_code = error.as_ref().and_then(|e| e.code);
        rec.error = error.map(|e| e.message);
        rec.finished_at = Some(now_ms());
        let ms = rec
            .started_at
            .zip(rec.finished_at)
            .map_or(0, |(s, f)| f - s);
        crate::telemetry::metrics::node_finished(&rec.capability, status.as_str(), ms);
        self.engine.events.node(&self.id, rec);
        self.log.save(std::mem::take(rec));
    }

    fn entry(&self, i: usize) -> &CapabilityEntry {
        self.catalog.get(&self.wf.nodes[i].uses).expect("validated")
    }

    fn handle(&self, source: &str) -> Result<Arc<SourceHandle>, String> {
        self.engine.sources.handle(source)
    }

    /// The call pipeline for one node, as the run's principal: the refusal
    /// (naming the rule or policy) fails the node.
    fn admit(
        &self,
        entry: &CapabilityEntry,
        node_id: &str,
        args: &Value,
    ) -> Result<Option<crate::pipeline::record::Pending>, String> {
        let sources = &self.engine.sources;
        let facts = sources.node_capability(entry);
        let call = crate::pipeline::Call {
            entry: crate::pipeline::Entry::WorkflowNode,
            principal: &self.principal,
            capability: crate::pipeline::Capability {
                kind: crate::pipeline::Kind::Tool,
                source: &entry.source,
                name: &facts.name,
                annotations: facts.annotations.as_ref(),
            },
            arguments: args,
            client: None,
            client_version: None,
            endpoint: None,
            transport: crate::pipeline::Transport::Internal,
        };
        let node = crate::pipeline::record::RunNode {
            run_id: &self.id,
            node_id,
        };
        // The node's slots are not held past admission: a run's own bounds
        // limit its nodes.
        let admission = sources
            .pipeline
            .admit_at(&call, Some(node))
            .map_err(|r| r.message)?;
        Ok(sources.pipeline.record(&call, &admission, Some(node)))
    }

    /// Opens the session each used source's calls run on: a run-scoped lease
    /// where the workflow asks for one, else the shared persistent session
    /// (for sources with stateful nodes), remembering its epoch.
    async fn open_sessions(
        &self,
    ) -> Result<
        (
            BTreeMap<String, CallScope>,
            Vec<(Arc<SourceHandle>, String)>,
        ),
        String,
    > {
        let mut used: BTreeMap<&str, bool> = BTreeMap::new();
        for i in 0..self.wf.nodes.len() {
            let e = self.entry(i);
            *used.entry(e.source.as_str()).or_default() |= e.spec.stateful;
        }
        let mut scopes = BTreeMap::new();
        let mut leases = Vec::new();
        for (source, stateful) in used {
            let mode = self
                .wf
                .sessions
                .get(source)
                .copied()
                .unwrap_or(SessionMode::Shared);
            if mode == SessionMode::Shared
                && let Some(scope) = self.callers_session(source).await?
            {
                scopes.insert(source.to_string(), scope);
                continue;
            }
            if mode == SessionMode::Shared && !stateful {
                continue;
            }
            let handle = self.handle(source)?;
            let req = if mode == SessionMode::Run {
                SourceRequest::OpenLease
            } else {
                SourceRequest::OpenSession { lease: None }
            };
            match handle.request::<SessionInfo>(&req, CallCtx::new()).await {
                Ok(info) => {
                    if let Some(lease) = &info.lease {
                        leases.push((handle.clone(), lease.clone()));
                    }
                    scopes.insert(
                        source.to_string(),
                        CallScope {
                            lease: info.lease,
                            expect_epoch: Some(info.epoch),
                        },
                    );
                }
                // Sources without sessions (e.g. wf.std) need no scope.
                Err(e) if e.code() == ErrorCode::Unsupported => {}
                Err(e) => {
                    // Leases opened so far would outlive the failed run.
                    for (handle, lease) in leases {
                        let _ = handle
                            .request::<Value>(&SourceRequest::CloseLease { lease }, CallCtx::new())
                            .await;
                    }
                    return Err(format!("cannot open a session: {e}"));
                }
            }
        }
        Ok((scopes, leases))
    }

    /// The scope of the run's caller's own session on `source`, when the
    /// source gives each client or principal its own.
    async fn callers_session(&self, source: &str) -> Result<Option<CallScope>, String> {
        let Some(caller) = &self.caller else {
            return Ok(None);
        };
        let handle = self.handle(source)?;
        let sessions = &self.engine.sources.sessions;
        let Some(session) = sessions
            .session_for(caller, &handle)
            .await
            .map_err(|e| e.to_string())?
        else {
            return Ok(None);
        };
        let req = SourceRequest::OpenSession {
            lease: Some(session.lease().to_string()),
        };
        let info: SessionInfo = handle
            .request(&req, CallCtx::new())
            .await
            .map_err(|e| format!("cannot open a session: {e}"))?;
        let scope = CallScope {
            lease: info.lease,
            expect_epoch: Some(info.epoch),
        };
        self.held
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .push(session);
        Ok(Some(scope))
    }

    async fn execute(self) {
        let started = Instant::now();
        let end = match self.open_sessions().await {
            Err(e) => RunEnd::Failed(e),
            Ok((scopes, leases)) => {
                let _ = self
                    .engine
                    .store
                    .set_run_sessions(&self.id, &serde_json::to_value(&scopes).unwrap_or_default())
                    .await;
                let end = Scheduler::new(&self, &scopes).run().await;
                for (handle, lease) in leases {
                    let _ = handle
                        .request::<Value>(&SourceRequest::CloseLease { lease }, CallCtx::new())
                        .await;
                }
                end
            }
        };
        let (status, outputs, error) = end.into_record();
        let Run {
            engine, id, log, ..
        } = self;
        // Every node record is written before the run is marked finished.
        log.close().await;
        let store = &engine.store;
        let _ = with_retries(store, &id, "record the run's end", || {
            store.finish_run(&id, status, outputs.as_ref(), error.as_deref())
        })
        .await;
        crate::telemetry::metrics::run_finished(status.as_str());
        engine.events.run_finished(&id, status, error.as_deref());
        tracing::info!(run = %id, %status, ms = started.elapsed().as_millis() as u64, "run finished");
    }
}

/// Runs a write for `run_id` until the store takes it, with back-off (up to
/// one heartbeat, so a write lands within a lease period of the database's
/// return). Gives up only when the store says this replica lost the run's
/// lease: then another replica has ended it, and this one writes nothing more.
async fn with_retries<F, Fut>(
    store: &Store,
    run_id: &str,
    what: &str,
    mut write: F,
) -> Result<(), crate::store::StoreError>
where
    F: FnMut() -> Fut,
    Fut: std::future::Future<Output = Result<(), crate::store::StoreError>>,
{
    let most = store.lease_times().heartbeat;
    let mut wait = Duration::from_millis(50).min(most);
    let mut failures = 0u32;
    loop {
        match write().await {
            Ok(()) => {
                if failures > 0 {
                    tracing::info!(run = %run_id, failures, "the store answers again: could {what}");
                }
                return Ok(());
            }
            Err(e @ crate::store::StoreError::LeaseLost(_)) => {
                tracing::warn!(run = %run_id, "cannot {what}: {e}; stopping the run here");
                return Err(e);
            }
            Err(e) => {
                if failures == 0 {
                    tracing::error!(run = %run_id, "cannot {what}: {e}; retrying until the store answers");
                } else {
                    tracing::debug!(run = %run_id, failures, "cannot {what} yet: {e}");
                }
                failures += 1;
                tokio::time::sleep(wait).await;
                wait = (wait * 2).min(most);
            }
        }
    }
}

/// Why a node's source cannot ask for input: runs have no human in the loop.
pub(super) fn no_one_to_ask(node: &str) -> String {
    format!("workflow node {node:?} asked for input; workflow runs have no client to ask")
}

/// Where a node's attempts open their trace spans: only while traces are on.
pub(super) struct AttemptTraces {
    pub engine: Arc<Engine>,
    pub run_id: String,
    pub node_id: String,
}

impl AttemptTraces {
    fn span(this: &Option<Self>, attempt: u32) -> tracing::Span {
        match this {
            Some(t) => t.engine.events.attempt_span(&t.run_id, &t.node_id, attempt),
            None => tracing::Span::none(),
        }
    }
}

/// Runs one node: its call on the right session, with timeout and retries. A
/// lost session is never retried: the state the workflow built is gone.
#[allow(clippy::too_many_arguments)]
async fn run_node(
    index: usize,
    handle: Arc<SourceHandle>,
    name: String,
    mut args: Value,
    scope: CallScope,
    timeout: Option<Duration>,
    retry: Option<super::model::Retry>,
    no_one_to_ask: String,
    traces: Option<AttemptTraces>,
) -> NodeOutcome {
    let attempts = retry.as_ref().map(|r| r.attempts.max(1)).unwrap_or(1);
    let backoff = Duration::from_millis(retry.as_ref().map(|r| r.backoff_ms).unwrap_or(0));
    let mut last = NodeError::uncoded("");
    for attempt in 1..=attempts {
        let ctx = CallCtx::new()
            .with_info(json!({"scope": scope}))
            .with_nobody_to_ask(no_one_to_ask.clone());
        let span = AttemptTraces::span(&traces, attempt);
        // The last attempt takes the arguments (one attempt: no copy).
        let input = if attempt == attempts {
            std::mem::take(&mut args)
        } else {
            args.clone()
        };
        let call = handle.run_node(&name, input, ctx).instrument(span.clone());
        let result: Result<Value, NodeError> = match timeout {
            Some(t) => match tokio::time::timeout(t, call).await {
                Ok(r) => r.map_err(NodeError::from),
                Err(_) => Err(NodeError::new(
                    ErrorCode::Timeout,
                    format!(
                        "source {:?}: no result within {} ms",
                        handle.name,
                        t.as_millis()
                    ),
                )),
            },
            None => call.await.map_err(NodeError::from),
        };
        if let Err(e) = &result {
            crate::telemetry::traces::attempt_failed(&span, &e.message);
        }
        drop(span);
        match result {
            Ok(v) => {
                return NodeOutcome {
                    index,
                    result: Ok(v),
                    attempts: attempt,
                };
            }
            Err(error) => {
                // A 1.0/1.1 plugin's `upstream` + STATE_LOST answer arrives
                // here already read as `state_lost` (PluginError::from_json).
                let lost = error.code == Some(ErrorCode::StateLost);
                last = if lost {
                    NodeError::new(
                        ErrorCode::StateLost,
                        format!("{STATE_LOST} (source {:?})", handle.name),
                    )
                } else {
                    error
                };
                if lost || attempt == attempts {
                    return NodeOutcome {
                        index,
                        result: Err(last),
                        attempts: attempt,
                    };
                }
                tokio::time::sleep(backoff).await;
            }
        }
    }
    NodeOutcome {
        index,
        result: Err(last),
        attempts,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn rec(node: &str, status: NodeStatus) -> NodeRecord {
        NodeRecord {
            node_id: node.into(),
            status,
            ..Default::default()
        }
    }

    fn written(batch: &[NodeRecord]) -> Vec<(String, NodeStatus)> {
        batch
            .iter()
            .map(|r| (r.node_id.clone(), r.status))
            .collect()
    }

    #[test]
    fn a_node_that_ends_within_the_grace_period_is_one_row() {
        let t = Instant::now();
        let mut p = Pending::default();
        p.add(rec("a", NodeStatus::Running), t);
        p.add(rec("a", NodeStatus::Succeeded), t);
        assert_eq!(
            written(&p.take(t, false)),
            [("a".into(), NodeStatus::Succeeded)]
        );
        assert!(p.running.is_empty() && p.due().is_none());
    }

    #[test]
    fn a_running_record_is_written_once_due_and_at_the_end() {
        let t = Instant::now();
        let mut p = Pending::default();
        p.add(rec("slow", NodeStatus::Running), t);
        assert_eq!(p.due(), Some(t + RUNNING_GRACE));
        // Not yet due: nothing to write.
        assert!(p.take(t + RUNNING_GRACE / 2, false).is_empty());
        // Due: written as running, and no longer pending.
        let later = t + RUNNING_GRACE;
        assert_eq!(
            written(&p.take(later, false)),
            [("slow".into(), NodeStatus::Running)]
        );
        assert!(p.due().is_none());
        // The run's end writes every running record left, due or not.
        p.add(rec("b", NodeStatus::Running), later);
        p.add(rec("c", NodeStatus::Failed), later);
        let mut end = written(&p.take(later, true));
        end.sort_by(|x, y| x.0.cmp(&y.0));
        assert_eq!(
            end,
            [
                ("b".into(), NodeStatus::Running),
                ("c".into(), NodeStatus::Failed)
            ]
        );
    }

    #[test]
    fn a_batch_keeps_the_latest_record_of_each_node() {
        let t = Instant::now();
        let mut p = Pending::default();
        p.add(rec("a", NodeStatus::Failed), t);
        p.add(rec("b", NodeStatus::Succeeded), t);
        p.add(rec("a", NodeStatus::Cancelled), t);
        assert_eq!(
            written(&p.take(t, false)),
            [
                ("b".into(), NodeStatus::Succeeded),
                ("a".into(), NodeStatus::Cancelled)
            ]
        );
    }
}
