//! A source's settings: where the document is, which operations to serve,
//! how to authenticate, and the bounds of every request.

use std::collections::BTreeMap;
use std::time::Duration;

use globset::{Glob, GlobSet, GlobSetBuilder};
use serde::Deserialize;
use serde_json::{Value, json};
use wf_plugin_api::PluginError;

/// The default bound of one response body.
pub const DEFAULT_MAX_RESPONSE_BYTES: usize = 4 * 1024 * 1024;
/// The default bound of the OpenAPI document.
pub const DEFAULT_MAX_SPEC_BYTES: usize = 20 * 1024 * 1024;
/// The default bound of one request, from sending to the body's end.
pub const DEFAULT_TIMEOUT_MS: u64 = 30_000;
/// The default bound of all the listed tool schemas together, in JSON nodes
/// (refs.rs counts them): GitHub's 1,223 operations list 76,129 (284,343
/// under `strict_responses`); Microsoft Graph's first 2,492 operations fill
/// it, with wf under 1 GiB. The operations past it are left out
/// (docs/operator-manual.md, docs/benchmarks.md).
pub const DEFAULT_MAX_SCHEMA_NODES: usize = 400_000;

/// The JSON Schema of an `openapi` source's settings (the host refuses a
/// table that does not match it before the plugin sees it).
pub fn settings_schema() -> Value {
    let strings = json!({"type": "array", "items": {"type": "string"}});
    let secret = json!({"type": "string", "description": "use ${VAR}: never logged"});
    json!({
        "type": "object",
        "additionalProperties": false,
        "required": ["spec"],
        "properties": {
            "spec": {"type": "string", "description": "path or http(s) URL of an OpenAPI 3.0/3.1 document (JSON or YAML)"},
            "base_url": {"type": "string", "description": "overrides the document's servers"},
            "include": strings.clone(),
            "exclude": strings,
            "readonly": {"type": "boolean", "description": "serve only GET and HEAD operations"},
            "headers": {"type": "object", "additionalProperties": {"type": "string"}},
            "timeout_ms": {"type": "integer", "minimum": 1},
            "max_response_bytes": {"type": "integer", "minimum": 1024},
            "max_spec_bytes": {"type": "integer", "minimum": 1024},
            "spec_auth": {"type": "boolean", "description": "send `auth` when fetching a URL spec (and its same-origin $ref documents)"},
            "refresh_interval_ms": {"type": "integer", "minimum": 1000, "description": "fetch the spec again this often; a changed one is announced (list_changed)"},
            "strict_responses": {"type": "boolean", "description": "list each response's schema as the tool's outputSchema and fail a call whose answer departs from it (default: pass the answer through with a warning)"},
            "max_schema_nodes": {"type": "integer", "minimum": 1000, "description": "the most JSON nodes all the tools' schemas may hold together; operations past it are left out (choose with include/exclude)"},
            "auth": {
                "type": "object",
                "additionalProperties": false,
                "required": ["type"],
                "properties": {
                    "type": {"type": "string", "enum": ["bearer", "api_key", "basic", "oauth2_client_credentials"]},
                    "token": secret.clone(),
                    "name": {"type": "string", "description": "api_key: the header or query parameter"},
                    "in": {"type": "string", "enum": ["header", "query"]},
                    "value": secret.clone(),
                    "username": {"type": "string"},
                    "password": secret.clone(),
                    "token_url": {"type": "string"},
                    "client_id": {"type": "string"},
                    "client_secret": secret,
                    "scopes": {"type": "array", "items": {"type": "string"}},
                },
            },
        },
    })
}

/// How requests authenticate. Secrets stay here and are never printed.
#[derive(Clone, PartialEq, Eq)]
pub enum Auth {
    None,
    Bearer(String),
    ApiKeyHeader {
        name: String,
        value: String,
    },
    ApiKeyQuery {
        name: String,
        value: String,
    },
    Basic {
        username: String,
        password: String,
    },
    ClientCredentials {
        token_url: String,
        client_id: String,
        client_secret: String,
        scopes: Vec<String>,
    },
}

impl Auth {
    /// The secrets to blank out of logs and error bodies.
    pub fn secrets(&self) -> Vec<String> {
        match self {
            Auth::None => vec![],
            Auth::Bearer(t) => vec![t.clone()],
            Auth::ApiKeyHeader { value, .. } | Auth::ApiKeyQuery { value, .. } => {
                vec![value.clone()]
            }
            Auth::Basic { password, .. } => vec![password.clone()],
            Auth::ClientCredentials { client_secret, .. } => vec![client_secret.clone()],
        }
    }
}

