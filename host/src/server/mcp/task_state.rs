//! A task's state as `tasks/get` reads it (SEP-2663's detailed task), for
//! wf's own runs and for a source's forwarded tasks alike: what both task
//! flavours, `tasks/list` and the status notifications are built from.

use rmcp::ErrorData as McpError;
use rmcp::model::{GetTaskResult, TaskStatus};

use super::Surfaces;
use crate::app::App;

/// The task `id` of `principal`, as it stands now; "not found" for anyone
/// else's, or an expired one.
pub(super) async fn of(
    app: &App,
    surfaces: &Surfaces,
    principal: &str,
    id: &str,
) -> Result<GetTaskResult, McpError> {
    let (tasks, now) = (&surfaces.tasks, crate::clock::now_ms());
    let Some(t) = tasks.get(principal, id, now) else {
        return Err(super::tasks::not_found(id));
    };
    match &t.upstream {
        Some(up) => {
            let current = app.sources.handle(&up.source);
            super::upstream_tasks::get(tasks, (id, &t, up), current).await
        }
        None => super::tasks::get_run(tasks, &surfaces.planner, id, &t, now),
    }
}

/// Whether `status` is final.
pub(super) fn terminal(status: TaskStatus) -> bool {
    matches!(
        status,
        TaskStatus::Completed | TaskStatus::Failed | TaskStatus::Cancelled
    )
}

/// Cancels task `id` of `principal`: its run, or the source's task.
pub(super) async fn cancel(
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
        let cancelled = super::upstream_tasks::cancel(&up, current).await;
        tracing::info!(principal, task = %id, source = %up.source, "task cancelled");
        return cancelled;
    }
    super::tasks::cancel((tasks.as_ref(), surfaces.planner.as_ref()), principal, id)
}
