//! A workflow document as a graph: which nodes each node waits for (its
//! `after` list plus every node its `args`/`when` reference). The engine
//! schedules by it; the console draws it.

use std::collections::{BTreeSet, HashMap};

use serde_json::{Value, json};

use super::model::Workflow;
use super::refs::{self, Ref};

/// Dependencies of each node, by index into `wf.nodes`.
pub fn dependencies(wf: &Workflow) -> Vec<BTreeSet<usize>> {
    let index: HashMap<&str, usize> = wf
        .nodes
        .iter()
        .enumerate()
        .map(|(i, n)| (n.id.as_str(), i))
        .collect();
    wf.nodes
        .iter()
        .map(|n| {
            let mut found = Vec::new();
            for v in n.args.values().chain(n.when.iter()) {
                refs::collect(v, "", &mut found);
            }
            let by_ref = found.into_iter().filter_map(|(_, r)| match r {
                Ok(Ref::Node { id, .. }) => index.get(id.as_str()).copied(),
                _ => None,
            });
            n.after
                .iter()
                .filter_map(|a| index.get(a.as_str()).copied())
                .chain(by_ref)
                .collect()
        })
        .collect()
}

/// `{"nodes": [{"id", "use"}], "edges": [[from_id, to_id]]}`: what a drawing needs.
pub fn to_json(wf: &Workflow) -> Value {
    let nodes: Vec<Value> = wf
        .nodes
        .iter()
        .map(|n| json!({"id": n.id, "use": n.uses}))
        .collect();
    let edges: Vec<Value> = dependencies(wf)
        .iter()
        .enumerate()
        .flat_map(|(to, deps)| {
            deps.iter()
                .map(move |from| json!([wf.nodes[*from].id, wf.nodes[to].id]))
        })
        .collect();
    json!({"nodes": nodes, "edges": edges})
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn edges_come_from_after_and_references() {
        let wf = Workflow::from_value(&json!({
            "nodes": [
                {"id": "a", "use": "wf.std.template", "args": {"template": "x"}},
                {"id": "b", "use": "wf.std.template", "args": {"template": {"$ref": "nodes.a.output.text"}}},
                {"id": "c", "use": "wf.std.sleep", "args": {"ms": 1}, "after": ["a", "b"]}
            ]
        }))
        .unwrap();
        let g = to_json(&wf);
        assert_eq!(g["nodes"].as_array().unwrap().len(), 3);
        let edges: Vec<Value> = g["edges"].as_array().unwrap().clone();
        assert_eq!(
            edges,
            vec![json!(["a", "b"]), json!(["a", "c"]), json!(["b", "c"])]
        );
    }
}
