//! The config file: TOML or JSON by extension, with Claude Desktop's
//! `mcpServers` object accepted as it is. Errors name the file, the key and
//! what is wrong.

mod audit;
mod catalog;
mod edit;
mod endpoints;
mod env;
mod oauth;
mod plugin_isolation;
mod principals;
pub mod sizing;
mod store;
mod strict;
mod telemetry;

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};

use serde::{Deserialize, Serialize};
use serde_json::{Map, Value};

use crate::text::one_line;

pub use audit::{AuditConfig, AuditExport, AuditValues};
pub use catalog::{CatalogConfig, CatalogMode, EmbeddingsConfig};
pub use edit::{Edit, stage};
pub use endpoints::{EndpointConfig, ToolTransform, check_endpoint_name, check_tool_name};
pub use env::{EnvError, expand_env};
pub use oauth::{ConsoleClientConfig, GroupConfig, IntrospectionConfig, OAuthConfig};
pub use plugin_isolation::{Isolation, PluginSettings, Sandbox, problems as plugin_table_problems};
pub use principals::{Principal, TokenConfig};
pub use store::StoreConfig;
pub use strict::{FOREIGN_MCP_SERVER_KEYS, did_you_mean, unknown_key};
pub use telemetry::TelemetryConfig;

/// Default longest projected name: 64 (Claude's limit) minus room for a
/// client's own prefix such as `mcp__<server>__`.
pub const DEFAULT_MAX_NAME_LEN: usize = 48;

#[derive(Debug, thiserror::Error)]
pub enum ConfigError {
    #[error("{file}: cannot read: {source}")]
    Read {
        file: String,
        source: std::io::Error,
    },
    #[error("{file}: {key}: {reason}")]
    Invalid {
        file: String,
        key: String,
        reason: String,
    },
    #[error("{file}: unsupported config format (use .toml or .json)")]
    Format { file: String },
}

#[derive(Debug, Clone, Default, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Config {
    #[serde(default)]
    pub server: ServerConfig,
    #[serde(default)]
    pub plugins: PluginsConfig,
    #[serde(default)]
    pub admin: AdminConfig,
    #[serde(default)]
    pub telemetry: TelemetryConfig,
    /// Where the state lives: SQLite (default) or PostgreSQL.
    #[serde(default)]
    pub store: StoreConfig,
    /// The audit trail (`[audit]`): on by default, bounded.
    #[serde(default)]
    pub audit: AuditConfig,
    /// Policy files (`[policy] files`): Cedar policies over every call.
    #[serde(default)]
    pub policy: PolicyConfig,
    /// `[[quotas]]`: rates, daily counts and concurrency per principal or group.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub quotas: Vec<QuotaConfig>,
    /// `[endpoints.NAME]`: virtual servers at `/mcp/NAME`.
    #[serde(default, skip_serializing_if = "BTreeMap::is_empty")]
    pub endpoints: BTreeMap<String, EndpointConfig>,
    /// Sources by name. Each has a `kind` served by some plugin.
    #[serde(default)]
    pub sources: BTreeMap<String, SourceConfig>,
    /// Claude Desktop's format: each entry is an `mcp` source.
    #[serde(
        default,
        rename = "mcpServers",
        skip_serializing_if = "BTreeMap::is_empty"
    )]
    pub mcp_servers: BTreeMap<String, Map<String, Value>>,
    /// Claude Desktop's own top-level keys, accepted (and unused) so that
    /// its `claude_desktop_config.json` can be served as it is.
    #[serde(default, rename = "globalShortcut", skip_serializing)]
    pub global_shortcut: Option<Value>,
    #[serde(default, skip_serializing)]
    pub preferences: Option<Value>,
}

/// `[policy]`: the Cedar policy files every call is decided by (none: no
/// policy stage at all). Relative paths are from the config file's folder.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct PolicyConfig {
    #[serde(default)]
    pub files: Vec<PathBuf>,
}

