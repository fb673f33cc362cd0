//! Since 1.5: the call lane. A host that runs this plugin in a child process
//! (wf's `wf-plugin-host`) hands the plugin a socket its calls arrive on
//! ([`crate::SourceRequest::CallLane`]). This plugin's own runtime reads the
//! calls, runs them and writes their replies, progress and logs back: a call
//! crosses no thread of the child host's, each way (docs/benchmarks.md,
//! "plugin isolation").
//!
//! Frames: a 4-byte big-endian length, then the payload. A binary payload
//! starts with its tag byte (integers big-endian, texts UTF-8):
//!
//! - [`REQUEST`](crate::lane::REQUEST): id (u64), source (u64), request length (u32), the request
//!   JSON, then the call's info JSON (the rest);
//! - [`REPLY_OK`](crate::lane::REPLY_OK) / [`REPLY_ERR`](crate::lane::REPLY_ERR): id (u64), then the result or the
//!   `PluginError` JSON (the rest).
//!
//! Any other payload is a JSON object tagged `t`: `cancel` (`id`) to the
//! plugin; `progress` (`id`, `progress`, `total`, `message`) and `log`
//! (`level`, `target`, `message`, `call`) to the host.

use std::collections::HashMap;
use std::sync::{Arc, Mutex, OnceLock, PoisonError, Weak};

use abi_stable::sabi_trait::TD_Opaque;
use abi_stable::std_types::{ROption, RString};
use serde::{Deserialize, Serialize};

use crate::error::PluginError;
use crate::ffi::{CallContextFfi, CallContextFfi_TO};
use crate::runtime::{Work, runtime};

/// A call: id, source, request JSON, info JSON.
pub const REQUEST: u8 = 0x01;
/// A call's result: id, result JSON.
pub const REPLY_OK: u8 = 0x02;
/// A call's error: id, `PluginError` JSON.
pub const REPLY_ERR: u8 = 0x03;
/// The largest frame either side sends or accepts.
pub const MAX_FRAME: usize = 64 << 20;

/// Why a frame cannot be read.
#[derive(Debug, thiserror::Error, PartialEq, Eq)]
pub enum LaneError {
    /// Over [`MAX_FRAME`].
    #[error("frame of {0} bytes is larger than the limit ({MAX_FRAME} bytes)")]
    TooLarge(usize),
    /// A binary frame that does not parse.
    #[error("malformed frame: {0}")]
    Binary(&'static str),
}

/// Starts a frame: the length prefix (filled by [`finish`]) and the tag.
fn begin(tag: u8, capacity: usize) -> Vec<u8> {
    let mut buf = Vec::with_capacity(4 + 1 + capacity);
    buf.extend_from_slice(&[0, 0, 0, 0, tag]);
    buf
}

/// Fills in a frame's length prefix.
pub fn finish(mut buf: Vec<u8>) -> Result<Vec<u8>, LaneError> {
    let len = buf.len() - 4;
    if len > MAX_FRAME {
        return Err(LaneError::TooLarge(len));
    }
    buf[..4].copy_from_slice(&(len as u32).to_be_bytes());
    Ok(buf)
}

/// One request frame (length prefix included).
pub fn encode_request(
    id: u64,
    source: u64,
    request: &str,
    info: &str,
) -> Result<Vec<u8>, LaneError> {
    let mut buf = begin(REQUEST, 20 + request.len() + info.len());
    buf.extend_from_slice(&id.to_be_bytes());
    buf.extend_from_slice(&source.to_be_bytes());
    buf.extend_from_slice(&(request.len() as u32).to_be_bytes());
    buf.extend_from_slice(request.as_bytes());
    buf.extend_from_slice(info.as_bytes());
    finish(buf)
}

/// One reply frame (length prefix included): `Ok` a result JSON, `Err` a
/// `PluginError` JSON.
pub fn encode_reply(id: u64, reply: Result<&str, &str>) -> Result<Vec<u8>, LaneError> {
    let (tag, text) = match reply {
        Ok(t) => (REPLY_OK, t),
        Err(t) => (REPLY_ERR, t),
    };
    let mut buf = begin(tag, 8 + text.len());
    buf.extend_from_slice(&id.to_be_bytes());
    buf.extend_from_slice(text.as_bytes());
    finish(buf)
}

/// Reads `n` bytes off the front of `b`.
fn take<'a>(b: &mut &'a [u8], n: usize) -> Result<&'a [u8], LaneError> {
    if b.len() < n {
        return Err(LaneError::Binary("a binary frame ends early"));
    }
    let (head, rest) = b.split_at(n);
    *b = rest;
    Ok(head)
}

