//! The audit trail's rows (`audit_records`): written in batches by the audit
//! writer, read by `wf audit`, the admin `query_audit` tool and the console,
//! and pruned by age and by count.

use serde::{Deserialize, Serialize};
use serde_json::Value;

use super::db::{Arg, Db, Stmt, args};
use super::{Result, Store};

/// One decision and call, as stored.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
pub struct AuditRecord {
    pub id: String,
    /// Unix milliseconds.
    pub at: i64,
    pub principal: String,
    pub groups: Vec<String>,
    /// `name/version` of the MCP client, when it said.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub client: Option<String>,
    /// `stdio`, `http`, or `internal` (workflow nodes, the console, the admin CLI).
    pub transport: String,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub endpoint: Option<String>,
    /// `tool`, `resource`, `prompt`, `completion`, `subscription`, `node`, `admin`, `console`.
    pub kind: String,
    /// The name the caller used (a client-facing name, a URI, an admin action).
    pub capability: String,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub source: Option<String>,
    /// The source's own name for it (`source.name`).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub target: Option<String>,
    /// `allow`, `deny`, or `held`/`limited` for the stages that refuse before a policy.
    pub decision: String,
    /// The policies that decided it.
    pub policies: Vec<String>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub quota: Option<String>,
    /// `ok`, `tool_error`, `protocol_error`, `cancelled`, `timed_out`, `denied`, `limited`.
    pub outcome: String,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub error: Option<String>,
    pub duration_us: i64,
    pub bytes_in: i64,
    pub bytes_out: i64,
    /// The arguments' shape (keys, types, sizes), or their values where the
    /// operator asked for them.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub arguments: Option<Value>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub result: Option<Value>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub trace_id: Option<String>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub run_id: Option<String>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub node_id: Option<String>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub replica: Option<String>,
}

/// What `wf audit` and `query_audit` filter on; every field is optional.
#[derive(Debug, Clone, Default, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct AuditFilter {
    /// Unix milliseconds, inclusive.
    #[serde(default)]
    pub since: Option<i64>,
    /// Unix milliseconds, exclusive.
    #[serde(default)]
    pub until: Option<i64>,
    #[serde(default)]
    pub principal: Option<String>,
    #[serde(default)]
    pub group: Option<String>,
    /// A glob over the capability (`*` any run of characters, `?` one).
    #[serde(default)]
    pub capability: Option<String>,
    #[serde(default)]
    pub source: Option<String>,
    #[serde(default)]
    pub outcome: Option<String>,
    #[serde(default)]
    pub decision: Option<String>,
    #[serde(default)]
    pub run: Option<String>,
    #[serde(default)]
    pub kind: Option<String>,
    /// Newest first, at most this many (default 100, at most [`MAX_QUERY_ROWS`]).
    #[serde(default)]
    pub limit: Option<usize>,
}

/// The most rows one query returns.
pub const MAX_QUERY_ROWS: usize = 10_000;

const COLUMNS: &str = "id, at, principal, groups, client, transport, endpoint, kind, capability, \
     source, target, decision, policies, quota, outcome, error, duration_us, bytes_in, bytes_out, \
     arguments, result, trace_id, run_id, node_id, replica";

/// Rows per `INSERT` of a batch, largest first: a batch goes in as few
/// statements as these sizes add up to (13 rows: 8 + 4 + 1). One statement
/// of many rows costs SQLite about half as much a row as one a row (the
/// statement's start and end, its cursors, the cached statement taken and
/// given back: docs/performance/http-front.md, "The audit writer, row by
/// row"), and each size is one text, so the connection's statement cache
/// (64 on SQLite: `Store::init`) keeps every one prepared. 32 rows are 800 arguments, far
/// below both backends' limits.
const ROWS_PER_INSERT: [usize; 6] = [32, 16, 8, 4, 2, 1];

/// Arguments of one row, in the order of [`inserts`]' columns.
const ARGS_PER_ROW: usize = 25;

