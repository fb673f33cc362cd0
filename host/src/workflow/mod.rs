//! Workflows: the document model, references, validation against the live
//! planner catalog, and the engine that runs them on the sources' sessions.

pub mod catalog;
pub mod engine;
pub mod events;
pub mod graph;
pub mod model;
pub mod problem;
pub mod refs;
mod run_traces;
pub mod validate;

pub use catalog::PlannerCatalog;
pub use engine::{Engine, NodeEvent, NodeSources, RunOrigin};
pub use model::Workflow;
pub use problem::{Problem, ProblemKind};
pub use validate::validate;
