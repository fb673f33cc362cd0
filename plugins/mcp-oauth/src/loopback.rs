//! The loopback redirect of `wf auth login`: `http://127.0.0.1:<ephemeral>/callback`
//! (RFC 8252 §7.3), answering the browser with a short page and handing the
//! full redirect URL (code, state, iss) to the login.

use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::TcpListener;

use crate::OAuthError;

/// The largest request head read from the browser.
const MAX_HEAD: usize = 16 * 1024;

pub struct Loopback {
    listener: TcpListener,
    port: u16,
}

impl Loopback {
    /// Binds 127.0.0.1 on a port the kernel picks.
    pub async fn bind() -> Result<Self, OAuthError> {
        let listener = TcpListener::bind(("127.0.0.1", 0))
            .await
            .map_err(|e| OAuthError::Callback(format!("cannot listen on 127.0.0.1: {e}")))?;
        let port = listener
            .local_addr()
            .map_err(|e| OAuthError::Callback(e.to_string()))?
            .port();
        Ok(Self { listener, port })
    }

    pub fn redirect_uri(&self) -> String {
        format!("http://127.0.0.1:{}/callback", self.port)
    }

    /// Waits for the browser's `GET /callback?...` and returns its full URL.
    /// Other paths (a favicon) get a 404 and the wait goes on.
    pub async fn wait(self) -> Result<String, OAuthError> {
        loop {
            let (mut stream, _) = self
                .listener
                .accept()
                .await
                .map_err(|e| OAuthError::Callback(e.to_string()))?;
            let mut head = Vec::new();
            let mut buf = [0u8; 2048];
            while !head.windows(4).any(|w| w == b"\r\n\r\n") && head.len() < MAX_HEAD {
                match stream.read(&mut buf).await {
                    Ok(0) | Err(_) => break,
                    Ok(n) => head.extend_from_slice(&buf[..n]),
                }
            }
            let line = String::from_utf8_lossy(&head);
            let target = line
                .lines()
                .next()
                .and_then(|l| l.strip_prefix("GET "))
                .and_then(|l| l.split(' ').next())
                .unwrap_or("");
            if target.starts_with("/callback?") {
                let page = "wf: login received. You can close this tab.";
                let _ = stream
                    .write_all(
                        format!(
                            "HTTP/1.1 200 OK\r\ncontent-type: text/plain\r\ncontent-length: {}\r\nconnection: close\r\n\r\n{page}",
                            page.len()
                        )
                        .as_bytes(),
                    )
                    .await;
                return Ok(format!("http://127.0.0.1:{}{target}", self.port));
            }
            let _ = stream
                .write_all(
                    b"HTTP/1.1 404 Not Found\r\ncontent-length: 0\r\nconnection: close\r\n\r\n",
                )
                .await;
        }
    }
}
