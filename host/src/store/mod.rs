//! wf's state: drafts → artifacts (immutable, versioned, content-hashed)
//! → deployments (named, pinned) → runs and node records. In SQLite (one
//! machine, the default) or PostgreSQL (several replicas, `[store] url`):
//! every query is written once and runs on both (see [`db`]).

use std::path::Path;
use std::sync::{Arc, Mutex};
use std::time::{SystemTime, UNIX_EPOCH};

use rusqlite::Connection;
use serde::Serialize;
use serde_json::Value;
use sha2::{Digest, Sha256};
use wf_plugin_api::ErrorCode;

mod audit;
pub use audit::{AuditFilter, AuditRecord, MAX_QUERY_ROWS};
pub mod db;
mod events;
mod leases;
pub mod migrate;
pub mod pg;
mod quota_budgets;
pub use quota_budgets::{BudgetSpec, Grant};
mod run_tasks;
pub mod sql;
pub use run_tasks::RunTaskRow;
mod embeddings;
mod tls;
mod usage;

use db::{Db, Row, args};
pub use leases::LeaseTimes;

pub use crate::status::{NodeStatus, RunStatus};

#[derive(Debug, thiserror::Error)]
pub enum StoreError {
    #[error("database: {0}")]
    Db(#[from] rusqlite::Error),
    #[error("{0}")]
    NotFound(String),
    #[error("{0}")]
    Conflict(String),
    #[error("postgres: {message}")]
    Pg {
        message: String,
        /// The SQLSTATE, when the server sent one.
        code: Option<String>,
    },
    #[error("store: {0}")]
    Config(String),
    #[error("database: unreadable value: {0}")]
    Decode(String),
    #[error(
        "the database is at schema version {found}, newer than this wf knows ({known}); \
         upgrade wf, or point it at another database"
    )]
    TooNew { found: i64, known: i64 },
    /// This replica no longer holds the run's lease (it stalled past it, and
    /// another replica ended the run): nothing was written.
    #[error("this replica no longer holds run {0}'s lease: another replica ended it")]
    LeaseLost(String),
}

impl StoreError {
    /// A unique-key violation: another writer got there first.
    fn is_unique_violation(&self) -> bool {
        match self {
            StoreError::Pg { code, .. } => code.as_deref() == Some("23505"),
            StoreError::Db(rusqlite::Error::SqliteFailure(e, _)) => {
                e.extended_code == rusqlite::ffi::SQLITE_CONSTRAINT_PRIMARYKEY
                    || e.extended_code == rusqlite::ffi::SQLITE_CONSTRAINT_UNIQUE
            }
            _ => false,
        }
    }
}

pub type Result<T> = std::result::Result<T, StoreError>;

pub use crate::clock::now_ms;

/// A fresh id: time-ordered, unique within the process and across restarts.
pub fn new_id(prefix: &str) -> String {
    use std::sync::atomic::{AtomicU32, Ordering};
    static SEQ: AtomicU32 = AtomicU32::new(0);
    // The pid is read once: `std::process::id()` is a system call, and an
    // audit record takes an id on every call. (The plugin host forks only at
    // its start, before any id is taken.)
    static PID: std::sync::OnceLock<u32> = std::sync::OnceLock::new();
    let pid = *PID.get_or_init(std::process::id);
    let nanos = SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .map(|d| d.as_nanos())
        .unwrap_or(0);
    let seq = SEQ.fetch_add(1, Ordering::Relaxed);
    format!(
        "{prefix}-{:x}{:04x}{:04x}",
        nanos / 1000,
        pid & 0xffff,
        seq & 0xffff
    )
}

/// JSON with object keys sorted, so equal documents hash equally.
pub fn canonical_json(v: &Value) -> String {
    fn sort(v: &Value) -> Value {
        match v {
            Value::Object(m) => {
                let mut keys: Vec<&String> = m.keys().collect();
                keys.sort();
                Value::Object(keys.into_iter().map(|k| (k.clone(), sort(&m[k]))).collect())
            }
            Value::Array(a) => Value::Array(a.iter().map(sort).collect()),
            other => other.clone(),
        }
    }
    sort(v).to_string()
}

pub fn content_hash(v: &Value) -> String {
    let digest = Sha256::digest(canonical_json(v).as_bytes());
    digest.iter().map(|b| format!("{b:02x}")).collect()
}

#[derive(Debug, Clone, Serialize)]
pub struct Draft {
    pub id: String,
    pub name: String,
    pub document: Value,
    pub created_at: i64,
    pub updated_at: i64,
}

#[derive(Debug, Clone, Serialize)]
pub struct Artifact {
    pub name: String,
    pub version: i64,
    pub hash: String,
    pub document: Value,
    pub draft_id: Option<String>,
    pub created_at: i64,
}

impl Artifact {
    pub fn reference(&self) -> String {
        format!("{}@{}", self.name, self.version)
    }
}

#[derive(Debug, Clone, Serialize)]
pub struct Deployment {
    pub name: String,
    pub artifact_name: String,
    pub artifact_version: i64,
    pub created_at: i64,
    pub updated_at: i64,
}

#[derive(Debug, Clone, Serialize)]
pub struct RunRecord {
    pub id: String,
    pub workflow: String,
    pub origin: Value,
    pub status: RunStatus,
    pub inputs: Value,
    pub outputs: Option<Value>,
    pub error: Option<String>,
    pub sessions: Option<Value>,
    pub started_at: i64,
    pub finished_at: Option<i64>,
    /// Who started the run (a principal's name); `None` for runs recorded
    /// before wf kept it.
    pub principal: Option<String>,
}

#[derive(Debug, Clone, Default, Serialize)]
pub struct NodeRecord {
    pub node_id: String,
    pub capability: String,
    pub status: NodeStatus,
    pub args: Option<Value>,
    pub output: Option<Value>,
    pub error: Option<String>,
    /// The [`ErrorCode`] of a failed node's error: the source's own, or
    /// `timeout`/`cancelled` when the engine stopped the call.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub error_code: Option<ErrorCode>,
    pub attempts: i64,
    pub epoch: Option<i64>,
    pub started_at: Option<i64>,
    pub finished_at: Option<i64>,
}

pub struct Store {
    db: Db,
    /// This replica, as recorded with the runs it executes and their leases.
    host: String,
    leases: LeaseTimes,
    signals: Arc<Signals>,
}

/// What this replica's runs hear from outside the engine.
#[derive(Default)]
pub(crate) struct Signals {
    /// The runs this replica executes (created here, not yet finished).
    mine: Mutex<std::collections::HashSet<String>>,
    /// Runs of `mine` whose lease row is being written: a renewal that began
    /// before it committed does not return it, which is no loss.
    creating: Mutex<std::collections::HashSet<String>>,
    /// Runs this replica must stop: their lease was lost, or a cancel for
    /// them reached another replica.
    stop: Option<tokio::sync::broadcast::Sender<String>>,
    /// Shutting down: no new runs start here.
    draining: std::sync::atomic::AtomicBool,
    /// A replica (this one or another) changed the deployments.
    deployments: Option<tokio::sync::broadcast::Sender<()>>,
    /// A replica (named; empty: maybe missed) reloaded its config.
    reloads: Option<tokio::sync::broadcast::Sender<String>>,
    /// Since when this replica's heartbeats have reached the database
    /// without a failure (`None`: the last one failed, or none ran yet).
    reachable_since: Mutex<Option<std::time::Instant>>,
}

