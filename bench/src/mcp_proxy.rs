//! Gateways side by side (`--only gateways`, issue #59): wf's HTTP front,
//! mcp-proxy 0.6.0 (a Rust gateway on tower, from crates.io) and FastMCP's
//! proxy, each in front of the same stdio upstream (the Rust fixture), in
//! interleaved rounds: p50 and p99 of one client's echo calls, calls per
//! second with 16 and 64 concurrent 2025-11-25 sessions, the gateway's
//! resident memory after the latency rounds (over 1,000 calls), how many
//! upstream processes it runs, and the latency and gateway CPU of calls that
//! carry 64 KiB each way.
//!
//! mcp-proxy is installed on first use with `cargo install --locked` into a
//! cache (`~/.cache/wf-bench/mcp-proxy-0.6.0`, or `$WF_BENCH_CACHE`), so it
//! builds once; only this benchmark does that, never the smoke run. A peer
//! that cannot be installed or started is reported and skipped.

use std::path::PathBuf;
use std::sync::Arc;
use std::time::{Duration, Instant};

use serde_json::json;
use tokio::task::JoinSet;

use crate::Env;
use crate::proc::{Cpu, McpProc, echo, rss_kib};
use crate::stats::{delta_us, mib, percentile, us};
use crate::web::{Generation, HttpWf, WebClient};

/// The peer's pinned version.
pub const VERSION: &str = "0.6.0";

/// Where the pinned mcp-proxy is cached.
fn cache_root() -> PathBuf {
    let base = std::env::var_os("WF_BENCH_CACHE")
        .map(PathBuf::from)
        .or_else(|| std::env::var_os("HOME").map(|h| PathBuf::from(h).join(".cache/wf-bench")))
        .unwrap_or_else(|| std::env::temp_dir().join("wf-bench-cache"));
    base.join(format!("mcp-proxy-{VERSION}"))
}

/// The cached mcp-proxy binary, installed with cargo when missing.
pub fn binary() -> anyhow::Result<PathBuf> {
    let root = cache_root();
    let bin = root.join("bin/mcp-proxy");
    if bin.exists() {
        return Ok(bin);
    }
    eprintln!(
        "wf-bench: installing mcp-proxy {VERSION} into {} (once)",
        root.display()
    );
    let status = std::process::Command::new(std::env::var("CARGO").unwrap_or("cargo".into()))
        .args([
            "install",
            "--locked",
            "mcp-proxy",
            "--version",
            VERSION,
            "--root",
        ])
        .arg(&root)
        .status()?;
    anyhow::ensure!(
        status.success() && bin.exists(),
        "cargo install mcp-proxy {VERSION} failed ({status})"
    );
    Ok(bin)
}

/// One gateway under test.
struct Gateway {
    name: String,
    server: HttpWf,
    /// The echo tool's name behind it.
    tool: &'static str,
    /// The process whose memory is the gateway's.
    pid: u32,
}

/// An mcp-proxy config: one stdio backend `fx`, tools named `fx/TOOL`, and
/// its log level spelled out. Without an `[observability]` table mcp-proxy
/// 0.6.0 takes the table's derived default, an empty level, which its log
/// filter reads as "everything": two debug lines a call on stderr, whatever
/// `RUST_LOG` says (it builds its filter from the config alone).
fn proxy_config(env: &Env, addr: &str) -> anyhow::Result<PathBuf> {
    let (host, port) = addr.rsplit_once(':').unwrap_or(("127.0.0.1", addr));
    let path = env.scratch.join("mcp-proxy.toml");
    let text = format!(
        "[proxy]\nname = \"bench\"\nseparator = \"/\"\n\n[proxy.listen]\nhost = \"{host}\"\nport = {port}\n\n\
         [observability]\nlog_level = \"info\"\n\n\
         [[backends]]\nname = \"fx\"\ntransport = \"stdio\"\ncommand = {:?}\n",
        env.fixture.display().to_string()
    );
    std::fs::write(&path, text)?;
    Ok(path)
}

