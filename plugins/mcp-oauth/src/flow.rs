//! Getting tokens, per the MCP authorization spec. rmcp's `auth` module does
//! the protocol steps: RFC 9728 protected resource metadata (from the 401's
//! `WWW-Authenticate` first), RFC 8414 / OpenID Connect discovery, the issuer
//! and resource checks, registration (pre-registered, CIMD, RFC 7591 DCR),
//! PKCE S256, the `resource` parameter (RFC 8707), the code exchange, refresh
//! and client credentials. wf adds the unauthenticated probe that gets the
//! challenge, the `state` check at its own redirect, the encrypted store and
//! the summary that never holds a token.

use rmcp::transport::auth::{
    AuthorizationManager, AuthorizationRequest, AuthorizationSession, ClientCredentialsConfig,
    OAuthClientConfig, StoredCredentials,
};

use crate::notes::{Notes, union_into};
use crate::settings::{Grant, OAuthSettings};
use crate::store::TokenFile;
use crate::{OAuthError, Summary};

/// The client name sent with dynamic registration by default.
const CLIENT_NAME: &str = "wf";

/// The `WWW-Authenticate` challenge of an unauthenticated `initialize`, if
/// the server answers 401 (or 403) with one.
pub async fn probe(url: &str) -> Result<Option<String>, OAuthError> {
    let body = serde_json::json!({
        "jsonrpc": "2.0", "id": 0, "method": "initialize",
        "params": {"protocolVersion": "2025-11-25", "capabilities": {},
                   "clientInfo": {"name": "wf", "version": env!("CARGO_PKG_VERSION")}}
    });
    let response = reqwest::Client::new()
        .post(url)
        .header(http::header::ACCEPT, "application/json, text/event-stream")
        .header(http::header::CONTENT_TYPE, "application/json")
        .body(body.to_string())
        .send()
        .await
        .map_err(|e| {
            OAuthError::Discovery(format!("cannot reach the server: {}", e.without_url()))
        })?;
    let status = response.status();
    if status != http::StatusCode::UNAUTHORIZED && status != http::StatusCode::FORBIDDEN {
        return Ok(None);
    }
    Ok(response
        .headers()
        .get(http::header::WWW_AUTHENTICATE)
        .and_then(|v| v.to_str().ok())
        .map(str::to_string))
}

/// An authorization manager for `url` with the source's token file as its
/// store and the authorization server discovered from `challenge`.
pub async fn discover(
    url: &str,
    store: &TokenFile,
    challenge: Option<&str>,
) -> Result<AuthorizationManager, OAuthError> {
    let mut manager = AuthorizationManager::new(url).await?;
    manager.set_credential_store(store.clone());
    let resolution = manager.resolve_metadata_from_challenge(challenge).await?;
    manager.set_metadata(resolution.metadata);
    Ok(manager)
}

/// A manager loaded from the store, for serving: `None` when no tokens are
/// stored (the source needs a login, or a client-credentials exchange).
pub async fn stored_manager(
    url: &str,
    store: &TokenFile,
    settings: &OAuthSettings,
) -> Result<Option<AuthorizationManager>, OAuthError> {
    store.check_permissions()?;
    if !store.exists() {
        return Ok(None);
    }
    let mut manager = AuthorizationManager::new(url).await?;
    manager.set_credential_store(store.clone());
    if !manager.initialize_from_store().await? {
        return Ok(None);
    }
    // rmcp restores only the client id from the store: a confidential
    // pre-registered client must authenticate its refreshes with its secret,
    // or the server refuses them and the source falls to `needs_login`.
    if let Some(config) = confidential_client(url, settings) {
        manager.configure_client(config)?;
    }
    Ok(Some(manager))
}

/// The client configuration that carries a pre-registered client's secret.
fn confidential_client(url: &str, settings: &OAuthSettings) -> Option<OAuthClientConfig> {
    let (Some(id), Some(secret)) = (&settings.client_id, &settings.client_secret) else {
        return None;
    };
    let mut config = OAuthClientConfig::new(id.clone(), url);
    config.client_secret = Some(secret.clone());
    Some(config)
}

/// A login under way: the URL to open, and what the redirect must carry.
pub struct PendingLogin {
    session: AuthorizationSession,
    state: String,
}

