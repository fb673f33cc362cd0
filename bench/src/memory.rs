//! The host's resident memory: with wf.std only, then with 10 fixture
//! sources discovered, connected (one call each, so every persistent
//! session is open) and after a burst of calls; and what holds it at rest:
//! `wf serve --http` with one fixture source after 1,000 calls, its
//! resident pages by mapping, with and without the start-up code released.

use std::collections::BTreeSet;
use std::time::{Duration, Instant};

use anyhow::bail;
use serde_json::{Map, Value, json};
use tokio::task::JoinSet;

use crate::proc::{McpProc, children, echo, rss_kib, settle_children};
use crate::startup::until_complete;
use crate::stats::mib;
use crate::{Env, HANDSHAKE_TIMEOUT};

const SOURCES: usize = 10;

struct Row {
    state: String,
    wf: (u64, u64),
    children: Vec<u64>,
}

pub async fn run(env: &Env) -> anyhow::Result<()> {
    eprintln!("wf-bench: memory");
    let mut rows = Vec::new();

    // wf.std only: the floor.
    let (cmd, log) = env.wf_command("memory-empty", json!({}))?;
    let mut wf = McpProc::start("wf", cmd, Some(&log), HANDSHAKE_TIMEOUT).await?;
    wf.peer().list_all_tools().await?;
    rows.push(sample(&wf, "wf.std only (no upstream sources)").await?);
    wf.stop().await;

    let mut sources = Map::new();
    for i in 0..SOURCES {
        sources.insert(format!("s{i}"), env.fixture_source(0));
    }
    let expected: BTreeSet<String> = (0..SOURCES).map(|i| format!("s{i}__echo")).collect();
    let (cmd, log) = env.wf_command("memory-10", Value::Object(sources))?;
    let t0 = Instant::now();
    let mut wf = McpProc::start("wf", cmd, Some(&log), HANDSHAKE_TIMEOUT).await?;
    let peer = wf.peer();
    until_complete(&peer, &expected, t0).await?;
    settle_children(wf.pid, 0).await;
    rows.push(sample(&wf, "10 sources discovered, no session open yet").await?);

    for tool in &expected {
        echo(&peer, tool, "open the persistent session").await?;
    }
    if !settle_children(wf.pid, SOURCES).await {
        bail!(
            "expected {SOURCES} upstream children of wf, found {}",
            children(wf.pid).len()
        );
    }
    rows.push(sample(&wf, "10 sources connected (one call each)").await?);

    let burst = if env.quick { 1_000 } else { 20_000 };
    let tools: Vec<String> = expected.iter().cloned().collect();
    let mut set = JoinSet::new();
    for c in 0..16 {
        let (peer, tools) = (peer.clone(), tools.clone());
        set.spawn(async move {
            for n in (c..burst).step_by(16) {
                echo(&peer, &tools[n % tools.len()], &format!("burst {n}")).await?;
            }
            anyhow::Ok(())
        });
    }
    while let Some(r) = set.join_next().await {
        r??;
    }
    rows.push(
        sample(
            &wf,
            &format!("10 sources connected, after {burst} more calls (16 concurrent)"),
        )
        .await?,
    );
    wf.stop().await;

    println!("## Memory\n");
    println!(
        "VmRSS (VmHWM = peak) of the `wf` process from /proc; its upstream children (the fixture, \
         one per source once connected) are counted separately.\n"
    );
    println!("| state | wf VmRSS | wf VmHWM | upstream children | their VmRSS (total) |");
    println!("|---|---:|---:|---:|---:|");
    for r in &rows {
        let total: u64 = r.children.iter().sum();
        let each = if r.children.is_empty() {
            String::new()
        } else {
            format!(", ~{} each", mib(total / r.children.len() as u64))
        };
        println!(
            "| {} | {} | {} | {} | {}{each} |",
            r.state,
            mib(r.wf.0),
            mib(r.wf.1),
            r.children.len(),
            mib(total)
        );
    }
    println!();
    at_rest(env).await
}

