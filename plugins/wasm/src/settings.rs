//! A `wasm` source's settings: which component, what it is granted, and
//! the limits of each call. Nothing is granted unless listed here.

use std::path::PathBuf;

use serde::Deserialize;
use serde_json::{Value, json};
use wf_plugin_api::PluginError;

/// Memory of one instance, MiB.
pub const DEFAULT_MEMORY_MB: u64 = 256;
/// Time of one call, ms (guest code and the host calls it waits on).
pub const DEFAULT_TIMEOUT_MS: u64 = 30_000;
/// Instances running at once per source.
pub const DEFAULT_MAX_INSTANCES: usize = 4;
/// The largest result a call may return (content, structured content,
/// resource bodies together), bytes.
pub const DEFAULT_MAX_RESULT_BYTES: usize = 4 * 1024 * 1024;

/// The JSON Schema of a `wasm` source's settings.
pub fn settings_schema() -> Value {
    json!({
        "type": "object",
        "additionalProperties": false,
        "required": ["path"],
        "properties": {
            "path": {"type": "string", "description": "the component file (.wasm)"},
            "sha256": {"type": "string", "description": "refuse the component unless its bytes have this sha256 (lower-case hex)"},
            "allow_hosts": {"type": "array", "items": {"type": "string"}, "description": "hosts (`name` or `name:port`) the component may send HTTP requests to through wasi:http"},
            "dirs": {"type": "array", "items": {
                "type": "object",
                "additionalProperties": false,
                "required": ["host", "guest"],
                "properties": {
                    "host": {"type": "string"},
                    "guest": {"type": "string"},
                    "mode": {"type": "string", "enum": ["ro", "rw"]}
                }
            }},
            "env": {"type": "array", "items": {"type": "string"}, "description": "names of wf's environment variables the component may read"},
            "memory_mb": {"type": "integer", "minimum": 1},
            "timeout_ms": {"type": "integer", "minimum": 1},
            "max_instances": {"type": "integer", "minimum": 1},
            "max_result_bytes": {"type": "integer", "minimum": 1024},
            "compiled_cache": {"type": "boolean", "description": "keep the compiled code on disk by the component's hash (default true)"},
            "settings": {"type": "object", "description": "the component's own settings: its `settings()` import returns them as JSON"}
        }
    })
}

#[derive(Debug, Clone, Deserialize)]
#[serde(deny_unknown_fields)]
struct Raw {
    path: String,
    sha256: Option<String>,
    #[serde(default)]
    allow_hosts: Vec<String>,
    #[serde(default)]
    dirs: Vec<RawDir>,
    #[serde(default)]
    env: Vec<String>,
    memory_mb: Option<u64>,
    timeout_ms: Option<u64>,
    max_instances: Option<usize>,
    max_result_bytes: Option<usize>,
    compiled_cache: Option<bool>,
    settings: Option<Value>,
}

#[derive(Debug, Clone, Deserialize)]
#[serde(deny_unknown_fields)]
struct RawDir {
    host: String,
    guest: String,
    mode: Option<String>,
}

/// A directory granted to the component.
#[derive(Debug, Clone, PartialEq)]
pub struct Dir {
    pub host: PathBuf,
    pub guest: String,
    pub writable: bool,
}

/// A source's checked settings.
#[derive(Debug, Clone)]
pub struct Settings {
    pub path: PathBuf,
    pub sha256: Option<String>,
    /// Lower-cased; `name` or `name:port`.
    pub allow_hosts: Vec<String>,
    pub dirs: Vec<Dir>,
    pub env: Vec<String>,
    pub memory_bytes: usize,
    pub timeout_ms: u64,
    pub max_instances: usize,
    pub max_result_bytes: usize,
    pub compiled_cache: bool,
    /// The component's own settings, as JSON text.
    pub guest_settings: String,
}

