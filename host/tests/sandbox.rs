//! The plugin sandbox proved from outside: a child process (the
//! `sandbox_child` example) enters the sandbox as a process-mode plugin
//! child does, loads the hostile `snoop` fixture with wf's loader and calls
//! its tool, which tries to read this test process's environment and
//! memory, a token file, to run a shell and to ptrace this process, and
//! returns what it saw. Every attempt must fail under `strict` and succeed
//! under `off` (so a failure under `strict` is the sandbox's doing).
//!
//! Needs the fixture built into target/fixtures (tests/run does:
//! `cargo build --target-dir target/fixtures -p fixture-snoop`).
#![cfg(target_os = "linux")]
#![allow(clippy::unwrap_used)]

use std::path::PathBuf;
use std::process::Command;

use serde_json::{Value, json};

/// What the child's plugin tries to read from this process's memory.
static SECRET: [u8; 24] = *b"wf-parent-memory-secret!";

/// target/ (this test runs from target/debug/deps).
fn target_dir() -> PathBuf {
    let exe = std::env::current_exe().unwrap();
    exe.ancestors().nth(3).unwrap().to_path_buf()
}

fn child_exe() -> PathBuf {
    let exe = std::env::current_exe().unwrap();
    let path = exe
        .parent()
        .unwrap()
        .parent()
        .unwrap()
        .join("examples/sandbox_child");
    assert!(
        path.is_file(),
        "{} is missing: `cargo test -p wf-host` builds it (`cargo test --test sandbox` alone does not: `cargo build -p wf-host --example sandbox_child`)",
        path.display()
    );
    path
}

fn snoop_plugin() -> PathBuf {
    let dir = std::env::var_os("WF_FIXTURES_DIR")
        .map(PathBuf::from)
        .unwrap_or_else(|| target_dir().join("fixtures/debug"));
    let path = dir.join("libfixture_snoop.so");
    assert!(
        path.is_file(),
        "{} is missing: build it with `cargo build --target-dir target/fixtures -p fixture-snoop` (tests/run does)",
        path.display()
    );
    path
}

struct Scene {
    _dir: tempfile::TempDir,
    token: PathBuf,
    data: PathBuf,
}

/// A token file and a data directory outside /tmp (which a plugin that
/// starts programs may use).
fn scene() -> Scene {
    // Outside every folder the sandbox opens: a program-starting plugin may
    // write /tmp, and a checkout (so CARGO_TARGET_TMPDIR) can lie under it.
    let base = std::env::var_os("HOME")
        .map(std::path::PathBuf::from)
        .filter(|h| h.is_dir() && !h.starts_with("/tmp"))
        .map(|h| h.join(".cache/wf-sandbox-tests"))
        .unwrap_or_else(|| env!("CARGO_TARGET_TMPDIR").into());
    std::fs::create_dir_all(&base).unwrap();
    let dir = tempfile::Builder::new()
        .prefix("sandbox-")
        .tempdir_in(&base)
        .unwrap();
    let token = dir.path().join("other-source-token.json");
    std::fs::write(&token, "{\"access_token\":\"other-source-secret\"}").unwrap();
    let data = dir.path().join("sources/snoop");
    std::fs::create_dir_all(&data).unwrap();
    Scene {
        token,
        data,
        _dir: dir,
    }
}

fn run_child(mode: &str, scene: &Scene) -> Value {
    let args = json!({
        "files": [scene.token],
        "addr": SECRET.as_ptr() as u64,
        "len": SECRET.len(),
    });
    let out = Command::new(child_exe())
        .args([mode, snoop_plugin().to_str().unwrap()])
        .arg(&scene.data)
        .args(["snoop", &args.to_string()])
        .output()
        .unwrap();
    let stdout = String::from_utf8_lossy(&out.stdout);
    assert!(
        out.status.success(),
        "child ({mode}) failed: {}\nstdout: {stdout}\nstderr: {}",
        out.status,
        String::from_utf8_lossy(&out.stderr)
    );
    serde_json::from_str(stdout.trim()).unwrap_or_else(|e| panic!("{e}: {stdout}"))
}

