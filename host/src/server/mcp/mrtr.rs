//! Multi round-trip requests (MRTR, MCP 2026-07-28) for calls whose source
//! asks for input. A 2026-07-28 client cannot be sent requests mid-call, so
//! wf answers its call with an `InputRequiredResult` holding the source's
//! requests, keeps the call running here, and resumes it when the client
//! retries with `inputResponses` and the `requestState` wf gave it.
//!
//! `requestState` is only an opaque, single-use handle (a random id) to a
//! call parked here, bound to the principal and the request that made it:
//! nothing the client sends back is trusted as state. A parked call waits at
//! most `[server] input_wait_ms` for its retry, at most `max_waiting_inputs`
//! calls wait at once, and a call ends (its upstream request cancelled) when
//! its wait expires, its client cancels a round or goes away.

use std::collections::{BTreeMap, HashMap};
use std::future::Future;
use std::sync::{Arc, Mutex, PoisonError};
use std::time::Duration;

use rmcp::model::{
    ClientCapabilities, InputRequest, InputRequests, InputRequiredResult, InputResponses,
};
use rmcp::service::RequestContext;
use rmcp::{ErrorData as McpError, RoleServer};
use serde::Serialize;
use serde::de::DeserializeOwned;
use serde_json::{Value, json};
use tokio::sync::{mpsc, oneshot};
use tokio_util::sync::{CancellationToken, DropGuard};
use wf_plugin_api::{CallerRequest, PluginError};

use super::caller::missing_capability;
use super::log_route::LogRoute;
use super::progress_route::ProgressRoute;
use crate::sources::{AskFuture, Asker};

/// Most rounds one call may take (the official clients give up after 10).
const MAX_ROUNDS: usize = 32;

type Reply = oneshot::Sender<Result<Value, PluginError>>;

/// A source's request for input, waiting for the client's answer.
struct Ask {
    request: CallerRequest,
    /// The key the source gave it (a [`CallerRequest::Round`]'s, e.g. its
    /// upstream's): the client sees it under that key where it can.
    key: Option<String>,
    reply: Reply,
}

/// Longest key of a source's that a client's round keeps (longer ones get
/// wf's own key; the answer still reaches the source under its key).
const MAX_KEY_LEN: usize = 256;

/// Whether `key` may stand in a client's `inputRequests` as it is.
fn usable_key(key: &str) -> bool {
    !key.is_empty() && key.len() <= MAX_KEY_LEN && !key.chars().any(char::is_control)
}

/// The key a request gets in a client's round: the source's where the client
/// can have it (usable and not yet taken in this round), else wf's own
/// (`elicit-1`, counting on from `next`).
fn round_key(wanted: Option<String>, kind: &str, taken: &InputRequests, next: &mut u64) -> String {
    match wanted {
        Some(k) if usable_key(&k) && !taken.contains_key(&k) => k,
        _ => loop {
            *next += 1;
            let k = format!("{kind}-{next}");
            if !taken.contains_key(&k) {
                break k;
            }
        },
    }
}

/// How a call ends: what it produced, or that it needs input first.
pub enum Step<T> {
    Done(T),
    Input(InputRequiredResult),
}

/// The asker of a 2026-07-28 client's call: requests for input queue up for
/// the next `InputRequiredResult` (a source's round together, as one batch);
/// log messages go to the current round's request.
struct RoundAsker {
    asks: mpsc::UnboundedSender<Vec<Ask>>,
    logs: LogRoute,
    caps: Option<ClientCapabilities>,
}

