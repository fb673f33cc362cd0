//! Retrieval: how well `wf_find` finds the tool a task needs in a large
//! catalog of real tool definitions, what the client saves in `search` mode,
//! and how fast a query is over 5,000 tools.
//!
//! Data (checked in, bench/retrieval/): `tools.json`, real servers' own
//! `tools/list` (captured once by `capture.py`, which says how);
//! `queries.json`, hand-written tasks each labelled with the tool that does
//! it, worded close to the tools (the set the lexical ranker was tuned on);
//! `tune.json`, 95 tasks in a user's words, written from tasks and kept
//! unlike intent.json's (the set the semantic blend was tuned on, with
//! queries.json); and `intent.json`, 111 tasks in a user's words, written
//! from tasks before their tools were looked up, each labelled with every
//! tool that would do (held out: never tuned on). The index is wf's own
//! (`wf_host::catalog::search`), beside the ranker it replaced
//! (retrieval_baseline.rs); nothing is started, so the run takes seconds.

use std::collections::BTreeMap;
use std::path::Path;
use std::time::{Duration, Instant};

use anyhow::Context;
use serde_json::{Value, json};
use wf_host::catalog::embed::{Embedder, Vectors, tool_text};
use wf_host::catalog::search::{Blend, DocText, Index, SEM_DEPTH, SegmentCache};
use wf_host::config::EmbeddingsConfig;

use crate::Env;

#[path = "retrieval_baseline.rs"]
mod baseline;
use crate::stats::{percentile, us, verdict};

/// A client's tokens per byte of tools/list JSON, for the token column: the
/// common ~4 bytes per token of English text under cl100k-style tokenizers
/// (JSON schemas tokenize somewhat denser, so read it as an estimate).
const BYTES_PER_TOKEN: f64 = 4.0;
/// The catalog size the latency target is set at (the real 822 tools, 7 times).
const LATENCY_TOOLS: usize = 5_754;

/// A task and the tools that would do it (any of them counts).
struct Query {
    query: String,
    tools: Vec<String>,
}

struct Catalog {
    /// (source, client-visible name, tool JSON as listed)
    tools: Vec<(String, String, Value)>,
    servers: Vec<(String, String, usize)>,
}

fn data_dir() -> &'static Path {
    Path::new(concat!(env!("CARGO_MANIFEST_DIR"), "/retrieval"))
}

/// The catalog and the query sets: queries.json, tune.json, intent.json.
type Loaded = (Catalog, Vec<Query>, Vec<Query>, Vec<Query>);

