//! The verifier against a real issuer served on 127.0.0.1 (metadata and a
//! JWKS over HTTP) with keys minted here, so every refusal can be made.

use std::sync::atomic::{AtomicUsize, Ordering};

use base64::Engine;
use base64::engine::general_purpose::URL_SAFE_NO_PAD as B64;
use ring::rand::SystemRandom;
use ring::signature::{ECDSA_P256_SHA256_FIXED_SIGNING, EcdsaKeyPair, KeyPair};
use serde_json::json;

use super::*;

pub(crate) struct Key {
    pair: EcdsaKeyPair,
    pub kid: String,
}

impl Key {
    pub fn new(kid: &str) -> Self {
        let rng = SystemRandom::new();
        let pkcs8 = EcdsaKeyPair::generate_pkcs8(&ECDSA_P256_SHA256_FIXED_SIGNING, &rng).unwrap();
        let pair = EcdsaKeyPair::from_pkcs8(&ECDSA_P256_SHA256_FIXED_SIGNING, pkcs8.as_ref(), &rng)
            .unwrap();
        Self {
            pair,
            kid: kid.into(),
        }
    }

    pub fn jwk(&self) -> Value {
        let p = self.pair.public_key().as_ref();
        json!({"kty": "EC", "crv": "P-256", "use": "sig", "alg": "ES256", "kid": self.kid,
               "x": B64.encode(&p[1..33]), "y": B64.encode(&p[33..65])})
    }

    pub fn sign(&self, header: &Value, claims: &Value) -> String {
        let input = format!(
            "{}.{}",
            B64.encode(header.to_string()),
            B64.encode(claims.to_string())
        );
        let sig = self
            .pair
            .sign(&SystemRandom::new(), input.as_bytes())
            .unwrap();
        format!("{input}.{}", B64.encode(sig.as_ref()))
    }

    pub fn token(&self, claims: &Value) -> String {
        self.sign(
            &json!({"alg": "ES256", "typ": "at+jwt", "kid": self.kid}),
            claims,
        )
    }
}

/// An issuer on 127.0.0.1: its metadata and a JWKS the test can change.
pub(crate) struct Issuer {
    pub url: String,
    pub jwks: Arc<RwLock<Value>>,
    pub fetches: Arc<AtomicUsize>,
}

impl Issuer {
    pub async fn start() -> Self {
        let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
        let url = format!("http://{}", listener.local_addr().unwrap());
        let jwks = Arc::new(RwLock::new(json!({"keys": []})));
        let fetches = Arc::new(AtomicUsize::new(0));
        let meta = json!({"issuer": url, "jwks_uri": format!("{url}/jwks")});
        let (j, f) = (jwks.clone(), fetches.clone());
        let app = axum::Router::new()
            .route(
                "/.well-known/oauth-authorization-server",
                axum::routing::get(move || {
                    let meta = meta.clone();
                    async move { axum::Json(meta) }
                }),
            )
            .route(
                "/jwks",
                axum::routing::get(move || {
                    f.fetch_add(1, Ordering::SeqCst);
                    let doc = j.read().unwrap().clone();
                    async move { axum::Json(doc) }
                }),
            );
        tokio::spawn(async move { axum::serve(listener, app).await.unwrap() });
        Self { url, jwks, fetches }
    }

    pub fn publish(&self, keys: &[&Key]) {
        *self.jwks.write().unwrap() =
            json!({"keys": keys.iter().map(|k| k.jwk()).collect::<Vec<_>>()});
    }
}

pub(crate) const RESOURCE: &str = "http://127.0.0.1:9/mcp";

pub(crate) fn config(issuer: &str) -> OAuthConfig {
    serde_json::from_value(json!({
        "issuer": issuer, "resource": RESOURCE, "scopes": ["mcp"],
        "principal_claim": "email", "jwks_min_refetch_s": 3600,
    }))
    .unwrap()
}

pub(crate) fn claims(issuer: &str) -> Value {
    let now = crate::clock::now_ms() / 1000;
    json!({"iss": issuer, "aud": RESOURCE, "sub": "u1", "email": "alice@example.com",
           "groups": ["eng", "ops"], "scope": "openid mcp", "iat": now, "exp": now + 300})
}

fn with(mut c: Value, k: &str, v: Value) -> Value {
    c[k] = v;
    c
}

