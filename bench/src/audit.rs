//! The audit trail's price: what the record stage adds on a call's own
//! thread (audit on against off, interleaved), and how many records per
//! second the writer sustains on SQLite and (with `--pg-url` /
//! `WF_BENCH_PG_URL`) PostgreSQL.

use std::sync::Arc;
use std::sync::atomic::Ordering;
use std::time::{Duration, Instant};

use serde_json::json;
use wf_host::audit::AuditLog;
use wf_host::config::{AuditConfig, Principal};
use wf_host::pipeline::record::{self, Outcome};
use wf_host::pipeline::{Call, Capability, Entry, Kind, Transport};
use wf_host::store::{Store, new_id};

use crate::Env;
use crate::stats::{median, percentile, us};
use crate::web::{Generation, HttpWf, WebClient};

/// Per-call time of the record stage with `log`, over `n` calls.
fn record_stage(log: &Arc<AuditLog>, n: usize) -> Vec<Duration> {
    let who = Principal::named("alice");
    let arguments =
        json!({"owner": "acme", "repo": "tools", "title": "Crash on start", "labels": ["bug"]});
    let result = json!({"content": [{"type": "text", "text": "created issue #42"}],
                        "structuredContent": {"number": 42, "url": "https://example.test/acme/tools/issues/42"}});
    let call = Call {
        entry: Entry::ToolsCall,
        principal: &who,
        capability: Capability {
            kind: Kind::Tool,
            source: "github",
            name: "github__create_issue",
            annotations: None,
        },
        arguments: &arguments,
        client: Some("bench"),
        client_version: Some("1.0"),
        endpoint: None,
        transport: Transport::Http,
    };
    (0..n)
        .map(|_| {
            let t = Instant::now();
            if let Some(pending) = record::admitted(log, &call, Vec::new(), None) {
                pending.finish(Outcome::Ok, Some(&result));
            }
            t.elapsed()
        })
        .collect()
}

/// Records per second the writer sustains: `n` records handed over as fast
/// as the caller can, until all are written.
async fn sustained(store: Arc<Store>, n: usize) -> anyhow::Result<(f64, u64)> {
    let config = AuditConfig {
        buffer: n,
        ..AuditConfig::default()
    };
    let log = AuditLog::start(&config, store, std::path::Path::new("."), None);
    let t = Instant::now();
    let lat = record_stage(&log, n);
    drop(lat);
    if !log.flush(Duration::from_secs(300)).await {
        anyhow::bail!("the audit writer did not finish {n} records in 300 s");
    }
    let secs = t.elapsed().as_secs_f64();
    Ok((
        n as f64 / secs,
        log.counts().dropped.load(Ordering::Relaxed),
    ))
}