impl Asker for RoundAsker {
    fn ask(&self, request: CallerRequest) -> AskFuture {
        if matches!(request, CallerRequest::Log { .. }) {
            return self.logs.log(request);
        }
        if let Some(why) = missing_capability(self.caps.as_ref(), &request) {
            let e = PluginError::unsupported(format!("cannot {}: {why}", request.kind()));
            return Box::pin(async move { Err(e) });
        }
        let unanswered = || {
            PluginError::failed("the client did not answer: the call's wait for its input ended")
        };
        let CallerRequest::Round { requests } = request else {
            let (reply, answer) = oneshot::channel();
            let ask = Ask {
                request,
                key: None,
                reply,
            };
            let queued = self.asks.send(vec![ask]).is_ok();
            return Box::pin(async move {
                if !queued {
                    return Err(PluginError::failed("the call no longer waits for input"));
                }
                answer.await.unwrap_or_else(|_| Err(unanswered()))
            });
        };
        if requests.is_empty() {
            return Box::pin(async { Ok(Value::Object(Default::default())) });
        }
        // One batch, so the whole round lands in one InputRequiredResult.
        let mut batch = Vec::with_capacity(requests.len());
        let mut answers = Vec::with_capacity(requests.len());
        for (key, request) in requests {
            let (reply, answer) = oneshot::channel();
            batch.push(Ask {
                request,
                key: Some(key.clone()),
                reply,
            });
            answers.push((key, answer));
        }
        let queued = self.asks.send(batch).is_ok();
        Box::pin(async move {
            if !queued {
                return Err(PluginError::failed("the call no longer waits for input"));
            }
            let mut out = serde_json::Map::new();
            for (key, answer) in answers {
                out.insert(key, answer.await.unwrap_or_else(|_| Err(unanswered()))?);
            }
            Ok(Value::Object(out))
        })
    }
}

/// A call of a 2026-07-28 client that asked for input, running in its own task.
struct Running {
    /// The request it answers (`tools/call <name>`): a retry must match.
    what: String,
    /// The principal that made it: only it may resume it.
    owner: String,
    asks: mpsc::UnboundedReceiver<Vec<Ask>>,
    outcome: oneshot::Receiver<Result<Value, McpError>>,
    /// Answers the client sent with its first request, before any round
    /// (under the keys it expects the source to use): they answer the
    /// source's requests of those keys until wf hands the client a round.
    preset: InputResponses,
    /// Requests handed to the client, by their key in `inputRequests`.
    open: BTreeMap<String, Reply>,
    next_key: u64,
    rounds: usize,
    /// Ends the call's task (and so its upstream request) when dropped.
    _stop: DropGuard,
    /// Ends the parked call's expiry timer when dropped (resumed in time).
    expiry: Option<DropGuard>,
    /// Where its progress reports go: the request of the current round
    /// (none if the first request sent no progress token).
    progress: Option<ProgressRoute>,
    /// Where its log messages go: the request of the current round.
    logs: LogRoute,
}

/// How long ending a call waits for its task to drop it.
const END_WAIT: Duration = Duration::from_secs(1);

impl Running {
    /// Ends the call first and only then fails the requests it waits on, so
    /// the upstream is told the call was cancelled before a failed request
    /// could let it finish (and report that failure instead).
    async fn end(self) {
        let Running {
            outcome,
            open,
            _stop: stop,
            ..
        } = self;
        stop.disarm().cancel();
        // The call's task drops the call (which cancels it upstream) before
        // it drops the sender of `outcome`.
        let _ = tokio::time::timeout(END_WAIT, outcome).await;
        drop(open);
    }

    /// Hands the client's answers to the requests that wait for them.
    fn answer(&mut self, mut responses: InputResponses) {
        for (key, reply) in std::mem::take(&mut self.open) {
            let answer = match responses.remove(&key) {
                Some(v) => object_answer(&key, v),
                None => Err(PluginError::failed(format!(
                    "the client's retry brought no answer to {key}"
                ))),
            };
            let _ = reply.send(answer);
        }
    }
}

/// A client's answer to the request under `key`: an MCP result, so an object.
fn object_answer(key: &str, answer: Value) -> Result<Value, PluginError> {
    if answer.is_object() {
        Ok(answer)
    } else {
        Err(PluginError::invalid_arguments(format!(
            "the client's answer to {key} is not an object"
        )))
    }
}

