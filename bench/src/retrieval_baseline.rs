#![allow(dead_code)]
//! The ranker `wf_find` used before issue 56, kept verbatim (less its
//! tests) so wf-bench reports it beside today's on the same data.
//!
//! A lexical index over capabilities: BM25 over names, descriptions,
//! parameter names and descriptions, and source names. Hand-written (about
//! 250 lines, no dependency): measured against the `bm25` crate and chosen
//! for recall and latency on the same data (docs/benchmarks.md, "Finding
//! tools in a large catalog").
//!
//! The index is made of one segment per source, so a discovery or reload
//! that changes one source re-tokenises only that source; document
//! frequencies are summed over segments when the index is assembled.

use std::collections::HashMap;
use std::sync::Arc;

use serde_json::Value;

/// BM25 parameters (the usual ones).
const K1: f32 = 1.2;
const B: f32 = 0.3;

/// Field weights: a word in a name says more than one in a long description.
const W_NAME: u32 = 3;
const W_PARAM: u32 = 2;
const W_TEXT: u32 = 1;

/// Words that carry no meaning in a query or a description.
const STOP: &[&str] = &[
    "a", "an", "and", "are", "as", "at", "be", "by", "for", "from", "i", "if", "in", "into", "is",
    "it", "its", "me", "my", "of", "on", "or", "that", "the", "this", "to", "use", "used", "using",
    "was", "when", "which", "will", "with", "you", "your", "can", "all", "any", "some", "do",
    "does", "should", "would", "please", "want", "need",
];

/// The words of `text`: split at anything that is not a letter or digit
/// and at camelCase humps, lower-cased, stop words dropped, lightly stemmed
/// (a plural or verb ending, so "messages" finds "message").
pub fn tokens(text: &str) -> Vec<String> {
    let mut out = Vec::new();
    let mut word = String::new();
    let mut prev_lower = false;
    let flush = |word: &mut String, out: &mut Vec<String>| {
        if !word.is_empty() {
            let w = std::mem::take(word);
            if !STOP.contains(&w.as_str()) {
                out.push(stem(w));
            }
        }
    };
    for c in text.chars() {
        if c.is_alphanumeric() {
            if c.is_uppercase() && prev_lower {
                flush(&mut word, &mut out);
            }
            prev_lower = c.is_lowercase() || c.is_ascii_digit();
            word.extend(c.to_lowercase());
        } else {
            prev_lower = false;
            flush(&mut word, &mut out);
        }
    }
    flush(&mut word, &mut out);
    out
}

fn stem(mut w: String) -> String {
    // Plurals only: "messages" → "message", "echoes" → "echo",
    // "processes" → "process"; verb endings strip too unevenly to help.
    if w.len() > 4 && w.ends_with("es") && w[..w.len() - 2].ends_with(['s', 'x', 'z', 'h', 'o']) {
        w.truncate(w.len() - 2);
    } else if w.len() > 3 && w.ends_with('s') && !w.ends_with("ss") && !w.ends_with("us") {
        w.truncate(w.len() - 1);
    }
    w
}

/// What is indexed of one capability.
#[derive(Debug, Clone, Default)]
pub struct DocText {
    /// The key a hit is reported under (a tool's client-visible name).
    pub key: String,
    pub source: String,
    /// The capability's own name.
    pub name: String,
    pub description: String,
    /// Parameter names and their descriptions.
    pub params: Vec<(String, String)>,
}

impl DocText {
    /// A tool's text: its name, description and its input schema's
    /// top-level properties.
    pub fn tool(key: &str, source: &str, name: &str, description: &str, schema: &Value) -> Self {
        let params = schema
            .get("properties")
            .and_then(Value::as_object)
            .map(|props| {
                props
                    .iter()
                    .map(|(k, v)| {
                        let d = v.get("description").and_then(Value::as_str).unwrap_or("");
                        (k.clone(), d.to_string())
                    })
                    .collect()
            })
            .unwrap_or_default();
        Self {
            key: key.to_string(),
            source: source.to_string(),
            name: name.to_string(),
            description: description.to_string(),
            params,
        }
    }
}

#[derive(Debug)]
struct Doc {
    key: String,
    source: String,
    len: u32,
}

/// The documents of one source.
#[derive(Debug, Default)]
pub struct Segment {
    docs: Vec<Doc>,
    /// term → (document, weighted term frequency)
    postings: HashMap<String, Vec<(u32, u32)>>,
    total_len: u64,
}

impl Segment {
    pub fn build(docs: &[DocText]) -> Self {
        let mut seg = Segment::default();
        for (i, d) in docs.iter().enumerate() {
            let mut tf: HashMap<String, u32> = HashMap::new();
            let mut add = |text: &str, w: u32| {
                for t in tokens(text) {
                    *tf.entry(t).or_default() += w;
                }
            };
            add(&d.name, W_NAME);
            add(&d.source, W_TEXT);
            add(&d.description, W_TEXT);
            for (p, pd) in &d.params {
                add(p, W_PARAM);
                add(pd, W_TEXT);
            }
            let len: u32 = tf.values().sum();
            for (t, n) in tf {
                seg.postings.entry(t).or_default().push((i as u32, n));
            }
            seg.total_len += u64::from(len);
            seg.docs.push(Doc {
                key: d.key.clone(),
                source: d.source.clone(),
                len,
            });
        }
        seg
    }

