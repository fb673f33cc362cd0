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

use rmcp::service::ServiceError;
use rmcp::transport::auth::{AuthClient, AuthError};
use rmcp::transport::streamable_http_client::InsufficientScopeError;
use serde_json::json;
use wf_mcp_oauth::{Notes, OAuthSettings, TokenFile, flow};
use wf_plugin_api::{ErrorCode, PluginError};

use crate::config::McpConfig;
use crate::transport::http::WatchedHttp;

/// The word status and errors carry when a person must log in.
pub const NEEDS_LOGIN: &str = "needs_login";

/// The tokens of `source` live in its data dir (one set per source).
pub fn token_dir(data_dir: &Path) -> &Path {
    data_dir
}

/// The word of a call refused for a scope the token lacks (step-up).
pub const INSUFFICIENT_SCOPE: &str = "insufficient_scope";

/// Why a source whose token the upstream refused (after one refresh, or
/// whose refresh token was rejected) needs a login.
const REFUSED: &str = "the upstream refused the stored token and refreshing it did not help";

/// The configured name of `source`: a lease's runtime is `NAME#lease-N`
/// (lib.rs), and `wf auth` knows only NAME.
fn configured(source: &str) -> &str {
    source.split_once('#').map_or(source, |(name, _)| name)
}

/// An error that tells the operator to log in, with why.
pub fn needs_login(source: &str, why: impl std::fmt::Display) -> PluginError {
    let source = configured(source);
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
    let store = TokenFile::new(token_dir(dir)).on_secret(wf_plugin_api::redact_in_logs);
    if let Some(secret) = &settings.client_secret {
        wf_plugin_api::redact_in_logs(secret);
    }
    let failed = |what: &str, e: wf_mcp_oauth::OAuthError| {
        let why = wf_mcp_oauth::redact_for(&e.to_string(), &store, settings);
        PluginError::upstream(format!("{what}: {why}"))
    };
    let stored = flow::stored_manager(url, &store, settings)
        .await
        .map_err(|e| failed("OAuth", e))?;
    let manager = match stored {
        Some(m) => m,
        None if flow::is_machine(settings) => {
            flow::client_credentials(url, settings, &store)
                .await
                .map_err(|e| failed("OAuth client credentials", e))?;
            flow::stored_manager(url, &store, settings)
                .await
                .map_err(|e| failed("OAuth", e))?
                .ok_or_else(|| PluginError::upstream("OAuth: no tokens after client credentials"))?
        }
        None => return Err(needs_login(source, "not logged in")),
    };
    Ok(AuthClient::new(http, manager))
}

/// The token file of an OAuth source, if `config` is one.
fn store_of(config: &McpConfig) -> Option<(&OAuthSettings, TokenFile)> {
    let settings = config.auth.oauth.as_ref()?;
    let dir = config.token_dir.as_deref()?;
    Some((settings, TokenFile::new(token_dir(dir))))
}

/// `text` with the source's tokens and client secret blanked out (a no-op
/// for sources without OAuth): every error that quotes an upstream passes here.
pub fn redact(config: &McpConfig, text: &str) -> String {
    match store_of(config) {
        Some((settings, store)) => wf_mcp_oauth::redact_for(text, &store, settings),
        None => text.to_string(),
    }
}

/// Notes for `wf auth status` that the stored tokens no longer work, and
/// returns the error that says so (with the command to run).
pub fn refused(source: &str, config: &McpConfig) -> PluginError {
    if let Some((_, store)) = store_of(config)
        && let Err(e) = Notes::note_needs_login(store.dir(), REFUSED)
    {
        tracing::warn!(source, "cannot note that the source needs a login: {e}");
    }
    needs_login(source, REFUSED)
}

