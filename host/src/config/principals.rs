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
    /// Groups this principal is in for policies (`wf::Group::"…"`) and
    /// `[[quotas]] group`; its tool lists stay `allow_tools` / `deny_tools`.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub groups: Vec<String>,
    /// This principal's catalog settings over `[server.catalog]`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub catalog: Option<super::CatalogConfig>,
}

/// Who is calling. Over HTTP the guard sets it once it has checked the
/// request: the name of the `[[server.tokens]]` entry whose token was sent,
/// `default` for the single `server.http_token`, the principal claim of an
/// OAuth access token (`[server.oauth]`, with the token's groups), `local`
/// when no token is configured (loopback only). Over stdio it is always
/// `local`. A name, never a token: it is safe in logs, run records and admin
/// output. Two principals are the same when their names are.
#[derive(Debug, Clone)]
pub struct Principal {
    name: Arc<str>,
    /// The groups an OAuth token named (`None`: not an OAuth principal).
    groups: Option<Arc<[Arc<str>]>>,
    /// The groups a `[[server.tokens]]` entry names (policies and quotas only).
    token_groups: Option<Arc<[Arc<str>]>>,
}

impl PartialEq for Principal {
    fn eq(&self, other: &Self) -> bool {
        self.name == other.name
    }
}
impl Eq for Principal {}
impl std::hash::Hash for Principal {
    fn hash<H: std::hash::Hasher>(&self, state: &mut H) {
        self.name.hash(state)
    }
}
impl PartialOrd for Principal {
    fn partial_cmp(&self, other: &Self) -> Option<std::cmp::Ordering> {
        Some(self.cmp(other))
    }
}
impl Ord for Principal {
    fn cmp(&self, other: &Self) -> std::cmp::Ordering {
        self.name.cmp(&other.name)
    }
}

impl Principal {
    pub const LOCAL: &str = "local";
    pub const DEFAULT: &str = "default";

    pub fn local() -> Self {
        Self::named(Self::LOCAL)
    }

    /// The holder of the single `server.http_token` (or `WF_HTTP_TOKEN`).
    pub fn bearer() -> Self {
        Self::named(Self::DEFAULT)
    }

    /// A `[[server.tokens]]` principal.
    pub fn named(name: &str) -> Self {
        Self {
            name: name.into(),
            groups: None,
            token_groups: None,
        }
    }

    /// A `[[server.tokens]]` principal in `groups` (for policies and quotas;
    /// its tool lists are its own, not its groups').
    pub fn named_in(name: &str, groups: &[String]) -> Self {
        Self {
            token_groups: (!groups.is_empty())
                .then(|| groups.iter().map(|g| Arc::from(g.as_str())).collect()),
            ..Self::named(name)
        }
    }

    /// A person an OAuth access token named, in `groups`.
    pub fn with_groups(name: &str, groups: Vec<String>) -> Self {
        Self {
            name: name.into(),
            groups: Some(groups.into_iter().map(Arc::from).collect()),
            token_groups: None,
        }
    }

    pub fn name(&self) -> &str {
        &self.name
    }

    /// The groups of an OAuth principal; `None` for every other one.
    pub fn groups(&self) -> Option<&[Arc<str>]> {
        self.groups.as_deref()
    }

    /// Every group it is in, as policies and quotas see them: an OAuth
    /// principal's token groups, or a static token's configured ones.
    pub fn member_groups(&self) -> &[Arc<str>] {
        self.groups
            .as_deref()
            .or(self.token_groups.as_deref())
            .unwrap_or_default()
    }
}

impl std::fmt::Display for Principal {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(&self.name)
    }
}
