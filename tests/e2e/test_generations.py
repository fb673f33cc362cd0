"""The generation matrix: clients of both MCP generations behind wf, in front of
an upstream on the official TypeScript SDK (`ts_generations_upstream.mjs`, on
`@modelcontextprotocol/server` 2.4.0, pinned in package.json), which speaks
2026-07-28 and 2025-11-25. The source has **no `protocol` key** (the default,
`auto`), so wf speaks 2026-07-28 to it, and the upstream asks for input in
input-required rounds.

A 2025-11-25 client (`mode="legacy"`) must get those rounds as server-to-client
requests, and its answers must reach the upstream as `inputResponses`; a
2026-07-28 client (`mode="auto"`) gets them as rounds of wf's own. Each cell of
the matrix in docs/operator-manual.md ("Generation matrix") names its test here.
"""

from __future__ import annotations

import json
import shutil
from pathlib import Path
from typing import Any

import anyio
import pytest
from mcp import Client, types
from mcp.shared.exceptions import MCPError
from mcp.shared.subscriptions import ResourceUpdated

from admin_support import sources_by_name
from caller_support import ANSWER_NAME, ROOT_URI, SAMPLED, Answerer
from forwarding_support import Updates
from conftest import Wf, call_outcome, content_text, free_port, toml_config, wait_listed

pytestmark = pytest.mark.anyio

OP_TIMEOUT = 60
UPSTREAM = Path(__file__).resolve().parent / "ts_generations_upstream.mjs"
FRONTS = ["stdio", "http"]
UPSTREAMS = ["stdio", "http-auto", "http-sse", "http-json"]
WATCHED = "test://watched"
MODES = ["legacy", "auto"]  # legacy: a 2025-11-25 client; auto: 2026-07-28


@pytest.fixture
def node() -> str:
    found = shutil.which("node")
    if not found:
        pytest.fail("node is not installed (tests/run needs Node 20)")
    if not (UPSTREAM.parent / "node_modules" / "@modelcontextprotocol" / "server").is_dir():
        pytest.fail("@modelcontextprotocol/server is not installed: run `npm ci` in tests/e2e (tests/run does)")
    return found


def client(
    wf: Wf, node: str, upstream: str, front: str, mode: str, extra: dict[str, Any] | None = None, **kw: Any
) -> Client:
    """A client of `wf serve` (over `front`) with the TS-SDK upstream as source `ts`
    (wf's stdio child, or `http-<json|sse|auto>`: a `url` source whose 2026-07-28
    replies are shaped so), default settings (no `protocol`, no `session`)."""
    if upstream == "stdio":
        settings: dict[str, Any] = {"command": node, "args": [str(UPSTREAM)]}
    else:
        port = free_port()
        shape, *flags = upstream.removeprefix("http-").split("+")
        argv = [node, str(UPSTREAM), "--http", str(port), shape, *(f"--{f}" for f in flags)]
        settings = {"url": wf.start_upstream_http("ts-upstream", argv, port)}
    settings.update(extra or {})
    config = wf.write_config(toml_config({"ts": settings}))
    if front == "stdio":
        return wf.stdio_client(mode, "--config", str(config), **kw)
    return wf.http_client(wf.start_http("127.0.0.1", None, "--config", str(config)), mode, **kw)


async def spoken(c: Client, setting: str = "auto") -> str:
    """The generation wf speaks to source `ts` (admin `list_sources`, served over stdio)."""
    with anyio.fail_after(OP_TIMEOUT):
        while True:
            row = (await sources_by_name(c))["ts"]["protocol"]
            if row and row["spoken"]:
                assert row["setting"] == setting, row
                return row["spoken"]
            await anyio.sleep(0.1)


async def call_text(c: Client, tool: str, args: dict[str, Any]) -> str:
    result, err = await call_outcome(c, tool, args)
    assert err is None, err
    assert not result.is_error, result
    return content_text(result.content)


@pytest.mark.parametrize("mode", MODES)
@pytest.mark.parametrize("front", FRONTS)
@pytest.mark.parametrize("upstream", UPSTREAMS)
async def test_sampling_reaches_the_client_and_its_answer_the_upstream(
    wf: Wf, node: str, upstream: str, front: str, mode: str
) -> None:
    """The upstream's `sampling/createMessage` round reaches the client's sampling
    callback (a request for a 2025-11-25 client), and its answer the tool's result."""
    a = Answerer()
    async with client(wf, node, upstream, front, mode, **a.callbacks()) as c:
        await wait_listed(c, "ts__sample")
        with anyio.fail_after(OP_TIMEOUT):
            text = await call_text(c, "ts__sample", {"prompt": "say something"})
        if front == "stdio":
            assert await spoken(c) == "2026-07-28"
    assert text == f"sampled: {SAMPLED}", text
    assert len(a.samplings) == 1
    assert a.samplings[0].messages[0].content.text == "say something"


@pytest.mark.parametrize("mode", MODES)
@pytest.mark.parametrize("front", FRONTS)
@pytest.mark.parametrize("upstream", UPSTREAMS)
async def test_form_and_url_elicitation_and_roots_cross(
    wf: Wf, node: str, upstream: str, front: str, mode: str
) -> None:
    """Form and URL elicitation and roots: asked of the client, answered to the upstream."""
    a = Answerer()
    async with client(wf, node, upstream, front, mode, **a.callbacks()) as c:
        await wait_listed(c, "ts__elicit")
        with anyio.fail_after(OP_TIMEOUT):
            form = await call_text(c, "ts__elicit", {})
            url = await call_text(c, "ts__elicit_url", {})
            roots = await call_text(c, "ts__roots", {})
    assert form.startswith("elicited: accept "), form
    assert json.loads(form.removeprefix("elicited: accept "))["name"] == ANSWER_NAME
    assert url == "url elicitation: accept", url
    assert roots == f"roots: {json.dumps([ROOT_URI], separators=(',', ':'))}", roots
    assert [e.message for e in a.elicitations] == ["Who are you?", "Please sign in"]
    assert a.roots_asked == 1


