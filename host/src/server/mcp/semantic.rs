//! Keeps the semantic ranker's tool vectors (catalog/embed.rs) in step with
//! the projection: once at first discovery, then after every catalog change.

use std::sync::Arc;

use crate::app::App;
use crate::catalog::embed::{Semantic, tool_text};

/// Spawns the task that refreshes `semantic` whenever a source's catalog
/// changes; it ends with the runtime.
pub fn follow(app: Arc<App>, semantic: Arc<Semantic>) {
    let mut changes = app.sources.changes();
    tokio::spawn(async move {
        loop {
            let proj = app.projection_ready().await;
            let tools = proj
                .tools
                .iter()
                .map(|t| {
                    let text = tool_text(
                        &t.source,
                        &t.original,
                        t.item.description.as_deref().unwrap_or(""),
                    );
                    (t.name.clone(), text)
                })
                .collect();
            semantic.refresh(tools).await;
            if changes.changed().await.is_err() {
                break;
            }
        }
    });
}
