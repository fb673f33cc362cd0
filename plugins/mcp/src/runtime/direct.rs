//! A plain `tools/call` to a stdio upstream, on wf's own path
//! (`transport::direct`): one line written to the child's stdin from the
//! calling thread, the reply taken off the stream by the transport and handed
//! straight to the call. rmcp's path hands the request to its service task
//! over a channel, which writes it from a task of its own and routes the reply
//! through its responder pool: a task wake-up and a thread hand-off more each
//! way, and about 100 K instructions a call (docs/performance/call-path.md).
//!
//! Which calls take it: a `tools/call` (every round of one) to a stdio
//! upstream. Everything else goes through rmcp: an HTTP upstream (rmcp's
//! streamable HTTP client owns the exchange), tasks, and every other request.
//! The rest is what rmcp's path does: the same `_meta` (the session's
//! envelope, the call's forwarded keys, the trace context, a progress token
//! when the caller asked for progress: the request's own id), progress
//! forwarded (the upstream's notifications still come through rmcp's service
//! to the session's `Progress`, keyed by that token), the caller registered
//! for what the upstream asks back, the call timeout,
//! `notifications/cancelled` when the call is dropped or times out, log
//! settling, and errors through `failure`.

use std::sync::Arc;

use rmcp::model::{ClientRequest, ProgressToken, ServerResult};
use rmcp::service::ServiceError;
use rmcp::transport::DynamicTransportError;
use rmcp::{Peer, RoleClient};
use wf_plugin_api::{CallContext, PluginError};

use super::{
    CancelOnDrop, InFlight, LOG_GRACE, PROGRESS_GRACE, Runtime, listen, request_meta,
    wants_progress,
};
use crate::config::Transport;
use crate::runtime::deadlines::Deadline;
use crate::session::client::McpClient;
use crate::transport::direct::{self, Table};
use crate::transport::stdio::ChildTransport;
use crate::transport::trace;

impl Runtime {
    /// Sends one round of a `tools/call`: on wf's own path when it is plain
    /// (see above), else through rmcp.
    pub(super) async fn tool_request(
        &self,
        request: ClientRequest,
        ctx: &CallContext,
    ) -> Result<(ServerResult, u64), PluginError> {
        // rmcp's path is boxed where it is taken: inline, its future (kilobytes)
        // sized every call's, which is moved and boxed whole at the ABI.
        if !matches!(self.config.transport, Transport::Stdio { .. }) {
            return Box::pin(self.request(request, Some(ctx))).await;
        }
        let mut request = request;
        let traced = trace::Upstream::start(ctx, &mut request, &self.source);
        let session = self.peer(ctx.scope().expect_epoch).await?;
        match session.1.direct.table() {
            Some(table) => self.send_direct(session, table, request, ctx, traced).await,
            None => Box::pin(self.send_on(session, request, Some(ctx), None, traced)).await,
        }
    }

    async fn send_direct(
        &self,
        (peer, client, epoch): (Peer<RoleClient>, McpClient, u64),
        table: Arc<Table>,
        request: ClientRequest,
        ctx: &CallContext,
        mut traced: Option<trace::Upstream<'_>>,
    ) -> Result<(ServerResult, u64), PluginError> {
        let meta = request_meta::forwarded(Some(ctx), listen::is_modern(&peer), None);
        let _in_flight = InFlight::new(&self.in_flight);
        // The call's caller answers what the upstream asks back meanwhile.
        let caller = client.callers.register(ctx);
        let deadline = Deadline::after(self.config.call_timeout);
        let Ok(mut pending) = table.start() else {
            let e = self.failure(epoch, &client, None, ServiceError::TransportClosed);
            finish(&mut traced, &Err::<(), _>(&e));
            return Err(e);
        };
        let id = pending.id().clone();
        caller.set_id(id.clone());
        let wants = wants_progress(ctx);
        let line = direct::line(request, table.envelope(&peer, &client), meta, &id, wants)
            .map_err(|e| PluginError::internal(format!("serialising the request: {e}")))?;
        // Subscribed before the line goes out; a call without a token
        // subscribes to nothing (no channel, no registry entry).
        let mut progress = wants.then(|| client.progress.subscribe(ProgressToken(id.clone())));
        let mut guard = CancelOnDrop {
            peer: peer.clone(),
            id: Some(id.clone()),
        };
        let mut reported = false;
        let forward = async {
            if let Some(progress) = progress.as_mut() {
                while let Some(p) = progress.next().await {
                    reported = true;
                    ctx.progress(p.progress, p.total, p.message.as_deref());
                }
            }
            std::future::pending::<()>().await
        };
        let exchange = async {
            table.write(line).await.map_err(|e| {
                ServiceError::TransportSend(
                    DynamicTransportError::new::<ChildTransport, RoleClient>(e),
                )
            })?;
            match pending.reply().await {
                Some(Ok(result)) => Ok(result),
                Some(Err(e)) => Err(ServiceError::McpError(e)),
                None => Err(ServiceError::TransportClosed),
            }
        };
        let timeout = self.config.call_timeout;
        let result = tokio::select! {
            r = exchange => r,
            () = forward => unreachable!("progress forwarding never ends on its own"),
            () = deadline.expired() => Err(ServiceError::Timeout { timeout }),
        };
        // A request that timed out keeps its guard armed: the upstream is
        // told it is cancelled.
        if !matches!(result, Err(ServiceError::Timeout { .. })) {
            guard.id = None;
        }
        drop(pending);
        // As rmcp's path: progress reports come through rmcp's notification
        // task, the reply straight here, so reports sent just before it may
        // still be on their way; when the upstream reported, collect them
        // until quiet (a call without progress never waits).
        if let Some(progress) = progress.as_mut().filter(|_| reported) {
            while let Ok(Some(p)) = tokio::time::timeout(PROGRESS_GRACE, progress.next()).await {
                ctx.progress(p.progress, p.total, p.message.as_deref());
            }
        }
        // Log lines and progress reports that came before the reply, while
        // the caller is still registered (as rmcp's path); then the reports
        // not forwarded yet.
        client.logs.settle(LOG_GRACE).await;
        if let Some(progress) = progress.as_mut() {
            while let Some(p) = progress.try_next() {
                ctx.progress(p.progress, p.total, p.message.as_deref());
            }
        }
        drop(caller);
        if let Some(t) = &mut traced {
            t.outcome(&result);
        }
        result
            .map(|r| (r, epoch))
            .map_err(|e| self.failure(epoch, &client, Some(&id), e))
    }
}

