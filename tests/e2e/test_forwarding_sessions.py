"""Session-bound forwarding through wf (issue #9) for sources whose clients each
get their own upstream session (`session = "client"`, docs/operator-manual.md
"Session scopes"): resource subscriptions are made on the subscribing client's
own upstream session and its updates reach that client only; a client's
`notifications/roots/list_changed` reaches the upstream sessions acting for it.

The upstream is the Rust fixture (tests/upstream-fixture) over stdio (and, for a
roots change, server-everything, an independent 2025-11-25 upstream), one
process per upstream session: every line of its `--events` journal carries the
`pid` of the session that wrote it, so a test sees from outside which session
got what."""

from __future__ import annotations

import contextlib
from pathlib import Path
from typing import Any

import anyio
import mcp.types as types
import pytest

from conftest import UpstreamEvents, Wf, call_outcome, toml_config, wait_listed
from forwarding_support import OP_TIMEOUT, Updates, fixture_source, write_config

pytestmark = [pytest.mark.anyio, pytest.mark.filterwarnings("ignore::mcp.shared.exceptions.MCPDeprecationWarning")]

COUNTER = "fixture://counter"


def journal(events: UpstreamEvents, event: str) -> list[dict[str, Any]]:
    return [e for e in events.read() if e.get("event") == event]


async def count_of(c: Any, tool: str) -> int:
    result, err = await call_outcome(c, tool, {})
    assert err is None, err
    return int(result.structured_content["count"])


async def test_subscriptions_follow_each_clients_own_upstream_session(
    wf: Wf, fixture_upstream_bin: Path, upstream_events: UpstreamEvents
) -> None:
    """Two HTTP clients of a `session = "client"` source both subscribe to the
    counter: each subscription is made on that client's upstream session, and a
    change in A's session reaches A only (and B's only B)."""
    config = write_config(wf, {"fx": fixture_source(fixture_upstream_bin, *upstream_events.args(), session="client")})
    server = wf.start_http("127.0.0.1", None, "--config", str(config))
    a, b = Updates(), Updates()
    async with (
        wf.http_client(server, "legacy", message_handler=a.handler) as ca,
        wf.http_client(server, "legacy", message_handler=b.handler) as cb,
    ):
        await wait_listed(ca, "fx__increment")
        with anyio.fail_after(OP_TIMEOUT):
            await ca.subscribe_resource(COUNTER)
            await cb.subscribe_resource(COUNTER)
            # Separate sessions: each client's counter starts at 0.
            assert await count_of(ca, "fx__get_count") == 0
            assert await count_of(cb, "fx__get_count") == 0
        subs = journal(upstream_events, "subscribe")
        assert len(subs) == 2 and subs[0]["pid"] != subs[1]["pid"], subs

        with anyio.fail_after(OP_TIMEOUT):
            assert await count_of(ca, "fx__increment") == 1
        await a.wait_count(1)
        with anyio.fail_after(OP_TIMEOUT):
            assert await count_of(cb, "fx__increment") == 1
        await b.wait_count(1)
        with anyio.fail_after(OP_TIMEOUT):
            assert await count_of(ca, "fx__increment") == 2
        await a.wait_count(2)
        # A heard its own two changes and not B's; B only its own.
        assert a.uris == [COUNTER, COUNTER], a.uris
        assert b.uris == [COUNTER], b.uris

    # A's and B's sessions ended with them; a new client subscribes on a fresh one.
    c_updates = Updates()
    async with wf.http_client(server, "legacy", message_handler=c_updates.handler) as cc:
        with anyio.fail_after(OP_TIMEOUT):
            await cc.subscribe_resource(COUNTER)
            assert await count_of(cc, "fx__increment") == 1
        await c_updates.wait_count(1)
    assert a.uris == [COUNTER, COUNTER] and b.uris == [COUNTER]


class Roots:
    """A client's roots, which the test changes."""

    def __init__(self, uri: str) -> None:
        self.uri = uri

    async def callback(self, _ctx: Any) -> types.ListRootsResult:
        return types.ListRootsResult(roots=[types.Root(uri=self.uri, name="root")])  # type: ignore[arg-type]


async def ask_roots(c: Any, tool: str, events: UpstreamEvents) -> dict[str, Any]:
    """Makes the fixture ask the client for roots; returns the upstream's `asked` record."""
    before = len(journal(events, "asked"))
    with anyio.fail_after(OP_TIMEOUT):
        _, err = await call_outcome(c, tool, {"kind": "roots"})
    assert err is None, err
    got = journal(events, "asked")
    assert len(got) == before + 1 and got[-1]["ok"], got
    return got[-1]