impl Signals {
    fn new() -> Arc<Self> {
        Arc::new(Self {
            mine: Mutex::default(),
            creating: Mutex::default(),
            stop: Some(tokio::sync::broadcast::channel(64).0),
            draining: Default::default(),
            deployments: Some(tokio::sync::broadcast::channel(16).0),
            reloads: Some(tokio::sync::broadcast::channel(16).0),
            reachable_since: Mutex::default(),
        })
    }

    pub(crate) fn mine(&self) -> std::sync::MutexGuard<'_, std::collections::HashSet<String>> {
        self.mine.lock().unwrap_or_else(|p| p.into_inner())
    }

    pub(crate) fn creating(&self) -> std::sync::MutexGuard<'_, std::collections::HashSet<String>> {
        self.creating.lock().unwrap_or_else(|p| p.into_inner())
    }

    /// Stops `run_id` if this replica executes it; whether it does.
    pub(crate) fn stop(&self, run_id: &str) -> bool {
        if !self.mine().contains(run_id) {
            return false;
        }
        if let Some(tx) = &self.stop {
            let _ = tx.send(run_id.to_string());
        }
        true
    }
}

/// This machine's name, for replica ids.
fn hostname() -> String {
    std::fs::read_to_string("/proc/sys/kernel/hostname")
        .or_else(|_| std::fs::read_to_string("/etc/hostname"))
        .map(|h| h.trim().to_string())
        .ok()
        .filter(|h| !h.is_empty() && !h.contains(':'))
        .unwrap_or_else(|| "localhost".into())
}

/// Identifies a process beyond its pid (which the OS reuses): `pid:start`,
/// where `start` is the process start time where the OS tells it.
fn process_identity(pid: u32) -> Option<String> {
    #[cfg(target_os = "linux")]
    {
        let stat = std::fs::read_to_string(format!("/proc/{pid}/stat")).ok()?;
        // Field 22 (starttime) counts from after the command's closing paren.
        let start = stat
            .rsplit_once(')')?
            .1
            .split_whitespace()
            .nth(19)?
            .to_string();
        Some(format!("{pid}:{start}"))
    }
    #[cfg(not(target_os = "linux"))]
    {
        Some(format!("{pid}:0"))
    }
}

/// The default replica id: `hostname:pid:start`, stable for the process.
pub fn default_replica_id() -> String {
    let me =
        process_identity(std::process::id()).unwrap_or_else(|| format!("{}:0", std::process::id()));
    format!("{}:{me}", hostname())
}

/// Whether the process that recorded `host` still runs: `pid:start` (as wf
/// recorded before replica ids) or `hostname:pid:start` on this machine. A
/// replica id of another form or machine is not judged here (its lease is).
fn host_alive(host: &str) -> Option<bool> {
    let parts: Vec<&str> = host.split(':').collect();
    let pid_start = match parts.as_slice() {
        [pid, start] => format!("{pid}:{start}"),
        [name, pid, start] if *name == hostname() => format!("{pid}:{start}"),
        _ => return None,
    };
    let pid = pid_start.split(':').next()?.parse::<u32>().ok()?;
    if cfg!(target_os = "linux") {
        Some(process_identity(pid).as_deref() == Some(pid_start.as_str()))
    } else {
        Some(false)
    }
}

fn json(text: Option<String>) -> Option<Value> {
    text.and_then(|t| serde_json::from_str(&t).ok())
}

/// A stored code; one this build does not know reads as `internal`, as on the wire.
fn error_code(text: &str) -> ErrorCode {
    serde_json::from_value(Value::String(text.to_string())).unwrap_or(ErrorCode::Internal)
}

fn status<T: std::str::FromStr>(text: String) -> Result<T>
where
    T::Err: std::fmt::Display,
{
    text.parse()
        .map_err(|e| StoreError::Decode(format!("status {text:?}: {e}")))
}

/// The upserts that record `nodes` of `run_id`.
fn node_statements(run_id: &str, nodes: &[NodeRecord]) -> Vec<db::Stmt> {
    nodes
        .iter()
        .map(|n| {
            (
                "INSERT INTO node_runs (run_id, node_id, capability, status, args, output, error, attempts, epoch, started_at, finished_at, error_code)
                 VALUES (?1, ?2, ?3, ?4, ?5, ?6, ?7, ?8, ?9, ?10, ?11, ?12)
                 ON CONFLICT (run_id, node_id) DO UPDATE SET capability = excluded.capability, status = excluded.status,
                   args = excluded.args, output = excluded.output, error = excluded.error, attempts = excluded.attempts,
                   epoch = excluded.epoch, started_at = excluded.started_at, finished_at = excluded.finished_at,
                   error_code = excluded.error_code",
                args![
                    run_id,
                    &n.node_id,
                    &n.capability,
                    n.status.as_str(),
                    n.args.as_ref().map(Value::to_string),
                    n.output.as_ref().map(Value::to_string),
                    n.error.clone(),
                    n.attempts,
                    n.epoch,
                    n.started_at,
                    n.finished_at,
                    n.error_code.map(ErrorCode::as_str),
                ],
            )
        })
        .collect()
}

/// A node record's upsert, written only where replica `?13` holds the run's
/// lease. PostgreSQL: the lease row is locked in the same statement (`FOR KEY
/// SHARE`: a reaper's `FOR UPDATE` waits for, or skips, it, while the
/// heartbeat's renewal does not), so a reaper claiming the run and this write
/// never interleave; the casts type the parameters of the `SELECT`.
const PUT_NODE_FENCED_PG: &str = "WITH fence AS (SELECT run_id FROM run_leases WHERE run_id = ?1 AND replica = ?13 FOR KEY SHARE)
     INSERT INTO node_runs (run_id, node_id, capability, status, args, output, error, attempts, epoch, started_at, finished_at, error_code)
     SELECT fence.run_id, CAST(?2 AS TEXT), CAST(?3 AS TEXT), CAST(?4 AS TEXT), CAST(?5 AS TEXT), CAST(?6 AS TEXT), CAST(?7 AS TEXT),
            CAST(?8 AS BIGINT), CAST(?9 AS BIGINT), CAST(?10 AS BIGINT), CAST(?11 AS BIGINT), CAST(?12 AS TEXT) FROM fence
     ON CONFLICT (run_id, node_id) DO UPDATE SET capability = excluded.capability, status = excluded.status,
       args = excluded.args, output = excluded.output, error = excluded.error, attempts = excluded.attempts,
       epoch = excluded.epoch, started_at = excluded.started_at, finished_at = excluded.finished_at,
       error_code = excluded.error_code";
