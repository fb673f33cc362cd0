//! Where socket.rs's `ppoll` and raw descriptors are not available: the
//! direct path's socket is tokio's, whose readiness comes through the
//! plugin's reactor (one more thread wake-up an answer).

use std::io;
use std::pin::Pin;
use std::sync::Arc;
use std::task::{Context, Poll};
use std::time::Duration;

use tokio::io::{AsyncRead, AsyncWrite, ReadBuf};
use tokio::net::TcpStream;

#[derive(Debug, Default)]
pub struct Mode;

impl Mode {
    pub fn idle(&self) {}
    pub fn exchange(&self, _budget: Duration) {}
    /// tokio's stream arranges its own wake-ups.
    pub fn poll_starved(&self, _cx: &mut Context<'_>) -> Poll<io::Result<()>> {
        Poll::Pending
    }
}

pub struct Socket(TcpStream);

impl Socket {
    pub fn new(stream: std::net::TcpStream) -> io::Result<(Self, Arc<Mode>)> {
        Ok((Socket(TcpStream::from_std(stream)?), Arc::default()))
    }
}

impl AsyncRead for Socket {
    fn poll_read(
        mut self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        buf: &mut ReadBuf<'_>,
    ) -> Poll<io::Result<()>> {
        Pin::new(&mut self.0).poll_read(cx, buf)
    }
}

impl AsyncWrite for Socket {
    fn poll_write(
        mut self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        buf: &[u8],
    ) -> Poll<io::Result<usize>> {
        Pin::new(&mut self.0).poll_write(cx, buf)
    }
    fn poll_flush(mut self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<io::Result<()>> {
        Pin::new(&mut self.0).poll_flush(cx)
    }
    fn poll_shutdown(mut self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<io::Result<()>> {
        Pin::new(&mut self.0).poll_shutdown(cx)
    }
}
