use std::sync::Arc;

use serde_json::json;
use wf_plugin_api::{Catalog, Tool};

use super::*;
use crate::catalog::Snapshot;
use crate::projection::NameRules;

fn tool(name: &str, read_only: bool) -> Tool {
    let mut t = Tool::new(
        name,
        "d",
        json!({"type": "object", "properties": {"repo": {"type": "string"}, "q": {"type": "string"}}}),
    );
    t.extra
        .insert("annotations".into(), json!({"readOnlyHint": read_only}));
    t
}

fn projection(sources: &[(&str, &[(&str, bool)])]) -> Arc<Projection> {
    let mut s = Snapshot::default();
    for (name, tools) in sources {
        let c = tools
            .iter()
            .fold(Catalog::default(), |c, (t, ro)| c.tool(tool(t, *ro)));
        s.sources.push((name.to_string(), Arc::new(c)));
    }
    s.sources.sort_by(|a, b| a.0.cmp(&b.0));
    Arc::new(Projection::build(&s, NameRules { max_len: 64 }))
}

fn endpoint(toml_text: &str) -> Endpoint {
    let c: EndpointConfig = toml::from_str(toml_text).unwrap();
    Endpoint::new("e", c, CatalogConfig::default(), 64).unwrap()
}

fn shown(v: &View) -> Vec<String> {
    v.tools().map(|t| t.shown.name.clone()).collect()
}

fn proj() -> Arc<Projection> {
    projection(&[
        (
            "github",
            &[
                ("get_issue", true),
                ("create_issue", false),
                ("search", true),
            ],
        ),
        ("tickets", &[("list", true), ("close", false)]),
    ])
}

#[test]
fn selectors_all_apply() {
    let p = proj();
    let e = endpoint(
        r#"sources = ["github"]
tags = ["read_only"]"#,
    );
    assert_eq!(shown(&e.view(&p)), ["github__get_issue", "github__search"]);
    let e = endpoint(
        r#"tools = ["*__list", "*__close"]
exclude = ["*close"]"#,
    );
    assert_eq!(shown(&e.view(&p)), ["tickets__list"]);
    let none = endpoint("");
    assert!(none.view(&p).is_empty());
    assert!(findings(&none, &p).contains(&"selects nothing".to_string()));
}

#[test]
fn a_transform_selects_renames_and_is_found_both_ways() {
    let p = proj();
    let e = endpoint(
        r#"tools = ["tickets__*"]
[transform.github__create_issue]
name = "file_bug"
description = "Files a bug."
fixed = { repo = "acme/site" }"#,
    );
    let v = e.view(&p);
    assert_eq!(shown(&v), ["file_bug", "tickets__list", "tickets__close"]);
    let t = v.tool("file_bug").unwrap();
    assert_eq!(t.original.name, "github__create_issue");
    assert_eq!(t.shown.item.name, "file_bug");
    assert_eq!(t.shown.item.description.as_deref(), Some("Files a bug."));
    assert!(
        t.shown.item.input_schema["properties"]
            .get("repo")
            .is_none()
    );
    assert!(v.tool("github__create_issue").is_none());
    assert_eq!(
        v.by_original("github__create_issue").unwrap().shown.name,
        "file_bug"
    );
    // The same projection gives the same view; a new one, a new view.
    assert!(Arc::ptr_eq(&v, &e.view(&p)));
    assert!(!Arc::ptr_eq(&v, &e.view(&proj())));
}

#[test]
fn alias_collisions_are_reported_and_resolved() {
    let p = proj();
    let e = endpoint(
        r#"sources = ["tickets"]
[transform.github__search]
name = "tickets__list"
[transform.github__get_issue]
name = "x"
[transform.github__create_issue]
name = "x"
[transform.tickets__nope]
name = "y"
[transform.tickets__close]
name = "wf_find""#,
    );
    let v = e.view(&p);
    // The alias wins over the plain tool; the second rename to "x" is left out.
    assert_eq!(shown(&v), ["x", "tickets__list", "tickets__close"]);
    assert_eq!(
        v.tool("tickets__list").unwrap().original.name,
        "github__search"
    );
    assert_eq!(v.tool("x").unwrap().original.name, "github__get_issue");
    let f = findings(&e, &p);
    let all = f.join("\n");
    assert!(all.contains("both renamed \"x\""), "{all}");
    assert!(all.contains("tickets__list is left out"), "{all}");
    assert!(all.contains("no tool \"tickets__nope\""), "{all}");
    assert!(all.contains("meta-tool"), "{all}");
}

