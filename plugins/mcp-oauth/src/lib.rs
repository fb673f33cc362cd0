//! OAuth 2.1 for upstream MCP servers, as the MCP authorization spec
//! describes it: what the mcp plugin's opener uses to attach tokens, and
//! what `wf auth login|status|logout` uses to get and show them.
//!
//! Tokens never leave this crate in text: errors carry no token, [`Summary`]
//! has none, and the store keeps them encrypted (see [`store`]).

pub mod flow;
pub mod loopback;
pub mod notes;
pub mod settings;
pub mod store;

use std::path::Path;

use rmcp::transport::auth::AuthError;
use serde::Serialize;

pub use notes::Notes;
pub use settings::{Grant, OAuthSettings};
pub use store::TokenFile;

#[derive(Debug, thiserror::Error)]
pub enum OAuthError {
    #[error("OAuth settings: {0}")]
    Config(String),
    #[error("authorization discovery failed: {0}")]
    Discovery(String),
    #[error(
        "the redirect's state does not match the one sent (a forged or stale redirect); nothing was stored"
    )]
    StateMismatch,
    #[error("authorization redirect: {0}")]
    Callback(String),
    #[error("token store: {0}")]
    Store(String),
    #[error("{0}")]
    Auth(String),
}

impl OAuthError {
    fn store(path: &Path, e: std::io::Error) -> Self {
        Self::Store(format!("{}: {e}", path.display()))
    }
}

impl From<AuthError> for OAuthError {
    fn from(e: AuthError) -> Self {
        // rmcp's messages name endpoints and OAuth error codes, never tokens.
        Self::Auth(e.to_string())
    }
}

/// What `wf auth status` shows of a source's stored credentials: never a token.
#[derive(Debug, Clone, Serialize)]
pub struct Summary {
    pub client_id: String,
    pub issuer: Option<String>,
    pub scopes: Vec<String>,
    /// Unix seconds when the access token expires, if the server said.
    pub expires_at: Option<u64>,
    pub has_access_token: bool,
    pub has_refresh_token: bool,
}

/// Plays the browser without one: follows the authorization endpoint's
/// redirect (an authorization server that approves without a person, as
/// test servers do) and returns where it points, the client's redirect URI
/// with `code` and `state`.
pub async fn follow_authorization_redirect(authorization_url: &str) -> Result<String, OAuthError> {
    let client = reqwest::Client::builder()
        .redirect(reqwest::redirect::Policy::none())
        .build()
        .map_err(|e| OAuthError::Callback(format!("cannot build an HTTP client: {e}")))?;
    let response = client.get(authorization_url).send().await.map_err(|e| {
        OAuthError::Callback(format!("authorization endpoint: {}", e.without_url()))
    })?;
    response
        .headers()
        .get(http::header::LOCATION)
        .and_then(|v| v.to_str().ok())
        .map(str::to_string)
        .ok_or_else(|| {
            OAuthError::Callback(format!(
                "the authorization endpoint answered {} without a redirect",
                response.status()
            ))
        })
}

/// Replaces every occurrence of each secret in `text` with `[REDACTED]`:
/// for messages that quote what an upstream said.
pub fn redact(text: &str, secrets: &[&str]) -> String {
    let mut out = text.to_string();
    for s in secrets.iter().filter(|s| s.len() >= 4) {
        out = out.replace(s, "[REDACTED]");
    }
    out
}

/// `text` with the source's stored tokens and its client secret blanked out:
/// for every message that quotes an upstream or authorization server.
pub fn redact_for(text: &str, store: &TokenFile, settings: &OAuthSettings) -> String {
    let mut secrets = store.secrets();
    secrets.extend(settings.client_secret.clone());
    let secrets: Vec<&str> = secrets.iter().map(String::as_str).collect();
    redact(text, &secrets)
}

#[cfg(test)]
mod tests;