fn u64_at(b: &mut &[u8]) -> Result<u64, LaneError> {
    let bytes = take(b, 8)?;
    Ok(u64::from_be_bytes(bytes.try_into().unwrap_or_default()))
}

fn text(b: &[u8]) -> Result<String, LaneError> {
    String::from_utf8(b.to_vec()).map_err(|_| LaneError::Binary("a text that is not UTF-8"))
}

/// A decoded [`REQUEST`] payload (after its tag).
#[derive(Debug, PartialEq, Eq)]
pub struct Request {
    /// The call's id.
    pub id: u64,
    /// The source it is for.
    pub source: u64,
    /// The `SourceRequest` JSON.
    pub request: String,
    /// The call's info JSON.
    pub info: String,
}

/// Decodes a [`REQUEST`] payload's body (the bytes after the tag).
pub fn decode_request(mut rest: &[u8]) -> Result<Request, LaneError> {
    let id = u64_at(&mut rest)?;
    let source = u64_at(&mut rest)?;
    let len = u32::from_be_bytes(take(&mut rest, 4)?.try_into().unwrap_or_default()) as usize;
    let request = text(take(&mut rest, len)?)?;
    let info = text(rest)?;
    Ok(Request {
        id,
        source,
        request,
        info,
    })
}

/// Decodes a [`REPLY_OK`] / [`REPLY_ERR`] payload's body: the id and text.
pub fn decode_reply(mut rest: &[u8]) -> Result<(u64, String), LaneError> {
    let id = u64_at(&mut rest)?;
    Ok((id, text(rest)?))
}

/// The JSON frames on the lane.
#[derive(Debug, Serialize, Deserialize)]
#[serde(tag = "t", rename_all = "snake_case")]
enum Json {
    Cancel {
        id: u64,
    },
    Progress {
        id: u64,
        progress: f64,
        #[serde(default, skip_serializing_if = "Option::is_none")]
        total: Option<f64>,
        #[serde(default, skip_serializing_if = "Option::is_none")]
        message: Option<String>,
    },
    Log {
        level: u8,
        target: String,
        message: String,
        call: Option<u64>,
    },
}

fn json_frame(msg: &Json) -> Option<Vec<u8>> {
    let mut buf = vec![0u8; 4];
    serde_json::to_writer(&mut buf, msg).ok()?;
    finish(buf).ok()
}

/// A source as its lane sees it: how to start a call's work, and the host
/// its calls' asks go to.
pub(crate) struct LaneSource {
    pub start: Box<dyn Fn(String, crate::CallContext) -> Work + Send + Sync>,
    pub host: crate::Host,
}

/// The lane this plugin serves, once a host handed it one.
struct Lane {
    fd: i32,
    /// Frames to the host are written by the thread that makes them (a
    /// call's reply by the worker that finished it), never handed to a
    /// writer task: a task woken by a call that then blocks its worker
    /// would wait in that worker's LIFO slot, which no other worker steals.
    #[cfg(unix)]
    out: Mutex<std::os::unix::net::UnixStream>,
    sources: Mutex<HashMap<u64, Weak<LaneSource>>>,
    /// Calls in flight: dropping the sender cancels the call.
    calls: Mutex<HashMap<u64, tokio::sync::oneshot::Sender<()>>>,
}

static LANE: OnceLock<Arc<Lane>> = OnceLock::new();

thread_local! {
    /// The lane call this thread is polling: its logs go on the lane.
    static POLLING: std::cell::Cell<Option<u64>> = const { std::cell::Cell::new(None) };
}

impl Lane {
    /// Writes one frame whole (frames never interleave); a host that is
    /// gone loses it (the child host ends with its control socket).
    fn send(&self, frame: Vec<u8>) {
        #[cfg(unix)]
        {
            let out = self.out.lock().unwrap_or_else(PoisonError::into_inner);
            write_all_blocking(&out, &frame);
        }
        #[cfg(not(unix))]
        let _ = frame;
    }
}

/// `write_all` on a non-blocking socket: waits for room with poll(2).
#[cfg(unix)]
fn write_all_blocking(out: &std::os::unix::net::UnixStream, mut buf: &[u8]) {
    use std::io::Write;
    use std::os::fd::AsRawFd;
    while !buf.is_empty() {
        match (&*out).write(buf) {
            Ok(0) => return,
            Ok(n) => buf = &buf[n..],
            Err(e) if e.kind() == std::io::ErrorKind::WouldBlock => {
                let mut p = libc::pollfd {
                    fd: out.as_raw_fd(),
                    events: libc::POLLOUT,
                    revents: 0,
                };
                // SAFETY: one pollfd on the stack.
                unsafe { libc::poll(&mut p, 1, 1000) };
            }
            Err(e) if e.kind() == std::io::ErrorKind::Interrupted => {}
            Err(_) => return,
        }
    }
}

