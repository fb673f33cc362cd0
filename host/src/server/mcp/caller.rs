//! The client behind a call, as its source sees it: requests for input
//! (elicitation, sampling, roots) and log messages a source sends during a
//! call go to the MCP client that made the call, within what that client
//! declared at `initialize`. wf never answers on a client's behalf: a
//! client without the capability makes the source's request fail
//! (`unsupported`). Also the client's log level (`logging/setLevel`) and the
//! forwarding of log messages that belong to no call.

#![allow(deprecated)] // rmcp marks sampling, roots and logging deprecated (SEP-2577); 2025-11-25 has them.

use std::sync::Arc;
use std::sync::atomic::{AtomicU8, Ordering};

use rmcp::model::{
    ClientCapabilities, ClientResult, LoggingLevel, LoggingMessageNotificationParam, ServerRequest,
};
use rmcp::service::ServiceError;
use rmcp::{Peer, RoleServer};
use serde_json::{Value, json};
use tokio_util::sync::CancellationToken;
use wf_plugin_api::{CallerRequest, PluginError};

use crate::sources::{AskFuture, Asker, SourceLog, SourceLogs};

/// MCP log levels, least severe first.
const LEVELS: [&str; 8] = [
    "debug",
    "info",
    "notice",
    "warning",
    "error",
    "critical",
    "alert",
    "emergency",
];

fn rank(level: &str) -> Option<u8> {
    LEVELS.iter().position(|l| *l == level).map(|i| i as u8)
}

/// One client's log level: messages below it are not sent. Until the client
/// sets one, everything is sent (the client asked for nothing less).
#[derive(Default)]
pub struct ClientLevel(AtomicU8);

impl ClientLevel {
    pub fn set(&self, level: LoggingLevel) {
        let name = serde_json::to_value(level).unwrap_or(Value::Null);
        let r = name.as_str().and_then(rank).unwrap_or(0);
        self.0.store(r, Ordering::Relaxed);
    }
    fn lets_through(&self, level: &str) -> bool {
        rank(level).is_some_and(|r| r >= self.0.load(Ordering::Relaxed))
    }
}

/// The logger a client sees: the source's name, then the source's own logger.
fn logger(source: &str, logger: Option<&str>) -> String {
    match logger {
        Some(l) if !l.is_empty() => format!("{source}/{l}"),
        _ => source.to_string(),
    }
}

/// Sends one log message to `peer` if its level lets it through.
async fn send_log(
    peer: &Peer<RoleServer>,
    level: &ClientLevel,
    source: &str,
    lvl: &str,
    sub: Option<&str>,
    data: Value,
) -> Result<(), PluginError> {
    if !level.lets_through(lvl) {
        return Ok(());
    }
    let params: LoggingMessageNotificationParam = serde_json::from_value(json!({
        "level": lvl, "logger": logger(source, sub), "data": data,
    }))
    .map_err(|e| PluginError::invalid_arguments(format!("bad log message: {e}")))?;
    peer.notify_logging_message(params)
        .await
        .map_err(|e| PluginError::failed(format!("the client is gone: {e}")))
}

/// Asks the client behind one call on behalf of `source`.
pub struct ClientAsker {
    pub peer: Peer<RoleServer>,
    pub source: String,
    pub level: Arc<ClientLevel>,
    /// A 2026-07-28 client: no server-to-client requests; log messages only
    /// when the request opted in (`_meta` `io.modelcontextprotocol/logLevel`).
    pub modern: Option<ModernLogs>,
    /// Where this client notes the sources that asked it for roots.
    pub roots: Arc<super::roots::RootsAskers>,
}

/// The `_meta` key of a 2026-07-28 request's log opt-in.
pub(crate) const LOG_LEVEL_META: &str = "io.modelcontextprotocol/logLevel";

/// A 2026-07-28 request's log opt-in.
pub struct ModernLogs(Option<ClientLevel>);

impl ModernLogs {
    /// From the request's `_meta`.
    pub fn from_meta(meta: &rmcp::model::RequestMetaObject) -> Self {
        let level = meta
            .0
            .0
            .get(LOG_LEVEL_META)
            .and_then(Value::as_str)
            .and_then(rank)
            .map(|r| ClientLevel(AtomicU8::new(r)));
        Self(level)
    }

