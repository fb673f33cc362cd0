//! Unit tests against a fake authorization server and protected resource
//! (fakes are for unit tests; the conformance suite and e2e use real peers).

use std::sync::{Arc, Mutex};

use axum::extract::State;
use axum::http::{StatusCode, header};
use axum::response::IntoResponse;
use axum::routing::{get, post};
use axum::{Json, Router};
use base64::Engine;
use serde_json::{Value, json};
use sha2::Digest;

use super::*;

#[derive(Clone, Default)]
struct Fake {
    base: Arc<Mutex<String>>,
    issuer_override: Option<String>,
    token_forms: Arc<Mutex<Vec<std::collections::HashMap<String, String>>>>,
    revoked: Arc<Mutex<Vec<std::collections::HashMap<String, String>>>>,
}

async fn serve(fake: Fake) -> String {
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let base = format!("http://{}", listener.local_addr().unwrap());
    *fake.base.lock().unwrap() = base.clone();
    let app = Router::new()
        .route("/mcp", post(mcp))
        .route("/.well-known/oauth-protected-resource/mcp", get(prm))
        .route("/.well-known/oauth-authorization-server", get(asm))
        .route("/register", post(register))
        .route("/token", post(token))
        .route("/revoke", post(revoke))
        .with_state(fake);
    tokio::spawn(async move { axum::serve(listener, app).await.unwrap() });
    base
}

async fn mcp(State(f): State<Fake>) -> impl IntoResponse {
    let base = f.base.lock().unwrap().clone();
    (
        StatusCode::UNAUTHORIZED,
        [(
            header::WWW_AUTHENTICATE,
            format!("Bearer resource_metadata=\"{base}/.well-known/oauth-protected-resource/mcp\""),
        )],
    )
}

async fn prm(State(f): State<Fake>) -> Json<Value> {
    let base = f.base.lock().unwrap().clone();
    Json(json!({"resource": format!("{base}/mcp"), "authorization_servers": [base]}))
}

async fn asm(State(f): State<Fake>) -> Json<Value> {
    let base = f.base.lock().unwrap().clone();
    Json(json!({
        "issuer": f.issuer_override.clone().unwrap_or(base.clone()),
        "authorization_endpoint": format!("{base}/authorize"),
        "token_endpoint": format!("{base}/token"),
        "registration_endpoint": format!("{base}/register"),
        "revocation_endpoint": format!("{base}/revoke"),
        "response_types_supported": ["code"],
        "code_challenge_methods_supported": ["S256"],
    }))
}

async fn register(Json(body): Json<Value>) -> (StatusCode, Json<Value>) {
    (
        StatusCode::CREATED,
        Json(json!({"client_id": "fake-client", "redirect_uris": body["redirect_uris"]})),
    )
}

async fn token(State(f): State<Fake>, body: String) -> Json<Value> {
    f.token_forms.lock().unwrap().push(form(&body));
    Json(
        json!({"access_token": "AT-unit-SECRET", "token_type": "Bearer", "expires_in": 3600,
                "refresh_token": "RT-unit-SECRET", "scope": "read"}),
    )
}

async fn revoke(State(f): State<Fake>, body: String) -> StatusCode {
    f.revoked.lock().unwrap().push(form(&body));
    StatusCode::OK
}

fn form(body: &str) -> std::collections::HashMap<String, String> {
    url::form_urlencoded::parse(body.as_bytes())
        .into_owned()
        .collect()
}

fn query(url: &str) -> std::collections::HashMap<String, String> {
    url::Url::parse(url)
        .unwrap()
        .query_pairs()
        .into_owned()
        .collect()
}

#[tokio::test]
async fn pkce_s256_challenge_matches_the_verifier_and_resource_is_sent() {
    let fake = Fake::default();
    let base = serve(fake.clone()).await;
    let dir = tempfile::tempdir().unwrap();
    let store = TokenFile::new(dir.path());
    let mcp = format!("{base}/mcp");
    let redirect = "http://127.0.0.1:9/callback";
    let pending = flow::begin_login(&mcp, &OAuthSettings::default(), &store, redirect, None)
        .await
        .unwrap();
    let q = query(pending.authorization_url());
    assert_eq!(q["code_challenge_method"], "S256");
    assert_eq!(q["resource"], mcp);
    assert_eq!(q["client_id"], "fake-client");
    let challenge = q["code_challenge"].clone();
    let summary = pending
        .finish(
            &format!("{redirect}?code=c0de&state={}", q["state"]),
            &store,
        )
        .await
        .unwrap();
    let forms = fake.token_forms.lock().unwrap().clone();
    let verifier = &forms[0]["code_verifier"];
    let expect = base64::engine::general_purpose::URL_SAFE_NO_PAD
        .encode(sha2::Sha256::digest(verifier.as_bytes()));
    assert_eq!(
        challenge, expect,
        "S256(verifier) must be the challenge sent"
    );
    assert_eq!(forms[0]["code"], "c0de");
    assert_eq!(forms[0]["resource"], mcp);
    assert!(summary.has_access_token && summary.has_refresh_token);
    assert!(!format!("{summary:?}").contains("SECRET"));
    assert_eq!(summary.scopes, vec!["read".to_string()]);
}

