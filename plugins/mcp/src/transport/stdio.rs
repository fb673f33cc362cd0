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
    reading: Reading,
}

/// Who reads the child's stdout.
enum Reading {
    /// This transport, on the plugin's runtime (`receive`).
    Own(Box<Lines<ChildStdout>>),
    /// The host's reactor (`IoWatch`): its thread reads and routes each
    /// reply at once; what is rmcp's comes here.
    Host {
        rmcp: tokio::sync::mpsc::Receiver<RxJsonRpcMessage<RoleClient>>,
        _watched: wf_plugin_api::io_watch::Watched,
    },
}

/// The child's stdout, line by line, and what each line is for.
struct Lines<R> {
    read: BufReader<FrameGuard<R>>,
    /// The line read so far. rmcp's serve loop drops `receive()` whenever
    /// another branch of its `select!` wins; `read_until` leaves what it read
    /// here, so the next call goes on with the same line.
    line: Vec<u8>,
    /// Where each listed tool's `execution` is noted.
    executions: Executions,
    /// Where each log message is counted as it arrives.
    logs: PendingLogs,
    direct: std::sync::Arc<Table>,
    stdin: direct::Stdin,
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
        let stdin: direct::Stdin = std::sync::Arc::new(tokio::sync::Mutex::new(Some(stdin)));
        let direct = client.direct.attach(stdin.clone());
        let parts = LineParts {
            source,
            limit: max_message_bytes,
            client,
            direct: &direct,
            stdin: &stdin,
        };
        let reading = match client.io_watch.as_ref().filter(|w| w.host_watches()) {
            Some(watch) => match host_read(watch, stdout, |pipe| parts.lines(pipe)) {
                Ok(reading) => reading,
                Err(e) => {
                    // The child goes with `child` (killed on drop).
                    forget(pid);
                    return Err(e);
                }
            },
            None => Reading::Own(Box::new(parts.lines(stdout))),
        };
        Ok(Self {
            pid,
            child: Some(child),
            direct,
            stdin,
            reading,
        })
    }

    fn write(
        &self,
        item: &TxJsonRpcMessage<RoleClient>,
    ) -> impl Future<Output = std::io::Result<()>> + Send + 'static + use<> {
        write(&self.stdin, item)
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
        let lines = match &mut self.reading {
            Reading::Own(lines) => lines,
            Reading::Host { rmcp, .. } => {
                return match rmcp.recv().await {
                    Some(message) => Some(message),
                    None => self.ended(),
                };
            }
        };
        loop {
            match lines.read.read_until(b'\n', &mut lines.line).await {
                Ok(_) if lines.line.ends_with(b"\n") => {}
                Ok(_) => return self.ended(),
                Err(e) => {
                    tracing::error!("reading the upstream's stdout: {e}");
                    return self.ended();
                }
            }
            match lines.take() {
                Taken::Rmcp(message) => return Some(message),
                Taken::Done => {}
                Taken::End => return self.ended(),
            }
        }
    }

    fn close(&mut self) -> impl Future<Output = Result<(), Self::Error>> + Send {
        self.shutdown()
    }
}

/// Writes `item` as one line, as rmcp's codec would. Serialised before the
/// future: rmcp spawns the future of every message sent, and the message
/// inside it made each spawn copy kilobytes.
fn write(
    stdin: &direct::Stdin,
    item: &TxJsonRpcMessage<RoleClient>,
) -> impl Future<Output = std::io::Result<()>> + Send + 'static + use<> {
    let line = serde_json::to_vec(item).map(|mut line| {
        line.push(b'\n');
        line
    });
    let stdin = stdin.clone();
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

/// What one complete line was for.
// Only ever returned and matched at once, never stored: boxing the message
// would cost an allocation for nothing.
#[allow(clippy::large_enum_variant)]
enum Taken {
    /// A message for rmcp.
    Rmcp(RxJsonRpcMessage<RoleClient>),
    /// Nothing more to do: delivered to a direct request, or skipped.
    Done,
    /// rmcp's codec refused the stream: it ends, as rmcp's transport ends it.
    End,
}

impl<R: tokio::io::AsyncRead + Unpin> Lines<R> {
    /// Handles the complete line read: a reply to one of wf's direct
    /// requests goes to its caller; what is rmcp's is returned.
    fn take(&mut self) -> Taken {
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
            Ok(Some(message)) => self.direct.route(message).map_or(Taken::Done, Taken::Rmcp),
            Ok(None) => Taken::Done,
            Err(JsonRpcMessageCodecError::Serde(e)) => {
                match e.classify() {
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
                        drop(tokio::spawn(write(&self.stdin, &refusal)));
                    }
                }
                Taken::Done
            }
            Err(e) => {
                tracing::error!("reading the upstream's stdout: {e}");
                Taken::End
            }
        }
    }
}

