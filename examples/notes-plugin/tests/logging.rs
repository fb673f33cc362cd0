//! The plugin's `tracing` events reach the host's log through the ABI.
//!
//! In its own test binary on purpose: the export macro installs the
//! forwarding subscriber once per process (for the first plugin instance),
//! so only the first `Harness` of a process records log lines.

mod common;

use serde_json::json;

#[tokio::test]
async fn adding_a_note_logs_it_at_info() {
    let h = common::harness();
    let src = h.source("notes", "notes", json!({})).unwrap();
    let id = common::add(&src, "Logged", "body", &[]).await;

    let logs = h.recorded.lock().unwrap().logs.clone();
    let added: Vec<_> = logs
        .iter()
        .filter(|(_, _, message)| message.starts_with("note added"))
        .collect();
    assert_eq!(added.len(), 1, "{logs:?}");
    let (level, target, message) = added[0];
    assert_eq!(*level, 3, "info");
    assert_eq!(target, "wf_notes::caps");
    assert!(message.contains(&format!("id={id}")), "{message}");
    assert!(message.contains("source=notes"), "{message}");
    assert!(message.contains("title=Logged"), "{message}");
}