/// The MCP request for `request` as an entry of `inputRequests`.
fn input_request(request: &CallerRequest) -> Result<InputRequest, String> {
    let msg = match request {
        CallerRequest::Elicit { params } => {
            json!({"method": "elicitation/create", "params": params})
        }
        CallerRequest::Sample { params } => {
            json!({"method": "sampling/createMessage", "params": params})
        }
        CallerRequest::ListRoots => json!({"method": "roots/list"}),
        other => return Err(format!("{} is not a request for input", other.kind())),
    };
    serde_json::from_value(msg).map_err(|e| format!("not a valid MCP request: {e}"))
}

fn cancelled() -> McpError {
    McpError::internal_error("cancelled by the client", None)
}

/// The calls of 2026-07-28 clients that wait for input.
pub struct Rounds {
    parked: Mutex<HashMap<String, Running>>,
    wait: Duration,
    max: usize,
    /// With several replicas: `requestState`s carry this replica (handles.rs).
    seal: Option<crate::server::handles::Seal>,
}

impl Rounds {
    pub fn new(wait: Duration, max: usize) -> Self {
        Self {
            parked: Mutex::default(),
            wait,
            max,
            seal: None,
        }
    }

    pub fn with_seal(mut self, seal: Option<crate::server::handles::Seal>) -> Self {
        self.seal = seal;
        self
    }

    pub fn for_config(server: &crate::config::ServerConfig) -> Self {
        Self::new(
            Duration::from_millis(server.input_wait_ms),
            server.max_waiting_inputs,
        )
    }

