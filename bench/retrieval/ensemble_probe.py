"""A probe for an ensemble of two embedding models in wf_find's semantic ranker,
outside wf: all-MiniLM-L6-v2 and all-mpnet-base-v2 embed the same tool text
(wf's `catalog::embed::tool_text`), their cosines are combined per tool, and the
result is blended with wf's own lexical ranking as `search_blended` does.
docs/performance/retrieval.md has its results.

    WF_BENCH_RETRIEVAL_DUMP=/tmp/lexical.json target/release/wf-bench --only retrieval --quick
    tests/e2e/.venv/bin/python bench/retrieval/ensemble_probe.py embed minilm CACHE_DIR
    tests/e2e/.venv/bin/python bench/retrieval/ensemble_probe.py embed mpnet CACHE_DIR MPNET_DIR
    tests/e2e/.venv/bin/python bench/retrieval/ensemble_probe.py eval /tmp/lexical.json CACHE_DIR

`embed` computes and caches one model's vectors (tools and the three query sets)
in CACHE_DIR (keep it outside the checkout; MPNet over 822 tools takes tens of
minutes on a loaded 2-core machine). `eval` sweeps: the MPNet weight of a cosine
average, the lexical share and depth of the blend, and a reciprocal-rank fusion of
the two models' lists. Settings are chosen on queries.json and tune.json (summed
recall@5, then MRR); intent.json is held out: its column is printed for the chosen
setting and its neighbours, never used to choose.
"""

from __future__ import annotations

import json
import sys
from pathlib import Path

import numpy as np

ROOT = Path(__file__).resolve().parent
sys.path.insert(0, str(ROOT.parent.parent / "tests/e2e"))
from semantic_probe import blended  # noqa: E402  (wf's blend, one copy)
SETS = ["queries.json", "tune.json", "intent.json"]
TUNING = SETS[:2]


def scored(queries: list[dict], ranked: list[list[str]]) -> tuple[float, float, float]:
    """Recall@1, recall@5 and MRR (top 10) of `ranked` against each query's tools."""
    h1 = h5 = rr = 0.0
    for q, r in zip(queries, ranked):
        want = set(q.get("tools") or [q["tool"]])
        pos = next((i for i, k in enumerate(r[:10]) if k in want), None)
        if pos is not None:
            h1 += pos < 1
            h5 += pos < 5
            rr += 1 / (pos + 1)
    n = len(ranked)
    return h1 / n, h5 / n, rr / n


def tool_text(source: str, tool: dict) -> str:
    # catalog::embed::tool_text: source, name as words, 400 chars of description.
    name = tool["name"].replace("_", " ").replace("-", " ")
    return f"{source} {name}: {(tool.get('description') or '')[:400]}"


def catalog() -> tuple[list[str], list[str]]:
    cat = json.loads((ROOT / "tools.json").read_text())
    tools = [(s["source"], t) for s in cat["servers"] for t in s["tools"]]
    return [f"{s}__{t['name']}" for s, t in tools], [tool_text(s, t) for s, t in tools]


def embed(model: str, cache: Path, model_dir: str | None) -> None:
    from embeddings_server import Encoder

    enc = Encoder.minilm() if model == "minilm" else Encoder.mpnet(Path(model_dir or ""))
    out = cache / model
    out.mkdir(parents=True, exist_ok=True)

    def run(name: str, texts: list[str]) -> None:
        p = out / f"{name}.npy"
        if p.exists():
            return
        order = sorted(range(len(texts)), key=lambda i: len(texts[i]))
        vec = np.zeros((len(texts), enc.hidden), np.float32)
        for i in range(0, len(order), 16):
            idx = order[i : i + 16]
            vec[idx] = enc.embed([texts[j] for j in idx])
            print(f"{model} {name}: {min(i + 16, len(texts))}/{len(texts)}", flush=True)
        np.save(p, vec)

    for f in SETS:
        run(f"q-{f}", [q["query"] for q in json.loads((ROOT / f).read_text())])
    run("tools", catalog()[1])


