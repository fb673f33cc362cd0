//! The two backends under one small interface: statements written once
//! with `?N` placeholders, arguments and cells of two types (integers and
//! text), and a batch of statements as one transaction.

use std::sync::{Arc, Mutex};

use rusqlite::Connection;

use super::pg::PgPool;
use super::{Result, StoreError};

/// An argument: typed even when null, since PostgreSQL checks types.
#[derive(Debug, Clone)]
pub enum Arg {
    Int(Option<i64>),
    Text(Option<String>),
}

impl From<i64> for Arg {
    fn from(v: i64) -> Self {
        Arg::Int(Some(v))
    }
}
impl From<Option<i64>> for Arg {
    fn from(v: Option<i64>) -> Self {
        Arg::Int(v)
    }
}
impl From<&str> for Arg {
    fn from(v: &str) -> Self {
        Arg::Text(Some(v.to_string()))
    }
}
impl From<&String> for Arg {
    fn from(v: &String) -> Self {
        Arg::Text(Some(v.clone()))
    }
}
impl From<String> for Arg {
    fn from(v: String) -> Self {
        Arg::Text(Some(v))
    }
}
impl From<Option<&str>> for Arg {
    fn from(v: Option<&str>) -> Self {
        Arg::Text(v.map(str::to_string))
    }
}
impl From<Option<String>> for Arg {
    fn from(v: Option<String>) -> Self {
        Arg::Text(v)
    }
}

/// `args![a, b, ...]`: a `Vec<Arg>`.
macro_rules! args {
    ($($a:expr),* $(,)?) => { vec![$($crate::store::db::Arg::from($a)),*] };
}
pub(crate) use args;

/// One value read back.
#[derive(Debug, Clone, PartialEq)]
pub enum Cell {
    Null,
    Int(i64),
    Text(String),
}

/// One row read back, by column position.
#[derive(Debug, Clone)]
pub struct Row(pub Vec<Cell>);

impl Row {
    fn cell(&self, i: usize) -> &Cell {
        self.0.get(i).unwrap_or(&Cell::Null)
    }

    pub fn text(&self, i: usize) -> Result<String> {
        self.opt_text(i)
            .ok_or_else(|| StoreError::Decode(format!("column {i}: expected text, found null")))
    }

    pub fn opt_text(&self, i: usize) -> Option<String> {
        match self.cell(i) {
            Cell::Text(s) => Some(s.clone()),
            Cell::Int(n) => Some(n.to_string()),
            Cell::Null => None,
        }
    }

    pub fn int(&self, i: usize) -> Result<i64> {
        self.opt_int(i).ok_or_else(|| {
            StoreError::Decode(format!(
                "column {i}: expected an integer, found {:?}",
                self.cell(i)
            ))
        })
    }

    pub fn opt_int(&self, i: usize) -> Option<i64> {
        match self.cell(i) {
            Cell::Int(n) => Some(*n),
            Cell::Text(s) => s.parse().ok(),
            Cell::Null => None,
        }
    }
}

/// A statement and its arguments.
pub type Stmt = (&'static str, Vec<Arg>);

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
            Db::Sqlite(c) => sqlite_query(&lock(c), sql, &args),
            Db::Postgres(p) => p.query(sql, &args).await,
        }
    }

    pub async fn query_opt(&self, sql: &str, args: Vec<Arg>) -> Result<Option<Row>> {
        Ok(self.query(sql, args).await?.into_iter().next())
    }

    /// Returns the number of rows changed.
    pub async fn execute(&self, sql: &str, args: Vec<Arg>) -> Result<u64> {
        match self {
            Db::Sqlite(c) => sqlite_execute(&lock(c), sql, &args),
            Db::Postgres(p) => p.execute(sql, &args).await,
        }
    }

    /// Runs every statement in one transaction; returns each one's count.
    pub async fn batch(&self, stmts: Vec<Stmt>) -> Result<Vec<u64>> {
        match self {
            Db::Sqlite(c) => sqlite_batch(&mut lock(c), &stmts),
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
            Db::Sqlite(c) => {
                let mut c = lock(c);
                let tx = c.transaction()?;
                let found = sqlite_query(&tx, select, &args)?;
                for r in &found {
                    for (sql, args) in then(r) {
                        sqlite_execute(&tx, sql, &args)?;
                    }
                }
                tx.commit()?;
                Ok(found)
            }
            Db::Postgres(p) => p.select_then(pg_select, &args, then).await,
        }
    }

    /// SQLite's connection, for what only SQLite has (its old-schema fixups).
    pub fn sqlite<T>(&self, f: impl FnOnce(&mut Connection) -> Result<T>) -> Option<Result<T>> {
        match self {
            Db::Sqlite(c) => Some(f(&mut lock(c))),
            Db::Postgres(_) => None,
        }
    }
}

fn lock(c: &Mutex<Connection>) -> std::sync::MutexGuard<'_, Connection> {
    c.lock().unwrap_or_else(|p| p.into_inner())
}

fn sqlite_args(args: &[Arg]) -> Vec<rusqlite::types::Value> {
    use rusqlite::types::Value as V;
    args.iter()
        .map(|a| match a {
            Arg::Int(Some(n)) => V::Integer(*n),
            Arg::Text(Some(s)) => V::Text(s.clone()),
            Arg::Int(None) | Arg::Text(None) => V::Null,
        })
        .collect()
}

fn sqlite_query(c: &Connection, sql: &str, args: &[Arg]) -> Result<Vec<Row>> {
    use rusqlite::types::ValueRef;
    let mut st = c.prepare_cached(sql)?;
    let n = st.column_count();
    let rows = st.query_map(rusqlite::params_from_iter(sqlite_args(args)), |r| {
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

fn sqlite_execute(c: &Connection, sql: &str, args: &[Arg]) -> Result<u64> {
    let mut st = c.prepare_cached(sql)?;
    Ok(st.execute(rusqlite::params_from_iter(sqlite_args(args)))? as u64)
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

/// `?N` → `$N`: statements are written once, in SQLite's spelling.
pub fn pg_sql(sql: &str) -> String {
    let mut out = String::with_capacity(sql.len());
    let mut chars = sql.chars().peekable();
    let mut quoted = false;
    while let Some(c) = chars.next() {
        if c == '\'' {
            quoted = !quoted;
        }
        if c == '?' && !quoted && chars.peek().is_some_and(char::is_ascii_digit) {
            out.push('$');
        } else {
            out.push(c);
        }
    }
    out
}

#[cfg(test)]
mod tests {
    use super::pg_sql;

    #[test]
    fn placeholders_become_numbered_dollars_outside_quotes() {
        assert_eq!(
            pg_sql("SELECT a FROM t WHERE b = ?1 AND c = '?2' AND d = ?12"),
            "SELECT a FROM t WHERE b = $1 AND c = '?2' AND d = $12"
        );
    }
}