/// One `[[quotas]]` rule: for `principal` or `group` (else everyone), on the
/// capabilities `tools` matches (a glob over the names clients see; `*`).
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct QuotaConfig {
    /// The rule's name in errors and metrics (else `quotas[i] (who, glob)`).
    #[serde(default)]
    pub name: Option<String>,
    #[serde(default)]
    pub principal: Option<String>,
    #[serde(default)]
    pub group: Option<String>,
    #[serde(default)]
    pub tools: Option<String>,
    /// `N/s`, `N/min`, `N/hour` or `N/day`.
    #[serde(default)]
    pub rate: Option<String>,
    /// Calls at once above the rate (default: N).
    #[serde(default)]
    pub burst: Option<u64>,
    /// Calls per UTC day.
    #[serde(default)]
    pub per_day: Option<u64>,
    /// Calls in progress at once.
    #[serde(default)]
    pub concurrency: Option<usize>,
    /// `"process"` (default): each wf has its own budget. `"replicas"`: with
    /// PostgreSQL, one budget for every replica (rate and daily count).
    #[serde(default)]
    pub scope: QuotaScope,
    /// With `scope = "replicas"`: calls a replica takes from the shared
    /// budget at a time (default: a tenth of the burst or daily count, 1 to 100).
    #[serde(default)]
    pub batch: Option<u64>,
}

/// Where a quota's budget is held (`[[quotas]] scope`).
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum QuotaScope {
    #[default]
    Process,
    Replicas,
}

/// The most worker threads `wf serve` takes (`--workers`, `[server] workers`).
pub const MAX_WORKERS: u16 = 1024;