/// Where a process's resident pages are, in KiB, from /proc/PID/smaps.
#[derive(Default, Clone, Copy)]
struct Breakdown {
    rss: u64,
    /// File pages of the `wf` executable (code and constants).
    wf: u64,
    /// File pages of plugin libraries (`libwf_source_*`).
    plugins: u64,
    /// File pages of other libraries (libc, libm, the loader).
    system: u64,
    /// Private pages: heaps, thread stacks, relocated constants.
    anonymous: u64,
    threads: usize,
}

fn breakdown(pid: u32, exe: &std::path::Path) -> Option<Breakdown> {
    let smaps = std::fs::read_to_string(format!("/proc/{pid}/smaps")).ok()?;
    let exe = std::fs::canonicalize(exe).unwrap_or_else(|_| exe.to_path_buf());
    let mut b = Breakdown::default();
    let mut path = String::new();
    let mut rss = 0;
    let kib = |l: &str| {
        l.split_ascii_whitespace()
            .nth(1)
            .and_then(|v| v.parse::<u64>().ok())
            .unwrap_or(0)
    };
    for line in smaps.lines() {
        let head = line.split_ascii_whitespace().next().unwrap_or("");
        if head.contains('-') && !head.ends_with(':') {
            path = line
                .split_ascii_whitespace()
                .nth(5)
                .unwrap_or("")
                .to_string();
        } else if line.starts_with("Rss:") {
            rss = kib(line);
            b.rss += rss;
        } else if line.starts_with("Anonymous:") {
            let anon = kib(line);
            b.anonymous += anon;
            let file = rss.saturating_sub(anon);
            if std::path::Path::new(&path) == exe {
                b.wf += file;
            } else if path.contains("libwf_source_") {
                b.plugins += file;
            } else {
                b.system += file;
            }
        }
    }
    b.threads = std::fs::read_dir(format!("/proc/{pid}/task")).ok()?.count();
    Some(b)
}

/// One way of running wf at rest: its binary and extra environment.
struct Variant {
    name: String,
    binary: std::path::PathBuf,
    env: Vec<(String, String)>,
}

/// The variants measured at rest: the start-up code released (the default)
/// and kept (`WF_KEEP_CODE_PAGES=1`); the `--compare` build beside them; and
/// one row per `;`-separated entry of `WF_BENCH_REST_ENV` (space-separated
/// `NAME=VALUE`s set for wf, e.g. `MIMALLOC_PURGE_DELAY=1;MALLOC_ARENA_MAX=1`).
fn variants(env: &Env) -> Vec<Variant> {
    let plain = |name: &str, vars: &[(&str, &str)]| Variant {
        name: name.to_string(),
        binary: env.wf.clone(),
        env: vars
            .iter()
            .map(|(k, v)| (k.to_string(), v.to_string()))
            .collect(),
    };
    let mut out = vec![
        plain("wf --http (start-up code released)", &[]),
        plain(
            "wf --http, `WF_KEEP_CODE_PAGES=1`",
            &[("WF_KEEP_CODE_PAGES", "1")],
        ),
    ];
    if let Some(c) = &env.compare {
        out.push(Variant {
            name: format!("wf --http, `{}`", c.display()),
            binary: c.clone(),
            env: Vec::new(),
        });
    }
    let extra = std::env::var("WF_BENCH_REST_ENV").unwrap_or_default();
    for entry in extra.split(';').map(str::trim).filter(|e| !e.is_empty()) {
        let vars: Vec<(String, String)> = entry
            .split_ascii_whitespace()
            .filter_map(|kv| kv.split_once('='))
            .map(|(k, v)| (k.to_string(), v.to_string()))
            .collect();
        out.push(Variant {
            name: format!("wf --http, `{entry}`"),
            binary: env.wf.clone(),
            env: vars,
        });
    }
    out
}

