//! The HTTP front: raw bytes sent over loopback to the real `serve_http`
//! (hyper's parsing, the Host/Origin/bearer guard, rmcp's streamable HTTP
//! service) of an in-process host with no plugins. The host must answer or
//! close, and keep serving: every input opens a new connection.

use std::io::{Read, Write};
use std::net::{SocketAddr, TcpStream};
use std::sync::OnceLock;
use std::time::Duration;

use tokio_util::sync::CancellationToken;
use wf_host::app::{App, StartOptions};
use wf_host::config::ServerConfig;
use wf_host::server::{HttpOptions, Surfaces, serve_http};

/// The token the fuzzed server wants (seeds use it, so the fuzzer gets past the guard).
pub const TOKEN: &str = "fuzz-token-0123456789abcdef";

const SERVER_THREAD: &str = "wf-fuzz-http";

fn server() -> SocketAddr {
    static ADDR: OnceLock<SocketAddr> = OnceLock::new();
    *ADDR.get_or_init(|| {
        super::quiet();
        // `wf` runs with SIGPIPE ignored (Rust's runtime sets it before
        // `main`), so a write to a connection the peer closed is an error.
        // libFuzzer's `main` leaves the default, and a server that hangs up
        // early would kill the run with no report (seen after 914 557 inputs).
        // SAFETY: sets one signal's disposition to SIG_IGN, before any thread
        // of the server exists; nothing else in the process handles SIGPIPE.
        unsafe { libc::signal(libc::SIGPIPE, libc::SIG_IGN) };
        // A panic in a server task is a finding, not a dropped connection:
        // on the server's own threads it aborts the process.
        let previous = std::panic::take_hook();
        std::panic::set_hook(Box::new(move |info| {
            previous(info);
            if std::thread::current()
                .name()
                .is_some_and(|n| n.starts_with(SERVER_THREAD))
            {
                std::process::abort();
            }
        }));
        // A free port: bound and released here, then bound by the server.
        let addr = std::net::TcpListener::bind("127.0.0.1:0")
            .and_then(|l| l.local_addr())
            .expect("a free loopback port");
        let dir = super::scratch().join("http");
        std::fs::create_dir_all(dir.join("plugins")).expect("scratch dirs");
        let server = std::thread::Builder::new().name(SERVER_THREAD.into());
        let spawned = server.spawn(move || {
            let rt = tokio::runtime::Builder::new_multi_thread()
                .worker_threads(1)
                .thread_name(SERVER_THREAD)
                .enable_all()
                .build()
                .expect("runtime");
            rt.block_on(async move {
                let opts = StartOptions {
                    config: None,
                    plugin_dirs: vec![dir.join("plugins")],
                    state_dir: Some(dir.join("state")),
                    log_level: "off".into(),
                    allow_insecure_plugin_dir: false,
                    ..Default::default()
                };
                let app = App::start(&opts).await.expect("host starts");
                let mut http = HttpOptions::new(addr, Some(TOKEN.into()), &ServerConfig::default());
                http.allowed_hosts = vec!["wf.example".into()];
                http.allowed_origins = vec!["https://app.example".into()];
                let surfaces = Surfaces::new(&app);
                serve_http(app, surfaces, http, CancellationToken::new())
                    .await
                    .expect("serve_http");
            });
        });
        spawned.expect("server thread");
        for _ in 0..500 {
            if TcpStream::connect(addr).is_ok() {
                return addr;
            }
            std::thread::sleep(Duration::from_millis(10));
        }
        panic!("the HTTP front did not start on {addr}");
    })
}

/// One connection: `data` as the request bytes, then the response up to EOF
/// (or 64 KiB, or a quiet second: an SSE stream stays open).
pub fn http(data: &[u8]) {
    let addr = server();
    let mut conn = TcpStream::connect(addr).expect("the host stopped accepting connections");
    conn.set_read_timeout(Some(Duration::from_secs(1))).ok();
    conn.set_write_timeout(Some(Duration::from_secs(1))).ok();
    if conn.write_all(data).is_err() {
        return;
    }
    let _ = conn.shutdown(std::net::Shutdown::Write);
    let mut buf = [0u8; 4096];
    let mut total = 0;
    while total < 64 * 1024 {
        match conn.read(&mut buf) {
            Ok(0) | Err(_) => break,
            Ok(n) => total += n,
        }
    }
}
