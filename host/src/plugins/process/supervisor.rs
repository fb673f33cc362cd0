//! One child per plugin: starts it, speaks to it, notices when it dies,
//! fails the calls it had in flight at once, and restarts it with backoff
//! (recreating its sources). A restart bumps the child's generation, which
//! shows in every session epoch (see `epochs`), so a call that expected the
//! old session fails as state-lost.
//!
//! Restarts: after 250 ms, doubling to 4 s; a child that crashes 5 times in
//! a row (each within 60 s of its start) is given up on: its sources stay
//! failed until wf restarts.

use std::collections::BTreeMap;
use std::os::unix::net::UnixStream;
use std::path::PathBuf;
use std::sync::atomic::{AtomicBool, AtomicU32, AtomicU64, Ordering};
use std::sync::{Arc, Mutex, OnceLock, PoisonError, RwLock, Weak};
use std::time::{Duration, Instant};

use abi_stable::std_types::{RStr, RString};
use serde_json::Value;
use tokio::sync::oneshot;
use wf_plugin_api::ffi::{CallContextBox, HostContextFfi};
use wf_plugin_api::{ErrorCode, Event, Manifest, PluginError};

use super::frame::{self, FrameError};
use super::launch::{Health, Known, Launch};
use super::limits::Limits;
use super::protocol::{Hello, PROTOCOL_VERSION, Start, ToChild, ToHost};
use super::running::{CallReply, CancelOnDrop, Child, Pending, WRITE, error_json, next_id};
use super::spawn;
use crate::config::PluginSettings;
use crate::plugins::host_context::{HostContext, HostEvents};

/// How long a child may take to load its plugin and answer.
const HANDSHAKE: Duration = Duration::from_secs(30);
/// A child that lived this long was healthy: its crash count starts over.
const HEALTHY: Duration = Duration::from_secs(60);
/// A call the child has said nothing of (no reply, progress or log) for
/// this long is reported in `list_sources` as stalled: most often a plugin
/// that blocks its runtime's worker (docs/plugin-authoring.md).
pub const STALLED: Duration = Duration::from_secs(5);
/// Crashes in a row before wf gives up on a plugin.
pub const MAX_CRASHES_IN_A_ROW: u32 = 5;

/// The delay before restart attempt `n` (1-based): 250 ms doubling to 4 s.
pub fn backoff(n: u32) -> Duration {
    Duration::from_millis(250u64 << n.saturating_sub(1).min(4))
}

impl Launch {
    fn home(&self) -> PathBuf {
        let stem = self
            .file
            .file_stem()
            .map(|s| s.to_string_lossy().into_owned())
            .unwrap_or_else(|| "plugin".into());
        let base = match &self.state_dir {
            Some(d) => d.join("plugin-home"),
            // SAFETY: getuid cannot fail.
            None => {
                std::env::temp_dir().join(format!("wf-plugin-home-{}", unsafe { libc::getuid() }))
            }
        };
        base.join(stem)
    }
    fn data_dir(&self) -> PathBuf {
        match &self.state_dir {
            Some(d) => d.join("sources"),
            None => self.home(),
        }
    }
    /// The defaults until the plugin's own settings are known: its
    /// library's constructors run before them.
    fn limits(&self) -> Limits {
        self.known
            .as_ref()
            .map(|k| Limits {
                memory_mb: k.start.memory_mb,
                cpu_seconds: k.start.cpu_seconds,
                max_processes: k.start.max_processes,
            })
            .unwrap_or_default()
    }
}

