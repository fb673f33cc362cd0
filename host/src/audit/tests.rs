use std::sync::Arc;
use std::sync::atomic::Ordering;
use std::time::Duration;

use serde_json::json;

use super::*;
use crate::config::{AuditConfig, AuditValues};
use crate::store::{AuditFilter, AuditRecord, Store};

fn call(principal: &str, capability: &str) -> AuditRecord {
    AuditRecord {
        principal: principal.into(),
        transport: "http".into(),
        kind: "tool".into(),
        capability: capability.into(),
        decision: "allow".into(),
        outcome: "ok".into(),
        ..AuditRecord::default()
    }
}

fn log_with(config: AuditConfig, store: Arc<Store>) -> Arc<AuditLog> {
    AuditLog::start(&config, store, Path::new("."), Some("r1".into()))
}

#[tokio::test(flavor = "current_thread")]
async fn records_reach_the_store_with_id_time_and_replica() {
    let store = Arc::new(Store::in_memory().unwrap());
    let log = log_with(AuditConfig::default(), store.clone());
    log.record(call("alice", "github__create_issue"));
    log.record(call("bob", "fs__read_file"));
    assert!(log.flush(Duration::from_secs(5)).await);
    let rows = store.audit(&AuditFilter::default()).await.unwrap();
    assert_eq!(rows.len(), 2);
    for r in &rows {
        assert!(r.id.starts_with("aud"), "{}", r.id);
        assert!(r.at > 0);
        assert_eq!(r.replica.as_deref(), Some("r1"));
    }
    assert_eq!(log.counts().written.load(Ordering::Relaxed), 2);
    assert_eq!(log.counts().dropped.load(Ordering::Relaxed), 0);
}

#[tokio::test(flavor = "current_thread")]
async fn a_full_buffer_drops_and_counts_never_waits() {
    let store = Arc::new(Store::in_memory().unwrap());
    let config = AuditConfig {
        buffer: 3,
        ..AuditConfig::default()
    };
    let log = log_with(config, store.clone());
    // One thread, no await: the writer cannot drain meanwhile.
    for i in 0..10 {
        log.record(call("alice", &format!("t{i}")));
    }
    assert_eq!(log.counts().accepted.load(Ordering::Relaxed), 3);
    assert_eq!(log.counts().dropped.load(Ordering::Relaxed), 7);
    assert!(log.flush(Duration::from_secs(5)).await);
    assert_eq!(store.audit_rows().await.unwrap(), 3);
}

#[tokio::test(flavor = "current_thread")]
async fn disabled_records_nothing() {
    let store = Arc::new(Store::in_memory().unwrap());
    let config = AuditConfig {
        enabled: false,
        ..AuditConfig::default()
    };
    let log = log_with(config, store.clone());
    assert!(!log.enabled());
    log.record(call("alice", "x"));
    assert!(log.flush(Duration::from_secs(1)).await);
    assert_eq!(store.audit_rows().await.unwrap(), 0);
}

#[tokio::test(flavor = "current_thread")]
async fn a_small_row_bound_keeps_the_newest() {
    let store = Arc::new(Store::in_memory().unwrap());
    let config = AuditConfig {
        max_rows: 5,
        ..AuditConfig::default()
    };
    let log = log_with(config, store.clone());
    let start = crate::store::now_ms() - 1_000;
    for i in 0..12 {
        let mut r = call("alice", &format!("t{i:02}"));
        r.at = start + i; // distinct milliseconds, within the 30 days
        log.record(r);
        // One batch per record, each followed by a prune.
        assert!(log.flush(Duration::from_secs(5)).await);
    }
    // The last prune follows the last write.
    for _ in 0..500 {
        if log.counts().pruned.load(Ordering::Relaxed) >= 7 {
            break;
        }
        tokio::time::sleep(Duration::from_millis(10)).await;
    }
    let rows = store.audit(&AuditFilter::default()).await.unwrap();
    let caps: Vec<_> = rows.iter().map(|r| r.capability.as_str()).collect();
    assert_eq!(caps, ["t11", "t10", "t09", "t08", "t07"]);
    assert_eq!(log.counts().pruned.load(Ordering::Relaxed), 7);
}

#[test]
fn values_are_kept_only_where_asked() {
    let config = AuditConfig {
        values: vec![
            AuditValues {
                capabilities: "github.create_*".into(),
                arguments: true,
                results: false,
                max_bytes: 64,
            },
            AuditValues {
                capabilities: "fs".into(),
                arguments: false,
                results: true,
                max_bytes: 128,
            },
        ],
        redact: vec!["ghp_[A-Za-z0-9]+".into()],
        ..AuditConfig::default()
    };
    let log = AuditLog {
        tx: None,
        counts: Arc::default(),
        values: values_rules(&config),
        redact: vec![regex::Regex::new("ghp_[A-Za-z0-9]+").unwrap()],
        replica: None,
    };
    let issue = log.keep("github", "github__create_issue");
    assert_eq!(
        issue,
        Keep {
            arguments: Some(64),
            results: None
        }
    );
    assert_eq!(log.keep("github", "github__delete_branch"), Keep::default());
    // A name without the default prefix is the source's own.
    assert_eq!(log.keep("github", "create_issue"), issue);
    assert_eq!(
        log.keep("fs", "read_file"),
        Keep {
            arguments: None,
            results: Some(128)
        }
    );
    let args = json!({"repo": "acme/x", "token": "ghp_abc123"});
    assert_eq!(
        log.arguments(issue, &args),
        json!({"repo": "acme/x", "token": "[redacted]"})
    );
    assert_eq!(
        log.arguments(Keep::default(), &args),
        json!({"repo": "string(6)", "token": "string(10)"})
    );
}
