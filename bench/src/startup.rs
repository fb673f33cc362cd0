//! Start-up: from spawning `wf serve` with 10 upstream sources to the first
//! complete tools/list (every source's tools present), against the slowest
//! upstream's own start (spawn it alone and time its tools/list).

use std::collections::BTreeSet;
use std::time::{Duration, Instant};

use anyhow::{Context, bail};
use rmcp::{Peer, RoleClient};
use serde_json::{Map, Value};

use crate::proc::McpProc;
use crate::stats::{median, ms, verdict};
use crate::{Env, HANDSHAKE_TIMEOUT};

/// Target: the complete list comes within this of the slowest upstream's own start.
const BUDGET_MS: f64 = 100.0;
const SOURCES: usize = 10;
/// How long to poll wf for a complete list before giving up.
const COMPLETE_WITHIN: Duration = Duration::from_secs(20);

struct Case {
    name: String,
    delays: Vec<u64>,
}

struct Sample {
    baseline: Duration,
    wf_handshake: Duration,
    wf_complete: Duration,
    /// tools/list calls until the list was complete (1 = the first was).
    lists: usize,
}

pub async fn run(env: &Env) -> anyhow::Result<()> {
    let reps = if env.quick { 1 } else { 5 };
    let cases = [
        Case {
            name: "10 sources, each starts in 300 ms".into(),
            delays: vec![300; SOURCES],
        },
        Case {
            name: "10 sources, starts spread 0–900 ms".into(),
            delays: (0..SOURCES as u64).map(|i| i * 100).collect(),
        },
        Case {
            name: "10 sources, no start delay".into(),
            delays: vec![0; SOURCES],
        },
    ];
    let mut rows = Vec::new();
    for case in &cases {
        eprintln!("wf-bench: start-up: {}", case.name);
        let slowest = case.delays.iter().copied().max().unwrap_or(0);
        let mut samples = Vec::new();
        for rep in 0..reps {
            // Alternate which goes first so neither always meets a warm page cache.
            let (baseline, (wf_handshake, wf_complete, lists)) = if rep % 2 == 0 {
                let b = baseline(env, slowest).await?;
                (b, wf_start(env, rep, &case.delays).await?)
            } else {
                let w = wf_start(env, rep, &case.delays).await?;
                (baseline(env, slowest).await?, w)
            };
            samples.push(Sample {
                baseline,
                wf_handshake,
                wf_complete,
                lists,
            });
        }
        rows.push((case, slowest, samples));
    }

    println!("## Start-up: time to a complete tools/list\n");
    println!(
        "From spawning the process to the first tools/list reply that holds every source's tools; \
         the slowest upstream alone is spawned with the same start delay and timed to its own \
         tools/list reply. Medians of {reps} run(s), alternating which goes first.\n"
    );
    println!(
        "| case | slowest upstream alone | wf: initialize answered | wf: complete tools/list | added by wf | tools/list calls needed | target: +≤ {BUDGET_MS:.0} ms |"
    );
    println!("|---|---:|---:|---:|---:|---|---|");
    for (case, _, samples) in &rows {
        let pick = |f: fn(&Sample) -> Duration| median(&samples.iter().map(f).collect::<Vec<_>>());
        let base = pick(|s| s.baseline);
        let complete = pick(|s| s.wf_complete);
        let added = ms(complete) - ms(base);
        let lists: Vec<String> = samples.iter().map(|s| s.lists.to_string()).collect();
        println!(
            "| {} | {:.0} ms | {:.0} ms | {:.0} ms | {:+.0} ms | {} | {} |",
            case.name,
            ms(base),
            ms(pick(|s| s.wf_handshake)),
            ms(complete),
            added,
            lists.join(", "),
            verdict(added <= BUDGET_MS)
        );
    }
    println!();
    println!("Every run (ms, slowest upstream alone / wf complete):\n");
    for (case, slowest, samples) in &rows {
        let runs: Vec<String> = samples
            .iter()
            .map(|s| format!("{:.0}/{:.0}", ms(s.baseline), ms(s.wf_complete)))
            .collect();
        println!(
            "- {} (slowest delay {slowest} ms): {}",
            case.name,
            runs.join(", ")
        );
    }
    println!();
    Ok(())
}

/// The fixture alone, started with `delay_ms`: spawn → tools/list answered.
async fn baseline(env: &Env, delay_ms: u64) -> anyhow::Result<Duration> {
    let t0 = Instant::now();
    let mut p = McpProc::start(
        "fixture (start-up baseline)",
        env.fixture_command(delay_ms),
        None,
        HANDSHAKE_TIMEOUT,
    )
    .await?;
    let tools = p
        .peer()
        .list_all_tools()
        .await
        .context("fixture tools/list")?;
    let t = t0.elapsed();
    if !tools.iter().any(|t| t.name == "echo") {
        bail!("the fixture does not list echo");
    }
    p.stop().await;
    Ok(t)
}

/// wf with one fixture source per delay: spawn → (initialize answered,
/// complete tools/list, tools/list calls made).
async fn wf_start(
    env: &Env,
    rep: usize,
    delays: &[u64],
) -> anyhow::Result<(Duration, Duration, usize)> {
    let mut sources = Map::new();
    for (i, &d) in delays.iter().enumerate() {
        sources.insert(format!("s{i}"), env.fixture_source(d));
    }
    let expected: BTreeSet<String> = (0..delays.len()).map(|i| format!("s{i}__echo")).collect();
    let (cmd, log) = env.wf_command(&format!("startup-{rep}"), Value::Object(sources))?;
    let t0 = Instant::now();
    let mut wf = McpProc::start("wf", cmd, Some(&log), HANDSHAKE_TIMEOUT).await?;
    let handshake = t0.elapsed();
    let (complete, lists) = until_complete(&wf.peer(), &expected, t0).await?;
    wf.stop().await;
    Ok((handshake, complete, lists))
}

/// Polls tools/list until it holds every expected tool; returns the time
/// since `t0` and the number of lists made.
pub async fn until_complete(
    peer: &Peer<RoleClient>,
    expected: &BTreeSet<String>,
    t0: Instant,
) -> anyhow::Result<(Duration, usize)> {
    let mut lists = 0;
    loop {
        let tools = peer.list_all_tools().await.context("wf tools/list")?;
        lists += 1;
        let names: BTreeSet<String> = tools.iter().map(|t| t.name.to_string()).collect();
        if expected.is_subset(&names) {
            return Ok((t0.elapsed(), lists));
        }
        if t0.elapsed() > COMPLETE_WITHIN {
            let missing: Vec<_> = expected.difference(&names).collect();
            bail!(
                "wf's tools/list still lacks {missing:?} after {} s",
                COMPLETE_WITHIN.as_secs()
            );
        }
        tokio::time::sleep(Duration::from_millis(5)).await;
    }
}
