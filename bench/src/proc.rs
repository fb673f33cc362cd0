//! Child MCP servers (an upstream on its own, or `wf serve`) driven by one
//! rmcp client over the child's stdin/stdout, and always cleaned up: closed
//! stdin first, then SIGTERM, then SIGKILL, each waited for.

use std::path::Path;
use std::process::Stdio;
use std::time::{Duration, Instant};

use anyhow::{Context, bail};
use rmcp::model::CallToolRequestParams;
use rmcp::service::RunningService;
use rmcp::{Peer, RoleClient, ServiceExt};
use tokio::process::{Child, Command};

/// A running MCP server child with a client session on it.
pub struct McpProc {
    pub label: String,
    pub pid: u32,
    client: Option<RunningService<RoleClient, ()>>,
    child: Option<Child>,
}

impl McpProc {
    /// Spawns `cmd` and completes the MCP handshake (bounded by `timeout`).
    /// `stderr_log` receives the child's stderr (else it is discarded).
    pub async fn start(
        label: &str,
        mut cmd: Command,
        stderr_log: Option<&Path>,
        timeout: Duration,
    ) -> anyhow::Result<Self> {
        cmd.stdin(Stdio::piped()).stdout(Stdio::piped());
        match stderr_log {
            Some(p) => {
                let f = std::fs::File::create(p)
                    .with_context(|| format!("cannot create {}", p.display()))?;
                cmd.stderr(f);
            }
            None => {
                cmd.stderr(Stdio::null());
            }
        }
        let mut child = cmd
            .spawn()
            .with_context(|| format!("{label}: cannot start {:?}", cmd.as_std().get_program()))?;
        let pid = child.id().unwrap_or(0);
        let stdout = child.stdout.take().context("no stdout")?;
        let stdin = child.stdin.take().context("no stdin")?;
        let mut me = Self {
            label: label.to_string(),
            pid,
            client: None,
            child: Some(child),
        };
        let client = match tokio::time::timeout(timeout, ().serve((stdout, stdin))).await {
            Ok(Ok(c)) => c,
            Ok(Err(e)) => {
                me.stop().await;
                bail!("{label}: MCP handshake failed: {e}");
            }
            Err(_) => {
                me.stop().await;
                bail!(
                    "{label}: no MCP handshake within {} ms",
                    timeout.as_millis()
                );
            }
        };
        me.client = Some(client);
        Ok(me)
    }

    pub fn peer(&self) -> Peer<RoleClient> {
        self.client
            .as_ref()
            .expect("a started process has a client")
            .peer()
            .clone()
    }

    /// Ends the session (closing the child's stdin) and waits for the child;
    /// SIGTERM after 3 s, SIGKILL after 2 more.
    pub async fn stop(&mut self) {
        if let Some(client) = self.client.take() {
            let _ = tokio::time::timeout(Duration::from_secs(2), client.cancel()).await;
        }
        let Some(mut child) = self.child.take() else {
            return;
        };
        if tokio::time::timeout(Duration::from_secs(3), child.wait())
            .await
            .is_ok()
        {
            return;
        }
        signal(self.pid, libc::SIGTERM);
        if tokio::time::timeout(Duration::from_secs(2), child.wait())
            .await
            .is_ok()
        {
            return;
        }
        eprintln!("wf-bench: {} did not exit; killing it", self.label);
        let _ = child.kill().await;
    }
}

impl Drop for McpProc {
    /// The fallback when a run is interrupted or fails: no orphans either way.
    fn drop(&mut self) {
        drop(self.client.take());
        let Some(mut child) = self.child.take() else {
            return;
        };
        if wait_sync(&mut child, Duration::from_millis(500)) {
            return;
        }
        signal(self.pid, libc::SIGTERM);
        if wait_sync(&mut child, Duration::from_secs(3)) {
            return;
        }
        let _ = child.start_kill();
        wait_sync(&mut child, Duration::from_secs(1));
    }
}

pub fn signal(pid: u32, sig: libc::c_int) {
    if pid > 0 {
        // SAFETY: kill(2) on a child we spawned and have not reaped yet.
        unsafe {
            libc::kill(pid as libc::pid_t, sig);
        }
    }
}

fn wait_sync(child: &mut Child, limit: Duration) -> bool {
    let until = Instant::now() + limit;
    loop {
        match child.try_wait() {
            Ok(Some(_)) | Err(_) => return true,
            Ok(None) if Instant::now() >= until => return false,
            Ok(None) => std::thread::sleep(Duration::from_millis(10)),
        }
    }
}