/// Starts a child and reads its manifest (the plugin is not instantiated yet).
fn handshake(launch: &Launch) -> Result<(spawn::Spawned, Manifest), String> {
    let home = launch.home();
    if let Err(e) = std::fs::create_dir_all(&home) {
        return Err(format!("cannot create {}: {e}", home.display()));
    }
    #[cfg(unix)]
    {
        use std::os::unix::fs::PermissionsExt;
        let _ = std::fs::set_permissions(&home, std::fs::Permissions::from_mode(0o700));
    }
    let mut spawned = spawn::spawn(&home, launch.limits())
        .map_err(|e| format!("cannot start the plugin's child process: {e}"))?;
    let (process, stream) = (&mut spawned.process, &spawned.control);
    let _ = stream.set_read_timeout(Some(HANDSHAKE));
    let _ = stream.set_write_timeout(Some(WRITE));
    let hello = Hello {
        protocol: PROTOCOL_VERSION,
        file: launch.file.clone(),
        sandbox: launch
            .known
            .as_ref()
            .map(|k| k.start.sandbox.clone())
            .unwrap_or_else(|| crate::config::Sandbox::default().as_str().into()),
        data_dir: launch.data_dir(),
        init: launch.init.clone(),
        sources: launch.sources.clone(),
    };
    let answer = frame::write(&mut &*stream, &ToChild::Hello(hello))
        .and_then(|()| frame::read(&mut &*stream));
    match answer {
        Ok(ToHost::Manifest { manifest, .. }) => {
            match serde_json::from_str::<Manifest>(&manifest) {
                Ok(m) => Ok((spawned, m)),
                Err(e) => {
                    end(process);
                    Err(format!("not a wf plugin: unreadable manifest: {e}"))
                }
            }
        }
        Ok(ToHost::Refused { reason }) => {
            end(process);
            Err(reason)
        }
        Ok(other) => {
            end(process);
            Err(format!(
                "the plugin's child answered {other:?} to its hello"
            ))
        }
        Err(e) => Err(died(process, "while loading the plugin", &e)),
    }
}

/// Sends the plugin's settings and waits until it is instantiated.
fn begin(
    process: &mut std::process::Child,
    stream: &UnixStream,
    start: &Start,
    host: &HostContext,
) -> Result<Option<String>, String> {
    let answer = frame::write(&mut &*stream, &ToChild::Start(start.clone()))
        .and_then(|()| read_answer(stream, &host.plugin, Some(host)));
    match answer {
        Ok(ToHost::Ready { sandbox }) => {
            let _ = stream.set_read_timeout(None);
            Ok(sandbox)
        }
        Ok(ToHost::Refused { reason }) => {
            end(process);
            Err(reason)
        }
        Ok(other) => {
            end(process);
            Err(format!(
                "the plugin's child answered {other:?} to its start"
            ))
        }
        Err(e) => Err(died(process, "while instantiating the plugin", &e)),
    }
}

/// The child's answer to a hello or start; what the plugin logs (or emits)
/// meanwhile, from its constructor say, goes where its logs go.
fn read_answer(
    stream: &UnixStream,
    label: &str,
    host: Option<&HostContext>,
) -> Result<ToHost, FrameError> {
    loop {
        match frame::read(&mut &*stream)? {
            ToHost::Log {
                level,
                target,
                message,
                ..
            } => match host {
                Some(h) => h.log(
                    level,
                    RStr::from(target.as_str()),
                    RStr::from(message.as_str()),
                ),
                None => {
                    tracing::info!(target: "wf::plugin", plugin = label, target, "{}", crate::secrets::redact(&message))
                }
            },
            ToHost::Emit { event } => {
                if let Some(h) = host {
                    h.emit(RString::from(event));
                }
            }
            other => return Ok(other),
        }
    }
}

fn end(process: &mut std::process::Child) {
    spawn::kill_group(process.id());
    let _ = process.wait();
}

/// Why a child that stopped answering during its start failed.
fn died(process: &mut std::process::Child, when: &str, e: &FrameError) -> String {
    spawn::kill_group(process.id());
    match process.wait() {
        Ok(status) if !matches!(e, FrameError::Io(_)) || status.code().is_none() => format!(
            "its child process exited ({}) {when}",
            spawn::describe_exit(&status, None, None)
        ),
        _ => format!("its child process did not answer {when}: {e}"),
    }
}

