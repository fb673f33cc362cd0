//! wf's own long work as MCP Tasks (the `io.modelcontextprotocol/tasks`
//! extension, SEP-2663): a workflow run or a deployment's run started by a
//! client that declared the extension is answered with a task handle at once.
//! The task's status follows the run, its result is the run's reply, and
//! `tasks/cancel` cancels the run. Task ids are opaque and bound to the
//! principal that created the task: anyone else's `tasks/get` finds nothing.
//! Bounds: tasks per principal and a time-to-live (`[server]`).
//!
//! This module is the task table; beside it: `state` (a task's state as
//! `tasks/get` reads it), `upstream` (a source's own tasks, forwarded) and
//! `v2025` (the 2025-11-25 flavour of the same table).

pub(in crate::server::mcp) mod state;
pub(in crate::server::mcp) mod upstream;
pub(crate) mod v2025;

use std::collections::HashMap;
use std::sync::{Mutex, PoisonError};
use std::time::Duration;

use rmcp::ErrorData as McpError;
use rmcp::model::{
    CallToolResponse, CreateTaskResult, DetailedTask, GetTaskResult, JsonObject, MetaObject, Task,
    TaskPayload, TaskStatus,
};
use serde_json::{Value, json};

use crate::config::ServerConfig;
use crate::sources::SourceHandle;
use crate::store::RunStatus;
use crate::surfaces::planner::Planner;
use std::sync::{Arc, Weak};

/// The `_meta` key of a task's run id.
pub const RUN_ID_META: &str = "wf/runId";

/// How often a client should poll `tasks/get` (ms).
const POLL_INTERVAL_MS: u64 = 500;

/// One task: whose it is and the run behind it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct RunTask {
    pub principal: String,
    /// The run it follows; empty for a source's task.
    pub run_id: String,
    /// When it was created, ms since the epoch.
    pub created_ms: i64,
    /// A task a source serves instead of a run (`upstream`).
    pub upstream: Option<UpstreamTask>,
}

/// Why a task was not created.
#[derive(Debug, PartialEq, Eq)]
pub struct TooManyTasks(pub usize);

/// The tasks every client of this server created.
pub struct RunTasks {
    tasks: Mutex<HashMap<String, RunTask>>,
    max_per_principal: usize,
    ttl: Duration,
    /// Where the tasks are kept across restarts.
    store: Option<Arc<crate::store::Store>>,
    /// With several replicas: task ids carry this replica (handles.rs).
    seal: Option<crate::server::handles::Seal>,
}

impl RunTasks {
    pub fn for_config(server: &ServerConfig) -> Self {
        Self::new(
            server.max_tasks_per_principal,
            Duration::from_millis(server.task_ttl_ms),
        )
    }

    pub fn new(max_per_principal: usize, ttl: Duration) -> Self {
        Self {
            tasks: Mutex::default(),
            max_per_principal,
            ttl,
            store: None,
            seal: None,
        }
    }

    pub fn with_seal(mut self, seal: Option<crate::server::handles::Seal>) -> Self {
        self.seal = seal;
        self
    }

    /// The error for task `id` not held here: "held by replica X" when
    /// another replica sealed it, else "no task".
    pub(super) fn missing(&self, id: &str) -> McpError {
        use crate::server::handles::{Owner, wrong_replica};
        match self.seal.as_ref().map(|s| s.owner(id)) {
            Some(Owner::Elsewhere(owner)) => wrong_replica("task", &owner),
            _ => not_found(id),
        }
    }

