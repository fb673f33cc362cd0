//! wf's state in SQLite: drafts → artifacts (immutable, versioned,
//! content-hashed) → deployments (named, pinned) → runs and node records.

use std::path::Path;
use std::sync::Mutex;
use std::time::{SystemTime, UNIX_EPOCH};

use rusqlite::{Connection, OptionalExtension, params};
use serde::Serialize;
use serde_json::Value;
use sha2::{Digest, Sha256};
use wf_plugin_api::ErrorCode;

mod run_tasks;
mod status_sql;
mod usage;

pub use crate::status::{NodeStatus, RunStatus};

#[derive(Debug, thiserror::Error)]
pub enum StoreError {
    #[error("database: {0}")]
    Db(#[from] rusqlite::Error),
    #[error("{0}")]
    NotFound(String),
    #[error("{0}")]
    Conflict(String),
}

pub type Result<T> = std::result::Result<T, StoreError>;

pub use crate::clock::now_ms;

/// A fresh id: time-ordered, unique within the process and across restarts.
pub fn new_id(prefix: &str) -> String {
    use std::sync::atomic::{AtomicU32, Ordering};
    static SEQ: AtomicU32 = AtomicU32::new(0);
    let nanos = SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .map(|d| d.as_nanos())
        .unwrap_or(0);
    let seq = SEQ.fetch_add(1, Ordering::Relaxed);
    format!(
        "{prefix}-{:x}{:04x}{:04x}",
        nanos / 1000,
        std::process::id() & 0xffff,
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
    db: Mutex<Connection>,
    /// This process, as recorded with the runs it executes.
    host: String,
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

/// Whether the process that recorded `host` still runs.
fn host_alive(host: &str) -> bool {
    let Some(pid) = host.split(':').next().and_then(|p| p.parse::<u32>().ok()) else {
        return false;
    };
    if cfg!(target_os = "linux") {
        process_identity(pid).as_deref() == Some(host)
    } else {
        false
    }
}

fn json(text: Option<String>) -> Option<Value> {
    text.and_then(|t| serde_json::from_str(&t).ok())
}

/// A stored code; one this build does not know reads as `internal`, as on the wire.
fn error_code(text: &str) -> ErrorCode {
    serde_json::from_value(Value::String(text.to_string())).unwrap_or(ErrorCode::Internal)
}

/// Brings a database made by an older wf up to schema.sql: columns added
/// since are added here (CREATE TABLE IF NOT EXISTS leaves old tables alone).
fn migrate(conn: &Connection) -> Result<()> {
    let has_column = |table: &str, column: &str| -> Result<bool> {
        let mut st = conn.prepare(&format!("PRAGMA table_info({table})"))?;
        let names = st
            .query_map([], |r| r.get::<_, String>(1))?
            .collect::<std::result::Result<Vec<_>, _>>()?;
        Ok(names.iter().any(|n| n == column))
    };
    if !has_column("node_runs", "error_code")? {
        conn.execute("ALTER TABLE node_runs ADD COLUMN error_code TEXT", [])?;
    }
    if !has_column("runs", "principal")? {
        conn.execute("ALTER TABLE runs ADD COLUMN principal TEXT", [])?;
    }
    Ok(())
}

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
        conn.busy_timeout(std::time::Duration::from_secs(5))?;
        conn.execute_batch(include_str!("schema.sql"))?;
        migrate(&conn)?;
        let host = process_identity(std::process::id())
            .unwrap_or_else(|| format!("{}:0", std::process::id()));
        Ok(Self {
            db: Mutex::new(conn),
            host,
        })
    }

    fn with<T>(&self, f: impl FnOnce(&mut Connection) -> Result<T>) -> Result<T> {
        let mut db = self.db.lock().unwrap_or_else(|p| p.into_inner());
        f(&mut db)
    }

    /// Runs left `running` by a host that is gone are `interrupted`; returns
    /// their ids. Runs of another live host on the same state dir are left alone.
    pub fn mark_interrupted(&self) -> Result<Vec<String>> {
        let running: Vec<(String, Option<String>)> = self.with(|db| {
            let mut st =
                db.prepare("SELECT id, host FROM runs WHERE status IN ('running', 'pending')")?;
            Ok(st
                .query_map([], |r| Ok((r.get(0)?, r.get(1)?)))?
                .collect::<std::result::Result<_, _>>()?)
        })?;
        let dead: Vec<String> = running
            .into_iter()
            .filter(|(_, h)| !h.as_deref().is_some_and(host_alive))
            .map(|(id, _)| id)
            .collect();
        self.interrupt(&dead, "the host stopped while the run was in progress")?;
        Ok(dead)
    }

    /// At shutdown: this host's unfinished runs are `interrupted`.
    pub fn interrupt_own(&self) -> Result<Vec<String>> {
        let ids: Vec<String> = self.with(|db| {
            let mut st = db.prepare(
                "SELECT id FROM runs WHERE status IN ('running', 'pending') AND host = ?1",
            )?;
            Ok(st
                .query_map([&self.host], |r| r.get(0))?
                .collect::<std::result::Result<_, _>>()?)
        })?;
        self.interrupt(&ids, "the host shut down while the run was in progress")?;
        Ok(ids)
    }

    fn interrupt(&self, ids: &[String], why: &str) -> Result<()> {
        let now = now_ms();
        self.with(|db| {
            let tx = db.transaction()?;
            for id in ids {
                tx.execute(
                    "UPDATE runs SET status = 'interrupted', finished_at = ?2, error = ?3 WHERE id = ?1 AND status IN ('running', 'pending')",
                    params![id, now, why],
                )?;
                tx.execute("UPDATE node_runs SET status = 'interrupted', finished_at = ?2 WHERE run_id = ?1 AND status = 'running'", params![id, now])?;
            }
            tx.commit()?;
            Ok(())
        })
    }

    // ------------------------------------------------------ catalog snapshots

    /// The last catalog discovered for `source` with this config fingerprint.
    pub fn snapshot(&self, source: &str, fingerprint: &str) -> Result<Option<(Value, i64)>> {
        self.with(|db| {
            Ok(db
                .query_row(
                    "SELECT catalog, discovered_at FROM catalog_snapshots WHERE source = ?1 AND fingerprint = ?2",
                    params![source, fingerprint],
                    |r| Ok((json(r.get(0)?).unwrap_or(Value::Null), r.get(1)?)),
                )
                .optional()?)
        })
    }

    pub fn save_snapshot(&self, source: &str, fingerprint: &str, catalog: &Value) -> Result<()> {
        self.with(|db| {
            db.execute(
                "INSERT OR REPLACE INTO catalog_snapshots (source, fingerprint, catalog, discovered_at) VALUES (?1, ?2, ?3, ?4)",
                params![source, fingerprint, catalog.to_string(), now_ms()],
            )?;
            Ok(())
        })
    }

    // ---------------------------------------------------------------- drafts

    pub fn save_draft(&self, id: Option<&str>, name: &str, document: &Value) -> Result<Draft> {
        let now = now_ms();
        let text = document.to_string();
        self.with(|db| {
            let id = match id {
                Some(id) => {
                    let n = db.execute(
                        "UPDATE drafts SET name = ?2, document = ?3, updated_at = ?4 WHERE id = ?1",
                        params![id, name, text, now],
                    )?;
                    if n == 0 {
                        return Err(StoreError::NotFound(format!("no draft {id:?}")));
                    }
                    id.to_string()
                }
                None => {
                    let id = new_id("draft");
                    db.execute(
                        "INSERT INTO drafts (id, name, document, created_at, updated_at) VALUES (?1, ?2, ?3, ?4, ?4)",
                        params![id, name, text, now],
                    )?;
                    id
                }
            };
            Ok(id)
        })
        .and_then(|id| self.draft(&id))
    }

    pub fn draft(&self, id: &str) -> Result<Draft> {
        self.with(|db| {
            db.query_row(&format!("{DRAFT_COLUMNS} WHERE id = ?1"), [id], draft_row)
                .optional()?
                .ok_or_else(|| StoreError::NotFound(format!("no draft {id:?}")))
        })
    }

    pub fn drafts(&self) -> Result<Vec<Draft>> {
        self.with(|db| {
            let mut st = db.prepare(&format!("{DRAFT_COLUMNS} ORDER BY updated_at DESC"))?;
            let rows = st.query_map([], draft_row)?;
            Ok(rows.collect::<std::result::Result<_, _>>()?)
        })
    }

    // ------------------------------------------------------------- artifacts

    /// Publishes `document` as the next version of `name`, unless the latest
    /// version has the same content hash (then that one is returned).
    pub fn publish(
        &self,
        name: &str,
        document: &Value,
        draft_id: Option<&str>,
    ) -> Result<Artifact> {
        let hash = content_hash(document);
        let now = now_ms();
        let version = self.with(|db| {
            let tx = db.transaction()?;
            let latest: Option<(i64, String)> = tx
                .query_row(
                    "SELECT version, hash FROM artifacts WHERE name = ?1 ORDER BY version DESC LIMIT 1",
                    [name],
                    |r| Ok((r.get(0)?, r.get(1)?)),
                )
                .optional()?;
            if let Some((v, h)) = &latest
                && *h == hash
            {
                return Ok(*v);
            }
            let version = latest.map(|(v, _)| v + 1).unwrap_or(1);
            tx.execute(
                "INSERT INTO artifacts (name, version, hash, document, draft_id, created_at) VALUES (?1, ?2, ?3, ?4, ?5, ?6)",
                params![name, version, hash, canonical_json(document), draft_id, now],
            )?;
            tx.commit()?;
            Ok(version)
        })?;
        self.artifact(name, Some(version))
    }

    /// `version` None: the latest.
    pub fn artifact(&self, name: &str, version: Option<i64>) -> Result<Artifact> {
        self.with(|db| {
            let row = |r: &rusqlite::Row<'_>| {
                Ok(Artifact {
                    name: r.get(0)?,
                    version: r.get(1)?,
                    hash: r.get(2)?,
                    document: json(r.get(3)?).unwrap_or(Value::Null),
                    draft_id: r.get(4)?,
                    created_at: r.get(5)?,
                })
            };
            let cols = "SELECT name, version, hash, document, draft_id, created_at FROM artifacts";
            let found = match version {
                Some(v) => db
                    .query_row(
                        &format!("{cols} WHERE name = ?1 AND version = ?2"),
                        params![name, v],
                        row,
                    )
                    .optional()?,
                None => db
                    .query_row(
                        &format!("{cols} WHERE name = ?1 ORDER BY version DESC LIMIT 1"),
                        params![name],
                        row,
                    )
                    .optional()?,
            };
            found.ok_or_else(|| {
                StoreError::NotFound(format!(
                    "no artifact {name}{}",
                    version.map(|v| format!("@{v}")).unwrap_or_default()
                ))
            })
        })
    }