/// A plugin running in a child process.
pub struct Supervisor {
    pub name: String,
    launch: Mutex<Launch>,
    host: HostContext,
    child: RwLock<Option<Arc<Child>>>,
    health: Mutex<Health>,
    restarts: AtomicU64,
    crashes_in_a_row: AtomicU32,
    /// Live sources (id -> spec JSON), recreated in a restarted child.
    sources: Mutex<BTreeMap<u64, String>>,
    next_source: AtomicU64,
    stopping: AtomicBool,
    /// What the child's sandbox lets it do, as the child reported it.
    sandbox: Mutex<Option<String>>,
    /// Where its socket is read and written (`io::runtime`).
    rt: tokio::runtime::Handle,
    /// The generation of the newest child (restarts bump it).
    generation: AtomicU64,
    /// One planned start (a resume or a restart with new settings) at a time.
    starting: Mutex<()>,
}

/// A child that loaded a plugin and told its manifest; wf decides next
/// whether to keep it ([`Probe::start`]) or not ([`Probe::stop`]).
pub struct Probe {
    launch: Launch,
    spawned: spawn::Spawned,
}

impl Supervisor {
    /// What the child may do (its sandbox report), once it started.
    pub fn sandbox(&self) -> Option<String> {
        self.sandbox
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .clone()
    }

    pub fn probe(launch: Launch) -> Result<(Probe, Manifest), String> {
        let (spawned, manifest) = handshake(&launch)?;
        Ok((Probe { launch, spawned }, manifest))
    }
}

impl Probe {
    pub fn stop(mut self) {
        end(&mut self.spawned.process);
    }

    /// Instantiates the plugin in the child with its settings, and
    /// supervises it from now on.
    pub fn start(
        self,
        manifest: &Manifest,
        settings: &PluginSettings,
        events: &HostEvents,
    ) -> Result<Arc<Supervisor>, String> {
        let start = Start::from_settings(settings);
        let Probe {
            mut launch,
            mut spawned,
        } = self;
        let known = Known {
            name: manifest.name.clone(),
            start: start.clone(),
        };
        launch.known = Some(known);
        // The sandbox before loading differs from the default: start again
        // with the plugin's own, now that its name is known.
        if start.sandbox != crate::config::Sandbox::default().as_str() {
            end(&mut spawned.process);
            let (again, m) = handshake(&launch)?;
            spawned = again;
            if m.name != manifest.name {
                end(&mut spawned.process);
                return Err(format!(
                    "the file changed while loading: it holds plugin {:?} now",
                    m.name
                ));
            }
        }
        let host = HostContext {
            plugin: manifest.name.as_str().into(),
            events: events.clone(),
        };
        // The child was made with the default bounds (its library's
        // constructors ran before its settings were known): its own now.
        if !spawned.cgroups.set(&launch.limits()) {
            tracing::warn!(plugin = %manifest.name, "cannot set the plugin child's cgroup bounds to its own settings; the defaults stay");
        }
        let sandbox = begin(&mut spawned.process, &spawned.control, &start, &host)?;
        let rt = super::io::runtime();
        let sup = Arc::new_cyclic(|weak: &Weak<Supervisor>| {
            let child = Child::run(spawned, start.memory_mb, 0, weak.clone(), host.clone(), &rt);
            Supervisor {
                name: manifest.name.clone(),
                launch: Mutex::new(launch),
                host,
                child: RwLock::new(child.ok()),
                health: Mutex::new(Health::Running),
                restarts: AtomicU64::new(0),
                crashes_in_a_row: AtomicU32::new(0),
                sources: Mutex::default(),
                next_source: AtomicU64::new(0),
                stopping: AtomicBool::new(false),
                sandbox: Mutex::new(sandbox),
                rt,
                generation: AtomicU64::new(0),
                starting: Mutex::new(()),
            }
        });
        if sup.current().is_none() {
            return Err("cannot read from the plugin's child process".into());
        }
        super::register(&sup);
        Ok(sup)
    }
}

