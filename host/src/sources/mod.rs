//! Configured source instances: created by their plugin, discovered in
//! parallel, called through the same typed handle by every surface.

mod answers;
mod asker;
mod asks;
mod call;
mod handle;
#[cfg(unix)]
pub mod io_watch;
pub mod listen_gate;
mod logs;
pub mod node_schemas;
pub mod poison;
mod registry;
mod screen;
pub mod sessions;
pub mod settings;
mod subscriptions;
pub mod tool_pins;

pub use asker::{AskFuture, Asker};
pub use call::{CallCtx, Progress};
pub use handle::{SourceError, SourceHandle};
pub use logs::{SourceLog, SourceLogs};
pub(crate) use registry::release_freed;
pub use registry::{
    ApplyReport, SourceEntry, SourceState, SourceStatus, Sources, close, desired_sources,
};
pub use screen::{Rejected, screen};
pub use subscriptions::{Notifier, Subscriptions};
