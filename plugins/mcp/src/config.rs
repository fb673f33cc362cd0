//! A source's settings: Claude Desktop's `mcpServers` entry shape
//! (`command`/`args`/`env`/`cwd` or `url`/`headers`) plus wf's own keys.

use std::collections::BTreeMap;
use std::path::PathBuf;
use std::sync::{Arc, Mutex, PoisonError};
use std::time::Duration;

use serde::Deserialize;
use serde_json::{Map, Value, json};
use wf_plugin_api::PluginError;

/// The default of `max_message_bytes`: large enough for a 10 MiB tool result
/// even after JSON escaping or base64.
pub const DEFAULT_MAX_MESSAGE_BYTES: usize = 32 * 1024 * 1024;

/// The smallest `max_message_bytes` accepted: below it even a handshake may not fit.
const MIN_MAX_MESSAGE_BYTES: usize = 4 * 1024;

/// How to reach the upstream.
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
pub enum Transport {
    Stdio {
        command: String,
        args: Vec<String>,
        env: BTreeMap<String, String>,
        cwd: Option<PathBuf>,
    },
    Http {
        url: String,
        headers: BTreeMap<String, String>,
    },
    /// A transport wf does not speak (e.g. legacy SSE); refused at open with a clear error.
    Unsupported(String),
}

/// Credentials, kept apart from the transport so they are never printed.
#[derive(Debug, Clone, Default, PartialEq, Eq, Hash, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Auth {
    /// Extra environment for stdio servers; wins over `env` on duplicate keys.
    #[serde(default)]
    pub env: BTreeMap<String, String>,
    /// Sent as `Authorization: Bearer <token>` to HTTP servers.
    #[serde(default)]
    pub bearer_token: Option<String>,
    /// Extra headers for HTTP servers; win over `headers` on duplicate names.
    #[serde(default)]
    pub headers: BTreeMap<String, String>,
    /// HTTP servers behind OAuth 2.1 (the MCP authorization spec): see `oauth.rs`.
    #[serde(default)]
    pub oauth: Option<wf_mcp_oauth::OAuthSettings>,
}

#[derive(Debug, Clone)]
pub struct McpConfig {
    pub transport: Transport,
    pub auth: Auth,
    /// Stdio only: start the server with wf's whole environment (minus wf's
    /// own `WF_*` variables) instead of the minimal allowlist.
    pub inherit_env: bool,
    /// The largest single message accepted from the upstream: a stdio line,
    /// an HTTP JSON body or one SSE event.
    pub max_message_bytes: usize,
    pub connect_timeout: Duration,
    pub call_timeout: Duration,
    pub allow_tools: Option<Vec<String>>,
    pub deny_tools: Vec<String>,
    /// Which generation of MCP to speak to the upstream (`protocol`).
    pub protocol: Protocol,
    /// The generation the last session opened to the upstream negotiated
    /// (shown in the source's status), shared by discovery and the runtime.
    pub spoken: Arc<Mutex<Option<String>>>,
    /// Where an OAuth source keeps its encrypted tokens (the source's data dir).
    pub token_dir: Option<PathBuf>,
}

/// The `protocol` setting of an `mcp` source.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum Protocol {
    /// `auto` (the default): `server/discover` first, then `initialize` if
    /// the upstream does not know it, as the official clients do.
    #[default]
    Auto,
    /// `2025-11-25`: the `initialize` handshake only.
    Legacy,
    /// `2026-07-28`: `server/discover` only (stateless, input-required rounds).
    Modern,
}

