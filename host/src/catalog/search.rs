//! A lexical index over capabilities: BM25 over names, descriptions,
//! parameter names and descriptions, and source names, with Snowball
//! stemming, a synonym table for the vocabulary of tools (synonyms.rs) and
//! field weights. Hand-written BM25 (no dependency but the stemmer):
//! measured against the `bm25` crate and chosen for recall and latency on
//! the same data (docs/benchmarks.md, "Finding tools in a large catalog").
//!
//! The index is made of one segment per source, so a discovery or reload
//! that changes one source re-tokenises only that source; document
//! frequencies are summed over segments when the index is assembled.
//!
//! What the ranker does beyond plain BM25, and why (issue 56):
//! - words are stemmed by Snowball's English stemmer (`rust-stemmers`),
//!   so "leaking" finds "leak" and "titled" finds "title";
//! - a query word brings in its synonyms (`folder` → `directory`, `PR` →
//!   `pull request`) at [`SYNONYM_WEIGHT`] of its own weight;
//! - a word counts once per field of a description, so a long description
//!   does not win by repeating generic words (run, test, add, list);
//! - a tool's name and its source's name weigh more than its description;
//! - a tool whose name is mostly made of the query's words gains a little
//!   ([`NAME_FIT`]): `geocode` over `reverse_geocode` for "geocode";
//! - wf's own tools (a source named `wf` or `wf.*`) rank after every other
//!   match unless the query names them ("wf", "std", "workflow").
//!
//! With a semantic ranker configured (embed.rs), [`Index::search_blended`]
//! blends this ranking with the tools nearest the query's vector: a tool's
//! score is [`LEX_SHARE`] of its lexical score (over the best one's) plus
//! the rest of its cosine ([`LEX_DEPTH`], [`SEM_DEPTH`]; tuned on
//! bench/retrieval/tune.json and queries.json, intent.json held out: see
//! docs/benchmarks.md, where the reciprocal-rank fusion it replaced scored
//! lower on the tuning set).

use std::collections::{HashMap, HashSet};
use std::sync::{Arc, LazyLock};

use rust_stemmers::{Algorithm, Stemmer};
use serde_json::Value;

use super::synonyms::GROUPS;

/// BM25 parameters.
const K1: f32 = 1.2;
const B: f32 = 0.5;

/// Field weights: a word in a name says more than one in a long description.
const W_NAME: f32 = 3.0;
const W_SOURCE: f32 = 2.0;
const W_PARAM: f32 = 1.5;
const W_TEXT: f32 = 1.0;
/// A synonym's weight against the query word that brought it in.
pub const SYNONYM_WEIGHT: f32 = 0.5;
/// The bonus, as a share of the score, for a name wholly made of query words.
pub const NAME_FIT: f32 = 0.3;
/// Below this share of the query matched, a hit is not a good match
/// (`wf_find` then says so and lists the sources).
pub const GOOD_MATCH: f32 = 0.34;

/// The lexical score's share of a blended score (its cosine has the rest).
pub const LEX_SHARE: f32 = 0.2;
/// How many lexical matches enter the blend.
pub const LEX_DEPTH: usize = 50;
/// How many of the nearest tools by vector enter the blend; a lexical match
/// beyond them counts the last one's cosine.
pub const SEM_DEPTH: usize = 300;

/// The blend's settings ([`Blend::DEFAULT`]: the constants above; the
/// benchmark sweeps others on its tuning sets).
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct Blend {
    pub lex_share: f32,
    pub lex_depth: usize,
    pub sem_depth: usize,
}

impl Blend {
    pub const DEFAULT: Blend = Blend {
        lex_share: LEX_SHARE,
        lex_depth: LEX_DEPTH,
        sem_depth: SEM_DEPTH,
    };
}

/// Words that carry no meaning in a query or a description.
const STOP: &[&str] = &[
    "a", "an", "and", "are", "as", "at", "be", "by", "for", "from", "i", "if", "in", "into", "is",
    "it", "its", "me", "my", "of", "on", "or", "that", "the", "this", "to", "use", "used", "using",
    "was", "when", "which", "will", "with", "you", "your", "can", "all", "any", "some", "do",
    "does", "should", "would", "please", "want", "need", "what", "how", "there", "our", "we", "s",
    "t", "let", "so", "them", "it's", "just", "about", "up", "out", "one", "every",
];

