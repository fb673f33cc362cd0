//! `wf-plugin-host`: the child side. Loads one plugin library with the
//! loader's own checks, then serves wf's frames on fd 3: creates sources and
//! sends the plugin's logs and events back. Calls take fd 4, the call lane:
//! served by the plugin's own runtime (wf-plugin-api 1.5 and later), or here
//! for an older plugin (each request a task; a `cancel` drops its future).
//! Exits when wf closes the control socket.

use std::collections::HashMap;
use std::future::Future;

use std::io::BufReader;
use std::os::fd::FromRawFd;
use std::os::unix::net::UnixStream;
use std::sync::{Arc, Mutex, PoisonError};
use tokio::io::AsyncReadExt as _;

use abi_stable::sabi_trait::TD_Opaque;
use abi_stable::std_types::{RArc, ROption, RStr, RString};
use tokio::sync::oneshot;
use wf_plugin_api::ffi::{
    CallContextFfi, CallContextFfi_TO, HostContextFfi, HostContextFfi_TO, PluginBox, SourceBox,
};
use wf_plugin_api::{Manifest, PluginError};

use super::frame;
use super::protocol::{Hello, PROTOCOL_VERSION, Start, ToChild, ToHost};
use super::spawn::{CALL_FD, CHILD_FD};
use crate::plugins::sandbox;

/// What the sandbox needs to know.
pub struct SandboxSetup<'a> {
    pub hello: &'a Hello,
    /// The plugin's own settings, once its name is known.
    pub start: Option<&'a Start>,
}

/// The sandbox policy. Before the manifest is read: the whole sources
/// folder (`<state>/sources`) and every configured source's programs.
/// After: only the data directories of the plugin's own sources (configured
/// ones of its kinds and its default sources; made here, inside the first
/// stage) and their programs. The child's own `HOME` (made by wf, private)
/// is its in both.
fn sandbox_policy(
    setup: &SandboxSetup<'_>,
    manifest: Option<&Manifest>,
) -> Result<sandbox::Policy, String> {
    let hello = setup.hello;
    let mode = setup
        .start
        .map_or(hello.sandbox.as_str(), |s| s.sandbox.as_str());
    let mode: sandbox::Sandbox = mode.parse()?;
    let mut policy = sandbox::Policy::new(&hello.file, mode)
        .starts_programs(manifest.is_none_or(|m| m.starts_programs));
    if let Some(home) = std::env::var_os("HOME").map(std::path::PathBuf::from)
        && home.is_dir()
    {
        policy = policy.data_dir(home);
    }
    let mine = |kind: &str| manifest.is_none_or(|m| m.kinds.iter().any(|k| k == kind));
    for s in hello.sources.iter().filter(|s| mine(&s.kind)) {
        for p in &s.programs {
            policy = policy.program(p);
        }
    }
    let mut dirs: Vec<std::path::PathBuf> = match manifest {
        None => vec![hello.data_dir.clone()],
        Some(m) => hello
            .sources
            .iter()
            .filter(|s| mine(&s.kind))
            .map(|s| s.data_dir.clone())
            .chain(
                m.default_sources
                    .iter()
                    .map(|d| hello.data_dir.join(&d.name)),
            )
            .collect(),
    };
    dirs.sort();
    dirs.dedup();
    for d in dirs {
        std::fs::create_dir_all(&d)
            .map_err(|e| format!("cannot make the data directory {}: {e}", d.display()))?;
        policy = policy.data_dir(d);
    }
    Ok(policy)
}

/// Runs before the plugin library is loaded (its constructors run at load),
/// before any thread starts: the widest sandbox any plugin gets.
fn sandbox_before_load(setup: &SandboxSetup<'_>) -> Result<(), String> {
    let policy = sandbox_policy(setup, None)?;
    let report = sandbox::before_load(&policy)
        .map_err(|e| format!("cannot enter the plugin sandbox: {e}"))?;
    for w in &report.warnings {
        eprintln!("wf-plugin-host: warning: {w}");
    }
    Ok(())
}