#[derive(Deserialize)]
struct Raw {
    #[serde(default, alias = "type")]
    transport: Option<String>,
    command: Option<String>,
    #[serde(default)]
    args: Vec<String>,
    #[serde(default)]
    env: BTreeMap<String, String>,
    cwd: Option<PathBuf>,
    url: Option<String>,
    #[serde(default)]
    headers: BTreeMap<String, String>,
    #[serde(default)]
    auth: Auth,
    #[serde(default)]
    inherit_env: bool,
    max_message_bytes: Option<usize>,
    connect_timeout_ms: Option<u64>,
    call_timeout_ms: Option<u64>,
    allow_tools: Option<Vec<String>>,
    #[serde(default)]
    deny_tools: Vec<String>,
    protocol: Option<String>,
    /// Keys other clients put in `mcpServers` entries; ignored with a warning.
    #[serde(flatten)]
    other: Map<String, Value>,
}

/// The JSON Schema of an `mcp` source's settings, declared in the manifest
/// so the host refuses a misspelt key (`comand`) before the source starts.
/// Keep it in step with `Raw` (the test below checks every key parses).
pub fn settings_schema() -> Value {
    let strings = json!({"type": "array", "items": {"type": "string"}});
    let string_map = json!({"type": "object", "additionalProperties": {"type": "string"}});
    let ms = json!({"type": "integer", "minimum": 0});
    json!({
        "type": "object",
        "additionalProperties": false,
        "properties": {
            "transport": {"type": "string", "description": "stdio, http (streamable_http); sse and websockets are refused at connect time"},
            "type": {"type": "string", "description": "the same as transport (other clients' spelling)"},
            "command": {"type": "string", "description": "a stdio server's program"},
            "args": strings.clone(),
            "env": string_map.clone(),
            "cwd": {"type": "string"},
            "url": {"type": "string", "description": "a streamable HTTP server's URL"},
            "headers": string_map.clone(),
            "auth": {
                "type": "object",
                "additionalProperties": false,
                "properties": {"env": string_map.clone(), "bearer_token": {"type": "string"}, "headers": string_map,
                    "oauth": oauth_settings_schema()},
            },
            "inherit_env": {"type": "boolean"},
            "max_message_bytes": {"type": "integer", "minimum": MIN_MAX_MESSAGE_BYTES},
            "connect_timeout_ms": ms.clone(),
            "call_timeout_ms": ms,
            "allow_tools": strings.clone(),
            "deny_tools": strings,
            "protocol": {"type": "string", "enum": ["auto", "2025-11-25", "2026-07-28"]},
        },
    })
}

impl McpConfig {
    pub fn parse(source: &str, settings: &Value) -> Result<Self, PluginError> {
        let raw: Raw = serde_json::from_value(settings.clone())
            .map_err(|e| PluginError::invalid_config(format!("sources.{source}: {e}")))?;
        for key in raw.other.keys() {
            tracing::warn!(source, key, "ignoring unknown setting");
        }
        let kind = raw.transport.as_deref().map(str::to_ascii_lowercase);
        let transport = match (kind.as_deref(), raw.command, raw.url) {
            (Some("stdio") | None, Some(command), None) => Transport::Stdio {
                command,
                args: raw.args,
                env: raw.env,
                cwd: raw.cwd,
            },
            (
                Some("http" | "streamable_http" | "streamable-http" | "streamablehttp") | None,
                None,
                Some(url),
            ) => Transport::Http {
                url,
                headers: raw.headers,
            },
            (Some(other @ ("sse" | "ws" | "websocket")), _, _) => {
                Transport::Unsupported(other.to_string())
            }
            (_, Some(_), Some(_)) => {
                return Err(PluginError::invalid_config(format!(
                    "sources.{source}: set either `command` (stdio) or `url` (streamable HTTP), not both"
                )));
            }
            (Some(t), _, _)
                if !matches!(
                    t,
                    "stdio" | "http" | "streamable_http" | "streamable-http" | "streamablehttp"
                ) =>
            {
                Transport::Unsupported(t.to_string())
            }
            _ => {
                return Err(PluginError::invalid_config(format!(
                    "sources.{source}: needs `command` (a stdio server) or `url` (a streamable HTTP server)"
                )));
            }
        };
        let max_message_bytes = raw.max_message_bytes.unwrap_or(DEFAULT_MAX_MESSAGE_BYTES);
        if max_message_bytes < MIN_MAX_MESSAGE_BYTES {
            return Err(PluginError::invalid_config(format!(
                "sources.{source}.max_message_bytes: {max_message_bytes} is below the minimum of {MIN_MAX_MESSAGE_BYTES}"
            )));
        }
        let protocol = match raw.protocol.as_deref() {
            None | Some("auto") => Protocol::Auto,
            Some("2025-11-25") => Protocol::Legacy,
            Some("2026-07-28") => Protocol::Modern,
            Some(other) => {
                return Err(PluginError::invalid_config(format!(
                    "sources.{source}.protocol: {other:?} is not \"auto\", \"2025-11-25\" or \"2026-07-28\""
                )));
            }
        };
        if raw.inherit_env && !matches!(transport, Transport::Stdio { .. }) {
            tracing::warn!(source, "inherit_env only applies to stdio servers; ignored");
        }
        Ok(Self {
            transport,
            auth: raw.auth,
            inherit_env: raw.inherit_env,
            max_message_bytes,
            connect_timeout: Duration::from_millis(raw.connect_timeout_ms.unwrap_or(30_000)),
            call_timeout: Duration::from_millis(raw.call_timeout_ms.unwrap_or(300_000)),
            allow_tools: raw.allow_tools,
            deny_tools: raw.deny_tools,
            protocol,
            spoken: Arc::default(),
            token_dir: None,
        })
    }

