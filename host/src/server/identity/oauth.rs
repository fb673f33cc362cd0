//! wf as an OAuth 2.1 resource server (`[server.oauth]`): the protected
//! resource metadata (RFC 9728) and the check of each access token, as a JWT
//! against the issuer's keys or, for opaque tokens, by introspection
//! (RFC 7662). The token names the principal and its groups.
//!
//! The issuer's keys are fetched off the request path (at start and then in
//! the background); a token signed with a key wf does not know fetches them
//! once more (at most once per `jwks_min_refetch_s`), then is refused. Every
//! fetch is bounded in time and size. A client's token is only ever checked
//! here: it is never passed to an upstream.

use std::collections::HashMap;
use std::sync::{Arc, PoisonError, RwLock};
use std::time::{Duration, Instant};

use axum::http::StatusCode;
use jsonwebtoken::jwk::JwkSet;
use jsonwebtoken::{Algorithm, DecodingKey, Validation};
use serde_json::Value;

use super::limits::Principal;
use super::oauth_cache::CheckedTokens;
use crate::config::{OAuthConfig, expand_env};

/// Largest metadata or key set document read from the issuer.
const MAX_DOC_BYTES: usize = 256 * 1024;
/// Most keys kept from one key set.
const MAX_KEYS: usize = 64;
/// Longest principal name and group name taken from a token.
const MAX_NAME_CHARS: usize = 256;
/// Most JWTs remembered as checked (a client sends its token with every
/// request; its signature is checked once).
const MAX_CACHED: usize = 4096;
/// Most groups taken from one token.
const MAX_GROUPS: usize = 128;
/// The signature algorithms wf accepts (asymmetric only: never `none`,
/// never an HMAC that a public key could be abused as the secret of).
const ALGORITHMS: [Algorithm; 9] = [
    Algorithm::RS256,
    Algorithm::RS384,
    Algorithm::RS512,
    Algorithm::PS256,
    Algorithm::PS384,
    Algorithm::PS512,
    Algorithm::ES256,
    Algorithm::ES384,
    Algorithm::EdDSA,
];

#[derive(Debug, thiserror::Error)]
pub enum OAuthError {
    #[error("server.oauth.{key}: {message}")]
    Config { key: &'static str, message: String },
    #[error("{url}: {message}")]
    Fetch { url: String, message: String },
}

fn config_error(key: &'static str, message: impl Into<String>) -> OAuthError {
    OAuthError::Config {
        key,
        message: message.into(),
    }
}

/// Why a token was refused: the status, the `error` of the
/// `WWW-Authenticate` challenge, and the reason (for the log; never the token).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Refusal {
    pub status: StatusCode,
    pub error: &'static str,
    pub reason: String,
}

fn invalid(reason: impl Into<String>) -> Refusal {
    Refusal {
        status: StatusCode::UNAUTHORIZED,
        error: "invalid_token",
        reason: reason.into(),
    }
}

/// What the issuer's metadata says wf needs.
#[derive(Debug, Clone, Default)]
pub struct IssuerMetadata {
    pub jwks_uri: Option<String>,
    pub introspection_endpoint: Option<String>,
    pub authorization_endpoint: Option<String>,
    pub token_endpoint: Option<String>,
}

/// The console's OpenID Connect client (`[server.oauth.console]`), checked.
#[derive(Clone)]
pub struct ConsoleClient {
    pub client_id: String,
    /// Expanded; `None` for a public client.
    pub client_secret: Option<String>,
    pub redirect_uri: String,
    /// Always with `openid`.
    pub scopes: Vec<String>,
}

impl std::fmt::Debug for ConsoleClient {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("ConsoleClient")
            .field("client_id", &self.client_id)
            .field("redirect_uri", &self.redirect_uri)
            .finish_non_exhaustive()
    }
}

/// The path the console's sign-in comes back to.
pub const CONSOLE_CALLBACK_PATH: &str = "/console/oidc/callback";

struct KeySet {
    by_kid: HashMap<String, (DecodingKey, Option<Algorithm>)>,
    /// Keys without a `kid`, tried for a token whose header names none.
    anonymous: Vec<(DecodingKey, Option<Algorithm>)>,
}

