//! Load and soak through the HTTP front to a stdio fixture upstream:
//!
//! - load: 200 concurrent 2025-11-25 clients, each on its own session, 50
//!   calls each; errors, p50/p99, and wf's resident memory and open file
//!   descriptors before, at peak (sampled every 20 ms) and after;
//!   (once with a per-client upstream session each, once with one shared);
//! - soak: 100 000 calls on one session of a fresh wf; resident memory after
//!   the first 10 000 against after all, and file descriptors against the
//!   baseline;
//! - default config: 100 and 300 clients × 20 echo calls of real
//!   server-everything (stdio) through a wf with no tuning at all: errors,
//!   p50/p99 and how many upstream processes served them.

use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::{Duration, Instant};

use serde_json::json;
use tokio::sync::Mutex;
use tokio::task::JoinSet;

use crate::Env;
use crate::proc::rss_kib;
use crate::stats::{mib, ms, percentile, us, verdict};
use crate::web::{Generation, HttpWf, WebClient, fds};

/// Memory after the soak may exceed memory after its first tenth by this share.
const RSS_GROWTH: f64 = 0.10;
/// Concurrent callers sharing the soak's one session.
const SOAK_CALLERS: usize = 8;

#[derive(Clone, Copy, Default)]
struct Mem {
    rss_kib: u64,
    fds: usize,
}

fn mem(pid: u32) -> Mem {
    Mem {
        rss_kib: rss_kib(pid).map_or(0, |m| m.0),
        fds: fds(pid).unwrap_or(0),
    }
}

/// How many clients and calls each phase makes.
struct Size {
    clients: usize,
    calls: usize,
    soak: usize,
    checkpoint: usize,
}

/// One load phase's results.
struct LoadResult {
    scope: &'static str,
    generation: Generation,
    lat: Vec<Duration>,
    errors: Vec<String>,
    elapsed: Duration,
    before: Mem,
    at_peak: Mem,
    after: Mem,
}

pub async fn run(env: &Env) -> anyhow::Result<()> {
    let mut size = if env.quick {
        Size {
            clients: 50,
            calls: 10,
            soak: 10_000,
            checkpoint: 1_000,
        }
    } else {
        Size {
            clients: 200,
            calls: 50,
            soak: 100_000,
            checkpoint: 10_000,
        }
    };
    // A longer soak on demand: does the memory level off?
    if let Some(n) = std::env::var("WF_BENCH_SOAK_CALLS")
        .ok()
        .and_then(|v| v.parse().ok())
    {
        size.soak = n;
    }
    let mut loads = Vec::new();
    // `session = "client"`: each client's first call opens its own upstream
    // session (a fixture process). "shared" (the default) is one upstream
    // session for everyone.
    // Then the same load from stateless 2026-07-28 clients: no session to
    // open or close, each call its own request (answered in place by wf).
    for (scope, generation) in [
        ("client", Generation::Sessions2025),
        ("shared", Generation::Sessions2025),
        ("shared", Generation::Stateless2026),
    ] {
        eprintln!(
            "wf-bench: load: {} {} clients × {} calls, session = {scope:?}",
            size.clients,
            kind(generation),
            size.calls
        );
        loads.push(load(env, &size, scope, generation).await?);
    }
    eprintln!("wf-bench: soak: {} calls on one session", size.soak);
    let soak = soak(env, &size).await?;
    print(&size, &loads, &soak);
    defaults(env).await
}

/// One row of the default-config load.
struct DefaultRow {
    clients: usize,
    calls: usize,
    lat: Vec<Duration>,
    errors: Vec<String>,
    elapsed: Duration,
    upstreams: usize,
}

