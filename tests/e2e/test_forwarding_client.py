"""Client→server requests through wf (issue #9): `completion/complete` and
resource subscriptions are routed to the source that owns the prompt or URI,
`ping` is answered, the capabilities wf declares match what it serves, names
can go without prefixes, and a 2025-11-25 client's HTTP `DELETE` is answered
as clients expect and ends its subscriptions.

The upstream is the Rust fixture (tests/upstream-fixture): its `greet` prompt
completes `name`, and `fixture://counter` is subscribable (`increment` sends
`notifications/resources/updated` for it). Its `--events` journal shows from
outside what reached it (`subscribe` / `unsubscribe`)."""

from __future__ import annotations

import logging
from pathlib import Path

import anyio
import mcp.types as types
import pytest

from conftest import UpstreamEvents, Wf, all_tools, call_outcome
from forwarding_support import OP_TIMEOUT, Updates, fixture_source, write_config

pytestmark = pytest.mark.anyio

FRONTS = [("stdio", "legacy"), ("stdio", "auto"), ("http", "legacy"), ("http", "auto")]
COUNTER = "fixture://counter"


def client_of(wf: Wf, transport: str, mode: str, config: Path, **kw: object):
    if transport == "stdio":
        return wf.stdio_client(mode, "--config", str(config), **kw)
    return wf.http_client(wf.start_http("127.0.0.1", None, "--config", str(config)), mode, **kw)


async def tool_names(c) -> set[str]:
    return {t.name for t in await all_tools(c)}


@pytest.mark.parametrize(("transport", "mode"), FRONTS, ids=[f"{t}-{m}" for t, m in FRONTS])
async def test_completion_reaches_the_owning_source_under_its_own_name(
    wf: Wf, fixture_upstream_bin: Path, transport: str, mode: str
) -> None:
    config = write_config(wf, {"fx": fixture_source(fixture_upstream_bin)})
    async with client_of(wf, transport, mode, config) as c:
        caps = c.server_capabilities
        assert caps.completions is not None, caps
        assert caps.resources is not None and caps.resources.subscribe is True, caps
        with anyio.fail_after(OP_TIMEOUT):
            prompts = {p.name for p in (await c.list_prompts()).prompts}
            assert "fx__greet" in prompts, sorted(prompts)
            # The client names the prompt `fx__greet`; the upstream knows it as `greet`
            # (it answers nothing for any other name).
            r = await c.complete(types.PromptReference(type="ref/prompt", name="fx__greet"), {"name": "name", "value": "al"})
            assert r.completion.values == ["alice", "albert"], r
            r = await c.complete(types.PromptReference(type="ref/prompt", name="fx__greet"), {"name": "name", "value": "b"})
            assert r.completion.values == ["bob"], r
            # wf.std's prompts have no completions: no suggestions, not an error.
            std = next(p for p in prompts if p.startswith("wf_std__"))
            r = await c.complete(types.PromptReference(type="ref/prompt", name=std), {"name": "x", "value": ""})
            assert r.completion.values == [], r
            with pytest.raises(Exception, match="no prompt or resource template"):
                await c.complete(types.PromptReference(type="ref/prompt", name="nope__nothing"), {"name": "x", "value": ""})


@pytest.mark.parametrize("transport", ["stdio", "http"])
async def test_ping_is_answered(wf: Wf, transport: str) -> None:
    # `ping` is a 2025-11-25 request (2026-07-28 has no ping; rmcp answers it
    # "method not found" there, as the revision says).
    mode = "legacy"
    config = write_config(wf, {})
    async with client_of(wf, transport, mode, config) as c:
        with anyio.fail_after(OP_TIMEOUT):
            await c.send_ping()
            # And wf is still serving afterwards.
            assert "wf_std__const" in await tool_names(c)


