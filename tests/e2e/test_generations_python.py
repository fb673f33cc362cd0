"""Cells of the generation matrix against the official Python SDK's server
(`py_generations_upstream.py`, `mcp` 2.3.0), an independent upstream that speaks
2026-07-28 (and 2025-11-25): behind wf over stdio, with default settings, clients of
both generations (the official Python client, `legacy` and `auto`).
"""

from __future__ import annotations

import sys
from pathlib import Path
from typing import Any

import anyio
import pytest
from mcp import Client

from caller_support import SAMPLED, Answerer
from conftest import Wf, call_outcome, content_text, toml_config, wait_listed
from test_generations import OP_TIMEOUT, spoken

pytestmark = pytest.mark.anyio

UPSTREAM = Path(__file__).resolve().parent / "py_generations_upstream.py"


def client(wf: Wf, mode: str, **kw: Any) -> Client:
    """A client of `wf serve` over stdio with the Python-SDK upstream as source `ts`
    (so `spoken` reads its row), over stdio, no `protocol` key."""
    settings = {"command": sys.executable, "args": [str(UPSTREAM)]}
    config = wf.write_config(toml_config({"ts": settings}))
    return wf.stdio_client(mode, "--config", str(config), **kw)


@pytest.mark.parametrize("mode", ["legacy", "auto"])
async def test_python_sdk_upstream_sampling_progress_and_logs(wf: Wf, mode: str) -> None:
    """The upstream's sampling round reaches the client's sampling callback, its
    progress the call's progress callback, and its log lines the client at its level."""
    a = Answerer()
    kw: dict[str, Any] = a.callbacks()
    if mode == "auto":
        kw["log_level"] = "info"
    seen: list[float] = []

    async def on_progress(progress: float, total: float | None, message: str | None) -> None:
        seen.append(progress)

    async with client(wf, mode, **kw) as c:
        await wait_listed(c, "ts__sample")
        assert await spoken(c) == "2026-07-28"
        with anyio.fail_after(OP_TIMEOUT):
            r, err = await call_outcome(c, "ts__sample", {"prompt": "say something"})
            assert err is None, err
            assert content_text(r.content) == f"sampled: {SAMPLED}", r
            p = await c.call_tool("ts__progress", {"steps": 3}, progress_callback=on_progress)
            assert content_text(p.content) == "progress: 3 steps", p
            if mode == "legacy":
                await c.set_logging_level("info")
            logged = await c.call_tool("ts__log", {})
            assert content_text(logged.content) == "logged", logged
        await a.wait_logs(2, timeout=OP_TIMEOUT)
    assert [s.messages[0].content.text for s in a.samplings] == ["say something"]
    assert sorted(seen) == [1, 2, 3], seen
    assert sorted((m.level, m.data) for m in a.logs) == [("info", "info line"), ("warning", "warning line")], a.logs
