//! The two backends under one small interface: statements written once
//! with `?N` placeholders, arguments and cells of two types (integers and
//! text), and a batch of statements as one transaction.

use std::sync::{Arc, Mutex, TryLockError};
use std::time::Duration;

use rusqlite::Connection;

use super::pg::PgPool;
pub(crate) use super::sql::args;
pub use super::sql::{Arg, Cell, Row, Stmt, pg_sql};
use super::{Result, StoreError};

/// Where the state lives.
pub enum Db {
    /// One connection: every call is a short locked call.
    Sqlite(Arc<Mutex<Connection>>),
    Postgres(Box<PgPool>),
}

impl Db {
    pub fn backend(&self) -> &'static str {
        match self {
            Db::Sqlite(_) => "sqlite",
            Db::Postgres(_) => "postgres",
        }
    }

    pub async fn query(&self, sql: &str, args: Vec<Arg>) -> Result<Vec<Row>> {
        match self {
            Db::Sqlite(c) => sqlite_call(c, |c| sqlite_query(c, sql, &args)),
            Db::Postgres(p) => p.query(sql, &args).await,
        }
    }

    pub async fn query_opt(&self, sql: &str, args: Vec<Arg>) -> Result<Option<Row>> {
        Ok(self.query(sql, args).await?.into_iter().next())
    }

    /// Returns the number of rows changed.
    pub async fn execute(&self, sql: &str, args: Vec<Arg>) -> Result<u64> {
        match self {
            Db::Sqlite(c) => sqlite_call(c, |c| sqlite_execute(c, sql, &args)),
            Db::Postgres(p) => p.execute(sql, &args).await,
        }
    }

    /// Runs every statement in one transaction; returns each one's count.
    pub async fn batch(&self, stmts: Vec<Stmt>) -> Result<Vec<u64>> {
        match self {
            Db::Sqlite(c) => sqlite_call(c, |c| sqlite_batch(c, &stmts)),
            Db::Postgres(p) => p.batch(&stmts).await,
        }
    }

    /// [`Db::batch`] for the bulk writers (node records, usage counts): on
    /// SQLite off the runtime's workers, so a commit never holds up a
    /// scheduler.
    pub async fn bulk(&self, stmts: Vec<Stmt>) -> Result<Vec<u64>> {
        match self {
            Db::Sqlite(c) => {
                let c = c.clone();
                tokio::task::spawn_blocking(move || sqlite_batch(&mut lock(&c), &stmts))
                    .await
                    .map_err(|e| StoreError::Decode(format!("the writer task failed: {e}")))?
            }
            Db::Postgres(p) => p.batch(&stmts).await,
        }
    }

    /// [`Db::bulk`] behind a fence: `guard` (or, without one, the first
    /// statement) runs first in the same transaction and must change a row
    /// (locking it until the commit), or nothing is committed and the answer
    /// is `None`. A run's writes are fenced by its lease row, so a replica
    /// that lost the lease writes nothing. With a guard, its count is left
    /// out of the answer.
    pub async fn fenced(&self, guard: Option<Stmt>, stmts: Vec<Stmt>) -> Result<Option<Vec<u64>>> {
        let guarded = guard.is_some();
        let all: Vec<Stmt> = guard.into_iter().chain(stmts).collect();
        let counts = match self {
            Db::Sqlite(c) => {
                let c = c.clone();
                tokio::task::spawn_blocking(move || -> Result<Option<Vec<u64>>> {
                    let mut c = lock(&c);
                    let tx = c.transaction()?;
                    let mut counts = Vec::with_capacity(all.len());
                    for (i, (sql, args)) in all.iter().enumerate() {
                        let n = sqlite_execute(&tx, sql, args)?;
                        if i == 0 && n == 0 {
                            return Ok(None);
                        }
                        counts.push(n);
                    }
                    tx.commit()?;
                    Ok(Some(counts))
                })
                .await
                .map_err(|e| StoreError::Decode(format!("the writer task failed: {e}")))??
            }
            Db::Postgres(p) => p.transaction(all.iter().collect(), true).await?,
        };
        Ok(counts.map(|mut c| {
            if guarded {
                c.remove(0);
            }
            c
        }))
    }

    /// In one transaction: `select` (on PostgreSQL `pg_lock` is appended,
    /// e.g. `FOR UPDATE SKIP LOCKED`), then the statements `then` makes for
    /// each row found. Returns the rows found.
    pub async fn select_then(
        &self,
        select: &'static str,
        pg_select: &'static str,
        args: Vec<Arg>,
        then: &(dyn Fn(&Row) -> Vec<Stmt> + Sync),
    ) -> Result<Vec<Row>> {
        match self {
            Db::Sqlite(c) => sqlite_call(c, |c| {
                let tx = c.transaction()?;
                let found = sqlite_query(&tx, select, &args)?;
                for r in &found {
                    for (sql, args) in then(r) {
                        sqlite_execute(&tx, sql, &args)?;
                    }
                }
                tx.commit()?;
                Ok(found)
            }),
            Db::Postgres(p) => p.select_then(pg_select, &args, then).await,
        }
    }

    /// SQLite's connection, for what only SQLite has (its old-schema fixups).
    pub fn sqlite<T>(&self, f: impl FnOnce(&mut Connection) -> Result<T>) -> Option<Result<T>> {
        match self {
            Db::Sqlite(c) => Some(crate::blocking::off_worker(|| f(&mut lock(c)))),
            Db::Postgres(_) => None,
        }
    }
}

