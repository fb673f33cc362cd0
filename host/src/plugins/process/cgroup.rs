//! A child's own cgroups, made below wf's own: `pids.max` bounds its
//! processes and threads together, and a memory bound (`memory.max`, or v1's
//! `memory.limit_in_bytes`) bounds the memory of all its processes together,
//! which RLIMIT_DATA (per process) cannot: a plugin that forks N children
//! each just under `memory_mb` would escape it.
//!
//! cgroup v2 where wf's cgroup delegates the controller to its children
//! (one folder for both), else each controller's v1 hierarchy. Removed when
//! dropped (the child is reaped by then; a cgroup with tasks left refuses
//! and stays).

use std::ffi::CString;
use std::path::{Path, PathBuf};
use std::sync::OnceLock;

use super::limits::Limits;

/// What the memory cgroup allows above `memory_mb`. RLIMIT_DATA counts a
/// process's heap and private mappings only; the cgroup also charges its
/// code, stacks, page tables, kernel memory and page cache. The headroom
/// lets a single process meet its RLIMIT_DATA first (a clean `ENOMEM`, named
/// in the call's error) while all of the child's processes together stay
/// within `memory_mb` + 256 MiB.
pub const MEMORY_HEADROOM_MB: u64 = 256;

/// The folders made for one child and what bounds it there.
#[derive(Debug, Default)]
pub struct ChildCgroups {
    /// Folders made (removed when dropped).
    dirs: Vec<PathBuf>,
    /// Each folder's `cgroup.procs`, written by the child before exec.
    pub(super) procs: Vec<CString>,
    /// `pids.max`, when a pids cgroup was made.
    pids: Option<PathBuf>,
    memory: Option<Memory>,
}

#[derive(Debug)]
struct Memory {
    dir: PathBuf,
    v2: bool,
    /// The bound set last (MiB, the headroom included).
    total_mb: u64,
}

impl ChildCgroups {
    /// Makes what `limits` asks for and wf may make; the rest is left out
    /// (the child's report and `wf plugins` say what bounds it).
    pub fn create(limits: &Limits) -> ChildCgroups {
        use std::sync::atomic::{AtomicU64, Ordering};
        static NEXT: AtomicU64 = AtomicU64::new(1);
        let mut made = ChildCgroups::default();
        let pids = limits.max_processes.and_then(|_| base("pids"));
        let memory = limits.memory_mb.and_then(|_| memory_base());
        if pids.is_none() && memory.is_none() {
            return made;
        }
        let name = format!(
            "wf-plugin-{}-{}",
            std::process::id(),
            NEXT.fetch_add(1, Ordering::Relaxed)
        );
        let mut make = |base: &Path| -> Option<PathBuf> {
            let dir = base.join(&name);
            if !made.dirs.contains(&dir) {
                std::fs::create_dir(&dir).ok()?;
                let procs = CString::new(
                    dir.join("cgroup.procs")
                        .into_os_string()
                        .into_encoded_bytes(),
                )
                .ok()?;
                made.dirs.push(dir.clone());
                made.procs.push(procs);
            }
            Some(dir)
        };
        if let Some((base, _)) = &pids {
            made.pids = make(base).map(|d| d.join("pids.max"));
        }
        if let Some((base, v2)) = &memory {
            made.memory = make(base).map(|dir| Memory {
                dir,
                v2: *v2,
                total_mb: 0,
            });
        }
        if !made.set(limits) {
            // Keep the pids bound when only the memory one could not be set.
            made.drop_memory();
            if !made.set(limits) {
                return ChildCgroups::default();
            }
        }
        made
    }

    /// Gives up the memory cgroup (its folder too, unless pids share it).
    fn drop_memory(&mut self) {
        let Some(m) = self.memory.take() else {
            return;
        };
        if self.pids.as_ref().is_some_and(|p| p.starts_with(&m.dir)) {
            return;
        }
        if let Some(i) = self.dirs.iter().position(|d| *d == m.dir) {
            self.dirs.remove(i);
            self.procs.remove(i);
            let _ = std::fs::remove_dir(&m.dir);
        }
    }

