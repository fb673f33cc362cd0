//! HTTP request checks in front of the MCP endpoint: `Host` and `Origin`
//! against DNS rebinding (403), then the bearer token (401). A request that
//! passes carries its [`Principal`]: the one whose token it sent.

use std::net::{IpAddr, SocketAddr};

use axum::extract::{Request, State};
use axum::http::uri::{Authority, Uri};
use axum::http::{HeaderMap, StatusCode, header};
use axum::middleware::Next;
use axum::response::{IntoResponse, Response};

use std::sync::{Arc, PoisonError};

use super::limits::Principal;
use super::oauth::OAuthVerifier;
use crate::secrets::{eq_32, sha256};
use crate::telemetry::metrics;

/// The static tokens in force: each one's hash and principal.
pub type TokenTable = Vec<([u8; 32], Principal)>;

fn token_table(tokens: &[(Principal, String)]) -> TokenTable {
    tokens
        .iter()
        .map(|(p, t)| (sha256(t.as_bytes()), p.clone()))
        .collect()
}

const LOOPBACK_HOSTS: [&str; 2] = ["localhost", "127.0.0.1"];
/// Shortest bearer token accepted at start.
pub const MIN_TOKEN_LEN: usize = 16;

/// A token an operator configured, checked before wf serves with it.
pub fn check_token(token: &str, what: &str) -> anyhow::Result<()> {
    if token.trim().is_empty() {
        anyhow::bail!("{what} is empty: set a random token of at least {MIN_TOKEN_LEN} characters");
    }
    if let Some(c) = token.chars().find(|c| !c.is_ascii_graphic()) {
        anyhow::bail!(
            "{what} contains {c:?}: use printable ASCII without spaces (e.g. `openssl rand -hex 32`)"
        );
    }
    if token.len() < MIN_TOKEN_LEN {
        anyhow::bail!(
            "{what} is {} characters long: use at least {MIN_TOKEN_LEN} (e.g. `openssl rand -hex 32`)",
            token.len()
        );
    }
    Ok(())
}

/// A host name or address as compared: lower case, no trailing dot, IPv6
/// without brackets, IP addresses in canonical form.
fn norm_host(host: &str) -> String {
    let host = host.to_ascii_lowercase();
    let host = host.strip_suffix('.').unwrap_or(&host);
    let bare = host
        .strip_prefix('[')
        .and_then(|h| h.strip_suffix(']'))
        .unwrap_or(host);
    match bare.parse::<IpAddr>() {
        Ok(ip) => ip.to_string(),
        Err(_) => bare.to_string(),
    }
}

/// A `Host` value or an allowed-host entry: host and optional port.
/// `None` when it is not a plain `host[:port]` authority (userinfo, junk
/// after an IPv6 literal, an empty host).
pub(crate) fn parse_authority(s: &str) -> Option<(String, Option<u16>)> {
    if let Some(plain) = plain_authority(s) {
        return Some(plain);
    }
    uri_authority(s)
}

/// The common `Host` forms (`localhost:8080`, `127.0.0.1:8080`, a DNS name)
/// read without building a URI authority (4 K instructions a request):
/// letters, digits, `.` and `-`, then an optional port of 1–5 digits that
/// fits. Anything else (IPv6, userinfo, odd ports) is left to
/// [`uri_authority`], which reads these the same way.
fn plain_authority(s: &str) -> Option<(String, Option<u16>)> {
    let (host, port) = match s.split_once(':') {
        Some((host, port)) => {
            if port.is_empty() || port.len() > 5 || !port.bytes().all(|b| b.is_ascii_digit()) {
                return None;
            }
            (host, Some(port.parse::<u16>().ok()?))
        }
        None => (s, None),
    };
    if host.is_empty()
        || !host
            .bytes()
            .all(|b| b.is_ascii_alphanumeric() || b == b'.' || b == b'-')
    {
        return None;
    }
    Some((norm_host(host), port))
}

