//! One running child process as the host holds it: the calls it has in
//! flight, the frames queued for it, what it sends back (`dispatch`), and
//! the JSON error a call gets when the child cannot answer. The supervisor
//! starts and restarts children; `io` moves their frames.

use std::collections::HashMap;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::{Arc, Mutex, OnceLock, PoisonError};
use std::time::{Duration, Instant};

use abi_stable::std_types::{ROption, RStr, RString};
use tokio::sync::oneshot;
use wf_plugin_api::ffi::{CallContextBox, HostContextFfi};
use wf_plugin_api::{ErrorCode, PluginError};

use super::protocol::{ToChild, ToHost};
use crate::plugins::host_context::HostContext;

/// How long creating a source may take in the child.
const CREATE: Duration = Duration::from_secs(30);
/// A write to a child that takes longer means it is stuck: it is killed.
pub(super) const WRITE: Duration = Duration::from_secs(5);

pub(super) type CallReply = Result<String, String>;

pub(super) enum Pending {
    Call {
        tx: oneshot::Sender<CallReply>,
        ctx: Arc<CallContextBox>,
        /// The call's span: what the plugin logs during the call is logged in it.
        span: tracing::Span,
        /// Its source, when it started, and when the child last said
        /// anything of it (progress, a log line): a call silent for
        /// `STALLED` is reported (`stalled_calls`).
        source: u64,
        since: Instant,
        heard: Instant,
    },
    Create(std::sync::mpsc::SyncSender<Result<(), String>>),
    Done(oneshot::Sender<()>),
}

pub(super) fn next_id() -> u64 {
    static NEXT: AtomicU64 = AtomicU64::new(1);
    NEXT.fetch_add(1, Ordering::Relaxed)
}

/// A `PluginError` JSON naming the plugin.
pub(crate) fn error_json(code: ErrorCode, message: String) -> String {
    serde_json::to_string(&PluginError::new(code, message)).unwrap_or_default()
}

/// One running child process.
pub(crate) struct Child {
    pub pid: u32,
    /// Its memory limit, for the error of an allocation refused under it.
    pub memory_mb: Option<u64>,
    /// The bound of its memory cgroup (all its processes together), MiB;
    /// None where wf may make none.
    pub memory_total_mb: Option<u64>,
    /// The kernel killed one of its processes at that bound, and wf ended
    /// the child for it.
    pub(super) out_of_memory: AtomicBool,
    /// Restarts before this child (0: the first).
    pub generation: u64,
    /// Frames for the child's control socket: its writer task drains them (`io`).
    pub(super) out: tokio::sync::mpsc::UnboundedSender<Vec<u8>>,
    /// Requests and cancels, for the call lane's writer task.
    pub(super) calls: tokio::sync::mpsc::UnboundedSender<Vec<u8>>,
    pub(super) pending: Mutex<HashMap<u64, Pending>>,
    /// Why it ended, once it did.
    pub(super) ended: OnceLock<String>,
    /// It took no frame for [`WRITE`] and was killed for it.
    pub(super) stopped_reading: AtomicBool,
    pub(super) started: Instant,
}

impl Child {
    /// Whether it ended (and was reaped).
    pub(super) fn has_ended(&self) -> bool {
        self.ended.get().is_some()
    }

