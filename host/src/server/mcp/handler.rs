//! The rmcp server handler: projects the proxy surface and routes calls back
//! to their sources. Conversions go through JSON, since plugin data already
//! is MCP-shaped JSON.

use std::sync::Arc;

use rmcp::model::*;
use rmcp::service::{NotificationContext, RequestContext, SubscriptionContext};
use rmcp::transport::streamable_http_server::SessionId;
use rmcp::{ErrorData as McpError, Peer, RoleServer, ServerHandler};
use serde::Serialize;
use serde::de::DeserializeOwned;
use serde_json::{Value, json};

use tokio_util::sync::{CancellationToken, DropGuard};
use tracing::Instrument;

use super::caller::{self, ClientAsker, ClientLevel};
use super::endpoint_route;
use super::forwarding::{self, Downstream};
use super::meta_tools;
use super::mrtr::Step;
use super::notify::{self, Follower, ListKind};
use super::observe;
use super::progress_route::{ProgressRoute, notification};
use super::session_route::{self, SESSION_SOURCE};
use super::source_error::source_error;
use super::surfaces::tool_capability;
use super::{Surfaces, visible};
use crate::app::App;
use crate::pipeline::{self, Capability, Entry, Kind, Refusal, Transport};
use crate::server::identity::call_slots::CallSlots;
use crate::server::identity::principals::principal_of;
use crate::sources::sessions::{SessionCaller, SessionUse, with_caller};
use crate::sources::{Asker, CallCtx, SourceError, SourceHandle};
use crate::surfaces::admin::{ADMIN_SOURCE, Caller};
use crate::surfaces::endpoints::{self, Endpoint};
use crate::surfaces::planner::Planner;
use crate::surfaces::proxy::page;

/// A transport that answers a session's calls itself once its client has
/// initialised (over HTTP with JSON answers, `http::session_calls`).
pub trait InPlaceCalls: Send + Sync {
    /// The session this `notifications/initialized` came on, as the
    /// transport names it.
    fn session_of(&self, context: &NotificationContext<RoleServer>) -> Option<SessionId>;
    /// Takes session `id`'s server and peer, to answer its calls.
    fn register(&self, id: SessionId, server: WfServer, peer: Peer<RoleServer>);
}

#[derive(Clone)]
pub struct WfServer {
    app: Arc<App>,
    surfaces: Surfaces,
    /// Served over HTTP (admin access rules differ from stdio).
    http: bool,
    /// Cancelled when the last clone of this server is dropped, i.e. when
    /// rmcp ends the session it serves (client gone, DELETE, expiry): ends
    /// that session's list-change follower.
    ended: CancellationToken,
    _ends_on_drop: Arc<DropGuard>,
    /// This client, for its subscriptions; dropped with the last clone.
    client: Arc<Downstream>,
    /// This client's `logging/setLevel`.
    level: Arc<ClientLevel>,
    /// This connection's identity for sources with `client` session scope.
    session_client: Arc<str>,
    /// The sources that asked this client for roots (`roots::list_changed`).
    roots: Arc<super::roots::RootsAskers>,
    /// Over HTTP with JSON answers: where this session, once initialised,
    /// is registered so its plain calls are answered in place.
    session_calls: Option<Arc<dyn InPlaceCalls>>,
    /// This client's calls in progress (`[server] max_calls_per_client`).
    slots: Arc<CallSlots>,
    /// Tools this session found with `wf_find` (listed when `keep_found`).
    found: Arc<std::sync::Mutex<std::collections::HashSet<String>>>,
    /// The endpoint this server is for (`wf serve --endpoint`); over HTTP
    /// each request's path names its own.
    endpoint: Option<Arc<str>>,
}

impl WfServer {
    /// The sources the resource subscriptions of `filter` route to now, each once.
    fn listened_sources(
        &self,
        filter: &SubscriptionFilter,
    ) -> Vec<Arc<crate::sources::SourceHandle>> {
        let Some(uris) = filter.resource_subscriptions.as_deref() else {
            return Vec::new();
        };
        let proj = self.app.projection();
        let mut handles: Vec<Arc<crate::sources::SourceHandle>> = Vec::new();
        for uri in uris {
            let Some(route) = proj.resource_route(uri) else {
                continue;
            };
            if let Some(handle) = self
                .app
                .sources
                .get(&route.source)
                .and_then(|e| e.handle.clone())
                && !handles.iter().any(|h| Arc::ptr_eq(h, &handle))
            {
                handles.push(handle);
            }
        }
        handles
    }

    pub fn new(app: Arc<App>, surfaces: Surfaces, http: bool) -> Self {
        let ended = CancellationToken::new();
        let slots = CallSlots::new(app.config.config.server.max_calls_per_client);
        Self {
            client: Arc::new(Downstream::new(&app)),
            app,
            surfaces,
            http,
            _ends_on_drop: Arc::new(ended.clone().drop_guard()),
            ended,
            level: Arc::default(),
            session_client: session_route::new_client_id(http),
            roots: Arc::default(),
            session_calls: None,
            slots: Arc::new(slots),
            found: Arc::default(),
            endpoint: None,
        }
    }

    /// This server serves endpoint `name` only (stdio).
    pub fn for_endpoint(mut self, name: Option<Arc<str>>) -> Self {
        self.endpoint = name;
        self
    }

    /// The endpoint a request is served on, if any: refused when it is no
    /// longer configured or this principal is not allowed on it.
    fn endpoint(
        &self,
        context: &RequestContext<RoleServer>,
    ) -> Result<Option<Arc<Endpoint>>, McpError> {
        self.endpoint_at(context.extensions.get::<http::request::Parts>())
    }

    fn endpoint_at(
        &self,
        parts: Option<&http::request::Parts>,
    ) -> Result<Option<Arc<Endpoint>>, McpError> {
        let Some(name) = self
            .endpoint
            .clone()
            .or_else(|| endpoint_route::named(parts))
        else {
            return Ok(None);
        };
        let principal = crate::server::identity::limits::principal_of_request(parts);
        endpoint_route::resolve(&self.surfaces.endpoints, &name, &principal).map(Some)
    }

    /// The endpoint's name and its registry, for a list-change follower.
    fn followed_endpoint(
        &self,
        parts: Option<&http::request::Parts>,
    ) -> Option<(Arc<crate::surfaces::endpoints::Endpoints>, Arc<str>)> {
        let name = self
            .endpoint
            .clone()
            .or_else(|| endpoint_route::named(parts))?;
        Some((self.surfaces.endpoints.clone(), name))
    }

    pub fn with_session_calls(mut self, calls: Arc<dyn InPlaceCalls>) -> Self {
        self.session_calls = Some(calls);
        self
    }

    fn caller(&self, context: &RequestContext<RoleServer>) -> Caller {
        if !self.http {
            return Caller::Stdio;
        }
        let token = context
            .extensions
            .get::<http::request::Parts>()
            .and_then(|p| p.headers.get("x-wf-admin-token"))
            .and_then(|v| v.to_str().ok())
            .map(str::to_string);
        Caller::Http {
            admin_token: token,
            principal: principal_of(context),
        }
    }

    /// Whether `principal` may hear `source`'s log messages: it may use one
    /// of the source's tools (and admin's only where this front serves admin).
    fn may_see(&self, principal: crate::config::Principal) -> caller::MaySee {
        let app = self.app.clone();
        Arc::new(move |source: &str| {
            app.projection().tools.iter().any(|t| {
                t.source == source && app.pipeline.may_list(&principal, &tool_capability(t))
            })
        })
    }

