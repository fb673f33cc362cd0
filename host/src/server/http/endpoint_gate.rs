//! `/mcp/NAME`: the HTTP front's door to endpoint NAME (`[endpoints.NAME]`).
//! After the guard has identified the principal: an unknown endpoint is 404,
//! a principal it does not allow is 403; an allowed request carries the
//! endpoint's name to the MCP layer. `/mcp` itself passes untouched.

use axum::extract::Request;
use axum::http::StatusCode;
use axum::response::{IntoResponse, Response};

use crate::server::identity::limits::Principal;
use crate::server::jsonrpc::{INVALID_REQUEST, error_reply};
use crate::server::mcp::endpoint_route::EndpointRoute;
use crate::surfaces::endpoints::Endpoints;

/// The endpoint a path names: `/mcp/NAME` (or `/mcp/NAME/`); `None` for `/mcp`.
fn endpoint_in(path: &str) -> Option<&str> {
    let rest = path.strip_prefix("/mcp")?.strip_prefix('/')?;
    let name = rest.strip_suffix('/').unwrap_or(rest);
    (!name.is_empty()).then_some(name)
}

fn refuse(status: StatusCode, message: &str) -> Response {
    (
        status,
        axum::Json(error_reply(None, INVALID_REQUEST, message)),
    )
        .into_response()
}

/// Admits a request to the endpoint its path names (`/mcp` itself passes
/// untouched), marking it with the endpoint's name, or gives the refusal to
/// send instead. It runs after the guard (`identity::guard::admit`), whose
/// principal it reads.
pub fn admit(endpoints: &Endpoints, request: &mut Request) -> Option<Response> {
    // `/mcp` itself: nothing to refuse.
    let name = endpoint_in(request.uri().path())?;
    let Some(endpoint) = endpoints.get(name) else {
        return Some(refuse(
            StatusCode::NOT_FOUND,
            &format!("no endpoint {name:?} is configured"),
        ));
    };
    let principal = request
        .extensions()
        .get::<Principal>()
        .cloned()
        .unwrap_or_else(Principal::local);
    if !endpoint.allows(&principal) {
        tracing::warn!(
            principal = principal.name(),
            endpoint = name,
            "endpoint refused"
        );
        return Some(refuse(
            StatusCode::FORBIDDEN,
            &format!(
                "principal {:?} is not allowed on endpoint {name:?}",
                principal.name()
            ),
        ));
    }
    request
        .extensions_mut()
        .insert(EndpointRoute(endpoint.name.clone()));
    None
}

#[cfg(test)]
mod tests {
    use super::endpoint_in;

    #[test]
    fn the_path_names_the_endpoint() {
        assert_eq!(endpoint_in("/mcp"), None);
        assert_eq!(endpoint_in("/mcp/"), None);
        assert_eq!(endpoint_in("/mcp/support"), Some("support"));
        assert_eq!(endpoint_in("/mcp/support/"), Some("support"));
        assert_eq!(endpoint_in("/mcp/a/b"), Some("a/b"));
        assert_eq!(endpoint_in("/mcpx"), None);
    }
}
