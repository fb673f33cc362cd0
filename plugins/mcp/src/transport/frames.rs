//! The bound on a stdio upstream's messages: one JSON-RPC message per line,
//! at most `max_message_bytes` each.
//!
//! [`FrameGuard`] sits between the child's stdout and rmcp's line reader. It
//! passes lines through as they come; a line that grows past the limit is cut
//! there (rmcp sees a short unparsable line and skips it, so it never buffers
//! more than the limit) and the rest is dropped up to its newline, where the
//! stream is in step again. While the bytes go by, [`LineScan`] finds out
//! what the line was: a response to one of our requests gets an error
//! response in its place, so the call waiting for it fails at once with a
//! message that names the limit and the source; a request or notification
//! from the upstream is dropped. A response whose id cannot be read ends the
//! session (a call would otherwise wait for a reply that never comes): the
//! guard reports end of stream, every waiting call fails, and the next call
//! starts a new session.

use std::pin::Pin;
use std::sync::{Arc, OnceLock};
use std::task::{Context, Poll, ready};

use serde_json::{Value, json};
use tokio::io::{AsyncRead, ReadBuf};

use crate::transport::scan::{Frame, LineScan};

/// JSON-RPC error code of the reply that stands in for a dropped response.
pub const TOO_LARGE_CODE: i32 = -32603;

/// Why a session ended, when wf ended it; read by the runtime to explain the
/// failure of the calls that were waiting.
pub type Broken = Arc<OnceLock<String>>;

/// The message of the error a waiting call gets for an oversized response.
pub fn too_large_message(source: &str, limit: usize) -> String {
    format!(
        "the upstream's reply is larger than max_message_bytes ({limit} bytes) of source {source:?}; it was dropped (raise max_message_bytes to accept it)"
    )
}

enum State {
    /// Passing the current line through; `len` bytes of it so far.
    Pass { len: usize },
    /// The current line is over the limit: dropping up to its newline.
    Drop { dropped: u64 },
}

pub struct FrameGuard<R> {
    inner: R,
    source: String,
    limit: usize,
    state: State,
    scan: LineScan,
    /// Bytes read from `inner`, not yet handled.
    chunk: Box<[u8]>,
    chunk_start: usize,
    chunk_end: usize,
    /// Bytes to hand out before anything else (an injected reply, a cut's newline).
    out: Vec<u8>,
    out_pos: usize,
    broken: Broken,
    eof: bool,
}

impl<R: AsyncRead + Unpin> FrameGuard<R> {
    pub fn new(inner: R, source: impl Into<String>, limit: usize, broken: Broken) -> Self {
        Self {
            inner,
            source: source.into(),
            limit,
            state: State::Pass { len: 0 },
            scan: LineScan::new(),
            chunk: vec![0; 64 * 1024].into_boxed_slice(),
            chunk_start: 0,
            chunk_end: 0,
            out: Vec::new(),
            out_pos: 0,
            broken,
            eof: false,
        }
    }

    /// The end of an over-long line: what to do about it.
    fn finish_dropped_line(&mut self, dropped: u64) {
        let total = self.limit as u64 + dropped;
        match self.scan.finish() {
            Frame::Response(id) => {
                tracing::warn!(
                    source = %self.source, limit = self.limit, bytes = total, id = %id,
                    "upstream reply over max_message_bytes dropped; its call fails"
                );
                let reply =
                    error_reply(id, &too_large_message(&self.source, self.limit), self.limit);
                self.out.extend_from_slice(&reply);
            }
            Frame::Message => tracing::warn!(
                source = %self.source, limit = self.limit, bytes = total,
                "upstream request or notification over max_message_bytes dropped"
            ),
            Frame::Unknown => {
                let why = format!(
                    "the upstream sent a message larger than max_message_bytes ({} bytes) of source {:?} that wf cannot attribute to a call; the session was closed",
                    self.limit, self.source
                );
                tracing::warn!(source = %self.source, limit = self.limit, bytes = total, "{why}");
                let _ = self.broken.set(why);
                self.eof = true;
            }
        }
        self.scan.reset();
        self.state = State::Pass { len: 0 };
    }

