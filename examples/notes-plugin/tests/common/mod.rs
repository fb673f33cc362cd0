//! Helpers shared by the test files (each file is its own test binary).

#![allow(dead_code)] // not every test binary uses every helper

use std::path::PathBuf;
use std::sync::atomic::{AtomicUsize, Ordering};

use serde_json::{Value, json};
use wf_notes::NotesPlugin;
use wf_plugin_api::ErrorCode;
use wf_plugin_api::testing::{Harness, TestSource};

pub fn harness() -> Harness {
    Harness::start::<NotesPlugin>().expect("plugin starts")
}

/// The default source, on a fresh data directory.
pub fn notes() -> TestSource {
    harness()
        .source("notes", "notes", json!({}))
        .expect("source is created")
}

/// A fresh, empty directory for one test, removed when dropped.
pub struct TempDir(pub PathBuf);

impl TempDir {
    pub fn new(what: &str) -> Self {
        static NEXT: AtomicUsize = AtomicUsize::new(0);
        let n = NEXT.fetch_add(1, Ordering::Relaxed);
        let path =
            std::env::temp_dir().join(format!("wf-notes-test-{}-{n}-{what}", std::process::id()));
        let _ = std::fs::remove_dir_all(&path);
        std::fs::create_dir_all(&path).expect("temp dir");
        Self(path)
    }
}

impl Drop for TempDir {
    fn drop(&mut self) {
        let _ = std::fs::remove_dir_all(&self.0);
    }
}

/// Runs `name` as a tool and as a node; both must succeed with the same
/// output, which is returned. Only for capabilities without side effects.
pub async fn succeeds(src: &TestSource, name: &str, args: Value) -> Value {
    let result = src.call_tool(name, args.clone()).await.expect("call_tool");
    assert!(!result.is_error, "{name}: {result:?}");
    let output = src.run_node(name, args).await.expect("run_node");
    assert_eq!(result.structured_content, Some(output.clone()), "{name}");
    assert_eq!(result.content[0]["text"], output.to_string(), "{name}");
    output
}

/// Runs `name` as a tool and as a node; the tool must report an `isError`
/// result and the node an error of `code`, with the same message (returned).
pub async fn fails(src: &TestSource, name: &str, args: Value, code: ErrorCode) -> String {
    let result = src.call_tool(name, args.clone()).await.expect("call_tool");
    assert!(result.is_error, "{name}: {result:?}");
    assert_eq!(result.structured_content, None, "{name}");
    let text = result.content[0]["text"]
        .as_str()
        .expect("text content")
        .to_string();
    let err = src.run_node(name, args).await.expect_err("run_node fails");
    assert_eq!(err.code, code, "{name}: {err:?}");
    assert_eq!(err.message, text, "{name}");
    text
}

/// Adds a note through the tool and returns its id.
pub async fn add(src: &TestSource, title: &str, body: &str, tags: &[&str]) -> String {
    let result = src
        .call_tool("add", json!({"title": title, "body": body, "tags": tags}))
        .await
        .expect("call_tool add");
    assert!(!result.is_error, "add: {result:?}");
    let out = result.structured_content.expect("structured content");
    out["id"].as_str().expect("id").to_string()
}

/// The titles of a `{"notes": [...]}` output, in order.
pub fn titles(output: &Value) -> Vec<String> {
    output["notes"]
        .as_array()
        .expect("notes array")
        .iter()
        .map(|n| n["title"].as_str().expect("title").to_string())
        .collect()
}

/// [`fails`] with `invalid_arguments`: returns the message.
pub async fn invalid(src: &TestSource, name: &str, args: Value) -> String {
    fails(src, name, args, ErrorCode::InvalidArguments).await
}
