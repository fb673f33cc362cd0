"""Cells of the generation matrix against the official Python SDK's server
(`py_generations_upstream.py`, `mcp` 2.3.0), an independent upstream that speaks
2026-07-28 (and 2025-11-25): behind wf, with default settings (no `protocol` key), as
wf's stdio child or as a `url` source over streamable HTTP (SSE or JSON replies), wf
serving over stdio or `--http`, clients of both generations (the official Python
client, `legacy` and `auto`): its rounds (sampling, form and URL elicitation, roots),
progress, log lines, cancellation, completions, `_meta` both ways, errors with their code
and `data`, resource subscriptions and list_changed,
and which sampling each generation carries.
"""

from __future__ import annotations

import sys
from functools import partial
from pathlib import Path
from typing import Any

import anyio
import pytest
from mcp import Client, types

from caller_support import ANSWER_NAME, ROOT_URI, SAMPLED, Answerer
from conftest import Wf, call_outcome, content_text, free_port, toml_config, wait_listed
from forwarding_support import Updates
from list_changed_support import list_changed_waiter
from test_generations import OP_TIMEOUT, spoken
from test_generations_features import error_with_data, meta_both_ways

pytestmark = pytest.mark.anyio

UPSTREAM = Path(__file__).resolve().parent / "py_generations_upstream.py"


def client(
    wf: Wf, mode: str, upstream: str = "stdio", front: str = "stdio", extra: dict[str, Any] | None = None, **kw: Any
) -> Client:
    """A client of `wf serve` (over `front`) with the Python-SDK upstream as source `ts`
    (so `spoken` reads its row): wf's stdio child, or `http-<sse|json>` a `url` source;
    no `protocol` key."""
    if upstream == "stdio":
        settings: dict[str, Any] = {"command": sys.executable, "args": [str(UPSTREAM)]}
    else:
        port = free_port()
        argv = [sys.executable, str(UPSTREAM), "--http", str(port), upstream.removeprefix("http-")]
        settings = {"url": wf.start_upstream_http("py-upstream", argv, port)}
    settings.update(extra or {})
    config = wf.write_config(toml_config({"ts": settings}))
    if front == "stdio":
        return wf.stdio_client(mode, "--config", str(config), **kw)
    return wf.http_client(wf.start_http("127.0.0.1", None, "--config", str(config)), mode, **kw)


# (upstream, wf's front): the upstream as wf's stdio child, and over streamable HTTP
# with SSE replies behind both fronts, and with JSON replies.
CELLS = [("stdio", "stdio"), ("http-sse", "stdio"), ("http-sse", "http"), ("http-json", "http")]


@pytest.mark.parametrize("mode", ["legacy", "auto"])
@pytest.mark.parametrize(("upstream", "front"), CELLS)
async def test_python_sdk_upstream_sampling_progress_and_logs(wf: Wf, upstream: str, front: str, mode: str) -> None:
    """The upstream's sampling, form and URL elicitation and roots rounds reach the
    client's callbacks (requests for a 2025-11-25 client, rounds of wf's own for a
    2026-07-28 one), its progress the call's progress callback, and its log lines the
    client at its level."""
    a = Answerer()
    kw: dict[str, Any] = a.callbacks()
    if mode == "auto":
        kw["log_level"] = "info"
    seen: list[float] = []

    async def on_progress(progress: float, total: float | None, message: str | None) -> None:
        seen.append(progress)

    async with client(wf, mode, upstream, front, **kw) as c:
        await wait_listed(c, "ts__sample")
        if front == "stdio":
            assert await spoken(c) == "2026-07-28"
        with anyio.fail_after(OP_TIMEOUT):
            r, err = await call_outcome(c, "ts__sample", {"prompt": "say something"})
            assert err is None, err
            assert content_text(r.content) == f"sampled: {SAMPLED}", r
            e, err = await call_outcome(c, "ts__elicit", {})
            assert err is None, err
            assert content_text(e.content) == f"elicited: accept {ANSWER_NAME}", e
            u, err = await call_outcome(c, "ts__elicit_url", {})
            assert err is None, err
            assert content_text(u.content) == "url elicitation: accept", u
            roots, err = await call_outcome(c, "ts__roots", {})
            assert err is None, err
            assert content_text(roots.content) == f"roots: {ROOT_URI}", roots
            p = await c.call_tool("ts__progress", {"steps": 3}, progress_callback=on_progress)
            assert content_text(p.content) == "progress: 3 steps", p
            if mode == "legacy":
                await c.set_logging_level("info")
            logged = await c.call_tool("ts__log", {})
            assert content_text(logged.content) == "logged", logged
        if upstream != "http-json":
            await a.wait_logs(2, timeout=OP_TIMEOUT)
    assert [s.messages[0].content.text for s in a.samplings] == ["say something"]
    assert [e.message for e in a.elicitations] == ["Who are you?", "Please sign in"]
    assert a.roots_asked == 1
    if upstream == "http-json":
        # A JSON reply carries the result alone: the SDK (`json_response=True`) drops the
        # call's progress and log notifications, for a client connected directly too.
        return
    assert sorted(seen) == [1, 2, 3], seen
    assert sorted((m.level, m.data) for m in a.logs) == [("info", "info line"), ("warning", "warning line")], a.logs