    pub(super) fn pending(&self) -> std::sync::MutexGuard<'_, HashMap<u64, Pending>> {
        self.pending.lock().unwrap_or_else(PoisonError::into_inner)
    }

    /// Queues one frame for the writer task; a child that does not take it
    /// in time is killed (its reader then fails what it had in flight).
    pub fn send(&self, msg: &ToChild) -> Result<(), String> {
        let bytes = super::wire::encode_to_child(msg).map_err(|e| e.to_string())?;
        let queue = match msg {
            ToChild::Request { .. } | ToChild::Cancel { .. } => &self.calls,
            _ => &self.out,
        };
        queue
            .send(bytes)
            .map_err(|_| "cannot write to the plugin's child: it is gone".to_string())
    }

    pub(super) fn create(&self, source: u64, spec: &str) -> Result<(), String> {
        let id = next_id();
        let (tx, rx) = std::sync::mpsc::sync_channel(1);
        self.pending().insert(id, Pending::Create(tx));
        if let Err(e) = self.send(&ToChild::Create {
            id,
            source,
            spec: spec.to_string(),
        }) {
            self.pending().remove(&id);
            return Err(error_json(ErrorCode::Internal, e));
        }
        // Off the worker: its other tasks (the child's reader among them) go on.
        match crate::blocking::off_worker(|| rx.recv_timeout(CREATE)) {
            Ok(r) => r,
            Err(_) => {
                self.pending().remove(&id);
                Err(error_json(
                    ErrorCode::Timeout,
                    format!(
                        "the plugin's child did not create the source within {} s",
                        CREATE.as_secs()
                    ),
                ))
            }
        }
    }

    pub(super) fn dispatch(&self, msg: ToHost, host: &HostContext) {
        match msg {
            ToHost::Reply { id, ok, err } => {
                if let Some(Pending::Call { tx, .. }) = self.pending().remove(&id) {
                    let _ = tx.send(match ok {
                        Some(ok) => Ok(ok),
                        None => Err(err.unwrap_or_default()),
                    });
                }
            }
            ToHost::Progress {
                id,
                progress,
                total,
                message,
            } => {
                let ctx = match self.pending().get_mut(&id) {
                    Some(Pending::Call { ctx, heard, .. }) => {
                        *heard = Instant::now();
                        ctx.clone()
                    }
                    _ => return,
                };
                ctx.progress(
                    progress,
                    ROption::from(total),
                    ROption::from(message.map(RString::from)),
                );
            }
            ToHost::Created { id, err } => {
                if let Some(Pending::Create(tx)) = self.pending().remove(&id) {
                    let _ = tx.send(err.map_or(Ok(()), Err));
                }
            }
            ToHost::Done { id } => {
                if let Some(Pending::Done(tx)) = self.pending().remove(&id) {
                    let _ = tx.send(());
                }
            }
            ToHost::Log {
                level,
                target,
                message,
                call,
            } => {
                let span = call.and_then(|id| match self.pending().get_mut(&id) {
                    Some(Pending::Call { span, heard, .. }) => {
                        *heard = Instant::now();
                        Some(span.clone())
                    }
                    _ => None,
                });
                let log = || {
                    host.log(
                        level,
                        RStr::from(target.as_str()),
                        RStr::from(message.as_str()),
                    )
                };
                match span {
                    Some(span) => span.in_scope(log),
                    None => log(),
                }
            }
            ToHost::Emit { event } => host.emit(RString::from(event)),
            other => {
                tracing::debug!(plugin = %host.plugin, "unexpected message from a plugin child: {other:?}")
            }
        }
    }

    /// Fails everything in flight with `reason`.
    pub(super) fn fail_all(&self, reason: &str) {
        let pending: Vec<Pending> = self.pending().drain().map(|(_, p)| p).collect();
        for p in pending {
            match p {
                Pending::Call { tx, .. } => {
                    let _ = tx.send(Err(error_json(ErrorCode::Internal, reason.to_string())));
                }
                Pending::Create(tx) => {
                    let _ = tx.send(Err(error_json(ErrorCode::Internal, reason.to_string())));
                }
                Pending::Done(tx) => {
                    let _ = tx.send(());
                }
            }
        }
    }
}

/// Cancels a call in the child when the host lets go of it first.
pub(super) struct CancelOnDrop<'a> {
    pub(super) child: &'a Child,
    pub(super) id: u64,
    pub(super) done: bool,
}

impl Drop for CancelOnDrop<'_> {
    fn drop(&mut self) {
        if !self.done && self.child.pending().remove(&self.id).is_some() {
            let _ = self.child.send(&ToChild::Cancel { id: self.id });
        }
    }
}
