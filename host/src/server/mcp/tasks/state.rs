//! A task's state as `tasks/get` reads it (SEP-2663's detailed task), for
//! wf's own runs and for a source's forwarded tasks alike: what both task
//! flavours, `tasks/list` and the status notifications are built from.

use std::time::Duration;

use rmcp::ErrorData as McpError;
use rmcp::model::{GetTaskResult, TaskStatus};

use crate::app::App;
use crate::server::mcp::Surfaces;

/// The task `id` of `principal`, as it stands now; "not found" for anyone
/// else's, or an expired one.
pub(in crate::server::mcp) async fn of(
    app: &App,
    surfaces: &Surfaces,
    principal: &str,
    id: &str,
) -> Result<GetTaskResult, McpError> {
    let (tasks, now) = (&surfaces.tasks, crate::clock::now_ms());
    let Some(t) = tasks.get(principal, id, now) else {
        return Err(tasks.missing(id));
    };
    match &t.upstream {
        Some(up) => {
            let current = app.sources.handle(&up.source);
            super::upstream::get(tasks, (id, &t, up), current).await
        }
        None => super::get_run(tasks, &surfaces.planner, id, &t, now),
    }
}

/// The status of task `id` of `principal` as it stands now (asking its
/// source, for a forwarded task), or why it cannot be told; for the console.
pub async fn status_of(app: &App, surfaces: &Surfaces, principal: &str, id: &str) -> String {
    match of(app, surfaces, principal, id).await {
        Ok(state) => serde_json::to_value(state.task.task.status)
            .ok()
            .and_then(|v| v.as_str().map(str::to_string))
            .unwrap_or_else(|| "unknown".into()),
        Err(e) => format!("unknown ({})", e.message),
    }
}

/// Whether `status` is final.
pub(in crate::server::mcp) fn terminal(status: TaskStatus) -> bool {
    matches!(
        status,
        TaskStatus::Completed | TaskStatus::Failed | TaskStatus::Cancelled
    )
}

/// Cancels task `id` of `principal`: its run, or the source's task.
pub(in crate::server::mcp) async fn cancel(
    app: &App,
    surfaces: &Surfaces,
    principal: &str,
    id: &str,
) -> Result<(), McpError> {
    let tasks = &surfaces.tasks;
    let up = tasks
        .get(principal, id, crate::clock::now_ms())
        .and_then(|t| t.upstream);
    if let Some(up) = up {
        let current = app.sources.handle(&up.source);
        let cancelled = super::upstream::cancel(&up, current).await;
        tracing::info!(principal, task = %id, source = %up.source, "task cancelled");
        return cancelled;
    }
    super::cancel((tasks.as_ref(), surfaces.planner.as_ref()), principal, id)
}

/// Gives task `id` of `principal` the client's answers to its input
/// requests: passed on to the source whose task it is. wf's own runs ask
/// for no input.
pub(in crate::server::mcp) async fn update(
    app: &App,
    surfaces: &Surfaces,
    principal: &str,
    id: &str,
    input_responses: serde_json::Value,
) -> Result<(), McpError> {
    let tasks = &surfaces.tasks;
    let Some(t) = tasks.get(principal, id, crate::clock::now_ms()) else {
        return Err(tasks.missing(id));
    };
    let Some(up) = t.upstream else {
        return Err(super::upstream::takes_no_input(id));
    };
    let current = app.sources.handle(&up.source);
    let updated = super::upstream::update(&up, id, current, input_responses).await;
    tracing::info!(principal, task = %id, source = %up.source, ok = updated.is_ok(), "task input passed on");
    updated
}

/// How often a watched task is looked at: as often as it says it may be
/// polled (`pollIntervalMs`), within these bounds.
const WATCH_EVERY: (Duration, Duration) = (Duration::from_millis(250), Duration::from_secs(5));

/// When to look at a task again.
pub(in crate::server::mcp) fn next_look(state: &GetTaskResult) -> Duration {
    state
        .task
        .task
        .poll_interval_ms
        .map_or(WATCH_EVERY.0, Duration::from_millis)
        .clamp(WATCH_EVERY.0, WATCH_EVERY.1)
}

/// Calls `send` with task `id`'s state each time its status changes (and
/// once at the start when `now`), until it ends or expires, `ended` fires,
/// or `send` says the client is gone.
pub(in crate::server::mcp) fn watch<F, Fut>(
    (app, surfaces): (std::sync::Arc<App>, Surfaces),
    (principal, id): (String, String),
    now: bool,
    ended: tokio_util::sync::CancellationToken,
    send: F,
) where
    F: Fn(GetTaskResult) -> Fut + Send + 'static,
    Fut: std::future::Future<Output = bool> + Send,
{
    tokio::spawn(async move {
        let mut last = (!now).then_some(TaskStatus::Working);
        loop {
            let Ok(state) = of(&app, &surfaces, &principal, &id).await else {
                return;
            };
            let (status, again) = (state.task.status(), next_look(&state));
            if last != Some(status) {
                last = Some(status);
                if !send(state).await {
                    return;
                }
            }
            if terminal(status) {
                return;
            }
            tokio::select! {
                () = tokio::time::sleep(again) => {}
                () = ended.cancelled() => return,
            }
        }
    });
}

/// The task ids a 2026-07-28 `subscriptions/listen` asked to hear about
/// (its filter's `taskIds`, which the JSON-RPC boundary moved to `_meta`:
/// rmcp's filter type drops the key).
pub(in crate::server::mcp) fn listened(meta: &rmcp::model::RequestMetaObject) -> Vec<String> {
    meta.0
        .0
        .get(crate::server::jsonrpc::LISTEN_TASK_IDS_META)
        .and_then(serde_json::Value::as_array)
        .map(|ids| {
            ids.iter()
                .filter_map(|v| v.as_str().map(str::to_string))
                .collect()
        })
        .unwrap_or_default()
}
