//! State lost is never silent on the proxy: wf remembers the session epoch
//! each downstream client last saw per source, and when a call lands on a
//! newer one (the upstream restarted in between) the result says so in
//! `_meta` and the client gets a logging notification (a 2026-07-28 client
//! only when its request asked for log messages, as the protocol has it).

use std::collections::HashMap;
use std::sync::Mutex;
use std::sync::PoisonError;
use std::time::{Duration, Instant};

use rmcp::RoleServer;
// MCP logging (deprecated in 2026-07-28 by SEP-2577) is how a 2025-11-25
// client hears from a server outside a result.
#[allow(deprecated)]
use rmcp::model::{LoggingLevel, LoggingMessageNotificationParam, ProtocolVersion};
use rmcp::service::RequestContext;
use serde_json::json;
use wf_plugin_api::{CallResult, SESSION_EPOCH_META};

use super::caller::ModernLogs;
use crate::server::identity::principals::principal_of;

/// Entries kept before old ones are dropped, and how old "old" is: a client
/// silent for that long is told nothing about a restart in between, which
/// only costs a notice (the error of a workflow's state-lost node stays).
const MAX_ENTRIES: usize = 4096;
const FORGET_AFTER: Duration = Duration::from_secs(3600);

/// The last epoch seen, by (client, source).
#[derive(Default)]
pub struct SeenEpochs {
    last: Mutex<HashMap<(String, String), (u64, Instant)>>,
}

impl SeenEpochs {
    /// Records that `client` now sees `source` at `epoch`; the epoch it saw
    /// before, when that differs.
    pub fn observe(&self, client: &str, source: &str, epoch: u64) -> Option<u64> {
        let mut last = self.last.lock().unwrap_or_else(PoisonError::into_inner);
        let now = Instant::now();
        if last.len() >= MAX_ENTRIES {
            last.retain(|_, (_, at)| now.duration_since(*at) < FORGET_AFTER);
        }
        let key = (client.to_string(), source.to_string());
        match last.insert(key, (epoch, now)) {
            Some((before, _)) if before != epoch => Some(before),
            _ => None,
        }
    }

    /// Takes the epoch the source reported out of `result` and, when it
    /// changed since this client's previous call on `source`, puts it back in
    /// `_meta` and sends the client a warning.
    pub async fn check(
        &self,
        context: &RequestContext<RoleServer>,
        source: &str,
        mut result: CallResult,
    ) -> CallResult {
        let Some(epoch) = take_epoch(&mut result) else {
            return result;
        };
        let Some(before) = self.observe(&client_key(context), source, epoch) else {
            return result;
        };
        crate::telemetry::metrics::epoch_change(source);
        let text = format!("source {source} restarted; its session state was lost");
        tracing::warn!(
            principal = principal_of(context).name(),
            source,
            epoch,
            previous_epoch = before,
            "{text}"
        );
        let meta = result.meta.get_or_insert_with(|| json!({}));
        if let Some(m) = meta.as_object_mut() {
            m.insert(SESSION_EPOCH_META.into(), json!(epoch));
        }
        #[allow(deprecated)]
        let notice = LoggingMessageNotificationParam::new(
            LoggingLevel::Warning,
            json!({"message": text, "source": source, "epoch": epoch, "previous_epoch": before}),
        )
        .with_logger("wf");
        // A 2026-07-28 request opts in to log messages (and over HTTP, a
        // request that did not is answered without a stream to carry one);
        // the epoch in `_meta` tells it either way.
        let modern = context
            .protocol_version()
            .is_some_and(|v| v >= ProtocolVersion::V_2026_07_28);
        if !modern || ModernLogs::from_meta(&context.meta).lets_through("warning") {
            #[allow(deprecated)]
            let _ = context.peer.notify_logging_message(notice).await;
        }
        result
    }
}

/// Removes the source's epoch report from `_meta` (and `_meta` when that
/// leaves it empty).
fn take_epoch(result: &mut CallResult) -> Option<u64> {
    let meta = result.meta.as_mut()?.as_object_mut()?;
    let epoch = meta.remove(SESSION_EPOCH_META)?.as_u64();
    if meta.is_empty() {
        result.meta = None;
    }
    epoch
}

/// Who "the client" is: its MCP session over HTTP (2025-11-25), else its
/// principal (a 2026-07-28 client has no protocol session); over stdio the
/// one connection. Always within the principal, so a session id presented
/// by another principal is another client.
fn client_key(context: &RequestContext<RoleServer>) -> String {
    let parts = context.extensions.get::<http::request::Parts>();
    let principal = principal_of(context);
    match parts {
        None => "stdio".into(),
        Some(p) => match p
            .headers
            .get("mcp-session-id")
            .and_then(|v| v.to_str().ok())
        {
            Some(session) => format!("{}/{session}", principal.name()),
            None => principal.name().to_string(),
        },
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_changed_epoch_is_reported_once_per_client() {
        let s = SeenEpochs::default();
        assert_eq!(
            s.observe("a", "fx", 1),
            None,
            "first call: nothing to compare"
        );
        assert_eq!(s.observe("a", "fx", 1), None);
        assert_eq!(s.observe("b", "fx", 1), None);
        assert_eq!(s.observe("a", "fx", 2), Some(1));
        assert_eq!(s.observe("a", "fx", 2), None, "told once");
        assert_eq!(s.observe("b", "fx", 2), Some(1), "each client is told");
        assert_eq!(s.observe("a", "other", 2), None, "per source");
    }

    #[test]
    fn the_epoch_report_is_taken_out() {
        let mut r = CallResult::text("x");
        r.meta = Some(json!({SESSION_EPOCH_META: 3}));
        assert_eq!(take_epoch(&mut r), Some(3));
        assert_eq!(r.meta, None);
        r.meta = Some(json!({SESSION_EPOCH_META: 4, "k": 1}));
        assert_eq!(take_epoch(&mut r), Some(4));
        assert_eq!(r.meta, Some(json!({"k": 1})));
        assert_eq!(take_epoch(&mut CallResult::text("y")), None);
    }
}
