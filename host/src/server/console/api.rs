//! The console's JSON API: each request is an admin or planner tool call
//! made with the caller's principal (and admin token), so the console shows
//! and does exactly what those surfaces allow; nothing here re-implements them.

use axum::Json;
use axum::extract::{Extension, Path, State};
use axum::http::{HeaderMap, StatusCode};
use axum::response::{IntoResponse, Response};
use futures::future::BoxFuture;
use serde_json::{Value, json};
use wf_plugin_api::CallResult;

use super::Console;
use super::access::Kind;
use super::refused;
use super::viewer::Viewer;
use crate::app::App;
use crate::server::Principal;
use crate::surfaces::admin::ADMIN_SOURCE;
use crate::surfaces::planner::PLANNER_SOURCE;
use crate::workflow::{Workflow, graph};

/// Most capabilities one search answers with.
const MAX_CAPABILITIES: usize = 200;

/// A tool's answer as HTTP: its structured content, 422 when it failed.
fn answer(r: CallResult) -> Response {
    let status = if r.is_error {
        StatusCode::UNPROCESSABLE_ENTITY
    } else {
        StatusCode::OK
    };
    (status, Json(r.structured_content.unwrap_or(Value::Null))).into_response()
}

/// Who asks, as the guard admitted them.
type Who = (Viewer, Principal);

async fn admin_call(
    c: &Console,
    h: &HeaderMap,
    (v, p): Who,
    name: &str,
    args: Value,
    kind: Kind,
) -> Response {
    let caller = match c.admit(v, h, &p, ADMIN_SOURCE, name, kind) {
        Ok(caller) => caller,
        Err(r) => return *r,
    };
    let recorded = (kind == Kind::Action).then(|| record_action(c, &p, ADMIN_SOURCE, name, &args));
    match &c.surfaces.admin {
        Some(admin) => {
            let r = admin.call(name, args, &caller).await;
            finish_action(recorded.flatten(), &r);
            answer(r)
        }
        None => refused(StatusCode::FORBIDDEN, "the admin surface is off", ""),
    }
}

/// The record stage of a console action (views, which the page repeats,
/// are not recorded; a refusal of either is, by the pipeline).
fn record_action(
    c: &Console,
    p: &Principal,
    source: &str,
    name: &str,
    args: &Value,
) -> Option<crate::pipeline::record::Pending> {
    let tool = c.client_name(source, name);
    let call = crate::pipeline::Call {
        entry: crate::pipeline::Entry::Console,
        principal: p,
        capability: crate::pipeline::Capability {
            kind: crate::pipeline::Kind::Tool,
            source,
            name: &tool,
            annotations: None,
        },
        arguments: args,
        client: Some("console"),
        client_version: None,
        endpoint: None,
        transport: crate::pipeline::Transport::Http,
    };
    // The console admitted the action before (`Console::admit`), without
    // keeping which policies permitted it.
    c.app
        .pipeline
        .record(&call, &crate::pipeline::Admission::default(), None)
}

fn finish_action(recorded: Option<crate::pipeline::record::Pending>, r: &CallResult) {
    use crate::pipeline::record::Outcome;
    if let Some(pending) = recorded {
        let outcome = if r.is_error {
            Outcome::ToolError
        } else {
            Outcome::Ok
        };
        pending.finish(outcome, r.structured_content.as_ref());
    }
}

async fn planner_call(
    c: &Console,
    h: &HeaderMap,
    (v, p): Who,
    name: &str,
    args: Value,
    kind: Kind,
) -> Response {
    if let Err(r) = c.admit(v, h, &p, PLANNER_SOURCE, name, kind) {
        return *r;
    }
    let recorded =
        (kind == Kind::Action).then(|| record_action(c, &p, PLANNER_SOURCE, name, &args));
    let planner = &c.surfaces.planner;
    let call = planner.call(PLANNER_SOURCE, name, args, p.name());
    let r = crate::pipeline::as_principal(p.clone(), call).await;
    finish_action(recorded.flatten(), &r);
    answer(r)
}

