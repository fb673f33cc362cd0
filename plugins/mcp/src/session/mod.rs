//! One upstream session: opened the one way both paths use (`opener`), spoken
//! to by wf's client handler with its calls in flight, in 2026-07-28 rounds
//! where the upstream speaks that revision.

mod callers;
pub mod client;
pub mod opener;
pub mod pending_logs;
pub mod progress;
pub(crate) mod rounds;
pub mod task_inputs;
