//! The audit trail: one record per decision and call, handed over by the
//! call pipeline's record stage and written in batches off the call path.
//!
//! A call never waits on the audit store: [`AuditLog::record`] puts the
//! record in a bounded buffer (`[audit] buffer`) and returns; a full buffer
//! drops the record and counts it (`dropped`). One writer task takes what
//! waits (up to [`BATCH`] at a time) and writes it in one transaction,
//! retrying a failed batch with back-off for up to [`RETRY_FOR`]. A crash
//! loses what waits in the buffer and the batch being written: at most
//! `buffer` + [`BATCH`] records. A pruning task deletes records past
//! `retention_days` and beyond `max_rows`.

pub mod export;
pub mod query;
pub mod shape;

use std::path::Path;
use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering};
use std::time::Duration;

use globset::{Glob, GlobMatcher};
use regex::Regex;
use serde_json::Value;
use tokio::sync::mpsc;

use crate::config::AuditConfig;
use crate::store::{AuditRecord, Store};

/// Most records written in one transaction.
pub const BATCH: usize = 512;
/// How long the writer gathers records after the first one before writing
/// them: one transaction and one wake-up per tick under load, not one per
/// call (a transaction per call cost a whole HTTP call about 100 µs p50 on a
/// 2-core machine; docs/benchmarks.md, "Audit trail").
pub const GATHER_FOR: Duration = Duration::from_millis(100);
/// How long a failed batch is retried before it is dropped and counted.
pub const RETRY_FOR: Duration = Duration::from_secs(30);
/// Old records are pruned at least this often, and whenever a tenth of
/// `max_rows` has been written since the last time.
const PRUNE_EVERY: Duration = Duration::from_secs(600);

#[derive(Debug, Clone, Copy)]
struct Retention {
    age_ms: i64,
    max_rows: u64,
}

/// What a capability's records keep besides shapes: each side's byte bound.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct Keep {
    pub arguments: Option<usize>,
    pub results: Option<usize>,
}

/// Counts since the start, for `/metrics`, `status` and tests.
#[derive(Debug, Default)]
pub struct Counts {
    /// Handed to the writer.
    pub accepted: AtomicU64,
    /// Written to the store.
    pub written: AtomicU64,
    /// Dropped: the buffer was full, or a batch failed for [`RETRY_FOR`].
    pub dropped: AtomicU64,
    /// Of `dropped`, those the writer gave up on after taking them.
    pub batch_dropped: AtomicU64,
    /// Deleted by retention.
    pub pruned: AtomicU64,
}

pub struct AuditLog {
    tx: Option<mpsc::Sender<AuditRecord>>,
    counts: Arc<Counts>,
    values: Vec<(GlobMatcher, Keep)>,
    redact: Vec<Regex>,
    replica: Option<String>,
}

impl AuditLog {
    /// A log that records nothing (`[audit] enabled = false`, and tools
    /// that serve no calls).
    pub fn disabled() -> Arc<AuditLog> {
        Arc::new(AuditLog {
            tx: None,
            counts: Arc::default(),
            values: Vec::new(),
            redact: Vec::new(),
            replica: None,
        })
    }

    /// Starts the writer and the pruner on the current runtime. `base_dir`
    /// resolves a relative export file; `replica` is stamped on each record.
    pub fn start(
        config: &AuditConfig,
        store: Arc<Store>,
        base_dir: &Path,
        replica: Option<String>,
    ) -> Arc<AuditLog> {
        if !config.enabled {
            return Self::disabled();
        }
        let (tx, rx) = mpsc::channel(config.buffer.max(1));
        let counts = Arc::new(Counts::default());
        let export = config
            .export
            .as_ref()
            .map(|e| export::JsonLines::new(base_dir.join(&e.file), e.rotate_mb, e.keep));
        let retention = Retention {
            age_ms: i64::from(config.retention_days) * 86_400_000,
            max_rows: config.max_rows,
        };
        tokio::spawn(write_loop(rx, store, counts.clone(), export, retention));
        Arc::new(AuditLog {
            tx: Some(tx),
            counts,
            values: values_rules(config),
            // Checked at config load (AuditConfig::problems).
            redact: config
                .redact
                .iter()
                .filter_map(|p| Regex::new(p).ok())
                .collect(),
            replica,
        })
    }

