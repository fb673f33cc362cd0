//! What MCP clients see: the proxy surface (every source's capabilities,
//! under client-safe names). Planner and admin surfaces will live beside it.

pub mod admin;
pub mod endpoints;
pub mod failure;
pub mod planner;
pub mod proxy;
