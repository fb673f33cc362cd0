//! PostgreSQL through `tokio-postgres`: a small bounded pool of connections,
//! each with its own cache of prepared statements (bounded too).

use std::collections::HashMap;
use std::pin::Pin;
use std::str::FromStr;
use std::sync::Mutex;
use std::time::Duration;

use tokio::sync::{Semaphore, SemaphorePermit};
use tokio_postgres::types::{ToSql, Type};
use tokio_postgres::{AsyncMessage, Client, NoTls, Statement};

use super::sql::{Arg, Cell, Row, Stmt, pg_sql};
use super::tls::Rustls;
use super::{Result, StoreError};

/// Prepared statements kept per connection; the store has a few dozen.
const STATEMENT_CACHE: usize = 128;
/// How long a caller waits for a free connection.
const ACQUIRE_TIMEOUT: Duration = Duration::from_secs(10);
const CONNECT_TIMEOUT: Duration = Duration::from_secs(5);
/// An advisory-lock key for creating the schema (replicas start together).
const SCHEMA_LOCK: i64 = 0x7766_5f73_6368; // "wf_sch"

pub struct PgPool {
    config: tokio_postgres::Config,
    /// Some with `sslmode=require`.
    tls: Option<Rustls>,
    idle: Mutex<Vec<Conn>>,
    permits: Semaphore,
    /// The URL with its password masked, for messages.
    shown: String,
}

pub struct Conn {
    pub client: Client,
    statements: HashMap<String, Statement>,
}

impl Conn {
    async fn prepare(&mut self, sql: &str) -> Result<Statement> {
        if let Some(s) = self.statements.get(sql) {
            return Ok(s.clone());
        }
        let st = self
            .client
            .prepare(&pg_sql(sql))
            .await
            .map_err(|e| pg_error(e, sql))?;
        if self.statements.len() >= STATEMENT_CACHE {
            self.statements.clear();
        }
        self.statements.insert(sql.to_string(), st.clone());
        Ok(st)
    }
}

/// A connection taken from the pool; it goes back when dropped.
pub struct Pooled<'a> {
    conn: Option<Conn>,
    pool: &'a PgPool,
    _permit: SemaphorePermit<'a>,
}

impl std::ops::Deref for Pooled<'_> {
    type Target = Conn;
    fn deref(&self) -> &Conn {
        self.conn
            .as_ref()
            .expect("a pooled connection is present until dropped")
    }
}

impl std::ops::DerefMut for Pooled<'_> {
    fn deref_mut(&mut self) -> &mut Conn {
        self.conn
            .as_mut()
            .expect("a pooled connection is present until dropped")
    }
}

impl Drop for Pooled<'_> {
    fn drop(&mut self) {
        if let Some(c) = self.conn.take()
            && !c.client.is_closed()
        {
            self.pool
                .idle
                .lock()
                .unwrap_or_else(|p| p.into_inner())
                .push(c);
        }
    }
}

/// `postgres://user:secret@host/db` → `postgres://user:***@host/db`.
pub fn redact(url: &str) -> String {
    let Some((scheme, rest)) = url.split_once("://") else {
        return url.to_string();
    };
    let (authority, tail) = match rest.find(['/', '?']) {
        Some(i) => rest.split_at(i),
        None => (rest, ""),
    };
    let masked = match authority.rsplit_once('@') {
        Some((user_info, host)) => match user_info.split_once(':') {
            Some((user, _)) => format!("{user}:***@{host}"),
            None => authority.to_string(),
        },
        None => authority.to_string(),
    };
    // A password given as a query parameter is masked too.
    let tail = tail
        .split('&')
        .map(|kv| match kv.split_once("password=") {
            Some((pre, _)) => format!("{pre}password=***"),
            None => kv.to_string(),
        })
        .collect::<Vec<_>>()
        .join("&");
    format!("{scheme}://{masked}{tail}")
}