@pytest.mark.parametrize("mode", MODES)
@pytest.mark.parametrize("front", FRONTS)
@pytest.mark.parametrize("upstream", UPSTREAMS)
@pytest.mark.parametrize("gap_ms", [50, 0])
async def test_progress_reaches_the_calling_client(
    wf: Wf, node: str, upstream: str, front: str, mode: str, gap_ms: int
) -> None:
    """The upstream's progress notifications for a call reach its client's progress
    callback, also when they come in a burst right before the call's result."""
    seen: list[float] = []

    async def on_progress(progress: float, total: float | None, message: str | None) -> None:
        seen.append(progress)

    async with client(wf, node, upstream, front, mode) as c:
        await wait_listed(c, "ts__progress")
        with anyio.fail_after(OP_TIMEOUT):
            r = await c.call_tool("ts__progress", {"steps": 3, "gap_ms": gap_ms}, progress_callback=on_progress)
    assert not r.is_error, r
    assert content_text(r.content) == "progress: 3 steps, token present"
    if upstream == "http-json":
        return  # a JSON reply carries no notifications (the SDK's `responseMode: "json"` drops them)
    # The official client runs each progress callback in a task of its own: order is not kept.
    assert sorted(seen) == [1, 2, 3], seen


@pytest.mark.parametrize("front", FRONTS)
@pytest.mark.parametrize("upstream", UPSTREAMS)
async def test_a_2025_client_subscription_becomes_the_upstream_listen(
    wf: Wf, node: str, upstream: str, front: str
) -> None:
    """A 2025-11-25 client's `resources/subscribe` is served through the upstream's
    `subscriptions/listen`, and the upstream's update reaches it as
    `notifications/resources/updated`."""
    updates = Updates()
    async with client(wf, node, upstream, front, "legacy", message_handler=updates.handler) as c:
        await wait_listed(c, "ts__touch")
        with anyio.fail_after(OP_TIMEOUT):
            await c.subscribe_resource(WATCHED)
            assert not (await c.call_tool("ts__touch", {"uri": WATCHED})).is_error
        await updates.wait_count(1)
        assert updates.uris == [WATCHED]


@pytest.mark.parametrize("front", FRONTS)
@pytest.mark.parametrize("upstream", ["stdio", "http-auto"])
async def test_a_2026_clients_listen_gets_the_upstreams_resource_update(
    wf: Wf, node: str, upstream: str, front: str
) -> None:
    """A 2026-07-28 client's own `subscriptions/listen` with a resource URI: wf
    serves it through the upstream's listen, and the upstream's update for that URI
    arrives on the client's stream."""
    async with client(wf, node, upstream, front, "auto") as c:
        await wait_listed(c, "ts__touch")
        with anyio.fail_after(OP_TIMEOUT):
            async with c.listen(resource_subscriptions=[WATCHED]) as sub:
                assert sub.honored.resource_subscriptions == [WATCHED], sub.honored
                assert not (await c.call_tool("ts__touch", {"uri": WATCHED})).is_error
                async for event in sub:
                    assert event == ResourceUpdated(uri=WATCHED), event
                    break


@pytest.mark.parametrize("mode", MODES)
@pytest.mark.parametrize("front", FRONTS)
async def test_completions_reach_the_upstream(wf: Wf, node: str, front: str, mode: str) -> None:
    """Argument completion of the upstream's prompt reaches it, under wf's name for the prompt."""
    async with client(wf, node, "stdio", front, mode) as c:
        await wait_listed(c, "ts__sample")
        await completions_reach_upstream(c)


async def completions_reach_upstream(c: Client) -> None:
    """The upstream's prompt `greet` completes its argument `name` (also over an HTTP
    upstream: `test_the_features_through_wfs_http_front`)."""
    with anyio.fail_after(OP_TIMEOUT):
        r = await c.complete(types.PromptReference(type="ref/prompt", name="ts__greet"), {"name": "name", "value": "A"})
    assert r.completion.values == ["Ada", "Alan"], r


@pytest.mark.parametrize("mode", MODES)
@pytest.mark.parametrize("front", FRONTS)
async def test_an_unacknowledged_listen_never_hangs_an_exchange(wf: Wf, node: str, front: str, mode: str) -> None:
    """An upstream that takes `subscriptions/listen` and never acknowledges it (the
    `server-stateless` hang): with a connect timeout far beyond the test's bound, the
    call that opens the session still completes, and a 2025 client's
    `resources/subscribe` gets a clear error instead of waiting."""
    a = Answerer()
    slow = {"connect_timeout_ms": 600_000}
    async with client(wf, node, "http-auto+mute-listen", front, mode, slow, **a.callbacks()) as c:
        await wait_listed(c, "ts__sample")
        with anyio.fail_after(OP_TIMEOUT):
            text = await call_text(c, "ts__sample", {"prompt": "still there?"})
            assert text == f"sampled: {SAMPLED}", text
            if mode == "legacy":
                with pytest.raises(MCPError, match="did not acknowledge subscriptions/listen"):
                    await c.subscribe_resource(WATCHED)
                # The session still serves calls.
                assert (await call_text(c, "ts__sample", {"prompt": "again"})) == f"sampled: {SAMPLED}"