/// The checked settings: what a token must say and where the keys are.
pub struct OAuthVerifier {
    issuer: String,
    resource: String,
    scopes: Vec<String>,
    principal_claim: String,
    groups_claim: String,
    leeway: u64,
    refresh: Duration,
    min_refetch: Duration,
    introspection: Option<(Option<String>, String, String)>,
    console: Option<ConsoleClient>,
    metadata_url: String,
    metadata_path: String,
    http: reqwest::Client,
    issuer_metadata: RwLock<Option<IssuerMetadata>>,
    keys: RwLock<Arc<KeySet>>,
    /// One fetch of the keys at a time.
    fetching: tokio::sync::Mutex<()>,
    /// When a token with an unknown `kid` last fetched them.
    last_refetch: std::sync::Mutex<Option<Instant>>,
    /// JWTs already checked (`CheckedTokens`). Cleared when the keys
    /// change.
    checked: std::sync::Mutex<CheckedTokens>,
}

/// `https`, or `http` to a loopback address.
fn check_url(url: &str, key: &'static str) -> Result<url::Url, OAuthError> {
    let u = url::Url::parse(url).map_err(|e| config_error(key, format!("{url:?}: {e}")))?;
    let loopback = match u.host() {
        Some(url::Host::Domain(d)) => d == "localhost",
        Some(url::Host::Ipv4(ip)) => ip.is_loopback(),
        Some(url::Host::Ipv6(ip)) => ip.is_loopback(),
        None => false,
    };
    match u.scheme() {
        "https" => {}
        "http" if loopback => {}
        _ => {
            return Err(config_error(
                key,
                format!("{url:?} must be an https URL (http only on a loopback address)"),
            ));
        }
    }
    if u.fragment().is_some() || u.query().is_some() || !u.username().is_empty() {
        return Err(config_error(
            key,
            format!("{url:?} must not carry a query, fragment or user"),
        ));
    }
    Ok(u)
}

fn secret(raw: &str, key: &'static str) -> Result<String, OAuthError> {
    let v = expand_env(&Value::String(raw.into()), key, &|k| std::env::var(k).ok())
        .map_err(|e| config_error(key, e.to_string()))?;
    Ok(v.as_str().unwrap_or_default().to_string())
}

impl OAuthVerifier {
    /// Checks the settings; fetches nothing (see [`Self::start`]).
    pub fn new(c: &OAuthConfig) -> Result<Self, OAuthError> {
        check_url(&c.issuer, "issuer")?;
        let resource = check_url(&c.resource, "resource")?;
        for (key, v) in [
            ("principal_claim", &c.principal_claim),
            ("groups_claim", &c.groups_claim),
        ] {
            if v.is_empty() {
                return Err(config_error(key, "must name a claim"));
            }
        }
        if let Some(s) = c.scopes.iter().find(|s| {
            s.is_empty()
                || !s
                    .bytes()
                    .all(|b| b.is_ascii_graphic() && b != b'"' && b != b'\\')
        }) {
            return Err(config_error("scopes", format!("{s:?} is not a scope")));
        }
        if c.jwks_refresh_s == 0 || c.fetch_timeout_ms == 0 {
            return Err(config_error(
                "jwks_refresh_s",
                "jwks_refresh_s and fetch_timeout_ms must be greater than 0",
            ));
        }
        let mut seen = std::collections::HashSet::new();
        for g in &c.groups {
            if g.name.is_empty() || !seen.insert(g.name.as_str()) {
                return Err(config_error(
                    "groups",
                    format!("group name {:?} is empty or used twice", g.name),
                ));
            }
        }
        let introspection = match &c.introspection {
            None => None,
            Some(i) => {
                if let Some(u) = &i.url {
                    check_url(u, "introspection.url")?;
                }
                Some((
                    i.url.clone(),
                    i.client_id.clone(),
                    secret(&i.client_secret, "introspection.client_secret")?,
                ))
            }
        };
        let console = match &c.console {
            None => None,
            Some(k) => Some(console_client(k, &resource)?),
        };
        let path = resource.path().trim_end_matches('/');
        let metadata_path = format!("/.well-known/oauth-protected-resource{path}");
        let mut metadata_url = resource.clone();
        metadata_url.set_path(&metadata_path);
        let http = reqwest::Client::builder()
            .timeout(Duration::from_millis(c.fetch_timeout_ms))
            .redirect(reqwest::redirect::Policy::none())
            .build()
            .map_err(|e| config_error("issuer", format!("HTTP client: {e}")))?;
        Ok(Self {
            issuer: c.issuer.clone(),
            resource: c.resource.clone(),
            scopes: c.scopes.clone(),
            principal_claim: c.principal_claim.clone(),
            groups_claim: c.groups_claim.clone(),
            leeway: c.leeway_s,
            refresh: Duration::from_secs(c.jwks_refresh_s),
            min_refetch: Duration::from_secs(c.jwks_min_refetch_s),
            introspection,
            console,
            metadata_url: metadata_url.to_string(),
            metadata_path,
            http,
            issuer_metadata: RwLock::new(None),
            keys: RwLock::new(Arc::new(KeySet {
                by_kid: HashMap::new(),
                anonymous: Vec::new(),
            })),
            fetching: tokio::sync::Mutex::new(()),
            last_refetch: std::sync::Mutex::new(None),
            checked: std::sync::Mutex::new(CheckedTokens::new(MAX_CACHED)),
        })
    }

