//! The source protocol through the real export glue: an operation the plugin
//! predates is answered `unsupported` (typed, since 1.2: `SourceRequest::Unknown`).
#![cfg_attr(test, allow(clippy::unwrap_used))]

use wf_plugin_api::prelude::*;
use wf_plugin_api::testing::Harness;

struct P;
struct S;

impl Plugin for P {
    type Source = S;
    fn manifest() -> Manifest {
        Manifest::new("protocol-test", "0.0.0").kind("t")
    }
    fn new(_host: Host) -> Result<Self, PluginError> {
        Ok(P)
    }
    fn create_source(&self, _spec: SourceSpec) -> Result<S, PluginError> {
        Ok(S)
    }
}

impl Source for S {
    async fn catalog(&self) -> Result<Catalog, PluginError> {
        Ok(Catalog::default())
    }
    async fn call_tool(
        &self,
        _: &str,
        _: Value,
        _: CallContext,
    ) -> Result<CallResult, PluginError> {
        Ok(CallResult::text("ok"))
    }
}

#[tokio::test]
async fn an_unknown_operation_is_unsupported_not_malformed() {
    let h = Harness::start::<P>().unwrap();
    let src = h.source("t", "t", json!({})).unwrap();
    let err = src
        .request::<Value>(&wf_plugin_api::SourceRequest::Unknown)
        .await
        .unwrap_err();
    assert_eq!(err.code, ErrorCode::Unsupported, "{err}");
    assert!(err.message.contains("\"unknown\""), "{err}");
    // A known operation still works on the same source afterwards.
    assert_eq!(
        src.call_tool("x", json!({})).await.unwrap(),
        CallResult::text("ok")
    );
}