fn load() -> anyhow::Result<Loaded> {
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
    let queries = |f: &str| -> anyhow::Result<Vec<Query>> {
        Ok(read(f)?
            .as_array()
            .into_iter()
            .flatten()
            .map(|q| {
                let mut tools: Vec<String> = q["tools"]
                    .as_array()
                    .into_iter()
                    .flatten()
                    .filter_map(Value::as_str)
                    .map(str::to_string)
                    .collect();
                if let Some(t) = q["tool"].as_str() {
                    tools.push(t.to_string());
                }
                Query {
                    query: q["query"].as_str().unwrap_or_default().to_string(),
                    tools,
                }
            })
            .collect())
    };
    Ok((
        cat,
        queries("queries.json")?,
        queries("tune.json")?,
        queries("intent.json")?,
    ))
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

/// The ranker `wf_find` used before issue 56, over the same tools.
fn baseline_index(tools: &[(String, String, Value)]) -> baseline::Index {
    let mut by_source: BTreeMap<&str, Vec<baseline::DocText>> = BTreeMap::new();
    for (source, name, t) in tools {
        let original = name.strip_prefix(&format!("{source}__")).unwrap_or(name);
        by_source
            .entry(source)
            .or_default()
            .push(baseline::DocText::tool(
                name,
                source,
                original,
                t["description"].as_str().unwrap_or(""),
                &t["inputSchema"],
            ));
    }
    baseline::Index::new(
        by_source
            .values()
            .map(|docs| std::sync::Arc::new(baseline::Segment::build(docs)))
            .collect(),
    )
}

/// recall@1, recall@5, MRR (top 10) of a ranker over `queries`, and the
/// queries it missed in the top 5.
struct Quality {
    r1: f64,
    r5: f64,
    mrr: f64,
    hits5: usize,
    n: usize,
    misses: Vec<String>,
}

fn quality(queries: &[Query], rank: impl Fn(&str) -> Vec<String>) -> Quality {
    let (mut h1, mut h5, mut rr, mut misses) = (0usize, 0usize, 0f64, Vec::new());
    for q in queries {
        let hits = rank(&q.query);
        match hits.iter().position(|h| q.tools.contains(h)) {
            Some(i) => {
                h1 += usize::from(i == 0);
                h5 += usize::from(i < 5);
                rr += 1.0 / (i + 1) as f64;
                if i >= 5 {
                    misses.push(format!("`{}` → {} at rank {}", q.query, q.tools[0], i + 1));
                }
            }
            None => misses.push(format!(
                "`{}` → {} not in the top 10 (first: {})",
                q.query,
                q.tools[0],
                hits.first().map_or("nothing", String::as_str)
            )),
        }
    }
    let n = queries.len().max(1) as f64;
    Quality {
        r1: h1 as f64 / n,
        r5: h5 as f64 / n,
        mrr: rr / n,
        hits5: h5,
        n: queries.len(),
        misses,
    }
}

/// Resident memory of this process, KiB.
fn rss_kib() -> u64 {
    std::fs::read_to_string("/proc/self/status")
        .ok()
        .and_then(|s| {
            s.lines()
                .find(|l| l.starts_with("VmRSS:"))
                .and_then(|l| l.split_whitespace().nth(1)?.parse().ok())
        })
        .unwrap_or(0)
}

/// The catalog replicated under renamed sources (`github0`, `github1`, …).
fn replicate(cat: &Catalog, copies: usize) -> Vec<(String, String, Value)> {
    (0..copies)
        .flat_map(|k| {
            cat.tools.iter().map(move |(s, name, t)| {
                let source = format!("{s}{k}");
                let name = name.replacen(&format!("{s}__"), &format!("{source}__"), 1);
                (source, name, t.clone())
            })
        })
        .collect()
}

/// Query latency samples of `search` over every query, `rounds` times.
fn latency(queries: &[&str], rounds: usize, search: impl Fn(&str) -> usize) -> Vec<Duration> {
    let mut samples = Vec::with_capacity(rounds * queries.len());
    for _ in 0..rounds {
        for q in queries {
            let t0 = Instant::now();
            std::hint::black_box(search(q));
            samples.push(t0.elapsed());
        }
    }
    samples
}

pub async fn run(env: &Env) -> anyhow::Result<()> {
    let (cat, tuned, tune, intent) = load()?;
    println!("## Finding tools in a large catalog (wf_find)\n");
    println!(
        "{} real tool definitions from {} servers' own tools/list (bench/retrieval/tools.json). Three query sets: `queries.json` ({} tasks worded close to the tools; the lexical ranker's settings were tuned on it), `tune.json` ({} tasks in a user's words, kept unlike intent.json's; the semantic blend's settings were tuned on it and queries.json) and `intent.json` ({} tasks in a user's words, written from tasks before looking the tools up, each labelled with every tool that would do; held out, never tuned on). In process, nothing started.\n",
        cat.tools.len(),
        cat.servers.len(),
        tuned.len(),
        tune.len(),
        intent.len()
    );
    let servers: Vec<String> = cat
        .servers
        .iter()
        .map(|(s, p, n)| format!("{s} ({p}, {n})"))
        .collect();
    println!("Servers: {}.\n", servers.join(", "));

    // Quality, every ranker on both sets.
    let idx = index(&mut SegmentCache::default(), &cat.tools, "");
    let old = baseline_index(&cat.tools);
    let lexical = |q: &str| -> Vec<String> {
        idx.search(q, 10, |_| true)
            .iter()
            .map(|h| h.key.to_string())
            .collect()
    };
    let before = |q: &str| -> Vec<String> {
        old.search(q, 10, |_| true)
            .iter()
            .map(|h| h.key.to_string())
            .collect()
    };
    let sets: [(&str, &[Query]); 3] = [
        ("queries.json (tuned on)", &tuned),
        ("tune.json (tuned on)", &tune),
        ("intent.json (held out)", &intent),
    ];
    println!("| ranker | query set | recall@1 | recall@5 | MRR (top 10) | target recall@5 | |");
    println!("|---|---|---:|---:|---:|---:|---|");
    let mut lexical_misses = Vec::new();
    for (set, queries) in sets {
        let b = quality(queries, before);
        println!(
            "| BM25 (previous ranker) | {set} | {:.3} | {:.3} ({}/{}) | {:.3} | | |",
            b.r1, b.r5, b.hits5, b.n, b.mrr
        );
        let l = quality(queries, lexical);
        let (target, ok) = if set.starts_with("intent") {
            ("≥ 0.75", Some(l.r5 >= 0.75))
        } else if set.starts_with("queries") {
            ("≥ before", Some(l.r5 >= b.r5))
        } else {
            ("", None)
        };
        println!(
            "| lexical (default) | {set} | {:.3} | {:.3} ({}/{}) | {:.3} | {target} | {} |",
            l.r1,
            l.r5,
            l.hits5,
            l.n,
            l.mrr,
            ok.map_or("", verdict)
        );
        lexical_misses.push((set, l.misses));
    }
    let semantic = semantic_rows(env, &cat, &idx, &sets).await;
    // For outside probes (a semantic ranker's blend): the lexical top 50 of
    // every query of both sets as [key, score, confidence], as JSON, when asked.
    if let Ok(path) = std::env::var("WF_BENCH_RETRIEVAL_DUMP") {
        let top = |q: &str| -> Vec<Value> {
            idx.search(q, 50, |_| true)
                .iter()
                .map(|h| json!([h.key, h.score, h.confidence]))
                .collect()
        };
        let dump: BTreeMap<&str, Vec<Vec<Value>>> = [
            ("queries.json", &tuned),
            ("tune.json", &tune),
            ("intent.json", &intent),
        ]
        .into_iter()
        .map(|(f, qs)| (f, qs.iter().map(|q| top(&q.query)).collect()))
        .collect();
        std::fs::write(&path, serde_json::to_vec(&dump)?)?;
    }

    // What a client receives: tools/list in full against search mode.
    let full_list: Vec<&Value> = cat.tools.iter().map(|t| &t.2).collect();
    let full = serde_json::to_vec(&json!({"tools": full_list}))?.len();
    let search =
        serde_json::to_vec(&json!({"tools": wf_host::server::meta_tool_definitions()}))?.len();
    let find_answers: Vec<usize> = intent
        .iter()
        .take(20)
        .map(|q| {
            // The answer wf_find gives: its own match objects and hint.
            let tools: Vec<Value> = idx
                .search(&q.query, 8, |_| true)
                .iter()
                .filter_map(|h| cat.tools.iter().find(|t| t.1 == h.key).map(|t| (t, h)))
                .filter_map(|(t, h)| {
                    let tool = serde_json::from_value(t.2.clone()).ok()?;
                    let mut v = wf_host::server::find_hit(&t.1, &t.0, &tool);
                    v["confidence"] = json!((h.confidence * 100.0).round() / 100.0);
                    Some(v)
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
    println!("\n| measure | value | target | |");
    println!("|---|---:|---:|---|");
    println!(
        "| tools/list, `full` ({} tools) | {full} B ≈ {} tokens | | |",
        cat.tools.len(),
        tok(full)
    );
    println!(
        "| tools/list, `search` (3 meta-tools) | {search} B ≈ {} tokens | < 5% of full | {} ({:.2}%) |",
        tok(search),
        verdict(share < 0.05),
        share * 100.0
    );
    println!(
        "| a wf_find answer (8 matches), median of 20 | {find_median} B ≈ {} tokens | | |",
        tok(find_median)
    );

    // Speed and memory at 822 and 5,754 tools.
    let copies = LATENCY_TOOLS.div_ceil(cat.tools.len().max(1));
    let rounds = if env.quick { 3 } else { 30 };
    let all: Vec<&str> = tuned
        .iter()
        .chain(intent.iter())
        .map(|q| q.query.as_str())
        .collect();
    let p50_822 = percentile(
        &latency(&all, rounds, |q| idx.search(q, 8, |_| true).len()),
        0.5,
    );
    let big = replicate(&cat, copies);
    let mut cache = SegmentCache::default();
    let rss0 = rss_kib();
    let t0 = Instant::now();
    let big_idx = index(&mut cache, &big, "");
    let build = t0.elapsed();
    let rss1 = rss_kib();
    let bumped = big[0].0.clone();
    let t0 = Instant::now();
    let _ = index(&mut cache, &big, &bumped);
    let rebuild = t0.elapsed();
    let samples = latency(&all, rounds, |q| big_idx.search(q, 8, |_| true).len());
    let p50 = percentile(&samples, 0.5);
    let old_big = baseline_index(&big);
    let old_p50 = percentile(
        &latency(&all, rounds, |q| old_big.search(q, 8, |_| true).len()),
        0.5,
    );
    println!(
        "| query latency over {} tools, p50 | {:.0} µs | | |",
        cat.tools.len(),
        us(p50_822)
    );
    println!(
        "| query latency over {} tools, p50 (previous ranker: {:.0} µs) | {:.0} µs | ≤ 2 ms | {} |",
        big.len(),
        us(old_p50),
        us(p50),
        verdict(p50 <= Duration::from_millis(2))
    );
    println!(
        "| query latency over {} tools, p95 / p99 ({} queries) | {:.0} / {:.0} µs | | |",
        big.len(),
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
        "| index memory, {} tools (resident growth while building) | {} | | |",
        big.len(),
        crate::stats::mib(rss1.saturating_sub(rss0))
    );
    println!(
        "\nThe {}-tool catalog is the real one replicated {copies} times under renamed sources (`github0`, `github1`, …). Tokens: bytes ÷ {BYTES_PER_TOKEN} (a stated estimate, no tokenizer).",
        big.len()
    );
    if let Some(sem) = &semantic {
        semantic_speed(sem, &cat, &idx, &all, rounds, copies, p50_822, p50);
    }
    for (set, misses) in lexical_misses {
        if !misses.is_empty() {
            println!("\nLexical, {set}: not in the top 5 ({}):\n", misses.len());
            for m in &misses {
                println!("- {m}");
            }
        }
    }
    println!();
    Ok(())
}

/// The embeddings endpoint of tests/e2e/embeddings_server.py (a sentence
/// model in numpy), started for the run; stopped when dropped.
struct EmbedServer {
    child: std::process::Child,
    url: String,
    /// The model's name, for the rows.
    model: &'static str,
    /// `query_prefix` and `document_prefix` for the model (e5's own; none
    /// for the sentence-similarity models), unless `WF_BENCH_QUERY_PREFIX`
    /// / `WF_BENCH_DOCUMENT_PREFIX` say otherwise.
    query_prefix: String,
    document_prefix: String,
}

impl Drop for EmbedServer {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

/// Starts the Python endpoint with `WF_BENCH_EMBED_PYTHON` (default the e2e
/// venv's python) and the model `WF_BENCH_EMBED_MODEL` names: `minilm`
/// (default, all-MiniLM-L6-v2 from the venv), `mpnet` (all-mpnet-base-v2
/// from the folder `WF_BENCH_EMBED_MODEL_DIR`, which
/// bench/retrieval/fetch_mpnet.sh fills), `e5` (multilingual-e5-small,
/// 4-bit, with its `query: ` / `passage: ` prefixes, from the folder
/// bench/retrieval/fetch_e5.sh fills) or `gemma` (EmbeddingGemma-300M with
/// its retrieval prompts, from the folder bench/retrieval/fetch_gemma.sh
/// fills); `Err` says why not.
fn start_embed_server() -> anyhow::Result<EmbedServer> {
    use std::io::BufRead;
    let root = Path::new(concat!(env!("CARGO_MANIFEST_DIR"), "/.."));
    let python = std::env::var("WF_BENCH_EMBED_PYTHON")
        .map(std::path::PathBuf::from)
        .unwrap_or_else(|_| root.join("tests/e2e/.venv/bin/python"));
    anyhow::ensure!(python.exists(), "{} is missing", python.display());
    let mut cmd = std::process::Command::new(&python);
    cmd.arg(root.join("tests/e2e/embeddings_server.py"));
    let model = match std::env::var("WF_BENCH_EMBED_MODEL").as_deref() {
        Err(_) | Ok("minilm") => "all-MiniLM-L6-v2",
        Ok("mpnet") => {
            let dir = std::env::var("WF_BENCH_EMBED_MODEL_DIR")
                .context("WF_BENCH_EMBED_MODEL=mpnet needs WF_BENCH_EMBED_MODEL_DIR")?;
            cmd.args(["--model", "mpnet", "--model-dir", &dir]);
            "all-mpnet-base-v2"
        }
        Ok("e5") => {
            let dir = std::env::var("WF_BENCH_EMBED_MODEL_DIR")
                .context("WF_BENCH_EMBED_MODEL=e5 needs WF_BENCH_EMBED_MODEL_DIR")?;
            cmd.args(["--model", "e5", "--model-dir", &dir]);
            "multilingual-e5-small-q4"
        }
        Ok("gemma") => {
            let dir = std::env::var("WF_BENCH_EMBED_MODEL_DIR")
                .context("WF_BENCH_EMBED_MODEL=gemma needs WF_BENCH_EMBED_MODEL_DIR")?;
            cmd.args(["--model", "gemma", "--model-dir", &dir]);
            "embeddinggemma-300m"
        }
        Ok(other) => anyhow::bail!("WF_BENCH_EMBED_MODEL={other}: minilm, mpnet, e5 or gemma"),
    };
    // Each model's own prompts (none for the sentence-transformers pair).
    let (query, document) = match model {
        "multilingual-e5-small-q4" => ("query: ", "passage: "),
        "embeddinggemma-300m" => ("task: search result | query: ", "title: none | text: "),
        _ => ("", ""),
    };
    let prefix = |var: &str, default: &str| std::env::var(var).unwrap_or_else(|_| default.into());
    let query_prefix = prefix("WF_BENCH_QUERY_PREFIX", query);
    let document_prefix = prefix("WF_BENCH_DOCUMENT_PREFIX", document);
    let mut child = cmd
        .stdout(std::process::Stdio::piped())
        .stderr(std::process::Stdio::piped())
        .spawn()?;
    let out = child.stdout.take().context("stdout")?;
    let mut line = String::new();
    std::io::BufReader::new(out).read_line(&mut line)?;
    let Some(port) = line.trim().strip_prefix("listening on ") else {
        let mut err = String::new();
        if let Some(mut e) = child.stderr.take() {
            use std::io::Read;
            let _ = e.read_to_string(&mut err);
        }
        let _ = child.kill();
        anyhow::bail!("the embeddings server did not start: {}", err.trim());
    };
    Ok(EmbedServer {
        url: format!("http://127.0.0.1:{port}/v1/embeddings"),
        child,
        model,
        query_prefix,
        document_prefix,
    })
}

/// What the semantic rows measured, for the speed table.
struct SemanticRun {
    server: EmbedServer,
    vectors: Vectors,
    /// Tool key → its vector, for the replicated catalog.
    by_key: BTreeMap<String, Vec<f32>>,
    /// Query text → its vector.
    queries: BTreeMap<String, Vec<f32>>,
    embed_tools: Duration,
    query_ms: Vec<Duration>,
}

/// recall rows for semantic alone and blended, or a note saying why none.
async fn semantic_rows(
    env: &Env,
    cat: &Catalog,
    idx: &Index,
    sets: &[(&str, &[Query]); 3],
) -> Option<SemanticRun> {
    if env.quick && std::env::var_os("WF_BENCH_SEMANTIC").is_none() {
        println!(
            "| lexical + semantic | both | — | — | — | ≥ 0.90 | skipped in --quick (embedding 822 tools takes minutes; WF_BENCH_SEMANTIC=1 runs it) |"
        );
        return None;
    }
    let run = async {
        let server = start_embed_server()?;
        // The prefixes go through the operator's own settings (and wf's code
        // that applies them).
        let embedder = Embedder::new(&EmbeddingsConfig {
            endpoint: server.url.clone(),
            model: server.model.into(),
            api_key_env: None,
            timeout_ms: 120_000,
            batch_timeout_ms: 600_000,
            query_prefix: server.query_prefix.clone(),
            document_prefix: server.document_prefix.clone(),
            lexical_share: None,
        })?;
        let long = Duration::from_secs(600);
        let texts: Vec<String> = cat
            .tools
            .iter()
            .map(|(source, name, t)| {
                let original = name.strip_prefix(&format!("{source}__")).unwrap_or(name);
                embedder.document(&tool_text(
                    source,
                    original,
                    t["description"].as_str().unwrap_or(""),
                ))
            })
            .collect();
        let t0 = Instant::now();
        let mut by_key = BTreeMap::new();
        // By length, as wf batches them (less padding).
        let mut order: Vec<usize> = (0..texts.len()).collect();
        order.sort_by_key(|&i| texts[i].len());
        for chunk in order.chunks(32) {
            let batch: Vec<String> = chunk.iter().map(|&i| texts[i].clone()).collect();
            let vecs = embedder.embed(&batch, long).await?;
            for (&i, v) in chunk.iter().zip(vecs) {
                by_key.insert(cat.tools[i].1.clone(), v);
            }
        }
        let embed_tools = t0.elapsed();
        let mut queries = BTreeMap::new();
        let mut query_ms = Vec::new();
        for (_, qs) in sets {
            for q in *qs {
                let t0 = Instant::now();
                let v = embedder.embed_query(&q.query, long).await?;
                query_ms.push(t0.elapsed());
                queries.insert(q.query.clone(), v);
            }
        }
        let vectors = Vectors::new(
            cat.tools
                .iter()
                .filter_map(|t| Some((t.1.clone(), by_key.get(&t.1)?.clone().into()))),
        );
        anyhow::Ok(SemanticRun {
            server,
            vectors,
            by_key,
            queries,
            embed_tools,
            query_ms,
        })
    };
    let sem = match run.await {
        Ok(s) => s,
        Err(e) => {
            println!(
                "| lexical + semantic | both | — | — | — | ≥ 0.90 | skipped: {e} (tests/run installs the venv) |"
            );
            return None;
        }
    };
    if !sem.server.query_prefix.is_empty() || !sem.server.document_prefix.is_empty() {
        println!(
            "| ({}: query_prefix {}, document_prefix {}) | | | | | | |",
            sem.server.model,
            format!("{:?}", sem.server.query_prefix).replace('|', "\\|"),
            format!("{:?}", sem.server.document_prefix).replace('|', "\\|")
        );
    }
    // The blend's settings, swept on the tuning sets (queries.json and
    // tune.json: best recall@5 summed, then MRR); the default is what wf ships.
    let blended = |blend: &Blend, queries: &[Query]| {
        quality(queries, |q| {
            let near = sem
                .vectors
                .nearest(&sem.queries[q], blend.sem_depth.max(SEM_DEPTH));
            idx.search_blended_with(blend, q, &near, 10, |_| true)
                .iter()
                .map(|h| h.key.to_string())
                .collect()
        })
    };
    let mut sweep = Vec::new();
    for lex_share in [0.05, 0.1, 0.15, 0.2, 0.25, 0.3, 0.4, 0.5] {
        for lex_depth in [10, 20, 50] {
            let b = Blend {
                lex_share,
                lex_depth,
                sem_depth: SEM_DEPTH,
            };
            let (q, t) = (blended(&b, sets[0].1), blended(&b, sets[1].1));
            sweep.push((b, q.r5 + t.r5, q.mrr + t.mrr));
        }
    }
    sweep.sort_by(|a, b| b.1.total_cmp(&a.1).then(b.2.total_cmp(&a.2)));
    let best = sweep[0].0;
    println!(
        "| (sweep on queries.json + tune.json: best lexical share {}, lexical depth {} — r@5 {:.3}, MRR {:.3}, summed over the two; shipped: share {}, depth {}) | | | | | | |",
        best.lex_share,
        best.lex_depth,
        sweep[0].1,
        sweep[0].2,
        Blend::DEFAULT.lex_share,
        Blend::DEFAULT.lex_depth,
    );
    for (set, queries) in sets {
        let alone = quality(queries, |q| {
            sem.vectors
                .nearest(&sem.queries[q], 10)
                .into_iter()
                .map(|(k, _)| k.to_string())
                .collect()
        });
        println!(
            "| semantic alone ({}) | {set} | {:.3} | {:.3} ({}/{}) | {:.3} | | |",
            sem.server.model, alone.r1, alone.r5, alone.hits5, alone.n, alone.mrr
        );
        let r = quality(queries, |q| {
            rrf(
                &idx.search(q, 10, |_| true)
                    .iter()
                    .map(|h| h.key)
                    .collect::<Vec<_>>(),
                &sem.vectors.nearest(&sem.queries[q], 50),
            )
        });
        println!(
            "| lexical + semantic, reciprocal-rank fusion (before) | {set} | {:.3} | {:.3} ({}/{}) | {:.3} | | |",
            r.r1, r.r5, r.hits5, r.n, r.mrr
        );
        let held_out = set.starts_with("intent");
        let verdict_of = |r5: f64| {
            if held_out {
                ("≥ 0.90", Some(r5 >= 0.90))
            } else {
                ("", None)
            }
        };
        // The winner is what an operator gets with `lexical_share` set to it
        // (its depth is wf's unless the sweep chose another): chosen on the
        // tuning sets, so its held-out row is a fair measure too.
        if best != Blend::DEFAULT {
            let t = blended(&best, queries);
            let ok = verdict_of(t.r5);
            println!(
                "| lexical + semantic (the sweep's winner: `lexical_share = {}`{}) | {set} | {:.3} | {:.3} ({}/{}) | {:.3} | {} | {} |",
                best.lex_share,
                if best.lex_depth == Blend::DEFAULT.lex_depth {
                    String::new()
                } else {
                    format!(", lexical depth {}", best.lex_depth)
                },
                t.r1,
                t.r5,
                t.hits5,
                t.n,
                t.mrr,
                ok.0,
                ok.1.map_or("", verdict)
            );
        }
        let b = blended(&Blend::DEFAULT, queries);
        let (target, ok) = verdict_of(b.r5);
        println!(
            "| lexical + semantic (default blend) | {set} | {:.3} | {:.3} ({}/{}) | {:.3} | {target} | {} |",
            b.r1,
            b.r5,
            b.hits5,
            b.n,
            b.mrr,
            ok.map_or("", verdict)
        );
    }
    Some(sem)
}

/// The fusion wf shipped first, for comparison: reciprocal rank (k = 60) of
/// the lexical top 10 and the semantic top 50, each weighing 1.
fn rrf(lexical: &[&str], nearest: &[(&str, f32)]) -> Vec<String> {
    let mut fused: BTreeMap<&str, f64> = BTreeMap::new();
    for (r, k) in lexical.iter().take(10).enumerate() {
        *fused.entry(k).or_default() += 1.0 / (60.0 + r as f64);
    }
    for (r, (k, _)) in nearest.iter().take(50).enumerate() {
        *fused.entry(k).or_default() += 1.0 / (60.0 + r as f64);
    }
    let mut ranked: Vec<(&str, f64)> = fused.into_iter().collect();
    ranked.sort_by(|a, b| b.1.total_cmp(&a.1));
    ranked
        .into_iter()
        .take(10)
        .map(|(k, _)| k.to_string())
        .collect()
}

/// Blended query latency at 822 and 5,754 tools, excluding the endpoint's
/// own time (query vectors computed beforehand), and the vectors' memory.
#[allow(clippy::too_many_arguments)]
fn semantic_speed(
    sem: &SemanticRun,
    cat: &Catalog,
    idx: &Index,
    all: &[&str],
    rounds: usize,
    copies: usize,
    lex_822: Duration,
    lex_big: Duration,
) {
    let blended = |vectors: &Vectors, index: &Index, q: &str| {
        let near = vectors.nearest(&sem.queries[q], SEM_DEPTH);
        index.search_blended(q, &near, 8, |_| true).len()
    };
    let p50_822 = percentile(
        &latency(all, rounds, |q| blended(&sem.vectors, idx, q)),
        0.5,
    );
    // The replicas reuse the real tools' vectors (the scan costs the same).
    let big = replicate(cat, copies);
    let big_idx = index(&mut SegmentCache::default(), &big, "");
    // `replicate` lists copy after copy, in the catalog's order.
    let n = cat.tools.len().max(1);
    let big_vectors = Vectors::new(big.iter().enumerate().filter_map(|(j, (_, name, _))| {
        let base = &cat.tools[j % n].1;
        Some((name.clone(), sem.by_key.get(base)?.clone().into()))
    }));
    let samples = latency(all, rounds, |q| blended(&big_vectors, &big_idx, q));
    let p50 = percentile(&samples, 0.5);
    println!("\n| semantic ranker | value | target | |");
    println!("|---|---:|---:|---|");
    println!(
        "| lexical + semantic, query latency over {} tools, p50 (lexical alone {:.0} µs; endpoint excluded) | {:.0} µs | | |",
        cat.tools.len(),
        us(lex_822),
        us(p50_822)
    );
    println!(
        "| lexical + semantic, query latency over {} tools, p50 (lexical alone {:.0} µs; endpoint excluded) | {:.0} µs | ≤ 5 ms | {} |",
        big_vectors.len(),
        us(lex_big),
        us(p50),
        verdict(p50 <= Duration::from_millis(5))
    );
    println!(
        "| tool vectors, {} / {} tools × {} dims (f32) | {} / {} | | |",
        sem.vectors.len(),
        big_vectors.len(),
        sem.vectors.dim(),
        crate::stats::mib((sem.vectors.bytes() / 1024) as u64),
        crate::stats::mib((big_vectors.bytes() / 1024) as u64)
    );
    println!(
        "| the endpoint ({} in {}, this machine): {} tool texts / one query p50 | {:.1} s / {:.0} ms | | |",
        sem.server.model,
        if sem.server.model.starts_with("multilingual-e5") {
            "C, 4-bit"
        } else {
            "numpy"
        },
        cat.tools.len(),
        sem.embed_tools.as_secs_f64(),
        us(percentile(&sem.query_ms, 0.5)) / 1000.0
    );
}
