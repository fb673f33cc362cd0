//! The host's resident memory: with wf.std only, then with 10 fixture
//! sources discovered, connected (one call each, so every persistent
//! session is open) and after a burst of calls.

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
