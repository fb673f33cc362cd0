//! `[[server.tokens]]`: named principals over HTTP.

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
}