#[tokio::test]
async fn tokens_are_checked_and_refused_with_their_status() {
    let issuer = Issuer::start().await;
    let key = Key::new("k1");
    issuer.publish(&[&key]);
    let v = Arc::new(OAuthVerifier::new(&config(&issuer.url)).unwrap());
    assert_eq!(v.fetch_keys().await.unwrap(), 1);
    let c = claims(&issuer.url);

    let p = v.verify(&key.token(&c)).await.unwrap();
    assert_eq!(p.name(), "alice@example.com");
    let groups: Vec<&str> = p.groups().unwrap().iter().map(|g| &**g).collect();
    assert_eq!(groups, ["eng", "ops"]);
    // An audience given as a list that names this resource is fine.
    let list = with(c.clone(), "aud", json!(["other", RESOURCE]));
    assert!(v.verify(&key.token(&list)).await.is_ok());

    let now = crate::clock::now_ms() / 1000;
    let refused = |r: Result<Principal, Refusal>| r.unwrap_err();
    let cases: Vec<(&str, String, StatusCode)> = vec![
        (
            "other audience",
            key.token(&with(c.clone(), "aud", json!("http://elsewhere/mcp"))),
            StatusCode::UNAUTHORIZED,
        ),
        (
            "no audience",
            key.token(&with(c.clone(), "aud", json!(null))),
            StatusCode::UNAUTHORIZED,
        ),
        (
            "expired beyond the leeway",
            key.token(&with(c.clone(), "exp", json!(now - 120))),
            StatusCode::UNAUTHORIZED,
        ),
        (
            "not yet valid",
            key.token(&with(c.clone(), "nbf", json!(now + 600))),
            StatusCode::UNAUTHORIZED,
        ),
        (
            "wrong issuer",
            key.token(&with(c.clone(), "iss", json!("http://127.0.0.1:1"))),
            StatusCode::UNAUTHORIZED,
        ),
        (
            "bad signature",
            Key::new("k1").token(&c),
            StatusCode::UNAUTHORIZED,
        ),
        (
            "alg none",
            format!(
                "{}.{}.",
                B64.encode(json!({"alg": "none", "kid": "k1"}).to_string()),
                B64.encode(c.to_string())
            ),
            StatusCode::UNAUTHORIZED,
        ),
        (
            "HS256 with the public key as secret",
            key.sign(&json!({"alg": "HS256", "kid": "k1"}), &c),
            StatusCode::UNAUTHORIZED,
        ),
        (
            "missing scope",
            key.token(&with(c.clone(), "scope", json!("openid"))),
            StatusCode::FORBIDDEN,
        ),
        (
            "no principal claim",
            key.token(&with(c.clone(), "email", json!(null))),
            StatusCode::UNAUTHORIZED,
        ),
        (
            "opaque, no introspection",
            "an-opaque-token-0123456789".into(),
            StatusCode::UNAUTHORIZED,
        ),
    ];
    for (what, token, status) in cases {
        let r = refused(v.verify(&token).await);
        assert_eq!(r.status, status, "{what}: {r:?}");
        assert!(!r.reason.contains(&token), "{what}: never the token");
    }
    // A token checked once is remembered until its expiry: a hit is served
    // from memory, an entry past its exp (beyond the leeway) is checked again.
    let once = key.token(&c);
    assert!(v.verify(&once).await.is_ok());
    let marked = Principal::with_groups("from-cache", vec![]);
    v.checked
        .lock()
        .unwrap()
        .values_mut()
        .for_each(|e| e.0 = marked.clone());
    assert_eq!(v.verify(&once).await.unwrap().name(), "from-cache");
    v.checked
        .lock()
        .unwrap()
        .values_mut()
        .for_each(|e| e.1 = now - 120);
    assert_eq!(v.verify(&once).await.unwrap().name(), "alice@example.com");
    // New keys forget what the old ones vouched for.
    v.fetch_keys().await.unwrap();
    assert!(v.checked.lock().unwrap().is_empty());
    // Within the leeway: still fine.
    assert!(
        v.verify(&key.token(&with(c.clone(), "exp", json!(now - 5))))
            .await
            .is_ok()
    );
    assert_eq!(
        issuer.fetches.load(Ordering::SeqCst),
        2,
        "no fetch but ours"
    );
}

#[tokio::test]
async fn an_unknown_kid_fetches_the_keys_once_then_is_refused() {
    let issuer = Issuer::start().await;
    let (k1, k2) = (Key::new("k1"), Key::new("k2"));
    issuer.publish(&[&k1]);
    let mut c = config(&issuer.url);
    c.jwks_min_refetch_s = 0;
    let v = Arc::new(OAuthVerifier::new(&c).unwrap());
    v.fetch_keys().await.unwrap();
    let claims = claims(&issuer.url);
    // The issuer rotates to k2: the first k2 token fetches the set again.
    issuer.publish(&[&k1, &k2]);
    assert!(v.verify(&k2.token(&claims)).await.is_ok());
    assert_eq!(issuer.fetches.load(Ordering::SeqCst), 2);
    // A kid the issuer never had: fetched once more, then refused.
    let stranger = Key::new("k9");
    let r = v.verify(&stranger.token(&claims)).await.unwrap_err();
    assert_eq!(r.status, StatusCode::UNAUTHORIZED);
    assert!(r.reason.contains("k9"), "{r:?}");
    assert_eq!(issuer.fetches.load(Ordering::SeqCst), 3);

    // With the default spacing, made-up kids do not hammer the issuer: the
    // first fetches once, the next ones within the interval not at all.
    let v = Arc::new(OAuthVerifier::new(&config(&issuer.url)).unwrap());
    v.fetch_keys().await.unwrap();
    let before = issuer.fetches.load(Ordering::SeqCst);
    for _ in 0..20 {
        assert!(v.verify(&stranger.token(&claims)).await.is_err());
    }
    assert_eq!(issuer.fetches.load(Ordering::SeqCst), before + 1);
}

