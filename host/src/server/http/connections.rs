//! The HTTP accept loop: hyper's HTTP/1 server with a header-read timeout,
//! an idle timeout and a bound on open connections. At the bound, the oldest
//! connection that has not sent a request yet makes room (an idle socket
//! cannot starve a real client); when every connection is in use, the new
//! one gets a 503 and is closed.

use std::collections::HashMap;
use std::io;
use std::pin::Pin;
use std::sync::PoisonError;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex};
use std::task::{Context, Poll};
use std::time::{Duration, Instant};

use axum::Router;
use axum::body::Body;
use hyper::body::Incoming;
use hyper::server::conn::http1;
use hyper_util::rt::{TokioIo, TokioTimer};
use tokio::io::{AsyncRead, AsyncWrite, ReadBuf};
use tokio::net::{TcpListener, TcpStream};
use tokio_util::sync::CancellationToken;
use tower::ServiceExt;

use crate::app::FrontStats;
use crate::server::identity::limits::RateLimitedWarn;

#[derive(Debug, Clone, Copy)]
pub struct ConnLimits {
    pub max_connections: usize,
    pub header_read_timeout: Duration,
    pub idle_timeout: Duration,
}

/// When a connection last moved a byte, and how many requests it sent.
struct Activity {
    base: Instant,
    last_ms: AtomicU64,
    requests: AtomicU64,
}

impl Activity {
    fn new() -> Self {
        Self {
            base: Instant::now(),
            last_ms: AtomicU64::new(0),
            requests: AtomicU64::new(0),
        }
    }

    fn touch(&self) {
        let ms = self.base.elapsed().as_millis() as u64;
        self.last_ms.store(ms, Ordering::Relaxed);
    }

    fn idle_for(&self) -> Duration {
        let last = Duration::from_millis(self.last_ms.load(Ordering::Relaxed));
        self.base.elapsed().saturating_sub(last)
    }
}

/// A socket that records its traffic.
struct Tracked {
    io: TcpStream,
    activity: Arc<Activity>,
}

impl AsyncRead for Tracked {
    fn poll_read(
        mut self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        buf: &mut ReadBuf<'_>,
    ) -> Poll<io::Result<()>> {
        let before = buf.filled().len();
        let r = Pin::new(&mut self.io).poll_read(cx, buf);
        if buf.filled().len() > before {
            self.activity.touch();
        }
        r
    }
}

impl AsyncWrite for Tracked {
    fn poll_write(
        mut self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        buf: &[u8],
    ) -> Poll<io::Result<usize>> {
        let r = Pin::new(&mut self.io).poll_write(cx, buf);
        if matches!(r, Poll::Ready(Ok(n)) if n > 0) {
            self.activity.touch();
        }
        r
    }

