//! Which endpoint (`[endpoints.NAME]`) a request is served on, and what it
//! changes of the meta-tools' answers: only its own tools, under the names
//! and definitions it shows.

use std::sync::Arc;

use rmcp::ErrorData as McpError;
use serde_json::{Value, json};

use super::meta_tools;
use crate::server::identity::limits::Principal;
use crate::surfaces::endpoints::{Endpoint, Endpoints, View};

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

/// `wf_find` on an endpoint: `search` (wf_find over the projection) asked
/// for the tools of this endpoint that `usable` also accepts (by their
/// `/mcp` name); its hits shown under the endpoint's names and definitions.
pub fn find<S>(
    view: &View,
    usable: impl Fn(&str, &str) -> bool,
    search: S,
) -> Result<(Value, Vec<String>), String>
where
    S: FnOnce(&dyn Fn(&str, &str) -> bool) -> Result<(Value, Vec<String>), String>,
{
    let on_endpoint =
        |source: &str, name: &str| view.by_original(name).is_some() && usable(source, name);
    let (mut found, _) = search(&on_endpoint)?;
    let mut names = Vec::new();
    if let Some(Value::Array(tools)) = found.get_mut("tools") {
        for hit in tools.iter_mut() {
            let Some(t) = hit
                .get("name")
                .and_then(Value::as_str)
                .and_then(|n| view.by_original(n))
            else {
                continue;
            };
            let confidence = hit.get("confidence").cloned();
            *hit = meta_tools::hit(&t.shown.name, &t.shown.source, &t.shown.item);
            if let Some(c) = confidence {
                hit["confidence"] = c;
            }
            names.push(t.shown.name.clone());
        }
    }
    Ok((found, names))
}

/// `wf_describe` on an endpoint: the definitions it shows.
pub fn describe(
    view: &View,
    args: &Value,
    usable: impl Fn(&str, &str) -> bool,
) -> Result<Value, String> {
    let names: Vec<&str> = args
        .get("names")
        .and_then(Value::as_array)
        .map(|n| n.iter().filter_map(Value::as_str).collect())
        .filter(|n: &Vec<&str>| !n.is_empty())
        .ok_or("wf_describe needs `names`: tool names as wf_find returned them")?;
    let mut tools = Vec::new();
    let mut unknown = Vec::new();
    for n in names {
        match view
            .tool(n)
            .filter(|t| usable(&t.original.source, &t.original.name))
        {
            Some(t) => tools.push(serde_json::to_value(&t.shown.item).unwrap_or(Value::Null)),
            None => unknown.push(n),
        }
    }
    Ok(json!({"tools": tools, "unknown": unknown}))
}
