//! Credentials on a request, and the OAuth 2 client-credentials token
//! (fetched on first use, kept until shortly before it expires).

use std::time::{Duration, Instant};

use base64::Engine as _;
use serde_json::Value;
use tokio::sync::Mutex;

use crate::http::{Body, Client, error_text, read_bounded};
use crate::settings::Auth;

/// Renew a token this long before it expires.
const EARLY: Duration = Duration::from_secs(30);

#[derive(Default)]
pub struct TokenCache {
    token: Mutex<Option<(String, Option<Instant>)>>,
}

impl TokenCache {
    /// Forgets the token (the API refused it).
    pub async fn clear(&self) {
        *self.token.lock().await = None;
    }

    async fn get(&self, auth: &Auth, client: &Client) -> Result<String, String> {
        let Auth::ClientCredentials {
            token_url,
            client_id,
            client_secret,
            scopes,
        } = auth
        else {
            return Err("not an OAuth source".into());
        };
        let mut slot = self.token.lock().await;
        if let Some((token, expires)) = &*slot
            && expires.is_none_or(|at| Instant::now() + EARLY < at)
        {
            return Ok(token.clone());
        }
        let mut form = vec![("grant_type", "client_credentials".to_string())];
        if !scopes.is_empty() {
            form.push(("scope", scopes.join(" ")));
        }
        let body = form
            .iter()
            .map(|(k, v)| {
                format!(
                    "{k}={}",
                    crate::serialize::form_body(&Value::String(v.clone()))
                )
            })
            .collect::<Vec<_>>()
            .join("&");
        let response = client
            .inner
            .post(token_url)
            .basic_auth(client_id, Some(client_secret))
            .header(
                reqwest::header::CONTENT_TYPE,
                "application/x-www-form-urlencoded",
            )
            .header(reqwest::header::ACCEPT, "application/json")
            .body(body)
            .timeout(Duration::from_secs(30))
            .send()
            .await
            .map_err(|e| format!("token request failed: {}", error_text(e)))?;
        let status = response.status();
        let bytes = match read_bounded(response, 64 * 1024)
            .await
            .map_err(|e| format!("token response: {e}"))?
        {
            Body::Whole(b) => b,
            Body::Cut { .. } => return Err("token response over 64 KiB".into()),
        };
        if !status.is_success() {
            return Err(format!(
                "the token endpoint answered {status}: {}",
                String::from_utf8_lossy(&bytes)
                    .chars()
                    .take(300)
                    .collect::<String>()
            ));
        }
        let v: Value = serde_json::from_slice(&bytes)
            .map_err(|e| format!("the token response is not JSON: {e}"))?;
        let token = v
            .get("access_token")
            .and_then(Value::as_str)
            .ok_or("the token response has no access_token")?
            .to_string();
        wf_plugin_api::redact_in_logs(&token);
        let expires = v
            .get("expires_in")
            .and_then(Value::as_u64)
            .map(|s| Instant::now() + Duration::from_secs(s));
        *slot = Some((token.clone(), expires));
        Ok(token)
    }
}

/// Adds encoded `name=value` pairs to a URL's query (after any it has).
pub fn append_query(url: &mut url::Url, pairs: &[String]) {
    if pairs.is_empty() {
        return;
    }
    let q = url
        .query()
        .map(str::to_string)
        .into_iter()
        .chain(pairs.iter().cloned())
        .collect::<Vec<_>>()
        .join("&");
    url.set_query(Some(&q));
}

/// Adds the source's credentials to a request; `query` gets an API key
/// that travels in the query string.
pub async fn apply(
    auth: &Auth,
    cache: &TokenCache,
    client: &Client,
    request: reqwest::RequestBuilder,
    query: &mut Vec<String>,
) -> Result<reqwest::RequestBuilder, String> {
    Ok(match auth {
        Auth::None => request,
        Auth::Bearer(token) => request.bearer_auth(token),
        Auth::ApiKeyHeader { name, value } => request.header(name.as_str(), value.as_str()),
        Auth::ApiKeyQuery { name, value } => {
            query.push(format!(
                "{}={}",
                crate::serialize::form_body(&Value::String(name.clone())),
                crate::serialize::form_body(&Value::String(value.clone()))
            ));
            request
        }
        Auth::Basic { username, password } => {
            let raw = format!("{username}:{password}");
            let encoded = base64::engine::general_purpose::STANDARD.encode(raw);
            request.header(reqwest::header::AUTHORIZATION, format!("Basic {encoded}"))
        }
        Auth::ClientCredentials { .. } => request.bearer_auth(cache.get(auth, client).await?),
    })
}