    pub fn artifacts(&self) -> Result<Vec<Artifact>> {
        self.with(|db| {
            let mut st = db.prepare("SELECT name, version, hash, draft_id, created_at FROM artifacts ORDER BY name, version")?;
            let rows = st.query_map([], |r| {
                Ok(Artifact {
                    name: r.get(0)?,
                    version: r.get(1)?,
                    hash: r.get(2)?,
                    document: Value::Null,
                    draft_id: r.get(3)?,
                    created_at: r.get(4)?,
                })
            })?;
            Ok(rows.collect::<std::result::Result<_, _>>()?)
        })
    }

    // ----------------------------------------------------------- deployments

    pub fn deploy(&self, name: &str, artifact: &Artifact) -> Result<Deployment> {
        let now = now_ms();
        self.with(|db| {
            db.execute(
                "INSERT INTO deployments (name, artifact_name, artifact_version, created_at, updated_at) VALUES (?1, ?2, ?3, ?4, ?4)
                 ON CONFLICT(name) DO UPDATE SET artifact_name = ?2, artifact_version = ?3, updated_at = ?4",
                params![name, artifact.name, artifact.version, now],
            )?;
            Ok(())
        })?;
        self.deployment(name)
    }

    pub fn deployment(&self, name: &str) -> Result<Deployment> {
        self.deployments()?
            .into_iter()
            .find(|d| d.name == name)
            .ok_or_else(|| StoreError::NotFound(format!("no deployment {name:?}")))
    }