    /// The call pipeline's `authorize`, `limit` and `record` stages for one
    /// use of `capability` by this request's principal.
    fn admit(
        &self,
        context: &RequestContext<RoleServer>,
        entry: Entry,
        capability: Capability<'_>,
        arguments: &Value,
    ) -> Result<(pipeline::Admission, Option<pipeline::record::Pending>), McpError> {
        let principal = principal_of(context);
        let info = context.peer.peer_info();
        let parts = context.extensions.get::<http::request::Parts>();
        let endpoint = self
            .endpoint
            .clone()
            .or_else(|| endpoint_route::named(parts));
        let call = pipeline::Call {
            entry,
            principal: &principal,
            capability,
            arguments,
            client: info.as_ref().map(|i| i.client_info.name.as_str()),
            client_version: info.as_ref().map(|i| i.client_info.version.as_str()),
            endpoint: endpoint.as_deref(),
            transport: if self.http {
                Transport::Http
            } else {
                Transport::Stdio
            },
        };
        let admission = self.app.pipeline.admit(&call).map_err(refusal_error)?;
        let recorded = self.app.pipeline.record(&call, &admission, None);
        Ok((admission, recorded))
    }

    /// Whether a prompt or resource is listed to this request's principal.
    fn listed(&self, principal: &pipeline::Principal, capability: Capability<'_>) -> bool {
        self.app.pipeline.may_list(principal, &capability)
    }

    /// What serving a task needs: the task table and the planner that runs.
    fn task_room(&self) -> (&super::tasks::RunTasks, &Planner) {
        (&self.surfaces.tasks, &self.surfaces.planner)
    }

    fn handle(&self, source: &str) -> Result<Arc<SourceHandle>, McpError> {
        self.app.sources.handle(source).ok_or_else(|| {
            McpError::internal_error(format!("source {source:?} is not available"), None)
        })
    }

    /// The client of this request, as `source` may ask it for input.
    fn asker(&self, context: &RequestContext<RoleServer>, source: &str) -> Arc<ClientAsker> {
        let modern = context
            .protocol_version()
            .is_some_and(|v| v >= ProtocolVersion::V_2026_07_28)
            .then(|| caller::ModernLogs::from_meta(&context.meta));
        Arc::new(ClientAsker {
            peer: context.peer.clone(),
            source: source.to_string(),
            level: self.level.clone(),
            modern,
            roots: self.roots.clone(),
        })
    }

    /// Runs `work` with the client of `context` answering the source's
    /// requests for input: asked directly (2025-11-25), or in rounds of
    /// `InputRequiredResult` and retries (2026-07-28, see `mrtr`).
    async fn with_input<T, F, Fut>(
        &self,
        context: &RequestContext<RoleServer>,
        what: String,
        source: &str,
        retry: (Option<String>, Option<InputResponses>),
        work: F,
    ) -> Result<Step<T>, McpError>
    where
        T: Serialize + DeserializeOwned,
        F: FnOnce(RequestContext<RoleServer>, Arc<dyn Asker>) -> Fut,
        Fut: std::future::Future<Output = Result<T, McpError>> + Send + 'static,
    {
        let asker = self.asker(context, source);
        let span = observe::request_span(context, &what);
        if asker.modern.is_none() {
            return work(context.clone(), asker)
                .instrument(span)
                .await
                .map(Step::Done);
        }
        let owner = principal_of(context).name().to_string();
        // A stateless HTTP request's server ends with it; its parked calls only expire.
        let gone = (!session_route::is_stateless(self.http, context)).then(|| self.ended.clone());
        let rounds = self.surfaces.rounds.clone();
        Box::pin(
            rounds
                .round(context, what, owner, gone, asker, retry, work)
                .instrument(span),
        )
        .await
    }

    /// A proxied call from a client that declared MCP Tasks, asked of its
    /// source as a task (plugin API 1.3); `tool` is its (exposed name,
    /// source, original name). The source's input-required rounds before it
    /// answers with a task reach the client as a plain call's do
    /// (`with_input`), under a request name of their own. `None`: make the
    /// plain call (the principal is at its bound, or the source serves no tasks).
    async fn source_task(
        &self,
        context: &RequestContext<RoleServer>,
        handle: Arc<SourceHandle>,
        (exposed, source, name): (&str, &str, &str),
        args: Value,
        retry: (Option<String>, Option<InputResponses>),
    ) -> Option<Result<CallToolResponse, McpError>> {
        use super::tasks::upstream;
        let owner = self.task_owner(context);
        // A retry resumes the start it answers, whatever the bound says now.
        if retry.0.is_none() && !upstream::room(&self.surfaces.tasks, &owner) {
            return None;
        }
        let tasks = self.surfaces.tasks.clone();
        let (from, name) = (source.to_string(), name.to_string());
        let work = move |context: RequestContext<RoleServer>, asker| async move {
            let answer = with_progress_and_cancel(&context, asker, None, async |ctx| {
                Ok(handle.call_tool_as_task(&name, args, ctx).await)
            })
            .await?;
            upstream::adopt(&tasks, handle, &from, answer, &owner).await
        };
        let what = format!("tools/call {exposed} as a task");
        match self.with_input(context, what, source, retry, work).await {
            Ok(Step::Done(start)) => start.response().map(Ok),
            Ok(Step::Input(i)) => Some(Ok(CallToolResponse::InputRequired(i))),
            Err(e) => Some(Err(e)),
        }
    }

    /// Who a call is for, as far as sessions care (with the session scopes
    /// its endpoint pins).
    fn session_caller(
        &self,
        context: &RequestContext<RoleServer>,
    ) -> Result<SessionCaller, McpError> {
        let mut caller = session_route::caller(
            &self.app,
            self.http,
            &self.session_client,
            &self.ended,
            context,
        )?;
        if let Some(e) = self.endpoint(context)? {
            caller.scopes = e.session_scopes();
        }
        Ok(caller)
    }

    /// The per-principal or per-client session a call on `handle` uses.
    async fn session(
        &self,
        handle: &Arc<SourceHandle>,
        context: &RequestContext<RoleServer>,
    ) -> Result<Option<SessionUse>, McpError> {
        let caller = self.session_caller(context)?;
        session_route::session_for(&self.app, &caller, handle).await
    }

