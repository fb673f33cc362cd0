//! wf's MCP client handler: routes upstream progress notifications to the
//! call that asked for them, and turns `list_changed` into a wf event.

use std::sync::Arc;

use rmcp::handler::client::progress::ProgressDispatcher;
use rmcp::model::{
    ClientCapabilities, ClientConfig, Implementation, ProgressNotificationParam,
    ResourceUpdatedNotificationParam,
};
use rmcp::service::NotificationContext;
use rmcp::{ClientHandler, RoleClient};

/// Called when the upstream says its tools, prompts or resources changed.
pub type OnListChanged = Arc<dyn Fn() + Send + Sync>;

/// Called with the URI of a subscribed resource the upstream says changed.
pub type OnResourceUpdated = Arc<dyn Fn(String) + Send + Sync>;

#[derive(Clone)]
pub struct McpClient {
    pub progress: ProgressDispatcher,
    on_list_changed: Option<OnListChanged>,
    /// Set when wf ended this session itself (an unattributable oversized
    /// message): why, for the calls that were waiting.
    pub broken: crate::frames::Broken,
    /// HTTP: the requests whose reply stream was cut for size.
    pub cut: crate::http::CutForSize,
    on_resource_updated: Option<OnResourceUpdated>,
}

impl McpClient {
    pub fn new(on_list_changed: Option<OnListChanged>) -> Self {
        Self {
            progress: ProgressDispatcher::new(),
            on_list_changed,
            broken: Default::default(),
            cut: Default::default(),
            on_resource_updated: None,
        }
    }
    pub fn with_resource_updates(mut self, f: Option<OnResourceUpdated>) -> Self {
        self.on_resource_updated = f;
        self
    }
    fn list_changed(&self) {
        if let Some(f) = &self.on_list_changed {
            f();
        }
    }
}

impl ClientHandler for McpClient {
    fn get_info(&self) -> ClientConfig {
        let mut info = ClientConfig::default();
        info.capabilities = ClientCapabilities::default();
        info.client_info = Implementation::new("wf", env!("CARGO_PKG_VERSION"));
        info
    }

    async fn on_progress(
        &self,
        params: ProgressNotificationParam,
        _: NotificationContext<RoleClient>,
    ) {
        self.progress.handle_notification(params).await;
    }

    async fn on_tool_list_changed(&self, _: NotificationContext<RoleClient>) {
        self.list_changed();
    }

    async fn on_prompt_list_changed(&self, _: NotificationContext<RoleClient>) {
        self.list_changed();
    }

    async fn on_resource_list_changed(&self, _: NotificationContext<RoleClient>) {
        self.list_changed();
    }

    async fn on_resource_updated(
        &self,
        params: ResourceUpdatedNotificationParam,
        _: NotificationContext<RoleClient>,
    ) {
        if let Some(f) = &self.on_resource_updated {
            f(params.uri);
        }
    }
}