impl Child {
    /// Wraps a started child and starts its reader and writer tasks on
    /// `rt` (wf's runtime: a reply wakes the waiting call on the worker
    /// that read it, with no thread in between).
    fn run(
        spawned: spawn::Spawned,
        memory_mb: Option<u64>,
        generation: u64,
        sup: Weak<Supervisor>,
        host: HostContext,
        rt: &tokio::runtime::Handle,
    ) -> Result<Arc<Child>, String> {
        let (tx, rx) = tokio::sync::mpsc::unbounded_channel();
        let (calls_tx, calls_rx) = tokio::sync::mpsc::unbounded_channel();
        let child = Arc::new(Child {
            pid: spawned.process.id(),
            memory_mb,
            memory_total_mb: spawned.cgroups.memory_total_mb(),
            out_of_memory: AtomicBool::new(false),
            generation,
            out: tx,
            calls: calls_tx,
            pending: Mutex::default(),
            ended: OnceLock::new(),
            stopped_reading: AtomicBool::new(false),
            started: Instant::now(),
        });
        let exited: super::io::OnExit = {
            let (child, host) = (child.clone(), host.clone());
            Box::new(move |status, broken| child.ended(status, broken, &sup, &host))
        };
        super::io::start(child.clone(), spawned, rx, calls_rx, exited, host, rt)?;
        Ok(child)
    }

    /// The child ended (or broke the protocol): reaped by the caller; fails
    /// what was in flight and tells the supervisor.
    fn ended(
        self: &Arc<Self>,
        status: String,
        broken: Option<FrameError>,
        sup: &Weak<Supervisor>,
        host: &HostContext,
    ) {
        let reason = match broken {
            Some(e) => format!(
                "plugin {:?} broke the protocol ({e}) and was killed",
                &*host.plugin
            ),
            None if self.stopped_reading.load(Ordering::Acquire) => format!(
                "plugin {:?} stopped reading its socket for {} s and was killed ({status})",
                &*host.plugin,
                WRITE.as_secs()
            ),
            None => format!("plugin {:?} exited ({status})", &*host.plugin),
        };
        let _ = self.ended.set(reason.clone());
        self.fail_all(&reason);
        if let Some(sup) = sup.upgrade() {
            sup.on_exit(self, reason);
        }
    }
}

impl Supervisor {
    pub(crate) fn current(&self) -> Option<Arc<Child>> {
        self.child
            .read()
            .unwrap_or_else(PoisonError::into_inner)
            .clone()
    }

    pub fn health(&self) -> Health {
        self.health
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .clone()
    }

    fn set_health(&self, h: Health) {
        *self.health.lock().unwrap_or_else(PoisonError::into_inner) = h;
    }

    /// The calls of source `name` in flight that the child has said nothing
    /// of for `STALLED` or longer: `{"call", "running_ms", "silent_ms"}`.
    pub fn stalled_calls(&self, name: &str) -> Vec<Value> {
        let Some(child) = self.current() else {
            return Vec::new();
        };
        let ids: Vec<u64> = self
            .sources
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .iter()
            .filter(|(_, spec)| {
                serde_json::from_str::<Value>(spec)
                    .ok()
                    .is_some_and(|v| v.get("name").and_then(Value::as_str) == Some(name))
            })
            .map(|(id, _)| *id)
            .collect();
        let now = Instant::now();
        let mut out: Vec<(u64, Value)> = child
            .pending()
            .iter()
            .filter_map(|(id, p)| match p {
                Pending::Call {
                    source,
                    since,
                    heard,
                    ..
                } if ids.contains(source) && now.duration_since(*heard) >= STALLED => Some((
                    *id,
                    serde_json::json!({
                        "call": id,
                        "running_ms": now.duration_since(*since).as_millis() as u64,
                        "silent_ms": now.duration_since(*heard).as_millis() as u64,
                    }),
                )),
                _ => None,
            })
            .collect();
        out.sort_by_key(|(id, _)| *id);
        out.into_iter().map(|(_, v)| v).collect()
    }

    /// The memory bound of all the child's processes together (its memory
    /// cgroup), where wf could make one.
    pub fn memory_total_mb(&self) -> Option<u64> {
        self.current().and_then(|c| c.memory_total_mb)
    }

    pub fn pid(&self) -> Option<u32> {
        self.current().map(|c| c.pid)
    }

    pub fn restarts(&self) -> u64 {
        self.restarts.load(Ordering::Relaxed)
    }