/// The same on SQLite, where the one connection's transaction is the lock.
const PUT_NODE_FENCED_SQLITE: &str = "INSERT INTO node_runs (run_id, node_id, capability, status, args, output, error, attempts, epoch, started_at, finished_at, error_code)
     SELECT ?1, ?2, ?3, ?4, ?5, ?6, ?7, ?8, ?9, ?10, ?11, ?12
     WHERE EXISTS (SELECT 1 FROM run_leases WHERE run_id = ?1 AND replica = ?13)
     ON CONFLICT (run_id, node_id) DO UPDATE SET capability = excluded.capability, status = excluded.status,
       args = excluded.args, output = excluded.output, error = excluded.error, attempts = excluded.attempts,
       epoch = excluded.epoch, started_at = excluded.started_at, finished_at = excluded.finished_at,
       error_code = excluded.error_code";

const INTERRUPT_RUN: &str = "UPDATE runs SET status = 'interrupted', finished_at = ?2, error = ?3 WHERE id = ?1 AND status IN ('running', 'pending')";
const INTERRUPT_NODES: &str = "UPDATE node_runs SET status = 'interrupted', finished_at = ?2 WHERE run_id = ?1 AND status = 'running'";
const DROP_LEASE: &str = "DELETE FROM run_leases WHERE run_id = ?1";
/// The fence of every write a replica makes for a run it executes: it must
/// still hold the run's lease row (never recreated once dropped, so holding
/// it is the token). It locks the row until the commit, so a reaper claiming
/// the run (`FOR UPDATE SKIP LOCKED`) and a write never interleave.
const HOLD_LEASE: &str =
    "UPDATE run_leases SET expires_at = expires_at WHERE run_id = ?1 AND replica = ?2";

impl Store {
    /// Opens (creating) `wf.db` in `dir`.
    pub fn open(dir: &Path) -> Result<Self> {
        let conn = Connection::open(dir.join("wf.db"))?;
        Self::init(conn)
    }

    pub fn in_memory() -> Result<Self> {
        Self::init(Connection::open_in_memory()?)
    }

    fn init(conn: Connection) -> Result<Self> {
        // WAL: readers never block the writer, and a killed process loses no
        // committed transaction. NORMAL sync is durable across process death.
        conn.pragma_update(None, "journal_mode", "WAL")?;
        conn.pragma_update(None, "synchronous", "NORMAL")?;
        conn.pragma_update(None, "foreign_keys", "ON")?;
        conn.busy_timeout(db::BUSY_TIMEOUT)?;
        // Prepared once, kept: rusqlite's default of 16 is fewer than the
        // statements a busy host cycles through (the audit writer alone has
        // six, one per batch size).
        conn.set_prepared_statement_cache_capacity(64);
        let store = Self {
            db: Db::Sqlite(Arc::new(Mutex::new(conn))),
            host: default_replica_id(),
            leases: LeaseTimes::default(),
            signals: Signals::new(),
        };
        // SQLite's migrations never wait on anything: polled once, they finish.
        now(migrate::run(&store.db))?;
        Ok(store)
    }

    /// Connects to PostgreSQL (`postgres://…`) and migrates its schema.
    /// `schema`: a PostgreSQL schema of its own (created if missing).
    /// `ca_file`: more roots for `sslmode=require` (PEM).
    pub async fn connect(
        url: &str,
        max_connections: usize,
        schema: Option<&str>,
        ca_file: Option<&Path>,
    ) -> Result<Self> {
        let pool = pg::PgPool::connect(url, max_connections, schema, ca_file).await?;
        let store = Self {
            db: Db::Postgres(Box::new(pool)),
            host: default_replica_id(),
            leases: LeaseTimes::default(),
            signals: Signals::new(),
        };
        migrate::run(&store.db).await?;
        if let Db::Postgres(p) = &store.db {
            p.listen(store.signals.clone());
        }
        Ok(store)
    }

    /// This store's replica id (`--replica-id`) and lease times.
    pub fn with_replica(mut self, id: Option<&str>, leases: LeaseTimes) -> Self {
        if let Some(id) = id.filter(|i| !i.is_empty()) {
            self.host = id.to_string();
        }
        self.leases = leases;
        self
    }

    pub fn replica(&self) -> &str {
        &self.host
    }

    /// Stops new runs here (shutdown): `create_run` refuses, `/readyz` says 503.
    pub fn set_draining(&self) {
        self.signals
            .draining
            .store(true, std::sync::atomic::Ordering::Release);
    }

    pub fn is_draining(&self) -> bool {
        self.signals
            .draining
            .load(std::sync::atomic::Ordering::Acquire)
    }

    /// How many runs this replica executes now.
    pub fn running_here(&self) -> usize {
        self.mine_mut().len()
    }

    /// Whether the database answers.
    pub async fn ping(&self) -> Result<()> {
        self.db.query("SELECT 1", args![]).await.map(drop)
    }

