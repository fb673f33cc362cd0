//! A slow upstream must not stall a fast one: `wf serve` with two fixture
//! sources, `fast` and `slow`. The fast source's echo p50 is measured alone,
//! then again while 100 calls to the slow source's `slow(1 s)` are in flight
//! on the same client session. Target: within 10 ms of the p50 alone.

use std::time::{Duration, Instant};

use anyhow::{Context, bail};
use rmcp::model::CallToolRequestParams;
use serde_json::json;
use tokio::task::JoinSet;

use crate::proc::{McpProc, echo};
use crate::stats::{percentile, us, verdict};
use crate::{Env, HANDSHAKE_TIMEOUT};

const SLOW_CALLS: usize = 100;
const SLOW_MS: u64 = 1_000;
/// Target: the fast call's p50 under the slow load stays within this of its p50 alone.
const BUDGET: Duration = Duration::from_millis(10);

pub async fn run(env: &Env) -> anyhow::Result<()> {
    eprintln!("wf-bench: slow upstream");
    let sources = json!({
        "fast": env.fixture_source(0),
        "slow": env.fixture_source(0),
    });
    // Room for 100 slow calls and the fast ones from the one local principal.
    let (cmd, log) = env.wf_command_with_server(
        &env.wf,
        "slow",
        sources,
        json!({"max_requests_per_principal": 1024}),
    )?;
    let mut wf = McpProc::start("wf (fast + slow)", cmd, Some(&log), HANDSHAKE_TIMEOUT).await?;
    let result = measure(env, &wf).await;
    wf.stop().await;
    let (alone, loaded, during) = result?;
    let (p50a, p50l) = (percentile(&alone, 0.5), percentile(&loaded, 0.5));
    println!("\n## A slow upstream beside a fast one\n");
    println!(
        "`wf serve` with two fixture sources on one client session: the fast source's echo \
         alone, then while {SLOW_CALLS} calls of `slow({SLOW_MS} ms)` to the other source are \
         in flight ({} fast calls over {:.0} ms, each started while the slow calls were in flight).\n",
        loaded.len(),
        during.as_secs_f64() * 1e3
    );
    println!("| fast echo | p50 | p99 | calls |");
    println!("|---|---:|---:|---:|");
    println!(
        "| alone | {:.0} µs | {:.0} µs | {} |",
        us(p50a),
        us(percentile(&alone, 0.99)),
        alone.len()
    );
    println!(
        "| with {SLOW_CALLS} slow calls in flight | {:.0} µs | {:.0} µs | {} |",
        us(p50l),
        us(percentile(&loaded, 0.99)),
        loaded.len()
    );
    println!(
        "\np50 added by the slow load: {:+.0} µs (target ≤ +{} ms: {})\n",
        us(p50l) - us(p50a),
        BUDGET.as_millis(),
        verdict(p50l <= p50a + BUDGET)
    );
    Ok(())
}

/// (fast latencies alone, fast latencies under load, how long the loaded
/// fast calls took in all).
async fn measure(
    env: &Env,
    wf: &McpProc,
) -> anyhow::Result<(Vec<Duration>, Vec<Duration>, Duration)> {
    let peer = wf.peer();
    let n = if env.quick { 50 } else { 200 };
    // Warm-up: opens both persistent upstream sessions.
    for i in 0..50 {
        echo(&peer, "fast__echo", &format!("warm {i}")).await?;
    }
    slow_call(&peer, 1).await?;
    let mut alone = Vec::with_capacity(n);
    for i in 0..n {
        let t = Instant::now();
        echo(&peer, "fast__echo", &format!("alone {i:06}")).await?;
        alone.push(t.elapsed());
    }
    let mut slow = JoinSet::new();
    let started = Instant::now();
    for _ in 0..SLOW_CALLS {
        let peer = peer.clone();
        slow.spawn(async move { slow_call(&peer, SLOW_MS).await });
    }
    // Let every slow call reach the upstream before timing the fast ones.
    tokio::time::sleep(Duration::from_millis(100)).await;
    let mut loaded = Vec::new();
    let t0 = Instant::now();
    // Fast calls only while the slow ones are surely still in flight.
    while started.elapsed() < Duration::from_millis(SLOW_MS * 8 / 10) && loaded.len() < n {
        let t = Instant::now();
        echo(&peer, "fast__echo", &format!("loaded {:06}", loaded.len())).await?;
        loaded.push(t.elapsed());
    }
    let during = t0.elapsed();
    let mut done = 0;
    while let Some(r) = slow.join_next().await {
        r.context("a slow call's task failed")??;
        done += 1;
    }
    if done != SLOW_CALLS {
        bail!("{done} of {SLOW_CALLS} slow calls finished");
    }
    if started.elapsed() < Duration::from_millis(SLOW_MS) {
        bail!("the slow calls returned before {SLOW_MS} ms: the upstream did not sleep");
    }
    Ok((alone, loaded, during))
}

async fn slow_call(peer: &rmcp::Peer<rmcp::RoleClient>, ms: u64) -> anyhow::Result<()> {
    let mut args = serde_json::Map::new();
    args.insert("ms".into(), ms.into());
    let r = peer
        .call_tool(CallToolRequestParams::new("slow__slow").with_arguments(args))
        .await
        .context("calling slow__slow")?;
    if r.is_error == Some(true) {
        bail!("slow__slow failed: {:?}", r.content);
    }
    Ok(())
}