    /// The error of a call that finds no child.
    fn unavailable(&self) -> String {
        let why = match self.health() {
            Health::Running => format!("plugin {:?} has no child process", self.name),
            Health::Restarting(why) => format!("{why}; restarting"),
            Health::Failed(why) | Health::Stopped(why) => why,
        };
        error_json(ErrorCode::Internal, why)
    }

    /// `PluginFfi::create_source` in the child; the source's id.
    pub(crate) fn create_source(self: &Arc<Self>, spec: String) -> Result<u64, String> {
        let child = match self.current() {
            Some(c) => c,
            None if matches!(self.health(), Health::Stopped(_)) => self
                .resume()
                .map_err(|e| error_json(ErrorCode::Internal, e))?,
            None => return Err(self.unavailable()),
        };
        let source = self.next_source.fetch_add(1, Ordering::Relaxed) + 1;
        child.create(source, &spec)?;
        self.sources
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .insert(source, spec);
        Ok(source)
    }

    /// One `SourceRequest` on `source`; dropping the future cancels it in the child.
    pub(crate) async fn call(
        &self,
        source: u64,
        request: String,
        ctx: CallContextBox,
    ) -> CallReply {
        let child = self.current().ok_or_else(|| self.unavailable())?;
        let generation = child.generation;
        let info = super::epochs::outgoing(ctx.info().into_string(), generation)?;
        let op = (generation > 0)
            .then(|| wf_plugin_api::SourceRequest::op_name(&request))
            .flatten();
        let id = next_id();
        let (tx, rx) = oneshot::channel();
        let now = Instant::now();
        child.pending().insert(
            id,
            Pending::Call {
                tx,
                ctx: Arc::new(ctx),
                span: tracing::Span::current(),
                source,
                since: now,
                heard: now,
            },
        );
        let mut guard = CancelOnDrop {
            child: &child,
            id,
            done: false,
        };
        child.send(&ToChild::Request {
            id,
            source,
            request,
            info,
        })?;
        let reply = rx.await;
        guard.done = true;
        match reply {
            Ok(Ok(text)) => Ok(super::epochs::incoming(op.as_deref(), text, generation)),
            Ok(Err(e)) => Err(e),
            Err(_) => Err(error_json(
                ErrorCode::Internal,
                child
                    .ended
                    .get()
                    .cloned()
                    .unwrap_or_else(|| format!("plugin {:?} dropped the call", self.name)),
            )),
        }
    }

    pub(crate) async fn shutdown_source(&self, source: u64) {
        let Some(child) = self.current() else { return };
        let id = next_id();
        let (tx, rx) = oneshot::channel();
        child.pending().insert(id, Pending::Done(tx));
        if child.send(&ToChild::Shutdown { id, source }).is_ok() {
            let _ = rx.await;
        } else {
            child.pending().remove(&id);
        }
    }

    pub(crate) fn forget_source(&self, source: u64) {
        self.sources
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .remove(&source);
        if let Some(child) = self.current() {
            let _ = child.send(&ToChild::Forget { source });
        }
    }

    /// Stops the child for good (wf's exit): no restart.
    pub fn stop(&self) {
        self.stopping.store(true, Ordering::Release);
        if let Some(c) = self.current() {
            spawn::kill_group(c.pid);
        }
    }

    /// The settings its child runs with (sandbox and limits).
    pub fn start_settings(&self) -> Start {
        self.launch
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .known
            .as_ref()
            .map(|k| k.start.clone())
            .unwrap_or_default()
    }

    /// Stops the child without restarting it (a reload left the plugin no
    /// source); its reader task reaps it. A source created later starts a
    /// new child (`resume`).
    pub fn park(&self, why: &str) {
        let _one = self.starting.lock().unwrap_or_else(PoisonError::into_inner);
        self.stopping.store(true, Ordering::Release);
        self.set_health(Health::Stopped(why.to_string()));
        if let Some(c) = self.current() {
            spawn::kill_group(c.pid);
        }
    }