#[tokio::test]
async fn settings_and_metadata() {
    let ok = |v: Value| serde_json::from_value::<OAuthConfig>(v).unwrap();
    for (bad, key) in [
        (
            json!({"issuer": "http://idp.example", "resource": RESOURCE}),
            "issuer",
        ),
        (
            json!({"issuer": "https://idp.example", "resource": "wf/mcp"}),
            "resource",
        ),
        (
            json!({"issuer": "https://idp.example", "resource": RESOURCE, "scopes": ["a b"]}),
            "scopes",
        ),
        (
            json!({"issuer": "https://idp.example", "resource": RESOURCE,
                   "groups": [{"name": "a"}, {"name": "a"}]}),
            "groups",
        ),
    ] {
        let e = OAuthVerifier::new(&ok(bad)).err().unwrap().to_string();
        assert!(e.contains(&format!("server.oauth.{key}")), "{e}");
    }
    let v = OAuthVerifier::new(&ok(json!({
        "issuer": "https://idp.example", "resource": "https://wf.example/mcp", "scopes": ["mcp"]
    })))
    .unwrap();
    assert_eq!(
        v.metadata_url(),
        "https://wf.example/.well-known/oauth-protected-resource/mcp"
    );
    assert_eq!(
        v.resource_metadata()["authorization_servers"],
        json!(["https://idp.example"])
    );
    assert_eq!(
        v.challenge(None),
        "Bearer resource_metadata=\"https://wf.example/.well-known/oauth-protected-resource/mcp\", scope=\"mcp\""
    );
    // The issuer's metadata must name the configured issuer.
    let issuer = Issuer::start().await;
    let mut c = config(&issuer.url);
    c.issuer = issuer.url.replace("127.0.0.1", "localhost");
    let e = OAuthVerifier::new(&c)
        .unwrap()
        .discover()
        .await
        .err()
        .unwrap()
        .to_string();
    assert!(e.contains("not the configured"), "{e}");
}

#[tokio::test]
async fn the_consoles_id_token_is_checked_for_its_client_and_nonce() {
    let issuer = Issuer::start().await;
    let key = Key::new("k1");
    issuer.publish(&[&key]);
    let mut cfg = config(&issuer.url);
    cfg.console = Some(
        serde_json::from_value(json!({"client_id": "wf-console", "scopes": ["groups"]})).unwrap(),
    );
    let v = OAuthVerifier::new(&cfg).unwrap();
    let k = v.console_client().unwrap();
    assert_eq!(k.redirect_uri, "http://127.0.0.1:9/console/oidc/callback");
    assert_eq!(k.scopes, ["openid", "groups"]);
    v.fetch_keys().await.unwrap();
    let id = with(
        with(claims(&issuer.url), "aud", json!("wf-console")),
        "nonce",
        json!("n-1"),
    );
    // No scope is needed in an ID token: only its client, issuer and nonce.
    let id = with(id, "scope", json!(null));
    let p = v
        .verify_id_token(&key.token(&id), "wf-console", "n-1")
        .await
        .unwrap();
    assert_eq!(p.name(), "alice@example.com");
    assert_eq!(p.groups().unwrap().len(), 2);
    for (what, token, nonce) in [
        ("wrong nonce", key.token(&id), "n-2"),
        (
            "an access token for the resource",
            key.token(&claims(&issuer.url)),
            "n-1",
        ),
        (
            "no nonce",
            key.token(&with(id.clone(), "nonce", json!(null))),
            "n-1",
        ),
        ("another key", Key::new("k1").token(&id), "n-1"),
        (
            "several audiences, no azp",
            key.token(&with(id.clone(), "aud", json!(["wf-console", "other"]))),
            "n-1",
        ),
    ] {
        assert!(
            v.verify_id_token(&token, "wf-console", nonce)
                .await
                .is_err(),
            "{what}"
        );
    }
    // A redirect URI elsewhere than the callback path is refused at start.
    cfg.console = Some(
        serde_json::from_value(
            json!({"client_id": "c", "redirect_uri": "http://127.0.0.1:9/elsewhere"}),
        )
        .unwrap(),
    );
    assert!(OAuthVerifier::new(&cfg).is_err());
}