async fn start_gateways(env: &Env, http: &reqwest::Client) -> (Vec<Gateway>, Vec<String>) {
    let mut out = Vec::new();
    let mut missing = Vec::new();
    // wf with no tuning: its governance stages present, nothing configured;
    // and the `--compare` build (e.g. target/dist/wf) beside it.
    let mut builds = vec![("wf --http".to_string(), env.wf.clone())];
    if let Some(c) = &env.compare {
        builds.push((format!("wf --http (`{}`)", c.display()), c.clone()));
    }
    for (k, (name, binary)) in builds.into_iter().enumerate() {
        let wf = async {
            let (cmd, log) = env.wf_command_with(
                &binary,
                &format!("gw-wf{k}"),
                json!({"fx": env.fixture_source(0)}),
            )?;
            let server = HttpWf::start(cmd, &log).await?;
            WebClient::connect(http, &server.url, Generation::Sessions2025)
                .await?
                .echo("fx__echo", "ready")
                .await?;
            anyhow::Ok(server)
        };
        match wf.await {
            Ok(server) => out.push(Gateway {
                name,
                pid: server.pid,
                server,
                tool: "fx__echo",
            }),
            Err(e) => missing.push(format!("{name}: {e:#}")),
        }
    }
    let proxy = async {
        let bin = binary()?;
        let log = env.scratch.join("gw-mcp-proxy.stderr");
        let cmd = tokio::process::Command::new(bin);
        let mut config = None;
        let mut server = HttpWf::start_with(cmd, &log, |cmd, addr| {
            if let Ok(p) = proxy_config(env, addr) {
                cmd.arg("--config").arg(&p);
                config = Some(p);
            }
        })
        .await?;
        anyhow::ensure!(config.is_some(), "cannot write the mcp-proxy config");
        server.url = server.url.trim_end_matches("mcp").to_string();
        WebClient::connect(http, &server.url, Generation::Sessions2025)
            .await?
            .echo("fx/echo", "ready")
            .await?;
        anyhow::Ok(server)
    };
    match proxy.await {
        Ok(server) => out.push(Gateway {
            name: format!("mcp-proxy {VERSION}"),
            pid: server.pid,
            server,
            tool: "fx/echo",
        }),
        Err(e) => missing.push(format!("mcp-proxy {VERSION}: {e:#}")),
    }
    if let Some(python) = &env.fastmcp_python {
        let fast = async {
            let mut cmd = tokio::process::Command::new(python);
            cmd.arg(crate::peers::fastmcp_script()).arg(&env.fixture);
            let log = env.scratch.join("gw-fastmcp.stderr");
            let server = HttpWf::start(cmd, &log).await?;
            WebClient::connect(http, &server.url, Generation::Sessions2025)
                .await?
                .echo("echo", "ready")
                .await?;
            anyhow::Ok(server)
        };
        match fast.await {
            Ok(server) => out.push(Gateway {
                name: "FastMCP proxy".into(),
                pid: server.pid,
                server,
                tool: "echo",
            }),
            Err(e) => missing.push(format!("FastMCP proxy (`{}`): {e:#}", python.display())),
        }
    }
    (out, missing)
}

/// Upstream processes below `pid` that run the fixture.
fn upstreams(pid: u32, fixture: &std::path::Path) -> usize {
    crate::proc::descendants_running(pid, &fixture.display().to_string())
}

/// Calls per second of `sessions` concurrent 2025-11-25 clients of `url`, each calling
/// `tool` in a loop for `span` (also `wf-bench --load`, to profile a running gateway).
pub async fn calls_per_second(
    http: &reqwest::Client,
    url: &str,
    tool: &str,
    sessions: usize,
    span: Duration,
) -> anyhow::Result<f64> {
    let mut clients = Vec::with_capacity(sessions);
    for _ in 0..sessions {
        clients.push(WebClient::connect(http, url, Generation::Sessions2025).await?);
    }
    let tool: Arc<str> = tool.into();
    let start = Arc::new(tokio::sync::Barrier::new(sessions + 1));
    let mut set = JoinSet::new();
    for (k, mut c) in clients.into_iter().enumerate() {
        let start = start.clone();
        let tool = tool.clone();
        set.spawn(async move {
            start.wait().await;
            let until = Instant::now() + span;
            let mut n = 0u64;
            while Instant::now() < until {
                c.echo(&tool, &format!("wf-bench gateways {k} {n}")).await?;
                n += 1;
            }
            anyhow::Ok(n)
        });
    }
    start.wait().await;
    let t = Instant::now();
    let mut calls = 0;
    while let Some(r) = set.join_next().await {
        calls += r??;
    }
    Ok(calls as f64 / t.elapsed().as_secs_f64())
}

/// The echo message of the large-message rounds, carried both ways: a tool
/// result of this size is ordinary (a browser snapshot, a file read).
const LARGE_BYTES: usize = 64 * 1024;

/// A [`LARGE_BYTES`] message, unique by its head.
fn large_message(round: usize, i: usize) -> String {
    let mut m = format!("wf-bench large {round:03} {i:06} ");
    while m.len() < LARGE_BYTES {
        m.push_str("lorem ipsum dolor sit amet, ");
    }
    m.truncate(LARGE_BYTES);
    m
}