    /// Answers `wf_find` and `wf_describe` over the tools the caller may use.
    async fn meta_call(
        &self,
        name: &str,
        args: &Value,
        context: &RequestContext<RoleServer>,
    ) -> Result<CallToolResult, McpError> {
        let (principal, caller) = (principal_of(context), self.caller(context));
        let endpoint = self.endpoint(context)?;
        self.app.projection_ready().await;
        let (proj, index) = self.app.projector.tool_index();
        // With a semantic ranker, the query's vector (none: lexical only).
        let query = args.get("query").and_then(Value::as_str).unwrap_or("");
        let near = match &self.surfaces.semantic {
            Some(s) if name == meta_tools::FIND && !query.trim().is_empty() => s.query(query).await,
            _ => None,
        };
        let nearest = near
            .as_ref()
            .map(|(v, q)| v.nearest(q, crate::catalog::search::SEM_DEPTH));
        let blend = self.surfaces.semantic.as_ref().map(|s| s.blend);
        // wf_find and wf_describe never reveal what no call could be permitted.
        let usable = |_: &str, name: &str| {
            proj.tool(name)
                .is_some_and(|t| visible((&self.app, &self.surfaces), &principal, &caller, t))
        };
        let keep = match &endpoint {
            Some(e) => self.surfaces.catalog.endpoint_policy(e).config.keep_found,
            None => self.surfaces.catalog.policy(&principal).config.keep_found,
        };
        let view = endpoint.as_ref().map(|e| e.view(&proj));
        // An endpoint's tools as it shows them, ranked by what it shows.
        let (surface, index): (&dyn meta_tools::Surface, _) = match &view {
            Some(v) => (&**v, v.search_index().unwrap_or(index)),
            None => (&*proj, index),
        };
        let answer = if name == meta_tools::FIND {
            let ranked = nearest.as_deref().zip(blend.as_ref());
            meta_tools::find(surface, &index, ranked, args, usable)
        } else {
            meta_tools::describe(surface, args, usable).map(|d| (d, Vec::new()))
        }
        .map(|(found, names)| {
            if keep.unwrap_or(false) {
                self.keep_found(names, context);
            }
            found
        });
        let result = match answer {
            Ok(v) => wf_plugin_api::CallResult::structured(v),
            Err(e) => wf_plugin_api::CallResult::error(e),
        };
        super::tool_result::to_mcp(result)
    }

    /// An endpoint's own server name and instructions.
    fn brand(&self, info: &mut InitializeResult, e: &Arc<Endpoint>) {
        info.server_info.name = e.server_name();
        let searching = self.surfaces.catalog.endpoint_policy(e).config.restricts();
        info.instructions = Some(endpoint_route::instructions(e, searching));
    }

    /// A call on endpoint `e` as the call of the tool it shows: the original
    /// name, with its transform's fixed values and defaults merged in. Gives
    /// the output schema its transform put in place of the tool's own, which
    /// the result must then match.
    async fn endpoint_call(
        &self,
        e: &Endpoint,
        request: &mut CallToolRequestParams,
    ) -> Result<Option<(String, Value)>, McpError> {
        let proj = self.app.projection_ready().await;
        let view = e.view(&proj);
        let Some(t) = view.tool(&request.name) else {
            return Err(McpError::invalid_params(
                format!("unknown tool {:?} on endpoint {:?}", request.name, e.name),
                None,
            ));
        };
        let mut promised = None;
        if let Some(x) = t.transform {
            let mut args = request.arguments.take().unwrap_or_default();
            crate::surfaces::endpoints::call_arguments(&request.name, &mut args, x)
                .map_err(|why| McpError::invalid_params(why, None))?;
            request.arguments = Some(args);
            promised = x
                .output_schema
                .clone()
                .filter(Value::is_object)
                .map(|schema| (request.name.to_string(), schema));
        }
        request.name = t.original.name.clone().into();
        Ok(promised)
    }

    /// With `keep_found`, tools found join this session's list, and the
    /// client is told its list changed.
    fn keep_found(&self, names: Vec<String>, context: &RequestContext<RoleServer>) {
        if names.is_empty() {
            return;
        }
        let added = {
            let mut found = self
                .found
                .lock()
                .unwrap_or_else(std::sync::PoisonError::into_inner);
            let before = found.len();
            found.extend(names);
            found.len() > before
        };
        if added {
            let peer = context.peer.clone();
            tokio::spawn(async move {
                let _ = peer.notify_tool_list_changed().await;
            });
        }
    }

    /// Whom this request's tasks are bound to (`tasks::owner`).
    fn task_owner(&self, context: &RequestContext<RoleServer>) -> String {
        let session = self
            .http
            .then(|| context.extensions.get::<http::request::Parts>())
            .flatten()
            .and_then(|p| p.headers.get("mcp-session-id"))
            .and_then(|v| v.to_str().ok());
        super::tasks::owner(principal_of(context).name(), session)
    }

    fn page_size(&self) -> usize {
        self.app.config.config.server.page_size
    }

    /// A 2025-11-25 task-augmented `tools/call`: the call's own path, asked
    /// for a task; a task handle in 2025-11-25's shape (its status then
    /// notified on this session), or the plain result of a tool that cannot
    /// be served as a task.
    async fn call_2025(
        &self,
        params: Option<Value>,
        mut context: RequestContext<RoleServer>,
    ) -> Result<CustomResult, McpError> {
        let mut params = params.unwrap_or_else(|| json!({}));
        if let Some(p) = params.as_object_mut() {
            p.remove("task");
        }
        let request: CallToolRequestParams = serde_json::from_value(params).map_err(|e| {
            McpError::invalid_params(format!("invalid params for tools/call: {e}"), None)
        })?;
        context.extensions.insert(super::tasks::v2025::Augmented);
        let (peer, owner) = (context.peer.clone(), self.task_owner(&context));
        match self.call_tool(request, context).await? {
            CallToolResponse::Task(created) => {
                let meta = created
                    .meta
                    .as_ref()
                    .and_then(|m| serde_json::to_value(m).ok());
                super::tasks::v2025::notify_status(
                    (self.app.clone(), self.surfaces.clone()),
                    owner,
                    created.task.task_id.clone(),
                    peer,
                );
                Ok(CustomResult(super::tasks::v2025::created(
                    &created.task,
                    meta,
                )))
            }
            CallToolResponse::Complete(r) => {
                Ok(CustomResult(serde_json::to_value(r).map_err(|e| {
                    McpError::internal_error(e.to_string(), None)
                })?))
            }
            _ => Err(McpError::internal_error(
                "a 2025-11-25 call cannot take input rounds",
                None,
            )),
        }
    }
}

/// A pipeline refusal as the JSON-RPC error the client gets: its message
/// (naming the rule or policy and why), and in `data` the stage, the policy
/// id and, for a limit, the seconds until it frees.
fn refusal_error(r: Refusal) -> McpError {
    let mut data = json!({"stage": r.stage.name()});
    if let Some(p) = &r.policy {
        data["policy"] = json!(p);
    }
    if let Some(after) = r.retry_after {
        data["retryAfterSeconds"] = json!(after.as_secs().max(1));
    }
    McpError::invalid_params(r.message, Some(data))
}

/// A resource (by the URI clients asked for) as the pipeline sees it.
fn resource_capability<'a>(source: &'a str, uri: &'a str) -> Capability<'a> {
    Capability {
        kind: Kind::Resource,
        source,
        name: uri,
        annotations: None,
    }
}

fn convert<T: DeserializeOwned>(v: impl Serialize) -> Result<T, McpError> {
    serde_json::to_value(v)
        .and_then(serde_json::from_value)
        .map_err(|e| {
            McpError::internal_error(format!("cannot convert a plugin reply to MCP: {e}"), None)
        })
}

/// A result of protocol 2026-07-28 carries `resultType`; rmcp drops it again
/// for clients of older versions.
fn complete<T: DeserializeOwned>(v: impl Serialize) -> Result<T, McpError> {
    let mut v =
        serde_json::to_value(v).map_err(|e| McpError::internal_error(e.to_string(), None))?;
    if let Some(o) = v.as_object_mut() {
        o.insert("resultType".into(), Value::String("complete".into()));
    }
    convert(v)
}

