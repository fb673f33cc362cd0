//! What keeps clients apart: which tools each principal may use, and the
//! session epochs each client last saw (so a restart is never silent).

use super::epochs::SeenEpochs;
use crate::pipeline::{Authorize, Call, Capability, Kind, Principal, Refusal, Stage};
use crate::server::identity::principals::ToolAccess;

#[derive(Default)]
pub struct Isolation {
    pub access: ToolAccess,
    pub epochs: SeenEpochs,
}

/// The name the tool lists go by in the pipeline's `authorize` stage.
pub const TOOL_LISTS: &str = "tool_lists";

impl Isolation {
    pub fn new(access: ToolAccess) -> Self {
        Self {
            access,
            epochs: SeenEpochs::default(),
        }
    }
}

/// The tool lists (`allow_tools` / `deny_tools`) as the pipeline's first
/// `authorize` stage: they govern tools only, by the name clients know.
impl Authorize for Isolation {
    fn authorize(&self, call: &Call<'_>) -> Result<Vec<String>, Refusal> {
        if call.capability.kind != Kind::Tool {
            return Ok(Vec::new());
        }
        match self.access.refusal(call.principal, call.capability.name) {
            None => Ok(Vec::new()),
            Some(why) => Err(Refusal::new(Stage::Authorize, why)),
        }
    }

    fn may_list(&self, principal: &Principal, capability: &Capability<'_>) -> bool {
        capability.kind != Kind::Tool || self.access.permits(principal, capability.name)
    }
}