static STEMMER: LazyLock<Stemmer> = LazyLock::new(|| Stemmer::create(Algorithm::English));

/// Stemmed word → the stemmed words of its synonyms (phrases split).
static SYNONYMS: LazyLock<HashMap<String, Vec<String>>> = LazyLock::new(|| {
    let mut map: HashMap<String, Vec<String>> = HashMap::new();
    for group in GROUPS {
        let words: Vec<Vec<String>> = group.iter().map(|w| tokens(w)).collect();
        for (i, key) in words.iter().enumerate() {
            // A phrase is a key only through its first word's group when it
            // is one word; multi-word phrases are targets, and their words
            // stand for the phrase's group too ("pull request" → "pr").
            for k in key {
                let e = map.entry(k.clone()).or_default();
                for (j, other) in words.iter().enumerate() {
                    if i != j {
                        e.extend(other.iter().filter(|o| *o != k).cloned());
                    }
                }
            }
        }
    }
    for v in map.values_mut() {
        v.sort();
        v.dedup();
    }
    map
});

/// The words of `text`: split at anything that is not a letter or digit
/// and at camelCase humps, lower-cased, stop words dropped, stemmed by
/// Snowball's English stemmer.
pub fn tokens(text: &str) -> Vec<String> {
    let mut out = Vec::new();
    let mut word = String::new();
    let mut prev_lower = false;
    let flush = |word: &mut String, out: &mut Vec<String>| {
        if !word.is_empty() {
            let w = std::mem::take(word);
            if !STOP.contains(&w.as_str()) {
                out.push(STEMMER.stem(&w).into_owned());
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

/// A query's terms and their weights: its own words at 1, their synonyms
/// at [`SYNONYM_WEIGHT`] (a word the query has itself keeps weight 1).
pub fn query_terms(query: &str) -> Vec<(String, f32)> {
    let own = tokens(query);
    let mut terms: Vec<(String, f32)> = Vec::new();
    let mut seen: HashSet<&str> = HashSet::new();
    for t in &own {
        if seen.insert(t) {
            terms.push((t.clone(), 1.0));
        }
    }
    for t in &own {
        for s in SYNONYMS.get(t).into_iter().flatten() {
            if seen.insert(s) {
                terms.push((s.clone(), SYNONYM_WEIGHT));
            }
        }
    }
    terms
}

/// Whether `source` is one of wf's own (ranked only when asked for).
pub fn is_host_source(source: &str) -> bool {
    source == "wf" || source.starts_with("wf.") || source.starts_with("wf_")
}

/// Query words that ask for wf's own tools.
const HOST_WORDS: &[&str] = &["wf", "std", "workflow"];

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
    len: f32,
    host: bool,
    /// The distinct words of the capability's name.
    name_words: u16,
}

/// One posting: a document, its weighted term frequency, and whether the
/// term is in the document's name.
#[derive(Debug, Clone, Copy)]
struct Posting {
    doc: u32,
    tf: f32,
    in_name: bool,
}

/// The documents of one source.
#[derive(Debug, Default)]
pub struct Segment {
    docs: Vec<Doc>,
    postings: HashMap<String, Vec<Posting>>,
    total_len: f64,
}

impl Segment {
    pub fn build(docs: &[DocText]) -> Self {
        let mut seg = Segment::default();
        for (i, d) in docs.iter().enumerate() {
            let mut tf: HashMap<String, (f32, bool)> = HashMap::new();
            // Each field counts a word once: a long description does not
            // gain by repeating it.
            let mut add = |text: &str, w: f32, name: bool| {
                let mut words = tokens(text);
                words.sort();
                words.dedup();
                for t in words {
                    let e = tf.entry(t).or_default();
                    e.0 += w;
                    e.1 |= name;
                }
            };
            add(&d.name, W_NAME, true);
            add(&d.source, W_SOURCE, false);
            add(&d.description, W_TEXT, false);
            let names: Vec<&str> = d.params.iter().map(|(p, _)| p.as_str()).collect();
            add(&names.join(" "), W_PARAM, false);
            let texts: Vec<&str> = d.params.iter().map(|(_, t)| t.as_str()).collect();
            add(&texts.join(" "), W_TEXT, false);
            let len: f32 = tf.values().map(|v| v.0).sum();
            let mut name_words = tokens(&d.name);
            name_words.sort();
            name_words.dedup();
            for (t, (n, in_name)) in tf {
                seg.postings.entry(t).or_default().push(Posting {
                    doc: i as u32,
                    tf: n,
                    in_name,
                });
            }
            seg.total_len += f64::from(len);
            seg.docs.push(Doc {
                key: d.key.clone(),
                source: d.source.clone(),
                len,
                host: is_host_source(&d.source),
                name_words: name_words.len().min(u16::MAX as usize) as u16,
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

/// One match: the capability's key and source, its score, and how much of
/// the query it matched (0 to 1: the share of the query words' weight,
/// by their rarity, found in this tool, synonyms counting at their weight).
#[derive(Debug, Clone, PartialEq)]
pub struct Hit<'a> {
    pub key: &'a str,
    pub source: &'a str,
    pub score: f32,
    pub confidence: f32,
}

impl Hit<'_> {
    /// Whether this hit matches the query well enough to offer.
    pub fn is_good(&self) -> bool {
        self.confidence >= GOOD_MATCH
    }
}

/// Segments assembled into one searchable index.
#[derive(Debug, Default)]
pub struct Index {
    segments: Vec<Arc<Segment>>,
    /// Where each segment's documents start in the score array.
    offsets: Vec<usize>,
    /// term → its document frequency and the segments that have it.
    df: HashMap<String, (u32, Vec<u32>)>,
    n_docs: usize,
    avg_len: f32,
    /// key → global document.
    by_key: HashMap<String, u32>,
}

impl Index {
    pub fn new(segments: Vec<Arc<Segment>>) -> Self {
        let mut df: HashMap<String, (u32, Vec<u32>)> = HashMap::new();
        let (mut offsets, mut n_docs, mut total) = (Vec::new(), 0, 0f64);
        for (i, s) in segments.iter().enumerate() {
            offsets.push(n_docs);
            n_docs += s.docs.len();
            total += s.total_len;
            for (t, p) in &s.postings {
                let e = df.entry(t.clone()).or_default();
                e.0 += p.len() as u32;
                e.1.push(i as u32);
            }
        }
        let by_key = segments
            .iter()
            .flat_map(|s| s.docs.iter())
            .enumerate()
            .map(|(i, d)| (d.key.clone(), i as u32))
            .collect();
        let avg_len = if n_docs == 0 {
            1.0
        } else {
            ((total / n_docs as f64) as f32).max(1.0)
        };
        Self {
            segments,
            offsets,
            df,
            n_docs,
            avg_len,
            by_key,
        }
    }

    pub fn len(&self) -> usize {
        self.n_docs
    }

    pub fn is_empty(&self) -> bool {
        self.n_docs == 0
    }

    fn idf(&self, df: u32) -> f32 {
        let n = self.n_docs as f32;
        ((n - df as f32 + 0.5) / (df as f32 + 0.5) + 1.0).ln()
    }

    /// The documents `query` matches, as (global document, score,
    /// confidence), unsorted.
    fn score(&self, terms: &[(String, f32)]) -> Vec<(usize, f32, f32)> {
        let mut scores = vec![0f32; self.n_docs];
        let mut covered = vec![0f32; self.n_docs];
        let mut name_hits = vec![0u16; self.n_docs];
        let mut touched: Vec<usize> = Vec::new();
        // The query's weight: its own words by rarity (a word no tool has
        // counts as the rarest), so confidence says how much was found.
        let mut total = 0f32;
        let rarest = self.idf(0);
        for (t, w) in terms {
            if *w < 1.0 {
                continue;
            }
            total += self.df.get(t).map_or(rarest, |(df, _)| self.idf(*df));
        }
        for (t, w) in terms {
            let Some((df, segs)) = self.df.get(t) else {
                continue;
            };
            let idf = self.idf(*df);
            for &s in segs {
                let seg = &self.segments[s as usize];
                let Some(postings) = seg.postings.get(t) else {
                    continue;
                };
                let base = self.offsets[s as usize];
                for p in postings {
                    let d = base + p.doc as usize;
                    if scores[d] == 0.0 && covered[d] == 0.0 {
                        touched.push(d);
                    }
                    let len = seg.docs[p.doc as usize].len;
                    let norm = K1 * (1.0 - B + B * len / self.avg_len);
                    scores[d] += w * idf * p.tf * (K1 + 1.0) / (p.tf + norm);
                    // A synonym covers at most what its query word would.
                    covered[d] += w * idf;
                    if p.in_name {
                        name_hits[d] += 1;
                    }
                }
            }
        }
        let mut out = Vec::with_capacity(touched.len());
        for d in touched {
            {
                if scores[d] <= 0.0 {
                    continue;
                }
                let doc = self.doc(d);
                let fit =
                    f32::from(name_hits[d].min(doc.name_words)) / f32::from(doc.name_words.max(1));
                let score = scores[d] * (1.0 + NAME_FIT * fit);
                let confidence = if total > 0.0 {
                    (covered[d] / total).min(1.0)
                } else {
                    0.0
                };
                out.push((d, score, confidence));
            }
        }
        out
    }

    /// Every document `query` matches lexically, best first, as (ranked
    /// after the others: a host tool not asked for; document; score;
    /// confidence).
    fn ranked(&self, query: &str) -> Vec<(bool, usize, f32, f32)> {
        let terms = query_terms(query);
        let wants_host = self.wants_host(&terms);
        let mut ranked: Vec<(bool, usize, f32, f32)> = self
            .score(&terms)
            .into_iter()
            .map(|(d, s, c)| {
                let host = !wants_host && self.doc(d).host;
                (host, d, s, c)
            })
            .collect();
        ranked.sort_by(|a, b| a.0.cmp(&b.0).then(b.2.total_cmp(&a.2)).then(a.1.cmp(&b.1)));
        ranked
    }

    fn wants_host(&self, terms: &[(String, f32)]) -> bool {
        terms
            .iter()
            .any(|(t, w)| *w >= 1.0 && HOST_WORDS.contains(&t.as_str()))
    }

    /// The best `limit` documents for `query` that `keep` accepts, best
    /// first (ties in index order). Documents that share no word with the
    /// query (or a synonym of one) are not returned; wf's own tools come
    /// after every other match unless the query asks for them.
    pub fn search(&self, query: &str, limit: usize, keep: impl Fn(&Hit) -> bool) -> Vec<Hit<'_>> {
        let mut out = Vec::with_capacity(limit);
        for (_, i, score, confidence) in self.ranked(query) {
            if out.len() >= limit {
                break;
            }
            let doc = self.doc(i);
            let hit = Hit {
                key: &doc.key,
                source: &doc.source,
                score,
                confidence,
            };
            if keep(&hit) {
                out.push(hit);
            }
        }
        out
    }

    /// [`Self::search`] blended with `nearest`, the tools nearest the
    /// query's vector (key, cosine), best first: over the first
    /// [`LEX_DEPTH`] lexical matches and the first [`SEM_DEPTH`] nearest
    /// that `keep` accepts, a tool scores [`LEX_SHARE`] × its lexical score
    /// over the best one's + (1 − [`LEX_SHARE`]) × its cosine (a lexical
    /// match not among the nearest counts the last one's). A hit's
    /// confidence is the larger of its lexical confidence and its cosine.
    /// wf's own tools still come last unless asked for. Keys not in the
    /// index are ignored.
    pub fn search_blended(
        &self,
        query: &str,
        nearest: &[(&str, f32)],
        limit: usize,
        keep: impl Fn(&Hit) -> bool,
    ) -> Vec<Hit<'_>> {
        self.search_blended_with(&Blend::DEFAULT, query, nearest, limit, keep)
    }

    /// [`Self::search_blended`] with other settings.
    pub fn search_blended_with(
        &self,
        blend: &Blend,
        query: &str,
        nearest: &[(&str, f32)],
        limit: usize,
        keep: impl Fn(&Hit) -> bool,
    ) -> Vec<Hit<'_>> {
        let terms = query_terms(query);
        let wants_host = self.wants_host(&terms);
        let hit = |d: usize, score: f32, confidence: f32| {
            let doc = self.doc(d);
            Hit {
                key: &doc.key,
                source: &doc.source,
                score,
                confidence,
            }
        };
        // The nearest `keep` accepts: document → cosine.
        let mut cosine: HashMap<usize, f32> = HashMap::new();
        let mut floor = 0f32;
        for (key, cos) in nearest {
            if cosine.len() >= blend.sem_depth {
                break;
            }
            let Some(&d) = self.by_key.get(*key) else {
                continue;
            };
            let cos = cos.clamp(0.0, 1.0);
            if !cosine.contains_key(&(d as usize)) && keep(&hit(d as usize, cos, cos)) {
                cosine.insert(d as usize, cos);
                floor = cos;
            }
        }
        let mut lexical: Vec<(usize, f32, f32)> = Vec::new();
        for (_, d, score, confidence) in self.ranked(query) {
            if lexical.len() >= blend.lex_depth {
                break;
            }
            if keep(&hit(d, score, confidence)) {
                lexical.push((d, score, confidence));
            }
        }
        let best = lexical.iter().map(|l| l.1).fold(0f32, f32::max);
        // document → (blended score, confidence)
        let mut blended: HashMap<usize, (f32, f32)> = HashMap::new();
        for (d, score, confidence) in lexical {
            let cos = cosine.get(&d).copied();
            let s = blend.lex_share * score / best + (1.0 - blend.lex_share) * cos.unwrap_or(floor);
            blended.insert(d, (s, confidence.max(cos.unwrap_or(0.0))));
        }
        for (d, cos) in cosine {
            blended
                .entry(d)
                .or_insert(((1.0 - blend.lex_share) * cos, cos));
        }
        let mut ranked: Vec<(bool, usize, f32, f32)> = blended
            .into_iter()
            .map(|(d, (s, c))| (!wants_host && self.doc(d).host, d, s, c))
            .collect();
        ranked.sort_by(|a, b| a.0.cmp(&b.0).then(b.2.total_cmp(&a.2)).then(a.1.cmp(&b.1)));
        ranked
            .into_iter()
            .take(limit)
            .map(|(_, d, score, confidence)| hit(d, score, confidence))
            .collect()
    }

    fn doc(&self, i: usize) -> &Doc {
        let s = self.offsets.partition_point(|&o| o <= i) - 1;
        &self.segments[s].docs[i - self.offsets[s]]
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

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn doc(key: &str, source: &str, description: &str) -> DocText {
        DocText::tool(
            key,
            source,
            key.rsplit("__").next().unwrap_or(key),
            description,
            &json!({}),
        )
    }

    #[test]
    fn tokens_split_case_and_stem() {
        assert_eq!(
            tokens("getTinyImage browser_navigate Messages a"),
            tokens("get tiny image browser navigate message")
        );
        // Snowball, beyond plurals: "leaking" is "leak", "titled" is "title".
        assert_eq!(tokens("leaking titled"), tokens("leak title"));
        assert_eq!(tokens("leaking"), ["leak"]);
    }

    #[test]
    fn query_words_bring_their_synonyms_at_a_lower_weight() {
        let terms = query_terms("make a new folder");
        let weight = |w: &str| {
            let t = &tokens(w)[0];
            terms.iter().find(|(x, _)| x == t).map(|(_, w)| *w)
        };
        assert_eq!(weight("folder"), Some(1.0));
        assert_eq!(weight("new"), Some(1.0));
        assert_eq!(weight("directory"), Some(SYNONYM_WEIGHT));
        assert_eq!(weight("create"), Some(SYNONYM_WEIGHT));
        assert_eq!(weight("zebra"), None);
        // An abbreviation brings in the words of its phrase, and back.
        let pr = query_terms("merge the PR");
        assert!(pr.iter().any(|(t, _)| *t == tokens("pull")[0]));
        assert!(query_terms("pull request").iter().any(|(t, _)| t == "pr"));
    }

    #[test]
    fn a_synonym_finds_a_tool_that_shares_no_word_with_the_query() {
        let seg = Segment::build(&[
            doc("fs__create_directory", "fs", "Create a new directory"),
            doc("fs__read_file", "fs", "Read a file"),
        ]);
        let index = Index::new(vec![Arc::new(seg)]);
        let hits = index.search("make a folder", 5, |_| true);
        assert_eq!(hits[0].key, "fs__create_directory");
        assert!(hits[0].confidence > 0.0 && hits[0].confidence < 1.0);
    }

    #[test]
    fn a_long_description_does_not_win_on_repeated_common_words() {
        let long = "Run a test. Run the test suite, run tests, run every test, \
                    list tests, add tests, run run run test test test.";
        let seg = Segment::build(&[
            doc("ci__runner", "ci", long),
            doc("ci__run_tests", "ci", "Runs the project's tests"),
        ]);
        let index = Index::new(vec![Arc::new(seg)]);
        assert_eq!(
            index.search("run the tests", 5, |_| true)[0].key,
            "ci__run_tests"
        );
    }

    #[test]
    fn a_name_made_of_the_query_words_beats_a_longer_one() {
        let seg = Segment::build(&[
            doc("maps__reverse_geocode", "maps", "Address for coordinates"),
            doc("maps__geocode", "maps", "Coordinates for an address"),
        ]);
        let index = Index::new(vec![Arc::new(seg)]);
        assert_eq!(
            index.search("geocode an address", 5, |_| true)[0].key,
            "maps__geocode"
        );
    }

    #[test]
    fn the_source_name_counts() {
        let seg =
            |s: &str, d: &str| Arc::new(Segment::build(&[doc(&format!("{s}__search"), s, d)]));
        let index = Index::new(vec![
            seg("memory", "Search the nodes of the graph"),
            seg("web", "Search the web for pages"),
        ]);
        assert_eq!(
            index.search("search in memory", 5, |_| true)[0].key,
            "memory__search"
        );
    }

    #[test]
    fn wf_tools_rank_after_others_unless_asked_for() {
        let index = Index::new(vec![
            Arc::new(Segment::build(&[doc(
                "wf_std__sleep",
                "wf.std",
                "Sleep for a while, then return",
            )])),
            Arc::new(Segment::build(&[doc(
                "maps__directions",
                "maps",
                "Directions between two places; a while to drive",
            )])),
        ]);
        let keys = |q: &str| -> Vec<String> {
            index
                .search(q, 5, |_| true)
                .iter()
                .map(|h| h.key.to_string())
                .collect()
        };
        // The host tool still matches better, but comes second.
        assert_eq!(
            keys("sleep a while then drive"),
            ["maps__directions", "wf_std__sleep"]
        );
        assert_eq!(keys("wf sleep a while then drive")[0], "wf_std__sleep");
        assert!(is_host_source("wf.std") && is_host_source("wf") && !is_host_source("wfx"));
    }

    #[test]
    fn confidence_says_how_much_of_the_query_was_found() {
        let seg = Segment::build(&[doc("fs__read_file", "fs", "Read a file from disk")]);
        let index = Index::new(vec![Arc::new(seg)]);
        let full = &index.search("read file", 5, |_| true)[0];
        assert!(full.confidence > 0.99 && full.is_good(), "{full:?}");
        let weak = &index.search("file taxes quarterly penguins", 5, |_| true)[0];
        assert!(weak.confidence < GOOD_MATCH && !weak.is_good(), "{weak:?}");
    }

    #[test]
    fn ranks_the_closest_tool_first_and_filters() {
        let seg = Segment::build(&[
            doc("everything__echo", "everything", "Echoes back the input"),
            doc("everything__add", "everything", "Adds two numbers"),
            doc(
                "fs__read_file",
                "fs",
                "Read a file's contents; message logs",
            ),
        ]);
        let index = Index::new(vec![Arc::new(seg)]);
        let hits = index.search("echo a message", 5, |_| true);
        assert_eq!(hits[0].key, "everything__echo");
        let hits = index.search("echo", 5, |h| h.key != "everything__echo");
        assert!(hits.is_empty());
        assert!(index.search("zebra", 5, |_| true).is_empty());
    }

    /// The e2e scenario (tests/e2e/test_catalog_search.py): server-everything's
    /// echo among 30 fixture upstreams that each have an `echo` of their own.
    #[test]
    fn a_richer_description_wins_over_many_bare_namesakes() {
        let message =
            |d: &str| json!({"properties": {"message": {"type": "string", "description": d}}});
        let mut segments = vec![Arc::new(Segment::build(&[DocText::tool(
            "everything__echo",
            "everything",
            "echo",
            "Echoes back the input string",
            &message("Message to echo"),
        )]))];
        for i in 0..30 {
            let (key, source) = (format!("fx{i:02}__echo"), format!("fx{i:02}"));
            let schema = json!({"properties": {"message": {"type": "string"}}});
            segments.push(Arc::new(Segment::build(&[
                DocText::tool(&key, &source, "echo", "Returns its message", &schema),
                DocText::tool(
                    &format!("{source}__increment"),
                    &source,
                    "increment",
                    "Adds `by` (default 1) to the session's counter",
                    &json!({}),
                ),
            ])));
        }
        let index = Index::new(segments);
        assert_eq!(
            index.search("echo a message", 3, |_| true)[0].key,
            "everything__echo"
        );
    }

    #[test]
    fn the_blend_finds_what_shares_no_word_and_keeps_lexical_hits() {
        let index = Index::new(vec![
            Arc::new(Segment::build(&[
                doc("web__screenshot", "web", "Capture the browser viewport"),
                doc("web__navigate", "web", "Open a page in the browser"),
                doc("fs__read_file", "fs", "Read a file"),
            ])),
            Arc::new(Segment::build(&[doc(
                "wf_std__sleep",
                "wf.std",
                "Sleep for a while",
            )])),
        ]);
        let q = "freeze this moment visually";
        assert!(index.search(q, 5, |_| true).is_empty());
        let nearest = [
            ("wf_std__sleep", 0.7),
            ("web__screenshot", 0.62),
            ("gone__tool", 0.9),
            ("fs__read_file", 0.1),
        ];
        let hits = index.search_blended(q, &nearest, 5, |_| true);
        let keys: Vec<&str> = hits.iter().map(|h| h.key).collect();
        // The host tool, though nearest, is not asked for; a vanished key is ignored.
        assert_eq!(keys, ["web__screenshot", "fs__read_file", "wf_std__sleep"]);
        assert!(hits[0].is_good() && (hits[0].confidence - 0.62).abs() < 1e-6);
        // A lexical match with no vector still ranks; `keep` filters both.
        let hits = index.search_blended("open a page", &nearest, 5, |h| h.source != "wf.std");
        let keys: Vec<&str> = hits.iter().map(|h| h.key).collect();
        assert_eq!(keys.len(), 3, "{keys:?}");
        assert!(keys[..2].contains(&"web__navigate"), "{keys:?}");
        assert!(!keys.contains(&"wf_std__sleep"));
    }

    #[test]
    fn unchanged_sources_keep_their_segment() {
        let mut cache = SegmentCache::default();
        let a = || vec![doc("a__x", "a", "one")];
        let b = || vec![doc("b__y", "b", "two")];
        let i = cache.index([
            ("a", 1, Box::new(a) as Box<dyn FnOnce() -> _>),
            ("b", 1, Box::new(b)),
        ]);
        assert_eq!((i.len(), cache.built), (2, 2));
        let b2 = || vec![doc("b__y", "b", "two"), doc("b__z", "b", "three")];
        let i = cache.index([
            ("a", 1, Box::new(a) as Box<dyn FnOnce() -> _>),
            ("b", 2, Box::new(b2)),
        ]);
        assert_eq!((i.len(), cache.built), (3, 3));
        assert_eq!(i.search("three", 5, |_| true)[0].key, "b__z");
    }
}