#[derive(Debug, Clone, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct ServerConfig {
    /// Serve streamable HTTP on this address instead of stdio.
    #[serde(default)]
    pub http: Option<String>,
    /// Bearer token HTTP clients must send (required for a non-loopback bind).
    /// `${VAR}` is expanded; `WF_HTTP_TOKEN` in the environment also works.
    #[serde(default)]
    pub http_token: Option<String>,
    /// HTTP: named principals, each with its own bearer token and tool lists.
    #[serde(default)]
    pub tokens: Vec<TokenConfig>,
    /// HTTP: OAuth 2.1 access tokens from an identity provider (`[server.oauth]`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub oauth: Option<OAuthConfig>,
    /// Extra `Host` header values accepted over HTTP (loopback names always are).
    #[serde(default)]
    pub allowed_hosts: Vec<String>,
    /// Extra browser origins accepted over HTTP (loopback origins always are).
    #[serde(default)]
    pub allowed_origins: Vec<String>,
    /// Longest name shown to MCP clients.
    #[serde(default = "default_max_name_len")]
    pub max_name_len: usize,
    /// Items per page of tools/prompts/resources lists.
    #[serde(default = "default_page_size")]
    pub page_size: usize,
    /// Where wf keeps its database and per-source data.
    #[serde(default)]
    pub state_dir: Option<PathBuf>,
    /// How long one source's discovery may take.
    #[serde(default = "default_discovery_timeout_ms")]
    pub discovery_timeout_ms: u64,
    /// How long list requests right after start wait for first discovery.
    #[serde(default = "default_startup_grace_ms")]
    pub startup_grace_ms: u64,
    /// How long a resources/prompts listing waits for a source's live session.
    #[serde(default = "default_live_list_timeout_ms")]
    pub live_list_timeout_ms: u64,
    /// Largest message a client may send: an HTTP request body or a stdio line (bytes).
    #[serde(default = "default_max_request_bytes")]
    pub max_request_bytes: usize,
    /// HTTP: most connections open at once. At the limit the connection idle
    /// the longest makes room, or the new one is answered 503.
    #[serde(default = "default_max_connections")]
    pub max_connections: usize,
    /// HTTP: how long a connection may take to send a request head, counted
    /// from when it is ready for one (just opened, or its last response done).
    #[serde(default = "default_header_read_timeout_ms")]
    pub header_read_timeout_ms: u64,
    /// HTTP: a connection with no traffic either way for this long is closed.
    #[serde(default = "default_idle_timeout_ms")]
    pub idle_timeout_ms: u64,
    /// HTTP: most requests one principal may have in progress (calls, not
    /// streams); more wait in the principal's queue.
    #[serde(default = "default_max_requests_per_principal")]
    pub max_requests_per_principal: usize,
    /// HTTP: most requests one principal may have waiting for an in-progress slot.
    #[serde(default = "default_max_queued_per_principal")]
    pub max_queued_per_principal: usize,
    /// HTTP: how long a request waits for an in-progress slot before it gets 429.
    #[serde(default = "default_queue_wait_ms")]
    pub queue_wait_ms: u64,
    /// HTTP: most long-lived streams (GET streams, `subscriptions/listen`)
    /// one principal may have open.
    #[serde(default = "default_max_streams_per_principal")]
    pub max_streams_per_principal: usize,
    /// HTTP: most open sessions (one per `initialize` of a 2025-11-25 client).
    #[serde(default = "default_max_sessions")]
    pub max_sessions: usize,
    /// HTTP: most console event streams (`/console/api/events`) one principal may have open.
    #[serde(default = "default_max_console_streams_per_principal")]
    pub max_console_streams_per_principal: usize,
    /// HTTP: a session with no message either way for this long ends.
    #[serde(default = "default_session_idle_timeout_ms")]
    pub session_idle_timeout_ms: u64,
    /// When tool and prompt names carry their source's prefix.
    #[serde(default)]
    pub prefix: PrefixMode,
    /// How much of the tool catalog clients are shown (`[server.catalog]`;
    /// a token's `catalog` overrides it for its principal).
    #[serde(default)]
    pub catalog: CatalogConfig,
    /// HTTP: answer a stateless (2026-07-28) request whose reply is its only
    /// message with a JSON body instead of a one-event stream.
    #[serde(default = "default_true")]
    pub http_json_response: bool,
    /// How long a 2026-07-28 client's call that needs its input waits for
    /// the retry that brings it (MRTR), before the call is abandoned.
    #[serde(default = "default_input_wait_ms")]
    pub input_wait_ms: u64,
    /// Most such calls waiting for input at once; beyond, a call that asks is refused.
    #[serde(default = "default_max_waiting_inputs")]
    pub max_waiting_inputs: usize,
    /// Most tasks (MCP Tasks, SEP-2663) one principal may hold at once;
    /// beyond, a call that would start one runs as a plain call instead.
    #[serde(default = "default_max_tasks_per_principal")]
    pub max_tasks_per_principal: usize,
    /// How long a task is kept after it was created (its `ttlMs`).
    #[serde(default = "default_task_ttl_ms")]
    pub task_ttl_ms: u64,
    /// Most calls (tool calls, prompt gets, resource reads) one client may
    /// have in progress at once, including calls it hung up on.
    #[serde(default = "default_max_calls_per_client")]
    pub max_calls_per_client: usize,
    /// Worker threads of each plugin's own tokio runtime (1 to 64; read when
    /// a plugin is loaded, so a change takes effect at the next start).
    #[serde(default = "default_plugin_threads")]
    pub plugin_threads: usize,
    /// `wf serve`'s own worker threads (1 to 1024; `--workers` wins; unset:
    /// 1 over stdio, one per CPU but one over HTTP). Read at start.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub workers: Option<u16>,
    /// How plugins without an `isolation` of their own run (unset: bundled
    /// ones in process, others in a child process).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub plugin_isolation: Option<Isolation>,
    /// Reload when the config file changes (read at start). Off, the file is
    /// applied by the admin `reload` (which, with several replicas, reloads
    /// every replica).
    #[serde(default = "default_true")]
    pub watch_config: bool,
}

/// `[server] prefix`: when a source's prefix is put before its names.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum PrefixMode {
    /// Every name carries its source's prefix.
    #[default]
    Always,
    /// Only names that more than one source uses carry it.
    OnCollision,
}

