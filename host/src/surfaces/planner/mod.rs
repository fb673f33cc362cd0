//! The planner surface: tools an LLM uses to discover capabilities, write,
//! validate, save, publish, deploy and run workflows. Served as the host-local
//! source `wf.planner`; each deployment is a tool of the local source `wf.deploy`.

mod tools;

use crate::catalog::search::{DocText, Index, Segment};
use std::sync::Arc;
use std::time::Duration;

use serde_json::{Value, json};
use wf_plugin_api::{CallResult, Catalog, Tool};

use crate::app::App;
use crate::catalog::Snapshot;
use crate::sources::CallCtx;
use crate::store::{RunStatus, StoreError};
use crate::surfaces::failure::Failure;
use crate::workflow::engine::StartError;
use crate::workflow::{Engine, RunOrigin, Workflow, validate};

pub const PLANNER_SOURCE: &str = "wf.planner";
pub const DEPLOY_SOURCE: &str = "wf.deploy";
const DEFAULT_WAIT: Duration = Duration::from_secs(600);

pub struct Planner {
    app: Arc<App>,
    pub engine: Arc<Engine>,
}

fn fail(error: impl Into<String>, hint: &'static str) -> Failure {
    Failure::refused(error, hint)
}

impl From<StoreError> for Failure {
    fn from(e: StoreError) -> Self {
        let hint = match e {
            StoreError::NotFound(_) => {
                "check the id or name with list_drafts, list_runs or list_capabilities"
            }
            _ => "retry; if it persists, check the host's log",
        };
        fail(e.to_string(), hint)
    }
}

type Reply = Result<Value, Failure>;

/// What a call that waited for a run gets: its status, outputs, error and nodes.
fn run_reply(run: &crate::store::RunRecord, nodes: &[crate::store::NodeRecord]) -> Value {
    let nodes: Vec<Value> = nodes
        .iter()
        .map(|n| json!({"id": n.node_id, "use": n.capability, "status": n.status, "ms": n.finished_at.zip(n.started_at).map(|(f, s)| f - s), "error": n.error}))
        .collect();
    json!({"run_id": run.id, "status": run.status, "outputs": run.outputs, "error": run.error, "nodes": nodes})
}

fn arg<'a>(args: &'a Value, key: &str) -> Option<&'a str> {
    args.get(key).and_then(Value::as_str)
}

fn need<'a>(args: &'a Value, key: &str) -> Result<&'a str, Failure> {
    arg(args, key).ok_or_else(|| {
        fail(
            format!("missing argument {key:?}"),
            "see the tool's input schema",
        )
    })
}

fn valid_deployment_name(n: &str) -> bool {
    crate::text::is_plain_name(n, 40)
}

impl Planner {
    pub fn new(app: Arc<App>) -> Arc<Self> {
        let engine = Engine::new(app.node_sources(), app.store.clone());
        let planner = Arc::new(Self { app, engine });
        planner.app.set_local(PLANNER_SOURCE, tools::catalog());
        planner.refresh_deployments();
        follow_deployments(&planner);
        planner
    }

    /// Serves each deployment as a tool taking its workflow's inputs.
    pub fn refresh_deployments(&self) {
        let mut catalog = Catalog::default();
        // Called where nothing awaits (the planner's construction, a sync
        // refresh); see Store::blocking.
        let store = &self.app.store;
        for d in store.blocking(store.deployments()).unwrap_or_default() {
            let Ok(artifact) =
                store.blocking(store.artifact(&d.artifact_name, Some(d.artifact_version)))
            else {
                continue;
            };
            let wf = Workflow::from_value(&artifact.document).ok();
            let about = wf
                .as_ref()
                .map(|w| w.description.clone())
                .filter(|s| !s.is_empty())
                .unwrap_or_else(|| "Runs a deployed workflow".into());
            let schema = wf
                .map(|w| w.inputs)
                .unwrap_or_else(|| json!({"type": "object"}));
            let schema = if schema.get("type").is_some() {
                schema
            } else {
                json!({"type": "object"})
            };
            catalog = catalog.tool(tools::task_optional(Tool::new(
                &d.name,
                format!("{about} (deployment of {})", artifact.reference()),
                schema,
            )));
        }
        self.app.set_local(DEPLOY_SOURCE, catalog);
    }

