//! The MCP layer: what wf answers to an MCP request, whatever carried it (routing, forwarding, rounds, epochs, results).

pub(crate) mod caller;
mod epochs;
mod forwarding;
pub(crate) mod handler;
pub(crate) mod isolation;
pub(crate) mod mrtr;
mod notify;
mod observe;
mod roots;
pub(crate) mod session_route;
mod tool_result;

use std::sync::Arc;

use crate::app::App;
use crate::surfaces::admin::Admin;
use crate::surfaces::planner::Planner;

/// The host-side surfaces a server routes calls to.
#[derive(Clone)]
pub struct Surfaces {
    pub planner: Arc<Planner>,
    pub admin: Option<Arc<Admin>>,
    /// Which tools each principal may see and call; epochs clients saw.
    pub isolation: Arc<isolation::Isolation>,
    /// 2026-07-28 clients' calls waiting for their input.
    pub rounds: Arc<mrtr::Rounds>,
}

impl Surfaces {
    pub fn new(app: &Arc<App>) -> Self {
        Self {
            planner: Planner::new(app.clone()),
            admin: Admin::new(app.clone()),
            isolation: Arc::default(),
            rounds: Arc::new(mrtr::Rounds::for_config(&app.config.config.server)),
        }
    }
}