    /// Keeps the tasks in `store`, and takes back those it kept before (a
    /// restart) that have not expired: a run's task as it was, a source's
    /// task as lost (its source restarted with wf).
    pub fn kept_in(mut self, store: Arc<crate::store::Store>) -> Self {
        let ttl = i64::try_from(self.ttl.as_millis()).unwrap_or(i64::MAX);
        let since = crate::clock::now_ms().saturating_sub(ttl);
        match store.blocking(store.run_tasks_since(since)) {
            Ok(rows) => {
                let tasks = self.tasks.get_mut().unwrap_or_else(PoisonError::into_inner);
                // With several replicas the table is shared: take back only
                // this replica's tasks (another's answer "held by replica X").
                let ours = |id: &str| match &self.seal {
                    Some(seal) => matches!(seal.owner(id), crate::server::handles::Owner::Here(_)),
                    None => true,
                };
                let rows: Vec<_> = rows.into_iter().filter(|r| ours(&r.id)).collect();
                for row in rows {
                    // A source's task: the source instance that held it is
                    // gone (no handle), so it reads failed, state lost.
                    let upstream = row.source.map(|(source, task_id)| UpstreamTask {
                        source,
                        task_id,
                        handle: Weak::new(),
                    });
                    let task = RunTask {
                        principal: row.owner,
                        run_id: row.run_id,
                        created_ms: row.created_ms,
                        upstream,
                    };
                    tasks.insert(row.id, task);
                }
            }
            Err(e) => tracing::warn!("cannot read the tasks kept before: {e}"),
        }
        self.store = Some(store);
        self
    }

    pub fn ttl(&self) -> Duration {
        self.ttl
    }

    fn live(&self, now_ms: i64) -> std::sync::MutexGuard<'_, HashMap<String, RunTask>> {
        let mut tasks = self.tasks.lock().unwrap_or_else(PoisonError::into_inner);
        let ttl = i64::try_from(self.ttl.as_millis()).unwrap_or(i64::MAX);
        tasks.retain(|_, t| now_ms.saturating_sub(t.created_ms) < ttl);
        tasks
    }

    /// A new task for `run_id`, owned by `principal`; its opaque id.
    pub fn create(
        &self,
        principal: &str,
        run_id: &str,
        now_ms: i64,
    ) -> Result<String, TooManyTasks> {
        self.insert(principal, run_id, None, now_ms)
    }

    /// A new task that a source serves, owned by `principal`; its opaque id
    /// (never the source's: two sources' ids cannot collide).
    pub fn create_upstream(
        &self,
        principal: &str,
        upstream: UpstreamTask,
        now_ms: i64,
    ) -> Result<String, TooManyTasks> {
        self.insert(principal, "", Some(upstream), now_ms)
    }

    fn insert(
        &self,
        principal: &str,
        run_id: &str,
        upstream: Option<UpstreamTask>,
        now_ms: i64,
    ) -> Result<String, TooManyTasks> {
        let mut tasks = self.live(now_ms);
        let held = tasks.values().filter(|t| t.principal == principal).count();
        if held >= self.max_per_principal {
            return Err(TooManyTasks(self.max_per_principal));
        }
        let id = format!("wft-{}", uuid::Uuid::new_v4().simple());
        let id = match &self.seal {
            Some(seal) => seal.issue(&id),
            None => id,
        };
        let row = crate::store::RunTaskRow {
            id: id.clone(),
            owner: principal.to_string(),
            run_id: run_id.to_string(),
            created_ms: now_ms,
            source: upstream
                .as_ref()
                .map(|u| (u.source.clone(), u.task_id.clone())),
        };
        tasks.insert(
            id.clone(),
            RunTask {
                principal: principal.to_string(),
                run_id: run_id.to_string(),
                created_ms: now_ms,
                upstream,
            },
        );
        // Saved with the table's lock released: a slow store must not hold
        // up every other task's lookup.
        drop(tasks);
        if let Some(store) = &self.store
            && let Err(e) = store.blocking(store.save_run_task(&row))
        {
            // The task still works; only a restart would lose it.
            tracing::warn!(task = %id, "cannot keep the task in the store: {e}");
        }
        Ok(id)
    }

    /// The runs that live tasks follow (for the console's run list).
    pub fn run_ids(&self, now_ms: i64) -> std::collections::HashSet<String> {
        self.live(now_ms)
            .values()
            .filter(|t| t.upstream.is_none())
            .map(|t| t.run_id.clone())
            .collect()
    }

    /// The live tasks sources serve (forwarded MCP Tasks), oldest first:
    /// wf's id and the task.
    pub fn source_tasks(&self, now_ms: i64) -> Vec<(String, RunTask)> {
        let mut found: Vec<(String, RunTask)> = self
            .live(now_ms)
            .iter()
            .filter(|(_, t)| t.upstream.is_some())
            .map(|(id, t)| (id.clone(), t.clone()))
            .collect();
        found.sort_by(|a, b| (a.1.created_ms, &a.0).cmp(&(b.1.created_ms, &b.0)));
        found
    }

    /// When a task created at `created_ms` is forgotten (ms since the epoch).
    pub fn expires_ms(&self, created_ms: i64) -> i64 {
        created_ms.saturating_add(i64::try_from(self.ttl.as_millis()).unwrap_or(i64::MAX))
    }

    /// The ids of `principal`'s live tasks, oldest first.
    pub fn ids_of(&self, principal: &str, now_ms: i64) -> Vec<String> {
        let tasks = self.live(now_ms);
        let mut mine: Vec<(&String, &RunTask)> = tasks
            .iter()
            .filter(|(_, t)| t.principal == principal)
            .collect();
        mine.sort_by(|a, b| (a.1.created_ms, a.0).cmp(&(b.1.created_ms, b.0)));
        mine.into_iter().map(|(id, _)| id.clone()).collect()
    }

    /// Whether `principal` holds as many tasks as it may.
    pub fn at_bound(&self, principal: &str, now_ms: i64) -> bool {
        self.live(now_ms)
            .values()
            .filter(|t| t.principal == principal)
            .count()
            >= self.max_per_principal
    }

    /// The task `id` if `principal` owns it and it has not expired.
    pub fn get(&self, principal: &str, id: &str, now_ms: i64) -> Option<RunTask> {
        self.live(now_ms)
            .get(id)
            .filter(|t| t.principal == principal)
            .cloned()
    }
}