/// Runs once the manifest is read, before the plugin is instantiated: the
/// plugin's own, narrower sandbox. Its report says what the child may do.
fn sandbox_after_manifest(setup: &SandboxSetup<'_>, manifest: &Manifest) -> Result<String, String> {
    let policy = sandbox_policy(setup, Some(manifest))?;
    let report = sandbox::after_manifest(&policy, manifest)
        .map_err(|e| format!("cannot enter the plugin sandbox: {e}"))?;
    for w in &report.warnings {
        eprintln!("wf-plugin-host: warning: {w}");
    }
    Ok(report.to_string())
}

/// Where frames to wf go: the socket itself (blocking) until `serve` starts,
/// then a queue its writer task drains, batching whatever queued meanwhile
/// into one write.
struct FrameOut {
    sync: Mutex<UnixStream>,
    queue: std::sync::OnceLock<tokio::sync::mpsc::UnboundedSender<Vec<u8>>>,
}

type Writer = Arc<FrameOut>;

thread_local! {
    /// The call this thread is polling, for the logs written meanwhile.
    static POLLING: std::cell::Cell<Option<u64>> = const { std::cell::Cell::new(None) };
}

fn send(w: &Writer, msg: &ToHost) {
    let bytes = match super::wire::encode_to_host(msg) {
        Ok(b) => b,
        // A reply wf would refuse (over the frame limit): the call fails
        // instead of never being answered.
        Err(e) => match msg {
            ToHost::Reply { id, .. } => {
                let err = PluginError::internal(format!("the plugin's reply cannot cross: {e}"));
                let reply = ToHost::Reply {
                    id: *id,
                    ok: None,
                    err: serde_json::to_string(&err).ok(),
                };
                match super::wire::encode_to_host(&reply) {
                    Ok(b) => b,
                    Err(_) => return,
                }
            }
            _ => return,
        },
    };
    if let Some(q) = w.queue.get() {
        if q.send(bytes).is_err() {
            std::process::exit(0);
        }
        return;
    }
    let mut s = w.sync.lock().unwrap_or_else(PoisonError::into_inner);
    if std::io::Write::write_all(&mut *s, &bytes).is_err() {
        // wf is gone: nothing to serve.
        std::process::exit(0);
    }
}

/// The plugin runtime's fewest workers in a child: a call that blocks one
/// (a blocking library inside `async fn`) leaves the other serving the
/// plugin's other calls.
pub const MIN_PLUGIN_WORKERS: usize = 2;

/// Sees an abort that follows a failed allocation (`errno` is `ENOMEM`:
/// the memory limit refused it) and exits with a status wf names.
extern "C" fn on_abort(_: libc::c_int) {
    // Reading this thread's errno (no allocation) and _exit are
    // async-signal-safe.
    if std::io::Error::last_os_error().raw_os_error() == Some(libc::ENOMEM) {
        // SAFETY: ends the process at once.
        unsafe { libc::_exit(super::spawn::EXIT_OUT_OF_MEMORY) };
    }
    // Otherwise abort() goes on to end the process with SIGABRT.
}

