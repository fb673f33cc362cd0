//! Nothing a plugin starts outlives its child (docs/operator-manual.md,
//! "Plugin isolation"): `wf-plugin-host` puts the plugin in a PID namespace
//! of its own before anything else runs, so that `setsid`, double forks and
//! re-parenting lead nowhere. The kernel kills every process of a PID
//! namespace when its init ends.
//!
//! Three processes, each forked before any thread exists:
//!
//! ```text
//! wf ── wf-plugin-host (outer: wf's child, the pid wf knows; waits)
//!         └── init (pid 1 of the namespace: reaps orphans)
//!               └── the plugin host (pid 2: loads and serves the plugin)
//! ```
//!
//! The parent-death signal chains them: wf dies (even by `kill -9`) → the
//! outer is killed (wf set its signal) → init is killed → the kernel kills
//! the namespace. wf killing the outer (a restart, a reload, wf's exit) ends
//! the same way. Init is not the plugin host because a reaper that waits for
//! any child would steal the exit statuses of the plugin's own children; the
//! host cannot stay outside the namespace because a process whose children
//! go to another PID namespace cannot start threads.
//!
//! The outer ends as the plugin host ended (same status or signal), so wf's
//! supervision reads it as before.
//!
//! PID namespaces are Linux's: elsewhere [`enter`] refuses, and the child
//! goes on uncontained and says so in its sandbox report.

#[cfg(target_os = "linux")]
use std::io;

/// What [`enter`] did: the line the sandbox report carries.
pub struct Contained {
    pub line: String,
    /// A user namespace was needed (wf is not privileged): RLIMIT_NPROC
    /// then counts only this plugin's processes.
    pub own_user_namespace: bool,
}

#[cfg(target_os = "linux")]
/// Puts this process's future work in a PID namespace and returns in the
/// plugin host (pid 2), or `Err` with why (then nothing was forked: the
/// caller goes on uncontained and says so). Never returns in the outer or
/// in init: they exit as the plugin host did.
///
/// Must run before any thread is started (fork copies only the caller).
pub fn enter(fds: &[i32]) -> Result<Contained, String> {
    let own_user_namespace = unshare_pid()?;
    // Outer ↔ init: init's end hangs up when the outer is gone (the
    // parent-death signal's race), and init sends the host's wait status.
    let mut pair = [0i32; 2];
    // SAFETY: a plain syscall filling a local array.
    if unsafe {
        libc::socketpair(
            libc::AF_UNIX,
            libc::SOCK_STREAM | libc::SOCK_CLOEXEC,
            0,
            pair.as_mut_ptr(),
        )
    } != 0
    {
        return Err(format!("socketpair: {}", io::Error::last_os_error()));
    }
    let (outer_end, init_end) = (pair[0], pair[1]);
    // SAFETY: single-threaded (the caller's contract); the child runs only
    // what follows in `init`, the parent only `outer`.
    match unsafe { libc::fork() } {
        -1 => Err(format!("fork: {}", io::Error::last_os_error())),
        0 => {
            // SAFETY: closing our copy of the outer's end.
            unsafe { libc::close(outer_end) };
            init(init_end, fds);
            Ok(Contained {
                line: "processes: own PID namespace (nothing it starts outlives it)".into(),
                own_user_namespace,
            })
        }
        pid => {
            // SAFETY: closing init's end here.
            unsafe { libc::close(init_end) };
            outer(pid, outer_end, fds)
        }
    }
}

#[cfg(target_os = "linux")]
/// `unshare(CLONE_NEWPID)`; without the privilege for it, in a new user
/// namespace that maps wf's own uid and gid (true then).
fn unshare_pid() -> Result<bool, String> {
    // SAFETY: plain syscalls.
    if unsafe { libc::unshare(libc::CLONE_NEWPID) } == 0 {
        return Ok(false);
    }
    let first = io::Error::last_os_error();
    // SAFETY: getuid/getgid cannot fail.
    let (uid, gid) = unsafe { (libc::getuid(), libc::getgid()) };
    // SAFETY: a plain syscall.
    if unsafe { libc::unshare(libc::CLONE_NEWUSER | libc::CLONE_NEWPID) } != 0 {
        return Err(format!(
            "no PID namespace ({first}; with a user namespace: {})",
            io::Error::last_os_error()
        ));
    }
    let write = |path: &str, text: String| {
        std::fs::write(path, text).map_err(|e| format!("no PID namespace: {path}: {e}"))
    };
    write("/proc/self/setgroups", "deny".into())?;
    write("/proc/self/uid_map", format!("{uid} {uid} 1"))?;
    write("/proc/self/gid_map", format!("{gid} {gid} 1"))?;
    Ok(true)
}