/// An ISO 8601 UTC timestamp of `ms` since the epoch (days to civil date:
/// Howard Hinnant's algorithm).
pub(super) fn iso8601(ms: i64) -> String {
    let (secs, milli) = (ms.div_euclid(1000), ms.rem_euclid(1000));
    let (days, rem) = (secs.div_euclid(86_400), secs.rem_euclid(86_400));
    let z = days + 719_468;
    let era = z.div_euclid(146_097);
    let doe = z - era * 146_097;
    let yoe = (doe - doe / 1460 + doe / 36_524 - doe / 146_096) / 365;
    let doy = doe - (365 * yoe + yoe / 4 - yoe / 100);
    let mp = (5 * doy + 2) / 153;
    let d = doy - (153 * mp + 2) / 5 + 1;
    let m = if mp < 10 { mp + 3 } else { mp - 9 };
    let y = yoe + era * 400 + i64::from(m <= 2);
    format!(
        "{y:04}-{m:02}-{d:02}T{:02}:{:02}:{:02}.{milli:03}Z",
        rem / 3600,
        rem % 3600 / 60,
        rem % 60
    )
}

fn meta_of(run_id: &str) -> MetaObject {
    let mut m = MetaObject::new();
    m.0.insert(RUN_ID_META.into(), Value::String(run_id.to_string()));
    m
}

pub(super) fn not_found(id: &str) -> McpError {
    McpError::invalid_params(format!("no task {id:?}"), Some(json!({"taskId": id})))
}

impl RunTasks {
    pub(super) fn task(&self, id: &str, t: &RunTask, status: TaskStatus, now_ms: i64) -> Task {
        let ttl = u64::try_from(self.ttl.as_millis()).unwrap_or(u64::MAX);
        Task::new(id, status, iso8601(t.created_ms), iso8601(now_ms))
            .with_ttl_ms(ttl)
            .with_poll_interval_ms(POLL_INTERVAL_MS)
    }
}

/// Whom a task is bound to: its principal, and, for a client without
/// credentials over HTTP (every such client is the one `local` principal),
/// also its 2025-11-25 session, so that no other tokenless client gets,
/// cancels or lists it. An authenticated principal's tasks are its own
/// across sessions: a client that went away comes back (in a new session)
/// for the result. Principal names cannot hold `#`.
pub(super) fn owner(principal: &str, http_session: Option<&str>) -> String {
    match http_session {
        Some(session) if principal == crate::config::Principal::LOCAL => {
            format!("{principal}#session:{session}")
        }
        _ => principal.to_string(),
    }
}

