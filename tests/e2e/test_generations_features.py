"""More cells of the generation matrix (docs/operator-manual.md, "Generation matrix"),
against the same TypeScript-SDK upstream as test_generations.py
(`ts_generations_upstream.mjs`): which generation `protocol = "auto"` speaks to an
upstream that serves some input only to one of them, log messages and their levels,
`_meta` both ways, a JSON-RPC error's code and `data`, cancellation and list_changed.
"""

from __future__ import annotations

import json
from functools import partial
from pathlib import Path
from typing import Any

import anyio
import pytest
from mcp import Client, types
from mcp.shared.exceptions import MCPError

from caller_support import SAMPLED, Answerer
from conftest import Wf, call_outcome, content_text, wait_listed
from list_changed_support import list_changed_waiter
from test_generations import OP_TIMEOUT, client, completions_reach_upstream, node, spoken  # noqa: F401  (node: a fixture)

pytestmark = pytest.mark.anyio


async def sampled(c: Client, tool: str) -> str | None:
    """The tool's text when it sampled, or None when the call failed (either way)."""
    with anyio.fail_after(OP_TIMEOUT):
        r, err = await call_outcome(c, tool, {"prompt": "say something"})
    if err is not None:
        return None
    return content_text(r.content)


# Which input an upstream serves in which generation, through wf with the default
# `auto` and with `protocol = "2025-11-25"` pinned. The SDK's HTTP handler serves
# 2025-11-25 statelessly (no mid-call requests), and its 2026-07-28 serving refuses
# the push-style request servers written for 2025-11-25 make: neither generation
# carries everything, which is why `auto` keeps 2026-07-28 (the manual's "How `auto`
# decides"). `None`: the call fails, visibly.
SERVED = {
    # (upstream, protocol): (`sample`, input-required round; `sample_push`, request mid-call)
    ("stdio", None): (True, False),
    ("stdio", "2025-11-25"): (True, True),
    ("http-auto", None): (True, False),
    ("http-auto", "2025-11-25"): (False, False),
}


@pytest.mark.parametrize("mode", ["legacy", "auto"])
@pytest.mark.parametrize(("upstream", "protocol"), list(SERVED))
async def test_which_sampling_each_generation_carries(
    wf: Wf, node: str, upstream: str, protocol: str | None, mode: str
) -> None:
    """The upstream's sampling, asked in a round (`sample`) and with a request mid-call
    (`sample_push`), reaches a client of either generation exactly where the generation
    wf speaks to the upstream carries it; where it does not, the call fails with the
    upstream's words, it is not dropped in silence."""
    a = Answerer()
    extra: dict[str, Any] = {"protocol": protocol} if protocol else {}
    if (upstream, protocol) == ("http-auto", "2025-11-25"):
        # Its stateless 2025-11-25 serving sends the request but cannot take the
        # answer (a fresh instance gets it): the call would wait for ever.
        extra["call_timeout_ms"] = 3000
    async with client(wf, node, upstream, "stdio", mode, extra, **a.callbacks()) as c:
        await wait_listed(c, "ts__sample_push")
        got = (await sampled(c, "ts__sample"), await sampled(c, "ts__sample_push"))
        assert await spoken(c, protocol or "auto") == (protocol or "2026-07-28")
    want = SERVED[(upstream, protocol)]
    assert got == tuple(f"sampled: {SAMPLED}" if w else None for w in want), got
    assert len(a.samplings) == sum(want), a.samplings


async def logs_at_level(c: Client, a: Answerer, mode: str) -> None:
    """`ts__log` logs at debug, info and warning: the client that asked for info and
    above (`logging/setLevel` when 2025-11-25, else its request's log level, set on the
    client) gets the two lines at or above it."""
    with anyio.fail_after(OP_TIMEOUT):
        if mode == "legacy":
            await c.set_logging_level("info")
        r = await c.call_tool("ts__log", {})
    assert content_text(r.content) == "logged", r
    await a.wait_logs(2, timeout=OP_TIMEOUT)
    assert sorted((m.level, m.data) for m in a.logs) == [("info", "info line"), ("warning", "warning line")], a.logs