#[test]
fn findings_check_arguments_and_enums() {
    let p = proj();
    let e = endpoint(
        r#"[transform.github__search]
fixed = { owner = "acme" }
enums = { q = ["a"] }"#,
    );
    let f = findings(&e, &p).join("\n");
    assert!(f.contains("has no argument \"owner\""), "{f}");
    assert!(!f.contains("\"q\""), "{f}");
}

#[test]
fn principals_and_groups_are_allowed_by_name() {
    let e = endpoint(r#"allow = ["alice", "group:support"]"#);
    assert!(e.allows(&Principal::named("alice")));
    assert!(!e.allows(&Principal::named("bob")));
    assert!(e.allows(&Principal::with_groups("carol", vec!["support".into()])));
    assert!(!e.allows(&Principal::with_groups("dan", vec!["sales".into()])));
    assert!(endpoint("").allows(&Principal::named("anyone")));
    assert!(!endpoint("allow = []").allows(&Principal::local()));
}

#[test]
fn search_ranks_the_definitions_an_endpoint_shows() {
    let p = proj();
    // No transform: the projection's own index serves (filtered).
    assert!(
        endpoint(r#"sources = ["github"]"#)
            .view(&p)
            .search_index()
            .is_none()
    );
    let e = endpoint(
        r#"sources = ["github"]
[transform.github__create_issue]
name = "file_bug"
description = "Reports a defect in the storefront."
[transform.github__search]
description = "Looks through code."
"#,
    );
    let v = e.view(&p);
    let index = v
        .search_index()
        .expect("an endpoint that transforms has its own index");
    assert!(Arc::ptr_eq(&index, &v.search_index().unwrap()));
    // The new wording is found, under the tool's /mcp name (the index's key).
    let hits = index.search("report a storefront defect", 5, |_| true);
    assert_eq!(hits.first().map(|h| h.key), Some("github__create_issue"));
    // Its name on the endpoint is indexed; the wording it replaced is not.
    let hits = index.search("file bug", 5, |_| true);
    assert_eq!(hits.first().map(|h| h.key), Some("github__create_issue"));
    assert!(index.search("storefront", 5, |_| true).len() == 1);
    assert!(
        index
            .search("looks code", 5, |_| true)
            .iter()
            .all(|h| h.key == "github__search")
    );
    // Only the endpoint's tools are in it.
    assert_eq!(index.len(), 3);
}

#[test]
fn node_specs_are_selected_by_ref_and_source_unless_their_tool_is_fixed() {
    let p = proj();
    let e = endpoint(
        r#"nodes = ["github.*"]
[transform.github__create_issue]
fixed = { repo = "acme/site" }
[transform.github__search]
name = "find""#,
    );
    let v = e.view(&p);
    assert!(e.selects_node(&v, "github", "get_issue"));
    // Renamed only: still a node here; its arguments fixed: not.
    assert!(e.selects_node(&v, "github", "search"));
    assert!(!e.selects_node(&v, "github", "create_issue"));
    assert!(!e.selects_node(&v, "tickets", "list"));
    // `sources` selects nodes too; with neither set, none.
    let by_source = endpoint(r#"sources = ["tickets"]"#);
    assert!(by_source.selects_node(&by_source.view(&p), "tickets", "close"));
    let none = endpoint(r#"tools = ["*"]"#);
    assert!(!none.selects_node(&none.view(&p), "tickets", "close"));
}

#[tokio::test]
async fn the_current_endpoint_is_the_one_a_call_runs_within() {
    assert!(current().is_none());
    let e = Arc::new(endpoint(""));
    let inside = within(Some(e.clone()), async { current() }).await;
    assert!(inside.is_some_and(|c| Arc::ptr_eq(&c, &e)));
    assert!(within(None, async { current() }).await.is_none());
}

#[tokio::test]
async fn a_replacement_is_announced() {
    let all = Endpoints::default();
    let mut rx = all.replacements();
    all.replace(BTreeMap::new());
    assert!(rx.has_changed().unwrap());
    rx.borrow_and_update();
    assert!(!rx.has_changed().unwrap());
}

#[test]
fn session_pins_are_shared_with_callers_and_checked_against_sources() {
    let p = proj();
    let e = endpoint(
        r#"sources = ["github"]
sessions = { github = "client", nowhere = "principal" }"#,
    );
    let scopes = e.session_scopes().expect("pinned");
    assert_eq!(scopes.get("github"), Some(&SessionScope::Client));
    assert!(
        endpoint(r#"sources = ["github"]"#)
            .session_scopes()
            .is_none()
    );
    let f = findings(&e, &p).join("\n");
    assert!(f.contains("sessions.nowhere"), "{f}");
    assert!(!f.contains("sessions.github"), "{f}");
}