impl Settings {
    /// Checks `config` (the source's table) and names the key at fault.
    pub fn parse(source: &str, config: &Value) -> Result<Self, PluginError> {
        let bad = |key: &str, why: String| {
            PluginError::invalid_config(format!("sources.{source}.{key}: {why}"))
        };
        let raw: Raw = serde_json::from_value(config.clone())
            .map_err(|e| PluginError::invalid_config(format!("sources.{source}: {e}")))?;
        if raw.path.is_empty() {
            return Err(bad("path", "empty: name the component file".into()));
        }
        if let Some(h) = &raw.sha256
            && (h.len() != 64 || !h.bytes().all(|b| b.is_ascii_hexdigit()))
        {
            return Err(bad("sha256", "expected 64 hex digits".into()));
        }
        let mut allow_hosts = Vec::new();
        for h in &raw.allow_hosts {
            let h = h.trim().to_ascii_lowercase();
            if h.is_empty() || h.contains('/') || h.contains('*') {
                return Err(bad(
                    "allow_hosts",
                    format!(
                        "{h:?} is not a host name (`api.example.com` or `api.example.com:8443`; no schemes, paths or wildcards)"
                    ),
                ));
            }
            allow_hosts.push(h);
        }
        let mut dirs = Vec::new();
        for d in &raw.dirs {
            let writable = match d.mode.as_deref() {
                None | Some("ro") => false,
                Some("rw") => true,
                Some(m) => {
                    return Err(bad(
                        "dirs",
                        format!("mode {m:?}: expected \"ro\" or \"rw\""),
                    ));
                }
            };
            let host = PathBuf::from(&d.host);
            if !host.is_absolute() {
                return Err(bad(
                    "dirs",
                    format!("host {:?} must be an absolute path", d.host),
                ));
            }
            if !host.is_dir() {
                return Err(bad("dirs", format!("host {:?} is not a directory", d.host)));
            }
            if !d.guest.starts_with('/') {
                return Err(bad(
                    "dirs",
                    format!("guest {:?} must start with /", d.guest),
                ));
            }
            dirs.push(Dir {
                host,
                guest: d.guest.clone(),
                writable,
            });
        }
        for name in &raw.env {
            if name.is_empty() || name.contains('=') {
                return Err(bad("env", format!("{name:?} is not a variable name")));
            }
        }
        let guest_settings = match &raw.settings {
            None => "{}".to_string(),
            Some(v @ Value::Object(_)) => v.to_string(),
            Some(_) => return Err(bad("settings", "expected a table".into())),
        };
        let memory_mb = raw.memory_mb.unwrap_or(DEFAULT_MEMORY_MB);
        Ok(Settings {
            path: PathBuf::from(&raw.path),
            sha256: raw.sha256.map(|h| h.to_ascii_lowercase()),
            allow_hosts,
            dirs,
            env: raw.env,
            memory_bytes: usize::try_from(memory_mb.saturating_mul(1 << 20)).unwrap_or(usize::MAX),
            timeout_ms: raw.timeout_ms.unwrap_or(DEFAULT_TIMEOUT_MS),
            max_instances: raw.max_instances.unwrap_or(DEFAULT_MAX_INSTANCES).max(1),
            max_result_bytes: raw.max_result_bytes.unwrap_or(DEFAULT_MAX_RESULT_BYTES),
            compiled_cache: raw.compiled_cache.unwrap_or(true),
            guest_settings,
        })
    }

    /// `memory_mb` as configured, for error messages.
    pub fn memory_mb(&self) -> usize {
        self.memory_bytes >> 20
    }

    /// Whether a request to `host` (and `port`, when the URL names one) is
    /// granted: an entry `name` allows every port of that host, `name:port`
    /// that port only.
    pub fn host_allowed(&self, host: &str, port: Option<u16>) -> bool {
        let host = host
            .trim_start_matches('[')
            .trim_end_matches(']')
            .to_ascii_lowercase();
        self.allow_hosts
            .iter()
            .any(|entry| match entry.rsplit_once(':') {
                Some((h, p)) if !h.contains(':') || entry.starts_with('[') => {
                    h.trim_start_matches('[').trim_end_matches(']') == host
                        && port.is_some_and(|port| p == port.to_string())
                }
                _ => entry.trim_start_matches('[').trim_end_matches(']') == host,
            })
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
            "`kind = \"wasm\"`",
        );
        assert!(problems.is_empty(), "{problems:#?}");
        assert!(wf_plugin_api::schema::json_schema_problems(&settings_schema(), "s").is_empty());
    }

    #[test]
    fn nothing_is_granted_by_default() {
        let s = Settings::parse("x", &json!({"path": "a.wasm"})).unwrap();
        assert!(s.allow_hosts.is_empty() && s.dirs.is_empty() && s.env.is_empty());
        assert!(!s.host_allowed("example.com", None));
        assert_eq!(s.guest_settings, "{}");
        assert_eq!(s.memory_mb(), DEFAULT_MEMORY_MB as usize);
    }

    #[test]
    fn hosts_match_by_name_and_port() {
        let s = Settings::parse(
            "x",
            &json!({"path": "a.wasm", "allow_hosts": ["API.example.com", "127.0.0.1:8080"]}),
        )
        .unwrap();
        assert!(s.host_allowed("api.example.com", Some(443)));
        assert!(s.host_allowed("api.example.com", None));
        assert!(s.host_allowed("127.0.0.1", Some(8080)));
        assert!(!s.host_allowed("127.0.0.1", Some(8081)));
        assert!(!s.host_allowed("evil.example.com", None));
    }

    #[test]
    fn bad_settings_name_their_key() {
        let e = Settings::parse(
            "x",
            &json!({"path": "a.wasm", "allow_hosts": ["https://a/b"]}),
        )
        .unwrap_err();
        assert!(e.message.contains("sources.x.allow_hosts"), "{}", e.message);
        let e = Settings::parse(
            "x",
            &json!({"path": "a.wasm", "dirs": [{"host": "rel", "guest": "/d"}]}),
        )
        .unwrap_err();
        assert!(e.message.contains("sources.x.dirs"), "{}", e.message);
        let e = Settings::parse("x", &json!({"path": "a.wasm", "nope": 1})).unwrap_err();
        assert!(e.message.contains("nope"), "{}", e.message);
    }
}
