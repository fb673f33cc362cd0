//! `[[server.tokens]]`: named principals over HTTP.

use std::sync::Arc;

use serde::{Deserialize, Serialize};

/// One principal: who holds `token` is `name`. `allow_tools` / `deny_tools`
/// are globs on client-visible tool names (`*` matches any run of
/// characters); a tool is usable when some allow pattern matches (or there
/// is no allow list) and no deny pattern does.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct TokenConfig {
    pub name: String,
    /// The bearer token (`${VAR}` is expanded).
    pub token: String,
    #[serde(default)]
    pub allow_tools: Option<Vec<String>>,
    #[serde(default)]
    pub deny_tools: Vec<String>,
    /// This principal's catalog settings over `[server.catalog]`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub catalog: Option<super::CatalogConfig>,
}

/// Who is calling. Over HTTP the guard sets it once it has checked the
/// request: the name of the `[[server.tokens]]` entry whose token was sent,
/// `default` for the single `server.http_token`, `local` when no token is
/// configured (loopback only). Over stdio it is always `local`. A name, never
/// a token: it is safe in logs, run records and admin output.
#[derive(Debug, Clone, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub struct Principal(Arc<str>);

impl Principal {
    pub const LOCAL: &str = "local";
    pub const DEFAULT: &str = "default";

    pub fn local() -> Self {
        Self(Self::LOCAL.into())
    }

    /// The holder of the single `server.http_token` (or `WF_HTTP_TOKEN`).
    pub fn bearer() -> Self {
        Self(Self::DEFAULT.into())
    }

    /// A `[[server.tokens]]` principal.
    pub fn named(name: &str) -> Self {
        Self(name.into())
    }

    pub fn name(&self) -> &str {
        &self.0
    }
}

impl std::fmt::Display for Principal {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(&self.0)
    }
}