    pub fn deployments(&self) -> Result<Vec<Deployment>> {
        self.with(|db| {
            let mut st = db.prepare("SELECT name, artifact_name, artifact_version, created_at, updated_at FROM deployments ORDER BY name")?;
            let rows = st.query_map([], |r| {
                Ok(Deployment {
                    name: r.get(0)?,
                    artifact_name: r.get(1)?,
                    artifact_version: r.get(2)?,
                    created_at: r.get(3)?,
                    updated_at: r.get(4)?,
                })
            })?;
            Ok(rows.collect::<std::result::Result<_, _>>()?)
        })
    }

    // ------------------------------------------------------------------ runs

    pub fn create_run(
        &self,
        id: &str,
        workflow: &str,
        origin: &Value,
        inputs: &Value,
        principal: &str,
    ) -> Result<()> {
        self.with(|db| {
            db.execute(
                "INSERT INTO runs (id, workflow, origin, status, inputs, started_at, host, principal) VALUES (?1, ?2, ?3, 'running', ?4, ?5, ?6, ?7)",
                params![id, workflow, origin.to_string(), inputs.to_string(), now_ms(), self.host, principal],
            )?;
            Ok(())
        })
    }

    pub fn set_run_sessions(&self, id: &str, sessions: &Value) -> Result<()> {
        self.with(|db| {
            db.execute(
                "UPDATE runs SET sessions = ?2 WHERE id = ?1",
                params![id, sessions.to_string()],
            )?;
            Ok(())
        })
    }

