//! wf-host: the `wf` binary's library. Data flows one way:
//! config → plugins → sources → catalog → surfaces → server.

pub mod app;
pub mod catalog;
pub mod cli;
pub mod config;
pub mod plugins;
pub mod secrets;
pub mod server;
pub mod sources;
pub mod store;
pub mod surfaces;
pub mod text;
pub mod workflow;
