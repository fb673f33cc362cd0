//! wf-host: the `wf` binary's library. Data flows one way, and no module
//! uses one above it (checked by `tests/layering.rs`):
//! clock, file_watch, secrets, status, text, telemetry → store, config → plugins, audit → sources → catalog →
//! pipeline → projection, workflow → app → surfaces → server → cli.
#![cfg_attr(test, allow(clippy::unwrap_used))]

pub mod app;
pub mod audit;
pub mod blocking;
pub mod catalog;
pub mod cli;
pub mod clock;
pub mod config;
pub mod file_watch;
pub mod pipeline;
pub mod plugins;
pub mod projection;
pub mod secrets;
pub mod server;
pub mod sources;
pub mod status;
pub mod store;
pub mod surfaces;
pub mod telemetry;
pub mod text;
pub mod workflow;