/// Starts the run a call to `source`'s `name` asks for as a task: the task
/// handle at once, or the call's failure as a plain result. Beyond the
/// owner's bound, the call runs as a plain (waiting) call. The run is
/// `principal`'s; the task `owner`'s ([`owner`]).
pub async fn start(
    (tasks, planner): (&RunTasks, &Planner),
    source: &str,
    name: &str,
    args: Value,
    (principal, owner): (&str, &str),
) -> Option<Result<CallToolResponse, McpError>> {
    let now = crate::clock::now_ms();
    if tasks.at_bound(owner, now) {
        return None;
    }
    let run_id = match planner.start_run(source, name, args, principal).await {
        Ok(id) => id,
        Err(failed) => {
            return Some(
                crate::server::mcp::tool_result::to_mcp(failed).map(CallToolResponse::Complete),
            );
        }
    };
    let id = match tasks.create(owner, &run_id, now) {
        Ok(id) => id,
        // Lost a race for the last slot: the run goes on, untracked as a task.
        Err(TooManyTasks(n)) => {
            return Some(Err(McpError::internal_error(
                format!(
                    "too many tasks (server.max_tasks_per_principal = {n}); run {run_id} started anyway"
                ),
                Some(json!({"run_id": run_id})),
            )));
        }
    };
    let entry = tasks.get(owner, &id, now)?;
    let task = tasks.task(&id, &entry, TaskStatus::Working, now);
    tracing::info!(principal, task = %id, run = %run_id, "run started as a task");
    Some(Ok(CallToolResponse::Task(
        CreateTaskResult::new(task).with_meta(meta_of(&run_id)),
    )))
}

/// `tasks/get` of a task that follows a run: its status; with the run's
/// reply once it ended.
pub(super) fn get_run(
    tasks: &RunTasks,
    planner: &Planner,
    id: &str,
    t: &RunTask,
    now: i64,
) -> Result<GetTaskResult, McpError> {
    let (status, outcome) = planner.run_outcome(&t.run_id).map_err(|e| {
        McpError::internal_error(format!("cannot read run {}: {e}", t.run_id), None)
    })?;
    let payload = match (status, outcome) {
        (RunStatus::Cancelled, _) => TaskPayload::Cancelled,
        (_, Some(result)) => {
            let result = crate::server::mcp::tool_result::to_mcp(result)?;
            let result: JsonObject = match serde_json::to_value(result) {
                Ok(Value::Object(o)) => o,
                _ => {
                    return Err(McpError::internal_error(
                        "cannot encode the run's result",
                        None,
                    ));
                }
            };
            TaskPayload::Completed { result }
        }
        _ => TaskPayload::Working,
    };
    let task = tasks.task(id, t, payload.status(), now);
    let mut r = GetTaskResult::new(DetailedTask::new(task, payload));
    r.meta = Some(meta_of(&t.run_id));
    Ok(r)
}

/// `tasks/cancel`: cancels the task's run (its status follows on the next
/// `tasks/get`).
pub fn cancel(
    (tasks, planner): (&RunTasks, &Planner),
    principal: &str,
    id: &str,
) -> Result<(), McpError> {
    let t = tasks
        .get(principal, id, crate::clock::now_ms())
        .ok_or_else(|| tasks.missing(id))?;
    let running = planner.cancel_run(&t.run_id);
    tracing::info!(principal, task = %id, run = %t.run_id, running, "task cancelled");
    Ok(())
}

/// Where a forwarded task lives: the source, its id there, and the source
/// instance that started it.
#[derive(Clone)]
pub struct UpstreamTask {
    pub source: String,
    pub task_id: String,
    pub(super) handle: Weak<SourceHandle>,
}

impl std::fmt::Debug for UpstreamTask {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("UpstreamTask")
            .field("source", &self.source)
            .field("task_id", &self.task_id)
            .finish_non_exhaustive()
    }
}