fn finish<T>(traced: &mut Option<trace::Upstream<'_>>, result: &Result<T, &PluginError>) {
    if let Some(t) = traced {
        t.outcome(result);
    }
}

#[cfg(test)]
mod tests {
    use std::sync::Mutex;

    use rmcp::model::{
        CallToolRequestParams, CallToolResponse, CallToolResult, GetMeta, Request, RequestId,
        RequestMetaObject, ServerCapabilities, ServerConfig,
    };
    use rmcp::service::{PeerRequestOptions, RequestContext};
    use rmcp::{ErrorData, RoleServer, ServerHandler, ServiceExt};
    use serde_json::{Value, json};
    use tokio::io::{AsyncBufReadExt, AsyncWriteExt, BufReader};

    use super::*;
    use crate::config::Protocol;

    struct Echo;

    impl ServerHandler for Echo {
        fn get_info(&self) -> ServerConfig {
            ServerConfig::new(ServerCapabilities::builder().enable_tools().build())
        }

        async fn call_tool(
            &self,
            _: CallToolRequestParams,
            _: RequestContext<RoleServer>,
        ) -> Result<CallToolResponse, ErrorData> {
            Ok(CallToolResponse::Complete(CallToolResult::success(vec![])))
        }
    }

    /// A session with an rmcp server in this process, every line the client
    /// writes kept as written.
    async fn session(
        protocol: Protocol,
    ) -> (
        crate::session::opener::Session,
        McpClient,
        Arc<Mutex<Vec<String>>>,
    ) {
        let (server_r, mut tap_w) = tokio::io::simplex(1 << 16);
        let (tap_r, client_w) = tokio::io::simplex(1 << 16);
        let (client_r, server_w) = tokio::io::simplex(1 << 16);
        let written = Arc::new(Mutex::new(Vec::new()));
        let seen = written.clone();
        tokio::spawn(async move {
            let mut lines = BufReader::new(tap_r).lines();
            while let Ok(Some(line)) = lines.next_line().await {
                seen.lock().unwrap().push(line.clone());
                let _ = tap_w.write_all(format!("{line}\n").as_bytes()).await;
            }
        });
        tokio::spawn(async move {
            if let Ok(s) = Echo.serve((server_r, server_w)).await {
                let _ = s.waiting().await;
            }
        });
        let client = McpClient::new(None);
        let session =
            crate::session::rounds::handshake(client.clone(), (client_r, client_w), protocol)
                .await
                .expect("handshake");
        (session, client, written)
    }

    /// A line with its request id blanked and its progress token left out
    /// (and its `_meta` with it, when nothing else is in it), its members in
    /// the order written.
    fn blanked(line: &str) -> String {
        let mut v: Value = serde_json::from_str(line).unwrap();
        v["id"] = json!("ID");
        let params = v["params"].as_object_mut().unwrap();
        if let Some(meta) = params.get_mut("_meta").and_then(Value::as_object_mut) {
            meta.remove("progressToken");
            if meta.is_empty() {
                params.remove("_meta");
            }
        }
        v.to_string()
    }