/// The `INSERT` of each size in [`ROWS_PER_INSERT`], in that order, for
/// `backend`. A record already written (its id) is skipped on both.
///
/// On SQLite the statement says `OR IGNORE` rather than only `ON CONFLICT
/// (id) DO NOTHING`: a statement of many rows that could abort halfway (a
/// `NOT NULL` column's default is to abort) needs a statement journal inside
/// the batch's transaction, and past 64 KiB of changed pages SQLite writes
/// it to a new temporary file in `/var/tmp`, a `pwrite` for every page: 70%
/// of the writer's `pwrite`s under 16 sessions (docs/performance/gateways.md,
/// "The audit batch's statement journal"). With `OR IGNORE` nothing can
/// abort, so there is no journal. No record breaks a column's rule (the
/// writer fills each one), and one that did would be skipped, not fail its
/// batch.
fn inserts(backend: &str) -> &'static [String; 6] {
    static SQLITE: std::sync::LazyLock<[String; 6]> =
        std::sync::LazyLock::new(|| insert_texts("INSERT OR IGNORE INTO", ""));
    static POSTGRES: std::sync::LazyLock<[String; 6]> =
        std::sync::LazyLock::new(|| insert_texts("INSERT INTO", " ON CONFLICT (id) DO NOTHING"));
    if backend == "sqlite" {
        &SQLITE
    } else {
        &POSTGRES
    }
}

fn insert_texts(insert: &str, on_conflict: &str) -> [String; 6] {
    ROWS_PER_INSERT.map(|rows| {
        let values = (0..rows)
            .map(|r| {
                let first = r * ARGS_PER_ROW + 1;
                let slots = (first..first + ARGS_PER_ROW)
                    .map(|i| format!("?{i}"))
                    .collect::<Vec<_>>()
                    .join(", ");
                format!("({slots})")
            })
            .collect::<Vec<_>>()
            .join(", ");
        format!("{insert} audit_records ({COLUMNS}) VALUES {values}{on_conflict}")
    })
}

/// `records` as the fewest `INSERT`s of [`ROWS_PER_INSERT`]'s sizes.
fn insert_all(backend: &str, records: &[AuditRecord]) -> Vec<Stmt> {
    let mut out = Vec::new();
    let mut rest = records;
    for (rows, sql) in ROWS_PER_INSERT.iter().zip(inserts(backend).iter()) {
        while rest.len() >= *rows {
            let (these, after) = rest.split_at(*rows);
            let mut values = Vec::with_capacity(rows * ARGS_PER_ROW);
            these.iter().for_each(|r| values.extend(row_args(r)));
            out.push((sql.as_str(), values));
            rest = after;
        }
    }
    out
}

fn json_text(v: &impl Serialize) -> String {
    serde_json::to_string(v).unwrap_or_else(|_| "null".into())
}

/// One record's arguments, in the order of [`inserts`]' columns: an array,
/// moved into its statement's arguments without a list of its own.
fn row_args(r: &AuditRecord) -> [Arg; ARGS_PER_ROW] {
    [
        Arg::from(&r.id),
        Arg::from(r.at),
        Arg::from(&r.principal),
        Arg::from(json_text(&r.groups)),
        Arg::from(r.client.clone()),
        Arg::from(&r.transport),
        Arg::from(r.endpoint.clone()),
        Arg::from(&r.kind),
        Arg::from(&r.capability),
        Arg::from(r.source.clone()),
        Arg::from(r.target.clone()),
        Arg::from(&r.decision),
        Arg::from(json_text(&r.policies)),
        Arg::from(r.quota.clone()),
        Arg::from(&r.outcome),
        Arg::from(r.error.clone()),
        Arg::from(r.duration_us),
        Arg::from(r.bytes_in),
        Arg::from(r.bytes_out),
        Arg::from(r.arguments.as_ref().map(json_text)),
        Arg::from(r.result.as_ref().map(json_text)),
        Arg::from(r.trace_id.clone()),
        Arg::from(r.run_id.clone()),
        Arg::from(r.node_id.clone()),
        Arg::from(r.replica.clone()),
    ]
}