/// What every [`Lines`] of a child is made of.
struct LineParts<'a> {
    source: &'a str,
    limit: usize,
    client: &'a McpClient,
    direct: &'a std::sync::Arc<Table>,
    stdin: &'a direct::Stdin,
}

impl LineParts<'_> {
    fn lines<R: tokio::io::AsyncRead + Unpin>(&self, reader: R) -> Lines<R> {
        Lines {
            // The guard cuts every line at the limit, so `line` stays within it.
            read: BufReader::new(FrameGuard::new(
                reader,
                self.source,
                self.limit,
                self.client.broken.clone(),
            )),
            line: Vec::new(),
            executions: self.client.executions.clone(),
            logs: self.client.logs.clone(),
            direct: self.direct.clone(),
            stdin: self.stdin.clone(),
        }
    }
}

/// The most messages for rmcp (requests, notifications, replies to its own
/// requests) read by the host and not yet taken: past it, the host stops
/// reading until rmcp catches up.
const RMCP_BACKLOG: usize = 256;

/// Hands the child's stdout to the host's reactor (`IoWatch`): the host's
/// thread reads it whenever it is readable ([`HostPump`]). Fails only when
/// out of descriptors.
#[cfg(unix)]
fn host_read(
    watch: &wf_plugin_api::io_watch::IoWatch,
    stdout: ChildStdout,
    lines: impl FnOnce(RawPipe) -> Lines<RawPipe>,
) -> std::io::Result<Reading> {
    use std::os::fd::AsFd;
    // Taken from this runtime's reactor, whose thread would otherwise wake
    // for every line too.
    let pipe = RawPipe::new(stdout.into_owned_fd()?)?;
    let offered = pipe.file.as_fd().try_clone_to_owned()?;
    let (tx, rx) = tokio::sync::mpsc::channel(RMCP_BACKLOG);
    let pump = std::sync::Arc::new(HostPump(std::sync::Mutex::new(PumpState {
        lines: lines(pipe),
        rmcp: Some(tx),
    })));
    let watched = watch.offer(offered.as_fd(), pump)?;
    Ok(Reading::Host {
        rmcp: rx,
        _watched: watched,
    })
}

#[cfg(not(unix))]
fn host_read(
    _watch: &wf_plugin_api::io_watch::IoWatch,
    _stdout: ChildStdout,
    _lines: impl FnOnce(RawPipe) -> Lines<RawPipe>,
) -> std::io::Result<Reading> {
    Err(std::io::ErrorKind::Unsupported.into())
}

/// A non-blocking pipe read without a reactor: `Pending` means "nothing
/// now", and wakes no one. Only [`HostPump`] polls it (with a no-op waker),
/// when the host says the pipe is readable.
///
/// A read that filled less than it asked for emptied the pipe, so the next
/// poll answers `Pending` without the system call that would only say so,
/// as tokio's own readers do: the reply's pump makes one read, not two. A
/// writer's next bytes are a new edge for the host's `epoll`, so nothing
/// waits unread.
#[cfg(unix)]
struct RawPipe {
    file: std::fs::File,
    /// The last read was short: the pipe was empty after it.
    emptied: bool,
}
#[cfg(not(unix))]
struct RawPipe;

#[cfg(unix)]
impl RawPipe {
    fn new(fd: std::os::fd::OwnedFd) -> std::io::Result<Self> {
        use std::os::fd::AsRawFd;
        // SAFETY: fcntl on a descriptor we own; F_GETFL/F_SETFL touch only its flags.
        unsafe {
            let flags = libc::fcntl(fd.as_raw_fd(), libc::F_GETFL);
            if flags < 0 || libc::fcntl(fd.as_raw_fd(), libc::F_SETFL, flags | libc::O_NONBLOCK) < 0
            {
                return Err(std::io::Error::last_os_error());
            }
        }
        Ok(Self {
            file: std::fs::File::from(fd),
            emptied: false,
        })
    }
}

impl tokio::io::AsyncRead for RawPipe {
    fn poll_read(
        self: std::pin::Pin<&mut Self>,
        _cx: &mut std::task::Context<'_>,
        buf: &mut tokio::io::ReadBuf<'_>,
    ) -> std::task::Poll<std::io::Result<()>> {
        #[cfg(unix)]
        {
            let this = self.get_mut();
            if std::mem::take(&mut this.emptied) {
                return std::task::Poll::Pending;
            }
            loop {
                use std::io::Read;
                let room = buf.remaining();
                return match (&this.file).read(buf.initialize_unfilled()) {
                    Ok(n) => {
                        buf.advance(n);
                        this.emptied = n > 0 && n < room;
                        std::task::Poll::Ready(Ok(()))
                    }
                    Err(e) if e.kind() == std::io::ErrorKind::Interrupted => continue,
                    Err(e) if e.kind() == std::io::ErrorKind::WouldBlock => {
                        std::task::Poll::Pending
                    }
                    Err(e) => std::task::Poll::Ready(Err(e)),
                };
            }
        }
        #[cfg(not(unix))]
        {
            let _ = buf;
            std::task::Poll::Ready(Ok(()))
        }
    }
}