    /// Starts a new child for a parked plugin.
    fn resume(self: &Arc<Self>) -> Result<Arc<Child>, String> {
        let _one = self.starting.lock().unwrap_or_else(PoisonError::into_inner);
        if let Some(c) = self.current() {
            return Ok(c);
        }
        self.stopping.store(false, Ordering::Release);
        let generation = self.generation.load(Ordering::Relaxed) + 1;
        match self.respawn(generation) {
            Ok(child) => {
                self.install(child.clone());
                tracing::info!(plugin = %self.name, pid = child.pid, generation, "plugin child started again for a new source");
                Ok(child)
            }
            Err(e) => {
                let why = format!("plugin {:?} could not be started again: {e}", self.name);
                self.stopping.store(true, Ordering::Release);
                self.set_health(Health::Stopped(why.clone()));
                Err(why)
            }
        }
    }

    /// Replaces the child with one started with new settings (a reload
    /// changed `[plugins.<name>]`): the old one is killed (its calls in
    /// flight fail), the sources are recreated in the new one, with a bumped
    /// epoch, and rediscovered. A parked plugin only keeps the settings for
    /// its next start.
    pub fn restart_with(
        self: &Arc<Self>,
        start: Start,
        sources: Vec<super::protocol::SandboxSource>,
    ) -> Result<(), String> {
        let _one = self.starting.lock().unwrap_or_else(PoisonError::into_inner);
        {
            let mut launch = self.launch.lock().unwrap_or_else(PoisonError::into_inner);
            match launch.known.as_mut() {
                Some(k) => k.start = start,
                None => {
                    launch.known = Some(Known {
                        name: self.name.clone(),
                        start,
                    })
                }
            }
            launch.sources = sources;
        }
        if matches!(self.health(), Health::Stopped(_)) {
            return Ok(());
        }
        // Not current any more: its exit is no crash to restart from.
        let old = self
            .child
            .write()
            .unwrap_or_else(PoisonError::into_inner)
            .take();
        if let Some(old) = &old {
            spawn::kill_group(old.pid);
        }
        self.stopping.store(false, Ordering::Release);
        self.set_health(Health::Restarting(format!(
            "plugin {:?} is restarting with new settings",
            self.name
        )));
        let generation = self.generation.load(Ordering::Relaxed) + 1;
        match self.respawn(generation) {
            Ok(child) => {
                let pid = child.pid;
                self.install(child);
                tracing::info!(plugin = %self.name, pid, generation, "plugin child restarted with new settings");
                self.announce_sources();
                Ok(())
            }
            Err(e) => {
                let why = format!(
                    "plugin {:?} could not be restarted with its new settings: {e}",
                    self.name
                );
                self.set_health(Health::Failed(why.clone()));
                Err(why)
            }
        }
    }

    fn install(&self, child: Arc<Child>) {
        self.generation.store(child.generation, Ordering::Relaxed);
        *self.child.write().unwrap_or_else(PoisonError::into_inner) = Some(child);
        self.set_health(Health::Running);
    }

    fn on_exit(self: Arc<Self>, child: &Arc<Child>, reason: String) {
        {
            let mut cur = self.child.write().unwrap_or_else(PoisonError::into_inner);
            if !cur.as_ref().is_some_and(|c| Arc::ptr_eq(c, child)) {
                return;
            }
            *cur = None;
        }
        if self.stopping.load(Ordering::Acquire) {
            return;
        }
        let in_a_row = if child.started.elapsed() >= HEALTHY {
            1
        } else {
            self.crashes_in_a_row.load(Ordering::Relaxed) + 1
        };
        self.crashes_in_a_row.store(in_a_row, Ordering::Relaxed);
        if in_a_row > MAX_CRASHES_IN_A_ROW {
            let why = format!(
                "{reason}; it crashed {in_a_row} times in a row, so it is not restarted any more (fix the plugin, then restart wf)"
            );
            tracing::error!(plugin = %self.name, "{why}");
            self.set_health(Health::Failed(why));
            return;
        }
        tracing::warn!(plugin = %self.name, "{reason}; restarting in {} ms", backoff(in_a_row).as_millis());
        self.set_health(Health::Restarting(reason.clone()));
        let generation = child.generation + 1;
        let sup = self.clone();
        let _ = std::thread::Builder::new()
            .name(format!("wf-plugin-restart-{}", self.name))
            .spawn(move || sup.restart_loop(in_a_row, generation, reason));
    }