fn pg_error(e: tokio_postgres::Error, context: &str) -> StoreError {
    let code = e.code().map(|c| c.code().to_string());
    let message = match e.as_db_error() {
        Some(db) => format!("{}: {}", db.severity(), db.message()),
        None => {
            let mut m = e.to_string();
            let mut src = std::error::Error::source(&e);
            while let Some(s) = src {
                m.push_str(&format!(": {s}"));
                src = s.source();
            }
            m
        }
    };
    let context = context
        .split_whitespace()
        .take(6)
        .collect::<Vec<_>>()
        .join(" ");
    StoreError::Pg {
        message: format!("{message} (in `{context} …`)"),
        code,
    }
}

impl PgPool {
    /// Checks the URL and connects once, so a wrong URL fails at start.
    /// `schema`: tables live there (created if missing) instead of `public`.
    /// `ca_file`: more roots for `sslmode=require` (a private CA).
    pub async fn connect(
        url: &str,
        max_connections: usize,
        schema: Option<&str>,
        ca_file: Option<&std::path::Path>,
    ) -> Result<Self> {
        let shown = redact(url);
        let mut config = tokio_postgres::Config::from_str(url)
            .map_err(|e| StoreError::Config(format!("{shown}: {e}")))?;
        // TLS only when asked for: `prefer` (the default) stays plain, as a
        // server's self-signed certificate would otherwise fail verification.
        let tls = match config.get_ssl_mode() {
            tokio_postgres::config::SslMode::Require => Some(
                Rustls::new(ca_file).map_err(|e| StoreError::Config(format!("{shown}: {e}")))?,
            ),
            _ => None,
        };
        if config.get_connect_timeout().is_none() {
            config.connect_timeout(CONNECT_TIMEOUT);
        }
        if config.get_application_name().is_none() {
            config.application_name("wf");
        }
        if let Some(schema) = schema {
            if schema.is_empty()
                || !schema
                    .chars()
                    .all(|c| c.is_ascii_alphanumeric() || c == '_')
            {
                return Err(StoreError::Config(format!(
                    "schema {schema:?}: letters, digits and _ only"
                )));
            }
            config.options(format!("-c search_path={schema}"));
        }
        let pool = Self {
            config,
            tls,
            idle: Mutex::new(Vec::new()),
            permits: Semaphore::new(max_connections.clamp(1, 64)),
            shown,
        };
        if let Some(schema) = schema {
            pool.locked_script(
                SCHEMA_LOCK,
                &format!("CREATE SCHEMA IF NOT EXISTS {schema}"),
            )
            .await?;
        } else {
            drop(pool.get().await?);
        }
        Ok(pool)
    }

    /// The URL without its password.
    pub fn shown(&self) -> &str {
        &self.shown
    }

    async fn open(&self) -> Result<Conn> {
        let (client, mut messages) =
            connect(&self.config, self.tls.as_ref())
                .await
                .map_err(|e| {
                    let StoreError::Pg { message, code } = pg_error(e, "connect") else {
                        unreachable!()
                    };
                    StoreError::Pg {
                        message: format!("{}: {message}", self.shown),
                        code,
                    }
                })?;
        tokio::spawn(async move {
            use futures::StreamExt;
            while let Some(m) = messages.next().await {
                if let Err(e) = m {
                    tracing::debug!("a PostgreSQL connection closed: {e}");
                    return;
                }
            }
        });
        Ok(Conn {
            client,
            statements: HashMap::new(),
        })
    }