fn default_true() -> bool {
    true
}

fn default_max_name_len() -> usize {
    DEFAULT_MAX_NAME_LEN
}
fn default_page_size() -> usize {
    100
}
fn default_discovery_timeout_ms() -> u64 {
    15_000
}
fn default_startup_grace_ms() -> u64 {
    3_000
}
fn default_live_list_timeout_ms() -> u64 {
    5_000
}
fn default_max_request_bytes() -> usize {
    4 * 1024 * 1024
}
fn default_max_connections() -> usize {
    1024
}
fn default_header_read_timeout_ms() -> u64 {
    10_000
}
fn default_idle_timeout_ms() -> u64 {
    60_000
}
fn default_max_requests_per_principal() -> usize {
    64
}
fn default_max_queued_per_principal() -> usize {
    256
}
fn default_queue_wait_ms() -> u64 {
    5_000
}
fn default_max_streams_per_principal() -> usize {
    512
}
fn default_max_console_streams_per_principal() -> usize {
    8
}
fn default_max_sessions() -> usize {
    512
}
fn default_session_idle_timeout_ms() -> u64 {
    300_000
}
fn default_input_wait_ms() -> u64 {
    300_000
}
fn default_max_waiting_inputs() -> usize {
    64
}
fn default_max_tasks_per_principal() -> usize {
    64
}
fn default_task_ttl_ms() -> u64 {
    3_600_000
}
fn default_max_calls_per_client() -> usize {
    256
}
fn default_plugin_threads() -> usize {
    1
}

impl Default for ServerConfig {
    fn default() -> Self {
        Self {
            http: None,
            http_token: None,
            tokens: Vec::new(),
            oauth: None,
            allowed_hosts: Vec::new(),
            allowed_origins: Vec::new(),
            max_name_len: DEFAULT_MAX_NAME_LEN,
            page_size: default_page_size(),
            state_dir: None,
            discovery_timeout_ms: default_discovery_timeout_ms(),
            startup_grace_ms: default_startup_grace_ms(),
            live_list_timeout_ms: default_live_list_timeout_ms(),
            max_request_bytes: default_max_request_bytes(),
            max_connections: default_max_connections(),
            header_read_timeout_ms: default_header_read_timeout_ms(),
            idle_timeout_ms: default_idle_timeout_ms(),
            max_requests_per_principal: default_max_requests_per_principal(),
            max_queued_per_principal: default_max_queued_per_principal(),
            queue_wait_ms: default_queue_wait_ms(),
            max_streams_per_principal: default_max_streams_per_principal(),
            max_sessions: default_max_sessions(),
            max_console_streams_per_principal: default_max_console_streams_per_principal(),
            session_idle_timeout_ms: default_session_idle_timeout_ms(),
            prefix: PrefixMode::default(),
            catalog: CatalogConfig::default(),
            http_json_response: true,
            input_wait_ms: default_input_wait_ms(),
            max_waiting_inputs: default_max_waiting_inputs(),
            max_tasks_per_principal: default_max_tasks_per_principal(),
            task_ttl_ms: default_task_ttl_ms(),
            max_calls_per_client: default_max_calls_per_client(),
            plugin_threads: default_plugin_threads(),
            workers: None,
            plugin_isolation: None,
            watch_config: true,
        }
    }
}

/// Who may use the admin surface.
#[derive(Debug, Clone, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct AdminConfig {
    /// false: no admin tools at all.
    #[serde(default = "yes")]
    pub enabled: bool,
    /// Over HTTP: "off" (stdio only), "token" (callers send X-Wf-Admin-Token),
    /// "open". Default: "token" when a token is set, else "off".
    #[serde(default)]
    pub over_http: Option<AdminOverHttp>,
    /// The admin token (`${VAR}` allowed).
    #[serde(default)]
    pub token: Option<String>,
    /// Whether admin tools may write a source that starts a program or
    /// carries credentials (`command`, `env`, `headers`, `${VAR}`, ...).
    #[serde(default)]
    pub allow_process_sources: bool,
    /// What the web console's sign-in link grants: "read" (default),
    /// "actions" (also refresh, reload, cancel) or "off" (no link printed).
    #[serde(default)]
    pub console: ConsoleAccess,
}

