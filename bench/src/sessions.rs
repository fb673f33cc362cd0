//! Per-client sessions: 50 HTTP clients (2025-11-25 sessions) of one
//! `wf serve --http` whose fixture source has `session = "client"`, so each
//! client's first call opens an upstream session (a fixture process) of its
//! own. Measures the time of that first call against the upstream's own
//! start (spawn + handshake + one call, no wf), calls per second with every
//! client calling at once, and wf's resident memory per open idle session.

use std::net::TcpListener;
use std::process::Stdio;
use std::time::{Duration, Instant};

use anyhow::{Context, bail};
use rmcp::service::RunningService;
use rmcp::transport::StreamableHttpClientTransport;
use rmcp::{RoleClient, ServiceExt};
use serde_json::json;
use tokio::process::Child;
use tokio::task::JoinSet;

use crate::proc::{McpProc, children, echo, rss_kib, settle_children};
use crate::stats::{median, ms, percentile, verdict};
use crate::{Env, HANDSHAKE_TIMEOUT};

const CLIENTS: usize = 50;
/// Targets: a session opens within this of the upstream's own start...
const OPEN_BUDGET_MS: f64 = 20.0;
/// ...and costs wf at most this much resident memory while idle.
const KIB_PER_SESSION: f64 = 200.0;
const TOOL: &str = "fx__echo";

type Client = RunningService<RoleClient, ()>;

pub async fn run(env: &Env) -> anyhow::Result<()> {
    eprintln!("wf-bench: sessions: {CLIENTS} clients, session = \"client\"");
    let reps = if env.quick { 5 } else { 20 };
    let mut direct = Vec::new();
    for _ in 0..reps {
        direct.push(upstream_alone(env).await?);
    }

    let port = free_port()?;
    let mut wf = start_wf(env, port).await?;
    let result = measure(env, &wf, port).await;
    let _ = wf.kill().await;
    let m = result?;

    let direct_p50 = median(&direct);
    let open_p50 = median(&m.opens);
    let extra = ms(open_p50) - ms(direct_p50);
    let per_session = (m.rss_open as f64 - m.rss_idle as f64) / CLIENTS as f64;
    println!("## Per-client sessions\n");
    println!(
        "{CLIENTS} HTTP clients (2025-11-25 sessions) of one `wf serve --http`; the fixture source \
         has `session = \"client\"`, so each client's first call opens its own upstream session \
         (a fixture process). Open = that first call, seen by the client, one client at a time; \
         the upstream's own start = spawn the fixture, MCP handshake and one call, without wf \
         (median of {reps}). Memory: wf's VmRSS with {CLIENTS} clients connected and no session, \
         then with {CLIENTS} sessions open and idle.\n"
    );
    println!("| measure | value | target |");
    println!("|---|---:|---|");
    println!(
        "| upstream's own start (spawn + handshake + call), p50 | {:.1} ms | |",
        ms(direct_p50)
    );
    println!(
        "| session open through wf (first call), p50 / p99 | {:.1} / {:.1} ms | |",
        ms(open_p50),
        ms(percentile(&m.opens, 0.99))
    );
    println!(
        "| open − upstream's own start, p50 | {extra:+.1} ms | ≤ {OPEN_BUDGET_MS} ms: {} |",
        verdict(extra <= OPEN_BUDGET_MS)
    );
    println!(
        "| calls/s, {CLIENTS} clients calling at once (each on its own session) | {:.0} | |",
        m.calls_per_s
    );
    println!(
        "| wf VmRSS, {CLIENTS} clients, no session / {CLIENTS} sessions idle | {:.1} / {:.1} MiB | |",
        m.rss_idle as f64 / 1024.0,
        m.rss_open as f64 / 1024.0
    );
    println!(
        "| wf memory per idle session | {per_session:.0} KiB | ≤ {KIB_PER_SESSION} KiB: {} |",
        verdict(per_session <= KIB_PER_SESSION)
    );
    println!();
    Ok(())
}

struct Measured {
    opens: Vec<Duration>,
    calls_per_s: f64,
    rss_idle: u64,
    rss_open: u64,
}