    fn lock(&self) -> std::sync::MutexGuard<'_, HashMap<String, Running>> {
        self.parked.lock().unwrap_or_else(PoisonError::into_inner)
    }

    /// Runs one round of a call: a new call (`work` started with an asker
    /// that queues requests for input), or the parked call `state` names,
    /// resumed with `responses`. `what` names the request and `owner` its
    /// principal; `gone` ends a parked call when its client goes away.
    #[allow(clippy::too_many_arguments)]
    pub async fn round<T, F, Fut>(
        self: &Arc<Self>,
        context: &RequestContext<RoleServer>,
        what: String,
        owner: String,
        gone: Option<CancellationToken>,
        logs: Arc<dyn Asker>,
        retry: (Option<String>, Option<InputResponses>),
        work: F,
    ) -> Result<Step<T>, McpError>
    where
        T: Serialize + DeserializeOwned,
        F: FnOnce(RequestContext<RoleServer>, Arc<dyn Asker>) -> Fut,
        Fut: Future<Output = Result<T, McpError>> + Send + 'static,
    {
        let (running, first) = match retry {
            (Some(state), responses) => {
                let mut r = self.take(&state, &owner, &what)?;
                // Before the answers let the call go on and report again.
                if let Some(route) = &r.progress {
                    route.point_at(context);
                }
                r.logs.point_at(logs);
                r.answer(responses.unwrap_or_default());
                (r, None)
            }
            (None, preset) => match start(context, what, owner, logs, work).await? {
                Started::Done(t) => return Ok(Step::Done(t)),
                Started::Asked(parked) => {
                    let (mut r, ask) = *parked;
                    r.preset = preset.unwrap_or_default();
                    (r, Some(ask))
                }
            },
        };
        self.drive(running, &context.ct, gone, first).await
    }

    /// The parked call `state` names, if `owner` made it for `what`.
    fn take(&self, state: &str, owner: &str, what: &str) -> Result<Running, McpError> {
        let mut parked = self.lock();
        let mine = parked
            .get(state)
            .is_some_and(|r| r.owner == owner && r.what == what);
        let taken = mine.then(|| parked.remove(state)).flatten();
        let Some(mut running) = taken else {
            if let Some(crate::server::handles::Owner::Elsewhere(replica)) =
                self.seal.as_ref().map(|s| s.owner(state))
            {
                return Err(crate::server::handles::wrong_replica(
                    "requestState",
                    &replica,
                ));
            }
            return Err(McpError::invalid_params(
                "unknown requestState: no call of yours waits for input under it \
                 (its wait may have expired); make the call again",
                None,
            ));
        };
        running.expiry = None;
        Ok(running)
    }

    /// Waits for the call to finish or ask for input; parks it in the latter case.
    async fn drive<T: DeserializeOwned>(
        self: &Arc<Self>,
        mut running: Running,
        ct: &CancellationToken,
        gone: Option<CancellationToken>,
        mut asked: Option<Vec<Ask>>,
    ) -> Result<Step<T>, McpError> {
        let mut requests = InputRequests::new();
        while requests.is_empty() {
            let first = if let Some(ask) = asked.take() {
                ask
            } else {
                tokio::select! {
                    () = ct.cancelled() => return Err(cancelled()),
                    r = &mut running.outcome => {
                        let value = r.map_err(|_| cancelled())??;
                        return serde_json::from_value(value).map(Step::Done).map_err(|e| {
                            McpError::internal_error(format!("cannot convert the call's result: {e}"), None)
                        });
                    }
                    Some(ask) = running.asks.recv() => ask,
                }
            };
            // Whatever else the source asked meanwhile goes in the same round.
            let mut asks = first;
            while let Ok(more) = running.asks.try_recv() {
                asks.extend(more);
            }
            for Ask {
                request,
                key,
                reply,
            } in asks
            {
                let r = match input_request(&request) {
                    Ok(r) => r,
                    Err(why) => {
                        let _ = reply.send(Err(PluginError::invalid_arguments(why)));
                        continue;
                    }
                };
                if let Some(answer) = key.as_ref().and_then(|k| running.preset.remove(k)) {
                    let _ = reply.send(object_answer(key.as_deref().unwrap_or_default(), answer));
                    continue;
                }
                let key = round_key(key, request.kind(), &requests, &mut running.next_key);
                requests.insert(key.clone(), r);
                running.open.insert(key, reply);
            }
        }
        // The client's early answers were for the first round only.
        running.preset.clear();
        // This round's request gets the InputRequiredResult and closes.
        if let Some(route) = &running.progress {
            route.clear();
        }
        running.logs.clear();
        running.rounds += 1;
        if running.rounds > MAX_ROUNDS {
            running.end().await;
            return Err(McpError::internal_error(
                format!("the call asked for input more than {MAX_ROUNDS} times; it was ended"),
                None,
            ));
        }
        let state = uuid::Uuid::new_v4().simple().to_string();
        let state = match &self.seal {
            Some(seal) => seal.issue(&state),
            None => state,
        };
        let expiry = CancellationToken::new();
        running.expiry = Some(expiry.clone().drop_guard());
        let refused = {
            let mut parked = self.lock();
            if parked.len() >= self.max {
                Some(running)
            } else {
                parked.insert(state.clone(), running);
                None
            }
        };
        if let Some(running) = refused {
            let max = self.max;
            tracing::warn!(
                max,
                "a call that asks for input was ended: too many calls wait for input"
            );
            running.end().await;
            return Err(McpError::internal_error(
                format!("too many calls wait for their client's input ({max}); try again later"),
                None,
            ));
        }
        self.expire(state.clone(), expiry, gone);
        Ok(Step::Input(InputRequiredResult::new(
            Some(requests),
            Some(state),
        )))
    }

    /// Ends the parked call `state` when its wait is over or its client is gone.
    fn expire(
        self: &Arc<Self>,
        state: String,
        resumed: CancellationToken,
        gone: Option<CancellationToken>,
    ) {
        let rounds = Arc::downgrade(self);
        let wait = self.wait;
        tokio::spawn(async move {
            let gone = async {
                match gone {
                    Some(g) => g.cancelled().await,
                    None => std::future::pending().await,
                }
            };
            let why = tokio::select! {
                () = resumed.cancelled() => return,
                () = tokio::time::sleep(wait) => "its wait for the client's input expired",
                () = gone => "its client went away",
            };
            let Some(rounds) = rounds.upgrade() else {
                return;
            };
            let ended = rounds.lock().remove(&state);
            if let Some(r) = ended {
                tracing::info!(request = %r.what, "a call waiting for input ended: {why}");
            }
        });
    }
}

/// How a new call's first stretch ended.
enum Started<T> {
    /// It finished without asking for anything: the common case.
    Done(T),
    /// It asked for input, and now runs on in its own task.
    Asked(Box<(Running, Vec<Ask>)>),
}