impl Default for AdminConfig {
    fn default() -> Self {
        Self {
            enabled: true,
            over_http: None,
            token: None,
            allow_process_sources: false,
            console: ConsoleAccess::default(),
        }
    }
}

/// What a browser signed in to the web console with the link `wf serve
/// --http` prints may do.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum ConsoleAccess {
    /// No link is printed; the console takes bearer tokens only.
    Off,
    /// See sources, plugins, capabilities and runs.
    #[default]
    Read,
    /// Also refresh sources, reload the config and cancel runs.
    Actions,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum AdminOverHttp {
    Off,
    Token,
    Open,
}

impl AdminConfig {
    pub fn over_http(&self) -> AdminOverHttp {
        self.over_http.unwrap_or(if self.token.is_some() {
            AdminOverHttp::Token
        } else {
            AdminOverHttp::Off
        })
    }
}

/// `[plugins]`: `dirs`, and a `[plugins.<name>]` table per plugin (strict;
/// any other key that is not a table is refused as unknown: see
/// `plugin_isolation::deserialize_plugins`).
#[derive(Debug, Clone, Default, Serialize)]
pub struct PluginsConfig {
    /// Extra plugin folders; relative paths are relative to the config file.
    #[serde(default)]
    pub dirs: Vec<PathBuf>,
    /// `[plugins.<name>]`: per plugin (manifest name) isolation and limits.
    #[serde(flatten)]
    pub plugin: BTreeMap<String, PluginSettings>,
}

impl<'de> Deserialize<'de> for PluginsConfig {
    fn deserialize<D: serde::Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        let (dirs, plugin) = plugin_isolation::deserialize_plugins(d)?;
        Ok(Self { dirs, plugin })
    }
}

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct SourceConfig {
    /// The source kind; a plugin must serve it. Defaults to `mcp`.
    #[serde(default = "default_kind")]
    pub kind: String,
    #[serde(default = "yes")]
    pub enabled: bool,
    /// What the source's tool and prompt names start with on the proxy
    /// surface (default `<source>__`; `""`: the source's own names).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub prefix: Option<String>,
    /// Whose upstream session a call uses (see `sources::sessions`); unset:
    /// `shared`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub session: Option<SessionScope>,
    /// Closes a per-principal or per-client session unused this long.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub session_idle_ms: Option<u64>,
    /// Most per-principal or per-client sessions open at once on this source.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub max_sessions: Option<usize>,
    /// A pinned tool that changed or is new: `hold` (default), `warn`,
    /// `allow` (see `sources::tool_pins`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub on_change: Option<OnChange>,
    /// A tool screening flags: `warn` (default) or `hold`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub screen: Option<ScreenMode>,
    /// Everything else is the plugin's business.
    #[serde(flatten)]
    pub settings: Map<String, Value>,
}

impl SourceConfig {
    /// The keys of `[sources.NAME]` that wf reads itself; the rest are the
    /// plugin's settings.
    pub const HOST_KEYS: &[&str] = &[
        "kind",
        "enabled",
        "prefix",
        "session",
        "session_idle_ms",
        "max_sessions",
        "on_change",
        "screen",
    ];

    /// An enabled source of `kind` with these settings and wf's defaults.
    pub fn new(kind: impl Into<String>, settings: Map<String, Value>) -> Self {
        Self {
            kind: kind.into(),
            enabled: true,
            prefix: None,
            session: None,
            session_idle_ms: None,
            max_sessions: None,
            on_change: None,
            screen: None,
            settings,
        }
    }

