//! Start-up with real upstreams: the npm servers the e2e tests pin
//! (server-everything, server-filesystem, @playwright/mcp driving Debian's
//! Chromium), each alone and behind `wf serve` as its only source. In each
//! round: the upstream spawned directly and timed to its tools/list reply;
//! wf on a fresh state directory (first discovery) and on a warm one (the
//! catalog snapshot of an earlier run), timed from spawn to the first
//! tools/list that holds every tool the direct listing had.

use std::collections::BTreeSet;
use std::path::PathBuf;
use std::time::{Duration, Instant};

use anyhow::Context;
use serde_json::{Value, json};
use tokio::process::Command;

use crate::proc::McpProc;
use crate::startup::until_complete;
use crate::stats::{median, ms, verdict};
use crate::{Env, HANDSHAKE_TIMEOUT};

/// Target: wf's complete list within this of the upstream's own start.
const BUDGET_MS: f64 = 50.0;

/// What wf passes a stdio upstream of its environment (plugins/mcp/src/env.rs).
const ALLOWED_ENV: &[&str] = &[
    "HOME", "LOGNAME", "PATH", "SHELL", "TERM", "USER", "LANG", "LANGUAGE", "TMPDIR",
];

/// One upstream: its wf source name, command and arguments.
struct Upstream {
    label: &'static str,
    source: &'static str,
    command: PathBuf,
    args: Vec<String>,
}

impl Upstream {
    /// The upstream started directly, with the environment wf would give it
    /// (its allowlist, plugins/mcp/src/env.rs): this machine sets
    /// `NODE_EXTRA_CA_CERTS`, which costs node some 60 ms at start, and wf's
    /// child never sees it.
    fn command(&self) -> Command {
        let mut cmd = Command::new(&self.command);
        cmd.args(&self.args)
            .env_clear()
            .envs(std::env::vars().filter(|(k, v)| {
                !v.starts_with("()") && (ALLOWED_ENV.contains(&k.as_str()) || k.starts_with("LC_"))
            }));
        cmd
    }

    fn source(&self) -> Value {
        json!({"command": self.command, "args": self.args})
    }
}

#[derive(Default)]
struct Samples {
    direct: Vec<Duration>,
    cold: Vec<Duration>,
    warm: Vec<Duration>,
    /// tools/list calls wf needed, cold start.
    cold_lists: Vec<usize>,
    direct_tools: usize,
    wf_tools: usize,
}

/// The upstreams that are installed; the others are named in `missing`.
fn upstreams(env: &Env, missing: &mut Vec<String>) -> anyhow::Result<Vec<Upstream>> {
    let mut out = Vec::new();
    match &env.everything {
        Some(p) => out.push(Upstream {
            label: "server-everything",
            source: "everything",
            command: p.clone(),
            args: Vec::new(),
        }),
        None => missing.push("server-everything (npm ci in tests/e2e)".into()),
    }
    let bin = env.npm_bin.clone();
    let filesystem = bin.join("mcp-server-filesystem");
    if filesystem.exists() {
        let root = env.scratch.join("filesystem-root");
        std::fs::create_dir_all(&root)
            .with_context(|| format!("cannot create {}", root.display()))?;
        out.push(Upstream {
            label: "server-filesystem",
            source: "fs",
            command: filesystem,
            args: vec![root.display().to_string()],
        });
    } else {
        missing.push("server-filesystem (npm ci in tests/e2e)".into());
    }
    let playwright = bin.join("playwright-mcp");
    match (playwright.exists(), env.chromium.exists()) {
        (true, true) => out.push(Upstream {
            label: "@playwright/mcp (Chromium)",
            source: "browser",
            command: playwright,
            args: [
                "--headless",
                "--executable-path",
                &env.chromium.display().to_string(),
                "--no-sandbox",
                "--isolated",
            ]
            .map(String::from)
            .to_vec(),
        }),
        (false, _) => missing.push("@playwright/mcp (npm ci in tests/e2e)".into()),
        (true, false) => missing.push(format!(
            "@playwright/mcp: no browser at {}",
            env.chromium.display()
        )),
    }
    Ok(out)
}

