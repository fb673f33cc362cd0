//! OAuth in the opener: an HTTP source with `auth.oauth` gets its requests
//! through rmcp's `AuthClient`, which attaches the stored access token,
//! refreshes it before expiry and once on a 401, and saves what it gets
//! back into the source's encrypted token file (wf_mcp_oauth).
//!
//! No stored tokens (or a refresh the server refuses) is `needs_login`: the
//! source's open fails with that word and the command to run, alone — other
//! sources open as usual. Tokens are per source; a downstream client's token
//! is never forwarded (the opener has none to forward). Per-principal upstream
//! tokens would key [`token_dir`] by principal: the one seam to change.

use std::path::Path;

use rmcp::transport::auth::AuthClient;
use serde_json::{Value, json};
use wf_mcp_oauth::{OAuthSettings, TokenFile, flow};
use wf_plugin_api::{ErrorCode, PluginError};

use crate::http::WatchedHttp;

/// The word status and errors carry when a person must log in.
pub const NEEDS_LOGIN: &str = "needs_login";

pub fn settings_schema() -> Value {
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

/// The tokens of `source` live in its data dir (one set per source).
pub fn token_dir(data_dir: &Path) -> &Path {
    data_dir
}

/// An error that tells the operator to log in, with why.
pub fn needs_login(source: &str, why: impl std::fmt::Display) -> PluginError {
    PluginError::new(
        ErrorCode::Upstream,
        format!("{NEEDS_LOGIN}: {why}; run `wf auth login {source}`"),
    )
}

/// The HTTP client of an OAuth source: tokens from its store, or from a
/// client-credentials exchange for machine sources.
pub async fn authorized_client(
    source: &str,
    url: &str,
    settings: &OAuthSettings,
    data_dir: Option<&Path>,
    http: WatchedHttp,
) -> Result<AuthClient<WatchedHttp>, PluginError> {
    let dir = data_dir.ok_or_else(|| PluginError::internal("an OAuth source needs a data dir"))?;
    let store = TokenFile::new(token_dir(dir));
    let stored = flow::stored_manager(url, &store)
        .await
        .map_err(|e| PluginError::upstream(format!("OAuth: {e}")))?;
    let manager = match stored {
        Some(m) => m,
        None if flow::is_machine(settings) => {
            flow::client_credentials(url, settings, &store)
                .await
                .map_err(|e| PluginError::upstream(format!("OAuth client credentials: {e}")))?;
            flow::stored_manager(url, &store)
                .await
                .map_err(|e| PluginError::upstream(format!("OAuth: {e}")))?
                .ok_or_else(|| PluginError::upstream("OAuth: no tokens after client credentials"))?
        }
        None => return Err(needs_login(source, "not logged in")),
    };
    Ok(AuthClient::new(http, manager))
}