/// An endpoint that is one admin tool called without arguments
/// (`status`, `list_sources`, `list_plugins`, `reload`).
#[allow(clippy::type_complexity)]
pub fn admin_tool(
    tool: &'static str,
    kind: Kind,
) -> impl Fn(
    State<Console>,
    Extension<Viewer>,
    Extension<Principal>,
    HeaderMap,
) -> BoxFuture<'static, Response>
+ Clone
+ Send
+ Sync
+ 'static {
    move |State(c), Extension(v), Extension(p), h| {
        Box::pin(async move { admin_call(&c, &h, (v, p), tool, json!({}), kind).await })
    }
}

/// `{"source": name}` refreshes one source; `{}` all of them.
pub async fn refresh(
    State(c): State<Console>,
    Extension(v): Extension<Viewer>,
    Extension(p): Extension<Principal>,
    h: HeaderMap,
    Json(args): Json<Value>,
) -> Response {
    let args = match args.get("source").and_then(Value::as_str) {
        Some(s) => json!({"source": s}),
        None => json!({}),
    };
    admin_call(&c, &h, (v, p), "refresh_catalog", args, Kind::Action).await
}

/// The tool pins (issue 54): `pin` (`{"sources": [..]}`), `diff`, `approve`
/// (`{"names": [..]}`), each the admin tool of that name, for operators only.
pub async fn tool_pins(
    State(c): State<Console>,
    Extension(v): Extension<Viewer>,
    Extension(p): Extension<Principal>,
    axum::extract::Path(action): axum::extract::Path<String>,
    h: HeaderMap,
    Json(args): Json<Value>,
) -> Response {
    let (tool, kind) = match action.as_str() {
        "pin" => ("pin_tools", Kind::Action),
        "diff" => ("diff_tools", Kind::Read),
        "approve" => ("approve_tools", Kind::Action),
        _ => {
            return refused(
                StatusCode::NOT_FOUND,
                "no such tool pins action",
                "pin, diff or approve",
            );
        }
    };
    admin_call(&c, &h, (v, p), tool, args, kind).await
}

/// `{"query": "words", "kind": "tool"|"prompt"|"resource"|"resource_template"}`:
/// what clients of this principal are served, as clients name it, with
/// schemas; every word must occur in the name, source or description.
pub async fn capabilities(
    State(c): State<Console>,
    Extension(v): Extension<Viewer>,
    Extension(p): Extension<Principal>,
    h: HeaderMap,
    Json(args): Json<Value>,
) -> Response {
    if let Err(r) = c.admit(v, &h, &p, PLANNER_SOURCE, "list_capabilities", Kind::Read) {
        return *r;
    }
    let words: Vec<String> = args
        .get("query")
        .and_then(Value::as_str)
        .unwrap_or("")
        .split_whitespace()
        .map(str::to_lowercase)
        .collect();
    let only = args
        .get("kind")
        .and_then(Value::as_str)
        .filter(|k| !k.is_empty());
    let proj = c.app.projection_ready().await;
    let mut items: Vec<Value> = Vec::new();
    let tools = proj.tools.iter().filter(|t| c.may_see(&p, t)).map(|t| {
        json!({"kind": "tool", "name": t.name, "source": t.source, "original": t.original,
               "description": t.item.description, "input_schema": t.item.input_schema,
               "output_schema": t.item.output_schema})
    });
    let prompts = proj.prompts.iter().map(|t| {
        json!({"kind": "prompt", "name": t.name, "source": t.source, "original": t.original,
               "description": t.item.description, "arguments": t.item.arguments})
    });
    let resources = proj.resources.iter().map(|t| {
        json!({"kind": "resource", "name": t.name, "source": t.source, "original": t.original,
               "description": t.item.description, "uri": t.item.uri, "mime_type": t.item.mime_type})
    });
    let templates = proj.templates.iter().map(|t| {
        json!({"kind": "resource_template", "name": t.name, "source": t.source, "original": t.original,
               "description": t.item.description, "uri_template": t.item.uri_template})
    });
    let mut total = 0;
    for item in tools.chain(prompts).chain(resources).chain(templates) {
        if only.is_some_and(|k| item["kind"] != k) {
            continue;
        }
        let hay = format!(
            "{} {} {}",
            item["name"].as_str().unwrap_or(""),
            item["source"].as_str().unwrap_or(""),
            item["description"].as_str().unwrap_or("")
        )
        .to_lowercase();
        if words.iter().all(|w| hay.contains(w)) {
            total += 1;
            if items.len() < MAX_CAPABILITIES {
                items.push(item);
            }
        }
    }
    Json(json!({"items": items, "total": total, "truncated": total > items.len()})).into_response()
}