/// [`parse_authority`] by the `http` crate's URI authority.
fn uri_authority(s: &str) -> Option<(String, Option<u16>)> {
    let a: Authority = s.parse().ok()?;
    if a.as_str().contains('@') || a.host().is_empty() {
        return None;
    }
    let host = a.host();
    if host.starts_with('[') && norm_host(host).parse::<IpAddr>().is_err() {
        return None;
    }
    // Nothing but `:port` may follow the host (`[::1]evil.com` parses as an
    // authority whose host is `[::1]`).
    let rest = a.as_str().strip_prefix(host)?;
    if !rest.is_empty() {
        let port = rest.strip_prefix(':')?;
        if port.is_empty() || !port.bytes().all(|b| b.is_ascii_digit()) || a.port_u16().is_none() {
            return None;
        }
    }
    Some((norm_host(host), a.port_u16()))
}

/// An allowed-host entry: an authority, or a bare IPv6 address (how
/// operators write one in a list).
fn parse_host_entry(s: &str) -> Option<(String, Option<u16>)> {
    match s.parse::<IpAddr>() {
        Ok(ip) => Some((ip.to_string(), None)),
        Err(_) => parse_authority(s),
    }
}

/// An `Origin` value or an allowed-origin entry: scheme, host and port
/// (the scheme's default when absent).
pub(crate) fn parse_origin(s: &str) -> Option<(String, String, u16)> {
    let uri: Uri = s.trim_end_matches('/').parse().ok()?;
    let scheme = uri.scheme_str()?.to_ascii_lowercase();
    let default_port = match scheme.as_str() {
        "http" => 80,
        "https" => 443,
        _ => return None,
    };
    if uri
        .path_and_query()
        .is_some_and(|p| p.as_str() != "/" && !p.as_str().is_empty())
    {
        return None;
    }
    let (host, port) = parse_authority(uri.authority()?.as_str())?;
    Some((scheme, host, port.unwrap_or(default_port)))
}

fn is_loopback(host: &str) -> bool {
    LOOPBACK_HOSTS.contains(&host) || host.parse::<IpAddr>().is_ok_and(|ip| ip.is_loopback())
}

pub struct HttpGuard {
    /// SHA-256 of each principal's bearer token: compared hash to hash, so
    /// neither a token's bytes nor its length show in the timing. Empty
    /// without OAuth: no token needed (loopback only), every request is
    /// `local`. Replaced when the config is reloaded.
    tokens: std::sync::RwLock<Arc<TokenTable>>,
    /// `[server.oauth]`: access tokens from an identity provider.
    oauth: Option<Arc<OAuthVerifier>>,
    hosts: Vec<(String, Option<u16>)>,
    origins: Vec<(String, String, u16)>,
    /// `"null"` is in the allowed origins.
    null_origin: bool,
}

impl HttpGuard {
    /// Loopback names are always accepted as `Host`, and so is the bound
    /// address when it is a specific one. Entries that do not parse are
    /// reported by [`HttpGuard::check_lists`].
    pub fn new(
        bind: SocketAddr,
        tokens: &[(Principal, String)],
        extra_hosts: &[String],
        extra_origins: &[String],
    ) -> Self {
        let mut hosts: Vec<(String, Option<u16>)> = Vec::new();
        if !bind.ip().is_unspecified() {
            hosts.push((bind.ip().to_string(), None));
        }
        hosts.extend(extra_hosts.iter().filter_map(|h| parse_host_entry(h)));
        Self {
            tokens: std::sync::RwLock::new(Arc::new(token_table(tokens))),
            oauth: None,
            hosts,
            origins: extra_origins
                .iter()
                .filter_map(|o| parse_origin(o))
                .collect(),
            null_origin: extra_origins.iter().any(|o| o == "null"),
        }
    }

    /// Also accepts the access tokens `oauth` checks.
    pub fn with_oauth(mut self, oauth: Option<Arc<OAuthVerifier>>) -> Self {
        self.oauth = oauth;
        self
    }

    pub fn oauth(&self) -> Option<&Arc<OAuthVerifier>> {
        self.oauth.as_ref()
    }

    /// Puts a reloaded config's static tokens in force: a token no longer
    /// listed is refused from the next request on.
    pub fn set_tokens(&self, tokens: &[(Principal, String)]) {
        *self.tokens.write().unwrap_or_else(PoisonError::into_inner) =
            Arc::new(token_table(tokens));
    }

    fn token_table(&self) -> Arc<TokenTable> {
        self.tokens
            .read()
            .unwrap_or_else(PoisonError::into_inner)
            .clone()
    }