    /// Handles buffered input into `out` / `dest` until either is exhausted.
    fn process(&mut self, dest: &mut ReadBuf<'_>) {
        while self.chunk_start < self.chunk_end && dest.remaining() > 0 && !self.eof {
            if self.out_pos < self.out.len() {
                return; // injected bytes go first
            }
            let avail = &self.chunk[self.chunk_start..self.chunk_end];
            // memchr, not a byte loop: every byte of every reply is searched.
            let newline = memchr::memchr(b'\n', avail);
            match self.state {
                State::Pass { len } => {
                    let line_part = newline.unwrap_or(avail.len());
                    let room = self.limit - len;
                    if line_part > room {
                        // The line outgrows the limit here: pass what fits,
                        // then a newline that ends rmcp's line.
                        let n = room.min(dest.remaining());
                        self.scan.feed(&avail[..n]);
                        dest.put_slice(&avail[..n]);
                        self.chunk_start += n;
                        self.state = State::Pass { len: len + n };
                        if n == room {
                            self.out.clear();
                            self.out_pos = 0;
                            self.out.push(b'\n');
                            self.state = State::Drop { dropped: 0 };
                        }
                        continue;
                    }
                    // Within the limit: pass through, the newline included.
                    let take = newline.map_or(avail.len(), |i| i + 1).min(dest.remaining());
                    let part = &avail[..take];
                    let ends = part.last() == Some(&b'\n');
                    self.scan.feed(&part[..part.len() - usize::from(ends)]);
                    dest.put_slice(part);
                    self.chunk_start += take;
                    if ends {
                        self.scan.reset();
                        self.state = State::Pass { len: 0 };
                    } else {
                        self.state = State::Pass { len: len + take };
                    }
                }
                State::Drop { dropped } => {
                    let part = newline.unwrap_or(avail.len());
                    self.scan.feed(&avail[..part]);
                    let dropped = dropped + part as u64;
                    match newline {
                        Some(i) => {
                            self.chunk_start += i + 1;
                            self.out.clear();
                            self.out_pos = 0;
                            self.finish_dropped_line(dropped);
                        }
                        None => {
                            self.chunk_start = self.chunk_end;
                            self.state = State::Drop { dropped };
                        }
                    }
                }
            }
        }
    }

    fn drain_out(&mut self, dest: &mut ReadBuf<'_>) -> bool {
        if self.out_pos >= self.out.len() {
            return false;
        }
        let n = (self.out.len() - self.out_pos).min(dest.remaining());
        dest.put_slice(&self.out[self.out_pos..self.out_pos + n]);
        self.out_pos += n;
        if self.out_pos == self.out.len() {
            self.out.clear();
            self.out_pos = 0;
        }
        true
    }
}

fn error_reply(id: Value, message: &str, limit: usize) -> Vec<u8> {
    let reply = json!({
        "jsonrpc": "2.0",
        "id": id,
        "error": {"code": TOO_LARGE_CODE, "message": message, "data": {"max_message_bytes": limit}},
    });
    let mut bytes = serde_json::to_vec(&reply).unwrap_or_default();
    bytes.push(b'\n');
    bytes
}