impl std::fmt::Debug for Auth {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(match self {
            Auth::None => "none",
            Auth::Bearer(_) => "bearer",
            Auth::ApiKeyHeader { .. } => "api_key (header)",
            Auth::ApiKeyQuery { .. } => "api_key (query)",
            Auth::Basic { .. } => "basic",
            Auth::ClientCredentials { .. } => "oauth2_client_credentials",
        })
    }
}

#[derive(Debug, Clone)]
pub struct Settings {
    pub spec: String,
    pub base_url: Option<String>,
    pub include: Option<GlobSet>,
    pub exclude: Option<GlobSet>,
    pub readonly: bool,
    pub headers: BTreeMap<String, String>,
    pub timeout: Duration,
    pub max_response_bytes: usize,
    pub max_spec_bytes: usize,
    pub auth: Auth,
    /// `headers` as a header map, built once.
    pub header_map: reqwest::header::HeaderMap,
    /// Send `auth` with the spec's own requests (same origin only).
    pub spec_auth: bool,
    pub refresh_interval: Option<Duration>,
    /// Answers must match the document's response schema (else a tool
    /// error naming the field), which is listed as the `outputSchema`.
    pub strict_responses: bool,
    pub max_schema_nodes: usize,
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct Raw {
    spec: String,
    base_url: Option<String>,
    #[serde(default)]
    include: Vec<String>,
    #[serde(default)]
    exclude: Vec<String>,
    #[serde(default)]
    readonly: bool,
    #[serde(default)]
    headers: BTreeMap<String, String>,
    timeout_ms: Option<u64>,
    max_response_bytes: Option<usize>,
    max_spec_bytes: Option<usize>,
    auth: Option<RawAuth>,
    #[serde(default)]
    spec_auth: bool,
    refresh_interval_ms: Option<u64>,
    #[serde(default)]
    strict_responses: bool,
    max_schema_nodes: Option<usize>,
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct RawAuth {
    #[serde(rename = "type")]
    kind: String,
    token: Option<String>,
    name: Option<String>,
    #[serde(rename = "in")]
    location: Option<String>,
    value: Option<String>,
    username: Option<String>,
    password: Option<String>,
    token_url: Option<String>,
    client_id: Option<String>,
    client_secret: Option<String>,
    #[serde(default)]
    scopes: Vec<String>,
}

fn globs(source: &str, key: &str, patterns: &[String]) -> Result<Option<GlobSet>, PluginError> {
    if patterns.is_empty() {
        return Ok(None);
    }
    let mut set = GlobSetBuilder::new();
    for p in patterns {
        let glob = Glob::new(p).map_err(|e| {
            PluginError::invalid_config(format!("sources.{source}.{key}: {p:?}: {e}"))
        })?;
        set.add(glob);
    }
    set.build()
        .map(Some)
        .map_err(|e| PluginError::invalid_config(format!("sources.{source}.{key}: {e}")))
}

impl Settings {
    pub fn parse(source: &str, settings: &Value) -> Result<Self, PluginError> {
        let raw: Raw = serde_json::from_value(settings.clone())
            .map_err(|e| PluginError::invalid_config(format!("sources.{source}: {e}")))?;
        if raw.spec.trim().is_empty() {
            return Err(PluginError::invalid_config(format!(
                "sources.{source}.spec: empty; give a file path or an http(s) URL"
            )));
        }
        if let Some(base) = &raw.base_url {
            let url = url::Url::parse(base).map_err(|e| {
                PluginError::invalid_config(format!("sources.{source}.base_url: {base:?}: {e}"))
            })?;
            if !matches!(url.scheme(), "http" | "https") {
                return Err(PluginError::invalid_config(format!(
                    "sources.{source}.base_url: must be an http(s) URL"
                )));
            }
        }
        for name in raw.headers.keys() {
            reqwest::header::HeaderName::from_bytes(name.as_bytes()).map_err(|_| {
                PluginError::invalid_config(format!(
                    "sources.{source}.headers: {name:?} is not a header name"
                ))
            })?;
        }
        let auth = match raw.auth {
            None => Auth::None,
            Some(a) => parse_auth(source, a)?,
        };
        Ok(Settings {
            spec: raw.spec,
            base_url: raw.base_url,
            include: globs(source, "include", &raw.include)?,
            exclude: globs(source, "exclude", &raw.exclude)?,
            readonly: raw.readonly,
            headers: raw.headers.clone(),
            timeout: Duration::from_millis(raw.timeout_ms.unwrap_or(DEFAULT_TIMEOUT_MS).max(1)),
            max_response_bytes: raw.max_response_bytes.unwrap_or(DEFAULT_MAX_RESPONSE_BYTES),
            max_spec_bytes: raw.max_spec_bytes.unwrap_or(DEFAULT_MAX_SPEC_BYTES),
            auth,
            header_map: header_map(&raw.headers),
            spec_auth: raw.spec_auth,
            refresh_interval: raw
                .refresh_interval_ms
                .map(|ms| Duration::from_millis(ms.max(1000))),
            strict_responses: raw.strict_responses,
            max_schema_nodes: raw
                .max_schema_nodes
                .unwrap_or(DEFAULT_MAX_SCHEMA_NODES)
                .max(1000),
        })
    }
}

fn parse_auth(source: &str, a: RawAuth) -> Result<Auth, PluginError> {
    let need = |value: Option<String>, key: &str| {
        value.ok_or_else(|| {
            PluginError::invalid_config(format!(
                "sources.{source}.auth.{key}: required for type {:?}",
                a.kind
            ))
        })
    };
    Ok(match a.kind.as_str() {
        "bearer" => Auth::Bearer(need(a.token.clone(), "token")?),
        "api_key" => {
            let name = need(a.name.clone(), "name")?;
            let value = need(a.value.clone(), "value")?;
            match a.location.as_deref().unwrap_or("header") {
                "header" => Auth::ApiKeyHeader { name, value },
                "query" => Auth::ApiKeyQuery { name, value },
                other => {
                    return Err(PluginError::invalid_config(format!(
                        "sources.{source}.auth.in: {other:?}: header or query"
                    )));
                }
            }
        }
        "basic" => Auth::Basic {
            username: need(a.username.clone(), "username")?,
            password: need(a.password.clone(), "password")?,
        },
        "oauth2_client_credentials" => Auth::ClientCredentials {
            token_url: need(a.token_url.clone(), "token_url")?,
            client_id: need(a.client_id.clone(), "client_id")?,
            client_secret: need(a.client_secret.clone(), "client_secret")?,
            scopes: a.scopes.clone(),
        },
        other => {
            return Err(PluginError::invalid_config(format!(
                "sources.{source}.auth.type: {other:?}: bearer, api_key, basic or oauth2_client_credentials"
            )));
        }
    })
}

fn header_map(headers: &std::collections::BTreeMap<String, String>) -> reqwest::header::HeaderMap {
    use reqwest::header::{HeaderName, HeaderValue};
    let mut map = reqwest::header::HeaderMap::new();
    for (k, v) in headers {
        if let (Ok(name), Ok(value)) = (
            HeaderName::from_bytes(k.as_bytes()),
            HeaderValue::from_str(v),
        ) {
            map.insert(name, value);
        }
    }
    map
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
            "`kind = \"openapi\"`",
        );
        assert!(problems.is_empty(), "{problems:#?}");
    }