impl PartialEq for UpstreamTask {
    fn eq(&self, other: &Self) -> bool {
        self.source == other.source
            && self.task_id == other.task_id
            && Weak::ptr_eq(&self.handle, &other.handle)
    }
}

impl Eq for UpstreamTask {}

impl UpstreamTask {
    /// The source instance that holds the task, unless it was replaced.
    pub(super) fn live(&self, current: Option<Arc<SourceHandle>>) -> Option<Arc<SourceHandle>> {
        let current = current?;
        let started = self.handle.upgrade()?;
        Arc::ptr_eq(&started, &current).then_some(current)
    }
}

#[cfg(test)]
mod tests {
    #[test]
    fn timestamps_are_iso_8601() {
        assert_eq!(super::iso8601(0), "1970-01-01T00:00:00.000Z");
        assert_eq!(
            super::iso8601(1_796_306_400_123),
            "2026-12-03T14:00:00.123Z"
        );
        assert_eq!(super::iso8601(951_782_400_000), "2000-02-29T00:00:00.000Z");
    }

    use super::*;

    #[test]
    fn tasks_are_bound_to_their_principal_bounded_and_expire() {
        let t = RunTasks::new(2, Duration::from_millis(1000));
        let a = t.create("alice", "run-1", 0).unwrap();
        assert_eq!(t.get("alice", &a, 10).unwrap().run_id, "run-1");
        // Another principal's guess (even the right id) finds nothing.
        assert_eq!(t.get("bob", &a, 10), None);
        t.create("alice", "run-2", 1).unwrap();
        assert_eq!(t.create("alice", "run-3", 1), Err(TooManyTasks(2)));
        // Bob's bound is his own.
        t.create("bob", "run-4", 0).unwrap();
        // A principal lists only its own, oldest first.
        assert_eq!(t.ids_of("bob", 10).len(), 1);
        assert_eq!(t.ids_of("alice", 10)[0], a);
        // After the TTL the task is gone, and its slot free.
        assert_eq!(t.get("alice", &a, 1000), None);
        t.create("alice", "run-5", 1001).unwrap();
    }

    #[test]
    fn a_tokenless_http_clients_tasks_are_its_sessions() {
        assert_eq!(owner("local", Some("s1")), "local#session:s1");
        assert_ne!(owner("local", Some("s1")), owner("local", Some("s2")));
        // Stdio, or a 2026-07-28 (sessionless) request: the principal.
        assert_eq!(owner("local", None), "local");
        // An authenticated principal's tasks are its own in every session.
        assert_eq!(owner("alice", Some("s1")), "alice");
    }

    #[test]
    fn run_tasks_outlive_a_restart_and_source_tasks_come_back_lost() {
        let store = Arc::new(crate::store::Store::in_memory().unwrap());
        let now = crate::clock::now_ms();
        let before = RunTasks::new(10, Duration::from_secs(60)).kept_in(store.clone());
        let a = before.create("alice", "run-1", now).unwrap();
        let up = UpstreamTask {
            source: "one".into(),
            task_id: "1".into(),
            handle: Weak::new(),
        };
        let b = before.create_upstream("alice", up, now).unwrap();
        let after = RunTasks::new(10, Duration::from_secs(60)).kept_in(store);
        assert_eq!(after.get("alice", &a, now).unwrap().run_id, "run-1");
        assert_eq!(after.get("bob", &a, now), None);
        let lost = after.get("alice", &b, now).unwrap().upstream.unwrap();
        assert_eq!((lost.source.as_str(), lost.task_id.as_str()), ("one", "1"));
        assert!(
            lost.handle.upgrade().is_none(),
            "no source instance holds it"
        );
        assert_eq!(after.get("bob", &b, now), None);
    }

    #[test]
    fn ids_are_opaque_and_unique() {
        let t = RunTasks::new(10, Duration::from_secs(60));
        let a = t.create("p", "run-1", 0).unwrap();
        let b = t.create("p", "run-1", 0).unwrap();
        assert_ne!(a, b);
        assert!(!a.contains("run-1"), "{a}");
    }
}
