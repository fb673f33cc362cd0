//! One test per problem kind, against a small synthetic catalog.

use std::sync::Arc;

use serde_json::{Value, json};
use wf_plugin_api::{Catalog, NodeSpec};

use super::*;
use crate::catalog::Snapshot;
use crate::workflow::catalog::PlannerCatalog;
use crate::workflow::model::Workflow;

fn catalog() -> PlannerCatalog {
    let std = Catalog::default()
        .node(NodeSpec::new(
            "template",
            "render",
            json!({"type": "object", "properties": {"template": {"type": "string"}, "values": {"type": "object"}}, "required": ["template", "values"], "additionalProperties": false}),
            json!({"type": "object", "properties": {"text": {"type": "string"}}, "additionalProperties": false}),
        ))
        .node(NodeSpec::new(
            "sleep",
            "sleep",
            json!({"type": "object", "properties": {"ms": {"type": "integer"}}, "required": ["ms"]}),
            json!({"type": "object", "properties": {"slept_ms": {"type": "integer"}}}),
        ));
    let pw = Catalog::default().node(NodeSpec::new(
        "browser_navigate",
        "go",
        json!({"type": "object", "properties": {"url": {"type": "string"}}, "required": ["url"]}),
        json!({}),
    ));
    PlannerCatalog::from_snapshot(&Snapshot {
        sources: vec![
            ("wf.std".into(), Arc::new(std)),
            ("pw".into(), Arc::new(pw)),
        ],
    })
}

fn check(doc: Value) -> Vec<Problem> {
    validate(&Workflow::from_value(&doc).unwrap(), &catalog())
}

fn kinds(p: &[Problem]) -> Vec<&'static str> {
    p.iter().map(|p| p.kind.as_str()).collect()
}

#[test]
fn a_good_workflow_has_no_problems() {
    let p = check(json!({
        "inputs": {"type": "object", "properties": {"url": {"type": "string"}, "n": {"type": "integer"}}},
        "nodes": [
            {"id": "go", "use": "pw.browser_navigate", "args": {"url": {"$ref": "inputs.url"}}},
            {"id": "t", "use": "wf.std.template", "args": {"template": "x", "values": {"a": {"$ref": "nodes.go.output"}}}, "after": ["go"]},
            {"id": "s", "use": "wf.std.sleep", "args": {"ms": {"$ref": "inputs.n"}}, "when": {"$ref": "nodes.t.output.text"}}
        ],
        "outputs": {"text": {"$ref": "nodes.t.output.text"}}
    }));
    assert!(p.is_empty(), "{p:?}");
}

#[test]
fn unknown_capability() {
    let p = check(json!({"nodes": [{"id": "a", "use": "wf.std.templat", "args": {}}]}));
    assert_eq!(kinds(&p), ["unknown_capability"]);
    assert_eq!(
        (p[0].node.as_deref(), p[0].path.as_str()),
        (Some("a"), "nodes[0].use")
    );
    let p = check(json!({"nodes": [{"id": "a", "use": "other.template", "args": {}}]}));
    assert!(
        p[0].message.contains("wf.std.template"),
        "suggests the near miss: {}",
        p[0].message
    );
}

#[test]
fn near_miss_suggestions_use_edit_distance() {
    let message = |uses: &str| {
        let p = check(json!({"nodes": [{"id": "a", "use": uses, "args": {}}]}));
        assert_eq!(kinds(&p), ["unknown_capability"]);
        p[0].message.clone()
    };
    assert_eq!(
        message("wf.std.templat"),
        "no capability \"wf.std.templat\": did you mean wf.std.template?"
    );
    // Typos in longer names, too.
    assert!(message("wf.std.slep").contains("did you mean wf.std.sleep?"));
    assert!(message("pw.browser_navgate").contains("did you mean pw.browser_navigate?"));
    // Nothing close: no guess, a pointer instead.
    assert_eq!(
        message("counter.increment"),
        "no capability \"counter.increment\": call list_capabilities to find one"
    );
}

#[test]
fn missing_argument() {
    let p =
        check(json!({"nodes": [{"id": "a", "use": "wf.std.template", "args": {"template": "x"}}]}));
    assert_eq!(kinds(&p), ["missing_argument"]);
    assert_eq!(p[0].path, "nodes[0].args.values");
}