fn cursor(request: &Option<PaginatedRequestParams>) -> Option<&str> {
    request.as_ref().and_then(|r| r.cursor.as_deref())
}

fn paged<T: Clone>(
    items: &[T],
    request: &Option<PaginatedRequestParams>,
    size: usize,
) -> Result<(Vec<T>, Option<String>), McpError> {
    page(items, cursor(request), size).map_err(|e| McpError::invalid_params(e, None))
}

/// `wf_call {name, arguments}` as the call it names: the same request
/// (progress token, task, input responses) with the tool's name and
/// arguments.
fn unwrap_call(mut request: CallToolRequestParams) -> Result<CallToolRequestParams, McpError> {
    let mut args = request.arguments.take().unwrap_or_default();
    let name = match args.remove("name") {
        Some(Value::String(n)) if !meta_tools::is_meta(&n) => n,
        Some(Value::String(n)) => {
            return Err(McpError::invalid_params(
                format!("wf_call cannot call {n:?}; call it directly"),
                None,
            ));
        }
        _ => {
            return Err(McpError::invalid_params(
                "wf_call needs `name`: a tool name wf_find returned",
                None,
            ));
        }
    };
    let arguments = match args.remove("arguments") {
        None | Some(Value::Null) => None,
        Some(Value::Object(o)) => Some(o),
        Some(_) => {
            return Err(McpError::invalid_params(
                "wf_call: `arguments` must be an object",
                None,
            ));
        }
    };
    request.name = name.into();
    request.arguments = arguments;
    Ok(request)
}

/// Whether a call is to be served as a task: its client declared SEP-2663's
/// extension, or augmented this 2025-11-25 call with `task`.
fn wants_task(context: &RequestContext<RoleServer>) -> bool {
    context
        .client_capabilities()
        .is_some_and(|c| c.supports_tasks())
        || context
            .extensions
            .get::<super::tasks::v2025::Augmented>()
            .is_some()
}

/// Runs `call` while forwarding its progress reports to the client (when it
/// sent a progress token) and aborting it when the client cancels.
async fn with_progress_and_cancel<T>(
    context: &RequestContext<RoleServer>,
    asker: Arc<dyn Asker>,
    session: Option<&SessionUse>,
    call: impl AsyncFnOnce(CallCtx) -> Result<T, SourceError>,
) -> Result<T, McpError> {
    let principal = principal_of(context);
    let mut info = json!({"meta": context.meta, "principal": principal.name()});
    if let Some(s) = session {
        s.annotate(&mut info);
    }
    // Whatever wf logs about this call names who made it.
    let span = tracing::info_span!("call", principal = principal.name());
    let ctx = CallCtx::new().with_info(info).with_asker(asker);
    let work = async |ctx| {
        tokio::select! {
            r = call(ctx) => r.map_err(source_error),
            _ = context.ct.cancelled() => Err(McpError::internal_error("cancelled by the client", None)),
        }
    };
    // Progress has somewhere to go only when the client sent a token; a call
    // without one gets no channel (the plugin's reports are dropped at the
    // boundary) and nothing to poll beside it.
    let Some(token) = context.meta.get_progress_token() else {
        return work(ctx).instrument(span).await;
    };
    let (ctx, mut progress) = ctx.with_progress();
    let peer = context.peer.clone();
    // A call in input rounds reports to the request of its current round.
    let route = context.extensions.get::<ProgressRoute>().cloned();
    let forward = async move {
        while let Some(p) = progress.recv().await {
            match &route {
                Some(route) => route.send(p).await,
                None => {
                    let _ = peer.notify_progress(notification(token.clone(), p)).await;
                }
            }
        }
    };
    // `forward` ends when the call's context (and its sender) is dropped.
    let (result, ()) = tokio::join!(work(ctx).instrument(span), forward);
    result
}

impl ServerHandler for WfServer {
    async fn on_roots_list_changed(&self, context: NotificationContext<RoleServer>) {
        let caller =
            session_route::notifying_caller(self.http, &self.session_client, &self.ended, &context);
        let roots = super::roots::ask_client(&context.peer).await;
        super::roots::list_changed(&self.app, &caller, &self.roots, roots.as_ref()).await;
    }

    async fn on_initialized(&self, context: NotificationContext<RoleServer>) {
        if let Some(calls) = &self.session_calls
            && let Some(id) = calls.session_of(&context)
        {
            // The registered clone has no calls of its own to answer.
            let mut server = self.clone();
            server.session_calls = None;
            calls.register(id, server, context.peer.clone());
        }
        // A 2025-11-25 client: tell it when its lists change, until its
        // session ends.
        let peer = context.peer;
        let principal = crate::server::identity::limits::principal_of_request(
            context.extensions.get::<http::request::Parts>(),
        );
        caller::follow_logs(
            &self.app.source_logs,
            peer.clone(),
            self.level.clone(),
            self.ended.clone(),
            self.may_see(principal),
        );
        let endpoint = self.followed_endpoint(context.extensions.get::<http::request::Parts>());
        let follow = notify::follow(self.app.clone(), endpoint, move |kind| {
            let peer = peer.clone();
            async move {
                let sent = match kind {
                    ListKind::Tools => peer.notify_tool_list_changed().await,
                    ListKind::Prompts => peer.notify_prompt_list_changed().await,
                    ListKind::Resources => peer.notify_resource_list_changed().await,
                };
                sent.is_ok() && !peer.is_transport_closed()
            }
        });
        let counted = Follower::new(&self.app);
        let ended = self.ended.clone();
        tokio::spawn(async move {
            let _counted = counted;
            tokio::select! {
                () = follow => {}
                () = ended.cancelled() => {}
            }
        });
    }

    fn accepted_subscription_filter(
        &self,
        requested: &SubscriptionFilter,
    ) -> Option<SubscriptionFilter> {
        // 2026-07-28 clients listen for list changes (not resource updates).
        let mut f = SubscriptionFilter::new();
        f.tools_list_changed = requested.tools_list_changed;
        f.prompts_list_changed = requested.prompts_list_changed;
        f.resources_list_changed = requested.resources_list_changed;
        f.resource_subscriptions = requested.resource_subscriptions.clone();
        // Called before rmcp acknowledges the stream: from now until `listen`
        // has the sources watching, their tool calls wait (`listen_gate`).
        for handle in self.listened_sources(requested) {
            handle.listens.begin();
        }
        Some(f)
    }

