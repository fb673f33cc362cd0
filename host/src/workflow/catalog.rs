//! The planner catalog: every source's node specs (MCP tools become node
//! specs in the mcp plugin's discovery; wf.std has its own), by dotted ref.

use std::collections::BTreeMap;

use wf_plugin_api::NodeSpec;

use crate::catalog::Snapshot;

#[derive(Debug, Clone)]
pub struct CapabilityEntry {
    pub reference: String,
    pub source: String,
    pub name: String,
    pub spec: NodeSpec,
}

#[derive(Debug, Clone, Default)]
pub struct PlannerCatalog {
    pub nodes: BTreeMap<String, CapabilityEntry>,
    /// Capabilities the hold stage keeps out (a pinned tool that changed),
    /// by ref, with why: validation names the reason, not "unknown".
    pub held: BTreeMap<String, String>,
}

impl PlannerCatalog {
    pub fn from_snapshot(snapshot: &Snapshot) -> Self {
        let mut nodes = BTreeMap::new();
        for (source, cat) in &snapshot.sources {
            for spec in crate::sources::node_schemas::node_specs(cat) {
                let reference = format!("{source}.{}", spec.name);
                nodes.insert(
                    reference.clone(),
                    CapabilityEntry {
                        reference,
                        source: source.clone(),
                        name: spec.name.clone(),
                        spec: spec.into_owned(),
                    },
                );
            }
        }
        Self {
            nodes,
            held: BTreeMap::new(),
        }
    }

    /// The held tools of `sources`, so validation can say why they are missing.
    pub fn with_held(mut self, sources: &crate::sources::Sources) -> Self {
        for (source, held) in sources.all_held() {
            for h in held {
                self.held.insert(format!("{source}.{}", h.name), h.message);
            }
        }
        self
    }

    pub fn get(&self, reference: &str) -> Option<&CapabilityEntry> {
        self.nodes.get(reference)
    }
}