    /// Handles a call to a host-local tool made by `principal` (recorded
    /// with the runs it starts).
    pub async fn call(&self, source: &str, name: &str, args: Value, principal: &str) -> CallResult {
        let reply = match source {
            DEPLOY_SOURCE => {
                self.run_deployment(&json!({"name": name, "inputs": args}), principal)
                    .await
            }
            _ => self.planner_call(name, &args, principal).await,
        };
        match reply {
            Ok(v) => {
                // A run that failed is the call's failure; any other reply
                // (e.g. cancel_run's "cancelled") is a success.
                let runs =
                    source == DEPLOY_SOURCE || matches!(name, "run_deployment" | "run_workflow");
                let failed = runs
                    && v.get("status")
                        .and_then(Value::as_str)
                        .and_then(|s| s.parse::<RunStatus>().ok())
                        .is_some_and(RunStatus::is_failure);
                CallResult {
                    is_error: failed,
                    ..CallResult::structured(v)
                }
            }
            Err(f) => f.into_result(),
        }
    }

    async fn planner_call(&self, name: &str, args: &Value, principal: &str) -> Reply {
        match name {
            "list_capabilities" => self.list_capabilities(args).await,
            "describe_capability" => self.describe(args).await,
            "validate_workflow" => self.validate(args).await,
            "save_draft" => self.save_draft(args).await,
            "get_draft" => {
                let d = self.app.store.draft(need(args, "draft_id")?).await?;
                Ok(
                    json!({"draft_id": d.id, "name": d.name, "workflow": d.document, "updated_at": d.updated_at}),
                )
            }
            "list_drafts" => {
                let drafts: Vec<Value> = self
                    .app
                    .store
                    .drafts()
                    .await?
                    .into_iter()
                    .map(|d| json!({"draft_id": d.id, "name": d.name, "updated_at": d.updated_at}))
                    .collect();
                Ok(json!({"drafts": drafts}))
            }
            "publish_artifact" => self.publish(args, principal).await,
            "deploy" => self.deploy(args).await,
            "run_deployment" => self.run_deployment(args, principal).await,
            "run_workflow" => self.run_workflow(args, principal).await,
            "get_run" => {
                let (run, nodes) = self.app.store.run(need(args, "run_id")?).await?;
                Ok(json!({"run": run, "nodes": nodes}))
            }
            "list_runs" => {
                let limit = args.get("limit").and_then(Value::as_u64).unwrap_or(20) as usize;
                let status = arg(args, "status")
                    .map(str::parse::<RunStatus>)
                    .transpose()
                    .map_err(|e| fail(e.to_string(), "see the tool's input schema"))?;
                let runs = self.app.store.runs(limit, status).await?;
                let runs: Vec<Value> = runs.into_iter().map(|r| json!({"run_id": r.id, "workflow": r.workflow, "status": r.status, "origin": r.origin, "principal": r.principal, "started_at": r.started_at, "finished_at": r.finished_at, "error": r.error})).collect();
                Ok(json!({"runs": runs}))
            }
            "cancel_run" => {
                let id = need(args, "run_id")?;
                let cancelled = self.engine.cancel_anywhere(id).await?;
                let (run, _) = self.engine.wait(id, Duration::from_secs(10)).await?;
                Ok(json!({"run_id": id, "cancelled": cancelled, "status": run.status}))
            }
            "call_capability" => self.call_capability(args, principal).await,
            other => Err(fail(
                format!("no planner tool {other:?}"),
                "list the server's tools",
            )),
        }
    }

