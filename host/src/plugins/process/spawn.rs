//! Starting a plugin's child: `wf-plugin-host` beside `wf`, in a process
//! group of its own, with a cleared environment, no inherited descriptor but
//! its ends of two socketpairs (fd 3: control, fd 4: the call lane), the
//! parent-death signal set, and the plugin's rlimits.
//!
//! Every child is forked by one long-lived thread: the parent-death signal
//! fires when the *thread* that forked the child ends, so a child forked by
//! a short-lived thread would die with it.

use std::io;
use std::os::fd::AsRawFd;
use std::os::unix::net::UnixStream;
use std::os::unix::process::CommandExt;
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::sync::mpsc;
use std::sync::{Mutex, OnceLock};

/// The fd the child finds its control socket on.
pub const CHILD_FD: i32 = 3;

/// The fd the child finds its call lane on: requests and cancels in,
/// replies, progress and the calls' logs out (`wf_plugin_api::lane`).
pub const CALL_FD: i32 = 4;

/// The child's `PATH`: a fixed one, never wf's (programs a plugin starts,
/// like the mcp plugin's npm servers, are found there).
pub const CHILD_PATH: &str = "/usr/local/bin:/usr/bin:/bin";

/// The child program's name, beside `wf`.
pub const CHILD_BIN: &str = "wf-plugin-host";

/// Limits applied before the child program runs (when known: at restarts).
#[derive(Debug, Clone, Copy, Default)]
pub struct Limits {
    pub memory_mb: Option<u64>,
    pub cpu_seconds: Option<u64>,
}

/// Where `wf-plugin-host` is: beside the running executable (`WF_PLUGIN_HOST`
/// overrides it, for tests and unusual layouts).
pub fn child_program() -> PathBuf {
    if let Some(p) = std::env::var_os("WF_PLUGIN_HOST") {
        return PathBuf::from(p);
    }
    let exe = std::env::current_exe().unwrap_or_default();
    let dir = exe.parent().map(Path::to_path_buf).unwrap_or_default();
    // `cargo test` runs from target/debug/deps: the binary is one folder up.
    let beside = dir.join(CHILD_BIN);
    if !beside.exists()
        && let Some(up) = dir.parent()
        && up.join(CHILD_BIN).exists()
    {
        return up.join(CHILD_BIN);
    }
    beside
}

type Job = Box<dyn FnOnce() + Send>;

fn spawner() -> &'static Mutex<mpsc::Sender<Job>> {
    static SPAWNER: OnceLock<Mutex<mpsc::Sender<Job>>> = OnceLock::new();
    SPAWNER.get_or_init(|| {
        let (tx, rx) = mpsc::channel::<Job>();
        std::thread::Builder::new()
            .name("wf-plugin-spawner".into())
            .spawn(move || {
                for job in rx {
                    job();
                }
                // The sender lives in a static: this thread lives as long as wf.
            })
            .expect("cannot start the plugin spawner thread");
        Mutex::new(tx)
    })
}

/// A started child and wf's ends of its two sockets.
pub struct Spawned {
    pub process: Child,
    /// Fd 3's peer: the handshake, source creation, logs and events.
    pub control: UnixStream,
    /// Fd 4's peer: the call lane.
    pub calls: UnixStream,
}

/// Starts a child; returns it and wf's ends of its sockets.
pub fn spawn(home: &Path, limits: Limits) -> io::Result<Spawned> {
    let program = child_program();
    let home = home.to_path_buf();
    let (tx, rx) = mpsc::channel();
    let job: Job = Box::new(move || {
        let _ = tx.send(spawn_here(&program, &home, limits));
    });
    spawner()
        .lock()
        .unwrap_or_else(std::sync::PoisonError::into_inner)
        .send(job)
        .map_err(|_| io::Error::other("the plugin spawner thread is gone"))?;
    rx.recv()
        .map_err(|_| io::Error::other("the plugin spawner thread is gone"))?
}