/// A glob as a `LIKE` pattern (escape character `\`).
fn like_pattern(glob: &str) -> String {
    let mut out = String::with_capacity(glob.len());
    for c in glob.chars() {
        match c {
            '*' => out.push('%'),
            '?' => out.push('_'),
            '%' | '_' | '\\' => {
                out.push('\\');
                out.push(c);
            }
            c => out.push(c),
        }
    }
    out
}

/// The query for `filter`: its SQL and its arguments, newest first.
/// `sqlite` says which backend plans it.
fn audit_query(filter: &AuditFilter, sqlite: bool) -> (String, Vec<Arg>) {
    let mut clauses: Vec<String> = Vec::new();
    let mut values: Vec<Arg> = Vec::new();
    let mut add = |clause: &str, value: Arg| {
        values.push(value);
        clauses.push(clause.replace('#', &format!("?{}", values.len())));
    };
    if let Some(t) = filter.since {
        add("at >= #", t.into());
    }
    if let Some(t) = filter.until {
        add("at < #", t.into());
    }
    if let Some(p) = &filter.principal {
        add("principal = #", p.into());
    }
    if let Some(g) = &filter.group {
        // `groups` is a JSON array of strings: match the quoted name.
        add(
            "groups LIKE # ESCAPE '\\'",
            format!("%{}%", like_pattern(&json_text(g))).into(),
        );
    }
    if let Some(c) = &filter.capability {
        add("capability LIKE # ESCAPE '\\'", like_pattern(c).into());
    }
    if let Some(s) = &filter.source {
        add("source = #", s.into());
    }
    if let Some(o) = &filter.outcome {
        // Only other outcomes than `ok` are indexed (migration 8): the
        // literal lets the planner see the partial index applies. `ok`,
        // most rows, is found walking the time index newest first; SQLite
        // without statistics would scan and sort the whole table for an
        // equality it guesses is selective, so its `+` (no index for this
        // term) leaves it the time index. PostgreSQL plans on statistics.
        let clause = match (o == "ok", sqlite) {
            (false, _) => "outcome = # AND outcome <> 'ok'",
            (true, true) => "+outcome = #",
            (true, false) => "outcome = #",
        };
        add(clause, o.into());
    }
    if let Some(d) = &filter.decision {
        add("decision = #", d.into());
    }
    if let Some(r) = &filter.run {
        add("run_id = #", r.into());
    }
    if let Some(k) = &filter.kind {
        add("kind = #", k.into());
    }
    let limit = filter.limit.unwrap_or(100).clamp(1, MAX_QUERY_ROWS);
    let mut sql = format!("SELECT {COLUMNS} FROM audit_records");
    if !clauses.is_empty() {
        sql.push_str(" WHERE ");
        sql.push_str(&clauses.join(" AND "));
    }
    sql.push_str(&format!(" ORDER BY at DESC, id DESC LIMIT {limit}"));
    (sql, values)
}

impl Store {
    /// Writes a batch of records in one transaction (off the runtime's
    /// workers on SQLite).
    pub async fn put_audit(&self, records: &[AuditRecord]) -> Result<()> {
        if records.is_empty() {
            return Ok(());
        }
        self.db.bulk(insert_all(self.db.backend(), records)).await?;
        Ok(())
    }