    async fn list_capabilities(&self, args: &Value) -> Reply {
        let kind = arg(args, "kind").unwrap_or("node");
        let query = arg(args, "query").filter(|q| !q.trim().is_empty());
        let only = arg(args, "source");
        let limit = args
            .get("limit")
            .and_then(Value::as_u64)
            .unwrap_or(50)
            .clamp(1, 200) as usize;
        let proj = self.app.projection_ready().await;
        // On an endpoint: its node specs, and its tools, prompts and
        // resources as it shows them.
        let endpoint = crate::surfaces::endpoints::current();
        let view = endpoint.as_ref().map(|e| (e, e.view(&proj)));
        let snapshot = Snapshot::take(&self.app.sources);
        let mut items = Vec::new();
        // With a query, what is searched (the same BM25 ranking as wf_find).
        let mut docs = Vec::new();
        if let Some((_, v)) = view.as_ref().filter(|_| kind != "node") {
            let mut push = |source: &str,
                            name: &str,
                            description: &str,
                            extra: Value,
                            schema: &Value| {
                if only.is_some_and(|o| o != source) {
                    return;
                }
                if query.is_some() {
                    docs.push(DocText::tool(name, source, name, description, schema));
                }
                let short: String = description.chars().take(200).collect();
                let mut item = json!({"ref": name, "kind": kind, "source": source, "name": name, "description": short});
                if let (Some(o), Some(e)) = (item.as_object_mut(), extra.as_object()) {
                    o.extend(e.clone());
                }
                items.push(item);
            };
            match kind {
                "tool" => v.tools().for_each(|t| {
                    let d = t.shown.item.description.as_deref().unwrap_or("");
                    push(
                        &t.shown.source,
                        &t.shown.name,
                        d,
                        json!({}),
                        &t.shown.item.input_schema,
                    )
                }),
                "prompt" => v.prompts().for_each(|p| {
                    let d = p.item.description.as_deref().unwrap_or("");
                    push(&p.source, &p.name, d, json!({}), &Value::Null)
                }),
                "resource" => v.resources().for_each(|r| {
                    let d = r.item.description.as_deref().unwrap_or("");
                    push(
                        &r.source,
                        &r.name,
                        d,
                        json!({"uri": r.item.uri}),
                        &Value::Null,
                    )
                }),
                other => {
                    return Err(fail(
                        format!("unknown kind {other:?}"),
                        "use node, tool, prompt or resource",
                    ));
                }
            }
        }
        for (source, cat) in &snapshot.sources {
            if only.is_some_and(|o| o != source) || (view.is_some() && kind != "node") {
                continue;
            }
            let mut push = |name: &str, description: &str, extra: Value, schema: &Value| {
                if let Some((e, v)) = &view
                    && !e.selects_node(v, source, name)
                {
                    return;
                }
                let reference = format!("{source}.{name}");
                if query.is_some() {
                    docs.push(DocText::tool(&reference, source, name, description, schema));
                }
                let short: String = description.chars().take(200).collect();
                let mut item = json!({"ref": reference, "kind": kind, "source": source, "name": name, "description": short});
                if let (Some(o), Some(e)) = (item.as_object_mut(), extra.as_object()) {
                    o.extend(e.clone());
                }
                items.push(item);
            };
            match kind {
                "node" => crate::sources::node_schemas::node_specs(cat).for_each(|n| {
                    push(
                        &n.name,
                        &n.description,
                        json!({"stateful": n.stateful, "side_effects": n.side_effects}),
                        &n.input_schema,
                    )
                }),
                "tool" => cat.tools.iter().for_each(|t| {
                    let d = t.description.as_deref().unwrap_or("");
                    push(&t.name, d, json!({}), &t.input_schema)
                }),
                "prompt" => cat.prompts.iter().for_each(|p| {
                    let d = p.description.as_deref().unwrap_or("");
                    push(&p.name, d, json!({}), &Value::Null)
                }),
                "resource" => cat.resources.iter().for_each(|r| {
                    push(
                        &r.name,
                        r.description.as_deref().unwrap_or(""),
                        json!({"uri": r.uri}),
                        &Value::Null,
                    )
                }),
                other => {
                    return Err(fail(
                        format!("unknown kind {other:?}"),
                        "use node, tool, prompt or resource",
                    ));
                }
            }
        }
        if let Some(q) = query {
            // Best match first; what shares no word with the query is left out.
            let index = Index::new(vec![std::sync::Arc::new(Segment::build(&docs))]);
            let order: std::collections::HashMap<&str, usize> = index
                .search(q, items.len(), |_| true)
                .iter()
                .enumerate()
                .map(|(i, h)| (h.key, i))
                .collect();
            items.retain(|i| order.contains_key(i["ref"].as_str().unwrap_or("")));
            items.sort_by_key(|i| order[i["ref"].as_str().unwrap_or("")]);
        }
        let (page, next) = crate::surfaces::proxy::page(&items, arg(args, "cursor"), limit)
            .map_err(|e| fail(e, "pass the next_cursor you were given"))?;
        Ok(json!({"items": page, "total": items.len(), "next_cursor": next}))
    }

    /// The node specs the caller may use: all of them, or on an endpoint
    /// those it selects.
    async fn catalog(&self) -> crate::workflow::PlannerCatalog {
        let mut catalog = self.engine.catalog().await;
        if let Some(e) = crate::surfaces::endpoints::current() {
            let view = e.view(&self.app.projection());
            catalog
                .nodes
                .retain(|_, n| e.selects_node(&view, &n.source, &n.name));
        }
        catalog
    }

