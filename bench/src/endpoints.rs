//! Endpoints (issue #53): what an endpoint adds to `tools/list` and to a
//! call with a transform, against the plain `/mcp` path: in process (the
//! view stage's own cost, not a round trip) and over HTTP (`/mcp/NAME`
//! beside `/mcp` on one wf, interleaved); and the memory of 50 endpoints
//! over 1,000 tools.

use std::collections::BTreeMap;
use std::sync::Arc;
use std::time::{Duration, Instant};

use serde_json::{Map, Value, json};
use wf_host::catalog::Snapshot;
use wf_host::config::{CatalogConfig, EndpointConfig, ToolTransform};
use wf_host::projection::{NameRules, Projection};
use wf_host::surfaces::endpoints::{Endpoint, call_arguments};

use crate::Env;
use crate::stats::{percentile, us};
use crate::web::{Generation, HttpWf, WebClient};

const SOURCES: usize = 10;
const PER_SOURCE: usize = 100;

/// 1,000 tools over 10 sources, each with a small object schema (a
/// catalog as its JSON: the benchmark does not link the plugin API).
fn projection() -> anyhow::Result<Arc<Projection>> {
    let mut s = Snapshot::default();
    for src in 0..SOURCES {
        let tools: Vec<Value> = (0..PER_SOURCE)
            .map(|i| {
                json!({
                    "name": format!("tool_{i}"),
                    "description": format!("Does thing {i} of source {src}."),
                    "inputSchema": {"type": "object", "properties": {
                        "repo": {"type": "string"}, "title": {"type": "string"},
                        "state": {"enum": ["open", "closed"]}
                    }, "required": ["repo", "title"]},
                    "annotations": {"readOnlyHint": i % 2 == 0}
                })
            })
            .collect();
        let catalog = serde_json::from_value(json!({ "tools": tools }))?;
        s.sources.push((format!("s{src}"), Arc::new(catalog)));
    }
    s.sources.sort_by(|a, b| a.0.cmp(&b.0));
    Ok(Arc::new(Projection::build(&s, NameRules { max_len: 64 })))
}

/// An endpoint over `sources`, with 10 transformed tools (renamed, a fixed
/// argument, a narrowed enum).
fn endpoint(name: &str, sources: &str) -> anyhow::Result<Endpoint> {
    let mut transform = BTreeMap::new();
    for i in 0..10 {
        transform.insert(
            format!("s0__tool_{i}"),
            ToolTransform {
                name: Some(format!("{name}_tool_{i}")),
                description: Some("Reworded.".into()),
                fixed: Map::from_iter([("repo".into(), json!("acme/site"))]),
                enums: [("state".to_string(), vec![json!("open")])].into(),
                ..Default::default()
            },
        );
    }
    let config = EndpointConfig {
        sources: Some(vec![sources.into()]),
        transform,
        ..Default::default()
    };
    Endpoint::new(name, config, CatalogConfig::default(), 64).map_err(anyhow::Error::msg)
}

fn sample(n: usize, mut f: impl FnMut() -> usize) -> Vec<Duration> {
    let warm = n / 10;
    let mut out = Vec::with_capacity(n);
    let mut sink = 0usize;
    for i in 0..n + warm {
        let t = Instant::now();
        sink = sink.wrapping_add(f());
        let took = t.elapsed();
        if i >= warm {
            out.push(took);
        }
    }
    std::hint::black_box(sink);
    out
}

fn rss_kib() -> u64 {
    std::fs::read_to_string("/proc/self/status")
        .ok()
        .and_then(|s| {
            s.lines()
                .find_map(|l| l.strip_prefix("VmRSS:"))
                .and_then(|v| v.trim().trim_end_matches("kB").trim().parse().ok())
        })
        .unwrap_or(0)
}

