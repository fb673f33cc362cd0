//! wf's end of a child's sockets (control and call lane), on wf's tokio
//! runtime: for each, a reader task that
//! decodes every frame a read brought and hands each reply to its waiting
//! call (woken on the same worker, no thread in between), and a writer task
//! that sends whatever frames queued meanwhile in one write.

use std::os::unix::net::UnixStream;
use std::sync::{Arc, OnceLock};

use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::runtime::{Handle, RuntimeFlavor};
use tokio::sync::mpsc::UnboundedReceiver;

use super::frame::{FrameError, MAX_FRAME};
use super::running::{Child, WRITE};
use super::spawn;
use crate::plugins::host_context::HostContext;

/// The runtime children's sockets live on: wf's own (multi-threaded) one
/// when there is one, else a small one of their own (tools and tests that
/// start children outside a runtime, or on a single-threaded one that a
/// blocking source creation would stall).
pub(super) fn runtime() -> Handle {
    match Handle::try_current() {
        Ok(h) if h.runtime_flavor() == RuntimeFlavor::MultiThread => h,
        _ => fallback(),
    }
}

fn fallback() -> Handle {
    static RT: OnceLock<tokio::runtime::Runtime> = OnceLock::new();
    RT.get_or_init(|| {
        tokio::runtime::Builder::new_multi_thread()
            .worker_threads(1)
            .thread_name("wf-plugin-io")
            .enable_all()
            .build()
            .expect("cannot start the plugin i/o runtime")
    })
    .handle()
    .clone()
}

/// What a child's reader does once the child ended and was reaped: told
/// its exit status and, if it broke the protocol, how.
pub(super) type OnExit = Box<dyn FnOnce(String, Option<FrameError>) + Send>;

/// Starts the reader and writer tasks of a child's two sockets on `rt`;
/// `exited` runs when the child is gone.
pub(super) fn start(
    child: Arc<Child>,
    spawned: spawn::Spawned,
    rx: UnboundedReceiver<Vec<u8>>,
    calls_rx: UnboundedReceiver<Vec<u8>>,
    exited: OnExit,
    host: HostContext,
    rt: &Handle,
) -> Result<(), String> {
    let spawn::Spawned {
        process,
        cgroups,
        control,
        calls,
    } = spawned;
    let _enter = rt.enter();
    let async_socket = |s: UnixStream| {
        s.set_nonblocking(true)
            .and_then(|()| tokio::net::UnixStream::from_std(s))
            .map_err(|e| e.to_string())
    };
    let (read_half, write_half) = async_socket(control)?.into_split();
    let (calls_read, calls_write) = async_socket(calls)?.into_split();
    rt.spawn(write_frames(rx, write_half, child.clone()));
    rt.spawn(write_frames(calls_rx, calls_write, child.clone()));
    rt.spawn(read_calls(child.clone(), calls_read, host.clone()));
    if let Some(events) = cgroups.oom_events() {
        rt.spawn(watch_memory(child.clone(), events));
    }
    rt.spawn(read_frames(
        child, read_half, process, cgroups, exited, host,
    ));
    Ok(())
}

/// How often a child's memory cgroup is checked for a kill at its bound.
const OOM_POLL: std::time::Duration = std::time::Duration::from_millis(100);

/// Ends the whole child when the kernel killed one of its processes at its
/// memory cgroup's bound: the plugin, or the call that was running, may not
/// survive that sensibly (v1 kills one process, not the group), and its
/// caller should learn which bound it met. A read of a small cgroup file
/// every 100 ms; an eventfd would work on v1 only.
async fn watch_memory(child: Arc<Child>, events: std::path::PathBuf) {
    use std::sync::atomic::Ordering;
    let mut tick = tokio::time::interval(OOM_POLL);
    tick.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
    loop {
        tick.tick().await;
        if child.has_ended() {
            return;
        }
        if super::cgroup::oom_kills(&events) > 0 {
            child.out_of_memory.store(true, Ordering::Release);
            spawn::kill_group(child.pid);
            return;
        }
    }
}