#[tokio::test]
async fn a_state_mismatch_is_refused_and_nothing_is_stored() {
    let fake = Fake::default();
    let base = serve(fake.clone()).await;
    let dir = tempfile::tempdir().unwrap();
    let store = TokenFile::new(dir.path());
    let redirect = "http://127.0.0.1:9/callback";
    let pending = flow::begin_login(
        &format!("{base}/mcp"),
        &OAuthSettings::default(),
        &store,
        redirect,
        None,
    )
    .await
    .unwrap();
    let e = pending
        .finish(&format!("{redirect}?code=c0de&state=forged"), &store)
        .await
        .unwrap_err();
    assert!(matches!(e, OAuthError::StateMismatch), "{e}");
    assert!(
        fake.token_forms.lock().unwrap().is_empty(),
        "no code exchange"
    );
    assert!(!store.exists());
}

#[tokio::test]
async fn an_issuer_mismatch_is_refused() {
    let fake = Fake {
        issuer_override: Some("http://127.0.0.1:1/evil".into()),
        ..Fake::default()
    };
    let base = serve(fake.clone()).await;
    let dir = tempfile::tempdir().unwrap();
    let store = TokenFile::new(dir.path());
    let r = flow::begin_login(
        &format!("{base}/mcp"),
        &OAuthSettings::default(),
        &store,
        "http://127.0.0.1:9/callback",
        None,
    )
    .await;
    let e = r
        .err()
        .expect("an issuer that is not the authorization server must be refused");
    assert!(e.to_string().to_lowercase().contains("issuer"), "{e}");
}

#[tokio::test]
async fn logout_revokes_both_tokens_where_the_server_offers_it() {
    let fake = Fake::default();
    let base = serve(fake.clone()).await;
    let dir = tempfile::tempdir().unwrap();
    let store = TokenFile::new(dir.path());
    let mcp = format!("{base}/mcp");
    let redirect = "http://127.0.0.1:9/callback";
    let settings = OAuthSettings::default();
    let pending = flow::begin_login(&mcp, &settings, &store, redirect, None)
        .await
        .unwrap();
    let state = query(pending.authorization_url())["state"].clone();
    pending
        .finish(&format!("{redirect}?code=c&state={state}"), &store)
        .await
        .unwrap();
    assert!(flow::revoke(&mcp, &settings, &store).await.unwrap());
    let revoked = fake.revoked.lock().unwrap().clone();
    let tokens: Vec<_> = revoked
        .iter()
        .map(|f| (f["token_type_hint"].as_str(), f["token"].as_str()))
        .collect();
    assert_eq!(
        tokens,
        [
            ("refresh_token", "RT-unit-SECRET"),
            ("access_token", "AT-unit-SECRET")
        ]
    );
}

#[test]
fn redaction_removes_every_secret() {
    let text = "upstream said: bad token AT-123456 (refresh RT-abcdef) for AT-123456";
    let out = redact(text, &["AT-123456", "RT-abcdef"]);
    assert!(
        !out.contains("AT-123456") && !out.contains("RT-abcdef"),
        "{out}"
    );
    assert_eq!(out.matches("[REDACTED]").count(), 3);
}

#[test]
fn redact_for_blanks_the_stored_tokens_and_the_client_secret() {
    let dir = tempfile::tempdir().unwrap();
    let store = TokenFile::new(dir.path());
    let response: rmcp::transport::auth::OAuthTokenResponse = serde_json::from_value(json!({
        "access_token": "AT-stored-SECRET", "refresh_token": "RT-stored-SECRET",
        "token_type": "bearer", "expires_in": 60
    }))
    .unwrap();
    store
        .write(&rmcp::transport::auth::StoredCredentials::new(
            "client".into(),
            Some(response),
            vec![],
            Some(1),
        ))
        .unwrap();
    let settings = OAuthSettings {
        client_secret: Some("CS-configured-SECRET".into()),
        ..Default::default()
    };
    let text =
        "invalid_grant: RT-stored-SECRET revoked; AT-stored-SECRET; client CS-configured-SECRET";
    let out = redact_for(text, &store, &settings);
    assert!(!out.contains("SECRET"), "{out}");
    assert_eq!(out.matches("[REDACTED]").count(), 3);
    // Nothing stored: only the client secret is known.
    let empty = TokenFile::new(tempfile::tempdir().unwrap().path());
    assert_eq!(
        redact_for("AT-stored-SECRET", &empty, &OAuthSettings::default()),
        "AT-stored-SECRET"
    );
}
