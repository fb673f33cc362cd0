//! A plain-HTTP/1 exchange polled on the caller's own thread.
//!
//! reqwest runs each connection as a task on the plugin's runtime, so a call
//! polled on the host's thread (the plugin ABI's `InlineCall`) hands its
//! request to the plugin's worker and gets the answer handed back: two
//! thread hand-offs a call, each a scheduling delay on a busy machine
//! (docs/benchmarks.md, "OpenAPI source"). Here the connection is driven in
//! the call's own future instead: the request is written from the caller's
//! thread, and a fast API's answer is waited for on that thread too
//! (socket.rs): no other thread takes part in the exchange. Idle
//! connections are kept per host and port.
//!
//! Only for `http://` without a proxy in the environment; anything else, and
//! any redirect, goes through reqwest (its same-origin redirect policy).

use std::future::{Future, poll_fn};
use std::pin::Pin;
use std::sync::Arc;
use std::sync::Mutex;
use std::sync::atomic::{AtomicU32, AtomicUsize, Ordering::Relaxed};
use std::task::Poll;
use std::time::{Duration, Instant};

use bytes::Bytes;
use http_body_util::{BodyExt as _, Full};
use hyper::client::conn::http1;
use hyper_util::rt::TokioIo;
use tokio::net::TcpStream;

use crate::body::Body;
use crate::socket::{Mode, Socket};

/// Idle connections kept per source.
const MAX_IDLE: usize = 8;

/// The longest a call's thread (the host's) waits in the kernel for an
/// answer before it parks the call as any future does (socket.rs).
const INLINE_WAIT: Duration = Duration::from_millis(1);

/// Of the last 16 answers, how many must have come within [`INLINE_WAIT`]
/// for the next to be waited for inline: an API that answers slower (a
/// remote or slow one) does not block the host's thread at all.
const INLINE_IF_FAST: u32 = 8;

type Driver = Pin<Box<http1::Connection<TokioIo<Socket>, Full<Bytes>>>>;

struct Conn {
    key: String,
    send: http1::SendRequest<Full<Bytes>>,
    driver: Driver,
    mode: Arc<Mode>,
    /// The driver finished (the connection is closed); never polled again.
    ended: bool,
}

/// Counts an exchange out when it ends or is dropped.
struct InFlight<'a>(&'a AtomicUsize);

impl Drop for InFlight<'_> {
    fn drop(&mut self) {
        self.0.fetch_sub(1, Relaxed);
    }
}

pub struct Pool {
    idle: Mutex<Vec<Conn>>,
    /// Exchanges under way: only a lone one waits inline, so concurrent
    /// calls never queue behind each other's waits on the host's threads.
    in_flight: AtomicUsize,
    /// The last 16 answers, one bit each (newest lowest): 1 when it came
    /// within [`INLINE_WAIT`].
    answers: AtomicU32,
}

impl Default for Pool {
    fn default() -> Self {
        Pool {
            idle: Mutex::default(),
            in_flight: AtomicUsize::new(0),
            answers: AtomicU32::new(0xffff),
        }
    }
}

/// What the exchange gave: the status, content type, `Location` and body.
pub struct Answer {
    pub status: reqwest::StatusCode,
    pub mime: String,
    pub location: Option<String>,
    pub body: Body,
}

/// Keeps one timer pending on the plugin's runtime for good. tokio wakes
/// its parked driver whenever a timer is set that expires before every
/// pending one, and with none pending that is every call's timeout: one
/// more thread wake-up a call. With this one always due within a second,
/// a call's timeout (of a second or more) is never the earliest, and
/// setting it wakes no one. Costs one wake-up a second.
pub fn keep_timer_armed() {
    static ARMED: std::sync::OnceLock<()> = std::sync::OnceLock::new();
    let Ok(runtime) = tokio::runtime::Handle::try_current() else {
        return;
    };
    ARMED.get_or_init(|| {
        runtime.spawn(async {
            loop {
                tokio::time::sleep(Duration::from_secs(1)).await;
            }
        });
    });
}

/// Whether this process may take the direct path at all: a proxy in the
/// environment is reqwest's to honour.
pub fn allowed() -> bool {
    !["http_proxy", "HTTP_PROXY", "all_proxy", "ALL_PROXY"]
        .iter()
        .any(|k| std::env::var_os(k).is_some_and(|v| !v.is_empty()))
}

