//! What keeps clients apart: which tools each principal may use, and the
//! session epochs each client last saw (so a restart is never silent).

use super::epochs::SeenEpochs;
use crate::server::identity::principals::ToolAccess;

#[derive(Default)]
pub struct Isolation {
    pub access: ToolAccess,
    pub epochs: SeenEpochs,
}

impl Isolation {
    pub fn new(access: ToolAccess) -> Self {
        Self {
            access,
            epochs: SeenEpochs::default(),
        }
    }
}
