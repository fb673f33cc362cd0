//! The persistent runtime of one source: one live upstream session, reused
//! by every call (concurrent calls are multiplexed on it), reconnected on the
//! next call after the upstream dies — with the session epoch incremented —
//! and closed at shutdown.

mod deadlines;
mod direct;
mod forwarding;
mod listen;
mod request_meta;
mod tasks;
mod tasks_2025;
mod tool_result;

use std::sync::Arc;
use std::sync::PoisonError;
use std::sync::atomic::{AtomicBool, AtomicU64, AtomicUsize, Ordering};

use rmcp::model::*;
use rmcp::service::{PeerRequestOptions, ServiceError};
use rmcp::{Peer, RoleClient};
use serde::Serialize;
use serde::de::DeserializeOwned;
use serde_json::{Map, Value, json};
use tokio::sync::Mutex;
use wf_plugin_api::{
    CallContext, CallResult, ErrorCode, GetPromptResult, PluginError, Prompt, ReadResourceResult,
    Resource, ResourceTemplate,
};

use crate::config::McpConfig;
use crate::pages::{ListError, all_pages};
use crate::runtime::deadlines::Deadline;
use crate::session::client::{McpClient, OnListChanged, OnLog, OnResourceUpdated};
use crate::session::opener::{Session, open};
use crate::session::rounds::{self, Round};
use crate::transport::trace;

fn page_params(cursor: Option<String>) -> Option<PaginatedRequestParams> {
    Some(PaginatedRequestParams::default().with_cursor(cursor))
}

struct Live {
    session: Session,
    client: McpClient,
    epoch: u64,
}

pub struct Runtime {
    source: String,
    config: Arc<McpConfig>,
    on_list_changed: Option<OnListChanged>,
    on_log: Option<OnLog>,
    live: Mutex<Option<Live>>,
    epoch: AtomicU64,
    in_flight: AtomicUsize,
    closed: AtomicBool,
    last_error: std::sync::Mutex<Option<String>>,
    /// The upstream refused the session's token: the next call opens a new
    /// session, with whatever tokens a `wf auth login` stored meanwhile.
    reopen: AtomicBool,
    on_resource_updated: Option<OnResourceUpdated>,
    /// The roots the host passed with the last roots change, for a
    /// `roots/list` outside any call (any session of this runtime).
    known_roots: crate::session::client::KnownRoots,
    /// Where a stdio session's stdout is offered to the host's reactor.
    io_watch: Option<wf_plugin_api::io_watch::IoWatch>,
    /// Resource URIs subscribed upstream (renewed on a new session).
    subscribed: std::sync::Mutex<std::collections::BTreeSet<String>>,
    /// A 2026-07-28 session's `subscriptions/listen` stream upstream.
    listener: std::sync::Mutex<Option<tokio::task::AbortHandle>>,
    /// Upstream tasks started through this runtime, with the session epoch
    /// they live in (a new session lost them).
    tasks: std::sync::Mutex<std::collections::HashMap<String, u64>>,
    /// Those of `tasks` that are 2025-11-25 tasks (`tasks_2025`).
    legacy_tasks: std::sync::Mutex<std::collections::HashSet<String>>,
    /// Whether the upstream serves 2025-11-25 tasks, asked once per session epoch.
    legacy_tasks_probe: std::sync::Mutex<Option<(u64, bool)>>,
    /// The requests of 2025-11-25 tasks that wait for a client's `tasks/update`.
    task_inputs: crate::session::task_inputs::TaskInputs,
    /// Set when this runtime's session says its lists changed: the
    /// rediscovery that follows lists on that session (`relist_session`).
    relist: Arc<AtomicBool>,
    /// When a listing on the live session last ended (`relisted`).
    relisted_at: std::sync::Mutex<Option<std::time::Instant>>,
}

/// How long after a listing on the live session another rediscovery still
/// lists there. A burst of `list_changed` (server-everything sends five at
/// start) can reach the host in two batches, the second after the first
/// rediscovery already took the flag: that second rediscovery must not start
/// a process of its own.
const RELIST_GRACE: std::time::Duration = std::time::Duration::from_secs(2);

