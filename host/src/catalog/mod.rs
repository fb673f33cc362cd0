//! The catalog: a snapshot of every source's last discovered capabilities.
//! Surfaces project it; they never talk to discovery directly. Every catalog
//! is screened on its way in by the sources ([`screen`]): only valid
//! capabilities are served.

pub mod embed;
pub mod probe;
pub mod search;
pub mod synonyms;

pub use crate::sources::{Rejected, screen};

use std::sync::Arc;

use wf_plugin_api::Catalog;

use crate::sources::Sources;

/// The capabilities of every source that has been discovered, by source name
/// (sorted). A source whose latest discovery failed keeps its last catalog.
#[derive(Clone, Default)]
pub struct Snapshot {
    pub sources: Vec<(String, Arc<Catalog>)>,
}

impl Snapshot {
    pub fn take(sources: &Sources) -> Self {
        Self {
            sources: sources
                .list()
                .into_iter()
                .filter_map(|e| Some((e.name.clone(), e.catalog()?)))
                .collect(),
        }
    }

    pub fn get(&self, source: &str) -> Option<&Arc<Catalog>> {
        self.sources
            .iter()
            .find(|(n, _)| n == source)
            .map(|(_, c)| c)
    }
}