    /// Records matching `filter`, newest first.
    pub async fn audit(&self, filter: &AuditFilter) -> Result<Vec<AuditRecord>> {
        let sqlite = matches!(self.db, Db::Sqlite(_));
        let (sql, values) = audit_query(filter, sqlite);
        let rows = self.db.query(&sql, values).await?;
        rows.iter()
            .map(|r| {
                let json = |i: usize| r.opt_text(i).and_then(|t| serde_json::from_str(&t).ok());
                let list = |i: usize| -> Vec<String> {
                    r.opt_text(i)
                        .and_then(|t| serde_json::from_str(&t).ok())
                        .unwrap_or_default()
                };
                Ok(AuditRecord {
                    id: r.text(0)?,
                    at: r.int(1)?,
                    principal: r.text(2)?,
                    groups: list(3),
                    client: r.opt_text(4),
                    transport: r.text(5)?,
                    endpoint: r.opt_text(6),
                    kind: r.text(7)?,
                    capability: r.text(8)?,
                    source: r.opt_text(9),
                    target: r.opt_text(10),
                    decision: r.text(11)?,
                    policies: list(12),
                    quota: r.opt_text(13),
                    outcome: r.text(14)?,
                    error: r.opt_text(15),
                    duration_us: r.int(16)?,
                    bytes_in: r.int(17)?,
                    bytes_out: r.int(18)?,
                    arguments: json(19),
                    result: json(20),
                    trace_id: r.opt_text(21),
                    run_id: r.opt_text(22),
                    node_id: r.opt_text(23),
                    replica: r.opt_text(24),
                })
            })
            .collect()
    }

    /// Deletes records older than `before` (Unix ms) and all but the newest
    /// `keep_rows`; returns how many went.
    pub async fn prune_audit(&self, before: i64, keep_rows: u64) -> Result<u64> {
        let by_age = self
            .db
            .execute("DELETE FROM audit_records WHERE at < ?1", args![before])
            .await?;
        let by_rows = self
            .db
            .execute(prune_rows_sql(self.db.backend()), args![keep_rows as i64])
            .await?;
        Ok(by_age + by_rows)
    }

    /// How many records the trail holds.
    pub async fn audit_rows(&self) -> Result<u64> {
        let row = self
            .db
            .query_opt("SELECT COUNT(*) FROM audit_records", args![])
            .await?;
        Ok(row.and_then(|r| r.opt_int(0)).unwrap_or(0) as u64)
    }
}

