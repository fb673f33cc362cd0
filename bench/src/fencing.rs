//! The price of fencing a run's writes: a replica writes a run's node
//! records only while it holds the run's lease, checked in the same
//! transaction (a locking `UPDATE` of the lease row, first in the batch).
//! Node-record batches of one and of ten, fenced against the same write
//! without the fence, interleaved in the same rounds, on SQLite and (with
//! `--pg-url` / `WF_BENCH_PG_URL`) on PostgreSQL.

use std::time::{Duration, Instant};

use serde_json::json;
use wf_host::store::{NodeRecord, NodeStatus, Store, new_id};

use crate::Env;
use crate::stats::{median, us};

fn nodes(n: usize, round: usize) -> Vec<NodeRecord> {
    (0..n)
        .map(|i| NodeRecord {
            node_id: format!("n{i}"),
            capability: "wf.std.passthrough".into(),
            status: NodeStatus::Succeeded,
            args: Some(json!({"value": round})),
            output: Some(json!({"value": round})),
            attempts: 1,
            started_at: Some(1),
            finished_at: Some(2),
            ..Default::default()
        })
        .collect()
}

/// Medians of per-batch time: (fenced, unfenced).
async fn measure(
    store: &Store,
    batch: usize,
    rounds: usize,
    per_round: usize,
) -> anyhow::Result<(Duration, Duration)> {
    let run = new_id("bench-run");
    store
        .create_run(&run, "bench", &json!({}), &json!({}), "bench")
        .await?;
    let (mut fenced, mut unfenced) = (Vec::new(), Vec::new());
    for round in 0..rounds {
        // Alternate which goes first, so neither always meets a warm cache.
        for order in [round % 2 == 0, round % 2 == 1] {
            for i in 0..per_round {
                let recs = nodes(batch, round * per_round + i);
                let t = Instant::now();
                if order {
                    store.put_nodes(&run, &recs).await?;
                    fenced.push(t.elapsed());
                } else {
                    store.put_nodes_unfenced(&run, &recs).await?;
                    unfenced.push(t.elapsed());
                }
            }
        }
    }
    store
        .finish_run(&run, wf_host::store::RunStatus::Succeeded, None, None)
        .await?;
    Ok((median(&fenced), median(&unfenced)))
}

pub async fn run(env: &Env) -> anyhow::Result<()> {
    let (rounds, per_round) = if env.quick { (2, 20) } else { (7, 300) };
    println!("## Run writes: fenced by the run's lease against unfenced\n");
    println!(
        "A node-record batch written through `Store::put_nodes` (fenced: the run's lease row is locked and checked in the \
         same transaction) against the same batch without the fence, {rounds} interleaved rounds of {per_round} batches each; \
         medians per batch. Target: fenced within 10% of unfenced.\n"
    );
    println!("| store | batch | unfenced | fenced | added | ratio | within 10% |");
    println!("|---|---:|---:|---:|---:|---:|:---:|");
    let dir = env.scratch.join("fencing");
    std::fs::create_dir_all(&dir)?;
    let mut stores = vec![("SQLite", Store::open(&dir)?)];
    if let Some(url) = &env.pg_url {
        let schema = new_id("wf_bench_fence").replace('-', "_");
        stores.push((
            "PostgreSQL",
            Store::connect(url, 4, Some(&schema), None).await?,
        ));
    }
    for (name, store) in &stores {
        for batch in [1usize, 10] {
            let (fenced, unfenced) = measure(store, batch, rounds, per_round).await?;
            let ratio = fenced.as_secs_f64() / unfenced.as_secs_f64().max(1e-9);
            println!(
                "| {name} | {batch} | {:.0} µs | {:.0} µs | {:+.0} µs | {ratio:.2} | {} |",
                us(unfenced),
                us(fenced),
                us(fenced) - us(unfenced),
                crate::stats::verdict(ratio <= 1.10),
            );
        }
    }
    if env.pg_url.is_none() {
        println!("\n(PostgreSQL row skipped: no --pg-url / WF_BENCH_PG_URL)");
    }
    println!();
    Ok(())
}