    /// A line with its request id and its progress token blanked, the token
    /// left where it is.
    fn tokened(line: &str) -> String {
        let mut v: Value = serde_json::from_str(line).unwrap();
        v["id"] = json!("ID");
        v["params"]["_meta"]["progressToken"] = json!("TOKEN");
        v.to_string()
    }

    /// The direct path's line for a call is, but for its id and rmcp's
    /// progress token, the line rmcp writes for the same call on the same
    /// session: 2025-11-25 (no envelope) and 2026-07-28 (rmcp's per-request
    /// envelope).
    #[tokio::test]
    async fn the_direct_line_is_the_one_rmcp_writes() {
        for (protocol, modern) in [(Protocol::Legacy, false), (Protocol::Modern, true)] {
            let (session, client, written) = session(protocol).await;
            let peer = session.peer().clone();
            assert_eq!(listen::is_modern(&peer), modern);
            let plain = CallToolRequestParams::new("echo").with_arguments(
                json!({"text": "hé \"q\"", "n": [1, 2.5]})
                    .as_object()
                    .unwrap()
                    .clone(),
            );
            let mut round = CallToolRequestParams::new("echo");
            round.request_state = Some("state-1".into());
            for params in [plain, round] {
                let mut request = ClientRequest::CallToolRequest(Request::new(params));
                // What `trace::Upstream::start` stamps on a traced call (the
                // plain call is traced, the round is not).
                if matches!(&request, ClientRequest::CallToolRequest(r) if r.params.arguments.is_some())
                {
                    let meta = request.get_meta_mut();
                    meta.set_traceparent("00-0af7651916cd43dd8448eb211c80319c-b7ad6b7169203331-01");
                    meta.set_tracestate("k=v");
                }
                // A client's forwarded keys (and the log level `request_meta` adds).
                let mut forwarded = RequestMetaObject::new();
                forwarded.0.0 =
                    json!({"example.com/k": {"a": 1}, "io.modelcontextprotocol/logLevel": "debug"})
                        .as_object()
                        .unwrap()
                        .clone();

                let mut options = PeerRequestOptions::no_options();
                options.meta = Some(forwarded.clone());
                peer.send_request_with_option(request.clone(), options)
                    .await
                    .unwrap()
                    .await_response()
                    .await
                    .unwrap();
                let rmcp_line = written
                    .lock()
                    .unwrap()
                    .iter()
                    .rfind(|l| l.contains("\"tools/call\""))
                    .cloned()
                    .expect("rmcp wrote the call");

                let table = client
                    .direct
                    .attach(Arc::new(tokio::sync::Mutex::new(None)));
                let id = RequestId::String("wf-1".into());
                let envelope = table.envelope(&peer, &client);
                // The line written by hand, and through rmcp's types: both as rmcp's.
                let fast = direct::line(
                    request.clone(),
                    envelope,
                    Some(forwarded.clone()),
                    &id,
                    false,
                )
                .unwrap();
                let general = direct::general_line(
                    request.clone(),
                    envelope,
                    Some(forwarded.clone()),
                    &id,
                    false,
                )
                .unwrap();
                assert_eq!(fast, general, "{protocol:?}");
                let direct = std::str::from_utf8(&fast).unwrap().trim_end().to_string();
                assert_eq!(blanked(&direct), blanked(&rmcp_line), "{protocol:?}");
                let v: Value = serde_json::from_str(&direct).unwrap();
                assert_eq!(v["id"], json!("wf-1"));
                assert!(
                    v["params"]["_meta"].get("progressToken").is_none(),
                    "{direct}"
                );
                assert_eq!(
                    v["params"]["_meta"]
                        .get("io.modelcontextprotocol/clientCapabilities")
                        .is_some(),
                    modern,
                    "{direct}"
                );
                // A caller that asked for progress: rmcp's line, token and
                // all, in its place, the token being the request's own id.
                let with = direct::line(
                    request.clone(),
                    envelope,
                    Some(forwarded.clone()),
                    &id,
                    true,
                )
                .unwrap();
                let with_general =
                    direct::general_line(request, envelope, Some(forwarded), &id, true).unwrap();
                assert_eq!(with, with_general, "{protocol:?}");
                let with = std::str::from_utf8(&with).unwrap().trim_end();
                let v: Value = serde_json::from_str(with).unwrap();
                assert_eq!(v["params"]["_meta"]["progressToken"], json!("wf-1"));
                assert_eq!(tokened(with), tokened(&rmcp_line), "{protocol:?}");
            }
            let _ = session.cancel().await;
        }
    }
}
