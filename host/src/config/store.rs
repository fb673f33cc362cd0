//! `[store]`: where wf keeps its state (docs/operator-manual.md, Running
//! several replicas). Unset `url`: SQLite in the state directory.

use serde::{Deserialize, Serialize};

#[derive(Debug, Clone, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct StoreConfig {
    /// `postgres://user:${PGPASSWORD}@host:port/db`: PostgreSQL, shared by
    /// every replica (`${VAR}` expanded; the password is never logged).
    /// Unset: SQLite (`wf.db` in the state directory).
    #[serde(default)]
    pub url: Option<String>,
    /// A PostgreSQL schema for wf's tables (created if missing); default
    /// the user's search path (`public`).
    #[serde(default)]
    pub schema: Option<String>,
    /// With `sslmode=require` in `url`: a PEM file of more trusted roots (a
    /// private CA), beside the system's; relative to the config file.
    #[serde(default)]
    pub ca_file: Option<std::path::PathBuf>,
    /// Connections each replica opens at most.
    #[serde(default = "default_max_connections")]
    pub max_connections: usize,
    /// A run's lease lasts this long without renewal; a replica silent for
    /// longer loses its runs (another marks them interrupted).
    #[serde(default = "default_lease_ttl_ms")]
    pub lease_ttl_ms: u64,
    /// How often a replica renews its leases and looks for expired ones
    /// (kept under a third of `lease_ttl_ms`).
    #[serde(default = "default_heartbeat_ms")]
    pub heartbeat_ms: u64,
    /// On SIGTERM (`wf serve --http`): how long runs in progress may take to
    /// finish before the replica stops (new runs are refused meanwhile, and
    /// `/readyz` answers 503). 0: stop at once. Default: 30 s with `url`,
    /// 0 on SQLite (one machine stops as it always did).
    #[serde(default)]
    pub drain_timeout_ms: Option<u64>,
    /// With `url`: the key every replica seals its handles with (task ids,
    /// `Mcp-Session-Id`s), so a replica knows another's handle and no client
    /// can forge one. The same value on every replica, from `${VAR}`.
    /// Required with `url`.
    #[serde(default)]
    pub handle_secret: Option<String>,
}

impl StoreConfig {
    pub fn drain_timeout_ms(&self) -> u64 {
        self.drain_timeout_ms
            .unwrap_or(if self.url.is_some() { 30_000 } else { 0 })
    }

    /// `handle_secret` with `${VAR}` expanded; None when unset or empty.
    pub fn handle_secret(&self) -> Option<String> {
        let raw = self.handle_secret.as_ref()?;
        let lookup = |k: &str| std::env::var(k).ok();
        let v = super::expand_env(
            &serde_json::Value::String(raw.clone()),
            "store.handle_secret",
            &lookup,
        )
        .ok()?;
        v.as_str().filter(|s| !s.is_empty()).map(str::to_string)
    }
}

fn default_max_connections() -> usize {
    8
}
fn default_lease_ttl_ms() -> u64 {
    15_000
}
fn default_heartbeat_ms() -> u64 {
    5_000
}

impl Default for StoreConfig {
    fn default() -> Self {
        Self {
            url: None,
            schema: None,
            ca_file: None,
            max_connections: default_max_connections(),
            lease_ttl_ms: default_lease_ttl_ms(),
            heartbeat_ms: default_heartbeat_ms(),
            drain_timeout_ms: None,
            handle_secret: None,
        }
    }
}