/// `{"status": "...", "limit": n, "query": "words"}`: the newest runs, as
/// the planner's `list_runs` gives them, narrowed to those whose id,
/// workflow or principal contains every word; each says whether it is an
/// MCP task's run (`task`).
pub async fn runs(
    State(c): State<Console>,
    Extension(v): Extension<Viewer>,
    Extension(p): Extension<Principal>,
    h: HeaderMap,
    Json(args): Json<Value>,
) -> Response {
    let mut list =
        json!({"limit": args.get("limit").and_then(Value::as_u64).unwrap_or(100).min(1000)});
    if let Some(s) = args
        .get("status")
        .and_then(Value::as_str)
        .filter(|s| !s.is_empty())
    {
        list["status"] = json!(s);
    }
    let r = planner_call(&c, &h, (v, p), "list_runs", list, Kind::Read).await;
    let words: Vec<String> = args
        .get("query")
        .and_then(Value::as_str)
        .unwrap_or("")
        .split_whitespace()
        .map(str::to_lowercase)
        .collect();
    if r.status() != StatusCode::OK {
        return r;
    }
    let Ok(body) = axum::body::to_bytes(r.into_body(), usize::MAX).await else {
        return refused(
            StatusCode::INTERNAL_SERVER_ERROR,
            "cannot read the run list",
            "retry",
        );
    };
    let mut v: Value = serde_json::from_slice(&body).unwrap_or_default();
    // Runs a client started as MCP Tasks say so (`task: true`), beside the rest.
    let tasks = c.surfaces.tasks.run_ids(crate::clock::now_ms());
    if let Some(runs) = v.get_mut("runs").and_then(Value::as_array_mut) {
        for run in runs.iter_mut() {
            let is_task = run
                .get("run_id")
                .and_then(Value::as_str)
                .is_some_and(|id| tasks.contains(id));
            run["task"] = Value::Bool(is_task);
        }
        runs.retain(|run| {
            let hay = ["run_id", "workflow", "principal"]
                .iter()
                .filter_map(|k| run.get(*k).and_then(Value::as_str))
                .collect::<Vec<_>>()
                .join(" ")
                .to_lowercase();
            words.iter().all(|w| hay.contains(w))
        });
    }
    Json(v).into_response()
}

/// One run with its node records and its workflow's graph.
pub async fn run(
    State(c): State<Console>,
    Extension(v): Extension<Viewer>,
    Extension(p): Extension<Principal>,
    h: HeaderMap,
    Path(id): Path<String>,
) -> Response {
    if let Err(r) = c.admit(v, &h, &p, PLANNER_SOURCE, "get_run", Kind::Read) {
        return *r;
    }
    let r = c
        .surfaces
        .planner
        .call(PLANNER_SOURCE, "get_run", json!({"run_id": id}), p.name())
        .await;
    if r.is_error {
        let body = r.structured_content.unwrap_or(Value::Null);
        return (StatusCode::NOT_FOUND, Json(body)).into_response();
    }
    let mut v = r.structured_content.unwrap_or(Value::Null);
    let graph = c
        .surfaces
        .planner
        .engine
        .events
        .graph(&id)
        .or_else(|| stored_graph(&c.app, &v["run"]["origin"]));
    v["graph"] = graph.unwrap_or(Value::Null);
    Json(v).into_response()
}

