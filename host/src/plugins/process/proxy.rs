//! The host's side of a plugin in a child: `PluginFfi` and `SourceFfi`
//! objects that forward over the child's socket, so the rest of wf uses a
//! process-mode plugin exactly like one loaded in process.

use std::sync::Arc;

use abi_stable::sabi_trait::TD_Opaque;
use abi_stable::std_types::{RErr, ROk, RResult, RString};
use async_ffi::{FfiFuture, FutureExt};
use wf_plugin_api::ffi::{
    CallContextBox, PluginBox, PluginFfi, PluginFfi_TO, SourceBox, SourceFfi, SourceFfi_TO,
};

use super::supervisor::Supervisor;

pub fn plugin_box(sup: &Arc<Supervisor>) -> PluginBox {
    PluginFfi_TO::from_value(ProcessPlugin { sup: sup.clone() }, TD_Opaque)
}

struct ProcessPlugin {
    sup: Arc<Supervisor>,
}

impl PluginFfi for ProcessPlugin {
    fn create_source(&self, spec_json: RString) -> RResult<SourceBox, RString> {
        match self.sup.create_source(spec_json.into_string()) {
            Ok(id) => ROk(SourceFfi_TO::from_value(
                ProcessSource {
                    sup: self.sup.clone(),
                    id,
                },
                TD_Opaque,
            )),
            Err(e) => RErr(RString::from(e)),
        }
    }
}

struct ProcessSource {
    sup: Arc<Supervisor>,
    id: u64,
}

impl SourceFfi for ProcessSource {
    fn request(
        &self,
        request: RString,
        ctx: CallContextBox,
    ) -> FfiFuture<RResult<RString, RString>> {
        let (sup, id) = (self.sup.clone(), self.id);
        async move {
            match sup.call(id, request.into_string(), ctx).await {
                Ok(ok) => ROk(RString::from(ok)),
                Err(e) => RErr(RString::from(e)),
            }
        }
        .into_ffi()
    }

    fn shutdown(&self) -> FfiFuture<()> {
        let (sup, id) = (self.sup.clone(), self.id);
        async move { sup.shutdown_source(id).await }.into_ffi()
    }
}

impl Drop for ProcessSource {
    fn drop(&mut self) {
        self.sup.forget_source(self.id);
    }
}