    /// A connection: an idle one, or a new one while under the bound.
    pub async fn get(&self) -> Result<Pooled<'_>> {
        let permit = tokio::time::timeout(ACQUIRE_TIMEOUT, self.permits.acquire())
            .await
            .map_err(|_| {
                StoreError::Config(format!(
                    "{}: no free connection within {} s",
                    self.shown,
                    ACQUIRE_TIMEOUT.as_secs()
                ))
            })?
            .map_err(|_| StoreError::Config("the connection pool is closed".into()))?;
        let idle = loop {
            let c = self.idle.lock().unwrap_or_else(|p| p.into_inner()).pop();
            match c {
                Some(c) if c.client.is_closed() => continue,
                other => break other,
            }
        };
        let conn = match idle {
            Some(c) => c,
            None => self.open().await?,
        };
        Ok(Pooled {
            conn: Some(conn),
            pool: self,
            _permit: permit,
        })
    }

    pub async fn query(&self, sql: &str, args: &[Arg]) -> Result<Vec<Row>> {
        let mut c = self.get().await?;
        let st = c.prepare(sql).await?;
        let params = params(args);
        let rows = c
            .client
            .query(&st, &refs(&params))
            .await
            .map_err(|e| pg_error(e, sql))?;
        rows.iter().map(|r| row(r, sql)).collect()
    }

    pub async fn execute(&self, sql: &str, args: &[Arg]) -> Result<u64> {
        let mut c = self.get().await?;
        let st = c.prepare(sql).await?;
        let params = params(args);
        c.client
            .execute(&st, &refs(&params))
            .await
            .map_err(|e| pg_error(e, sql))
    }

    pub async fn batch(&self, stmts: &[Stmt]) -> Result<Vec<u64>> {
        Ok(self
            .transaction(stmts.iter().collect(), false)
            .await?
            .expect("an unchecked batch always commits"))
    }

    /// Every statement in one transaction (see [`super::db::Db::fenced`]);
    /// with `check_first`, `None` when the first changed no row, and then
    /// nothing is committed.
    pub async fn transaction(
        &self,
        all: Vec<&Stmt>,
        check_first: bool,
    ) -> Result<Option<Vec<u64>>> {
        let mut c = self.get().await?;
        let mut prepared = Vec::with_capacity(all.len());
        for (sql, _) in &all {
            prepared.push(c.prepare(sql).await?);
        }
        let tx = c
            .client
            .transaction()
            .await
            .map_err(|e| pg_error(e, "BEGIN"))?;
        // Pipelined: every statement is sent before the first answer is
        // awaited (in order, one transaction), so a batch of node records
        // costs about one round trip, not one per record. A fence is first,
        // so its row lock is held before anything else is written.
        let params_all: Vec<Vec<Param>> = all.iter().map(|(_, args)| params(args)).collect();
        let all_refs: Vec<Vec<&(dyn ToSql + Sync)>> = params_all.iter().map(|p| refs(p)).collect();
        let counts = futures::future::try_join_all(all.iter().zip(&prepared).zip(&all_refs).map(
            |((stmt, st), r)| {
                let tx = &tx;
                let sql = stmt.0;
                async move { tx.execute(st, r).await.map_err(|e| pg_error(e, sql)) }
            },
        ))
        .await?;
        if check_first && counts.first() == Some(&0) {
            tx.rollback().await.map_err(|e| pg_error(e, "ROLLBACK"))?;
            return Ok(None);
        }
        tx.commit().await.map_err(|e| pg_error(e, "COMMIT"))?;
        Ok(Some(counts))
    }

    /// Runs `sql` (several statements, no arguments) in one transaction,
    /// under a lock that other replicas starting at once wait for.
    pub async fn locked_script(&self, lock: i64, sql: &str) -> Result<()> {
        let mut c = self.get().await?;
        let tx = c
            .client
            .transaction()
            .await
            .map_err(|e| pg_error(e, "BEGIN"))?;
        tx.execute("SELECT pg_advisory_xact_lock($1)", &[&lock])
            .await
            .map_err(|e| pg_error(e, "advisory lock"))?;
        tx.batch_execute(sql).await.map_err(|e| pg_error(e, sql))?;
        tx.commit().await.map_err(|e| pg_error(e, "COMMIT"))
    }

    /// One migration in one transaction: the advisory lock first, then the
    /// ledger (created if missing) and the version read under the lock, and
    /// `sql` (which records the version) only when `decide`, given the
    /// version read, has no other step; then the step is `applied`.
    pub async fn migrate_step<S>(
        &self,
        lock: i64,
        ledger: &str,
        sql: &str,
        decide: impl FnOnce(i64) -> Option<S>,
        applied: S,
    ) -> Result<S> {
        let mut c = self.get().await?;
        let tx = c
            .client
            .transaction()
            .await
            .map_err(|e| pg_error(e, "BEGIN"))?;
        tx.execute("SELECT pg_advisory_xact_lock($1)", &[&lock])
            .await
            .map_err(|e| pg_error(e, "advisory lock"))?;
        tx.batch_execute(ledger)
            .await
            .map_err(|e| pg_error(e, ledger))?;
        let current: i64 = tx
            .query_one(
                "SELECT COALESCE(MAX(version), 0)::BIGINT FROM schema_migrations",
                &[],
            )
            .await
            .map_err(|e| pg_error(e, "schema version"))?
            .get(0);
        if let Some(step) = decide(current) {
            return Ok(step);
        }
        tx.batch_execute(sql).await.map_err(|e| pg_error(e, sql))?;
        tx.commit().await.map_err(|e| pg_error(e, "COMMIT"))?;
        Ok(applied)
    }

    /// In one transaction: `select` (it may lock its rows, `FOR UPDATE SKIP
    /// LOCKED`), then the statements `then` makes for each row found.
    pub async fn select_then(
        &self,
        select: &str,
        args: &[Arg],
        then: &(dyn Fn(&Row) -> Vec<Stmt> + Sync),
    ) -> Result<Vec<Row>> {
        let mut c = self.get().await?;
        let st = c.prepare(select).await?;
        let tx = c
            .client
            .transaction()
            .await
            .map_err(|e| pg_error(e, "BEGIN"))?;
        let first = params(args);
        let found = tx
            .query(&st, &refs(&first))
            .await
            .map_err(|e| pg_error(e, select))?
            .iter()
            .map(|r| row(r, select))
            .collect::<Result<Vec<_>>>()?;
        for r in &found {
            for (sql, args) in then(r) {
                let each = params(&args);
                tx.execute(&pg_sql(sql), &refs(&each))
                    .await
                    .map_err(|e| pg_error(e, sql))?;
            }
        }
        tx.commit().await.map_err(|e| pg_error(e, "COMMIT"))?;
        Ok(found)
    }
}