/// Runs `work`, asking through a [`RoundAsker`]. It is polled right here
/// until it finishes or first asks for input; only then does it move into a
/// task of its own that outlives this request (the boxed future moves as it
/// is), so a call that never asks costs no spawn and no JSON round trip of
/// its result.
async fn start<T, F, Fut>(
    context: &RequestContext<RoleServer>,
    what: String,
    owner: String,
    logs: Arc<dyn Asker>,
    work: F,
) -> Result<Started<T>, McpError>
where
    T: Serialize,
    F: FnOnce(RequestContext<RoleServer>, Arc<dyn Asker>) -> Fut,
    Fut: Future<Output = Result<T, McpError>> + Send + 'static,
{
    let (tx, mut asks) = mpsc::unbounded_channel();
    let caps = context
        .meta
        .client_capabilities()
        .or_else(|| context.peer.peer_info().map(|i| i.capabilities.clone()));
    let logs = LogRoute::to(logs);
    let asker = Arc::new(RoundAsker {
        asks: tx,
        logs: logs.clone(),
        caps,
    });
    // Once parked, the call outlives this request: it ends with its own token,
    // and reports progress to whichever request resumed it last.
    let stop = CancellationToken::new();
    // A call without a progress token has none to route (and a plain call
    // pays nothing for it).
    let progress = context
        .meta
        .get_progress_token()
        .map(|_| ProgressRoute::to(context));
    let mut ctx = context.clone();
    ctx.ct = stop.clone();
    if let Some(route) = &progress {
        ctx.extensions.insert(route.clone());
    }
    let mut work = Box::pin(work(ctx, asker));
    // Dropping `work` here (the client cancelled) ends the call.
    let ask = tokio::select! {
        () = context.ct.cancelled() => return Err(cancelled()),
        r = &mut work => return r.map(Started::Done),
        Some(ask) = asks.recv() => ask,
    };
    let (done, outcome) = oneshot::channel();
    let ended = stop.clone();
    tokio::spawn(async move {
        tokio::select! {
            r = work => {
                let r = r.and_then(|t| {
                    serde_json::to_value(t).map_err(|e| McpError::internal_error(e.to_string(), None))
                });
                let _ = done.send(r);
            }
            () = ended.cancelled() => {}
        }
    });
    let running = Running {
        what,
        owner,
        asks,
        outcome,
        preset: InputResponses::new(),
        open: BTreeMap::new(),
        next_key: 0,
        rounds: 0,
        _stop: stop.drop_guard(),
        expiry: None,
        progress,
        logs,
    };
    Ok(Started::Asked(Box::new((running, ask))))
}

#[cfg(test)]
mod tests {
    use super::*;

    struct NoLogs;
    impl Asker for NoLogs {
        fn ask(&self, _: CallerRequest) -> AskFuture {
            Box::pin(async { Ok(Value::Null) })
        }
    }

    fn caps(v: Value) -> Option<ClientCapabilities> {
        serde_json::from_value(v).ok()
    }

    #[test]
    fn requests_for_input_become_mcp_requests() {
        let r = input_request(&CallerRequest::Elicit {
            params: json!({"message": "name?", "requestedSchema": {"type": "object", "properties": {}}}),
        });
        let v = serde_json::to_value(r.expect("an elicitation")).expect("json");
        assert_eq!(v["method"], "elicitation/create");
        assert_eq!(v["params"]["message"], "name?");
        let roots = serde_json::to_value(input_request(&CallerRequest::ListRoots).expect("roots"));
        assert_eq!(roots.expect("json")["method"], "roots/list");
        let log = CallerRequest::Log {
            level: "info".into(),
            logger: None,
            data: Value::Null,
        };
        assert!(input_request(&log).is_err());
    }

