//! The console's read-only view of the endpoints (`[endpoints.NAME]`): each
//! one's settings and its surface as it shows it (renamed, reworded), of
//! what the viewer's own lists allow: what a client of this principal
//! would be served there.

use axum::Json;
use axum::extract::{Extension, State};
use axum::http::HeaderMap;
use axum::response::{IntoResponse, Response};
use serde_json::{Value, json};

use super::Console;
use super::access::Kind;
use super::viewer::Viewer;
use crate::server::Principal;
use crate::surfaces::endpoints::Endpoint;
use crate::surfaces::planner::PLANNER_SOURCE;

/// `GET /console/api/endpoints`: `{"endpoints": [..]}`, by name.
pub async fn list(
    State(c): State<Console>,
    Extension(v): Extension<Viewer>,
    Extension(p): Extension<Principal>,
    h: HeaderMap,
) -> Response {
    // Who may search the capabilities may see the endpoints' surfaces.
    if let Err(r) = c.admit(v, &h, &p, PLANNER_SOURCE, "list_capabilities", Kind::Read) {
        return *r;
    }
    let proj = c.app.projection_ready().await;
    let all = c.surfaces.endpoints.all();
    let endpoints: Vec<Value> = all.values().map(|e| describe(&c, &p, e, &proj)).collect();
    Json(json!({"endpoints": endpoints})).into_response()
}

fn describe(
    c: &Console,
    p: &Principal,
    e: &Endpoint,
    proj: &std::sync::Arc<crate::projection::Projection>,
) -> Value {
    let view = e.view(proj);
    let tools: Vec<Value> = view
        .tools()
        .filter(|t| c.may_see(p, t.original))
        .map(|t| {
            let x = t.transform;
            json!({
                "name": t.shown.name, "original": t.original.name, "source": t.shown.source,
                "title": t.shown.item.extra.get("title"),
                "description": t.shown.item.description,
                "transformed": x.is_some(),
                "fixed": x.map(|x| x.fixed.keys().collect::<Vec<_>>()).unwrap_or_default(),
            })
        })
        .collect();
    let config = &e.config;
    json!({
        "name": e.name,
        "path": format!("/mcp/{}", e.name),
        "server_name": e.server_name(),
        "instructions": config.instructions,
        "allow": config.allow,
        "allowed": e.allows(p),
        "mode": e.catalog.mode(),
        "selection": {
            "tools": config.tools, "sources": config.sources, "tags": config.tags,
            "exclude": config.exclude, "prompts": config.prompts,
            "resources": config.resources, "nodes": config.nodes,
        },
        "tools": tools,
        "prompts": view.prompts().map(|p| &p.name).collect::<Vec<_>>(),
        "resources": view.resources().map(|r| &r.name).chain(view.templates().map(|t| &t.name)).collect::<Vec<_>>(),
        "problems": view.problems,
    })
}
