//! OAuth access tokens at the HTTP front (`[server.oauth]`, issue #50): what
//! identifying a request costs with an ES256 JWT checked against a warm JWKS,
//! against a static token, through the guard every `/mcp` request passes
//! (`HttpGuard::identify`). The issuer (RFC 8414 metadata and a JWKS) is
//! served on 127.0.0.1 with a key minted here; its JWKS fetches are counted
//! to show that none happens on the request path.

use std::sync::Arc;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::time::{Duration, Instant};

use axum::http::{HeaderMap, HeaderValue, header};
use base64::Engine;
use base64::engine::general_purpose::URL_SAFE_NO_PAD as B64;
use ring::rand::SystemRandom;
use ring::signature::{ECDSA_P256_SHA256_FIXED_SIGNING, EcdsaKeyPair, KeyPair};
use serde_json::json;
use wf_host::config::{OAuthConfig, Principal};
use wf_host::server::{HttpGuard, OAuthVerifier};

use crate::Env;
use crate::stats::{percentile, us};

const RESOURCE: &str = "http://127.0.0.1:8080/mcp";

pub async fn run(env: &Env) -> anyhow::Result<()> {
    eprintln!("oauth: identifying requests with a static token and with a JWT");
    let rng = SystemRandom::new();
    let pkcs8 = EcdsaKeyPair::generate_pkcs8(&ECDSA_P256_SHA256_FIXED_SIGNING, &rng)
        .map_err(|_| anyhow::anyhow!("cannot generate a P-256 key"))?;
    let key = EcdsaKeyPair::from_pkcs8(&ECDSA_P256_SHA256_FIXED_SIGNING, pkcs8.as_ref(), &rng)
        .map_err(|_| anyhow::anyhow!("cannot load the P-256 key"))?;
    let public = key.public_key().as_ref();
    let jwk = json!({"kty": "EC", "crv": "P-256", "use": "sig", "alg": "ES256", "kid": "bench",
                     "x": B64.encode(&public[1..33]), "y": B64.encode(&public[33..65])});

    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await?;
    let issuer = format!("http://{}", listener.local_addr()?);
    let fetches = Arc::new(AtomicUsize::new(0));
    let meta = json!({"issuer": issuer, "jwks_uri": format!("{issuer}/jwks")});
    let jwks = json!({"keys": [jwk]});
    let counted = fetches.clone();
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
                counted.fetch_add(1, Ordering::SeqCst);
                let jwks = jwks.clone();
                async move { axum::Json(jwks) }
            }),
        );
    let server = tokio::spawn(async move { axum::serve(listener, app).await });

    let config: OAuthConfig = serde_json::from_value(json!({
        "issuer": issuer, "resource": RESOURCE, "scopes": ["mcp"], "principal_claim": "email",
    }))?;
    let verifier = Arc::new(OAuthVerifier::new(&config)?);
    verifier.fetch_keys().await?;
    let static_token = "static-token-0123456789abcdef0123456789";
    let guard = HttpGuard::new(
        "127.0.0.1:8080".parse()?,
        &[(Principal::named("ci"), static_token.to_string())],
        &[],
        &[],
    )
    .with_oauth(Some(verifier));

    let now = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)?
        .as_secs();
    let claims = json!({"iss": issuer, "aud": RESOURCE, "sub": "u1", "email": "alice@example.com",
                        "groups": ["eng", "ops"], "scope": "openid mcp", "iat": now, "exp": now + 3600});
    let mint = |serial: usize| -> anyhow::Result<String> {
        let mut c = claims.clone();
        c["jti"] = json!(serial);
        let input = format!(
            "{}.{}",
            B64.encode(json!({"alg": "ES256", "typ": "at+jwt", "kid": "bench"}).to_string()),
            B64.encode(c.to_string())
        );
        let sig = key
            .sign(&rng, input.as_bytes())
            .map_err(|_| anyhow::anyhow!("cannot sign"))?;
        Ok(format!("{input}.{}", B64.encode(sig.as_ref())))
    };
    let headers = |token: &str| -> anyhow::Result<HeaderMap> {
        let mut h = HeaderMap::new();
        h.insert(
            header::AUTHORIZATION,
            HeaderValue::from_str(&format!("Bearer {token}"))?,
        );
        Ok(h)
    };
    let n = if env.quick { 2_000 } else { 20_000 };
    let warm = n / 10;
    // Each request of the first-use row sends a token wf has not seen (its
    // signature is checked); the repeat row sends one token again and again,
    // as a client does between refreshes.
    let fresh: Vec<HeaderMap> = (0..n + warm)
        .map(|i| headers(&mint(i)?))
        .collect::<anyhow::Result<_>>()?;
    let again = headers(&mint(usize::MAX)?)?;
    let static_h = headers(static_token)?;
    let mut rows = Vec::new();
    for (what, want) in [
        ("static token", "ci"),
        (
            "OAuth JWT, first use (ES256 signature checked)",
            "alice@example.com",
        ),
        ("OAuth JWT, again (checked before)", "alice@example.com"),
    ] {
        let mut samples = Vec::with_capacity(n);
        let sent: Vec<&HeaderMap> = match what {
            "static token" => std::iter::repeat_n(&static_h, n + warm).collect(),
            w if w.contains("first use") => fresh.iter().collect(),
            _ => std::iter::repeat_n(&again, n + warm).collect(),
        };
        for (i, h) in sent.into_iter().enumerate() {
            let t = Instant::now();
            let p = guard
                .identify(h)
                .await
                .map_err(|r| anyhow::anyhow!("{what}: refused with {}", r.status()))?;
            let took = t.elapsed();
            if p.name() != want {
                anyhow::bail!("{what}: identified as {p}, not {want}");
            }
            if i >= warm {
                samples.push(took);
            }
        }
        rows.push((what, samples));
    }
    // The floor under a first use: the ES256 signature check alone (ring,
    // the key parsed once), on the same fresh tokens.
    let verifier = ring::signature::UnparsedPublicKey::new(
        &ring::signature::ECDSA_P256_SHA256_FIXED,
        public.to_vec(),
    );
    let parts: Vec<(Vec<u8>, Vec<u8>)> = fresh
        .iter()
        .map(|h| {
            let t = h[header::AUTHORIZATION].to_str().unwrap_or_default();
            let t = t.trim_start_matches("Bearer ");
            let (input, sig) = t.rsplit_once('.').unwrap_or_default();
            (
                input.as_bytes().to_vec(),
                B64.decode(sig).unwrap_or_default(),
            )
        })
        .collect();
    let mut floor = Vec::with_capacity(n);
    for (i, (input, sig)) in parts.iter().enumerate() {
        let t = Instant::now();
        let ok = verifier.verify(input, sig).is_ok();
        let took = t.elapsed();
        if !ok {
            anyhow::bail!("the bench's own ES256 signature does not verify");
        }
        if i >= warm {
            floor.push(took);
        }
    }
    let fetched = fetches.load(Ordering::SeqCst);
    server.abort();

    println!("\n## OAuth at the HTTP front\n");
    println!(
        "`HttpGuard::identify` per request (the check every `/mcp` request passes), {n} requests each after {warm} warm-up; one ES256 key in the JWKS.\n"
    );
    println!("| identified by | p50 µs | p99 µs |");
    println!("|---|---:|---:|");
    let p50 = |s: &[Duration]| us(percentile(s, 0.5));
    for (what, s) in &rows {
        println!(
            "| {what} | {:.1} | {:.1} |",
            p50(s),
            us(percentile(s, 0.99))
        );
    }
    println!(
        "| (floor) the ES256 signature check alone, ring, key parsed once | {:.1} | {:.1} |",
        p50(&floor),
        us(percentile(&floor, 0.99))
    );
    let first = p50(&rows[1].1) - p50(&rows[0].1);
    let again = p50(&rows[2].1) - p50(&rows[0].1);
    println!(
        "\nOn top of the static token's p50: {first:.1} µs for a token's first use ({:.1} µs of it the signature check's floor), {again:.1} µs after (target < 50 µs). JWKS fetches: {fetched} (the one at start; none on the request path).",
        p50(&floor)
    );
    if fetched != 1 {
        anyhow::bail!("the JWKS was fetched {fetched} times, not once");
    }
    Ok(())
}