def evaluate(lex_path: str, cache: Path) -> None:
    lex = json.loads(Path(lex_path).read_text())
    keys, _ = catalog()
    sets = {f: json.loads((ROOT / f).read_text()) for f in SETS}
    sims = {
        m: {f: np.load(cache / m / f"q-{f}.npy") @ np.load(cache / m / "tools.npy").T for f in SETS}
        for m in ("minilm", "mpnet")
    }

    def metrics(f: str, ranked: list[list[str]]) -> tuple[float, float, float]:
        return scored(sets[f], ranked)

    def alone(f: str, S: np.ndarray) -> list[list[str]]:
        return [[keys[j] for j in np.argsort(-row)[:10]] for row in S]

    def blend(f: str, S: np.ndarray, share: float, ld: int = 50, sd: int = 300) -> list[list[str]]:
        return blended(lex[f], S, keys, share, ld, sd)

    def rank_fused(f: str, w: float, k: int = 60) -> np.ndarray:
        # Reciprocal rank of each model's own order, weighted, as a score.
        out = np.zeros_like(sims["minilm"][f])
        for m, wm in (("minilm", 1 - w), ("mpnet", w)):
            ranks = np.argsort(np.argsort(-sims[m][f], 1), 1)
            out += wm / (k + ranks)
        return out

    def zscored(S: np.ndarray) -> np.ndarray:
        return (S - S.mean(1, keepdims=True)) / S.std(1, keepdims=True)

    rows = []

    def row(name: str, fusion: str, rank) -> None:
        m = {f: metrics(f, rank(f)) for f in SETS}
        rows.append(
            (sum(m[f][1] for f in TUNING), sum(m[f][2] for f in TUNING), name, fusion, m)
        )

    row("—", "lexical alone", lambda f: [[h[0] for h in hits] for hits in lex[f]])
    shares = (0.1, 0.15, 0.2, 0.25, 0.3)
    depths = (20, 50)
    for m in ("minilm", "mpnet"):
        row(m, "semantic alone", lambda f, m=m: alone(f, sims[m][f]))
        for s in shares:
            for ld in depths:
                row(m, f"blend {s}, lexical top {ld}", lambda f, m=m, s=s, ld=ld: blend(f, sims[m][f], s, ld))
    for w in (0.3, 0.4, 0.5, 0.6, 0.7):
        avg = {f: (1 - w) * sims["minilm"][f] + w * sims["mpnet"][f] for f in SETS}
        name = f"cosine mean, MPNet weight {w}"
        row(name, "semantic alone", lambda f, a=avg: alone(f, a[f]))
        for s in shares:
            for ld in depths:
                row(name, f"blend {s}, lexical top {ld}", lambda f, a=avg, s=s, ld=ld: blend(f, a[f], s, ld))
        z = {f: (1 - w) * zscored(sims["minilm"][f]) + w * zscored(sims["mpnet"][f]) for f in SETS}
        zname = f"z-scored mean, MPNet weight {w}"
        row(zname, "semantic alone", lambda f, z=z: alone(f, z[f]))
        rf = {f: rank_fused(f, w) for f in SETS}
        rname = f"reciprocal rank of the two (k 60), MPNet weight {w}"
        row(rname, "semantic alone", lambda f, r=rf: alone(f, r[f]))
        # Rank fusion is on another scale than cosines: rescale to the cosine
        # mean's range per query before blending (min-max of the top 300).
        for s in shares:
            row(rname, f"blend {s}, lexical top 50 (rescaled)", lambda f, r=rf, a=avg, s=s: blend(f, rescale(r[f], a[f]), s))

    rows.sort(key=lambda r: (r[0], r[1]), reverse=True)
    print("| model(s) | fusion | queries.json r@1 / r@5 / MRR | tune.json r@1 / r@5 / MRR | intent.json (held out) r@1 / r@5 / MRR | tuning sum r@5 / MRR |")
    print("|---|---|---:|---:|---:|---:|")
    for tsum, msum, name, fusion, m in rows:
        cells = " | ".join("{:.3f} / {:.3f} / {:.3f}".format(*m[f]) for f in SETS)
        print(f"| {name} | {fusion} | {cells} | {tsum:.3f} / {msum:.3f} |")


def rescale(score: np.ndarray, like: np.ndarray) -> np.ndarray:
    # Maps each row of `score` linearly onto the range of `like`'s row.
    lo, hi = score.min(1, keepdims=True), score.max(1, keepdims=True)
    llo, lhi = like.min(1, keepdims=True), like.max(1, keepdims=True)
    return llo + (score - lo) / (hi - lo) * (lhi - llo)


if __name__ == "__main__":
    if sys.argv[1] == "embed":
        embed(sys.argv[2], Path(sys.argv[3]), sys.argv[4] if len(sys.argv) > 4 else None)
    else:
        evaluate(sys.argv[2], Path(sys.argv[3]))