@pytest.mark.filterwarnings("ignore::mcp.shared.exceptions.MCPDeprecationWarning")
async def test_updates_reach_only_subscribed_clients_and_end_with_them(
    wf: Wf, fixture_upstream_bin: Path, upstream_events: UpstreamEvents, caplog: pytest.LogCaptureFixture
) -> None:
    caplog.set_level(logging.DEBUG)
    # On the source's shared session (per-client sessions: test_forwarding_sessions.py).
    config = write_config(wf, {"fx": fixture_source(fixture_upstream_bin, *upstream_events.args(), session="shared")})
    server = wf.start_http("127.0.0.1", None, "--config", str(config))
    a, b = Updates(), Updates()
    journal = lambda event: [e for e in upstream_events.read() if e.get("event") == event]  # noqa: E731
    async with (
        wf.http_client(server, "legacy", message_handler=a.handler) as ca,
        wf.http_client(server, "legacy", message_handler=b.handler) as cb,
    ):
        with anyio.fail_after(OP_TIMEOUT):
            assert "fx__increment" in await tool_names(ca)
            await ca.subscribe_resource(COUNTER)
        await upstream_events.wait_for(event="subscribe", uri=COUNTER)
        # B changes the counter; only A (subscribed) is told.
        with anyio.fail_after(OP_TIMEOUT):
            assert not (await cb.call_tool("fx__increment", {})).is_error
        await a.wait_count(1)
        assert a.uris == [COUNTER]
        # B subscribes too: the upstream is not asked again (one upstream subscription).
        with anyio.fail_after(OP_TIMEOUT):
            await cb.subscribe_resource(COUNTER)
            await ca.unsubscribe_resource(COUNTER)
            # A round trip on B after A's unsubscribe: B's subscription still holds upstream.
            assert not (await ca.call_tool("fx__increment", {})).is_error
        await b.wait_count(1)
        assert b.uris == [COUNTER], "B's first update is the increment after it subscribed"
        assert a.uris == [COUNTER], "A unsubscribed: no update after that"
        assert len(journal("subscribe")) == 1 and journal("unsubscribe") == [], upstream_events.read()
    # Both clients closed their sessions (DELETE): the last subscription ended
    # upstream, and the official client saw its DELETE answered as expected.
    await upstream_events.wait_for(event="unsubscribe", uri=COUNTER)
    failures = [r.getMessage() for r in caplog.records if "Session termination failed" in r.getMessage()]
    assert failures == [], failures


@pytest.mark.filterwarnings("ignore::mcp.shared.exceptions.MCPDeprecationWarning")
async def test_a_client_that_goes_away_ends_its_subscription_upstream(
    wf: Wf, fixture_upstream_bin: Path, upstream_events: UpstreamEvents
) -> None:
    # On the source's shared session (per-client sessions: test_forwarding_sessions.py).
    config = write_config(wf, {"fx": fixture_source(fixture_upstream_bin, *upstream_events.args(), session="shared")})
    server = wf.start_http("127.0.0.1", None, "--config", str(config))
    async with wf.http_client(server, "legacy") as c:
        with anyio.fail_after(OP_TIMEOUT):
            assert "fx__increment" in await tool_names(c)
            await c.subscribe_resource(COUNTER)
        await upstream_events.wait_for(event="subscribe", uri=COUNTER)
        assert [e for e in upstream_events.read() if e.get("event") == "unsubscribe"] == []
    await upstream_events.wait_for(event="unsubscribe", uri=COUNTER)


async def test_listen_resource_subscriptions_2026(
    wf: Wf, fixture_upstream_bin: Path, upstream_events: UpstreamEvents
) -> None:
    # On the source's shared session (per-client sessions: test_forwarding_sessions.py).
    config = write_config(wf, {"fx": fixture_source(fixture_upstream_bin, *upstream_events.args(), session="shared")})
    async with wf.stdio_client("auto", "--config", str(config)) as c:
        assert c.protocol_version == "2026-07-28", c.protocol_version
        with anyio.fail_after(OP_TIMEOUT):
            assert "fx__increment" in await tool_names(c)
        async with c.listen(resource_subscriptions=[COUNTER]) as sub:
            assert list(sub.honored.resource_subscriptions or []) == [COUNTER], sub.honored
            await upstream_events.wait_for(event="subscribe", uri=COUNTER)
            with anyio.fail_after(OP_TIMEOUT):
                assert not (await c.call_tool("fx__increment", {})).is_error
                event = await sub.__anext__()
            assert getattr(event, "uri", None) == COUNTER, event
        # The stream ended: so did its subscription upstream.
        await upstream_events.wait_for(event="unsubscribe", uri=COUNTER)