    async fn describe(&self, args: &Value) -> Reply {
        let reference = need(args, "ref")?;
        let catalog = self.catalog().await;
        let Some(e) = catalog.get(reference) else {
            return Err(fail(
                format!("no capability {reference:?}"),
                "call list_capabilities to find refs",
            ));
        };
        let required: Vec<&str> = e
            .spec
            .input_schema
            .get("required")
            .and_then(Value::as_array)
            .into_iter()
            .flatten()
            .filter_map(Value::as_str)
            .collect();
        let example_args: serde_json::Map<String, Value> = required
            .iter()
            .map(|r| (r.to_string(), json!(format!("<{r}>"))))
            .collect();
        Ok(json!({
            "ref": reference, "kind": "node", "source": e.source, "name": e.name,
            "description": e.spec.description, "input_schema": e.spec.input_schema, "output_schema": e.spec.output_schema,
            "stateful": e.spec.stateful, "side_effects": e.spec.side_effects,
            "example_node": {"id": "step1", "use": reference, "args": example_args},
        }))
    }

    fn parse(&self, v: Option<&Value>) -> Result<Workflow, Failure> {
        let v = v.ok_or_else(|| {
            fail(
                "missing argument \"workflow\"",
                "pass the workflow document as `workflow`",
            )
        })?;
        Workflow::from_value(v).map_err(|e| {
            fail(
                e,
                "see the wf_std__author_workflow prompt for the document format",
            )
        })
    }

    async fn validate(&self, args: &Value) -> Reply {
        let wf = self.parse(args.get("workflow"))?;
        let problems = validate(&wf, &self.catalog().await);
        let hint = if problems.is_empty() {
            "valid: save_draft, then publish_artifact and deploy, or run_workflow"
        } else {
            "fix each problem at its path, then validate again"
        };
        Ok(json!({"valid": problems.is_empty(), "problems": problems, "hint": hint}))
    }

    async fn save_draft(&self, args: &Value) -> Reply {
        let wf = self.parse(args.get("workflow"))?;
        let name = arg(args, "name").map(str::to_string).unwrap_or_else(|| {
            if wf.name.is_empty() {
                "workflow".into()
            } else {
                wf.name.clone()
            }
        });
        let d = self
            .app
            .store
            .save_draft(
                arg(args, "draft_id"),
                &name,
                &serde_json::to_value(&wf).unwrap_or_default(),
            )
            .await?;
        let problems = validate(&wf, &self.catalog().await);
        Ok(
            json!({"draft_id": d.id, "name": d.name, "valid": problems.is_empty(), "problems": problems}),
        )
    }

    async fn publish(&self, args: &Value, principal: &str) -> Reply {
        let d = self.app.store.draft(need(args, "draft_id")?).await?;
        let wf = Workflow::from_value(&d.document)
            .map_err(|e| fail(e, "fix the draft with save_draft"))?;
        let catalog = self.catalog().await;
        let problems = validate(&wf, &catalog);
        if !problems.is_empty() {
            return Err(Failure::Invalid {
                error: "the draft is not valid",
                hint: "fix the problems, save_draft, then publish again",
                problems,
            });
        }
        // The call pipeline's check at publish: nothing the publisher could
        // never call (each node is checked again when it runs).
        let who = acting_as(principal);
        self.app
            .node_sources()
            .check_publish(&wf, &catalog, &who)
            .map_err(|e| fail(e, "ask the operator for access, or use other capabilities"))?;
        let name = arg(args, "name").unwrap_or(&d.name);
        let a = self
            .app
            .store
            .publish(name, &d.document, Some(&d.id))
            .await?;
        Ok(
            json!({"artifact": a.reference(), "name": a.name, "version": a.version, "hash": a.hash, "hint": "deploy it with deploy"}),
        )
    }

    async fn deploy(&self, args: &Value) -> Reply {
        let name = need(args, "name")?;
        if !valid_deployment_name(name) {
            return Err(fail(
                format!("invalid deployment name {name:?}"),
                "use up to 40 letters, digits, '_' and '-'",
            ));
        }
        let spec = need(args, "artifact")?;
        let (an, av) =
            match spec.split_once('@') {
                Some((n, v)) => (
                    n,
                    Some(v.parse::<i64>().map_err(|_| {
                        fail(format!("bad version in {spec:?}"), "use name@version")
                    })?),
                ),
                None => (spec, None),
            };
        let artifact = self.app.store.artifact(an, av).await?;
        let d = self.app.store.deploy(name, &artifact).await?;
        self.refresh_deployments();
        let tool = self
            .app
            .projection()
            .tools
            .iter()
            .find(|t| t.source == DEPLOY_SOURCE && t.original == name)
            .map(|t| t.name.clone());
        Ok(
            json!({"deployment": d.name, "artifact": artifact.reference(), "tool": tool, "hint": "run it with run_deployment or by calling its tool"}),
        )
    }

