//! A stdio upstream as an rmcp transport: the child process, its stdout read
//! through a [`FrameGuard`] (messages bounded by `max_message_bytes`) and
//! parsed by [`crate::transport::replies`] (a tool reply in one pass), its stdin written
//! by rmcp's line codec, and its stderr forwarded in bounded lines. rmcp's own
//! `TokioChildProcess` reads with a fixed 16 MiB line limit and drops an
//! over-long line without telling the call that waits for it, so wf
//! assembles the same parts itself.

use std::collections::HashMap;
use std::process::Stdio;
use std::sync::{Mutex, OnceLock};
use std::time::Duration;

use process_wrap::tokio::{ChildWrapper, CommandWrap};
use rmcp::RoleClient;
use rmcp::model::{ErrorData, JsonRpcMessage, ServerNotification, ServerResult};
use rmcp::service::{RxJsonRpcMessage, TxJsonRpcMessage};
use rmcp::transport::Transport;
use rmcp::transport::async_rw::JsonRpcMessageCodecError;
use tokio::io::{AsyncBufReadExt, AsyncWriteExt, BufReader};
use tokio::process::ChildStdout;

use crate::session::client::McpClient;
use crate::session::pending_logs::PendingLogs;
use crate::transport::direct::{self, Table};
use crate::transport::executions::Executions;
use crate::transport::frames::FrameGuard;

/// How long a closed child gets to exit before SIGTERM, and again before SIGKILL.
const EXIT_GRACE: Duration = Duration::from_secs(3);

/// The process groups of live stdio upstreams, with their source's instance
/// (the address of its config, unique while it lives; a reload's new instance
/// of the same name is another one): what a
/// source's shutdown kills when a session could not be closed in time (e.g.
/// a rediscovery still running when wf stops).
fn live() -> &'static Mutex<HashMap<u32, usize>> {
    static LIVE: OnceLock<Mutex<HashMap<u32, usize>>> = OnceLock::new();
    LIVE.get_or_init(Default::default)
}

fn forget(pid: Option<u32>) {
    if let Some(pid) = pid {
        live()
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner)
            .remove(&pid);
    }
}

/// The key of a source instance in the live-process table.
pub fn instance_key(config: &crate::config::McpConfig) -> usize {
    config as *const crate::config::McpConfig as usize
}

/// Kills (SIGKILL, whole process group) every stdio upstream of the source
/// instance `key` still alive: the last step of the source's shutdown.
pub fn kill_leftovers(source: &str, key: usize) {
    let pids: Vec<u32> = {
        let mut live = live()
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner);
        let pids: Vec<u32> = live
            .iter()
            .filter(|(_, k)| **k == key)
            .map(|(p, _)| *p)
            .collect();
        for p in &pids {
            live.remove(p);
        }
        pids
    };
    for pid in pids {
        tracing::info!(source, pid, "killing an upstream process left at shutdown");
        #[cfg(unix)]
        // SAFETY: killpg only sends a signal; the group is the one wf started
        // for this upstream (ProcessGroup::leader) and has not been reaped yet.
        unsafe {
            libc::killpg(pid as libc::pid_t, libc::SIGKILL);
        }
    }
}

pub struct ChildTransport {
    /// The child's pid, which is also its process group's id.
    pid: Option<u32>,
    child: Option<Box<dyn ChildWrapper>>,
    /// The child's stdin, one JSON-RPC message a line (`None` once closed);
    /// wf's direct requests write to it too.
    stdin: direct::Stdin,
    /// wf's direct requests on this process (`direct`): their replies are
    /// taken off the stream here.
    direct: std::sync::Arc<Table>,
    read: BufReader<FrameGuard<ChildStdout>>,
    /// The line read so far. rmcp's serve loop drops `receive()` whenever
    /// another branch of its `select!` wins; `read_until` leaves what it read
    /// here, so the next call goes on with the same line.
    line: Vec<u8>,
    /// Where each listed tool's `execution` is noted.
    executions: Executions,
    /// Where each log message is counted as it arrives.
    logs: PendingLogs,
}