/// Counts a call in flight for status output.
struct InFlight<'a>(&'a AtomicUsize);

impl<'a> InFlight<'a> {
    fn new(n: &'a AtomicUsize) -> Self {
        n.fetch_add(1, Ordering::Relaxed);
        Self(n)
    }
}

impl Drop for InFlight<'_> {
    fn drop(&mut self) {
        self.0.fetch_sub(1, Ordering::Relaxed);
    }
}

/// Sends `notifications/cancelled` upstream if the call is dropped before
/// its response arrived (the host cancelled it).
struct CancelOnDrop {
    peer: Peer<RoleClient>,
    id: Option<RequestId>,
}

impl Drop for CancelOnDrop {
    fn drop(&mut self) {
        if let Some(id) = self.id.take() {
            let peer = self.peer.clone();
            tokio::spawn(async move {
                let _ = peer
                    .notify_cancelled(CancelledNotificationParam::new(
                        Some(id),
                        Some("cancelled by the wf client".into()),
                    ))
                    .await;
            });
        }
    }
}

/// rmcp's error for a call whose SSE reply stream ended early (as it does,
/// among other reasons, when an event is over the size limit).
const SSE_CUT: &str = "response stream closed before its final response";

/// Whether the reply stream of request `id` (of any request, without one) was
/// cut for size; forgets it.
fn cut_for_size(client: &McpClient, id: Option<&RequestId>) -> bool {
    let mut cut = client.cut.lock().unwrap_or_else(PoisonError::into_inner);
    match id {
        Some(id) => cut.remove(&id.to_string()),
        None => {
            let any = !cut.is_empty();
            cut.clear();
            any
        }
    }
}

