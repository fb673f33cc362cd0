//! Echo round trips through `wf` versus straight to the same upstream.
//!
//! One rmcp client implementation drives both paths, each over ONE session
//! (wf, too, multiplexes every call onto one upstream session per source),
//! so the only difference is wf in the middle. Batches alternate between the
//! two paths (ABBA order) so that drift in machine load hits both alike.

use std::path::PathBuf;
use std::time::{Duration, Instant};

use anyhow::{Context, bail};
use rmcp::{Peer, RoleClient};
use serde_json::json;
use tokio::task::JoinSet;

use crate::proc::{McpProc, echo};
use crate::stats::{delta_us, median_f64, percentile, us, verdict};
use crate::{Env, HANDSHAKE_TIMEOUT};

/// Target: wf adds at most this much to the p50 round trip.
const P50_BUDGET_US: f64 = 100.0;
/// Target: wf keeps at least this share of the direct throughput at concurrency 16.
const THROUGHPUT_SHARE: f64 = 0.70;
const CONCURRENCY: usize = 16;

struct Plan {
    warmup: usize,
    batch: usize,
    rounds: usize,
    tput_rounds: usize,
    tput_window: Duration,
}

impl Plan {
    fn new(quick: bool) -> Self {
        if quick {
            Self {
                warmup: 50,
                batch: 50,
                rounds: 4,
                tput_rounds: 2,
                tput_window: Duration::from_millis(500),
            }
        } else {
            Self {
                warmup: 300,
                batch: 200,
                rounds: 25,
                tput_rounds: 3,
                tput_window: Duration::from_secs(3),
            }
        }
    }
}

struct Upstream {
    label: &'static str,
    /// The wf source name: its echo tool is `<source>__echo` through wf.
    source: &'static str,
    command: PathBuf,
    args: Vec<String>,
}

/// One path's numbers.
#[derive(Default)]
struct Side {
    latencies: Vec<Duration>,
    /// (calls, seconds) per throughput window.
    windows: Vec<(u64, f64)>,
}

impl Side {
    fn rate(&self) -> f64 {
        let calls: u64 = self.windows.iter().map(|w| w.0).sum();
        let secs: f64 = self.windows.iter().map(|w| w.1).sum();
        if secs > 0.0 { calls as f64 / secs } else { 0.0 }
    }
    fn rates(&self) -> Vec<f64> {
        self.windows
            .iter()
            .map(|&(c, s)| c as f64 / s.max(1e-9))
            .collect()
    }
}

struct Outcome {
    label: &'static str,
    direct: Side,
    wf: Side,
    /// wf − direct p50 of each interleaved round.
    round_p50_deltas: Vec<f64>,
}

pub async fn run(env: &Env) -> anyhow::Result<()> {
    let plan = Plan::new(env.quick);
    let mut ups = vec![Upstream {
        label: "Rust fixture (stdio)",
        source: "fx",
        command: env.fixture.clone(),
        args: Vec::new(),
    }];
    match &env.everything {
        Some(p) => ups.push(Upstream {
            label: "server-everything (stdio)",
            source: "ev",
            command: p.clone(),
            args: Vec::new(),
        }),
        None => eprintln!("wf-bench: server-everything not found; skipping it"),
    }
    let mut outcomes = Vec::new();
    for up in &ups {
        outcomes.push(measure(env, &plan, up).await?);
    }
    print(&plan, &outcomes, env.everything.is_none());
    Ok(())
}

async fn measure(env: &Env, plan: &Plan, up: &Upstream) -> anyhow::Result<Outcome> {
    eprintln!("wf-bench: overhead: {}", up.label);
    let mut direct_cmd = tokio::process::Command::new(&up.command);
    direct_cmd.args(&up.args);
    let mut direct = McpProc::start(
        &format!("{} (direct)", up.label),
        direct_cmd,
        None,
        HANDSHAKE_TIMEOUT,
    )
    .await?;
    let (wf_cmd, log) = env.wf_command(
        &format!("overhead-{}", up.source),
        json!({ up.source: {"command": up.command, "args": up.args} }),
    )?;
    let mut wf = McpProc::start("wf", wf_cmd, Some(&log), HANDSHAKE_TIMEOUT).await?;

    let wf_tool = format!("{}__echo", up.source);
    require_tool(&direct.peer(), "echo", up.label).await?;
    require_tool(&wf.peer(), &wf_tool, "wf").await?;
    let paths = [(direct.peer(), "echo".to_string()), (wf.peer(), wf_tool)];

    // Warm-up: opens wf's persistent upstream session, faults pages in.
    for (peer, tool) in &paths {
        for i in 0..plan.warmup {
            echo(peer, tool, &message(i)).await?;
        }
    }

    let mut sides = [Side::default(), Side::default()];
    let mut round_p50_deltas = Vec::new();
    for round in 0..plan.rounds {
        let order = if round % 2 == 0 { [0, 1] } else { [1, 0] };
        let mut p50 = [0.0; 2];
        for &k in &order {
            let (peer, tool) = &paths[k];
            let mut batch = Vec::with_capacity(plan.batch);
            for i in 0..plan.batch {
                let msg = message(round * plan.batch + i);
                let t = Instant::now();
                echo(peer, tool, &msg).await?;
                batch.push(t.elapsed());
            }
            p50[k] = us(percentile(&batch, 0.5));
            sides[k].latencies.extend(batch);
        }
        round_p50_deltas.push(p50[1] - p50[0]);
    }

    for round in 0..plan.tput_rounds {
        let order = if round % 2 == 0 { [0, 1] } else { [1, 0] };
        for &k in &order {
            let (peer, tool) = &paths[k];
            let w = throughput(peer, tool, plan.tput_window).await?;
            sides[k].windows.push(w);
        }
    }

    direct.stop().await;
    wf.stop().await;
    let [d, w] = sides;
    Ok(Outcome {
        label: up.label,
        direct: d,
        wf: w,
        round_p50_deltas,
    })
}