    pub fn issuer(&self) -> &str {
        &self.issuer
    }

    /// The console's sign-in client, when `[server.oauth.console]` is set.
    pub fn console_client(&self) -> Option<&ConsoleClient> {
        self.console.as_ref()
    }

    /// The client for calls to the issuer (bounded in time, no redirects).
    pub fn http(&self) -> &reqwest::Client {
        &self.http
    }

    /// The issuer's metadata, fetched now if it is not known yet.
    pub async fn endpoints(&self) -> Result<IssuerMetadata, OAuthError> {
        match self.issuer_metadata() {
            Some(m) => Ok(m),
            None => self.discover().await,
        }
    }

    /// The path of the protected resource metadata on this server.
    pub fn metadata_path(&self) -> &str {
        &self.metadata_path
    }

    /// Its absolute URL (in every 401's challenge).
    pub fn metadata_url(&self) -> &str {
        &self.metadata_url
    }

    /// RFC 9728 protected resource metadata.
    pub fn resource_metadata(&self) -> Value {
        serde_json::json!({
            "resource": self.resource,
            "authorization_servers": [self.issuer],
            "scopes_supported": self.scopes,
            "bearer_methods_supported": ["header"],
            "resource_name": "wf",
        })
    }

    /// The `WWW-Authenticate` value of a refusal (`None`: no token was sent).
    pub fn challenge(&self, refusal: Option<&Refusal>) -> String {
        let mut v = format!("Bearer resource_metadata=\"{}\"", self.metadata_url);
        if !self.scopes.is_empty() {
            v.push_str(&format!(", scope=\"{}\"", self.scopes.join(" ")));
        }
        if let Some(r) = refusal {
            v.push_str(&format!(", error=\"{}\"", r.error));
        }
        v
    }

    /// The issuer's metadata, once fetched.
    pub fn issuer_metadata(&self) -> Option<IssuerMetadata> {
        self.issuer_metadata
            .read()
            .unwrap_or_else(PoisonError::into_inner)
            .clone()
    }

    /// Fetches the issuer's metadata and keys now, then again every
    /// `jwks_refresh_s` in the background, for as long as `self` lives.
    pub fn start(self: &Arc<Self>) {
        let weak = Arc::downgrade(self);
        tokio::spawn(async move {
            loop {
                let Some(this) = weak.upgrade() else { return };
                if let Err(e) = this.fetch_keys().await {
                    tracing::warn!("OAuth: cannot fetch the issuer's keys: {e}");
                }
                let wait = this.refresh;
                drop(this);
                tokio::time::sleep(wait).await;
            }
        });
    }

