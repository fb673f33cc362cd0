//! The stdio transport: one JSON-RPC message per line, each line bounded.
//! Unlike rmcp's own, it answers what it refuses: a line that is not JSON
//! gets -32700, a known method with ill-typed params -32602, and a line over
//! the limit an error for its id (or `id: null` when the id cannot be read),
//! so a client never waits for an answer that will not come.

use std::io;
use std::sync::Arc;

use rmcp::RoleServer;
use rmcp::model::{ClientJsonRpcMessage, ServerJsonRpcMessage};
use rmcp::transport::Transport;
use serde_json::Value;
use tokio::io::{AsyncBufRead, AsyncBufReadExt, AsyncRead, AsyncWrite, AsyncWriteExt, BufReader};
use tokio::sync::Mutex;

use crate::server::jsonrpc::{self, INVALID_REQUEST};

type Out<W> = Arc<Mutex<Option<W>>>;

/// rmcp's serve loop reads with `receive()` in a `select!` and drops that
/// future whenever another branch wins, so reading keeps its state here and
/// loses nothing when dropped: the line read so far, and the refusal being
/// written. Reading in `receive()` itself (no reader task and channel) saves
/// every request a task hand-off.
pub struct StdioTransport<R, W> {
    read: BufReader<R>,
    line: LineBuf,
    max: usize,
    out: Out<W>,
    /// The reply to a refused line, being written. At most one at a time: a
    /// client that floods wf with bad lines waits for wf's answers.
    refusing: Option<tokio::task::JoinHandle<()>>,
}

impl<R: AsyncRead + Unpin, W: AsyncWrite + Unpin + Send + 'static> StdioTransport<R, W> {
    /// Reads client messages of at most `max_line` bytes from `read`.
    pub fn new(read: R, write: W, max_line: usize) -> Self {
        Self {
            read: BufReader::new(read),
            line: LineBuf::default(),
            max: max_line,
            out: Arc::new(Mutex::new(Some(write))),
            refusing: None,
        }
    }

    /// The next message that passes the checks; what fails them is answered
    /// (in the background, one answer at a time) and skipped.
    async fn next_message(&mut self) -> Option<ClientJsonRpcMessage> {
        loop {
            if let Some(writing) = self.refusing.as_mut() {
                let _ = writing.await;
                self.refusing = None;
            }
            let read = match read_line(&mut self.read, &mut self.line, self.max).await {
                Err(e) => {
                    tracing::error!("reading stdin: {e}");
                    return None;
                }
                Ok(Line::Eof) => return None,
                Ok(Line::TooLong { len }) => Read::Refused(self.too_long(len)),
                Ok(Line::Complete) => self.check_line(),
            };
            // The line is done with: nothing below awaits before this.
            self.line.clear();
            match read {
                Read::Message(message) => return Some(message),
                Read::Skipped => {}
                Read::Refused(reply) => {
                    let bytes = serde_json::to_vec(&reply).unwrap_or_default();
                    let out = self.out.clone();
                    self.refusing = Some(tokio::spawn(async move {
                        let _ = write_line(&out, bytes).await;
                    }));
                }
            }
        }
    }

    /// The answer to a line over the limit (its id read from what was kept).
    fn too_long(&self, len: usize) -> Value {
        let id = jsonrpc::id_in_prefix(&self.line.buf);
        let shown = id
            .as_ref()
            .map_or("unreadable".into(), |v: &Value| v.to_string());
        let max = self.max;
        tracing::warn!(
            bytes = len,
            max_request_bytes = max,
            id = %shown,
            "refused a client message over the size limit"
        );
        jsonrpc::error_reply(
            id,
            INVALID_REQUEST,
            &format!(
                "message of {len} bytes is over the limit of {max} bytes (server.max_request_bytes)"
            ),
        )
    }

    /// Checks a complete line.
    fn check_line(&self) -> Read {
        let buf = &self.line.buf;
        let line = buf.strip_suffix(b"\n").unwrap_or(buf);
        let line = line.strip_suffix(b"\r").unwrap_or(line);
        if line.trim_ascii().is_empty() {
            return Read::Skipped;
        }
        if let Some(reply) = jsonrpc::removed_in_2026(line, None) {
            return Read::Refused(reply);
        }
        match jsonrpc::check(line) {
            Ok(message) => Read::Message(message),
            Err(r) => {
                tracing::warn!(code = r.code, "refused a client message: {}", r.message);
                // A notification is never answered.
                if r.notification {
                    Read::Skipped
                } else {
                    Read::Refused(r.reply())
                }
            }
        }
    }
}

/// What one line read to its end gives. Not boxed: a message, the common
/// case, is handed on at once, and a box would cost every request an allocation.
#[allow(clippy::large_enum_variant)]
enum Read {
    Message(ClientJsonRpcMessage),
    /// Blank, or a refused notification: nothing to answer.
    Skipped,
    /// Refused, with its answer.
    Refused(Value),
}

impl<R, W> Drop for StdioTransport<R, W> {
    fn drop(&mut self) {
        if let Some(writing) = self.refusing.take() {
            writing.abort();
        }
    }
}