/// The child's main; its exit code.
pub fn main() -> i32 {
    // SAFETY: fds 3 and 4 are the sockets wf passed; nothing else owns them.
    unsafe {
        // Programs the plugin starts must not hold wf's sockets.
        for fd in [CHILD_FD, CALL_FD] {
            if libc::fcntl(fd, libc::F_SETFD, libc::FD_CLOEXEC) != 0 {
                eprintln!("wf-plugin-host: no socket on fd {fd}: run by wf only");
                return 2;
            }
        }
    }
    close_strays();
    // Before any thread exists (the namespace's init and the outer are forks).
    let contained = super::contain::enter(&[CHILD_FD, CALL_FD]);
    // SAFETY: installing a handler that calls only async-signal-safe code.
    unsafe {
        let mut action: libc::sigaction = std::mem::zeroed();
        action.sa_sigaction = on_abort as extern "C" fn(libc::c_int) as usize;
        action.sa_flags = libc::SA_RESETHAND;
        libc::sigaction(libc::SIGABRT, &action, std::ptr::null_mut());
    }
    // SAFETY: as above; owned from here on.
    let stream = unsafe { UnixStream::from_raw_fd(CHILD_FD) };
    // SAFETY: as above; owned here until the plugin takes it (`Lane`).
    let lane = unsafe { UnixStream::from_raw_fd(CALL_FD) };
    let Ok(reader) = stream.try_clone() else {
        return 2;
    };
    let writer: Writer = Arc::new(FrameOut {
        sync: Mutex::new(stream),
        queue: std::sync::OnceLock::new(),
    });
    let mut reader = BufReader::with_capacity(64 << 10, reader);

    let hello = match frame::read::<ToChild>(&mut reader) {
        Ok(ToChild::Hello(h)) => h,
        _ => return 2,
    };
    if hello.protocol != PROTOCOL_VERSION {
        send(
            &writer,
            &ToHost::Refused {
                reason: format!(
                    "wf-plugin-host speaks protocol {PROTOCOL_VERSION}, wf sent {}: install wf and wf-plugin-host from the same build",
                    hello.protocol
                ),
            },
        );
        return 2;
    }
    let refuse = |reason: String| {
        send(&writer, &ToHost::Refused { reason });
        1
    };
    if let Err(e) = sandbox_before_load(&SandboxSetup {
        hello: &hello,
        start: None,
    }) {
        return refuse(e);
    }
    let module = match crate::plugins::loader::open_module(&hello.file) {
        Ok(m) => m,
        Err(e) => return refuse(e),
    };
    let manifest = match crate::plugins::loader::read_manifest(module) {
        Ok(m) => m,
        Err(e) => return refuse(e),
    };
    send(
        &writer,
        &ToHost::Manifest {
            protocol: PROTOCOL_VERSION,
            manifest: serde_json::to_string(&manifest).unwrap_or_default(),
        },
    );
    let start = match frame::read::<ToChild>(&mut reader) {
        Ok(ToChild::Start(s)) => s,
        _ => return 0,
    };
    let own_user_namespace = contained.as_ref().is_ok_and(|c| c.own_user_namespace);
    let processes_bound = if own_user_namespace {
        start.max_processes
    } else {
        None
    };
    if let Err(e) = super::spawn::apply_limits(
        start.memory_mb.map(|mb| mb.saturating_mul(1 << 20)),
        start.cpu_seconds,
        processes_bound,
    ) {
        return refuse(format!("cannot apply the plugin's limits: {e}"));
    }
    let limits = limits_line(&start, processes_bound.is_some());
    let contained = match &contained {
        Ok(c) => c.line.clone(),
        Err(e) => {
            eprintln!("wf-plugin-host: warning: processes the plugin starts may outlive it: {e}");
            format!("processes: NOT contained ({e})")
        }
    };
    let sandbox = match sandbox_after_manifest(
        &SandboxSetup {
            hello: &hello,
            start: Some(&start),
        },
        &manifest,
    ) {
        Ok(report) => report,
        Err(e) => return refuse(e),
    };
    let lane_writer: Arc<std::sync::OnceLock<Writer>> = Arc::default();
    let host = HostContextFfi_TO::from_ptr(
        RArc::new(ChildHost {
            writer: writer.clone(),
            lane: lane_writer.clone(),
        }),
        TD_Opaque,
    );
    let init = with_workers(&hello.init);
    let plugin = match crate::plugins::loader::construct(module, host, &init) {
        Ok(p) => p,
        Err(e) => return refuse(e),
    };
    send(
        &writer,
        &ToHost::Ready {
            sandbox: Some(format!("{sandbox}; {contained}; {limits}")),
        },
    );
    serve(plugin, reader, writer, lane, lane_writer)
}