fn attempt<'a>(result: &'a Value, path: &[&str]) -> &'a Value {
    let mut v = &result["result"];
    for p in path {
        v = &v[*p];
    }
    assert!(v.is_object(), "no attempt at {path:?} in {result}");
    v
}

fn denied(v: &Value, errno: i32, what: &str) {
    assert_eq!(v["ok"], false, "{what} must fail: {v}");
    assert_eq!(v["errno"], errno, "{what}: {v}");
}

fn own_environ() -> String {
    String::from_utf8_lossy(&std::fs::read("/proc/self/environ").unwrap()).into_owned()
}

#[test]
fn strict_denies_every_attempt() {
    let s = scene();
    let r = run_child("strict", &s);
    let token = s.token.to_str().unwrap();
    // Landlock: outside the allow-list, EACCES.
    denied(
        attempt(&r, &["environ"]),
        libc::EACCES,
        "reading the parent's environ",
    );
    denied(
        attempt(&r, &["files", token]),
        libc::EACCES,
        "reading a token file",
    );
    // seccomp: EPERM.
    denied(attempt(&r, &["exec"]), libc::EPERM, "execve /bin/sh");
    denied(
        attempt(&r, &["ptrace"]),
        libc::EPERM,
        "ptrace of the parent",
    );
    denied(
        attempt(&r, &["vm_read"]),
        libc::EPERM,
        "process_vm_readv of the parent",
    );
    assert!(!r.to_string().contains("other-source-secret"), "{r}");
    assert!(!r.to_string().contains("wf-parent-memory-secret"), "{r}");
    let report = r["report"].as_str().unwrap();
    assert!(report.contains("fs: read plugin+libs, rw "), "{report}");
    assert!(report.contains("no exec"), "{report}");
    // This kernel (Landlock ABI 7) enforces everything: no warning. On an
    // older kernel the one line names what is missing.
    assert_eq!(r["warnings"], json!([]), "{r}");
}

#[test]
fn off_lets_every_attempt_through() {
    let s = scene();
    let r = run_child("off", &s);
    let token = s.token.to_str().unwrap();
    let environ = attempt(&r, &["environ"]);
    assert_eq!(environ["ok"], true, "{environ}");
    assert_eq!(environ["data"], own_environ());
    assert_eq!(
        attempt(&r, &["files", token])["data"],
        "{\"access_token\":\"other-source-secret\"}"
    );
    assert_eq!(attempt(&r, &["exec"])["data"], "snooped\n");
    assert_eq!(attempt(&r, &["ptrace"])["ok"], true, "{r}");
    assert_eq!(
        attempt(&r, &["vm_read"])["data"],
        String::from_utf8_lossy(&SECRET).as_ref()
    );
    assert!(
        r["report"].as_str().unwrap().starts_with("sandbox off"),
        "{r}"
    );
}

#[test]
fn a_plugin_that_starts_programs_may_exec_but_not_snoop() {
    let s = scene();
    let r = run_child("strict-programs", &s);
    let token = s.token.to_str().unwrap();
    assert_eq!(attempt(&r, &["exec"])["data"], "snooped\n", "{r}");
    // /proc is readable for programs, yet not another process's environ:
    // Landlock denies ptrace-mode access outside the sandbox (and the child
    // has no CAP_SYS_PTRACE, even when this test runs as root).
    denied(
        attempt(&r, &["environ"]),
        libc::EACCES,
        "reading the parent's environ",
    );
    denied(
        attempt(&r, &["files", token]),
        libc::EACCES,
        "reading a token file",
    );
    denied(
        attempt(&r, &["ptrace"]),
        libc::EPERM,
        "ptrace of the parent",
    );
    denied(
        attempt(&r, &["vm_read"]),
        libc::EPERM,
        "process_vm_readv of the parent",
    );
    assert!(
        r["report"].as_str().unwrap().contains("exec allowed"),
        "{r}"
    );
}

