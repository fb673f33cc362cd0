//! The sandbox a plugin child enters (process mode, `sandbox = "strict"`):
//! Landlock limits the filesystem to the plugin file, the libraries the
//! dynamic loader needs and the plugin's data directories; seccomp-BPF
//! denies `ptrace`, cross-process memory access and, unless the manifest
//! declares that the plugin starts programs, `execve`. Linux only; other
//! systems get one warning line and no sandbox.
//!
//! Two stages, because the manifest is read from the loaded library and
//! loading runs the library's constructors:
//! - [`before_load`]: the widest sandbox any plugin gets (the one for a
//!   plugin that starts programs);
//! - [`after_manifest`]: for a plugin that does not declare
//!   `starts_programs`, a second, narrower Landlock layer and a seccomp
//!   filter without `execve`. Landlock layers and seccomp filters only ever
//!   add restrictions, so the second stage narrows the first.
//!
//! The allow-lists are below, one constant each (documented in
//! docs/operator-manual.md, "Plugin sandbox").

#[cfg(target_os = "linux")]
mod fs;
#[cfg(target_os = "linux")]
mod syscalls;

use std::fmt;
use std::path::PathBuf;

use serde::Serialize;
use wf_plugin_api::Manifest;

/// `[plugins.<name>] sandbox`: the config's own type.
pub use crate::config::Sandbox;

/// What one plugin child may do.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Policy {
    /// The plugin library (read and map executable).
    pub plugin_file: PathBuf,
    /// Its sources' data directories (read-write; each must exist).
    pub data_dirs: Vec<PathBuf>,
    /// The manifest declares `starts_programs`: `execve` is allowed, and
    /// the system's program folders are readable ([`PROGRAM_READ_EXEC`]…).
    pub starts_programs: bool,
    /// More paths to read and execute, for a plugin that starts programs:
    /// its sources' configured commands and the folders they live in (e.g.
    /// a `node_modules`). Ignored unless `starts_programs`.
    pub programs: Vec<PathBuf>,
    pub mode: Sandbox,
}

impl Policy {
    pub fn new(plugin_file: impl Into<PathBuf>, mode: Sandbox) -> Self {
        Self {
            plugin_file: plugin_file.into(),
            data_dirs: Vec::new(),
            starts_programs: false,
            programs: Vec::new(),
            mode,
        }
    }
    pub fn data_dir(mut self, dir: impl Into<PathBuf>) -> Self {
        self.data_dirs.push(dir.into());
        self
    }
    pub fn starts_programs(mut self, yes: bool) -> Self {
        self.starts_programs = yes;
        self
    }
    pub fn program(mut self, path: impl Into<PathBuf>) -> Self {
        self.programs.push(path.into());
        self
    }
}

/// What a source that starts `command args…` (an mcp source's `command`
/// and `args`) needs to read and execute, for [`Policy::programs`]: the
/// command as found on `path_var` (like `PATH`) or relative to `cwd`, with
/// links resolved, and each argument that names an existing file (a
/// server script). A file inside a `node_modules` tree brings the whole tree
/// (a node program loads its dependencies from it); any other brings its
/// folder. Programs under the system folders need nothing more.
pub fn program_paths(
    command: &str,
    args: &[String],
    cwd: &std::path::Path,
    path_var: Option<&std::ffi::OsStr>,
) -> Vec<PathBuf> {
    use std::path::Path;
    fn reach(file: &Path) -> Option<PathBuf> {
        let real = std::fs::canonicalize(file).ok()?;
        if !real.is_file() {
            return None;
        }
        let tree = real
            .ancestors()
            .find(|a| a.file_name().is_some_and(|n| n == "node_modules"));
        Some(match tree {
            Some(t) => t.to_path_buf(),
            None => real.parent()?.to_path_buf(),
        })
    }
    let found = if command.contains('/') {
        Some(cwd.join(command))
    } else {
        path_var.and_then(|p| {
            std::env::split_paths(p)
                .map(|d| cwd.join(d).join(command))
                .find(|f| f.is_file())
        })
    };
    let mut out: Vec<PathBuf> = Vec::new();
    let candidates = found
        .into_iter()
        .chain(args.iter().map(|a| cwd.join(a)).filter(|a| a.is_file()));
    for file in candidates {
        if let Some(p) = reach(&file)
            && !out.contains(&p)
        {
            out.push(p);
        }
    }
    out
}

/// Read and execute (map): what the dynamic loader and a Rust cdylib need.
pub const LIBS_READ_EXEC: &[&str] = &[
    "/lib",
    "/lib32",
    "/lib64",
    "/usr/lib",
    "/usr/lib32",
    "/usr/lib64",
    "/usr/local/lib",
    "/etc/ld.so.cache",
];

