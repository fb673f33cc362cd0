//! Retrieval: how well `wf_find` finds the tool a task needs in a large
//! catalog of real tool definitions, what the client saves in `search` mode,
//! and how fast a query is over 5,000 tools.
//!
//! Data (checked in, bench/retrieval/): `tools.json`, real servers' own
//! `tools/list` (captured once by `capture.py`, which says how), and
//! `queries.json`, hand-written tasks each labelled with the tool that does
//! it. The index is wf's own (`wf_host::catalog::search`); nothing is
//! started, so the run takes seconds.

use std::collections::BTreeMap;
use std::path::Path;
use std::time::{Duration, Instant};

use anyhow::Context;
use serde_json::{Value, json};
use wf_host::catalog::search::{DocText, Index, SegmentCache};

use crate::Env;
use crate::stats::{percentile, us, verdict};

/// A client's tokens per byte of tools/list JSON, for the token column: the
/// common ~4 bytes per token of English text under cl100k-style tokenizers
/// (JSON schemas tokenize somewhat denser, so read it as an estimate).
const BYTES_PER_TOKEN: f64 = 4.0;
/// The catalog size the latency target is set at.
const LATENCY_TOOLS: usize = 5_000;

struct Catalog {
    /// (source, client-visible name, tool JSON as listed)
    tools: Vec<(String, String, Value)>,
    servers: Vec<(String, String, usize)>,
}

fn data_dir() -> &'static Path {
    Path::new(concat!(env!("CARGO_MANIFEST_DIR"), "/retrieval"))
}

fn load() -> anyhow::Result<(Catalog, Vec<(String, String)>)> {
    let read = |f: &str| -> anyhow::Result<Value> {
        let p = data_dir().join(f);
        let text = std::fs::read_to_string(&p).with_context(|| format!("{}", p.display()))?;
        Ok(serde_json::from_str(&text)?)
    };
    let tools = read("tools.json")?;
    let mut cat = Catalog {
        tools: Vec::new(),
        servers: Vec::new(),
    };
    for s in tools["servers"].as_array().into_iter().flatten() {
        let source = s["source"].as_str().unwrap_or_default().to_string();
        let listed = s["tools"].as_array().cloned().unwrap_or_default();
        cat.servers.push((
            source.clone(),
            format!(
                "{}@{}",
                s["package"].as_str().unwrap_or("?"),
                s["version"].as_str().unwrap_or("?")
            ),
            listed.len(),
        ));
        for mut t in listed {
            // wf's default projection: `<source>__<name>`.
            let name = format!("{source}__{}", t["name"].as_str().unwrap_or_default());
            t["name"] = Value::String(name.clone());
            cat.tools.push((source.clone(), name, t));
        }
    }
    let queries = read("queries.json")?
        .as_array()
        .into_iter()
        .flatten()
        .map(|q| {
            (
                q["query"].as_str().unwrap_or_default().to_string(),
                q["tool"].as_str().unwrap_or_default().to_string(),
            )
        })
        .collect();
    Ok((cat, queries))
}

fn doc(source: &str, name: &str, t: &Value) -> DocText {
    let original = name.strip_prefix(&format!("{source}__")).unwrap_or(name);
    DocText::tool(
        name,
        source,
        original,
        t["description"].as_str().unwrap_or(""),
        &t["inputSchema"],
    )
}

/// The index over `tools`, one segment per source (as wf builds it).
fn index(cache: &mut SegmentCache, tools: &[(String, String, Value)], bump: &str) -> Index {
    let mut by_source: BTreeMap<&str, Vec<&(String, String, Value)>> = BTreeMap::new();
    for t in tools {
        by_source.entry(&t.0).or_default().push(t);
    }
    cache.index(by_source.iter().map(|(s, ts)| {
        // A changed fingerprint for `bump` only: the incremental rebuild.
        let fp = u64::from(*s == bump);
        (*s, fp, || {
            ts.iter().map(|t| doc(&t.0, &t.1, &t.2)).collect()
        })
    }))
}

