//! What a console viewer may do. Views (sources, plugins, status,
//! capabilities, runs) need what listing them needs: a signed-in viewer
//! whose principal may call the tool behind the view; for the admin
//! surface's views, a token caller also passes the admin rules ([admin]
//! over_http, `X-Wf-Admin-Token`), as over `/mcp`. Actions (refresh,
//! reload, cancel) need admin rights: for a token caller the admin rules,
//! for a login-link session `[admin] console = "actions"` (or the admin
//! rules letting it act: over_http = "open", or the admin token).

use axum::Json;
use axum::http::{HeaderMap, StatusCode};
use axum::response::{IntoResponse, Response};
use serde_json::{Value, json};

use super::Console;
use super::viewer::{Viewer, admin_token};
use crate::config::{AdminOverHttp, ConsoleAccess};
use crate::server::Principal;
use crate::surfaces::admin::{ADMIN_SOURCE, Caller};

/// Whether a request only reads or changes something.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Kind {
    Read,
    Action,
}

/// A refused request: its status and `{"error", "hint"}` body.
#[derive(Debug)]
pub struct Refusal {
    pub status: StatusCode,
    pub body: Value,
}

impl Refusal {
    fn new(status: StatusCode, error: impl Into<String>, hint: impl Into<String>) -> Self {
        Self {
            status,
            body: json!({"error": error.into(), "hint": hint.into()}),
        }
    }

    /// The error line, for the page's tooltips.
    pub fn reason(&self) -> String {
        let error = self.body["error"].as_str().unwrap_or("refused");
        match self.body["hint"].as_str().filter(|h| !h.is_empty()) {
            Some(hint) => format!("{error}: {hint}"),
            None => error.to_string(),
        }
    }
}

impl Console {
    /// The caller to make the request served by the host-local tool `name`
    /// of `source` (e.g. `wf.admin`, `list_sources`) with, or why not.
    pub fn decide(
        &self,
        viewer: Viewer,
        headers: &HeaderMap,
        principal: &Principal,
        source: &str,
        name: &str,
        kind: Kind,
    ) -> Result<Caller, Refusal> {
        let admin_cfg = &self.app.config.config.admin;
        let admin = self.surfaces.admin.as_ref();
        let admin_off = || {
            Refusal::new(
                StatusCode::FORBIDDEN,
                "this needs the admin surface, which is off ([admin] enabled = false)",
                "set [admin] enabled = true",
            )
        };
        if source == ADMIN_SOURCE && admin.is_none() {
            return Err(admin_off());
        }
        let as_http = |principal: Principal| Caller::Http {
            admin_token: admin_token(headers),
            principal,
        };
        let caller = match viewer {
            Viewer::Session => {
                if kind == Kind::Action
                    && admin_cfg.console != ConsoleAccess::Actions
                    && !admin.is_some_and(|a| a.permits(&as_http(principal.clone())))
                {
                    let token = if admin_cfg.over_http() == AdminOverHttp::Token {
                        ", or enter the admin token ([admin] token) with the Tokens button"
                    } else {
                        ""
                    };
                    return Err(Refusal::new(
                        StatusCode::FORBIDDEN,
                        "this console session is read-only ([admin] console = \"read\")",
                        format!(
                            "to refresh, reload and cancel here, set [admin] console = \"actions\" in the config and restart wf{token}"
                        ),
                    ));
                }
                Caller::Console
            }
            Viewer::Token => {
                let caller = as_http(principal.clone());
                if source == ADMIN_SOURCE || kind == Kind::Action {
                    let Some(admin) = admin else {
                        return Err(admin_off());
                    };
                    if let Some(r) = admin.refusal(&caller) {
                        // A missing or wrong admin token is 401 (the page
                        // asks for it); admin over HTTP turned off is 403.
                        let status = match admin_cfg.over_http() {
                            AdminOverHttp::Token => StatusCode::UNAUTHORIZED,
                            _ => StatusCode::FORBIDDEN,
                        };
                        return Err(Refusal {
                            status,
                            body: r.structured_content.unwrap_or(Value::Null),
                        });
                    }
                }
                caller
            }
        };
        self.tool_access(principal, source, name, caller)
    }

    /// `caller`, if `principal`'s tool lists let it use the tool.
    fn tool_access(
        &self,
        principal: &Principal,
        source: &str,
        name: &str,
        caller: Caller,
    ) -> Result<Caller, Refusal> {
        let tool = self.client_name(source, name);
        // A console action is a use of the tool it calls: the call pipeline's.
        let call = crate::pipeline::Call {
            entry: crate::pipeline::Entry::Console,
            principal,
            capability: crate::pipeline::Capability {
                kind: crate::pipeline::Kind::Tool,
                source,
                name: &tool,
                annotations: None,
            },
            arguments: &Value::Null,
            client: Some("console"),
            client_version: None,
            endpoint: None,
            transport: crate::pipeline::Transport::Http,
        };
        if let Err(why) = self.app.pipeline.admit(&call) {
            return Err(Refusal::new(
                StatusCode::FORBIDDEN,
                why.message,
                "the operator grants tools per token in [[server.tokens]] and in [policy] files",
            ));
        }
        Ok(caller)
    }

    /// [`Console::decide`], with a refusal as the HTTP answer.
    pub fn admit(
        &self,
        viewer: Viewer,
        headers: &HeaderMap,
        principal: &Principal,
        source: &str,
        name: &str,
        kind: Kind,
    ) -> Result<Caller, Box<Response>> {
        self.decide(viewer, headers, principal, source, name, kind)
            .map_err(|r| {
                tracing::warn!(principal = principal.name(), tool = name, status = %r.status, "console request refused");
                Box::new((r.status, Json(r.body)).into_response())
            })
    }

    /// The name clients know a host-local tool by (e.g. `wf_admin__status`).
    pub(super) fn client_name(&self, source: &str, name: &str) -> String {
        self.app
            .projection()
            .tools
            .iter()
            .find(|t| t.source == source && t.original == name)
            .map(|t| t.name.clone())
            .unwrap_or_else(|| format!("{}__{name}", source.replace('.', "_")))
    }

    /// Whether `principal` may see `tool`: some call to it could be permitted.
    pub fn may_see(
        &self,
        principal: &Principal,
        tool: &crate::projection::Projected<wf_plugin_api::Tool>,
    ) -> bool {
        let capability = crate::server::mcp::tool_capability(tool);
        self.app.pipeline.may_list(principal, &capability)
    }
}