/// The `PluginInit` JSON with at least [`MIN_PLUGIN_WORKERS`] runtime workers.
fn with_workers(init: &str) -> String {
    let Ok(mut v) = serde_json::from_str::<serde_json::Value>(init) else {
        return init.to_string();
    };
    let n = v["runtime_threads"].as_u64().unwrap_or(1) as usize;
    if let Some(o) = v.as_object_mut() {
        o.insert("runtime_threads".into(), n.max(MIN_PLUGIN_WORKERS).into());
    }
    v.to_string()
}

/// What bounds the child, for its report (`wf plugins`).
fn limits_line(start: &Start, nproc: bool) -> String {
    let memory = start
        .memory_mb
        .map_or("memory unbounded".to_string(), |mb| {
            format!("memory {mb} MiB per process")
        });
    let cpu = start
        .cpu_seconds
        .map_or(String::new(), |s| format!(", CPU {s} s"));
    let procs = match start.max_processes {
        None => "processes unbounded".to_string(),
        Some(n) if own_pids_cgroup() => format!("{n} processes and threads (pids cgroup)"),
        Some(n) if nproc => format!("{n} processes and threads (RLIMIT_NPROC)"),
        Some(n) => format!(
            "processes NOT bounded (max_processes = {n}: no pids cgroup wf may write, and no user namespace of its own)"
        ),
    };
    format!(
        "limits: {memory}{cpu}, {procs}, nice {}",
        super::spawn::CHILD_NICE
    )
}

/// Whether this process sits in a pids cgroup wf made for it (v1's pids
/// hierarchy, or v2's single one; a v1 memory cgroup does not count).
fn own_pids_cgroup() -> bool {
    std::fs::read_to_string("/proc/self/cgroup").is_ok_and(|t| {
        t.lines().any(|l| {
            let mut parts = l.splitn(3, ':');
            let (_, controllers, path) = (parts.next(), parts.next(), parts.next());
            path.is_some_and(|p| p.contains("/wf-plugin-"))
                && controllers.is_some_and(|c| c.is_empty() || c.split(',').any(|c| c == "pids"))
        })
    })
}

/// Closes every descriptor but stdio and the sockets (older kernels without
/// CLOSE_RANGE_CLOEXEC may have let some through).
fn close_strays() {
    // macOS lists a process's descriptors in /dev/fd.
    let listing = if cfg!(target_os = "linux") {
        "/proc/self/fd"
    } else {
        "/dev/fd"
    };
    let Ok(dir) = std::fs::read_dir(listing) else {
        return;
    };
    let fds: Vec<i32> = dir
        .filter_map(|e| e.ok()?.file_name().to_str()?.parse().ok())
        .filter(|fd| *fd > CALL_FD)
        .collect();
    for fd in fds {
        // SAFETY: closing descriptors nothing in this process owns yet (the
        // directory's own fd is closed already or fails harmlessly).
        unsafe {
            libc::close(fd);
        }
    }
}