    #[test]
    fn schema_is_valid_and_every_key_is_read() {
        let schema = settings_schema();
        assert!(wf_plugin_api::schema::json_schema_problems(&schema, "s").is_empty());
        let all = json!({
            "spec": "a.json", "base_url": "http://x", "include": ["a*"], "exclude": ["b"],
            "readonly": true, "headers": {"X-A": "1"}, "timeout_ms": 5,
            "max_response_bytes": 2048, "max_spec_bytes": 2048,
            "spec_auth": true, "refresh_interval_ms": 5000,
            "strict_responses": true, "max_schema_nodes": 5000,
            "auth": {"type": "bearer", "token": "t"},
        });
        assert!(wf_plugin_api::schema::instance_problems(&schema, &all, "$").is_empty());
        let s = Settings::parse("api", &all).unwrap();
        assert!(s.readonly && s.include.is_some() && s.auth == Auth::Bearer("t".into()));
        assert!(s.spec_auth && s.refresh_interval == Some(Duration::from_secs(5)));
        assert!(s.strict_responses && s.max_schema_nodes == 5000);
        assert_eq!(s.header_map.get("x-a").unwrap(), "1");
    }

    #[test]
    fn bad_settings_name_the_key() {
        let e = Settings::parse(
            "api",
            &json!({"spec": "a", "auth": {"type": "api_key", "value": "v"}}),
        )
        .unwrap_err();
        assert!(e.message.contains("sources.api.auth.name"), "{}", e.message);
        let e = Settings::parse("api", &json!({"spec": "a", "base_url": "ftp://x"})).unwrap_err();
        assert!(e.message.contains("base_url"), "{}", e.message);
        let e = Settings::parse("api", &json!({"spec": "a", "include": ["a[" ]})).unwrap_err();
        assert!(e.message.contains("include"), "{}", e.message);
        // The secret never shows in a debug print.
        let s = Settings::parse(
            "api",
            &json!({"spec": "a", "auth": {"type": "bearer", "token": "s3cr3t-token"}}),
        )
        .unwrap();
        assert!(!format!("{s:?}").contains("s3cr3t"));
    }
}