/// The statement that deletes all but the newest `?1` records. On SQLite
/// the tie between records of one millisecond goes by `rowid` (the order
/// they were written): `audit_by_time` holds `(at, rowid)`, so the walk is
/// that index's alone. Ordered by `id` instead, SQLite sorted the whole
/// trail at every prune, whether anything went or not: 172 ms of CPU for
/// 472,000 rows, where the index walk takes 6 ms
/// (docs/performance/gateways.md, "The audit trail's prune").
fn prune_rows_sql(backend: &str) -> &'static str {
    // `LIMIT <max> OFFSET n`: both backends' way to say "from the n+1th on".
    if backend == "sqlite" {
        "DELETE FROM audit_records WHERE rowid IN (SELECT rowid FROM audit_records \
         ORDER BY at DESC, rowid DESC LIMIT 9223372036854775807 OFFSET ?1)"
    } else {
        "DELETE FROM audit_records WHERE id IN (SELECT id FROM audit_records \
         ORDER BY at DESC, id DESC LIMIT 9223372036854775807 OFFSET ?1)"
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::store::test_stores;

    fn record(id: &str, at: i64, principal: &str, capability: &str, outcome: &str) -> AuditRecord {
        AuditRecord {
            id: id.into(),
            at,
            principal: principal.into(),
            groups: vec!["support".into(), "100%_real".into()],
            transport: "http".into(),
            kind: "tool".into(),
            capability: capability.into(),
            source: capability.split("__").next().map(str::to_string),
            decision: "allow".into(),
            outcome: outcome.into(),
            arguments: Some(serde_json::json!({"repo": "string(9)"})),
            ..AuditRecord::default()
        }
    }

    #[test]
    fn a_batch_goes_in_as_few_inserts_as_its_sizes_allow() {
        let batch = |n: usize| {
            let records: Vec<_> = (0..n)
                .map(|i| record(&format!("r{i}"), i as i64, "alice", "fs__read", "ok"))
                .collect();
            insert_all("sqlite", &records)
                .iter()
                .map(|(sql, values)| {
                    let rows = values.len() / ARGS_PER_ROW;
                    assert_eq!(values.len(), rows * ARGS_PER_ROW);
                    // As many placeholders as arguments, the last one numbered so.
                    assert!(sql.contains(&format!("?{})", values.len())), "{sql}");
                    assert!(!sql.contains(&format!("?{}", values.len() + 1)), "{sql}");
                    rows
                })
                .collect::<Vec<_>>()
        };
        assert_eq!(batch(0), Vec::<usize>::new());
        assert_eq!(batch(1), [1]);
        assert_eq!(batch(13), [8, 4, 1]);
        assert_eq!(batch(70), [32, 32, 4, 2]);
        assert_eq!(batch(512).len(), 16);
    }

    /// Every size of statement writes each of its rows whole, in its own
    /// columns, on both backends; a batch written again adds nothing.
    #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
    async fn a_batch_of_many_rows_reads_back_row_by_row() {
        for s in test_stores().await {
            let records: Vec<AuditRecord> = (0..63)
                .map(|i| AuditRecord {
                    client: Some(format!("client/{i}")),
                    duration_us: i * 7,
                    bytes_out: i * 11,
                    result: (i % 2 == 0).then(|| serde_json::json!({"bytes": i})),
                    replica: Some(format!("replica-{}", i % 3)),
                    ..record(
                        &format!("b{i:02}"),
                        10_000 + i,
                        &format!("p{}", i % 5),
                        "fs__read",
                        "ok",
                    )
                })
                .collect();
            s.put_audit(&records).await.unwrap();
            s.put_audit(&records[10..40]).await.unwrap();
            assert_eq!(s.audit_rows().await.unwrap(), 63);
            let mut back = s
                .audit(&AuditFilter {
                    limit: Some(100),
                    ..Default::default()
                })
                .await
                .unwrap();
            back.reverse();
            assert_eq!(back, records);
        }
    }

    #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
    async fn filters_and_prunes_on_both_backends() {
        for s in test_stores().await {
            s.put_audit(&[
                record("a1", 1_000, "alice", "github__create_issue", "ok"),
                record("a2", 2_000, "bob", "github__delete_branch", "denied"),
                record("a3", 3_000, "alice", "fs__read_file", "tool_error"),
                record("a4", 4_000, "carol", "github_x_create", "ok"),
            ])
            .await
            .unwrap();
            // Written twice (a retried batch): still one row each.
            s.put_audit(&[record("a1", 1_000, "alice", "github__create_issue", "ok")])
                .await
                .unwrap();
            assert_eq!(s.audit_rows().await.unwrap(), 4);

            let ids = |rs: Vec<AuditRecord>| rs.into_iter().map(|r| r.id).collect::<Vec<_>>();
            let all = s.audit(&AuditFilter::default()).await.unwrap();
            assert_eq!(ids(all.clone()), ["a4", "a3", "a2", "a1"]);
            assert_eq!(
                all[3],
                record("a1", 1_000, "alice", "github__create_issue", "ok")
            );

            let by_principal = AuditFilter {
                principal: Some("alice".into()),
                ..Default::default()
            };
            assert_eq!(ids(s.audit(&by_principal).await.unwrap()), ["a3", "a1"]);
            // `_` in the glob is a literal underscore, not any character.
            let by_glob = AuditFilter {
                capability: Some("github__*".into()),
                ..Default::default()
            };
            assert_eq!(ids(s.audit(&by_glob).await.unwrap()), ["a2", "a1"]);
            let by_time_and_outcome = AuditFilter {
                since: Some(2_000),
                until: Some(4_000),
                outcome: Some("denied".into()),
                ..Default::default()
            };
            assert_eq!(ids(s.audit(&by_time_and_outcome).await.unwrap()), ["a2"]);
            let by_group = AuditFilter {
                group: Some("100%_real".into()),
                limit: Some(2),
                ..Default::default()
            };
            assert_eq!(ids(s.audit(&by_group).await.unwrap()), ["a4", "a3"]);
            let no_group = AuditFilter {
                group: Some("support2".into()),
                ..Default::default()
            };
            assert!(s.audit(&no_group).await.unwrap().is_empty());
            // `ok` is the outcome the partial index leaves out (migration 8).
            let ok = AuditFilter {
                outcome: Some("ok".into()),
                ..Default::default()
            };
            assert_eq!(ids(s.audit(&ok).await.unwrap()), ["a4", "a1"]);
            s.put_audit(&[AuditRecord {
                run_id: Some("run-1".into()),
                ..record("a5", 5_000, "alice", "fs__read_file", "ok")
            }])
            .await
            .unwrap();
            let by_run = AuditFilter {
                run: Some("run-1".into()),
                ..Default::default()
            };
            assert_eq!(ids(s.audit(&by_run).await.unwrap()), ["a5"]);

            // By age: a1 goes; by rows: the newest two stay.
            assert_eq!(s.prune_audit(1_500, 10).await.unwrap(), 1);
            assert_eq!(s.prune_audit(0, 2).await.unwrap(), 2);
            assert_eq!(
                ids(s.audit(&AuditFilter::default()).await.unwrap()),
                ["a5", "a4"]
            );
        }
    }

    /// The prune by rows walks the time index alone on SQLite: no sort of
    /// the trail (`USE TEMP B-TREE`), whose cost grew with every row kept.
    /// Among records of one millisecond, the first written goes first.
    #[tokio::test]
    async fn the_prune_by_rows_walks_the_time_index_on_sqlite() {
        let s = Store::in_memory().unwrap();
        let plan =
            s.db.query(
                &format!("EXPLAIN QUERY PLAN {}", prune_rows_sql("sqlite")),
                args![10i64],
            )
            .await
            .unwrap()
            .iter()
            .map(|r| r.text(3).unwrap())
            .collect::<Vec<_>>()
            .join("; ");
        assert!(plan.contains("COVERING INDEX audit_by_time"), "{plan}");
        assert!(!plan.contains("TEMP B-TREE"), "{plan}");
        // Written in this order, all in one millisecond but the last.
        let rows: Vec<AuditRecord> = ["z1", "a2", "m3"]
            .iter()
            .map(|id| record(id, 1_000, "alice", "fs__read_file", "ok"))
            .chain([record("b4", 2_000, "alice", "fs__read_file", "ok")])
            .collect();
        s.put_audit(&rows).await.unwrap();
        assert_eq!(s.prune_audit(0, 3).await.unwrap(), 1);
        let kept: Vec<String> = s
            .audit(&AuditFilter::default())
            .await
            .unwrap()
            .into_iter()
            .map(|r| r.id)
            .collect();
        assert_eq!(kept, ["b4", "m3", "a2"]);
    }

    /// A batch's statements write nothing but the database's own pages on
    /// SQLite: no statement journal. A statement of many rows that may abort
    /// halfway needs one inside a transaction, and past 64 KiB of changed
    /// pages SQLite writes it to a temporary file (a new one in `/var/tmp`
    /// each batch, a `pwrite` for every page). Here each row lands on a
    /// different page of `audit_by_principal`, so 32 rows change far more
    /// than 64 KiB; the writes are counted on this thread alone, before the
    /// commit writes the WAL.
    #[cfg(target_os = "linux")]
    #[tokio::test]
    async fn a_batch_takes_no_statement_journal_on_sqlite() {
        let dir = tempfile::tempdir().unwrap();
        let s = Store::open(dir.path()).unwrap();
        let earlier: Vec<AuditRecord> = (0..4_000)
            .map(|i| {
                record(
                    &format!("e{i:05}"),
                    i,
                    &format!("p{i:05}"),
                    "fs__read",
                    "ok",
                )
            })
            .collect();
        s.put_audit(&earlier).await.unwrap();
        let batch: Vec<AuditRecord> = (0..32)
            .map(|i| {
                record(
                    &format!("n{i:05}"),
                    9_000 + i,
                    &format!("p{:05}a", i * 125),
                    "fs__read",
                    "ok",
                )
            })
            .collect();
        let stmts = insert_all(s.db.backend(), &batch);
        assert_eq!(stmts.len(), 1);
        let mut c = rusqlite::Connection::open(dir.path().join("wf.db")).unwrap();
        let tx = c.transaction().unwrap();
        let writes = || {
            let io = std::fs::read_to_string("/proc/thread-self/io").unwrap();
            io.lines()
                .find_map(|l| l.strip_prefix("syscw: "))
                .unwrap()
                .parse::<u64>()
                .unwrap()
        };
        let before = writes();
        let (sql, args) = &stmts[0];
        assert_eq!(
            super::super::db::sqlite_execute(&tx, sql, args).unwrap(),
            32
        );
        let during = writes() - before;
        tx.commit().unwrap();
        assert_eq!(during, 0, "writes while the statement ran: {during}");
        assert_eq!(s.audit_rows().await.unwrap(), 4_032);
        // A row a column's rule refuses (no principal) is skipped, and the
        // rest of its statement goes in.
        let two = [
            record("x1", 9_500, "alice", "fs__read", "ok"),
            record("x2", 9_501, "bob", "fs__read", "ok"),
        ];
        let (sql, mut args) = insert_all(s.db.backend(), &two).remove(0);
        args[2] = Arg::from(None::<String>);
        assert_eq!(super::super::db::sqlite_execute(&c, sql, &args).unwrap(), 1);
        let kept = s.audit(&AuditFilter::default()).await.unwrap();
        assert_eq!(kept[0].id, "x2");
        assert!(kept.iter().all(|r| r.id != "x1"));
    }

    /// Which index SQLite walks for each filter the operator manual names,
    /// after migration 8 dropped the capability index and made the outcome
    /// and run indexes partial.
    #[tokio::test]
    async fn each_filter_keeps_its_index_on_sqlite() {
        let s = Store::in_memory().unwrap();
        let rows: Vec<AuditRecord> = (0..300)
            .map(|i| {
                record(
                    &format!("r{i:03}"),
                    i,
                    "alice",
                    "github__create_issue",
                    "ok",
                )
            })
            .collect();
        s.put_audit(&rows).await.unwrap();
        let plan = |filter: AuditFilter| {
            let (sql, values) = audit_query(&filter, true);
            let db = &s.db;
            async move {
                db.query(&format!("EXPLAIN QUERY PLAN {sql}"), values)
                    .await
                    .unwrap()
                    .iter()
                    .map(|r| r.text(3).unwrap())
                    .collect::<Vec<_>>()
                    .join("; ")
            }
        };
        let cases = [
            (AuditFilter::default(), "audit_by_time"),
            (
                AuditFilter {
                    principal: Some("alice".into()),
                    ..Default::default()
                },
                "audit_by_principal",
            ),
            (
                AuditFilter {
                    source: Some("github".into()),
                    ..Default::default()
                },
                "audit_by_source",
            ),
            (
                AuditFilter {
                    outcome: Some("denied".into()),
                    ..Default::default()
                },
                "audit_by_outcome",
            ),
            (
                AuditFilter {
                    run: Some("run-1".into()),
                    ..Default::default()
                },
                "audit_by_run",
            ),
            // A glob walks the time index newest first, as it always did.
            (
                AuditFilter {
                    capability: Some("github__*".into()),
                    ..Default::default()
                },
                "audit_by_time",
            ),
            (
                AuditFilter {
                    outcome: Some("ok".into()),
                    ..Default::default()
                },
                "audit_by_time",
            ),
        ];
        for (filter, index) in cases {
            let shown = format!("{filter:?}");
            let p = plan(filter).await;
            assert!(p.contains(&format!("INDEX {index}")), "{shown}: {p}");
            // Newest first straight off an ascending time index, walked
            // backward (migration 9): never the whole match sorted. A run's
            // rows are few; its index has no time.
            if index != "audit_by_run" {
                assert!(!p.contains("TEMP B-TREE FOR ORDER BY"), "{shown}: {p}");
            }
        }
    }
}
