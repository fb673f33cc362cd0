//! The search index over the projected tools, rebuilt when the projection
//! changes: only the sources whose tools changed are re-indexed.

use std::collections::BTreeMap;
use std::hash::{DefaultHasher, Hash, Hasher};
use std::sync::{Arc, Mutex, PoisonError};

use wf_plugin_api::Tool;

use super::{Projected, Projection};
use crate::catalog::search::{DocText, Index, SegmentCache};

/// The index of one projection, kept with the segments it reuses.
#[derive(Default)]
pub struct ToolSearch {
    state: Mutex<State>,
}

#[derive(Default)]
struct State {
    /// The projection the index was built for (its address while held).
    built_for: Option<Arc<Projection>>,
    index: Arc<Index>,
    cache: SegmentCache,
}

fn fingerprint(tools: &[&Projected<Tool>]) -> u64 {
    let mut h = DefaultHasher::new();
    for t in tools {
        t.name.hash(&mut h);
        t.original.hash(&mut h);
        t.item.description.hash(&mut h);
        t.item.input_schema.to_string().hash(&mut h);
    }
    h.finish()
}

fn docs(tools: &[&Projected<Tool>]) -> Vec<DocText> {
    tools
        .iter()
        .map(|t| {
            DocText::tool(
                &t.name,
                &t.source,
                &t.original,
                t.item.description.as_deref().unwrap_or(""),
                &t.item.input_schema,
            )
        })
        .collect()
}

impl ToolSearch {
    /// The index over `proj`'s tools (keys are client-visible names).
    pub fn index(&self, proj: &Arc<Projection>) -> Arc<Index> {
        let mut s = self.state.lock().unwrap_or_else(PoisonError::into_inner);
        if s.built_for.as_ref().is_some_and(|p| Arc::ptr_eq(p, proj)) {
            return s.index.clone();
        }
        let mut by_source: BTreeMap<&str, Vec<&Projected<Tool>>> = BTreeMap::new();
        for t in &proj.tools {
            by_source.entry(&t.source).or_default().push(t);
        }
        let index = s.cache.index(
            by_source
                .iter()
                .map(|(source, tools)| (*source, fingerprint(tools), || docs(tools))),
        );
        s.index = Arc::new(index);
        s.built_for = Some(proj.clone());
        tracing::debug!(
            tools = proj.tools.len(),
            segments_built = s.cache.built,
            "tool index rebuilt"
        );
        s.index.clone()
    }
}