    /// `sqlite` or `postgres`.
    pub fn backend(&self) -> &'static str {
        self.db.backend()
    }

    /// Where the state is, without secrets.
    pub fn location(&self) -> String {
        match &self.db {
            Db::Sqlite(_) => "sqlite".into(),
            Db::Postgres(p) => p.shown().to_string(),
        }
    }

    /// The migrations this database has had.
    pub async fn migrations(&self) -> Result<Vec<migrate::Applied>> {
        migrate::applied(&self.db).await
    }

    /// For a caller that cannot await (a lock held, a sync trait): SQLite
    /// answers at once; PostgreSQL's answer is waited for on this thread,
    /// which the multi-threaded runtime `wf` runs on allows.
    pub fn blocking<F: std::future::Future>(&self, fut: F) -> F::Output {
        match &self.db {
            Db::Sqlite(_) => now(fut),
            Db::Postgres(_) => {
                tokio::task::block_in_place(|| tokio::runtime::Handle::current().block_on(fut))
            }
        }
    }

    /// Runs left `running` by a host that is gone are `interrupted`; returns
    /// their ids. Runs of another live host on the same state dir are left
    /// alone; so are runs whose lease another replica still renews.
    pub async fn mark_interrupted(&self) -> Result<Vec<String>> {
        let running = self
            .db
            .query(
                "SELECT r.id, r.host, l.replica FROM runs r LEFT JOIN run_leases l ON l.run_id = r.id
                 WHERE r.status IN ('running', 'pending')",
                args![],
            )
            .await?;
        let dead: Vec<String> = running
            .iter()
            .filter(|r| {
                let host = r.opt_text(1);
                match host.as_deref().and_then(host_alive) {
                    // A process of this machine: alive or not, it says.
                    Some(alive) => !alive,
                    // Another replica's: only its lease tells (see reap_expired);
                    // a run nobody holds a lease for is nobody's.
                    None => r.opt_text(2).is_none(),
                }
            })
            .filter_map(|r| r.opt_text(0))
            .collect();
        self.interrupt(&dead, "the host stopped while the run was in progress")
            .await?;
        // Expired leases of other replicas are left to the heartbeat, which
        // ends them once this replica has reached the database for a whole
        // lease period (see `heartbeat`): a replica starting just after an
        // outage must not take its peers' unrenewed leases for deaths.
        Ok(dead)
    }

    /// At shutdown: this host's unfinished runs are `interrupted`.
    pub async fn interrupt_own(&self) -> Result<Vec<String>> {
        let ids: Vec<String> = self
            .db
            .query(
                "SELECT id FROM runs WHERE status IN ('running', 'pending') AND host = ?1",
                args![&self.host],
            )
            .await?
            .iter()
            .filter_map(|r| r.opt_text(0))
            .collect();
        self.interrupt(&ids, "the host shut down while the run was in progress")
            .await?;
        Ok(ids)
    }

    async fn interrupt(&self, ids: &[String], why: &str) -> Result<()> {
        if ids.is_empty() {
            return Ok(());
        }
        let now = now_ms();
        let mut stmts = Vec::new();
        for id in ids {
            stmts.push((INTERRUPT_RUN, args![id, now, why]));
            stmts.push((INTERRUPT_NODES, args![id, now]));
            stmts.push((DROP_LEASE, args![id]));
        }
        self.db.batch(stmts).await?;
        let mut mine = self.mine_mut();
        for id in ids {
            mine.remove(id);
        }
        Ok(())
    }

    fn mine_mut(&self) -> std::sync::MutexGuard<'_, std::collections::HashSet<String>> {
        self.signals.mine()
    }

    // ------------------------------------------------------ catalog snapshots

    /// The last catalog discovered for `source` with this config fingerprint.
    pub async fn snapshot(&self, source: &str, fingerprint: &str) -> Result<Option<(Value, i64)>> {
        let row = self
            .db
            .query_opt(
                "SELECT catalog, discovered_at FROM catalog_snapshots WHERE source = ?1 AND fingerprint = ?2",
                args![source, fingerprint],
            )
            .await?;
        row.map(|r| Ok((json(r.opt_text(0)).unwrap_or(Value::Null), r.int(1)?)))
            .transpose()
    }

    /// Saves `catalog`, the catalog's JSON text (a large catalog's text is a
    /// fraction of its parsed tree: issue #55).
    pub async fn save_snapshot(
        &self,
        source: &str,
        fingerprint: &str,
        catalog: &str,
    ) -> Result<()> {
        self.db
            .execute(
                "INSERT INTO catalog_snapshots (source, fingerprint, catalog, discovered_at) VALUES (?1, ?2, ?3, ?4)
                 ON CONFLICT (source) DO UPDATE SET fingerprint = excluded.fingerprint, catalog = excluded.catalog, discovered_at = excluded.discovered_at",
                args![source, fingerprint, catalog, now_ms()],
            )
            .await?;
        Ok(())
    }

    // ---------------------------------------------------------------- drafts

    pub async fn save_draft(
        &self,
        id: Option<&str>,
        name: &str,
        document: &Value,
    ) -> Result<Draft> {
        let now = now_ms();
        let text = document.to_string();
        let id = match id {
            Some(id) => {
                let n = self
                    .db
                    .execute(
                        "UPDATE drafts SET name = ?2, document = ?3, updated_at = ?4 WHERE id = ?1",
                        args![id, name, text, now],
                    )
                    .await?;
                if n == 0 {
                    return Err(StoreError::NotFound(format!("no draft {id:?}")));
                }
                id.to_string()
            }
            None => {
                let id = new_id("draft");
                self.db
                    .execute(
                        "INSERT INTO drafts (id, name, document, created_at, updated_at) VALUES (?1, ?2, ?3, ?4, ?4)",
                        args![&id, name, text, now],
                    )
                    .await?;
                id
            }
        };
        self.draft(&id).await
    }

    pub async fn draft(&self, id: &str) -> Result<Draft> {
        self.db
            .query_opt(
                "SELECT id, name, document, created_at, updated_at FROM drafts WHERE id = ?1",
                args![id],
            )
            .await?
            .map(|r| draft_row(&r))
            .transpose()?
            .ok_or_else(|| StoreError::NotFound(format!("no draft {id:?}")))
    }

    pub async fn drafts(&self) -> Result<Vec<Draft>> {
        self.db
            .query(
                "SELECT id, name, document, created_at, updated_at FROM drafts ORDER BY updated_at DESC",
                args![],
            )
            .await?
            .iter()
            .map(draft_row)
            .collect()
    }

    // ------------------------------------------------------------- artifacts

    /// Publishes `document` as the next version of `name`, unless the latest
    /// version has the same content hash (then that one is returned). Two
    /// replicas publishing at once: one takes the version, the other retries.
    pub async fn publish(
        &self,
        name: &str,
        document: &Value,
        draft_id: Option<&str>,
    ) -> Result<Artifact> {
        let hash = content_hash(document);
        let text = canonical_json(document);
        let mut tries = 0;
        loop {
            let inserted = self
                .db
                .execute(
                    "INSERT INTO artifacts (name, version, hash, document, draft_id, created_at)
                     SELECT ?1, COALESCE(MAX(version), 0) + 1, ?2, CAST(?3 AS TEXT), CAST(?4 AS TEXT), CAST(?5 AS BIGINT)
                     FROM artifacts WHERE name = ?1
                     HAVING COALESCE((SELECT hash FROM artifacts WHERE name = ?1 ORDER BY version DESC LIMIT 1), '') <> ?2",
                    args![name, &hash, &text, draft_id, now_ms()],
                )
                .await;
            match inserted {
                Err(e) if e.is_unique_violation() && tries < 5 => tries += 1,
                Err(e) => return Err(e),
                Ok(_) => break,
            }
        }
        let version = self
            .db
            .query_opt(
                "SELECT MAX(version) FROM artifacts WHERE name = ?1 AND hash = ?2",
                args![name, &hash],
            )
            .await?
            .and_then(|r| r.opt_int(0));
        self.artifact(name, version).await
    }

    /// `version` None: the latest.
    pub async fn artifact(&self, name: &str, version: Option<i64>) -> Result<Artifact> {
        let found = match version {
            Some(v) => {
                self.db
                    .query_opt(
                        "SELECT name, version, hash, document, draft_id, created_at FROM artifacts WHERE name = ?1 AND version = ?2",
                        args![name, v],
                    )
                    .await?
            }
            None => {
                self.db
                    .query_opt(
                        "SELECT name, version, hash, document, draft_id, created_at FROM artifacts WHERE name = ?1 ORDER BY version DESC LIMIT 1",
                        args![name],
                    )
                    .await?
            }
        };
        let Some(r) = found else {
            return Err(StoreError::NotFound(format!(
                "no artifact {name}{}",
                version.map(|v| format!("@{v}")).unwrap_or_default()
            )));
        };
        Ok(Artifact {
            name: r.text(0)?,
            version: r.int(1)?,
            hash: r.text(2)?,
            document: json(r.opt_text(3)).unwrap_or(Value::Null),
            draft_id: r.opt_text(4),
            created_at: r.int(5)?,
        })
    }

    pub async fn artifacts(&self) -> Result<Vec<Artifact>> {
        self.db
            .query(
                "SELECT name, version, hash, draft_id, created_at FROM artifacts ORDER BY name, version",
                args![],
            )
            .await?
            .iter()
            .map(|r| {
                Ok(Artifact {
                    name: r.text(0)?,
                    version: r.int(1)?,
                    hash: r.text(2)?,
                    document: Value::Null,
                    draft_id: r.opt_text(3),
                    created_at: r.int(4)?,
                })
            })
            .collect()
    }

    // ----------------------------------------------------------- deployments

    pub async fn deploy(&self, name: &str, artifact: &Artifact) -> Result<Deployment> {
        self.db
            .execute(
                "INSERT INTO deployments (name, artifact_name, artifact_version, created_at, updated_at) VALUES (?1, ?2, ?3, ?4, ?4)
                 ON CONFLICT (name) DO UPDATE SET artifact_name = excluded.artifact_name, artifact_version = excluded.artifact_version, updated_at = excluded.updated_at",
                args![name, &artifact.name, artifact.version, now_ms()],
            )
            .await?;
        self.announce_deployments(name).await;
        self.deployment(name).await
    }

    pub async fn deployment(&self, name: &str) -> Result<Deployment> {
        self.deployments()
            .await?
            .into_iter()
            .find(|d| d.name == name)
            .ok_or_else(|| StoreError::NotFound(format!("no deployment {name:?}")))
    }

    pub async fn deployments(&self) -> Result<Vec<Deployment>> {
        self.db
            .query(
                "SELECT name, artifact_name, artifact_version, created_at, updated_at FROM deployments ORDER BY name",
                args![],
            )
            .await?
            .iter()
            .map(|r| {
                Ok(Deployment {
                    name: r.text(0)?,
                    artifact_name: r.text(1)?,
                    artifact_version: r.int(2)?,
                    created_at: r.int(3)?,
                    updated_at: r.int(4)?,
                })
            })
            .collect()
    }

    // ------------------------------------------------------------------ runs

    /// Records a new run and this replica's lease on it, together.
    pub async fn create_run(
        &self,
        id: &str,
        workflow: &str,
        origin: &Value,
        inputs: &Value,
        principal: &str,
    ) -> Result<()> {
        if self.is_draining() {
            return Err(StoreError::Conflict(
                "this replica is draining (shutting down): start the run on another replica".into(),
            ));
        }
        let now = now_ms();
        // Listed as this replica's before its lease exists, so a heartbeat in
        // between never takes the new lease for an orphan; and as being
        // created until it committed, so a renewal that began before the
        // commit (and so did not return it) never takes it for lost.
        self.signals.creating().insert(id.to_string());
        self.mine_mut().insert(id.to_string());
        let created = self.db
            .batch(vec![
                (
                    "INSERT INTO runs (id, workflow, origin, status, inputs, started_at, host, principal) VALUES (?1, ?2, ?3, 'running', ?4, ?5, ?6, ?7)",
                    args![id, workflow, origin.to_string(), inputs.to_string(), now, &self.host, principal],
                ),
                (
                    "INSERT INTO run_leases (run_id, replica, expires_at) VALUES (?1, ?2, ?3)",
                    args![id, &self.host, now + self.leases.ttl_ms()],
                ),
            ])
            .await;
        if created.is_err() {
            self.mine_mut().remove(id);
        }
        self.signals.creating().remove(id);
        created.map(drop)
    }

    pub async fn set_run_sessions(&self, id: &str, sessions: &Value) -> Result<()> {
        self.fenced(
            id,
            vec![(
                "UPDATE runs SET sessions = ?2 WHERE id = ?1",
                args![id, sessions.to_string()],
            )],
        )
        .await
    }

    /// `stmts` in one transaction, if this replica still holds `run_id`'s
    /// lease ([`HOLD_LEASE`]); [`StoreError::LeaseLost`] if not.
    async fn fenced(&self, run_id: &str, stmts: Vec<db::Stmt>) -> Result<()> {
        match self
            .db
            .fenced(Some((HOLD_LEASE, args![run_id, &self.host])), stmts)
            .await?
        {
            Some(_) => Ok(()),
            None => Err(StoreError::LeaseLost(run_id.to_string())),
        }
    }

    /// Records a run's end and drops its lease, if this replica still holds
    /// it. A run already ended elsewhere (interrupted by another replica
    /// after this one's lease lapsed) keeps that end, and the answer is
    /// [`StoreError::LeaseLost`]. Either way this replica no longer runs it;
    /// any other error leaves it running here (the caller retries).
    pub async fn finish_run(
        &self,
        id: &str,
        status: RunStatus,
        outputs: Option<&Value>,
        error: Option<&str>,
    ) -> Result<()> {
        let done = self
            .fenced(
                id,
                vec![
                    (
                        "UPDATE runs SET status = ?2, outputs = ?3, error = ?4, finished_at = ?5 WHERE id = ?1 AND status IN ('running', 'pending')",
                        args![id, status.as_str(), outputs.map(|o| o.to_string()), error, now_ms()],
                    ),
                    (DROP_LEASE, args![id]),
                ],
            )
            .await;
        if matches!(done, Ok(()) | Err(StoreError::LeaseLost(_))) {
            self.mine_mut().remove(id);
        }
        done
    }

    /// Records node states (insert or replace), all in one transaction, if
    /// this replica still holds the run's lease ([`StoreError::LeaseLost`]
    /// if not: nothing is written).
    pub async fn put_nodes(&self, run_id: &str, nodes: &[NodeRecord]) -> Result<()> {
        if nodes.is_empty() {
            return Ok(());
        }
        // The fence rides in the first upsert (no statement and no round trip
        // of its own): it writes only where this replica holds the lease, and
        // on PostgreSQL locks the lease row as it checks it.
        let sql = match self.db {
            Db::Sqlite(_) => PUT_NODE_FENCED_SQLITE,
            Db::Postgres(_) => PUT_NODE_FENCED_PG,
        };
        // Its lock (on SQLite, the transaction) holds for the rest of the batch.
        let mut stmts = node_statements(run_id, nodes);
        if let Some((first, args)) = stmts.first_mut() {
            *first = sql;
            args.push(self.host.as_str().into());
        }
        match self.db.fenced(None, stmts).await? {
            Some(_) => Ok(()),
            None => Err(StoreError::LeaseLost(run_id.to_string())),
        }
    }

    /// [`Store::put_nodes`] without the lease fence, as node records were
    /// written before fencing: only for the benchmark that prices the fence.
    #[doc(hidden)]
    pub async fn put_nodes_unfenced(&self, run_id: &str, nodes: &[NodeRecord]) -> Result<()> {
        self.db.bulk(node_statements(run_id, nodes)).await.map(drop)
    }

    pub async fn put_node(&self, run_id: &str, n: &NodeRecord) -> Result<()> {
        self.put_nodes(run_id, std::slice::from_ref(n)).await
    }

    pub async fn run(&self, id: &str) -> Result<(RunRecord, Vec<NodeRecord>)> {
        let run = self
            .db
            .query_opt(
                "SELECT id, workflow, origin, status, inputs, outputs, error, sessions, started_at, finished_at, principal FROM runs WHERE id = ?1",
                args![id],
            )
            .await?
            .map(|r| run_row(&r))
            .transpose()?
            .ok_or_else(|| StoreError::NotFound(format!("no run {id:?}")))?;
        let nodes = self
            .db
            .query(
                "SELECT node_id, capability, status, args, output, error, attempts, epoch, started_at, finished_at, error_code FROM node_runs WHERE run_id = ?1 ORDER BY started_at, node_id",
                args![id],
            )
            .await?
            .iter()
            .map(|r| {
                Ok(NodeRecord {
                    node_id: r.text(0)?,
                    capability: r.text(1)?,
                    status: status(r.text(2)?)?,
                    args: json(r.opt_text(3)),
                    output: json(r.opt_text(4)),
                    error: r.opt_text(5),
                    attempts: r.int(6)?,
                    epoch: r.opt_int(7),
                    started_at: r.opt_int(8),
                    finished_at: r.opt_int(9),
                    error_code: r.opt_text(10).map(|c| error_code(&c)),
                })
            })
            .collect::<Result<_>>()?;
        Ok((run, nodes))
    }

    pub async fn runs(&self, limit: usize, status: Option<RunStatus>) -> Result<Vec<RunRecord>> {
        self.db
            .query(
                "SELECT id, workflow, origin, status, inputs, outputs, error, sessions, started_at, finished_at, principal FROM runs
                 WHERE (CAST(?1 AS TEXT) IS NULL OR status = ?1) ORDER BY started_at DESC LIMIT ?2",
                args![status.map(|s| s.as_str()), limit as i64],
            )
            .await?
            .iter()
            .map(run_row)
            .collect()
    }
}

