//! The planner surface: validate, draft, publish, deploy, run, and the
//! shapes of its answers.

use serde_json::{Value, json};
use wf_host::surfaces::planner::{DEPLOY_SOURCE, PLANNER_SOURCE, Planner};
use wf_plugin_api::CallResult;

use crate::support::app;
use crate::support::block_on;

fn body(r: &CallResult) -> &Value {
    r.structured_content.as_ref().expect("structured content")
}

async fn call(p: &Planner, tool: &str, args: Value) -> CallResult {
    p.call(PLANNER_SOURCE, tool, args, "local").await
}

const CONFIG: &str = "[sources.plan]\nkind = \"fake\"\n";

#[test]
fn validate_lists_each_problem_with_its_kind_path_and_a_hint() {
    block_on(async {
        let (app, _dir) = app(CONFIG).await;
        let p = Planner::new(app);
        let r = call(
            &p,
            "validate_workflow",
            json!({"workflow": {"nodes": [
                {"id": "a", "use": "plan.ech"},
                {"id": "b", "use": "plan.echo", "args": {"nope": 1}, "after": ["ghost"]}
            ]}}),
        )
        .await;
        let v = body(&r);
        assert_eq!(v["valid"], false);
        let kinds: Vec<&str> = v["problems"]
            .as_array()
            .unwrap()
            .iter()
            .map(|p| p["kind"].as_str().unwrap())
            .collect();
        assert_eq!(
            kinds,
            ["unknown_capability", "unknown_argument", "unknown_node"]
        );
        assert_eq!(v["problems"][0]["path"], "nodes[0].use");
        assert!(
            v["problems"][0]["message"]
                .as_str()
                .unwrap()
                .contains("plan.echo")
        );
        assert!(v["hint"].is_string());

        let ok = call(
            &p,
            "validate_workflow",
            json!({"workflow": {"nodes": [{"id": "a", "use": "plan.echo"}]}}),
        )
        .await;
        assert_eq!(body(&ok)["valid"], true, "{ok:?}");
    })
}

#[test]
fn a_draft_is_published_deployed_and_run_as_a_tool() {
    block_on(async {
        let (app, _dir) = app(CONFIG).await;
        let p = Planner::new(app.clone());
        let doc = json!({"name": "greet", "nodes": [
        {"id": "a", "use": "plan.echo", "args": {"label": "hi"}}
    ], "outputs": {"said": {"$ref": "nodes.a.output.label"}}});
        let draft = call(&p, "save_draft", json!({"workflow": doc})).await;
        let d = body(&draft);
        assert_eq!(d["valid"], true, "{d}");
        let draft_id = d["draft_id"].as_str().unwrap().to_string();

        let published = call(&p, "publish_artifact", json!({"draft_id": draft_id})).await;
        let a = body(&published);
        assert_eq!(
            (a["name"].as_str(), a["version"].as_i64()),
            (Some("greet"), Some(1)),
            "{a}"
        );
        let artifact = a["artifact"].as_str().unwrap().to_string();

        let deployed = call(
            &p,
            "deploy",
            json!({"name": "greeter", "artifact": artifact}),
        )
        .await;
        let tool = body(&deployed)["tool"]
            .as_str()
            .expect("the deployment's tool")
            .to_string();
        assert!(app.projection().tool(&tool).is_some(), "served as a tool");

        let ran = p.call(DEPLOY_SOURCE, "greeter", json!({}), "local").await;
        assert!(!ran.is_error, "{ran:?}");
        let r = body(&ran);
        assert_eq!(r["status"], "succeeded");
        assert_eq!(r["outputs"], json!({"said": "hi"}));
        let run = call(&p, "get_run", json!({"run_id": r["run_id"]})).await;
        assert!(!run.is_error, "{run:?}");
    })
}

#[test]
fn an_invalid_draft_is_not_published_and_says_why() {
    block_on(async {
        let (app, _dir) = app(CONFIG).await;
        let p = Planner::new(app);
        let draft = call(
            &p,
            "save_draft",
            json!({"workflow": {"nodes": [{"id": "a", "use": "plan.missing"}]}}),
        )
        .await;
        let d = body(&draft);
        assert_eq!(d["valid"], false);
        let r = call(&p, "publish_artifact", json!({"draft_id": d["draft_id"]})).await;
        assert!(r.is_error);
        let v = body(&r);
        assert_eq!(v["error"], "the draft is not valid");
        assert!(v["hint"].is_string());
        assert_eq!(v["detail"][0]["kind"], "unknown_capability");
    })
}

#[test]
fn a_failed_run_is_the_calls_failure() {
    block_on(async {
        let (app, _dir) = app(CONFIG).await;
        let p = Planner::new(app);
        let r = call(
        &p,
        "run_workflow",
        json!({"workflow": {"nodes": [{"id": "a", "use": "plan.fail", "args": {"label": "x"}}]}}),
    )
    .await;
        assert!(r.is_error);
        let v = body(&r);
        assert_eq!(v["status"], "failed");
        assert_eq!(v["nodes"][0]["status"], "failed");
    })
}