    #[tokio::test]
    async fn asks_queue_for_the_next_round_and_get_the_clients_answer() {
        let (tx, mut rx) = mpsc::unbounded_channel();
        let asker = RoundAsker {
            asks: tx,
            logs: LogRoute::to(Arc::new(NoLogs)),
            caps: caps(json!({"roots": {}})),
        };
        let answer = asker.ask(CallerRequest::ListRoots);
        let mut batch = rx.recv().await.expect("queued");
        let ask = batch.pop().expect("one ask");
        assert!(batch.is_empty() && ask.key.is_none());
        assert_eq!(ask.request, CallerRequest::ListRoots);
        let _ = ask.reply.send(Ok(json!({"roots": []})));
        assert_eq!(answer.await.expect("answered"), json!({"roots": []}));
        // Dropped unanswered (the wait expired): the source gets an error.
        let answer = asker.ask(CallerRequest::ListRoots);
        drop(rx.recv().await);
        assert!(answer.await.is_err());
    }

    #[tokio::test]
    async fn a_sources_round_is_one_batch_and_its_answers_come_back_by_key() {
        let (tx, mut rx) = mpsc::unbounded_channel();
        let asker = RoundAsker {
            asks: tx,
            logs: LogRoute::to(Arc::new(NoLogs)),
            caps: caps(json!({"roots": {}, "elicitation": {}})),
        };
        let round = CallerRequest::Round {
            requests: std::collections::BTreeMap::from([
                ("where".to_string(), CallerRequest::ListRoots),
                (
                    "who".to_string(),
                    CallerRequest::Elicit {
                        params: json!({"message": "name?"}),
                    },
                ),
            ]),
        };
        let answer = asker.ask(round);
        let batch = rx.recv().await.expect("queued");
        let keys: Vec<_> = batch.iter().map(|a| a.key.clone()).collect();
        assert_eq!(keys, [Some("where".into()), Some("who".into())]);
        for ask in batch {
            let _ = ask.reply.send(Ok(json!({"for": ask.key})));
        }
        assert_eq!(
            answer.await.expect("answered"),
            json!({"where": {"for": "where"}, "who": {"for": "who"}})
        );
        // A round the client cannot answer in full is refused whole.
        let round = CallerRequest::Round {
            requests: std::collections::BTreeMap::from([
                ("where".to_string(), CallerRequest::ListRoots),
                (
                    "llm".to_string(),
                    CallerRequest::Sample { params: json!({}) },
                ),
            ]),
        };
        let e = asker.ask(round).await.expect_err("refused");
        assert_eq!(e.code, wf_plugin_api::ErrorCode::Unsupported);
        assert!(rx.try_recv().is_err());
    }

    #[test]
    fn a_round_keeps_the_sources_keys_unless_taken_or_unusable() {
        let mut taken = InputRequests::new();
        let roots = input_request(&CallerRequest::ListRoots).expect("roots");
        let mut next = 0;
        assert_eq!(
            round_key(Some("user_name".into()), "elicit", &taken, &mut next),
            "user_name"
        );
        taken.insert("user_name".into(), roots.clone());
        taken.insert("elicit-1".into(), roots);
        // Taken: wf's own key, past the one the source used.
        assert_eq!(
            round_key(Some("user_name".into()), "elicit", &taken, &mut next),
            "elicit-2"
        );
        assert_eq!(
            round_key(None, "list_roots", &taken, &mut next),
            "list_roots-3"
        );
        assert_eq!(
            round_key(Some(String::new()), "sample", &taken, &mut next),
            "sample-4"
        );
        assert_eq!(
            round_key(
                Some("x".repeat(MAX_KEY_LEN + 1)),
                "sample",
                &taken,
                &mut next
            ),
            "sample-5"
        );
        assert_eq!(
            round_key(Some("a\nb".into()), "sample", &taken, &mut next),
            "sample-6"
        );
    }

    #[tokio::test]
    async fn a_client_without_the_capability_gets_no_round() {
        let (tx, mut rx) = mpsc::unbounded_channel();
        let asker = RoundAsker {
            asks: tx,
            logs: LogRoute::to(Arc::new(NoLogs)),
            caps: caps(json!({})),
        };
        let e = asker
            .ask(CallerRequest::Sample { params: json!({}) })
            .await
            .expect_err("refused");
        assert!(e.message.contains("sampling"), "{}", e.message);
        assert!(rx.try_recv().is_err());
    }
}