    /// Runs `wf` with `args.inputs`; waits for it unless `args.wait` is false.
    async fn run(&self, wf: Workflow, origin: RunOrigin, args: &Value, principal: &str) -> Reply {
        let inputs = args.get("inputs").cloned().unwrap_or(Value::Null);
        let run_id = match self.engine.start(wf, inputs, origin, principal, None).await {
            Ok(id) => id,
            Err(StartError::Invalid(problems)) => {
                return Err(Failure::Invalid {
                    error: "the workflow is not valid against the current catalog",
                    hint: "fix the problems (validate_workflow), then run again",
                    problems,
                });
            }
            Err(StartError::BadInputs(e)) => {
                return Err(fail(e, "pass inputs matching the workflow's input schema"));
            }
            Err(StartError::Store(e)) => return Err(e.into()),
        };
        if args.get("wait").and_then(Value::as_bool) == Some(false) {
            return Ok(
                json!({"run_id": run_id, "status": RunStatus::Running, "hint": "poll get_run"}),
            );
        }
        let wait = args
            .get("timeout_ms")
            .and_then(Value::as_u64)
            .map(Duration::from_millis)
            .unwrap_or(DEFAULT_WAIT);
        let (run, nodes) = self.engine.wait(&run_id, wait).await?;
        Ok(run_reply(&run, &nodes))
    }

    /// Whether a call to `source`'s tool `name` starts a run (and so may be
    /// served as a task).
    pub fn starts_run(source: &str, name: &str) -> bool {
        source == DEPLOY_SOURCE
            || (source == PLANNER_SOURCE && matches!(name, "run_workflow" | "run_deployment"))
    }

    /// Starts the run a call to `source`'s `name` asks for, without waiting:
    /// its run id, or the call's failure as its result.
    pub async fn start_run(
        &self,
        source: &str,
        name: &str,
        args: Value,
        principal: &str,
    ) -> Result<String, CallResult> {
        let deployment = source == DEPLOY_SOURCE;
        let mut args = if deployment {
            json!({"name": name, "inputs": args})
        } else {
            args
        };
        args["wait"] = Value::Bool(false);
        let reply = if deployment || name == "run_deployment" {
            self.run_deployment(&args, principal).await
        } else {
            self.run_workflow(&args, principal).await
        };
        match reply {
            Ok(v) => v["run_id"].as_str().map(str::to_string).ok_or_else(|| {
                fail("the run did not start".to_string(), "try again").into_result()
            }),
            Err(f) => Err(f.into_result()),
        }
    }

    /// A run's status, and once it ended the reply the call that waited for
    /// it gets (an error result when the run failed or was cancelled).
    pub fn run_outcome(&self, run_id: &str) -> Result<(RunStatus, Option<CallResult>), StoreError> {
        let store = &self.app.store;
        let (run, nodes) = store.blocking(store.run(run_id))?;
        if matches!(run.status, RunStatus::Pending | RunStatus::Running) {
            return Ok((run.status, None));
        }
        let result = CallResult {
            is_error: run.status.is_failure() || run.status == RunStatus::Interrupted,
            ..CallResult::structured(run_reply(&run, &nodes))
        };
        Ok((run.status, Some(result)))
    }

    /// Cancels a run (its in-flight nodes stop); whether it was running here.
    pub fn cancel_run(&self, run_id: &str) -> bool {
        self.engine.cancel(run_id)
    }

    async fn run_deployment(&self, args: &Value, principal: &str) -> Reply {
        let name = need(args, "name")?;
        let d = self.app.store.deployment(name).await?;
        let artifact = self
            .app
            .store
            .artifact(&d.artifact_name, Some(d.artifact_version))
            .await?;
        let wf = Workflow::from_value(&artifact.document)
            .map_err(|e| fail(e, "redeploy a valid artifact"))?;
        let origin = RunOrigin::Deployment {
            name: name.into(),
            artifact: artifact.reference(),
        };
        self.run(wf, origin, args, principal).await
    }

