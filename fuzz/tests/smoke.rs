//! The stable-toolchain driver of the fuzz targets (the CI smoke run): each
//! target gets its checked-in corpus (seeds and every regression input), then
//! `WF_FUZZ_SMOKE_CASES` (default 2000) inputs mutated from it by a seeded
//! generator, so a failure names a reproducible case (`WF_FUZZ_SMOKE_SECS`
//! runs for a time instead of a count). libFuzzer (nightly)
//! runs the same functions for the long runs; see docs/fuzzing.md.
#![cfg_attr(test, allow(clippy::unwrap_used))]

use std::path::Path;

/// xorshift64*: small, seeded, good enough to pick mutations.
struct Rng(u64);

impl Rng {
    fn next(&mut self) -> u64 {
        self.0 ^= self.0 >> 12;
        self.0 ^= self.0 << 25;
        self.0 ^= self.0 >> 27;
        self.0.wrapping_mul(0x2545_f491_4f6c_dd1d)
    }
    fn below(&mut self, n: usize) -> usize {
        (self.next() % n.max(1) as u64) as usize
    }
}

/// Tokens that matter to wf's parsers, spliced in to reach past the syntax.
const TOKENS: &[&[u8]] = &[
    b"{",
    b"}",
    b"[",
    b"]",
    b"\"",
    b":",
    b",",
    b"\n",
    b"\t",
    b"\r\n",
    b"\\u0000",
    b"null",
    b"true",
    b"1e999",
    b"-0",
    b"\"op\":",
    b"\"$ref\":",
    b"\"nodes\"",
    b"\"after\"",
    b"\"use\":\"wf.std.",
    b"inputs.",
    b"nodes.",
    b".output",
    b"[sources.",
    b"mcpServers",
    b"\"disabled\":",
    b"kind = ",
    b"${",
    b"__",
    b"..",
    b"\xff",
    b"\xc3\xa9",
    b"Host: ",
    b"Origin: ",
    b"Authorization: Bearer ",
    b"Content-Length: ",
    b"Transfer-Encoding: chunked",
    b"\r\n\r\n",
    b"/mcp",
    b"Mcp-Session-Id: ",
];

fn mutate(rng: &mut Rng, corpus: &[Vec<u8>], out: &mut Vec<u8>) {
    out.clear();
    out.extend_from_slice(&corpus[rng.below(corpus.len())]);
    for _ in 0..=rng.below(8) {
        let at = rng.below(out.len() + 1);
        match rng.below(6) {
            0 if !out.is_empty() => {
                let i = rng.below(out.len());
                out[i] ^= 1 << rng.below(8);
            }
            1 => out.insert(at, rng.next() as u8),
            2 if at < out.len() => {
                let end = (at + 1 + rng.below(16)).min(out.len());
                out.drain(at..end);
            }
            3 => {
                let t = TOKENS[rng.below(TOKENS.len())];
                out.splice(at..at, t.iter().copied());
            }
            4 => {
                // Splice in a piece of another corpus entry.
                let other = &corpus[rng.below(corpus.len())];
                let from = rng.below(other.len());
                let len = rng.below(other.len() - from + 1);
                out.splice(at..at, other[from..from + len].iter().copied());
            }
            _ if !out.is_empty() => {
                // Duplicate a chunk (nesting, repeated keys).
                let from = rng.below(out.len());
                let len = rng.below((out.len() - from).min(64) + 1);
                let chunk = out[from..from + len].to_vec();
                out.splice(at..at, chunk);
            }
            _ => {}
        }
    }
}

fn corpus(target: &str) -> Vec<Vec<u8>> {
    let dir = Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("corpus")
        .join(target);
    let mut files: Vec<_> = std::fs::read_dir(&dir)
        .unwrap_or_else(|e| panic!("{}: {e}", dir.display()))
        .map(|e| e.unwrap().path())
        .collect();
    files.sort();
    let inputs: Vec<Vec<u8>> = files.iter().map(|f| std::fs::read(f).unwrap()).collect();
    assert!(!inputs.is_empty(), "{}: no seeds", dir.display());
    inputs
}

fn smoke(target: &str, run: fn(&[u8]), default_cases: usize) {
    let inputs = corpus(target);
    for input in &inputs {
        run(input);
    }
    let cases = std::env::var("WF_FUZZ_SMOKE_CASES")
        .ok()
        .and_then(|v| v.parse().ok())
        .unwrap_or(default_cases);
    let seed: u64 = std::env::var("WF_FUZZ_SEED")
        .ok()
        .and_then(|v| v.parse().ok())
        .unwrap_or(0x5eed_0faf);
    // A local long run may give a time budget instead of a count.
    let budget = std::env::var("WF_FUZZ_SMOKE_SECS")
        .ok()
        .and_then(|v| v.parse().ok())
        .map(std::time::Duration::from_secs);
    let started = std::time::Instant::now();
    let mut rng = Rng(seed | 1);
    let mut input = Vec::new();
    let mut case = 0;
    loop {
        match budget {
            Some(b) if started.elapsed() >= b => break,
            None if case >= cases => break,
            _ => {}
        }
        mutate(&mut rng, &inputs, &mut input);
        let result = std::panic::catch_unwind(|| run(&input));
        if result.is_err() {
            panic!(
                "{target}: case {case} (WF_FUZZ_SEED={seed}) failed on input {:?}",
                String::from_utf8_lossy(&input)
            );
        }
        case += 1;
    }
    eprintln!(
        "{target}: {} corpus inputs + {case} mutated inputs in {:.1} s",
        inputs.len(),
        started.elapsed().as_secs_f64()
    );
}

#[test]
fn config() {
    smoke("config", wf_fuzz::config, 2000);
}

#[test]
fn workflow() {
    smoke("workflow", wf_fuzz::workflow, 2000);
}

#[test]
fn source_request() {
    smoke("source_request", wf_fuzz::source_request, 2000);
}

#[test]
fn plugin_reply() {
    smoke("plugin_reply", wf_fuzz::plugin_reply, 2000);
}

#[test]
fn projection() {
    smoke("projection", wf_fuzz::projection, 2000);
}

#[test]
fn http() {
    // Each input is a loopback connection to the real HTTP front.
    smoke("http", wf_fuzz::http, 300);
}