/// 100 and 300 clients × 20 echo calls through a wf started on a config
/// that names one stdio source (real server-everything) and nothing else:
/// the per-principal bound (64 calls in progress), its queue and the session
/// scope are all at their defaults.
async fn defaults(env: &Env) -> anyhow::Result<()> {
    let Some(everything) = &env.everything else {
        println!(
            "## Load on the default config\n\nSkipped: no mcp-server-everything \
             (--everything, or run tests/run once to install it).\n"
        );
        return Ok(());
    };
    let sizes: &[(usize, usize)] = if env.quick {
        &[(30, 5), (90, 5)]
    } else {
        &[(100, 20), (300, 20)]
    };
    let mut rows = Vec::new();
    for &(clients, calls) in sizes {
        eprintln!("wf-bench: load: default config, {clients} clients × {calls} calls");
        let (cmd, log) = env.wf_command_with_config(
            &env.wf,
            &format!("load-default-{clients}"),
            json!({"sources": {"everything": {"command": everything}}}),
        )?;
        let mut server = HttpWf::start(cmd, &log).await?;
        let http = reqwest::Client::builder()
            .pool_max_idle_per_host(clients * 2)
            .build()?;
        // Until server-everything is discovered its tools are unknown.
        let deadline = Instant::now() + Duration::from_secs(60);
        loop {
            let mut first =
                WebClient::connect(&http, &server.url, Generation::Sessions2025).await?;
            let warm = first.echo("everything__echo", "wf-bench warm-up").await;
            first.close().await?;
            match warm {
                Ok(()) => break,
                Err(e) if Instant::now() > deadline => return Err(e),
                Err(_) => tokio::time::sleep(Duration::from_millis(100)).await,
            }
        }
        let upstreams = Arc::new(std::sync::atomic::AtomicUsize::new(0));
        let sampling = Arc::new(AtomicBool::new(true));
        let sampler = {
            let (upstreams, sampling, pid) = (upstreams.clone(), sampling.clone(), server.pid);
            tokio::spawn(async move {
                while sampling.load(Ordering::Relaxed) {
                    let n = crate::proc::descendants_running(pid, "everything");
                    upstreams.fetch_max(n, Ordering::Relaxed);
                    tokio::time::sleep(Duration::from_millis(50)).await;
                }
            })
        };
        let started = Instant::now();
        let (lat, errors) = clients_at_once(
            &http,
            &server.url,
            Generation::Sessions2025,
            "everything__echo",
            clients,
            calls,
        )
        .await;
        let elapsed = started.elapsed();
        sampling.store(false, Ordering::Relaxed);
        let _ = sampler.await;
        server.stop().await;
        rows.push(DefaultRow {
            clients,
            calls,
            lat,
            errors,
            elapsed,
            upstreams: upstreams.load(Ordering::Relaxed),
        });
    }
    println!("## Load on the default config: real server-everything, no tuning\n");
    println!(
        "Clients all at once, each a 2025-11-25 session (initialize, echo calls one after \
         another, DELETE), against a fresh `wf serve --http` whose config names one stdio \
         source (`mcp-server-everything`) and nothing else: 64 calls in progress per \
         principal (every client here is `local`), the rest waiting in the principal's queue \
         up to 5 s, and the default session scope. Upstream processes: the most seen at once \
         below wf, sampled every 50 ms.\n"
    );
    println!(
        "| clients × calls | errors | p50 | p99 | wall time | calls/s | upstream processes | target |"
    );
    println!("|---|---:|---:|---:|---:|---:|---:|---|");
    for r in &rows {
        println!(
            "| {} × {} | {} | {:.1} ms | {:.1} ms | {:.1} s | {:.0} | {} | 0 errors: {} |",
            r.clients,
            r.calls,
            r.errors.len(),
            ms(percentile(&r.lat, 0.5)),
            ms(percentile(&r.lat, 0.99)),
            r.elapsed.as_secs_f64(),
            r.lat.len() as f64 / r.elapsed.as_secs_f64(),
            r.upstreams,
            verdict(r.errors.is_empty())
        );
    }
    for r in rows.iter().filter(|r| !r.errors.is_empty()) {
        let mut shown = r.errors.clone();
        shown.sort();
        shown.dedup();
        println!(
            "\nFirst distinct errors ({} clients): {:?}",
            r.clients,
            &shown[..shown.len().min(3)]
        );
    }
    println!();
    Ok(())
}