    /// Whether the request asked for log messages of `level`.
    pub fn lets_through(&self, level: &str) -> bool {
        self.0.as_ref().is_some_and(|l| l.lets_through(level))
    }

    /// The level to send at: the opt-in's, or nothing without one.
    pub fn level(&self) -> Arc<ClientLevel> {
        let rank = self
            .0
            .as_ref()
            .map_or(u8::MAX, |l| l.0.load(Ordering::Relaxed));
        Arc::new(ClientLevel(AtomicU8::new(rank)))
    }
}

/// Why a client with `caps` cannot be asked `request`, if it cannot.
pub(super) fn missing_capability(
    caps: Option<&ClientCapabilities>,
    request: &CallerRequest,
) -> Option<String> {
    let missing = |what: &str| Some(format!("the client did not declare {what} support"));
    match request {
        CallerRequest::Elicit { params } => {
            let Some(e) = caps.and_then(|c| c.elicitation.as_ref()) else {
                return missing("elicitation");
            };
            let url = params.get("mode").and_then(Value::as_str) == Some("url");
            // A bare `elicitation: {}` means form mode (2025-06-18 clients).
            let form_ok = e.form.is_some() || e.url.is_none();
            match url {
                true if e.url.is_none() => missing("URL-mode elicitation"),
                false if !form_ok => missing("form-mode elicitation"),
                _ => None,
            }
        }
        CallerRequest::Sample { params } => {
            let Some(s) = caps.and_then(|c| c.sampling.as_ref()) else {
                return missing("sampling");
            };
            let tools = params.get("tools").is_some() || params.get("toolChoice").is_some();
            (tools && s.tools.is_none()).then(|| {
                "the client did not declare sampling with tools (sampling.tools)".to_string()
            })
        }
        CallerRequest::ListRoots => caps
            .and_then(|c| c.roots.as_ref())
            .is_none()
            .then(|| "the client did not declare roots support".to_string()),
        CallerRequest::Log { .. } => None,
        // Every request of a round must be one the client can answer.
        CallerRequest::Round { requests } => requests.values().find_map(|r| match r {
            CallerRequest::Elicit { .. }
            | CallerRequest::Sample { .. }
            | CallerRequest::ListRoots => missing_capability(caps, r),
            other => Some(format!("a round cannot hold a {} request", other.kind())),
        }),
        CallerRequest::Unknown => Some("this host does not know that kind of request".into()),
    }
}

impl ClientAsker {
    /// Why the client cannot be asked this, if it cannot.
    fn refusal(&self, request: &CallerRequest) -> Option<String> {
        if self.modern.is_some() && !matches!(request, CallerRequest::Log { .. }) {
            return Some(
                "the client speaks MCP 2026-07-28, where a server cannot send it requests during a call \
                 (wf asks it in input-required rounds, and this request is not in one)"
                    .into(),
            );
        }
        let info = self.peer.peer_info();
        missing_capability(info.as_ref().map(|i| &i.capabilities), request)
    }

    /// Asks the client for input with one request.
    async fn input(peer: Peer<RoleServer>, request: CallerRequest) -> Result<Value, PluginError> {
        match request {
            CallerRequest::Elicit { params } => {
                Self::request(peer, "elicitation/create", params).await
            }
            CallerRequest::Sample { params } => {
                Self::request(peer, "sampling/createMessage", params).await
            }
            CallerRequest::ListRoots => Self::request(peer, "roots/list", Value::Null).await,
            other => Err(PluginError::unsupported(format!(
                "{} is not a request for input",
                other.kind()
            ))),
        }
    }