    fn poll_flush(mut self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<io::Result<()>> {
        Pin::new(&mut self.io).poll_flush(cx)
    }

    fn poll_shutdown(mut self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<io::Result<()>> {
        Pin::new(&mut self.io).poll_shutdown(cx)
    }

    fn poll_write_vectored(
        mut self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        bufs: &[io::IoSlice<'_>],
    ) -> Poll<io::Result<usize>> {
        let r = Pin::new(&mut self.io).poll_write_vectored(cx, bufs);
        if matches!(r, Poll::Ready(Ok(n)) if n > 0) {
            self.activity.touch();
        }
        r
    }

    fn is_write_vectored(&self) -> bool {
        self.io.is_write_vectored()
    }
}

struct Conn {
    activity: Arc<Activity>,
    kill: CancellationToken,
}

/// The open connections.
struct Registry {
    conns: Mutex<HashMap<u64, Conn>>,
    count: tokio::sync::watch::Sender<usize>,
    stats: Arc<FrontStats>,
}

enum Room {
    Free,
    /// A connection that never sent a request was closed to make room.
    Evicted,
    Full,
}

impl Registry {
    fn publish(&self, n: usize) {
        self.count.send_replace(n);
        self.stats.http_connections.store(n, Ordering::Relaxed);
    }

    fn make_room(&self, max: usize) -> Room {
        let mut conns = self.conns.lock().unwrap_or_else(PoisonError::into_inner);
        if conns.len() < max {
            return Room::Free;
        }
        let victim = conns
            .iter()
            .filter(|(_, c)| c.activity.requests.load(Ordering::Relaxed) == 0)
            .max_by_key(|(_, c)| c.activity.base.elapsed())
            .map(|(id, _)| *id);
        let Some(id) = victim else {
            return Room::Full;
        };
        if let Some(c) = conns.remove(&id) {
            c.kill.cancel();
        }
        let n = conns.len();
        drop(conns);
        self.publish(n);
        Room::Evicted
    }

    fn insert(&self, id: u64, conn: Conn) {
        let mut conns = self.conns.lock().unwrap_or_else(PoisonError::into_inner);
        conns.insert(id, conn);
        let n = conns.len();
        drop(conns);
        self.publish(n);
    }

    fn remove(&self, id: u64) {
        let mut conns = self.conns.lock().unwrap_or_else(PoisonError::into_inner);
        conns.remove(&id);
        let n = conns.len();
        drop(conns);
        self.publish(n);
    }
}

fn busy_response() -> Vec<u8> {
    let body = "wf: too many open connections (server.max_connections)\n";
    format!(
        "HTTP/1.1 503 Service Unavailable\r\ncontent-type: text/plain\r\nretry-after: 1\r\n\
         connection: close\r\ncontent-length: {}\r\n\r\n{body}",
        body.len()
    )
    .into_bytes()
}

/// Serves `router` until `shutdown`, then waits a little for open
/// connections to finish.
pub async fn serve(
    listener: TcpListener,
    router: Router,
    limits: ConnLimits,
    stats: Arc<FrontStats>,
    shutdown: CancellationToken,
) {
    let registry = Arc::new(Registry {
        conns: Mutex::new(HashMap::new()),
        count: tokio::sync::watch::Sender::new(0),
        stats,
    });
    // Apart: a refusal (a client turned away) must not go unsaid because an
    // eviction (an idle socket closed) was logged just before.
    let evicted = RateLimitedWarn::new(Duration::from_secs(10));
    let refused = RateLimitedWarn::new(Duration::from_secs(10));
    let accept_failed = RateLimitedWarn::new(Duration::from_secs(10));
    let mut next_id = 0u64;
    loop {
        let (stream, peer) = tokio::select! {
            r = listener.accept() => match r {
                Ok(c) => c,
                Err(e) => {
                    // Out of file descriptors, typically: say so, and do not spin.
                    accept_failed.warn(|suppressed| tracing::warn!(suppressed, "HTTP accept failed: {e}"));
                    tokio::time::sleep(Duration::from_millis(50)).await;
                    continue;
                }
            },
            () = shutdown.cancelled() => break,
        };
        match registry.make_room(limits.max_connections) {
            Room::Free => {}
            Room::Evicted => evicted.warn(|suppressed| {
                tracing::warn!(
                    max = limits.max_connections,
                    suppressed,
                    "HTTP connection limit reached (server.max_connections): closed the oldest connection that had sent no request"
                )
            }),
            Room::Full => {
                refused.warn(|suppressed| {
                    tracing::warn!(
                        max = limits.max_connections,
                        suppressed,
                        %peer,
                        "HTTP connection refused (503): every connection is in use (server.max_connections)"
                    )
                });
                let _ = stream.try_write(&busy_response());
                continue;
            }
        }
        next_id += 1;
        let id = next_id;
        let activity = Arc::new(Activity::new());
        let kill = CancellationToken::new();
        registry.insert(
            id,
            Conn {
                activity: activity.clone(),
                kill: kill.clone(),
            },
        );
        let registry = registry.clone();
        let router = router.clone();
        let shutdown = shutdown.clone();
        tokio::spawn(async move {
            serve_connection(stream, peer, router, activity, limits, kill, shutdown).await;
            registry.remove(id);
        });
    }
    // Sessions and streams end with the shutdown token; give their
    // connections a moment to say so.
    let mut count = registry.count.subscribe();
    let _ = tokio::time::timeout(Duration::from_secs(3), count.wait_for(|n| *n == 0)).await;
}

async fn serve_connection(
    stream: TcpStream,
    peer: std::net::SocketAddr,
    router: Router,
    activity: Arc<Activity>,
    limits: ConnLimits,
    kill: CancellationToken,
    shutdown: CancellationToken,
) {
    let _ = stream.set_nodelay(true);
    let counted = activity.clone();
    let service = hyper::service::service_fn(move |req: hyper::Request<Incoming>| {
        counted.requests.fetch_add(1, Ordering::Relaxed);
        let mut req = req.map(Body::new);
        // Routes that care who connected (`/metrics`: loopback only) read it.
        req.extensions_mut()
            .insert(axum::extract::ConnectInfo(peer));
        router.clone().oneshot(req)
    });
    let io = TokioIo::new(Tracked {
        io: stream,
        activity: activity.clone(),
    });
    let conn = http1::Builder::new()
        .timer(TokioTimer::new())
        .header_read_timeout(limits.header_read_timeout)
        .serve_connection(io, service);
    tokio::pin!(conn);
    let mut draining = false;
    loop {
        tokio::select! {
            r = conn.as_mut() => {
                if let Err(e) = r {
                    tracing::debug!("HTTP connection ended: {e}");
                }
                return;
            }
            () = kill.cancelled() => return,
            () = idle(&activity, limits.idle_timeout) => {
                tracing::debug!("closing an HTTP connection idle for {:?}", limits.idle_timeout);
                return;
            }
            () = shutdown.cancelled(), if !draining => {
                draining = true;
                conn.as_mut().graceful_shutdown();
            }
        }
    }
}

/// Resolves once the connection has moved no byte for `timeout`.
async fn idle(activity: &Activity, timeout: Duration) {
    loop {
        let idle = activity.idle_for();
        if idle >= timeout {
            return;
        }
        tokio::time::sleep(timeout - idle).await;
    }
}

/// Raises the soft limit on open files so `max_connections` connections fit
/// with room for upstream pipes and files: to the hard limit at most, with
/// one warning when even that is short. A soft limit of 1024 (a common
/// default) would otherwise turn a connection past about 1000 into an
/// accept error instead of the documented 503.
#[cfg(unix)]
pub fn fit_open_files(max_connections: usize) {
    // Upstream pipes, the database, plugin files, log files.
    const HEADROOM: u64 = 512;
    let want = max_connections as u64 + HEADROOM;
    let mut lim = libc::rlimit {
        rlim_cur: 0,
        rlim_max: 0,
    };
    // SAFETY: getrlimit writes into the struct we pass and reads nothing else.
    if unsafe { libc::getrlimit(libc::RLIMIT_NOFILE, &mut lim) } != 0 {
        return;
    }
    if lim.rlim_cur >= want {
        return;
    }
    let raised = libc::rlimit {
        rlim_cur: want.min(lim.rlim_max),
        rlim_max: lim.rlim_max,
    };
    // SAFETY: setrlimit reads the struct we pass; lowering nothing.
    if unsafe { libc::setrlimit(libc::RLIMIT_NOFILE, &raised) } != 0 || raised.rlim_cur < want {
        tracing::warn!(
            open_files = raised.rlim_cur.max(lim.rlim_cur),
            wanted = want,
            "the open-file limit is below server.max_connections plus room for upstreams: \
             connections past it fail to be accepted; raise `ulimit -n` or lower max_connections"
        );
    }
}

#[cfg(not(unix))]
pub fn fit_open_files(_max_connections: usize) {}
