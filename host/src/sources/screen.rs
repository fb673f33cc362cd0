//! Screening a discovered catalog: a capability that fails the checks of
//! `wf_plugin_api::schema` (the ones the plugin harness runs) is left out of
//! every surface, so one bad schema can never make a client reject the whole
//! list. Everything else of the source is served.

use serde::Serialize;
use wf_plugin_api::Catalog;
use wf_plugin_api::schema::{CapabilityKind, capability_problems};

/// A capability left out, and why.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct Rejected {
    pub kind: CapabilityKind,
    pub name: String,
    pub reason: String,
}

impl std::fmt::Display for Rejected {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "{} {:?} left out: {}", self.kind, self.name, self.reason)
    }
}

/// Splits `catalog` into what may be served and what is left out.
pub fn screen(mut catalog: Catalog) -> (Catalog, Vec<Rejected>) {
    let problems = capability_problems(&catalog);
    if problems.is_empty() {
        return (catalog, Vec::new());
    }
    let bad = |kind: CapabilityKind| -> Vec<usize> {
        problems
            .iter()
            .filter(|p| p.kind == kind)
            .map(|p| p.index)
            .collect()
    };
    drop_indexes(&mut catalog.tools, &bad(CapabilityKind::Tool));
    drop_indexes(&mut catalog.node_specs, &bad(CapabilityKind::Node));
    drop_indexes(&mut catalog.prompts, &bad(CapabilityKind::Prompt));
    drop_indexes(&mut catalog.resources, &bad(CapabilityKind::Resource));
    drop_indexes(
        &mut catalog.resource_templates,
        &bad(CapabilityKind::ResourceTemplate),
    );
    let rejected = problems
        .into_iter()
        .map(|p| Rejected {
            kind: p.kind,
            name: p.name,
            reason: p.problems.join("; "),
        })
        .collect();
    (catalog, rejected)
}

fn drop_indexes<T>(items: &mut Vec<T>, bad: &[usize]) {
    let mut i = 0;
    items.retain(|_| {
        let keep = !bad.contains(&i);
        i += 1;
        keep
    });
}

#[cfg(test)]
mod tests {
    use serde_json::json;
    use wf_plugin_api::{NodeSpec, Prompt, Tool};

    use super::*;

    #[test]
    fn bad_capabilities_are_left_out_and_the_rest_kept() {
        let obj = json!({"type": "object"});
        let catalog = Catalog::default()
            .tool(Tool::new("good", "ok", obj.clone()))
            .tool(Tool::new(
                "typo",
                "bad",
                json!({"type": "object", "properties": {"n": {"type": "integr"}}, "required": "n"}),
            ))
            .node(NodeSpec::new(
                "stringy",
                "bad",
                json!({"type": "string"}),
                json!({}),
            ))
            .node(NodeSpec::new(
                "fine",
                "ok",
                obj.clone(),
                json!({"type": "string"}),
            ))
            .prompt(Prompt::new("hello", "ok"));
        let (served, rejected) = screen(catalog);
        let tools: Vec<_> = served.tools.iter().map(|t| t.name.as_str()).collect();
        assert_eq!(tools, ["good", "fine"]);
        let nodes: Vec<_> = served.node_specs.iter().map(|n| n.name.as_str()).collect();
        assert_eq!(nodes, ["fine"]);
        assert_eq!(served.prompts.len(), 1);
        let names: Vec<_> = rejected
            .iter()
            .map(|r| format!("{} {}", r.kind, r.name))
            .collect();
        assert_eq!(names, ["tool typo", "tool stringy", "node stringy"]);
        assert!(
            rejected[0]
                .to_string()
                .contains("required: must be an array")
        );
    }

    #[test]
    fn a_valid_catalog_is_unchanged() {
        let c = Catalog::default().tool(Tool::new("a", "a", json!({"type": "object"})));
        let (served, rejected) = screen(c.clone());
        assert_eq!(served, c);
        assert!(rejected.is_empty());
    }
}