async def test_empty_prefix_shows_upstream_names_and_resolves_collisions(wf: Wf, fixture_upstream_bin: Path) -> None:
    config = write_config(
        wf,
        {
            "fx": fixture_source(fixture_upstream_bin, prefix=""),
            "fy": fixture_source(fixture_upstream_bin, prefix=""),
        },
    )
    async with wf.stdio_client("legacy", "--config", str(config)) as c:
        with anyio.fail_after(60):
            names = await tool_names(c)
            while "increment" not in names or not any(n.startswith("increment_") for n in names):
                await anyio.sleep(0.1)
                names = await tool_names(c)
        # fx (first in name order) keeps the plain name; fy's gets a stable hash.
        hashed = sorted(n for n in names if n.startswith("increment_"))
        assert len(hashed) == 1 and "fx__increment" not in names, sorted(names)
        with anyio.fail_after(OP_TIMEOUT):
            first = await c.call_tool("increment", {})
            other = await c.call_tool(hashed[0], {"by": 10})
        # Two upstream processes: each counter is its own.
        assert first.structured_content == {"count": 1}, first
        assert other.structured_content == {"count": 10}, other
        status, error = await call_outcome(c, "wf_admin__status")
        assert error is None, error
        collisions = status.structured_content["name_collisions"]
        assert any("fy.increment" in x and hashed[0] in x for x in collisions), collisions


async def test_on_collision_prefixes_only_shared_names(wf: Wf, fixture_upstream_bin: Path) -> None:
    # One upstream: its names (and wf's own) as they are.
    config = write_config(wf, {"fx": fixture_source(fixture_upstream_bin)}, server={"prefix": "on_collision"})
    async with wf.stdio_client("legacy", "--config", str(config)) as c:
        with anyio.fail_after(60):
            names = await tool_names(c)
            while "increment" not in names:
                await anyio.sleep(0.1)
                names = await tool_names(c)
        assert "fx__increment" not in names and "wf_admin__status" not in names, sorted(names)
        with anyio.fail_after(OP_TIMEOUT):
            r = await c.call_tool("increment", {})
        assert r.structured_content == {"count": 1}, r
    # Two upstreams with the same tools: those names carry prefixes again, and it is reported.
    config = write_config(
        wf,
        {"fx": fixture_source(fixture_upstream_bin), "fy": fixture_source(fixture_upstream_bin)},
        server={"prefix": "on_collision"},
    )
    async with wf.stdio_client("legacy", "--config", str(config)) as c:
        with anyio.fail_after(60):
            names = await tool_names(c)
            while not {"fx__increment", "fy__increment"} <= names:
                await anyio.sleep(0.1)
                names = await tool_names(c)
        assert "increment" not in names, sorted(names)
        status_tool = "status" if "status" in names else "wf_admin__status"
        status, error = await call_outcome(c, status_tool)
        assert error is None, error
        assert any('"increment" (served by fx, fy)' in x for x in status.structured_content["name_collisions"])


@pytest.mark.filterwarnings("ignore::mcp.shared.exceptions.MCPDeprecationWarning")
async def test_server_everything_completions_and_subscriptions(wf: Wf, everything_bin: Path) -> None:
    """Against the real server-everything: its completable prompt completes through wf
    (the context argument reaches it too), and a resource subscribed through wf gets
    its simulated updates (the upstream sends them every 5 s once toggled on)."""
    config = write_config(wf, {"everything": {"command": str(everything_bin)}})
    updates = Updates()
    async with wf.stdio_client("legacy", "--config", str(config), message_handler=updates.handler) as c:
        with anyio.fail_after(60):
            names = await tool_names(c)
            while "everything__toggle-subscriber-updates" not in names:
                await anyio.sleep(0.2)
                names = await tool_names(c)
        prompt = types.PromptReference(type="ref/prompt", name="everything__completable-prompt")
        with anyio.fail_after(OP_TIMEOUT):
            r = await c.complete(prompt, {"name": "department", "value": "E"})
            assert r.completion.values == ["Engineering"], r
            r = await c.complete(prompt, {"name": "name", "value": ""}, context_arguments={"department": "Sales"})
            assert r.completion.values == ["David", "Eve", "Frank"], r
            uri = (await c.list_resources()).resources[0].uri
            await c.subscribe_resource(str(uri))
            toggled = await c.call_tool("everything__toggle-subscriber-updates", {})
            assert not toggled.is_error, toggled
        await updates.wait_count(1, timeout=60)
        assert set(updates.uris) == {str(uri)}, updates.uris
