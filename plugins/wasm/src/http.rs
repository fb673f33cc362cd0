//! Outgoing `wasi:http` requests: refused unless the request's host is in
//! the source's `allow_hosts`, then sent over HTTP/1.1 (TLS with the
//! system's roots for `https`).

use std::future::Future;
use std::sync::{Arc, OnceLock};
use std::time::Duration;

use http::uri::Scheme;
use http_body_util::BodyExt;
use hyper_util::rt::TokioIo;
use tokio::net::TcpStream;
use tokio_rustls::TlsConnector;
use tokio_rustls::rustls::{ClientConfig, RootCertStore, pki_types::ServerName};
use wasmtime_wasi_http::{Error, RequestOptions, WasiBody, WasiHttpHooks};

use crate::settings::Settings;

/// A bound on connecting and on waiting for the response's head when the
/// component sets none (its call's `timeout_ms` bounds the whole call).
const DEFAULT_WAIT: Duration = Duration::from_secs(30);

/// The store's `wasi:http` hooks: the allowlist and the sender.
pub struct Hooks {
    source: String,
    settings: Arc<Settings>,
}

impl Hooks {
    pub fn new(source: &str, settings: Arc<Settings>) -> Self {
        Hooks {
            source: source.to_string(),
            settings,
        }
    }
}

type Io = Box<dyn Future<Output = Result<(), Error>> + Send>;
type Sent = Box<dyn Future<Output = Result<(http::Response<WasiBody>, Io)>> + Send>;
type Result<T, E = Error> = std::result::Result<T, E>;

impl WasiHttpHooks for Hooks {
    fn send_request(
        &mut self,
        request: http::Request<WasiBody>,
        options: Option<RequestOptions>,
        _fut: Box<dyn Future<Output = Result<(), Error>> + Send>,
    ) -> Sent {
        let uri = request.uri();
        let host = uri.host().unwrap_or_default().to_string();
        let port = uri.port_u16();
        if !self.settings.host_allowed(&host, port) {
            tracing::warn!(
                source = %self.source,
                host = %host,
                "outgoing HTTP request denied: the host is not in the source's allow_hosts"
            );
            return Box::new(async { Err(Error::HttpRequestDenied) });
        }
        let timeout = Duration::from_millis(self.settings.timeout_ms);
        Box::new(async move {
            let response = send(request, options, timeout).await?;
            Ok((response, Box::new(async { Ok(()) }) as Io))
        })
    }
}

async fn send(
    mut request: http::Request<WasiBody>,
    options: Option<RequestOptions>,
    call_timeout: Duration,
) -> Result<http::Response<WasiBody>> {
    let uri = request.uri().clone();
    let tls = uri.scheme() == Some(&Scheme::HTTPS);
    let host = uri.host().ok_or(Error::HttpRequestUriInvalid)?.to_string();
    let port = uri.port_u16().unwrap_or(if tls { 443 } else { 80 });
    let connect_wait = options
        .and_then(|o| o.connect_timeout)
        .unwrap_or(DEFAULT_WAIT);
    let head_wait = options
        .and_then(|o| o.first_byte_timeout)
        .unwrap_or(DEFAULT_WAIT);
    let bare = host
        .trim_start_matches('[')
        .trim_end_matches(']')
        .to_string();
    let tcp = tokio::time::timeout(connect_wait, TcpStream::connect((bare.as_str(), port)))
        .await
        .map_err(|_| Error::ConnectionTimeout)?
        .map_err(|e| match e.kind() {
            std::io::ErrorKind::ConnectionRefused => Error::ConnectionRefused,
            _ => Error::Connect(e),
        })?;
    // Origin form on the wire: the authority travels in the Host header.
    let path = uri.path_and_query().map(|p| p.as_str()).unwrap_or("/");
    *request.uri_mut() = path.parse().map_err(|_| Error::HttpRequestUriInvalid)?;
    let response = if tls {
        let name = ServerName::try_from(bare)
            .map_err(|_| Error::HttpRequestUriInvalid)?
            .to_owned();
        let stream = TlsConnector::from(tls_config())
            .connect(name, tcp)
            .await
            .map_err(Error::Tls)?;
        exchange(stream, request, head_wait, call_timeout).await?
    } else {
        exchange(tcp, request, head_wait, call_timeout).await?
    };
    Ok(response.map(|body| body.map_err(Error::from).boxed_unsync()))
}

async fn exchange<S>(
    stream: S,
    request: http::Request<WasiBody>,
    head_wait: Duration,
    call_timeout: Duration,
) -> Result<http::Response<hyper::body::Incoming>>
where
    S: tokio::io::AsyncRead + tokio::io::AsyncWrite + Send + Unpin + 'static,
{
    let (mut sender, conn) = hyper::client::conn::http1::handshake(TokioIo::new(stream)).await?;
    // The connection ends with the exchange (the body read or dropped), and
    // at the latest with the call's own bound.
    tokio::spawn(async move {
        let _ = tokio::time::timeout(call_timeout, conn).await;
    });
    tokio::time::timeout(head_wait, sender.send_request(request))
        .await
        .map_err(|_| Error::ConnectionReadTimeout)?
        .map_err(Error::from)
}

/// TLS with the system's roots on aws-lc-rs, built once.
fn tls_config() -> Arc<ClientConfig> {
    static CONFIG: OnceLock<Arc<ClientConfig>> = OnceLock::new();
    CONFIG
        .get_or_init(|| {
            let mut roots = RootCertStore::empty();
            for cert in rustls_native_certs::load_native_certs().certs {
                let _ = roots.add(cert);
            }
            let provider = Arc::new(tokio_rustls::rustls::crypto::aws_lc_rs::default_provider());
            let config = ClientConfig::builder_with_provider(provider)
                .with_safe_default_protocol_versions()
                .expect("aws-lc-rs supports the default protocol versions")
                .with_root_certificates(roots)
                .with_no_client_auth();
            Arc::new(config)
        })
        .clone()
}