    async fn run_workflow(&self, args: &Value, principal: &str) -> Reply {
        let (wf, origin) = match arg(args, "draft_id") {
            Some(id) => {
                let d = self.app.store.draft(id).await?;
                (
                    Workflow::from_value(&d.document)
                        .map_err(|e| fail(e, "fix the draft with save_draft"))?,
                    RunOrigin::Draft { id: id.into() },
                )
            }
            None => (self.parse(args.get("workflow"))?, RunOrigin::Inline),
        };
        // On an endpoint, a workflow the client wrote uses only its node
        // specs (a deployment was checked when it was published).
        if crate::surfaces::endpoints::current().is_some() {
            let problems = validate(&wf, &self.catalog().await);
            if !problems.is_empty() {
                return Err(Failure::Invalid {
                    error: "the workflow uses capabilities this endpoint does not offer",
                    hint: "list_capabilities shows what this endpoint offers",
                    problems,
                });
            }
        }
        self.run(wf, origin, args, principal).await
    }

    async fn call_capability(&self, args: &Value, principal: &str) -> Reply {
        let reference = need(args, "ref")?;
        let catalog = self.catalog().await;
        let e = catalog.get(reference).ok_or_else(|| {
            fail(
                format!("no capability {reference:?}"),
                "call list_capabilities to find refs",
            )
        })?;
        let arguments = args.get("arguments").cloned().unwrap_or_else(|| json!({}));
        // The call pipeline, as the caller: the same decision as a direct call.
        let who = acting_as(principal);
        let facts = self.app.pipeline.tool_facts(&e.source, &e.name);
        let call = crate::pipeline::Call {
            entry: crate::pipeline::Entry::Planner,
            principal: &who,
            capability: crate::pipeline::Capability {
                kind: crate::pipeline::Kind::Tool,
                source: &e.source,
                name: &facts.name,
                annotations: facts.annotations.as_ref(),
            },
            arguments: &arguments,
            client: None,
            client_version: None,
            endpoint: None,
            transport: crate::pipeline::Transport::Internal,
        };
        let admission = self
            .app
            .pipeline
            .admit(&call)
            .map_err(|r| fail(r.message, "ask the operator for access"))?;
        let recorded = self.app.pipeline.record(&call, &admission, None);
        let handle = self
            .app
            .sources
            .get(&e.source)
            .and_then(|s| s.handle.clone())
            .ok_or_else(|| {
                fail(
                    format!("source {:?} is not available", e.source),
                    "check the source's status",
                )
            })?;
        // The caller's own session where the source has per-client ones.
        let session = match crate::sources::sessions::current_caller() {
            Some(caller) => self
                .app
                .sessions
                .session_for(&caller, &handle)
                .await
                .map_err(|e| fail(e.to_string(), "see the source's session settings"))?,
            None => None,
        };
        let mut info = json!({});
        if let Some(s) = &session {
            s.annotate(&mut info);
        }
        let ctx = CallCtx::new().with_info(info);
        use crate::pipeline::record::Outcome;
        match handle.run_node(&e.name, arguments, ctx).await {
            Ok(output) => {
                if let Some(r) = recorded {
                    r.finish(Outcome::Ok, Some(&output));
                }
                Ok(json!({"ref": reference, "output": output}))
            }
            Err(err) => {
                if let Some(r) = recorded {
                    r.fail(Outcome::ToolError, &err.to_string());
                }
                Err(fail(
                    err.to_string(),
                    "check the arguments against describe_capability",
                ))
            }
        }
    }
}

/// The principal a planner call acts as: the one the caller set (with its
/// groups), else the named one.
fn acting_as(principal: &str) -> crate::pipeline::Principal {
    crate::pipeline::current_principal()
        .filter(|p| p.name() == principal)
        .unwrap_or_else(|| crate::pipeline::Principal::named(principal))
}

/// With several replicas, a deploy on any of them refreshes this one's
/// deployment tools (and so its clients hear `tools/list_changed`).
fn follow_deployments(planner: &Arc<Planner>) {
    let Some(mut changes) = planner.app.store.deployment_changes() else {
        return;
    };
    let Ok(rt) = tokio::runtime::Handle::try_current() else {
        return;
    };
    let planner = Arc::downgrade(planner);
    rt.spawn(async move {
        loop {
            match changes.recv().await {
                Ok(()) | Err(tokio::sync::broadcast::error::RecvError::Lagged(_)) => {}
                Err(tokio::sync::broadcast::error::RecvError::Closed) => return,
            }
            let Some(planner) = planner.upgrade() else {
                return;
            };
            planner.refresh_deployments();
        }
    });
}
