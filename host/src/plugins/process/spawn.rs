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

use super::cgroup::ChildCgroups;
use super::limits::Limits;

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

/// The niceness every child runs at (and cannot lower: RLIMIT_NICE): a
/// spinning plugin gets the CPU wf leaves over, not wf's share.
pub const CHILD_NICE: i32 = 10;

/// The exit status of a child whose allocation failed under its memory
/// limit (its SIGABRT handler saw `ENOMEM`): wf names the limit.
pub const EXIT_OUT_OF_MEMORY: i32 = 87;

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
    /// Its own cgroups, those that could be made (removed once it is reaped).
    pub cgroups: ChildCgroups,
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
    #[cfg(target_os = "linux")]
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
    let cgroups = ChildCgroups::create(&limits);
    let join = cgroups.procs.clone();
    // SAFETY: only async-signal-safe calls (prctl, getppid, dup2, fcntl,
    // setrlimit, setpriority, open, write, close, syscall, _exit) between
    // fork and exec.
    unsafe {
        cmd.pre_exec(move || {
            // Elsewhere no parent-death signal exists: the child ends when
            // its sockets to wf hang up.
            #[cfg(target_os = "linux")]
            {
                if libc::prctl(libc::PR_SET_PDEATHSIG, libc::SIGKILL as libc::c_ulong) != 0 {
                    return Err(io::Error::last_os_error());
                }
                // wf died between the fork and prctl: nobody would kill us.
                if libc::getppid() != parent {
                    libc::_exit(1);
                }
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
            apply_limits(data, cpu, None)?;
            // Into its cgroups before it runs anything: every process and
            // thread it starts, and their memory, counts there.
            for procs in &join {
                let fd = libc::open(procs.as_ptr(), libc::O_WRONLY | libc::O_CLOEXEC);
                if fd < 0 || libc::write(fd, b"0\n".as_ptr().cast(), 2) != 2 {
                    return Err(io::Error::last_os_error());
                }
                libc::close(fd);
            }
            if libc::setpriority(libc::PRIO_PROCESS, 0, CHILD_NICE) != 0 {
                return Err(io::Error::last_os_error());
            }
            #[cfg(target_os = "linux")]
            {
                // At most nice 10 back (never raised: wf may lack the power to).
                let mut nice = libc::rlimit {
                    rlim_cur: 0,
                    rlim_max: 0,
                };
                if libc::getrlimit(libc::RLIMIT_NICE, &mut nice) != 0 {
                    return Err(io::Error::last_os_error());
                }
                let ceiling = ((20 - CHILD_NICE) as libc::rlim_t).min(nice.rlim_max);
                nice.rlim_cur = ceiling;
                nice.rlim_max = ceiling;
                if libc::setrlimit(libc::RLIMIT_NICE, &nice) != 0 {
                    return Err(io::Error::last_os_error());
                }
                // Nothing else crosses exec (CLOSE_RANGE_CLOEXEC, Linux 5.11;
                // the child closes strays itself on older kernels and
                // elsewhere).
                libc::syscall(libc::SYS_close_range, 5u32, u32::MAX, 4u32);
            }
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
        cgroups,
        control: ours,
        calls: lane,
    })
}

/// Sets RLIMIT_DATA, RLIMIT_CPU and (in a user namespace of the child's
/// own, where it counts only the child's processes) RLIMIT_NPROC, soft and
/// hard: the plugin cannot raise them; the CPU hard limit one second later
/// turns SIGXCPU into SIGKILL.
pub fn apply_limits(
    data_bytes: Option<u64>,
    cpu_seconds: Option<u64>,
    processes: Option<u64>,
) -> io::Result<()> {
    if let Some(n) = processes {
        let r = libc::rlimit {
            rlim_cur: n as libc::rlim_t,
            rlim_max: n as libc::rlim_t,
        };
        // SAFETY: a plain syscall on a stack value.
        if unsafe { libc::setrlimit(libc::RLIMIT_NPROC, &r) } != 0 {
            return Err(io::Error::last_os_error());
        }
    }
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

/// Waits up to `within` for child `pid` to exit, without reaping it (its
/// `Child` does that after the group is killed).
pub fn await_exit(pid: u32, within: std::time::Duration) {
    let until = std::time::Instant::now() + within;
    while std::time::Instant::now() < until {
        // SAFETY: waitid with WNOWAIT only looks; a zeroed siginfo is valid.
        let done = unsafe {
            let mut info: libc::siginfo_t = std::mem::zeroed();
            let r = libc::waitid(
                libc::P_PID,
                pid as libc::id_t,
                &mut info,
                libc::WEXITED | libc::WNOHANG | libc::WNOWAIT,
            );
            r != 0 || info.si_pid() != 0
        };
        if done {
            return;
        }
        std::thread::sleep(std::time::Duration::from_millis(5));
    }
}

/// How a child ended, for humans: `signal 11 (SIGSEGV)` or `status 0`;
/// an allocation refused under its memory limit names the limit, and so
/// does a kill under its memory cgroup's bound (`oom_total_mb`: the bound,
/// when the kernel killed one of its processes there).
pub fn describe_exit(
    status: &std::process::ExitStatus,
    memory_mb: Option<u64>,
    oom_total_mb: Option<u64>,
) -> String {
    use std::os::unix::process::ExitStatusExt;
    if let (Some(total), Some(mb)) = (oom_total_mb, memory_mb) {
        return format!(
            "out of memory: its processes together reached their bound of {total} MiB (memory cgroup: memory_mb = {mb} + {} MiB) and the kernel killed one; raise [plugins.<name>] memory_mb if the plugin needs more",
            super::cgroup::MEMORY_HEADROOM_MB
        );
    }
    if status.code() == Some(EXIT_OUT_OF_MEMORY)
        && let Some(mb) = memory_mb
    {
        return format!(
            "out of memory: an allocation failed at its memory limit, memory_mb = {mb} (RLIMIT_DATA); raise [plugins.<name>] memory_mb if the plugin needs more"
        );
    }
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