/// How long frames may wait unread on a socket before a parked worker is
/// woken to read them ([`watch_reader`]).
pub const READ_STALL: std::time::Duration = std::time::Duration::from_millis(100);

/// Keeps a socket read while a worker is blocked: a runtime's I/O is polled
/// by a parked worker, and one that took a call's task and never yields
/// leaves the others asleep (nothing wakes them: no task is queued where
/// they could steal it). A thread of its own watches `fd`; when frames wait
/// unread for [`READ_STALL`], it calls `nudge` (spawning an empty task from
/// outside the runtime, which wakes a parked worker; that one then polls
/// the I/O and the reader runs there). Ends when the socket does.
#[cfg(unix)]
pub fn watch_reader(fd: i32, nudge: impl Fn() + Send + 'static) {
    let _ = std::thread::Builder::new()
        .name("wf-lane-watch".into())
        .spawn(move || {
            loop {
                let mut p = libc::pollfd {
                    fd,
                    events: libc::POLLIN,
                    revents: 0,
                };
                // SAFETY: one pollfd on the stack.
                let r = unsafe { libc::poll(&mut p, 1, -1) };
                if r < 0 {
                    if std::io::Error::last_os_error().kind() == std::io::ErrorKind::Interrupted {
                        continue;
                    }
                    return;
                }
                if p.revents & (libc::POLLHUP | libc::POLLERR | libc::POLLNVAL) != 0 {
                    return;
                }
                std::thread::sleep(READ_STALL);
                p.revents = 0;
                // SAFETY: as above, without waiting.
                if unsafe { libc::poll(&mut p, 1, 0) } > 0 && p.revents & libc::POLLIN != 0 {
                    nudge();
                }
            }
        });
}

/// Sends a log line on the lane when this thread is polling a lane call
/// (the host logs it inside the call's span); false otherwise.
pub(crate) fn log(level: u8, target: &str, message: &str) -> bool {
    let Some(call) = POLLING.get() else {
        return false;
    };
    let Some(lane) = LANE.get() else {
        return false;
    };
    if let Some(f) = json_frame(&Json::Log {
        level,
        target: target.into(),
        message: message.into(),
        call: Some(call),
    }) {
        lane.send(f);
    }
    true
}

/// Serves calls for `source` from the socket on `fd`: the first call starts
/// the lane on this plugin's runtime, later ones add their source to it.
pub(crate) fn join(fd: i32, source: u64, start: Weak<LaneSource>) -> Result<(), PluginError> {
    #[cfg(unix)]
    {
        let lane = match LANE.get() {
            Some(l) => l.clone(),
            None => open(fd)?,
        };
        if lane.fd != fd {
            return Err(PluginError::invalid_arguments(format!(
                "this plugin already serves calls on fd {}",
                lane.fd
            )));
        }
        let mut sources = lane.sources.lock().unwrap_or_else(PoisonError::into_inner);
        sources.retain(|_, s| s.strong_count() > 0);
        sources.insert(source, start);
        Ok(())
    }
    #[cfg(not(unix))]
    {
        let _ = (fd, source, start);
        Err(PluginError::unsupported("no call lane on this platform"))
    }
}