    /// Sets the bounds (again: the plugin's own, once its settings are
    /// known). False when one could not be written.
    pub fn set(&mut self, limits: &Limits) -> bool {
        if let (Some(file), Some(max)) = (&self.pids, limits.max_processes)
            && std::fs::write(file, max.to_string()).is_err()
        {
            return false;
        }
        if let (Some(m), Some(mb)) = (&mut self.memory, limits.memory_mb) {
            let total = mb.saturating_add(MEMORY_HEADROOM_MB);
            let bytes = total.saturating_mul(1 << 20).to_string();
            let ok = if m.v2 {
                // Swap would let it keep more than the bound; one kill ends
                // the whole group (wf ends the child anyway).
                let _ = std::fs::write(m.dir.join("memory.swap.max"), "0");
                let _ = std::fs::write(m.dir.join("memory.oom.group"), "1");
                std::fs::write(m.dir.join("memory.max"), &bytes).is_ok()
            } else {
                // memsw (memory and swap) may not be below the memory limit:
                // whichever order a change needs, the second try lands.
                let limit = m.dir.join("memory.limit_in_bytes");
                let memsw = m.dir.join("memory.memsw.limit_in_bytes");
                let first = std::fs::write(&limit, &bytes).is_ok();
                let _ = std::fs::write(&memsw, &bytes);
                first || std::fs::write(&limit, &bytes).is_ok()
            };
            if !ok {
                return false;
            }
            m.total_mb = total;
        }
        true
    }

    /// Whether the child's processes and threads are bounded here.
    pub fn bounds_processes(&self) -> bool {
        self.pids.is_some()
    }

    /// The bound on all its processes' memory together, MiB.
    pub fn memory_total_mb(&self) -> Option<u64> {
        self.memory.as_ref().map(|m| m.total_mb)
    }

    /// The file whose `oom_kill` line counts the kernel's kills under the
    /// memory bound.
    pub fn oom_events(&self) -> Option<PathBuf> {
        self.memory.as_ref().map(|m| {
            m.dir.join(if m.v2 {
                "memory.events"
            } else {
                "memory.oom_control"
            })
        })
    }
}

/// The `oom_kill` count of a memory cgroup's events file (0 when unreadable).
pub fn oom_kills(events: &Path) -> u64 {
    std::fs::read_to_string(events)
        .ok()
        .and_then(|t| {
            t.lines()
                .find_map(|l| l.strip_prefix("oom_kill ")?.trim().parse().ok())
        })
        .unwrap_or(0)
}

impl Drop for ChildCgroups {
    /// Dropped once the child is reaped; what it started (its PID
    /// namespace) may take a moment more to leave the cgroup.
    fn drop(&mut self) {
        for dir in &self.dirs {
            for _ in 0..100 {
                if std::fs::remove_dir(dir).is_ok() || !dir.exists() {
                    break;
                }
                std::thread::sleep(std::time::Duration::from_millis(20));
            }
        }
    }
}

/// Removes the empty cgroups of wf processes that are gone (a wf killed
/// before it could remove its own): a cgroup with tasks left stays.
fn remove_stale(base: &Path) {
    let Ok(dir) = std::fs::read_dir(base) else {
        return;
    };
    for entry in dir.flatten() {
        let name = entry.file_name();
        let Some(pid) = name
            .to_str()
            .and_then(|n| n.strip_prefix("wf-plugin-"))
            .and_then(|rest| rest.split('-').next())
            .and_then(|p| p.parse::<u32>().ok())
        else {
            continue;
        };
        if pid != std::process::id() && !Path::new(&format!("/proc/{pid}")).exists() {
            let _ = std::fs::remove_dir(entry.path());
        }
    }
}

/// Where wf may make memory cgroups; said once in the log when nowhere.
fn memory_base() -> Option<(PathBuf, bool)> {
    static WARNED: OnceLock<()> = OnceLock::new();
    let found = base("memory");
    if found.is_none() {
        WARNED.get_or_init(|| {
            tracing::warn!(
                "no memory cgroup wf may write (cgroup v2 with the memory controller delegated to wf's cgroup, or v1's memory hierarchy): a plugin child's memory is bounded per process only (memory_mb, RLIMIT_DATA), not for its processes together"
            );
        });
    }
    found
}