    async fn listen(&self, context: SubscriptionContext) -> Result<(), McpError> {
        // Boxed, as every large handler future: rmcp's task for each request
        // is as large as the largest of them, and copied whole on its way.
        Box::pin(async move {
            let ctx = Arc::new(context);
            let sink = ctx.clone();
            let endpoint = self.followed_endpoint(
                ctx.request_context()
                    .extensions
                    .get::<http::request::Parts>(),
            );
            let follow = notify::follow(self.app.clone(), endpoint, move |kind| {
                let sink = sink.clone();
                async move {
                    let sent = match kind {
                        ListKind::Tools => sink.sink().notify_tool_list_changed().await,
                        ListKind::Prompts => sink.sink().notify_prompt_list_changed().await,
                        ListKind::Resources => sink.sink().notify_resource_list_changed().await,
                    };
                    // A kind the client did not ask for is refused by the sink;
                    // only a closed stream ends the subscription.
                    sent.is_ok() || !sink.request_context().peer.is_transport_closed()
                }
            });
            let _counted = Follower::new(&self.app);
            // Log messages that belong to no call, at the level this request
            // opted in to (`_meta` `io.modelcontextprotocol/logLevel`; none without).
            let request = ctx.request_context();
            let ended = CancellationToken::new();
            let _end_logs = ended.clone().drop_guard();
            caller::follow_logs(
                &self.app.source_logs,
                request.peer.clone(),
                caller::ModernLogs::from_meta(&request.meta).level(),
                ended.clone(),
                self.may_see(principal_of(request)),
            );
            // SEP-2663 status notifications of the tasks this stream asked about
            // (its filter's `taskIds`), the principal's own only. rmcp's sink
            // refuses `notifications/tasks` (its filter has no task ids), so they
            // go to the stream's peer, tagged with the subscription as the sink would.
            for id in super::tasks::state::listened(&request.meta) {
                let (peer, subscription) = (request.peer.clone(), request.id.clone());
                let send = move |state: GetTaskResult| {
                    let (peer, subscription) = (peer.clone(), subscription.clone());
                    async move {
                        let mut meta = NotificationMetaObject::new();
                        meta.set_subscription_id(subscription);
                        let params = TaskStatusNotificationParams::new(state.task).with_meta(meta);
                        let n = TaskStatusNotification::new(params);
                        let sent = peer
                            .send_notification(ServerNotification::TaskStatusNotification(n))
                            .await;
                        sent.is_ok() && !peer.is_transport_closed()
                    }
                };
                let who = (self.task_owner(request), id);
                let room = (self.app.clone(), self.surfaces.clone());
                super::tasks::state::watch(room, who, true, ended.clone(), send);
            }
            // The set-up `accepted_subscription_filter` began ends here,
            // however it ends.
            let set_up = ListenSetUp(self.listened_sources(ctx.requested()));
            // The stream's resource subscriptions end with it.
            let stream = Downstream::new(&self.app);
            if let Some(uris) = &ctx.accepted().resource_subscriptions {
                for uri in uris {
                    let route = self.app.resource_route(uri).await;
                    let source = route.as_ref().map_or("", |r| r.source.as_str());
                    let capability = resource_capability(source, uri);
                    let (_, recorded) = self.admit(
                        ctx.request_context(),
                        Entry::Subscribe,
                        capability,
                        &Value::Null,
                    )?;
                    if let Some(r) = recorded {
                        r.finish::<()>(pipeline::record::Outcome::Ok, None);
                    }
                }
                let caller = self.session_caller(ctx.request_context())?;
                forwarding::listen_resources(&self.app, &stream, &caller, ctx.sink().clone(), uris)
                    .await;
            }
            drop(set_up);
            tokio::select! {
                () = follow => {}
                () = ctx.cancelled() => {}
            }
            Ok(())
        })
        .await
    }