#[cfg(target_os = "linux")]
/// The outer: waits for init and ends as the plugin host did.
fn outer(init: libc::pid_t, status_end: i32, fds: &[i32]) -> ! {
    for &fd in fds {
        // SAFETY: the plugin host's descriptors: wf must see them close
        // when the host ends, so no copy stays here.
        unsafe { libc::close(fd) };
    }
    let mut raw = 0i32;
    loop {
        // SAFETY: waiting for our one child.
        let r = unsafe { libc::waitpid(init, &mut raw, 0) };
        if r == init || (r < 0 && io::Error::last_os_error().raw_os_error() != Some(libc::EINTR)) {
            break;
        }
    }
    // The host's own status when init passed it on (init cannot die of a
    // signal it raises itself: a namespace's init ignores them).
    let mut buf = [0u8; 4];
    // SAFETY: reading into a local buffer.
    if unsafe { libc::read(status_end, buf.as_mut_ptr().cast(), 4) } == 4 {
        raw = i32::from_ne_bytes(buf);
    }
    end_like(raw)
}

#[cfg(target_os = "linux")]
/// Exits with wait status `raw`: the same code, or the same signal.
fn end_like(raw: i32) -> ! {
    if libc::WIFSIGNALED(raw) {
        let sig = libc::WTERMSIG(raw);
        // SAFETY: plain syscalls on this (single-threaded) process: no core
        // file (the child's crash was reported already), default action,
        // unblocked, then the signal.
        unsafe {
            let none = libc::rlimit {
                rlim_cur: 0,
                rlim_max: 0,
            };
            libc::setrlimit(libc::RLIMIT_CORE, &none);
            libc::signal(sig, libc::SIG_DFL);
            let mut set: libc::sigset_t = std::mem::zeroed();
            libc::sigemptyset(&mut set);
            libc::sigaddset(&mut set, sig);
            libc::sigprocmask(libc::SIG_UNBLOCK, &set, std::ptr::null_mut());
            libc::kill(libc::getpid(), sig);
            // A signal whose default is to be ignored: exit instead.
            libc::_exit(128 + sig)
        }
    }
    // SAFETY: ends the process.
    unsafe { libc::_exit(libc::WEXITSTATUS(raw)) }
}

#[cfg(target_os = "linux")]
/// Pid 1: forks the plugin host (returning in it) and reaps everything
/// until the host ends; then hands its status to the outer and exits,
/// which ends every process left in the namespace.
fn init(status_end: i32, fds: &[i32]) {
    // SAFETY: plain syscalls in a single-threaded process.
    unsafe {
        if libc::prctl(libc::PR_SET_PDEATHSIG, libc::SIGKILL as libc::c_ulong) != 0 {
            libc::_exit(2);
        }
        // The outer died before the prctl: nobody would end us.
        let mut p = libc::pollfd {
            fd: status_end,
            events: 0,
            revents: 0,
        };
        if libc::poll(&mut p, 1, 0) > 0 && p.revents & (libc::POLLHUP | libc::POLLERR) != 0 {
            libc::_exit(2);
        }
        let host = libc::fork();
        if host < 0 {
            libc::_exit(2);
        }
        if host == 0 {
            libc::close(status_end);
            // Init's end is the namespace's: when init goes, so does this
            // process, but a parent-death signal also covers the gap.
            libc::prctl(libc::PR_SET_PDEATHSIG, libc::SIGKILL as libc::c_ulong);
            return;
        }
        for &fd in fds {
            libc::close(fd);
        }
        loop {
            let mut raw = 0i32;
            let r = libc::waitpid(-1, &mut raw, 0);
            if r == host {
                let bytes = raw.to_ne_bytes();
                libc::write(status_end, bytes.as_ptr().cast(), 4);
                libc::_exit(0);
            }
            if r < 0 && io::Error::last_os_error().raw_os_error() == Some(libc::ECHILD) {
                libc::_exit(2);
            }
        }
    }
}

/// PID namespaces exist on Linux only.
#[cfg(not(target_os = "linux"))]
pub fn enter(_fds: &[i32]) -> Result<Contained, String> {
    Err("no PID namespace: Linux only".into())
}