    pub fn finish_run(
        &self,
        id: &str,
        status: RunStatus,
        outputs: Option<&Value>,
        error: Option<&str>,
    ) -> Result<()> {
        self.with(|db| {
            db.execute(
                "UPDATE runs SET status = ?2, outputs = ?3, error = ?4, finished_at = ?5 WHERE id = ?1",
                params![id, status, outputs.map(|o| o.to_string()), error, now_ms()],
            )?;
            Ok(())
        })
    }

    /// Records node states (insert or replace), all in one transaction.
    pub fn put_nodes(&self, run_id: &str, nodes: &[NodeRecord]) -> Result<()> {
        self.with(|db| {
            let tx = db.transaction()?;
            {
                let mut st = tx.prepare_cached(
                    "INSERT OR REPLACE INTO node_runs (run_id, node_id, capability, status, args, output, error, attempts, epoch, started_at, finished_at, error_code)
                     VALUES (?1, ?2, ?3, ?4, ?5, ?6, ?7, ?8, ?9, ?10, ?11, ?12)",
                )?;
                for n in nodes {
                    st.execute(params![
                        run_id,
                        n.node_id,
                        n.capability,
                        n.status,
                        n.args.as_ref().map(Value::to_string),
                        n.output.as_ref().map(Value::to_string),
                        n.error,
                        n.attempts,
                        n.epoch,
                        n.started_at,
                        n.finished_at,
                        n.error_code.map(ErrorCode::as_str),
                    ])?;
                }
            }
            tx.commit()?;
            Ok(())
        })
    }