/// Where wf may make cgroups for `controller`: its own cgroup v2 folder when
/// the controller is enabled for its children (true), else its v1 folder
/// of that controller's hierarchy (false).
fn base(controller: &'static str) -> Option<(PathBuf, bool)> {
    static PIDS: OnceLock<Option<(PathBuf, bool)>> = OnceLock::new();
    static MEMORY: OnceLock<Option<(PathBuf, bool)>> = OnceLock::new();
    let cell = if controller == "pids" { &PIDS } else { &MEMORY };
    cell.get_or_init(|| {
        // Tests compare a build with the memory bound and without it.
        if controller == "memory" && std::env::var_os("WF_TEST_NO_MEMORY_CGROUP").is_some() {
            return None;
        }
        let found = find_base(controller)?;
        remove_stale(&found.0);
        Some(found)
    })
    .clone()
}

fn find_base(controller: &str) -> Option<(PathBuf, bool)> {
    let mine = std::fs::read_to_string("/proc/self/cgroup").ok()?;
    let writable = |d: &Path| {
        let c = CString::new(d.as_os_str().as_encoded_bytes()).ok();
        // SAFETY: access(2) on a NUL-terminated path.
        c.is_some_and(|c| unsafe { libc::access(c.as_ptr(), libc::W_OK) } == 0)
    };
    for line in mine.lines() {
        let mut parts = line.splitn(3, ':');
        let (id, controllers, path) = (parts.next()?, parts.next()?, parts.next()?);
        let rel = path.trim_start_matches('/');
        let (dir, v2) = if id == "0" && controllers.is_empty() {
            let Some(root) = ["/sys/fs/cgroup", "/sys/fs/cgroup/unified"]
                .iter()
                .map(Path::new)
                .find(|r| r.join("cgroup.controllers").exists())
            else {
                continue;
            };
            let d = root.join(rel);
            let enabled =
                std::fs::read_to_string(d.join("cgroup.subtree_control")).unwrap_or_default();
            if !enabled.split_whitespace().any(|c| c == controller) {
                continue;
            }
            (d, true)
        } else if controllers.split(',').any(|c| c == controller) {
            (
                Path::new("/sys/fs/cgroup").join(controller).join(rel),
                false,
            )
        } else {
            continue;
        };
        if dir.is_dir() && writable(&dir) {
            return Some((dir, v2));
        }
    }
    None
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn reads_the_oom_kill_count_of_v1_and_v2() {
        let dir = std::env::temp_dir().join(format!("wf-oom-{}", std::process::id()));
        std::fs::create_dir_all(&dir).unwrap();
        let v1 = dir.join("memory.oom_control");
        std::fs::write(&v1, "oom_kill_disable 0\nunder_oom 0\noom_kill 3\n").unwrap();
        assert_eq!(oom_kills(&v1), 3);
        let v2 = dir.join("memory.events");
        std::fs::write(
            &v2,
            "low 0\nhigh 0\nmax 7\noom 1\noom_kill 1\noom_group_kill 0\n",
        )
        .unwrap();
        assert_eq!(oom_kills(&v2), 1);
        assert_eq!(oom_kills(&dir.join("gone")), 0);
        std::fs::remove_dir_all(&dir).unwrap();
    }

    #[test]
    fn a_memory_cgroup_is_bounded_at_memory_mb_plus_headroom_and_removed() {
        let limits = Limits {
            memory_mb: Some(300),
            cpu_seconds: None,
            max_processes: None,
        };
        let cg = ChildCgroups::create(&limits);
        let Some(m) = cg.memory.as_ref() else {
            // No memory cgroup wf may make here: nothing to check.
            return;
        };
        let dir = m.dir.clone();
        let file = if m.v2 {
            "memory.max"
        } else {
            "memory.limit_in_bytes"
        };
        let set: u64 = std::fs::read_to_string(dir.join(file))
            .unwrap()
            .trim()
            .parse()
            .unwrap();
        assert_eq!(set, (300 + MEMORY_HEADROOM_MB) << 20);
        assert_eq!(cg.memory_total_mb(), Some(300 + MEMORY_HEADROOM_MB));
        assert!(!cg.bounds_processes());
        drop(cg);
        assert!(!dir.exists());
    }
}
