//! The workflow engine: overhead per node on a chain of 1,000 wf.std
//! passthrough nodes (run record included), and a 200-wide fan-out of
//! `sleep(50 ms)` nodes (concurrency is real). Runs go through the planner's
//! `run_workflow` on `wf serve`; times are the run records' own (started →
//! finished, as stored), so client and transport costs are left out.

use anyhow::{Context, bail};
use rmcp::model::CallToolRequestParams;
use rmcp::{Peer, RoleClient};
use serde_json::{Value, json};

use crate::proc::McpProc;
use crate::stats::median_f64;
use crate::{Env, HANDSHAKE_TIMEOUT};

const CHAIN: usize = 1_000;
const FAN: usize = 200;
const SLEEP_MS: u64 = 50;

fn chain(n: usize) -> Value {
    let mut nodes = vec![json!({"id": "n0", "use": "wf.std.passthrough", "args": {"value": 0}})];
    for i in 1..n {
        nodes.push(json!({"id": format!("n{i}"), "use": "wf.std.passthrough", "args": {"value": {"$ref": format!("nodes.n{}.output.value", i - 1)}}}));
    }
    json!({"name": format!("chain-{n}"), "nodes": nodes, "outputs": {"last": {"$ref": format!("nodes.n{}.output.value", n - 1)}}})
}

fn fan() -> Value {
    let nodes: Vec<Value> = (0..FAN)
        .map(|i| json!({"id": format!("s{i}"), "use": "wf.std.sleep", "args": {"ms": SLEEP_MS}}))
        .collect();
    json!({"name": "fan-200", "nodes": nodes})
}

async fn tool(peer: &Peer<RoleClient>, name: &str, args: Value) -> anyhow::Result<Value> {
    let Value::Object(args) = args else {
        bail!("arguments must be an object")
    };
    let r = peer
        .call_tool(CallToolRequestParams::new(name.to_string()).with_arguments(args))
        .await
        .with_context(|| format!("calling {name}"))?;
    if r.is_error == Some(true) {
        bail!("{name} failed: {:?}", r.content);
    }
    r.structured_content.context("no structured content")
}

/// Runs `workflow` to completion; returns the run's own duration in ms and its node count.
async fn run_ms(peer: &Peer<RoleClient>, workflow: &Value) -> anyhow::Result<(f64, usize)> {
    let out = tool(
        peer,
        "wf_planner__run_workflow",
        json!({"workflow": workflow}),
    )
    .await?;
    if out["status"] != "succeeded" {
        bail!("run did not succeed: {out}");
    }
    let run_id = out["run_id"].as_str().context("run_id")?;
    let rec = tool(peer, "wf_planner__get_run", json!({"run_id": run_id})).await?;
    let (s, f) = (
        rec["run"]["started_at"].as_i64(),
        rec["run"]["finished_at"].as_i64(),
    );
    let nodes = rec["nodes"].as_array().map(Vec::len).unwrap_or(0);
    match (s, f) {
        (Some(s), Some(f)) => Ok(((f - s) as f64, nodes)),
        _ => bail!("run record without times: {rec}"),
    }
}

pub async fn run(env: &Env) -> anyhow::Result<()> {
    eprintln!("wf-bench: engine");
    let (cmd, log) = env.wf_command("engine", json!({}))?;
    let mut wf = McpProc::start("wf", cmd, Some(&log), HANDSHAKE_TIMEOUT).await?;
    let peer = wf.peer();
    let rounds = if env.quick { 2 } else { 7 };
    let (long, short, wide) = (chain(CHAIN), chain(1), fan());
    // Warm up: the first run pays for plugin runtime threads and the database.
    run_ms(&peer, &short).await?;
    let (mut per_node, mut fixed, mut fans) = (Vec::new(), Vec::new(), Vec::new());
    for _ in 0..rounds {
        let (c, n) = run_ms(&peer, &long).await?;
        if n != CHAIN {
            bail!("the chain run recorded {n} nodes, not {CHAIN}");
        }
        let (one, _) = run_ms(&peer, &short).await?;
        per_node.push(c * 1000.0 / CHAIN as f64);
        fixed.push(one);
        fans.push(run_ms(&peer, &wide).await?.0);
    }
    wf.stop().await;

    let node_us = median_f64(&per_node);
    let fan_ms = median_f64(&fans);
    println!("\n## Workflow engine\n");
    println!(
        "Median of {rounds} runs each; times are the run records' (start → finish, run and node records written).\n"
    );
    println!("| workload | median | target | |");
    println!("|---|---:|---:|---|");
    println!(
        "| chain of {CHAIN} wf.std.passthrough nodes, per node | {node_us:.1} µs | ≤ 20 µs | {} |",
        crate::stats::verdict(node_us <= 20.0)
    );
    println!(
        "| one-node run (fixed cost of a run) | {:.1} ms | | |",
        median_f64(&fixed)
    );
    println!(
        "| fan-out of {FAN} × wf.std.sleep({SLEEP_MS} ms) | {fan_ms:.0} ms | < 100 ms | {} |",
        crate::stats::verdict(fan_ms < 100.0)
    );
    Ok(())
}