/// Read only: name resolution and TLS roots for plugins that reach the
/// network (the mcp plugin's HTTP upstreams), the local time zone, random
/// devices, and the process's own `/proc` entry (resolved when the sandbox
/// is entered: `/proc/<own pid>`, never another process's).
pub const SYSTEM_READ: &[&str] = &[
    "/etc/resolv.conf",
    "/etc/hosts",
    "/etc/nsswitch.conf",
    "/etc/host.conf",
    "/etc/gai.conf",
    "/etc/ssl",
    "/etc/pki",
    "/etc/ca-certificates",
    "/usr/share/ca-certificates",
    "/etc/localtime",
    "/usr/share/zoneinfo",
    "/dev/urandom",
    "/dev/random",
    "/proc/self",
];

/// Read and write: the null device.
pub const DEVICES_RW: &[&str] = &["/dev/null"];

/// Read and execute, for a plugin that starts programs: the system's
/// programs and what they load (node and its modules live under /usr;
/// Debian's /usr/bin/node and friends go through /etc/alternatives).
pub const PROGRAM_READ_EXEC: &[&str] = &["/bin", "/sbin", "/usr", "/opt", "/etc/alternatives"];

/// Read only, for a plugin that starts programs: what programs commonly read
/// at start (user database for `os.userInfo`, fonts and MIME types for a
/// browser), `/proc` (programs read their own `/proc/self`, which is not
/// the plugin's) and `/sys` (CPU and memory facts for node and chromium).
/// Another process's private `/proc` entries (wf's `environ`, `mem`) stay
/// closed: Landlock denies a sandboxed process ptrace-mode access to
/// processes outside its sandbox, and the child holds no CAP_SYS_PTRACE to
/// override that, even as root (every capability is dropped; tested).
pub const PROGRAM_READ: &[&str] = &[
    "/etc/passwd",
    "/etc/group",
    "/etc/ld.so.conf",
    "/etc/ld.so.conf.d",
    "/etc/fonts",
    "/etc/mime.types",
    "/etc/os-release",
    "/etc/chromium",
    "/etc/chromium.d",
    "/proc",
    "/sys",
];

/// Read and write, for a plugin that starts programs: scratch space
/// (programs' temporary files, a browser's profile and shared memory).
pub const PROGRAM_RW: &[&str] = &["/tmp", "/dev/shm", "/dev/tty"];

/// Syscalls every sandboxed plugin is denied (`EPERM`): tracing and
/// reading or writing another process's memory or file descriptors,
/// comparing kernel objects across processes, perf events (which can
/// sample other processes) and the kernel keyrings (wf's session keyring).
pub const DENIED_SYSCALLS: &[&str] = &[
    "ptrace",
    "process_vm_readv",
    "process_vm_writev",
    "kcmp",
    "pidfd_getfd",
    "perf_event_open",
    "keyctl",
    "add_key",
    "request_key",
];

/// Denied too unless the manifest declares `starts_programs`.
pub const EXEC_SYSCALLS: &[&str] = &["execve", "execveat"];

/// What a child may do, for `wf plugins` and the logs.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize)]
pub struct Report {
    /// One clause per layer: "fs: …", "syscalls: …".
    pub allowed: Vec<String>,
    /// Features the kernel lacks, one line each: what is not enforced.
    pub warnings: Vec<String>,
}

impl Report {
    fn allow(mut self, line: String) -> Self {
        self.allowed.push(line);
        self
    }
    /// This report followed by `later`'s (a later stage narrows an earlier one).
    pub fn then(mut self, later: Report) -> Self {
        self.allowed.extend(later.allowed);
        self.warnings.extend(later.warnings);
        self
    }
    fn off() -> Self {
        Report::default()
            .allow("sandbox off: the child may read, write and run whatever wf's user may".into())
    }
}

impl fmt::Display for Report {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.allowed.join("; "))?;
        for w in &self.warnings {
            write!(f, " (warning: {w})")?;
        }
        Ok(())
    }
}

#[derive(Debug, thiserror::Error)]
pub enum SandboxError {
    #[error("cannot set no_new_privs: {0}")]
    NoNewPrivs(std::io::Error),
    #[error("cannot open {path} for the sandbox: {why}")]
    Path { path: PathBuf, why: String },
    #[error("cannot drop capabilities: {0}")]
    Capabilities(std::io::Error),
    #[error(
        "the sandbox must be entered before any other thread starts ({0} threads run): Landlock restricts the calling thread and the threads it starts later"
    )]
    Threads(usize),
    #[error("landlock: {0}")]
    Landlock(String),
    #[error("seccomp: {0}")]
    Seccomp(String),
}