async def meta_both_ways(c: Client) -> None:
    """The call's own `_meta` key reaches the upstream (its `meta` tool echoes the keys
    it got), and the result's `_meta` the client."""
    with anyio.fail_after(OP_TIMEOUT):
        r = await c.call_tool("ts__meta", {}, meta={"example.com/trace": "abc"})
    assert not r.is_error, r
    assert json.loads(content_text(r.content)) == {"example.com/trace": "abc"}, r
    assert (r.meta or {}).get("example.com/upstream") == "from the upstream", r.meta


async def error_with_data(c: Client) -> None:
    """The upstream's prompt `refuse` fails with -32050 and `data`: the client gets both."""
    with anyio.fail_after(OP_TIMEOUT), pytest.raises(MCPError) as e:
        await c.get_prompt("ts__refuse", {})
    assert e.value.code == -32050, e.value
    assert "the upstream refuses" in e.value.message, e.value
    assert e.value.data == {"reason": "test", "n": 1}, e.value.data


async def cancellation_reaches_upstream(c: Client, marker: Path) -> None:
    """The client cancels its `ts__wait` call: the upstream's handler is cancelled
    (it writes `cancelled` to `marker`)."""
    with anyio.fail_after(OP_TIMEOUT):
        async with anyio.create_task_group() as tg:
            tg.start_soon(partial(c.call_tool, "ts__wait", {"marker": str(marker)}))
            while "started" not in lines(marker):
                await anyio.sleep(0.02)
            tg.cancel_scope.cancel()
        while "cancelled" not in lines(marker):
            await anyio.sleep(0.02)
    assert lines(marker) == ["started", "cancelled"]


async def list_change_reaches_client(c: Client, notes: list[Any]) -> None:
    """The upstream adds a tool and says so: the client is told (a notification for a
    2025-11-25 client, its listen stream for a 2026-07-28 one) and lists the tool."""
    async with list_changed_waiter(c, notes) as announced:
        with anyio.fail_after(OP_TIMEOUT):
            assert content_text((await c.call_tool("ts__add_tool", {})).content) == "added"
        await announced(OP_TIMEOUT)
    await wait_listed(c, "ts__added")


@pytest.mark.parametrize("mode", ["legacy", "auto"])
@pytest.mark.parametrize("upstream", ["stdio", "http-sse"])
async def test_log_messages_reach_the_client_at_its_level(wf: Wf, node: str, upstream: str, mode: str) -> None:
    """The upstream's log lines during a call reach the calling client, filtered by the
    level it set (`logging/setLevel` for a 2025-11-25 client, the request's log level
    for a 2026-07-28 one)."""
    a = Answerer()
    kw: dict[str, Any] = a.callbacks()
    if mode == "auto":
        kw["log_level"] = "info"
    async with client(wf, node, upstream, "stdio", mode, **kw) as c:
        await wait_listed(c, "ts__log")
        await logs_at_level(c, a, mode)


@pytest.mark.parametrize("mode", ["legacy", "auto"])
@pytest.mark.parametrize("upstream", ["stdio", "http-auto"])
async def test_meta_crosses_both_ways(wf: Wf, node: str, upstream: str, mode: str) -> None:
    """A call's own `_meta` keys reach the upstream, and the result's `_meta` the client."""
    async with client(wf, node, upstream, "stdio", mode) as c:
        await wait_listed(c, "ts__meta")
        await meta_both_ways(c)


@pytest.mark.parametrize("mode", ["legacy", "auto"])
@pytest.mark.parametrize("upstream", ["stdio", "http-auto"])
async def test_an_error_keeps_its_code_and_data(wf: Wf, node: str, upstream: str, mode: str) -> None:
    """A JSON-RPC error of the upstream (its prompt `refuse`) reaches the client with
    its code, message and `data`."""
    async with client(wf, node, upstream, "stdio", mode) as c:
        await wait_listed(c, "ts__sample")
        await error_with_data(c)


