//! Versioned schema migrations for both backends, recorded in
//! `schema_migrations`. Each is idempotent (`IF NOT EXISTS`), runs in one
//! transaction and, on PostgreSQL, under an advisory lock, so replicas
//! starting together apply each once.

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
        sqlite: include_str!("migrations/0004_source_tasks.sql"),
        postgres: include_str!("migrations/0004_source_tasks.sql"),
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

/// Brings the database to [`latest`]; returns the versions applied now.
/// A database written by a newer wf is refused, never downgraded.
pub async fn run(db: &Db) -> Result<Vec<i64>> {
    match db {
        // Under the lock: two replicas creating it at once would collide.
        Db::Postgres(p) => p.locked_script(PG_LOCK, LEDGER).await?,
        Db::Sqlite(_) => {
            db.execute(LEDGER, args![]).await?;
        }
    }
    let current = db
        .query_opt("SELECT MAX(version) FROM schema_migrations", args![])
        .await?
        .and_then(|r| r.opt_int(0))
        .unwrap_or(0);
    if current > latest() {
        return Err(StoreError::TooNew {
            found: current,
            known: latest(),
        });
    }
    let mut done = Vec::new();
    for m in MIGRATIONS.iter().filter(|m| m.version > current) {
        let record = format!(
            "INSERT INTO schema_migrations (version, name, applied_at) VALUES ({}, '{}', {}) ON CONFLICT (version) DO NOTHING",
            m.version,
            m.name,
            now_ms()
        );
        match db {
            Db::Sqlite(_) => {
                db.sqlite(|c| {
                    let tx = c.transaction()?;
                    tx.execute_batch(m.sqlite)?;
                    if m.version == 1 {
                        legacy_columns(&tx)?;
                    }
                    tx.execute_batch(&record)?;
                    tx.commit()?;
                    Ok(())
                })
                .expect("a SQLite store")?;
            }
            Db::Postgres(p) => {
                p.locked_script(PG_LOCK, &format!("{}\n;{record};", m.postgres))
                    .await?
            }
        }
        done.push(m.version);
    }
    Ok(done)
}

/// Columns added to SQLite tables after wf first made them (before
/// versioned migrations): `CREATE TABLE IF NOT EXISTS` leaves old tables alone.
fn legacy_columns(conn: &Connection) -> Result<()> {
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