/// The request as hyper's, if it can take the direct path.
fn convert(request: &reqwest::Request) -> Option<(String, http::Request<Full<Bytes>>)> {
    let url = request.url();
    if url.scheme() != "http" {
        return None;
    }
    let host = url.host_str()?;
    let port = url.port_or_known_default()?;
    let body = match request.body() {
        None => Bytes::new(),
        Some(b) => Bytes::copy_from_slice(b.as_bytes()?),
    };
    let target = match url.query() {
        Some(q) => format!("{}?{q}", url.path()),
        None => url.path().to_string(),
    };
    let mut out = http::Request::builder()
        .method(request.method().clone())
        .uri(target)
        .body(Full::new(body))
        .ok()?;
    *out.headers_mut() = request.headers().clone();
    let authority = match url.port() {
        Some(p) => format!("{host}:{p}"),
        None => host.to_string(),
    };
    let headers = out.headers_mut();
    headers.insert(http::header::HOST, authority.parse().ok()?);
    headers
        .entry(http::header::ACCEPT)
        .or_insert(http::HeaderValue::from_static("*/*"));
    Some((format!("{host}:{port}"), out))
}

/// Polls `work` while driving the connection. A connection that ends
/// (the server closed it after its answer) may still have completed
/// `work`; it is polled once more, and only then is the end an error.
async fn driving<T>(conn: &mut Conn, work: impl Future<Output = T>) -> Result<T, String> {
    let mut work = std::pin::pin!(work);
    poll_fn(|cx| {
        loop {
            if let Poll::Ready(out) = work.as_mut().poll(cx) {
                return Poll::Ready(Ok(out));
            }
            if conn.ended {
                // Its last poll finished it: never polled again.
                return Poll::Ready(Err("the connection closed".to_string()));
            }
            match conn.driver.as_mut().poll(cx) {
                Poll::Pending => {
                    // What the driver just read may have finished `work` (its
                    // wake-up would only bring the task back here).
                    if let Poll::Ready(out) = work.as_mut().poll(cx) {
                        return Poll::Ready(Ok(out));
                    }
                    // Both wait: for the answer, inline or registered (socket.rs).
                    match conn.mode.poll_starved(cx) {
                        Poll::Ready(Ok(())) => continue,
                        Poll::Ready(Err(e)) => return Poll::Ready(Err(e.to_string())),
                        Poll::Pending => return Poll::Pending,
                    }
                }
                Poll::Ready(end) => {
                    conn.ended = true;
                    if let Poll::Ready(out) = work.as_mut().poll(cx) {
                        return Poll::Ready(Ok(out));
                    }
                    return Poll::Ready(Err(match end {
                        Ok(()) => "the connection closed".to_string(),
                        Err(e) => hyper_text(&e),
                    }));
                }
            }
        }
    })
    .await
}

/// Waits until the connection takes a request, driving it meanwhile.
async fn ready(conn: &mut Conn) -> Result<(), String> {
    poll_fn(|cx| {
        match conn.send.poll_ready(cx) {
            Poll::Ready(Ok(())) => return Poll::Ready(Ok(())),
            Poll::Ready(Err(e)) => return Poll::Ready(Err(hyper_text(&e))),
            Poll::Pending => {}
        }
        if conn.ended {
            return Poll::Ready(Err("the connection closed".to_string()));
        }
        match conn.driver.as_mut().poll(cx) {
            Poll::Pending => match conn.mode.poll_starved(cx) {
                // Readiness to read (a close): let the driver see it.
                Poll::Ready(Ok(())) => {
                    cx.waker().wake_by_ref();
                    Poll::Pending
                }
                Poll::Ready(Err(e)) => Poll::Ready(Err(e.to_string())),
                Poll::Pending => Poll::Pending,
            },
            Poll::Ready(_) => {
                conn.ended = true;
                Poll::Ready(Err("the connection closed".to_string()))
            }
        }
    })
    .await
}

/// Polls the connection once without waiting: it reads an idle
/// connection's close, or settles one whose exchange finished.
async fn settle(conn: &mut Conn) {
    if conn.ended {
        return;
    }
    let ended = poll_fn(|cx| Poll::Ready(conn.driver.as_mut().poll(cx).is_ready())).await;
    conn.ended = ended;
}