    async fn complete(
        &self,
        request: CompleteRequestParams,
        context: RequestContext<RoleServer>,
    ) -> Result<CompleteResult, McpError> {
        Box::pin(async move {
            let mut counted = observe::Counted::new("completion/complete");
            // Completing a prompt's or template's argument is a use of it.
            let reference = serde_json::to_value(&request.r#ref).unwrap_or_default();
            let text = |k: &str| reference.get(k).and_then(Value::as_str).unwrap_or("");
            let proj = self.app.projection();
            let capability = if text("type") == "ref/prompt" {
                let name = text("name");
                Capability {
                    kind: Kind::Prompt,
                    source: proj.prompt(name).map_or("", |p| p.source.as_str()),
                    name,
                    annotations: None,
                }
            } else {
                let uri = text("uri");
                let source = proj.templates.iter().find(|t| t.name == uri);
                resource_capability(source.map_or("", |t| t.source.as_str()), uri)
            };
            let arguments = serde_json::to_value(&request.argument).unwrap_or_default();
            let _held = match self.admit(&context, Entry::Completion, capability, &arguments) {
                Ok((held, recorded)) => {
                    counted.audited(recorded);
                    held
                }
                Err(refused) => return counted.finish(Err(refused)),
            };
            drop(proj);
            counted.finish(forwarding::complete(&self.app, request, CallCtx::new()).await)
        })
        .await
    }

    #[allow(deprecated)] // 2025-11-25 clients still subscribe this way
    async fn subscribe(
        &self,
        request: SubscribeRequestParams,
        context: RequestContext<RoleServer>,
    ) -> Result<(), McpError> {
        // Boxed, as the other handlers' bodies: inline, it sized rmcp's
        // per-request task (every call's), which tokio copies whole several
        // times as it spawns, polls and finishes it.
        Box::pin(async move {
            let mut counted = observe::Counted::new("resources/subscribe");
            let source = self.app.resource_route(&request.uri).await;
            let source = source.as_ref().map_or("", |r| r.source.as_str());
            let capability = resource_capability(source, &request.uri);
            let _held = match self.admit(&context, Entry::Subscribe, capability, &Value::Null) {
                Ok((held, recorded)) => {
                    counted.audited(recorded);
                    held
                }
                Err(refused) => return counted.finish(Err(refused)),
            };
            let subscribed = match self.session_caller(&context) {
                Ok(caller) => {
                    let (app, client, uri) = (&self.app, &self.client, &request.uri);
                    forwarding::subscribe(app, client, &caller, context.peer, uri).await
                }
                Err(e) => Err(e),
            };
            counted.finish(subscribed)
        })
        .await
    }

    #[allow(deprecated)]
    async fn unsubscribe(
        &self,
        request: UnsubscribeRequestParams,
        _: RequestContext<RoleServer>,
    ) -> Result<(), McpError> {
        self.app
            .subscriptions
            .unsubscribe(self.client.id, &request.uri)
            .await;
        observe::Counted::new("resources/unsubscribe").finish(Ok(()))
    }

    async fn initialize(
        &self,
        request: InitializeRequestParams,
        context: RequestContext<RoleServer>,
    ) -> Result<InitializeResult, McpError> {
        context.peer.set_peer_info(request.clone());
        let mut result = self.negotiate_initialize(&request)?;
        if let Some(e) = self.endpoint(&context)? {
            self.brand(&mut result, &e);
        }
        Ok(result)
    }

    async fn discover(
        &self,
        context: RequestContext<RoleServer>,
    ) -> Result<DiscoverResult, McpError> {
        let mut info = self.get_info();
        if let Some(e) = self.endpoint(&context)? {
            self.brand(&mut info, &e);
        }
        let versions = self.supported_protocol_versions().into_owned();
        Ok(DiscoverResult::from_server_info(versions, info))
    }

    #[allow(deprecated)] // `logging` (SEP-2577) is still served to 2025-11-25 clients.
    fn get_info(&self) -> ServerConfig {
        let caps = ServerCapabilities::builder()
            .enable_tools()
            .enable_tool_list_changed()
            .enable_prompts()
            .enable_prompts_list_changed()
            .enable_resources()
            .enable_resources_list_changed()
            .enable_resources_subscribe()
            .enable_completions()
            .enable_logging()
            // MCP Tasks (SEP-2663): wf's own runs (run_workflow, run_deployment, wf_deploy__*).
            .enable_tasks()
            .build();
        ServerConfig::new(caps)
            .with_server_info(Implementation::new("wf", env!("CARGO_PKG_VERSION")))
            .with_instructions(if self.surfaces.catalog.any_restricts() {
                "wf serves the tools, prompts and resources of its sources. Names are `<source>__<name>`. \
                 The wf_std__ tools are builtins; the wf_std__author_workflow prompt explains workflows. \
                 Not every tool is listed: when none listed fits, call wf_find with what you want to do, \
                 then wf_call {name, arguments} with a tool it returns (wf_describe {names} gives full schemas)."
            } else {
                "wf serves the tools, prompts and resources of its sources. Names are `<source>__<name>`. \
                 The wf_std__ tools are builtins; the wf_std__author_workflow prompt explains workflows."
            })
    }

    async fn get_task(
        &self,
        request: GetTaskParams,
        context: RequestContext<RoleServer>,
    ) -> Result<GetTaskResult, McpError> {
        let counted = observe::Counted::new("tasks/get");
        let got = Box::pin(super::tasks::state::of(
            &self.app,
            &self.surfaces,
            &self.task_owner(&context),
            &request.task_id,
        ))
        .await;
        counted.finish(got)
    }

    async fn update_task(
        &self,
        request: UpdateTaskParams,
        context: RequestContext<RoleServer>,
    ) -> Result<(), McpError> {
        let responses = serde_json::to_value(&request.input_responses)
            .map_err(|e| McpError::invalid_params(e.to_string(), None))?;
        let updated = Box::pin(super::tasks::state::update(
            &self.app,
            &self.surfaces,
            &self.task_owner(&context),
            &request.task_id,
            responses,
        ))
        .await;
        observe::Counted::new("tasks/update").finish(updated)
    }

    async fn cancel_task(
        &self,
        request: CancelTaskParams,
        context: RequestContext<RoleServer>,
    ) -> Result<(), McpError> {
        let cancelled = Box::pin(super::tasks::state::cancel(
            &self.app,
            &self.surfaces,
            &self.task_owner(&context),
            &request.task_id,
        ))
        .await;
        observe::Counted::new("tasks/cancel").finish(cancelled)
    }

    /// The 2025-11-25 task flavour (`tasks::v2025`); any other method is unknown.
    async fn on_custom_request(
        &self,
        request: CustomRequest,
        context: RequestContext<RoleServer>,
    ) -> Result<CustomResult, McpError> {
        use super::tasks::v2025::{self as legacy, Method};
        let Some(method) = Method::of(&request.method) else {
            return Err(McpError::new(
                ErrorCode::METHOD_NOT_FOUND,
                request.method,
                None,
            ));
        };
        let owner = self.task_owner(&context);
        let (app, surfaces) = (&self.app, &self.surfaces);
        let params = request.params.as_ref();
        // Each answer boxed: inline, these futures sized rmcp's per-request task.
        let answer = match method {
            Method::Call => return Box::pin(self.call_2025(request.params, context)).await,
            Method::Get => {
                let id = legacy::task_id(params)?;
                Box::pin(legacy::get(app, surfaces, &owner, &id)).await
            }
            Method::Result => {
                let id = legacy::task_id(params)?;
                let (peer, ct) = (&context.peer, &context.ct);
                Box::pin(legacy::result(app, surfaces, (&owner, &id), peer, ct)).await
            }
            Method::List => {
                let cursor = params.and_then(|p| p.get("cursor")).and_then(Value::as_str);
                Box::pin(legacy::list(
                    app,
                    surfaces,
                    &owner,
                    (cursor, self.page_size()),
                ))
                .await
            }
            Method::Cancel => {
                let id = legacy::task_id(params)?;
                Box::pin(legacy::cancel(app, surfaces, &owner, &id)).await
            }
        };
        observe::Counted::new(method.name()).finish(answer.map(CustomResult))
    }

    #[allow(deprecated)] // SEP-2577; 2025-11-25 clients still set levels.
    async fn set_level(
        &self,
        request: SetLevelRequestParams,
        _: RequestContext<RoleServer>,
    ) -> Result<(), McpError> {
        self.level.set(request.level);
        observe::Counted::new("logging/setLevel").finish(Ok(()))
    }

    async fn list_tools(
        &self,
        request: Option<PaginatedRequestParams>,
        context: RequestContext<RoleServer>,
    ) -> Result<ListToolsResult, McpError> {
        Box::pin(async move {
            let counted = observe::Counted::new("tools/list");
            let proj = self.app.projection_ready().await;
            let (principal, caller) = (principal_of(&context), self.caller(&context));
            let endpoint = self.endpoint(&context)?;
            let view = endpoint.as_ref().map(|e| e.view(&proj));
            let room = (&*self.app, &self.surfaces);
            let usable = match &view {
                // An endpoint lists what it shows of what the caller may use.
                Some(v) => v
                    .tools()
                    .filter(|t| visible(room, &principal, &caller, t.original))
                    .map(|t| t.shown)
                    .collect(),
                None => proj
                    .tools
                    .iter()
                    .filter(|t| visible(room, &principal, &caller, t))
                    .collect(),
            };
            let found = self
                .found
                .lock()
                .unwrap_or_else(std::sync::PoisonError::into_inner)
                .clone();
            let catalog = &self.surfaces.catalog;
            let listing = match &endpoint {
                Some(e) => catalog.listing_by(
                    &catalog.endpoint_policy(e),
                    &self.app.store,
                    &principal,
                    usable,
                    &found,
                ),
                None => catalog.listing(&self.app.store, &principal, usable, &found),
            };
            let (items, next) = paged(&listing.tools, &request, self.page_size())?;
            let mut tools: Vec<Tool> = convert(&items)?;
            // 2025-11-25 clients read whether a tool may be called as a task
            // from its `execution`, which rmcp's `Tool` has no member for:
            // carried in `_meta` to `tasks::v2025::declare`, which moves it.
            if context
                .protocol_version()
                .is_none_or(|v| v < ProtocolVersion::V_2026_07_28)
            {
                for (tool, item) in tools.iter_mut().zip(&items) {
                    super::tasks::v2025::carry_execution(tool, &item.extra);
                }
            }
            let mut r = ListToolsResult::with_all_items(tools);
            r.next_cursor = next;
            counted.finish(Ok(r))
        })
        .await
    }

    /// rmcp asks only for the input schema (to check a 2026-07-28 request's
    /// `Mcp-Param-*` headers), on every `tools/call`: the cached schema and
    /// the name, not the whole tool converted.
    fn get_tool(&self, name: &str) -> Option<Tool> {
        if meta_tools::is_meta(name) {
            let t = meta_tools::definitions().iter().find(|t| t.name == name)?;
            let schema = t.input_schema.as_object()?.clone();
            return Some(Tool::new_with_raw(name.to_string(), None, Arc::new(schema)));
        }
        let schema = self.app.projection().tool_schema(name)?;
        Some(Tool::new_with_raw(name.to_string(), None, schema))
    }

    async fn call_tool(
        &self,
        request: CallToolRequestParams,
        context: RequestContext<RoleServer>,
    ) -> Result<CallToolResponse, McpError> {
        // Boxed: rmcp spawns a task per request, and this future inline made
        // every spawn copy it whole (docs/benchmarks.md, "the call path").
        // Its rare branches (meta-tools, endpoints, tasks, local tools, input
        // rounds) are boxed again where taken: inline, they made this future
        // 52 KiB, copied whole into its box on every plain call.
        Box::pin(async move {
            let mut counted = observe::Counted::new("tools/call");
            let _slot = match self.slots.take("tools/call") {
                Ok(slot) => slot,
                Err(busy) => return counted.finish(Err(busy)),
            };
            // The meta-tools: wf_find and wf_describe answer here; wf_call
            // becomes the call it names and takes the direct call's path
            // below (allow and deny lists, progress, cancellation, input).
            let mut request = request;
            let mut entry = Entry::ToolsCall;
            match request.name.as_ref() {
                meta_tools::CALL => match unwrap_call(request) {
                    Ok(inner) => {
                        request = inner;
                        entry = Entry::WfCall;
                    }
                    Err(e) => return counted.finish(Err(e)),
                },
                name @ (meta_tools::FIND | meta_tools::DESCRIBE) => {
                    let args = Value::Object(request.arguments.clone().unwrap_or_default());
                    let r = Box::pin(self.meta_call(name, &args, &context)).await;
                    return counted.finish(r.map(CallToolResponse::Complete));
                }
                _ => {}
            }
            // The view stage: an endpoint's name for a tool becomes the
            // original, its arguments the original call's.
            let (endpoint, promised) = match self.endpoint(&context) {
                Ok(Some(e)) => match Box::pin(self.endpoint_call(&e, &mut request)).await {
                    Ok(promised) => (Some(e), promised),
                    Err(refused) => return counted.finish(Err(refused)),
                },
                Ok(None) => (None, None),
                Err(refused) => return counted.finish(Err(refused)),
            };
            let proj = self.app.projection_for_tool(&request.name).await;
            let Some(tool) = proj.tool(&request.name) else {
                // The hold stage: a held tool is in no list, and says why.
                let why = self.app.projector.held_refusal(&request.name);
                return Err(McpError::invalid_params(
                    why.unwrap_or_else(|| format!("unknown tool {:?}", request.name)),
                    None,
                ));
            };
            let principal = principal_of(&context);
            let args = Value::Object(request.arguments.unwrap_or_default());
            // Held (its concurrency slots) until the call's answer.
            let _held = match self.admit(&context, entry, tool_capability(tool), &args) {
                Ok((held, recorded)) => {
                    counted.audited(recorded);
                    held
                }
                Err(refused) => {
                    tracing::warn!(principal = principal.name(), tool = %tool.name, "tool call refused");
                    return counted.finish(Err(refused));
                }
            };
            if self.surfaces.catalog.counts_usage() {
                let usage = &self.surfaces.catalog.usage;
                usage.record(&self.app.store, &principal, &tool.name);
            }
            // A run asked for by a client that declared MCP Tasks: a task handle at once.
            let wants_task = wants_task(&context);
            if Planner::starts_run(&tool.source, &tool.original) && wants_task {
                let caller = self.session_caller(&context)?;
                let owner = self.task_owner(&context);
                let start = super::tasks::start(
                    self.task_room(),
                    &tool.source,
                    &tool.original,
                    args.clone(),
                    (principal.name(), &owner),
                );
                let start = pipeline::as_principal(principal.clone(), start);
                let start = endpoints::within(endpoint.clone(), start);
                if let Some(started) = Box::pin(with_caller(caller, start)).await {
                    return counted.finish(started);
                }
            }
            if self.app.is_local(&tool.source) {
                // A local tool's request span, too: a run it starts is its child.
                let span = observe::request_span(&context, &format!("tools/call {}", request.name));
                let result = Box::pin(async {
                    let result = match (tool.source.as_str(), &self.surfaces.admin) {
                        (SESSION_SOURCE, _) => {
                            let principal = session_route::principal(&context);
                            session_route::call(&self.app, &tool.original, args, &principal)
                                .await?
                        }
                        (ADMIN_SOURCE, Some(admin)) => {
                            admin
                                .call(&tool.original, args, &self.caller(&context))
                                .await
                        }
                        _ => {
                            // Runs and call_capability use the caller's sessions.
                            let caller = self.session_caller(&context)?;
                            let planner = &self.surfaces.planner;
                            let call =
                                planner.call(&tool.source, &tool.original, args, principal.name());
                            let call = pipeline::as_principal(principal.clone(), call);
                            // The planner's tools narrow to the endpoint's node specs.
                            let call = endpoints::within(endpoint.clone(), call);
                            with_caller(caller, call).await
                        }
                    };
                    Ok::<_, McpError>(result)
                }
                .instrument(span))
                .await?;
                return counted
                    .finish(super::tool_result::to_mcp(result).map(CallToolResponse::Complete));
            }
            let handle = self.handle(&tool.source)?;
            // A proxied call from a client that declared MCP Tasks: the source
            // may serve it as a task (plugin API 1.3).
            if wants_task {
                let retry = (request.request_state.clone(), request.input_responses.clone());
                let start = self.source_task(
                    &context,
                    handle.clone(),
                    (&request.name, &tool.source, &tool.original),
                    args.clone(),
                    retry,
                );
                if let Some(started) = Box::pin(start).await {
                    return counted.finish(started);
                }
            }
            let session = self.session(&handle, &context).await?;
            // The projection (an Arc) rides along instead of a per-call copy of the tool.
            let (proj, exposed) = (proj.clone(), request.name.to_string());
            let isolation = self.surfaces.isolation.clone();
            let work = move |context: RequestContext<RoleServer>, asker| async move {
                let tool = proj
                    .tool(&exposed)
                    .ok_or_else(|| McpError::internal_error("tool vanished", None))?;
                let (source, name) = (&tool.source, &tool.original);
                let result = with_progress_and_cancel(&context, asker, session.as_ref(), async |ctx| {
                    handle.call_tool(name, args, ctx).await
                })
                .await?;
                let result = isolation.epochs.check(&context, source, result).await;
                let reference = format!("{source}.{name}");
                // The schema its client was shown: an endpoint's, or the tool's own.
                let result = match &promised {
                    Some((shown, schema)) => crate::surfaces::proxy::check_output_against(
                        &format!("{shown} (on this endpoint)"),
                        schema,
                        result,
                    ),
                    None => crate::surfaces::proxy::check_output(&reference, &tool.item, result),
                };
                super::tool_result::to_mcp(result)
            };
            let what = format!("tools/call {}", request.name);
            let retry = (request.request_state, request.input_responses);
            counted.finish(Ok(
                match self
                    .with_input(&context, what, &tool.source, retry, work)
                    .await?
                {
                    Step::Done(r) => CallToolResponse::Complete(r),
                    Step::Input(i) => CallToolResponse::InputRequired(i),
                },
            ))
        })
        .await
    }

    async fn list_prompts(
        &self,
        request: Option<PaginatedRequestParams>,
        context: RequestContext<RoleServer>,
    ) -> Result<ListPromptsResult, McpError> {
        Box::pin(async move {
            let counted = observe::Counted::new("prompts/list");
            let proj = self.app.live_projection().await;
            let principal = principal_of(&context);
            let endpoint = self.endpoint(&context)?;
            let items: Vec<&wf_plugin_api::Prompt> = proj
                .prompts
                .iter()
                .filter(|p| {
                    endpoint
                        .as_ref()
                        .is_none_or(|e| e.selects_prompt(&p.source, &p.name))
                })
                .filter(|p| {
                    let c = Capability {
                        kind: Kind::Prompt,
                        source: &p.source,
                        name: &p.name,
                        annotations: None,
                    };
                    self.listed(&principal, c)
                })
                .map(|p| &p.item)
                .collect();
            let (items, next) = paged(&items, &request, self.page_size())?;
            let mut r = ListPromptsResult::with_all_items(convert(items)?);
            r.next_cursor = next;
            counted.finish(Ok(r))
        })
        .await
    }

    async fn get_prompt(
        &self,
        request: GetPromptRequestParams,
        context: RequestContext<RoleServer>,
    ) -> Result<GetPromptResponse, McpError> {
        Box::pin(async move {
            let mut counted = observe::Counted::new("prompts/get");
            let _slot = match self.slots.take("prompts/get") {
                Ok(slot) => slot,
                Err(busy) => return counted.finish(Err(busy)),
            };
            let mut proj = self.app.projection_for_prompt(&request.name).await;
            if proj.prompt(&request.name).is_none() {
                proj = self.app.live_projection().await;
            }
            let endpoint = self.endpoint(&context)?;
            let prompt = proj.prompt(&request.name).filter(|p| {
                endpoint
                    .as_ref()
                    .is_none_or(|e| e.selects_prompt(&p.source, &p.name))
            });
            let Some(prompt) = prompt else {
                return Err(McpError::invalid_params(
                    format!("unknown prompt {:?}", request.name),
                    None,
                ));
            };
            let args = request.arguments.unwrap_or_default();
            let capability = Capability {
                kind: Kind::Prompt,
                source: &prompt.source,
                name: &prompt.name,
                annotations: None,
            };
            let arguments = serde_json::to_value(&args).unwrap_or_default();
            let _held = match self.admit(&context, Entry::PromptsGet, capability, &arguments) {
                Ok((held, recorded)) => {
                    counted.audited(recorded);
                    held
                }
                Err(refused) => return counted.finish(Err(refused)),
            };
            let handle = self.handle(&prompt.source)?;
            let session = self.session(&handle, &context).await?;
            let name = prompt.original.clone();
            let work = move |context: RequestContext<RoleServer>, asker| async move {
                let result =
                    with_progress_and_cancel(&context, asker, session.as_ref(), async |ctx| {
                        handle.get_prompt(&name, args, ctx).await
                    })
                    .await?;
                complete::<GetPromptResult>(result)
            };
            let what = format!("prompts/get {}", request.name);
            let retry = (request.request_state, request.input_responses);
            counted.finish(Ok(
                match self
                    .with_input(&context, what, &prompt.source, retry, work)
                    .await?
                {
                    Step::Done(r) => GetPromptResponse::Complete(r),
                    Step::Input(i) => GetPromptResponse::InputRequired(i),
                },
            ))
        })
        .await
    }

    async fn list_resources(
        &self,
        request: Option<PaginatedRequestParams>,
        context: RequestContext<RoleServer>,
    ) -> Result<ListResourcesResult, McpError> {
        Box::pin(async move {
            let counted = observe::Counted::new("resources/list");
            let proj = self.app.live_projection().await;
            let principal = principal_of(&context);
            let endpoint = self.endpoint(&context)?;
            let items: Vec<&wf_plugin_api::Resource> = proj
                .resources
                .iter()
                .filter(|r| {
                    endpoint
                        .as_ref()
                        .is_none_or(|e| e.selects_resource(&r.source, &r.name))
                })
                .filter(|r| self.listed(&principal, resource_capability(&r.source, &r.name)))
                .map(|r| &r.item)
                .collect();
            let (items, next) = paged(&items, &request, self.page_size())?;
            let mut r = ListResourcesResult::with_all_items(convert(items)?);
            r.next_cursor = next;
            counted.finish(Ok(r))
        })
        .await
    }

    async fn list_resource_templates(
        &self,
        request: Option<PaginatedRequestParams>,
        context: RequestContext<RoleServer>,
    ) -> Result<ListResourceTemplatesResult, McpError> {
        Box::pin(async move {
            let counted = observe::Counted::new("resources/templates/list");
            let proj = self.app.live_projection().await;
            let principal = principal_of(&context);
            let endpoint = self.endpoint(&context)?;
            let items: Vec<&wf_plugin_api::ResourceTemplate> = proj
                .templates
                .iter()
                .filter(|t| {
                    endpoint
                        .as_ref()
                        .is_none_or(|e| e.selects_resource(&t.source, &t.name))
                })
                .filter(|t| self.listed(&principal, resource_capability(&t.source, &t.name)))
                .map(|t| &t.item)
                .collect();
            let (items, next) = paged(&items, &request, self.page_size())?;
            let mut r = ListResourceTemplatesResult::with_all_items(convert(items)?);
            r.next_cursor = next;
            counted.finish(Ok(r))
        })
        .await
    }

    async fn read_resource(
        &self,
        request: ReadResourceRequestParams,
        context: RequestContext<RoleServer>,
    ) -> Result<ReadResourceResponse, McpError> {
        Box::pin(async move {
            let mut counted = observe::Counted::new("resources/read");
            let _slot = match self.slots.take("resources/read") {
                Ok(slot) => slot,
                Err(busy) => return counted.finish(Err(busy)),
            };
            let endpoint = self.endpoint(&context)?;
            let route = self.app.resource_route(&request.uri).await.filter(|r| {
                endpoint
                    .as_ref()
                    .is_none_or(|e| e.selects_resource(&r.source, &request.uri))
            });
            let Some(route) = route else {
                return Err(McpError::resource_not_found(
                    format!("no source serves resource {:?}", request.uri),
                    Some(json!({"uri": request.uri})),
                ));
            };
            let capability = resource_capability(&route.source, &request.uri);
            let _held = match self.admit(&context, Entry::ResourcesRead, capability, &Value::Null) {
                Ok((held, recorded)) => {
                    counted.audited(recorded);
                    held
                }
                Err(refused) => return counted.finish(Err(refused)),
            };
            let handle = self.handle(&route.source)?;
            let session = self.session(&handle, &context).await?;
            let (source, asked) = (route.source.clone(), request.uri.clone());
            let work = move |context: RequestContext<RoleServer>, asker| async move {
                let mut result =
                    with_progress_and_cancel(&context, asker, session.as_ref(), async |ctx| {
                        handle.read_resource(&route.uri, ctx).await
                    })
                    .await?;
                // Contents carry the URI the client asked for, not the source's own.
                if route.uri != asked {
                    for c in &mut result.contents {
                        if c.get("uri").and_then(Value::as_str) == Some(route.uri.as_str()) {
                            c["uri"] = Value::String(asked.clone());
                        }
                    }
                }
                complete::<ReadResourceResult>(result)
            };
            let what = format!("resources/read {}", request.uri);
            let retry = (request.request_state, request.input_responses);
            counted.finish(Ok(
                match self
                    .with_input(&context, what, &source, retry, work)
                    .await?
                {
                    Step::Done(r) => ReadResourceResponse::Complete(r),
                    Step::Input(i) => ReadResourceResponse::InputRequired(i),
                },
            ))
        })
        .await
    }
}

/// Ends, when dropped, the `subscriptions/listen` set-ups begun on these
/// sources (see `sources::listen_gate`).
struct ListenSetUp(Vec<Arc<crate::sources::SourceHandle>>);

impl Drop for ListenSetUp {
    fn drop(&mut self) {
        for handle in &self.0 {
            handle.listens.end();
        }
    }
}