#[cfg(unix)]
fn open(fd: i32) -> Result<Arc<Lane>, PluginError> {
    use std::os::fd::FromRawFd;
    static OPENING: Mutex<()> = Mutex::new(());
    let _one = OPENING.lock().unwrap_or_else(PoisonError::into_inner);
    if let Some(l) = LANE.get() {
        return Ok(l.clone());
    }
    if fd < 0 {
        return Err(PluginError::invalid_arguments(format!(
            "fd {fd} is not a socket"
        )));
    }
    // The host's descriptor must be a socket (checked on a duplicate).
    let is_socket = {
        use std::os::unix::fs::FileTypeExt;
        // SAFETY: borrowed only to duplicate it; an fd that is not open fails.
        let borrowed = unsafe { std::os::fd::BorrowedFd::borrow_raw(fd) };
        borrowed
            .try_clone_to_owned()
            .ok()
            .map(std::fs::File::from)
            .and_then(|f| f.metadata().ok())
            .is_some_and(|m| m.file_type().is_socket())
    };
    if !is_socket {
        return Err(PluginError::invalid_arguments(format!(
            "fd {fd} is not a socket"
        )));
    }
    // SAFETY: the host handed this descriptor over for good (checked above to
    // be a socket); nothing else in this process uses it from here on.
    let std = unsafe { std::os::unix::net::UnixStream::from_raw_fd(fd) };
    std.set_nonblocking(true)
        .map_err(|e| PluginError::internal(format!("call lane: {e}")))?;
    // A second descriptor of the same socket for writing (`Lane::send`);
    // the runtime reads the first.
    let out = std
        .try_clone()
        .map_err(|e| PluginError::internal(format!("call lane: {e}")))?;
    let _enter = runtime().enter();
    let stream = tokio::net::UnixStream::from_std(std)
        .map_err(|e| PluginError::internal(format!("call lane: {e}")))?;
    let lane = Arc::new(Lane {
        fd,
        out: Mutex::new(out),
        sources: Mutex::default(),
        calls: Mutex::default(),
    });
    let _ = LANE.set(lane.clone());
    watch_reader(fd, || {
        runtime().spawn(async {});
    });
    runtime().spawn(read_frames(lane.clone(), stream));
    Ok(lane)
}

/// Writes queued frames, batching what queued meanwhile into one write,
/// until the queue closes or the peer is gone (wf-plugin-host writes its
/// own sockets with it too).
#[cfg(unix)]
pub async fn write_frames(
    mut rx: tokio::sync::mpsc::UnboundedReceiver<Vec<u8>>,
    mut out: tokio::net::unix::OwnedWriteHalf,
) {
    use tokio::io::AsyncWriteExt;
    while let Some(mut buf) = rx.recv().await {
        while buf.len() < (1 << 20) {
            match rx.try_recv() {
                Ok(more) => buf.extend_from_slice(&more),
                Err(_) => break,
            }
        }
        if out.write_all(&buf).await.is_err() {
            // The host is gone; a child host ends when its control socket closes.
            return;
        }
    }
}

/// Reads calls until the host closes the lane. A frame that breaks the
/// protocol ends this process: only a child host hands out a lane, and its
/// host restarts it (a lane left unread would hang every call instead).
#[cfg(unix)]
async fn read_frames(lane: Arc<Lane>, read: tokio::net::UnixStream) {
    use tokio::io::AsyncReadExt;
    let mut input = tokio::io::BufReader::with_capacity(64 << 10, read);
    let broken = loop {
        let mut len = [0u8; 4];
        if input.read_exact(&mut len).await.is_err() {
            // The host closed the lane: the child host ends with its socket.
            return;
        }
        let len = u32::from_be_bytes(len) as usize;
        if len > MAX_FRAME {
            break LaneError::TooLarge(len).to_string();
        }
        let mut buf = vec![0u8; len];
        if input.read_exact(&mut buf).await.is_err() {
            break "the lane ended inside a frame".to_string();
        }
        match buf.split_first() {
            Some((&REQUEST, rest)) => match decode_request(rest) {
                Ok(r) => call(&lane, r),
                Err(e) => break e.to_string(),
            },
            _ => match serde_json::from_slice::<Json>(&buf) {
                Ok(Json::Cancel { id }) => {
                    lane.calls
                        .lock()
                        .unwrap_or_else(PoisonError::into_inner)
                        .remove(&id);
                }
                Ok(other) => break format!("unexpected frame {other:?}"),
                Err(e) => break format!("malformed frame: {e}"),
            },
        }
    };
    eprintln!("wf-plugin-api: the call lane broke the protocol ({broken}); exiting");
    std::process::exit(70);
}