impl ChildTransport {
    /// Starts `cmd` with piped stdio; its stderr goes to wf's log. The
    /// session's `client` is told what this process reads: why wf broke
    /// it, the tools' executions, the log lines, wf's direct requests.
    pub fn spawn(
        mut cmd: CommandWrap,
        source: &str,
        instance: usize,
        max_message_bytes: usize,
        client: &McpClient,
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
            tokio::spawn(crate::transport::stderr::forward(
                source.to_string(),
                stderr,
            ));
        }
        let pid = child.id();
        if let Some(pid) = pid {
            live()
                .lock()
                .unwrap_or_else(std::sync::PoisonError::into_inner)
                .insert(pid, instance);
        }
        // The guard cuts every line at the limit, so `line` stays within it.
        let guard = FrameGuard::new(stdout, source, max_message_bytes, client.broken.clone());
        let stdin: direct::Stdin = std::sync::Arc::new(tokio::sync::Mutex::new(Some(stdin)));
        Ok(Self {
            pid,
            child: Some(child),
            direct: client.direct.attach(stdin.clone()),
            stdin,
            read: BufReader::new(guard),
            line: Vec::new(),
            executions: client.executions.clone(),
            logs: client.logs.clone(),
        })
    }

    /// Writes `item` as one line, as rmcp's codec would. Serialised before
    /// the future: rmcp spawns the future of every message sent, and the
    /// message inside it made each spawn copy kilobytes.
    fn write(
        &self,
        item: &TxJsonRpcMessage<RoleClient>,
    ) -> impl Future<Output = std::io::Result<()>> + Send + 'static + use<> {
        let line = serde_json::to_vec(item).map(|mut line| {
            line.push(b'\n');
            line
        });
        let stdin = self.stdin.clone();
        async move {
            let line = line?;
            let mut stdin = stdin.lock().await;
            let Some(w) = stdin.as_mut() else {
                return Err(direct::closed());
            };
            w.write_all(&line).await?;
            w.flush().await
        }
    }

    /// The MCP stdio shutdown: close stdin, wait; SIGTERM, wait; kill.
    async fn shutdown(&mut self) -> std::io::Result<()> {
        self.direct.end();
        let result = self.stop_child().await;
        // Known gone now: nothing left for `kill_leftovers`.
        forget(self.pid.take());
        result
    }

    async fn stop_child(&mut self) -> std::io::Result<()> {
        let Some(child) = self.child.as_mut() else {
            return Ok(());
        };
        drop(self.stdin.lock().await.take());
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

impl ChildTransport {
    /// The end of the stream: rmcp's requests fail as rmcp ends the
    /// session, wf's direct ones here.
    fn ended(&self) -> Option<RxJsonRpcMessage<RoleClient>> {
        self.direct.end();
        None
    }
}

impl Drop for ChildTransport {
    fn drop(&mut self) {
        // Killed in the background: dropping must not block, and the process
        // group must not outlive the session.
        self.direct.end();
        forget(self.pid.take());
        if let Some(mut child) = self.child.take() {
            // The signal goes out now, even when no runtime is left to run a
            // task (wf exiting); the reaping is then tokio's or init's.
            let _ = child.start_kill();
            if let Ok(rt) = tokio::runtime::Handle::try_current() {
                rt.spawn(async move {
                    let _ = child.wait().await;
                });
            }
        }
    }
}

impl Transport<RoleClient> for ChildTransport {
    type Error = std::io::Error;

    fn send(
        &mut self,
        item: TxJsonRpcMessage<RoleClient>,
    ) -> impl Future<Output = Result<(), Self::Error>> + Send + 'static {
        self.write(&item)
    }

    /// What rmcp's own stdio transport does with each line, but for the parse
    /// (`replies::decode`): an unparsable line is skipped, a well-formed one
    /// that is no MCP message gets an Invalid Request error back, and the end
    /// of the stream (a trailing line without newline is incomplete) ends it.
    async fn receive(&mut self) -> Option<RxJsonRpcMessage<RoleClient>> {
        loop {
            match self.read.read_until(b'\n', &mut self.line).await {
                Ok(_) if self.line.ends_with(b"\n") => {}
                Ok(_) => return self.ended(),
                Err(e) => {
                    tracing::error!("reading the upstream's stdout: {e}");
                    return self.ended();
                }
            }
            let parsed = crate::transport::replies::decode(&self.line);
            match &parsed {
                Ok(Some(JsonRpcMessage::Response(r)))
                    if matches!(r.result, ServerResult::ListToolsResult(_)) =>
                {
                    crate::transport::executions::note(&self.executions, &self.line);
                }
                Ok(Some(JsonRpcMessage::Notification(n)))
                    if matches!(
                        n.notification,
                        ServerNotification::LoggingMessageNotification(_)
                    ) && crate::session::pending_logs::is_log(&self.line) =>
                {
                    self.logs.arrived();
                }
                Ok(Some(JsonRpcMessage::Notification(n)))
                    if matches!(n.notification, ServerNotification::ProgressNotification(_)) =>
                {
                    self.logs.arrived();
                }
                _ => {}
            }
            self.line.clear();
            match parsed {
                // A reply to one of wf's direct requests goes to its caller, not to rmcp.
                Ok(Some(message)) => {
                    if let Some(message) = self.direct.route(message) {
                        return Some(message);
                    }
                }
                Ok(None) => {}
                Err(JsonRpcMessageCodecError::Serde(e)) => match e.classify() {
                    serde_json::error::Category::Syntax | serde_json::error::Category::Eof => {
                        tracing::debug!("ignoring an unparsable upstream message: {e}");
                    }
                    serde_json::error::Category::Data | serde_json::error::Category::Io => {
                        tracing::debug!("protocol error on an upstream message: {e}");
                        let refusal = TxJsonRpcMessage::<RoleClient>::error(
                            ErrorData::invalid_request("Invalid request", None),
                            None,
                        );
                        // Written on its own: this future may be dropped at any await.
                        drop(tokio::spawn(self.write(&refusal)));
                    }
                },
                Err(e) => {
                    tracing::error!("reading the upstream's stdout: {e}");
                    return self.ended();
                }
            }
        }
    }

    fn close(&mut self) -> impl Future<Output = Result<(), Self::Error>> + Send {
        self.shutdown()
    }
}

