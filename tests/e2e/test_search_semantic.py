"""wf_find's semantic ranker (issue #56), end to end with a real model: wf in
`search` mode over server-everything, `[server.catalog] embeddings` pointed at
embeddings_server.py (all-MiniLM-L6-v2 from PyPI, run in numpy; no mock vectors).

- An intent-phrased query that shares no word with its tool ("combine 17 with
  25 arithmetically" → everything__get-sum) is found with the endpoint, and not
  without it (lexical alone returns nothing for it).
- The tools' vectors are cached in the state store: a second start on the same
  state directory embeds no tool text again (the endpoint's own record of what
  it embedded), only queries.
- Old vectors are pruned: a start where every tool's text changed (the source
  renamed) leaves in the store only the vectors of the texts listed now.
- Prefixes: with `query_prefix` and `document_prefix` set, the endpoint receives
  every tool text and the query with them, and the changed prefix embeds every
  tool again (the text sent keys the cache).
- The endpoint down: wf_find still answers (lexically, not an error) and wf
  logs a warning.
"""

from __future__ import annotations

import json
import sqlite3
import subprocess
import sys
import urllib.request
from pathlib import Path
from typing import Any

import anyio
import pytest

from conftest import Wf, content_text, free_port, stop_process, toml_config

pytestmark = pytest.mark.anyio

OP_TIMEOUT = 240  # the numpy model on a loaded 2-core machine is slow
QUERY = "combine 17 with 25 arithmetically"
WANT = "everything__get-sum"
HERE = Path(__file__).parent


@pytest.fixture(scope="module")
def embeddings() -> Any:
    """The endpoint: (URL of /v1/embeddings, a function returning its /stats)."""
    proc = subprocess.Popen(
        [sys.executable, str(HERE / "embeddings_server.py")],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )
    line = proc.stdout.readline() if proc.stdout else ""
    if not line.startswith("listening on "):
        stop_process(proc)
        pytest.fail(f"embeddings_server.py did not start: {proc.stderr.read() if proc.stderr else ''}")
    base = f"http://127.0.0.1:{int(line.split()[-1])}"

    def stats() -> dict[str, Any]:
        with urllib.request.urlopen(f"{base}/stats", timeout=30) as r:
            return json.load(r)

    yield f"{base}/v1/embeddings", stats
    stop_process(proc)


def config(wf: Wf, everything_bin: Path, endpoint: str, source: str = "everything", prefixes: str = "") -> Path:
    text = toml_config({source: {"command": str(everything_bin)}}) + (
        "[server.catalog]\n"
        'mode = "search"\n'
        f'embeddings = {{ endpoint = "{endpoint}", model = "all-MiniLM-L6-v2", timeout_ms = 120000{prefixes} }}\n'
    )
    return wf.write_config(text)


async def find(c: Any, query: str) -> list[str]:
    r = await c.call_tool("wf_find", {"query": query})
    assert not r.is_error, content_text(r.content)
    return [t["name"] for t in r.structured_content["tools"]]


async def found_within(c: Any, query: str, name: str, top: int) -> list[str]:
    """wf_find(query) until `name` is in its first `top` (the vectors are computed
    after discovery, in the background)."""
    names: list[str] = []
    with anyio.move_on_after(OP_TIMEOUT):
        while name not in names[:top]:
            names = await find(c, query)
            if name not in names[:top]:
                await anyio.sleep(0.5)
        return names
    pytest.fail(f"{name} not in wf_find({query!r})'s top {top} within {OP_TIMEOUT}s: {names}")


def tool_texts(texts: list[str], source: str = "everything") -> list[str]:
    """The tool texts among what the endpoint embedded (wf's start with the source's name)."""
    return [t for t in texts if t.startswith(f"{source} ")]


def stored_vectors(wf: Wf) -> set[str]:
    """The hashes of the tool vectors in the state store."""
    db = sqlite3.connect(wf.state_dir / "wf.db", timeout=30)
    try:
        return {h for (h,) in db.execute("SELECT hash FROM tool_embeddings")}
    finally:
        db.close()