/// Starts one call as a task on this plugin's runtime (the worker that read
/// it runs it next); its reply goes on the lane.
#[cfg(unix)]
fn call(lane: &Arc<Lane>, r: Request) {
    let Request {
        id,
        source,
        request,
        info,
    } = r;
    let start = lane
        .sources
        .lock()
        .unwrap_or_else(PoisonError::into_inner)
        .get(&source)
        .and_then(Weak::upgrade);
    let Some(start) = start else {
        let err = PluginError::internal(format!("no source {source} on this call lane"));
        if let Ok(f) = encode_reply(id, Err(&err.to_json())) {
            lane.send(f);
        }
        return;
    };
    let ctx = CallContextFfi_TO::from_value(
        LaneCall {
            id,
            info,
            lane: lane.clone(),
        },
        TD_Opaque,
    );
    let host = start.host.clone();
    let mut call = crate::runtime::start_call(&host, ctx, move |c| (start.start)(request, c));
    let (tx, cancelled) = tokio::sync::oneshot::channel();
    lane.calls
        .lock()
        .unwrap_or_else(PoisonError::into_inner)
        .insert(id, tx);
    let lane = lane.clone();
    runtime().spawn(async move {
        let polled = std::future::poll_fn(|cx| {
            POLLING.set(Some(id));
            let r = std::pin::Pin::new(&mut call).poll(cx);
            POLLING.set(None);
            r
        });
        tokio::select! {
            reply = polled => {
                lane.calls.lock().unwrap_or_else(PoisonError::into_inner).remove(&id);
                let reply = reply.into_result();
                let frame = match &reply {
                    Ok(ok) => encode_reply(id, Ok(ok.as_str())),
                    Err(e) => encode_reply(id, Err(e.as_str())),
                };
                let frame = frame.or_else(|e| {
                    let err = PluginError::internal(format!("the plugin's reply cannot cross: {e}"));
                    encode_reply(id, Err(&err.to_json()))
                });
                if let Ok(f) = frame {
                    lane.send(f);
                }
            }
            // Cancelled: the call is dropped here (its token fires first).
            _ = cancelled => {}
        }
    });
}

/// A lane call's context: progress goes on the lane; the info is the host's.
struct LaneCall {
    id: u64,
    info: String,
    lane: Arc<Lane>,
}

impl CallContextFfi for LaneCall {
    fn progress(&self, progress: f64, total: ROption<f64>, message: ROption<RString>) {
        if let Some(f) = json_frame(&Json::Progress {
            id: self.id,
            progress,
            total: total.into_option(),
            message: message.into_option().map(RString::into_string),
        }) {
            self.lane.send(f);
        }
    }
    fn info(&self) -> RString {
        RString::from(self.info.as_str())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn payload(frame: &[u8]) -> &[u8] {
        let len = u32::from_be_bytes(frame[..4].try_into().unwrap()) as usize;
        assert_eq!(len, frame.len() - 4);
        &frame[4..]
    }

    #[test]
    fn requests_and_replies_cross_as_raw_bytes() {
        let request = r#"{"op":"call_tool","name":"echo","arguments":{"text":"a \"quoted\" é"}}"#;
        let frame = encode_request(7, 3, request, "{}").unwrap();
        assert!(
            frame
                .windows(request.len())
                .any(|w| w == request.as_bytes())
        );
        let p = payload(&frame);
        assert_eq!(p[0], REQUEST);
        assert_eq!(
            decode_request(&p[1..]).unwrap(),
            Request {
                id: 7,
                source: 3,
                request: request.into(),
                info: "{}".into()
            }
        );
        let frame = encode_reply(9, Err("{\"code\":\"internal\"}")).unwrap();
        let p = payload(&frame);
        assert_eq!(p[0], REPLY_ERR);
        assert_eq!(
            decode_reply(&p[1..]).unwrap(),
            (9, "{\"code\":\"internal\"}".to_string())
        );
    }

    /// The JSON frames' text, as wf-plugin-host's `wire` test reads it.
    #[test]
    fn progress_and_log_frames_are_tagged_json() {
        let progress = json_frame(&Json::Progress {
            id: 1,
            progress: 0.5,
            total: Some(1.0),
            message: Some("half".into()),
        })
        .unwrap();
        assert_eq!(
            payload(&progress),
            br#"{"t":"progress","id":1,"progress":0.5,"total":1.0,"message":"half"}"#
        );
        let log = json_frame(&Json::Log {
            level: 3,
            target: "p".into(),
            message: "m".into(),
            call: Some(2),
        })
        .unwrap();
        assert_eq!(
            payload(&log),
            br#"{"t":"log","level":3,"target":"p","message":"m","call":2}"#
        );
    }

    #[test]
    fn refuses_short_and_non_utf8_frames() {
        assert!(decode_request(&[0, 0]).is_err());
        let mut bad = 1u64.to_be_bytes().to_vec();
        bad.extend_from_slice(&2u64.to_be_bytes());
        bad.extend_from_slice(&100u32.to_be_bytes());
        bad.extend_from_slice(b"{}");
        assert_eq!(
            decode_request(&bad),
            Err(LaneError::Binary("a binary frame ends early"))
        );
        let mut latin = 1u64.to_be_bytes().to_vec();
        latin.push(0xff);
        assert!(decode_reply(&latin).is_err());
    }
}