    /// The transport identity that decides whether a persistent runtime can
    /// be reused: transport, credentials, environment mode and message bound;
    /// not timeouts or filters.
    pub fn fingerprint(&self) -> String {
        use std::hash::{Hash, Hasher};
        let mut h = std::collections::hash_map::DefaultHasher::new();
        self.transport.hash(&mut h);
        self.auth.hash(&mut h);
        // Hashed only when set, so configs that do not use them keep their
        // fingerprints (and catalog snapshots) from before these keys existed.
        if self.inherit_env {
            "inherit_env".hash(&mut h);
        }
        if self.max_message_bytes != DEFAULT_MAX_MESSAGE_BYTES {
            self.max_message_bytes.hash(&mut h);
        }
        // `auto` (the default) keeps the fingerprint of configs from before it.
        match self.protocol {
            Protocol::Auto => {}
            Protocol::Legacy => "2025-11-25".hash(&mut h),
            Protocol::Modern => "2026-07-28".hash(&mut h),
        }
        format!("{:016x}", h.finish())
    }

    /// The `protocol` setting as written in the config.
    pub fn protocol_setting(&self) -> &'static str {
        match self.protocol {
            Protocol::Auto => "auto",
            Protocol::Legacy => "2025-11-25",
            Protocol::Modern => "2026-07-28",
        }
    }

    /// The generation the last session negotiated, if one opened yet.
    pub fn spoken(&self) -> Option<String> {
        self.spoken
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .clone()
    }

    pub fn note_spoken(&self, version: String) {
        *self.spoken.lock().unwrap_or_else(PoisonError::into_inner) = Some(version);
    }

    pub fn tool_visible(&self, name: &str) -> bool {
        self.allow_tools
            .as_ref()
            .is_none_or(|a| a.iter().any(|n| n == name))
            && !self.deny_tools.iter().any(|n| n == name)
    }

    /// A description safe for status output: no env values, headers or tokens.
    pub fn describe(&self) -> Value {
        match &self.transport {
            Transport::Stdio {
                command,
                args,
                env,
                cwd,
            } => serde_json::json!({
                // Arguments may carry expanded secrets (`--api-key ${KEY}`): only their count.
                "transport": "stdio", "command": command, "args_count": args.len(),
                "env_keys": env.keys().chain(self.auth.env.keys()).collect::<Vec<_>>(), "cwd": cwd,
                "inherit_env": self.inherit_env, "max_message_bytes": self.max_message_bytes,
            }),
            Transport::Http { url, headers } => serde_json::json!({
                "transport": "streamable_http", "url": redact_url(url),
                "header_names": headers.keys().chain(self.auth.headers.keys()).collect::<Vec<_>>(),
                "bearer_token": self.auth.bearer_token.is_some(),
                "oauth": self.auth.oauth.as_ref().map(|o| o.grant),
                "max_message_bytes": self.max_message_bytes,
            }),
            Transport::Unsupported(t) => serde_json::json!({"transport": t, "supported": false}),
        }
    }
}