    /// The source's `on_change` and `screen`, defaults filled in.
    pub fn pin_policy(&self) -> PinPolicy {
        PinPolicy {
            on_change: self.on_change.unwrap_or_default(),
            screen: self.screen.unwrap_or_default(),
        }
    }
}

/// What a source does with a pinned tool that changed (or is new).
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum OnChange {
    #[default]
    Hold,
    Warn,
    Allow,
}

/// What a source does with a tool screening flags.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum ScreenMode {
    #[default]
    Warn,
    Hold,
}

/// A source's settings for pins and screening (`sources::tool_pins` applies them).
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct PinPolicy {
    pub on_change: OnChange,
    pub screen: ScreenMode,
}

/// A source's session scope: one upstream session for everyone, one per
/// principal, or one per downstream client.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum SessionScope {
    Shared,
    Principal,
    Client,
}

fn default_kind() -> String {
    "mcp".into()
}
fn yes() -> bool {
    true
}

/// A loaded config and where it came from.
#[derive(Debug, Clone, Default)]
pub struct LoadedConfig {
    pub config: Config,
    /// None for the embedded default.
    pub file: Option<PathBuf>,
}

impl LoadedConfig {
    /// The embedded default: no sources configured, so only the plugins'
    /// default sources (wf.std) are served.
    pub fn embedded_default() -> Self {
        Self::default()
    }

    /// The file at `path`, or the embedded default when there is none.
    pub fn open(path: Option<&Path>) -> Result<Self, ConfigError> {
        match path {
            Some(p) => Self::load(p),
            None => Ok(Self::embedded_default()),
        }
    }

    pub fn load(path: &Path) -> Result<Self, ConfigError> {
        let file = path.display().to_string();
        let text = std::fs::read_to_string(path).map_err(|source| ConfigError::Read {
            file: file.clone(),
            source,
        })?;
        let config = parse(&file, &text, &extension(path))?;
        let abs = std::path::absolute(path).unwrap_or_else(|_| path.to_path_buf());
        Ok(Self {
            config,
            file: Some(abs),
        })
    }

    /// The directory relative paths in the config are resolved against.
    pub fn base_dir(&self) -> PathBuf {
        match &self.file {
            Some(f) => f.parent().map(Path::to_path_buf).unwrap_or_default(),
            None => std::env::current_dir().unwrap_or_default(),
        }
    }

    pub fn file_label(&self) -> String {
        self.file
            .as_ref()
            .map(|f| f.display().to_string())
            .unwrap_or_else(|| "<embedded default>".into())
    }

    /// Every configured source (including `mcpServers` entries), by name.
    /// Claude Desktop entries become `kind = "mcp"` sources; a name used in
    /// both tables is an error.
    pub fn sources(&self) -> Result<BTreeMap<String, SourceConfig>, ConfigError> {
        let mut out = self.config.sources.clone();
        for (name, entry) in &self.config.mcp_servers {
            let key = format!("mcpServers.{name}");
            if out.contains_key(name) {
                return Err(self.invalid(
                    &key,
                    format!("source {name:?} is also defined under [sources]"),
                ));
            }
            out.insert(name.clone(), self.mcp_server_entry(&key, entry)?);
        }
        for name in out.keys() {
            if let Err(reason) = check_source_name(name) {
                return Err(self.invalid(&format!("sources.{name}"), reason));
            }
        }
        Ok(out)
    }

    /// One `mcpServers` entry as a `kind = "mcp"` source: `"disabled": true`
    /// disables it, wf's per-source keys (`prefix`, `session`, …) are read as
    /// in `[sources]`, and keys other clients write that change nothing here
    /// ([`FOREIGN_MCP_SERVER_KEYS`]) are dropped.
    fn mcp_server_entry(
        &self,
        key: &str,
        entry: &Map<String, Value>,
    ) -> Result<SourceConfig, ConfigError> {
        let mut entry = entry.clone();
        let enabled = match entry.remove("disabled") {
            Some(Value::Bool(d)) => !d,
            Some(_) => {
                return Err(self.invalid(&format!("{key}.disabled"), "expected a boolean".into()));
            }
            None => true,
        };
        for k in FOREIGN_MCP_SERVER_KEYS {
            if entry.remove(*k).is_some() {
                tracing::debug!(entry = key, key = k, "ignoring another client's key");
            }
        }
        entry.insert("kind".into(), "mcp".into());
        entry.insert("enabled".into(), enabled.into());
        serde_path_to_error::deserialize(Value::Object(entry)).map_err(|e| {
            let at = match e.path().to_string() {
                p if p == "." => key.to_string(),
                p => format!("{key}.{p}"),
            };
            self.invalid(&at, one_line(&e.into_inner().to_string()))
        })
    }

