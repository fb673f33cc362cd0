//! `delete` asks the user before it deletes (MCP elicitation, through
//! `CallContext::elicit`, wf-plugin-api 1.2). When nobody can be asked — a
//! workflow run, or a client that did not declare elicitation — the delete
//! goes ahead as requested: the caller asked for it by name, and workflows
//! that clean up after themselves keep working.

use serde_json::json;
use wf_plugin_api::prelude::*;

use crate::store::Store;

/// Ok: go ahead with deleting `id`. Err: the user did not confirm.
pub async fn delete(store: &Store, source: &str, id: &str, ctx: &CallContext) -> Result<(), PluginError> {
    // Nothing to confirm for a note that does not exist.
    let Some(note) = store.get(id) else {
        return Ok(());
    };
    let message = format!("Delete note {id} \"{}\" from {source}?", note.title);
    let schema = json!({
        "type": "object",
        "properties": {"confirm": {"type": "boolean", "title": "Delete it", "default": false}},
        "required": ["confirm"],
    });
    match ctx.elicit(&message, schema).await {
        Ok(answer) => {
            let confirmed = answer.action == ElicitAction::Accept
                && answer
                    .content
                    .as_ref()
                    .and_then(|c| c.get("confirm"))
                    .and_then(Value::as_bool)
                    .unwrap_or(false);
            if confirmed {
                Ok(())
            } else {
                Err(PluginError::failed(format!(
                    "note `{id}` was not deleted: the user did not confirm"
                )))
            }
        }
        Err(e) if e.code == ErrorCode::Unsupported => {
            tracing::info!(source, id, why = %e.message, "deleting without confirmation: nobody can be asked");
            Ok(())
        }
        Err(e) => Err(e),
    }
}