    async fn get_json(&self, url: &str) -> Result<Value, OAuthError> {
        let err = |message: String| OAuthError::Fetch {
            url: url.to_string(),
            message,
        };
        let mut resp = self
            .http
            .get(url)
            .header("accept", "application/json")
            .send()
            .await
            .map_err(|e| err(e.to_string()))?;
        if !resp.status().is_success() {
            return Err(err(format!("HTTP {}", resp.status())));
        }
        let body = read_bounded(&mut resp).await.map_err(err)?;
        serde_json::from_slice(&body).map_err(|e| err(format!("not JSON: {e}")))
    }

    /// RFC 8414 metadata (with the issuer's path inserted after the
    /// well-known prefix), else OpenID Connect discovery. Its `issuer` must
    /// be the configured one.
    pub async fn discover(&self) -> Result<IssuerMetadata, OAuthError> {
        let issuer = url::Url::parse(&self.issuer).map_err(|e| OAuthError::Fetch {
            url: self.issuer.clone(),
            message: e.to_string(),
        })?;
        let path = issuer.path().trim_end_matches('/');
        let mut tries = Vec::new();
        for well_known in [
            format!("/.well-known/oauth-authorization-server{path}"),
            format!("/.well-known/openid-configuration{path}"),
            format!("{path}/.well-known/openid-configuration"),
        ] {
            let mut u = issuer.clone();
            u.set_path(&well_known);
            if !tries.contains(&u) {
                tries.push(u);
            }
        }
        let mut last = None;
        for u in tries {
            match self.get_json(u.as_str()).await {
                Ok(doc) => {
                    let said = doc.get("issuer").and_then(Value::as_str).unwrap_or("");
                    if said != self.issuer {
                        return Err(OAuthError::Fetch {
                            url: u.to_string(),
                            message: format!(
                                "its issuer is {said:?}, not the configured {:?}",
                                self.issuer
                            ),
                        });
                    }
                    let s = |k: &str| doc.get(k).and_then(Value::as_str).map(str::to_string);
                    let m = IssuerMetadata {
                        jwks_uri: s("jwks_uri"),
                        introspection_endpoint: s("introspection_endpoint"),
                        authorization_endpoint: s("authorization_endpoint"),
                        token_endpoint: s("token_endpoint"),
                    };
                    *self
                        .issuer_metadata
                        .write()
                        .unwrap_or_else(PoisonError::into_inner) = Some(m.clone());
                    return Ok(m);
                }
                Err(e) => last = Some(e),
            }
        }
        Err(last.unwrap_or_else(|| OAuthError::Fetch {
            url: self.issuer.clone(),
            message: "no metadata".into(),
        }))
    }

    /// Fetches the key set (and the metadata first, until it is known).
    pub async fn fetch_keys(&self) -> Result<usize, OAuthError> {
        let _one = self.fetching.lock().await;
        let meta = match self.issuer_metadata() {
            Some(m) => m,
            None => self.discover().await?,
        };
        let Some(jwks_uri) = meta.jwks_uri else {
            return Err(OAuthError::Fetch {
                url: self.issuer.clone(),
                message: "its metadata names no jwks_uri".into(),
            });
        };
        let doc = self.get_json(&jwks_uri).await?;
        let set: JwkSet = serde_json::from_value(doc).map_err(|e| OAuthError::Fetch {
            url: jwks_uri.clone(),
            message: format!("not a JWK set: {e}"),
        })?;
        let mut keys = KeySet {
            by_kid: HashMap::new(),
            anonymous: Vec::new(),
        };
        for jwk in set.keys.iter().take(MAX_KEYS) {
            if jwk
                .common
                .public_key_use
                .as_ref()
                .is_some_and(|u| *u != jsonwebtoken::jwk::PublicKeyUse::Signature)
            {
                continue;
            }
            let Ok(key) = DecodingKey::from_jwk(jwk) else {
                continue;
            };
            let alg = jwk
                .common
                .key_algorithm
                .and_then(|a| a.to_string().parse::<Algorithm>().ok());
            match &jwk.common.key_id {
                Some(kid) => {
                    keys.by_kid.insert(kid.clone(), (key, alg));
                }
                None => keys.anonymous.push((key, alg)),
            }
        }
        let n = keys.by_kid.len() + keys.anonymous.len();
        *self.keys.write().unwrap_or_else(PoisonError::into_inner) = Arc::new(keys);
        // A key the issuer dropped no longer vouches for what it signed.
        self.checked
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .clear();
        tracing::debug!(keys = n, "OAuth: fetched the issuer's keys");
        Ok(n)
    }

