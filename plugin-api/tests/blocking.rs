//! A call that blocks its thread is flagged by the harness (a runtime worker
//! held that long starves the plugin's other calls); the same work through
//! `wf_plugin_api::blocking` is not, and its calls keep being served.
#![cfg_attr(test, allow(clippy::unwrap_used))]

use std::time::Duration;

use wf_plugin_api::prelude::*;
use wf_plugin_api::testing::{BLOCKING_WARN, Harness};

struct P;
struct S;

impl Plugin for P {
    type Source = S;
    fn manifest() -> Manifest {
        Manifest::new("blocking-test", "0.0.0").kind("t")
    }
    fn new(_host: Host) -> Result<Self, PluginError> {
        Ok(P)
    }
    fn create_source(&self, _spec: SourceSpec) -> Result<S, PluginError> {
        Ok(S)
    }
}

const WORK: Duration = Duration::from_millis(300);

impl Source for S {
    async fn catalog(&self) -> Result<Catalog, PluginError> {
        Ok(Catalog::default())
    }
    async fn call_tool(
        &self,
        name: &str,
        _: Value,
        _: CallContext,
    ) -> Result<CallResult, PluginError> {
        match name {
            // The everyday mistake: a blocking call inside `async fn`.
            "stuck" => std::thread::sleep(WORK),
            "helped" => blocking(|| std::thread::sleep(WORK)).await?,
            _ => {}
        }
        Ok(CallResult::text(name))
    }
}

#[tokio::test]
async fn a_call_that_blocks_its_thread_is_flagged() {
    let h = Harness::start::<P>().unwrap();
    let src = h.source("t", "t", json!({})).unwrap();
    src.call_tool("quick", json!({})).await.unwrap();
    assert!(h.recorded.lock().unwrap().blocked.is_empty());
    src.call_tool("stuck", json!({})).await.unwrap();
    let blocked = h.recorded.lock().unwrap().blocked.clone();
    assert_eq!(blocked.len(), 1, "{blocked:?}");
    assert_eq!(blocked[0].0, "call_tool");
    assert!(blocked[0].1 >= WORK && WORK > BLOCKING_WARN, "{blocked:?}");
}

#[tokio::test]
async fn blocking_work_through_the_helper_is_not_flagged_and_others_are_served() {
    let h = Harness::start::<P>().unwrap();
    let src = h.source("t", "t", json!({})).unwrap();
    // One thread polls both calls (as one worker would): the quick call,
    // started while the helped call's work runs, ends first.
    let (helped, quick) = tokio::join!(
        async {
            let r = src.call_tool("helped", json!({})).await;
            (r, std::time::Instant::now())
        },
        async {
            tokio::time::sleep(Duration::from_millis(20)).await;
            let r = src.call_tool("quick", json!({})).await;
            (r, std::time::Instant::now())
        }
    );
    assert_eq!(helped.0.unwrap(), CallResult::text("helped"));
    assert_eq!(quick.0.unwrap(), CallResult::text("quick"));
    assert!(
        quick.1 < helped.1,
        "the quick call waited for the blocking work"
    );
    assert!(h.recorded.lock().unwrap().blocked.is_empty());
}