/// Polls a future that never waits (SQLite's calls) to its end.
fn now<F: std::future::Future>(fut: F) -> F::Output {
    let mut fut = std::pin::pin!(fut);
    let mut cx = std::task::Context::from_waker(std::task::Waker::noop());
    loop {
        if let std::task::Poll::Ready(v) = fut.as_mut().poll(&mut cx) {
            return v;
        }
        // Only a future that waits gets here: yield the thread and retry.
        std::thread::yield_now();
    }
}

fn draft_row(r: &Row) -> Result<Draft> {
    Ok(Draft {
        id: r.text(0)?,
        name: r.text(1)?,
        document: json(r.opt_text(2)).unwrap_or(Value::Null),
        created_at: r.int(3)?,
        updated_at: r.int(4)?,
    })
}

fn run_row(r: &Row) -> Result<RunRecord> {
    Ok(RunRecord {
        id: r.text(0)?,
        workflow: r.text(1)?,
        origin: json(r.opt_text(2)).unwrap_or(Value::Null),
        status: status(r.text(3)?)?,
        inputs: json(r.opt_text(4)).unwrap_or(Value::Null),
        outputs: json(r.opt_text(5)),
        error: r.opt_text(6),
        sessions: json(r.opt_text(7)),
        started_at: r.int(8)?,
        finished_at: r.opt_int(9),
        principal: r.opt_text(10),
    })
}