impl PgPool {
    /// A connection of its own, outside the pool, that `LISTEN`s on
    /// `wf_cancel` (stops the runs named there that this replica executes)
    /// and `wf_deployments` and `wf_config` (see events.rs). Reconnects after a second when
    /// the connection drops.
    pub(super) fn listen(&self, signals: std::sync::Arc<super::Signals>) {
        let config = self.config.clone();
        let tls = self.tls.clone();
        let shown = self.shown.clone();
        tokio::spawn(async move {
            let mut again = false;
            loop {
                if let Err(e) = listen_once(&config, tls.as_ref(), &signals, again).await {
                    tracing::warn!(at = %shown, "replica event listener: {e}; reconnecting");
                }
                again = true;
                tokio::time::sleep(Duration::from_secs(1)).await;
                if std::sync::Arc::strong_count(&signals) == 1 {
                    return; // the store is gone
                }
            }
        });
    }
}

/// The server's messages outside replies (notifications, notices); the
/// connection runs while this is polled, and it ends when the connection does.
type Messages = Pin<
    Box<
        dyn futures::Stream<Item = std::result::Result<AsyncMessage, tokio_postgres::Error>> + Send,
    >,
>;

async fn connect(
    config: &tokio_postgres::Config,
    tls: Option<&Rustls>,
) -> std::result::Result<(Client, Messages), tokio_postgres::Error> {
    Ok(match tls {
        None => {
            let (client, mut conn) = config.connect(NoTls).await?;
            let messages: Messages =
                Box::pin(futures::stream::poll_fn(move |cx| conn.poll_message(cx)));
            (client, messages)
        }
        Some(tls) => {
            let (client, mut conn) = config.connect(tls.clone()).await?;
            let messages: Messages =
                Box::pin(futures::stream::poll_fn(move |cx| conn.poll_message(cx)));
            (client, messages)
        }
    })
}