#[test]
fn a_plugin_that_starts_programs_can_start_node() {
    // What the mcp plugin does for a stdio upstream (npx, node servers).
    let Some(node) = ["/usr/bin/node", "/usr/local/bin/node"]
        .into_iter()
        .find(|p| std::path::Path::new(p).is_file())
    else {
        panic!("node is needed (the e2e suite's MCP servers run on it)");
    };
    let s = scene();
    let args = json!({
        "command": [node, "-e", "console.log(require('os').cpus().length > 0)"],
        "ptrace": false,
    });
    let out = Command::new(child_exe())
        .args(["strict-programs", snoop_plugin().to_str().unwrap()])
        .arg(&s.data)
        .args(["snoop", &args.to_string()])
        .output()
        .unwrap();
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let r: Value = serde_json::from_slice(&out.stdout).unwrap();
    assert_eq!(attempt(&r, &["exec"])["data"], "true\n", "{r}");
}

#[test]
fn the_plugins_own_data_dir_stays_reachable_under_strict() {
    // The control for the token file: a file in the plugin's data dir, a
    // sibling of the token's folder, is read.
    let s = scene();
    let inside = s.data.join("kept.txt");
    std::fs::write(&inside, "kept").unwrap();
    let args = json!({"files": [inside], "exec": false, "ptrace": false});
    let out = Command::new(child_exe())
        .args(["strict", snoop_plugin().to_str().unwrap()])
        .arg(&s.data)
        .args(["snoop", &args.to_string()])
        .output()
        .unwrap();
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let r: Value = serde_json::from_slice(&out.stdout).unwrap();
    assert_eq!(
        attempt(&r, &["files", inside.to_str().unwrap()])["data"],
        "kept",
        "{r}"
    );
}

#[test]
fn a_sources_configured_command_starts_only_when_the_policy_names_it() {
    // The mcp plugin's usual stdio upstream: @modelcontextprotocol/server-everything
    // from tests/e2e/node_modules (tests/run installs it before the Rust tests).
    let everything = std::env::var_os("WF_EVERYTHING_BIN")
        .map(PathBuf::from)
        .unwrap_or_else(|| {
            PathBuf::from(env!("CARGO_MANIFEST_DIR"))
                .join("../tests/e2e/node_modules/.bin/mcp-server-everything")
        });
    assert!(
        everything.exists(),
        "{} is missing: tests/run installs the e2e Node peers (npm ci in tests/e2e)",
        everything.display()
    );
    let s = scene();
    let args = json!({"command": [everything], "ptrace": false});
    let run = |program: Option<&PathBuf>| -> Value {
        let mut cmd = Command::new(child_exe());
        cmd.args(["strict-programs", snoop_plugin().to_str().unwrap()])
            .arg(&s.data)
            .args(["snoop", &args.to_string()]);
        if let Some(p) = program {
            cmd.env("SANDBOX_PROGRAM", p);
        }
        let out = cmd.output().unwrap();
        assert!(
            out.status.success(),
            "{}",
            String::from_utf8_lossy(&out.stderr)
        );
        serde_json::from_slice(&out.stdout).unwrap()
    };
    // Not passed as the source's program: its node_modules tree is closed.
    denied(
        attempt(&run(None), &["exec"]),
        libc::EACCES,
        "a program outside the allow-list",
    );
    // Passed: it starts (stdin is closed, so it says hello and ends).
    let r = run(Some(&everything));
    let exec = attempt(&r, &["exec"]);
    assert!(
        exec["stderr"]
            .as_str()
            .unwrap()
            .contains("Starting default (STDIO) server"),
        "{exec}"
    );
}

#[test]
fn a_child_that_started_a_thread_first_is_refused_the_sandbox() {
    // Landlock restricts the calling thread and its later threads only: a
    // thread started before would escape, so entering is refused instead.
    let s = scene();
    let out = Command::new(child_exe())
        .args(["strict", snoop_plugin().to_str().unwrap()])
        .arg(&s.data)
        .args(["snoop", "{}"])
        .env("SANDBOX_THREAD_FIRST", "1")
        .output()
        .unwrap();
    assert_eq!(
        out.status.code(),
        Some(3),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let r: Value = serde_json::from_slice(&out.stdout).unwrap();
    let error = r["error"].as_str().unwrap();
    assert!(
        error.contains("before any other thread starts (2 threads run)"),
        "{error}"
    );
}