/// The error of a request an OAuth source's upstream refused, when that is
/// why it failed: `needs_login` for a token refused even after a refresh
/// (rmcp refreshes once on a 401, never more) or a rejected refresh token;
/// `insufficient_scope` for a 403 step-up challenge, whose scope is noted so
/// the next `wf auth login` asks for it too. Neither is retried here: the
/// call fails at once, so there is no loop to bound.
pub fn request_refused(source: &str, config: &McpConfig, e: &ServiceError) -> Option<PluginError> {
    config.auth.oauth.as_ref()?;
    let ServiceError::TransportSend(t) = e else {
        return None;
    };
    let mut cause: Option<&(dyn std::error::Error + 'static)> = Some(t.error.as_ref());
    while let Some(err) = cause {
        if let Some(scope) = err.downcast_ref::<InsufficientScopeError>() {
            return Some(step_up(source, config, scope.get_required_scope()));
        }
        if matches!(
            err.downcast_ref::<AuthError>(),
            Some(AuthError::TokenRefreshRejected(_) | AuthError::AuthorizationRequired)
        ) {
            return Some(refused(source, config));
        }
        cause = err.source();
    }
    e.is_authorization_required()
        .then(|| refused(source, config))
}

/// The error of a 403 `insufficient_scope`; notes `scope` for the next login.
fn step_up(source: &str, config: &McpConfig, scope: Option<&str>) -> PluginError {
    let source = configured(source);
    let Some(scope) = scope.filter(|s| !s.trim().is_empty()) else {
        return PluginError::new(
            ErrorCode::Upstream,
            format!(
                "{INSUFFICIENT_SCOPE}: the upstream refused this call for a scope the token lacks and did not say which; \
                 add it to `scopes` of sources.{source}.auth.oauth and run `wf auth login {source}`"
            ),
        );
    };
    let noted = match store_of(config) {
        Some((_, store)) => Notes::note_step_up(store.dir(), scope)
            .inspect_err(|e| tracing::warn!(source, "cannot note the step-up scope: {e}"))
            .ok(),
        None => None,
    };
    tracing::warn!(source, scope, "upstream asked for a larger scope (step-up)");
    let asks = match noted {
        Some(all) => format!(
            "the next login asks for it too (scopes noted: {})",
            all.join(" ")
        ),
        None => "add it to the source's `scopes`".to_string(),
    };
    PluginError::new(
        ErrorCode::Upstream,
        format!(
            "{INSUFFICIENT_SCOPE}: the upstream needs scope \"{scope}\" for this call; \
             run `wf auth login {source}` ({asks})"
        ),
    )
    .with_data(json!({"required_scope": scope}))
}

#[cfg(test)]
mod tests {
    use super::*;
    use rmcp::transport::DynamicTransportError;
    use rmcp::transport::streamable_http_client::{AuthRequiredError, StreamableHttpError};

    fn oauth_config(dir: &Path) -> McpConfig {
        let mut c = McpConfig::parse(
            "t",
            &json!({"url": "http://127.0.0.1:9/mcp", "auth": {"oauth": {}}}),
        )
        .unwrap();
        c.token_dir = Some(dir.to_path_buf());
        c
    }

    fn sent(e: StreamableHttpError<std::io::Error>) -> ServiceError {
        ServiceError::TransportSend(DynamicTransportError::from_parts(
            "test",
            std::any::TypeId::of::<()>(),
            Box::new(e),
        ))
    }

    #[test]
    fn a_refused_token_is_needs_login_and_noted_for_wf_auth_status() {
        let dir = tempfile::tempdir().unwrap();
        let config = oauth_config(dir.path());
        let e = sent(StreamableHttpError::AuthRequired(AuthRequiredError::new(
            "Bearer error=\"invalid_token\"".into(),
        )));
        let err = request_refused("sec#lease-3", &config, &e).unwrap();
        assert!(err.message.starts_with(NEEDS_LOGIN), "{err}");
        assert!(err.message.contains("run `wf auth login sec`"), "{err}");
        assert_eq!(
            Notes::load(dir.path()).needs_login.as_deref(),
            Some(REFUSED)
        );
    }

    #[test]
    fn a_step_up_names_the_scope_notes_it_and_is_not_needs_login() {
        let dir = tempfile::tempdir().unwrap();
        let config = oauth_config(dir.path());
        let e = sent(StreamableHttpError::InsufficientScope(
            InsufficientScopeError::new(
                "Bearer error=\"insufficient_scope\", scope=\"mcp admin\"".into(),
                Some("mcp admin".into()),
            ),
        ));
        let err = request_refused("sec", &config, &e).unwrap();
        assert!(err.message.starts_with(INSUFFICIENT_SCOPE), "{err}");
        assert!(err.message.contains("\"mcp admin\""), "{err}");
        assert!(err.message.contains("wf auth login sec"), "{err}");
        let notes = Notes::load(dir.path());
        assert_eq!(notes.step_up_scopes, ["mcp", "admin"]);
        assert!(notes.needs_login.is_none());
    }

    #[test]
    fn other_failures_and_sources_without_oauth_are_left_alone() {
        let dir = tempfile::tempdir().unwrap();
        let config = oauth_config(dir.path());
        let e = sent(StreamableHttpError::SessionExpired);
        assert!(request_refused("sec", &config, &e).is_none());
        let plain = McpConfig::parse("t", &json!({"url": "http://127.0.0.1:9/mcp"})).unwrap();
        let e = sent(StreamableHttpError::AuthRequired(AuthRequiredError::new(
            "Bearer".into(),
        )));
        assert!(request_refused("sec", &plain, &e).is_none());
    }
}