    /// Every configured host and origin must parse.
    pub fn check_lists(extra_hosts: &[String], extra_origins: &[String]) -> anyhow::Result<()> {
        if let Some(h) = extra_hosts.iter().find(|h| parse_host_entry(h).is_none()) {
            anyhow::bail!("server.allowed_hosts: {h:?} is not a host or host:port");
        }
        if let Some(o) = extra_origins
            .iter()
            .find(|o| *o != "null" && parse_origin(o).is_none())
        {
            anyhow::bail!("server.allowed_origins: {o:?} is not an http(s)://host[:port] origin");
        }
        Ok(())
    }

    pub(crate) fn host_ok(&self, headers: &HeaderMap) -> bool {
        let Some((host, port)) = headers
            .get(header::HOST)
            .and_then(|h| h.to_str().ok())
            .and_then(parse_authority)
        else {
            return false;
        };
        is_loopback(&host)
            || self
                .hosts
                .iter()
                .any(|(h, p)| *h == host && (p.is_none() || *p == port))
    }

    pub(crate) fn origin_ok(&self, headers: &HeaderMap) -> bool {
        let Some(origin) = headers.get(header::ORIGIN) else {
            return true;
        };
        let Ok(origin) = origin.to_str() else {
            return false;
        };
        if origin == "null" {
            return self.null_origin;
        }
        let Some(o) = parse_origin(origin) else {
            return false;
        };
        is_loopback(&o.1) || self.origins.contains(&o)
    }

    /// The principal whose token the request sent; `None` when it sent
    /// none or a wrong one. Every token is compared (no early exit), so the
    /// timing does not tell which one matched.
    pub(crate) fn principal(&self, headers: &HeaderMap) -> Option<Principal> {
        let table = self.token_table();
        if table.is_empty() && self.oauth.is_none() {
            return Some(Principal::local());
        }
        let got = bearer(headers)?;
        let got = sha256(got.as_bytes());
        let mut found = None;
        for (hash, p) in table.iter() {
            if eq_32(&got, hash) {
                found = Some(p.clone());
            }
        }
        found
    }

    /// The principal of a request: a static token's, else the one an OAuth
    /// access token names; or the refusal to answer with (401 with the
    /// challenge that points to the resource metadata, 403 for a missing
    /// scope).
    pub async fn identify(&self, headers: &HeaderMap) -> Result<Principal, Response> {
        if let Some(p) = self.principal(headers) {
            let via = if p.name() == Principal::LOCAL {
                "local"
            } else {
                "token"
            };
            metrics::http_request(p.name(), via);
            return Ok(p);
        }
        let Some(oauth) = &self.oauth else {
            return Err(closing(
                (
                    StatusCode::UNAUTHORIZED,
                    [(header::WWW_AUTHENTICATE, "Bearer".to_string())],
                    "unauthorized: bearer token required\n",
                )
                    .into_response(),
            ));
        };
        let Some(token) = bearer(headers) else {
            return Err(closing(
                (
                    StatusCode::UNAUTHORIZED,
                    [(header::WWW_AUTHENTICATE, oauth.challenge(None))],
                    "unauthorized: bearer token required\n",
                )
                    .into_response(),
            ));
        };
        match oauth.verify(token).await {
            Ok(p) => {
                if self.names_static(&p) {
                    tracing::warn!(principal = %p, "OAuth token refused: its principal claim names a static principal");
                    return Err(refused(
                        oauth,
                        &super::oauth::Refusal {
                            status: StatusCode::UNAUTHORIZED,
                            error: "invalid_token",
                            reason: "the principal claim names a static principal".into(),
                        },
                    ));
                }
                metrics::http_request(p.name(), "oauth");
                Ok(p)
            }
            Err(r) => {
                tracing::info!(status = r.status.as_u16(), reason = %r.reason, "OAuth token refused");
                Err(refused(oauth, &r))
            }
        }
    }

    /// Whether `p` is a name a static token (or stdio) owns: an OAuth
    /// token or sign-in naming it is refused, so it cannot pass for them.
    pub(crate) fn names_static(&self, p: &Principal) -> bool {
        p.name() == Principal::LOCAL
            || p.name() == Principal::DEFAULT
            || self.token_table().iter().any(|(_, q)| q == p)
    }

    /// Whether bearer tokens are needed (else loopback only, token-less).
    pub(crate) fn has_tokens(&self) -> bool {
        !self.token_table().is_empty() || self.oauth.is_some()
    }

