//! The one session opener both paths use — one-shot discovery and the
//! persistent runtime: a minimal environment for stdio servers with the
//! source's own env and auth env over it (auth wins), cwd kept, auth headers
//! injected, every message bounded by `max_message_bytes`, the handshake done
//! before the session is handed out.

use std::collections::HashMap;
use std::str::FromStr;

#[cfg(windows)]
use process_wrap::tokio::JobObject;
#[cfg(unix)]
use process_wrap::tokio::ProcessGroup;
use process_wrap::tokio::{CommandWrap, KillOnDrop};
use rmcp::RoleClient;
use rmcp::service::RunningService;
use rmcp::transport::StreamableHttpClientTransport;
use rmcp::transport::streamable_http_client::StreamableHttpClientTransportConfig;
use wf_plugin_api::PluginError;

use crate::transport::http::WatchedHttp;
use crate::transport::stdio::ChildTransport;

use crate::config::{Auth, McpConfig, Protocol, Transport};
use crate::oauth::NEEDS_LOGIN;
use crate::session::client::McpClient;

pub type Session = RunningService<RoleClient, McpClient>;

/// The command for a stdio server: a cleared environment filled with the
/// allowlist of wf's variables (or all but `WF_*` with `inherit_env`), then
/// the configured env, then auth env over it.
pub fn stdio_command(
    transport: &Transport,
    auth: &Auth,
    inherit_env: bool,
) -> Result<tokio::process::Command, PluginError> {
    let Transport::Stdio {
        command,
        args,
        env,
        cwd,
    } = transport
    else {
        return Err(PluginError::internal("not a stdio transport"));
    };
    let mut cmd = tokio::process::Command::new(command);
    cmd.args(args);
    cmd.env_clear();
    cmd.envs(crate::transport::env::child_env(
        std::env::vars_os(),
        inherit_env,
        env,
        &auth.env,
    ));
    if let Some(dir) = cwd {
        cmd.current_dir(dir);
    }
    // wf turns transparent huge pages off for itself, and children inherit
    // that; an upstream gets the system's setting back.
    #[cfg(target_os = "linux")]
    // SAFETY: between fork and exec only prctl runs, which is
    // async-signal-safe and allocates nothing.
    unsafe {
        cmd.pre_exec(|| {
            libc::prctl(libc::PR_SET_THP_DISABLE, 0, 0, 0, 0);
            Ok(())
        });
    }
    Ok(cmd)
}

/// The transport config for a streamable HTTP server: headers, auth headers
/// over them, the bearer token, and `max_message_bytes` as the bound of one
/// JSON response body and of one SSE event.
pub fn http_config(
    transport: &Transport,
    auth: &Auth,
    max_message_bytes: usize,
) -> Result<StreamableHttpClientTransportConfig, PluginError> {
    let Transport::Http { url, headers } = transport else {
        return Err(PluginError::internal("not an HTTP transport"));
    };
    let mut map = HashMap::new();
    for (k, v) in headers.iter().chain(auth.headers.iter()) {
        let name = http::HeaderName::from_str(k)
            .map_err(|_| PluginError::invalid_config(format!("invalid header name {k:?}")))?;
        let value = http::HeaderValue::from_str(v)
            .map_err(|_| PluginError::invalid_config(format!("invalid value for header {k:?}")))?;
        map.insert(name, value);
    }
    let mut config = StreamableHttpClientTransportConfig::with_uri(url.as_str())
        .custom_headers(map)
        .max_sse_event_size(max_message_bytes);
    config.max_json_response_size = max_message_bytes;
    if let Some(token) = &auth.bearer_token {
        config = config.auth_header(token.clone());
    }
    Ok(config)
}

/// Opens a session and completes the MCP handshake within the connect
/// timeout, noting the generation it speaks. With `protocol = "auto"`, an
/// upstream whose `server/discover` fails in any way (a legacy HTTP server
/// may answer it with a 400 and no JSON-RPC id, which rmcp cannot take for
/// "legacy") gets a fresh connection and `initialize`.
pub async fn open(
    source: &str,
    config: &McpConfig,
    client: McpClient,
) -> Result<Session, PluginError> {
    let opening = async {
        match open_as(source, config, client.clone(), config.protocol).await {
            Err(e)
                if config.protocol == Protocol::Auto
                    && !e.message.contains(NEEDS_LOGIN)
                    && e.code != wf_plugin_api::ErrorCode::InvalidConfig =>
            {
                tracing::info!(
                    source,
                    "server/discover did not work ({}); trying initialize",
                    e.message
                );
                open_as(source, config, client, Protocol::Legacy).await
            }
            r => r,
        }
    };
    let session = match tokio::time::timeout(config.connect_timeout, opening).await {
        Ok(r) => r?,
        Err(_) => {
            return Err(PluginError::new(
                wf_plugin_api::ErrorCode::Timeout,
                format!(
                    "connecting took longer than {} ms",
                    config.connect_timeout.as_millis()
                ),
            ));
        }
    };
    if let Some(info) = session.peer().peer_info() {
        config.note_spoken(info.protocol_version.to_string());
    }
    Ok(session)
}