#[cfg(test)]
mod tests {
    use rmcp::model::RequestId;
    use serde_json::json;

    use super::*;

    /// Replies to wf's direct requests are taken off the stream and handed
    /// to their callers (an oversized one as the frame guard's error, which
    /// carries its id); rmcp gets the rest; the end of the stream fails the
    /// direct requests still waiting.
    #[tokio::test]
    async fn direct_replies_are_taken_off_the_stream() {
        let script = r#"read line
printf '%s\n' '{"jsonrpc":"2.0","id":"wf-1","result":{"content":[{"type":"text","text":"direct"}]}}'
printf '%s\n' '{"jsonrpc":"2.0","id":4,"result":{"content":[]}}'
printf '{"jsonrpc":"2.0","id":"wf-2","result":{"content":[{"type":"text","text":"%0300d"}]}}\n' 0
"#;
        let mut cmd = tokio::process::Command::new("sh");
        cmd.args(["-c", script]);
        let client = McpClient::new(None);
        let mut transport =
            ChildTransport::spawn(CommandWrap::from(cmd), "t", 0, 200, &client).unwrap();
        let table = client.direct.table().unwrap();
        assert!(!client.direct.ended());
        let (mut one, mut two, mut three) = (
            table.start().unwrap(),
            table.start().unwrap(),
            table.start().unwrap(),
        );
        table.write(b"{}\n".to_vec()).await.unwrap();
        let rmcps = serde_json::to_value(transport.receive().await.unwrap()).unwrap();
        assert_eq!(rmcps["id"], json!(4), "{rmcps}");
        let Some(Ok(ServerResult::CallToolResult(r))) = one.reply().await else {
            panic!("wf-1's reply");
        };
        assert_eq!(
            serde_json::to_value(&r.content).unwrap()[0]["text"],
            json!("direct")
        );
        assert!(transport.receive().await.is_none(), "the stream ends");
        assert!(client.direct.ended(), "the session is known dead at once");
        let e = two.reply().await.unwrap().unwrap_err();
        assert_eq!(e.data, Some(json!({"max_message_bytes": 200})));
        assert_eq!(three.id(), &RequestId::String("wf-3".into()));
        assert!(
            three.reply().await.is_none(),
            "failed at the end of the stream"
        );
        assert_eq!(table.waiting(), 0);
        assert!(table.start().is_err());
    }
}