    #[cfg(test)]
    fn token_ok(&self, headers: &HeaderMap) -> bool {
        self.principal(headers).is_some()
    }
}

fn bearer(headers: &HeaderMap) -> Option<&str> {
    headers
        .get(header::AUTHORIZATION)
        .and_then(|h| h.to_str().ok())
        .and_then(|h| h.strip_prefix("Bearer "))
}

fn refused(oauth: &OAuthVerifier, r: &super::oauth::Refusal) -> Response {
    closing(
        (
            r.status,
            [(header::WWW_AUTHENTICATE, oauth.challenge(Some(r)))],
            format!("{}: {}\n", r.error, r.reason),
        )
            .into_response(),
    )
}

/// A refusal is answered before the request's body is read, so the
/// connection cannot serve another request: say so (`Connection: close`),
/// or a client that pools connections (httpx) sends its retry with the
/// token down a connection that is closing and fails.
fn closing(mut r: Response) -> Response {
    r.headers_mut().insert(
        header::CONNECTION,
        axum::http::HeaderValue::from_static("close"),
    );
    r
}

impl std::fmt::Debug for HttpGuard {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("HttpGuard")
            .field("tokens", &self.token_table().len())
            .field(
                "oauth",
                &self.oauth.as_ref().map(|o| o.issuer().to_string()),
            )
            .finish_non_exhaustive()
    }
}

/// The 403 for a request whose `Host` or `Origin` is not allowed.
pub(crate) fn host_origin_refusal(g: &HttpGuard, headers: &HeaderMap) -> Option<Response> {
    if !g.host_ok(headers) {
        return Some(
            (
                StatusCode::FORBIDDEN,
                "forbidden: Host header not allowed (DNS rebinding protection)\n",
            )
                .into_response(),
        );
    }
    if !g.origin_ok(headers) {
        return Some((StatusCode::FORBIDDEN, "forbidden: Origin not allowed\n").into_response());
    }
    None
}

/// `Host` and `Origin` only, no token: for pages a browser loads by
/// navigation (it cannot send a bearer token), which hold no data.
pub async fn guard_host_origin(
    State(g): State<std::sync::Arc<HttpGuard>>,
    request: Request,
    next: Next,
) -> Response {
    if let Some(refused) = host_origin_refusal(&g, request.headers()) {
        return refused;
    }
    next.run(request).await
}