fn message(i: usize) -> String {
    format!("wf-bench round trip {i:08}")
}

async fn require_tool(peer: &Peer<RoleClient>, tool: &str, who: &str) -> anyhow::Result<()> {
    let tools = peer
        .list_all_tools()
        .await
        .with_context(|| format!("{who}: tools/list"))?;
    if !tools.iter().any(|t| t.name == tool) {
        let names: Vec<_> = tools.iter().map(|t| t.name.to_string()).collect();
        bail!("{who} does not list {tool:?}; it lists {names:?}");
    }
    Ok(())
}

/// `CONCURRENCY` callers on one session for `window`: (calls, seconds).
async fn throughput(
    peer: &Peer<RoleClient>,
    tool: &str,
    window: Duration,
) -> anyhow::Result<(u64, f64)> {
    let start = Instant::now();
    let deadline = start + window;
    let mut set = JoinSet::new();
    for c in 0..CONCURRENCY {
        let (peer, tool) = (peer.clone(), tool.to_string());
        set.spawn(async move {
            let mut n = 0u64;
            while Instant::now() < deadline {
                echo(&peer, &tool, &format!("wf-bench caller {c:02} call {n:08}")).await?;
                n += 1;
            }
            anyhow::Ok(n)
        });
    }
    let mut calls = 0;
    while let Some(r) = set.join_next().await {
        calls += r.context("a caller task failed")??;
    }
    Ok((calls, start.elapsed().as_secs_f64()))
}

fn print(plan: &Plan, outcomes: &[Outcome], everything_missing: bool) {
    println!("## Echo round trip: wf versus direct\n");
    println!(
        "Concurrency 1, one session per path, {} rounds of {} calls per path in alternating order \
         ({} calls per path after {} warm-up calls).\n",
        plan.rounds,
        plan.batch,
        plan.rounds * plan.batch,
        plan.warmup
    );
    println!(
        "| upstream | direct p50 | wf p50 | p50 added by wf | direct p99 | wf p99 | p99 added by wf | median per-round p50 delta | target: p50 +≤ {P50_BUDGET_US:.0} µs |"
    );
    println!("|---|---:|---:|---:|---:|---:|---:|---:|---|");
    for o in outcomes {
        let (d50, w50) = (
            percentile(&o.direct.latencies, 0.5),
            percentile(&o.wf.latencies, 0.5),
        );
        let (d99, w99) = (
            percentile(&o.direct.latencies, 0.99),
            percentile(&o.wf.latencies, 0.99),
        );
        let added = us(w50) - us(d50);
        println!(
            "| {} | {:.0} µs | {:.0} µs | {} µs | {:.0} µs | {:.0} µs | {} µs | {:+.0} µs | {} |",
            o.label,
            us(d50),
            us(w50),
            delta_us(w50, d50),
            us(d99),
            us(w99),
            delta_us(w99, d99),
            median_f64(&o.round_p50_deltas),
            verdict(added <= P50_BUDGET_US)
        );
    }
    println!();
    println!(
        "Concurrency {CONCURRENCY}: {CONCURRENCY} callers sharing one session per path, {} windows of {:.1} s per path in alternating order.\n",
        plan.tput_rounds,
        plan.tput_window.as_secs_f64()
    );
    println!(
        "| upstream | direct calls/s | wf calls/s | wf / direct | windows (direct; wf) | target: ≥ {:.0}% |",
        THROUGHPUT_SHARE * 100.0
    );
    println!("|---|---:|---:|---:|---|---|");
    for o in outcomes {
        let (d, w) = (o.direct.rate(), o.wf.rate());
        let share = if d > 0.0 { w / d } else { 0.0 };
        let fmt = |v: Vec<f64>| {
            v.iter()
                .map(|r| format!("{r:.0}"))
                .collect::<Vec<_>>()
                .join(", ")
        };
        println!(
            "| {} | {d:.0} | {w:.0} | {:.0}% | {}; {} | {} |",
            o.label,
            share * 100.0,
            fmt(o.direct.rates()),
            fmt(o.wf.rates()),
            verdict(share >= THROUGHPUT_SHARE)
        );
    }
    if everything_missing {
        println!(
            "\nserver-everything was not found (run `npm ci` in tests/e2e): its rows are missing."
        );
    }
    println!();
}
