//! Who may use the console's API: whoever passed the HTTP guard (Host,
//! Origin, bearer token) and then the admin surface's rules ([admin]
//! over_http and the admin token in `X-Wf-Admin-Token`), and whose principal
//! may call the admin or planner tool behind the request.

use axum::Json;
use axum::http::{HeaderMap, StatusCode};
use axum::response::{IntoResponse, Response};
use serde_json::{Value, json};

use super::Console;
use crate::config::AdminOverHttp;
use crate::server::Principal;
use crate::surfaces::admin::Caller;

/// A JSON error answer: `{"error", "hint"}`.
pub fn refused(status: StatusCode, error: impl Into<String>, hint: &str) -> Response {
    (status, Json(json!({"error": error.into(), "hint": hint}))).into_response()
}

impl Console {
    /// The caller, when it may make a request served by the host-local tool
    /// `name` of `source` (e.g. `wf.admin`, `list_sources`); else the answer
    /// that refuses it.
    pub fn admit(
        &self,
        headers: &HeaderMap,
        principal: Principal,
        source: &str,
        name: &str,
    ) -> Result<Caller, Box<Response>> {
        let Some(admin) = &self.surfaces.admin else {
            return Err(Box::new(refused(
                StatusCode::FORBIDDEN,
                "the console needs the admin surface, which is off ([admin] enabled = false)",
                "set [admin] enabled = true (and over_http = \"token\" with a token)",
            )));
        };
        let caller = Caller::Http {
            admin_token: headers
                .get("x-wf-admin-token")
                .and_then(|v| v.to_str().ok())
                .map(str::to_string),
            principal: principal.clone(),
        };
        if let Some(r) = admin.refusal(&caller) {
            // A missing or wrong token is 401 (the page asks for it); admin
            // over HTTP turned off is 403.
            let status = match self.app.config.config.admin.over_http() {
                AdminOverHttp::Token => StatusCode::UNAUTHORIZED,
                _ => StatusCode::FORBIDDEN,
            };
            let body = r.structured_content.unwrap_or(Value::Null);
            return Err(Box::new((status, Json(body)).into_response()));
        }
        let tool = self.client_name(source, name);
        if let Some(why) = self.surfaces.isolation.access.refusal(&principal, &tool) {
            tracing::warn!(principal = principal.name(), tool = %tool, "console request refused");
            return Err(Box::new(refused(
                StatusCode::FORBIDDEN,
                why,
                "the operator grants tools per token in [[server.tokens]]",
            )));
        }
        Ok(caller)
    }

    /// The name clients know a host-local tool by (e.g. `wf_admin__status`).
    fn client_name(&self, source: &str, name: &str) -> String {
        self.app
            .projection()
            .tools
            .iter()
            .find(|t| t.source == source && t.original == name)
            .map(|t| t.name.clone())
            .unwrap_or_else(|| format!("{}__{name}", source.replace('.', "_")))
    }

    /// Whether `principal` may see the tool clients know as `tool`.
    pub fn may_see(&self, principal: &Principal, tool: &str) -> bool {
        self.surfaces.isolation.access.permits(principal, tool)
    }
}