/// Whether a transport error is rmcp's HTTP body or SSE event size limit.
fn is_too_large(e: &rmcp::transport::DynamicTransportError) -> bool {
    let mut source: Option<&(dyn std::error::Error + 'static)> = Some(e.error.as_ref());
    while let Some(err) = source {
        if err.to_string().contains("exceeded the maximum size of") {
            return true;
        }
        source = err.source();
    }
    false
}

/// How long to wait for progress notifications that trail a response.
const PROGRESS_GRACE: std::time::Duration = std::time::Duration::from_millis(5);

/// How long a call whose reply came waits for log lines that arrived before
/// it to be delivered (`session::pending_logs`); a wait only when one is on
/// its way.
const LOG_GRACE: std::time::Duration = std::time::Duration::from_millis(500);

/// Whether the client behind this call asked for progress (sent a token).
fn wants_progress(ctx: &CallContext) -> bool {
    ctx.info_ref()
        .pointer("/meta/progressToken")
        .is_some_and(|t| !t.is_null())
}

/// Tells the host which session the call ran on (`SESSION_EPOCH_META`).
fn with_epoch(mut r: CallResult, epoch: u64) -> CallResult {
    let meta = r.meta.get_or_insert_with(|| json!({}));
    if let Some(m) = meta.as_object_mut() {
        m.insert(wf_plugin_api::SESSION_EPOCH_META.into(), json!(epoch));
    }
    r
}

pub(crate) fn convert<T: DeserializeOwned>(v: impl Serialize) -> Result<T, PluginError> {
    serde_json::to_value(v)
        .and_then(serde_json::from_value)
        .map_err(|e| PluginError::upstream(format!("unexpected reply shape: {e}")))
}

impl Runtime {
    pub fn new(
        source: String,
        config: Arc<McpConfig>,
        on_list_changed: Option<OnListChanged>,
    ) -> Self {
        let relist = Arc::new(AtomicBool::new(false));
        let on_list_changed = on_list_changed.map(|changed| {
            let relist = relist.clone();
            Arc::new(move || {
                relist.store(true, Ordering::Release);
                changed()
            }) as OnListChanged
        });
        Self {
            relist,
            relisted_at: Default::default(),
            source,
            config,
            on_list_changed,
            on_log: None,
            live: Mutex::new(None),
            epoch: AtomicU64::new(0),
            in_flight: AtomicUsize::new(0),
            closed: AtomicBool::new(false),
            last_error: std::sync::Mutex::new(None),
            reopen: AtomicBool::new(false),
            on_resource_updated: None,
            known_roots: Default::default(),
            io_watch: None,
            subscribed: Default::default(),
            listener: Default::default(),
            tasks: Default::default(),
            legacy_tasks: Default::default(),
            task_inputs: Default::default(),
            legacy_tasks_probe: Default::default(),
        }
    }

    /// Where upstream `notifications/resources/updated` go.
    pub fn with_resource_updates(mut self, f: OnResourceUpdated) -> Self {
        self.on_resource_updated = Some(f);
        self
    }

    /// A stdio session's stdout goes to the host's reactor when it watches
    /// `watch`'s descriptors.
    pub fn with_io_watch(mut self, watch: wf_plugin_api::io_watch::IoWatch) -> Self {
        self.io_watch = Some(watch);
        self
    }

    /// Upstream log messages outside calls go to `on_log`.
    pub fn with_on_log(mut self, on_log: OnLog) -> Self {
        self.on_log = Some(on_log);
        self
    }

    /// The live session, opened (or reopened, epoch + 1) when there is none.
    /// With `expect`, the session must still be the one of that epoch: a
    /// workflow's state lives in it, so a restarted session is an error, not a
    /// silent fresh start.
    async fn peer(
        &self,
        expect: Option<u64>,
    ) -> Result<(Peer<RoleClient>, McpClient, u64), PluginError> {
        let mut live = self.live.lock().await;
        if self.closed.load(Ordering::Acquire) {
            return Err(PluginError::upstream("the source is shut down"));
        }
        let alive = live.as_ref().filter(|l| self.is_alive(l));
        if let Some(expected) = expect
            && alive.map(|l| l.epoch) != Some(expected)
        {
            let current = self.epoch.load(Ordering::Acquire);
            return Err(PluginError::state_lost()
                .with_data(json!({"expected_epoch": expected, "epoch": current})));
        }
        if let Some(l) = alive {
            return Ok((l.session.peer().clone(), l.client.clone(), l.epoch));
        }
        if let Some(dead) = live.take() {
            tracing::info!(source = %self.source, epoch = dead.epoch, "upstream session ended; reconnecting");
            drop(dead.session);
        }
        let client = McpClient::new(self.on_list_changed.clone())
            .with_resource_updates(self.on_resource_updated.clone())
            .with_log(&self.source, self.on_log.clone())
            .with_task_inputs(self.task_inputs.clone())
            .with_known_roots(self.known_roots.clone())
            .with_io_watch(self.io_watch.clone());
        // Boxed, as the listen below: inline, opening a session made every
        // call's future (and the copies of it) kilobytes larger.
        let session = Box::pin(open(&self.source, &self.config, client.clone()))
            .await
            .inspect_err(|e| self.note_error(e))?;
        self.reopen.store(false, Ordering::Release);
        let epoch = self.epoch.fetch_add(1, Ordering::AcqRel) + 1;
        tracing::info!(source = %self.source, epoch, "upstream session open");
        let peer = session.peer().clone();
        if listen::is_modern(&peer) {
            // Before the first call goes out, so no change it causes is missed.
            if let Err(e) = Box::pin(self.listen_upstream(&peer)).await {
                tracing::warn!(source = %self.source, "{}", e.message);
            }
        } else {
            self.resubscribe(&peer);
        }
        *live = Some(Live {
            session,
            client: client.clone(),
            epoch,
        });
        Ok((peer, client, epoch))
    }

    /// Whether a session can take a request: its transport open (a stdio
    /// stream that ended is closed already, though rmcp may not know yet) and
    /// no new session asked for.
    fn is_alive(&self, l: &Live) -> bool {
        !l.session.is_transport_closed()
            && !l.client.direct.ended()
            && !self.reopen.load(Ordering::Acquire)
    }

    /// The live session to list on, when it said its lists changed since the
    /// last listing (`discovery`): a listing is what any client of a shared
    /// session may do, so it disturbs no state. Otherwise None, and the
    /// listing opens a one-shot session.
    pub(crate) async fn relist_session(&self) -> Option<(Peer<RoleClient>, McpClient)> {
        let asked = self.relist.swap(false, Ordering::AcqRel);
        let lately = self
            .relisted_at
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .is_some_and(|at| at.elapsed() < RELIST_GRACE);
        if !asked && !lately {
            return None;
        }
        let live = self.live.lock().await;
        live.as_ref()
            .filter(|l| self.is_alive(l))
            .map(|l| (l.session.peer().clone(), l.client.clone()))
    }

    /// A listing on the live session ended (see `RELIST_GRACE`).
    pub(crate) fn relisted(&self) {
        *self
            .relisted_at
            .lock()
            .unwrap_or_else(PoisonError::into_inner) = Some(std::time::Instant::now());
    }

    /// Opens the session if needed and tells its epoch.
    pub async fn open_session(&self) -> Result<u64, PluginError> {
        Ok(self.peer(None).await?.2)
    }

    fn note_error(&self, e: &PluginError) {
        *self
            .last_error
            .lock()
            .unwrap_or_else(PoisonError::into_inner) = Some(e.message.clone());
    }

    /// Turns a transport failure into a clear error; the next call reconnects.
    fn failure(
        &self,
        epoch: u64,
        client: &McpClient,
        id: Option<&RequestId>,
        e: ServiceError,
    ) -> PluginError {
        if let Some(err) = crate::oauth::request_refused(&self.source, &self.config, &e) {
            if err.message.starts_with(crate::oauth::NEEDS_LOGIN) {
                self.reopen.store(true, Ordering::Release);
            }
            self.note_error(&err);
            return err;
        }
        let limit = self.config.max_message_bytes;
        let mut err = match e {
            // The stand-in reply for a response the frame guard dropped.
            ServiceError::McpError(m)
                if m.data
                    .as_ref()
                    .is_some_and(|d| d.get("max_message_bytes").is_some()) =>
            {
                PluginError::upstream(m.message.to_string())
                    .with_data(json!({"max_message_bytes": limit}))
            }
            ServiceError::McpError(m)
                if m.message.contains(SSE_CUT) && cut_for_size(client, id) =>
            {
                self.too_large()
            }
            ServiceError::McpError(mut m) => {
                // Passed on to the client as it is (code, message, data):
                // never with a secret of wf's the upstream quoted.
                m.message = crate::oauth::redact(&self.config, &m.message).into();
                PluginError::upstream(format!("upstream error {}: {}", m.code.0, m.message))
                    .with_data(json!({"mcp_error": m}))
            }
            ServiceError::Timeout { timeout } => PluginError::new(
                ErrorCode::Timeout,
                format!("no reply within {} ms", timeout.as_millis()),
            ),
            ServiceError::TransportSend(t) if is_too_large(&t) => {
                tracing::warn!(source = %self.source, limit, "upstream reply over max_message_bytes refused");
                self.too_large()
            }
            // An SSE reply cut for size (http.rs noted it); rmcp may close the session.
            ServiceError::TransportClosed | ServiceError::TransportSend(_)
                if cut_for_size(client, id) =>
            {
                self.too_large()
            }
            ServiceError::TransportClosed | ServiceError::TransportSend(_) => {
                match client.broken.get() {
                    Some(why) => PluginError::upstream(format!(
                        "{why} (epoch {epoch}); the next call starts a new session"
                    )),
                    None => PluginError::upstream(format!(
                        "upstream session ended (epoch {epoch}): {e}; the next call starts a new session"
                    )),
                }
            }
            other => PluginError::upstream(other.to_string()),
        };
        // An upstream's or authorization server's words may quote a token.
        err.message = crate::oauth::redact(&self.config, &err.message);
        self.note_error(&err);
        err
    }

    /// The error of a call whose reply was over `max_message_bytes`.
    fn too_large(&self) -> PluginError {
        let limit = self.config.max_message_bytes;
        PluginError::upstream(crate::transport::frames::too_large_message(
            &self.source,
            limit,
        ))
        .with_data(json!({"max_message_bytes": limit}))
    }

    /// Sends one request on the live session, forwarding progress to `ctx`
    /// and cancelling upstream when dropped.
    async fn request(
        &self,
        request: ClientRequest,
        ctx: Option<&CallContext>,
    ) -> Result<(ServerResult, u64), PluginError> {
        self.request_with(request, ctx, None, None).await
    }

    /// [`Runtime::request`] with extra request `_meta` (e.g. capabilities
    /// declared for this request only), on the session of epoch `expect` if given.
    async fn request_with(
        &self,
        mut request: ClientRequest,
        ctx: Option<&CallContext>,
        meta: Option<RequestMetaObject>,
        expect: Option<u64>,
    ) -> Result<(ServerResult, u64), PluginError> {
        let traced = ctx.and_then(|c| trace::Upstream::start(c, &mut request, &self.source));
        let expect = expect.or_else(|| ctx.and_then(|c| c.scope().expect_epoch));
        let (peer, client, epoch) = self.peer(expect).await?;
        self.send_on((peer, client, epoch), request, ctx, meta, traced)
            .await
    }

    /// [`Runtime::request_with`] once the session is known: through rmcp's
    /// service.
    async fn send_on(
        &self,
        (peer, client, epoch): (Peer<RoleClient>, McpClient, u64),
        request: ClientRequest,
        ctx: Option<&CallContext>,
        meta: Option<RequestMetaObject>,
        mut traced: Option<trace::Upstream<'_>>,
    ) -> Result<(ServerResult, u64), PluginError> {
        let meta = request_meta::forwarded(ctx, listen::is_modern(&peer), meta);
        let _in_flight = InFlight::new(&self.in_flight);
        // The call's caller answers what the upstream asks back meanwhile.
        let caller = ctx.map(|c| client.callers.register(c));
        // The timeout is ours, not rmcp's: see `deadlines`.
        let deadline = Deadline::after(self.config.call_timeout);
        let handle = peer
            .send_request_with_option(request, {
                let mut options = PeerRequestOptions::no_options();
                options.meta = meta;
                options
            })
            .await
            .map_err(|e| self.failure(epoch, &client, None, e))?;
        // Progress is forwarded only to a caller that asked for it: a call
        // without a token subscribes to nothing (no channel, no registry entry).
        let mut progress = match ctx.filter(|c| wants_progress(c)) {
            Some(_) => Some(client.progress.subscribe(handle.progress_token.clone())),
            None => None,
        };
        let handle_id = handle.id.clone();
        if let Some(c) = &caller {
            c.set_id(handle_id.clone());
        }
        let mut guard = CancelOnDrop {
            peer: peer.clone(),
            id: Some(handle.id.clone()),
        };
        let mut reported = false;
        let forward = async {
            if let Some(progress) = progress.as_mut() {
                while let Some(p) = progress.next().await {
                    reported = true;
                    if let Some(ctx) = ctx {
                        ctx.progress(p.progress, p.total, p.message.as_deref());
                    }
                }
            }
            std::future::pending::<()>().await
        };
        let timeout = self.config.call_timeout;
        let result = tokio::select! {
            r = handle.await_response() => r,
            () = forward => unreachable!("progress forwarding never ends on its own"),
            () = deadline.expired() => Err(ServiceError::Timeout { timeout }),
        };
        // A request that timed out keeps its guard armed: the upstream is
        // told it is cancelled.
        if !matches!(result, Err(ServiceError::Timeout { .. })) {
            guard.id = None;
        }
        // rmcp hands each notification to its own task but the response to us
        // directly, so progress sent just before the response can still be on
        // its way. When the upstream reported progress and the caller wants
        // it, collect stragglers until the stream has been quiet for a moment
        // (calls without progress never wait).
        if let (Some(ctx), Some(progress)) = (ctx.filter(|_| reported), progress.as_mut()) {
            while let Ok(Some(p)) = tokio::time::timeout(PROGRESS_GRACE, progress.next()).await {
                ctx.progress(p.progress, p.total, p.message.as_deref());
            }
        }
        // The same for log lines and progress reports (counted off the wire:
        // `pending_logs`), while the caller is still registered; then the
        // reports that came before the reply and were not forwarded yet.
        if caller.is_some() {
            client.logs.settle(LOG_GRACE).await;
        }
        if let (Some(ctx), Some(progress)) = (ctx, progress.as_mut()) {
            while let Some(p) = progress.try_next() {
                ctx.progress(p.progress, p.total, p.message.as_deref());
            }
        }
        if let Some(t) = &mut traced {
            t.outcome(&result);
        }
        result
            .map(|r| (r, epoch))
            .map_err(|e| self.failure(epoch, &client, Some(&handle_id), e))
    }

    pub async fn call_tool(
        &self,
        name: &str,
        arguments: Value,
        ctx: &CallContext,
    ) -> Result<CallResult, PluginError> {
        let args = match arguments {
            Value::Object(m) => m,
            Value::Null => Map::new(),
            other => {
                return Err(PluginError::invalid_arguments(format!(
                    "tool arguments must be an object, got {other}"
                )));
            }
        };
        let params = &CallToolRequestParams::new(name.to_string()).with_arguments(args);
        rounds::drive(ctx, |responses, state| {
            async move {
                // One copy of the arguments a request sent (they may be
                // large), not one a round and another a request.
                let req = || {
                    let mut params = params.clone();
                    (params.input_responses, params.request_state) =
                        (responses.clone(), state.clone());
                    ClientRequest::CallToolRequest(Request::new(params))
                };
                let sent = match self.tool_request(req(), ctx).await {
                    // Refused for want of its `Mcp-Param-*` headers: the tools are
                    // listed on this session (see below) and the call goes once more.
                    // Boxed: inline, this rare path sized every call's future.
                    Err(e) if refused_for_param_headers(&e) => {
                        Box::pin(async {
                            self.list_tools_on_session().await?;
                            self.tool_request(req(), ctx).await
                        })
                        .await
                    }
                    sent => sent,
                };
                match sent? {
                    (ServerResult::CallToolResult(r), epoch) => {
                        crate::runtime::tool_result::from_mcp(r)
                            .map(|r| Round::Done(with_epoch(r, epoch)))
                    }
                    (ServerResult::InputRequiredResult(r), _) => Ok(Round::Input(r)),
                    (other, _) => Err(unexpected("tools/call", &other)),
                }
            }
        })
        .await
    }

    /// Lists the upstream's tools on the live session. rmcp's client sends a
    /// tool's `Mcp-Param-*` headers (SEP-2243) only for the tools listed on its
    /// own connection, and wf lists on discovery's one-shot sessions: an upstream
    /// that checks the headers refuses the first call of such a tool (-32020).
    async fn list_tools_on_session(&self) -> Result<(), PluginError> {
        let (peer, _, _) = self.peer(None).await?;
        peer.list_all_tools()
            .await
            .map(|_| ())
            .map_err(|e| PluginError::upstream(format!("listing the tools on the session: {e}")))
    }

    pub async fn read_resource(
        &self,
        uri: &str,
        ctx: &CallContext,
    ) -> Result<ReadResourceResult, PluginError> {
        rounds::drive(ctx, |responses, state| {
            let mut params = ReadResourceRequestParams::new(uri);
            (params.input_responses, params.request_state) = (responses, state);
            let req = ClientRequest::ReadResourceRequest(Request::new(params));
            async move {
                match self.request(req, Some(ctx)).await? {
                    (ServerResult::ReadResourceResult(r), _) => convert(r).map(Round::Done),
                    (ServerResult::InputRequiredResult(r), _) => Ok(Round::Input(r)),
                    (other, _) => Err(unexpected("resources/read", &other)),
                }
            }
        })
        .await
    }

    pub async fn get_prompt(
        &self,
        name: &str,
        arguments: Map<String, Value>,
        ctx: &CallContext,
    ) -> Result<GetPromptResult, PluginError> {
        let mut params = GetPromptRequestParams::new(name);
        params.arguments = Some(arguments);
        rounds::drive(ctx, |responses, state| {
            let mut params = params.clone();
            (params.input_responses, params.request_state) = (responses, state);
            let req = ClientRequest::GetPromptRequest(Request::new(params));
            async move {
                match self.request(req, Some(ctx)).await? {
                    (ServerResult::GetPromptResult(r), _) => convert(r).map(Round::Done),
                    (ServerResult::InputRequiredResult(r), _) => Ok(Round::Input(r)),
                    (other, _) => Err(unexpected("prompts/get", &other)),
                }
            }
        })
        .await
    }

    /// Session-scoped listings: what this session sees now.
    pub async fn list_resources(&self) -> Result<Vec<Resource>, PluginError> {
        let (peer, client, epoch) = self.peer(None).await?;
        let items = all_pages(&self.source, "resources", |c| {
            let peer = peer.clone();
            async move {
                let r = peer.list_resources(page_params(c)).await?;
                Ok((r.resources, r.next_cursor))
            }
        })
        .await
        .map_err(|e| self.list_failure(epoch, &client, e))?;
        convert(items)
    }

    pub async fn list_resource_templates(&self) -> Result<Vec<ResourceTemplate>, PluginError> {
        let (peer, client, epoch) = self.peer(None).await?;
        let items = all_pages(&self.source, "resource templates", |c| {
            let peer = peer.clone();
            async move {
                let r = peer.list_resource_templates(page_params(c)).await?;
                Ok((r.resource_templates, r.next_cursor))
            }
        })
        .await
        .map_err(|e| self.list_failure(epoch, &client, e))?;
        convert(items)
    }

    pub async fn list_prompts(&self) -> Result<Vec<Prompt>, PluginError> {
        let (peer, client, epoch) = self.peer(None).await?;
        let items = all_pages(&self.source, "prompts", |c| {
            let peer = peer.clone();
            async move {
                let r = peer.list_prompts(page_params(c)).await?;
                Ok((r.prompts, r.next_cursor))
            }
        })
        .await
        .map_err(|e| self.list_failure(epoch, &client, e))?;
        convert(items)
    }

    fn list_failure(
        &self,
        epoch: u64,
        client: &McpClient,
        e: ListError<ServiceError>,
    ) -> PluginError {
        match e {
            ListError::Upstream(e) => self.failure(epoch, client, None, e),
            ListError::Bound(e) => {
                self.note_error(&e);
                e
            }
        }
    }

    pub async fn status(&self) -> Value {
        let connected = self
            .live
            .try_lock()
            .map(|l| l.as_ref().is_some_and(|l| !l.session.is_transport_closed()))
            .ok();
        json!({
            "epoch": self.epoch.load(Ordering::Acquire),
            "connected": connected,
            "calls_in_flight": self.in_flight.load(Ordering::Relaxed),
            "last_error": self.last_error.lock().unwrap_or_else(PoisonError::into_inner).clone(),
        })
    }

    /// Closes the session (and ends a stdio server's process group).
    pub async fn close(&self) {
        self.closed.store(true, Ordering::Release);
        self.stop_listening();
        if let Some(live) = self.live.lock().await.take() {
            tracing::info!(source = %self.source, epoch = live.epoch, "closing upstream session");
            let _ = live.session.cancel().await;
        }
    }
}

/// Whether the upstream refused a request because its `Mcp-Param-*` headers
/// did not match its body (SEP-2243's -32020).
fn refused_for_param_headers(e: &PluginError) -> bool {
    e.data
        .as_ref()
        .and_then(|d| d.pointer("/mcp_error/code"))
        .and_then(Value::as_i64)
        == Some(-32020)
}

fn unexpected(method: &str, r: &ServerResult) -> PluginError {
    let kind = serde_json::to_value(r)
        .ok()
        .and_then(|v| v.get("resultType").cloned())
        .unwrap_or(Value::Null);
    PluginError::upstream(format!(
        "unsupported reply to {method} (resultType {kind}): not one this request can take"
    ))
}
