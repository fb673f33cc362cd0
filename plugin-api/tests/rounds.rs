//! `CallContext::ask_round` (1.6) through the real export glue: a round is one
//! ask, answered by key; a host that cannot take it (`unsupported`: one that
//! predates rounds) is asked one request at a time instead.
#![cfg_attr(test, allow(clippy::unwrap_used))]

use std::collections::BTreeMap;

use wf_plugin_api::CallerRequest;
use wf_plugin_api::prelude::*;
use wf_plugin_api::testing::Harness;

struct P;
struct S;

impl Plugin for P {
    type Source = S;
    fn manifest() -> Manifest {
        Manifest::new("rounds-test", "0.0.0").kind("t")
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
        ctx: CallContext,
    ) -> Result<CallResult, PluginError> {
        let asks = BTreeMap::from([
            ("where".to_string(), CallerRequest::ListRoots),
            (
                "who".to_string(),
                CallerRequest::Elicit {
                    params: json!({"message": "name?"}),
                },
            ),
        ]);
        let answers = ctx.ask_round(asks).await?;
        Ok(CallResult::text(serde_json::to_string(&answers)?))
    }
}

fn text(r: &CallResult) -> Value {
    let v = serde_json::to_value(r).unwrap();
    serde_json::from_str(v["content"][0]["text"].as_str().unwrap()).unwrap()
}

#[tokio::test]
async fn a_round_is_one_ask_answered_by_key() {
    let h = Harness::start::<P>().unwrap();
    let src = h.source("t", "t", json!({})).unwrap();
    src.answer_caller(Ok(
        json!({"where": {"roots": []}, "who": {"action": "decline"}}),
    ));
    let r = src.call_tool("x", json!({})).await.unwrap();
    assert_eq!(
        text(&r),
        json!({"where": {"roots": []}, "who": {"action": "decline"}})
    );
    let asked = src.asked();
    assert_eq!(asked.len(), 1, "{asked:?}");
    assert_eq!(asked[0]["kind"], "round");
    assert_eq!(asked[0]["requests"]["where"], json!({"kind": "list_roots"}));
}

#[tokio::test]
async fn a_host_without_rounds_is_asked_one_at_a_time_in_key_order() {
    let h = Harness::start::<P>().unwrap();
    let src = h.source("t", "t", json!({})).unwrap();
    src.answer_caller(Err(PluginError::unsupported("unknown request")));
    src.answer_caller(Ok(json!({"roots": []})));
    src.answer_caller(Ok(json!({"action": "cancel"})));
    let r = src.call_tool("x", json!({})).await.unwrap();
    assert_eq!(
        text(&r),
        json!({"where": {"roots": []}, "who": {"action": "cancel"}})
    );
    let kinds: Vec<_> = src.asked().iter().map(|a| a["kind"].clone()).collect();
    assert_eq!(
        kinds,
        [json!("round"), json!("list_roots"), json!("elicit")]
    );
}

#[tokio::test]
async fn a_round_answered_without_a_key_fails_the_call() {
    let h = Harness::start::<P>().unwrap();
    let src = h.source("t", "t", json!({})).unwrap();
    src.answer_caller(Ok(json!({"where": {"roots": []}})));
    let e = src.call_tool("x", json!({})).await.unwrap_err();
    assert!(e.message.contains("no answer to who"), "{e}");
}