fn hyper_text(e: &(dyn std::error::Error + 'static)) -> String {
    let mut text = e.to_string();
    let mut source = e.source();
    while let Some(s) = source {
        text.push_str(": ");
        text.push_str(&s.to_string());
        source = s.source();
    }
    text
}

impl Pool {
    /// An idle connection to `key` that is still open, else a new one.
    async fn checkout(&self, key: &str, timeout: Duration) -> Result<Conn, String> {
        loop {
            let found = {
                let mut idle = self.idle.lock().unwrap_or_else(|p| p.into_inner());
                idle.iter()
                    .position(|c| c.key == key)
                    .map(|i| idle.swap_remove(i))
            };
            let Some(mut conn) = found else { break };
            // A connection the server closed while idle reads as finished.
            settle(&mut conn).await;
            if !conn.ended && !conn.send.is_closed() {
                return Ok(conn);
            }
        }
        let stream = tokio::time::timeout(timeout, TcpStream::connect(key))
            .await
            .map_err(|_| "timed out connecting".to_string())?
            .map_err(|e| format!("cannot connect: {e}"))?;
        let _ = stream.set_nodelay(true);
        // Off the plugin's reactor (it stays non-blocking): socket.rs.
        let stream = stream
            .into_std()
            .map_err(|e| format!("cannot connect: {e}"))?;
        let (socket, mode) = Socket::new(stream).map_err(|e| format!("cannot connect: {e}"))?;
        let (send, driver) = http1::handshake(TokioIo::new(socket))
            .await
            .map_err(|e| hyper_text(&e))?;
        Ok(Conn {
            key: key.to_string(),
            send,
            driver: Box::pin(driver),
            mode,
            ended: false,
        })
    }

    /// Counts an answer's time to its first byte (the head, as hyper has
    /// it) into the history that decides whether the next one is waited
    /// for inline.
    fn answered_in(&self, took: Duration) {
        let fast = u32::from(took <= INLINE_WAIT);
        let _ = self
            .answers
            .fetch_update(Relaxed, Relaxed, |h| Some(((h << 1) | fast) & 0xffff));
    }

    /// Whether enough recent answers came within [`INLINE_WAIT`].
    fn answers_fast(&self) -> bool {
        self.answers.load(Relaxed).count_ones() >= INLINE_IF_FAST
    }

    fn checkin(&self, conn: Conn) {
        let mut idle = self.idle.lock().unwrap_or_else(|p| p.into_inner());
        if idle.len() < MAX_IDLE {
            idle.push(conn);
        }
    }

    /// Sends `request` and reads its answer up to `limit` bytes, or `None`
    /// when the request is not for this path (or was redirected: reqwest
    /// then sends it again under its redirect policy). `on_headers` runs
    /// once the status is in.
    pub async fn exchange(
        &self,
        request: &reqwest::Request,
        limit: usize,
        timeout: Duration,
        on_headers: impl FnOnce(),
    ) -> Option<Result<Answer, String>> {
        let (key, hyper_request) = convert(request)?;
        let alone = self.in_flight.fetch_add(1, Relaxed) == 0;
        let _in_flight = InFlight(&self.in_flight);
        let work = async {
            let mut conn = self.checkout(&key, timeout).await?;
            ready(&mut conn).await?;
            let wait = if self.answers_fast() && alone {
                INLINE_WAIT
            } else {
                Duration::ZERO
            };
            conn.mode.exchange(wait);
            let asked = Instant::now();
            let response = {
                let sent = conn.send.send_request(hyper_request);
                driving(&mut conn, sent)
                    .await?
                    .map_err(|e| hyper_text(&e))?
            };
            self.answered_in(asked.elapsed());
            let status = response.status();
            if status.is_redirection() {
                return Ok(None);
            }
            on_headers();
            let header = |name| {
                response
                    .headers()
                    .get(name)
                    .and_then(|v: &http::HeaderValue| v.to_str().ok())
                    .map(str::to_string)
            };
            let mime = header(http::header::CONTENT_TYPE).unwrap_or_default();
            let location = header(http::header::LOCATION);
            let declared = response
                .headers()
                .get(http::header::CONTENT_LENGTH)
                .and_then(|v| v.to_str().ok()?.parse::<u64>().ok());
            if let Some(len) = declared.filter(|len| *len > limit as u64) {
                // Not read, and the connection is not kept.
                let body = Body::Cut {
                    head: Vec::new(),
                    seen: len,
                };
                return Ok(Some(Answer {
                    status,
                    mime,
                    location,
                    body,
                }));
            }
            let mut incoming = response.into_body();
            let mut out = Vec::new();
            loop {
                let frame = driving(&mut conn, incoming.frame()).await?;
                let Some(frame) = frame else { break };
                let frame = frame.map_err(|e| hyper_text(&e))?;
                let Ok(chunk) = frame.into_data() else {
                    continue;
                };
                if out.len() + chunk.len() > limit {
                    let seen = (out.len() + chunk.len()) as u64;
                    let room = limit - out.len();
                    out.extend_from_slice(&chunk[..room]);
                    let body = Body::Cut { head: out, seen };
                    return Ok(Some(Answer {
                        status,
                        mime,
                        location,
                        body,
                    }));
                }
                out.extend_from_slice(&chunk);
            }
            // Let the connection settle to idle before it is kept.
            conn.mode.idle();
            settle(&mut conn).await;
            if !conn.ended && !conn.send.is_closed() {
                self.checkin(conn);
            }
            Ok(Some(Answer {
                status,
                mime,
                location,
                body: Body::Whole(out),
            }))
        };
        match tokio::time::timeout(timeout, work).await {
            Err(_) => Some(Err("timed out".into())),
            Ok(Ok(Some(answer))) => Some(Ok(answer)),
            Ok(Ok(None)) => None,
            Ok(Err(e)) => Some(Err(e)),
        }
    }
}