# Which sampling this upstream over streamable HTTP (stateful, SSE replies) serves in
# which generation: a 2025-11-25 session carries only the request mid-call
# (`sample_push`; the SDK answers a round with "Handler returned an invalid result"),
# a 2026-07-28 one only the round (`sample`; the SDK refuses the request mid-call: "no
# back-channel"). The same split holds for a client connected to it directly. A
# per-client choice of generation would give a 2025-11-25 client `sample_push` and
# take `sample` away; the manual's "How `auto` decides" says why `auto` keeps
# 2026-07-28 for every client.
SERVED_HTTP = {None: (True, False), "2025-11-25": (False, True)}


@pytest.mark.parametrize("mode", ["legacy", "auto"])
@pytest.mark.parametrize("protocol", list(SERVED_HTTP))
async def test_which_sampling_each_generation_carries_python(wf: Wf, protocol: str | None, mode: str) -> None:
    """The upstream's two kinds of sampling reach a client of either generation
    exactly where the generation wf speaks to the upstream carries it; where it does
    not, the call fails visibly."""
    a = Answerer()
    extra = {"protocol": protocol} if protocol else {}
    async with client(wf, mode, "http-sse", "stdio", extra, **a.callbacks()) as c:
        await wait_listed(c, "ts__sample_push")
        assert await spoken(c, protocol or "auto") == (protocol or "2026-07-28")
        got = []
        for tool in ("ts__sample", "ts__sample_push"):
            with anyio.fail_after(OP_TIMEOUT):
                r, err = await call_outcome(c, tool, {"prompt": "say something"})
            got.append(None if err is not None else content_text(r.content))
    want = SERVED_HTTP[protocol]
    assert tuple(got) == tuple(f"sampled: {SAMPLED}" if w else None for w in want), got
    assert len(a.samplings) == sum(want), a.samplings


@pytest.mark.parametrize("mode", ["legacy", "auto"])
@pytest.mark.parametrize("upstream", ["stdio", "http-sse"])
async def test_python_sdk_upstream_cancellation_completions_meta_and_errors(
    wf: Wf, upstream: str, mode: str, tmp_path: Path
) -> None:
    """A client that cancels its call: the upstream's handler is cancelled. Argument
    completion of the upstream's prompt reaches it under wf's name for the prompt. A
    call's `_meta` reaches the upstream and the result's `_meta` the client; the
    upstream's JSON-RPC error keeps its code, message and `data`."""
    marker = tmp_path / "wait.marker"
    async with client(wf, mode, upstream) as c:
        await wait_listed(c, "ts__wait")
        await meta_both_ways(c)
        await error_with_data(c)
        with anyio.fail_after(OP_TIMEOUT):
            ref = types.PromptReference(type="ref/prompt", name="ts__greet")
            r = await c.complete(ref, {"name": "name", "value": "A"})
            assert r.completion.values == ["Ada", "Alan"], r
            async with anyio.create_task_group() as tg:
                tg.start_soon(partial(c.call_tool, "ts__wait", {"marker": str(marker)}))
                while "started" not in lines(marker):
                    await anyio.sleep(0.02)
                tg.cancel_scope.cancel()
            while "cancelled" not in lines(marker):
                await anyio.sleep(0.02)
    assert lines(marker) == ["started", "cancelled"]


@pytest.mark.parametrize("upstream", ["stdio", "http-sse"])
async def test_python_sdk_upstream_subscription_reaches_a_2025_client(wf: Wf, upstream: str) -> None:
    """A 2025-11-25 client's `resources/subscribe` is served through the upstream's
    `subscriptions/listen`, and the update the upstream publishes reaches the client as
    `notifications/resources/updated`."""
    updates = Updates()
    async with client(wf, "legacy", upstream, message_handler=updates.handler) as c:
        await wait_listed(c, "ts__touch")
        with anyio.fail_after(OP_TIMEOUT):
            await c.subscribe_resource("test://watched")
            assert not (await c.call_tool("ts__touch", {"uri": "test://watched"})).is_error
        await updates.wait_count(1)
    assert updates.uris == ["test://watched"]


@pytest.mark.parametrize("mode", ["legacy", "auto"])
@pytest.mark.parametrize("upstream", ["stdio", "http-sse"])
async def test_python_sdk_upstreams_list_change_reaches_the_client(wf: Wf, upstream: str, mode: str) -> None:
    """The upstream adds a tool and publishes it: the client is told its tool list
    changed (a notification, or its listen stream) and lists the new tool."""
    notes: list[Any] = []

    async def on_message(message: Any) -> None:
        notes.append(message)

    async with client(wf, mode, upstream, message_handler=on_message) as c:
        await wait_listed(c, "ts__add_tool")
        async with list_changed_waiter(c, notes) as announced:
            with anyio.fail_after(OP_TIMEOUT):
                assert content_text((await c.call_tool("ts__add_tool", {})).content) == "added"
            await announced(OP_TIMEOUT)
        await wait_listed(c, "ts__added")


def lines(marker: Path) -> list[str]:
    return marker.read_text().split() if marker.exists() else []