    /// Fetches the keys again for a token whose `kid` wf does not know,
    /// unless another such token did within `jwks_min_refetch_s` (then the
    /// token is refused without a fetch: a flood of made-up `kid`s costs
    /// the issuer one fetch per interval).
    async fn refetch_for_unknown_kid(&self) {
        {
            let mut last = self
                .last_refetch
                .lock()
                .unwrap_or_else(PoisonError::into_inner);
            if last.is_some_and(|t| t.elapsed() < self.min_refetch) {
                return;
            }
            *last = Some(Instant::now());
        }
        if let Err(e) = self.fetch_keys().await {
            tracing::warn!("OAuth: cannot fetch the issuer's keys: {e}");
        }
    }

    fn key_for(&self, kid: Option<&str>, alg: Algorithm) -> Option<DecodingKey> {
        let keys = self
            .keys
            .read()
            .unwrap_or_else(PoisonError::into_inner)
            .clone();
        let fits = |(k, a): &(DecodingKey, Option<Algorithm>)| {
            a.is_none_or(|a| a == alg).then(|| k.clone())
        };
        match kid {
            Some(kid) => keys.by_kid.get(kid).and_then(fits),
            None => keys.anonymous.iter().find_map(fits),
        }
    }

    /// The principal a token names, or why it is refused.
    pub async fn verify(&self, token: &str) -> Result<Principal, Refusal> {
        if token.len() > 16 * 1024 {
            return Err(invalid("token too long"));
        }
        if token.split('.').count() == 3 {
            self.verify_jwt(token).await
        } else if self.introspection.is_some() {
            self.introspect(token).await
        } else {
            Err(invalid("not a JWT (and no introspection is configured)"))
        }
    }

    /// A JWT access token: from the cache of checked tokens when it is
    /// there and unexpired (a hash and a lookup), else checked in full and
    /// remembered until its `exp`.
    async fn verify_jwt(&self, token: &str) -> Result<Principal, Refusal> {
        let digest = crate::secrets::sha256(token.as_bytes());
        let leeway = self.leeway as i64;
        let now = crate::clock::now_ms() / 1000;
        if let Some(p) = self
            .checked
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .get(&digest, now, leeway)
        {
            return Ok(p);
        }
        let claims = self.decode(token, &self.resource).await?;
        let p = self.principal(&claims)?;
        if let Some(exp) = claims.get("exp").and_then(Value::as_i64) {
            let now = crate::clock::now_ms() / 1000;
            self.checked
                .lock()
                .unwrap_or_else(PoisonError::into_inner)
                .insert(digest, p.clone(), exp, now, leeway);
        }
        Ok(p)
    }

    /// The console's ID token (OpenID Connect Core 3.1.3.7): signed by one
    /// of the issuer's keys, from the issuer, for `client_id`, unexpired,
    /// carrying the `nonce` the sign-in sent. Names the principal and its
    /// groups by the same claims as an access token (no scope is needed).
    pub async fn verify_id_token(
        &self,
        token: &str,
        client_id: &str,
        nonce: &str,
    ) -> Result<Principal, Refusal> {
        if token.len() > 16 * 1024 {
            return Err(invalid("ID token too long"));
        }
        let claims = self.decode(token, client_id).await?;
        let said = claims.get("nonce").and_then(Value::as_str).unwrap_or("");
        if !crate::secrets::eq_32(
            &crate::secrets::sha256(said.as_bytes()),
            &crate::secrets::sha256(nonce.as_bytes()),
        ) {
            return Err(invalid("ID token: wrong nonce"));
        }
        if claims.get("sub").and_then(Value::as_str).is_none() {
            return Err(invalid("ID token: no sub"));
        }
        // For several audiences, the authorized party must be this client.
        if claims
            .get("aud")
            .and_then(Value::as_array)
            .is_some_and(|a| a.len() > 1)
            && claims.get("azp").and_then(Value::as_str) != Some(client_id)
        {
            return Err(invalid(
                "ID token: several audiences and azp is not this client",
            ));
        }
        self.principal_from_claims(&claims)
    }