/// What the host's thread runs when the child's stdout is readable.
struct HostPump(std::sync::Mutex<PumpState>);

struct PumpState {
    lines: Lines<RawPipe>,
    /// Where rmcp's messages go; `None` once the stream ended.
    rmcp: Option<tokio::sync::mpsc::Sender<RxJsonRpcMessage<RoleClient>>>,
}

impl wf_plugin_api::io_watch::Pump for HostPump {
    fn readable(&self) -> wf_plugin_api::io_watch::Readiness {
        use wf_plugin_api::io_watch::Readiness;
        let mut st = self
            .0
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner);
        let st = &mut *st;
        let mut cx = std::task::Context::from_waker(std::task::Waker::noop());
        loop {
            let Some(rmcp) = st.rmcp.as_ref() else {
                return Readiness::Closed;
            };
            if rmcp.capacity() == 0 {
                return Readiness::More;
            }
            let lines = &mut st.lines;
            let read = {
                let fut = lines.read.read_until(b'\n', &mut lines.line);
                std::pin::pin!(fut).poll(&mut cx)
            };
            match read {
                std::task::Poll::Pending => return Readiness::Drained,
                std::task::Poll::Ready(Ok(_)) if lines.line.ends_with(b"\n") => {
                    match lines.take() {
                        // Room was checked above; only this thread sends.
                        Taken::Rmcp(message) => {
                            let _ = rmcp.try_send(message);
                        }
                        Taken::Done => {}
                        Taken::End => {
                            lines.direct.end();
                            st.rmcp = None;
                            return Readiness::Closed;
                        }
                    }
                }
                std::task::Poll::Ready(end) => {
                    if let Err(e) = end {
                        tracing::error!("reading the upstream's stdout: {e}");
                    }
                    // As `receive` at the end of the stream: the direct
                    // requests fail now, rmcp's when it reads the end.
                    lines.direct.end();
                    st.rmcp = None;
                    return Readiness::Closed;
                }
            }
        }
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
        direct_replies(McpClient::new(None)).await;
    }

    /// The same when a host's reactor watches the child's stdout
    /// (`IoWatch`): here a task that does what wf's host does
    /// (host/src/sources/io_watch.rs) with the offers.
    #[tokio::test]
    async fn direct_replies_are_taken_off_the_stream_by_the_host() {
        let watch = wf_plugin_api::io_watch::IoWatch::new();
        let host = tokio::spawn(fake_host(watch.clone()));
        tokio::task::yield_now().await;
        assert!(watch.host_watches());
        let client = McpClient::new(None).with_io_watch(Some(watch.clone()));
        let host_read = tokio::time::timeout(Duration::from_secs(20), direct_replies(client))
            .await
            .expect("every reply read within 20 s");
        assert!(host_read, "the host read it");
        host.abort();
    }

    /// Watches each offer in this runtime's reactor and pumps it when readable.
    async fn fake_host(watch: wf_plugin_api::io_watch::IoWatch) {
        use std::os::fd::FromRawFd;
        use wf_plugin_api::io_watch::Readiness;
        while let Some(offer) = watch.next().await {
            // SAFETY: the offer's descriptor is a duplicate made for us.
            let fd = unsafe { std::os::fd::OwnedFd::from_raw_fd(offer.fd) };
            let watch = watch.clone();
            tokio::spawn(async move {
                // SAFETY: an OwnedFd stays open, and the same, until dropped.
                let fd = unsafe { tokio::io::unix::AsyncFd::register(fd) }.unwrap();
                loop {
                    let mut ready = fd.readable().await.unwrap();
                    match watch.readable(offer.watch) {
                        Readiness::Drained => ready.clear_ready(),
                        Readiness::More => tokio::task::yield_now().await,
                        Readiness::Closed => return,
                    }
                }
            });
        }
    }

    /// Runs the checks; whether the host read the stream.
    async fn direct_replies(client: McpClient) -> bool {
        let script = r#"read line
printf '%s\n' '{"jsonrpc":"2.0","id":"wf-1","result":{"content":[{"type":"text","text":"direct"}]}}'
printf '%s\n' '{"jsonrpc":"2.0","id":4,"result":{"content":[]}}'
printf '{"jsonrpc":"2.0","id":"wf-2","result":{"content":[{"type":"text","text":"%0300d"}]}}\n' 0
"#;
        let mut cmd = tokio::process::Command::new("sh");
        cmd.args(["-c", script]);
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
        matches!(transport.reading, Reading::Host { .. })
    }
}