async def test_semantic_ranker_finds_caches_and_falls_back(wf: Wf, everything_bin: Path, embeddings: Any) -> None:
    endpoint, stats = embeddings
    cfg = config(wf, everything_bin, endpoint)
    async with wf.stdio_client("legacy", "--config", str(cfg), read_timeout_seconds=OP_TIMEOUT) as c:
        names = await found_within(c, QUERY, WANT, 3)
    first = stats()
    embedded = tool_texts(first["texts"])
    # Every everything tool was embedded once, at discovery.
    assert len(embedded) >= 10 and len(set(embedded)) == len(embedded), embedded
    assert QUERY in first["texts"]

    # A second start on the same state directory: the vectors come from the store.
    async with wf.stdio_client("legacy", "--config", str(cfg), read_timeout_seconds=OP_TIMEOUT) as c:
        again = await found_within(c, QUERY, WANT, 3)
    second = stats()
    new_texts = second["texts"][len(first["texts"]) :]
    assert second["inputs"] > first["inputs"], "the second start's queries reached the endpoint"
    assert tool_texts(new_texts) == [], f"unchanged tools embedded again: {tool_texts(new_texts)}"
    assert names[0] == again[0] == WANT
    # The store holds every listed tool's vector (everything's and wf.std's).
    before = stored_vectors(wf)
    assert len(before) >= len(embedded), (len(before), len(embedded))

    # Every everything tool's text changed (the source renamed): their old vectors
    # are pruned, wf.std's (unchanged) stay.
    renamed = config(wf, everything_bin, endpoint, source="ev")
    async with wf.stdio_client("legacy", "--config", str(renamed), read_timeout_seconds=OP_TIMEOUT) as c:
        await found_within(c, QUERY, "ev__get-sum", 3)
    after = stored_vectors(wf)
    added = tool_texts(stats()["texts"], "ev")
    assert len(added) == len(embedded), added
    assert len(after - before) == len(added), "the renamed tools' vectors are stored"
    assert len(before - after) == len(embedded), "vectors of texts no tool has any more are still stored"
    assert len(after) == len(before)

    # Prefixes (nomic-style; MiniLM was not trained with them, only what is sent
    # is checked): every tool text again with the document prefix, the query with
    # the query prefix.
    prefixed = config(
        wf,
        everything_bin,
        endpoint,
        source="ev",
        prefixes=', query_prefix = "search_query: ", document_prefix = "search_document: "',
    )
    seen = len(stats()["texts"])
    async with wf.stdio_client("legacy", "--config", str(prefixed), read_timeout_seconds=OP_TIMEOUT) as c:
        with anyio.move_on_after(OP_TIMEOUT):
            while f"search_query: {QUERY}" not in stats()["texts"][seen:]:
                await find(c, QUERY)
                await anyio.sleep(0.5)
    sent = stats()["texts"][seen:]
    assert f"search_query: {QUERY}" in sent, sent[-5:]
    assert QUERY not in sent, "a query sent without its prefix"
    documents = [t.removeprefix("search_document: ") for t in sent if t.startswith("search_document: ")]
    assert sorted(tool_texts(documents, "ev")) == sorted(added), "every tool embedded again, prefixed"
    assert all(t.startswith(("search_document: ", "search_query: ")) for t in sent), sent

    # The endpoint down (nothing listens there): lexical answers, and a warning.
    down = config(wf, everything_bin, f"http://127.0.0.1:{free_port()}/v1/embeddings")
    async with wf.stdio_client("legacy", "--config", str(down), read_timeout_seconds=OP_TIMEOUT) as c:
        lexical = await find(c, QUERY)
        assert WANT not in lexical[:3], f"lexical alone found it; the query proves nothing: {lexical}"
        # The tool itself is still there to find by its own words.
        assert WANT in (await find(c, "sum of two numbers"))[:3]
    log = wf.logs[-1].read_text()
    assert "semantic ranker" in log and "WARN" in log, log[-3000:]


def test_a_lexical_share_out_of_range_is_refused_at_start(wf: Wf, everything_bin: Path) -> None:
    """`lexical_share` (the lexical ranking's share of a blended score) is 0 to 1:
    anything else stops `wf serve` with the key named, before it serves, and
    `wf check` says so."""
    for bad in ("1.5", "-0.1"):
        cfg = config(wf, everything_bin, "http://127.0.0.1:9/v1/embeddings", prefixes=f", lexical_share = {bad}")
        r = wf.run("serve", "--config", str(cfg), timeout=60)
        assert r.returncode != 0, r.stderr
        assert "server.catalog.embeddings: lexical_share" in r.stderr, r.stderr
        r = wf.run("check", "--config", str(cfg), timeout=120)
        assert r.returncode != 0, r.stdout + r.stderr
        assert "server.catalog.embeddings: lexical_share" in r.stdout + r.stderr, r.stdout + r.stderr
    ok = config(wf, everything_bin, "http://127.0.0.1:9/v1/embeddings", prefixes=", lexical_share = 0.1")
    r = wf.run("check", "--config", str(ok), timeout=120)
    assert r.returncode == 0 and "server.catalog" not in r.stdout + r.stderr, r.stdout + r.stderr