fn oauth_settings_schema() -> Value {
    let strings = json!({"type": "array", "items": {"type": "string"}});
    json!({
        "type": "object",
        "additionalProperties": false,
        "description": "OAuth 2.1 per the MCP authorization spec (HTTP sources); `wf auth login NAME` gets the tokens",
        "properties": {
            "grant": {"type": "string", "enum": ["authorization_code", "client_credentials"]},
            "client_id": {"type": "string", "description": "a pre-registered client id (else CIMD or dynamic registration)"},
            "client_secret": {"type": "string"},
            "scopes": strings,
            "client_metadata_url": {"type": "string", "description": "HTTPS URL of a Client ID Metadata Document"},
            "client_name": {"type": "string"},
        },
    })
}

/// A URL without its credentials and query (either may hold a secret).
pub fn redact_url(url: &str) -> String {
    let (scheme, rest) = url.split_once("://").unwrap_or(("", url));
    let rest = rest.split(['?', '#']).next().unwrap_or(rest);
    let rest = match rest.split_once('/') {
        Some((authority, path)) => format!(
            "{}/{path}",
            authority.rsplit('@').next().unwrap_or(authority)
        ),
        None => rest.rsplit('@').next().unwrap_or(rest).to_string(),
    };
    if scheme.is_empty() {
        rest
    } else {
        format!("{scheme}://{rest}")
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// docs/reference/source-settings.md lists every setting, and no other.
    #[test]
    fn the_reference_page_lists_every_setting() {
        let page = include_str!("../../../docs/reference/source-settings.md");
        let problems = wf_plugin_api::testing::settings_reference_problems(
            &settings_schema(),
            page,
            "`kind = \"mcp\"`",
        );
        assert!(problems.is_empty(), "{problems:#?}");
    }

    #[test]
    fn settings_schema_is_valid_and_matches_what_parse_reads() {
        let schema = settings_schema();
        let p = wf_plugin_api::schema::json_schema_problems(&schema, "schema");
        assert!(p.is_empty(), "{p:?}");
        // Every key the schema allows is one `Raw` reads (none lands in `other`).
        let props = schema["properties"]
            .as_object()
            .cloned()
            .unwrap_or_default();
        for key in props.keys() {
            let raw: Raw =
                serde_json::from_value(json!({ key.as_str(): null })).unwrap_or_else(|e| {
                    // A null is not a valid value for every key; its type error still proves the key is read.
                    assert!(!e.to_string().contains("unknown"), "{key}: {e}");
                    serde_json::from_value(json!({})).unwrap_or_else(|e| panic!("{e}"))
                });
            assert!(
                raw.other.is_empty(),
                "{key} is in the schema but not read: {:?}",
                raw.other
            );
        }
        let good = json!({"command": "npx", "args": ["-y", "x"], "env": {"A": "1"}, "auth": {"env": {"B": "2"}}, "max_message_bytes": 65536});
        assert!(wf_plugin_api::schema::instance_problems(&schema, &good, "$").is_empty());
    }

    #[test]
    fn claude_desktop_shapes() {
        let c = McpConfig::parse(
            "fs",
            &json!({"command": "npx", "args": ["-y", "x"], "env": {"A": "1"}}),
        )
        .unwrap();
        assert!(matches!(c.transport, Transport::Stdio { ref command, .. } if command == "npx"));
        let c = McpConfig::parse(
            "r",
            &json!({"url": "http://127.0.0.1:1/mcp", "headers": {"X": "y"}}),
        )
        .unwrap();
        assert!(matches!(c.transport, Transport::Http { .. }));
        let c = McpConfig::parse("s", &json!({"type": "sse", "url": "http://x/sse"})).unwrap();
        assert_eq!(c.transport, Transport::Unsupported("sse".into()));
        assert!(McpConfig::parse("b", &json!({"command": "a", "url": "b"})).is_err());
        assert!(McpConfig::parse("n", &json!({})).is_err());
    }

    #[test]
    fn describe_hides_secrets_and_fingerprint_tracks_identity() {
        let a = McpConfig::parse(
            "gh",
            &json!({"command": "srv", "env": {"TOKEN": "s3cret"}, "auth": {"env": {"KEY": "k3y"}}}),
        )
        .unwrap();
        let text = a.describe().to_string();
        assert!(!text.contains("s3cret") && !text.contains("k3y"), "{text}");
        assert!(text.contains("TOKEN") && text.contains("KEY"));
        let b = McpConfig::parse(
            "gh",
            &json!({"command": "srv", "env": {"TOKEN": "other"}, "auth": {"env": {"KEY": "k3y"}}}),
        )
        .unwrap();
        assert_ne!(a.fingerprint(), b.fingerprint());
        let c = McpConfig::parse("gh", &json!({"command": "srv", "env": {"TOKEN": "s3cret"}, "auth": {"env": {"KEY": "k3y"}}, "call_timeout_ms": 5})).unwrap();
        assert_eq!(a.fingerprint(), c.fingerprint());
    }

    #[test]
    fn urls_lose_credentials_and_queries() {
        assert_eq!(
            redact_url("https://user:pw@host:8/mcp?key=s3cret#x"),
            "https://host:8/mcp"
        );
        assert_eq!(
            redact_url("http://127.0.0.1:9/mcp"),
            "http://127.0.0.1:9/mcp"
        );
        assert_eq!(redact_url("http://host?key=1"), "http://host");
        let c = McpConfig::parse(
            "x",
            &json!({"command": "srv", "args": ["--api-key", "s3cret"]}),
        )
        .unwrap();
        assert!(!c.describe().to_string().contains("s3cret"));
    }

    #[test]
    fn inherit_env_and_max_message_bytes() {
        let base = McpConfig::parse("x", &json!({"command": "srv"})).unwrap();
        assert!(!base.inherit_env);
        assert_eq!(base.max_message_bytes, DEFAULT_MAX_MESSAGE_BYTES);
        let c = McpConfig::parse(
            "x",
            &json!({"command": "srv", "inherit_env": true, "max_message_bytes": 65536}),
        )
        .unwrap();
        assert!(c.inherit_env);
        assert_eq!(c.max_message_bytes, 65536);
        assert_ne!(
            base.fingerprint(),
            c.fingerprint(),
            "both change the session"
        );
        let e =
            McpConfig::parse("x", &json!({"command": "srv", "max_message_bytes": 10})).unwrap_err();
        assert!(e.message.contains("sources.x.max_message_bytes"), "{e}");
        let e =
            McpConfig::parse("x", &json!({"command": "srv", "inherit_env": "yes"})).unwrap_err();
        assert!(e.message.contains("sources.x"), "{e}");
        let text = c.describe().to_string();
        assert!(
            text.contains("\"inherit_env\":true") && text.contains("65536"),
            "{text}"
        );
    }

    #[test]
    fn tool_filters() {
        let c = McpConfig::parse(
            "x",
            &json!({"command": "a", "allow_tools": ["echo", "add"], "deny_tools": ["add"]}),
        )
        .unwrap();
        assert!(c.tool_visible("echo"));
        assert!(!c.tool_visible("add"));
        assert!(!c.tool_visible("other"));
    }
}