/// One `tools/call` of an echo tool; fails unless the reply carries the message.
pub async fn echo(peer: &Peer<RoleClient>, tool: &str, message: &str) -> anyhow::Result<()> {
    let mut args = serde_json::Map::new();
    args.insert("message".into(), message.into());
    let r = peer
        .call_tool(CallToolRequestParams::new(tool.to_string()).with_arguments(args))
        .await
        .with_context(|| format!("calling {tool}"))?;
    let ok = r.is_error != Some(true)
        && r.content
            .iter()
            .any(|c| c.as_text().is_some_and(|t| t.text.contains(message)));
    if !ok {
        bail!("{tool} did not echo {message:?}: {:?}", r.content);
    }
    Ok(())
}

/// Resident and peak memory of a process, in KiB, from /proc.
pub fn rss_kib(pid: u32) -> Option<(u64, u64)> {
    let status = std::fs::read_to_string(format!("/proc/{pid}/status")).ok()?;
    let field = |name: &str| {
        status
            .lines()
            .find_map(|l| l.strip_prefix(name))
            .and_then(|v| v.trim().trim_end_matches("kB").trim().parse::<u64>().ok())
    };
    Some((field("VmRSS:")?, field("VmHWM:")?))
}

/// The live (not zombie) child processes of `pid`.
pub fn children(pid: u32) -> Vec<u32> {
    let Ok(dir) = std::fs::read_dir("/proc") else {
        return Vec::new();
    };
    dir.filter_map(|e| e.ok()?.file_name().to_str()?.parse::<u32>().ok())
        .filter(|&p| {
            let Ok(stat) = std::fs::read_to_string(format!("/proc/{p}/stat")) else {
                return false;
            };
            // pid (comm) state ppid ...: comm may hold spaces and parentheses.
            let Some(close) = stat.rfind(')') else {
                return false;
            };
            let mut f = stat[close + 1..].split_whitespace();
            let state = f.next();
            let ppid = f.next().and_then(|v| v.parse::<u32>().ok());
            ppid == Some(pid) && state != Some("Z")
        })
        .collect()
}

/// How many live processes below `pid` (children, grandchildren, ...) have
/// `needle` in their command line.
pub fn descendants_running(pid: u32, needle: &str) -> usize {
    let mut found = 0;
    let mut todo = vec![pid];
    while let Some(p) = todo.pop() {
        for child in children(p) {
            let cmdline = std::fs::read(format!("/proc/{child}/cmdline")).unwrap_or_default();
            if String::from_utf8_lossy(&cmdline).contains(needle) {
                found += 1;
            }
            todo.push(child);
        }
    }
    found
}

/// On-CPU time and scheduling count summed over a process's threads.
#[derive(Clone, Copy, Debug, Default)]
pub struct Cpu {
    pub ns: u64,
    /// Times a thread of the process was put on a CPU (≈ context switches).
    pub switches: u64,
}

impl Cpu {
    /// The process's threads so far, from /proc/PID/task/*/schedstat.
    pub fn of(pid: u32) -> Self {
        let mut total = Cpu::default();
        let Ok(tasks) = std::fs::read_dir(format!("/proc/{pid}/task")) else {
            return total;
        };
        for t in tasks.filter_map(|t| t.ok()) {
            let Ok(s) = std::fs::read_to_string(t.path().join("schedstat")) else {
                continue;
            };
            let mut f = s.split_whitespace().map(|v| v.parse::<u64>().unwrap_or(0));
            total.ns += f.next().unwrap_or(0);
            total.switches += f.nth(1).unwrap_or(0);
        }
        total
    }

    pub fn since(self, earlier: Cpu) -> Cpu {
        Cpu {
            ns: self.ns.saturating_sub(earlier.ns),
            switches: self.switches.saturating_sub(earlier.switches),
        }
    }

    pub fn add(&mut self, other: Cpu) {
        self.ns += other.ns;
        self.switches += other.switches;
    }
}

/// Waits (up to 5 s) until `pid` has exactly `n` live children (wf's
/// one-shot discovery sessions end in the background).
pub async fn settle_children(pid: u32, n: usize) -> bool {
    let until = Instant::now() + Duration::from_secs(5);
    loop {
        let live = children(pid).len();
        if live == n {
            return true;
        }
        if Instant::now() >= until {
            return false;
        }
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
}