async fn listen_once(
    config: &tokio_postgres::Config,
    tls: Option<&Rustls>,
    signals: &std::sync::Arc<super::Signals>,
    again: bool,
) -> Result<()> {
    use futures::StreamExt;
    let (client, mut messages) = connect(config, tls)
        .await
        .map_err(|e| pg_error(e, "connect"))?;
    let (tx, mut rx) = tokio::sync::mpsc::unbounded_channel::<(String, String)>();
    let driver = tokio::spawn(async move {
        while let Some(Ok(m)) = messages.next().await {
            if let AsyncMessage::Notification(n) = m
                && tx
                    .send((n.channel().to_string(), n.payload().to_string()))
                    .is_err()
            {
                return;
            }
        }
    });
    client
        .batch_execute("LISTEN wf_cancel; LISTEN wf_deployments; LISTEN wf_config")
        .await
        .map_err(|e| pg_error(e, "LISTEN"))?;
    if again {
        // Announcements made while this replica was not listening are lost:
        // catch up on what they would have said.
        signals.resync();
    }
    while let Some((channel, payload)) = rx.recv().await {
        signals.heard(&channel, &payload);
        if std::sync::Arc::strong_count(signals) == 1 {
            break;
        }
    }
    driver.abort();
    Err(StoreError::Config("the listening connection closed".into()))
}

type Param = Box<dyn ToSql + Sync + Send>;

fn params(args: &[Arg]) -> Vec<Param> {
    args.iter()
        .map(|a| -> Param {
            match a {
                Arg::Int(v) => Box::new(*v),
                Arg::Text(v) => Box::new(v.clone()),
            }
        })
        .collect()
}

fn refs(params: &[Param]) -> Vec<&(dyn ToSql + Sync)> {
    params
        .iter()
        .map(|p| p.as_ref() as &(dyn ToSql + Sync))
        .collect()
}

fn row(r: &tokio_postgres::Row, sql: &str) -> Result<Row> {
    let decode = |e: tokio_postgres::Error| pg_error(e, sql);
    let cells = r
        .columns()
        .iter()
        .enumerate()
        .map(|(i, col)| {
            Ok(match *col.type_() {
                Type::INT8 => r
                    .try_get::<_, Option<i64>>(i)
                    .map_err(decode)?
                    .map(Cell::Int),
                Type::INT4 => r
                    .try_get::<_, Option<i32>>(i)
                    .map_err(decode)?
                    .map(|v| Cell::Int(v.into())),
                Type::INT2 => r
                    .try_get::<_, Option<i16>>(i)
                    .map_err(decode)?
                    .map(|v| Cell::Int(v.into())),
                Type::BOOL => r
                    .try_get::<_, Option<bool>>(i)
                    .map_err(decode)?
                    .map(|v| Cell::Int(v.into())),
                _ => r
                    .try_get::<_, Option<String>>(i)
                    .map_err(decode)?
                    .map(Cell::Text),
            }
            .unwrap_or(Cell::Null))
        })
        .collect::<Result<Vec<_>>>()?;
    Ok(Row(cells))
}

#[cfg(test)]
mod tests {
    use super::redact;

    #[test]
    fn a_password_never_shows() {
        assert_eq!(
            redact("postgres://wf:s3cret@db.local:5432/wf"),
            "postgres://wf:***@db.local:5432/wf"
        );
        assert_eq!(
            redact("postgres://wf@db/wf?password=s3cret&sslmode=disable"),
            "postgres://wf@db/wf?password=***&sslmode=disable"
        );
        assert_eq!(redact("postgres://db/wf"), "postgres://db/wf");
    }
}