/// Lines in a gateway's stderr log (0 when unreadable).
fn log_lines(path: &std::path::Path) -> usize {
    std::fs::read(path).map_or(0, |b| b.iter().filter(|&&c| c == b'\n').count())
}

fn median(mut v: Vec<f64>) -> f64 {
    v.sort_by(f64::total_cmp);
    v.get(v.len() / 2).copied().unwrap_or(0.0)
}

pub async fn run(env: &Env) -> anyhow::Result<()> {
    eprintln!("wf-bench: gateways");
    let (warmup, batch, rounds, span, tp_rounds) = if env.quick {
        (50, 50, 4, Duration::from_secs(1), 1)
    } else {
        (300, 250, 8, Duration::from_secs(5), 3)
    };
    let http = reqwest::Client::new();
    let direct = McpProc::start(
        "fixture (direct)",
        env.fixture_command(0),
        None,
        crate::HANDSHAKE_TIMEOUT,
    )
    .await?;
    let (gateways, missing) = start_gateways(env, &http).await;
    let mut clients = Vec::new();
    for g in &gateways {
        clients.push(WebClient::connect(&http, &g.server.url, Generation::Sessions2025).await?);
    }
    let n = gateways.len() + 1;
    let mut lat: Vec<Vec<Duration>> = vec![Vec::new(); n];
    for i in 0..warmup {
        echo(&direct.peer(), "echo", &format!("warm {i}")).await?;
        for (g, c) in gateways.iter().zip(clients.iter_mut()) {
            c.echo(g.tool, &format!("warm {i}")).await?;
        }
    }
    for round in 0..rounds {
        let mut order: Vec<usize> = (0..n).collect();
        order.rotate_left(round % n);
        for k in order {
            for i in 0..batch {
                let msg = format!("wf-bench gateways {round:03} {i:06}");
                let t = Instant::now();
                match k {
                    0 => echo(&direct.peer(), "echo", &msg).await?,
                    _ => clients[k - 1].echo(gateways[k - 1].tool, &msg).await?,
                }
                lat[k].push(t.elapsed());
            }
        }
    }
    // Memory after warmup + rounds × batch calls (≥ 1,000 in a full run).
    let rss: Vec<u64> = gateways
        .iter()
        .map(|g| rss_kib(g.pid).map_or(0, |m| m.0))
        .collect();
    let mut tp: Vec<[Vec<f64>; 2]> = vec![[Vec::new(), Vec::new()]; gateways.len()];
    for round in 0..tp_rounds {
        for (s, sessions) in [16usize, 64].into_iter().enumerate() {
            let mut order: Vec<usize> = (0..gateways.len()).collect();
            order.rotate_left(round % gateways.len().max(1));
            for k in order {
                let g = &gateways[k];
                let rate = calls_per_second(&http, &g.server.url, g.tool, sessions, span).await?;
                tp[k][s].push(rate);
            }
        }
    }
    // Large messages, after the RSS reading (their buffers would weigh in
    // it): latency, and each gateway's CPU a call summed over its threads.
    let (large_rounds, large_batch) = if env.quick { (2, 10) } else { (rounds, 25) };
    let mut big: Vec<Vec<Duration>> = vec![Vec::new(); n];
    let mut big_cpu = vec![Cpu::default(); gateways.len()];
    for i in 0..5 {
        let msg = large_message(999, i);
        echo(&direct.peer(), "echo", &msg).await?;
        for (g, c) in gateways.iter().zip(clients.iter_mut()) {
            c.echo(g.tool, &msg).await?;
        }
    }
    for round in 0..large_rounds {
        let mut order: Vec<usize> = (0..n).collect();
        order.rotate_left(round % n);
        for k in order {
            let before = (k > 0).then(|| Cpu::of(gateways[k - 1].pid));
            for i in 0..large_batch {
                let msg = large_message(round, i);
                let t = Instant::now();
                match k {
                    0 => echo(&direct.peer(), "echo", &msg).await?,
                    _ => clients[k - 1].echo(gateways[k - 1].tool, &msg).await?,
                }
                big[k].push(t.elapsed());
            }
            if let Some(before) = before {
                big_cpu[k - 1].add(Cpu::of(gateways[k - 1].pid).since(before));
            }
        }
    }
    let procs: Vec<usize> = gateways
        .iter()
        .map(|g| upstreams(g.pid, &env.fixture))
        .collect();

    println!("## Gateways side by side: wf, mcp-proxy {VERSION}, FastMCP\n");
    println!(
        "One upstream for all: the Rust fixture over stdio, started by each gateway. Latency: one \
         2025-11-25 client per gateway (raw JSON-RPC over one keep-alive HTTP/1.1 connection), \
         {rounds} rounds of {batch} echo calls, the paths taking turns, after {warmup} warm-up \
         calls. Throughput: 16 and 64 concurrent 2025-11-25 sessions calling in a loop for \
         {} s, gateways taking turns, median of {tp_rounds} rounds. RSS: the gateway process \
         after the latency rounds ({} calls). Upstream processes: the fixture's processes below \
         the gateway at the end.\n",
        span.as_secs(),
        warmup + rounds * batch
    );
    println!(
        "| path | p50 | p50 added over direct | p99 | calls/s, 16 sessions | calls/s, 64 sessions | RSS | upstream processes |"
    );
    println!("|---|---:|---:|---:|---:|---:|---:|---:|");
    let d50 = percentile(&lat[0], 0.5);
    println!(
        "| direct (stdio, rmcp client) | {:.0} µs | – | {:.0} µs | – | – | – | 1 |",
        us(d50),
        us(percentile(&lat[0], 0.99))
    );
    for (k, g) in gateways.iter().enumerate() {
        let p50 = percentile(&lat[k + 1], 0.5);
        println!(
            "| {} | {:.0} µs | {} µs | {:.0} µs | {:.0} | {:.0} | {} | {} |",
            g.name,
            us(p50),
            delta_us(p50, d50),
            us(percentile(&lat[k + 1], 0.99)),
            median(tp[k][0].clone()),
            median(tp[k][1].clone()),
            mib(rss[k]),
            procs[k],
        );
    }
    println!();
    let find = |prefix: &str| gateways.iter().position(|g| g.name.starts_with(prefix));
    if let (Some(w), Some(p)) = (find("wf"), find("mcp-proxy")) {
        let added = |k: usize| us(percentile(&lat[k + 1], 0.5)) - us(d50);
        println!(
            "wf / mcp-proxy: p50 added {:.2}× (target ≤ 0.8×), calls/s at 16 sessions {:.2}× \
             (target ≥ 1.2×), at 64 sessions {:.2}×, RSS {:+.1} MiB (target ≤ +5 MiB).\n",
            added(w) / added(p).max(1.0),
            median(tp[w][0].clone()) / median(tp[p][0].clone()).max(1.0),
            median(tp[w][1].clone()) / median(tp[p][1].clone()).max(1.0),
            (rss[w] as f64 - rss[p] as f64) / 1024.0,
        );
    }
    // A gateway that logs every call pays for it in every figure above.
    let logged: Vec<String> = gateways
        .iter()
        .map(|g| format!("{} {}", g.name, log_lines(&g.server.log)))
        .collect();
    println!(
        "Lines each gateway logged over the whole run (start-up included): {}.\n",
        logged.join(", ")
    );
    let large_calls = (large_rounds * large_batch) as f64;
    println!(
        "Large messages: the same client echoes {} KiB of text (so the call carries it both \
         ways), {large_rounds} rounds of {large_batch} calls, the paths taking turns. Gateway \
         CPU: its threads' on-CPU time over its rounds, a call.\n",
        LARGE_BYTES / 1024
    );
    println!("| path | p50 | p50 added over direct | p99 | gateway CPU a call |");
    println!("|---|---:|---:|---:|---:|");
    let b50 = percentile(&big[0], 0.5);
    println!(
        "| direct (stdio, rmcp client) | {:.0} µs | – | {:.0} µs | – |",
        us(b50),
        us(percentile(&big[0], 0.99))
    );
    let big_cpu_us = |k: usize| big_cpu[k].ns as f64 / 1000.0 / large_calls;
    for (k, g) in gateways.iter().enumerate() {
        let p50 = percentile(&big[k + 1], 0.5);
        println!(
            "| {} | {:.0} µs | {} µs | {:.0} µs | {:.0} µs |",
            g.name,
            us(p50),
            delta_us(p50, b50),
            us(percentile(&big[k + 1], 0.99)),
            big_cpu_us(k),
        );
    }
    println!();
    if let (Some(w), Some(p)) = (find("wf"), find("mcp-proxy")) {
        let added = |k: usize| us(percentile(&big[k + 1], 0.5)) - us(b50);
        println!(
            "wf / mcp-proxy with {} KiB messages: p50 added {:.2}×, gateway CPU a call {:.2}×.\n",
            LARGE_BYTES / 1024,
            added(w) / added(p).max(1.0),
            big_cpu_us(w) / big_cpu_us(p).max(1.0),
        );
    }
    for m in &missing {
        println!("Not measured: {m}\n");
    }
    let mut direct = direct;
    direct.stop().await;
    for mut g in gateways {
        g.server.stop().await;
    }
    Ok(())
}
