//! How wf reaches an upstream: a child process over stdio (its lines bounded,
//! its stderr forwarded) or streamable HTTP (its client and trace context).

pub(crate) mod direct;
pub mod env;
pub(crate) mod executions;
pub(crate) mod frames;
pub(crate) mod http;
mod replies;
mod scan;
mod stderr;
pub(crate) mod stdio;
pub(crate) mod trace;
