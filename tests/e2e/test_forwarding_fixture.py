"""Server->client forwarding through wf, against the Rust fixture upstream
(`wf-fixture-upstream --asks`), which records in its `--events` journal what
came back for each request it sent its client (wf).

The upstream runs over stdio as wf's child: one shared session for every client
of that wf, and nothing in a stdio message relates a request to one of wf's
calls. Clients reach wf over `wf serve --http` (several at once) or stdio, in
legacy (2025-11-25) mode. wf speaks 2025-11-25 to the fixture (`protocol`), the
generation in which an upstream asks with requests mid-call.
"""

from __future__ import annotations

import json
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from pathlib import Path
from typing import Any

import anyio
import pytest
from mcp import Client

from conftest import HttpServer, UpstreamEvents, Wf, call_outcome, toml_config, wait_listed
from caller_support import ANSWER_NAME, ROOT_URI, SAMPLED, Answerer, overlapping_asks

pytestmark = pytest.mark.anyio

OP_TIMEOUT = 60
ASK = "fix__ask"


def serve(wf: Wf, fixture_upstream_bin: Path, events: UpstreamEvents, session: str = "shared") -> HttpServer:
    # "shared" unless a test says otherwise: these tests are about routing on
    # one upstream session (HTTP serving defaults to one session per client).
    settings = {"command": str(fixture_upstream_bin), "args": ["--asks", *events.args()], "session": session, "protocol": "2025-11-25"}
    config = wf.write_config(toml_config({"fix": settings}))
    return wf.start_http("127.0.0.1", None, "--config", str(config))


@asynccontextmanager
async def two_clients(wf: Wf, server: HttpServer, first: Answerer, second: Answerer) -> AsyncIterator[tuple[Client, Client]]:
    """Two legacy HTTP clients of `server`, answering with `first` and `second`,
    once the fixture's `ask` tool is listed to both."""
    async with (
        wf.http_client(server, "legacy", **first.callbacks()) as c1,
        wf.http_client(server, "legacy", **second.callbacks()) as c2,
    ):
        await wait_listed(c1, ASK)
        await wait_listed(c2, ASK)
        yield c1, c2


def asked(events: UpstreamEvents) -> list[dict[str, Any]]:
    return [e for e in events.read() if e.get("event") == "asked"]


async def test_each_request_kind_reaches_the_caller_and_its_answer_the_upstream(
    wf: Wf, fixture_upstream_bin: Path, upstream_events: UpstreamEvents
) -> None:
    a = Answerer()
    server = serve(wf, fixture_upstream_bin, upstream_events)
    async with wf.http_client(server, "legacy", **a.callbacks()) as c:
        await wait_listed(c, ASK)
        with anyio.fail_after(OP_TIMEOUT):
            await c.set_logging_level("debug")
            for kind in ("elicit", "url", "sample", "roots"):
                _, err = await call_outcome(c, ASK, {"kind": kind})
                assert err is None, err
            _, err = await call_outcome(c, "fix__log", {"level": "notice", "text": "fixture says hi"})
            assert err is None, err
            await a.wait_logs(1, timeout=OP_TIMEOUT)

    got = {e["kind"]: e for e in asked(upstream_events)}
    assert all(e["ok"] for e in got.values()), got
    assert got["elicit"]["answer"] == {"action": "accept", "content": {"name": ANSWER_NAME, "check": True}}
    assert got["url"]["answer"]["action"] == "accept"
    assert got["sample"]["answer"]["content"]["text"] == SAMPLED
    assert got["roots"]["answer"]["roots"][0]["uri"] == ROOT_URI
    assert [e.message for e in a.elicitations] == ["fixture asks your name", "open this"]
    assert [(m.level, m.logger, m.data) for m in a.logs] == [("notice", "fix/fixture", "fixture says hi")]


async def test_a_client_without_the_capability_makes_the_upstream_see_an_error(
    wf: Wf, fixture_upstream_bin: Path, upstream_events: UpstreamEvents
) -> None:
    """No fabricated `decline`: the upstream gets method-not-found, as from a direct client."""
    a = Answerer()
    server = serve(wf, fixture_upstream_bin, upstream_events)
    async with wf.http_client(server, "legacy", **a.callbacks(elicit=False, roots=False)) as c:
        await wait_listed(c, ASK)
        with anyio.fail_after(OP_TIMEOUT):
            for kind in ("elicit", "roots"):
                _, err = await call_outcome(c, ASK, {"kind": kind})
                assert err is None, err
    got = {e["kind"]: e for e in asked(upstream_events)}
    for kind in ("elicit", "roots"):
        assert got[kind]["ok"] is False, got
        assert got[kind]["error"]["code"] == -32601, got
    assert "elicitation" in got["elicit"]["error"]["message"]
    assert a.elicitations == [] and a.roots_asked == 0


async def test_two_clients_on_one_shared_session_each_get_their_own_request(
    wf: Wf, fixture_upstream_bin: Path, upstream_events: UpstreamEvents
) -> None:
    """Calls that do not overlap: each client is asked exactly once, for its own call."""
    first, second = Answerer(), Answerer()
    server = serve(wf, fixture_upstream_bin, upstream_events)
    async with two_clients(wf, server, first, second) as (c1, c2):
        with anyio.fail_after(OP_TIMEOUT):
            _, err = await call_outcome(c1, ASK, {"kind": "elicit"})
            assert err is None, err
            _, err = await call_outcome(c2, ASK, {"kind": "sample"})
            assert err is None, err
    assert len(first.elicitations) == 1 and first.samplings == []
    assert len(second.samplings) == 1 and second.elicitations == []
    # One upstream process served both: the session was shared.
    assert len({e["pid"] for e in asked(upstream_events)}) == 1
    assert all(e["ok"] for e in asked(upstream_events))