fn spawn_here(program: &Path, home: &Path, limits: Limits) -> io::Result<Spawned> {
    // Every end is close-on-exec; the child's are dup'ed onto fds 3 and 4
    // (which clears the flag) after the fork.
    let (ours, theirs) = UnixStream::pair()?;
    let (lane, lane_theirs) = UnixStream::pair()?;
    let theirs_fd = theirs.as_raw_fd();
    let lane_fd = lane_theirs.as_raw_fd();
    let parent = std::process::id() as libc::pid_t;
    // The plugin's fd 1 is wf's stderr: whatever it prints lands in the log,
    // never on wf's stdout (the MCP stdio channel).
    let stdout = Stdio::from(std::os::fd::AsFd::as_fd(&std::io::stderr()).try_clone_to_owned()?);
    let mut cmd = Command::new(program);
    cmd.env_clear()
        .env("PATH", CHILD_PATH)
        .env("HOME", home)
        .current_dir(home)
        .stdin(Stdio::null())
        .stdout(stdout)
        .stderr(Stdio::inherit())
        .process_group(0);
    let data = limits.memory_mb.map(|mb| mb.saturating_mul(1 << 20));
    let cpu = limits.cpu_seconds;
    // SAFETY: only async-signal-safe calls (prctl, getppid, dup2, fcntl,
    // setrlimit, syscall, _exit) between fork and exec.
    unsafe {
        cmd.pre_exec(move || {
            if libc::prctl(libc::PR_SET_PDEATHSIG, libc::SIGKILL as libc::c_ulong) != 0 {
                return Err(io::Error::last_os_error());
            }
            // wf died between the fork and prctl: nobody would kill us.
            if libc::getppid() != parent {
                libc::_exit(1);
            }
            // Copies above both targets first, so that neither dup2 below
            // overwrites the other's source.
            let control = libc::fcntl(theirs_fd, libc::F_DUPFD_CLOEXEC, 10);
            let calls = libc::fcntl(lane_fd, libc::F_DUPFD_CLOEXEC, 10);
            if control < 0
                || calls < 0
                || libc::dup2(control, CHILD_FD) < 0
                || libc::dup2(calls, CALL_FD) < 0
            {
                return Err(io::Error::last_os_error());
            }
            apply_limits(data, cpu)?;
            // Nothing else crosses exec (CLOSE_RANGE_CLOEXEC, Linux 5.11;
            // the child closes strays itself on older kernels).
            libc::syscall(libc::SYS_close_range, 5u32, u32::MAX, 4u32);
            Ok(())
        });
    }
    let child = cmd.spawn().map_err(|e| {
        io::Error::new(e.kind(), format!("cannot start {}: {e}", program.display()))
    })?;
    drop(theirs);
    drop(lane_theirs);
    Ok(Spawned {
        process: child,
        control: ours,
        calls: lane,
    })
}

/// Sets RLIMIT_DATA and RLIMIT_CPU (soft and hard: the plugin cannot raise
/// them; the CPU hard limit one second later turns SIGXCPU into SIGKILL).
pub fn apply_limits(data_bytes: Option<u64>, cpu_seconds: Option<u64>) -> io::Result<()> {
    if let Some(bytes) = data_bytes {
        let r = libc::rlimit {
            rlim_cur: bytes as libc::rlim_t,
            rlim_max: bytes as libc::rlim_t,
        };
        // SAFETY: a plain syscall on a stack value.
        if unsafe { libc::setrlimit(libc::RLIMIT_DATA, &r) } != 0 {
            return Err(io::Error::last_os_error());
        }
    }
    if let Some(s) = cpu_seconds {
        let r = libc::rlimit {
            rlim_cur: s as libc::rlim_t,
            rlim_max: s.saturating_add(1) as libc::rlim_t,
        };
        // SAFETY: as above.
        if unsafe { libc::setrlimit(libc::RLIMIT_CPU, &r) } != 0 {
            return Err(io::Error::last_os_error());
        }
    }
    Ok(())
}

/// Kills a child's whole process group (it and whatever it started).
pub fn kill_group(pid: u32) {
    // SAFETY: plain syscalls; a group that is gone answers ESRCH.
    unsafe {
        libc::kill(-(pid as libc::pid_t), libc::SIGKILL);
        libc::kill(pid as libc::pid_t, libc::SIGKILL);
    }
}

/// How a child ended, for humans: `signal 11 (SIGSEGV)` or `status 0`.
pub fn describe_exit(status: &std::process::ExitStatus) -> String {
    use std::os::unix::process::ExitStatusExt;
    if let Some(sig) = status.signal() {
        let name = match sig {
            libc::SIGSEGV => " SIGSEGV",
            libc::SIGABRT => " SIGABRT",
            libc::SIGKILL => " SIGKILL",
            libc::SIGXCPU => " SIGXCPU",
            libc::SIGBUS => " SIGBUS",
            libc::SIGTERM => " SIGTERM",
            libc::SIGILL => " SIGILL",
            _ => "",
        };
        format!("signal {sig}{name}")
    } else {
        format!("status {}", status.code().unwrap_or(-1))
    }
}