pub async fn run(env: &Env) -> anyhow::Result<()> {
    let (cat, queries) = load()?;
    println!("## Finding tools in a large catalog (wf_find)\n");
    println!(
        "{} real tool definitions from {} servers' own tools/list (bench/retrieval/tools.json), {} hand-written tasks each labelled with the tool that does it (bench/retrieval/queries.json); wf's BM25 index, in process.\n",
        cat.tools.len(),
        cat.servers.len(),
        queries.len()
    );
    let servers: Vec<String> = cat
        .servers
        .iter()
        .map(|(s, p, n)| format!("{s} ({p}, {n})"))
        .collect();
    println!("Servers: {}.\n", servers.join(", "));

    // Quality.
    let idx = index(&mut SegmentCache::default(), &cat.tools, "");
    let (mut hit5, mut rr, mut misses) = (0usize, 0f64, Vec::new());
    for (q, want) in &queries {
        let hits = idx.search(q, 10, |_| true);
        match hits.iter().position(|h| h.key == want) {
            Some(i) => {
                hit5 += usize::from(i < 5);
                rr += 1.0 / (i + 1) as f64;
                if i >= 5 {
                    misses.push(format!("`{q}` → {want} at rank {}", i + 1));
                }
            }
            None => misses.push(format!(
                "`{q}` → {want} not in the top 10 (first: {})",
                hits.first().map_or("nothing", |h| h.key)
            )),
        }
    }
    let n = queries.len().max(1) as f64;
    let (recall, mrr) = (hit5 as f64 / n, rr / n);
    println!("| measure | value | target | |");
    println!("|---|---:|---:|---|");
    println!(
        "| recall@5 | {recall:.3} ({hit5}/{}) | ≥ 0.9 | {} |",
        queries.len(),
        verdict(recall >= 0.9)
    );
    println!("| MRR (top 10) | {mrr:.3} | | |");

    // What a client receives: tools/list in full against search mode.
    let full_list: Vec<&Value> = cat.tools.iter().map(|t| &t.2).collect();
    let full = serde_json::to_vec(&json!({"tools": full_list}))?.len();
    let search =
        serde_json::to_vec(&json!({"tools": wf_host::server::meta_tool_definitions()}))?.len();
    let find_answers: Vec<usize> = queries
        .iter()
        .take(20)
        .map(|(q, _)| {
            // The answer wf_find gives: its own match objects and hint.
            let tools: Vec<Value> = idx
                .search(q, 8, |_| true)
                .iter()
                .filter_map(|h| cat.tools.iter().find(|t| t.1 == h.key))
                .filter_map(|t| {
                    let tool = serde_json::from_value(t.2.clone()).ok()?;
                    Some(wf_host::server::find_hit(&t.1, &t.0, &tool))
                })
                .collect();
            let hint =
                "call one with wf_call {name, arguments}; wf_describe {names} gives full schemas";
            serde_json::to_vec(&json!({"tools": tools, "hint": hint})).map_or(0, |v| v.len())
        })
        .collect();
    let mut sorted = find_answers.clone();
    sorted.sort_unstable();
    let find_median = sorted.get(sorted.len() / 2).copied().unwrap_or(0);
    let tok = |b: usize| (b as f64 / BYTES_PER_TOKEN).round() as u64;
    let share = search as f64 / full as f64;
    println!(
        "| tools/list, `full` ({} tools) | {full} B ≈ {} tokens | | |",
        cat.tools.len(),
        tok(full)
    );
    println!(
        "| tools/list, `search` (3 meta-tools) | {search} B ≈ {} tokens | ≤ 5% of full | {} ({:.2}%) |",
        tok(search),
        verdict(share <= 0.05),
        share * 100.0
    );
    println!(
        "| a wf_find answer (8 matches), median of 20 | {find_median} B ≈ {} tokens | | |",
        tok(find_median)
    );

    // Speed at 5,000 tools: the catalog replicated under renamed sources.
    let copies = LATENCY_TOOLS.div_ceil(cat.tools.len().max(1));
    let big: Vec<(String, String, Value)> = (0..copies)
        .flat_map(|k| {
            cat.tools.iter().map(move |(s, name, t)| {
                let source = format!("{s}{k}");
                let name = name.replacen(&format!("{s}__"), &format!("{source}__"), 1);
                (source, name, t.clone())
            })
        })
        .collect();
    let mut cache = SegmentCache::default();
    let t0 = Instant::now();
    let big_idx = index(&mut cache, &big, "");
    let build = t0.elapsed();
    let bumped = big[0].0.clone();
    let t0 = Instant::now();
    let _ = index(&mut cache, &big, &bumped);
    let rebuild = t0.elapsed();
    let rounds = if env.quick { 3 } else { 30 };
    let mut samples: Vec<Duration> = Vec::with_capacity(rounds * queries.len());
    for _ in 0..rounds {
        for (q, _) in &queries {
            let t0 = Instant::now();
            let hits = big_idx.search(q, 8, |_| true);
            samples.push(t0.elapsed());
            std::hint::black_box(hits);
        }
    }
    let p50 = percentile(&samples, 0.5);
    println!(
        "| query latency over {} tools, p50 | {:.0} µs | ≤ 2 ms | {} |",
        big.len(),
        us(p50),
        verdict(p50 <= Duration::from_millis(2))
    );
    println!(
        "| query latency, p95 / p99 ({} queries) | {:.0} / {:.0} µs | | |",
        samples.len(),
        us(percentile(&samples, 0.95)),
        us(percentile(&samples, 0.99))
    );
    println!(
        "| index build, {} tools in {} sources / one source changed | {:.1} / {:.1} ms | | |",
        big.len(),
        copies * cat.servers.len(),
        build.as_secs_f64() * 1e3,
        rebuild.as_secs_f64() * 1e3
    );
    println!(
        "\nThe 5,000-tool catalog is the real one replicated {copies} times under renamed sources (`github0`, `github1`, …). Tokens: bytes ÷ {BYTES_PER_TOKEN} (a stated estimate, no tokenizer)."
    );
    if !misses.is_empty() {
        println!("\nNot in the top 5 ({}):\n", misses.len());
        for m in &misses {
            println!("- {m}");
        }
    }
    println!();
    Ok(())
}