    pub fn len(&self) -> usize {
        self.docs.len()
    }

    pub fn is_empty(&self) -> bool {
        self.docs.is_empty()
    }
}

/// One match: the capability's key and source, and its score.
#[derive(Debug, Clone, PartialEq)]
pub struct Hit<'a> {
    pub key: &'a str,
    pub source: &'a str,
    pub score: f32,
}

/// Segments assembled into one searchable index.
#[derive(Debug, Default)]
pub struct Index {
    segments: Vec<Arc<Segment>>,
    /// Where each segment's documents start in the score array.
    offsets: Vec<usize>,
    df: HashMap<String, u32>,
    n_docs: usize,
    avg_len: f32,
}

impl Index {
    pub fn new(segments: Vec<Arc<Segment>>) -> Self {
        let mut df: HashMap<String, u32> = HashMap::new();
        let (mut offsets, mut n_docs, mut total) = (Vec::new(), 0, 0u64);
        for s in &segments {
            offsets.push(n_docs);
            n_docs += s.docs.len();
            total += s.total_len;
            for (t, p) in &s.postings {
                *df.entry(t.clone()).or_default() += p.len() as u32;
            }
        }
        let avg_len = if n_docs == 0 {
            1.0
        } else {
            (total as f32 / n_docs as f32).max(1.0)
        };
        Self {
            segments,
            offsets,
            df,
            n_docs,
            avg_len,
        }
    }

    pub fn len(&self) -> usize {
        self.n_docs
    }

    pub fn is_empty(&self) -> bool {
        self.n_docs == 0
    }

    /// The best `limit` documents for `query` that `keep` accepts, best
    /// first (ties in index order). Documents that share no word with the
    /// query are not returned.
    pub fn search(&self, query: &str, limit: usize, keep: impl Fn(&Hit) -> bool) -> Vec<Hit<'_>> {
        let mut terms = tokens(query);
        terms.sort();
        terms.dedup();
        let mut scores = vec![0f32; self.n_docs];
        let n = self.n_docs as f32;
        for t in &terms {
            let Some(&df) = self.df.get(t) else { continue };
            let idf = ((n - df as f32 + 0.5) / (df as f32 + 0.5) + 1.0).ln();
            for (s, seg) in self.segments.iter().enumerate() {
                let Some(postings) = seg.postings.get(t) else {
                    continue;
                };
                let base = self.offsets[s];
                for &(d, tf) in postings {
                    let tf = tf as f32;
                    let len = seg.docs[d as usize].len as f32;
                    let norm = K1 * (1.0 - B + B * len / self.avg_len);
                    scores[base + d as usize] += idf * tf * (K1 + 1.0) / (tf + norm);
                }
            }
        }
        let mut ranked: Vec<(usize, f32)> = scores
            .into_iter()
            .enumerate()
            .filter(|(_, s)| *s > 0.0)
            .collect();
        ranked.sort_by(|a, b| b.1.total_cmp(&a.1).then(a.0.cmp(&b.0)));
        let mut out = Vec::with_capacity(limit);
        for (i, score) in ranked {
            if out.len() >= limit {
                break;
            }
            let s = self.offsets.partition_point(|&o| o <= i) - 1;
            let doc = &self.segments[s].docs[i - self.offsets[s]];
            let hit = Hit {
                key: &doc.key,
                source: &doc.source,
                score,
            };
            if keep(&hit) {
                out.push(hit);
            }
        }
        out
    }
}

/// Segments kept by source between rebuilds: a source whose documents did
/// not change (same fingerprint) keeps its segment.
#[derive(Debug, Default)]
pub struct SegmentCache {
    by_source: HashMap<String, (u64, Arc<Segment>)>,
    /// Segments built (not reused) so far, for tests and logs.
    pub built: usize,
}

impl SegmentCache {
    /// The index over `sources` (name, fingerprint, documents made only
    /// when the fingerprint changed); sources no longer present are dropped.
    pub fn index<'a, F>(&mut self, sources: impl IntoIterator<Item = (&'a str, u64, F)>) -> Index
    where
        F: FnOnce() -> Vec<DocText>,
    {
        let mut next = HashMap::new();
        let mut segments = Vec::new();
        for (source, fp, docs) in sources {
            let seg = match self.by_source.remove(source) {
                Some((old, seg)) if old == fp => seg,
                _ => {
                    self.built += 1;
                    Arc::new(Segment::build(&docs()))
                }
            };
            segments.push(seg.clone());
            next.insert(source.to_string(), (fp, seg));
        }
        self.by_source = next;
        Index::new(segments)
    }
}