    fn restart_loop(self: Arc<Self>, mut attempt: u32, generation: u64, mut reason: String) {
        loop {
            std::thread::sleep(backoff(attempt));
            // A reload may have parked it or started another child meanwhile.
            let _one = self.starting.lock().unwrap_or_else(PoisonError::into_inner);
            if self.stopping.load(Ordering::Acquire) || self.current().is_some() {
                return;
            }
            match self.respawn(generation) {
                Ok(child) => {
                    let pid = child.pid;
                    self.install(child);
                    self.restarts.fetch_add(1, Ordering::Relaxed);
                    tracing::info!(plugin = %self.name, pid, generation, "plugin child restarted");
                    self.announce_sources();
                    return;
                }
                Err(e) => {
                    attempt += 1;
                    reason = format!("{reason}; restart failed: {e}");
                    if attempt > MAX_CRASHES_IN_A_ROW {
                        tracing::error!(plugin = %self.name, "{reason}; not restarted any more");
                        self.set_health(Health::Failed(reason));
                        return;
                    }
                    tracing::warn!(plugin = %self.name, "restart failed: {e}");
                }
            }
        }
    }

    fn respawn(self: &Arc<Self>, generation: u64) -> Result<Arc<Child>, String> {
        let launch = self
            .launch
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .clone();
        let start = launch
            .known
            .as_ref()
            .map(|k| k.start.clone())
            .unwrap_or_default();
        let (mut spawned, manifest) = handshake(&launch)?;
        if manifest.name != self.name {
            end(&mut spawned.process);
            return Err(format!(
                "the plugin file now holds plugin {:?}",
                manifest.name
            ));
        }
        let sandbox = begin(&mut spawned.process, &spawned.control, &start, &self.host)?;
        *self.sandbox.lock().unwrap_or_else(PoisonError::into_inner) = sandbox;
        let child = Child::run(
            spawned,
            start.memory_mb,
            generation,
            Arc::downgrade(self),
            self.host.clone(),
            &self.rt,
        )?;
        let sources: Vec<(u64, String)> = self
            .sources
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .iter()
            .map(|(k, v)| (*k, v.clone()))
            .collect();
        for (id, spec) in sources {
            if let Err(e) = child.create(id, &spec) {
                tracing::warn!(plugin = %self.name, "a source could not be recreated after the restart: {}", PluginError::from_json(&e));
            }
        }
        Ok(child)
    }

    /// Asks wf to rediscover the recreated sources.
    fn announce_sources(&self) {
        let specs: Vec<String> = self
            .sources
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .values()
            .cloned()
            .collect();
        for spec in specs {
            let Some(name) = serde_json::from_str::<Value>(&spec)
                .ok()
                .and_then(|v| v.get("name").and_then(Value::as_str).map(str::to_string))
            else {
                continue;
            };
            let event = Event::CapabilitiesChanged { source: name };
            if let Ok(text) = serde_json::to_string(&event) {
                self.host.emit(RString::from(text));
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn backoff_doubles_to_four_seconds() {
        let ms: Vec<u128> = (1..=7).map(|n| backoff(n).as_millis()).collect();
        assert_eq!(ms, [250, 500, 1000, 2000, 4000, 4000, 4000]);
    }

    #[test]
    fn a_childs_home_and_data_dir_live_under_the_state_dir() {
        let launch = Launch {
            file: PathBuf::from("/p/libx.so"),
            state_dir: Some(PathBuf::from("/s")),
            init: String::new(),
            known: None,
            sources: Vec::new(),
        };
        assert_eq!(launch.home(), PathBuf::from("/s/plugin-home/libx"));
        assert_eq!(launch.data_dir(), PathBuf::from("/s/sources"));
        // Bounded before the plugin's own settings are known.
        assert_eq!(
            launch.limits().memory_mb,
            Some(crate::plugins::process::limits::DEFAULT_MEMORY_MB)
        );
    }
}
