//! Configured source instances: created by their plugin, discovered in
//! parallel, called through the same typed handle by every surface.

mod call;
mod handle;
mod registry;
mod screen;
mod subscriptions;
pub mod settings;

pub use call::CallCtx;
pub use handle::{SourceError, SourceHandle};
pub use registry::{
    ApplyReport, SourceEntry, SourceState, SourceStatus, Sources, close, desired_sources,
};
pub use screen::{Rejected, screen};
pub use subscriptions::{Notifier, Subscriptions};
