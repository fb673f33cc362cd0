//! HTTP sessions (2025-11-25 clients), bounded: rmcp's in-memory session
//! manager, refusing a new session once `max` are open. A session ends on
//! `DELETE`, when its client has sent nothing for the idle timeout (rmcp's
//! keep-alive), or at shutdown; rmcp then removes it from the map.

use std::sync::Arc;
use std::sync::atomic::Ordering;
use std::time::Duration;

use futures::Stream;
use rmcp::model::{ClientJsonRpcMessage, ServerJsonRpcMessage};
use rmcp::transport::streamable_http_server::session::ServerSseMessage;
use rmcp::transport::streamable_http_server::session::local::{
    LocalSessionManager, LocalSessionManagerError,
};
use rmcp::transport::streamable_http_server::{SessionId, SessionManager};

use super::session_calls::SessionCalls;
use crate::app::FrontStats;
use crate::server::handles::{Owner, Seal};
use rmcp::transport::WorkerTransport;
use rmcp::transport::streamable_http_server::session::local::create_local_session;

#[derive(Debug, thiserror::Error)]
pub enum SessionsError {
    #[error("too many open sessions (server.max_sessions = {0})")]
    Full(usize),
    #[error(transparent)]
    Local(#[from] LocalSessionManagerError),
}

pub struct BoundedSessions {
    inner: LocalSessionManager,
    max: usize,
    /// Serializes creation so the bound holds under concurrent `initialize`s.
    creating: tokio::sync::Mutex<()>,
    stats: Arc<FrontStats>,
    /// The sessions whose calls wf answers itself; let go as each ends.
    calls: Arc<SessionCalls>,
    /// With several replicas: session ids carry this replica (handles.rs).
    seal: Option<Seal>,
}

impl BoundedSessions {
    pub fn new(max: usize, idle: Duration, stats: Arc<FrontStats>) -> Self {
        let mut inner = LocalSessionManager::default();
        inner.session_config.keep_alive = Some(idle);
        Self {
            inner,
            max,
            creating: tokio::sync::Mutex::new(()),
            stats,
            calls: Arc::new(SessionCalls::new(idle)),
            seal: None,
        }
    }

    pub fn with_seal(mut self, seal: Option<Seal>) -> Self {
        self.seal = seal;
        self
    }

    /// The replica holding session `id`, when another replica sealed it.
    pub fn held_elsewhere(&self, id: &str) -> Option<String> {
        match self.seal.as_ref()?.owner(id) {
            Owner::Elsewhere(owner) => Some(owner),
            _ => None,
        }
    }

    pub fn calls(&self) -> &Arc<SessionCalls> {
        &self.calls
    }

    /// Tells session `id`'s worker it is in use (its idle timeout restarts),
    /// for calls it did not see: opens a response channel and closes it.
    pub async fn touch(&self, id: &SessionId) {
        let handle = self.inner.sessions.read().await.get(id).cloned();
        let Some(handle) = handle else { return };
        if let Ok(rx) = handle.establish_request_wise_channel().await
            && let Some(n) = rx.http_request_id
        {
            let _ = handle.close_request_wise_channel(n).await;
        }
    }

    pub async fn open(&self) -> usize {
        self.inner.sessions.read().await.len()
    }

    pub fn max(&self) -> usize {
        self.max
    }

    async fn publish(&self) {
        let n = self.open().await;
        self.stats.http_sessions.store(n, Ordering::Relaxed);
    }
}

impl SessionManager for BoundedSessions {
    type Error = SessionsError;
    type Transport = <LocalSessionManager as SessionManager>::Transport;

    async fn create_session(&self) -> Result<(SessionId, Self::Transport), Self::Error> {
        let _one_at_a_time = self.creating.lock().await;
        if self.open().await >= self.max {
            return Err(SessionsError::Full(self.max));
        }
        let created = match &self.seal {
            // rmcp's manager with an id of ours: its random id, sealed.
            Some(seal) => {
                let id: SessionId = seal.issue(&uuid::Uuid::new_v4().to_string()).into();
                let (handle, worker) =
                    create_local_session(id.clone(), self.inner.session_config.clone());
                self.inner.sessions.write().await.insert(id.clone(), handle);
                (id, WorkerTransport::spawn(worker))
            }
            None => self.inner.create_session().await?,
        };
        self.publish().await;
        Ok(created)
    }

    async fn initialize_session(
        &self,
        id: &SessionId,
        message: ClientJsonRpcMessage,
    ) -> Result<ServerJsonRpcMessage, Self::Error> {
        let reply = self.inner.initialize_session(id, message).await?;
        Ok(crate::server::mcp::tasks::v2025::declare(reply))
    }

    async fn has_session(&self, id: &SessionId) -> Result<bool, Self::Error> {
        Ok(self.inner.has_session(id).await?)
    }

    async fn close_session(&self, id: &SessionId) -> Result<(), Self::Error> {
        self.calls.forget(id);
        let r = self.inner.close_session(id).await;
        self.publish().await;
        Ok(r?)
    }

    async fn create_stream(
        &self,
        id: &SessionId,
        message: ClientJsonRpcMessage,
    ) -> Result<impl Stream<Item = ServerSseMessage> + Send + Sync + 'static, Self::Error> {
        use futures::StreamExt;
        let replies = self.inner.create_stream(id, message).await?;
        Ok(replies.map(crate::server::mcp::tasks::v2025::declare_sse))
    }

    async fn accept_message(
        &self,
        id: &SessionId,
        message: ClientJsonRpcMessage,
    ) -> Result<(), Self::Error> {
        Ok(self.inner.accept_message(id, message).await?)
    }

    async fn create_standalone_stream(
        &self,
        id: &SessionId,
    ) -> Result<impl Stream<Item = ServerSseMessage> + Send + Sync + 'static, Self::Error> {
        Ok(self.inner.create_standalone_stream(id).await?)
    }

    async fn resume(
        &self,
        id: &SessionId,
        last_event_id: String,
    ) -> Result<impl Stream<Item = ServerSseMessage> + Send + Sync + 'static, Self::Error> {
        Ok(self.inner.resume(id, last_event_id).await?)
    }
}