    pub fn enabled(&self) -> bool {
        self.tx.is_some()
    }

    pub fn counts(&self) -> &Counts {
        &self.counts
    }

    /// What records of `source`'s capability `name` keep besides shapes.
    pub fn keep(&self, source: &str, name: &str) -> Keep {
        if self.values.is_empty() {
            return Keep::default();
        }
        // `name` is the one clients know (`<source>__<tool>` by default);
        // the rules name the source's own.
        let prefix = format!("{}__", source.replace('.', "_"));
        let own = name.strip_prefix(prefix.as_str()).unwrap_or(name);
        let dotted = format!("{source}.{own}");
        let mut keep = Keep::default();
        for (glob, k) in &self.values {
            if glob.is_match(&dotted) {
                keep.arguments = keep.arguments.or(k.arguments);
                keep.results = keep.results.or(k.results);
            }
        }
        keep
    }

    /// What a record keeps of `arguments`: their shape, or their redacted
    /// values cut at `keep`'s bound.
    pub fn arguments(&self, keep: Keep, arguments: &Value) -> Value {
        match keep.arguments {
            Some(max) => shape::values(arguments, &self.redact, max),
            None => shape::shape(arguments),
        }
    }

    /// What a record keeps of a result of `bytes` bytes.
    pub fn result(&self, keep: Keep, result: &Value, bytes: usize) -> Value {
        match keep.results {
            Some(max) => shape::values(result, &self.redact, max),
            None => shape::result_shape(result, bytes),
        }
    }

    /// Hands `record` to the writer; never waits. A record without an id or
    /// a time gets them here.
    pub fn record(&self, mut record: AuditRecord) {
        let Some(tx) = &self.tx else { return };
        if record.id.is_empty() {
            record.id = crate::store::new_id("aud");
        }
        if record.at == 0 {
            record.at = crate::store::now_ms();
        }
        if record.replica.is_none() {
            record.replica.clone_from(&self.replica);
        }
        match tx.try_send(record) {
            Ok(()) => {
                self.counts.accepted.fetch_add(1, Ordering::Relaxed);
            }
            Err(_) => {
                crate::telemetry::metrics::audit_records("dropped", 1);
                let n = self.counts.dropped.fetch_add(1, Ordering::Relaxed) + 1;
                // The first drop, then one line per thousand.
                if n == 1 || n.is_multiple_of(1000) {
                    tracing::warn!(
                        dropped = n,
                        "audit: the record buffer is full ([audit] buffer); records are being dropped"
                    );
                }
            }
        }
    }

    /// Waits (up to `limit`) until every accepted record is written or
    /// dropped: at shutdown, and in tests.
    pub async fn flush(&self, limit: Duration) -> bool {
        let deadline = tokio::time::Instant::now() + limit;
        loop {
            let c = &self.counts;
            let settled = c.written.load(Ordering::Relaxed) + self.batch_drops();
            if settled >= c.accepted.load(Ordering::Relaxed) {
                return true;
            }
            if tokio::time::Instant::now() >= deadline {
                return false;
            }
            tokio::time::sleep(Duration::from_millis(10)).await;
        }
    }

    /// Records the writer gave up on (the rest of `dropped` never entered the buffer).
    fn batch_drops(&self) -> u64 {
        self.counts.batch_dropped.load(Ordering::Relaxed)
    }
}

fn values_rules(config: &AuditConfig) -> Vec<(GlobMatcher, Keep)> {
    config
        .values
        .iter()
        .filter_map(|v| {
            // A bare source name means every capability of it.
            let pattern = if v.capabilities.contains(['.', '*', '?', '[']) {
                v.capabilities.clone()
            } else {
                format!("{}.*", v.capabilities)
            };
            let glob = Glob::new(&pattern).ok()?.compile_matcher();
            let keep = Keep {
                arguments: v.arguments.then_some(v.max_bytes),
                results: v.results.then_some(v.max_bytes),
            };
            Some((glob, keep))
        })
        .collect()
}

