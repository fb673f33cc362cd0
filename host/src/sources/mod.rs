//! Configured source instances: created by their plugin, discovered in
//! parallel, called through the same typed handle by every surface.

mod call;
mod handle;
mod registry;
pub mod sessions;

pub use call::CallCtx;
pub use handle::{SourceError, SourceHandle};
pub use registry::{
    ApplyReport, SourceEntry, SourceState, SourceStatus, Sources, close, desired_sources,
};
