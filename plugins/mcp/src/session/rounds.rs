//! An upstream that speaks MCP 2026-07-28 (`protocol = "2026-07-28"`, or
//! `auto` when it answers `server/discover`): the handshake is `server/discover`, and a call that needs input comes back as
//! an `InputRequiredResult`. Each of its requests goes to the call's caller
//! (for a 2025-11-25 client of wf, a server-initiated request; for a
//! 2026-07-28 one, a round of wf's own), and the call is retried with the
//! answers and the upstream's `requestState`, for at most [`MAX_ROUNDS`].

use std::collections::BTreeMap;
use std::future::Future;

use rmcp::model::{InputRequiredResult, InputResponses, ProtocolVersion};
use rmcp::service::{ClientInitializeError, ClientLifecycleMode, ClientServiceExt, RunningService};
use rmcp::transport::IntoTransport;
use rmcp::{RoleClient, ServiceExt};
use serde_json::Value;
use wf_plugin_api::{CallContext, CallerRequest, PluginError};

use crate::config::Protocol;
use crate::session::client::McpClient;

/// Most input-required rounds one call may take (as the official clients).
pub const MAX_ROUNDS: usize = 10;

/// The MCP handshake: `initialize` (2025-11-25), `server/discover` for a
/// 2026-07-28 upstream, or (`auto`) discover first and `initialize` when the
/// upstream answers that it does not know `server/discover`.
pub async fn handshake<T, E, A>(
    client: McpClient,
    transport: T,
    protocol: Protocol,
) -> Result<RunningService<RoleClient, McpClient>, ClientInitializeError>
where
    T: IntoTransport<RoleClient, E, A>,
    E: std::error::Error + Send + Sync + 'static,
{
    let preferred_versions = vec![ProtocolVersion::V_2026_07_28];
    match protocol {
        Protocol::Legacy => client.serve(transport).await,
        Protocol::Modern => {
            client
                .serve_with_lifecycle(
                    transport,
                    ClientLifecycleMode::Discover { preferred_versions },
                )
                .await
        }
        Protocol::Auto => {
            client
                .serve_with_lifecycle(
                    transport,
                    ClientLifecycleMode::Auto {
                        preferred_versions,
                        legacy_version: None,
                    },
                )
                .await
        }
    }
}

/// One answer of the upstream to a (re)tried request.
pub enum Round<T> {
    Done(T),
    Input(InputRequiredResult),
}

/// Sends a request with `send(inputResponses, requestState)` until the
/// upstream completes it, answering each round through the caller.
pub async fn drive<T, F, Fut>(ctx: &CallContext, mut send: F) -> Result<T, PluginError>
where
    F: FnMut(Option<InputResponses>, Option<String>) -> Fut,
    Fut: Future<Output = Result<Round<T>, PluginError>>,
{
    let mut retry = (None, None);
    for _ in 0..=MAX_ROUNDS {
        match send(retry.0, retry.1).await? {
            Round::Done(t) => return Ok(t),
            // Boxed: only a call the upstream asks back on waits for answers.
            Round::Input(input) => {
                retry = (
                    Some(Box::pin(answers(ctx, &input)).await?),
                    input.request_state,
                )
            }
        }
    }
    Err(PluginError::failed(format!(
        "the upstream asked for input more than {MAX_ROUNDS} times in one call"
    )))
}

/// The caller's answers to one round's requests, asked as one round under
/// the upstream's keys (so a 2026-07-28 client gets them all at once, under
/// the keys the upstream chose, and a 2025-11-25 client one request each).
async fn answers(
    ctx: &CallContext,
    input: &InputRequiredResult,
) -> Result<InputResponses, PluginError> {
    let mut asks = BTreeMap::new();
    for (key, request) in input.input_requests.iter().flatten() {
        let msg = serde_json::to_value(request)
            .map_err(|e| PluginError::internal(format!("input request {key}: {e}")))?;
        let asked = caller_request(&msg).ok_or_else(|| {
            PluginError::upstream(format!("input request {key} is not one wf knows: {msg}"))
        })?;
        asks.insert(key.clone(), asked);
    }
    if asks.is_empty() {
        return Ok(InputResponses::new());
    }
    ctx.ask_round(asks).await
}

/// The caller request for one entry of `inputRequests` (`{method, params}`).
fn caller_request(msg: &Value) -> Option<CallerRequest> {
    let params = msg.get("params").cloned().unwrap_or(Value::Null);
    match msg.get("method")?.as_str()? {
        "elicitation/create" => Some(CallerRequest::Elicit { params }),
        "sampling/createMessage" => Some(CallerRequest::Sample { params }),
        "roots/list" => Some(CallerRequest::ListRoots),
        _ => None,
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn input_requests_map_to_caller_requests() {
        let e =
            caller_request(&json!({"method": "elicitation/create", "params": {"message": "m"}}));
        assert_eq!(
            e,
            Some(CallerRequest::Elicit {
                params: json!({"message": "m"})
            })
        );
        assert_eq!(
            caller_request(&json!({"method": "roots/list"})),
            Some(CallerRequest::ListRoots)
        );
        assert_eq!(caller_request(&json!({"method": "ping"})), None);
    }

    #[test]
    fn the_protocol_setting_picks_the_handshake() {
        let cfg = |p: Value| {
            crate::config::McpConfig::parse("s", &json!({"command": "x", "protocol": p}))
        };
        assert_eq!(cfg(json!("2026-07-28")).unwrap().protocol, Protocol::Modern);
        assert_eq!(cfg(json!("2025-11-25")).unwrap().protocol, Protocol::Legacy);
        assert_eq!(cfg(json!("auto")).unwrap().protocol, Protocol::Auto);
        let default = crate::config::McpConfig::parse("s", &json!({"command": "x"})).unwrap();
        assert_eq!(default.protocol, Protocol::Auto);
        let e = cfg(json!("2027-01-01")).err().unwrap();
        assert!(e.message.contains("sources.s.protocol"), "{}", e.message);
    }
}
