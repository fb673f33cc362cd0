//! `[server.oauth]`: wf as an OAuth 2.1 resource server over HTTP (the MCP
//! authorization spec). People sign in at the operator's identity provider;
//! wf checks the access tokens their clients send and names the principal
//! and its groups from the token's claims.

use serde::{Deserialize, Serialize};

/// The authorization server wf trusts and what its tokens must say.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct OAuthConfig {
    /// The issuer (`iss`) of the tokens wf accepts. Its metadata (RFC 8414
    /// `/.well-known/oauth-authorization-server`, else OpenID Connect
    /// discovery) names its JWKS. `https`, or `http` on a loopback address.
    pub issuer: String,
    /// This server's resource identifier: the absolute URL clients use for
    /// `/mcp` (e.g. `https://wf.example.com/mcp`). Tokens must name it in
    /// `aud` (RFC 8707); the protected resource metadata says it.
    pub resource: String,
    /// Scopes every token must carry (`scope` or `scp`); listed as
    /// `scopes_supported`. Empty: none required.
    #[serde(default)]
    pub scopes: Vec<String>,
    /// The claim that names the principal (`sub`, `email`,
    /// `preferred_username`...).
    #[serde(default = "default_principal_claim")]
    pub principal_claim: String,
    /// The claim that carries the person's groups or roles (an array of
    /// strings, or one string).
    #[serde(default = "default_groups_claim")]
    pub groups_claim: String,
    /// Clock skew allowed on `exp` and `nbf` (seconds).
    #[serde(default = "default_leeway_s")]
    pub leeway_s: u64,
    /// How long the issuer's keys are trusted before wf fetches them again
    /// in the background (seconds). An unknown `kid` fetches them at once,
    /// at most once per `jwks_min_refetch_s`.
    #[serde(default = "default_jwks_refresh_s")]
    pub jwks_refresh_s: u64,
    #[serde(default = "default_jwks_min_refetch_s")]
    pub jwks_min_refetch_s: u64,
    /// How long a fetch from the issuer (metadata, keys, introspection) may take.
    #[serde(default = "default_fetch_timeout_ms")]
    pub fetch_timeout_ms: u64,
    /// RFC 7662 introspection for tokens that are not JWTs (opaque tokens).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub introspection: Option<IntrospectionConfig>,
    /// The console's "Sign in with `<issuer>`" (OpenID Connect code flow with
    /// PKCE): the client wf registered at the issuer for it.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub console: Option<ConsoleClientConfig>,
    /// What each group gets; a person in several gets the union of what
    /// their groups allow minus anything any of them denies. A person in
    /// no listed group may use no tool.
    #[serde(default)]
    pub groups: Vec<GroupConfig>,
}

/// `[server.oauth.introspection]`: RFC 7662, with wf as a client of the
/// authorization server.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct IntrospectionConfig {
    /// Unset: the issuer metadata's `introspection_endpoint`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub url: Option<String>,
    pub client_id: String,
    /// `${VAR}` is expanded.
    pub client_secret: String,
}

/// `[server.oauth.console]`: the console's OpenID Connect client.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct ConsoleClientConfig {
    pub client_id: String,
    /// `${VAR}` is expanded; unset for a public client (PKCE only).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub client_secret: Option<String>,
    /// Where the issuer sends the browser back: the absolute URL of
    /// `/console/oidc/callback` as browsers reach wf. Unset: that path on
    /// the origin of `resource`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub redirect_uri: Option<String>,
    /// The scopes asked for (`openid` is always asked for); the principal
    /// and groups claims must come in the ID token.
    #[serde(default = "default_console_scopes")]
    pub scopes: Vec<String>,
}

fn default_console_scopes() -> Vec<String> {
    vec!["openid".into()]
}

/// `[[server.oauth.groups]]`: what the members of one group may see.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct GroupConfig {
    /// The group's name as the groups claim carries it.
    pub name: String,
    /// Globs on client-visible tool names (unset: every tool).
    #[serde(default)]
    pub allow_tools: Option<Vec<String>>,
    #[serde(default)]
    pub deny_tools: Vec<String>,
    /// The catalog settings of this group's members over `[server.catalog]`
    /// (the first of a person's groups, in this list's order, that sets one).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub catalog: Option<super::CatalogConfig>,
}

fn default_principal_claim() -> String {
    "sub".into()
}
fn default_groups_claim() -> String {
    "groups".into()
}
fn default_leeway_s() -> u64 {
    30
}
fn default_jwks_refresh_s() -> u64 {
    3600
}
fn default_jwks_min_refetch_s() -> u64 {
    30
}
fn default_fetch_timeout_ms() -> u64 {
    5000
}