#[test]
fn argument_not_in_the_schema() {
    let p = check(
        json!({"nodes": [{"id": "a", "use": "wf.std.template", "args": {"template": "x", "values": {}, "extra": 1}}]}),
    );
    assert_eq!(kinds(&p), ["unknown_argument"]);
    assert_eq!(p[0].path, "nodes[0].args.extra");
}

#[test]
fn reference_to_unknown_node_input_or_output() {
    let p = check(json!({
        "inputs": {"type": "object", "properties": {"url": {"type": "string"}}},
        "nodes": [
            {"id": "a", "use": "pw.browser_navigate", "args": {"url": {"$ref": "inputs.nope"}}},
            {"id": "b", "use": "wf.std.template", "args": {"template": {"$ref": "nodes.ghost.output"}, "values": {}}},
            {"id": "c", "use": "wf.std.template", "args": {"template": {"$ref": "nodes.b.output.txt"}, "values": {}}},
            {"id": "d", "use": "wf.std.sleep", "args": {"ms": 1}, "after": ["phantom"]}
        ]
    }));
    assert_eq!(
        kinds(&p),
        [
            "unknown_input",
            "unknown_node",
            "unknown_output",
            "unknown_node"
        ]
    );
    assert_eq!(p[0].path, "nodes[0].args.url");
    assert_eq!(p[2].node.as_deref(), Some("c"));
    assert_eq!(p[3].path, "nodes[3].after[0]");
}

#[test]
fn type_conflict() {
    let p = check(json!({
        "inputs": {"type": "object", "properties": {"n": {"type": "string"}}},
        "nodes": [{"id": "s", "use": "wf.std.sleep", "args": {"ms": {"$ref": "inputs.n"}}}]
    }));
    assert_eq!(kinds(&p), ["type_conflict"]);
    assert!(p[0].message.contains("integer") && p[0].message.contains("string"));
    // integer into number is fine; unknown types are not checked.
    let ok = check(json!({
        "nodes": [
            {"id": "a", "use": "wf.std.sleep", "args": {"ms": 1}},
            {"id": "b", "use": "wf.std.sleep", "args": {"ms": {"$ref": "nodes.a.output.slept_ms"}}}
        ]
    }));
    assert!(ok.is_empty(), "{ok:?}");
}

#[test]
fn cycle() {
    let p = check(json!({"nodes": [
        {"id": "a", "use": "wf.std.sleep", "args": {"ms": {"$ref": "nodes.b.output.slept_ms"}}},
        {"id": "b", "use": "wf.std.sleep", "args": {"ms": 1}, "after": ["a"]}
    ]}));
    assert_eq!(kinds(&p), ["cycle"]);
    assert!(p[0].message.contains("a -> b"), "{}", p[0].message);
    let p = check(
        json!({"nodes": [{"id": "a", "use": "wf.std.sleep", "args": {"ms": {"$ref": "nodes.a.output.slept_ms"}}}]}),
    );
    assert!(kinds(&p).contains(&"cycle"));
}

#[test]
fn output_that_refers_to_nothing() {
    let p = check(json!({
        "nodes": [{"id": "a", "use": "wf.std.sleep", "args": {"ms": 1}}],
        "outputs": {"x": {"$ref": "nodes.zzz.output"}, "y": {"$ref": "nodes.a.output.nope"}, "z": {"$ref": "inputs.q"}, "ok": {"$ref": "nodes.a.output.slept_ms"}}
    }));
    assert_eq!(
        kinds(&p),
        ["dangling_output", "dangling_output", "dangling_output"]
    );
    assert_eq!(p[0].path, "outputs.x");
    assert!(p.iter().all(|p| p.node.is_none()));
}

#[test]
fn ids_references_and_sessions() {
    let p = check(json!({
        "sessions": {"nowhere": "run"},
        "nodes": [
            {"id": "a", "use": "wf.std.sleep", "args": {"ms": 1}},
            {"id": "a", "use": "wf.std.sleep", "args": {"ms": {"$ref": "outputs.a"}}},
            {"id": "b c", "use": "wf.std.sleep", "args": {"ms": 1}}
        ]
    }));
    assert_eq!(
        kinds(&p),
        [
            "duplicate_node",
            "invalid_id",
            "malformed_reference",
            "unknown_source"
        ]
    );
}