/// `wf serve --http` in front of the fixture, with room for `size.clients`
/// callers (every bench client is the one local principal).
async fn start(env: &Env, name: &str, size: &Size, scope: &str) -> anyhow::Result<HttpWf> {
    let mut fx = env.fixture_source(0);
    fx["session"] = json!(scope);
    fx["max_sessions"] = json!(size.clients + 16);
    let (cmd, log) = env.wf_command_with_server(
        &env.wf,
        name,
        json!({"fx": fx}),
        // The default allows 64 requests in flight per principal.
        json!({"max_requests_per_principal": 1024, "max_sessions": 1024, "max_connections": 1024}),
    )?;
    HttpWf::start(cmd, &log).await
}

/// Each phase has its own HTTP client, dropped (closing its kept-alive
/// connections) before wf's fds are counted: what stays open is wf's.
fn pool(size: &Size) -> anyhow::Result<reqwest::Client> {
    Ok(reqwest::Client::builder()
        .pool_max_idle_per_host(size.clients * 2)
        .build()?)
}

/// How a load row's clients speak.
fn kind(generation: Generation) -> &'static str {
    match generation {
        Generation::Sessions2025 => "2025-11-25 session",
        Generation::Stateless2026 => "2026-07-28 stateless",
    }
}

async fn load(
    env: &Env,
    size: &Size,
    scope: &'static str,
    generation: Generation,
) -> anyhow::Result<LoadResult> {
    let name = format!("load-{scope}-{}", kind(generation).replace(' ', "-"));
    let mut server = start(env, &name, size, scope).await?;
    // Baseline: wf up, its shared upstream session open, no client connected.
    {
        let http = pool(size)?;
        let mut first = WebClient::connect(&http, &server.url, generation).await?;
        first.echo("fx__echo", "wf-bench load warm-up").await?;
        first.close().await?;
    }
    tokio::time::sleep(Duration::from_millis(500)).await;
    let before = mem(server.pid);
    let http = pool(size)?;

    // Peak sampler.
    let peak = Arc::new(Mutex::new(before));
    let sampling = Arc::new(AtomicBool::new(true));
    let sampler = {
        let (peak, sampling, pid) = (peak.clone(), sampling.clone(), server.pid);
        tokio::spawn(async move {
            while sampling.load(Ordering::Relaxed) {
                let m = mem(pid);
                let mut p = peak.lock().await;
                p.rss_kib = p.rss_kib.max(m.rss_kib);
                p.fds = p.fds.max(m.fds);
                drop(p);
                tokio::time::sleep(Duration::from_millis(20)).await;
            }
        })
    };
    let started = Instant::now();
    let (lat, errors) = clients_at_once(
        &http,
        &server.url,
        generation,
        "fx__echo",
        size.clients,
        size.calls,
    )
    .await;
    let elapsed = started.elapsed();
    sampling.store(false, Ordering::Relaxed);
    let _ = sampler.await;
    let at_peak = *peak.lock().await;
    drop(http);
    // Sessions were ended with DELETE; give wf a moment to drop them (and
    // the per-client upstream sessions with them).
    tokio::time::sleep(Duration::from_secs(1)).await;
    let after = mem(server.pid);
    server.stop().await;
    Ok(LoadResult {
        scope,
        generation,
        lat,
        errors,
        elapsed,
        before,
        at_peak,
        after,
    })
}

/// `clients` clients at once, each connecting, making `calls` echo calls of
/// `tool` one after another and closing: every call's latency, and every
/// error (a client that cannot connect counts once).
async fn clients_at_once(
    http: &reqwest::Client,
    url: &str,
    generation: Generation,
    tool: &'static str,
    clients: usize,
    calls: usize,
) -> (Vec<Duration>, Vec<String>) {
    let mut set = JoinSet::new();
    for c in 0..clients {
        let (http, url) = (http.clone(), url.to_owned());
        set.spawn(async move {
            let mut lat = Vec::with_capacity(calls);
            let mut errors = Vec::new();
            let mut client = match WebClient::connect(&http, &url, generation).await {
                Ok(c) => c,
                Err(e) => return (lat, vec![format!("connect: {e:#}")]),
            };
            for i in 0..calls {
                let t = Instant::now();
                match client
                    .echo(tool, &format!("wf-bench load {c:03} {i:03}"))
                    .await
                {
                    Ok(()) => lat.push(t.elapsed()),
                    Err(e) => errors.push(format!("{e:#}")),
                }
            }
            if let Err(e) = client.close().await {
                errors.push(format!("close: {e:#}"));
            }
            (lat, errors)
        });
    }
    let (mut lat, mut errors) = (Vec::new(), Vec::new());
    while let Some(r) = set.join_next().await {
        match r {
            Ok((l, e)) => {
                lat.extend(l);
                errors.extend(e);
            }
            Err(e) => errors.push(format!("client task: {e}")),
        }
    }
    (lat, errors)
}

