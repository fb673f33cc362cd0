//! The dependency graph of a workflow's nodes: what each node waits for
//! (its `after` list and every node its args and `when` refer to). The
//! validator searches it for cycles; the scheduler runs nodes in its order;
//! the console draws it.

use std::collections::{BTreeSet, HashMap};

use serde_json::{Value, json};

use super::model::Workflow;
use super::refs::{Ref, collect};

/// Each node's index, by id (validation refuses duplicated ids).
pub fn index(wf: &Workflow) -> HashMap<&str, usize> {
    wf.nodes
        .iter()
        .enumerate()
        .map(|(i, n)| (n.id.as_str(), i))
        .collect()
}

/// The nodes each node depends on, by index. Names of no node and a node's
/// references to itself are left out (validation reports them).
pub fn dependencies(wf: &Workflow) -> Vec<BTreeSet<usize>> {
    let ids = index(wf);
    wf.nodes
        .iter()
        .enumerate()
        .map(|(i, n)| {
            let mut found = Vec::new();
            for v in n.args.values().chain(n.when.iter()) {
                collect(v, "", &mut found);
            }
            let by_ref = found.into_iter().filter_map(|(_, r)| match r {
                Ok(Ref::Node { id, .. }) => ids.get(id.as_str()).copied(),
                _ => None,
            });
            n.after
                .iter()
                .filter_map(|a| ids.get(a.as_str()).copied())
                .chain(by_ref)
                .filter(|&d| d != i)
                .collect()
        })
        .collect()
}

/// A cycle in the graph (node indexes, in order), if there is one.
pub fn find_cycle(deps: &[BTreeSet<usize>]) -> Option<Vec<usize>> {
    #[derive(Clone, Copy, PartialEq)]
    enum Mark {
        New,
        OnStack,
        Done,
    }
    fn visit(
        i: usize,
        deps: &[BTreeSet<usize>],
        mark: &mut [Mark],
        stack: &mut Vec<usize>,
    ) -> Option<Vec<usize>> {
        mark[i] = Mark::OnStack;
        stack.push(i);
        for &d in &deps[i] {
            if mark[d] == Mark::OnStack {
                let from = stack.iter().position(|&x| x == d).unwrap_or(0);
                return Some(stack[from..].to_vec());
            }
            if mark[d] == Mark::New
                && let Some(c) = visit(d, deps, mark, stack)
            {
                return Some(c);
            }
        }
        stack.pop();
        mark[i] = Mark::Done;
        None
    }
    let mut mark = vec![Mark::New; deps.len()];
    for i in 0..deps.len() {
        if mark[i] == Mark::New
            && let Some(c) = visit(i, deps, &mut mark, &mut Vec::new())
        {
            return Some(c);
        }
    }
    None
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
    use serde_json::json;

    use super::*;

    fn wf(nodes: serde_json::Value) -> Workflow {
        Workflow::from_value(&json!({"nodes": nodes})).expect("a workflow")
    }

    #[test]
    fn after_and_references_are_dependencies_and_self_and_unknown_are_not() {
        let w = wf(json!([
            {"id": "a", "use": "x.y"},
            {"id": "b", "use": "x.y", "args": {"v": {"$ref": "nodes.a.output"}}},
            {"id": "c", "use": "x.y", "after": ["b", "nope"], "when": {"$ref": "nodes.c.output"}},
        ]));
        let deps = dependencies(&w);
        assert_eq!(deps[0], BTreeSet::new());
        assert_eq!(deps[1], BTreeSet::from([0]));
        assert_eq!(deps[2], BTreeSet::from([1]));
        assert_eq!(find_cycle(&deps), None);
    }

    #[test]
    fn a_cycle_is_found_in_order() {
        let w = wf(json!([
            {"id": "a", "use": "x.y", "after": ["c"]},
            {"id": "b", "use": "x.y", "after": ["a"]},
            {"id": "c", "use": "x.y", "args": {"v": {"$ref": "nodes.b.output"}}},
        ]));
        assert_eq!(find_cycle(&dependencies(&w)), Some(vec![0, 2, 1]));
    }

    #[test]
    fn edges_come_from_after_and_references() {
        let wf = Workflow::from_value(&serde_json::json!({
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
            vec![
                serde_json::json!(["a", "b"]),
                serde_json::json!(["a", "c"]),
                serde_json::json!(["b", "c"])
            ]
        );
    }
}
