//! HTTP request checks in front of the MCP endpoint: `Host` and `Origin`
//! against DNS rebinding (403), then the bearer token (401).

use std::net::SocketAddr;

use axum::extract::{Request, State};
use axum::http::{HeaderMap, StatusCode, header};
use axum::middleware::Next;
use axum::response::{IntoResponse, Response};

const LOOPBACK_HOSTS: [&str; 4] = ["localhost", "127.0.0.1", "::1", "[::1]"];

#[derive(Debug, Clone)]
pub struct HttpGuard {
    token: Option<String>,
    hosts: Vec<String>,
    origins: Vec<String>,
}

impl HttpGuard {
    /// Loopback names are always accepted as `Host`, and so is the bound
    /// address when it is a specific one.
    pub fn new(
        bind: SocketAddr,
        token: Option<String>,
        extra_hosts: &[String],
        extra_origins: &[String],
    ) -> Self {
        let mut hosts: Vec<String> = LOOPBACK_HOSTS.iter().map(|h| h.to_string()).collect();
        if !bind.ip().is_unspecified() {
            hosts.push(bind.ip().to_string());
        }
        hosts.extend(extra_hosts.iter().map(|h| h.to_ascii_lowercase()));
        let origins = extra_origins
            .iter()
            .map(|o| o.trim_end_matches('/').to_ascii_lowercase())
            .collect();
        Self {
            token,
            hosts,
            origins,
        }
    }

    fn host_ok(&self, headers: &HeaderMap) -> bool {
        let Some(host) = headers.get(header::HOST).and_then(|h| h.to_str().ok()) else {
            return false;
        };
        let host = host.to_ascii_lowercase();
        self.hosts
            .iter()
            .any(|h| *h == host || *h == strip_port(&host))
    }

    fn origin_ok(&self, headers: &HeaderMap) -> bool {
        let Some(origin) = headers.get(header::ORIGIN).and_then(|h| h.to_str().ok()) else {
            return true;
        };
        let origin = origin.trim_end_matches('/').to_ascii_lowercase();
        if self.origins.contains(&origin) {
            return true;
        }
        let Some((scheme, authority)) = origin.split_once("://") else {
            return false;
        };
        matches!(scheme, "http" | "https") && LOOPBACK_HOSTS.contains(&strip_port(authority))
    }

    fn token_ok(&self, headers: &HeaderMap) -> bool {
        let Some(expected) = &self.token else {
            return true;
        };
        let got = headers
            .get(header::AUTHORIZATION)
            .and_then(|h| h.to_str().ok())
            .and_then(|h| h.strip_prefix("Bearer "));
        got.is_some_and(|g| constant_time_eq(g.as_bytes(), expected.as_bytes()))
    }
}

fn strip_port(authority: &str) -> &str {
    if let Some(rest) = authority.strip_prefix('[') {
        // [::1]:8080 → ::1
        return rest.split(']').next().unwrap_or(rest);
    }
    match authority.rsplit_once(':') {
        Some((h, p)) if p.chars().all(|c| c.is_ascii_digit()) => h,
        _ => authority,
    }
}

pub(crate) fn constant_time_eq(a: &[u8], b: &[u8]) -> bool {
    a.len() == b.len() && a.iter().zip(b).fold(0u8, |acc, (x, y)| acc | (x ^ y)) == 0
}

pub async fn guard(
    State(g): State<std::sync::Arc<HttpGuard>>,
    request: Request,
    next: Next,
) -> Response {
    let headers = request.headers();
    if !g.host_ok(headers) {
        return (
            StatusCode::FORBIDDEN,
            "forbidden: Host header not allowed (DNS rebinding protection)\n",
        )
            .into_response();
    }
    if !g.origin_ok(headers) {
        return (StatusCode::FORBIDDEN, "forbidden: Origin not allowed\n").into_response();
    }
    if !g.token_ok(headers) {
        return (
            StatusCode::UNAUTHORIZED,
            [(header::WWW_AUTHENTICATE, "Bearer")],
            "unauthorized: bearer token required\n",
        )
            .into_response();
    }
    next.run(request).await
}

#[cfg(test)]
mod tests {
    use super::*;
    use axum::http::HeaderValue;

    fn headers(pairs: &[(header::HeaderName, &str)]) -> HeaderMap {
        let mut h = HeaderMap::new();
        for (k, v) in pairs {
            h.insert(k.clone(), HeaderValue::from_str(v).unwrap());
        }
        h
    }

    #[test]
    fn host_origin_and_token() {
        let g = HttpGuard::new(
            "127.0.0.1:8080".parse().unwrap(),
            Some("s3".into()),
            &["wf.example".into()],
            &["https://app.example".into()],
        );
        assert!(g.host_ok(&headers(&[(header::HOST, "127.0.0.1:8080")])));
        assert!(g.host_ok(&headers(&[(header::HOST, "localhost")])));
        assert!(g.host_ok(&headers(&[(header::HOST, "[::1]:9")])));
        assert!(g.host_ok(&headers(&[(header::HOST, "WF.example:443")])));
        assert!(!g.host_ok(&headers(&[(header::HOST, "evil.example")])));
        assert!(!g.host_ok(&headers(&[])));
        assert!(g.origin_ok(&headers(&[])));
        assert!(g.origin_ok(&headers(&[(header::ORIGIN, "http://localhost:3000")])));
        assert!(g.origin_ok(&headers(&[(header::ORIGIN, "https://app.example")])));
        assert!(!g.origin_ok(&headers(&[(header::ORIGIN, "http://evil.example")])));
        assert!(!g.origin_ok(&headers(&[(header::ORIGIN, "null")])));
        assert!(g.token_ok(&headers(&[(header::AUTHORIZATION, "Bearer s3")])));
        assert!(!g.token_ok(&headers(&[(header::AUTHORIZATION, "Bearer s4")])));
        assert!(!g.token_ok(&headers(&[])));
    }
}