    pub fn put_node(&self, run_id: &str, n: &NodeRecord) -> Result<()> {
        self.put_nodes(run_id, std::slice::from_ref(n))
    }

    pub fn run(&self, id: &str) -> Result<(RunRecord, Vec<NodeRecord>)> {
        self.with(|db| {
            let run = db
                .query_row(
                    "SELECT id, workflow, origin, status, inputs, outputs, error, sessions, started_at, finished_at, principal FROM runs WHERE id = ?1",
                    [id],
                    run_row,
                )
                .optional()?
                .ok_or_else(|| StoreError::NotFound(format!("no run {id:?}")))?;
            let mut st = db.prepare(
                "SELECT node_id, capability, status, args, output, error, attempts, epoch, started_at, finished_at, error_code FROM node_runs WHERE run_id = ?1 ORDER BY started_at, node_id",
            )?;
            let nodes = st
                .query_map([id], |r| {
                    Ok(NodeRecord {
                        node_id: r.get(0)?,
                        capability: r.get(1)?,
                        status: r.get(2)?,
                        args: json(r.get(3)?),
                        output: json(r.get(4)?),
                        error: r.get(5)?,
                        attempts: r.get(6)?,
                        epoch: r.get(7)?,
                        started_at: r.get(8)?,
                        finished_at: r.get(9)?,
                        error_code: r.get::<_, Option<String>>(10)?.map(|c| error_code(&c)),
                    })
                })?
                .collect::<std::result::Result<_, _>>()?;
            Ok((run, nodes))
        })
    }

    pub fn runs(&self, limit: usize, status: Option<RunStatus>) -> Result<Vec<RunRecord>> {
        self.with(|db| {
            let mut st = db.prepare(
                "SELECT id, workflow, origin, status, inputs, outputs, error, sessions, started_at, finished_at, principal FROM runs
                 WHERE (?1 IS NULL OR status = ?1) ORDER BY started_at DESC LIMIT ?2",
            )?;
            let rows = st.query_map(params![status, limit as i64], run_row)?;
            Ok(rows.collect::<std::result::Result<_, _>>()?)
        })
    }
}

const DRAFT_COLUMNS: &str = "SELECT id, name, document, created_at, updated_at FROM drafts";

fn draft_row(r: &rusqlite::Row<'_>) -> rusqlite::Result<Draft> {
    Ok(Draft {
        id: r.get(0)?,
        name: r.get(1)?,
        document: json(r.get(2)?).unwrap_or(Value::Null),
        created_at: r.get(3)?,
        updated_at: r.get(4)?,
    })
}