/// Writes queued frames, batching what queued meanwhile into one write; a
/// child that takes none for [`WRITE`] is stuck and killed.
async fn write_frames(
    mut rx: UnboundedReceiver<Vec<u8>>,
    mut out: tokio::net::unix::OwnedWriteHalf,
    child: Arc<Child>,
) {
    while let Some(mut buf) = rx.recv().await {
        while buf.len() < (1 << 20) {
            match rx.try_recv() {
                Ok(more) => buf.extend_from_slice(&more),
                Err(_) => break,
            }
        }
        match tokio::time::timeout(WRITE, out.write_all(&buf)).await {
            Ok(Ok(())) => {}
            Ok(Err(_)) => {
                spawn::kill_group(child.pid);
                return;
            }
            Err(_) => {
                child
                    .stopped_reading
                    .store(true, std::sync::atomic::Ordering::Release);
                spawn::kill_group(child.pid);
                return;
            }
        }
    }
}

/// Reads the call lane's frames (replies, progress, the calls' logs) until
/// the child closes it. A lane that breaks the protocol gets the child
/// killed: its control socket's reader then fails what was in flight.
async fn read_calls(child: Arc<Child>, input: tokio::net::unix::OwnedReadHalf, host: HostContext) {
    if let Some(e) = read_loop(&child, input, &host).await {
        tracing::warn!(plugin = %host.plugin, "the plugin's call lane broke the protocol ({e}); killing its child");
        spawn::kill_group(child.pid);
    }
}

/// Reads the child's control frames until it ends; then reaps it and lets
/// the child fail what was in flight.
async fn read_frames(
    child: Arc<Child>,
    input: tokio::net::unix::OwnedReadHalf,
    mut process: std::process::Child,
    cgroups: super::cgroup::ChildCgroups,
    exited: OnExit,
    host: HostContext,
) {
    let broken = read_loop(&child, input, &host).await;
    let memory_mb = child.memory_mb;
    let memory_total = child.memory_total_mb;
    let pid = child.pid;
    let watched = child.clone();
    let status = tokio::task::spawn_blocking(move || {
        // The socket closed because the plugin host ended: its outer
        // process follows within moments, with the host's own status, which
        // an early kill would replace with SIGKILL.
        if broken.is_none() {
            spawn::await_exit(pid, std::time::Duration::from_secs(2));
        }
        // Gone or broken: whatever it started goes with it.
        spawn::kill_group(pid);
        let status = process.wait();
        // Killed at its memory cgroup's bound, whoever noticed first (the
        // watch, or the child's own end when the kernel picked it).
        let oom = watched
            .out_of_memory
            .load(std::sync::atomic::Ordering::Acquire)
            || cgroups
                .oom_events()
                .is_some_and(|e| super::cgroup::oom_kills(&e) > 0);
        let status = status
            .map(|s| spawn::describe_exit(&s, memory_mb, oom.then_some(memory_total).flatten()))
            .unwrap_or_else(|e| format!("unknown: {e}"));
        drop(cgroups);
        (status, broken)
    })
    .await;
    let (status, broken) = match status {
        Ok(r) => r,
        Err(e) => (format!("unknown: {e}"), None),
    };
    exited(status, broken);
}

/// Decodes and dispatches every frame a read brought, until the socket
/// ends (None) or breaks the protocol.
async fn read_loop(
    child: &Child,
    mut input: tokio::net::unix::OwnedReadHalf,
    host: &HostContext,
) -> Option<FrameError> {
    let mut buf: Vec<u8> = Vec::with_capacity(64 << 10);
    loop {
        // Every whole frame the buffer holds, then read more.
        let mut at = 0;
        while buf.len() - at >= 4 {
            let len = u32::from_be_bytes([buf[at], buf[at + 1], buf[at + 2], buf[at + 3]]) as usize;
            if len > MAX_FRAME {
                return Some(FrameError::TooLarge(len));
            }
            if buf.len() - at - 4 < len {
                break;
            }
            match super::wire::decode_to_host(&buf[at + 4..at + 4 + len]) {
                Ok(msg) => child.dispatch(msg, host),
                Err(e) => return Some(e),
            }
            at += 4 + len;
        }
        buf.drain(..at);
        if buf.capacity() - buf.len() < 16 << 10 {
            buf.reserve(64 << 10);
        }
        match input.read_buf(&mut buf).await {
            Ok(0) if buf.is_empty() => return None,
            Ok(0) => {
                return Some(FrameError::Io(std::io::Error::new(
                    std::io::ErrorKind::UnexpectedEof,
                    "the connection ended inside a frame",
                )));
            }
            Ok(_) => {}
            Err(e) => return Some(e.into()),
        }
    }
}