async fn write_loop(
    mut rx: mpsc::Receiver<AuditRecord>,
    store: Arc<Store>,
    counts: Arc<Counts>,
    mut export: Option<export::JsonLines>,
    retention: Retention,
) {
    let mut batch = Vec::with_capacity(BATCH);
    let prune_after = (retention.max_rows / 10).max(1);
    prune(&store, &counts, retention).await;
    let (mut since_prune, mut pruned_at) = (0u64, tokio::time::Instant::now());
    while rx.recv_many(&mut batch, BATCH).await > 0 {
        gather(&mut rx, &mut batch).await;
        if let Some(out) = export.as_mut()
            && let Err(e) = out.write(&batch)
        {
            tracing::warn!(error = %e, "audit: cannot write the export file");
        }
        if crate::telemetry::otlp_logs::enabled() {
            batch.iter().for_each(otlp_log);
        }
        let started = tokio::time::Instant::now();
        let mut wait = Duration::from_millis(100);
        loop {
            match store.put_audit(&batch).await {
                Ok(()) => {
                    counts
                        .written
                        .fetch_add(batch.len() as u64, Ordering::Relaxed);
                    since_prune += batch.len() as u64;
                    break;
                }
                Err(e) if started.elapsed() < RETRY_FOR => {
                    tracing::debug!(error = %e, records = batch.len(), "audit: write failed; retrying");
                    tokio::time::sleep(wait).await;
                    wait = (wait * 2).min(Duration::from_secs(5));
                }
                Err(e) => {
                    let n = batch.len() as u64;
                    counts.dropped.fetch_add(n, Ordering::Relaxed);
                    counts.batch_dropped.fetch_add(n, Ordering::Relaxed);
                    crate::telemetry::metrics::audit_records("dropped", n);
                    tracing::warn!(error = %e, records = n, "audit: the store refused a batch for 30 s; dropped");
                    break;
                }
            }
        }
        batch.clear();
        if since_prune >= prune_after || pruned_at.elapsed() >= PRUNE_EVERY {
            prune(&store, &counts, retention).await;
            (since_prune, pruned_at) = (0, tokio::time::Instant::now());
        }
    }
}

/// Adds what arrives within [`GATHER_FOR`] to `batch`, up to [`BATCH`].
/// It sleeps, then takes what waits: a task waiting on the channel would be
/// woken by every call's record (a cross-thread wake per call).
async fn gather(rx: &mut mpsc::Receiver<AuditRecord>, batch: &mut Vec<AuditRecord>) {
    if batch.len() >= BATCH {
        return;
    }
    tokio::time::sleep(GATHER_FOR).await;
    while batch.len() < BATCH {
        match rx.try_recv() {
            Ok(record) => batch.push(record),
            Err(_) => return,
        }
    }
}

/// One record as an OTLP log: the record as its JSON body, the fields a
/// collector filters on as attributes.
fn otlp_log(r: &AuditRecord) {
    let at = std::time::UNIX_EPOCH + Duration::from_millis(r.at.max(0) as u64);
    let mut attributes = vec![
        ("wf.principal", r.principal.clone()),
        ("wf.capability", r.capability.clone()),
        ("wf.kind", r.kind.clone()),
        ("wf.decision", r.decision.clone()),
        ("wf.outcome", r.outcome.clone()),
        ("wf.transport", r.transport.clone()),
    ];
    for (k, v) in [
        ("wf.source", &r.source),
        ("wf.run_id", &r.run_id),
        ("wf.replica", &r.replica),
        ("trace_id", &r.trace_id),
    ] {
        if let Some(v) = v {
            attributes.push((k, v.clone()));
        }
    }
    let body = serde_json::to_string(r).unwrap_or_default();
    crate::telemetry::otlp_logs::emit("wf.audit", at, body, attributes);
}

async fn prune(store: &Store, counts: &Counts, retention: Retention) {
    match store
        .prune_audit(
            crate::store::now_ms() - retention.age_ms,
            retention.max_rows,
        )
        .await
    {
        Ok(0) => {}
        Ok(n) => {
            counts.pruned.fetch_add(n, Ordering::Relaxed);
            tracing::debug!(deleted = n, "audit: pruned old records");
        }
        Err(e) => tracing::debug!(error = %e, "audit: cannot prune"),
    }
}

#[cfg(test)]
mod tests;
