"""The persistent runtime of the `mcp` source plugin, through wf, against the Rust
stateful upstream fixture (tests/upstream-fixture: a per-session counter, a slow
tool, progress, a prompt and a resource).

Every call to a source runs on that source's one upstream session: sequential
calls see each other's state, concurrent calls are multiplexed on it, progress
is forwarded and a client's cancellation leaves the session usable.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import anyio
import pytest
from mcp import Client

from conftest import UpstreamEvents, Wf, all_prompts, all_resources, all_tools, content_text, free_port, toml_config

pytestmark = pytest.mark.anyio

OP_TIMEOUT = 30
FX = "fx"
FX_TOOLS = {"echo", "increment", "get_count", "slow", "progress", "crash", "pid"}

FRONTS = [("stdio", "auto"), ("stdio", "legacy"), ("http", "auto"), ("http", "legacy")]


@pytest.fixture(params=FRONTS, ids=[f"wf-{t}-{m}" for t, m in FRONTS])
def front(request: pytest.FixtureRequest) -> tuple[str, str]:
    return request.param


def fx_client(wf: Wf, fixture_upstream_bin: Path, front: tuple[str, str], **settings: Any) -> Client:
    """A client of a wf whose source `fx` is the fixture over stdio (or `settings`)."""
    source = settings or {"command": str(fixture_upstream_bin)}
    config = wf.write_config(toml_config({FX: source}))
    return wf.client(*front, "--config", str(config))


async def structured(c: Client, tool: str, arguments: dict[str, Any] | None = None) -> Any:
    """Calls `tool`, which must succeed with structured content; returns that."""
    result = await c.call_tool(tool, arguments or {})
    assert not result.is_error, f"{tool}: {content_text(result.content)}"
    assert result.structured_content is not None, f"{tool}: no structured content: {result.content}"
    return result.structured_content


async def counter_resource(c: Client) -> str:
    result = await c.read_resource("fixture://counter")
    assert len(result.contents) == 1, result.contents
    return result.contents[0].text


async def test_tools_are_projected(wf: Wf, fixture_upstream_bin: Path, front: tuple[str, str]) -> None:
    async with fx_client(wf, fixture_upstream_bin, front) as c:
        with anyio.fail_after(OP_TIMEOUT):
            tools = await all_tools(c)
    names = {t.name for t in tools}
    assert {n for n in names if n.startswith("fx__")} == {f"fx__{t}" for t in FX_TOOLS}
    echo = next(t for t in tools if t.name == "fx__echo")
    assert echo.description == "Returns its message"
    assert echo.input_schema == {
        "type": "object",
        "properties": {"message": {"type": "string"}},
        "required": ["message"],
    }


async def test_sequential_calls_share_one_session(wf: Wf, fixture_upstream_bin: Path, front: tuple[str, str]) -> None:
    async with fx_client(wf, fixture_upstream_bin, front) as c:
        with anyio.fail_after(OP_TIMEOUT):
            pid = (await structured(c, "fx__pid"))["pid"]
            counts = [(await structured(c, "fx__increment"))["count"] for _ in range(3)]
            assert counts == [1, 2, 3]
            assert (await structured(c, "fx__get_count")) == {"count": 3}
            assert (await structured(c, "fx__increment", {"by": 5})) == {"count": 8}
            assert (await structured(c, "fx__pid"))["pid"] == pid
            echoed = await c.call_tool("fx__echo", {"message": "still here"})
            assert content_text(echoed.content) == "still here"
            assert (await structured(c, "fx__pid"))["pid"] == pid


async def test_concurrent_calls_are_multiplexed_on_one_session(
    wf: Wf, fixture_upstream_bin: Path, front: tuple[str, str], upstream_events: UpstreamEvents
) -> None:
    """20 slow calls are all in flight upstream at once (the fixture records each start;
    they all wait at one gate, which opens only once all 20 have started: calls sent
    one after another would never get there), and 10 concurrent increments all land
    on the same counter."""
    gate = wf.root / "gate"
    slept: list[Any] = []
    counts: list[int] = []
    source = {"command": str(fixture_upstream_bin), "args": upstream_events.args()}
    async with fx_client(wf, fixture_upstream_bin, front, **source) as c:
        with anyio.fail_after(OP_TIMEOUT * 2):
            pid = (await structured(c, "fx__pid"))["pid"]

            async def slow() -> None:
                slept.append(await structured(c, "fx__slow", {"ms": 600_000, "until": str(gate)}))

            async def increment() -> None:
                counts.append((await structured(c, "fx__increment"))["count"])

            async with anyio.create_task_group() as tg:
                for _ in range(20):
                    tg.start_soon(slow)
                for _ in range(10):
                    tg.start_soon(increment)
                while len(started := [e for e in upstream_events.read() if e["event"] == "call"]) < 20:
                    await anyio.sleep(0.05)
                assert slept == [], "a gated call finished before the gate opened"
                gate.touch()

            assert (await structured(c, "fx__get_count")) == {"count": 10}
            assert (await structured(c, "fx__pid"))["pid"] == pid
    assert {e["pid"] for e in started} == {pid}
    assert slept == [{"gate": "open"}] * 20
    assert sorted(counts) == list(range(1, 11))


async def test_progress_notifications_are_forwarded(
    wf: Wf, fixture_upstream_bin: Path, front: tuple[str, str]
) -> None:
    seen: list[tuple[float, float | None, str | None]] = []

    async def on_progress(progress: float, total: float | None, message: str | None) -> None:
        seen.append((progress, total, message))

    async with fx_client(wf, fixture_upstream_bin, front) as c:
        with anyio.fail_after(OP_TIMEOUT):
            # 50 ms between notifications, and after the last one before the result:
            # keeps clear of the lost-final-notification race that
            # test_mcp_everything.py::test_final_progress_notification_is_not_lost pins down.
            result = await c.call_tool("fx__progress", {"steps": 4, "interval_ms": 50}, progress_callback=on_progress)
    assert not result.is_error, content_text(result.content)
    assert result.structured_content == {"steps": 4}
    assert seen == [(float(i), 4.0, f"step {i}") for i in range(1, 5)]


async def test_a_call_that_asks_for_progress_takes_wfs_own_path(
    wf: Wf, fixture_upstream_bin: Path, front: tuple[str, str], upstream_events: UpstreamEvents
) -> None:
    """A call whose client asked for progress skips rmcp's client service, as one that did
    not ask does (plugins/mcp/src/runtime/direct.rs): the upstream sees wf's own request id,
    `wf-<n>`, where rmcp's client numbers its requests. Progress still arrives
    (test_progress_notifications_are_forwarded, test_mcp_everything.py)."""
    source = {"command": str(fixture_upstream_bin), "args": upstream_events.args()}
    seen: list[float] = []

    async def on_progress(progress: float, total: float | None, message: str | None) -> None:
        seen.append(progress)

    async with fx_client(wf, fixture_upstream_bin, front, **source) as c:
        with anyio.fail_after(OP_TIMEOUT):
            assert await structured(c, "fx__slow", {"ms": 1}) == {"slept_ms": 1}
            result = await c.call_tool("fx__slow", {"ms": 2}, progress_callback=on_progress)
            assert result.structured_content == {"slept_ms": 2}
            result = await c.call_tool("fx__progress", {"steps": 2, "interval_ms": 20}, progress_callback=on_progress)
            assert result.structured_content == {"steps": 2}
    ids = [e["request_id"] for e in upstream_events.read() if e["event"] == "call" and e.get("tool") == "slow"]
    assert len(ids) == 2, ids
    assert all(isinstance(i, str) and i.startswith("wf-") for i in ids), ids
    assert seen == [1.0, 2.0]


async def test_prompt_and_resource_through_wf(wf: Wf, fixture_upstream_bin: Path, front: tuple[str, str]) -> None:
    async with fx_client(wf, fixture_upstream_bin, front) as c:
        with anyio.fail_after(OP_TIMEOUT):
            prompts = {p.name: p for p in await all_prompts(c)}
            assert "fx__greet" in prompts, sorted(prompts)
            assert prompts["fx__greet"].description == "Greets someone"
            assert [(a.name, a.required) for a in prompts["fx__greet"].arguments or []] == [("name", True)]
            greeting = await c.get_prompt("fx__greet", {"name": "Ada"})
            assert [content_text(m.content) for m in greeting.messages] == ["Hello, Ada!"]
            assert [m.role for m in greeting.messages] == ["user"]

            resources = {str(r.uri): r for r in await all_resources(c)}
            assert "fixture://counter" in resources, sorted(resources)
            assert resources["fixture://counter"].mime_type == "text/plain"
            # The resource reads the same session's counter as the tools.
            assert await counter_resource(c) == "0"
            await structured(c, "fx__increment", {"by": 2})
            assert await counter_resource(c) == "2"
            await structured(c, "fx__increment")
            assert await counter_resource(c) == "3"


async def test_cancelled_call_reaches_the_upstream_and_leaves_the_session_usable(
    wf: Wf, fixture_upstream_bin: Path, front: tuple[str, str], upstream_events: UpstreamEvents
) -> None:
    """A client that abandons a call makes wf send `notifications/cancelled` for that
    call to the upstream (observed in the fixture's own journal), the upstream stops
    the work, and the same session keeps serving."""
    source = {"command": str(fixture_upstream_bin), "args": upstream_events.args()}
    async with fx_client(wf, fixture_upstream_bin, front, **source) as c:
        with anyio.fail_after(OP_TIMEOUT * 2):
            pid = (await structured(c, "fx__pid"))["pid"]
            await structured(c, "fx__increment")

            finished: list[Any] = []

            async def slow_call() -> None:
                finished.append(await c.call_tool("fx__slow", {"ms": 600_000}))

            async with anyio.create_task_group() as tg:
                tg.start_soon(slow_call)
                # The call is running upstream; then the client gives up on it.
                started = await upstream_events.wait_for(event="call", tool="slow")
                tg.cancel_scope.cancel()
            assert finished == [], "a 10-minute call finished?"

            request_id = started["request_id"]
            cancelled = await upstream_events.wait_for(event="cancelled", request_id=request_id)
            assert cancelled["pid"] == pid
            await upstream_events.wait_for(event="slow_aborted", request_id=request_id)

            # The next calls are answered on the same session (a session still busy
            # with the 10-minute call would not answer within the overall timeout).
            echoed = await c.call_tool("fx__echo", {"message": "after cancel"})
            assert content_text(echoed.content) == "after cancel"
            assert await structured(c, "fx__slow", {"ms": 10}) == {"slept_ms": 10}
            assert (await structured(c, "fx__pid"))["pid"] == pid
            assert (await structured(c, "fx__get_count")) == {"count": 1}
            # Cancelled once, and never finished.
            events = sorted(e["event"] for e in upstream_events.read() if e.get("request_id") == request_id)
            assert events == ["call", "cancelled", "slow_aborted"]


HTTP_UPSTREAM_FRONTS = [("stdio", "auto"), ("http", "legacy")]


@pytest.mark.parametrize("via", HTTP_UPSTREAM_FRONTS, ids=[f"wf-{t}-{m}" for t, m in HTTP_UPSTREAM_FRONTS])
async def test_http_upstream_keeps_one_session(wf: Wf, fixture_upstream_bin: Path, via: tuple[str, str]) -> None:
    """Over streamable HTTP the fixture keeps one counter per MCP session: wf's calls
    all share one session there too, including concurrent ones."""
    port = free_port()
    url = wf.start_upstream_http("fixture-http", [str(fixture_upstream_bin), "--http", f"127.0.0.1:{port}"], port)
    # Sessions are a 2025-11-25 matter: a 2026-07-28 upstream has none.
    async with fx_client(wf, fixture_upstream_bin, via, url=url, protocol="2025-11-25") as c:
        with anyio.fail_after(OP_TIMEOUT):
            counts = [(await structured(c, "fx__increment"))["count"] for _ in range(3)]
            assert counts == [1, 2, 3]
            async with anyio.create_task_group() as tg:
                for _ in range(5):
                    tg.start_soon(structured, c, "fx__increment")
            assert (await structured(c, "fx__get_count")) == {"count": 8}
            assert await counter_resource(c) == "8"
            greeting = await c.get_prompt("fx__greet", {"name": "Bob"})
            assert content_text(greeting.messages[0].content) == "Hello, Bob!"