    async fn request(
        peer: Peer<RoleServer>,
        method: &str,
        params: Value,
    ) -> Result<Value, PluginError> {
        let mut msg = json!({"method": method});
        if !params.is_null() {
            msg["params"] = params;
        }
        let request: ServerRequest = serde_json::from_value(msg)
            .map_err(|e| PluginError::invalid_arguments(format!("bad {method} request: {e}")))?;
        match peer.send_request(request).await {
            Ok(ClientResult::CustomResult(_)) | Ok(ClientResult::EmptyResult(_)) => {
                Err(PluginError::failed(format!(
                    "the client answered {method} with an unexpected result"
                )))
            }
            Ok(r) => serde_json::to_value(r).map_err(|e| PluginError::internal(e.to_string())),
            Err(ServiceError::McpError(e)) => Err(PluginError::failed(format!(
                "the client answered {method} with error {}: {}",
                e.code.0, e.message
            ))
            .with_data(json!({"mcp_error": e}))),
            Err(e) => Err(PluginError::failed(format!(
                "asking the client failed: {e}"
            ))),
        }
    }
}

impl Asker for ClientAsker {
    fn ask(&self, request: CallerRequest) -> AskFuture {
        let peer = self.peer.clone();
        if let Some(why) = self.refusal(&request) {
            let e = PluginError::unsupported(format!("cannot {}: {why}", request.kind()));
            return Box::pin(async move { Err(e) });
        }
        let roots = match &request {
            CallerRequest::ListRoots => true,
            CallerRequest::Round { requests } => {
                requests.values().any(|r| *r == CallerRequest::ListRoots)
            }
            _ => false,
        };
        if roots {
            self.roots.asked(&self.source);
        }
        let source = self.source.clone();
        let level = match &self.modern {
            None => self.level.clone(),
            // Without an opt-in the client wants no log messages.
            Some(modern) => modern.level(),
        };
        Box::pin(async move {
            match request {
                CallerRequest::Log {
                    level: lvl,
                    logger,
                    data,
                } => send_log(&peer, &level, &source, &lvl, logger.as_deref(), data)
                    .await
                    .map(|()| Value::Null),
                // A 2025-11-25 client has no rounds: one request each, in key
                // order, and their answers go back together.
                CallerRequest::Round { requests } => {
                    let mut answers = serde_json::Map::new();
                    for (key, request) in requests {
                        let answer = Self::input(peer.clone(), request).await?;
                        answers.insert(key, answer);
                    }
                    Ok(Value::Object(answers))
                }
                other => Self::input(peer, other).await,
            }
        })
    }
}

/// Whether a client may hear the log messages of a source (its principal
/// may use one of the source's tools).
pub type MaySee = Arc<dyn Fn(&str) -> bool + Send + Sync>;

/// Forwards the sources' log messages that belong to no call to `peer`,
/// within its level and what it `may_see`, until `ended` or the client is gone.
/// For a 2026-07-28 client `peer` is its `subscriptions/listen` request's.
pub fn follow_logs(
    logs: &SourceLogs,
    peer: Peer<RoleServer>,
    level: Arc<ClientLevel>,
    ended: CancellationToken,
    may_see: MaySee,
) {
    let mut rx = logs.subscribe();
    tokio::spawn(async move {
        loop {
            let log: SourceLog = tokio::select! {
                () = ended.cancelled() => return,
                r = rx.recv() => match r {
                    Ok(l) => l,
                    Err(tokio::sync::broadcast::error::RecvError::Lagged(n)) => {
                        tracing::debug!(missed = n, "a client missed source log messages");
                        continue;
                    }
                    Err(_) => return,
                },
            };
            if !may_see(&log.source) {
                continue;
            }
            let sent = send_log(
                &peer,
                &level,
                &log.source,
                &log.level,
                log.logger.as_deref(),
                log.data,
            )
            .await;
            if sent.is_err() || peer.is_transport_closed() {
                return;
            }
        }
    });
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn levels_filter_by_severity() {
        let l = ClientLevel::default();
        assert!(l.lets_through("debug"));
        l.set(LoggingLevel::Warning);
        assert!(!l.lets_through("info"));
        assert!(l.lets_through("warning"));
        assert!(l.lets_through("emergency"));
        assert!(!l.lets_through("nonsense"));
    }

    #[test]
    fn the_logger_names_the_source() {
        assert_eq!(logger("everything", None), "everything");
        assert_eq!(logger("everything", Some("db")), "everything/db");
    }
}
