//! A stdio upstream as an rmcp transport: the child process, its stdout read
//! through a [`FrameGuard`] (messages bounded by `max_message_bytes`), its
//! stdin written by rmcp's line codec, and its stderr forwarded in bounded
//! lines. rmcp's own `TokioChildProcess` reads with a fixed 16 MiB line limit
//! and drops an over-long line without telling the call that waits for it, so
//! wf assembles the same parts itself.

use std::process::Stdio;
use std::time::Duration;

use process_wrap::tokio::{ChildWrapper, CommandWrap};
use rmcp::RoleClient;
use rmcp::service::{RxJsonRpcMessage, TxJsonRpcMessage};
use rmcp::transport::Transport;
use rmcp::transport::async_rw::AsyncRwTransport;
use tokio::process::{ChildStdin, ChildStdout};

use crate::frames::{Broken, FrameGuard};

/// How long a closed child gets to exit before SIGTERM, and again before SIGKILL.
const EXIT_GRACE: Duration = Duration::from_secs(3);

pub struct ChildTransport {
    child: Option<Box<dyn ChildWrapper>>,
    io: AsyncRwTransport<RoleClient, FrameGuard<ChildStdout>, ChildStdin>,
}

impl ChildTransport {
    /// Starts `cmd` with piped stdio; its stderr goes to wf's log.
    pub fn spawn(
        mut cmd: CommandWrap,
        source: &str,
        max_message_bytes: usize,
        broken: Broken,
    ) -> std::io::Result<Self> {
        cmd.command_mut()
            .stdin(Stdio::piped())
            .stdout(Stdio::piped())
            .stderr(Stdio::piped());
        let mut child = cmd.spawn()?;
        let inner = child.inner_mut();
        let (Some(stdin), Some(stdout)) = (inner.stdin().take(), inner.stdout().take()) else {
            return Err(std::io::Error::other("the child's stdio was not piped"));
        };
        if let Some(stderr) = inner.stderr().take() {
            tokio::spawn(crate::stderr::forward(source.to_string(), stderr));
        }
        let guard = FrameGuard::new(stdout, source, max_message_bytes, broken);
        // The guard cuts every line at the limit; rmcp's own bound stays above it.
        let io = AsyncRwTransport::new(guard, stdin).with_max_line_length(max_message_bytes + 2);
        Ok(Self {
            child: Some(child),
            io,
        })
    }

    /// The MCP stdio shutdown: close stdin, wait; SIGTERM, wait; kill.
    async fn shutdown(&mut self) -> std::io::Result<()> {
        let Some(child) = self.child.as_mut() else {
            return Ok(());
        };
        let _ = self.io.close().await;
        if tokio::time::timeout(EXIT_GRACE, child.wait()).await.is_ok() {
            self.child = None;
            return Ok(());
        }
        #[cfg(unix)]
        if child.signal(libc::SIGTERM).is_ok()
            && tokio::time::timeout(EXIT_GRACE, child.wait()).await.is_ok()
        {
            self.child = None;
            return Ok(());
        }
        let result = Box::into_pin(child.kill()).await;
        self.child = None;
        result
    }
}

impl Drop for ChildTransport {
    fn drop(&mut self) {
        // Killed in the background: dropping must not block, and the process
        // group must not outlive the session.
        if let Some(mut child) = self.child.take()
            && let Ok(rt) = tokio::runtime::Handle::try_current()
        {
            rt.spawn(async move {
                let _ = Box::into_pin(child.kill()).await;
            });
        }
    }
}

impl Transport<RoleClient> for ChildTransport {
    type Error = std::io::Error;

    fn send(
        &mut self,
        item: TxJsonRpcMessage<RoleClient>,
    ) -> impl Future<Output = Result<(), Self::Error>> + Send + 'static {
        self.io.send(item)
    }

    fn receive(&mut self) -> impl Future<Output = Option<RxJsonRpcMessage<RoleClient>>> + Send {
        self.io.receive()
    }

    fn close(&mut self) -> impl Future<Output = Result<(), Self::Error>> + Send {
        self.shutdown()
    }
}