/// Over HTTP: `tools/list` and a call of the fixture's echo through
/// `/mcp/bench` (every tool, echo renamed `say` and reworded) against `/mcp`, on one
/// `wf serve --http`, 2025-11-25 session clients, in interleaved rounds
/// (each round runs both paths, in alternating order).
async fn over_http(env: &Env) -> anyhow::Result<()> {
    let (warmup, batch, rounds) = if env.quick {
        (50, 50, 4)
    } else {
        (300, 200, 15)
    };
    let config = json!({
        "sources": {"fx": env.fixture_source(0)},
        "endpoints": {"bench": {
            "tools": ["*"],
            "transform": {"fx__echo": {
                "name": "say", "title": "Say", "description": "Says the message back."
            }}
        }}
    });
    let (cmd, log) = env.wf_command_with_config(&env.wf, "endpoints-http", config)?;
    let mut server = HttpWf::start(cmd, &log).await?;
    let http = reqwest::Client::new();
    let mut paths = [
        (
            "/mcp, fx__echo",
            WebClient::connect(&http, &server.url, Generation::Sessions2025).await?,
            "fx__echo",
        ),
        (
            "/mcp/bench, say (renamed, reworded)",
            WebClient::connect(
                &http,
                &format!("{}/bench", server.url),
                Generation::Sessions2025,
            )
            .await?,
            "say",
        ),
    ];
    for (_, c, tool) in paths.iter_mut() {
        for i in 0..warmup {
            c.echo(tool, &format!("warm {i}")).await?;
            c.list_tools().await?;
        }
    }
    let mut calls: [Vec<Duration>; 2] = Default::default();
    let mut lists: [Vec<Duration>; 2] = Default::default();
    let mut listed = [0usize; 2];
    for round in 0..rounds {
        for k in 0..2 {
            let k = if round % 2 == 0 { k } else { 1 - k };
            let (_, c, tool) = &mut paths[k];
            for i in 0..batch {
                let t = Instant::now();
                c.echo(tool, &format!("r{round} c{i}")).await?;
                calls[k].push(t.elapsed());
                let t = Instant::now();
                listed[k] = c.list_tools().await?;
                lists[k].push(t.elapsed());
            }
        }
    }
    let names = paths.each_ref().map(|p| p.0);
    for (_, c, _) in paths {
        c.close().await?;
    }
    server.stop().await;
    println!(
        "\nOver HTTP (`wf serve --http`, the fixture's echo over stdio behind it; \
         2025-11-25 session clients; {rounds} interleaved rounds of {batch} calls \
         and {batch} lists per path, after {warmup} of each):\n"
    );
    println!(
        "| path | call p50 µs | call p99 µs | tools/list p50 µs | tools/list p99 µs | tools listed |"
    );
    println!("|---|---:|---:|---:|---:|---:|");
    for (k, what) in names.iter().enumerate() {
        println!(
            "| {what} | {:.1} | {:.1} | {:.1} | {:.1} | {} |",
            us(percentile(&calls[k], 0.5)),
            us(percentile(&calls[k], 0.99)),
            us(percentile(&lists[k], 0.5)),
            us(percentile(&lists[k], 0.99)),
            listed[k]
        );
    }
    println!(
        "\nThe endpoint adds {:+.1} µs to the call's p50 and {:+.1} µs to the list's.",
        us(percentile(&calls[1], 0.5)) - us(percentile(&calls[0], 0.5)),
        us(percentile(&lists[1], 0.5)) - us(percentile(&lists[0], 0.5)),
    );
    Ok(())
}

pub async fn run(env: &Env) -> anyhow::Result<()> {
    eprintln!("endpoints: the view stage against the plain /mcp path");
    let n = if env.quick { 2_000 } else { 20_000 };
    let proj = projection()?;
    // The support endpoint: one source (100 tools), 10 of them transformed.
    let e = endpoint("support", "s0")?;
    let mut rows: Vec<(&str, Vec<Duration>)> = Vec::new();
    // tools/list's selection: the plain list takes every tool; the endpoint
    // walks its view (indices into the projection, the transformed copies).
    rows.push((
        "tools/list selection, plain /mcp (1,000 tools)",
        sample(n / 10, || {
            proj.tools.iter().filter(|t| !t.name.is_empty()).count()
        }),
    ));
    rows.push((
        "tools/list selection, endpoint (100 of them)",
        sample(n / 10, || e.view(&proj).tools().count()),
    ));
    // A call: the plain path looks the tool up; the endpoint path looks its
    // name up in the view, merges the fixed value, checks the enum, and then
    // looks the original up as the plain path does.
    let args: Map<String, Value> = Map::from_iter([
        ("title".into(), json!("t")),
        ("state".into(), json!("open")),
    ]);
    rows.push((
        "call lookup, plain /mcp",
        sample(n, || proj.tool("s0__tool_3").map_or(0, |t| t.name.len())),
    ));
    rows.push((
        "call lookup + transform, endpoint",
        sample(n, || {
            let view = e.view(&proj);
            let Some(t) = view.tool("support_tool_3") else {
                return 0;
            };
            let mut a = args.clone();
            if let Some(x) = t.transform
                && call_arguments("support_tool_3", &mut a, x).is_err()
            {
                return 0;
            }
            proj.tool(&t.original.name)
                .map_or(0, |o| o.name.len() + a.len())
        }),
    ));
    // Memory: 50 endpoints, each over all 1,000 tools with 10 transforms.
    let before = rss_kib();
    let built = Instant::now();
    let many: Vec<Endpoint> = (0..50)
        .map(|i| endpoint(&format!("e{i}"), "*"))
        .collect::<anyhow::Result<_>>()?;
    let shown: usize = many.iter().map(|e| e.view(&proj).len()).sum();
    let took = built.elapsed();
    let after = rss_kib();
    println!("\n## Endpoints\n");
    println!(
        "In process, over a projection of 1,000 tools (10 sources): an endpoint \
         selecting one source (100 tools) with 10 transformed tools, against the \
         plain `/mcp` path ({n} calls, lists {}).\n",
        n / 10
    );
    println!("| path | p50 µs | p99 µs |");
    println!("|---|---:|---:|");
    for (what, s) in &rows {
        println!(
            "| {what} | {:.2} | {:.2} |",
            us(percentile(s, 0.5)),
            us(percentile(s, 0.99))
        );
    }
    println!(
        "\n50 endpoints over all 1,000 tools ({shown} tools shown in all): views built \
         in {:.1} ms, RSS {} KiB → {} KiB (+{} KiB).",
        took.as_secs_f64() * 1e3,
        before,
        after,
        after.saturating_sub(before)
    );
    over_http(env).await
}