/// How long a statement waits for another connection's write lock.
pub(super) const BUSY_TIMEOUT: Duration = Duration::from_secs(5);

/// Runs `f` on the SQLite connection from a runtime's thread. In place when
/// it answers at once: the connection free and the database not locked (no
/// busy wait). Else it can wait, for the connection (the audit writer holds
/// it through a batch) or for SQLite's busy timeout (another process holds
/// the database's write lock): then it runs again off the worker, so a
/// locked store never holds up the calls that do not need it (one worker is
/// `wf serve`'s default over stdio and on two CPUs). A statement that found
/// the database busy changed nothing, and a transaction that did is rolled
/// back, so running `f` again is safe.
fn sqlite_call<T>(c: &Mutex<Connection>, f: impl Fn(&mut Connection) -> Result<T>) -> Result<T> {
    let free = match c.try_lock() {
        Ok(g) => Some(g),
        Err(TryLockError::Poisoned(p)) => Some(p.into_inner()),
        Err(TryLockError::WouldBlock) => None,
    };
    if let Some(mut conn) = free {
        let _ = conn.busy_timeout(Duration::ZERO);
        let r = f(&mut conn);
        let _ = conn.busy_timeout(BUSY_TIMEOUT);
        if !is_busy(&r) {
            return r;
        }
    }
    crate::blocking::off_worker(|| f(&mut lock(c)))
}

/// Whether SQLite answered "busy" or "locked" (another connection's lock).
fn is_busy<T>(r: &Result<T>) -> bool {
    use rusqlite::ErrorCode::{DatabaseBusy, DatabaseLocked};
    matches!(r, Err(StoreError::Db(rusqlite::Error::SqliteFailure(e, _)))
        if matches!(e.code, DatabaseBusy | DatabaseLocked))
}

fn lock(c: &Mutex<Connection>) -> std::sync::MutexGuard<'_, Connection> {
    c.lock().unwrap_or_else(|p| p.into_inner())
}

/// An argument bound as it is: text by reference (SQLite copies it as it
/// binds), not cloned into an owned value first.
impl rusqlite::ToSql for Arg {
    fn to_sql(&self) -> rusqlite::Result<rusqlite::types::ToSqlOutput<'_>> {
        use rusqlite::types::{ToSqlOutput, ValueRef};
        Ok(ToSqlOutput::Borrowed(match self {
            Arg::Int(Some(n)) => ValueRef::Integer(*n),
            Arg::Text(Some(s)) => ValueRef::Text(s.as_bytes()),
            Arg::Int(None) | Arg::Text(None) => ValueRef::Null,
        }))
    }
}

fn sqlite_query(c: &Connection, sql: &str, args: &[Arg]) -> Result<Vec<Row>> {
    use rusqlite::types::ValueRef;
    let mut st = c.prepare_cached(sql)?;
    let n = st.column_count();
    let rows = st.query_map(rusqlite::params_from_iter(args), |r| {
        (0..n)
            .map(|i| {
                Ok(match r.get_ref(i)? {
                    ValueRef::Null => Cell::Null,
                    ValueRef::Integer(v) => Cell::Int(v),
                    ValueRef::Real(v) => Cell::Int(v as i64),
                    ValueRef::Text(t) | ValueRef::Blob(t) => {
                        Cell::Text(String::from_utf8_lossy(t).into_owned())
                    }
                })
            })
            .collect::<rusqlite::Result<Vec<_>>>()
            .map(Row)
    })?;
    Ok(rows.collect::<std::result::Result<_, _>>()?)
}

pub(super) fn sqlite_execute(c: &Connection, sql: &str, args: &[Arg]) -> Result<u64> {
    let mut st = c.prepare_cached(sql)?;
    Ok(st.execute(rusqlite::params_from_iter(args))? as u64)
}

fn sqlite_batch(c: &mut Connection, stmts: &[Stmt]) -> Result<Vec<u64>> {
    let tx = c.transaction()?;
    let mut counts = Vec::with_capacity(stmts.len());
    for (sql, args) in stmts {
        counts.push(sqlite_execute(&tx, sql, args)?);
    }
    tx.commit()?;
    Ok(counts)
}