/// The soak's memory and fds: at the start, after every checkpoint, at the
/// end and after the session and client are gone.
struct SoakResult {
    before: Mem,
    series: Vec<Mem>,
    after: Mem,
    errors: u64,
    elapsed: Duration,
}

/// `size.soak` calls on one session of a fresh wf (`session = "shared"`:
/// the soak is about wf, not about opening upstream sessions).
async fn soak(env: &Env, size: &Size) -> anyhow::Result<SoakResult> {
    let mut server = start(env, "soak", size, "shared").await?;
    let http = pool(size)?;
    let mut one = WebClient::connect(&http, &server.url, Generation::Sessions2025).await?;
    one.echo("fx__echo", "wf-bench soak warm-up").await?;
    tokio::time::sleep(Duration::from_millis(500)).await;
    let session = one.session_id().map(str::to_string);
    let before = mem(server.pid);
    let mut errors = 0u64;
    let mut done = 0usize;
    let mut series = Vec::new();
    let started = Instant::now();
    while done < size.soak {
        let chunk = size.checkpoint.min(size.soak - done);
        errors += soak_chunk(&http, &server.url, session.as_deref(), chunk, done).await;
        done += chunk;
        series.push(mem(server.pid));
    }
    let elapsed = started.elapsed();
    one.close().await?;
    drop(http);
    tokio::time::sleep(Duration::from_secs(1)).await;
    let after = mem(server.pid);
    server.stop().await;
    Ok(SoakResult {
        before,
        series,
        after,
        errors,
        elapsed,
    })
}