/// The stores every store test runs on: SQLite in memory, and PostgreSQL
/// (a fresh schema) when `WF_TEST_PG_URL` names a server. Under `CI=true`
/// a missing `WF_TEST_PG_URL` fails the test rather than skipping PostgreSQL.
#[cfg(test)]
pub(crate) async fn test_stores() -> Vec<Store> {
    let mut stores = vec![Store::in_memory().expect("an in-memory store")];
    match std::env::var("WF_TEST_PG_URL") {
        Ok(url) if !url.is_empty() => {
            let schema = new_id("wf_test").replace('-', "_");
            stores.push(
                Store::connect(&url, 4, Some(&schema), None)
                    .await
                    .unwrap_or_else(|e| panic!("WF_TEST_PG_URL: {e}")),
            );
        }
        _ if std::env::var("CI").is_ok_and(|v| v == "true") => {
            panic!(
                "CI=true but WF_TEST_PG_URL is unset: the store tests must run on PostgreSQL too"
            )
        }
        _ => eprintln!("WF_TEST_PG_URL is unset: skipping PostgreSQL (SQLite only)"),
    }
    stores
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
    async fn lifecycle() {
        for s in test_stores().await {
            let d = s
                .save_draft(None, "wf", &json!({"b": 1, "a": 2}))
                .await
                .unwrap();
            let d2 = s
                .save_draft(Some(&d.id), "wf", &json!({"a": 2, "b": 1}))
                .await
                .unwrap();
            assert_eq!(d.id, d2.id);
            assert_eq!(s.drafts().await.unwrap().len(), 1);
            assert!(matches!(
                s.save_draft(Some("nope"), "wf", &json!({})).await,
                Err(StoreError::NotFound(_))
            ));
            let a1 = s.publish("wf", &d2.document, Some(&d.id)).await.unwrap();
            assert_eq!(a1.version, 1);
            assert_eq!(a1.draft_id.as_deref(), Some(d.id.as_str()));
            // Same content (key order aside) is the same artifact.
            assert_eq!(
                s.publish("wf", &json!({"a": 2, "b": 1}), None)
                    .await
                    .unwrap()
                    .version,
                1
            );
            let a2 = s.publish("wf", &json!({"a": 3}), None).await.unwrap();
            assert_eq!((a2.version, a2.reference()), (2, "wf@2".to_string()));
            assert_ne!(a1.hash, a2.hash);
            // Back to the first content: a new version, not the old one.
            let a3 = s
                .publish("wf", &json!({"a": 2, "b": 1}), None)
                .await
                .unwrap();
            assert_eq!(a3.version, 3, "{}", s.backend());
            let dep = s.deploy("prod", &a1).await.unwrap();
            assert_eq!(dep.artifact_version, 1);
            assert_eq!(s.deploy("prod", &a2).await.unwrap().artifact_version, 2);
            assert_eq!(s.deployments().await.unwrap().len(), 1);
            assert_eq!(s.artifact("wf", None).await.unwrap().version, 3);
            assert_eq!(
                s.artifact("wf", Some(2)).await.unwrap().document,
                json!({"a": 3})
            );
            assert_eq!(s.artifacts().await.unwrap().len(), 3);
            assert!(matches!(
                s.artifact("wf", Some(9)).await,
                Err(StoreError::NotFound(_))
            ));
            assert!(matches!(
                s.deployment("nope").await,
                Err(StoreError::NotFound(_))
            ));
        }
    }

    #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
    async fn concurrent_publishes_take_distinct_versions() {
        for s in test_stores().await {
            let s = Arc::new(s);
            let tasks: Vec<_> = (0..6)
                .map(|i| {
                    let s = s.clone();
                    tokio::spawn(async move { s.publish("race", &json!({ "i": i }), None).await })
                })
                .collect();
            let mut versions = Vec::new();
            for t in tasks {
                versions.push(t.await.unwrap().unwrap().version);
            }
            versions.sort();
            assert_eq!(versions, vec![1, 2, 3, 4, 5, 6], "{}", s.backend());
        }
    }

    #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
    async fn snapshots_replace_per_source() {
        for s in test_stores().await {
            assert!(s.snapshot("src", "f1").await.unwrap().is_none());
            s.save_snapshot("src", "f1", &json!({"tools": [1]}).to_string())
                .await
                .unwrap();
            s.save_snapshot("src", "f2", &json!({"tools": [2]}).to_string())
                .await
                .unwrap();
            assert!(s.snapshot("src", "f1").await.unwrap().is_none(), "replaced");
            let (cat, at) = s.snapshot("src", "f2").await.unwrap().unwrap();
            assert_eq!(cat, json!({"tools": [2]}));
            assert!(at > 0);
        }
    }

    fn running_node(id: &str) -> NodeRecord {
        NodeRecord {
            node_id: id.into(),
            capability: "wf.std.sleep".into(),
            status: NodeStatus::Running,
            args: Some(json!({"ms": 5})),
            output: None,
            error: None,
            error_code: None,
            attempts: 1,
            epoch: None,
            started_at: Some(now_ms()),
            finished_at: None,
        }
    }

    #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
    async fn runs_and_interruption() {
        for s in test_stores().await {
            s.create_run(
                "r1",
                "wf",
                &json!({"draft": "d"}),
                &json!({"x": 1}),
                "alice",
            )
            .await
            .unwrap();
            s.put_node("r1", &running_node("a")).await.unwrap();
            // A run of a live host (this process) is left alone at another start.
            assert!(s.mark_interrupted().await.unwrap().is_empty());
            // One whose host is gone is interrupted.
            s.create_run("r2", "wf", &json!({}), &json!({}), "local")
                .await
                .unwrap();
            s.db.execute(
                "UPDATE runs SET host = '4000000000:1' WHERE id = 'r2'",
                args![],
            )
            .await
            .unwrap();
            assert_eq!(s.mark_interrupted().await.unwrap(), vec!["r2".to_string()]);
            assert_eq!(
                s.lease_holder("r2").await.unwrap(),
                None,
                "its lease went too"
            );
            // At shutdown, this host's own runs are interrupted.
            assert_eq!(s.interrupt_own().await.unwrap(), vec!["r1".to_string()]);
            let (run, nodes) = s.run("r1").await.unwrap();
            assert_eq!(run.status, "interrupted");
            assert_eq!(run.principal.as_deref(), Some("alice"));
            assert_eq!(run.inputs, json!({"x": 1}));
            assert_eq!(nodes[0].status, "interrupted");
            assert_eq!(
                s.runs(10, Some(RunStatus::Interrupted))
                    .await
                    .unwrap()
                    .len(),
                2
            );
            assert_eq!(s.runs(10, None).await.unwrap().len(), 2);
            assert_eq!(s.runs(1, None).await.unwrap().len(), 1);
            assert!(
                s.runs(10, Some(RunStatus::Running))
                    .await
                    .unwrap()
                    .is_empty()
            );
        }
    }

    #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
    async fn a_finished_run_keeps_its_end_and_drops_its_lease() {
        for s in test_stores().await {
            s.create_run("r", "wf", &json!({}), &json!({}), "p")
                .await
                .unwrap();
            s.set_run_sessions("r", &json!({"s": 1})).await.unwrap();
            assert_eq!(
                s.lease_holder("r").await.unwrap().as_deref(),
                Some(s.replica())
            );
            s.finish_run("r", RunStatus::Succeeded, Some(&json!({"y": 2})), None)
                .await
                .unwrap();
            assert_eq!(s.lease_holder("r").await.unwrap(), None);
            // A late second end (a replica that lost the run) changes nothing.
            let late = s
                .finish_run("r", RunStatus::Failed, None, Some("late"))
                .await;
            assert!(matches!(late, Err(StoreError::LeaseLost(_))), "{late:?}");
            let (run, _) = s.run("r").await.unwrap();
            assert_eq!(
                (run.status, run.outputs, run.error, run.sessions),
                (
                    RunStatus::Succeeded,
                    Some(json!({"y": 2})),
                    None,
                    Some(json!({"s": 1}))
                )
            );
        }
    }

    #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
    async fn an_expired_lease_loses_the_run_to_another_replica() {
        for s in test_stores().await {
            let a = s.with_replica(Some("replica-a"), LeaseTimes::default());
            a.create_run("held", "wf", &json!({}), &json!({}), "p")
                .await
                .unwrap();
            a.create_run("lost", "wf", &json!({}), &json!({}), "p")
                .await
                .unwrap();
            a.put_node("lost", &running_node("n")).await.unwrap();
            // Another replica's run with a live lease is not this start's to end.
            assert!(a.mark_interrupted().await.unwrap().is_empty());
            a.db.execute(
                "UPDATE run_leases SET expires_at = 1 WHERE run_id = 'lost'",
                args![],
            )
            .await
            .unwrap();
            assert_eq!(a.reap_expired().await.unwrap(), vec!["lost".to_string()]);
            assert!(a.reap_expired().await.unwrap().is_empty(), "reaped once");
            let (run, nodes) = a.run("lost").await.unwrap();
            assert_eq!(run.status, RunStatus::Interrupted);
            assert!(run.error.unwrap().contains("lease"));
            assert_eq!(nodes[0].status, NodeStatus::Interrupted);
            // The owner's next heartbeat shows it holds only the other run.
            assert_eq!(a.renew_leases().await.unwrap(), vec!["held".to_string()]);
            assert_eq!(a.run("held").await.unwrap().0.status, RunStatus::Running);
        }
    }

    #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
    async fn cancels_and_draining() {
        for s in test_stores().await {
            let mut stopped = s.stopped_runs().expect("a store announces runs to stop");
            s.create_run("mine", "wf", &json!({}), &json!({}), "p")
                .await
                .unwrap();
            // A run of this replica is stopped here, through the engine's channel.
            assert!(s.request_cancel("mine").await.unwrap());
            assert_eq!(stopped.recv().await.unwrap(), "mine");
            // A run nobody holds cannot be cancelled anywhere.
            assert!(!s.request_cancel("nobody").await.unwrap());
            s.finish_run("mine", RunStatus::Cancelled, None, None)
                .await
                .unwrap();
            assert!(!s.request_cancel("mine").await.unwrap(), "ended");
            assert_eq!(s.running_here(), 0);
            s.ping().await.unwrap();
            s.set_draining();
            assert!(s.is_draining());
            let refused = s
                .create_run("late", "wf", &json!({}), &json!({}), "p")
                .await;
            assert!(
                matches!(&refused, Err(StoreError::Conflict(m)) if m.contains("draining")),
                "{refused:?}"
            );
            assert!(matches!(s.run("late").await, Err(StoreError::NotFound(_))));
        }
    }

    #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
    async fn a_node_error_keeps_its_code() {
        for s in test_stores().await {
            s.create_run("r", "wf", &json!({}), &json!({}), "local")
                .await
                .unwrap();
            let node = |id: &str, code: Option<ErrorCode>| NodeRecord {
                node_id: id.into(),
                capability: "fx.increment".into(),
                status: NodeStatus::Failed,
                args: None,
                output: None,
                error: Some("x".into()),
                error_code: code,
                attempts: 1,
                epoch: Some(1),
                started_at: Some(1),
                finished_at: Some(2),
            };
            s.put_nodes(
                "r",
                &[node("a", Some(ErrorCode::StateLost)), node("b", None)],
            )
            .await
            .unwrap();
            let (_, nodes) = s.run("r").await.unwrap();
            assert_eq!(nodes[0].error_code, Some(ErrorCode::StateLost));
            assert_eq!(nodes[1].error_code, None);
            // A node written again is replaced, not duplicated.
            let mut again = node("a", Some(ErrorCode::Timeout));
            again.attempts = 2;
            s.put_node("r", &again).await.unwrap();
            let (_, nodes) = s.run("r").await.unwrap();
            assert_eq!(nodes.len(), 2);
            assert_eq!(
                (nodes[0].attempts, nodes[0].error_code),
                (2, Some(ErrorCode::Timeout))
            );
            // As the planner's get_run and `wf` JSON output show it.
            let shown = serde_json::to_value(&nodes[0]).unwrap();
            assert_eq!(shown["error_code"], "timeout");
            assert!(
                serde_json::to_value(&nodes[1])
                    .unwrap()
                    .get("error_code")
                    .is_none()
            );
            // A code written by a newer wf reads as `internal`, as on the wire.
            s.db.execute(
                "UPDATE node_runs SET error_code = 'from_the_future' WHERE node_id = 'b'",
                args![],
            )
            .await
            .unwrap();
            assert_eq!(
                s.run("r").await.unwrap().1[1].error_code,
                Some(ErrorCode::Internal)
            );
        }
    }

    #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
    async fn migrations_are_recorded_and_a_newer_database_is_refused() {
        for s in test_stores().await {
            let applied = s.migrations().await.unwrap();
            assert_eq!(
                applied.iter().map(|m| m.version).collect::<Vec<_>>(),
                (1..=migrate::latest()).collect::<Vec<_>>()
            );
            // Again: nothing to do.
            assert!(migrate::run(&s.db).await.unwrap().is_empty());
            s.db.execute(
                "INSERT INTO schema_migrations (version, name, applied_at) VALUES (999, 'future', 1)",
                args![],
            )
            .await
            .unwrap();
            let e = migrate::run(&s.db).await.unwrap_err();
            assert!(matches!(e, StoreError::TooNew { found: 999, .. }), "{e}");
            assert!(e.to_string().contains("newer than this wf"));
        }
    }

    #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
    async fn a_wrong_postgres_url_fails_without_showing_its_password() {
        // Nothing listens on port 1: the error names the server, not the secret.
        let e = Store::connect("postgres://wf:s3cret-pw@127.0.0.1:1/wf", 1, None, None)
            .await
            .err()
            .expect("no server there");
        let shown = e.to_string();
        assert!(shown.contains("127.0.0.1:1"), "{shown}");
        assert!(!shown.contains("s3cret-pw"), "{shown}");
        let missing = Path::new("/nonexistent/ca.pem");
        let e = Store::connect(
            "postgres://wf:s3cret-pw@127.0.0.1:1/wf?sslmode=require",
            1,
            None,
            Some(missing),
        )
        .await
        .err()
        .expect("no CA file");
        assert!(e.to_string().contains("/nonexistent/ca.pem"), "{e}");
        assert!(!e.to_string().contains("s3cret-pw"), "{e}");
    }

    /// `sslmode=require` against the test cluster (tests/pg/cluster.sh turns
    /// TLS on with a certificate of its own, `WF_TEST_PG_CA`): verified with
    /// that CA, refused without it.
    #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
    async fn tls_with_sslmode_require() {
        let (Ok(url), Ok(ca)) = (
            std::env::var("WF_TEST_PG_URL"),
            std::env::var("WF_TEST_PG_CA"),
        ) else {
            if std::env::var("CI").is_ok_and(|v| v == "true") {
                panic!("CI=true but WF_TEST_PG_URL or WF_TEST_PG_CA is unset");
            }
            eprintln!("WF_TEST_PG_URL / WF_TEST_PG_CA unset: skipping the TLS test");
            return;
        };
        let url = format!("{url}?sslmode=require");
        let s = Store::connect(&url, 1, None, Some(Path::new(&ca)))
            .await
            .unwrap();
        let ssl =
            s.db.query_opt(
                "SELECT ssl FROM pg_stat_ssl WHERE pid = pg_backend_pid()",
                args![],
            )
            .await
            .unwrap()
            .and_then(|r| r.opt_int(0));
        assert_eq!(ssl, Some(1), "the connection is encrypted");
        let e = Store::connect(&url, 1, None, None)
            .await
            .err()
            .expect("a certificate no system root signed is refused");
        assert!(e.to_string().to_lowercase().contains("certificate"), "{e}");
    }

    #[test]
    fn a_database_from_before_error_codes_is_migrated() {
        let dir = std::env::temp_dir().join(format!("wf-store-migrate-{}", new_id("t")));
        std::fs::create_dir_all(&dir).unwrap();
        {
            // node_runs as wf created it before the error_code column.
            let old = Connection::open(dir.join("wf.db")).unwrap();
            old.execute_batch(
                "CREATE TABLE runs (id TEXT PRIMARY KEY, workflow TEXT NOT NULL, origin TEXT NOT NULL,
                    status TEXT NOT NULL, inputs TEXT NOT NULL, outputs TEXT, error TEXT, sessions TEXT,
                    started_at INTEGER NOT NULL, finished_at INTEGER, host TEXT);
                 CREATE TABLE node_runs (run_id TEXT NOT NULL REFERENCES runs(id), node_id TEXT NOT NULL,
                    capability TEXT NOT NULL, status TEXT NOT NULL, args TEXT, output TEXT, error TEXT,
                    attempts INTEGER NOT NULL DEFAULT 0, epoch INTEGER, started_at INTEGER, finished_at INTEGER,
                    PRIMARY KEY (run_id, node_id));
                 INSERT INTO runs VALUES ('old', 'wf', '{}', 'failed', '{}', NULL, 'boom', NULL, 1, 2, NULL);
                 INSERT INTO node_runs VALUES ('old', 'a', 'x.y', 'failed', NULL, NULL, 'boom', 1, NULL, 1, 2);",
            )
            .unwrap();
        }
        let s = Store::open(&dir).unwrap();
        let (run, nodes) = now(s.run("old")).unwrap();
        assert_eq!((run.status.as_str(), nodes[0].error_code), ("failed", None));
        assert_eq!(run.principal, None, "a run from before principals has none");
        now(s.create_run("new", "wf", &json!({}), &json!({}), "bob")).unwrap();
        assert_eq!(
            now(s.run("new")).unwrap().0.principal.as_deref(),
            Some("bob")
        );
        let mut n = nodes[0].clone();
        n.error_code = Some(ErrorCode::Timeout);
        // put_nodes writes off the runtime: give it one.
        tokio::runtime::Runtime::new()
            .unwrap()
            .block_on(s.put_node("new", &n))
            .unwrap();
        assert_eq!(
            now(s.run("new")).unwrap().1[0].error_code,
            Some(ErrorCode::Timeout)
        );
        let versions: Vec<i64> = now(s.migrations())
            .unwrap()
            .iter()
            .map(|m| m.version)
            .collect();
        assert_eq!(versions, (1..=migrate::latest()).collect::<Vec<_>>());
        drop(s);
        // Opening again (already migrated) is a no-op.
        assert!(Store::open(&dir).is_ok());
        let _ = std::fs::remove_dir_all(&dir);
    }
}
