//! Typed access to a node's arguments: wf-plugin-api's shared reader.

pub(crate) use wf_plugin_api::args::{Args, wrong_type};