impl PendingLogin {
    pub fn authorization_url(&self) -> &str {
        self.session.get_authorization_url()
    }

    /// Exchanges the code of the redirect `callback` for tokens, after checking
    /// its `state` against the one sent; the tokens land in the store.
    pub async fn finish(self, callback: &str, store: &TokenFile) -> Result<Summary, OAuthError> {
        let parsed = url::Url::parse(callback)
            .map_err(|_| OAuthError::Callback("the redirect is not a URL".into()))?;
        let query: std::collections::HashMap<_, _> = parsed.query_pairs().into_owned().collect();
        if let Some(error) = query.get("error") {
            return Err(OAuthError::Callback(format!(
                "the authorization server refused: {error}"
            )));
        }
        if query.get("state") != Some(&self.state) {
            return Err(OAuthError::StateMismatch);
        }
        self.session.handle_callback_url(callback).await?;
        let summary =
            summary(store)?.ok_or_else(|| OAuthError::Store("no tokens were stored".into()))?;
        // The refusal and step-up noted while serving are answered by this login.
        Notes::clear(store.dir())?;
        Ok(summary)
    }
}

/// Starts an authorization-code login: probe, discovery, registration, the
/// authorization URL (PKCE S256, `state`, `resource`). `challenge` is a
/// 401/403 challenge already in hand (step-up); without it wf probes.
pub async fn begin_login(
    url: &str,
    settings: &OAuthSettings,
    store: &TokenFile,
    redirect_uri: &str,
    challenge: Option<String>,
) -> Result<PendingLogin, OAuthError> {
    let challenge = match challenge {
        Some(c) => Some(c),
        None => probe(url).await?,
    };
    let manager = discover(url, store, challenge.as_deref()).await?;
    let mut request = AuthorizationRequest::new(redirect_uri)
        .with_client_name(settings.client_name.as_deref().unwrap_or(CLIENT_NAME));
    let step_up = Notes::load(store.dir()).step_up_scopes;
    request = if !step_up.is_empty() {
        // A step-up while serving: what this login would ask for anyway,
        // what was granted before, and the scopes the 403s named.
        let mut scopes = if settings.scopes.is_empty() {
            manager.select_initial_scopes(&[]).await
        } else {
            settings.scopes.clone()
        };
        if let Some(s) = summary(store).ok().flatten() {
            union_into(&mut scopes, s.scopes.iter().map(String::as_str));
        }
        union_into(&mut scopes, step_up.iter().map(String::as_str));
        tracing::info!(scopes = %scopes.join(" "), "asking for the scopes a step-up needs too");
        request.with_scopes(scopes)
    } else if settings.scopes.is_empty() {
        request.with_initial_scope_selection()
    } else {
        request.with_scopes(settings.scopes.iter().cloned())
    };
    if let Some(c) = &challenge {
        request = request.with_challenge(c.clone());
    }
    if let Some(id) = &settings.client_id {
        request = request.with_preregistered_client(id.clone());
        if let Some(secret) = &settings.client_secret {
            request = request.with_client_secret(secret.clone());
        }
    }
    if let Some(cimd) = &settings.client_metadata_url {
        request = request.with_client_metadata_url(cimd.clone());
    }
    let session = AuthorizationSession::new(manager, request)
        .await
        .map_err(|(_, e)| OAuthError::from(e))?;
    let state = url::Url::parse(session.get_authorization_url())
        .ok()
        .and_then(|u| {
            u.query_pairs()
                .find(|(k, _)| k == "state")
                .map(|(_, v)| v.into_owned())
        })
        .ok_or_else(|| OAuthError::Discovery("the authorization URL carries no state".into()))?;
    Ok(PendingLogin { session, state })
}