impl<R: AsyncRead + Unpin> AsyncRead for FrameGuard<R> {
    fn poll_read(
        self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        dest: &mut ReadBuf<'_>,
    ) -> Poll<std::io::Result<()>> {
        let this = self.get_mut();
        if dest.remaining() == 0 {
            return Poll::Ready(Ok(()));
        }
        loop {
            if this.drain_out(dest) || this.eof {
                return Poll::Ready(Ok(()));
            }
            if this.chunk_start < this.chunk_end {
                let before = dest.filled().len();
                this.process(dest);
                if dest.filled().len() > before {
                    return Poll::Ready(Ok(()));
                }
                // Only dropped bytes were handled, or a reply was queued, or
                // the stream ended: look again.
                continue;
            }
            let mut buf = ReadBuf::new(&mut this.chunk);
            ready!(Pin::new(&mut this.inner).poll_read(cx, &mut buf))?;
            let n = buf.filled().len();
            if n == 0 {
                return Poll::Ready(Ok(())); // the child closed its stdout
            }
            this.chunk_start = 0;
            this.chunk_end = n;
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use tokio::io::AsyncReadExt;

    async fn through(input: Vec<u8>, limit: usize, read_size: usize) -> (Vec<u8>, Broken) {
        let broken: Broken = Default::default();
        let mut g = FrameGuard::new(&input[..], "fx", limit, broken.clone());
        let mut out = Vec::new();
        let mut buf = vec![0; read_size];
        loop {
            let n = g.read(&mut buf).await.unwrap();
            if n == 0 {
                break;
            }
            out.extend_from_slice(&buf[..n]);
        }
        (out, broken)
    }

    fn lines(out: &[u8]) -> Vec<String> {
        String::from_utf8_lossy(out)
            .split_terminator('\n')
            .map(str::to_string)
            .collect()
    }

    #[tokio::test]
    async fn lines_within_the_limit_pass_unchanged() {
        let input = b"{\"id\":1,\"result\":{}}\n{\"id\":2,\"result\":{\"t\":\"abc\"}}\n".to_vec();
        for read_size in [1, 3, 7, 4096] {
            let (out, broken) = through(input.clone(), 64, read_size).await;
            assert_eq!(out, input, "read size {read_size}");
            assert!(broken.get().is_none());
        }
    }

    #[tokio::test]
    async fn an_oversized_reply_becomes_an_error_for_its_id_and_the_stream_goes_on() {
        let big = format!(
            "{{\"result\":{{\"t\":\"{}\"}},\"jsonrpc\":\"2.0\",\"id\":5}}\n",
            "a".repeat(500)
        );
        let input = [
            b"{\"id\":1,\"result\":{}}\n".as_slice(),
            big.as_bytes(),
            b"{\"id\":6,\"result\":{}}\n",
        ]
        .concat();
        for read_size in [1, 5, 100, 65536] {
            let (out, broken) = through(input.clone(), 100, read_size).await;
            let l = lines(&out);
            assert_eq!(l.len(), 4, "read size {read_size}: {l:?}");
            assert_eq!(l[0], "{\"id\":1,\"result\":{}}");
            assert_eq!(l[1].len(), 100, "the cut line holds exactly the limit");
            let reply: Value = serde_json::from_str(&l[2]).unwrap();
            assert_eq!(reply["id"], json!(5));
            assert_eq!(reply["error"]["data"]["max_message_bytes"], json!(100));
            assert!(
                reply["error"]["message"]
                    .as_str()
                    .unwrap()
                    .contains("\"fx\"")
            );
            assert_eq!(l[3], "{\"id\":6,\"result\":{}}");
            assert!(broken.get().is_none());
        }
    }

    #[tokio::test]
    async fn a_line_of_exactly_the_limit_passes() {
        let line = format!("{{\"id\":1,\"result\":\"{}\"}}", "b".repeat(80));
        let limit = line.len();
        let input = format!("{line}\n").into_bytes();
        let (out, _) = through(input.clone(), limit, 7).await;
        assert_eq!(out, input);
        let (out, _) = through(input.clone(), limit - 1, 7).await;
        assert_ne!(out, input);
    }

    #[tokio::test]
    async fn an_oversized_notification_is_dropped() {
        let input = format!(
            "{{\"jsonrpc\":\"2.0\",\"method\":\"notifications/message\",\"params\":{{\"d\":\"{}\"}}}}\n{{\"id\":2,\"result\":1}}\n",
            "x".repeat(300)
        );
        let (out, broken) = through(input.into_bytes(), 64, 1000).await;
        let l = lines(&out);
        assert_eq!(l.len(), 2, "{l:?}");
        assert_eq!(l[1], "{\"id\":2,\"result\":1}");
        assert!(broken.get().is_none());
    }

    #[tokio::test]
    async fn unattributable_garbage_ends_the_stream() {
        let input = [vec![b'z'; 1000], b"\n{\"id\":2,\"result\":1}\n".to_vec()].concat();
        let (out, broken) = through(input, 64, 1000).await;
        assert_eq!(
            lines(&out).len(),
            1,
            "nothing after the garbage is delivered"
        );
        assert!(
            broken
                .get()
                .unwrap()
                .contains("max_message_bytes (64 bytes)")
        );
    }

    #[tokio::test]
    async fn a_never_ending_line_is_held_to_the_limit() {
        // 10 MiB without a newline through a 1 KiB limit: the output stays small.
        let input = vec![b'q'; 10 << 20];
        let (out, broken) = through(input, 1024, 65536).await;
        assert_eq!(out.len(), 1025);
        assert!(
            broken.get().is_none(),
            "the line never ended: nothing to decide yet"
        );
    }
}