@pytest.mark.parametrize("scope", ["shared", "client"])
async def test_a_roots_change_reaches_the_sessions_acting_for_the_client(
    wf: Wf, fixture_upstream_bin: Path, upstream_events: UpstreamEvents, scope: str
) -> None:
    """The client changes its roots and says so: the upstream session that asked it
    for roots records `notifications/roots/list_changed` and its next `roots/list`
    gets the new roots. Another client's session (`client` scope over HTTP) and a
    shared source that never asked (`shared` scope over stdio) are not told."""
    settings = {"session": scope}
    sources = {"fx": fixture_source(fixture_upstream_bin, "--asks", *upstream_events.args(), **settings)}
    if scope == "shared":
        sources["fy"] = fixture_source(fixture_upstream_bin, "--asks", *upstream_events.args(), **settings)
    config = write_config(wf, sources)
    mine, other = Roots("file:///tmp/wf-roots-a1"), Roots("file:///tmp/wf-roots-b")
    if scope == "shared":
        client = wf.stdio_client("legacy", "--config", str(config), list_roots_callback=mine.callback)
    else:
        server = wf.start_http("127.0.0.1", None, "--config", str(config))
        client = wf.http_client(server, "legacy", list_roots_callback=mine.callback)
    async with client as c, contextlib.AsyncExitStack() as stack:
        await wait_listed(c, "fx__ask")
        first = await ask_roots(c, "fx__ask", upstream_events)
        assert first["answer"]["roots"][0]["uri"] == mine.uri, first
        bystanders: set[int] = set()
        if scope == "shared":
            # fy's shared session asks this client something else (it has no
            # elicitation callback: the upstream records the refusal, and its pid).
            await wait_listed(c, "fy__ask")
            with anyio.fail_after(OP_TIMEOUT):
                await call_outcome(c, "fy__ask", {"kind": "elicit"})
            bystanders = {e["pid"] for e in journal(upstream_events, "asked") if e["kind"] == "elicit"}
        else:
            co = await stack.enter_async_context(wf.http_client(server, "legacy", list_roots_callback=other.callback))
            theirs = await ask_roots(co, "fx__ask", upstream_events)
            assert theirs["pid"] != first["pid"], (first, theirs)
            bystanders = {theirs["pid"]}

        mine.uri = "file:///tmp/wf-roots-a2"
        with anyio.fail_after(OP_TIMEOUT):
            await c.send_roots_list_changed()
        await upstream_events.wait_for(event="roots_list_changed", pid=first["pid"])
        again = await ask_roots(c, "fx__ask", upstream_events)
        assert again["pid"] == first["pid"] and again["answer"]["roots"][0]["uri"] == mine.uri, again
    told = {e["pid"] for e in journal(upstream_events, "roots_list_changed")}
    assert told == {first["pid"]}, (told, bystanders)
    assert bystanders and not (bystanders & told), bystanders


async def test_a_2026_upstream_refuses_resource_subscriptions_with_a_clear_error(
    wf: Wf, fixture_upstream_bin: Path, upstream_events: UpstreamEvents
) -> None:
    """wf talks to a `protocol = "2026-07-28"` upstream statelessly and subscribes on a
    `subscriptions/listen` stream there; the fixture serves none, so a subscribe fails
    with the upstream's error instead of being silently dropped."""
    source = fixture_source(fixture_upstream_bin, *upstream_events.args(), session="shared", protocol="2026-07-28")
    config = write_config(wf, {"fx": source})
    async with wf.stdio_client("legacy", "--config", str(config)) as c:
        await wait_listed(c, "fx__increment")
        with anyio.fail_after(OP_TIMEOUT), pytest.raises(Exception) as refused:
            await c.subscribe_resource(COUNTER)
        # The upstream's own answer, naming the source: `-32601: subscriptions/listen`.
        assert 'source "fx"' in str(refused.value) and "-32601" in str(refused.value), refused.value
        # wf is still serving.
        with anyio.fail_after(OP_TIMEOUT):
            assert await count_of(c, "fx__get_count") == 0


async def roots_listed(c: Any, tool: str, uri: str) -> None:
    """Calls `tool` (server-everything's `get-roots-list`, which lists the roots it
    holds for the session) until its text names `uri`."""
    with anyio.fail_after(OP_TIMEOUT):
        while True:
            result, err = await call_outcome(c, tool, {})
            assert err is None, err
            if uri in str(result.content):
                return
            await anyio.sleep(0.05)


async def test_a_roots_change_reaches_server_everything(wf: Wf, everything_bin: Path) -> None:
    """An independent 2025-11-25 upstream (server-everything, wf's stdio child, shared
    session): it asks the client for roots during `get-roots-list`; the client
    changes its roots and says so, and server-everything, told through wf (which
    wf's log shows: `roots list change forwarded`), asks again outside any call and
    lists the new roots: wf asked the client for them with the notification and
    answers that `roots/list` with them."""
    mine = Roots("file:///tmp/wf-roots-e1")
    config = wf.write_config(toml_config({"everything": {"command": str(everything_bin)}}))
    async with wf.stdio_client("legacy", "--config", str(config), list_roots_callback=mine.callback) as c:
        await wait_listed(c, "everything__get-roots-list")
        await roots_listed(c, "everything__get-roots-list", mine.uri)
        mine.uri = "file:///tmp/wf-roots-e2"
        with anyio.fail_after(OP_TIMEOUT):
            await c.send_roots_list_changed()
        await roots_listed(c, "everything__get-roots-list", mine.uri)