fn serve(
    plugin: PluginBox,
    reader: BufReader<UnixStream>,
    writer: Writer,
    lane: UnixStream,
    lane_writer: Arc<std::sync::OnceLock<Writer>>,
) -> i32 {
    // Two workers: an older plugin's call that blocks one (its futures are
    // polled here) leaves the other reading and serving.
    let runtime = match tokio::runtime::Builder::new_multi_thread()
        .worker_threads(MIN_PLUGIN_WORKERS)
        .thread_name("wf-plugin-host")
        .enable_all()
        .build()
    {
        Ok(r) => r,
        Err(e) => {
            eprintln!("wf-plugin-host: cannot start a runtime: {e}");
            return 2;
        }
    };
    // From here the socket is read and written on the runtime: a request's
    // task starts on the worker that read it, and replies queued meanwhile
    // leave in one write.
    let leftover = reader.buffer().to_vec();
    let socket = reader.into_inner();
    let (tx, rx) = tokio::sync::mpsc::unbounded_channel::<Vec<u8>>();
    let _ = writer.queue.set(tx);
    {
        // Waits for a write in flight on the blocking path to finish.
        let _quiet = writer.sync.lock().unwrap_or_else(PoisonError::into_inner);
        if socket.set_nonblocking(true).is_err() {
            return 2;
        }
    }
    // A worker blocked by an older plugin's call must not leave the
    // sockets unread (`wf_plugin_api::lane::watch_reader`).
    let nudge = |h: tokio::runtime::Handle| {
        move || {
            h.spawn(async {});
        }
    };
    wf_plugin_api::lane::watch_reader(CHILD_FD, nudge(runtime.handle().clone()));
    let state = Arc::new(State {
        plugin,
        sources: Mutex::default(),
        calls: Mutex::default(),
        lane: Mutex::new(Lane::Undecided(Some(lane))),
        lane_writer,
        runtime: runtime.handle().clone(),
    });
    // The reading loop runs on the runtime's worker, not on this thread
    // (block_on's): a request's task then starts on the thread that read it,
    // with no wake-up of another thread in between.
    runtime.block_on(async move {
        let served = tokio::spawn(async move {
            let Ok(socket) = tokio::net::UnixStream::from_std(socket) else {
                return;
            };
            let (read_half, write_half) = socket.into_split();
            tokio::spawn(write_frames(rx, write_half));
            let mut input =
                tokio::io::BufReader::with_capacity(64 << 10, (&leftover[..]).chain(read_half));
            dispatch(state, &mut input, writer).await;
        });
        let _ = served.await;
    });
    // wf closed the socket (or broke the protocol). Programs the plugin
    // started go with the process group wf kills; the plugin's own
    // destructors are not waited for.
    std::process::exit(0)
}

/// Who serves the call lane (fd 4: requests and cancels in, replies,
/// progress and the calls' logs out).
enum Lane {
    /// No source yet: the socket, kept until the plugin says whether it
    /// serves the lane itself.
    Undecided(Option<UnixStream>),
    /// The plugin's own runtime (wf-plugin-api 1.5 and later): a call crosses
    /// no thread of this process's.
    Plugin,
    /// This process, as for every call before 1.5.
    Child,
}

/// What the two reading loops share.
struct State {
    plugin: PluginBox,
    sources: Mutex<HashMap<u64, Arc<SourceBox>>>,
    calls: Mutex<HashMap<u64, oneshot::Sender<()>>>,
    lane: Mutex<Lane>,
    lane_writer: Arc<std::sync::OnceLock<Writer>>,
    runtime: tokio::runtime::Handle,
}

