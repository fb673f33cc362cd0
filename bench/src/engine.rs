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

/// One wf build's samples: per-node time of the chain, the one-node run, the fan-out.
#[derive(Default)]
struct Samples {
    per_node: Vec<f64>,
    fixed: Vec<f64>,
    fans: Vec<f64>,
    /// One-node runs per second, as a client calling `run_workflow` one
    /// after another sees them (the call and its reply included).
    runs_per_s: Vec<f64>,
}

/// How many one-node runs a round times back to back for runs per second.
const BURST: usize = 50;

pub async fn run(env: &Env) -> anyhow::Result<()> {
    eprintln!("wf-bench: engine");
    // With --compare, the other build runs in the same rounds, taking turns.
    // (label, binary, the config's `[store]`): SQLite unless --pg-url.
    let mut builds = vec![("wf".to_string(), env.wf.clone(), json!({}))];
    if let Some(other) = &env.compare {
        builds.push((
            format!("wf `{}`", other.display()),
            other.clone(),
            json!({}),
        ));
    }
    if let Some(url) = &env.pg_url {
        // A fresh schema per run of wf-bench: runs of earlier ones stay out.
        let tag = std::time::SystemTime::now()
            .duration_since(std::time::UNIX_EPOCH)
            .map(|d| d.as_millis())
            .unwrap_or(0);
        let schema = format!("bench_{}_{tag}", std::process::id());
        builds.push((
            "wf (PostgreSQL store)".to_string(),
            env.wf.clone(),
            // Required with `url` (it seals handles); any 16+ characters here.
            json!({"url": url, "schema": schema, "handle_secret": format!("wf-bench-{schema}")}),
        ));
    }
    let mut procs = Vec::new();
    for (i, (_, binary, store)) in builds.iter().enumerate() {
        // Only the PostgreSQL row has `[store]`: an older build (--compare)
        // refuses keys it does not know.
        let mut config = json!({"sources": {}, "server": {}});
        if store.as_object().is_some_and(|m| !m.is_empty()) {
            config["store"] = store.clone();
        }
        let (cmd, log) = env.wf_command_with_config(binary, &format!("engine-{i}"), config)?;
        procs.push(McpProc::start("wf", cmd, Some(&log), HANDSHAKE_TIMEOUT).await?);
    }
    let rounds = if env.quick { 2 } else { 7 };
    let (long, short, wide) = (chain(CHAIN), chain(1), fan());
    // Warm up: the first run pays for plugin runtime threads and the database.
    for p in &procs {
        run_ms(&p.peer(), &short).await?;
    }
    let mut samples: Vec<Samples> = builds.iter().map(|_| Samples::default()).collect();
    for _ in 0..rounds {
        for (p, s) in procs.iter().zip(samples.iter_mut()) {
            let peer = p.peer();
            let (c, n) = run_ms(&peer, &long).await?;
            if n != CHAIN {
                bail!("the chain run recorded {n} nodes, not {CHAIN}");
            }
            s.per_node.push(c * 1000.0 / CHAIN as f64);
            s.fixed.push(run_ms(&peer, &short).await?.0);
            s.fans.push(run_ms(&peer, &wide).await?.0);
            let burst = if env.quick { 5 } else { BURST };
            let t = std::time::Instant::now();
            for _ in 0..burst {
                tool(
                    &peer,
                    "wf_planner__run_workflow",
                    json!({"workflow": &short}),
                )
                .await?;
            }
            s.runs_per_s
                .push(burst as f64 / t.elapsed().as_secs_f64().max(f64::MIN_POSITIVE));
        }
    }
    for mut p in procs {
        p.stop().await;
    }

    println!("\n## Workflow engine\n");
    println!(
        "Median of {rounds} runs each{}; times are the run records' (start → finish, run and node records written).\n",
        if builds.len() > 1 {
            ", the builds taking turns run by run"
        } else {
            ""
        }
    );
    println!("| build | workload | median | each run | target | |");
    println!("|---|---|---:|---|---:|---|");
    let each = |v: &[f64]| {
        v.iter()
            .map(|x| format!("{x:.0}"))
            .collect::<Vec<_>>()
            .join(", ")
    };
    for ((label, _, store), s) in builds.iter().zip(&samples) {
        let node_us = median_f64(&s.per_node);
        let fan_ms = median_f64(&s.fans);
        // The per-node target is the embedded store's; a PostgreSQL row is
        // compared with it, not judged (each record is a network round trip).
        let (target, verdict) = if store.get("url").is_some() {
            ("", String::new())
        } else {
            (
                "≤ 20 µs",
                crate::stats::verdict(node_us <= 20.0).to_string(),
            )
        };
        println!(
            "| {label} | chain of {CHAIN} wf.std.passthrough nodes, per node | {node_us:.1} µs | {} µs | {target} | {verdict} |",
            each(&s.per_node),
        );
        println!(
            "| {label} | one-node run (fixed cost of a run) | {:.1} ms | {} ms | | |",
            median_f64(&s.fixed),
            each(&s.fixed)
        );
        println!(
            "| {label} | node records per second (chain, one after another) | {:.0} /s | | | |",
            1e6 / node_us.max(f64::MIN_POSITIVE)
        );
        println!(
            "| {label} | one-node runs per second ({} `run_workflow` calls back to back, seen by the client) | {:.0} /s | {} /s | | |",
            if env.quick { 5 } else { BURST },
            median_f64(&s.runs_per_s),
            each(&s.runs_per_s)
        );
        println!(
            "| {label} | fan-out of {FAN} × wf.std.sleep({SLEEP_MS} ms) | {fan_ms:.0} ms | {} ms | < 100 ms | {} |",
            each(&s.fans),
            crate::stats::verdict(fan_ms < 100.0)
        );
    }
    Ok(())
}