/// The `/mcp` guard: `Host`, `Origin`, then who is calling. An admitted
/// request carries its [`Principal`]; a refused one gives the answer to send
/// instead. A step of the HTTP front's one middleware
/// (`server::http::front_door`), not a layer of its own: each axum layer
/// boxes its future and wraps the next layer again on every request.
pub async fn admit(g: &HttpGuard, request: &mut Request) -> Option<Response> {
    let headers = request.headers();
    if let Some(refused) = host_origin_refusal(g, headers) {
        return Some(refused);
    }
    match g.identify(headers).await {
        Ok(principal) => {
            request.extensions_mut().insert(principal);
            None
        }
        Err(refused) => Some(refused),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::secrets::constant_time_eq;
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
            &[(Principal::bearer(), "s3cret-s3cret-s3cret".into())],
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
        assert!(g.token_ok(&headers(&[(
            header::AUTHORIZATION,
            "Bearer s3cret-s3cret-s3cret"
        )])));
        assert!(!g.token_ok(&headers(&[(
            header::AUTHORIZATION,
            "Bearer s3cret-s3cret-s3cres"
        )])));
        assert!(!g.token_ok(&headers(&[(header::AUTHORIZATION, "Bearer s3")])));
        assert!(!g.token_ok(&headers(&[])));
    }

    #[test]
    fn a_plain_host_reads_as_the_uri_authority_does() {
        for s in [
            "localhost",
            "localhost:8080",
            "LOCALHOST.:80",
            "127.0.0.1:1",
            "127.000.0.1",
            "wf.example:0443",
            "wf.example:65535",
            "wf.example:65536",
            "wf.example:",
            "wf.example:x",
            ":80",
            "a-b.c-d:9",
            "a..b",
        ] {
            if let Some(plain) = plain_authority(s) {
                assert_eq!(Some(plain), uri_authority(s), "{s}");
            }
            assert_eq!(parse_authority(s), uri_authority(s), "{s}");
        }
        for other in ["[::1]:8080", "user@host", "host:80:80", "wf.example:123456"] {
            assert_eq!(plain_authority(other), None, "{other}");
        }
    }

    fn host(g: &HttpGuard, h: &str) -> bool {
        g.host_ok(&headers(&[(header::HOST, h)]))
    }

    fn origin(g: &HttpGuard, o: &str) -> bool {
        g.origin_ok(&headers(&[(header::ORIGIN, o)]))
    }

    #[test]
    fn hosts_are_parsed_not_matched_as_text() {
        let g = HttpGuard::new(
            "[::1]:8080".parse().unwrap(),
            &[],
            &["wf.example:8443".into(), "fd00::5".into()],
            &[],
        );
        for ok in [
            "[::1]",
            "[::1]:8080",
            "[0:0:0:0:0:0:0:1]:1",
            "LOCALHOST",
            "localhost.",
            "localhost.:80",
            "127.0.0.1",
            "127.0.0.2:9",
            "wf.example:8443",
            "WF.EXAMPLE.:8443",
            "[fd00::5]:80",
        ] {
            assert!(host(&g, ok), "{ok} should pass");
        }
        for bad in [
            "[::1]evil.com",
            "[::1]evil.com:80",
            "[::1].evil.com",
            "localhost.evil.com",
            "localhost:80@evil.com",
            "user@localhost",
            "evil.com#localhost",
            "wf.example",
            "wf.example:443",
            "[::1",
            "::1",
            "[::2]",
            "[fd00::5",
            "localhost:99999",
            "localhost:x",
            "",
            "127.0.0.1 evil.com",
        ] {
            assert!(!host(&g, bad), "{bad:?} should be refused");
        }
    }

    #[test]
    fn origins_are_parsed_not_matched_as_text() {
        let g = HttpGuard::new(
            "127.0.0.1:8080".parse().unwrap(),
            &[],
            &[],
            &["https://app.example".into(), "http://[fd00::5]:3000".into()],
        );
        for ok in [
            "http://[::1]",
            "http://[::1]:3000",
            "https://LOCALHOST:1",
            "http://localhost.:8080",
            "http://127.0.0.1:8080",
            "https://app.example",
            "https://app.example:443",
            "https://APP.example/",
            "http://[fd00::5]:3000",
        ] {
            assert!(origin(&g, ok), "{ok} should pass");
        }
        for bad in [
            "http://[::1]evil.com",
            "http://[::1]evil.com:80",
            "http://localhost.evil.com",
            "http://localhost@evil.com",
            "http://app.example",
            "https://app.example:8443",
            "https://app.example.evil.com",
            "http://[fd00::5]:3001",
            "file://localhost",
            "ws://localhost",
            "http://localhost/path",
            "null",
            "localhost",
            "",
        ] {
            assert!(!origin(&g, bad), "{bad:?} should be refused");
        }
    }

    #[test]
    fn each_token_is_its_principal() {
        let g = HttpGuard::new(
            "127.0.0.1:8080".parse().unwrap(),
            &[
                (Principal::named("alice"), "alice-token-0123456789".into()),
                (Principal::named("bob"), "bob-token-0123456789ab".into()),
            ],
            &[],
            &[],
        );
        let bearer = |t: &str| headers(&[(header::AUTHORIZATION, &format!("Bearer {t}"))]);
        assert_eq!(
            g.principal(&bearer("alice-token-0123456789")),
            Some(Principal::named("alice"))
        );
        assert_eq!(
            g.principal(&bearer("bob-token-0123456789ab")),
            Some(Principal::named("bob"))
        );
        assert_eq!(g.principal(&bearer("carol-token-012345678")), None);
        assert_eq!(g.principal(&headers(&[])), None);
        let open = HttpGuard::new("127.0.0.1:8080".parse().unwrap(), &[], &[], &[]);
        assert_eq!(open.principal(&headers(&[])), Some(Principal::local()));
    }

    #[test]
    fn tokens() {
        assert!(check_token("", "t").is_err());
        assert!(check_token("   ", "t").is_err());
        assert!(check_token("0123456789abcde", "t").is_err());
        assert!(check_token("0123456789abcdef ", "t").is_err());
        assert!(check_token("0123456789abcdef", "t").is_ok());
        assert!(constant_time_eq(b"abc", b"abc"));
        assert!(!constant_time_eq(b"abc", b"abcd"));
    }
}