/// Machine to machine: tokens from the client id/secret, no human step.
pub async fn client_credentials(
    url: &str,
    settings: &OAuthSettings,
    store: &TokenFile,
) -> Result<Summary, OAuthError> {
    let (Some(client_id), Some(client_secret)) = (&settings.client_id, &settings.client_secret)
    else {
        return Err(OAuthError::Config(
            "grant = \"client_credentials\" needs client_id and client_secret".into(),
        ));
    };
    let challenge = probe(url).await?;
    let mut manager = discover(url, store, challenge.as_deref()).await?;
    let config = ClientCredentialsConfig::ClientSecret {
        client_id: client_id.clone(),
        client_secret: client_secret.clone(),
        scopes: settings.scopes.clone(),
        resource: Some(url.to_string()),
    };
    manager.configure_client_credentials(&config)?;
    let response = manager.exchange_client_credentials(&config).await?;
    let scopes = settings.scopes.clone();
    store.write(&StoredCredentials::new(
        client_id.clone(),
        Some(response),
        scopes,
        Some(now()),
    ))?;
    Notes::clear(store.dir())?;
    summary(store)?.ok_or_else(|| OAuthError::Store("no tokens were stored".into()))
}

/// Whether the source gets its tokens without a person.
pub fn is_machine(settings: &OAuthSettings) -> bool {
    settings.grant == Grant::ClientCredentials
}

/// What is stored for a source, without any token.
pub fn summary(store: &TokenFile) -> Result<Option<Summary>, OAuthError> {
    let Some(creds) = store.read()? else {
        return Ok(None);
    };
    let response = creds
        .token_response
        .as_ref()
        .and_then(|r| serde_json::to_value(r).ok())
        .unwrap_or_default();
    let expires_at = match (response["expires_in"].as_u64(), creds.token_received_at) {
        (Some(secs), Some(at)) => Some(at + secs),
        _ => None,
    };
    let mut scopes = creds.granted_scopes.clone();
    if scopes.is_empty()
        && let Some(s) = response["scope"].as_str()
    {
        scopes = s.split_whitespace().map(str::to_string).collect();
    }
    Ok(Some(Summary {
        client_id: creds.client_id.clone(),
        issuer: creds.issuer.clone(),
        scopes,
        expires_at,
        has_access_token: creds.token_response.is_some(),
        has_refresh_token: response["refresh_token"].is_string(),
    }))
}

pub fn now() -> u64 {
    std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map(|d| d.as_secs())
        .unwrap_or(0)
}

/// Revokes the stored tokens at the authorization server (RFC 7009) when it
/// advertises a `revocation_endpoint`: the refresh token, then the access
/// token. Written by hand (rmcp has no revocation). Returns whether the server
/// offered revocation; the caller deletes the file either way.
pub async fn revoke(
    url: &str,
    settings: &OAuthSettings,
    store: &TokenFile,
) -> Result<bool, OAuthError> {
    let Some(creds) = store.read()? else {
        return Ok(false);
    };
    let challenge = probe(url).await?;
    let manager = AuthorizationManager::new(url).await?;
    let metadata = manager
        .resolve_metadata_from_challenge(challenge.as_deref())
        .await?
        .metadata;
    let Some(endpoint) = metadata
        .additional_fields
        .get("revocation_endpoint")
        .and_then(|v| v.as_str())
    else {
        return Ok(false);
    };
    let response = creds
        .token_response
        .as_ref()
        .and_then(|r| serde_json::to_value(r).ok())
        .unwrap_or_default();
    let client = reqwest::Client::builder()
        .redirect(reqwest::redirect::Policy::none())
        .build()
        .map_err(|e| OAuthError::Auth(format!("cannot build an HTTP client: {e}")))?;
    for hint in ["refresh_token", "access_token"] {
        let Some(token) = response[hint].as_str() else {
            continue;
        };
        let mut form = vec![("token", token), ("token_type_hint", hint)];
        form.push(("client_id", creds.client_id.as_str()));
        if let Some(secret) = &settings.client_secret {
            form.push(("client_secret", secret.as_str()));
        }
        let status = client
            .post(endpoint)
            .header(
                http::header::CONTENT_TYPE,
                "application/x-www-form-urlencoded",
            )
            .body(
                url::form_urlencoded::Serializer::new(String::new())
                    .extend_pairs(form)
                    .finish(),
            )
            .send()
            .await
            .map_err(|e| OAuthError::Auth(format!("revocation: {}", e.without_url())))?
            .status();
        if !status.is_success() {
            return Err(OAuthError::Auth(format!(
                "the revocation endpoint answered {status}"
            )));
        }
    }
    Ok(true)
}
