//! Which endpoint (`[endpoints.NAME]`) a request is served on, and what it
//! changes of the meta-tools' answers: only its own tools, under the names
//! and definitions it shows.

use std::sync::Arc;

use rmcp::ErrorData as McpError;
use serde_json::json;

use super::meta_tools;
use crate::server::identity::limits::Principal;
use crate::surfaces::endpoints::{Endpoint, Endpoints, View, ViewTool};

/// The endpoint an HTTP request's path named (`/mcp/NAME`), put in the
/// request's extensions by the HTTP front once it has checked it.
#[derive(Debug, Clone)]
pub struct EndpointRoute(pub Arc<str>);

/// The endpoint named in a request's (or notification's) HTTP parts.
pub fn named(parts: Option<&http::request::Parts>) -> Option<Arc<str>> {
    parts
        .and_then(|p| p.extensions.get::<EndpointRoute>())
        .map(|r| r.0.clone())
}

/// Endpoint `name`, for `principal`: refused when it is no longer
/// configured (a reload took it out) or the principal is not allowed on it.
pub fn resolve(
    endpoints: &Endpoints,
    name: &str,
    principal: &Principal,
) -> Result<Arc<Endpoint>, McpError> {
    let Some(e) = endpoints.get(name) else {
        return Err(McpError::invalid_request(
            format!("no endpoint {name:?} is configured"),
            None,
        ));
    };
    if !e.allows(principal) {
        return Err(McpError::invalid_request(
            format!(
                "principal {:?} is not allowed on endpoint {name:?}",
                principal.name()
            ),
            Some(json!({"endpoint": name})),
        ));
    }
    Ok(e)
}

/// The instructions an endpoint's clients get.
pub fn instructions(e: &Endpoint, searching: bool) -> String {
    if let Some(i) = &e.config.instructions {
        return i.clone();
    }
    let mut text = format!(
        "wf endpoint {:?}: the tools, prompts and resources chosen for it.",
        e.name
    );
    if searching {
        text.push_str(
            " Not every tool is listed: call wf_find with what you want to do, then \
             wf_call {name, arguments} with a tool it returns (wf_describe {names} gives full schemas).",
        );
    }
    text
}

/// The meta-tools on an endpoint answer from its view: its tools, under
/// its names and definitions (keyed, like the projection, by `/mcp` names).
impl meta_tools::Surface for View {
    fn by_key(&self, key: &str) -> Option<meta_tools::Shown<'_>> {
        self.by_original(key).map(shown)
    }

    fn by_name(&self, name: &str) -> Option<meta_tools::Shown<'_>> {
        self.tool(name).map(shown)
    }

    fn each(&self, f: &mut dyn FnMut(meta_tools::Shown<'_>)) {
        for t in self.tools() {
            f(shown(t));
        }
    }
}

fn shown(t: ViewTool<'_>) -> meta_tools::Shown<'_> {
    meta_tools::Shown {
        key: &t.original.name,
        name: &t.shown.name,
        source: &t.shown.source,
        own: t.own_name(),
        item: &t.shown.item,
    }
}