impl State {
    /// Hands the call lane to a new source: the plugin joins it, or (the
    /// first time a plugin predates lanes) this process serves it.
    fn join_lane(self: &Arc<Self>, source: u64, obj: &SourceBox) -> Result<(), String> {
        let mut lane = self.lane.lock().unwrap_or_else(PoisonError::into_inner);
        if matches!(*lane, Lane::Child) {
            return Ok(());
        }
        let request = format!(r#"{{"op":"call_lane","fd":{CALL_FD},"source":{source}}}"#);
        let ctx = CallContextFfi_TO::from_value(
            ChildCall {
                id: 0,
                info: "{}".into(),
                writer: None,
            },
            TD_Opaque,
        );
        let answer = self
            .runtime
            .block_on(obj.request(RString::from(request), ctx))
            .into_result();
        match (answer, &mut *lane) {
            (Ok(_), Lane::Undecided(socket)) => {
                // The plugin owns the descriptor now: not closed here.
                if let Some(s) = socket.take() {
                    let _ = std::os::fd::IntoRawFd::into_raw_fd(s);
                }
                *lane = Lane::Plugin;
                Ok(())
            }
            (Ok(_), _) => Ok(()),
            (Err(_), Lane::Undecided(socket)) => {
                let socket = socket.take();
                *lane = Lane::Child;
                if let Some(socket) = socket {
                    self.serve_lane(socket)?;
                }
                Ok(())
            }
            (Err(e), _) => Err(e.into_string()),
        }
    }

    /// Serves the call lane on this process's runtime.
    fn serve_lane(self: &Arc<Self>, socket: UnixStream) -> Result<(), String> {
        let me = self.clone();
        socket.set_nonblocking(true).map_err(|e| e.to_string())?;
        let h = self.runtime.clone();
        wf_plugin_api::lane::watch_reader(std::os::fd::AsRawFd::as_raw_fd(&socket), move || {
            h.spawn(async {});
        });
        let sync = socket.try_clone().map_err(|e| e.to_string())?;
        let (tx, rx) = tokio::sync::mpsc::unbounded_channel::<Vec<u8>>();
        let writer: Writer = Arc::new(FrameOut {
            sync: Mutex::new(sync),
            queue: std::sync::OnceLock::new(),
        });
        let _ = writer.queue.set(tx);
        let _ = self.lane_writer.set(writer.clone());
        self.runtime.spawn(async move {
            let Ok(socket) = tokio::net::UnixStream::from_std(socket) else {
                return;
            };
            let (read_half, write_half) = socket.into_split();
            tokio::spawn(write_frames(rx, write_half));
            let mut input = tokio::io::BufReader::with_capacity(64 << 10, read_half);
            dispatch(me, &mut input, writer).await;
        });
        Ok(())
    }
}

/// Writes queued frames (batched, `wf_plugin_api::lane::write_frames`);
/// once wf is gone there is nothing left to serve.
async fn write_frames(
    rx: tokio::sync::mpsc::UnboundedReceiver<Vec<u8>>,
    out: tokio::net::unix::OwnedWriteHalf,
) {
    wf_plugin_api::lane::write_frames(rx, out).await;
    std::process::exit(0);
}

/// Reads one frame (the codec of `frame`, on the runtime).
async fn read_frame(input: &mut (impl tokio::io::AsyncRead + Unpin)) -> Option<ToChild> {
    use tokio::io::AsyncReadExt;
    let mut len = [0u8; 4];
    input.read_exact(&mut len).await.ok()?;
    let len = u32::from_be_bytes(len) as usize;
    if len > frame::MAX_FRAME {
        return None;
    }
    let mut buf = vec![0u8; len];
    input.read_exact(&mut buf).await.ok()?;
    super::wire::decode_to_child(&buf).ok()
}

/// Serves one socket's frames; `writer` is that socket's (a call's reply
/// and progress go back on the socket it came on).
async fn dispatch(
    state: Arc<State>,
    input: &mut (impl tokio::io::AsyncRead + Unpin),
    writer: Writer,
) {
    // Until wf closes the socket (or breaks the protocol).
    while let Some(msg) = read_frame(input).await {
        match msg {
            ToChild::Create { id, source, spec } => {
                let (state, writer) = (state.clone(), writer.clone());
                tokio::task::spawn_blocking(move || {
                    let created = state
                        .plugin
                        .create_source(RString::from(spec))
                        .into_result()
                        .map_err(RString::into_string)
                        .and_then(|obj| {
                            state.join_lane(source, &obj)?;
                            Ok(obj)
                        });
                    let err = match created {
                        Ok(obj) => {
                            state
                                .sources
                                .lock()
                                .unwrap_or_else(PoisonError::into_inner)
                                .insert(source, Arc::new(obj));
                            None
                        }
                        Err(e) => Some(e),
                    };
                    send(&writer, &ToHost::Created { id, err });
                });
            }
            ToChild::Request {
                id,
                source,
                request,
                info,
            } => {
                let obj = state
                    .sources
                    .lock()
                    .unwrap_or_else(PoisonError::into_inner)
                    .get(&source)
                    .cloned();
                let Some(obj) = obj else {
                    let err = PluginError::internal(format!("no source {source} in this child"));
                    send(
                        &writer,
                        &ToHost::Reply {
                            id,
                            ok: None,
                            err: serde_json::to_string(&err).ok(),
                        },
                    );
                    continue;
                };
                let (tx, cancelled) = oneshot::channel();
                state
                    .calls
                    .lock()
                    .unwrap_or_else(PoisonError::into_inner)
                    .insert(id, tx);
                let ctx = CallContextFfi_TO::from_value(
                    ChildCall {
                        id,
                        info,
                        writer: Some(writer.clone()),
                    },
                    TD_Opaque,
                );
                let (writer, state) = (writer.clone(), state.clone());
                tokio::spawn(async move {
                    let mut inner = obj.request(RString::from(request), ctx);
                    let fut = std::future::poll_fn(move |cx| {
                        POLLING.set(Some(id));
                        let r = std::pin::Pin::new(&mut inner).poll(cx);
                        POLLING.set(None);
                        r
                    });
                    tokio::select! {
                        reply = fut => {
                            state.calls.lock().unwrap_or_else(PoisonError::into_inner).remove(&id);
                            let (ok, err) = match reply.into_result() {
                                Ok(ok) => (Some(ok.into_string()), None),
                                Err(e) => (None, Some(e.into_string())),
                            };
                            send(&writer, &ToHost::Reply { id, ok, err });
                        }
                        // Cancelled: the plugin's future is dropped here.
                        _ = cancelled => {}
                    }
                });
            }
            ToChild::Cancel { id } => {
                state
                    .calls
                    .lock()
                    .unwrap_or_else(PoisonError::into_inner)
                    .remove(&id);
            }
            ToChild::Shutdown { id, source } => {
                let obj = state
                    .sources
                    .lock()
                    .unwrap_or_else(PoisonError::into_inner)
                    .get(&source)
                    .cloned();
                let writer = writer.clone();
                tokio::spawn(async move {
                    if let Some(obj) = obj {
                        obj.shutdown().await;
                    }
                    send(&writer, &ToHost::Done { id });
                });
            }
            ToChild::Forget { source } => {
                state
                    .sources
                    .lock()
                    .unwrap_or_else(PoisonError::into_inner)
                    .remove(&source);
            }
            ToChild::Hello(_) | ToChild::Start(_) => {}
        }
    }
}

/// The plugin's `HostContextFfi`: logs and events become frames.
#[derive(Clone)]
struct ChildHost {
    writer: Writer,
    /// The call lane's, when this process serves it: a call's logs go there,
    /// in order with its reply.
    lane: Arc<std::sync::OnceLock<Writer>>,
}

impl HostContextFfi for ChildHost {
    fn log(&self, level: u8, target: RStr<'_>, message: RStr<'_>) {
        let call = POLLING.get();
        let writer = match (call, self.lane.get()) {
            (Some(_), Some(lane)) => lane,
            _ => &self.writer,
        };
        send(
            writer,
            &ToHost::Log {
                level,
                target: target.as_str().into(),
                message: message.as_str().into(),
                call,
            },
        );
    }
    fn emit(&self, event_json: RString) {
        send(
            &self.writer,
            &ToHost::Emit {
                event: event_json.into_string(),
            },
        );
    }
}

/// A call's context in the child: progress becomes frames; the info is wf's.
struct ChildCall {
    id: u64,
    info: String,
    /// None for the child's own requests (nobody waits for their progress).
    writer: Option<Writer>,
}

impl CallContextFfi for ChildCall {
    fn progress(&self, progress: f64, total: ROption<f64>, message: ROption<RString>) {
        let Some(writer) = &self.writer else {
            return;
        };
        send(
            writer,
            &ToHost::Progress {
                id: self.id,
                progress,
                total: total.into_option(),
                message: message.into_option().map(RString::into_string),
            },
        );
    }
    fn info(&self) -> RString {
        RString::from(self.info.as_str())
    }
}
