//! Versioned schema migrations for both backends, recorded in
//! `schema_migrations`. Each runs in a transaction of its own that first
//! takes the migration lock (PostgreSQL: an advisory lock; SQLite: the write
//! lock, `BEGIN IMMEDIATE`) and only then reads the version, so replicas
//! starting together, or a rolling upgrade, apply each migration once. Each
//! is also idempotent (`IF NOT EXISTS`, or a look at the columns first), so
//! a half-applied one can run again.

use rusqlite::Connection;

use super::db::{Db, args};
use super::{Result, StoreError, now_ms};

pub struct Migration {
    pub version: i64,
    pub name: &'static str,
    sqlite: &'static str,
    postgres: &'static str,
}

pub const MIGRATIONS: &[Migration] = &[
    Migration {
        version: 1,
        name: "baseline",
        sqlite: include_str!("migrations/sqlite_0001_baseline.sql"),
        postgres: include_str!("migrations/pg_0001_baseline.sql"),
    },
    Migration {
        version: 2,
        name: "run leases",
        sqlite: include_str!("migrations/0002_run_leases.sql"),
        postgres: include_str!("migrations/0002_run_leases.sql"),
    },
    Migration {
        version: 3,
        name: "run tasks",
        sqlite: include_str!("migrations/0003_run_tasks.sql"),
        postgres: include_str!("migrations/0003_run_tasks.sql"),
    },
    Migration {
        version: 4,
        name: "source tasks",
        sqlite: include_str!("migrations/sqlite_0004_source_tasks.sql"),
        postgres: include_str!("migrations/pg_0004_source_tasks.sql"),
    },
    Migration {
        version: 5,
        name: "audit trail",
        sqlite: include_str!("migrations/0005_audit.sql"),
        postgres: include_str!("migrations/0005_audit.sql"),
    },
    Migration {
        version: 6,
        name: "tool embeddings",
        sqlite: include_str!("migrations/0006_tool_embeddings.sql"),
        postgres: include_str!("migrations/0006_tool_embeddings.sql"),
    },
    Migration {
        version: 7,
        name: "quota budgets",
        sqlite: include_str!("migrations/0007_quota_budgets.sql"),
        postgres: include_str!("migrations/0007_quota_budgets.sql"),
    },
    Migration {
        version: 8,
        name: "audit indexes",
        sqlite: include_str!("migrations/0008_audit_indexes.sql"),
        postgres: include_str!("migrations/0008_audit_indexes.sql"),
    },
    Migration {
        version: 9,
        name: "audit indexes ascending",
        sqlite: include_str!("migrations/0009_audit_ascending.sql"),
        postgres: include_str!("migrations/0009_audit_ascending.sql"),
    },
];

/// The schema version this build writes.
pub fn latest() -> i64 {
    MIGRATIONS.last().map(|m| m.version).unwrap_or(0)
}

/// One row of `schema_migrations`.
#[derive(Debug, Clone, serde::Serialize)]
pub struct Applied {
    pub version: i64,
    pub name: String,
    pub applied_at: i64,
}

const LEDGER: &str = "CREATE TABLE IF NOT EXISTS schema_migrations (
    version     BIGINT PRIMARY KEY,
    name        TEXT NOT NULL,
    applied_at  BIGINT NOT NULL
)";

/// Any PostgreSQL advisory-lock key, the same in every wf.
const PG_LOCK: i64 = 0x7766_5f6d_6967; // "wf_mig"

pub async fn applied(db: &Db) -> Result<Vec<Applied>> {
    db.query(
        "SELECT version, name, applied_at FROM schema_migrations ORDER BY version",
        args![],
    )
    .await?
    .iter()
    .map(|r| {
        Ok(Applied {
            version: r.int(0)?,
            name: r.text(1)?,
            applied_at: r.int(2)?,
        })
    })
    .collect()
}

/// Brings the database to [`latest`]; returns the versions applied now
/// (by this process: another replica may have applied the rest).
/// A database written by a newer wf is refused, never downgraded.
pub async fn run(db: &Db) -> Result<Vec<i64>> {
    let mut done = Vec::new();
    for m in MIGRATIONS {
        let record = format!(
            "INSERT INTO schema_migrations (version, name, applied_at) VALUES ({}, '{}', {}) ON CONFLICT (version) DO NOTHING",
            m.version,
            m.name,
            now_ms()
        );
        let applied = match db {
            Db::Sqlite(_) => db
                .sqlite(|c| sqlite_step(c, m, &record))
                .expect("a SQLite store")?,
            Db::Postgres(p) => {
                p.migrate_step(
                    PG_LOCK,
                    LEDGER,
                    &format!("{}\n;{record};", m.postgres),
                    |current| step_for(current, m.version),
                    Step::Applied,
                )
                .await?
            }
        };
        match applied {
            Step::Applied => done.push(m.version),
            Step::Present => {}
            Step::TooNew(found) => {
                return Err(StoreError::TooNew {
                    found,
                    known: latest(),
                });
            }
        }
    }
    Ok(done)
}

/// What one migration step found, under the lock.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Step {
    Applied,
    /// Already applied (by this wf earlier, or by another replica just now).
    Present,
    /// The database is at this newer version.
    TooNew(i64),
}

/// Decides a step from the version read under the lock.
pub fn step_for(current: i64, version: i64) -> Option<Step> {
    if current > latest() {
        Some(Step::TooNew(current))
    } else if current >= version {
        Some(Step::Present)
    } else {
        None
    }
}

fn sqlite_step(c: &mut Connection, m: &Migration, record: &str) -> Result<Step> {
    // IMMEDIATE: the write lock is taken before the version is read, so a
    // second process on the same file waits (busy_timeout) and then sees it.
    let tx = c.transaction_with_behavior(rusqlite::TransactionBehavior::Immediate)?;
    tx.execute_batch(LEDGER)?;
    let current: i64 = tx.query_row(
        "SELECT COALESCE(MAX(version), 0) FROM schema_migrations",
        [],
        |r| r.get(0),
    )?;
    if let Some(step) = step_for(current, m.version) {
        return Ok(step);
    }
    tx.execute_batch(m.sqlite)?;
    sqlite_columns(&tx, m.version)?;
    tx.execute_batch(record)?;
    tx.commit()?;
    Ok(Step::Applied)
}

/// Columns a migration adds on SQLite, which has no `ADD COLUMN IF NOT
/// EXISTS`: each is added only when missing. Version 1 adds those of tables
/// wf made before versioned migrations (`CREATE TABLE IF NOT EXISTS` leaves
/// old tables alone).
fn sqlite_columns(conn: &Connection, version: i64) -> Result<()> {
    let has_column = |table: &str, column: &str| -> Result<bool> {
        let mut st = conn.prepare(&format!("PRAGMA table_info({table})"))?;
        let names = st
            .query_map([], |r| r.get::<_, String>(1))?
            .collect::<std::result::Result<Vec<_>, _>>()?;
        Ok(names.iter().any(|n| n == column))
    };
    let columns: &[(&str, &str)] = match version {
        1 => &[("node_runs", "error_code"), ("runs", "principal")],
        4 => &[("run_tasks", "source"), ("run_tasks", "source_task")],
        _ => &[],
    };
    for (table, column) in columns {
        if !has_column(table, column)? {
            conn.execute(&format!("ALTER TABLE {table} ADD COLUMN {column} TEXT"), [])?;
        }
    }
    Ok(())
}
