//! Since 1.3: serving a tool call as a task (the MCP Tasks extension,
//! `io.modelcontextprotocol/tasks`, SEP-2663). The host asks with
//! [`SourceRequest::CallToolAsTask`](crate::SourceRequest::CallToolAsTask)
//! when its client declared the extension; the source answers with a task
//! handle or, when it ran the call at once, with the plain result. The
//! host then routes `tasks/get` and `tasks/cancel` for that task back with
//! [`SourceRequest::GetTask`](crate::SourceRequest::GetTask) and
//! [`SourceRequest::CancelTask`](crate::SourceRequest::CancelTask), naming
//! the task by the id the source gave. Task JSON is MCP's, as the source's
//! upstream sent it: the host maps ids and owners, never the payload.

use serde::{Deserialize, Serialize};
use serde_json::Value;

use crate::types::CallResult;

/// How a source answered a call asked for as a task.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum TaskStart {
    /// The call runs on as a task: MCP's `Task` (`taskId`, `status`,
    /// `createdAt`, ...), its `taskId` the source's own.
    Task(Value),
    /// The call ran at once (the source or its upstream does not serve it as
    /// a task): its result, as for a plain call.
    Complete(CallResult),
}