pub async fn run(env: &Env) -> anyhow::Result<()> {
    let reps = if env.quick { 1 } else { 5 };
    let mut missing = Vec::new();
    let upstreams = upstreams(env, &mut missing)?;
    let mut rows = Vec::new();
    for up in &upstreams {
        eprintln!("wf-bench: start-up with a real upstream: {}", up.label);
        // Not counted: warms the page cache, names the tools, and leaves
        // the warm state directory its catalog snapshot.
        let (_, names) = direct(up).await?;
        let expected: BTreeSet<String> = names
            .iter()
            .map(|n| format!("{}__{n}", up.source))
            .collect();
        let warm_state = env.scratch.join(format!("state-npm-warm-{}", up.source));
        let _ = std::fs::remove_dir_all(&warm_state);
        wf(env, up, &warm_state, &expected).await?;
        let mut s = Samples {
            direct_tools: names.len(),
            ..Samples::default()
        };
        for rep in 0..reps {
            let cold_state = env
                .scratch
                .join(format!("state-npm-cold-{}-{rep}", up.source));
            let _ = std::fs::remove_dir_all(&cold_state);
            // Alternate the order so that none always goes first.
            let order: [u8; 3] = if rep % 2 == 0 { [0, 1, 2] } else { [2, 1, 0] };
            for which in order {
                match which {
                    0 => s.direct.push(direct(up).await?.0),
                    1 => {
                        let (t, lists, tools) = wf(env, up, &cold_state, &expected).await?;
                        s.cold.push(t);
                        s.cold_lists.push(lists);
                        s.wf_tools = tools;
                    }
                    _ => s.warm.push(wf(env, up, &warm_state, &expected).await?.0),
                }
            }
            let _ = std::fs::remove_dir_all(&cold_state);
        }
        rows.push((up, s));
    }

    println!("## Start-up with real upstreams\n");
    println!(
        "One npm server (the versions tests/e2e/package-lock.json pins) alone, and as `wf \
         serve`'s only source: from spawn to the first tools/list reply that holds every tool \
         the direct listing had. wf on a fresh state directory (its first discovery) and on a \
         warm one (an earlier run's catalog snapshot), in the same rounds as the direct start, \
         the order alternating. Medians of {reps} round(s).\n"
    );
    println!(
        "| upstream | direct | wf, fresh state dir | added | wf, warm state dir | added | tools direct / via wf | lists (fresh) | target: +≤ {BUDGET_MS:.0} ms |"
    );
    println!("|---|---:|---:|---:|---:|---:|---|---|---|");
    for (up, s) in &rows {
        let (d, c, w) = (median(&s.direct), median(&s.cold), median(&s.warm));
        let (added_cold, added_warm) = (ms(c) - ms(d), ms(w) - ms(d));
        let lists: Vec<String> = s.cold_lists.iter().map(|n| n.to_string()).collect();
        println!(
            "| {} | {:.0} ms | {:.0} ms | {:+.0} ms | {:.0} ms | {:+.0} ms | {} / {} | {} | {} |",
            up.label,
            ms(d),
            ms(c),
            added_cold,
            ms(w),
            added_warm,
            s.direct_tools,
            s.wf_tools,
            lists.join(", "),
            verdict(added_cold <= BUDGET_MS && added_warm <= BUDGET_MS)
        );
    }
    println!();
    println!("Every round (ms, direct / wf fresh / wf warm):\n");
    for (up, s) in &rows {
        let runs: Vec<String> = (0..s.direct.len())
            .map(|i| {
                format!(
                    "{:.0}/{:.0}/{:.0}",
                    ms(s.direct[i]),
                    ms(s.cold[i]),
                    ms(s.warm[i])
                )
            })
            .collect();
        println!("- {}: {}", up.label, runs.join(", "));
    }
    for m in &missing {
        println!("- skipped: {m}");
    }
    println!();
    Ok(())
}

/// The upstream alone: spawn → tools/list answered; its tool names.
async fn direct(up: &Upstream) -> anyhow::Result<(Duration, Vec<String>)> {
    let t0 = Instant::now();
    let mut p = McpProc::start(up.label, up.command(), None, HANDSHAKE_TIMEOUT).await?;
    let tools = p
        .peer()
        .list_all_tools()
        .await
        .with_context(|| format!("{} tools/list", up.label))?;
    let t = t0.elapsed();
    p.stop().await;
    Ok((t, tools.iter().map(|t| t.name.to_string()).collect()))
}

/// `wf serve` with `up` as its only source and `state` as its state
/// directory (kept): spawn → (complete tools/list, lists made, wf's tools
/// of this source).
async fn wf(
    env: &Env,
    up: &Upstream,
    state: &std::path::Path,
    expected: &BTreeSet<String>,
) -> anyhow::Result<(Duration, usize, usize)> {
    let config = env.scratch.join(format!("npm-{}.json", up.source));
    let doc = json!({"sources": {up.source: up.source()}});
    std::fs::write(&config, serde_json::to_vec_pretty(&doc)?)
        .with_context(|| format!("cannot write {}", config.display()))?;
    let mut cmd = Command::new(&env.wf);
    cmd.arg("serve")
        .arg("--config")
        .arg(&config)
        .arg("--state-dir")
        .arg(state)
        .env("WF_LOG", "warn");
    let log = env.scratch.join(format!("npm-{}.stderr", up.source));
    let t0 = Instant::now();
    let mut wf = McpProc::start("wf", cmd, Some(&log), HANDSHAKE_TIMEOUT).await?;
    let (complete, lists) = until_complete(&wf.peer(), expected, t0).await?;
    let prefix = format!("{}__", up.source);
    let tools = wf
        .peer()
        .list_all_tools()
        .await
        .context("wf tools/list")?
        .iter()
        .filter(|t| t.name.starts_with(&prefix))
        .count();
    wf.stop().await;
    Ok((complete, lists, tools))
}
