//! The host-side surfaces a server routes calls to, and which of their tools
//! a caller is shown.

use std::sync::Arc;

use super::catalog_view::CatalogView;
use super::isolation::Isolation;
use super::mrtr::Rounds;
use super::tasks::RunTasks;
use crate::app::App;
use crate::pipeline::{Capability, Kind};
use crate::projection::Projected;
use crate::server::identity::limits::Principal;
use crate::surfaces::admin::{ADMIN_SOURCE, Admin, Caller};
use crate::surfaces::endpoints::Endpoints;
use crate::surfaces::planner::Planner;

/// The host-side surfaces a server routes calls to.
#[derive(Clone)]
pub struct Surfaces {
    pub planner: Arc<Planner>,
    pub admin: Option<Arc<Admin>>,
    /// Which tools each principal may see and call; epochs clients saw.
    pub isolation: Arc<Isolation>,
    /// 2026-07-28 clients' calls waiting for their input.
    pub rounds: Arc<Rounds>,
    /// How much of the catalog each principal is listed; tool usage.
    pub catalog: Arc<CatalogView>,
    /// `wf_find`'s semantic ranker, when `[server.catalog] embeddings` is set.
    pub semantic: Option<Arc<crate::catalog::embed::Semantic>>,
    /// Runs started as MCP Tasks, by task id.
    pub tasks: Arc<RunTasks>,
    /// `[endpoints.NAME]`: the virtual servers, views over the projection.
    pub endpoints: Arc<Endpoints>,
}

impl Surfaces {
    pub fn new(app: &Arc<App>) -> Self {
        Self {
            planner: Planner::new(app.clone()),
            admin: Admin::new(app.clone()),
            isolation: Arc::default(),
            rounds: Arc::new(
                Rounds::for_config(&app.config.config.server)
                    .with_seal(crate::server::handles::Seal::for_app(app)),
            ),
            catalog: Arc::default(),
            semantic: None,
            tasks: Arc::new(
                RunTasks::for_config(&app.config.config.server)
                    .with_seal(crate::server::handles::Seal::for_app(app))
                    .kept_in(app.store.clone()),
            ),
            endpoints: Arc::new(
                Endpoints::from_config(&app.config.config).unwrap_or_else(|e| {
                    tracing::warn!("endpoints: {e}");
                    Endpoints::default()
                }),
            ),
        }
    }
}

/// Whether a tool is listed to this caller: the pipeline's `authorize`
/// stages (tool lists, policies) could permit some call to it, and for admin
/// tools the caller passes the admin access rules (a client is not shown
/// tools it can never call).
pub fn visible(
    (app, surfaces): (&App, &Surfaces),
    principal: &Principal,
    caller: &Caller,
    tool: &Projected<wf_plugin_api::Tool>,
) -> bool {
    if !app.pipeline.may_list(principal, &tool_capability(tool)) {
        return false;
    }
    match (tool.source.as_str(), &surfaces.admin) {
        (ADMIN_SOURCE, Some(admin)) => admin.permits(caller),
        _ => true,
    }
}

/// A projected tool as the pipeline sees it.
pub fn tool_capability(tool: &Projected<wf_plugin_api::Tool>) -> Capability<'_> {
    Capability {
        kind: Kind::Tool,
        source: &tool.source,
        name: &tool.name,
        annotations: tool.item.extra.get("annotations"),
    }
}
