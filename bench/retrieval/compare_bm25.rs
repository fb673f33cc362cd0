// The measurement behind wf's choice of a hand-written BM25 (docs/benchmarks.md,
// "Finding tools in a large catalog"): the `bm25` crate against wf's own
// host/src/catalog/search.rs, on the retrieval benchmark's data, both in release.
// Not part of the build: a scratch crate, made like this (2026-12-03, bm25 2.3.x):
//
//   mkdir -p /tmp/bm25cmp/src && cp bench/retrieval/compare_bm25.rs /tmp/bm25cmp/src/main.rs
//   printf '[package]\nname = "bm25cmp"\nversion = "0.0.0"\nedition = "2021"\n[dependencies]\nbm25 = "2"\nserde_json = "1"\n' > /tmp/bm25cmp/Cargo.toml
//   (fix the #[path] below to this checkout) cd /tmp/bm25cmp && cargo build --release
//   ./target/release/bm25cmp <checkout>/bench/retrieval
//
// Scratch comparison (not part of wf): the `bm25` crate over the same data as
// wf-bench's retrieval benchmark. Document text: name, source, description,
// parameter names and descriptions (the fields wf indexes), name repeated 3x
// and parameter names 2x to mirror wf's field weights.
use bm25::{Document, Language, SearchEngineBuilder};
use std::time::Instant;
use std::sync::Arc;

// wf's own engine, the very file the host compiles.
#[allow(dead_code)]
#[path = "/path/to/wf/host/src/catalog/search.rs"]
mod search;

fn wf_engine(tools: &serde_json::Value, queries: &serde_json::Value) {
    let mut docs_all = Vec::new();
    for copy in 0..7 {
        let mut segs = Vec::new();
        for s in tools["servers"].as_array().unwrap() {
            let source = if copy == 0 { s["source"].as_str().unwrap().to_string() } else { format!("{}{copy}", s["source"].as_str().unwrap()) };
            let docs: Vec<search::DocText> = s["tools"].as_array().unwrap().iter().map(|t| {
                let n = t["name"].as_str().unwrap();
                search::DocText::tool(&format!("{source}__{n}"), &source, n, t["description"].as_str().unwrap_or(""), &t["inputSchema"])
            }).collect();
            segs.push(docs);
        }
        docs_all.extend(segs);
        if copy == 0 {
            let idx = search::Index::new(docs_all.iter().map(|d| Arc::new(search::Segment::build(d))).collect());
            let (mut hit5, mut rr) = (0, 0.0);
            let qs = queries.as_array().unwrap();
            for q in qs {
                let r = idx.search(q["query"].as_str().unwrap(), 10, |_| true);
                if let Some(i) = r.iter().position(|h| h.key == q["tool"].as_str().unwrap()) {
                    if i < 5 { hit5 += 1; }
                    rr += 1.0 / (i + 1) as f64;
                }
            }
            println!("wf: {} tools: recall@5 {:.3} ({hit5}/{}), MRR {:.3}", idx.len(), hit5 as f64 / qs.len() as f64, qs.len(), rr / qs.len() as f64);
        }
    }
    let t0 = Instant::now();
    let idx = search::Index::new(docs_all.iter().map(|d| Arc::new(search::Segment::build(d))).collect());
    println!("wf: build {} tools: {:.1} ms", idx.len(), t0.elapsed().as_secs_f64() * 1e3);
    let mut samples = Vec::new();
    for _ in 0..30 {
        for q in queries.as_array().unwrap() {
            let t0 = Instant::now();
            let r = idx.search(q["query"].as_str().unwrap(), 8, |_| true);
            samples.push(t0.elapsed());
            std::hint::black_box(r);
        }
    }
    samples.sort();
    println!("wf: query over {} tools: p50 {:.0} µs, p95 {:.0} µs", idx.len(), samples[samples.len() / 2].as_secs_f64() * 1e6, samples[samples.len() * 95 / 100].as_secs_f64() * 1e6);
}


fn main() {
    let dir = std::env::args().nth(1).unwrap();
    let tools: serde_json::Value = serde_json::from_str(&std::fs::read_to_string(format!("{dir}/tools.json")).unwrap()).unwrap();
    let queries: serde_json::Value = serde_json::from_str(&std::fs::read_to_string(format!("{dir}/queries.json")).unwrap()).unwrap();
    wf_engine(&tools, &queries);
    let mut names = Vec::new();
    let mut texts = Vec::new();
    for copy in 0..7 {
        for s in tools["servers"].as_array().unwrap() {
            let source = s["source"].as_str().unwrap();
            for t in s["tools"].as_array().unwrap() {
                let n = t["name"].as_str().unwrap();
                let split = n.replace(['_', '-'], " ");
                let mut text = format!("{split} {split} {split} {source} {}", t["description"].as_str().unwrap_or(""));
                if let Some(p) = t["inputSchema"]["properties"].as_object() {
                    for (k, v) in p {
                        let k = k.replace(['_', '-'], " ");
                        text += &format!(" {k} {k} {}", v["description"].as_str().unwrap_or(""));
                    }
                }
                names.push(if copy == 0 { format!("{source}__{n}") } else { format!("{source}{copy}__{n}") });
                texts.push(text);
            }
        }
        if copy == 0 {
            let n = names.len();
            let docs: Vec<Document<usize>> = texts.iter().enumerate().map(|(i, t)| Document::new(i, t.clone())).collect();
            let engine = SearchEngineBuilder::<usize>::with_documents(Language::English, docs).build();
            let (mut hit5, mut rr) = (0, 0.0);
            let qs = queries.as_array().unwrap();
            for q in qs {
                let r = engine.search(q["query"].as_str().unwrap(), 10);
                if let Some(i) = r.iter().position(|h| names[h.document.id] == q["tool"].as_str().unwrap()) {
                    if i < 5 { hit5 += 1; }
                    rr += 1.0 / (i + 1) as f64;
                }
            }
            println!("bm25 crate: {n} tools: recall@5 {:.3} ({hit5}/{}), MRR {:.3}", hit5 as f64 / qs.len() as f64, qs.len(), rr / qs.len() as f64);
        }
    }
    let t0 = Instant::now();
    let docs: Vec<Document<usize>> = texts.iter().enumerate().map(|(i, t)| Document::new(i, t.clone())).collect();
    let engine = SearchEngineBuilder::<usize>::with_documents(Language::English, docs).build();
    println!("bm25 crate: build {} tools: {:.1} ms", names.len(), t0.elapsed().as_secs_f64() * 1e3);
    let mut samples = Vec::new();
    for _ in 0..30 {
        for q in queries.as_array().unwrap() {
            let t0 = Instant::now();
            let r = engine.search(q["query"].as_str().unwrap(), 8);
            samples.push(t0.elapsed());
            std::hint::black_box(r);
        }
    }
    samples.sort();
    println!("bm25 crate: query over {} tools: p50 {:.0} µs, p95 {:.0} µs", names.len(), samples[samples.len() / 2].as_secs_f64() * 1e6, samples[samples.len() * 95 / 100].as_secs_f64() * 1e6);
}
