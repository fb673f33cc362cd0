//! In-process tests of the host's logic: engine, registry, projection,
//! planner and admin, driven through wf-host's library with an in-memory
//! store and plugins linked into the test (the std plugin and a small fake).
//! They run in seconds; the e2e suite stays the proof against real peers.
#![cfg_attr(test, allow(clippy::unwrap_used))]

mod admin;
mod docs;
mod engine;
mod fake;
mod layering;
mod planner;
mod policy;
mod projection;
mod reference;
mod registry;
mod support;
