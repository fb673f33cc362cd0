//! One wf.std source, reached through the real ABI objects (the root module,
//! `#[sabi_trait]` vtables, the export glue's decode/dispatch/encode), as the
//! host reaches a loaded plugin — but with arbitrary request text.

use std::sync::OnceLock;

use abi_stable::sabi_trait::TD_Opaque;
use abi_stable::std_types::{RArc, ROption, RStr, RString};
use wf_plugin_api::ffi::*;

#[derive(Clone)]
struct NullHost;

impl HostContextFfi for NullHost {
    fn log(&self, _level: u8, _target: RStr<'_>, _message: RStr<'_>) {}
    fn emit(&self, _event_json: RString) {}
}

struct NullCall;

impl CallContextFfi for NullCall {
    fn progress(&self, _: f64, _: ROption<f64>, _: ROption<RString>) {}
    fn info(&self) -> RString {
        RString::from("{}")
    }
}

fn source() -> &'static SourceBox {
    static SOURCE: OnceLock<SourceBox> = OnceLock::new();
    SOURCE.get_or_init(|| {
        let module = wf_plugin_api::export::module::<wf_source_std::StdPlugin>();
        let host: HostContextBox = HostContextFfi_TO::from_ptr(RArc::new(NullHost), TD_Opaque);
        let init = r#"{"host_version": "fuzz", "log_level": "off"}"#;
        let plugin = (module.instantiate())(host, RString::from(init))
            .into_result()
            .unwrap_or_else(|e| panic!("wf.std refused to start: {e}"));
        let data_dir = std::env::temp_dir().join(format!("wf-fuzz-std-{}", std::process::id()));
        let spec = serde_json::json!({"name": "wf.std", "kind": "std", "config": {}, "data_dir": data_dir});
        plugin
            .create_source(RString::from(spec.to_string()))
            .into_result()
            .unwrap_or_else(|e| panic!("wf.std refused its source: {e}"))
    })
}

/// Sends `text` as one request; Ok is the reply text, Err the error text.
pub(crate) fn request(text: &str) -> Result<String, String> {
    let ctx = CallContextFfi_TO::from_value(NullCall, TD_Opaque);
    let reply = futures::executor::block_on(source().request(RString::from(text), ctx));
    reply.into_result().map(String::from).map_err(String::from)
}
