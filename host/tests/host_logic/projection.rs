//! The projection: client-safe, unique, deterministic names routed back to
//! their source.

use std::collections::HashSet;
use std::sync::Arc;

use serde_json::json;
use wf_host::catalog::Snapshot;
use wf_host::projection::{NameRules, Projection, is_client_safe};
use wf_plugin_api::{Catalog, Tool};

fn catalog(tools: &[&str]) -> Arc<Catalog> {
    Arc::new(tools.iter().fold(Catalog::default(), |c, t| {
        c.tool(Tool::new(*t, "d", json!({"type": "object"})))
    }))
}

fn snapshot(sources: &[(&str, &[&str])]) -> Snapshot {
    let mut s = Snapshot::default();
    for (name, tools) in sources {
        s.sources.push((name.to_string(), catalog(tools)));
    }
    s.sources.sort_by(|a, b| a.0.cmp(&b.0));
    s
}

const RULES: NameRules = NameRules { max_len: 40 };

#[test]
fn every_name_is_client_safe_and_unique() {
    let long = "x".repeat(200);
    let s = snapshot(&[
        ("wf.std", &["template", "json.select", "sleep"]),
        (
            "play wright",
            &["browser navigate", "émoji✓", long.as_str()],
        ),
        ("a", &["b_c"]),
        ("a_b", &["c"]),
    ]);
    let p = Projection::build(&s, RULES);
    assert_eq!(p.tools.len(), 8);
    let mut seen = HashSet::new();
    for t in &p.tools {
        assert!(is_client_safe(&t.name), "{:?} is not client-safe", t.name);
        assert!(t.name.len() <= 40, "{:?} is too long", t.name);
        assert!(seen.insert(t.name.clone()), "{:?} twice", t.name);
    }
}

#[test]
fn each_name_routes_back_to_its_source_and_original_name() {
    let s = snapshot(&[("wf.std", &["template"]), ("notes", &["add"])]);
    let p = Projection::build(&s, RULES);
    for t in &p.tools {
        let back = p.tool(&t.name).expect("a route");
        assert_eq!((&back.source, &back.original), (&t.source, &t.original));
    }
    let originals: HashSet<_> = p
        .tools
        .iter()
        .map(|t| format!("{}.{}", t.source, t.original))
        .collect();
    assert_eq!(
        originals,
        HashSet::from(["wf.std.template".into(), "notes.add".into()])
    );
}

#[test]
fn collisions_are_resolved_the_same_way_every_time_and_reported() {
    // "a" + "b_c" and "a_b" + "c" may want the same projected name.
    let sources: &[(&str, &[&str])] = &[("a", &["b_c"]), ("a_b", &["c"]), ("a.b", &["c"])];
    let first = Projection::build(&snapshot(sources), RULES);
    let mut reversed = sources.to_vec();
    reversed.reverse();
    let again = Projection::build(&snapshot(&reversed), RULES);
    let names = |p: &Projection| {
        p.tools
            .iter()
            .map(|t| (t.source.clone(), t.original.clone(), t.name.clone()))
            .collect::<Vec<_>>()
    };
    assert_eq!(names(&first), names(&again));
    let unique: HashSet<_> = first.tools.iter().map(|t| &t.name).collect();
    assert_eq!(unique.len(), 3);
    assert!(!first.collisions.is_empty(), "the collision is reported");
    assert_eq!(first.collisions, again.collisions);
}

#[test]
fn names_are_stable_when_another_source_comes_and_goes() {
    let before = Projection::build(&snapshot(&[("notes", &["add", "list"])]), RULES);
    let after = Projection::build(
        &snapshot(&[("notes", &["add", "list"]), ("zzz", &["other"])]),
        RULES,
    );
    for t in &before.tools {
        let same = after
            .tools
            .iter()
            .find(|u| u.original == t.original && u.source == t.source);
        assert_eq!(same.map(|u| &u.name), Some(&t.name));
    }
}