fn run_row(r: &rusqlite::Row<'_>) -> rusqlite::Result<RunRecord> {
    Ok(RunRecord {
        id: r.get(0)?,
        workflow: r.get(1)?,
        origin: json(r.get(2)?).unwrap_or(Value::Null),
        status: r.get(3)?,
        inputs: json(r.get(4)?).unwrap_or(Value::Null),
        outputs: json(r.get(5)?),
        error: r.get(6)?,
        sessions: json(r.get(7)?),
        started_at: r.get(8)?,
        finished_at: r.get(9)?,
        principal: r.get(10)?,
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn lifecycle() {
        let s = Store::in_memory().unwrap();
        let d = s.save_draft(None, "wf", &json!({"b": 1, "a": 2})).unwrap();
        let d2 = s
            .save_draft(Some(&d.id), "wf", &json!({"a": 2, "b": 1}))
            .unwrap();
        assert_eq!(d.id, d2.id);
        let a1 = s.publish("wf", &d2.document, Some(&d.id)).unwrap();
        assert_eq!(a1.version, 1);
        // Same content (key order aside) is the same artifact.
        assert_eq!(
            s.publish("wf", &json!({"a": 2, "b": 1}), None)
                .unwrap()
                .version,
            1
        );
        let a2 = s.publish("wf", &json!({"a": 3}), None).unwrap();
        assert_eq!((a2.version, a2.reference()), (2, "wf@2".to_string()));
        assert_ne!(a1.hash, a2.hash);
        let dep = s.deploy("prod", &a1).unwrap();
        assert_eq!(dep.artifact_version, 1);
        assert_eq!(s.deploy("prod", &a2).unwrap().artifact_version, 2);
        assert_eq!(s.artifact("wf", None).unwrap().version, 2);
        assert!(matches!(
            s.artifact("wf", Some(9)),
            Err(StoreError::NotFound(_))
        ));
    }

    #[test]
    fn runs_and_interruption() {
        let s = Store::in_memory().unwrap();
        s.create_run(
            "r1",
            "wf",
            &json!({"draft": "d"}),
            &json!({"x": 1}),
            "alice",
        )
        .unwrap();
        let n = NodeRecord {
            node_id: "a".into(),
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
        };
        s.put_node("r1", &n).unwrap();
        // A run of a live host (this process) is left alone at another start.
        assert!(s.mark_interrupted().unwrap().is_empty());
        // One whose host is gone is interrupted.
        s.create_run("r2", "wf", &json!({}), &json!({}), "local")
            .unwrap();
        s.with(|db| Ok(db.execute("UPDATE runs SET host = '4000000000:1' WHERE id = 'r2'", [])?))
            .unwrap();
        assert_eq!(s.mark_interrupted().unwrap(), vec!["r2".to_string()]);
        // At shutdown, this host's own runs are interrupted.
        assert_eq!(s.interrupt_own().unwrap(), vec!["r1".to_string()]);
        let (run, nodes) = s.run("r1").unwrap();
        assert_eq!(run.status, "interrupted");
        assert_eq!(run.principal.as_deref(), Some("alice"));
        assert_eq!(nodes[0].status, "interrupted");
        assert_eq!(s.runs(10, Some(RunStatus::Interrupted)).unwrap().len(), 2);
    }

    #[test]
    fn a_node_error_keeps_its_code() {
        let s = Store::in_memory().unwrap();
        s.create_run("r", "wf", &json!({}), &json!({}), "local")
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
        .unwrap();
        let (_, nodes) = s.run("r").unwrap();
        assert_eq!(nodes[0].error_code, Some(ErrorCode::StateLost));
        assert_eq!(nodes[1].error_code, None);
        // As the planner's get_run and `wf` JSON output show it.
        let shown = serde_json::to_value(&nodes[0]).unwrap();
        assert_eq!(shown["error_code"], "state_lost");
        assert!(
            serde_json::to_value(&nodes[1])
                .unwrap()
                .get("error_code")
                .is_none()
        );
        // A code written by a newer wf reads as `internal`, as on the wire.
        s.with(|db| {
            Ok(db.execute(
                "UPDATE node_runs SET error_code = 'from_the_future' WHERE node_id = 'b'",
                [],
            )?)
        })
        .unwrap();
        assert_eq!(
            s.run("r").unwrap().1[1].error_code,
            Some(ErrorCode::Internal)
        );
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
        let (run, nodes) = s.run("old").unwrap();
        assert_eq!((run.status.as_str(), nodes[0].error_code), ("failed", None));
        assert_eq!(run.principal, None, "a run from before principals has none");
        s.create_run("new", "wf", &json!({}), &json!({}), "bob")
            .unwrap();
        assert_eq!(s.run("new").unwrap().0.principal.as_deref(), Some("bob"));
        let mut n = nodes[0].clone();
        n.error_code = Some(ErrorCode::Timeout);
        s.put_node("old", &n).unwrap();
        assert_eq!(
            s.run("old").unwrap().1[0].error_code,
            Some(ErrorCode::Timeout)
        );
        drop(s);
        // Opening again (already migrated) is a no-op.
        assert!(Store::open(&dir).is_ok());
        let _ = std::fs::remove_dir_all(&dir);
    }
}
