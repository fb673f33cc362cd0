//! Load and soak through the HTTP front to a stdio fixture upstream:
//!
//! - load: 200 concurrent 2025-11-25 clients, each on its own session, 50
//!   calls each; errors, p50/p99, and wf's resident memory and open file
//!   descriptors before, at peak (sampled every 20 ms) and after;
//! - soak: 100 000 calls on one session; resident memory after the first
//!   10 000 against after all, and file descriptors against the baseline.

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

pub async fn run(env: &Env) -> anyhow::Result<()> {
    let (clients, calls, soak, checkpoint) = if env.quick {
        (50, 10, 10_000, 1_000)
    } else {
        (200, 50, 100_000, 10_000)
    };
    eprintln!(
        "wf-bench: load: {clients} clients × {calls} calls, then {soak} calls on one session"
    );
    let sources = json!({"fx": env.fixture_source(0)});
    let (cmd, log) = env.wf_command_with_server(
        &env.wf,
        "load",
        sources,
        // Every client here is the one local principal: let it have all
        // 200 requests in flight (the default allows 64).
        json!({"max_requests_per_principal": 1024, "max_sessions": 1024, "max_connections": 1024}),
    )?;
    let mut server = HttpWf::start(cmd, &log).await?;
    // Each phase has its own HTTP client, dropped (closing its kept-alive
    // connections) before wf's fds are counted: what stays open is wf's.
    let pool = || {
        reqwest::Client::builder()
            .pool_max_idle_per_host(clients * 2)
            .build()
    };
    // Baseline: wf up, its persistent upstream session open, no client connected.
    {
        let http = pool()?;
        let mut first = WebClient::connect(&http, &server.url, Generation::Sessions2025).await?;
        first.echo("fx__echo", "wf-bench load warm-up").await?;
        first.close().await?;
    }
    tokio::time::sleep(Duration::from_millis(500)).await;
    let before = mem(server.pid);
    let http = pool()?;

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
    let mut set = JoinSet::new();
    for c in 0..clients {
        let (http, url) = (http.clone(), server.url.clone());
        set.spawn(async move {
            let mut lat = Vec::with_capacity(calls);
            let mut errors = Vec::new();
            let mut client = match WebClient::connect(&http, &url, Generation::Sessions2025).await {
                Ok(c) => c,
                Err(e) => return (lat, vec![format!("connect: {e:#}")]),
            };
            for i in 0..calls {
                let t = Instant::now();
                match client
                    .echo("fx__echo", &format!("wf-bench load {c:03} {i:03}"))
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
    let mut lat = Vec::new();
    let mut errors = Vec::new();
    while let Some(r) = set.join_next().await {
        match r {
            Ok((l, e)) => {
                lat.extend(l);
                errors.extend(e);
            }
            Err(e) => errors.push(format!("client task: {e}")),
        }
    }
    let elapsed = started.elapsed();
    sampling.store(false, Ordering::Relaxed);
    let _ = sampler.await;
    let at_peak = *peak.lock().await;
    drop(http);
    // Sessions were ended with DELETE; give wf a moment to drop them.
    tokio::time::sleep(Duration::from_secs(1)).await;
    let after = mem(server.pid);

    // Soak: one session, SOAK_CALLERS callers sharing it.
    eprintln!("wf-bench: soak: {soak} calls on one session");
    let http = pool()?;
    let one = WebClient::connect(&http, &server.url, Generation::Sessions2025).await?;
    let session = one.session_id().map(str::to_string);
    let soak_before = mem(server.pid);
    let mut soak_errors = 0u64;
    let mut done = 0usize;
    let mut at_checkpoint = Mem::default();
    let soak_started = Instant::now();
    while done < soak {
        let chunk = checkpoint.min(soak - done);
        soak_errors += soak_chunk(&http, &server.url, session.as_deref(), chunk, done).await;
        done += chunk;
        if done == checkpoint {
            at_checkpoint = mem(server.pid);
        }
    }
    let soak_elapsed = soak_started.elapsed();
    let soak_end = mem(server.pid);
    one.close().await?;
    drop(http);
    tokio::time::sleep(Duration::from_secs(1)).await;
    let soak_after = mem(server.pid);
    server.stop().await;

    println!("## Load and soak: `wf serve --http` in front of the stdio fixture\n");
    println!(
        "{clients} concurrent 2025-11-25 clients, each on its own session (initialize, {calls} \
         echo calls one after another, DELETE), all at once; wf configured with \
         `max_requests_per_principal = 1024` (every client is the one local principal; the \
         default 64 would answer the rest 429). RSS and open fds of the wf process; peak sampled \
         every 20 ms.\n"
    );
    println!("| clients × calls | errors | p50 | p99 | wall time | calls/s |");
    println!("|---|---:|---:|---:|---:|---:|");
    println!(
        "| {clients} × {calls} | {} | {:.0} µs | {:.1} ms | {:.1} s | {:.0} |",
        errors.len(),
        us(percentile(&lat, 0.5)),
        ms(percentile(&lat, 0.99)),
        elapsed.as_secs_f64(),
        lat.len() as f64 / elapsed.as_secs_f64()
    );
    println!();
    println!("| wf | before | at peak | after (sessions closed, client gone, +1 s) |");
    println!("|---|---:|---:|---:|");
    println!(
        "| VmRSS | {} | {} | {} |",
        mib(before.rss_kib),
        mib(at_peak.rss_kib),
        mib(after.rss_kib)
    );
    println!(
        "| open fds | {} | {} | {} |",
        before.fds, at_peak.fds, after.fds
    );
    if !errors.is_empty() {
        let mut shown = errors.clone();
        shown.sort();
        shown.dedup();
        println!(
            "\nFirst distinct errors: {:?}",
            &shown[..shown.len().min(3)]
        );
    }
    println!();
    let growth = at_checkpoint.rss_kib as f64;
    let grew = (soak_end.rss_kib as f64 - growth) / growth.max(1.0);
    println!(
        "Soak: {soak} echo calls on one 2025-11-25 session, {SOAK_CALLERS} callers sharing it, \
         {:.1} s ({:.0} calls/s), {soak_errors} errors.\n",
        soak_elapsed.as_secs_f64(),
        soak as f64 / soak_elapsed.as_secs_f64()
    );
    println!(
        "| wf | session open | after {checkpoint} calls | after {soak} calls | session closed, client gone, +1 s | target |"
    );
    println!("|---|---:|---:|---:|---:|---|");
    println!(
        "| VmRSS | {} | {} | {} | {} | after all ≤ after {checkpoint} + {:.0}%: {} ({:+.1}%) |",
        mib(soak_before.rss_kib),
        mib(at_checkpoint.rss_kib),
        mib(soak_end.rss_kib),
        mib(soak_after.rss_kib),
        RSS_GROWTH * 100.0,
        verdict(grew <= RSS_GROWTH),
        grew * 100.0
    );
    println!(
        "| open fds | {} | {} | {} | {} | back to the baseline ({}): {} |",
        soak_before.fds,
        at_checkpoint.fds,
        soak_end.fds,
        soak_after.fds,
        before.fds,
        verdict(soak_after.fds <= before.fds)
    );
    println!(
        "\nLoad verdict: {} errors (target 0): {}; fds after the load back to the baseline: {}.\n",
        errors.len() as u64 + soak_errors,
        verdict(errors.is_empty() && soak_errors == 0),
        verdict(after.fds <= before.fds)
    );
    Ok(())
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