    /// A JWT's claims once its signature, issuer, audience, expiry and
    /// not-before check out.
    async fn decode(
        &self,
        token: &str,
        audience: &str,
    ) -> Result<serde_json::Map<String, Value>, Refusal> {
        let header =
            jsonwebtoken::decode_header(token).map_err(|e| invalid(format!("header: {e}")))?;
        if !ALGORITHMS.contains(&header.alg) {
            return Err(invalid(format!("algorithm {:?} not accepted", header.alg)));
        }
        let kid = header.kid.as_deref();
        let key = match self.key_for(kid, header.alg) {
            Some(k) => k,
            None => {
                self.refetch_for_unknown_kid().await;
                self.key_for(kid, header.alg)
                    .ok_or_else(|| invalid(format!("no key of the issuer's has kid {kid:?}")))?
            }
        };
        let mut v = Validation::new(header.alg);
        v.algorithms = vec![header.alg];
        v.set_issuer(&[&self.issuer]);
        v.set_audience(&[audience]);
        v.leeway = self.leeway;
        v.validate_nbf = true;
        v.set_required_spec_claims(&["exp", "iss", "aud"]);
        let data = jsonwebtoken::decode::<serde_json::Map<String, Value>>(token, &key, &v)
            .map_err(|e| invalid(format!("{e}")))?;
        Ok(data.claims)
    }

    async fn introspect(&self, token: &str) -> Result<Principal, Refusal> {
        let Some((url, id, secret)) = &self.introspection else {
            return Err(invalid("no introspection"));
        };
        let url = match url {
            Some(u) => u.clone(),
            None => self
                .issuer_metadata()
                .and_then(|m| m.introspection_endpoint)
                .ok_or_else(|| invalid("the issuer's metadata names no introspection_endpoint"))?,
        };
        let body = url::form_urlencoded::Serializer::new(String::new())
            .append_pair("token", token)
            .append_pair("token_type_hint", "access_token")
            .finish();
        let unavailable = |reason: String| Refusal {
            status: StatusCode::SERVICE_UNAVAILABLE,
            error: "temporarily_unavailable",
            reason,
        };
        let mut resp = self
            .http
            .post(&url)
            .basic_auth(id, Some(secret))
            .header("content-type", "application/x-www-form-urlencoded")
            .header("accept", "application/json")
            .body(body)
            .send()
            .await
            .map_err(|e| unavailable(format!("introspection: {e}")))?;
        if !resp.status().is_success() {
            return Err(unavailable(format!(
                "introspection: HTTP {}",
                resp.status()
            )));
        }
        let body = read_bounded(&mut resp)
            .await
            .map_err(|e| unavailable(format!("introspection: {e}")))?;
        let claims: serde_json::Map<String, Value> = serde_json::from_slice(&body)
            .map_err(|e| unavailable(format!("introspection: not JSON: {e}")))?;
        if claims.get("active") != Some(&Value::Bool(true)) {
            return Err(invalid("introspection: not active"));
        }
        if let Some(iss) = claims.get("iss")
            && iss.as_str() != Some(&self.issuer)
        {
            return Err(invalid("introspection: wrong issuer"));
        }
        let aud_ok = match claims.get("aud") {
            Some(Value::String(a)) => *a == self.resource,
            Some(Value::Array(a)) => a.iter().any(|a| a.as_str() == Some(&self.resource)),
            _ => false,
        };
        if !aud_ok {
            return Err(invalid("introspection: not for this resource (aud)"));
        }
        let now = crate::clock::now_ms() / 1000;
        if claims
            .get("exp")
            .and_then(Value::as_i64)
            .is_some_and(|exp| exp + (self.leeway as i64) < now)
        {
            return Err(invalid("introspection: expired"));
        }
        self.principal(&claims)
    }