async def test_overlapping_calls_on_a_shared_session_make_the_upstream_see_an_error(
    wf: Wf, fixture_upstream_bin: Path, upstream_events: UpstreamEvents, tmp_path: Path
) -> None:
    """Two calls in flight on one stdio session and nothing says whose the request is:
    no client sees it, the upstream gets an error, wf's log says why."""
    first, second = Answerer(), Answerer()
    gate, release = tmp_path / "ask-now", tmp_path / "slow-done"
    server = serve(wf, fixture_upstream_bin, upstream_events)
    async with two_clients(wf, server, first, second) as (c1, c2):
        results: dict[str, Any] = {}

        async def run(name: str, c: Client, tool: str, args: dict[str, Any]) -> None:
            results[name] = await call_outcome(c, tool, args)

        with anyio.fail_after(OP_TIMEOUT):
            async with anyio.create_task_group() as tg:
                tg.start_soon(run, "ask", c1, ASK, {"kind": "elicit", "until": str(gate)})
                tg.start_soon(run, "slow", c2, "fix__slow", {"ms": 600000, "until": str(release)})
                # Both calls are in flight upstream before the upstream asks.
                await upstream_events.wait_for(event="call", tool="ask")
                await upstream_events.wait_for(event="call", tool="slow")
                gate.touch()
                await upstream_events.wait_for(event="asked", kind="elicit")
                release.touch()
    (_, err) = results["ask"]
    assert err is None, err
    [event] = asked(upstream_events)
    assert event["ok"] is False, event
    assert "2 calls are in flight" in event["error"]["message"], event
    assert first.elicitations == [] and second.elicitations == []
    assert "2 calls are in flight on this shared upstream session" in server.log.read_text()


async def test_overlapping_calls_with_per_client_sessions_each_get_their_own_request(
    wf: Wf, fixture_upstream_bin: Path, upstream_events: UpstreamEvents, tmp_path: Path
) -> None:
    """`session = "client"`: each client has its own upstream session, so calls in
    flight at once are never ambiguous: each client gets its own request."""
    first, second = Answerer(), Answerer()
    gate = tmp_path / "ask-now"
    server = serve(wf, fixture_upstream_bin, upstream_events, session="client")
    async with two_clients(wf, server, first, second) as (c1, c2):
        # Both calls are in flight (one per upstream process) before either asks.
        results = await overlapping_asks(c1, c2, ASK, upstream_events, gate, OP_TIMEOUT)
    assert results["first"][1] is None and results["second"][1] is None, results
    assert len(first.elicitations) == 1 and first.samplings == []
    assert len(second.samplings) == 1 and second.elicitations == []
    events = asked(upstream_events)
    assert len(events) == 2 and all(e["ok"] for e in events), events
    assert len({e["pid"] for e in events}) == 2, "each client has its own upstream process"


async def test_stdio_client_is_asked_too(wf: Wf, fixture_upstream_bin: Path, upstream_events: UpstreamEvents) -> None:
    a = Answerer()
    settings = {"command": str(fixture_upstream_bin), "args": ["--asks", *upstream_events.args()], "protocol": "2025-11-25"}
    config = wf.write_config(toml_config({"fix": settings}))
    async with wf.stdio_client("legacy", "--config", str(config), **a.callbacks()) as c:
        await wait_listed(c, ASK)
        with anyio.fail_after(OP_TIMEOUT):
            _, err = await call_outcome(c, ASK, {"kind": "elicit"})
            assert err is None, err
    [event] = asked(upstream_events)
    assert event["ok"] and event["answer"]["content"]["name"] == ANSWER_NAME, event


def test_a_workflow_node_cannot_ask_and_the_error_names_it(
    wf: Wf, fixture_upstream_bin: Path, upstream_events: UpstreamEvents
) -> None:
    """Workflow runs have no human in the loop: the upstream's request fails with an error
    naming the node (the fixture hands that error back as its result)."""
    settings = {"command": str(fixture_upstream_bin), "args": ["--asks", *upstream_events.args()], "protocol": "2025-11-25"}
    config = wf.write_config(toml_config({"fix": settings}))
    doc = {
        "name": "asks",
        "nodes": [{"id": "confirm-step", "use": "fix.ask", "args": {"kind": "elicit"}}],
        "outputs": {"got": {"$ref": "nodes.confirm-step.output"}},
    }
    path = wf.root / "asks.json"
    path.write_text(json.dumps(doc))
    proc = wf.run("run", str(path), "--config", str(config), *wf.plugin_args(), "--log-level", "error")
    assert proc.returncode == 0, proc.stderr
    [event] = asked(upstream_events)
    assert event["ok"] is False and event["error"]["code"] == -32601, event
    assert 'workflow node "confirm-step" asked for input' in event["error"]["message"], event
    out = json.loads(proc.stdout)["outputs"]["got"]
    assert 'workflow node "confirm-step"' in out["error"]["message"], out