    pub fn invalid(&self, key: &str, reason: String) -> ConfigError {
        ConfigError::Invalid {
            file: self.file_label(),
            key: key.into(),
            reason,
        }
    }
}

pub(crate) fn parse(file: &str, text: &str, ext: &str) -> Result<Config, ConfigError> {
    let invalid = |key: String, reason: String| ConfigError::Invalid {
        file: file.into(),
        key,
        reason,
    };
    match ext {
        "toml" => {
            let de = toml::Deserializer::parse(text)
                .map_err(|e| invalid("<syntax>".into(), one_line(&e.to_string())))?;
            serde_path_to_error::deserialize(de).map_err(|e| {
                let (key, reason) = describe(e.path(), &e.inner().to_string());
                invalid(key, reason)
            })
        }
        "json" => {
            let mut de = serde_json::Deserializer::from_str(text);
            serde_path_to_error::deserialize(&mut de).map_err(|e| {
                let (key, reason) = describe(e.path(), &e.inner().to_string());
                invalid(key, reason)
            })
        }
        _ => Err(ConfigError::Format { file: file.into() }),
    }
    .and_then(|config: Config| match config.audit.problems().first() {
        Some(problem) => Err(invalid("audit".into(), problem.clone())),
        None => Ok(config),
    })
    .and_then(|config: Config| {
        match endpoints::problems(&config.endpoints).into_iter().next() {
            Some((key, reason)) => Err(invalid(key, reason)),
            None => Ok(config),
        }
    })
}

/// The key and the one-line reason of a deserialization error; an unknown
/// key is named with a hint, in the table that holds it.
fn describe(path: &serde_path_to_error::Path, message: &str) -> (String, String) {
    // Keys come from the file: one with a control character in it (a JSON
    // `"a\rb"`) must not break the message's one line.
    let path = crate::text::escape_controls(&path.to_string());
    let top = |p: &str| match p {
        "" | "." => "top level".to_string(),
        p => p.to_string(),
    };
    match strict::unknown_field_message(message) {
        // The path ends at the unknown key; name the table that holds it.
        Some(reason) => {
            let table = path.rsplit_once('.').map_or("", |(t, _)| t);
            (top(table), reason)
        }
        None => (top(&path), one_line(message)),
    }
}

/// A config file's extension, lowercased: it picks the format.
pub(crate) fn extension(path: &Path) -> String {
    path.extension()
        .and_then(|e| e.to_str())
        .unwrap_or("")
        .to_ascii_lowercase()
}

/// Source names are config keys and the first part of capability refs:
/// letters, digits, `.`, `_`, `-`; no `__` (the proxy's separator).
pub fn check_source_name(name: &str) -> Result<(), String> {
    let ok_chars = name
        .chars()
        .all(|c| c.is_ascii_alphanumeric() || matches!(c, '.' | '_' | '-'));
    if name.is_empty() || !ok_chars || !name.starts_with(|c: char| c.is_ascii_alphanumeric()) {
        return Err(format!(
            "invalid source name {name:?}: use letters, digits, '.', '_' and '-', starting with a letter or digit"
        ));
    }
    if name.contains("__") {
        return Err(format!(
            "invalid source name {name:?}: '__' is reserved as the proxy's separator"
        ));
    }
    Ok(())
}

#[cfg(test)]
mod tests;