/// Stage one, before the library is loaded: the widest sandbox (that of
/// a plugin that starts programs).
pub fn before_load(policy: &Policy) -> Result<Report, SandboxError> {
    if policy.mode == Sandbox::Off {
        return Ok(Report::off());
    }
    let wide = policy.clone().starts_programs(true);
    let syscalls = enter_syscalls(&wide)?;
    let fs = enter_filesystem(&wide)?;
    Ok(fs.then(syscalls))
}

/// Stage two, once the manifest is read and before the plugin is created:
/// narrows stage one for a plugin that does not declare `starts_programs`.
/// The report is the whole sandbox's.
pub fn after_manifest(policy: &Policy, manifest: &Manifest) -> Result<Report, SandboxError> {
    if policy.mode == Sandbox::Off {
        return Ok(Report::off());
    }
    let policy = policy.clone().starts_programs(manifest.starts_programs);
    if policy.starts_programs {
        // Stage one's syscall filter is already this plugin's; its
        // filesystem allowed every source's data directory, this layer
        // only the plugin's own (its warnings were told at stage one).
        enter_filesystem(&policy)?;
        return Ok(describe(&policy));
    }
    let syscalls = enter_syscalls(&policy)?;
    let fs = enter_filesystem(&policy)?;
    Ok(fs.then(syscalls))
}

/// What `policy` allows, without entering anything.
pub fn describe(policy: &Policy) -> Report {
    if policy.mode == Sandbox::Off {
        return Report::off();
    }
    Report::default()
        .allow(describe_fs(policy))
        .allow(describe_syscalls(policy))
}

fn describe_fs(policy: &Policy) -> String {
    let rw: Vec<String> = policy
        .data_dirs
        .iter()
        .map(|d| d.display().to_string())
        .collect();
    let rw = if rw.is_empty() {
        "no data dir".to_string()
    } else {
        format!("rw {}", rw.join(", "))
    };
    if policy.starts_programs {
        format!(
            "fs: read plugin+libs+programs (/usr, /bin, /proc, /sys…), rw {}, {rw}",
            PROGRAM_RW.join(", ")
        )
    } else {
        format!("fs: read plugin+libs, {rw}")
    }
}

fn describe_syscalls(policy: &Policy) -> String {
    if policy.starts_programs {
        "syscalls: no capabilities, no ptrace, no process_vm_*, exec allowed (starts programs)"
            .into()
    } else {
        "syscalls: no capabilities, no ptrace, no process_vm_*, no exec".into()
    }
}

/// `PR_SET_NO_NEW_PRIVS`, then the Landlock ruleset of `policy`.
#[cfg(target_os = "linux")]
pub fn enter_filesystem(policy: &Policy) -> Result<Report, SandboxError> {
    if policy.mode == Sandbox::Off {
        return Ok(Report::off());
    }
    single_threaded()?;
    no_new_privs()?;
    let warnings = fs::enter(policy)?;
    Ok(Report {
        allowed: vec![describe_fs(policy)],
        warnings,
    })
}

/// The seccomp-BPF filter of `policy` (denied syscalls answer `EPERM`).
#[cfg(target_os = "linux")]
pub fn enter_syscalls(policy: &Policy) -> Result<Report, SandboxError> {
    if policy.mode == Sandbox::Off {
        return Ok(Report::off());
    }
    no_new_privs()?;
    drop_capabilities()?;
    let warnings = syscalls::enter(policy)?;
    Ok(Report {
        allowed: vec![describe_syscalls(policy)],
        warnings,
    })
}

/// Landlock (below ABI 8) restricts only the calling thread and its later
/// children: a thread started earlier (a runtime's workers) would escape.
#[cfg(target_os = "linux")]
fn single_threaded() -> Result<(), SandboxError> {
    let threads = std::fs::read_dir("/proc/self/task")
        .map(|d| d.count())
        .unwrap_or(1);
    if threads > 1 {
        return Err(SandboxError::Threads(threads));
    }
    Ok(())
}

#[cfg(target_os = "linux")]
fn no_new_privs() -> Result<(), SandboxError> {
    // SAFETY: prctl with integer arguments only.
    let rc = unsafe { libc::prctl(libc::PR_SET_NO_NEW_PRIVS, 1, 0, 0, 0) };
    if rc != 0 {
        return Err(SandboxError::NoNewPrivs(std::io::Error::last_os_error()));
    }
    Ok(())
}