/// `wf serve --http` with one fixture source after 1,000 calls on one
/// 2025-11-25 session: what its resident memory is made of, for each of
/// [`variants`], taking turns; and the p50 of the last 500 calls (the cost
/// of a variant on the call path; the machine's load shows in it).
async fn at_rest(env: &Env) -> anyhow::Result<()> {
    use crate::web::{Generation, HttpWf, WebClient};
    const CALLS: usize = 1_000;
    const TIMED: usize = 500;
    let rounds = if env.quick { 1 } else { 3 };
    let variants = variants(env);
    let http = reqwest::Client::new();
    let mut got: Vec<Vec<Breakdown>> = vec![Vec::new(); variants.len()];
    let mut lat: Vec<Vec<Duration>> = vec![Vec::new(); variants.len()];
    for _ in 0..rounds {
        for (k, v) in variants.iter().enumerate() {
            let (mut cmd, log) = env.wf_command_with(
                &v.binary,
                &format!("rest-{k}"),
                json!({"fx": env.fixture_source(0)}),
            )?;
            cmd.envs(v.env.iter().map(|(k, v)| (k, v)));
            let mut server = HttpWf::start(cmd, &log).await?;
            let mut client =
                WebClient::connect(&http, &server.url, Generation::Sessions2025).await?;
            let mut times = Vec::with_capacity(TIMED);
            for i in 0..CALLS {
                let t = Instant::now();
                client.echo("fx__echo", &format!("at rest {i}")).await?;
                if i >= CALLS - TIMED {
                    times.push(t.elapsed());
                }
            }
            lat[k].push(crate::stats::percentile(&times, 0.5));
            tokio::time::sleep(Duration::from_millis(300)).await;
            let b = breakdown(server.pid, &v.binary);
            server.stop().await;
            got[k]
                .push(b.ok_or_else(|| anyhow::anyhow!("cannot read /proc/{}/smaps", server.pid))?);
        }
    }
    println!("## Memory at rest\n");
    println!(
        "`wf serve --http` with one fixture source (stdio), after {CALLS} echo calls on one \
         2025-11-25 session; resident pages from /proc/PID/smaps, median of {rounds} runs taking \
         turns. File pages are shared with the page cache; anonymous ones are wf's own. p50: of \
         the last {TIMED} calls, median of the runs.\n"
    );
    println!(
        "| wf | RSS | `wf` binary | plugin libraries | other libraries | anonymous (heap, stacks, relocations) | threads | p50 |"
    );
    println!("|---|---:|---:|---:|---:|---:|---:|---:|");
    for ((v, runs), lat) in variants.iter().zip(&got).zip(&lat) {
        let med = |f: fn(&Breakdown) -> u64| {
            let mut v: Vec<u64> = runs.iter().map(f).collect();
            v.sort_unstable();
            v[v.len() / 2]
        };
        let mut p50 = lat.clone();
        p50.sort_unstable();
        println!(
            "| {} | {} | {} | {} | {} | {} | {} | {:.0} µs |",
            v.name,
            mib(med(|b| b.rss)),
            mib(med(|b| b.wf)),
            mib(med(|b| b.plugins)),
            mib(med(|b| b.system)),
            mib(med(|b| b.anonymous)),
            med(|b| b.threads as u64),
            crate::stats::us(p50[p50.len() / 2]),
        );
    }
    println!();
    Ok(())
}

async fn sample(wf: &McpProc, state: &str) -> anyhow::Result<Row> {
    tokio::time::sleep(Duration::from_millis(300)).await;
    let Some(rss) = rss_kib(wf.pid) else {
        bail!("cannot read /proc/{}/status", wf.pid);
    };
    let children = children(wf.pid)
        .into_iter()
        .filter_map(|p| rss_kib(p).map(|r| r.0))
        .collect();
    Ok(Row {
        state: state.to_string(),
        wf: rss,
        children,
    })
}
