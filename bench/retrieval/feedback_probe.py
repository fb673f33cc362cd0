"""A probe for pseudo-relevance feedback in wf_find's semantic ranker, outside wf:
after a first blended ranking (wf's `search_blended`), the query's vector is moved
towards the mean vector of its top `k` tools (Rocchio: q' = q + beta * mean), and the
blend is run again with q'. It costs one more scan of the tool vectors and no more
embedding calls. docs/performance/retrieval.md has its results.

    WF_BENCH_RETRIEVAL_DUMP=/tmp/lexical.json target/debug/wf-bench --only retrieval --quick
    tests/e2e/.venv/bin/python bench/retrieval/ensemble_probe.py embed minilm CACHE_DIR
    tests/e2e/.venv/bin/python bench/retrieval/feedback_probe.py /tmp/lexical.json CACHE_DIR [minilm|mpnet]

Settings are chosen on queries.json and tune.json (summed recall@5, then MRR);
intent.json is held out: its column is printed, never used to choose.
"""

from __future__ import annotations

import json
import sys
from pathlib import Path

import numpy as np

ROOT = Path(__file__).resolve().parent
sys.path.insert(0, str(ROOT))
from ensemble_probe import SETS, TUNING, catalog, scored  # noqa: E402
from semantic_probe import blended  # noqa: E402  (wf's blend, one copy)


def main() -> None:
    lex = json.loads(Path(sys.argv[1]).read_text())
    cache = Path(sys.argv[2]) / (sys.argv[3] if len(sys.argv) > 3 else "minilm")
    keys, _ = catalog()
    at = {k: i for i, k in enumerate(keys)}
    sets = {f: json.loads((ROOT / f).read_text()) for f in SETS}
    tools = np.load(cache / "tools.npy")
    queries = {f: np.load(cache / f"q-{f}.npy") for f in SETS}

    def metrics(f: str, ranked: list[list[str]]) -> tuple[float, float, float]:
        return scored(sets[f], ranked)

    def feedback(f: str, first: list[list[str]], k: int, beta: float, weighted: bool) -> np.ndarray:
        # Each query's vector, moved towards its first ranking's top k tools.
        out = queries[f].copy()
        for i, ranked in enumerate(first):
            top = [at[key] for key in ranked[:k]]
            w = np.array([1 / (r + 1) for r in range(len(top))] if weighted else [1.0] * len(top))
            centre = (tools[top] * w[:, None]).sum(0) / w.sum()
            q = out[i] + beta * centre
            out[i] = q / np.linalg.norm(q)
        return out @ tools.T

    rows = []

    def row(name: str, rank) -> None:
        m = {f: metrics(f, rank(f)) for f in SETS}
        rows.append((sum(m[f][1] for f in TUNING), sum(m[f][2] for f in TUNING), name, m))

    sims = {f: queries[f] @ tools.T for f in SETS}
    row("lexical alone", lambda f: [[h[0] for h in hits] for hits in lex[f]])
    for share in (0.15, 0.2, 0.25):
        first = {f: blended(lex[f], sims[f], keys, share) for f in SETS}
        row(f"blend {share} (no feedback)", lambda f, fr=first: fr[f])
        for k in (1, 2, 3, 5, 8):
            for beta in (0.25, 0.5, 0.75, 1.0):
                for weighted in (False, True):
                    again = {f: feedback(f, first[f], k, beta, weighted) for f in SETS}
                    name = f"blend {share}, feedback top {k}{' (1/rank)' if weighted else ''}, beta {beta}"
                    row(name, lambda f, a=again, s=share: blended(lex[f], a[f], keys, s))

    # The source's prior: each tool's cosine plus gamma x the query's cosine to
    # its source's centroid (the mean of the source's tool vectors).
    sources = [k.split("__", 1)[0] for k in keys]
    names = sorted(set(sources))
    centroid = np.stack([tools[[i for i, s in enumerate(sources) if s == n]].mean(0) for n in names])
    centroid /= np.linalg.norm(centroid, axis=1, keepdims=True)
    of = np.array([names.index(s) for s in sources])
    for gamma in (0.1, 0.2, 0.3, 0.5):
        prior = {f: (sims[f] + gamma * (queries[f] @ centroid.T)[:, of]) / (1 + gamma) for f in SETS}
        for share in (0.15, 0.2, 0.25):
            row(f"blend {share}, source prior gamma {gamma}", lambda f, p=prior, s=share: blended(lex[f], p[f], keys, s))

    rows.sort(key=lambda r: (r[0], r[1]), reverse=True)
    print("| ranking | queries.json r@1 / r@5 / MRR | tune.json r@1 / r@5 / MRR | intent.json (held out) r@1 / r@5 / MRR | tuning sum r@5 / MRR |")
    print("|---|---:|---:|---:|---:|")
    for tsum, msum, name, m in rows:
        cells = " | ".join("{:.3f} / {:.3f} / {:.3f}".format(*m[f]) for f in SETS)
        print(f"| {name} | {cells} | {tsum:.3f} / {msum:.3f} |")


if __name__ == "__main__":
    main()
