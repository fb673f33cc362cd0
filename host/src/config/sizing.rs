//! Limits that contradict each other: warnings for `wf check` and for
//! `wf serve --http` at start. None of them stops wf; each names the keys
//! to change and why. Also which sources look stateful, for the default
//! session scope (`sources::sessions`).

use super::{ServerConfig, SourceConfig};

/// One warning: the config key it is about, and what is wrong.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Warning {
    pub key: String,
    pub message: String,
}

/// Words in an `mcp` source's command, arguments or URL that mark an
/// upstream keeping state per client (a browser: tabs, cookies, logins).
const STATEFUL_MARKERS: &[&str] = &["playwright", "puppeteer", "browser", "chrome", "selenium"];

/// Whether an `mcp` source's settings name a server that keeps per-client
/// state (a browser automation server). A hint, not a rule: wf cannot know.
pub fn looks_stateful(sc: &SourceConfig) -> bool {
    if sc.kind != "mcp" {
        return false;
    }
    let text = |key: &str| match sc.settings.get(key) {
        Some(serde_json::Value::String(s)) => s.to_ascii_lowercase(),
        Some(serde_json::Value::Array(a)) => a
            .iter()
            .filter_map(|v| v.as_str())
            .collect::<Vec<_>>()
            .join(" ")
            .to_ascii_lowercase(),
        _ => String::new(),
    };
    let said = [text("command"), text("args"), text("url")].join(" ");
    STATEFUL_MARKERS.iter().any(|m| said.contains(m))
}

/// Every warning for this server config (keys as `server.X`).
pub fn warnings(server: &ServerConfig) -> Vec<Warning> {
    let mut out = Vec::new();
    let mut warn = |key: &str, message: String| {
        out.push(Warning {
            key: key.to_owned(),
            message,
        })
    };
    if server.max_streams_per_principal < server.max_sessions {
        warn(
            "server.max_streams_per_principal",
            format!(
                "{} is below server.max_sessions ({}): each 2025-11-25 session keeps one GET \
                 stream, so one principal's sessions past {} get no stream for server messages \
                 (log lines, list changes); raise it to at least max_sessions",
                server.max_streams_per_principal,
                server.max_sessions,
                server.max_streams_per_principal
            ),
        );
    }
    if server.max_connections < 2 * server.max_sessions {
        warn(
            "server.max_connections",
            format!(
                "{} is below twice server.max_sessions ({}): a 2025-11-25 session holds one \
                 connection for its GET stream and needs another for its calls, so at the \
                 session bound clients would be refused connections (503)",
                server.max_connections, server.max_sessions
            ),
        );
    }
    if server.max_requests_per_principal > server.max_connections {
        warn(
            "server.max_requests_per_principal",
            format!(
                "{} is above server.max_connections ({}): each request in progress holds a \
                 connection, so this bound is never reached",
                server.max_requests_per_principal, server.max_connections
            ),
        );
    }
    if server.queue_wait_ms >= server.idle_timeout_ms {
        warn(
            "server.queue_wait_ms",
            format!(
                "{} ms is not below server.idle_timeout_ms ({} ms): a request waiting in its \
                 principal's queue sends nothing, so its connection is closed as idle before \
                 its wait is over",
                server.queue_wait_ms, server.idle_timeout_ms
            ),
        );
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::{Map, json};

    fn mcp(settings: serde_json::Value) -> SourceConfig {
        let Ok(settings) = serde_json::from_value::<Map<_, _>>(settings) else {
            unreachable!("test settings are an object")
        };
        SourceConfig::new("mcp", settings)
    }

    fn keys(server: &ServerConfig) -> Vec<String> {
        warnings(server).into_iter().map(|w| w.key).collect()
    }

    #[test]
    fn the_defaults_do_not_contradict_each_other() {
        assert_eq!(keys(&ServerConfig::default()), Vec::<String>::new());
    }

    #[test]
    fn contradicting_limits_are_named() {
        let server = ServerConfig {
            max_streams_per_principal: 8,
            max_connections: 100,
            max_requests_per_principal: 200,
            queue_wait_ms: 90_000,
            ..ServerConfig::default()
        };
        assert_eq!(
            keys(&server),
            [
                "server.max_streams_per_principal",
                "server.max_connections",
                "server.max_requests_per_principal",
                "server.queue_wait_ms"
            ]
        );
    }

    #[test]
    fn only_mcp_sources_look_stateful() {
        let mut s = mcp(json!({"url": "http://127.0.0.1:9/browser/mcp"}));
        assert!(looks_stateful(&s));
        s.kind = "std".into();
        assert!(!looks_stateful(&s));
        assert!(!looks_stateful(&mcp(
            json!({"command": "uvx", "args": ["mcp-server-fetch"]})
        )));
    }
}