pub async fn run(env: &Env) -> anyhow::Result<()> {
    let (rounds, per_round, bulk) = if env.quick {
        (2, 500, 2_000)
    } else {
        (7, 20_000, 50_000)
    };
    println!("## Audit trail: the record stage's price, and records written per second\n");
    println!(
        "The record stage of one `tools/call` (its record built from the call: shape of 4 arguments, the result's \
         shape and size, handed to the writer's buffer) with `[audit]` on against off, on the calling thread, \
         {rounds} interleaved rounds of {per_round} calls; medians per call. Target: within 5 µs. \
         Then {bulk} records handed over back to back until all are written (one writer, batches of 512).\n"
    );
    let dir = env.scratch.join("audit");
    std::fs::create_dir_all(&dir)?;
    let mut stores = vec![("SQLite", Arc::new(Store::open(&dir)?))];
    if let Some(url) = &env.pg_url {
        let schema = new_id("wf_bench_audit").replace('-', "_");
        stores.push((
            "PostgreSQL",
            Arc::new(Store::connect(url, 4, Some(&schema), None).await?),
        ));
    }

    // On the call's thread: the store behind the writer does not matter
    // (the buffer is large enough that nothing waits or drops).
    let on = AuditLog::start(
        &AuditConfig {
            buffer: per_round * 2,
            ..AuditConfig::default()
        },
        stores[0].1.clone(),
        std::path::Path::new("."),
        None,
    );
    let off = AuditLog::disabled();
    let (mut with, mut without) = (Vec::new(), Vec::new());
    for round in 0..rounds {
        for first in [round % 2 == 0, round % 2 == 1] {
            if first {
                with.extend(record_stage(&on, per_round));
                on.flush(Duration::from_secs(120)).await;
            } else {
                without.extend(record_stage(&off, per_round));
            }
        }
    }
    println!("| audit | p50 | p99 | added p50 | within 5 µs |");
    println!("|---|---:|---:|---:|:---:|");
    println!(
        "| off | {:.2} µs | {:.2} µs | — | — |",
        us(median(&without)),
        us(percentile(&without, 0.99))
    );
    let added = us(median(&with)) - us(median(&without));
    println!(
        "| on | {:.2} µs | {:.2} µs | {added:+.2} µs | {} |",
        us(median(&with)),
        us(percentile(&with, 0.99)),
        crate::stats::verdict(added <= 5.0),
    );
    println!();
    println!("| store | records | records/s | dropped |");
    println!("|---|---:|---:|---:|");
    for (name, store) in &stores {
        let (per_s, dropped) = sustained(store.clone(), bulk).await?;
        println!("| {name} | {bulk} | {per_s:.0} | {dropped} |");
    }
    if env.pg_url.is_none() {
        println!("\n(PostgreSQL row skipped: no --pg-url / WF_BENCH_PG_URL)");
    }
    println!();
    whole_call(env, rounds, if env.quick { 50 } else { 300 }).await
}

/// A whole `tools/call` through `wf serve --http` with `[audit]` on (the
/// default) against off, the two servers taking turns: what a client sees.
async fn whole_call(env: &Env, rounds: usize, batch: usize) -> anyhow::Result<()> {
    let http = reqwest::Client::new();
    let mut servers = Vec::new();
    let mut clients = Vec::new();
    for (name, enabled) in [("audit-on", true), ("audit-off", false)] {
        let (cmd, log) = env.wf_command_with_config(
            &env.wf,
            name,
            json!({"sources": {"fx": env.fixture_source(0)}, "audit": {"enabled": enabled}}),
        )?;
        let server = HttpWf::start(cmd, &log).await?;
        let mut client = WebClient::connect(&http, &server.url, Generation::Sessions2025).await?;
        for i in 0..batch {
            client.echo("fx__echo", &format!("warm-up {i}")).await?;
        }
        servers.push(server);
        clients.push(client);
    }
    let mut lat = [Vec::new(), Vec::new()];
    for round in 0..rounds {
        for k in [round % 2, 1 - round % 2] {
            for i in 0..batch {
                let t = Instant::now();
                clients[k]
                    .echo("fx__echo", &format!("r{round} {i}"))
                    .await?;
                lat[k].push(t.elapsed());
            }
        }
    }
    println!(
        "A whole `tools/call` (echo, the Rust fixture over stdio) through `wf serve --http`, a 2025-11-25 \
         client on its session, `[audit]` on (the default, records shaped) against `enabled = false`; \
         {rounds} interleaved rounds of {batch} calls per server.\n"
    );
    println!("| audit | p50 | p99 | added p50 |");
    println!("|---|---:|---:|---:|");
    let base = us(median(&lat[1]));
    for (k, name) in [(1, "off"), (0, "on")] {
        let p50 = us(median(&lat[k]));
        let added = if k == 0 {
            format!("{:+.1} µs", p50 - base)
        } else {
            "—".into()
        };
        println!(
            "| {name} | {p50:.1} µs | {:.1} µs | {added} |",
            us(percentile(&lat[k], 0.99))
        );
    }
    println!();
    for c in clients {
        c.close().await?;
    }
    for mut s in servers {
        s.stop().await;
    }
    Ok(())
}