/// The graph of a run this process did not start, from the document its
/// origin names (a draft as saved now, an artifact as published). Inline
/// and file runs kept no document: the page then draws the recorded nodes.
fn stored_graph(app: &App, origin: &Value) -> Option<Value> {
    let document = match origin.get("kind")?.as_str()? {
        "draft" => {
            let store = &app.store;
            store
                .blocking(store.draft(origin.get("id")?.as_str()?))
                .ok()?
                .document
        }
        "artifact" | "deployment" => {
            let (name, version) = origin.get("artifact")?.as_str()?.rsplit_once('@')?;
            let store = &app.store;
            store
                .blocking(store.artifact(name, version.parse().ok()))
                .ok()?
                .document
        }
        _ => return None,
    };
    Some(graph::to_json(&Workflow::from_value(&document).ok()?))
}

pub async fn cancel(
    State(c): State<Console>,
    Extension(v): Extension<Viewer>,
    Extension(p): Extension<Principal>,
    h: HeaderMap,
    Path(id): Path<String>,
) -> Response {
    planner_call(
        &c,
        &h,
        (v, p),
        "cancel_run",
        json!({"run_id": id}),
        Kind::Action,
    )
    .await
}

/// Most source tasks the console lists (each is asked for its status).
const MAX_TASKS_SHOWN: usize = 200;

/// How long the console waits for one task's status from its source.
const TASK_STATUS_WAIT: std::time::Duration = std::time::Duration::from_secs(2);

/// The tasks sources serve for clients (forwarded MCP Tasks), oldest first,
/// each with its status as its source tells it now. Runs started as tasks
/// are in the run list (`task: true`). Shown to whoever may list runs; wf's
/// own task ids are not shown (they are handles), the source's are.
pub async fn tasks(
    State(c): State<Console>,
    Extension(v): Extension<Viewer>,
    Extension(p): Extension<Principal>,
    h: HeaderMap,
) -> Response {
    if let Err(r) = c.admit(v, &h, &p, PLANNER_SOURCE, "list_runs", Kind::Read) {
        return *r;
    }
    let tasks = &c.surfaces.tasks;
    let all = tasks.source_tasks(crate::clock::now_ms());
    let more = all.len().saturating_sub(MAX_TASKS_SHOWN);
    let looks = all.iter().take(MAX_TASKS_SHOWN).map(|(id, t)| {
        let (app, surfaces) = (&c.app, &c.surfaces);
        async move {
            let status = tokio::time::timeout(
                TASK_STATUS_WAIT,
                crate::server::mcp::task_status(app, surfaces, &t.principal, id),
            )
            .await
            .unwrap_or_else(|_| "unknown (its source did not answer in time)".into());
            let up = t.upstream.as_ref();
            json!({
                "source": up.map(|u| u.source.as_str()),
                "source_task": up.map(|u| u.task_id.as_str()),
                "principal": t.principal,
                "status": status,
                "created_at": t.created_ms,
                "expires_at": tasks.expires_ms(t.created_ms),
            })
        }
    });
    let rows = futures::future::join_all(looks).await;
    Json(json!({"tasks": rows, "more": more})).into_response()
}

/// The Calls view: the audit trail, filtered as `query_audit` filters it
/// (empty filters dropped), newest first.
pub async fn audit(
    State(c): State<Console>,
    Extension(v): Extension<Viewer>,
    Extension(p): Extension<Principal>,
    h: HeaderMap,
    Json(args): Json<Value>,
) -> Response {
    let mut filter = serde_json::Map::new();
    if let Some(given) = args.as_object() {
        for (k, val) in given {
            let empty = val.is_null() || val.as_str().is_some_and(str::is_empty);
            if !empty {
                filter.insert(k.clone(), val.clone());
            }
        }
    }
    admin_call(
        &c,
        &h,
        (v, p),
        "query_audit",
        Value::Object(filter),
        Kind::Read,
    )
    .await
}