    /// Scopes, then the principal and its groups.
    fn principal(&self, claims: &serde_json::Map<String, Value>) -> Result<Principal, Refusal> {
        let granted: Vec<&str> = match (claims.get("scope"), claims.get("scp")) {
            (Some(Value::String(s)), _) => s.split(' ').collect(),
            (_, Some(Value::Array(a))) => a.iter().filter_map(Value::as_str).collect(),
            (_, Some(Value::String(s))) => s.split(' ').collect(),
            _ => Vec::new(),
        };
        if let Some(missing) = self.scopes.iter().find(|s| !granted.contains(&s.as_str())) {
            return Err(Refusal {
                status: StatusCode::FORBIDDEN,
                error: "insufficient_scope",
                reason: format!("scope {missing:?} missing"),
            });
        }
        self.principal_from_claims(claims)
    }

    /// The principal and its groups, by the configured claims.
    fn principal_from_claims(
        &self,
        claims: &serde_json::Map<String, Value>,
    ) -> Result<Principal, Refusal> {
        let name = claims
            .get(&self.principal_claim)
            .and_then(Value::as_str)
            .ok_or_else(|| invalid(format!("no {:?} claim", self.principal_claim)))?;
        if !usable_name(name) {
            return Err(invalid(format!(
                "its {:?} claim is not a usable principal name",
                self.principal_claim
            )));
        }
        let groups: Vec<String> = match claims.get(&self.groups_claim) {
            Some(Value::String(g)) => vec![g.clone()],
            Some(Value::Array(a)) => a
                .iter()
                .filter_map(Value::as_str)
                .filter(|g| usable_name(g))
                .take(MAX_GROUPS)
                .map(str::to_string)
                .collect(),
            _ => Vec::new(),
        };
        Ok(Principal::with_groups(name, groups))
    }
}

/// A claim value usable as a name in logs and records: printable, bounded.
fn usable_name(s: &str) -> bool {
    !s.is_empty() && s.chars().count() <= MAX_NAME_CHARS && !s.chars().any(char::is_control)
}

/// `[server.oauth.console]` checked against the resource's origin.
fn console_client(
    k: &crate::config::ConsoleClientConfig,
    resource: &url::Url,
) -> Result<ConsoleClient, OAuthError> {
    if k.client_id.is_empty() {
        return Err(config_error("console.client_id", "must not be empty"));
    }
    let redirect_uri = match &k.redirect_uri {
        Some(u) => {
            let parsed = check_url(u, "console.redirect_uri")?;
            if parsed.path() != CONSOLE_CALLBACK_PATH {
                return Err(config_error(
                    "console.redirect_uri",
                    format!("{u:?} must end in {CONSOLE_CALLBACK_PATH}"),
                ));
            }
            u.clone()
        }
        None => {
            let mut u = resource.clone();
            u.set_path(CONSOLE_CALLBACK_PATH);
            u.to_string()
        }
    };
    let client_secret = match &k.client_secret {
        Some(s) => Some(secret(s, "console.client_secret")?),
        None => None,
    };
    let mut scopes = vec!["openid".to_string()];
    for s in &k.scopes {
        if s.is_empty() || !s.bytes().all(|b| b.is_ascii_graphic() && b != b'"') {
            return Err(config_error(
                "console.scopes",
                format!("{s:?} is not a scope"),
            ));
        }
        if !scopes.contains(s) {
            scopes.push(s.clone());
        }
    }
    Ok(ConsoleClient {
        client_id: k.client_id.clone(),
        client_secret,
        redirect_uri,
        scopes,
    })
}

pub(crate) async fn read_bounded(resp: &mut reqwest::Response) -> Result<Vec<u8>, String> {
    let mut body = Vec::new();
    while let Some(chunk) = resp.chunk().await.map_err(|e| e.to_string())? {
        if body.len() + chunk.len() > MAX_DOC_BYTES {
            return Err(format!("larger than {MAX_DOC_BYTES} bytes"));
        }
        body.extend_from_slice(&chunk);
    }
    Ok(body)
}

#[cfg(test)]
#[path = "oauth_tests.rs"]
mod tests;