fn print(size: &Size, loads: &[LoadResult], soak: &SoakResult) {
    let Size {
        clients,
        calls,
        soak: soak_calls,
        checkpoint,
    } = *size;
    println!("## Load and soak: `wf serve --http` in front of the stdio fixture\n");
    println!(
        "{clients} concurrent clients, all at once, against a fresh wf per row: 2025-11-25 \
         clients each on its own session (initialize, {calls} echo calls one after another, \
         DELETE), or 2026-07-28 stateless clients ({calls} echo calls one after another, each \
         its own request). wf is configured with `max_requests_per_principal = 1024` (every \
         client is the one local principal; with the default 64 the rest would wait in its \
         queue: the default-config rows below) and the \
         source with room for a session per client. `session = \"client\"` (set for a stateful upstream) \
         gives each 2025 client its own upstream session, so its latencies include {clients} \
         fixture processes starting at once; `\"shared\"` is one upstream session for all. RSS \
         and open fds of the wf process; peak sampled every 20 ms.\n"
    );
    println!("| clients | session | clients × calls | errors | p50 | p99 | wall time | calls/s |");
    println!("|---|---|---|---:|---:|---:|---:|---:|");
    for l in loads {
        println!(
            "| {} | {} | {clients} × {calls} | {} | {:.0} µs | {:.1} ms | {:.1} s | {:.0} |",
            kind(l.generation),
            l.scope,
            l.errors.len(),
            us(percentile(&l.lat, 0.5)),
            ms(percentile(&l.lat, 0.99)),
            l.elapsed.as_secs_f64(),
            l.lat.len() as f64 / l.elapsed.as_secs_f64()
        );
    }
    println!();
    println!(
        "| clients | session | wf | before | at peak | after (sessions closed, client gone, +1 s) | target |"
    );
    println!("|---|---|---|---:|---:|---:|---|");
    for l in loads {
        println!(
            "| {} | {} | VmRSS | {} | {} | {} | |",
            kind(l.generation),
            l.scope,
            mib(l.before.rss_kib),
            mib(l.at_peak.rss_kib),
            mib(l.after.rss_kib)
        );
        println!(
            "| {} | {} | open fds | {} | {} | {} | back to the baseline: {} |",
            kind(l.generation),
            l.scope,
            l.before.fds,
            l.at_peak.fds,
            l.after.fds,
            verdict(l.after.fds <= l.before.fds)
        );
    }
    for l in loads.iter().filter(|l| !l.errors.is_empty()) {
        let mut shown = l.errors.clone();
        shown.sort();
        shown.dedup();
        println!(
            "\nFirst distinct errors ({}, {}): {:?}",
            kind(l.generation),
            l.scope,
            &shown[..shown.len().min(3)]
        );
    }
    println!();
    let first = soak.series.first().copied().unwrap_or_default();
    let last = soak.series.last().copied().unwrap_or_default();
    let grew = (last.rss_kib as f64 - first.rss_kib as f64) / (first.rss_kib as f64).max(1.0);
    println!(
        "Soak: {soak_calls} echo calls on one 2025-11-25 session of a fresh wf (`session = \"shared\"`), \
         {SOAK_CALLERS} callers sharing it, {:.1} s ({:.0} calls/s), {} errors.\n",
        soak.elapsed.as_secs_f64(),
        soak_calls as f64 / soak.elapsed.as_secs_f64(),
        soak.errors
    );
    println!(
        "| wf | session open | after {checkpoint} calls | after {soak_calls} calls | session closed, client gone, +1 s | target |"
    );
    println!("|---|---:|---:|---:|---:|---|");
    println!(
        "| VmRSS | {} | {} | {} | {} | after all ≤ after {checkpoint} + {:.0}%: {} ({:+.1}%) |",
        mib(soak.before.rss_kib),
        mib(first.rss_kib),
        mib(last.rss_kib),
        mib(soak.after.rss_kib),
        RSS_GROWTH * 100.0,
        verdict(grew <= RSS_GROWTH),
        grew * 100.0
    );
    println!(
        "| open fds | {} | {} | {} | {} | back to the baseline ({}): {} |",
        soak.before.fds,
        first.fds,
        last.fds,
        soak.after.fds,
        soak.before.fds,
        verdict(soak.after.fds <= soak.before.fds)
    );
    println!(
        "\nVmRSS after every {checkpoint} calls: {}.",
        soak.series
            .iter()
            .map(|m| mib(m.rss_kib))
            .collect::<Vec<_>>()
            .join(", ")
    );
    let load_errors: usize = loads.iter().map(|l| l.errors.len()).sum();
    println!(
        "\nLoad verdict: {} errors (target 0): {}; fds back to the baseline after every phase: {}.\n",
        load_errors as u64 + soak.errors,
        verdict(load_errors == 0 && soak.errors == 0),
        verdict(
            loads.iter().all(|l| l.after.fds <= l.before.fds) && soak.after.fds <= soak.before.fds
        )
    );
}

/// `n` calls on `session`, `SOAK_CALLERS` at a time; returns the errors.
async fn soak_chunk(
    http: &reqwest::Client,
    url: &str,
    session: Option<&str>,
    n: usize,
    offset: usize,
) -> u64 {
    let mut set = JoinSet::new();
    for c in 0..SOAK_CALLERS {
        // Request ids must not repeat within the session while in flight.
        let first_id = 1 + (offset + c * n) as u64;
        let mut client = WebClient::on_session(http, url, session, first_id);
        let share = n / SOAK_CALLERS + usize::from(c < n % SOAK_CALLERS);
        set.spawn(async move {
            let mut errors = 0;
            for i in 0..share {
                if client
                    .echo("fx__echo", &format!("wf-bench soak {c} {:08}", offset + i))
                    .await
                    .is_err()
                {
                    errors += 1;
                }
            }
            errors
        });
    }
    let mut errors = 0;
    while let Some(r) = set.join_next().await {
        errors += r.unwrap_or(1);
    }
    errors
}