async fn write_line<W: AsyncWrite + Unpin>(out: &Out<W>, mut line: Vec<u8>) -> io::Result<()> {
    line.push(b'\n');
    let mut out = out.lock().await;
    let Some(w) = out.as_mut() else {
        return Err(io::Error::new(
            io::ErrorKind::NotConnected,
            "stdout is closed",
        ));
    };
    w.write_all(&line).await?;
    w.flush().await
}

enum Line {
    /// A whole line is in the buffer.
    Complete,
    /// The line went over the limit; the buffer holds its first bytes and the
    /// rest was skipped.
    TooLong {
        len: usize,
    },
    Eof,
}

/// A line being read: its first bytes (never more than the limit) and its
/// whole length so far.
#[derive(Default)]
struct LineBuf {
    buf: Vec<u8>,
    len: usize,
}

impl LineBuf {
    fn clear(&mut self) {
        self.buf.clear();
        self.len = 0;
    }
}

/// Reads on with the `\n`-terminated line in `line`, never holding more than
/// `max` bytes of it. Cancel-safe: bytes are taken from the reader only
/// together with their record in `line`, so a dropped call resumes where it
/// stopped.
async fn read_line<R: AsyncBufRead + Unpin>(
    read: &mut R,
    line: &mut LineBuf,
    max: usize,
) -> io::Result<Line> {
    loop {
        let available = read.fill_buf().await?;
        if available.is_empty() {
            return Ok(if line.len > max {
                Line::TooLong { len: line.len }
            } else {
                Line::Eof
            });
        }
        let newline = available.iter().position(|b| *b == b'\n');
        let take = newline.map_or(available.len(), |i| i + 1);
        let room = max.saturating_sub(line.buf.len());
        line.buf.extend_from_slice(&available[..take.min(room)]);
        line.len += take;
        read.consume(take);
        if newline.is_some() {
            // The newline itself does not count against the limit.
            return Ok(if line.len - 1 > max {
                Line::TooLong { len: line.len - 1 }
            } else {
                Line::Complete
            });
        }
    }
}

impl<R, W> Transport<RoleServer> for StdioTransport<R, W>
where
    R: AsyncRead + Unpin + Send + 'static,
    W: AsyncWrite + Unpin + Send + 'static,
{
    type Error = io::Error;

    fn send(
        &mut self,
        item: ServerJsonRpcMessage,
    ) -> impl Future<Output = Result<(), Self::Error>> + Send + 'static {
        let out = self.out.clone();
        let item = crate::server::mcp::tasks::v2025::declare(item);
        // Serialised here, not in the future: rmcp spawns that future for
        // every reply, and a message inside it made each spawn copy kilobytes.
        let bytes = serde_json::to_vec(&item);
        async move { write_line(&out, bytes?).await }
    }

    async fn receive(&mut self) -> Option<ClientJsonRpcMessage> {
        self.next_message().await
    }

    async fn close(&mut self) -> Result<(), Self::Error> {
        self.out.lock().await.take();
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    async fn reply_to(input: &[u8], max: usize) -> (Vec<Value>, Option<ClientJsonRpcMessage>) {
        let (client_out, server_in) = tokio::io::duplex(1 << 20);
        let (server_out, mut client_in) = tokio::io::duplex(1 << 20);
        let mut t = StdioTransport::new(server_in, server_out, max);
        let mut w = client_out;
        w.write_all(input).await.unwrap();
        drop(w);
        let got = t.receive().await;
        drop(t);
        let mut text = String::new();
        tokio::io::AsyncReadExt::read_to_string(&mut client_in, &mut text)
            .await
            .unwrap();
        let replies = text
            .lines()
            .map(|l| serde_json::from_str(l).unwrap())
            .collect();
        (replies, got)
    }

    #[tokio::test]
    async fn answers_what_it_refuses() {
        let ping = br#"{"jsonrpc":"2.0","id":3,"method":"ping"}"#;
        let long = format!(
            r#"{{"jsonrpc":"2.0","id":9,"method":"tools/call","params":{{"name":"{}"}}}}"#,
            "x".repeat(500)
        );
        let input = [
            b"not json\n".as_slice(),
            b"\n",
            long.as_bytes(),
            b"\n",
            &[b'y'; 300],
            b"\n",
            ping,
            b"\n",
        ]
        .concat();
        let (replies, got) = reply_to(&input, 200).await;
        assert_eq!(replies.len(), 3, "{replies:?}");
        assert_eq!(replies[0]["error"]["code"], json!(-32700));
        assert_eq!(replies[0]["id"], Value::Null);
        assert_eq!(replies[1]["error"]["code"], json!(-32600));
        assert_eq!(replies[1]["id"], json!(9));
        assert_eq!(replies[2]["id"], Value::Null);
        assert!(
            matches!(got, Some(ClientJsonRpcMessage::Request(_))),
            "{got:?}"
        );
    }

    #[tokio::test]
    async fn a_line_at_the_limit_passes() {
        let ping = br#"{"jsonrpc":"2.0","id":3,"method":"ping"}"#;
        let (replies, got) = reply_to(&[ping.as_slice(), b"\r\n"].concat(), ping.len() + 1).await;
        assert!(replies.is_empty(), "{replies:?}");
        assert!(got.is_some());
    }
}
