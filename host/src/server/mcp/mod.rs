//! The MCP layer: what wf answers to an MCP request, whatever transport carried
//! it (routing, forwarding, input rounds, epochs, results).

pub(crate) mod caller;
pub(crate) mod catalog_view;
pub(crate) mod endpoint_route;
mod epochs;
mod forwarding;
pub(crate) mod handler;
pub(crate) mod isolation;
mod log_route;
pub(crate) mod meta_tools;
pub(crate) mod mrtr;
mod notify;
mod observe;
mod progress_route;
mod roots;
pub(crate) mod semantic;
pub(crate) mod session_route;
mod source_error;
mod surfaces;
pub(crate) mod tasks;
mod tool_result;

pub use surfaces::{Surfaces, tool_capability, visible};
pub use tasks::state::status_of as task_status;