/// Drops every capability (bounding, ambient, effective, permitted,
/// inheritable): a child of a wf running as root keeps uid 0 but loses
/// root's powers, and programs it starts cannot regain them. Without this,
/// CAP_SYS_PTRACE would let it read wf's `/proc/<pid>/environ` through
/// Landlock's ptrace scoping.
#[cfg(target_os = "linux")]
fn drop_capabilities() -> Result<(), SandboxError> {
    #[repr(C)]
    struct Header {
        version: u32,
        pid: i32,
    }
    #[repr(C)]
    #[derive(Clone, Copy)]
    struct Data {
        effective: u32,
        permitted: u32,
        inheritable: u32,
    }
    const VERSION_3: u32 = 0x2008_0522;
    // SAFETY: prctl and capset with integer arguments and local structs of
    // the kernel's layout (capability version 3: two data elements).
    unsafe {
        libc::prctl(
            libc::PR_CAP_AMBIENT,
            libc::PR_CAP_AMBIENT_CLEAR_ALL,
            0,
            0,
            0,
        );
        // Needs CAP_SETPCAP, so before capset; EINVAL past the last capability.
        for cap in 0..64 {
            if libc::prctl(libc::PR_CAPBSET_DROP, cap, 0, 0, 0) != 0 {
                break;
            }
        }
        let mut header = Header {
            version: VERSION_3,
            pid: 0,
        };
        let data = [Data {
            effective: 0,
            permitted: 0,
            inheritable: 0,
        }; 2];
        if libc::syscall(libc::SYS_capset, &mut header, data.as_ptr()) != 0 {
            return Err(SandboxError::Capabilities(std::io::Error::last_os_error()));
        }
    }
    Ok(())
}

#[cfg(not(target_os = "linux"))]
const UNSUPPORTED: &str =
    "plugin sandbox unsupported on this operating system (Linux only): the child is not sandboxed";

#[cfg(not(target_os = "linux"))]
pub fn enter_filesystem(policy: &Policy) -> Result<Report, SandboxError> {
    if policy.mode == Sandbox::Off {
        return Ok(Report::off());
    }
    Ok(Report {
        allowed: Vec::new(),
        warnings: vec![UNSUPPORTED.into()],
    })
}

#[cfg(not(target_os = "linux"))]
pub fn enter_syscalls(policy: &Policy) -> Result<Report, SandboxError> {
    if policy.mode == Sandbox::Off {
        return Ok(Report::off());
    }
    // The one warning line comes from enter_filesystem.
    Ok(Report::default())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[cfg(unix)]
    #[test]
    fn program_paths_bring_the_node_modules_tree() {
        let dir = tempfile::tempdir().unwrap();
        let root = dir.path().canonicalize().unwrap();
        let pkg = root.join("node_modules/server/dist");
        std::fs::create_dir_all(&pkg).unwrap();
        std::fs::write(pkg.join("index.js"), "").unwrap();
        let bin = root.join("node_modules/.bin");
        std::fs::create_dir_all(&bin).unwrap();
        std::os::unix::fs::symlink("../server/dist/index.js", bin.join("server")).unwrap();
        let script = root.join("tools/run.py");
        std::fs::create_dir_all(script.parent().unwrap()).unwrap();
        std::fs::write(&script, "").unwrap();
        let path = std::ffi::OsString::from(bin.as_os_str());
        let got = program_paths(
            "server",
            &["tools/run.py".into(), "--flag".into()],
            &root,
            Some(&path),
        );
        assert_eq!(got, vec![root.join("node_modules"), root.join("tools")]);
        assert!(program_paths("no-such-program", &[], &root, Some(&path)).is_empty());
    }

    #[test]
    fn modes_parse() {
        assert_eq!("strict".parse::<Sandbox>(), Ok(Sandbox::Strict));
        assert_eq!("off".parse::<Sandbox>(), Ok(Sandbox::Off));
        assert!(
            "loose"
                .parse::<Sandbox>()
                .unwrap_err()
                .contains("\"strict\"")
        );
    }

    #[test]
    fn the_report_says_what_the_child_may_do() {
        let p = Policy::new("/p/libx.so", Sandbox::Strict).data_dir("/s/sources/x");
        let r = describe(&p).to_string();
        assert_eq!(
            r,
            "fs: read plugin+libs, rw /s/sources/x; syscalls: no capabilities, no ptrace, no process_vm_*, no exec"
        );
        let r = describe(&p.clone().starts_programs(true)).to_string();
        assert!(r.contains("exec allowed"), "{r}");
        let off = describe(&Policy::new("/p/libx.so", Sandbox::Off)).to_string();
        assert!(off.starts_with("sandbox off"), "{off}");
    }
}
