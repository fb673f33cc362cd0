//! A node spec that mirrors its source's tool of the same name (the openapi
//! and mcp plugins list every capability both ways) is kept without its own
//! copy of the tool's schemas: in a large catalog the schemas are most of the
//! memory, and the copy was a third of GitHub's (issue #55). [`node_spec`]
//! gives the spec back whole; read a served catalog's node specs through it.

use std::borrow::Cow;
use std::collections::HashMap;

use serde_json::Value;
use wf_plugin_api::{Catalog, NodeSpec, Tool};

/// Where a kept spec's schema is its tool's. Screening refuses `null` as a
/// schema, so a screened catalog never holds one of its own.
const AS_TOOL: Value = Value::Null;

/// Drops from each node spec of a screened `catalog` the schemas that equal
/// those of the tool of the same name.
pub fn fold(catalog: &mut Catalog) {
    let Catalog {
        tools, node_specs, ..
    } = catalog;
    let by_name: HashMap<&str, &Tool> = tools.iter().map(|t| (t.name.as_str(), t)).collect();
    for spec in node_specs {
        let Some(tool) = by_name.get(spec.name.as_str()) else {
            continue;
        };
        if spec.input_schema == tool.input_schema {
            spec.input_schema = AS_TOOL;
        }
        if tool.output_schema.as_ref() == Some(&spec.output_schema) {
            spec.output_schema = AS_TOOL;
        }
    }
}

/// `spec`, a node spec of `catalog`, with the schemas [`fold`] left out.
pub fn node_spec<'a>(catalog: &'a Catalog, spec: &'a NodeSpec) -> Cow<'a, NodeSpec> {
    whole(spec, || catalog.tools.iter().find(|t| t.name == spec.name))
}

/// Every node spec of `catalog`, whole.
pub fn node_specs(catalog: &Catalog) -> impl Iterator<Item = Cow<'_, NodeSpec>> {
    let mut by_name: Option<HashMap<&str, &Tool>> = None;
    catalog.node_specs.iter().map(move |spec| {
        whole(spec, || {
            by_name
                .get_or_insert_with(|| catalog.tools.iter().map(|t| (t.name.as_str(), t)).collect())
                .get(spec.name.as_str())
                .copied()
        })
    })
}

fn whole<'a>(spec: &'a NodeSpec, tool: impl FnOnce() -> Option<&'a Tool>) -> Cow<'a, NodeSpec> {
    if !spec.input_schema.is_null() && !spec.output_schema.is_null() {
        return Cow::Borrowed(spec);
    }
    let mut whole = spec.clone();
    if let Some(tool) = tool() {
        if whole.input_schema.is_null() {
            whole.input_schema = tool.input_schema.clone();
        }
        if whole.output_schema.is_null()
            && let Some(o) = &tool.output_schema
        {
            whole.output_schema = o.clone();
        }
    }
    Cow::Owned(whole)
}

#[cfg(test)]
mod tests {
    use serde_json::json;

    use super::*;

    #[test]
    fn a_mirrored_spec_is_kept_once_and_given_back_whole() {
        let input = json!({"type": "object", "properties": {"q": {"type": "string"}}});
        let output = json!({"type": "object"});
        let mirrored = NodeSpec::new("get", "d", input.clone(), output.clone());
        let own = NodeSpec::new("run", "d", json!({"type": "object"}), json!({}));
        let mut c = Catalog::default().node(mirrored.clone()).node(own.clone());
        // A tool whose schemas differ from its spec's keeps the spec's.
        c.tools[1].input_schema = json!({"type": "object", "properties": {}});
        let whole = c.clone();
        fold(&mut c);
        assert!(c.node_specs[0].input_schema.is_null());
        assert!(c.node_specs[0].output_schema.is_null());
        assert_eq!(c.node_specs[1], own);
        assert_eq!(c.tools, whole.tools);
        let back: Vec<NodeSpec> = node_specs(&c).map(Cow::into_owned).collect();
        assert_eq!(back, whole.node_specs);
        assert_eq!(node_spec(&c, &c.node_specs[0]).into_owned(), mirrored);
    }
}