@pytest.mark.parametrize("mode", ["legacy", "auto"])
@pytest.mark.parametrize("upstream", ["stdio", "http-sse", "http-json"])
async def test_a_clients_cancellation_reaches_the_upstream(
    wf: Wf, node: str, upstream: str, mode: str, tmp_path: Path
) -> None:
    """A client that cancels its call: the upstream's handler sees its request
    cancelled (its abort signal fires), in either generation."""
    async with client(wf, node, upstream, "stdio", mode) as c:
        await wait_listed(c, "ts__wait")
        await cancellation_reaches_upstream(c, tmp_path / "wait.marker")


# Over stdio the added tool lives in the live session's process only: the
# rediscovery its `list_changed` asks for must list on that session.
@pytest.mark.parametrize("mode", ["legacy", "auto"])
@pytest.mark.parametrize("upstream", ["stdio", "http-auto"])
async def test_the_upstreams_list_change_reaches_the_client(wf: Wf, node: str, upstream: str, mode: str) -> None:
    """The upstream adds a tool and says so: the client is told its tool list changed
    (a notification for a 2025-11-25 client, its listen stream for a 2026-07-28 one)
    and lists the new tool."""
    notes: list[Any] = []

    async def on_message(message: Any) -> None:
        notes.append(message)

    async with client(wf, node, upstream, "stdio", mode, message_handler=on_message) as c:
        await wait_listed(c, "ts__add_tool")
        await list_change_reaches_client(c, notes)


class Roots:
    """A client's roots, which the test changes."""

    def __init__(self, uri: str) -> None:
        self.uri = uri

    async def callback(self, _ctx: Any) -> types.ListRootsResult:
        return types.ListRootsResult(roots=[types.Root(uri=self.uri, name="root")])  # type: ignore[arg-type]


async def roots_change_reaches_upstream(c: Client, roots: Roots, mode: str) -> None:
    """The upstream asks for roots in a round each time (`ts__roots`): after the client
    changes its roots (and says so with `notifications/roots/list_changed`, when it
    speaks 2025-11-25; 2026-07-28 has no such notification), the next round gets the
    new ones, and the notification breaks nothing."""
    with anyio.fail_after(OP_TIMEOUT):
        assert content_text((await c.call_tool("ts__roots", {})).content) == f'roots: ["{roots.uri}"]'
        roots.uri = "file:///tmp/wf-roots-changed"
        if mode == "legacy":
            await c.send_roots_list_changed()
        assert content_text((await c.call_tool("ts__roots", {})).content) == f'roots: ["{roots.uri}"]'


@pytest.mark.parametrize("mode", ["legacy", "auto"])
async def test_the_features_through_wfs_http_front(wf: Wf, node: str, mode: str, tmp_path: Path) -> None:
    """The same cells through `wf serve --http`, one wf and one HTTP upstream (`auto`
    replies) for all of them: log lines at the client's level, `_meta` both ways, an
    error's code and `data`, completions, cancellation, a change of the client's roots,
    then list_changed (last: it changes the upstream's tools)."""
    a = Answerer()
    notes: list[Any] = []

    async def on_message(message: Any) -> None:
        notes.append(message)

    roots = Roots("file:///tmp/wf-roots-first")
    kw: dict[str, Any] = a.callbacks() | {"list_roots_callback": roots.callback}
    if mode == "auto":
        kw["log_level"] = "info"
    async with client(wf, node, "http-auto", "http", mode, message_handler=on_message, **kw) as c:
        await wait_listed(c, "ts__add_tool")
        await logs_at_level(c, a, mode)
        await meta_both_ways(c)
        await error_with_data(c)
        await completions_reach_upstream(c)
        await cancellation_reaches_upstream(c, tmp_path / "wait.marker")
        await roots_change_reaches_upstream(c, roots, mode)
        await list_change_reaches_client(c, notes)


def lines(marker: Path) -> list[str]:
    return marker.read_text().split() if marker.exists() else []