/// Opens a session speaking `protocol`.
async fn open_as(
    source: &str,
    config: &McpConfig,
    client: McpClient,
    protocol: Protocol,
) -> Result<Session, PluginError> {
    match &config.transport {
        Transport::Stdio { command, .. } => {
            let cmd = stdio_command(&config.transport, &config.auth, config.inherit_env)?;
            // Its own process group (a job object on Windows), killed as a
            // whole: `npx` and friends start grandchildren that must not
            // outlive the session.
            let mut wrapped = CommandWrap::from(cmd);
            #[cfg(unix)]
            wrapped.wrap(ProcessGroup::leader());
            #[cfg(windows)]
            wrapped.wrap(JobObject);
            wrapped.wrap(KillOnDrop);
            let proc = ChildTransport::spawn(
                wrapped,
                source,
                crate::transport::stdio::instance_key(config),
                config.max_message_bytes,
                &client,
            )
            .map_err(|e| PluginError::upstream(format!("cannot start {command:?}: {e}")))?;
            crate::session::rounds::handshake(client, proc, protocol)
                .await
                .map_err(|e| {
                    PluginError::upstream(format!("MCP handshake with {command:?} failed: {e}"))
                })
        }
        Transport::Http { url, .. } => {
            let http = WatchedHttp::new(
                source,
                client.cut.clone(),
                client.executions.clone(),
                client.logs.clone(),
            )
            .map_err(|e| PluginError::internal(format!("cannot build the HTTP client: {e}")))?;
            let http_config =
                http_config(&config.transport, &config.auth, config.max_message_bytes)?;
            // The transport's error may quote the URL: never its secret parts.
            let failed = |e: rmcp::service::ClientInitializeError| {
                let shown = crate::config::redact_url(url);
                let why = e.to_string().replace(url.as_str(), &shown);
                let why = crate::oauth::redact(config, &why);
                if config.auth.oauth.is_some() && e.auth_challenge().is_some() {
                    return crate::oauth::refused(source, config);
                }
                PluginError::upstream(format!("MCP handshake with {shown} failed: {why}"))
            };
            match &config.auth.oauth {
                Some(oauth) => {
                    let http = crate::oauth::authorized_client(
                        source,
                        url,
                        oauth,
                        config.token_dir.as_deref(),
                        http,
                    )
                    .await?;
                    let transport = StreamableHttpClientTransport::with_client(http, http_config);
                    crate::session::rounds::handshake(client, transport, protocol)
                        .await
                        .map_err(failed)
                }
                None => {
                    let transport = StreamableHttpClientTransport::with_client(http, http_config);
                    crate::session::rounds::handshake(client, transport, protocol)
                        .await
                        .map_err(failed)
                }
            }
        }
        Transport::Unsupported(t) => Err(PluginError::invalid_config(format!(
            "unsupported transport {t:?}: wf speaks stdio and streamable HTTP"
        ))),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn cfg(v: serde_json::Value) -> McpConfig {
        McpConfig::parse("t", &v).unwrap()
    }

    #[test]
    fn stdio_env_merge_auth_wins_and_cwd_kept() {
        let c = cfg(
            json!({"command": "srv", "args": ["-v"], "env": {"A": "conf", "B": "conf"}, "cwd": "/tmp",
                           "auth": {"env": {"B": "auth", "C": "auth"}}}),
        );
        let cmd = stdio_command(&c.transport, &c.auth, false).unwrap();
        let std = cmd.as_std();
        let envs: HashMap<_, _> = std
            .get_envs()
            .map(|(k, v)| {
                (
                    k.to_str().unwrap().to_string(),
                    v.unwrap().to_str().unwrap().to_string(),
                )
            })
            .collect();
        assert_eq!(envs["A"], "conf");
        assert_eq!(envs["B"], "auth");
        assert_eq!(envs["C"], "auth");
        assert_eq!(std.get_current_dir().unwrap(), std::path::Path::new("/tmp"));
        assert_eq!(std.get_program(), "srv");
        assert_eq!(std.get_args().collect::<Vec<_>>(), vec!["-v"]);
    }

    #[test]
    fn http_headers_and_bearer() {
        let c = cfg(
            json!({"url": "http://127.0.0.1:9/mcp", "headers": {"X-Team": "conf", "X-A": "1"},
                           "auth": {"headers": {"X-Team": "auth"}, "bearer_token": "tok"}}),
        );
        let h = http_config(&c.transport, &c.auth, 1234).unwrap();
        assert_eq!(h.max_json_response_size, 1234);
        assert_eq!(h.max_sse_event_size, 1234);
        let get = |k: &str| {
            h.custom_headers
                .iter()
                .find(|(n, _)| n.as_str() == k.to_ascii_lowercase())
                .map(|(_, v)| v.to_str().unwrap().to_string())
        };
        assert_eq!(get("X-Team").as_deref(), Some("auth"));
        assert_eq!(get("X-A").as_deref(), Some("1"));
        assert_eq!(h.auth_header.as_deref(), Some("tok"));
        assert_eq!(&*h.uri, "http://127.0.0.1:9/mcp");
    }

    #[tokio::test]
    async fn unsupported_transport_is_a_clear_error() {
        let c = cfg(json!({"type": "sse", "url": "http://127.0.0.1:9/sse"}));
        let e = open("t", &c, McpClient::new(None)).await.err().unwrap();
        assert!(e.message.contains("unsupported transport \"sse\""), "{e}");
    }

    #[tokio::test]
    async fn a_missing_command_is_an_upstream_error() {
        let c = cfg(json!({"command": "/nonexistent/wf-test-server"}));
        let e = open("t", &c, McpClient::new(None)).await.err().unwrap();
        assert_eq!(e.code, wf_plugin_api::ErrorCode::Upstream);
        assert!(e.message.contains("cannot start"), "{e}");
    }
}