async fn measure(env: &Env, wf: &Child, port: u16) -> anyhow::Result<Measured> {
    let pid = wf.id().context("wf exited")?;
    let url = format!("http://127.0.0.1:{port}/mcp");
    let mut clients: Vec<Client> = Vec::new();
    for _ in 0..CLIENTS {
        let transport = StreamableHttpClientTransport::from_uri(url.clone());
        clients.push(
            tokio::time::timeout(HANDSHAKE_TIMEOUT, ().serve(transport))
                .await
                .context("no MCP handshake with wf")??,
        );
    }
    // Discovery's one-shot session has ended; no per-client session yet.
    eprintln!("wf-bench: sessions: {CLIENTS} clients connected");
    wait_listed(&clients[0]).await?;
    settle_children(pid, 0).await;
    let rss_idle = settled_rss(pid).await?;

    let mut opens = Vec::new();
    for (i, c) in clients.iter().enumerate() {
        let t = Instant::now();
        echo(c.peer(), TOOL, &format!("open {i}")).await?;
        opens.push(t.elapsed());
    }
    if !settle_children(pid, CLIENTS).await {
        bail!(
            "expected {CLIENTS} upstream sessions (children of wf), found {}",
            children(pid).len()
        );
    }
    let rss_open = settled_rss(pid).await?;
    eprintln!("wf-bench: sessions: {CLIENTS} sessions open");

    let per_client = if env.quick { 40 } else { 400 };
    let t = Instant::now();
    let mut set = JoinSet::new();
    for (i, c) in clients.iter().enumerate() {
        let peer = c.peer().clone();
        set.spawn(async move {
            for n in 0..per_client {
                echo(&peer, TOOL, &format!("c{i} {n}")).await?;
            }
            anyhow::Ok(())
        });
    }
    while let Some(r) = set.join_next().await {
        r??;
    }
    let calls_per_s = (CLIENTS * per_client) as f64 / t.elapsed().as_secs_f64();
    for c in clients {
        let _ = tokio::time::timeout(Duration::from_secs(2), c.cancel()).await;
    }
    Ok(Measured {
        opens,
        calls_per_s,
        rss_idle,
        rss_open,
    })
}

/// The fixture on its own: spawn, handshake and one call.
async fn upstream_alone(env: &Env) -> anyhow::Result<Duration> {
    let t = Instant::now();
    let mut p = McpProc::start("fixture", env.fixture_command(0), None, HANDSHAKE_TIMEOUT).await?;
    echo(&p.peer(), "echo", "alone").await?;
    let took = t.elapsed();
    p.stop().await;
    Ok(took)
}

async fn start_wf(env: &Env, port: u16) -> anyhow::Result<Child> {
    let source = env.fixture_source(0);
    let mut fx = source.as_object().cloned().unwrap_or_default();
    fx.insert("session".into(), json!("client"));
    fx.insert("max_sessions".into(), json!(CLIENTS + 14));
    let (mut cmd, log) = env.wf_command("sessions", json!({ "fx": fx }))?;
    // Every client holds an SSE stream and a call: room for all of them.
    let config = env.scratch.join("sessions.json");
    let server = json!({"max_requests_per_principal": 4 * CLIENTS, "max_sessions": 4 * CLIENTS});
    std::fs::write(
        &config,
        serde_json::to_vec(&json!({"server": server, "sources": {"fx": fx}}))?,
    )?;
    let err = std::fs::File::create(&log)?;
    cmd.arg("--http")
        .arg(format!("127.0.0.1:{port}"))
        .stdin(Stdio::null())
        .stdout(Stdio::null())
        .stderr(err)
        .kill_on_drop(true);
    let mut child = cmd.spawn().context("cannot start wf serve --http")?;
    let until = Instant::now() + HANDSHAKE_TIMEOUT;
    while tokio::net::TcpStream::connect(("127.0.0.1", port))
        .await
        .is_err()
    {
        if let Some(status) = child.try_wait()? {
            bail!("wf serve --http exited ({status}); see {}", log.display());
        }
        if Instant::now() > until {
            bail!("wf serve --http did not listen on {port}");
        }
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
    Ok(child)
}

fn free_port() -> anyhow::Result<u16> {
    Ok(TcpListener::bind("127.0.0.1:0")?.local_addr()?.port())
}

async fn wait_listed(c: &Client) -> anyhow::Result<()> {
    let until = Instant::now() + Duration::from_secs(20);
    loop {
        let tools = c.peer().list_all_tools().await?;
        if tools.iter().any(|t| t.name == TOOL) {
            return Ok(());
        }
        if Instant::now() > until {
            bail!("{TOOL} was never listed");
        }
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
}

/// wf's VmRSS (KiB) once it has held still for a moment.
async fn settled_rss(pid: u32) -> anyhow::Result<u64> {
    tokio::time::sleep(Duration::from_millis(500)).await;
    rss_kib(pid)
        .map(|r| r.0)
        .with_context(|| format!("cannot read /proc/{pid}/status"))
}
